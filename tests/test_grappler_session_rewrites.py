"""Grappler rewrites that TF 1 session programs showed missing (issue 41), each a small graph
with the outcome TF's per-optimizer dumps show (``TF_CPP_VMODULE=meta_optimizer=4`` beside
``TF_DUMP_GRAPH_PREFIX``, TF 2.21, of ``fixtures/tf1/partitioned_embedding.py``,
``mnist_softmax.py``, ``resource_adam.py``, ``feed_intermediate.py``, ``lstm_while_v2.py`` and
``ref_variables.py``; the rule is TF's ``grappler/optimizers`` source) and one end-to-end check
against a real TF run (marked ``tf``)."""

from __future__ import annotations

import numpy as np
import pytest

from graphs import graph_of
from jitsim.graph.graphedit import EditGraph
from jitsim.registry import protos
from jitsim.rewrites.folding.tensors import tensor_proto_to_numpy, to_tensor_proto
from jitsim.rewrites.grappler.arithmetic_optimizer import remove_redundant_reshapes, replace_mul_with_square
from jitsim.rewrites.grappler.common_subgraph_elimination import eliminate_common_subgraphs
from jitsim.rewrites.grappler.constant_folding import fold_constants
from jitsim.rewrites.grappler.dependency_optimizer import optimize_dependencies
from jitsim.rewrites.grappler.model_pruner import remove_trivial_ops
from jitsim.analyses.shape_inference import ShapeView

DT_FLOAT, DT_INT32 = 1, 3


def value(v, dtype=DT_INT32):
    av = protos.AttrValue()
    to_tensor_proto(np.asarray(v, dtype=np.int32 if dtype == DT_INT32 else np.float32), dtype, av.tensor)
    return av


def c(name, v, dtype=DT_INT32, inputs=(), **attrs):
    return (name, "Const", list(inputs), {"dtype": "DT_INT32" if dtype == DT_INT32 else "DT_FLOAT",
                                          "value": value(v, dtype), **attrs})


def ph(name, *dims, dtype="DT_FLOAT"):
    shape = protos.AttrValue()
    shape.shape.SetInParent()
    for d in dims:
        shape.shape.dim.add(size=d)
    return (name, "Placeholder", [], {"dtype": dtype, "shape": shape})


def ints_attr(*vals):
    av = protos.AttrValue()
    av.list.i.extend(vals)
    return av


def colocated(node):
    av = protos.AttrValue()
    av.list.s.append(f"loc:@{node}".encode())
    return av


def edit(nodes) -> EditGraph:
    return EditGraph.from_graph(graph_of(nodes))


def fold(eg, keep=("out",)):
    return fold_constants(eg, frozenset(keep), ShapeView(eg, infer=True))


def inputs(eg, name):
    return list(eg.nodes[name].input)


def test_fill_of_constants_is_materialized_with_its_inputs_as_control_inputs():
    # TF's MaterializeConstantValuedNode (dump: `gradients/Mean_grad/ones`, a Fill of two
    # constants, is a Const reading ^Shape_1 and ^range/delta and keeping its `_class`)
    eg = edit([c("dims", []), c("one", 1), ("ones", "Fill", ["dims", "one"], {"T": "DT_INT32",
                                                                           "_class": colocated("s")}),
               ph("x", 2), ("out", "Identity", ["x", "^ones"], {"T": "DT_FLOAT"})])
    fold(eg)
    nd = eg.nodes["ones"]
    assert nd.op == "Const" and inputs(eg, "ones") == ["^dims", "^one"]
    assert "_class" in nd.attr and "T" not in nd.attr
    assert tensor_proto_to_numpy(nd.attr["value"].tensor).tolist() == 1


def test_a_slice_of_a_constant_shape_waits_on_its_inputs_a_folded_node_does_not():
    # TF's MaterializeOutputValues: GraphProperties knows the value of a StridedSlice of an integer
    # vector (one-element begin/end/strides, no shrink): the node becomes a Const waiting on each
    # former input, once (dump: `Gather_grad/strided_slice` reads ^Const, ^stack, ^stack_1, its
    # `stack` read twice). A Range
    # of constants is folded by FoldGraph instead: no control inputs (dump: `Mean_grad/range`).
    eg = edit([c("shape", [250, 8]), c("b", [1]), c("e", [0]), c("s", [1]),
               ("sl", "StridedSlice", ["shape", "b", "e", "s"], {"T": "DT_INT32", "Index": "DT_INT32", "end_mask": 1}),
               c("start", 0), c("limit", 3), c("delta", 1),
               ("range", "Range", ["start", "limit", "delta"], {"Tidx": "DT_INT32"}),
               ("out", "IdentityN", ["sl", "range"], {"T": ["DT_INT32", "DT_INT32"]})])
    fold(eg)
    assert eg.nodes["sl"].op == "Const" and inputs(eg, "sl") == ["^shape", "^b", "^e", "^s"]
    assert tensor_proto_to_numpy(eg.nodes["sl"].attr["value"].tensor).tolist() == [8]
    assert eg.nodes["range"].op == "Const" and inputs(eg, "range") == []


def test_a_folded_constant_drops_class_and_cse_compares_it():
    # FoldNode replaces every attribute (`_class` too); CSE compares every attribute, so the
    # folded FloorMod merges with an identical folded constant, not with a Fill materialized
    # with its `_class` (dump: `Mean_grad/mod` goes into `concat_grad/mod`, `ones` stays)
    eg = edit([c("a", 1), c("two", 2), c("dims", []),
               ("mod1", "FloorMod", ["a", "two"], {"T": "DT_INT32", "_class": colocated("s")}),
               ("mod2", "FloorMod", ["a", "two"], {"T": "DT_INT32"}),
               ("ones", "Fill", ["dims", "a"], {"T": "DT_INT32", "_class": colocated("s")}),
               ("out", "IdentityN", ["mod1", "mod2", "ones"], {"T": ["DT_INT32"] * 3})])
    fold(eg)
    assert "_class" not in eg.nodes["mod1"].attr and "_class" in eg.nodes["ones"].attr
    optimize_dependencies(eg, frozenset({"out"}))  # the constants' control inputs go (below)
    eliminate_common_subgraphs(eg, frozenset({"out"}))
    assert "ones" in eg.nodes and ("mod1" in eg.nodes) != ("mod2" in eg.nodes)


def test_a_constant_without_inputs_loses_its_control_edges():
    # DependencyOptimizer: a Const without inputs runs early anyway, so control edges from it go
    # (dump: `grad_ys_0`, materialized with ^Shape and ^Const, has no inputs after iteration 0)
    eg = edit([c("k1", 1), c("k2", 2), c("filled", 1, inputs=["^k1", "^k2"]), ph("x", 2),
               ("out", "Identity", ["x", "^filled"], {"T": "DT_FLOAT"})])
    optimize_dependencies(eg, frozenset({"out"}))
    assert "k1" not in eg.nodes and "k2" not in eg.nodes and "filled" not in eg.nodes
    assert inputs(eg, "out") == ["x"]


def test_which_noop_survives_follows_tfs_worklist():
    # tf.group's NoOp `g` (^a, ^b) and the tuple Identities i1 = Identity(a, ^g), i2 =
    # Identity(b, ^g), each read by two ops. TF pops its worklist from the back: the
    # Identities go first (1 x 2 <= 1 + 2 each... counting data inputs: 2 inputs x 2 = 4 <= 4),
    # handing ^g to their four readers; g, with 2 inputs and 4 consumers (8 > 6), stays
    # (dump: `logistic_loss_grad/tuple/group_deps` is still there, read by the gradient ops).
    eg = edit([ph("x", 2), ("a", "Neg", ["x"], {"T": "DT_FLOAT"}), ("b", "Exp", ["x"], {"T": "DT_FLOAT"}),
               ("g", "NoOp", ["^a", "^b"]),
               ("i1", "Identity", ["a", "^g"], {"T": "DT_FLOAT"}), ("i2", "Identity", ["b", "^g"], {"T": "DT_FLOAT"}),
               ("r1", "Tanh", ["i1"], {"T": "DT_FLOAT"}), ("r2", "Sin", ["i1"], {"T": "DT_FLOAT"}),
               ("r3", "Cos", ["i2"], {"T": "DT_FLOAT"}), ("r4", "Abs", ["i2"], {"T": "DT_FLOAT"}),
               ("out", "IdentityN", ["r1", "r2", "r3", "r4"], {"T": ["DT_FLOAT"] * 4})])
    optimize_dependencies(eg, frozenset({"out"}))
    assert "i1" not in eg.nodes and "i2" not in eg.nodes and "g" in eg.nodes
    assert inputs(eg, "r1") == ["a", "^g"] and inputs(eg, "r4") == ["b", "^g"]


def test_an_identity_with_a_control_input_and_three_readers_stays():
    # BypassingNodeIsBeneficial counts every input: 2 inputs x 3 consumers = 6 > 5 (e is also
    # fetched, so it stays a real op and its control edge stays); with 2 readers, 4 <= 4: bypassed
    def g(readers):
        return edit([ph("x", 2), ("a", "Neg", ["x"], {"T": "DT_FLOAT"}), ("e", "Exp", ["x"], {"T": "DT_FLOAT"}),
                     ("i", "Identity", ["a", "^e"], {"T": "DT_FLOAT"})]
                    + [(f"r{k}", "Tanh", ["i"], {"T": "DT_FLOAT"}) for k in range(readers)]
                    + [("out", "IdentityN", ["e"] + [f"r{k}" for k in range(readers)],
                        {"T": ["DT_FLOAT"] * (readers + 1)})])
    three, two = g(3), g(2)
    optimize_dependencies(three, frozenset({"out"}))
    optimize_dependencies(two, frozenset({"out"}))
    assert "i" in three.nodes and "i" not in two.nodes
    assert inputs(two, "r0") == ["a", "^e"]


def test_concat_offset_of_constants_is_one_constant_per_output():
    # FoldNode of a node with several outputs: ConstantFolding/<name>-folded-<i> (dump: the LSTM
    # gradient's `concat_grad/ConcatOffset-folded-0` and `-folded-1`)
    eg = edit([c("axis", 1), c("s0", [2, 3]), c("s1", [2, 5]),
               ("off", "ConcatOffset", ["axis", "s0", "s1"], {"N": 2}),
               ("out", "IdentityN", ["off", "off:1"], {"T": ["DT_INT32"] * 2})])
    fold(eg)
    assert "off" not in eg.nodes
    assert inputs(eg, "out") == ["ConstantFolding/off-folded-0", "ConstantFolding/off-folded-1"]
    got = [tensor_proto_to_numpy(eg.nodes[f"ConstantFolding/off-folded-{i}"].attr["value"].tensor).tolist()
           for i in (0, 1)]
    assert got == [[0, 0], [0, 3]]


def test_a_pack_of_one_tensor_becomes_expand_dims():
    # SimplifyPack (dump: the loop body's `strided_slice/stack`, a Pack of the loop counter, is
    # an ExpandDims reading ConstantFolding/<name>_const_axis, which waits on the counter)
    eg = edit([ph("i", dtype="DT_INT32"), ("stack", "Pack", ["i"], {"T": "DT_INT32", "N": 1, "axis": 0}),
               ("neg", "Neg", ["i"], {"T": "DT_INT32"}), ("i2", "Identity", ["neg"], {"T": "DT_INT32"}),
               ("stack2", "Pack", ["i2"], {"T": "DT_INT32", "N": 1, "axis": 0}),
               ("out", "IdentityN", ["stack", "stack2"], {"T": ["DT_INT32"] * 2})])
    fold(eg)
    assert eg.nodes["stack"].op == "Pack"  # a fed Placeholder is not anchored on
    assert eg.nodes["stack2"].op == "ExpandDims"
    assert inputs(eg, "stack2") == ["i2", "ConstantFolding/stack2_const_axis"]
    assert inputs(eg, "ConstantFolding/stack2_const_axis") == ["^i2"]


def test_a_reshape_to_the_shape_it_has_is_an_identity():
    # SimplifyReshape (dump: `Sum_1_grad/Reshape` of a scalar to [] is Identity(x, ^Shape))
    eg = edit([ph("x", 2, 3), c("shape", [2, -1]), ("r", "Reshape", ["x", "shape"], {"T": "DT_FLOAT"}),
               ("out", "Tanh", ["r"], {"T": "DT_FLOAT"})])
    fold(eg)
    assert eg.nodes["r"].op == "Identity" and inputs(eg, "r") == ["x", "^shape"]


def test_one_over_y_is_a_reciprocal():
    # SimplifyArithmeticOperations' ReplaceDivisionOfOnesByReciprocal (dump: tf.clip_by_global_norm's
    # `truediv`, 1.0 / global_norm, is Reciprocal(global_norm)); DivNoNan is not one of TF's divisions
    eg = edit([ph("x", 2), c("one", 1.0, DT_FLOAT), ("d", "RealDiv", ["one", "x"], {"T": "DT_FLOAT"}),
               ("dn", "DivNoNan", ["one", "x"], {"T": "DT_FLOAT"}),
               ("out", "IdentityN", ["d", "dn"], {"T": ["DT_FLOAT"] * 2})])
    fold(eg)
    assert eg.nodes["d"].op == "Reciprocal" and inputs(eg, "d") == ["x", "^one"]
    assert eg.nodes["dn"].op == "DivNoNan"


def test_mul_of_a_tensor_by_itself_is_a_square():
    # ReplaceMulWithSquare (dump of feed_intermediate.py: `ArithmeticOptimizer/ReplaceMulWithSquare_mul_2`)
    eg = edit([ph("h", 3), ("mul_2", "Mul", ["h", "h"], {"T": "DT_FLOAT"}), ("out", "Tanh", ["mul_2"], {"T": "DT_FLOAT"})])
    replace_mul_with_square(eg)
    assert "mul_2" not in eg.nodes and inputs(eg, "out") == ["ArithmeticOptimizer/ReplaceMulWithSquare_mul_2"]
    assert eg.nodes["ArithmeticOptimizer/ReplaceMulWithSquare_mul_2"].op == "Square"


def test_a_ref_variables_read_identity_is_kept_and_has_the_variables_shape():
    # ModelPruner's CanRemoveNode keeps an Identity of a ref-typed output (`w1/read` of a
    # VariableV2); the variable's `shape` gives the read's shape (so the remapper can fuse
    # MatMul + bias add + Relu, as TF's dump of ref_variables.py shows)
    shape = protos.AttrValue()
    for d in (16, 32):
        shape.shape.dim.add(size=d)
    eg = edit([("w1", "VariableV2", [], {"dtype": "DT_FLOAT", "shape": shape}),
               ("w1/read", "Identity", ["w1"], {"T": "DT_FLOAT"}), ph("x", 8, 16),
               ("mm", "MatMul", ["x", "w1/read"], {"T": "DT_FLOAT"}), ("out", "Relu", ["mm"], {"T": "DT_FLOAT"})])
    remove_trivial_ops(eg, frozenset({"out"}))
    assert "w1/read" in eg.nodes
    assert ShapeView(eg, infer=True).shape(eg.nodes["w1/read"]) == (16, 32)


def test_a_reshape_to_its_own_size_is_removed():
    # RemoveRedundantReshape with TF's symbolic shapes: Reshape(x, [size(x)]) of a vector of
    # unknown length has x's own (symbolic) shape (dump: `Gather_grad/Reshape_1` of a
    # DynamicPartition output is gone)
    eg = edit([ph("ids", -1, dtype="DT_INT32"), ph("p", -1, dtype="DT_INT32"),
               ("part", "DynamicPartition", ["ids", "p"], {"T": "DT_INT32", "num_partitions": 2}),
               ("size", "Size", ["part"], {"T": "DT_INT32", "out_type": "DT_INT32"}), c("zero", 0),
               ("dims", "ExpandDims", ["size", "zero"], {"T": "DT_INT32", "Tdim": "DT_INT32"}),
               ("r", "Reshape", ["part", "dims"], {"T": "DT_INT32"}),
               ("out", "Unique", ["r"], {"T": "DT_INT32", "out_idx": "DT_INT32"})])
    remove_redundant_reshapes(eg, frozenset({"out"}), ShapeView(eg, infer=True))
    assert inputs(eg, "out") == ["part"]


@pytest.mark.tf
@pytest.mark.slow  # runs the program under TF (the slow stage; fixtures/tf1/results.json records the same)
def test_a_partitioned_embedding_training_step_is_exact_without_tf(tmp_path):
    """The issue's misleading class (a TF1 program with partitioned embedding variables): TF's
    clusters of the program's own sess.run, and the TF-free route's, from graph.pbtxt and
    model.meta with the call's fetches: the same clusters of the same nodes."""
    import json
    import sys
    from pathlib import Path

    import importlib.util

    root = Path(__file__).resolve().parents[1]
    sys.path[:0] = [str(root / "fixtures/tf1"), str(root / "fixtures/models")]
    try:  # loaded under its own name: tests/test_runtime.py imports another `measure`
        spec = importlib.util.spec_from_file_location("jitsim_tf1_measure", root / "fixtures/tf1/measure.py")
        tf1_measure = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(tf1_measure)
        from measure_no_tf import classify
    finally:
        del sys.path[:2]
    from jitsim.frontend.resolve import pass_inputs

    truth, files = tf1_measure.truth_of("partitioned_embedding", tmp_path)
    call = json.loads((files / "call.json").read_text())
    assert sum(1 for v in truth.values() if v) > 100
    for target in ("graph.pbtxt", "model.meta"):
        pin = pass_inputs(files / target, flags=tf1_measure.USER_FLAGS, tf="never", fetch=call["fetch"],
                          feed=call["feed"])
        assert classify(tf1_measure.simulate(pin), truth) == "exact", target


def test_constant_folding_does_not_know_a_feeds_shape():
    # Grappler's constant folding does not assume valid feeds: a fed tensor's shape is unknown
    # to it, so `1.0 * squared_difference(x, out)` of a fed x stays a Mul (TF's dump of the
    # autoencoder's `mean_squared_error/Mul`); without the feed the operand's shape is known
    # and the Mul goes (x * 1 = x). The remapper and arithmetic optimizer read the feed's shape.
    from jitsim.frontend.prepare import prepare_without_tf

    def g():
        return graph_of([ph("x", 2, 3), c("one", 1.0, DT_FLOAT),
                         ("sq", "Square", ["x"], {"T": "DT_FLOAT"}),
                         ("mul", "Mul", ["one", "sq"], {"T": "DT_FLOAT"}),
                         ("out", "Neg", ["mul"], {"T": "DT_FLOAT"})])
    fed = prepare_without_tf(g(), fetch=(["out"], {"out", "x"}), feeds=["x:0"])
    plain = prepare_without_tf(g(), fetch=(["out"], {"out"}))
    assert {n.name: n.op for n in fed.graph}["mul"] == "Mul"
    assert "mul" not in {n.name for n in plain.graph} or {n.name: n.op for n in plain.graph}["mul"] != "Mul"


def test_broadcast_gradient_args_of_one_symbolic_shape_is_materialized():
    # MaterializeBroadcastGradientArgs: the gradient of a dropout's SelectV2(mask, x * c, 0)
    # compares Shape(x * c) with Shape(SelectV2): one symbolic shape [?, 12] (the mask is a
    # random tensor shaped by Shape(x), x * c is x's shape), so nothing is reduced: both outputs
    # become constants `-bcastargs-0/1` (TF's dump keeps the one read); Shape of an unrelated
    # [?, 12] tensor (its own batch symbol) is not decided, and stays.
    eg = edit([ph("a", -1, 12), ph("b", -1, 12), c("k", 0.5, DT_FLOAT), c("zero", 0.0, DT_FLOAT),
               ("x", "Elu", ["a"], {"T": "DT_FLOAT"}), ("shape", "Shape", ["x"], {"T": "DT_FLOAT", "out_type": "DT_INT32"}),
               ("rnd", "RandomUniform", ["shape"], {"T": "DT_INT32", "dtype": "DT_FLOAT"}),
               ("keep", "GreaterEqual", ["rnd", "k"], {"T": "DT_FLOAT"}),
               ("scaled", "Mul", ["x", "k"], {"T": "DT_FLOAT"}),
               ("sel", "SelectV2", ["keep", "scaled", "zero"], {"T": "DT_FLOAT"}),
               ("s1", "Shape", ["scaled"], {"T": "DT_FLOAT", "out_type": "DT_INT32"}),
               ("s2", "Shape", ["sel"], {"T": "DT_FLOAT", "out_type": "DT_INT32"}),
               ("s3", "Shape", ["b"], {"T": "DT_FLOAT", "out_type": "DT_INT32"}),
               ("bga", "BroadcastGradientArgs", ["s1", "s2"], {"T": "DT_INT32"}),
               ("bgb", "BroadcastGradientArgs", ["s1", "s3"], {"T": "DT_INT32"}),
               ("out", "IdentityN", ["bga", "bgb"], {"T": ["DT_INT32"] * 2})])
    fold(eg)
    assert inputs(eg, "out") == ["ConstantFolding/bga-bcastargs-0", "bgb"]
    assert inputs(eg, "ConstantFolding/bga-bcastargs-0") == ["^bga"]
    assert tensor_proto_to_numpy(eg.nodes["ConstantFolding/bga-bcastargs-0"].attr["value"].tensor).tolist() == []


def test_symbolic_dims_follow_tfs_shape_functions():
    from jitsim.analyses.shape_inference import SymbolicDims

    eg = edit([ph("x", -1, 4), ph("y", -1, 4), ("w", "Const", [], {"dtype": "DT_FLOAT", "value": value([[1.0] * 3] * 4, DT_FLOAT)}),
               ("mm", "MatMul", ["x", "w"], {"T": "DT_FLOAT"}), ("t", "Tanh", ["mm"], {"T": "DT_FLOAT"}),
               ("g", "TanhGrad", ["t", "up"], {"T": "DT_FLOAT"}), ph("up", -1, 3),
               ("other", "MatMul", ["y", "w"], {"T": "DT_FLOAT"})])
    sym = SymbolicDims(eg, ShapeView(eg, infer=True))
    assert sym.same(("t", 0), ("mm", 0)) and sym.same(("up", 0), ("t", 0))  # TanhGrad merges its inputs
    assert sym.dims(("mm", 0))[0] == sym.dims(("x", 0))[0] and sym.dims(("mm", 0))[1] == 3
    assert not sym.same(("other", 0), ("mm", 0))  # y's batch is another symbol


def test_a_constant_entering_a_loop_is_copied_inside_it():
    # MoveConstantsPastEnter (dump of dynamic_rnn_v1_loop.py: `ConstantFolding/gradients/b_count_enter`)
    eg = edit([c("b_count", 1), ("enter", "Enter", ["b_count"], {"T": "DT_INT32", "frame_name": "f", "is_constant": True}),
               ph("i", dtype="DT_INT32"), ("add", "AddV2", ["enter", "i"], {"T": "DT_INT32"}),
               ("out", "Neg", ["add"], {"T": "DT_INT32"})])
    fold(eg, keep=("out", "i"))
    assert inputs(eg, "add") == ["ConstantFolding/b_count_enter", "i"]
    assert inputs(eg, "ConstantFolding/b_count_enter") == ["^enter"]


def test_matmul_bias_sigmoid_fuses():
    # IsSupportedActivation with oneDNN: Tanh and Sigmoid after MatMul + bias (TF 1 GRU gates:
    # `while/Sigmoid` is a _FusedMatMul in TF's dump); after Conv2D + BiasAdd a Sigmoid stays
    # unfused (EfficientNet's squeeze-excite blocks in TF's dumps)
    from jitsim.rewrites.grappler.remapper import remap

    eg = edit([ph("x", 2, 4), ("w", "Const", [], {"dtype": "DT_FLOAT", "value": value([[1.0] * 6] * 4, DT_FLOAT)}),
               ("b", "Const", [], {"dtype": "DT_FLOAT", "value": value([1.0] * 6, DT_FLOAT)}),
               ("mm", "MatMul", ["x", "w"], {"T": "DT_FLOAT"}), ("ba", "BiasAdd", ["mm", "b"], {"T": "DT_FLOAT"}),
               ("gate", "Sigmoid", ["ba"], {"T": "DT_FLOAT"}), ("out", "Neg", ["gate"], {"T": "DT_FLOAT"})])
    for nd in eg.nodes.values():
        nd.device = "/job:localhost/replica:0/task:0/device:CPU:0"
    remap(eg, frozenset({"out"}), onednn=True, shapes=ShapeView(eg, infer=True))
    assert eg.nodes["gate"].op == "_FusedMatMul"
    assert [s.decode() for s in eg.nodes["gate"].attr["fused_ops"].list.s] == ["BiasAdd", "Sigmoid"]
    conv = edit([ph("x", 1, 4, 4, 2), ("f", "Const", [], {"dtype": "DT_FLOAT", "value": value([[[[1.0] * 3] * 2]], DT_FLOAT)}),
                 ("b", "Const", [], {"dtype": "DT_FLOAT", "value": value([1.0] * 3, DT_FLOAT)}),
                 ("cv", "Conv2D", ["x", "f"], {"T": "DT_FLOAT", "strides": ints_attr(1, 1, 1, 1), "padding": "SAME",
                                               "data_format": "NHWC"}),
                 ("ba", "BiasAdd", ["cv", "b"], {"T": "DT_FLOAT"}),
                 ("gate", "Sigmoid", ["ba"], {"T": "DT_FLOAT"}), ("out", "Neg", ["gate"], {"T": "DT_FLOAT"})])
    for nd in conv.nodes.values():
        nd.device = "/job:localhost/replica:0/task:0/device:CPU:0"
    remap(conv, frozenset({"out"}), onednn=True, shapes=ShapeView(conv, infer=True))
    assert conv.nodes["gate"].op == "Sigmoid" and conv.nodes["ba"].op == "_FusedConv2D"
