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
:mod:`jitsim.passes.shape_inference` infers (read through its ``ShapeView``).

And the ``HoistCWiseUnaryChains`` stage for concatenations: when every input of a
``Concat``/``ConcatV2`` is the same element-wise unary op (read by the concat only), the op
moves after the concat: ``Concat(Relu(a), Relu(b))`` becomes ``Relu(Concat(a, b))``, keeping the
first input's node (Inception's mixed blocks in TF's dumps), repeated for chains.

The other stages (AddN rewrites of Add trees, ``Pow`` and ``Reciprocal`` rewrites, unary ops
sunk into ``Split`` outputs...) keep the same nodes in the same clusters under other names and
are not simulated.
"""

from __future__ import annotations

from jitsim.graph.model import parse_input
from jitsim.passes.grappler import RewriteRecord, preserved
from jitsim.passes.graphedit import EditGraph, topological_order
from jitsim.passes.shape_inference import ShapeView


def remove_redundant_reshapes(eg: EditGraph, keep=frozenset(), shapes: ShapeView | None = None) -> RewriteRecord:
    rec = RewriteRecord("arithmetic_optimizer")
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
    rec = RewriteRecord("arithmetic_optimizer")
    keep_set = preserved(eg, keep)
    for name in topological_order(eg):
        while True:
            nd = eg.nodes.get(name)
            if nd is None or nd.op not in ("Concat", "ConcatV2") or name in keep_set:
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
