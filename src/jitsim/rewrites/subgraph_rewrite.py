"""TF's feed/fetch rewrite of a session call (``subgraph::RewriteGraphForExecution``).

Before a ``tf.compat.v1.Session`` runs its JIT passes on a call (``POST_REWRITE_FOR_EXEC``),
``GraphExecutionState::BuildGraph`` rewrites the client graph for that call, with the
function convention a ``DirectSession`` uses:

* each fed tensor gets an ``_Arg`` node ``_arg_<node>_<output>_<i>`` (``index`` i, on the
  client device), and every data input that read the tensor reads the ``_Arg`` instead (for a
  fed ``Placeholder``, its outgoing control edges move to the ``_Arg`` too);
* each fetched tensor gets a ``_Retval`` node ``_retval_<node>_<output>_<i>`` reading it;
* everything the ``_Retval`` nodes and the target ops do not need (data and control inputs,
  transitively) is removed.

The new nodes are created after every existing node (feeds first, then fetches), so TF's
node ids put them last; the pruning keeps the order of the rest. DirectSession sorts the
feed, fetch and target names before it builds the call, so ``i`` counts in sorted order
(:class:`jitsim.frontend.session_call.SessionCall` keeps them sorted).

>>> from jitsim.graph import Graph
>>> g = Graph.from_nodes([("x", "Placeholder", [], {"dtype": "DT_FLOAT"}), ("y", "Relu", ["x"], {"T": "DT_FLOAT"}),
...                       ("unused", "Relu", ["x"], {"T": "DT_FLOAT"})])
>>> [n.name for n in rewrite_for_execution(g, feeds=["x:0"], fetches=["y:0"])]
['y', '_arg_x_0_0', '_retval_y_0_0']
"""

from __future__ import annotations

from jitsim.errors import GraphError
from jitsim.registry import protos
from jitsim.graph.model import Graph, graphdef_without_nodes, parse_input
from jitsim.opsets import PLACEHOLDER_OPS
from jitsim.defs import DEVICES

CLIENT_DEVICE = DEVICES["cpu"]


def split_tensor_name(name: str) -> tuple[str, int]:
    """``"node:1"`` -> ``("node", 1)``; ``"node"`` -> ``("node", 0)`` (TF's ParseTensorName)."""
    node, sep, port = name.rpartition(":")
    if sep and port.isdigit():
        return node, int(port)
    return name, 0


def output_type(graph: Graph, node: str, port: int, what: str) -> int:
    """The dtype of output ``port`` of ``node`` (its base type: a ref's value type), or a
    :class:`GraphError` naming the tensor when the node or the output does not exist."""
    from jitsim.registry.optypes import REF_OFFSET, output_types

    if node not in graph:
        raise GraphError(f"{what} {node}:{port}: no node {node!r} in the graph", graph.source)
    types = output_types(graph[node].nodedef, {f.signature.name: f for f in graph.library.function})
    if types is None:
        raise GraphError(f"{what} {node}:{port}: the outputs of op {graph[node].op!r} are unknown", graph.source)
    if port >= len(types):
        raise GraphError(f"{what} {node}:{port}: node {node!r} ({graph[node].op}) has "
                         f"{len(types)} output{'s' if len(types) != 1 else ''}", graph.source)
    t = types[port]
    return t - REF_OFFSET if t > REF_OFFSET else t


def rewrite_for_execution(graph: Graph, *, feeds=(), fetches=(), targets=(), device: str = CLIENT_DEVICE) -> Graph:
    """The graph TF's session builds for one call: ``feeds`` / ``fetches`` are tensor names
    (``node:i``), ``targets`` op names, each in the order TF numbers them (sorted, for a
    DirectSession). ``graph`` is not modified. Errors are TF's, as one line."""
    if not fetches and not targets:
        raise GraphError("a session call needs at least one fetch or target", graph.source)
    fed = [split_tensor_name(t) for t in feeds]
    if len(set(fed)) != len(fed):
        raise GraphError("a tensor is fed more than once", graph.source)
    fetched = [split_tensor_name(t) for t in fetches]
    both = set(fed) & set(fetched)
    if both:
        n, p = sorted(both)[0]
        raise GraphError(f"{n}:{p} is both fed and fetched", graph.source)
    for t in targets:
        if split_tensor_name(t)[0] not in graph:
            raise GraphError(f"target {t}: no node {t!r} in the graph", graph.source)

    gd = graph.graphdef
    if fed:  # the fed tensors' consumers are rewired below: on a copy (graph is not modified)
        gd = protos.GraphDef()
        gd.CopyFrom(graph.graphdef)
    by_name = {nd.name: nd for nd in gd.node}
    new_nodes = []
    args = {}  # (node, port) fed -> its _Arg's name
    moves_control = {}  # a fed Placeholder -> the _Arg its control edges move to
    for i, (node, port) in enumerate(fed):
        dtype = output_type(graph, node, port, "feed")
        arg = protos.NodeDef(name=f"_arg_{node}_{port}_{i}", op="_Arg", device=device)
        arg.attr["T"].type = dtype
        arg.attr["index"].i = i
        new_nodes.append(arg)
        args[(node, port)] = arg.name
        if graph[node].op in PLACEHOLDER_OPS:
            moves_control.setdefault(node, arg.name)
    if args:
        fed_nodes = {n for n, _ in args}
        for nd in gd.node:
            for j, ref in enumerate(nd.input):
                src, out = parse_input(ref)
                if src not in fed_nodes:
                    continue
                if (src, out) in args:
                    nd.input[j] = args[(src, out)]
                elif out < 0 and src in moves_control:
                    nd.input[j] = "^" + moves_control[src]
    for i, (node, port) in enumerate(fetched):
        dtype = output_type(graph, node, port, "fetch")
        ret = protos.NodeDef(name=f"_retval_{node}_{port}_{i}", op="_Retval", device=device)
        ret.input.append(node if port == 0 else f"{node}:{port}")
        ret.attr["T"].type = dtype
        ret.attr["index"].i = i
        new_nodes.append(ret)
    for nd in new_nodes:
        if nd.name in by_name:
            raise GraphError(f"the graph already has a node named {nd.name!r}, the name TF gives a feed or fetch",
                             graph.source)
        by_name[nd.name] = nd

    # what the fetches and targets need, over data and control inputs
    roots = [nd.name for nd in new_nodes if nd.op == "_Retval"] + [split_tensor_name(t)[0] for t in targets]
    need = set(roots)
    stack = list(roots)
    while stack:
        for ref in by_name[stack.pop()].input:
            src = parse_input(ref)[0]
            if src not in need:
                need.add(src)
                stack.append(src)
    out = graphdef_without_nodes(gd)
    out.node.extend(nd for nd in list(gd.node) + new_nodes if nd.name in need)
    return Graph(out, source=graph.source)
