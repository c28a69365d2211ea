"""TF1 session calls: ``--fetch``/``--feed``, MetaGraphDef files, and never "exact" for a guess.

Hand-derived cases (no TF) follow TF's ``subgraph::RewriteGraphForExecution`` as a
DirectSession runs it (docs/cli.md, "Session calls"): feeds become ``_arg_<node>_<port>_<i>``,
fetches ``_retval_<node>_<port>_<i>``, ``i`` in sorted name order, then everything the fetches
and targets do not need is pruned. The ``tf`` tests compare with real TF runs of the same call:
the XLA tutorial's MNIST step (``fixtures/tf1/mnist_softmax.py``) run by its own program, and an
exported tf.function GraphDef with a captured variable.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jitsim.cli import main
from jitsim.errors import GraphError, JitsimError
from jitsim.frontend.resolve import pass_inputs
from jitsim.frontend.session_call import (
    FUNCTION_OUTPUTS, GIVEN, SINKS, TRAIN_OP, parse_feed, session_call,
)
from jitsim.graph import Graph
from jitsim.registry import protos
from jitsim.graph.io import load, save
from jitsim.rewrites.subgraph_rewrite import rewrite_for_execution



def _type(t: int):
    return protos.AttrValue(type=t)


FLOAT, STRING, INT32, RESOURCE = _type(1), _type(7), _type(3), _type(20)
F = {"dtype": FLOAT}
T = {"T": FLOAT}


def _train_graph() -> Graph:
    """x, y placeholders; loss = f(x, w); a NoOp train step; an init op over the variable's
    assign; a Saver scope; bookkeeping sinks (is-initialized, a dangling Shape)."""
    g = Graph.from_nodes([
        ("x", "Placeholder", [], F),
        ("y", "Placeholder", [], F),
        ("w", "VarHandleOp", [], {"dtype": FLOAT, "shared_name": "w"}),
        ("w/Initializer/zeros", "Const", [], F),
        ("w/Assign", "AssignVariableOp", ["w", "w/Initializer/zeros"], {"dtype": FLOAT}),
        ("w/IsInitialized/VarIsInitializedOp", "VarIsInitializedOp", ["w"]),
        ("read", "ReadVariableOp", ["w"], {"dtype": FLOAT}),
        ("mul", "Mul", ["x", "read"], T),
        ("loss", "Sub", ["mul", "y"], T),
        ("grad_shape", "Shape", ["mul"], {"T": FLOAT, "out_type": INT32}),
        ("update", "AssignSubVariableOp", ["w", "loss"], {"dtype": FLOAT}),
        ("train_step", "NoOp", ["^update"]),
        ("init", "NoOp", ["^w/Assign"]),
        ("save/Const", "Const", [], {"dtype": STRING}),
        ("save/SaveV2", "Identity", ["save/Const"], {"T": STRING}),
        ("unused", "Relu", ["x"], T),
        ("z", "Relu", ["unused"], T),
    ])
    for n in g:  # shapes and values TF's importer wants
        if n.op in ("Placeholder", "VarHandleOp"):
            n.nodedef.attr["shape"].shape.unknown_rank = True
        if n.op == "Const":
            n.nodedef.attr["value"].tensor.dtype = n.nodedef.attr["dtype"].type
            n.nodedef.attr["value"].tensor.tensor_shape.SetInParent()
    return g


# -- the rewrite, hand-derived from subgraph.cc ------------------------------------------------

def test_feeds_and_fetches_become_args_and_retvals_in_sorted_order():
    g = _train_graph()
    out = rewrite_for_execution(g, feeds=["x:0", "y:0"], fetches=["loss:0"], targets=["train_step"])
    names = [n.name for n in out]
    # new nodes last: feeds first (index = position), then fetches; the rest keep file order
    assert names[-3:] == ["_arg_x_0_0", "_arg_y_0_1", "_retval_loss_0_0"]
    assert out["_arg_y_0_1"].nodedef.attr["index"].i == 1
    assert out["_retval_loss_0_0"].nodedef.input == ["loss"]
    # the placeholders are gone (nothing needs them once their tensors are fed), and so is
    # everything only the init op, the Saver and the unused branch needed
    for gone in ("x", "y", "init", "w/Assign", "save/SaveV2", "unused", "z", "grad_shape"):
        assert gone not in out
    assert list(out["mul"].nodedef.input) == ["_arg_x_0_0", "read"]
    assert out["_arg_x_0_0"].device == "/job:localhost/replica:0/task:0/device:CPU:0"


def test_a_fed_placeholders_control_edges_move_to_its_arg():
    g = Graph.from_nodes([("x", "Placeholder", [], F), ("c", "Const", ["^x"], F),
                          ("y", "Relu", ["c"], T)])
    out = rewrite_for_execution(g, feeds=["x:0"], fetches=["y:0"])
    assert list(out["c"].nodedef.input) == ["^_arg_x_0_0"]


def test_rewrite_errors_are_tfs():
    g = _train_graph()
    with pytest.raises(GraphError, match="both fed and fetched"):
        rewrite_for_execution(g, feeds=["loss:0"], fetches=["loss:0"])
    with pytest.raises(GraphError, match="at least one fetch or target"):
        rewrite_for_execution(g, feeds=["x:0"])
    with pytest.raises(GraphError, match="has 1 output"):
        rewrite_for_execution(g, fetches=["loss:3"])
    with pytest.raises(GraphError, match="no node 'nope'"):
        rewrite_for_execution(g, fetches=["nope:0"])


# -- choosing the call -----------------------------------------------------------------------

def test_names_read_as_sess_run_reads_strings():
    g = _train_graph()
    c = session_call(g, ["train_step", "loss:0"], ["x=100,784"])
    assert (c.fetches, c.targets, c.chosen_by, c.exact) == (("loss:0",), ("train_step",), GIVEN, True)
    # y is needed by loss and not named: fed anyway (sess.run would fail otherwise), and said
    assert c.feeds == ("x:0", "y:0") and c.added_feeds == ("y:0",)
    assert dict(c.shapes) == {"x:0": (100, 784)}
    assert parse_feed("x:1=?,3") == ("x:1", (-1, 3)) and parse_feed("s=") == ("s:0", ())
    with pytest.raises(JitsimError, match="no node 'nope'"):
        session_call(g, ["nope"])
    with pytest.raises(GraphError, match="has 1 output"):
        session_call(g, ["loss:1"])
    with pytest.raises(JitsimError, match="shape is comma-separated"):
        parse_feed("x=a,b")


def test_without_fetches_the_sinks_rule_is_assumed_and_not_exact():
    c = session_call(_train_graph())
    assert c.chosen_by == SINKS and not c.exact
    # sinks: train_step (no outputs: a target) and z; not init, save/, VarIsInitializedOp, Shape
    assert c.targets == ("train_step",) and c.fetches == ("z:0",)


def test_a_metagraphs_train_op_collection_is_the_assumed_call(tmp_path):
    mg = protos.MetaGraphDef()
    mg.graph_def.CopyFrom(_train_graph().graphdef)
    mg.meta_info_def.meta_graph_version = "v1"
    mg.collection_def["train_op"].node_list.value.extend(["train_step", "train_step"])
    mg.collection_def["variables"].bytes_list.value.append(b"not a node name")
    for name, data in (("model.meta", mg.SerializeToString()), ("model.meta.pbtxt", str(mg).encode())):
        (tmp_path / name).write_bytes(data)
        g = load(tmp_path / name)
        assert g.collections == {"train_op": ["train_step"]}
        c = session_call(g)
        assert (c.targets, c.fetches, c.chosen_by, c.exact) == (("train_step",), (), TRAIN_OP, False)


def test_an_exported_function_is_called_with_its_outputs_and_a_variable():
    g = Graph.from_nodes([
        ("x", "Placeholder", [], F),
        ("v", "Placeholder", [], {"dtype": RESOURCE}),
        ("r", "ReadVariableOp", ["v"], {"dtype": FLOAT}),
        ("m", "Mul", ["x", "r"], T),
        ("Identity", "Identity", ["m"], T),
    ])
    c = session_call(g)
    assert (c.fetches, c.feeds, c.variables, c.chosen_by, c.exact) == (("Identity:0",), ("x:0",), ("v",),
                                                                       FUNCTION_OUTPUTS, True)


# -- routes and the CLI ------------------------------------------------------------------------

def test_the_tf_free_route_states_the_call_and_never_says_exact(tmp_path):
    path = tmp_path / "g.pbtxt"
    save(_train_graph(), path)
    pin = pass_inputs(path, flags="--tf_xla_auto_jit=2", tf="never")
    assert not pin.route.exact and "assumed: every sink" in pin.route.line and "--fetch" in pin.route.line
    pin = pass_inputs(path, flags="--tf_xla_auto_jit=2", tf="never", fetch=["loss:0"])
    assert "(given)" in pin.route.line and not pin.route.exact
    assert pin.route.to_dict()["call"]["fetches"] == ["loss:0"]
    assert [n.name for n in pin.main_graph if n.op in ("_Arg", "_Retval")] == ["_arg_x_0_0", "_arg_y_0_1",
                                                                                "_retval_loss_0_0"]


def test_fetch_is_refused_where_there_is_no_session_call(tmp_path, capsys):
    fn = Graph.from_nodes([("a", "_Arg", [], {"T": FLOAT, "index": 0}), ("b", "Relu", ["a"], T),
                           ("r", "_Retval", ["b"], {"T": FLOAT, "index": 0})])
    save(fn, tmp_path / "fn.pbtxt")
    assert main(["cluster", str(tmp_path / "fn.pbtxt"), "--tf", "never", "--fetch", "b:0"]) == 2
    assert "function body" in capsys.readouterr().err
    (tmp_path / "sm").mkdir()
    (tmp_path / "sm" / "saved_model.pb").write_bytes(b"")
    assert main(["cluster", str(tmp_path / "sm"), "--fetch", "b:0"]) == 2
    assert "apply to a GraphDef or MetaGraphDef" in capsys.readouterr().err


def test_cli_json_carries_the_call(tmp_path, capsys):
    path = tmp_path / "g.pbtxt"
    save(_train_graph(), path)
    assert main(["cluster", str(path), "--tf", "never", "--fetch", "train_step", "--feed", "x=4,2",
                 "--format", "json"]) == 0
    route = json.loads(capsys.readouterr().out)["route"]
    assert route["exact"] is False and route["method"] == "no-tf"
    assert route["call"] == {"fetches": [], "targets": ["train_step"], "feeds": ["x:0", "y:0"],
                             "feed_shapes": {"x:0": [4, 2]}, "variables": [], "chosen_by": "given", "exact": True}


# -- real TensorFlow ---------------------------------------------------------------------------

MNIST = Path(__file__).resolve().parents[1] / "fixtures" / "tf1" / "mnist_softmax.py"  # the XLA tutorial's step


@pytest.mark.tf
def test_tf1_session_graph_with_fetch_is_exact_and_matches_tf(tmp_path, tf_release):
    from jitsim.crosscheck.compare import compare_partitions
    from jitsim.graph.dumps import group_dumps
    from jitsim.tfprocess.harvest import DEFAULT_FLAGS, harvest_env
    from jitsim.crosscheck.scoring import labels_of_file
    from jitsim.options import options_for
    from jitsim.passes.mark_for_compilation import ProcessState
    from jitsim.passes.pipeline import cluster_graph

    # ground truth: the program's own sess.run(train_step), dumped by TF
    files, dumps = tmp_path / "files", tmp_path / "dumps"
    files.mkdir()
    dumps.mkdir()
    subprocess.run([sys.executable, str(MNIST), str(files)], check=True, env=harvest_env(dumps, DEFAULT_FLAGS),
                   capture_output=True)
    call = [g for g in group_dumps(dumps) if "mark_for_compilation" in g.files][-1]  # the step (the first: init)
    truth = labels_of_file(dumps / call.files["mark_for_compilation"])
    # TF's own answer for this program: 24 nodes under TF 2.21 (issue 21); 28 under 2.22, whose
    # remapper sees --tf_xla_cpu_global_jit among the flags and leaves the MatMul+Add pairs unfused
    assert sum(1 for v in truth.values() if v) == (24 if tf_release == "2.21" else 28)
    user_flags = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
    for target, fetch, exact in ((files / "graph.pbtxt", ["train_step"], True),
                                 (files / "model.meta", [], False),  # the train_op collection: assumed
                                 (files / "model.meta.pbtxt", ["train_step"], True)):
        pin = pass_inputs(target, flags=user_flags, tf="always", fetch=fetch, cache_dir=tmp_path / "cache")
        assert pin.route.method == "tf-capture" and pin.route.exact is exact, pin.route.line
        state = ProcessState()
        results = [cluster_graph(g, options_for(user_flags, input_stage=stage), state)
                   for _, g, stage in pin.graphs]
        d = compare_partitions(results[pin.main].labels(), truth)
        assert d.identical and d.same_names, (target, d)


CALL_GRAPH = """
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }
       attr { key: "shape" value { shape { dim { size: 2 } dim { size: 4 } } } } }
node { name: "c" op: "PartitionedCall" input: "x"
       attr { key: "Tin" value { list { type: DT_FLOAT } } }
       attr { key: "Tout" value { list { type: DT_FLOAT type: DT_FLOAT } } }
       attr { key: "f" value { func { name: "inner" } } } }
node { name: "y" op: "Relu" input: "c" attr { key: "T" value { type: DT_FLOAT } } }
library { function {
  signature { name: "inner" input_arg { name: "a" type: DT_FLOAT }
              output_arg { name: "t" type: DT_FLOAT } output_arg { name: "s" type: DT_FLOAT } }
  node_def { name: "t" op: "Tanh" input: "a" attr { key: "T" value { type: DT_FLOAT } } }
  node_def { name: "e" op: "Exp" input: "t:y:0" attr { key: "T" value { type: DT_FLOAT } } }
  ret { key: "t" value: "t:y:0" } ret { key: "s" value: "e:y:0" } } }
"""


def test_a_fetched_call_output_stays_fetchable_without_tf(tmp_path):
    """``--fetch c:1`` of a PartitionedCall in a session graph: TF lowers and inlines the whole
    graph before the call's feed/fetch rewrite, keeping the inlined caller ``c`` as an IdentityN
    of the body's outputs (fetchable), so the fetch reads ``c:1``; no "0 outputs" error."""
    from graphs import parse_graphdef

    path = tmp_path / "g.pbtxt"
    save(Graph(parse_graphdef(CALL_GRAPH)), path)
    pin = pass_inputs(path, flags="--tf_xla_auto_jit=2", tf="never", fetch=["c:1"])
    g = pin.main_graph
    assert g["c"].op == "IdentityN" and [e.src for e in g.in_edges("c") if not e.is_control] == ["c/t", "c/e"]
    assert [(e.src, e.src_output) for e in g.in_edges("_retval_c_1_0")] == [("c", 1)]
