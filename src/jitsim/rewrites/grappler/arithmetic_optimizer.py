"""Grappler's arithmetic optimizer, the stage that changes what is clustered: redundant
``Reshape``s.

``ArithmeticOptimizer``'s ``RemoveRedundantReshapeOrBroadcastTo`` stage
(``grappler/optimizers/arithmetic_optimizer.cc``):

* ``Reshape(Reshape(x, s1), s2)`` becomes ``Reshape(x, s2)`` when the inner Reshape is read by
  the outer one only, has no control inputs and is not preserved (``tf.tensordot``'s
  reshape back to 3-D followed by a head-splitting reshape, in every Keras/KerasHub attention);
* a ``Reshape`` whose input already has the output shape (both fully known) is removed.

Static shapes are what the graph records (``_output_shapes``, as SavedModel function bodies
carry them), or for a GraphDef that records none what
:mod:`jitsim.analyses.shape_inference` infers (read through its ``ShapeView``).

And the ``HoistCWiseUnaryChains`` stage for concatenations: when every input of a
``Concat``/``ConcatV2`` is the same element-wise unary op (read by the concat only), the op
moves after the concat: ``Concat(Relu(a), Relu(b))`` becomes ``Relu(Concat(a, b))``, keeping the
first input's node (Inception's mixed blocks in TF's dumps), repeated for chains.

And the ``UnaryOpsComposition`` stage (:func:`compose_unary_chains`): chains of element-wise
unary ops on a CPU become one ``_UnaryOpsComposition`` node named ``<last op>/unary_ops_composition``
(clustered like the ops it replaces, as one node: the clustered-node count drops).

And the ``ConvertPow`` stage (:func:`convert_pow`): ``Pow(x, c)`` with a constant exponent whose
elements are all equal becomes ``Square`` (2), ``Sqrt`` (0.5), ``Rsqrt`` (-0.5), ``Reciprocal``
(-1) or ``Identity`` (1, when x already has the output's shape), the exponent kept as a control
input; on a CPU, 3 becomes ``Mul(x, Square(x))`` with the square a new node
``<scope>/ArithmeticOptimizer/ConvertPow__inner_<name>`` (Keras' tanh GELU: one more clustered
node, under TF's name).

And the ``AddOpsRewrite`` stage (:func:`add_ops_rewrite`), the first of TF's pipeline: a tree of
``Add``/``AddV2``/``AddN`` nodes (each absorbed one read once, by the tree) becomes one ``AddN``
per input shape (``<scope>/ArithmeticOptimizer/AddOpsRewrite_Leaf_<i>_<root>``, shapes from the
smallest) and a chain of ``AddV2`` over them, the last under
``<scope>/ArithmeticOptimizer/AddOpsRewrite_<root>`` (every Keras LayerNormalization and
batch-norm residual add in TF's dumps).

And ``ReplaceMulWithSquare`` (:func:`replace_mul_with_square`): ``Mul(x, x)`` becomes
``<scope>/ArithmeticOptimizer/ReplaceMulWithSquare_<name>``, a ``Square``.

The other stages (``HoistCommonFactor``, unary ops sunk into ``Split`` outputs...) are not
simulated.
"""

from __future__ import annotations

import functools
from collections import Counter

from jitsim.registry import op_def, protos
from jitsim.graph.model import CONTROL, parse_input
from jitsim.codes import Code
from jitsim.records import RewriteRecord
from jitsim.rewrites.grappler import STRING_TYPES, is_add, preserved
from jitsim.graph.graphedit import EditGraph, tf_topological_order, topological_order
from jitsim.analyses.shape_inference import ShapeView, SymbolicDims
from jitsim.opsets import ADD_OR_ADD_N_OPS, CONCAT_OPS, CONTROL_FLOW_OPS, SHAPE_OPS


def _own_length(eg: EditGraph, shape_ref: str, data_ref: str, shapes: ShapeView) -> bool:
    """Whether a Reshape's shape operand is ``[size(x)]`` of its own data input ``x``, a vector:
    ``ExpandDims(Size(x), 0)`` or ``Pack(Size(x))``. TF's shape inference tracks the size of a
    vector as the vector's own (symbolic) dimension, so the output's shape is the input's: a
    no-op (``tf.gather``'s gradient reshaping its indices; a size of another tensor is another
    dimension, so that Reshape stays)."""
    nd = eg.nodes.get(parse_input(shape_ref)[0])
    if nd is None or parse_input(shape_ref)[1] != 0:
        return False
    data = [r for r in nd.input if not r.startswith("^")]
    if nd.op == "ExpandDims" and len(data) == 2:
        axis = eg.nodes.get(parse_input(data[1])[0])
        if axis is None or axis.op != "Const" or _uniform_value(axis) not in (0, -1):
            return False
    elif not (nd.op == "Pack" and len(data) == 1):
        return False
    size = eg.nodes.get(parse_input(data[0])[0])
    if size is None or size.op != "Size" or not size.input or size.input[0] != data_ref:
        return False
    src, port = parse_input(data_ref)
    x = eg.nodes.get(src)
    s = shapes.shape(x, port) if x is not None else None
    return s is not None and len(s) == 1


def _shape_of_same(eg: EditGraph, shape_ref: str, data_ref: str, shapes: ShapeView, cache: list) -> bool:
    """Whether a Reshape's shape operand is ``Shape(t)`` of a tensor ``t`` TF's symbolic shape
    inference gives the data input's shape (:class:`jitsim.analyses.shape_inference.
    SymbolicDims`), of known rank: a no-op (a gradient reshaped to its operand's shape
    where nothing was broadcast)."""
    nd = eg.nodes.get(parse_input(shape_ref)[0])
    if nd is None or nd.op != "Shape" or parse_input(shape_ref)[1] != 0:
        return False
    d = [parse_input(r) for r in nd.input if not r.startswith("^")]
    x = eg.nodes.get(parse_input(data_ref)[0])
    if not d or x is None or shapes.shape(x, parse_input(data_ref)[1]) is None:
        return False
    if not cache:
        cache.append(SymbolicDims(eg, shapes))
    return cache[0].same(parse_input(data_ref), d[0])


def remove_redundant_reshapes(eg: EditGraph, keep=frozenset(), shapes: ShapeView | None = None) -> RewriteRecord:
    rec = RewriteRecord(Code.ARITHMETIC_OPTIMIZER)
    shapes = shapes if shapes is not None else ShapeView()
    keep_set = preserved(eg, keep)
    same_cache: list = []
    for name in topological_order(eg):
        nd = eg.nodes.get(name)
        if nd is None or nd.op != "Reshape" or name in keep_set:
            continue
        data = [r for r in nd.input if not r.startswith("^")]
        if len(data) != 2:
            continue
        src, port = parse_input(data[0])
        inner = eg.nodes.get(src)
        if inner is None:
            continue
        # a no-op reshape: consumers read its input
        out_shape, in_shape = shapes.known(nd), shapes.known(inner, port)
        if (out_shape is not None and out_shape == in_shape or _own_length(eg, data[1], data[0], shapes)
                or _shape_of_same(eg, data[1], data[0], shapes, same_cache)) \
                and not any(r.startswith("^") for r in nd.input):
            eg.replace_uses(name, 0, data[0])
            if name not in keep_set:  # TF's optimizer loop moves control consumers too
                eg.replace_uses(name, CONTROL, None, control_to=src)
            if not eg.consumers(name):
                eg.remove(name)
                rec.add(name, "no-op Reshape removed")
            continue
        if inner.op == "Reshape" and port == 0 and src not in keep_set \
                and not any(r.startswith("^") for r in inner.input):
            uses = eg.out_refs(src)
            if len(uses) == 1 and uses[0][0] == name:
                inner_data = [r for r in inner.input if not r.startswith("^")]
                eg.set_inputs(name, [inner_data[0], data[1]] + [r for r in nd.input if r.startswith("^")])
                rec.add(name, "Reshape of a Reshape collapsed")
    return rec


# element-wise unary ops that keep their input's dtype (HoistCWiseUnaryChains moves them)
UNARY = frozenset({"Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Cos", "Cosh", "Elu", "Erf",
                   "Erfc", "Exp", "Expm1", "Floor", "Inv", "Invert", "Log", "Log1p", "LogicalNot", "Neg",
                   "Reciprocal", "Relu", "Relu6", "Rint", "Round", "Rsqrt", "Selu", "Sigmoid", "Sign", "Sin", "Sinh",
                   "Softplus", "Softsign", "Sqrt", "Square", "Tan", "Tanh"})


def hoist_unary_out_of_concat(eg: EditGraph, keep=frozenset()) -> RewriteRecord:
    rec = RewriteRecord(Code.ARITHMETIC_OPTIMIZER)
    keep_set = preserved(eg, keep)
    for name in topological_order(eg):
        while True:
            nd = eg.nodes.get(name)
            if nd is None or nd.op not in CONCAT_OPS or name in keep_set:
                break
            data = [r for r in nd.input if not r.startswith("^")]
            values = data[:-1] if nd.op == "ConcatV2" else data[1:]
            if len(values) < 2:
                break
            units = []
            for r in values:
                src, port = parse_input(r)
                u = eg.nodes.get(src)
                if u is None or port != 0 or u.op not in UNARY or src in keep_set or u.device != nd.device \
                        or any(x.startswith("^") for x in u.input) or len(u.input) != 1:
                    break
                uses = eg.out_refs(src)
                if len(uses) != 1 or uses[0][0] != name:
                    break
                units.append(src)
            else:
                first = eg[units[0]]
                key = (first.op, sorted((k, v.SerializeToString(deterministic=True)) for k, v in first.attr.items()
                                        if k != "_output_shapes"))
                if len(set(units)) != len(units) or any(
                        (eg[u].op, sorted((k, v.SerializeToString(deterministic=True))
                                          for k, v in eg[u].attr.items() if k != "_output_shapes")) != key
                        for u in units[1:]):
                    break
                new_values = [eg[u].input[0] for u in units]
                ctrl = [r for r in nd.input if r.startswith("^")]
                new_data = new_values + data[-1:] if nd.op == "ConcatV2" else data[:1] + new_values
                consumers = [c for c in eg.consumers(name)]
                eg.set_inputs(name, new_data + ctrl)
                keep_unit = units[0]
                for c in consumers:
                    eg.set_inputs(c, [keep_unit if r == name else
                                      (f"{keep_unit}:{r.split(':')[-1]}" if r.startswith(name + ":") else
                                       ("^" + keep_unit if r == "^" + name else r))
                                      for r in eg[c].input])
                eg.set_inputs(keep_unit, [name])
                if "_output_shapes" in eg[keep_unit].attr:
                    del eg[keep_unit].attr["_output_shapes"]
                for u in units[1:]:
                    eg.remove(u)
                rec.add(name, f"{first.op} hoisted out of a concat")
                continue
            break
    return rec


DT_FLOAT, DT_DOUBLE, DT_HALF = 1, 2, 19
_FHD = frozenset({DT_FLOAT, DT_HALF, DT_DOUBLE})
_FD = frozenset({DT_FLOAT, DT_DOUBLE})
# the ops _UnaryOpsComposition computes (its CPU kernel), and for which element types
COMPOSABLE = {
    **{op: _FHD for op in ("Abs", "Ceil", "Cos", "Expm1", "Exp", "Floor", "Inv", "Log", "Log1p", "Neg",
                           "Reciprocal", "Round", "Rsqrt", "Sigmoid", "Sin", "Sqrt", "Square", "Tanh",
                           "Elu", "Relu", "Relu6", "Selu")},
    **{op: _FD for op in ("Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Cosh", "Rint", "Sinh", "Tan")},
}
COMPOSITION_SUFFIX = "/unary_ops_composition"


def compose_unary_chains(eg: EditGraph, keep=frozenset()) -> RewriteRecord:
    """The ``UnaryOpsComposition`` stage (``arithmetic_optimizer.cc``): a chain of element-wise
    unary ops becomes one ``_UnaryOpsComposition`` node.

    Nodes are visited from the last to the first (the arithmetic optimizer pops its queue of
    the topologically sorted graph from the back). A root qualifies when it can be composed:
    its op and ``T`` are among :data:`COMPOSABLE`, it is not preserved, it is on a CPU, it has no
    control input or output and no earlier chain took it (nor a ``<root>/unary_ops_composition``
    exists already). From the root the chain follows input 0 while the input has the same
    ``T``, exactly one data consumer and qualifies too. A chain of two or more ops becomes
    ``<root>/unary_ops_composition`` (``op_names`` from the first op applied to the last, on
    the root's device, reading the chain's input); the root's consumers read it and the chain's
    nodes go. TF's function runtime does this for a CPU graph whatever the clustering; the
    composed op has an XLA kernel, so the chain stays clustered, as one node."""
    rec = RewriteRecord(Code.ARITHMETIC_OPTIMIZER)
    keep_set = preserved(eg, keep)
    fused: set[str] = set()

    def composable(nd, dtype=None) -> bool:
        if "T" not in nd.attr:
            return False
        t = nd.attr["T"].type
        if nd.op not in COMPOSABLE or t not in COMPOSABLE[nd.op] or (dtype is not None and t != dtype):
            return False
        if nd.name in keep_set or nd.name in fused or "GPU" in nd.device.upper():
            return False
        return not any(r.startswith("^") for r in nd.input) and not eg.has_control_outputs(nd.name)

    for root in reversed(topological_order(eg)):
        nd = eg.nodes.get(root)
        if nd is None or not composable(nd) or (root + COMPOSITION_SUFFIX) in eg:
            continue
        dtype = nd.attr["T"].type
        chain = [root]
        cur = nd
        while True:
            data = [r for r in cur.input if not r.startswith("^")]
            if not data:
                break
            src, port = parse_input(data[0])
            inp = eg.nodes.get(src)
            if inp is None or port != 0 or not composable(inp, dtype):
                break
            if sum(1 for _, _, p in eg.out_refs(src) if p != CONTROL) != 1:
                break
            chain.append(src)
            cur = inp
        if len(chain) < 2:
            continue
        fused.update(chain)
        tail_input = [r for r in cur.input if not r.startswith("^")][0]
        name = root + COMPOSITION_SUFFIX
        names = protos.AttrValue()
        names.list.s.extend(eg[n].op.encode() for n in reversed(chain))
        eg.add(name, "_UnaryOpsComposition", [tail_input], device=nd.device,
               attrs={"T": nd.attr["T"], "op_names": names})
        eg.replace_uses(root, 0, name)
        for n in chain:  # root first: each is then unread
            if n in eg and not eg.consumers(n):
                eg.remove(n)
        rec.add(name, f"{len(chain)} unary ops composed")
    return rec


# ConvertPow: an exponent (all elements equal) -> the op Pow becomes; 3 and 1 are handled apart
POW_AS_UNARY = {2.0: "Square", 0.5: "Sqrt", -0.5: "Rsqrt", -1.0: "Reciprocal"}


def _uniform_value(nd):
    """The one value every element of a ``Const`` holds (a Python complex), or None."""
    from jitsim.rewrites.folding.tensors import tensor_proto_to_numpy

    if nd.op != "Const" or "value" not in nd.attr:
        return None
    try:
        arr = tensor_proto_to_numpy(nd.attr["value"].tensor)
    except Exception:  # a dtype the numpy decoder does not read: TF's check fails the same way
        return None
    flat = arr.reshape(-1)
    if flat.size == 0:
        return None
    first = complex(flat[0])
    return first if all(complex(v) == first for v in flat[1:]) else None


def optimized_node_name(name: str, stage: str, suffix: str = "") -> str:
    """TF's ``OptimizedNodeName``: ``<scope>/ArithmeticOptimizer/<stage>_<suffix>_<name>``
    (no ``_<suffix>`` without one).

    >>> optimized_node_name("m/Gelu/Pow", "ConvertPow", "_inner")
    'm/Gelu/ArithmeticOptimizer/ConvertPow__inner_Pow'
    """
    scope, _, base = name.rpartition("/")
    prefix = f"{scope}/" if scope else ""
    return f"{prefix}ArithmeticOptimizer/{stage}_{suffix + '_' if suffix else ''}{base}"


def convert_pow(eg: EditGraph, keep=frozenset(), shapes: ShapeView | None = None) -> RewriteRecord:
    """``ConvertPowStage``: a ``Pow`` by a constant exponent rewritten as above."""
    rec = RewriteRecord(Code.ARITHMETIC_OPTIMIZER)
    shapes = shapes if shapes is not None else ShapeView()
    for name in list(eg.nodes):
        nd = eg.nodes.get(name)
        if nd is None or nd.op != "Pow":
            continue
        data = [r for r in nd.input if not r.startswith("^")]
        ctrl = [r for r in nd.input if r.startswith("^")]
        if len(data) != 2:
            continue
        ysrc, _ = parse_input(data[1])
        y = eg.nodes.get(ysrc)
        if y is None or ysrc in keep:  # a fed Const is no constant (TF's IsReallyConstant)
            continue
        value = _uniform_value(y)
        if value is None or value.imag:
            continue
        v = value.real
        if v in POW_AS_UNARY:
            nd.op = POW_AS_UNARY[v]
            eg.set_inputs(name, [data[0]] + ctrl + [f"^{ysrc}"])
            rec.add(name, f"Pow by {v:g} rewritten as {nd.op}")
        elif v == 3.0 and "CPU" in nd.device.upper():
            inner = optimized_node_name(name, "ConvertPow", "_inner")
            if inner not in eg.nodes:
                sq = protos.NodeDef()
                sq.CopyFrom(nd)
                sq.name = inner
                sq.op = "Square"
                del sq.input[:]
                sq.input.extend(list(nd.input)[:-1])  # TF drops the last input (the exponent)
                eg.add_nodedef(sq)
            nd.op = "Mul"
            eg.set_inputs(name, [data[0], inner] + ctrl + [f"^{ysrc}"])
            rec.add(name, "Pow by 3 rewritten as Mul(x, Square(x))")
        elif v == 1.0:
            src, port = parse_input(data[0])
            x = eg.nodes.get(src)
            out, into = shapes.known(nd), (shapes.known(x, port) if x is not None else None)
            if out is not None and out == into:
                nd.op = "Identity"
                eg.set_inputs(name, [data[0]] + ctrl + [f"^{ysrc}"])
                rec.add(name, "Pow by 1 rewritten as Identity")
    return rec


# -- AddOpsRewrite -----------------------------------------------------------------------

ADD_OPS_TAG = "_grappler_ArithmeticOptimizer_AddOpsRewriteStage"  # TF marks what the stage wrote


def broadcastable(a, b) -> bool:
    """TF's ``ShapesBroadcastable`` on symbolic shapes: equal dimensions or a 1, aligned right.

    >>> broadcastable((2, 64), (64,)), broadcastable((2, 64), (1, 64)), broadcastable((2, 64), (3,))
    (True, True, False)
    """
    if a is None or b is None:
        return False
    for x, y in zip(reversed(a), reversed(b)):
        if x != y and x != 1 and y != 1:
            return False
    return True


def smaller(a, b) -> bool:
    """TF's ``CompareSymbolicallyShapedTensorSizes``: whether ``a`` is provably smaller than ``b``
    (defined sizes compared once symbolic dimensions cancel; a side with unbalanced symbolic
    dimensions is the larger).

    >>> smaller((64,), (2, 64)), smaller((2, 64), (64,)), smaller((-2, 64), (-2, 64))
    (True, False, False)
    """
    def split(s):
        size, sym = 1, Counter()
        for d in s:
            if d > 0:
                size *= d
            elif d < 0:
                sym[d] += 1
        return size, sym

    (ls, lsym), (rs, rsym) = split(a), split(b)
    left, right = lsym - rsym, rsym - lsym
    if not left and not right:
        return ls < rs
    return ls <= rs and not left and bool(right)


def add_ops_rewrite(eg: EditGraph, keep=frozenset(), shapes: ShapeView | None = None,
                    uncertain: list | None = None) -> RewriteRecord:
    """``AddOpsRewriteStage`` (``arithmetic_optimizer.cc``), over the graph in Grappler's order
    (the optimizer sorts it topologically and takes nodes from the last, so a tree is taken whole
    from its root).

    A root is an ``Add`` (not of strings), ``AddV2`` or ``AddN`` that is not preserved, not already
    written by the stage, has no control input or control output, a known (symbolic) shape and
    inputs that broadcast to it. Walking its inputs depth first, an input node joins the tree
    when it passes the same test, is on the root's device and has exactly one data consumer
    (``Shape``/``ShapeN``/``Rank``/``Size`` consumers not counted); the tree's inputs are the
    tensors where the walk stops. A root that takes no other node is left alone. The inputs are
    grouped by shape (in the order found); each group of two or more becomes an ``AddN``,
    ``Leaf_<i>`` for the i-th shape from the smallest; one shape gives a single ``AddN`` named
    ``AddOpsRewrite_<root>``, several give a chain of ``AddV2`` (``Internal_<k>``, the last
    ``AddOpsRewrite_<root>``). The root's consumers then read the new root; the old nodes are
    gone (Grappler's next pruning). Where a shape holds an unknown dimension, every such
    dimension is taken for the same symbolic one; ``uncertain`` (a list) gets ``(root, why)``
    for those roots and for the Add trees left alone only because a shape is unknown to jitsim.
    """
    rec = RewriteRecord(Code.ARITHMETIC_OPTIMIZER)
    shapes = shapes if shapes is not None else ShapeView()
    keep_set = preserved(eg, keep)
    SHAPE_CONSUMERS = SHAPE_OPS  # NumNonControlDataOutputs skips them

    def tensor_shape(ref):
        src, port = parse_input(ref)
        nd = eg.nodes.get(src)
        return None if nd is None else shapes.symbolic_shape(nd, port)

    def can_optimize(nd) -> bool:
        if not (is_add(nd) or nd.op == "AddN"):
            return False
        if nd.name in keep_set or ADD_OPS_TAG in nd.attr:
            return False
        if any(r.startswith("^") for r in nd.input):
            return False
        return not eg.has_control_outputs(nd.name)

    def inputs_broadcast(nd, out) -> bool:
        return all(broadcastable(out, tensor_shape(r)) for r in nd.input if not r.startswith("^"))

    def data_uses(name) -> int:
        return sum(1 for c, _, p in eg.out_refs(name) if p != CONTROL and eg.nodes[c].op not in SHAPE_CONSUMERS)

    def supported(nd):
        if not can_optimize(nd):
            return None
        out = shapes.symbolic_shape(nd, 0)
        if out is None or not inputs_broadcast(nd, out):
            return None
        return out

    order = tf_topological_order(eg)
    stack = list(order)
    queued = set(stack)
    while stack:
        name = stack.pop()
        queued.discard(name)
        root = eg.nodes.get(name)
        if root is None:
            continue
        root_shape = supported(root)
        if root_shape is None:
            if uncertain is not None and can_optimize(root) and any(
                    eg.nodes.get(parse_input(r)[0]) is not None and eg.nodes[parse_input(r)[0]].op in ADD_OR_ADD_N_OPS
                    for r in root.input if not r.startswith("^")) and (
                    shapes.symbolic_shape(root, 0) is None
                    or any(tensor_shape(r) is None for r in root.input if not r.startswith("^"))):
                uncertain.append((name, "a shape jitsim does not know: this Add tree was left alone, TF may "
                                        "rewrite it as AddN (same cluster, other node names)"))
            continue
        absorbed, inputs = [], []
        todo = [r for r in root.input if not r.startswith("^")]
        todo.reverse()
        while todo:  # depth first, left to right (TF's deque, pushed at the front)
            ref = todo.pop()
            src, _ = parse_input(ref)
            nd = eg.nodes.get(src)
            if nd is not None and nd.device == root.device and can_optimize(nd) and data_uses(src) == 1:
                out = shapes.symbolic_shape(nd, 0)
                if out is not None and inputs_broadcast(nd, out):
                    absorbed.append(src)
                    more = [r for r in nd.input if not r.startswith("^")]
                    todo.extend(reversed(more))
                    continue
            inputs.append((ref, tensor_shape(ref)))
        if not absorbed:
            continue
        if any(s is None for _, s in inputs):
            continue  # TF's GetTensorProperties fails: no rewrite
        groups: dict[tuple, list[str]] = {}
        for ref, s in inputs:
            groups.setdefault(s, []).append(ref)
        if uncertain is not None and (any(d < 0 for s in groups for d in s) or any(d < 0 for d in root_shape)):
            uncertain.append((name, "unknown dimensions taken for one symbolic dimension (TF proves which "
                                    "are equal): the AddN grouping may differ"))
        dtype = root.attr["T"].type if "T" in root.attr else None
        new_nodes = {}  # name -> its shape

        def addn(node_name, refs, shape):
            if len(refs) == 1 or dtype is None:
                return refs[0]
            eg.add(node_name, "AddN", refs, device=root.device,
                   attrs={"T": protos.AttrValue(type=dtype), "N": protos.AttrValue(i=len(refs)),
                          ADD_OPS_TAG: protos.AttrValue(b=True)})
            new_nodes[node_name] = shape
            return node_name

        if len(groups) == 1:
            (shape, refs), = groups.items()
            new_root = addn(optimized_node_name(name, "AddOpsRewrite"), refs, shape)
        else:
            ordered = sorted(groups, key=functools.cmp_to_key(
                lambda a, b: -1 if smaller(a, b) else (1 if smaller(b, a) else 0)))
            ops = [addn(optimized_node_name(name, "AddOpsRewrite", f"Leaf_{i}"), groups[s], s)
                   for i, s in enumerate(ordered)]
            k = 0
            while len(ops) > 1:
                lhs, rhs = ops.pop(0), ops.pop(0)
                if ops:
                    nn = optimized_node_name(name, "AddOpsRewrite", f"Internal_{k}")
                    k += 1
                else:
                    nn = optimized_node_name(name, "AddOpsRewrite")
                op = "Add" if dtype in STRING_TYPES else "AddV2"
                eg.add(nn, op, [lhs, rhs], device=root.device,
                       attrs={"T": protos.AttrValue(type=dtype), ADD_OPS_TAG: protos.AttrValue(b=True)})
                new_nodes[nn] = root_shape
                ops.insert(0, nn)
            new_root = ops[0]
        for nn, shape in new_nodes.items():  # what GraphProperties would give the new nodes
            shapes.inferred[(nn, 0)] = tuple(-1 if d < 0 else d for d in (root_shape if nn == new_root else shape))
        consumers = sorted(c for c in eg.consumers(name))
        for old in [name] + absorbed:
            eg.provenance[old] = (new_root, f"merged by Grappler's arithmetic optimizer (AddOpsRewrite) into "
                                            f"{new_root!r} ({eg.nodes[new_root].op})")
        eg.replace_uses(name, 0, new_root)
        for old in [name] + absorbed:
            if old in eg.nodes and not eg.consumers(old):
                eg.remove(old)
        rec.add(name, f"Add tree of {len(absorbed) + 1} nodes rewritten as {new_root} "
                      f"({len(groups)} input shape{'s' if len(groups) > 1 else ''})")
        for n in [new_root] + consumers:
            if n in eg.nodes and n not in queued:
                stack.append(n)
                queued.add(n)
    return rec


# -- ReorderCastLikeAndValuePreserving, SimplifyAggregation ---------------------------------

# TF's IsValuePreserving (op_types.cc): value-and-order-preserving ops and the reorderings
VALUE_PRESERVING = frozenset({
    "CheckNumerics", "DebugGradientIdentity", "DeepCopy", "EnsureShape", "ExpandDims", "Identity",
    "IdentityN", "PlaceholderWithDefault", "PreventGradient", "Reshape", "Snapshot", "Squeeze",
    "StopGradient", "InvertPermutation", "Reverse", "ReverseV2", "Roll", "Transpose", "DepthToSpace",
    "SpaceToDepth", "BatchToSpace", "BatchToSpaceND", "SpaceToBatch", "SpaceToBatchND"})
# the cast-like ops whose source and destination types jitsim reads: (source attr, destination)
CAST_TYPES = {"Cast": ("SrcT", "DstT"), "IsNan": ("T", 10), "IsInf": ("T", 10), "IsFinite": ("T", 10)}
CAST_LIKE = frozenset({"Angle", "Bucketize", "Cast", "Dequantize", "HistogramFixedWidth", "Imag", "IsFinite",
                       "IsInf", "IsNan", "Quantize", "QuantizeDownAndShrinkRange", "QuantizeV2",
                       "QuantizedInstanceNorm", "QuantizedRelu", "QuantizedRelu6", "QuantizedReluX", "Real",
                       "Requantize"})
CONTROL_FLOW = CONTROL_FLOW_OPS | {"LoopCond", "ControlTrigger"}  # TF's IsControlFlow
# DataTypeSize of the fixed-size types (bytes); others (string, variant, resource, quantized) none
TYPE_SIZE = {1: 4, 2: 8, 3: 4, 4: 1, 5: 2, 6: 1, 8: 8, 9: 8, 10: 1, 14: 2, 17: 2, 18: 16, 19: 2, 22: 4, 23: 8}


def _type_name(dtype: int) -> str:
    """TF's ``DataTypeString``: ``float``, ``int32``, ``bool``, ``half``..."""
    return protos.dtype_name(dtype)[3:].lower()


def _cast_types(nd):
    src, dst = CAST_TYPES.get(nd.op, (None, None))
    if src is None or src not in nd.attr:
        return None
    d = dst if isinstance(dst, int) else (nd.attr[dst].type if dst in nd.attr else None)
    return (nd.attr[src].type, d) if d is not None else None


def _on_cpu_or_gpu(nd) -> bool:
    from jitsim.graph.device_names import device_type

    return (device_type(nd.device) or "") in ("CPU", "GPU")


def reorder_cast_like(eg: EditGraph, keep=frozenset()) -> RewriteRecord:
    """``ReorderCastLikeAndValuePreserving``: a widening cast read by a value-preserving op
    (``ExpandDims(Cast(bool -> int32))``), or a narrowing cast of a value-preserving op's output,
    is moved to the narrow side: copies of both nodes under
    ``<scope>/ArithmeticOptimizer/ReorderCastLikeAndValuePreserving_<type>_<name>`` take over (the
    value-preserving copy named after its input type, the cast copy after its output type),
    the consumers read the new cast. Both on the same CPU/GPU device, neither preserved nor
    control flow; cast types jitsim reads: ``Cast``, ``IsNan``/``IsInf``/``IsFinite``."""
    rec = RewriteRecord(Code.ARITHMETIC_OPTIMIZER)
    keep_set = preserved(eg, keep)
    stage = "ReorderCastLikeAndValuePreserving"
    stack = list(tf_topological_order(eg))
    queued = set(stack)
    while stack:
        name = stack.pop()
        queued.discard(name)
        consumer = eg.nodes.get(name)
        if consumer is None or not (consumer.op in VALUE_PRESERVING or consumer.op in CAST_LIKE):
            continue
        if consumer.op == "CheckNumerics" or consumer.op in CONTROL_FLOW or name in keep_set:
            continue
        if not _on_cpu_or_gpu(consumer) or not consumer.input or consumer.input[0].startswith("^"):
            continue
        pname, _ = parse_input(consumer.input[0])
        producer = eg.nodes.get(pname)
        if producer is None or producer.op == "CheckNumerics" or producer.op in CONTROL_FLOW:
            continue
        producer_is_cast = producer.op in CAST_LIKE
        if not ((producer_is_cast and consumer.op in VALUE_PRESERVING) or
                (producer.op in VALUE_PRESERVING and consumer.op in CAST_LIKE)):
            continue
        if pname in keep_set or producer.device != consumer.device:
            continue
        cast = producer if producer_is_cast else consumer
        value = consumer if producer_is_cast else producer
        types = _cast_types(cast)
        if types is None or not producer.input or producer.input[0].startswith("^"):
            continue
        src_t, dst_t = types
        if src_t not in TYPE_SIZE or dst_t not in TYPE_SIZE:
            continue
        if producer_is_cast and TYPE_SIZE[dst_t] <= TYPE_SIZE[src_t]:
            continue
        if not producer_is_cast and TYPE_SIZE[dst_t] >= TYPE_SIZE[src_t]:
            continue
        od = op_def(value.op)
        type_attr = od.input_arg[0].type_attr if od is not None and od.input_arg else ""
        if not type_attr:
            continue  # TF cannot set the moved op's input type (IdentityN): no rewrite
        new_producer_name = optimized_node_name(name, stage, _type_name(src_t))
        new_consumer_name = optimized_node_name(pname, stage, _type_name(dst_t))
        if new_producer_name in eg.nodes or new_consumer_name in eg.nodes:
            continue
        new_producer = protos.NodeDef()
        new_producer.CopyFrom(consumer)
        new_producer.name = new_producer_name
        new_producer.input[0] = producer.input[0]
        new_consumer = protos.NodeDef()
        new_consumer.CopyFrom(producer)
        new_consumer.name = new_consumer_name
        new_consumer.input[0] = new_producer_name
        moved = new_producer if producer_is_cast else new_consumer
        moved.attr[type_attr].type = src_t if producer_is_cast else dst_t
        for copy in (new_producer, new_consumer):  # their shapes are not the originals'
            if "_output_shapes" in copy.attr:
                del copy.attr["_output_shapes"]
        eg.add_nodedef(new_producer)
        eg.add_nodedef(new_consumer)
        consumers = sorted(eg.consumers(name))
        eg.replace_uses(name, 0, new_consumer_name)
        for old in (name, pname):
            if old in eg.nodes and not eg.consumers(old) and old not in keep_set:
                eg.remove(old)
        rec.add(name, f"{cast.op} moved past {value.op} ({new_producer_name}, {new_consumer_name})")
        for n in [new_producer_name, new_consumer_name] + consumers:
            if n in eg.nodes and n not in queued:
                stack.append(n)
                queued.add(n)
    return rec


def simplify_aggregation(eg: EditGraph, keep=frozenset()) -> RewriteRecord:
    """``SimplifyAggregation``: an aggregation (``Add`` not of strings, ``AddV2``, ``AddN``; not of
    variants) whose data inputs are all the same tensor ``x`` becomes ``Mul(c, x)``: a scalar
    ``<scope>/ArithmeticOptimizer/SimplifyAggregation_Const_<name>`` holding the input count
    (anchored on ``x``'s node by a control input) and
    ``<scope>/ArithmeticOptimizer/SimplifyAggregation_Mul_<name>``, read by the node's consumers
    (NASNet's ``Add(x, x)``). A one-input ``AddN`` is bypassed."""
    from jitsim.rewrites.folding.tensors import NP_DTYPES, numpy, to_tensor_proto

    rec = RewriteRecord(Code.ARITHMETIC_OPTIMIZER)
    keep_set = preserved(eg, keep)
    for name in reversed(tf_topological_order(eg)):
        nd = eg.nodes.get(name)
        if nd is None or nd.op not in ADD_OR_ADD_N_OPS or "T" not in nd.attr:
            continue
        dtype = nd.attr["T"].type
        if dtype == 21 or not (is_add(nd) or nd.op == "AddN"):  # DT_VARIANT
            continue
        data = [r for r in nd.input if not r.startswith("^")]
        ctrl = [r for r in nd.input if r.startswith("^")]
        if not data:
            continue
        if len(nd.input) == 1:
            eg.replace_uses(name, 0, data[0])
            rec.add(name, f"{nd.op} of one input bypassed")
            continue
        if any(r != data[0] for r in data[1:]):
            continue
        const_name = optimized_node_name(name, "SimplifyAggregation", "Const")
        mul_name = optimized_node_name(name, "SimplifyAggregation", "Mul")
        if const_name in eg.nodes or mul_name in eg.nodes:
            continue
        if dtype not in NP_DTYPES:
            continue  # a type jitsim writes no tensor of (TF: SetTensorValue fails, no rewrite)
        src, _ = parse_input(data[0])
        const = eg.add(const_name, "Const", [f"^{src}"], device=nd.device, attrs={"dtype": protos.AttrValue(type=dtype)})
        to_tensor_proto(numpy().array(len(data), dtype=NP_DTYPES[dtype]), dtype, const.attr["value"].tensor)
        eg.add(mul_name, "Mul", [const_name, data[0]] + ctrl, device=nd.device,
               attrs={"T": protos.AttrValue(type=dtype)})
        eg.replace_uses(name, 0, mul_name)
        if not eg.consumers(name) and name not in keep_set:
            eg.remove(name)
        rec.add(name, f"{nd.op} of {len(data)} equal inputs rewritten as {mul_name}")
    return rec


def replace_mul_with_square(eg: EditGraph, keep=frozenset()) -> RewriteRecord:
    """``ReplaceMulWithSquare``: a ``Mul``/``MulNoNan`` of a tensor by itself (its first two inputs
    the same) becomes a copy of the node as ``Square`` of that tensor (its control inputs kept),
    ``<scope>/ArithmeticOptimizer/ReplaceMulWithSquare_<name>``, read by the node's consumers; a
    complex product off the CPU is left alone.

    >>> from jitsim.graph.graphedit import EditGraph
    >>> from jitsim.registry import protos
    >>> gd = protos.GraphDef()
    >>> for name, op, ins in (("x", "Placeholder", []), ("sq", "Mul", ["x", "x"]), ("y", "Neg", ["sq"])):
    ...     n = gd.node.add(name=name, op=op); n.input.extend(ins)
    >>> eg = EditGraph(gd)
    >>> _ = replace_mul_with_square(eg)
    >>> [(n, eg.nodes[n].op, list(eg.nodes[n].input)) for n in eg.nodes if n != "x"]
    [('y', 'Neg', ['ArithmeticOptimizer/ReplaceMulWithSquare_sq']), ('ArithmeticOptimizer/ReplaceMulWithSquare_sq', 'Square', ['x'])]
    """
    rec = RewriteRecord(Code.ARITHMETIC_OPTIMIZER)
    keep_set = preserved(eg, keep)
    for name in reversed(tf_topological_order(eg)):
        nd = eg.nodes.get(name)
        if nd is None or nd.op not in ("Mul", "MulNoNan") or len(nd.input) < 2 or nd.input[0] != nd.input[1]:
            continue
        new = optimized_node_name(name, "ReplaceMulWithSquare")
        if new in eg.nodes:
            continue
        if "T" in nd.attr and nd.attr["T"].type in (8, 18) and not _on_cpu(nd):  # DT_COMPLEX64/128
            continue
        eg.add(new, "Square", list(nd.input[1:]), device=nd.device, attrs=dict(nd.attr))
        eg.replace_uses(name, 0, new)
        if not eg.consumers(name) and name not in keep_set:
            eg.remove(name)
        rec.add(name, f"{nd.op} of a tensor by itself rewritten as {new}")
    return rec


def _on_cpu(nd) -> bool:
    from jitsim.graph.device_names import device_type

    return device_type(nd.device) in (None, "CPU")


# -- MinimizeBroadcasts --------------------------------------------------------------------

MINIMIZE_BROADCASTS_TAG = "_grappler_ArithmeticOptimizer_MinimizeBroadcasts"


def minimize_broadcasts(eg: EditGraph, keep=frozenset(), shapes: ShapeView | None = None) -> RewriteRecord:
    """``MinimizeBroadcasts`` (``arithmetic_optimizer.cc``): a tree of one binary associative op
    (``Mul``, or ``Add``/``AddV2`` the Add-tree stage left), each inner node read once, has its
    inputs re-paired from the smallest shape up so that broadcasts happen as late as possible.
    The nodes keep their names; only their inputs change (Keras' erf GELU
    ``0.5 * x * erfc(...)``: the scalar is multiplied with ``erfc`` first, then ``x``, as in TF's
    dump). Every member is tagged, as TF tags it, and not visited again; a tree whose inputs
    all have one shape is tagged and left as it is."""
    rec = RewriteRecord(Code.ARITHMETIC_OPTIMIZER)
    shapes = shapes if shapes is not None else ShapeView()
    keep_set = preserved(eg, keep)
    tags = (MINIMIZE_BROADCASTS_TAG, ADD_OPS_TAG)

    def assoc(nd) -> bool:
        return nd.op == "Mul" or is_add(nd)

    def tensor_shape(ref):
        src, port = parse_input(ref)
        nd = eg.nodes.get(src)
        return None if nd is None else shapes.symbolic_shape(nd, port)

    def inputs_broadcast(nd, out) -> bool:
        return all(broadcastable(out, tensor_shape(r)) for r in nd.input if not r.startswith("^"))

    def controls(nd) -> bool:
        return any(r.startswith("^") for r in nd.input) or eg.has_control_outputs(nd.name)

    def data_uses(name) -> int:
        return sum(1 for _, _, p in eg.out_refs(name) if p != CONTROL)

    order = tf_topological_order(eg)
    for name in reversed(order):
        root = eg.nodes.get(name)
        if root is None or not assoc(root) or any(t in root.attr for t in tags):
            continue
        out = shapes.symbolic_shape(root, 0)
        if out is None or not inputs_broadcast(root, out):
            continue
        absorbed, inputs = [], []
        todo = [r for r in root.input if not r.startswith("^")]
        todo.reverse()
        while todo:
            ref = todo.pop()
            src, _ = parse_input(ref)
            nd = eg.nodes.get(src)
            if (nd is not None and nd.op == root.op and src not in keep_set and not any(t in nd.attr for t in tags)
                    and not controls(nd) and nd.device == root.device and data_uses(src) == 1):
                s = shapes.symbolic_shape(nd, 0)
                if s is not None and inputs_broadcast(nd, s):
                    absorbed.append(src)
                    todo.extend(reversed([r for r in nd.input if not r.startswith("^")]))
                    continue
            inputs.append((ref, tensor_shape(ref)))
        if not absorbed:
            continue
        for n in [name] + absorbed:
            eg.nodes[n].attr[MINIMIZE_BROADCASTS_TAG].b = True
        if any(s is None for _, s in inputs) or len({s for _, s in inputs}) <= 1:
            continue
        if len(absorbed) + 1 != len(inputs) - 1:
            continue  # TF CHECK-fails here; a tree of binary ops always has one input more than nodes
        ops = sorted(inputs, key=functools.cmp_to_key(
            lambda a, b: -1 if smaller(a[1], b[1]) else (1 if smaller(b[1], a[1]) else 0)))  # stable
        leftover = ops.pop() if len(ops) % 2 else None
        free = list(absorbed)
        changed = []
        while True:
            (lhs, _), (rhs, _) = ops.pop(0), ops.pop(0)
            node = free.pop() if free else name
            changed.append((node, lhs, rhs))
            updated = (node, ())  # TF: the shape of an updated node no longer matters: a scalar's
            if len(ops) >= 2 and smaller(ops[0][1], ops[1][1]):
                ops.insert(0, updated)
            else:
                ops.append(updated)
            if len(ops) <= 1:
                break
        if leftover is not None:
            changed.append((name, ops[0][0], leftover[0]))
        for node, lhs, rhs in changed:
            rest = list(eg.nodes[node].input)[2:]
            if list(eg.nodes[node].input)[:2] != [lhs, rhs]:
                eg.set_inputs(node, [lhs, rhs] + rest)
        rec.add(name, f"{root.op} tree of {len(absorbed) + 1} nodes re-paired to minimize broadcasts")
    return rec
