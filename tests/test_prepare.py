"""prepare_without_tf and the TF-free rewrites it runs, on tiny hand-made graphs.

One behaviour per test, each with the TF behaviour it follows (in the manner of TF's
mark_for_compilation_pass_test.cc). Expected names and shapes come from TF 2.21's dumps of
the same constructs (fixtures/models/build_models.py harvests them).
"""

from __future__ import annotations

import pytest

from jitsim.frontend.prepare import prepare_without_tf
from jitsim.registry import protos
from jitsim.graph.model import Graph
from jitsim.flags import DEFAULT_FLAGS
from jitsim.options import options_for
from jitsim.rewrites.function_inlining import inline_call
from jitsim.graph.graphedit import DT_FLOAT, DT_RESOURCE, EditGraph
from jitsim.rewrites.grappler.common_subgraph_elimination import eliminate_common_subgraphs
from jitsim.rewrites.grappler.constant_folding import fold_constants
from jitsim.rewrites.grappler.dependency_optimizer import optimize_dependencies
from jitsim.rewrites.grappler.remapper import remap
from jitsim.rewrites.lower_functional_ops import lower_functional_ops
from jitsim.passes.pipeline import run_pipeline
from jitsim.rewrites.placement import place
from graphs import graph_of, set_attr
from test_shape_inference import shapes_attr

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


# -- helpers -------------------------------------------------------------------------------


def fdef(name, inputs, outputs, nodes, *, control_ret=(), attrs=None):
    """A FunctionDef: ``inputs``/``outputs`` = [(arg name, dtype)], ``outputs`` read from
    ``ret`` given as (name, dtype, tensor); ``nodes`` = [(name, op, [inputs], {attr: value})]."""
    f = protos.FunctionDef()
    f.signature.name = name
    for a, t in inputs:
        f.signature.input_arg.add(name=a, type=t)
    for a, t, src in outputs:
        f.signature.output_arg.add(name=a, type=t)
        f.ret[a] = src
    for item in nodes:
        nd = f.node_def.add(name=item[0], op=item[1])
        nd.input.extend(item[2])
        for k, v in (item[3] if len(item) > 3 else {}).items():
            set_attr(nd.attr[k], v)
    for c in control_ret:
        f.control_ret[c] = c
    for k, v in (attrs or {}).items():
        set_attr(f.attr[k], v)
    return f


def func_attr(name):
    av = protos.AttrValue()
    av.func.name = name
    return av


def const(value, dtype="DT_FLOAT"):
    av = protos.AttrValue()
    t = av.tensor
    t.dtype = protos.DataType.values_by_name[dtype].number
    t.tensor_shape.SetInParent()
    if dtype == "DT_FLOAT":
        t.float_val.append(value)
    else:
        t.int_val.append(value)
    return av


def clusters_of(g: Graph) -> dict[str, set[str]]:
    res = run_pipeline(g, options_for(DEFAULT_FLAGS, until="decluster", input_stage="graphdef", device="cpu"))
    out: dict[str, set[str]] = {}
    for n in res.graph.op_nodes():
        a = n.nodedef.attr
        if "_XlaCluster" in a:
            out.setdefault(a["_XlaCluster"].s.decode(), set()).add(n.name)
    return out


def signature_graph(body):
    """What jitsim.graph.io.load_saved_model gives for a signature: _Arg -> a
    StatefulPartitionedCall of the traced function -> Identity -> _Retval."""
    return graph_of([
        ("x", "_Arg", [], {"T": "DT_FLOAT", "index": 0}),
        ("StatefulPartitionedCall", "StatefulPartitionedCall", ["x"],
         {"f": func_attr(body.signature.name), "Tin": ["DT_FLOAT"], "Tout": ["DT_FLOAT"]}),
        ("Identity", "Identity", ["StatefulPartitionedCall"], {"T": "DT_FLOAT"}),
        ("identity_RetVal", "_Retval", ["Identity"], {"T": "DT_FLOAT", "index": 0}),
    ], [body])


ELEMENTWISE = fdef("body", [("x", DT_FLOAT)], [("y", DT_FLOAT, "neg:y:0")], [
    ("relu", "Relu", ["x"], {"T": "DT_FLOAT"}),
    ("two", "Const", [], {"dtype": "DT_FLOAT", "value": const(2.0)}),
    ("mul", "Mul", ["relu:activations:0", "two:output:0"], {"T": "DT_FLOAT"}),
    ("tanh", "Tanh", ["mul:z:0"], {"T": "DT_FLOAT"}),
    # (a Mul between Tanh and Neg: a Tanh -> Neg chain would become one _UnaryOpsComposition)
    ("mul2", "Mul", ["tanh:y:0", "two:output:0"], {"T": "DT_FLOAT"}),
    ("neg", "Neg", ["mul2:z:0"], {"T": "DT_FLOAT"}),
])


# -- function inlining ---------------------------------------------------------------------


def test_signature_wrapper_clusters_only_after_inlining():
    # A SavedModel signature is one StatefulPartitionedCall: no XLA kernel, nothing to
    # cluster. TF's function runtime inlines it first (LowerFunctionalOpsPass), so the body's
    # elementwise ops cluster together (4 of them: --tf_xla_min_cluster_size=4 is met).
    g = signature_graph(ELEMENTWISE)
    assert clusters_of(g) == {}
    p = prepare_without_tf(g)
    (members,) = clusters_of(p.graph).values()
    assert {f"StatefulPartitionedCall/{n}" for n in ("relu", "mul", "tanh", "neg")} <= members


def test_inlining_names_nodes_as_tf_does():
    # InlineFunctionBody: one Func/<caller>/input/_N Identity per argument, the body copied as
    # <caller>/<node>, one Func/<caller>/output/_N Identity per result, an output-control NoOp,
    # and the caller replaced by a NoOp of its name (kept targetable in a function graph).
    eg = EditGraph.from_graph(signature_graph(ELEMENTWISE))
    rec = inline_call(eg, "StatefulPartitionedCall")
    assert rec.inlined and rec.body_nodes == 6
    assert eg["Func/StatefulPartitionedCall/input/_0"].op == "Identity"
    assert list(eg["Func/StatefulPartitionedCall/input/_0"].input) == ["x"]
    assert list(eg["StatefulPartitionedCall/relu"].input) == ["Func/StatefulPartitionedCall/input/_0"]
    assert list(eg["Func/StatefulPartitionedCall/output/_1"].input) == ["StatefulPartitionedCall/neg"]
    assert list(eg["Identity"].input) == ["Func/StatefulPartitionedCall/output/_1"]
    assert eg["Func/StatefulPartitionedCall/output_control_node/_2"].op == "NoOp"
    assert eg["StatefulPartitionedCall"].op == "NoOp"
    assert list(eg["StatefulPartitionedCall"].input) == ["^Func/StatefulPartitionedCall/output_control_node/_2"]


def test_control_inputs_of_the_caller_reach_body_nodes_without_inputs():
    # A body node with no inputs (the Const) would otherwise run even if the call never
    # would: TF gives it a control edge from Func/<caller>/input_control_node.
    g = graph_of([
        ("x", "_Arg", [], {"T": "DT_FLOAT", "index": 0}),
        ("gate", "NoOp", []),
        ("call", "PartitionedCall", ["x", "^gate"], {"f": func_attr("body"), "Tin": ["DT_FLOAT"],
                                                      "Tout": ["DT_FLOAT"]}),
        ("out", "_Retval", ["call"], {"T": "DT_FLOAT", "index": 0}),
    ], [ELEMENTWISE])
    eg = EditGraph.from_graph(g)
    inline_call(eg, "call")
    icn = "Func/call/input_control_node/_0"
    assert list(eg[icn].input) == ["^gate"]
    assert f"^{icn}" in eg["call/two"].input
    assert f"^{icn}" in eg["Func/call/input/_1"].input


def test_noinline_function_is_not_inlined():
    # ValidateNoInline: a function marked _noinline stays a call (and is recorded as such).
    body = fdef("body", [("x", DT_FLOAT)], [("y", DT_FLOAT, "relu:activations:0")],
                [("relu", "Relu", ["x"], {"T": "DT_FLOAT"})], attrs={"_noinline": True})
    p = prepare_without_tf(signature_graph(body))
    assert p.graph["StatefulPartitionedCall"].op == "StatefulPartitionedCall"
    assert any("_noinline" in c for c in p.caveats)


def test_nested_calls_are_inlined_recursively():
    # Nodes an inlining adds get later ids and the same walk reaches them.
    inner = fdef("inner", [("a", DT_FLOAT)], [("b", DT_FLOAT, "neg:y:0")], [("neg", "Neg", ["a"], {"T": "DT_FLOAT"})])
    outer = fdef("body", [("x", DT_FLOAT)], [("y", DT_FLOAT, "call:output:0")], [
        ("call", "PartitionedCall", ["x"], {"f": func_attr("inner"), "Tin": ["DT_FLOAT"], "Tout": ["DT_FLOAT"]}),
    ])
    g = signature_graph(outer)
    g.graphdef.library.function.add().CopyFrom(inner)
    res = lower_functional_ops(g, fetchable=False)
    assert "StatefulPartitionedCall/call/neg" in res.graph
    assert res.counts()["inlined_calls"] == 2


# -- functional control flow -----------------------------------------------------------------


def _if_graph(lower: bool):
    then_f = fdef("then", [("a", DT_FLOAT)], [("o", DT_FLOAT, "r:activations:0")], [("r", "Relu", ["a"], {"T": "DT_FLOAT"})])
    else_f = fdef("else", [("a", DT_FLOAT)], [("o", DT_FLOAT, "t:y:0")], [("t", "Tanh", ["a"], {"T": "DT_FLOAT"})])
    attrs = {"then_branch": func_attr("then"), "else_branch": func_attr("else"), "Tcond": "DT_BOOL",
             "Tin": ["DT_FLOAT"], "Tout": ["DT_FLOAT"]}
    if lower:
        attrs["_lower_using_switch_merge"] = True
    return graph_of([
        ("p", "_Arg", [], {"T": "DT_BOOL", "index": 0}),
        ("x", "_Arg", [], {"T": "DT_FLOAT", "index": 1}),
        ("cond", "StatelessIf", ["p", "x"], attrs),
        ("out", "_Retval", ["cond"], {"T": "DT_FLOAT", "index": 0}),
    ], [then_f, else_f])


def test_if_is_lowered_to_switch_merge_with_tfs_names():
    # lower_if_op.cc: then/else calls named first, then switch_pred, pivot_f, pivot_t, one
    # Switch per input named after it, one Merge per output, branch_executed.
    res = lower_functional_ops(_if_graph(True), fetchable=False)
    g = res.graph
    assert g["cond/switch_pred/_2"].op == "Switch"
    assert g["cond/pivot_f/_3"].op == "Identity" and g["cond/pivot_t/_4"].op == "Identity"
    assert g["cond/x/_5"].op == "Switch"
    assert g["cond/output/_6"].op == "Merge"
    assert g["cond/branch_executed/_7"].op == "Merge"
    assert "cond/then/_0/r" in g and "cond/else/_1/t" in g
    assert [e.src for e in g.in_edges("out")] == ["cond/output/_6"]


def test_if_without_lowering_attribute_is_kept():
    # Only ops carrying _lower_using_switch_merge=true are lowered.
    res = lower_functional_ops(_if_graph(False), fetchable=False)
    assert res.graph["cond"].op == "StatelessIf"
    assert res.counts()["functional_ops_kept"] == 1


def test_while_is_lowered_and_passthrough_resources_get_only_a_constant_enter():
    # lower_while_op.cc: Enter/Merge/Switch/Exit/NextIteration per loop variable, one LoopCond;
    # a resource the body returns unchanged (a Keras LSTM's weights) gets a constant Enter only.
    cond_f = fdef("c", [("i", DT_FLOAT), ("v", DT_RESOURCE)], [("o", 10, "l:z:0")], [
        ("k", "Const", [], {"dtype": "DT_FLOAT", "value": const(3.0)}),
        ("l", "Less", ["i", "k:output:0"], {"T": "DT_FLOAT"}),
    ])
    body_f = fdef("b", [("i", DT_FLOAT), ("v", DT_RESOURCE)], [("o", DT_FLOAT, "a:z:0"), ("w", DT_RESOURCE, "v")], [
        ("r", "ReadVariableOp", ["v"], {"dtype": "DT_FLOAT"}),
        ("a", "AddV2", ["i", "r:value:0"], {"T": "DT_FLOAT"}),
    ])
    g = graph_of([
        ("i0", "_Arg", [], {"T": "DT_FLOAT", "index": 0}),
        ("var", "_Arg", [], {"T": "DT_RESOURCE", "index": 1}),
        ("loop", "While", ["i0", "var"], {"cond": func_attr("c"), "body": func_attr("b"),
                                          "T": ["DT_FLOAT", "DT_RESOURCE"], "parallel_iterations": 10,
                                          "_lower_using_switch_merge": True}),
        ("out", "_Retval", ["loop"], {"T": "DT_FLOAT", "index": 0}),
    ], [cond_f, body_f])
    res = lower_functional_ops(g, fetchable=False)
    hist = res.graph.op_histogram()
    assert hist["Enter"] == 2
    assert (hist["Merge"], hist["Switch"], hist["Exit"], hist["NextIteration"], hist["LoopCond"]) == (1, 1, 1, 1, 1)
    assert res.graph["loop/enter/_3"].get_attr("is_constant") is True
    # the body's variable read is fed by the constant Enter (through the inliner's Identity)
    ident = [e.src for e in res.graph.in_edges("loop/body/_1/r") if not e.is_control][0]
    assert res.graph[ident].op == "Identity"
    assert [e.src for e in res.graph.in_edges(ident) if not e.is_control] == ["loop/enter/_3"]
    assert [e.src for e in res.graph.in_edges("out")] == ["loop/exit/_8"]


# -- placement -----------------------------------------------------------------------------


def test_unplaced_nodes_go_to_the_cpu():
    # TF's pass fails on unplaced nodes; the placer would have put them on the only device.
    g = graph_of([("x", "_Arg", [], {"T": "DT_FLOAT", "index": 0}), ("y", "Relu", ["x"], {"T": "DT_FLOAT"})])
    res = place(g, "cpu")
    assert g["y"].device == CPU and res.placed == {CPU: 2}


def test_gpu_placement_falls_back_to_cpu_without_a_gpu_kernel():
    # Soft placement: an op TF has no GPU kernel for (StringJoin) stays on the CPU.
    g = graph_of([("s", "Const", [], {"dtype": "DT_STRING"}), ("j", "StringJoin", ["s"], {"N": 1}),
               ("x", "Const", [], {"dtype": "DT_FLOAT", "value": const(1.0)}),
               ("y", "Relu", ["x"], {"T": "DT_FLOAT"})])
    res = place(g, "gpu")
    assert g["j"].device == CPU
    assert g["y"].device.endswith("GPU:0")
    assert "j" in res.cpu_fallback


# -- Grappler ------------------------------------------------------------------------------


def _dense(act="Relu", extra_consumer=False):
    nodes = [
        ("x", "_Arg", [], {"T": "DT_FLOAT", "index": 0}),
        ("w", "_Arg", [], {"T": "DT_FLOAT", "index": 1}),
        ("b", "_Arg", [], {"T": "DT_FLOAT", "index": 2}),
        ("mm", "MatMul", ["x", "w"], {"T": "DT_FLOAT", "transpose_a": False, "transpose_b": False}),
        ("ba", "BiasAdd", ["mm", "b"], {"T": "DT_FLOAT", "data_format": "NHWC"}),
        ("act", act, ["ba"], {"T": "DT_FLOAT"}),
        # (not a unary op, nor Mul(act, act), which TF's ReplaceMulWithSquare makes a Square:
        # Relu -> Square would become an _UnaryOpsComposition before the remapper runs, as TF's
        # arithmetic optimizer runs first)
        ("neg", "Neg", ["x"], {"T": "DT_FLOAT"}),
        ("sq", "Mul", ["act", "neg"], {"T": "DT_FLOAT"}),
        ("add", "AddV2", ["sq", "neg"], {"T": "DT_FLOAT"}),
        ("exp", "Exp", ["add"], {"T": "DT_FLOAT"}),
        ("out", "_Retval", ["exp"], {"T": "DT_FLOAT", "index": 0}),
    ]
    if extra_consumer:
        nodes.append(("out2", "_Retval", ["mm"], {"T": "DT_FLOAT", "index": 1}))
    g = graph_of(nodes)
    place(g, "cpu")
    return g


def test_matmul_biasadd_relu_become_one_fused_matmul_named_after_the_relu():
    # Remapper: the largest pattern at the root (the activation); the fused op keeps the root's
    # name, reads the MatMul's inputs and the bias.
    eg = EditGraph.from_graph(_dense())
    rec = remap(eg)
    assert rec.by_kind == {"MatMul+BiasAdd+Relu": 1}
    assert eg["act"].op == "_FusedMatMul"
    assert list(eg["act"].input) == ["x", "w", "b"]
    assert [s.decode() for s in eg["act"].attr["fused_ops"].list.s] == ["BiasAdd", "Relu"]
    assert "mm" not in eg and "ba" not in eg


def test_no_fusion_when_the_matmul_has_another_consumer():
    # Every intermediate of a pattern must have the next node of the pattern as only consumer.
    eg = EditGraph.from_graph(_dense(extra_consumer=True))
    assert remap(eg).count == 0


def test_fused_matmul_splits_the_cluster_it_sits_in():
    # _FusedMatMul has no XLA kernel: with it, the elementwise ops after it cluster apart from
    # it; without the fusion, the MatMul and BiasAdd would join the cluster.
    raw = clusters_of(_dense())
    assert any({"mm", "ba", "act"} <= c for c in raw.values())
    p = prepare_without_tf(_dense())
    prepared = clusters_of(p.graph)
    assert all("act" not in c for c in prepared.values())
    assert any({"sq", "neg", "add", "exp"} <= c for c in prepared.values())


def test_swish_becomes_mkl_swish():
    # oneDNN remapper: Mul(x, Sigmoid(x)) -> _MklSwish(x), which has no XLA kernel.
    g = graph_of([("x", "_Arg", [], {"T": "DT_FLOAT", "index": 0}),
               ("s", "Sigmoid", ["x"], {"T": "DT_FLOAT"}),
               ("m", "Mul", ["x", "s"], {"T": "DT_FLOAT"}),
               ("out", "_Retval", ["m"], {"T": "DT_FLOAT", "index": 0})])
    eg = EditGraph.from_graph(g)
    remap(eg)
    assert eg["m"].op == "_MklSwish" and list(eg["m"].input) == ["x"] and "s" not in eg


def test_identity_is_bypassed_but_a_cond_pivot_is_kept():
    # DependencyOptimizer: an Identity is removed when safe; an Identity reading a Switch that a
    # consumer depends on by a control edge is a cond pivot and stays.
    g = graph_of([("p", "_Arg", [], {"T": "DT_BOOL", "index": 0}),
               ("x", "_Arg", [], {"T": "DT_FLOAT", "index": 1}),
               ("id", "Identity", ["x"], {"T": "DT_FLOAT"}),
               ("sw", "Switch", ["p", "p"], {"T": "DT_BOOL"}),
               ("pivot", "Identity", ["sw:1"], {"T": "DT_BOOL"}),
               ("c", "Const", ["^pivot"], {"dtype": "DT_FLOAT", "value": const(1.0)}),
               ("a", "AddV2", ["id", "c"], {"T": "DT_FLOAT"}),
               ("out", "_Retval", ["a"], {"T": "DT_FLOAT", "index": 0})])
    eg = EditGraph.from_graph(g)
    optimize_dependencies(eg)
    assert "id" not in eg and list(eg["a"].input)[0] == "x"
    assert "pivot" in eg


def test_constant_subgraph_folds_into_a_const_of_the_same_name():
    # ConstantFolding: a stateless node whose inputs are all constants becomes a Const.
    g = graph_of([("a", "Const", [], {"dtype": "DT_FLOAT", "value": const(2.0)}),
               ("b", "Const", [], {"dtype": "DT_FLOAT", "value": const(3.0)}),
               ("m", "Mul", ["a", "b"], {"T": "DT_FLOAT"}),
               ("x", "_Arg", [], {"T": "DT_FLOAT", "index": 0}),
               ("y", "AddV2", ["x", "m"], {"T": "DT_FLOAT"}),
               ("out", "_Retval", ["y"], {"T": "DT_FLOAT", "index": 0})])
    eg = EditGraph.from_graph(g)
    rec = fold_constants(eg)
    assert rec.nodes == ["m"] and eg["m"].op == "Const"
    assert eg["m"].attr["value"].tensor.float_val[0] == pytest.approx(6.0)


def _empty_axes_graph(axes_value=None):
    """``All(Equal(-x, -y), Range(0, 0, 1))``: tf.debugging.assert_equal's check on scalars
    (the reduction axes are ``range(rank)``, rank 0), and ``Sum(v, axes)`` of a float vector."""
    i32 = lambda v: const(v, "DT_INT32")
    axes = protos.AttrValue()
    axes.tensor.dtype = protos.DataType.values_by_name["DT_INT32"].number
    axes.tensor.tensor_shape.dim.add(size=0 if axes_value is None else len(axes_value))
    axes.tensor.int_val.extend(axes_value or [])
    return graph_of([("x", "_Arg", [], {"T": "DT_INT64", "index": 0}),
                  ("y", "_Arg", [], {"T": "DT_INT64", "index": 1}),
                  ("v", "_Arg", [], {"T": "DT_FLOAT", "index": 2}),
                  ("nx", "Neg", ["x"], {"T": "DT_INT64"}),
                  ("ny", "Neg", ["y"], {"T": "DT_INT64"}),
                  ("eq", "Equal", ["nx", "ny"], {"T": "DT_INT64"}),
                  ("start", "Const", [], {"dtype": "DT_INT32", "value": i32(0)}),
                  ("rank", "Const", [], {"dtype": "DT_INT32", "value": i32(0)}),
                  ("delta", "Const", [], {"dtype": "DT_INT32", "value": i32(1)}),
                  ("range", "Range", ["start", "rank", "delta"], {"Tidx": "DT_INT32"}),
                  ("all", "All", ["eq", "range"], {"Tidx": "DT_INT32", "keep_dims": False}),
                  ("axes", "Const", [], {"dtype": "DT_INT32", "value": axes}),
                  ("sum", "Sum", ["v", "axes"], {"T": "DT_FLOAT", "Tidx": "DT_INT32", "keep_dims": False}),
                  ("out", "_Retval", ["all"], {"T": "DT_BOOL", "index": 0}),
                  ("out1", "_Retval", ["sum"], {"T": "DT_FLOAT", "index": 1})])


def test_reduction_over_no_axes_becomes_identity():
    # TF's ConstantFolding::SimplifyReduction: a reduction whose axes are a constant with no
    # elements reduces nothing and becomes Identity(input) with ^axes, whatever the input's
    # shape (checked under TF 2.21: Sum([None, 3] placeholder, []) and All(b, []) -> Identity).
    # The axes may be a Range folding has just made a Const ([] here): the simplification
    # runs after folding, as in TF. All has no T attr: the Identity is DT_BOOL.
    eg = EditGraph.from_graph(_empty_axes_graph())
    fold_constants(eg)
    assert eg["range"].op == "Const"
    assert eg["all"].op == "Identity" and list(eg["all"].input) == ["eq", "^range"]
    assert eg["all"].attr["T"].type == protos.DataType.values_by_name["DT_BOOL"].number
    assert set(eg["all"].attr) == {"T"}
    assert eg["sum"].op == "Identity" and list(eg["sum"].input) == ["v", "^axes"]
    assert eg["sum"].attr["T"].type == DT_FLOAT
    # a non-empty axes list reduces: left alone
    eg = EditGraph.from_graph(_empty_axes_graph([0]))
    fold_constants(eg)
    assert eg["sum"].op == "Sum"


def test_assert_equal_of_scalars_loses_its_all_and_falls_under_the_cluster_size():
    # TF Text's RaggedFromRowSplits checks assert_equal(nrows, nsplits - 1) on scalars: once
    # the All is an Identity the dependency optimizer bypasses, the check is Neg, Neg, Equal:
    # 3 clusterable ops, under --tf_xla_min_cluster_size=4, so nothing clusters (TF 2.21 on
    # text_tokenizer). Without constant folding, All (and Range) would make it a cluster.
    p = prepare_without_tf(_empty_axes_graph())
    assert "all" not in p.graph
    assert clusters_of(p.graph) == {}
    assert clusters_of(prepare_without_tf(_empty_axes_graph(), skip=("constant_folding",)).graph)


def test_identical_constants_are_merged():
    # CommonSubgraphElimination: two equal Consts become one, which the consumer reads twice
    # (which one survives follows the visiting order; see _lifo_order).
    g = graph_of([("a", "Const", [], {"dtype": "DT_FLOAT", "value": const(2.0)}),
               ("b", "Const", [], {"dtype": "DT_FLOAT", "value": const(2.0)}),
               ("m", "Mul", ["a", "b"], {"T": "DT_FLOAT"}),
               ("out", "_Retval", ["m"], {"T": "DT_FLOAT", "index": 0})])
    eg = EditGraph.from_graph(g)
    rec = eliminate_common_subgraphs(eg)
    assert rec.count == 1
    (kept,) = [n for n in ("a", "b") if n in eg]
    assert list(eg["m"].input) == [kept, kept]


def test_dead_nodes_of_a_concrete_function_graphdef_are_pruned():
    # A GraphDef from cf.graph.as_graph_def() has no _Retval: its outputs are the Identity
    # nodes TF names Identity, Identity_1...; nodes that reach none of them (dead code) are
    # pruned as TF prunes them from the function.
    g = graph_of([("x", "Placeholder", [], {"dtype": "DT_FLOAT"}),
               ("r", "Relu", ["x"], {"T": "DT_FLOAT"}),
               ("dead", "Tanh", ["x"], {"T": "DT_FLOAT"}),
               ("Identity", "Identity", ["r"], {"T": "DT_FLOAT"})])
    p = prepare_without_tf(g)
    assert "dead" not in p.graph and "r" in p.graph


def test_steps_and_caveats_say_what_was_done():
    p = prepare_without_tf(signature_graph(ELEMENTWISE))
    steps = {s[0]: s for s in p.steps}
    assert steps["inline_and_lower"][1] == 1
    # the inliner's Func/ input and output Identities: TF's model pruner removes them (its
    # after_model_pruner dump of a Keras model's call holds 1 of the 11 the inliner made)
    assert steps["model_pruner"][1] >= 2
    assert any("not simulated" in c for c in p.caveats)


def test_skip_leaves_a_step_out():
    p = prepare_without_tf(_dense(), skip=("remapper",))
    assert p.graph["act"].op == "Relu"
    with pytest.raises(ValueError):
        prepare_without_tf(_dense(), skip=("nope",))


def test_times_one_is_removed_so_the_swish_fuses():
    # Keras' silu is x * sigmoid(1.0 * x). Constant folding turns 1.0 * x into Identity(x) (the
    # constant kept as a control input), the dependency optimizer drops the Identity, and the
    # remapper then sees Mul(x, Sigmoid(x)): _MklSwish, which has no XLA kernel.
    g = graph_of([("x", "_Arg", [], {"T": "DT_FLOAT", "index": 0}),
               ("beta", "Const", [], {"dtype": "DT_FLOAT", "value": const(1.0)}),
               ("bx", "Mul", ["beta", "x"], {"T": "DT_FLOAT"}),
               ("s", "Sigmoid", ["bx"], {"T": "DT_FLOAT"}),
               ("m", "Mul", ["x", "s"], {"T": "DT_FLOAT"}),
               ("out", "_Retval", ["m"], {"T": "DT_FLOAT", "index": 0})])
    p = prepare_without_tf(g)
    assert p.graph["m"].op == "_MklSwish"
    assert [e.src for e in p.graph.in_edges("m") if not e.is_control] == ["x"]
    without = prepare_without_tf(g, skip=("constant_folding",))
    assert without.graph["m"].op == "Mul"


def test_add_of_a_bias_shaped_tensor_fuses_like_a_biasadd():
    # oneDNN's IsBiasSemanticAdd: MatMul (output [2, 48]) + a 1-D [48] tensor is a bias add (a
    # Keras GRU cell's MatMul + Squeeze(bias)); shapes come from _output_shapes. A [2, 48]
    # operand is not a bias: no fusion.
    def shapes(*dims):
        av = protos.AttrValue()
        s = av.list.shape.add()
        for d in dims:
            s.dim.add(size=d)
        return av

    def g(bias_dims):
        return graph_of([("x", "_Arg", [], {"T": "DT_FLOAT", "index": 0}),
                      ("w", "_Arg", [], {"T": "DT_FLOAT", "index": 1}),
                      ("b", "_Arg", [], {"T": "DT_FLOAT", "index": 2, "_output_shapes": shapes(*bias_dims)}),
                      ("mm", "MatMul", ["x", "w"], {"T": "DT_FLOAT", "_output_shapes": shapes(2, 48)}),
                      ("add", "AddV2", ["mm", "b"], {"T": "DT_FLOAT"}),
                      ("out", "_Retval", ["add"], {"T": "DT_FLOAT", "index": 0})])

    eg = EditGraph.from_graph(g((48,)))
    remap(eg)
    assert eg["add"].op == "_FusedMatMul" and list(eg["add"].input) == ["x", "w", "b"]
    eg = EditGraph.from_graph(g((2, 48)))
    assert remap(eg).count == 0


def test_reshape_of_a_reshape_collapses():
    # ArithmeticOptimizer (RemoveRedundantReshape): Reshape(Reshape(x, s1), s2) -> Reshape(x, s2)
    # when the inner one has no other reader (tf.tensordot's reshape back, then a head split).
    from jitsim.rewrites.grappler.arithmetic_optimizer import remove_redundant_reshapes

    def shape_const(*vals):
        av = protos.AttrValue()
        t = av.tensor
        t.dtype = protos.DataType.values_by_name["DT_INT32"].number
        t.tensor_shape.dim.add(size=len(vals))
        t.int_val.extend(vals)
        return av

    g = graph_of([("x", "_Arg", [], {"T": "DT_FLOAT", "index": 0}),
               ("s1", "Const", [], {"dtype": "DT_INT32", "value": shape_const(2, 2, 16)}),
               ("s2", "Const", [], {"dtype": "DT_INT32", "value": shape_const(2, 2, 4, 4)}),
               ("r1", "Reshape", ["x", "s1"], {"T": "DT_FLOAT", "Tshape": "DT_INT32"}),
               ("r2", "Reshape", ["r1", "s2"], {"T": "DT_FLOAT", "Tshape": "DT_INT32"}),
               ("out", "_Retval", ["r2"], {"T": "DT_FLOAT", "index": 0})])
    eg = EditGraph.from_graph(g)
    rec = remove_redundant_reshapes(eg)
    assert rec.nodes == ["r2"] and list(eg["r2"].input) == ["x", "s2"]
    assert not eg.consumers("r1")  # the model pruner drops it next


def test_case_is_lowered_to_switchn_and_merges():
    # lower_case_op.cc: branch calls named first, then branch_index (_SwitchN of the index with
    # itself), one pivot per branch, one _SwitchN per input, one Merge per output, branch_executed.
    b0 = fdef("b0", [("a", DT_FLOAT)], [("o", DT_FLOAT, "r:activations:0")], [("r", "Relu", ["a"], {"T": "DT_FLOAT"})])
    b1 = fdef("b1", [("a", DT_FLOAT)], [("o", DT_FLOAT, "t:y:0")], [("t", "Tanh", ["a"], {"T": "DT_FLOAT"})])
    branches = protos.AttrValue()
    branches.list.func.add(name="b0")
    branches.list.func.add(name="b1")
    g = graph_of([("i", "_Arg", [], {"T": "DT_INT32", "index": 0}),
               ("x", "_Arg", [], {"T": "DT_FLOAT", "index": 1}),
               ("case", "Case", ["i", "x"], {"branches": branches, "Tin": ["DT_FLOAT"], "Tout": ["DT_FLOAT"],
                                              "_lower_using_switch_merge": True}),
               ("out", "_Retval", ["case"], {"T": "DT_FLOAT", "index": 0})], [b0, b1])
    res = lower_functional_ops(g, fetchable=False)
    out = res.graph
    assert out["case/branch_index/_2"].op == "_SwitchN"
    assert out["case/pivot_0/_3"].op == "Identity" and out["case/pivot_1/_4"].op == "Identity"
    assert out["case/x/_5"].op == "_SwitchN"
    assert out["case/merge/_6"].op == "Merge" and out["case/branch_executed/_7"].op == "Merge"
    assert "case/branch0/_0/r" in out and "case/branch1/_1/t" in out


def test_relu_of_every_concat_input_moves_after_the_concat():
    # ArithmeticOptimizer (HoistCWiseUnaryChains): Concat(Relu(a), Relu(b)) -> Relu(Concat(a, b)),
    # the first input's Relu kept (Inception's mixed blocks in TF's dumps).
    from jitsim.rewrites.grappler.arithmetic_optimizer import hoist_unary_out_of_concat

    g = graph_of([("a", "_Arg", [], {"T": "DT_FLOAT", "index": 0}),
               ("b", "_Arg", [], {"T": "DT_FLOAT", "index": 1}),
               ("ra", "Relu", ["a"], {"T": "DT_FLOAT"}),
               ("rb", "Relu", ["b"], {"T": "DT_FLOAT"}),
               ("axis", "Const", [], {"dtype": "DT_INT32", "value": const(0, "DT_INT32")}),
               ("c", "ConcatV2", ["ra", "rb", "axis"], {"T": "DT_FLOAT", "N": 2, "Tidx": "DT_INT32"}),
               ("out", "_Retval", ["c"], {"T": "DT_FLOAT", "index": 0})])
    eg = EditGraph.from_graph(g)
    rec = hoist_unary_out_of_concat(eg)
    assert rec.count == 1 and "rb" not in eg
    assert list(eg["c"].input) == ["a", "b", "axis"]
    assert list(eg["ra"].input) == ["c"] and list(eg["out"].input) == ["ra"]


# -- remapper: Conv1D (Conv2D + Squeeze + BiasAdd) and residual Add fusions (issue 21) ------


def _ints(values):
    av = protos.AttrValue()
    av.list.i.extend(values)
    return av


def _conv_attrs(*out_dims):
    a = {"T": "DT_FLOAT", "strides": _ints([1, 1, 1, 1]), "padding": "VALID", "data_format": "NHWC",
         "dilations": _ints([1, 1, 1, 1]), "use_cudnn_on_gpu": True}
    if out_dims:
        a["_output_shapes"] = shapes_attr(*out_dims)
    return a


def _conv1d(squeeze_dims=(-3,), extra_consumer=False):
    """Keras' Conv1D on TF: ExpandDims(x, -3) -> Conv2D -> Squeeze(-3) -> BiasAdd -> Relu."""
    nodes = [
        ("x", "_Arg", [], {"T": "DT_FLOAT", "index": 0}),
        ("w", "_Arg", [], {"T": "DT_FLOAT", "index": 1}),
        ("b", "_Arg", [], {"T": "DT_FLOAT", "index": 2}),
        ("axis", "Const", [], {"dtype": "DT_INT32", "value": const(-3, "DT_INT32")}),
        ("ed", "ExpandDims", ["x", "axis"], {"T": "DT_FLOAT", "Tdim": "DT_INT32"}),
        ("conv", "Conv2D", ["ed", "w"], _conv_attrs()),
        ("sq", "Squeeze", ["conv"], {"T": "DT_FLOAT", "squeeze_dims": _ints(squeeze_dims)}),
        ("ba", "BiasAdd", ["sq", "b"], {"T": "DT_FLOAT", "data_format": "NHWC"}),
        ("act", "Relu", ["ba"], {"T": "DT_FLOAT"}),
        ("out", "_Retval", ["act"], {"T": "DT_FLOAT", "index": 0}),
    ]
    if extra_consumer:
        nodes.append(("out2", "_Retval", ["sq"], {"T": "DT_FLOAT", "index": 1}))
    g = graph_of(nodes)
    place(g, "cpu")
    return g


def test_conv1d_squeeze_and_bias_fuse_into_the_conv2d_and_the_biasadd_becomes_the_squeeze():
    # remapper.cc FindConvWithSqueezeAndBias / AddFusedConvNode: the Conv2D becomes
    # _FusedConv2D(fused_ops=[BiasAdd]) under its own name, reading the BiasAdd's bias; the
    # BiasAdd's node becomes the Squeeze, reading the fused conv (TF 2.21's dump of a Keras
    # Conv1D: `conv1d/convolution` _FusedConv2D, `conv1d/BiasAdd` Squeeze). The Relu after it is
    # not fused (its input is a Squeeze, not a BiasAdd).
    eg = EditGraph.from_graph(_conv1d())
    rec = remap(eg)
    assert rec.by_kind == {"Conv2D+Squeeze+BiasAdd": 1}
    assert eg["conv"].op == "_FusedConv2D" and list(eg["conv"].input) == ["ed", "w", "b"]
    assert [s.decode() for s in eg["conv"].attr["fused_ops"].list.s] == ["BiasAdd"]
    assert eg["ba"].op == "Squeeze" and list(eg["ba"].input) == ["conv"]
    assert list(eg["ba"].attr["squeeze_dims"].list.i) == [-3]
    assert "sq" not in eg and eg["act"].op == "Relu"


def test_conv1d_fusion_needs_a_single_use_squeeze_that_keeps_the_channels():
    # The Squeeze must be read by the BiasAdd only, and must not squeeze dimension 3 (channels).
    assert remap(EditGraph.from_graph(_conv1d(extra_consumer=True))).count == 0
    assert remap(EditGraph.from_graph(_conv1d(squeeze_dims=(3,)))).count == 0


def test_fused_conv1d_leaves_no_cluster_where_tf_has_none():
    # The Keras Conv1D model TF 2.21 clusters nothing in (fixtures/models/build_models.py
    # `conv1d`): without the fusion ExpandDims, Conv2D, Squeeze, BiasAdd and Relu form a cluster.
    assert any({"conv", "sq", "ba", "act"} <= c for c in clusters_of(_conv1d()).values())
    assert clusters_of(prepare_without_tf(_conv1d()).graph) == {}


def _residual(act=None, side_shape=(-1, 8, 8, 8), bias_extra=False):
    """ResNetV2's residual add: Conv2D + BiasAdd + Add(shortcut) [+ Relu]."""
    nodes = [
        ("x", "_Arg", [], {"T": "DT_FLOAT", "index": 0, "_output_shapes": shapes_attr(-1, 8, 8, 8)}),
        ("s", "_Arg", [], {"T": "DT_FLOAT", "index": 1, "_output_shapes": shapes_attr(*side_shape)}),
        ("w", "_Arg", [], {"T": "DT_FLOAT", "index": 2}),
        ("b", "_Arg", [], {"T": "DT_FLOAT", "index": 3}),
        ("conv", "Conv2D", ["x", "w"], _conv_attrs(-1, 8, 8, 8)),
        ("ba", "BiasAdd", ["conv", "b"], {"T": "DT_FLOAT", "data_format": "NHWC",
                                          "_output_shapes": shapes_attr(-1, 8, 8, 8)}),
        ("add", "AddV2", ["s", "ba"], {"T": "DT_FLOAT", "_output_shapes": shapes_attr(-1, 8, 8, 8)}),
    ]
    last = "add"
    if act:
        nodes.append(("act", act, ["add"], {"T": "DT_FLOAT"}))
        last = "act"
    nodes.append(("out", "_Retval", [last], {"T": "DT_FLOAT", "index": 0}))
    if bias_extra:
        nodes.append(("out2", "_Retval", ["ba"], {"T": "DT_FLOAT", "index": 1}))
    g = graph_of(nodes)
    place(g, "cpu")
    return g


def test_residual_add_fuses_into_the_conv_with_the_shortcut_as_fourth_input():
    # oneDNN FindContractionWithBiasAddAndAdd: an Add of two same-shaped tensors, one a
    # Conv2D + BiasAdd, becomes _FusedConv2D(fused_ops=[BiasAdd, Add], num_args=2) named after the
    # Add: inputs conv input, filter, bias, the other operand (TF 2.21's dump of a ResNetV2-style
    # block: `add/Add` _FusedConv2D(relu, filter, bias, x)).
    eg = EditGraph.from_graph(_residual())
    rec = remap(eg)
    assert rec.by_kind == {"Conv2D+BiasAdd+Add": 1}
    assert eg["add"].op == "_FusedConv2D" and list(eg["add"].input) == ["x", "w", "b", "s"]
    assert [s.decode() for s in eg["add"].attr["fused_ops"].list.s] == ["BiasAdd", "Add"]
    assert eg["add"].attr["num_args"].i == 2
    assert "conv" not in eg and "ba" not in eg


def test_residual_add_and_relu_fuse_into_one_conv_named_after_the_relu():
    # FindContractionWithBiasAndAddActivation is tried first, at the activation.
    eg = EditGraph.from_graph(_residual("Relu"))
    assert remap(eg).by_kind == {"Conv2D+BiasAdd+Add+Relu": 1}
    assert eg["act"].op == "_FusedConv2D" and list(eg["act"].input) == ["x", "w", "b", "s"]
    assert [s.decode() for s in eg["act"].attr["fused_ops"].list.s] == ["BiasAdd", "Add", "Relu"]
    assert "add" not in eg


def test_broadcasting_add_or_a_shared_biasadd_is_no_residual_fusion():
    # An Add that broadcasts (operand [-1, 1, 1, 8]) is not fused with the conv (it is no bias
    # either: not 1-D); a BiasAdd read by another node (here a fetch) keeps only the
    # Conv2D+BiasAdd fusion, at the BiasAdd itself.
    eg = EditGraph.from_graph(_residual(side_shape=(-1, 1, 1, 8)))
    assert remap(eg).by_kind == {"Conv2D+BiasAdd": 1}
    assert eg["add"].op == "AddV2"
    eg = EditGraph.from_graph(_residual(bias_extra=True))
    assert remap(eg).by_kind == {"Conv2D+BiasAdd": 1}
    assert eg["add"].op == "AddV2"
    # without oneDNN there is no residual fusion (nor a Conv2D+BiasAdd+Add+Relu one)
    eg = EditGraph.from_graph(_residual("Relu"))
    assert remap(eg, onednn=False).by_kind == {"Conv2D+BiasAdd": 1}


def test_inliner_identity_passes_its_input_shape_through():
    # Grappler's GraphProperties gives the inliner's `Func/<call>/input/_N` Identity its input's
    # shape: a residual Add read through it still counts as an Add of same-shaped operands.
    g = _residual()
    gd = g.to_graphdef()
    idn = gd.node.add(name="Func/call/input/_1", op="Identity", input=["s"])
    idn.attr["T"].type = DT_FLOAT
    for nd in gd.node:
        if nd.name == "add":
            nd.input[0] = "Func/call/input/_1"
    g2 = Graph(gd, validate=False)
    place(g2, "cpu")
    from jitsim.analyses.shape_inference import ShapeView
    eg = EditGraph.from_graph(g2)
    assert remap(eg, shapes=ShapeView(eg)).by_kind == {"Conv2D+BiasAdd+Add": 1}


# -- arithmetic optimizer: UnaryOpsComposition (issue 21) ----------------------------------


def _unary_chain(extra_consumer=False, ctrl=False):
    """x -> MatMul -> Abs -> Tanh -> Exp -> {Sqrt(Sigmoid(.)), AddV2(., Sqrt)} -> out."""
    nodes = [
        ("x", "_Arg", [], {"T": "DT_FLOAT", "index": 0}),
        ("w", "_Arg", [], {"T": "DT_FLOAT", "index": 1}),
        ("mm", "MatMul", ["x", "w"], {"T": "DT_FLOAT", "transpose_a": False, "transpose_b": False}),
        ("abs", "Abs", ["mm"], {"T": "DT_FLOAT"}),
        ("tanh", "Tanh", ["abs"] + (["^w"] if ctrl else []), {"T": "DT_FLOAT"}),
        ("exp", "Exp", ["tanh"], {"T": "DT_FLOAT"}),
        ("sig", "Sigmoid", ["exp"], {"T": "DT_FLOAT"}),
        ("sqrt", "Sqrt", ["sig"], {"T": "DT_FLOAT"}),
        ("add", "AddV2", ["exp", "sqrt"], {"T": "DT_FLOAT"}),
        ("out", "_Retval", ["add"], {"T": "DT_FLOAT", "index": 0}),
    ]
    if extra_consumer:
        nodes.append(("out2", "_Retval", ["tanh"], {"T": "DT_FLOAT", "index": 1}))
    g = graph_of(nodes)
    place(g, "cpu")
    return g


def test_chains_of_unary_ops_become_unary_ops_compositions_named_after_their_last_op():
    # arithmetic_optimizer.cc UnaryOpsComposition, as in TF 2.21's dump of build_models.py
    # `unary`: from the last node up, a root's input 0 joins the chain while it is a composable
    # unary op of the same T with one data consumer. `exp` has two consumers, so Sigmoid/Sqrt
    # form their own chain; Abs/Tanh/Exp form one, named `exp/unary_ops_composition`, with
    # op_names in application order.
    from jitsim.rewrites.grappler.arithmetic_optimizer import compose_unary_chains

    eg = EditGraph.from_graph(_unary_chain())
    rec = compose_unary_chains(eg)
    assert rec.count == 2
    c1, c2 = eg["exp/unary_ops_composition"], eg["sqrt/unary_ops_composition"]
    assert c1.op == c2.op == "_UnaryOpsComposition"
    assert [s.decode() for s in c1.attr["op_names"].list.s] == ["Abs", "Tanh", "Exp"]
    assert [s.decode() for s in c2.attr["op_names"].list.s] == ["Sigmoid", "Sqrt"]
    assert list(c1.input) == ["mm"] and list(c2.input) == ["exp/unary_ops_composition"]
    assert list(eg["add"].input) == ["exp/unary_ops_composition", "sqrt/unary_ops_composition"]
    assert not {"abs", "tanh", "exp", "sig", "sqrt"} & set(eg.names())


def test_a_chain_stops_at_a_shared_or_control_bound_op():
    # `tanh` read twice: the chain from `exp` stops above it (Exp alone is no chain), and `tanh`
    # roots Abs/Tanh. With a control input `tanh` cannot be composed at all.
    from jitsim.rewrites.grappler.arithmetic_optimizer import compose_unary_chains

    eg = EditGraph.from_graph(_unary_chain(extra_consumer=True))
    compose_unary_chains(eg)
    assert "exp" in eg and "tanh/unary_ops_composition" in eg
    assert [s.decode() for s in eg["tanh/unary_ops_composition"].attr["op_names"].list.s] == ["Abs", "Tanh"]
    eg = EditGraph.from_graph(_unary_chain(ctrl=True))
    compose_unary_chains(eg)
    assert {"abs", "tanh", "exp"} <= set(eg.names())


def _tile_graph(multiples):
    """``Tile(Reshape(g, []), multiples)``: the gradient of a sum over a scalar (TF1's losses
    build ``Sum_1_grad/Tile`` by ``[]``), and ``Tile(v, multiples)`` of a vector."""
    i32 = lambda v: const(v, "DT_INT32")
    mult = protos.AttrValue()
    mult.tensor.dtype = protos.DataType.values_by_name["DT_INT32"].number
    mult.tensor.tensor_shape.dim.add(size=len(multiples))
    mult.tensor.int_val.extend(multiples)
    return graph_of([("v", "_Arg", [], {"T": "DT_FLOAT", "index": 0}),
                  ("shape", "Const", [], {"dtype": "DT_INT32", "value": i32(1)}),
                  ("mult", "Const", [], {"dtype": "DT_INT32", "value": mult}),
                  ("tile", "Tile", ["v", "mult"], {"T": "DT_FLOAT", "Tmultiples": "DT_INT32"}),
                  ("out", "_Retval", ["tile"], {"T": "DT_FLOAT", "index": 0})])


@pytest.mark.parametrize("multiples, simplified", [([], True), ([1, 1], True), ([1, 2], False)])
def test_tile_by_ones_becomes_identity(multiples, simplified):
    # TF's ConstantFolding::SimplifyTile: a Tile whose multiples come from a Const node with
    # every entry 1 (an empty vector vacuously) repeats nothing and becomes Identity(input) with
    # ^multiples (ReplaceOperationWithIdentity), whatever the input's shape; any other entry
    # keeps the Tile.
    eg = EditGraph.from_graph(_tile_graph(multiples))
    rec = fold_constants(eg)
    if simplified:
        assert eg["tile"].op == "Identity" and list(eg["tile"].input) == ["v", "^mult"]
        assert set(eg["tile"].attr) == {"T"} and "Tile by ones to Identity" in rec.by_kind
    else:
        assert eg["tile"].op == "Tile"


def _cond_reading_its_predicate():
    """A lowered ``tf.cond(p, then, else)`` whose branches read ``p`` (TF 2.21's lowering of
    ``tf.cond(p, lambda: relu(y) * cast(p), lambda: tanh(y) + cast(not p))``): ``switch_pred`` =
    Switch(p, p) feeds the pivots; the branches' own input ``cond/p/_6`` = Switch(p, p) too."""
    b, f = {"T": "DT_BOOL"}, {"T": "DT_FLOAT"}
    return graph_of([("y", "_Arg", [], {"T": "DT_FLOAT", "index": 0}),
                  ("p", "_Arg", [], {"T": "DT_BOOL", "index": 1}),
                  ("cond/switch_pred/_2", "Switch", ["p", "p"], b),
                  ("cond/pivot_f/_3", "Identity", ["cond/switch_pred/_2"], b),
                  ("cond/pivot_t/_4", "Identity", ["cond/switch_pred/_2:1"], b),
                  ("cond/p/_6", "Switch", ["p", "p"], b),
                  ("cond/y/_5", "Switch", ["y", "p"], f),
                  ("cond/else/Tanh", "Tanh", ["cond/y/_5", "^cond/pivot_f/_3"], f),
                  ("cond/else/Not", "LogicalNot", ["cond/p/_6", "^cond/pivot_f/_3"], {}),
                  ("cond/else/Cast", "Cast", ["cond/else/Not"], {"SrcT": "DT_BOOL", "DstT": "DT_FLOAT"}),
                  ("cond/else/add", "AddV2", ["cond/else/Tanh", "cond/else/Cast"], f),
                  ("cond/then/Relu", "Relu", ["cond/y/_5:1", "^cond/pivot_t/_4"], f),
                  ("cond/then/Cast", "Cast", ["cond/p/_6:1", "^cond/pivot_t/_4"], {"SrcT": "DT_BOOL", "DstT": "DT_FLOAT"}),
                  ("cond/then/mul", "Mul", ["cond/then/Relu", "cond/then/Cast"], f),
                  ("cond/output", "Merge", ["cond/then/mul", "cond/else/add"], {"T": "DT_FLOAT", "N": 2}),
                  ("out", "_Retval", ["cond/output"], {"T": "DT_FLOAT", "index": 0})])


def test_switch_of_a_predicate_on_itself_becomes_constants():
    # TF's ConstantFolding::SimplifySwitch, as TF 2.21's dump of that cond shows it: the
    # branches' Switch(p, p) forwards false on port 0 and true on port 1, so its data uses
    # read Consts ConstantFolding/<switch>_const_false|true, each anchored on its port by a new
    # Identity ConstantFoldingCtrl/<switch>_<port>; folding then makes the branches' Casts
    # constants carrying those anchors (TF: cond/else/_1/cond/Cast = Const with
    # ^ConstantFoldingCtrl/cond/p/_6_0 and ^pivot_f), and x * 1 in the then branch goes.
    # switch_pred is left alone: its outputs feed the two pivots, Identities without data
    # consumers (the form the rewrite leaves).
    eg = EditGraph.from_graph(_cond_reading_its_predicate())
    rec = fold_constants(eg)
    assert rec.by_kind.get("Switch(p, p) outputs to constants") == 1
    assert list(eg["ConstantFoldingCtrl/cond/p/_6_0"].input) == ["cond/p/_6"]
    assert list(eg["ConstantFoldingCtrl/cond/p/_6_1"].input) == ["cond/p/_6:1"]
    assert eg["cond/else/Cast"].op == "Const"
    assert sorted(eg["cond/else/Cast"].input) == ["^ConstantFoldingCtrl/cond/p/_6_0", "^cond/pivot_f/_3"]
    assert eg["cond/then/Cast"].op == "Const"
    assert eg["cond/then/mul"].op == "Identity"  # x * 1, simplified right after folding
    assert "ConstantFolding/cond/switch_pred/_2_const_false" not in eg
    # already simplified: a second run changes nothing
    assert fold_constants(eg).by_kind.get("Switch(p, p) outputs to constants") is None


# -- the arithmetic optimizer's ConvertPow stage (issue 41) ----------------------------------


def _pow_graph(values, device=CPU):
    """x -> Pow(x, c) -> out, c a Const of ``values`` (float32, shape [len] or scalar)."""
    import numpy as np

    from graphs import arg, graph, node, op, ret
    from jitsim.rewrites.folding.tensors import to_tensor_proto

    g = graph(arg("x"), node("c", "Const"), op("m/p", "Pow", "x", "c"), ret("out", "m/p"))
    eg = EditGraph(g.graphdef)
    c = eg["c"]
    c.attr["dtype"].type = DT_FLOAT
    to_tensor_proto(np.array(values, dtype="float32"), DT_FLOAT, c.attr["value"].tensor)
    for nd in eg.nodes.values():
        nd.device = device
    return eg


@pytest.mark.parametrize("value,op_", [(2.0, "Square"), (0.5, "Sqrt"), (-0.5, "Rsqrt"), (-1.0, "Reciprocal"),
                                       ([2.0, 2.0, 2.0], "Square")])
def test_pow_by_a_constant_becomes_the_unary_op(value, op_):
    """TF's ConvertPowStage: the exponent, all elements equal, picks the op; the Const stays
    as a control input (arithmetic_optimizer.cc sets input 1 to ``^c``)."""
    from jitsim.rewrites.grappler.arithmetic_optimizer import convert_pow

    eg = _pow_graph(value)
    convert_pow(eg)
    assert eg["m/p"].op == op_ and list(eg["m/p"].input) == ["x", "^c"]


def test_a_cube_is_a_mul_by_a_new_square_on_the_cpu_only():
    """x**3 on a CPU: Mul(x, Square(x)), the square named as TF names it
    (``<scope>/ArithmeticOptimizer/ConvertPow__inner_<name>``); on a GPU TF leaves it."""
    from jitsim.rewrites.grappler.arithmetic_optimizer import convert_pow

    eg = _pow_graph(3.0)
    convert_pow(eg)
    inner = "m/ArithmeticOptimizer/ConvertPow__inner_p"
    assert eg["m/p"].op == "Mul" and list(eg["m/p"].input) == ["x", inner, "^c"]
    assert eg[inner].op == "Square" and list(eg[inner].input) == ["x"] and eg[inner].device == CPU
    gpu = _pow_graph(3.0, device="/job:localhost/replica:0/task:0/device:GPU:0")
    convert_pow(gpu)
    assert gpu["m/p"].op == "Pow" and inner not in gpu.nodes


@pytest.mark.parametrize("value", [[2.0, 3.0], 1.5, 1.0])
def test_pow_left_alone(value):
    """Exponents that differ, one TF has no rewrite for, and 1 where x's shape is not known to
    be the output's (TF's Identity rewrite needs symbolically equal shapes): still a Pow."""
    from jitsim.rewrites.grappler.arithmetic_optimizer import convert_pow

    eg = _pow_graph(value)
    convert_pow(eg)
    assert eg["m/p"].op == "Pow" and list(eg["m/p"].input) == ["x", "c"]


@pytest.mark.parametrize("op_,want_op,order", [("RealDiv", "Mul", "x_first"), ("Div", "Mul", "x_first"),
                                               ("Xdivy", "MulNoNan", "recip_first")])
def test_division_by_a_constant_is_a_product_by_its_reciprocal(op_, want_op, order):
    """TF's ReduceDivToReciprocalMul (constant folding): ``x / 4`` becomes ``x * 0.25``, the
    reciprocal a new constant ``ConstantFolding/<name>_recip`` (TF makes it a Reciprocal node and
    folds it in its next round); the 4 goes, nothing else reads it. Xdivy becomes MulNoNan with
    the reciprocal first (constant_folding.cc swaps the inputs)."""
    import numpy as np

    from jitsim.rewrites.folding.tensors import tensor_proto_to_numpy
    from jitsim.rewrites.grappler.constant_folding import reduce_div_to_reciprocal_mul

    eg = _pow_graph(4.0)
    eg["m/p"].op = op_
    reduce_div_to_reciprocal_mul(eg)
    r = "ConstantFolding/m/p_recip"
    assert eg["m/p"].op == want_op
    assert list(eg["m/p"].input) == (["x", r] if order == "x_first" else [r, "x"])
    assert eg[r].op == "Const" and eg[r].device == CPU
    assert float(tensor_proto_to_numpy(eg[r].attr["value"].tensor)) == np.float32(0.25)
    assert "c" not in eg.nodes


def test_an_integer_division_by_a_constant_stays():
    """``Div`` of integers is skipped by TF (``IsDiv && !floating``)."""
    from jitsim.rewrites.grappler.constant_folding import reduce_div_to_reciprocal_mul

    eg = _pow_graph(4.0)
    eg["m/p"].op = "Div"
    eg["m/p"].attr["T"].type = 3  # DT_INT32
    reduce_div_to_reciprocal_mul(eg)
    assert eg["m/p"].op == "Div" and list(eg["m/p"].input) == ["x", "c"]


# -- issue 41: AddOpsRewrite, cast reordering, equal-input aggregations, canonical inputs ---

def _shaped(nodes):
    """An EditGraph on the CPU of ``(name, op, inputs, dims)``: float nodes recording their shape."""
    items = []
    for name, op_, inputs, dims in nodes:
        attrs = {"T": "DT_FLOAT", "_output_shapes": shapes_attr(*dims)}
        if op_ in ("Placeholder", "_Arg"):
            attrs = {"dtype": "DT_FLOAT", "_output_shapes": shapes_attr(*dims)}
        items.append((name, op_, inputs, attrs))
    eg = EditGraph.from_graph(graph_of(items))
    for nd in eg.nodes.values():
        nd.device = CPU
    return eg


def _layer_norm_tree():
    # Keras LayerNormalization's end, as TF 2.21's dump of the zoo's mlp holds it:
    # add_1 = mul_1 + r (r: the reshaped beta, [1, 64]), add_2 = mul_2 + add_1, read by out
    return _shaped([("x", "Placeholder", [], (2, 64)), ("r", "Placeholder", [], (1, 64)),
                    ("ln/mul_1", "Relu", ["x"], (2, 64)), ("ln/mul_2", "Tanh", ["x"], (2, 64)),
                    ("ln/add_1", "AddV2", ["ln/mul_1", "r"], (2, 64)),
                    ("ln/add_2", "AddV2", ["ln/mul_2", "ln/add_1"], (2, 64)),
                    ("out", "Relu", ["ln/add_2"], (2, 64))])


def test_add_tree_becomes_addn_per_shape_as_tf_names_it():
    """TF's AddOpsRewriteStage, checked against TF 2.21's dump of Keras' LayerNormalization
    (the zoo's mlp: ``.../ArithmeticOptimizer/AddOpsRewrite_Leaf_1_add_2`` = AddN(mul_1, mul_2),
    ``.../AddOpsRewrite_add_2`` = AddV2 of it and Reshape_1). The tree's inputs, found depth
    first from the root: mul_2 [2,64], mul_1 [2,64], r [1,64]. Two shapes: the smaller, [1,64], is
    leaf 0, a single input, so no AddN; leaf 1 is AddN of the two [2,64] inputs; the root is an
    AddV2 of leaf 0 and leaf 1; the consumer reads it and the old Adds are gone."""
    from jitsim.rewrites.grappler.arithmetic_optimizer import add_ops_rewrite

    eg = _layer_norm_tree()
    rec = add_ops_rewrite(eg)
    leaf, root = "ln/ArithmeticOptimizer/AddOpsRewrite_Leaf_1_add_2", "ln/ArithmeticOptimizer/AddOpsRewrite_add_2"
    assert eg[leaf].op == "AddN" and sorted(eg[leaf].input) == ["ln/mul_1", "ln/mul_2"]
    assert eg[leaf].attr["N"].i == 2 and eg[leaf].device == CPU
    assert eg[root].op == "AddV2" and list(eg[root].input) == ["r", leaf]
    assert list(eg["out"].input) == [root]
    assert "ln/add_1" not in eg and "ln/add_2" not in eg and rec.count == 1


def test_add_tree_of_one_shape_is_one_addn():
    """All inputs of one shape: one AddN under the root's rewritten name, nothing else."""
    from jitsim.rewrites.grappler.arithmetic_optimizer import add_ops_rewrite

    eg = _shaped([("a", "Placeholder", [], (4,)), ("b", "Placeholder", [], (4,)), ("c", "Placeholder", [], (4,)),
                  ("s/x", "AddV2", ["a", "b"], (4,)), ("s/y", "Add", ["s/x", "c"], (4,)),
                  ("out", "Relu", ["s/y"], (4,))])
    add_ops_rewrite(eg)
    new = "s/ArithmeticOptimizer/AddOpsRewrite_y"
    assert eg[new].op == "AddN" and list(eg[new].input) == ["a", "b", "c"] and list(eg["out"].input) == [new]


@pytest.mark.parametrize("why", ["two consumers", "lone", "control input", "unknown shape"])
def test_add_trees_tf_leaves_alone(why):
    """An inner Add read twice is not absorbed (TF: one data consumer), so the root takes no
    other node and is left; a lone Add likewise; a node with a control input is not a root;
    without the root's shape TF's stage does not run on it (jitsim says where, as uncertain)."""
    from jitsim.rewrites.grappler.arithmetic_optimizer import add_ops_rewrite

    eg = _layer_norm_tree()
    if why == "two consumers":
        eg.add("other", "Relu", ["ln/add_1"], device=CPU)
    elif why == "lone":
        eg.set_inputs("ln/add_2", ["ln/mul_2", "ln/mul_1"])
    elif why == "control input":
        eg.set_inputs("ln/add_2", ["ln/mul_2", "ln/add_1", "^x"])
    else:
        del eg["ln/add_2"].attr["_output_shapes"]
    found = []
    add_ops_rewrite(eg, uncertain=found)
    assert "ln/add_2" in eg and eg["ln/add_2"].op == "AddV2"
    assert not any("AddOpsRewrite" in n for n in eg.nodes)
    assert bool(found) == (why == "unknown shape")


def test_widening_cast_moves_after_and_narrowing_cast_before_a_value_preserving_op():
    """TF's ReorderCastLikeAndValuePreserving, as TF 2.21's dump of the zoo's distilbert holds
    it: ``Cast(ExpandDims(mask: int32) -> bool)`` (a narrowing cast after a value-preserving op)
    becomes ``ExpandDims(Cast(mask))``: the new Cast (named after the consumer and its source
    type, ``..._int32_Cast``) reads the mask, the new ExpandDims (named after the producer and
    the cast's destination type, ``..._bool_ExpandDims``) is of bool and feeds the consumers."""
    from jitsim.rewrites.grappler.arithmetic_optimizer import reorder_cast_like

    eg = EditGraph.from_graph(graph_of([
        ("mask", "Placeholder", [], {"dtype": "DT_INT32"}), ("t/dim", "Const", [], {"dtype": "DT_INT32"}),
        ("t/ExpandDims", "ExpandDims", ["mask", "t/dim"], {"T": "DT_INT32", "Tdim": "DT_INT32"}),
        ("a/Cast", "Cast", ["t/ExpandDims"], {"SrcT": "DT_INT32", "DstT": "DT_BOOL"}),
        ("out", "LogicalNot", ["a/Cast"])]))
    for nd in eg.nodes.values():
        nd.device = CPU
    reorder_cast_like(eg)
    cast = "a/ArithmeticOptimizer/ReorderCastLikeAndValuePreserving_int32_Cast"
    expand = "t/ArithmeticOptimizer/ReorderCastLikeAndValuePreserving_bool_ExpandDims"
    assert eg[cast].op == "Cast" and list(eg[cast].input) == ["mask"]
    assert eg[expand].op == "ExpandDims" and list(eg[expand].input) == [cast, "t/dim"]
    assert eg[expand].attr["T"].type == 10  # DT_BOOL
    assert list(eg["out"].input) == [expand] and "a/Cast" not in eg


def test_a_sum_of_one_tensor_with_itself_is_a_product():
    """TF's SimplifyAggregation (NASNet's ``Add(x, x)`` in TF's dump): ``Mul(c, x)`` with ``c``
    a scalar Const of the input count, anchored on x's node."""
    from jitsim.rewrites.folding.tensors import tensor_proto_to_numpy
    from jitsim.rewrites.grappler.arithmetic_optimizer import simplify_aggregation

    eg = _shaped([("x", "Placeholder", [], (3,)), ("n/Add", "Add", ["x", "x"], (3,)), ("out", "Relu", ["n/Add"], (3,))])
    simplify_aggregation(eg)
    c, m = "n/ArithmeticOptimizer/SimplifyAggregation_Const_Add", "n/ArithmeticOptimizer/SimplifyAggregation_Mul_Add"
    assert eg[m].op == "Mul" and list(eg[m].input) == [c, "x"] and list(eg["out"].input) == [m]
    assert list(eg[c].input) == ["^x"] and float(tensor_proto_to_numpy(eg[c].attr["value"].tensor)) == 2.0


def test_cse_canonicalizes_commutative_inputs_and_control_inputs():
    """TF's CanonicalizeGraph, run first by common-subgraph elimination (checked in TF 2.21's
    per-optimizer dumps: an AddV2 of (Reshape_1, AddOpsRewrite_Leaf_1) comes out as (Leaf_1,
    Reshape_1)): a commutative op's data inputs sorted by name, control inputs sorted and
    deduplicated; a non-commutative op (Maximum's OpDef is not marked commutative) kept."""
    eg = _shaped([("b", "Placeholder", [], (2,)), ("a", "Placeholder", [], (2,)),
                  ("m", "Mul", ["b", "a", "^b", "^a", "^b"], (2,)), ("x", "Maximum", ["b", "a"], (2,)),
                  ("o", "AddN", ["m", "x"], (2,))])
    eg.add("r", "_Retval", ["o"], device=CPU)
    eliminate_common_subgraphs(eg)
    assert list(eg["m"].input) == ["a", "b", "^a", "^b"]
    assert list(eg["x"].input) == ["b", "a"]


def test_model_pruner_removes_trivial_identities():
    """TF's ModelPruner removes an Identity not driven by a control edge or a Switch and not
    driving a control edge or a Merge (TF 2.21's after_model_pruner dump of a Keras call keeps
    1 of the inliner's 11 Func/ Identities); one read by a control edge stays."""
    from jitsim.rewrites.grappler.model_pruner import remove_trivial_ops

    eg = _shaped([("x", "Placeholder", [], (2,)), ("Func/input/_0", "Identity", ["x"], (2,)),
                  ("y", "Relu", ["Func/input/_0"], (2,)), ("i2", "Identity", ["y"], (2,)),
                  ("z", "Relu", ["i2"], (2,)), ("w", "Relu", ["y", "^i2"], (2,))])
    remove_trivial_ops(eg)
    assert "Func/input/_0" not in eg and list(eg["y"].input) == ["x"]
    assert "i2" in eg


def test_the_route_says_which_rewrites_it_was_not_sure_of():
    """A layer-norm-like Add tree whose root shape is unknown: TF (knowing it) may rewrite it as
    AddN, jitsim cannot tell, and the prepared graph says where (Prepared.uncertain, the JSON's
    route.uncertain)."""
    g = graph_of([("x", "_Arg", [], {"T": "DT_FLOAT", "index": 0, "_output_shapes": shapes_attr(2, 4)}),
                  ("a", "Relu", ["x"], {"T": "DT_FLOAT", "_output_shapes": shapes_attr(2, 4)}),
                  ("b", "Tanh", ["x"], {"T": "DT_FLOAT", "_output_shapes": shapes_attr(2, 4)}),
                  ("s1", "AddV2", ["a", "b"], {"T": "DT_FLOAT", "_output_shapes": shapes_attr(2, 4)}),
                  ("s2", "AddV2", ["s1", "x"], {"T": "DT_FLOAT"}),
                  ("r", "_Retval", ["s2"], {"T": "DT_FLOAT", "index": 0})])
    p = prepare_without_tf(g)
    u = [e for e in p.uncertain if e["rewrite"] == "arithmetic_optimizer/AddOpsRewrite"]
    assert u and u[0]["nodes"] == ["s2"] and u[0]["count"] == 1 and "shape" in u[0]["why"]
    # with the root's shape known the tree is rewritten and nothing is uncertain about it
    gd = g.to_graphdef()
    for nd in gd.node:
        if nd.name == "s2":
            nd.attr["_output_shapes"].CopyFrom(gd.node[1].attr["_output_shapes"])
    p2 = prepare_without_tf(Graph(gd, validate=False))
    assert not [e for e in p2.uncertain if e["rewrite"] == "arithmetic_optimizer/AddOpsRewrite"]
    assert any("AddOpsRewrite" in n.name for n in p2.graph)


def test_output_identity_goes_once_its_control_edges_are_redundant():
    """TF's dependency optimizer on a tf.function's tail (its dump of the zoo's attention
    export called as a function: Identity and NoOp gone after iteration 0): the NoOp the
    output Identity waits on is bypassed, handing the Identity its control inputs (reads);
    TransitiveReduction then drops them, since each read already reaches the Identity through
    the data path, and the Identity, down to one input, is bypassed (its _Retval reads y)."""
    eg = EditGraph.from_graph(graph_of([
        ("r1", "Placeholder", [], {"dtype": "DT_FLOAT"}), ("r2", "Placeholder", [], {"dtype": "DT_FLOAT"}),
        ("y", "AddV2", ["r1", "r2"], {"T": "DT_FLOAT"}),
        ("NoOp", "NoOp", ["^r1", "^r2"]),
        ("Identity", "Identity", ["y", "^NoOp"], {"T": "DT_FLOAT"}),
        ("ret", "_Retval", ["Identity"], {"T": "DT_FLOAT", "index": 0})]))
    for nd in eg.nodes.values():
        nd.device = CPU
    optimize_dependencies(eg, fetch_known=True)
    assert "NoOp" not in eg and "Identity" not in eg
    assert list(eg["ret"].input) == ["y"]


def test_constant_folding_folds_then_simplifies_until_nothing_changes():
    """TF's ConstantFolding pass folds, then simplifies, and repeats while the graph changes
    (its dump of the zoo's Gemma call: the rotary embedding's ``x / 1`` of a folded power, then
    the Einsum reading it, are constants after the first constant-folding run). Here ``d =
    (2 ** 3) / 1`` folds to 8 (the division by one folded, not made an Identity first) and
    ``e = d * c`` to a constant in the same run."""
    from jitsim.rewrites.folding.tensors import numpy, to_tensor_proto

    np = numpy()
    eg = EditGraph.from_graph(graph_of([
        ("two", "Const", [], {"dtype": "DT_FLOAT"}), ("three", "Const", [], {"dtype": "DT_FLOAT"}),
        ("one", "Const", [], {"dtype": "DT_FLOAT"}), ("c", "Const", [], {"dtype": "DT_FLOAT"}),
        ("p", "Pow", ["two", "three"], {"T": "DT_FLOAT"}), ("d", "RealDiv", ["p", "one"], {"T": "DT_FLOAT"}),
        ("e", "Mul", ["d", "c"], {"T": "DT_FLOAT"}),
        ("x", "_Arg", [], {"T": "DT_FLOAT", "index": 0}), ("y", "AddV2", ["x", "e"], {"T": "DT_FLOAT"}),
        ("r", "_Retval", ["y"], {"T": "DT_FLOAT", "index": 0})]))
    for name, v in (("two", 2.0), ("three", 3.0), ("one", 1.0), ("c", 0.5)):
        to_tensor_proto(np.array(v, dtype=np.float32), 1, eg[name].attr["value"].tensor)
    fold_constants(eg)
    assert eg["e"].op == "Const" and "p" not in eg and "d" not in eg


def test_remapper_walks_the_graph_in_mutable_graph_view_order():
    """TF's remapper sorts with utils::MutableGraphView::SortTopologically (a reversed post-order
    of depth-first walks from the sources, last source first) and the dependency optimizer
    then re-sorts with Grappler's TopologicalSort: checked on TF's per-optimizer dumps of the
    zoo's Gemma, Llama and ViT calls, whose orders after both optimizers jitsim now gives node
    for node. Here: the two sorts differ (the DFS takes b's chain before a's)."""
    from jitsim.graph.graphedit import dfs_topological_order, tf_topological_order

    eg = EditGraph.from_graph(graph_of([("a", "Const", []), ("b", "Const", []), ("c", "AddV2", ["b", "a"]),
                                        ("d", "Neg", ["a"]), ("e", "AddV2", ["c", "c"])]))
    assert dfs_topological_order(eg) == ["a", "d", "b", "c", "e"]
    assert tf_topological_order(eg) == ["a", "b", "d", "c", "e"]


def test_lowered_while_control_consumers_wait_on_loop_executed():
    """TF's LowerWhileHelper (lower_while_op.cc, checked on its dump of the zoo's bidirectional
    GRU call before Grappler): the While's control consumers wait on ``W/LoopExecuted/_N`` (the
    ``W`` NoOp is left unread), and each NextIteration waits on the body call as well as
    reading it (after inlining: on the body's control outputs)."""
    cond_f = fdef("c", [("i", DT_FLOAT)], [("o", 10, "l:z:0")], [
        ("k", "Const", [], {"dtype": "DT_FLOAT", "value": const(3.0)}),
        ("l", "Less", ["i", "k:output:0"], {"T": "DT_FLOAT"}),
    ])
    body_f = fdef("b", [("i", DT_FLOAT)], [("o", DT_FLOAT, "a:y:0")], [
        ("a", "Neg", ["i"], {"T": "DT_FLOAT"}),
    ])
    g = graph_of([
        ("i0", "_Arg", [], {"T": "DT_FLOAT", "index": 0}),
        ("loop", "While", ["i0"], {"cond": func_attr("c"), "body": func_attr("b"), "T": ["DT_FLOAT"],
                                   "parallel_iterations": 10, "_lower_using_switch_merge": True}),
        ("after", "NoOp", ["^loop"]),
        ("out", "_Retval", ["loop"], {"T": "DT_FLOAT", "index": 0}),
    ], [cond_f, body_f])
    res = lower_functional_ops(g, fetchable=False)
    executed = [n.name for n in res.graph if n.name.startswith("loop/LoopExecuted/")]
    assert len(executed) == 1
    assert [e.src for e in res.graph.in_edges("after")] == executed
    nexts = [n.name for n in res.graph if n.op == "NextIteration"]
    assert nexts and all(any(e.is_control for e in res.graph.in_edges(n)) for n in nexts)


def test_shape_n_outputs_of_known_shapes_become_constants():
    """TF's MaterializeShapes for ShapeN (its dump of the zoo's hand-written training step:
    ``ConstantFolding/gradient_tape/ShapeN-matshapes-1``): the output whose input has a fully
    known shape ([3, 4]) becomes a constant waiting on the ShapeN, read in its place; the
    output of the unknown shape stays."""
    from jitsim.rewrites.folding.tensors import tensor_proto_to_numpy

    eg = EditGraph.from_graph(graph_of([
        ("x", "_Arg", [], {"T": "DT_FLOAT", "index": 0, "_output_shapes": shapes_attr(-1, 3)}),
        ("w", "_Arg", [], {"T": "DT_FLOAT", "index": 1, "_output_shapes": shapes_attr(3, 4)}),
        ("g/ShapeN", "ShapeN", ["x", "w"], {"T": "DT_FLOAT", "N": 2, "out_type": "DT_INT32"}),
        ("a", "Identity", ["g/ShapeN"], {"T": "DT_INT32"}), ("b", "Identity", ["g/ShapeN:1"], {"T": "DT_INT32"}),
        ("ra", "_Retval", ["a"], {"T": "DT_INT32", "index": 0}),
        ("rb", "_Retval", ["b"], {"T": "DT_INT32", "index": 1})]))
    fold_constants(eg)
    c = "ConstantFolding/g/ShapeN-matshapes-1"
    assert eg[c].op == "Const" and list(eg[c].input) == ["^g/ShapeN"]
    assert list(tensor_proto_to_numpy(eg[c].attr["value"].tensor)) == [3, 4]
    assert list(eg["b"].input) == [c] and list(eg["a"].input) == ["g/ShapeN"]
    assert "ConstantFolding/g/ShapeN-matshapes-0" not in eg


def test_a_concat_read_only_by_a_concat_on_its_axis_is_merged_into_it():
    """TF's MergeConcat (its dump of the zoo's InceptionV3 call: the mixed blocks' inner
    ``concatenate`` nodes are gone, their tensors concatenated by the block's own ConcatV2):
    ``outer = concat([inner, c], 3)`` with ``inner = concat([a, b], 3)`` read by ``outer`` only
    becomes ``concat([a, b, c], 3)``, ``inner`` a NoOp waiting on what it read."""
    from jitsim.rewrites.folding.tensors import numpy, to_tensor_proto

    np = numpy()
    eg = EditGraph.from_graph(graph_of([
        ("a", "_Arg", [], {"T": "DT_FLOAT", "index": 0}), ("b", "_Arg", [], {"T": "DT_FLOAT", "index": 1}),
        ("c", "_Arg", [], {"T": "DT_FLOAT", "index": 2}),
        ("ax", "Const", [], {"dtype": "DT_INT32"}), ("ax2", "Const", [], {"dtype": "DT_INT32"}),
        ("inner", "ConcatV2", ["a", "b", "ax"], {"T": "DT_FLOAT", "N": 2, "Tidx": "DT_INT32"}),
        ("outer", "ConcatV2", ["inner", "c", "ax2"], {"T": "DT_FLOAT", "N": 2, "Tidx": "DT_INT32"}),
        ("r", "_Retval", ["outer"], {"T": "DT_FLOAT", "index": 0})]))
    for n in ("ax", "ax2"):
        to_tensor_proto(np.array(3, dtype=np.int32), 3, eg[n].attr["value"].tensor)
    fold_constants(eg)
    assert list(eg["outer"].input) == ["a", "b", "c", "ax2"] and eg["outer"].attr["N"].i == 3
    assert "inner" not in eg or eg["inner"].op == "NoOp"


def test_an_export_without_variable_shapes_gets_them_from_their_uses():
    """A ConcreteFunction's GraphDef (``cf.graph.as_graph_def()``) holds its variables as shapeless
    resource Placeholders. Two Dense layers on x [2, 8] (kernels and biases of unknown shape,
    Keras 3's MatMul + AddV2) summed with a residual r [2, 16]: TF, knowing the variables' shapes
    in the call, groups the Add tree's leaves by shape: the MatMuls and r ([2, 16]) in one AddN,
    the two [16] biases in another (``Leaf_0`` is the smaller shape). jitsim reads the kernels'
    and biases' shapes back from their uses (the residual says the Dense output is [2, 16]; a
    shapeless variable added to it is a bias, [16]), rewrites the tree as TF does and lists the
    variables whose shapes it took under ``route.uncertain``."""
    def dense(i):
        return [(f"k{i}", "Placeholder", [], {"dtype": "DT_RESOURCE"}),
                (f"b{i}", "Placeholder", [], {"dtype": "DT_RESOURCE"}),
                (f"k{i}/read", "ReadVariableOp", [f"k{i}"], {"dtype": "DT_FLOAT"}),
                (f"b{i}/read", "ReadVariableOp", [f"b{i}"], {"dtype": "DT_FLOAT"}),
                (f"mm{i}", "MatMul", ["x", f"k{i}/read"], {"T": "DT_FLOAT"}),
                (f"d{i}", "AddV2", [f"mm{i}", f"b{i}/read"], {"T": "DT_FLOAT"})]
    shape = protos.AttrValue()
    for d in (2, 8):
        shape.shape.dim.add(size=d)
    rshape = protos.AttrValue()
    for d in (2, 16):
        rshape.shape.dim.add(size=d)
    g = graph_of([("x", "Placeholder", [], {"dtype": "DT_FLOAT", "shape": shape}),
                  ("r", "Placeholder", [], {"dtype": "DT_FLOAT", "shape": rshape})] + dense(1) + dense(2) + [
                  ("s1", "AddV2", ["d1", "d2"], {"T": "DT_FLOAT"}),
                  ("s2", "AddV2", ["s1", "r"], {"T": "DT_FLOAT"}),
                  ("out", "Identity", ["s2"], {"T": "DT_FLOAT"})])
    p = prepare_without_tf(g)
    names = {n.name: n for n in p.graph}
    leaf0 = names["ArithmeticOptimizer/AddOpsRewrite_Leaf_0_s2"]
    leaf1 = names["ArithmeticOptimizer/AddOpsRewrite_Leaf_1_s2"]
    assert leaf0.op == leaf1.op == "AddN"
    assert sorted(leaf0.nodedef.input) == ["b1/read", "b2/read"]
    assert sorted(leaf1.nodedef.input) == ["mm1", "mm2", "r"]
    u = [e for e in p.uncertain if e["rewrite"] == "shape_inference"]
    assert u and sorted(u[0]["nodes"]) == ["b1", "b2", "k1", "k2"] and "uses" in u[0]["why"]
