"""Grappler's arithmetic optimizer, the stage that changes what is clustered: redundant
``Reshape``s.

``ArithmeticOptimizer``'s ``RemoveRedundantReshapeOrBroadcastTo`` stage
(``grappler/optimizers/arithmetic_optimizer.cc``):

* ``Reshape(Reshape(x, s1), s2)`` becomes ``Reshape(x, s2)`` when the inner Reshape is read by
  the outer one only, has no control inputs and is not preserved (``tf.tensordot``'s
  reshape back to 3-D followed by a head-splitting reshape, in every Keras/KerasHub attention);
* a ``Reshape`` whose input already has the output shape (both fully known) is removed.

Static shapes are what the graph records (``_output_shapes``, as SavedModel function bodies
carry them). The other stages (AddN rewrites of Add trees, hoisting unary ops out of
``Concat``, ``Pow`` and ``Reciprocal`` rewrites...) keep the same nodes in the same clusters
under other names and are not simulated.
"""

from __future__ import annotations

from jitsim.graph.model import parse_input
from jitsim.passes.grappler import RewriteRecord, preserved
from jitsim.passes.graphedit import EditGraph, topological_order


def _shape(nd, port: int = 0):
    if "_output_shapes" not in nd.attr or port >= len(nd.attr["_output_shapes"].list.shape):
        return None
    shp = nd.attr["_output_shapes"].list.shape[port]
    if shp.unknown_rank:
        return None
    dims = [d.size for d in shp.dim]
    return dims if all(d >= 0 for d in dims) else None


def remove_redundant_reshapes(eg: EditGraph, keep=frozenset()) -> RewriteRecord:
    rec = RewriteRecord("arithmetic_optimizer")
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
        out_shape, in_shape = _shape(nd), _shape(inner, port)
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
