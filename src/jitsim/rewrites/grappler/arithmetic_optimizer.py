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

The other stages (AddN rewrites of Add trees, unary ops sunk into ``Split`` outputs...) keep the
same nodes in the same clusters under other names and are not simulated.
"""

from __future__ import annotations

from jitsim.registry import protos
from jitsim.graph.model import CONTROL, parse_input
from jitsim.codes import Code
from jitsim.records import RewriteRecord
from jitsim.rewrites.grappler import preserved
from jitsim.graph.graphedit import EditGraph, topological_order
from jitsim.analyses.shape_inference import ShapeView
from jitsim.opsets import CONCAT_OPS


def remove_redundant_reshapes(eg: EditGraph, keep=frozenset(), shapes: ShapeView | None = None) -> RewriteRecord:
    rec = RewriteRecord(Code.ARITHMETIC_OPTIMIZER)
    shapes = shapes if shapes is not None else ShapeView()
    keep_set = preserved(eg, keep)
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
        if out_shape is not None and out_shape == in_shape and not any(r.startswith("^") for r in nd.input):
            eg.replace_uses(name, 0, data[0])
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
