"""The one in-memory graph model every jitsim pass works on.

A :class:`Graph` wraps a TensorFlow ``GraphDef``: nodes keep their ``NodeDef``
protos (so every field jitsim does not touch survives a load/save round trip)
and the topology is one :class:`Edge` per data or control dependency (also
available as a :class:`networkx.MultiDiGraph` keyed by node name, :attr:`Graph.nx`):

* data edge ``src:out -> dst`` has ``src_output=out`` and ``dst_input=slot``;
* control edge ``^src -> dst`` has ``src_output=dst_input=CONTROL`` (-1, TF's
  ``Graph::kControlSlot``).

Node order is the ``GraphDef`` order, which for TF's own dumps is TF's node-id
order (``Graph::ToGraphDef`` writes nodes by increasing id); :attr:`Node.index`
keeps it.

>>> g = Graph.from_nodes([("x", "Placeholder", []), ("y", "Neg", ["x"]), ("z", "NoOp", ["^y"])])
>>> [(e.src, e.dst, e.src_output, e.dst_input) for e in g.in_edges("y")]
[('x', 'y', 0, 0)]
>>> g.in_edges("z")[0].is_control
True
"""

from __future__ import annotations

from collections import namedtuple
from typing import TYPE_CHECKING, Iterable, Iterator, NamedTuple
from jitsim.defs import CLUSTER_ATTR

if TYPE_CHECKING:  # networkx costs ~0.15 s to import: only the paths that use it load it
    import networkx as nx

from jitsim.accel import load as _load_accel
from jitsim.errors import GraphError
from jitsim.registry import protos
from jitsim.opsets import NEXT_ITERATION_OPS

CONTROL = -1

# Ops whose out-edges close loops (TF's NotBackedge filter).


class Edge(namedtuple("Edge", ("src", "dst", "src_output", "dst_input"))):
    """One data or control dependency (immutable; compared and hashed by its fields). A
    tuple: a graph of 1M nodes holds millions of them."""

    __slots__ = ()

    @property
    def is_control(self) -> bool:
        return self[3] == CONTROL


# Edge(src, dst, src_output, dst_input) without a Python-level __new__: _new_edge(Edge, (...))
_new_edge = tuple.__new__


def parse_input(ref: str) -> tuple[str, int]:
    """``'a:2'`` -> ``('a', 2)``, ``'a'`` -> ``('a', 0)``, ``'^a'`` -> ``('a', CONTROL)``."""
    if ref.startswith("^"):
        return ref[1:], CONTROL
    name, sep, idx = ref.rpartition(":")
    if sep and idx.isdigit():
        return name, int(idx)
    return ref, 0


def format_input(src: str, src_output: int) -> str:
    if src_output == CONTROL:
        return "^" + src
    return src if src_output == 0 else f"{src}:{src_output}"


def graphdef_without_nodes(graphdef):
    """A new ``GraphDef`` with every field of ``graphdef`` but its nodes (versions, library...).

    What ``CopyFrom`` then ``del node[:]`` gives, without the copy of every node those leave
    behind: a upb message's memory is an arena that keeps all it ever held until the message is
    freed, so the nodes deleted stayed there, a dead copy of the graph as long as the new one
    lived (issue 39). A GraphDef with fields this protobuf does not know is copied that way
    still (they are kept)."""
    out = protos.GraphDef()
    try:
        from google.protobuf import unknown_fields

        unknown = len(unknown_fields.UnknownFieldSet(graphdef)) > 0
    except (ImportError, AttributeError, TypeError):  # (an older protobuf: copy, then delete)
        unknown = True
    if unknown:
        out.CopyFrom(graphdef)
        del out.node[:]
        return out
    for fd, value in graphdef.ListFields():
        if fd.name == "node":
            continue
        field = getattr(out, fd.name)
        if isinstance(value, (list, tuple)) or hasattr(value, "extend"):  # a repeated field
            field.extend(value)
        elif fd.message_type is not None:
            field.CopyFrom(value)
        else:
            setattr(out, fd.name, value)
    return out


class Node:
    """A view of one ``NodeDef``. Attribute reads go to the proto."""

    __slots__ = ("nodedef", "index")

    def __init__(self, nodedef, index: int):
        self.nodedef = nodedef
        self.index = index

    @property
    def name(self) -> str:
        return self.nodedef.name

    @property
    def op(self) -> str:
        return self.nodedef.op

    @property
    def device(self) -> str:
        return self.nodedef.device

    @property
    def attr(self):
        return self.nodedef.attr

    def get_attr(self, key: str, default=None):
        """Python value of attr ``key`` (``s`` decoded, lists as lists), else ``default``."""
        if key not in self.nodedef.attr:
            return default
        return attr_value_to_python(self.nodedef.attr[key])

    def set_attr(self, key: str, value) -> None:
        set_attr_value(self.nodedef.attr[key], value)

    def __repr__(self) -> str:
        return f"<Node {self.name} op={self.op}>"


def attr_value_to_python(av):
    kind = av.WhichOneof("value")
    if kind == "s":
        return av.s.decode("utf-8", "replace")
    if kind in ("i", "f", "b"):
        return getattr(av, kind)
    if kind == "type":
        return protos.dtype_name(av.type)
    if kind == "list":
        lst = av.list
        for field in ("s", "i", "f", "b", "type", "shape", "tensor", "func"):
            vals = getattr(lst, field)
            if len(vals):
                if field == "s":
                    return [v.decode("utf-8", "replace") for v in vals]
                if field == "type":
                    return [protos.dtype_name(v) for v in vals]
                return list(vals)
        return []
    if kind is None:
        return None
    return getattr(av, kind)  # shape, tensor, func, placeholder: the proto itself


def set_attr_value(av, value) -> None:
    if isinstance(value, protos.AttrValue):
        av.CopyFrom(value)
    elif isinstance(value, bool):
        av.b = value
    elif isinstance(value, int):
        av.i = value
    elif isinstance(value, float):
        av.f = value
    elif isinstance(value, str):
        av.s = value.encode()
    elif isinstance(value, bytes):
        av.s = value
    else:
        raise TypeError(f"unsupported attr value {value!r}")


def _refuse_name(name: str, i: int, nd, source):
    if not name:
        raise GraphError(f"node #{i} ({nd.op or 'no op'}) has an empty name", source)
    raise GraphError(f"duplicate node name {name!r}", source)


class _EdgeIndex(NamedTuple):
    """What :func:`_in_edges` reads off the nodes' inputs (see there)."""

    ins: dict[str, list[Edge]]
    unwritten: set[str]
    upward: list[tuple[str, str]]
    multi_control: set[str]


def _in_edges(graphdef, names: list[str], nodes: dict, source,
              inputs_of: list[list[str]] | None = None) -> _EdgeIndex:
    """Node name -> its in-edges (data inputs by slot, then control inputs, as in the NodeDef)
    for the nodes of ``graphdef``, whose names are ``names`` (in order); and the names of the
    nodes whose NodeDef ``input`` is not written as TF writes it from those edges (data inputs
    first, ``a`` for output 0, ``a:k`` otherwise, control inputs sorted by name): ``a:0``,
    ``a:01``, a control input out of order, a data input after a control input; and the edges
    ``(src, dst)`` that do not go down the file (a source at or after its destination: what
    :meth:`Graph.check_acyclic` and :func:`~jitsim.graph.tfgraph.is_rebuilt_graph` look at); and
    the nodes with two control inputs or more. ``inputs_of``: each node's ``input`` list, read
    already (:func:`read_node_facts`)."""
    ins: dict[str, list[Edge]] = {}
    unwritten: set[str] = set()
    upward: list[tuple[str, str]] = []
    multi_control: set[str] = set()
    new_edge = _new_edge
    # a ref that is a node's name is output 0 of it, unless some name itself looks like a
    # ref ("a:1", "^a": names TF refuses, read as parse_input reads them)
    plain = nodes if not any(":" in n or n.startswith("^") for n in names) else {}
    for i, (name, refs) in enumerate(zip(names, inputs_of if inputs_of is not None
                                         else (nd.input for nd in graphdef.node))):
        slot = 0
        lst = []
        last_control = None  # the previous control input's source, while they are in order
        for ref in refs:
            if ref in plain:  # the common case: output 0 of a node
                j = nodes[ref].index
                src = names[j]  # the node's own name (one str per name: __init__)
                lst.append(new_edge(Edge, (src, name, 0, slot)))
                slot += 1
                if last_control is not None:
                    unwritten.add(name)
                if j >= i:
                    upward.append((src, name))
                continue
            src, out = parse_input(ref)
            if src not in nodes:
                raise GraphError(f"node {name!r} has input {ref!r}, which names no node", source)
            j = nodes[src].index
            src = names[j]
            if j >= i:
                upward.append((src, name))
            if out == CONTROL:
                lst.append(new_edge(Edge, (src, name, CONTROL, CONTROL)))
                if last_control is not None:
                    multi_control.add(name)
                    if src < last_control:
                        unwritten.add(name)
                last_control = src
            else:
                lst.append(new_edge(Edge, (src, name, out, slot)))
                slot += 1
                if last_control is not None or ref != (f"{src}:{out}" if out else src):
                    unwritten.add(name)
        ins[name] = lst
    return _EdgeIndex(ins, unwritten, upward, multi_control)


_text_c = _load_accel("jitsim.graph._fasttext")  # (its node_facts; None: read node by node)


class NodeFacts(NamedTuple):
    """Per node of a GraphDef, in order, what reading the whole graph needs of it: its name, its
    ``input`` list, and its op and attrs as serialized (``key``: equal for two nodes exactly when
    their op and attrs serialize alike; :func:`jitsim.graph.validate.check_nodes` checks those once
    per key)."""

    names: list[str]
    inputs: list[list[str]]
    keys: list[bytes]


def read_node_facts(graphdef, *, keys_only: bool = False) -> NodeFacts | None:
    """:class:`NodeFacts` of ``graphdef``, read in C from one serialization of it (reading the
    fields node by node from the message makes a Python object per node and per string); None
    without the C extension, or where the GraphDef does not serialize (over 2 GiB).
    ``keys_only``: the keys alone (names and inputs None)."""
    if _text_c is None:
        return None
    try:
        data = graphdef.SerializeToString(deterministic=True)
    except Exception:
        return None
    read = _text_c.node_facts(data, not keys_only)
    if read is None or len(read[2]) != len(graphdef.node):
        return None
    return NodeFacts(*read)


class Graph:
    """A TensorFlow graph: nodes (``NodeDef``s in file order), edges, function library.

    Build one with :func:`jitsim.graph.load` or :meth:`from_graphdef`; write it back
    with :meth:`to_graphdef` / :func:`jitsim.graph.save`.
    """

    def __init__(self, graphdef, *, source: str | None = None, validate: bool = True,
                 facts: NodeFacts | None = None):
        self.graphdef = graphdef  # the proto; node list is regenerated on write
        self.source = source
        # a MetaGraphDef's collections naming graph elements (e.g. "train_op"), when loaded from one
        self.collections: dict[str, list[str]] = {}
        # a SavedModel signature that no single function call computes: (input, output) tensor names
        self.signature_io: tuple[list[str], list[str]] | None = None
        self.nodes: dict[str, Node] = {}
        nodes = self.nodes
        if facts is not None:  # (read_node_facts of this GraphDef: names and inputs read in C)
            names = facts.names
            for i, (name, nd) in enumerate(zip(names, graphdef.node)):
                if not name or name in nodes:
                    _refuse_name(name, i, nd, source)
                nodes[name] = Node(nd, i)
        else:
            names = []  # each name read from the proto once (every read makes a new str)
            for i, nd in enumerate(graphdef.node):
                name = nd.name
                if not name or name in nodes:
                    _refuse_name(name, i, nd, source)
                nodes[name] = Node(nd, i)
                names.append(name)
        # in-edges per node: data inputs by slot, then control inputs, as in the NodeDef
        self._index(_in_edges(graphdef, names, nodes, source, facts.inputs if facts is not None else None))
        # per node index, its op and attrs as read (NodeFacts.keys; None: not read that way):
        # TfGraph.from_graph hands them to the passes (mark memoizes per key what reads only those)
        self.attr_keys: list[bytes] | None = facts.keys if facts is not None else None
        self._out: dict[str, list[Edge]] | None = None
        self._nx = None
        if validate:
            self.check_acyclic()

    @property
    def _in(self) -> dict[str, list[Edge]]:
        """Node name -> in-edges; rebuilt from the NodeDefs after :meth:`release_edges`."""
        got = self._in_store
        if got is None:
            self._index(_in_edges(self.graphdef, list(self.nodes), self.nodes, self.source))
            got = self._in_store
        return got

    def _index(self, index: _EdgeIndex | None) -> None:
        """Keep the edge index (None: none until asked for again)."""
        if index is None:
            self._in_store = self._unwritten = self._upward = self._multi_control = None
        else:
            self._in_store, self._unwritten, self._upward, self._multi_control = index

    def set_edge_index(self, in_edges: dict[str, list[Edge]], unwritten: set[str],
                       upward: list[tuple[str, str]] | None = None) -> None:
        """Take ``in_edges`` (node name -> edges, as :meth:`in_edges` gives them) as the edge
        index, known already by a caller that changed the graph (:meth:`derived`'s arguments)."""
        self._index(_EdgeIndex(in_edges, unwritten, upward, None))
        self._out = None
        self._nx = None

    @property
    def unwritten_inputs(self) -> set[str]:
        """The nodes whose NodeDef ``input`` differs from what TF would write for their in-edges
        (:func:`_in_edges`): where a writer must rebuild it even if the edges did not change."""
        self._in  # (made with the edge index)
        return self._unwritten

    @property
    def upward_edges(self) -> list[tuple[str, str]] | None:
        """The edges ``(src, dst)`` whose source is not above its destination in the file, where
        the edge index noted them (None: not known, every edge must be read)."""
        self._in  # (made with the edge index)
        return self._upward

    @property
    def multi_control(self) -> set[str] | None:
        """The nodes with two control inputs or more, where the edge index noted them."""
        self._in
        return self._multi_control

    def release_edges(self) -> None:
        """Drop the edge index (and the views made from it) until it is asked for again: a
        caller that has read the topology into another model (a TfGraph of 1M nodes) does not
        keep two copies of it alive. The next query rebuilds it from the NodeDefs."""
        self._index(None)
        self._out = None
        self._nx = None

    # -- construction ------------------------------------------------------------------
    @classmethod
    def from_graphdef(cls, graphdef, *, source: str | None = None, validate: bool = True) -> "Graph":
        gd = protos.GraphDef()
        gd.CopyFrom(graphdef) if type(graphdef) is protos.GraphDef else gd.ParseFromString(
            graphdef.SerializeToString()
        )
        return cls(gd, source=source, validate=validate)

    @classmethod
    def derived(cls, graphdef, names: list[str], in_edges: dict[str, list[Edge]], unwritten: set[str], *,
                source: str | None = None, upward: list[tuple[str, str]] | None = None) -> "Graph":
        """A graph over ``graphdef`` whose nodes are named ``names`` (in its order) and whose
        in-edges are ``in_edges`` (node name -> edges, as :meth:`in_edges` gives them), known
        already from the graph it was derived from: what ``Graph(graphdef, validate=False)``
        would build, without reading every input again. ``unwritten``: its
        :attr:`unwritten_inputs` (a superset will do: those nodes are only checked again);
        ``upward``: its edges that do not go down the file, where known."""
        g = cls.__new__(cls)
        g.graphdef = graphdef
        g.source = source
        g.collections = {}
        g.signature_io = None
        g.nodes = {name: Node(nd, i) for i, (name, nd) in enumerate(zip(names, graphdef.node))}
        g.set_edge_index(in_edges, unwritten, upward)
        g.attr_keys = None
        return g

    @classmethod
    def from_nodes(cls, spec: Iterable[tuple], device: str = "") -> "Graph":
        """Tiny graphs for tests: ``[(name, op, [inputs...], {attr: value}?), ...]``."""
        gd = protos.GraphDef()
        for item in spec:
            name, op, inputs = item[:3]
            nd = gd.node.add(name=name, op=op, device=device)
            nd.input.extend(inputs)
            for k, v in (item[3] if len(item) > 3 else {}).items():
                set_attr_value(nd.attr[k], v)
        return cls(gd)

    # -- queries -----------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, name: str) -> bool:
        return name in self.nodes

    def __getitem__(self, name: str) -> Node:
        return self.nodes[name]

    def __iter__(self) -> Iterator[Node]:
        return iter(self.nodes.values())

    @property
    def library(self):
        return self.graphdef.library

    def function_names(self) -> list[str]:
        return [f.signature.name for f in self.graphdef.library.function]

    def in_edges(self, name: str) -> list[Edge]:
        """Data in-edges by input slot, then control in-edges (NodeDef order)."""
        return list(self._in[name])

    def out_edges(self, name: str) -> list[Edge]:
        """Out-edges, grouped by consumer in node order."""
        if self._out is None:
            out: dict[str, list[Edge]] = {n: [] for n in self.nodes}
            for lst in self._in.values():
                for e in lst:
                    out[e.src].append(e)
            self._out = out
        return list(self._out[name])

    def edges(self) -> Iterator[Edge]:
        for lst in self._in.values():
            yield from lst

    @property
    def nx(self) -> nx.MultiDiGraph:
        """The topology as a networkx ``MultiDiGraph`` (built on first use).

        Edge keys are the destination input slot (``('^', src)`` for control edges);
        edge data holds ``src_output`` and ``dst_input``.
        """
        if self._nx is None:
            import networkx as nx

            g = nx.MultiDiGraph()
            g.add_nodes_from(self.nodes)
            g.add_edges_from(
                (e.src, e.dst, ("^", e.src) if e.is_control else e.dst_input,
                 {"src_output": e.src_output, "dst_input": e.dst_input})
                for e in self.edges()
            )
            self._nx = g
        return self._nx

    def clusters(self, attr: str = CLUSTER_ATTR) -> dict[str, str | None]:
        """Node name -> value of string attr ``attr`` (TF's cluster name) or None."""
        out: dict[str, str | None] = {}
        for n in self.nodes.values():
            a = n.nodedef.attr
            out[n.name] = a[attr].s.decode() if attr in a else None
        return out

    def op_histogram(self) -> dict[str, int]:
        hist: dict[str, int] = {}
        for n in self.nodes.values():
            hist[n.op] = hist.get(n.op, 0) + 1
        return dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))

    def check_acyclic(self) -> None:
        """Raise :class:`GraphError` on a cycle that does not pass through a loop back edge.

        TensorFlow v1 loops legitimately close a cycle with ``NextIteration -> Merge``;
        any other cycle makes the GraphDef unexecutable.
        """
        # the common case first: every edge goes down the file but a loop's back edge or one
        # from a node without inputs (a constant TF cloned and appended: no cycle passes through
        # a node nothing enters), so the edges a cycle could use all go down the file: no cycle
        ins = self._in
        nodes = self.nodes
        upward = self.upward_edges
        if upward is None:  # (not noted with the edges: found now)
            upward = [(e.src, dst) for dst, lst in ins.items() for e in lst if nodes[e.src].index >= nodes[dst].index]
        if all(not ins[src] or nodes[src].nodedef.op in NEXT_ITERATION_OPS for src, _ in upward):
            return
        nexts = {name for name, n in nodes.items() if n.nodedef.op in NEXT_ITERATION_OPS}
        indeg = dict.fromkeys(self.nodes, 0)
        succ: dict[str, list[str]] = {n: [] for n in self.nodes}
        for dst, lst in self._in.items():  # the edges in self.edges() order, each op read once
            for e in lst:
                if e.src in nexts:
                    continue
                indeg[dst] += 1
                succ[e.src].append(dst)
        ready = [n for n, d in indeg.items() if d == 0]
        seen = 0
        while ready:
            n = ready.pop()
            seen += 1
            for m in succ[n]:
                indeg[m] -= 1
                if indeg[m] == 0:
                    ready.append(m)
        if seen == len(self.nodes):
            return
        import networkx as nx

        rest = {n for n, d in indeg.items() if d > 0}
        sub = nx.DiGraph()
        sub.add_nodes_from(n for n in self.nodes if n in rest)  # file order: the same message every run
        sub.add_edges_from((u, v) for u in self.nodes if u in rest for v in succ[u] if v in rest)
        cycle = nx.find_cycle(sub)
        path = " -> ".join([cycle[0][0]] + [e[1] for e in cycle])
        # name the edge that closes it, as TF's importer does: the last one, with its input slot
        src, dst = cycle[-1][0], cycle[-1][1]
        ref = next((e for e in self._in[dst] if e.src == src), None)
        where = "" if ref is None else (f" (control input of {dst!r})" if ref.is_control
                                        else f" (input {ref.dst_input} of {dst!r})")
        raise GraphError(f"graph has a cycle not closed by a NextIteration: {path}; the edge {src} -> {dst}{where} "
                         "closes it", self.source)

    # -- writing -----------------------------------------------------------------------
    def to_graphdef(self):
        """A ``GraphDef`` (our proto classes) with every untouched field preserved."""
        gd = graphdef_without_nodes(self.graphdef)
        for node in sorted(self.nodes.values(), key=lambda n: n.index):
            gd.node.add().CopyFrom(node.nodedef)
        return gd

    def summary(self) -> dict:
        clusters = self.clusters()
        sizes: dict[str, int] = {}
        for c in clusters.values():
            if c is not None:
                sizes[c] = sizes.get(c, 0) + 1
        devices = sorted({n.device for n in self.nodes.values()})
        return {
            "source": self.source,
            "nodes": len(self.nodes),
            "edges": sum(len(v) for v in self._in.values()),
            "control_edges": sum(1 for e in self.edges() if e.is_control),
            "functions": len(self.graphdef.library.function),
            "devices": devices,
            "ops": self.op_histogram(),
            "clusters": dict(sorted(sizes.items(), key=lambda kv: _cluster_sort_key(kv[0]))),
        }


def _cluster_sort_key(name: str):
    tail = name.rsplit("_", 1)[-1]
    return (0, int(tail), name) if tail.isdigit() else (1, 0, name)
