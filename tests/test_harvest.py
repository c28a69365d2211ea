"""Harvesting ground truth from real TensorFlow (needs TF: marked `tf`)."""

import json
import textwrap

import pytest

from jitsim.tfprocess.harvest import harvest
from jitsim.errors import HarvestError

pytestmark = pytest.mark.tf

PROGRAM = textwrap.dedent(
    """
    import tensorflow as tf
    @tf.function
    def f(x):
        return tf.nn.relu(x * 2.0 + 1.0) - 3.0
    @tf.function
    def s(x):
        return tf.strings.length(tf.strings.join([tf.strings.upper(x), x]))
    f(tf.ones([3])); s(tf.constant(["a", "bb"])); f(tf.ones([4, 2]))
    """
)


def test_program_harvest_indexes_each_graph(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    idx = harvest(prog, tmp_path / "out")
    assert idx["tf_version"].startswith("2.21")
    assert json.loads((tmp_path / "out" / "index.json").read_text()) == idx
    graphs = [g for g in idx["graphs"] if g["nodes"] > 4]  # skip eager single-op graphs
    # f is traced twice (two shapes), s once; only f has candidates: a 4-op cluster
    # {mul, add, Relu, sub} plus its 3 constants
    assert [sorted(g["clusters"].values()) for g in graphs] == [[7], [], [7]]
    assert all(g["mark_pass_us"] > 0 for g in graphs)
    # the string graph has no mark dumps, yet later graphs are paired correctly
    assert "mark_for_compilation" not in graphs[1]["files"]


def test_graphdef_harvest_feeds_placeholders(tmp_path):
    from jitsim.graph import Graph, save

    g = Graph.from_nodes([
        ("x", "Placeholder", [], {}),
        ("a", "Relu", ["x"]), ("b", "Mul", ["a", "x"]), ("c", "AddV2", ["b", "x"]), ("d", "Sub", ["c", "a"]),
    ])
    # binary ops on purpose: a chain of unary ops is fused by Grappler into one
    # _UnaryOpsComposition node before clustering sees it
    for n in g:
        n.attr["dtype" if n.op == "Placeholder" else "T"].type = 1  # DT_FLOAT
    save(g, tmp_path / "g.pb")
    idx = harvest(tmp_path / "g.pb", tmp_path / "out")
    assert [sorted(x["clusters"].values()) for x in idx["graphs"]] == [[4]]


def test_failed_program_leaves_no_output(tmp_path):
    prog = tmp_path / "bad.py"
    prog.write_text("import tensorflow as tf\nraise ValueError('boom in user program')\n")
    with pytest.raises(HarvestError, match="exit 1.*boom in user program"):
        harvest(prog, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.py"]


def test_program_without_tf_graphs_is_one_clear_error(tmp_path):
    """A program that never runs a TF graph: TF writes no dump, and the error says why
    (not that some temporary dumps directory is empty)."""
    prog = tmp_path / "plain.py"
    prog.write_text("print(1 + 1)\n")
    with pytest.raises(HarvestError, match="wrote no graph dumps") as e:
        harvest(prog, tmp_path / "out")
    assert e.value.path == str(prog)
    assert not (tmp_path / "out").exists()


def _saved_model(tmp_path):
    import subprocess
    import sys

    code = textwrap.dedent(
        """
        import sys, tensorflow as tf
        class M(tf.Module):
            @tf.function(input_signature=[tf.TensorSpec([None, 4], tf.float32)])
            def __call__(self, x):
                return {"y": tf.nn.relu(tf.matmul(x, tf.ones([4, 3])) * 2.0 + 1.0) - 3.0}
        tf.saved_model.save(M(), sys.argv[1])
        """
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path / "sm")], check=True, capture_output=True)
    return tmp_path / "sm"


def test_saved_model_loads_without_tf_and_harvests(tmp_path):
    """A SavedModel signature resolves to its function graph (loaded by jitsim without TF:
    _Arg -> the call of the traced function -> _Retval), and harvesting calls that
    signature with generated inputs under real TF."""
    from jitsim.graph import load

    sm = _saved_model(tmp_path)
    g = load(sm)
    # a stateless body is called through PartitionedCall
    assert sorted(n.op for n in g) == ["Identity", "PartitionedCall", "_Arg", "_Retval"]
    call = next(n for n in g if n.op == "PartitionedCall")
    assert call.attr["f"].func.name in g.function_names()  # the library travels with the graph
    idx = harvest(sm, tmp_path / "out")
    # the traced body (MatMul, Mul, AddV2, Relu, Sub + constants) is one cluster
    assert any(sorted(gr["clusters"].values()) == [9] for gr in idx["graphs"]), idx["graphs"]


def test_relative_output_directory(tmp_path, monkeypatch):
    """TF runs in a scratch working directory, so a relative ``-o`` must still receive the
    dumps (it once produced an empty harvest)."""
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    monkeypatch.chdir(tmp_path)
    idx = harvest("prog.py", "rel_out")
    assert idx["totals"]["graphs_with_clusters"] == 2
    assert any((tmp_path / "rel_out" / "dumps").glob("mark_for_compilation*.pbtxt"))
