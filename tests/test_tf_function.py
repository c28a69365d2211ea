"""``jitsim.cluster`` straight on a tf.function / ConcreteFunction (needs TF: marked `tf`).

Ground truth: the same functions run as a program under real TF with dumps
(tests/data/tf_functions.py). jitsim gets the pass input by calling the function once under
TF in a fresh process, compiling nothing (jitsim.frontend.capture), and must give TF's
partition; with ``tf="never"`` it simulates TF's rewrites itself (approximate).
"""

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf

DATA = Path(__file__).parent / "data"


@pytest.fixture(scope="module")
def harvested(tmp_path_factory):
    from jitsim.graph.dumps import group_dumps
    from jitsim.tfprocess.harvest import harvest
    from jitsim.graph.io import load

    out = tmp_path_factory.mktemp("tf_functions") / "h"
    harvest(DATA / "tf_functions.py", out)
    d = out / "dumps"
    graphs = []
    for r in group_dumps(d, (out / "log.txt").read_text()):
        if "before_clone_constants_for_better_clustering" not in r.files:
            continue
        g = load(d / r.files["before_clone_constants_for_better_clustering"])
        mark = r.files.get("mark_for_compilation")
        labels = load(d / mark).clusters() if mark else {n.name: None for n in g}
        graphs.append(({n.name for n in g}, labels))
    return graphs


@pytest.fixture(scope="module")
def module():
    spec = importlib.util.spec_from_file_location("tf_functions", DATA / "tf_functions.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


def _partition(labels, names):
    groups = {}
    for n in names:
        if labels.get(n):
            groups.setdefault(labels[n], set()).add(n)
    return sorted(sorted(g) for g in groups.values())


def test_concrete_functions_cluster_like_tf(harvested, module):
    import jitsim

    seen = []
    for fn, spec in module.FUNCS:
        c = jitsim.cluster(fn.get_concrete_function(*spec))
        assert c.route.method == "tf-capture" and c.route.exact
        names = set(c.nodes)
        # TF's graph for this function: the dump sharing most node names
        tf_names, tf_labels = max(harvested, key=lambda t: len(t[0] & names) / len(t[0] | names))
        common = names & tf_names
        # same body: only cond lowering and constant clones may name nodes differently
        assert len(common) / len(names | tf_names) > 0.75, (fn.__name__, names ^ tf_names)
        assert _partition(c.labels(), common) == _partition(tf_labels, common), fn.__name__
        seen.append((fn.__name__, len(c.clusters)))
    # the functions exercise: a Grappler fusion XLA cannot compile (no cluster), a string
    # op splitting two clusters, resource variables, a tf.cond
    assert seen == [("dense", 0), ("strings", 2), ("with_var", 1), ("branchy", 1)]


def test_explain_on_a_tf_function(module):
    import jitsim

    fn, spec = module.FUNCS[0]
    c = jitsim.cluster(fn.get_concrete_function(*spec))
    fused = [n for n, r in c.nodes.items() if r.op == "_FusedMatMul"]
    assert fused, "Grappler's remapper fuses MatMul+BiasAdd+Relu on CPU"
    ex = c.explain(fused[0])
    assert ex.code == "UNSUPPORTED_OP" and ex.evidence["kernel"] is False and "remapper" in ex.evidence["origin"]
    # without TF, jitsim simulates the remapper's fusion itself (approximate route)
    raw = jitsim.cluster(fn.get_concrete_function(*spec), tf="never")
    assert raw.route.method == "no-tf" and not raw.route.exact
    assert [r.op for r in raw.nodes.values() if r.op.startswith("_Fused")] == ["_FusedMatMul"]


def test_tf_function_needing_arguments_gets_a_clear_error():
    """A tf.function without an input_signature that was never traced has no graph yet."""
    import tensorflow as tf

    import jitsim
    from jitsim.errors import JitsimError

    untraced = tf.function(lambda x: x * 2.0)
    with pytest.raises(JitsimError, match="get_concrete_function"):
        jitsim.cluster(untraced)
