"""A small mutable graph for the rewrites TF makes before clustering (no TF needed).

The clustering passes work on :class:`jitsim.graph.tfgraph.TfGraph`, rebuilt from a
``GraphDef``. The rewrites TF runs *before* them (function inlining, functional-op lowering,
placement, Grappler) add, remove and rewire nodes freely; :class:`EditGraph` keeps the nodes
as ``NodeDef`` protos in creation order (TF's node-id order: new nodes go last, as
``Graph::AddNode`` gives them the next id) with inputs as ``"node:port"`` / ``"^node"``
strings, plus a consumer index kept up to date by every edit, and per consumer (built when
first asked, dropped when its inputs are rewritten) where each producer appears in its input
list: so a use is found, and a data use redirected in place, in time independent of how many
inputs the consumer has (a wide ``AddN`` of 10,000 inlined calls, issue 22).

:meth:`EditGraph.new_name` is TF's ``Graph::NewName``: ``<prefix>/_<n>`` with one counter per
graph, shared by every rewrite (that is why TF's lowered and inlined nodes are numbered
``.../_0``, ``.../_1`` ... across rewrites).
"""

from __future__ import annotations

from jitsim.registry import protos
from jitsim.graph.model import CONTROL, Graph, format_input, graphdef_without_nodes, parse_input, set_attr_value
from jitsim.opsets import MERGE_OPS, NEXT_ITERATION_OPS


class EditGraph:
    def __init__(self, graphdef, *, copy: bool = True):
        """``graphdef`` is copied (not changed) unless ``copy`` is False: then the EditGraph
        takes it and edits it in place (a GraphDef made for it alone)."""
        if copy:
            self.graphdef = protos.GraphDef()
            self.graphdef.CopyFrom(graphdef)
        else:
            self.graphdef = graphdef
        self.nodes: dict[str, object] = {}
        # each name is read from its NodeDef once, and that one str is the key of every index
        # below (each read of a proto's string field makes a new str: names of functions
        # inlined D deep are D levels long, so copies of them made memory grow like D² times
        # the number of indexes, issue 39)
        for nd in self.graphdef.node:
            self.nodes[nd.name] = nd
        self.counter = 0
        self.added: list = []  # the NodeDefs add_nodedef took, in order (an append-only log)
        # a node a rewrite took into another: name -> (the node it became part of, the rewrite)
        self.provenance: dict[str, tuple[str, str]] = {}
        self._seq = 0  # position of each node in creation order, for consumers()
        self._pos: dict[str, int] = {}
        for n in self.nodes:
            self._pos[n] = self._seq
            self._seq += 1
        self._consumers: dict[str, set[str]] = {n: set() for n in self.nodes}
        for name, nd in self.nodes.items():
            for ref in nd.input:
                src = parse_input(ref)[0]
                self._consumers.setdefault(src, set()).add(name)
        # consumer -> (producer -> [(position, port)], whether the input list is in TF's
        # order: data inputs, then control inputs without duplicates)
        self._where: dict[str, tuple[dict[str, list[tuple[int, int]]], bool]] = {}

    @classmethod
    def from_graph(cls, graph: Graph) -> "EditGraph":
        return cls(graph.to_graphdef(), copy=False)  # (a new GraphDef: no second copy)

    def to_graph(self, source: str | None = None, *, release: bool = False) -> Graph:
        """The graph as it stands, as a :class:`Graph` (a copy). ``release``: this EditGraph
        is given up (left empty) and each node's NodeDef dropped once copied, so that the two
        forms of a big graph are not alive at once (issue 39)."""
        gd = graphdef_without_nodes(self.graphdef)
        if not release:
            for nd in self.nodes.values():
                gd.node.add().CopyFrom(nd)
            return Graph(gd, source=source, validate=False)
        nodes, self.nodes = self.nodes, {}
        self.added, self._pos, self._consumers, self._where = [], {}, {}, {}
        add = gd.node.add
        for name in list(nodes):
            add().CopyFrom(nodes.pop(name))
        self.graphdef = protos.GraphDef()
        return Graph(gd, source=source, validate=False)

    @property
    def library(self):
        return self.graphdef.library

    # -- names ------------------------------------------------------------------------
    def new_name(self, prefix: str) -> str:
        """TF's ``Graph::NewName``: ``<prefix>/_<counter>``."""
        name = f"{prefix}/_{self.counter}"
        self.counter += 1
        return name

    # -- queries -----------------------------------------------------------------------
    def __contains__(self, name: str) -> bool:
        return name in self.nodes

    def __getitem__(self, name: str):
        return self.nodes[name]

    def __len__(self) -> int:
        return len(self.nodes)

    def names(self) -> list[str]:
        return list(self.nodes)

    def consumers(self, name: str) -> list[str]:
        """Names of the nodes with an input (data or control) from ``name``, in node order."""
        cs = self._consumers.get(name, set())
        if len(cs) <= 1:
            return list(cs)
        return sorted(cs, key=self._pos.__getitem__)

    def data_inputs(self, name: str) -> list[tuple[str, int]]:
        return [parse_input(r) for r in self.nodes[name].input if not r.startswith("^")]

    def _index(self, c: str) -> tuple[dict[str, list[tuple[int, int]]], bool]:
        """Where each producer appears in ``c``'s inputs, and whether they are in TF's order."""
        got = self._where.get(c)
        if got is None:
            where: dict[str, list[tuple[int, int]]] = {}
            ordered, seen_control = True, False
            for i, ref in enumerate(self.nodes[c].input):
                src, port = parse_input(ref)
                uses = where.setdefault(src, [])
                if port == CONTROL:
                    if any(p == CONTROL for _, p in uses):
                        ordered = False  # a duplicate control input
                    seen_control = True
                elif seen_control:
                    ordered = False  # a data input after a control input
                uses.append((i, port))
            got = self._where[c] = (where, ordered)
        return got

    def out_refs(self, name: str) -> list[tuple[str, int, int]]:
        """Every use of ``name``: ``(consumer, position in its input list, src_output)``
        (``src_output`` is ``CONTROL`` for a control input)."""
        out = []
        for c in self.consumers(name):
            for i, port in self._index(c)[0].get(name, ()):
                out.append((c, i, port))
        return out

    def redirect_data_uses(self, consumer: str, old: str, new_ref_of) -> bool:
        """Redirect every data use of ``old`` in ``consumer`` to ``new_ref_of(port, ref)`` in place,
        when that gives what :meth:`set_inputs` of the rewritten list would (the list is in TF's
        order and ``old`` has no control use there); False (nothing changed) otherwise."""
        where, ordered = self._index(consumer)
        uses = where.get(old)
        if not ordered or not uses or any(p == CONTROL for _, p in uses):
            return False
        nd = self.nodes[consumer]
        news = [(i, new_ref_of(p, nd.input[i])) for i, p in uses]
        if any(r.startswith("^") for _, r in news):
            return False
        del where[old]
        self._consumers.get(old, set()).discard(consumer)
        for i, r in news:
            nd.input[i] = r
            src, port = parse_input(r)
            where.setdefault(src, []).append((i, port))
            where[src].sort()
            self._consumers.setdefault(src, set()).add(consumer)
        return True

    def has_control_outputs(self, name: str) -> bool:
        return any(p == CONTROL for _, _, p in self.out_refs(name))

    # -- edits -------------------------------------------------------------------------
    def add(self, name: str, op: str, inputs=(), *, device: str = "", attrs=None, after=None):
        """Add a node last (TF's next id). ``attrs`` maps names to ``AttrValue`` protos or
        Python values."""
        nd = protos.NodeDef(name=name, op=op, device=device)
        nd.input.extend(inputs)
        for k, v in (attrs or {}).items():
            if hasattr(v, "WhichOneof"):
                nd.attr[k].CopyFrom(v)
            else:
                set_attr_value(nd.attr[k], v)
        return self.add_nodedef(nd)

    def add_nodedef(self, nd):
        name = nd.name  # read once: one str for every index (__init__)
        if name in self.nodes:
            raise ValueError(f"duplicate node name {name!r}")
        self.nodes[name] = nd
        self.added.append(nd)
        self._pos[name] = self._seq
        self._seq += 1
        self._consumers.setdefault(name, set())
        for ref in nd.input:
            self._consumers.setdefault(parse_input(ref)[0], set()).add(name)
        return nd

    def set_inputs(self, name: str, inputs) -> None:
        nd = self.nodes[name]
        self._where.pop(name, None)
        for ref in nd.input:
            src = parse_input(ref)[0]
            self._consumers.get(src, set()).discard(name)
        del nd.input[:]
        # control inputs after data inputs, without duplicates (TF's ToGraphDef order)
        data = [r for r in inputs if not r.startswith("^")]
        ctrl = list(dict.fromkeys(r for r in inputs if r.startswith("^")))
        nd.input.extend(data + ctrl)
        for ref in nd.input:
            self._consumers.setdefault(parse_input(ref)[0], set()).add(name)

    def add_control_input(self, dst: str, src: str) -> None:
        ref = "^" + src
        if ref not in self.nodes[dst].input:
            self.set_inputs(dst, list(self.nodes[dst].input) + [ref])

    def remove(self, name: str) -> None:
        """Remove ``name`` and every input reference to it."""
        for c in self.consumers(name):
            if c == name:
                continue
            self.set_inputs(c, [r for r in self.nodes[c].input if parse_input(r)[0] != name])
        self.set_inputs(name, [])
        del self.nodes[name]
        self._consumers.pop(name, None)
        self._where.pop(name, None)

    def replace_uses(self, old: str, old_port: int, new_ref: str | None, *, control_to: str | None = None) -> None:
        """Redirect every data use of ``old:old_port`` to ``new_ref``; with ``old_port`` None-like
        (``CONTROL``), redirect control uses of ``old`` to ``^control_to`` (dropped if None)."""
        for c in self.consumers(old):
            if old_port != CONTROL and new_ref is not None and \
                    self.redirect_data_uses(c, old, lambda p, r: new_ref if p == old_port else r):
                continue
            nd = self.nodes[c]
            new = []
            changed = False
            for ref in nd.input:
                src, port = parse_input(ref)
                if src == old and port == old_port:
                    changed = True
                    if old_port == CONTROL:
                        if control_to is not None and control_to != c:
                            new.append("^" + control_to)
                    elif new_ref is not None:
                        new.append(new_ref)
                    continue
                new.append(ref)
            if changed:
                self.set_inputs(c, new)


def ref(name: str, port: int = 0) -> str:
    return format_input(name, port)


# tensorflow.DataType numbers (types.proto)
DT_FLOAT, DT_INT32, DT_BOOL, DT_RESOURCE = 1, 3, 10, 20


def dependencies(eg: EditGraph) -> tuple[dict[str, int], dict[str, list[str]]]:
    """Per node, the number of its inputs (data and control; NextIteration back edges
    ignored) and its consumers in node order: what a topological sort starts from."""
    indeg = {n: 0 for n in eg.nodes}
    succ: dict[str, list[str]] = {n: [] for n in eg.nodes}
    for n, nd in eg.nodes.items():
        for r in nd.input:
            src = parse_input(r)[0]
            if src in eg and eg[src].op not in NEXT_ITERATION_OPS:
                indeg[n] += 1
                succ[src].append(n)
    return indeg, succ


def topological_order(eg: EditGraph) -> list[str]:
    """A topological order (data and control edges, NextIteration back edges ignored),
    ties in node order, as Grappler sorts a graph before optimizing it."""
    indeg, succ = dependencies(eg)
    order = []
    ready = [n for n in eg.nodes if indeg[n] == 0]
    ready.reverse()
    while ready:
        n = ready.pop()
        order.append(n)
        for s in reversed(succ[n]):
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    seen = set(order)
    order.extend(n for n in eg.nodes if n not in seen)
    return order


def tf_topological_order(eg: EditGraph) -> list[str]:
    """Grappler's own topological order (``ComputeTopologicalOrder`` in
    ``grappler/utils/topological_sort.cc``): Kahn's algorithm with a first-in-first-out queue.
    The queue starts with the nodes without inputs, in node order; a node's consumers are
    visited in node order, each once however many edges join them; a node is ready when all
    its distinct input nodes (data and control) are done, a ``Merge``'s ``NextIteration``
    inputs counting as done from the start. Nodes left in a cycle follow in node order.

    >>> from jitsim.graph.model import Graph
    >>> g = Graph.from_nodes([("a", "Const", []), ("b", "Const", []), ("c", "AddV2", ["b", "a"]),
    ...                       ("d", "Neg", ["a"]), ("e", "AddV2", ["c", "c"])])
    >>> tf_topological_order(EditGraph(g.graphdef))
    ['a', 'b', 'd', 'c', 'e']
    """
    names = list(eg.nodes)
    index = {n: i for i, n in enumerate(names)}
    fanin: dict[str, set[str]] = {}
    fanout: dict[str, set[str]] = {n: set() for n in names}
    ready_count: dict[str, int] = {}
    for n, nd in eg.nodes.items():
        srcs = {x for x in (parse_input(r)[0] for r in nd.input) if x in index}
        fanin[n] = srcs
        for x in srcs:
            fanout[x].add(n)
        ready_count[n] = (sum(1 for x in srcs if eg.nodes[x].op in NEXT_ITERATION_OPS)
                          if nd.op in MERGE_OPS else 0)
    order = [n for n in names if not fanin[n]]
    front = 0
    while front < len(order):
        n = order[front]
        front += 1
        for c in sorted(fanout[n], key=index.__getitem__):
            ready_count[c] += 1
            if ready_count[c] == len(fanin[c]):
                order.append(c)
    seen = set(order)
    order.extend(n for n in names if n not in seen)
    return order


def reorder(eg: EditGraph, order) -> None:
    """Give ``eg``'s nodes the order ``order`` (every node once), as TF renumbers a graph."""
    eg.nodes = {n: eg.nodes[n] for n in order}
    eg._pos = {n: i for i, n in enumerate(order)}
    eg._seq = len(order)


def sort_topologically(eg: EditGraph) -> None:
    """Reorder ``eg``'s nodes as Grappler leaves a graph: its ``TopologicalSort``, the order of
    :func:`tf_topological_order` (TF then gives the nodes ids in that order when it rebuilds
    the graph: the clone numbering and cluster numbering that follow depend on it)."""
    reorder(eg, tf_topological_order(eg))


def dfs_topological_order(eg: EditGraph) -> list[str]:
    """The order ``utils::MutableGraphView::SortTopologically`` gives (the sort Grappler's
    remapper starts with): a reversed post-order of iterative depth-first walks, one from each
    node without inputs, taken from the last such node to the first; a node's consumers are
    pushed port by port (data), then its control consumers, each list in node order, so the
    last pushed is walked first. ``NextIteration -> Merge`` edges are not followed.

    >>> from jitsim.graph.model import Graph
    >>> g = Graph.from_nodes([("a", "Const", []), ("b", "Const", []), ("c", "AddV2", ["b", "a"]),
    ...                       ("d", "Neg", ["a"]), ("e", "AddV2", ["c", "c"])])
    >>> dfs_topological_order(EditGraph(g.graphdef))  # b walked first (b, c, e), then a (a, d)
    ['a', 'd', 'b', 'c', 'e']
    """
    names = list(eg.nodes)
    index = {n: i for i, n in enumerate(names)}
    n_nodes = len(names)
    data_out: list[dict[int, list[int]]] = [dict() for _ in names]
    ctrl_out: list[list[int]] = [[] for _ in names]
    has_fanin = [False] * n_nodes
    for i, n in enumerate(names):
        for r in eg.nodes[n].input:
            src, port = parse_input(r)
            if src not in index:
                continue
            has_fanin[i] = True
            s = index[src]
            if port == CONTROL:
                if i not in ctrl_out[s]:
                    ctrl_out[s].append(i)
            else:
                data_out[s].setdefault(port, []).append(i)
    PENDING, PROCESSING, PROCESSED = 0, 1, 2
    state = [PENDING] * n_nodes
    position = [0] * n_nodes
    pos = n_nodes - 1

    def walk(root: int) -> None:
        nonlocal pos
        if state[root] != PENDING:
            return
        stack = [(root, True)]
        while stack:
            cur, enter = stack.pop()
            if state[cur] == PROCESSED:
                continue
            if not enter:
                position[cur] = pos
                state[cur] = PROCESSED
                pos -= 1
                continue
            state[cur] = PROCESSING
            stack.append((cur, False))
            outs = [f for p in sorted(data_out[cur]) for f in data_out[cur][p]] + ctrl_out[cur]
            for f in outs:
                if eg.nodes[names[cur]].op in NEXT_ITERATION_OPS and eg.nodes[names[f]].op in MERGE_OPS:
                    continue
                if state[f] == PENDING:
                    stack.append((f, True))

    for i in range(n_nodes - 1, -1, -1):
        if not has_fanin[i]:
            walk(i)
    for i in range(n_nodes):  # nodes left in a cycle: walked from anywhere, as TF does with ignore_cycles
        walk(i)
    return [n for _, n in sorted(zip(position, names))]


def dedup_control_inputs(eg: EditGraph, name: str) -> bool:
    """TF's ``DedupControlInputs``: a control input from a node the list already names (as data
    or control) is dropped, swapped with the last input first, as TF drops it.

    >>> from jitsim.graph.model import Graph
    >>> g = Graph.from_nodes([("a", "Const", []), ("b", "Const", []), ("c", "AddV2", ["a", "b", "^a", "^b"])])
    >>> eg = EditGraph(g.graphdef)
    >>> dedup_control_inputs(eg, "c"), list(eg["c"].input)
    (True, ['a', 'b'])
    """
    refs = list(eg.nodes[name].input)
    seen: set[str] = set()
    pos, changed = 0, False
    while pos < len(refs):
        src = parse_input(refs[pos])[0]
        if src in seen and refs[pos].startswith("^"):
            refs[pos], refs[-1] = refs[-1], refs[pos]
            refs.pop()
            changed = True
        else:
            seen.add(src)
            pos += 1
    if changed:
        eg.set_inputs(name, refs)  # data first, no duplicate left: kept in this order
    return changed
