"""jitsim.analyses.shape_inference: shapes of a GraphDef that records none.

Each expected shape is derived by hand from the op's semantics as TF's shape functions
(core/ops/*.cc) define them; the reasoning is stated with each case. The last tests check what
the shapes are for: a GraphDef exported without shapes gets the remapper fusion that the same
graph with recorded shapes gets.
"""

from __future__ import annotations

import pytest

from graphs import graph_of
from jitsim.frontend.prepare import prepare_without_tf
from jitsim.registry import protos
from jitsim.graph.model import Graph
from jitsim.graph.graphedit import EditGraph
from jitsim.analyses.shape_inference import ShapeView, broadcast, infer_shapes, relax


def shape_attr(*dims):
    av = protos.AttrValue()
    for d in dims:
        av.shape.dim.add(size=d)
    return av


def shapes_attr(*dims):
    av = protos.AttrValue()
    s = av.list.shape.add()
    for d in dims:
        s.dim.add(size=d)
    return av


def ints(*vals, dims=None):
    av = protos.AttrValue()
    t = av.tensor
    t.dtype = protos.DataType.values_by_name["DT_INT32"].number
    if dims is None:
        t.tensor_shape.dim.add(size=len(vals))
    t.int_val.extend(vals)
    return av


def floats(*dims):
    av = protos.AttrValue()
    t = av.tensor
    t.dtype = protos.DataType.values_by_name["DT_FLOAT"].number
    for d in dims:
        t.tensor_shape.dim.add(size=d)
    t.float_val.append(0.5)
    return av


def ilist(*vals):
    av = protos.AttrValue()
    av.list.i.extend(vals)
    return av


def ph(name, *dims):
    return (name, "Placeholder", [], {"dtype": "DT_FLOAT", "shape": shape_attr(*dims)})


def const(name, *vals):
    return (name, "Const", [], {"dtype": "DT_INT32", "value": ints(*vals)})


def scalar(name, v):
    return (name, "Const", [], {"dtype": "DT_INT32", "value": ints(v, dims=())})


def infer(nodes):
    return infer_shapes(graph_of(nodes))


# -- the shape algebra --------------------------------------------------------------------------


def test_broadcasting_follows_numpy_with_unknown_dims():
    # right-aligned; 1 takes the other; [2,1,3] x [4,3] -> [2,4,3]
    assert broadcast((2, 1, 3), (4, 3)) == (2, 4, 3)
    # an unknown dim against a known 5 must be 1 or 5: the output is 5
    assert broadcast((-1, 5), (5,)) == (-1, 5) and broadcast((2, -1), (2, 16)) == (2, 16)
    # an unknown dim against 1 stays unknown; 3 against 4 is an error: nothing known
    assert broadcast((-1,), (1,)) == (-1,) and broadcast((3,), (4,)) is None
    assert broadcast(None, (3,)) is None


def test_relax_keeps_what_two_shapes_share():
    # a loop variable [2, 1] that becomes [2, 2]: [2, ?]; ranks that differ: unknown rank
    assert relax((2, 1), (2, 2)) == (2, -1)
    assert relax((2,), (2, 2)) is None


# -- shape functions ----------------------------------------------------------------------------


def test_matmul_and_batch_matmul_with_transposes():
    s = infer([ph("x", 2, 8), ph("w", 16, 8), ph("a", 2, 1, 5, 4), ph("b", 3, 5, 6),
               ("mm", "MatMul", ["x", "w"], {"T": "DT_FLOAT", "transpose_b": True}),
               ("bmm", "BatchMatMulV2", ["a", "b"], {"T": "DT_FLOAT", "adj_x": True})])
    # x[2,8] . w^T[8,16] -> [2,16]
    assert s[("mm", 0)] == (2, 16)
    # adj_x: a's matrices [5,4] -> [4,5]; [4,5] . [5,6] -> [4,6]; batch [2,1] x [3] -> [2,3]
    assert s[("bmm", 0)] == (2, 3, 4, 6)


def test_reshape_transpose_expand_squeeze_concat_pack():
    s = infer([ph("x", 2, 3, 4), const("shp", -1, 4), const("perm", 2, 0, 1), scalar("ax", -1),
               scalar("one", 1),
               ("r", "Reshape", ["x", "shp"], {"T": "DT_FLOAT"}),
               ("t", "Transpose", ["x", "perm"], {"T": "DT_FLOAT"}),
               ("e", "ExpandDims", ["x", "ax"], {"T": "DT_FLOAT"}),
               ("q", "Squeeze", ["e"], {"T": "DT_FLOAT", "squeeze_dims": ilist(-1)}),
               ("c", "ConcatV2", ["x", "x", "one"], {"T": "DT_FLOAT", "N": 2}),
               ("p", "Pack", ["x", "x", "x"], {"T": "DT_FLOAT", "N": 3, "axis": 1})])
    assert s[("r", 0)] == (6, 4)          # 24 elements / 4 = 6 for the -1
    assert s[("t", 0)] == (4, 2, 3)       # dims taken in perm order
    assert s[("e", 0)] == (2, 3, 4, 1)    # axis -1 of the rank-4 output: appended
    assert s[("q", 0)] == (2, 3, 4)       # the size-1 axis removed again
    assert s[("c", 0)] == (2, 6, 4)       # sizes along axis 1 add up: 3 + 3
    assert s[("p", 0)] == (2, 3, 3, 4)    # a new axis 1 of size N=3


def test_reshape_to_a_computed_shape():
    # Reshape(x, Shape(y)) takes y's shape, as MakeShapeFromShapeTensor reads a known Shape
    s = infer([ph("x", 6, 4), ph("y", 2, 3, 4),
               ("sh", "Shape", ["y"], {"T": "DT_FLOAT", "out_type": "DT_INT32"}),
               ("r", "Reshape", ["x", "sh"], {"T": "DT_FLOAT"})])
    assert s[("sh", 0)] == (3,) and s[("r", 0)] == (2, 3, 4)


def test_split_reductions_and_strided_slice():
    s = infer([ph("x", 2, 48), ph("y", 4, 6, 8), scalar("last", -1), const("axes", 1, 2),
               const("b0", 0, 1), const("e0", 0, 3), const("s1", 1, 1),
               scalar("zero", 0), const("z1", 0), const("o1", 1),
               ("sp", "Split", ["last", "x"], {"T": "DT_FLOAT", "num_split": 3}),
               ("sum", "Sum", ["y", "axes"], {"T": "DT_FLOAT", "keep_dims": False}),
               ("mean", "Mean", ["y", "axes"], {"T": "DT_FLOAT", "keep_dims": True}),
               # y[:, 1:3]: begin_mask on dim 0, end 3 on dim 1, dim 2 untouched
               ("ss", "StridedSlice", ["y", "b0", "e0", "s1"],
                {"T": "DT_FLOAT", "Index": "DT_INT32", "begin_mask": 1, "end_mask": 1}),
               # y[0]: shrink_axis on dim 0
               ("s0", "StridedSlice", ["y", "z1", "o1", "o1"],
                {"T": "DT_FLOAT", "Index": "DT_INT32", "shrink_axis_mask": 1})])
    # 48 split 3 ways along the last axis: 16 each, three outputs
    assert [s[("sp", i)] for i in range(3)] == [(2, 16)] * 3
    assert s[("sum", 0)] == (4,) and s[("mean", 0)] == (4, 1, 1)
    assert s[("ss", 0)] == (4, 2, 8)   # dim 0 whole (mask), dim 1 from 1 to 3: 2, dim 2 whole
    assert s[("s0", 0)] == (6, 8)


def test_convolution_and_pooling_windows():
    filt = ("f", "Const", [], {"dtype": "DT_FLOAT", "value": floats(3, 3, 3, 8)})
    s = infer([ph("x", 1, 16, 16, 3), filt,
               ("same", "Conv2D", ["x", "f"], {"T": "DT_FLOAT", "strides": ilist(1, 2, 2, 1), "padding": "SAME",
                                                "data_format": "NHWC"}),
               ("valid", "Conv2D", ["x", "f"], {"T": "DT_FLOAT", "strides": ilist(1, 1, 1, 1), "padding": "VALID",
                                                 "data_format": "NHWC"}),
               ("pool", "MaxPool", ["valid"], {"T": "DT_FLOAT", "ksize": ilist(1, 2, 2, 1), "strides": ilist(1, 2, 2, 1),
                                               "padding": "VALID", "data_format": "NHWC"})])
    assert s[("same", 0)] == (1, 8, 8, 8)    # SAME: ceil(16 / 2) = 8; 8 output channels
    assert s[("valid", 0)] == (1, 14, 14, 8)  # VALID: 16 - 3 + 1 = 14
    assert s[("pool", 0)] == (1, 7, 7, 8)     # (14 - 2) / 2 + 1 = 7


def test_loop_variable_shapes_are_relaxed_where_they_change():
    # a while loop whose variable starts [2, 1] and is concatenated with itself each turn
    # ([2, 2] after one): the Merge's shape is what both agree on, [2, ?]
    s = infer([("x0", "Const", [], {"dtype": "DT_FLOAT", "value": floats(2, 1)}),
               scalar("one", 1),
               ("enter", "Enter", ["x0"], {"T": "DT_FLOAT", "frame_name": "f"}),
               ("merge", "Merge", ["enter", "next"], {"T": "DT_FLOAT", "N": 2}),
               ("grow", "ConcatV2", ["merge", "merge", "one"], {"T": "DT_FLOAT", "N": 2}),
               ("next", "NextIteration", ["grow"], {"T": "DT_FLOAT"})])
    assert s[("merge", 0)] == (2, -1)
    # a variable that keeps its shape keeps a known Merge shape
    s = infer([("x0", "Const", [], {"dtype": "DT_FLOAT", "value": floats(2, 16)}),
               ("enter", "Enter", ["x0"], {"T": "DT_FLOAT", "frame_name": "f"}),
               ("merge", "Merge", ["enter", "next"], {"T": "DT_FLOAT", "N": 2}),
               ("t", "Tanh", ["merge"], {"T": "DT_FLOAT"}),
               ("next", "NextIteration", ["t"], {"T": "DT_FLOAT"})])
    assert s[("merge", 0)] == (2, 16) and s[("t", 0)] == (2, 16)


def resource(name):
    return (name, "Placeholder", [], {"dtype": "DT_RESOURCE", "shape": shape_attr()})


def test_variable_shapes_come_from_their_writes():
    # A ConcreteFunction's captured variables are shapeless resource Placeholders. A write of a
    # [5] value says the variable is [5] (a tf.Variable keeps its shape), so its reads are [5].
    # The slot `s` is only updated from itself (s = 0.9 * s + g): the update keeps the variable's
    # shape, so it is g's, [5].
    s = infer([resource("v"), resource("slot"), ph("g", 5),
               ("half", "Const", [], {"dtype": "DT_FLOAT", "value": floats()}),
               ("assign", "AssignVariableOp", ["v", "g"], {"dtype": "DT_FLOAT"}),
               ("read", "ReadVariableOp", ["v", "^assign"], {"dtype": "DT_FLOAT"}),
               ("sread", "ReadVariableOp", ["slot"], {"dtype": "DT_FLOAT"}),
               ("decay", "Mul", ["half", "sread"], {"T": "DT_FLOAT"}),
               ("upd", "AddV2", ["decay", "g"], {"T": "DT_FLOAT"}),
               ("sassign", "AssignVariableOp", ["slot", "upd"], {"dtype": "DT_FLOAT"}),
               ("sread2", "ReadVariableOp", ["slot", "^sassign"], {"dtype": "DT_FLOAT"})])
    assert s[("read", 0)] == (5,)
    assert s[("sread", 0)] == (5,) and s[("sread2", 0)] == (5,)


def test_a_variable_never_written_has_no_shape():
    s = infer([resource("v"), ("read", "ReadVariableOp", ["v"], {"dtype": "DT_FLOAT"}),
               ("neg", "Neg", ["read"], {"T": "DT_FLOAT"})])
    assert s[("read", 0)] is None and s[("neg", 0)] is None


def test_var_handle_op_gives_the_variable_shape():
    s = infer([("v", "VarHandleOp", [], {"dtype": "DT_FLOAT", "shape": shape_attr(3, 4)}),
               ("id", "Identity", ["v"], {"T": "DT_RESOURCE"}),
               ("read", "ReadVariableOp", ["id"], {"dtype": "DT_FLOAT"})])
    assert s[("read", 0)] == (3, 4)


def test_recorded_shapes_win_and_turn_inference_off():
    # a graph that records _output_shapes anywhere is read as recorded (SavedModel function
    # bodies, TF's dumps): the view infers nothing for its other nodes
    g = graph_of([ph("x", 2, 3),
                          ("n", "Neg", ["x"], {"T": "DT_FLOAT", "_output_shapes": shapes_attr(-1, 3)}),
                          ("m", "Neg", ["n"], {"T": "DT_FLOAT"})])
    eg = EditGraph.from_graph(g)
    view = ShapeView(eg, infer=True)
    assert not view.inferring
    assert view.shape(eg["n"]) == (-1, 3) and view.shape(eg["m"]) is None
    # without _output_shapes anywhere, the same graph is inferred
    g = graph_of([ph("x", 2, 3), ("n", "Neg", ["x"], {"T": "DT_FLOAT"}),
                          ("m", "Neg", ["n"], {"T": "DT_FLOAT"})])
    eg = EditGraph.from_graph(g)
    view = ShapeView(eg, infer=True)
    assert view.inferring and view.shape(eg["m"]) == (2, 3)


# -- what the shapes are for: the remapper's bias-like Add ----------------------------------------


def _bias_add_graph(recorded: bool):
    """x[2,8] . w[8,48] + b[48], as a ConcreteFunction GraphDef (Placeholders, output Identity),
    with or without _output_shapes."""
    rec = (lambda *d: {"_output_shapes": shapes_attr(*d)}) if recorded else (lambda *d: {})
    return graph_of([
        ("x", "Placeholder", [], {"dtype": "DT_FLOAT", "shape": shape_attr(2, 8), **rec(2, 8)}),
        ("w", "Const", [], {"dtype": "DT_FLOAT", "value": floats(8, 48), **rec(8, 48)}),
        ("b", "Const", [], {"dtype": "DT_FLOAT", "value": floats(48), **rec(48)}),
        ("mm", "MatMul", ["x", "w"], {"T": "DT_FLOAT", **rec(2, 48)}),
        ("add", "AddV2", ["mm", "b"], {"T": "DT_FLOAT", **rec(2, 48)}),
        ("Identity", "Identity", ["add"], {"T": "DT_FLOAT", **rec(2, 48)})])


def test_graphdef_without_shapes_gets_the_recorded_shapes_fusion():
    # oneDNN's IsBiasSemanticAdd: MatMul [2,48] + a [48] tensor is a bias add -> _FusedMatMul.
    with_shapes = prepare_without_tf(_bias_add_graph(recorded=True))
    without = prepare_without_tf(_bias_add_graph(recorded=False))
    assert with_shapes.graph["add"].op == "_FusedMatMul"
    assert without.graph["add"].op == "_FusedMatMul"
    assert [e.src for e in without.graph.in_edges("add")] == [e.src for e in with_shapes.graph.in_edges("add")]
    # before shape inference the GraphDef kept the Add (what infer_shapes=False still does)
    assert prepare_without_tf(_bias_add_graph(recorded=False), infer_shapes=False).graph["add"].op == "AddV2"


def test_a_slice_of_a_shapeless_variable_added_to_a_matmul_is_taken_for_a_bias():
    # A Keras GRU cell: MatMul(x, kernel) + Squeeze(Split(bias)[0]); the GraphDef does not say the
    # bias variable's shape ([2, 48]; TF knows it and fuses). jitsim assumes the bias and says so.
    nodes = [ph("x", 2, 8), resource("k"), resource("bias"), scalar("zero", 0),
             ("kr", "ReadVariableOp", ["k"], {"dtype": "DT_FLOAT"}),
             ("br", "ReadVariableOp", ["bias"], {"dtype": "DT_FLOAT"}),
             ("split", "Split", ["zero", "br"], {"T": "DT_FLOAT", "num_split": 2}),
             ("sq", "Squeeze", ["split"], {"T": "DT_FLOAT", "squeeze_dims": ilist(0)}),
             ("mm", "MatMul", ["x", "kr"], {"T": "DT_FLOAT"}),
             ("add", "AddV2", ["mm", "sq"], {"T": "DT_FLOAT"}),
             ("Identity", "Identity", ["add"], {"T": "DT_FLOAT"})]
    p = prepare_without_tf(graph_of(nodes))
    assert p.graph["add"].op == "_FusedMatMul"
    assert any("taken for bias adds" in c for c in p.caveats)
    # an Add of a computed (not sliced) tensor of unknown shape is not assumed to be a bias
    nodes2 = [n for n in nodes if n[0] != "add"] + [("e", "Exp", ["sq"], {"T": "DT_FLOAT"}),
                                                     ("add", "AddV2", ["mm", "e"], {"T": "DT_FLOAT"})]
    assert prepare_without_tf(graph_of(nodes2)).graph["add"].op == "AddV2"


@pytest.mark.tf
def test_tf_exported_graphdef_without_shapes_fuses_like_with_shapes():
    # The same tf.function exported with and without add_shapes: jitsim's remapper makes the same
    # fusions of both (a Dense-like MatMul + Add of a constant bias; a trained bias variable).
    import tensorflow as tf

    w = tf.Variable(tf.random.normal([8, 5]))
    b = tf.Variable(tf.zeros([5]))

    @tf.function(input_signature=[tf.TensorSpec([2, 8], tf.float32)])
    def f(x):
        y = tf.nn.relu(tf.matmul(x, w) + tf.constant([0.5] * 5))
        z = tf.matmul(y, tf.transpose(w[:5])) + b
        b.assign(b + 0.1 * tf.reduce_sum(z, axis=0)[:5])
        return z

    cf = f.get_concrete_function()
    fused = {}
    for add_shapes in (False, True):
        gd = cf.graph.as_graph_def(add_shapes=add_shapes)
        g = Graph(protos.GraphDef.FromString(gd.SerializeToString()), validate=False)
        p = prepare_without_tf(g)
        fused[add_shapes] = sorted(n.name for n in p.graph if n.op == "_FusedMatMul")
    assert fused[True] and fused[False] == fused[True]


def test_an_add_to_a_matmul_of_a_shapeless_weight_is_a_bias_when_wider_than_one():
    # MatMul(x[2,8], w) with w a variable the graph gives no shape of: output [2, ?]. Adding a
    # [5] constant is valid only if ? is 5 or 1; taken as 5 (a bias add, fused as TF fuses it,
    # knowing w is [8, 5]). A [1] operand could be anything's bias: not assumed.
    def g(n):
        return graph_of([ph("x", 2, 8), resource("w"),
                      ("wr", "ReadVariableOp", ["w"], {"dtype": "DT_FLOAT"}),
                      ("b", "Const", [], {"dtype": "DT_FLOAT", "value": floats(n)}),
                      ("mm", "MatMul", ["x", "wr"], {"T": "DT_FLOAT"}),
                      ("add", "AddV2", ["mm", "b"], {"T": "DT_FLOAT"}),
                      ("Identity", "Identity", ["add"], {"T": "DT_FLOAT"})])

    assert prepare_without_tf(g(5)).graph["add"].op == "_FusedMatMul"
    assert prepare_without_tf(g(1)).graph["add"].op == "AddV2"


def test_softmax_cross_entropy_losses():
    # core/ops/nn_ops.cc: SparseSoftmaxCrossEntropyWithLogits(features [batch, classes],
    # labels [batch]) -> loss [batch], backprop [batch, classes], batch merged from both;
    # SoftmaxCrossEntropyWithLogits broadcasts features and labels to [batch, classes].
    s = infer([ph("f", -1, 10), ("l", "Placeholder", [], {"dtype": "DT_INT64", "shape": shape_attr(8)}),
               ("x", "SparseSoftmaxCrossEntropyWithLogits", ["f", "l"], {"T": "DT_FLOAT", "Tlabels": "DT_INT64"}),
               ph("g", 1, 10), ph("h", 4, 1),
               ("y", "SoftmaxCrossEntropyWithLogits", ["g", "h"], {"T": "DT_FLOAT"})])
    assert s[("x", 0)] == (8,) and s[("x", 1)] == (8, 10)
    assert s[("y", 0)] == (4,) and s[("y", 1)] == (4, 10)


# -- variables whose shapes the graph does not give, read back from their uses -----------------


def test_a_dense_layers_kernel_and_bias_shapes_come_from_their_uses():
    # x [2, 8] @ kernel + bias, added to a residual r [2, 16]. The graph gives neither variable's
    # shape (a ConcreteFunction's captures). MatMul needs kernel [8, n]; the residual Add says the
    # Dense output is [2, 16] (an unknown dim broadcast against 16 is taken for 16, not 1), so
    # n = 16; the bias, of unknown rank, added to a [2, 16] tensor, is taken for a bias: [16].
    from_use = {}
    s = infer_shapes(graph_of([
        ph("x", 2, 8), ph("r", 2, 16), resource("kernel"), resource("bias"),
        ("k", "ReadVariableOp", ["kernel"], {"dtype": "DT_FLOAT"}),
        ("b", "ReadVariableOp", ["bias"], {"dtype": "DT_FLOAT"}),
        ("mm", "MatMul", ["x", "k"], {"T": "DT_FLOAT"}),
        ("dense", "AddV2", ["mm", "b"], {"T": "DT_FLOAT"}),
        ("res", "AddV2", ["dense", "r"], {"T": "DT_FLOAT"})]), from_use)
    assert s[("k", 0)] == (8, 16) and s[("b", 0)] == (16,)
    assert s[("mm", 0)] == (2, 16) and s[("dense", 0)] == (2, 16) and s[("res", 0)] == (2, 16)
    assert from_use == {"kernel": (8, 16), "bias": (16,)}


def test_a_convolution_of_a_shapeless_kernel_takes_its_channels_from_the_bias():
    # Keras' Conv2D: Pad [2, 8, 8, 3] by 1 -> [2, 10, 10, 3]; a 3x3 VALID convolution whose kernel
    # shape is unknown: spatial dims unknown (they need the kernel's size), channels from the
    # BiasAdd's 4-long bias (TF's BiasAddShape merges them); the kernel is then [?, ?, 3, 4]. A
    # SAME convolution's spatial dims need no kernel size: ceil(10 / 2) = 5.
    nodes = [ph("x", 2, 8, 8, 3), ("pads", "Const", [], {"dtype": "DT_INT32", "value": ints(0, 0, 1, 1, 1, 1, 0, 0)}),
             resource("kernel"), ("bias", "Const", [], {"dtype": "DT_FLOAT", "value": floats(4)}),
             ("pad", "Pad", ["x", "pads"], {"T": "DT_FLOAT"}),
             ("k", "ReadVariableOp", ["kernel"], {"dtype": "DT_FLOAT"}),
             ("conv", "Conv2D", ["pad", "k"], {"T": "DT_FLOAT", "strides": ilist(1, 1, 1, 1), "padding": "VALID"}),
             ("biased", "BiasAdd", ["conv", "bias"], {"T": "DT_FLOAT"}),
             ("same", "Conv2D", ["pad", "k"], {"T": "DT_FLOAT", "strides": ilist(1, 2, 2, 1), "padding": "SAME"})]
    nodes[1][3]["value"].tensor.tensor_shape.ClearField("dim")
    nodes[1][3]["value"].tensor.tensor_shape.dim.add(size=4)
    nodes[1][3]["value"].tensor.tensor_shape.dim.add(size=2)
    s = infer(nodes)
    assert s[("pad", 0)] == (2, 10, 10, 3)
    assert s[("biased", 0)] == (2, -1, -1, 4)
    assert s[("k", 0)] == (-1, -1, 3, 4) and s[("conv", 0)] == (2, -1, -1, 4)
    assert s[("same", 0)] == (2, 5, 5, 4)


def test_an_embedding_table_takes_its_width_from_what_the_rows_are_added_to():
    # position embedding: rows [1, 17] gathered from a table of unknown shape, added to [2, 17, 16]:
    # taken for a [?, 16] table, so the gather is [1, 17, 16] and the sum [2, 17, 16]
    s = infer([ph("x", 2, 17, 16), ("ids", "Placeholder", [], {"dtype": "DT_INT32", "shape": shape_attr(1, 17)}),
               resource("table"), scalar("axis", 0),
               ("t", "ReadVariableOp", ["table"], {"dtype": "DT_FLOAT"}),
               ("rows", "GatherV2", ["t", "ids", "axis"], {"Tparams": "DT_FLOAT", "Tindices": "DT_INT32",
                                                           "Taxis": "DT_INT32", "batch_dims": 0}),
               ("sum", "AddV2", ["x", "rows"], {"T": "DT_FLOAT"})])
    assert s[("t", 0)] == (-1, 16) and s[("rows", 0)] == (1, 17, 16) and s[("sum", 0)] == (2, 17, 16)


def test_einsum_shapes_forward_and_its_kernel_backward():
    # EinsumDense "abc,cde->abde": x [2, 17, 16] and a kernel of unknown shape; the bias add's
    # other operand [2, 17, 2, 8] (a known tensor) says d = 2, e = 8, so the kernel is [16, 2, 8]
    from_use = {}
    s = infer_shapes(graph_of([
        ph("x", 2, 17, 16), ph("other", 2, 17, 2, 8), resource("kernel"),
        ("k", "ReadVariableOp", ["kernel"], {"dtype": "DT_FLOAT"}),
        ("e", "Einsum", ["x", "k"], {"T": "DT_FLOAT", "N": 2, "equation": "abc,cde->abde"}),
        ("sum", "AddV2", ["e", "other"], {"T": "DT_FLOAT"}),
        ("f", "Einsum", ["x", "x"], {"T": "DT_FLOAT", "N": 2, "equation": "...c,...c->..."})]), from_use)
    assert from_use == {"kernel": (16, 2, 8)}
    assert s[("e", 0)] == (2, 17, 2, 8) and s[("sum", 0)] == (2, 17, 2, 8)
    assert s[("f", 0)] == (2, 17)


def test_conflicting_uses_give_no_shape():
    # the same variable read as a [8, n] MatMul operand and as a [3, n] one: no shape is taken
    from_use = {}
    s = infer_shapes(graph_of([
        ph("x", 2, 8), ph("y", 2, 3), resource("w"),
        ("k", "ReadVariableOp", ["w"], {"dtype": "DT_FLOAT"}),
        ("a", "MatMul", ["x", "k"], {"T": "DT_FLOAT"}),
        ("b", "MatMul", ["y", "k"], {"T": "DT_FLOAT"})]), from_use)
    assert "w" not in from_use and s[("k", 0)] is None


def test_a_batch_norms_parameters_are_one_value_per_channel():
    # Keras' BatchNormalization without a conv bias: y = x * (gamma * rsqrt(var + eps)) +
    # (beta - mean * gamma * rsqrt(var + eps)), all four variables shapeless, x [2, 4, 4, C] with C
    # unknown (a kernel of unknown shape). The parameter expressions are taken to broadcast into x
    # (forward: y is [2, 4, 4, ?], not unknown) and to hold one value per channel (backward: each
    # variable is [?]); an activation of unknown rank is not taken for a parameter.
    rd = lambda n: (n + "_r", "ReadVariableOp", [n], {"dtype": "DT_FLOAT"})  # noqa: E731
    f = {"T": "DT_FLOAT"}
    s = infer([ph("x", 2, 4, 4, 3), resource("kernel"), resource("gamma"), resource("beta"), resource("mean"),
               resource("var"), rd("kernel"), rd("gamma"), rd("beta"), rd("mean"), rd("var"),
               ("eps", "Const", [], {"dtype": "DT_FLOAT", "value": floats()}),
               ("conv", "Conv2D", ["x", "kernel_r"], {"T": "DT_FLOAT", "strides": ilist(1, 1, 1, 1), "padding": "SAME"}),
               ("add", "AddV2", ["var_r", "eps"], f), ("rsqrt", "Rsqrt", ["add"], f),
               ("scale", "Mul", ["rsqrt", "gamma_r"], f), ("mul_1", "Mul", ["conv", "scale"], f),
               ("mul_2", "Mul", ["mean_r", "scale"], f), ("shift", "Sub", ["beta_r", "mul_2"], f),
               ("y", "AddV2", ["mul_1", "shift"], f)])
    assert s[("conv", 0)] == (2, 4, 4, -1) and s[("y", 0)] == (2, 4, 4, -1)
    assert all(s[(v + "_r", 0)] == (-1,) for v in ("gamma", "beta", "mean", "var"))
    assert s[("scale", 0)] == (-1,) and s[("shift", 0)] == (-1,)
