"""TF's ``CloneConstantsForBetterClusteringPass`` (tf-passes §5), and its inverse.

A small constant (fewer than 16 elements) feeding several consumers would glue their
clusters together; TF gives every consumer but the last (in node-id order) its own copy
``<const>/clone_<k>``. Clones get new node and edge ids after all existing ones, so to
re-run clustering with TF's exact ids from a dump taken *after* this pass
(``before_mark_for_compilation``), :func:`uncloned` first folds the clones back into
their originals and the pass is simulated again.
"""

from __future__ import annotations


from jitsim.errors import GraphError
from jitsim.registry import protos
from jitsim.graph.model import CONTROL, Edge, Graph, parse_input
from jitsim.opsets import CONSTANT_OPS
from jitsim.graph.tfgraph import CLONE_NAME_RE, TfEdge, TfGraph, TfNode

INPLACE_OPS = ("InplaceUpdate", "InplaceAdd", "InplaceSub")


def _is_small_constant(n: TfNode) -> bool:
    if n.op not in CONSTANT_OPS or "value" not in n.attr:
        return False
    shape = n.attr["value"].tensor.tensor_shape
    size = 1
    for k, d in enumerate(shape.dim):
        if d.size < 0:  # jitsim.graph.validate refuses these at load; a graph built in Python may still hold one
            what = "unknown (-1)" if d.size == -1 else f"negative ({d.size})"
            raise GraphError(f"node {n.name!r} ({n.op}): attr 'value': the tensor's dimension {k} is {what}; a "
                             "constant's shape must be fully known")
        size *= d.size
    return size < 16


def clone_constants_for_better_clustering(g: TfGraph) -> list[str]:
    """Clone small shared constants in place; return the clones' names in creation order."""
    snapshot = list(g.all_nodes())
    if any(n.op in INPLACE_OPS for n in snapshot):
        return []
    name_set = set(g.by_name) | {"_SOURCE", "_SINK"}
    counter = 0
    made: list[str] = []
    nodes = g.nodes
    small: dict[int, bool] = {}  # node id -> a small constant (each node looked at once)
    templates: dict[int, object] = {}
    edges = g.edges_by_id
    for n in snapshot:
        # the in-edges in id order (a node's edge dict is in id order: ids only grow), taken
        # before this node's edges change
        for e in list(n.in_edges.values()):
            c = nodes[e.src]
            is_small = small.get(c.id)
            if is_small is None:
                is_small = small[c.id] = c.op in CONSTANT_OPS and _is_small_constant(c)
            if not is_small or len(c.out_edges) == 1:
                continue
            while True:
                name = f"{c.name}/clone_{counter}"
                counter += 1
                if name not in name_set:
                    break
            template = templates.get(c.id)
            if template is None:  # the constant without its inputs, copied once per constant
                template = templates[c.id] = protos.NodeDef()
                template.CopyFrom(c.nodedef)
                del template.input[:]
            nd = protos.NodeDef()
            nd.CopyFrom(template)
            nd.name = name
            clone = g.add_node(nd, name, c.op)
            cid = clone.id
            # the clone's edges as g.add_edge makes them (inlined: thousands of clones)
            clone_in = clone.in_edges
            for ie in list(c.in_edges.values()):  # in id order
                eid = len(edges)
                te = TfEdge(eid, ie.src, ie.src_output, cid, ie.dst_input)
                edges.append(te)
                nodes[ie.src].out_edges[eid] = te
                clone_in[eid] = te
            if e.is_control:
                out = CONTROL
                slot = CONTROL
            else:
                out = 0
                slot = e.dst_input
                g.remove_edge(e)
            eid = len(edges)
            te = TfEdge(eid, cid, out, n.id, slot)
            edges.append(te)
            clone.out_edges[eid] = te
            n.in_edges[eid] = te
            made.append(name)
    return made


def uncloned(graph: Graph, *, in_place: bool = False) -> tuple[Graph, list[str]]:
    """Fold ``X/clone_k`` constants of a post-clone dump back into ``X``.

    Returns the graph as it was before TF's cloning pass and the removed clone names.
    ``in_place``: ``graph`` itself becomes that graph (its GraphDef and nodes changed, not
    copied), for a caller that has no other use for it."""
    nodes = graph.nodes
    clones = {}
    for name in nodes:
        if "/clone_" not in name:  # what CLONE_NAME_RE needs, checked first
            continue
        m = CLONE_NAME_RE.match(name)
        n = nodes[name]
        if m and n.op in CONSTANT_OPS and m.group(1) in nodes and nodes[m.group(1)].op == n.op:
            clones[name] = m.group(1)
    if not clones:
        return graph, []
    ins = graph._in  # (read before the GraphDef changes: it is rebuilt from it where released)
    unwritten = {name for name in graph.unwritten_inputs if name not in clones}  # (+ the inputs rewritten below)
    # the GraphDef without the clones: one copy of the whole proto (or the graph's own), the
    # clones deleted (each node of the model is the GraphDef's node at its index)
    if in_place:
        gd = graph.graphdef
    else:
        gd = protos.GraphDef()
        gd.CopyFrom(graph.graphdef)
    gd_nodes = gd.node
    # deleted run by run, from the end (one node at a time moves the rest of the list for each)
    runs: list[list[int]] = []
    for i in sorted(nodes[c].index for c in clones):
        if runs and runs[-1][1] == i:
            runs[-1][1] = i + 1
        else:
            runs.append([i, i + 1])
    for lo, hi in reversed(runs):
        del gd_nodes[lo:hi]
    # the kept nodes' in-edges: the same edges where a node neither reads a clone nor repeats a
    # control input; else its inputs rewritten (a clone's name -> its original's, a repeated
    # control input dropped), in the NodeDef and in the edges alike
    kept = [name for name in nodes if name not in clones]  # the model keeps its nodes in index order
    upward, multi = graph.upward_edges, graph.multi_control
    if upward is not None and multi is not None and len(runs) == 1 and runs[0][1] == len(nodes):
        # the clones are the last nodes (as TF appends them), so every edge from one goes up the
        # file: the nodes that read a clone are among the upward edges' ends; with those that
        # have two control inputs or more, they are the nodes the scan below would rewrite
        touched = ({d for s, d in upward if s in clones} | multi).difference(clones)
        new_in: dict[str, list] = {name: ins[name] for name in kept}
        todo = sorted((nodes[name].index, name) for name in touched)  # (their index: before the clones)
    else:
        touched = None
        new_in = {}
        todo = enumerate(kept)
    for i, name in todo:
        lst = ins[name]
        if touched is None:  # a node neither reading a clone nor repeating a control input: as it is
            control = 0
            for e in lst:
                if e.src in clones:
                    break
                if e.dst_input == CONTROL:
                    control += 1
            else:
                if control < 2:
                    new_in[name] = lst
                    continue
        nd = gd_nodes[i]
        inputs = list(nd.input)
        new_inputs, seen_ctrl = [], set()
        for ref in inputs:
            src, out = parse_input(ref)
            if src in clones:
                base = clones[src]
                ref = "^" + base if ref.startswith("^") else (base if out == 0 else f"{base}:{out}")
            if ref.startswith("^"):
                if ref in seen_ctrl:
                    continue
                seen_ctrl.add(ref)
            new_inputs.append(ref)
        if new_inputs != inputs:
            del nd.input[:]
            nd.input.extend(new_inputs)
            unwritten.add(name)
        edges, seen = [], set()
        for e in lst:
            src = clones.get(e.src, e.src)
            if e.dst_input == CONTROL:
                if src in seen:
                    continue
                seen.add(src)
            edges.append(e if src == e.src else Edge(src, e.dst, e.src_output, e.dst_input))
        new_in[name] = edges
    if touched is not None:  # the edges up the file now (the kept nodes keep their index)
        index = {name: nodes[name].index for name in touched}
        new_upward = [(s, d) for s, d in upward if s not in clones and d not in index]
        new_upward += [(e.src, d) for d, i in index.items() for e in new_in[d] if nodes[e.src].index >= i]
    else:
        new_upward = None
    if in_place:
        # the same Node objects (their NodeDefs are still the GraphDef's), re-indexed after the
        # first clone removed
        first = runs[0][0]
        keys = graph.attr_keys
        if keys is not None:  # (the kept nodes' keys, by their new index)
            graph.attr_keys = keys[:first] + [keys[nodes[name].index] for name in kept[first:]]
        for name in clones:
            del nodes[name]
        for i in range(first, len(kept)):
            nodes[kept[i]].index = i
        graph.set_edge_index(new_in, unwritten, new_upward)
        return graph, sorted(clones)
    return Graph.derived(gd, kept, new_in, unwritten, source=graph.source, upward=new_upward), sorted(clones)

