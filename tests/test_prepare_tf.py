"""prepare_without_tf on a real SavedModel against TF's own clusters (needs TF: marked `tf`).

A small Keras CNN with BatchNormalization (fixtures/models/build_models.py ``cnn_bn``) is
saved and its signature called under real TF with dumps. jitsim, from the SavedModel alone
and without TF, must find TF's clusters: same number, same clustered nodes (by TF's
post-inlining names), where the raw signature graph clusters nothing.
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf

ROOT = Path(__file__).resolve().parents[1]


def _built_and_harvested(name: str, tmp_path_factory) -> Path:
    """Model ``name`` of build_models.py, saved, and its signature call harvested under TF."""
    from jitsim.tfprocess.harvest import harvest

    out = tmp_path_factory.mktemp(name)
    env = {**os.environ, "JITSIM_BUILD_ONE": name, "PYTHONPATH": str(ROOT / "src")}
    subprocess.run([sys.executable, str(ROOT / "fixtures/models/build_models.py"), str(out)], check=True, env=env,
                   capture_output=True, timeout=300)
    harvest(out / name / "saved_model", out / name / "truth")
    return out / name


def _measure(model: Path) -> dict:
    """fixtures/models/measure_no_tf.py's row for one model directory."""
    sys.path.insert(0, str(ROOT / "fixtures/models"))
    try:
        from measure_no_tf import measure
    finally:
        sys.path.pop(0)
    return measure(model)


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return _built_and_harvested("cnn_bn", tmp_path_factory)


def test_saved_model_prediction_matches_tf(model):
    r = _measure(model)
    tf = r["tf"]
    assert tf["clusters"] >= 1
    raw, prepared = r["saved_model_raw"], r["saved_model_prepared"]
    assert raw["clusters"] == 0  # the signature's call is one opaque node
    assert prepared["clusters"] == tf["clusters"]
    assert prepared["clustered"] == tf["clustered"]
    assert prepared["agreement"] == 1.0
    # the GraphDef of the same function, exported from Python, gives the same partition
    assert r["graphdef_prepared"]["clusters"] == tf["clusters"]


def test_saved_model_prediction_has_tfs_node_names(model):
    """The whole partition, names included, is TF's: every node of TF's clustered graph is in
    jitsim's under the same name and in the same cluster. The names follow from TF's node
    order: the model pruner's rebuild, common-subgraph elimination keeping the first of equal
    nodes in Grappler's topological order (here the signature's ``NoOp`` against the
    inliner's ``output_control_node``, and the batch norms' equal constants), the clone
    numbering of the clustering passes."""
    sys.path.insert(0, str(ROOT / "fixtures/models"))
    try:
        import measure_no_tf as m
    finally:
        sys.path.pop(0)
    from jitsim.graph.io import load

    truth, _ = m.truth_labels(model)
    pred, _ = m.simulate(load(model / "saved_model", validate=False), prepared=True)
    assert set(pred) == set(truth)
    assert {n: c for n, c in pred.items()} == truth


# Grappler rewrites of issue 21 item 5, each shown by a tiny model of build_models.py: a Keras
# Conv1D (remapper's Conv2D + Squeeze + BiasAdd fusion: TF clusters nothing), ResNetV2-style
# residual adds (oneDNN's Conv2D + BiasAdd + Add [+ Relu] fusions), chains of unary ops
# (arithmetic optimizer's _UnaryOpsComposition).
GRAPPLER_MODELS = ("conv1d", "resadd", "unary")


@pytest.fixture(scope="module", params=GRAPPLER_MODELS)
def grappler_model(request, tmp_path_factory):
    return _built_and_harvested(request.param, tmp_path_factory)


def test_grappler_rewrite_models_match_tf(grappler_model):
    r = _measure(grappler_model)
    tf = r["tf"]
    # (the SavedModel route of `unary` keeps the signature's output Identity, which TF drops
    # there: one clustered node more; the GraphDef has none)
    routes = ("graphdef_prepared",) if r["model"] == "unary" else ("saved_model_prepared", "graphdef_prepared")
    for route in routes:
        # a GraphDef is compared on its function's body (measure_no_tf.body_only): TF's truth there
        want = r[route].get("tf_truth", tf)
        assert (r[route]["clusters"], r[route]["clustered"]) == (want["clusters"], want["clustered"]), route
        assert r[route]["agreement"] in (None, 1.0), route


def test_pow_by_constants_is_rewritten_as_tf_does(tmp_path_factory):
    """Grappler's ConvertPow stage (fixtures/models/build_models.py ``pow``): each tf.pow by a
    constant exponent, in TF's own dump of the signature call, has the op jitsim's TF-free route
    gives the node of the same name (Mul for a cube, Rsqrt, Sqrt, Reciprocal, Pow where the
    exponents differ; Mul for a division by a constant, by TF's new constant
    ``ConstantFolding/.../quarter_recip``), TF's new square of the cube (``.../ArithmeticOptimizer/
    ConvertPow__inner_cube``) is in jitsim's graph too, and the clusters are TF's."""
    from jitsim.frontend.prepare import prepare_without_tf
    from jitsim.graph.io import load, read_graphdef

    model = _built_and_harvested("pow", tmp_path_factory)
    r = _measure(model)
    # (as for `unary`: the SavedModel route keeps the signature's output Identity, which TF
    # drops there, one clustered node more; the GraphDef has none)
    want = r["graphdef_prepared"].get("tf_truth", r["tf"])  # on the function's body
    assert (r["graphdef_prepared"]["clusters"], r["graphdef_prepared"]["clustered"]) == \
        (want["clusters"], want["clustered"])
    assert r["saved_model_prepared"]["agreement"] == r["graphdef_prepared"]["agreement"] == 1.0
    truth_dir = Path(r["truth_dir"])
    import json as _json

    idx = _json.loads((truth_dir / "index.json").read_text())
    g = max((g for g in idx["graphs"] if "before_clone_constants_for_better_clustering" in g["files"]),
            key=lambda g: g["nodes"])
    tf_ops = {n.name: n.op for n in read_graphdef(truth_dir / "dumps" / g["files"]["before_clone_constants_for_better_clustering"]).node}
    ours = {n.name: n.op for n in prepare_without_tf(load(model / "saved_model", validate=False)).graph.graphdef.node}
    want = {"cube": "Mul", "rsqrt": "Rsqrt", "sqrt": "Sqrt", "recip": "Reciprocal", "mixed": "Pow", "quarter": "Mul"}
    for short, op in want.items():
        name = next(n for n in tf_ops if n.endswith("/" + short))
        assert tf_ops[name] == op, (name, tf_ops[name])  # what TF did (the case's premise)
        assert ours.get(name) == op, (name, ours.get(name))
    inner = next(n for n in tf_ops if n.endswith("ArithmeticOptimizer/ConvertPow__inner_cube"))
    assert ours.get(inner) == "Square"
    # h / 4 became h * (1/4), the reciprocal a new constant named by constant folding
    recip = next(n for n in tf_ops if n.endswith("/quarter_recip"))
    assert recip.startswith("ConstantFolding/") and tf_ops[recip] == "Const" and ours.get(recip) == "Const"
    # tf.pow(h, 2.0) became Square(h) too, the same node as the cube's square: TF's second
    # round of common-subgraph elimination kept the cube's, and so does jitsim
    assert not any(n.endswith("/square") for n in tf_ops) and not any(n.endswith("/square") for n in ours)
