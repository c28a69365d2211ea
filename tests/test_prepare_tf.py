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
        assert (r[route]["clusters"], r[route]["clustered"]) == (tf["clusters"], tf["clustered"]), route
        assert r[route]["agreement"] in (None, 1.0), route
