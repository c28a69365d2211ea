"""TensorFlow's own view of a graph: integer node ids, edge ids, ``_SOURCE`` and ``_SINK``.

TF's clustering decisions depend on node ids and edge ids (candidate order, cluster
numbering, GraphCycles ranks, contraction order). :class:`TfGraph` reproduces them from
a :class:`jitsim.graph.Graph` the way TF builds its in-memory ``Graph``:

* id 0 is ``_SOURCE``, id 1 is ``_SINK``, edge 0 is the control edge ``_SOURCE -> _SINK``;
* op nodes get ids 2, 3, ... in GraphDef order (a TF dump is written in id order);
* edges are created node by node in GraphDef order (data inputs by slot, then control
  inputs), ``NextIteration -> Merge`` back edges after all others;
* :meth:`TfGraph.fixup_source_and_sink_edges` then links parentless nodes to ``_SOURCE``
  and childless ones to ``_SINK`` (ids in node order).

Ids are never reused; removed nodes/edges leave ``None`` holes, as in TF.

The module also has TF's traversals (``DFS`` with a stable comparator, post orders,
reverse DFS) and ``BuildControlFlowInfo`` (the while-loop frame of every node).

>>> from jitsim.graph import Graph
>>> tg = TfGraph.from_graph(Graph.from_nodes([("a", "Const", []), ("b", "Neg", ["a"])]))
>>> [(n.id, n.name) for n in tg.op_nodes()]
[(2, 'a'), (3, 'b')]
>>> [(e.id, tg.name(e.src), tg.name(e.dst)) for e in tg.edges()]
[(0, '_SOURCE', '_SINK'), (1, 'a', 'b'), (2, '_SOURCE', 'a'), (3, 'b', '_SINK')]
"""

from __future__ import annotations

import re
from collections import deque
from contextlib import contextmanager
from typing import Callable, Iterable, Iterator

from jitsim.errors import GraphError
from jitsim.registry import protos
from jitsim.registry.protos import encode_varint
from jitsim.graph.model import CONTROL, Graph
from jitsim.accel import load as _load_accel
from jitsim.opsets import CONSTANT_OPS, ENTER_OPS, EXIT_OPS, MERGE_OPS, NEXT_ITERATION_OPS  # node classes, tf-passes §3.1

SOURCE_ID = 0
SINK_ID = 1


class TfEdge:
    __slots__ = ("id", "src", "src_output", "dst", "dst_input")

    def __init__(self, eid: int, src: int, src_output: int, dst: int, dst_input: int):
        self.id = eid
        self.src = src
        self.src_output = src_output
        self.dst = dst
        self.dst_input = dst_input

    @property
    def is_control(self) -> bool:
        return self.src_output == CONTROL

    def __repr__(self) -> str:
        return f"<TfEdge #{self.id} {self.src}:{self.src_output} -> {self.dst}:{self.dst_input}>"


def _first(pair):
    return pair[0]


_NODE_TAG = bytes([1 << 3 | 2])
_NODE_PREFIX: dict[int, bytes] = {}  # a serialized node's length -> the node field's tag and length
_text_c = _load_accel("jitsim.graph._fasttext")  # (its record_cuts; None: written node by node)


class TfNode:
    __slots__ = ("id", "name", "op", "nodedef", "in_edges", "out_edges")

    def __init__(self, nid: int, name: str, op: str, nodedef):
        self.id = nid
        self.name = name
        self.op = op
        self.nodedef = nodedef
        # edge id -> edge, insertion ordered
        self.in_edges: dict[int, TfEdge] = {}
        self.out_edges: dict[int, TfEdge] = {}

    @property
    def is_op(self) -> bool:
        return self.id > SINK_ID

    @property
    def device(self) -> str:
        return self.nodedef.device if self.nodedef is not None else ""

    @property
    def attr(self):
        return self.nodedef.attr

    def data_inputs(self) -> list[TfEdge]:
        """Data in-edges by input slot."""
        return sorted((e for e in self.in_edges.values() if e.dst_input != CONTROL), key=lambda e: e.dst_input)

    def __repr__(self) -> str:
        return f"<TfNode #{self.id} {self.name} {self.op}>"


class TfGraph:
    def __init__(self, library=None, versions=None):
        self.nodes: list[TfNode | None] = []
        self.edges_by_id: list[TfEdge | None] = []
        self.by_name: dict[str, int] = {}
        self._name_rank: tuple[int, list[int]] | None = None  # dfs's name order (_name_ranks)
        # (edge count, node ids) where the graph was read from NodeDefs (from_graph): the edges
        # with smaller ids came from the nodes' ``input`` lists, which are as TF writes them but
        # for the listed nodes; see rewired()
        self._as_read: tuple[int, set[int]] | None = None
        self._removed_into: set[int] = set()  # the destinations of removed edges
        # after fixup_source_and_sink_edges: (node count then, the ends of the edges removed since)
        self._fixup_nodes = 0
        self._since_fixup: list[int] | None = None
        self._read_from = None  # (GraphDef, node count) from_graph read the nodes from, in id order
        # per op node id - 2 of the nodes read from a GraphDef, their op and attrs as read
        # (Graph.attr_keys, set by the pipeline for a graph load() read for it): mark memoizes
        # per key what reads only the op and attrs; a pass that changes attrs before it sets this
        # to None
        self.read_attr_keys: list[bytes] | None = None
        self.library = library if library is not None else protos.FunctionDefLibrary()
        self.versions = versions
        self._add(TfNode(SOURCE_ID, "_SOURCE", "NoOp", None))
        self._add(TfNode(SINK_ID, "_SINK", "NoOp", None))
        self.add_edge(SOURCE_ID, CONTROL, SINK_ID, CONTROL)

    # -- construction --------------------------------------------------------------------
    def _add(self, node: TfNode) -> TfNode:
        self.nodes.append(node)
        if node.is_op:
            self.by_name[node.name] = node.id
        return node

    def add_node(self, nodedef, name: str | None = None, op: str | None = None) -> TfNode:
        """Add a node for ``nodedef`` (not its inputs) with the next id. ``name``, ``op``: the
        NodeDef's, where the caller has them already."""
        if name is None:
            name = nodedef.name
        if name in self.by_name:
            raise GraphError(f"duplicate node name {name!r}")
        return self._add(TfNode(len(self.nodes), name, nodedef.op if op is None else op, nodedef))

    def add_edge(self, src: int, src_output: int, dst: int, dst_input: int) -> TfEdge:
        e = TfEdge(len(self.edges_by_id), src, src_output, dst, dst_input)
        self.edges_by_id.append(e)
        self.nodes[src].out_edges[e.id] = e
        self.nodes[dst].in_edges[e.id] = e
        return e

    def add_control_edge(self, src: int, dst: int) -> TfEdge:
        return self.add_edge(src, CONTROL, dst, CONTROL)

    def remove_edge(self, e: TfEdge) -> None:
        del self.nodes[e.src].out_edges[e.id]
        del self.nodes[e.dst].in_edges[e.id]
        self.edges_by_id[e.id] = None
        self._removed_into.add(e.dst)
        if self._since_fixup is not None:
            self._since_fixup.append(e.src)
            self._since_fixup.append(e.dst)

    def remove_node(self, nid: int) -> None:
        n = self.nodes[nid]
        for e in list(n.in_edges.values()) + list(n.out_edges.values()):
            self.remove_edge(e)
        del self.by_name[n.name]
        self.nodes[nid] = None

    def fixup_source_and_sink_edges(self) -> None:
        """Link every parentless node to ``_SOURCE`` and every childless node to ``_SINK``.

        After a first call, the next looks at the nodes that can have lost their last in- or
        out-edge since (the ends of the edges removed since, the nodes added since), in id
        order: every other node still has the edges the first call left it, so the edges made
        are the same, in the same order."""
        nodes = self.nodes
        edges = self.edges_by_id
        source, sink = nodes[SOURCE_ID], nodes[SINK_ID]
        since = self._since_fixup
        if since is None:
            todo = list(nodes)
        else:
            todo = [nodes[i] for i in sorted(set(since).union(range(self._fixup_nodes, len(nodes))))]
        self._fixup_nodes, self._since_fixup = len(nodes), []
        for n in todo:
            if n is None:
                continue
            nid = n.id
            if not n.in_edges and nid != SOURCE_ID:  # add_control_edge(SOURCE_ID, nid), inlined
                e = TfEdge(len(edges), SOURCE_ID, CONTROL, nid, CONTROL)
                edges.append(e)
                source.out_edges[e.id] = e
                n.in_edges[e.id] = e
            if not n.out_edges and nid != SINK_ID:  # add_control_edge(nid, SINK_ID)
                e = TfEdge(len(edges), nid, CONTROL, SINK_ID, CONTROL)
                edges.append(e)
                n.out_edges[e.id] = e
                sink.in_edges[e.id] = e

    @classmethod
    def from_graph(cls, graph: Graph, *, fixup: bool = True) -> "TfGraph":
        """TF's ``Graph`` for a GraphDef as TF dumps it (node order = TF id order)."""
        tg = cls(library=graph.graphdef.library, versions=graph.graphdef.versions)
        order = list(graph.nodes.items())  # the model keeps its nodes in index (file) order
        nodes = tg.nodes
        by_name = tg.by_name
        for name, n in order:  # (the model's name strings, shared)
            nd = n.nodedef
            if name in by_name:
                raise GraphError(f"duplicate node name {name!r}")
            nid = len(nodes)
            nodes.append(TfNode(nid, name, nd.op, nd))
            by_name[name] = nid
        # the edges as TF's importer makes them: node by node, each node's inputs in NodeDef
        # order (the Graph model's in-edges), NextIteration -> Merge back edges last
        edges = tg.edges_by_id
        back = []
        ins = graph._in
        for name, _ in order:
            dst_node = nodes[by_name[name]]
            dst = dst_node.id
            dst_in = dst_node.in_edges
            merge = dst_node.op in MERGE_OPS
            for e in ins[name]:
                src_node = nodes[by_name[e.src]]
                if merge and e.dst_input != CONTROL and src_node.op in NEXT_ITERATION_OPS:
                    back.append((src_node.id, e.src_output, dst, e.dst_input))
                    continue
                eid = len(edges)
                te = TfEdge(eid, src_node.id, e.src_output, dst, e.dst_input)
                edges.append(te)
                src_node.out_edges[eid] = te
                dst_in[eid] = te
        unwritten = graph.unwritten_inputs
        tg._as_read = (len(edges), {by_name[name] for name in unwritten} if unwritten else set())
        tg._read_from = (graph.graphdef, len(order))
        for src, out, dst, slot in back:
            tg.add_edge(src, out, dst, slot)
        if fixup:
            tg.fixup_source_and_sink_edges()
        return tg

    # -- queries -------------------------------------------------------------------------
    @property
    def num_node_ids(self) -> int:
        return len(self.nodes)

    def node(self, nid: int) -> TfNode | None:
        return self.nodes[nid] if 0 <= nid < len(self.nodes) else None

    def name(self, nid: int) -> str:
        return self.nodes[nid].name

    def op_nodes(self) -> Iterator[TfNode]:
        """Op nodes (not ``_SOURCE``/``_SINK``) in increasing id."""
        for n in self.nodes[2:]:
            if n is not None:
                yield n

    def all_nodes(self) -> Iterator[TfNode]:
        for n in self.nodes:
            if n is not None:
                yield n

    def edges(self) -> Iterator[TfEdge]:
        """Live edges in increasing edge id (TF's ``Graph::edges()`` order)."""
        for e in self.edges_by_id:
            if e is not None:
                yield e

    def input_edge(self, nid: int, slot: int) -> TfEdge | None:
        for e in self.nodes[nid].in_edges.values():
            if e.dst_input == slot:
                return e
        return None

    @property
    def nodes_read(self) -> int:
        """How many of the first op nodes were read from a GraphDef's nodes (:meth:`from_graph`), in order."""
        return self._read_from[1] if self._read_from is not None else 0

    def rewired(self) -> set[int] | None:
        """The ids of the nodes whose NodeDef ``input`` may differ from what :meth:`_inputs`
        writes from their in-edges now; None: unknown (every node may). Known for a graph read
        from NodeDefs (:meth:`from_graph`): the nodes whose ``input`` TF would write otherwise
        (:attr:`~jitsim.graph.model.Graph.unwritten_inputs`) and those whose in-edges changed
        since: an edge added (every new edge has a new, larger id; edges from ``_SOURCE`` and
        ``_SINK`` are not written) or removed (:meth:`remove_edge`). A pass that rewrites a
        NodeDef's ``input`` itself does so on a graph it built (encapsulation), not read."""
        if self._as_read is None:
            return None
        count, out = self._as_read
        out = out | self._removed_into
        for e in self.edges_by_id[count:]:
            if e is not None and e.dst > SINK_ID and (e.dst_input != CONTROL or e.src > SINK_ID):
                out.add(e.dst)
        return out

    # -- output ---------------------------------------------------------------------------
    def to_graphdef(self):
        """A GraphDef as TF's ``Graph::ToGraphDef`` writes it (what TF's dumps contain):
        op nodes by id, data inputs by slot, then control inputs sorted by source name."""
        gd = protos.GraphDef()
        self._add_node_defs(gd, self.op_nodes())
        self._add_library(gd)
        return gd

    def graphdef_pieces(self, nodes_per_piece: int = 50_000):
        """:meth:`to_graphdef` in pieces, for writing a big graph without a second copy of it:
        GraphDefs of up to ``nodes_per_piece`` consecutive nodes each, the last one with the
        versions and the library. The pieces' texts (and binary serializations), joined, are
        the whole GraphDef's (its fields are written in field-number order: nodes first)."""
        for data in self.serialized_pieces(nodes_per_piece):
            yield protos.GraphDef.FromString(data)

    def serialized_pieces(self, nodes_per_piece: int = 50_000):
        """:meth:`graphdef_pieces` as their deterministic binary serializations (what
        :func:`~jitsim.graph.io.save` writes), made without copying a node whose inputs are the
        ones it was read with (most of them): its NodeDef is serialized as it is, and where the
        graph's first nodes are still those of the GraphDef it was read from (:meth:`from_graph`),
        that GraphDef is serialized in one call and their records are cut from it
        (:meth:`_records_as_read`). The pieces, joined, are ``to_graphdef()``'s serialization."""
        rewired = self.rewired()  # (the other nodes' inputs are written as they were read)
        read = self._records_as_read(rewired)
        if read is not None:
            read_end, whole, offsets = read
            ahead = sorted(r for r in rewired if r < read_end)  # the rewired nodes among them, in id order
            ahead.append(read_end)
            a = 0
        nodes = self.nodes
        nodes_out: list = []
        count = 0
        prefixes = _NODE_PREFIX
        nid, total = 2, len(nodes)
        while nid < total:
            if count >= nodes_per_piece:
                yield b"".join(nodes_out)
                nodes_out = []
                count = 0
            if read is not None and nid < read_end:
                while ahead[a] < nid:
                    a += 1
                if ahead[a] > nid:  # a run of records as read, up to the next rewired node
                    stop = min(ahead[a], nid + nodes_per_piece - count)
                    nodes_out.append(whole[offsets[nid - 2]:offsets[stop - 2]])
                    count += stop - nid
                    nid = stop
                    continue
            n = nodes[nid]
            nid += 1
            if n is None:
                continue
            nd = n.nodedef
            if rewired is None or n.id in rewired:
                inputs = self._inputs(n)
                if inputs != nd.input:
                    nd = protos.NodeDef()
                    nd.CopyFrom(n.nodedef)
                    del nd.input[:]
                    nd.input.extend(inputs)
            data = nd.SerializeToString(deterministic=True)
            size = len(data)
            prefix = prefixes.get(size)
            if prefix is None:
                prefix = _NODE_TAG + encode_varint(size)  # GraphDef.node: field 1, length-delimited
                if size < 1 << 14:  # (the sizes of two-byte lengths: most nodes; the table stays small)
                    prefixes[size] = prefix
            nodes_out.append(prefix)
            nodes_out.append(data)
            count += 1
        rest = protos.GraphDef()
        self._add_library(rest)
        nodes_out.append(rest.SerializeToString(deterministic=True))  # library (2), versions (4): after the nodes
        yield b"".join(nodes_out)

    # graphs up to this many nodes read from a GraphDef are written from its one serialization
    # (bigger ones node by node: the serialization of a whole 1M-node GraphDef is 200 MB more)
    WHOLE_SERIALIZATION_MAX_NODES = 250_000

    def _records_as_read(self, rewired: set[int] | None) -> tuple[int, bytes, list[int]] | None:
        """``(end, data, offsets)`` where the nodes with ids 2..end-1 are, in order, those of the
        GraphDef the graph was read from (:meth:`from_graph`, none removed since) and ``rewired``
        is known: ``data`` is that GraphDef's deterministic serialization, whose node records
        start at ``offsets[id - 2]`` (the last one ends at ``offsets[end - 2]``); else None."""
        if rewired is None or self._read_from is None or _text_c is None:
            return None
        gd, k = self._read_from
        nodes = self.nodes
        if k == 0 or k > self.WHOLE_SERIALIZATION_MAX_NODES or len(gd.node) != k or len(nodes) < k + 2:
            return None
        if not all(n is not None and n.nodedef is nd for n, nd in zip(nodes[2:k + 2], gd.node)):
            return None
        whole = gd.SerializeToString(deterministic=True)
        offsets = _text_c.record_cuts(whole, 1)
        if offsets is None or len(offsets) < k + 1:
            return None
        return k + 2, whole, offsets

    def _add_library(self, gd) -> None:
        if self.versions is not None:
            gd.versions.CopyFrom(self.versions)
        gd.library.CopyFrom(self.library)
        gd.library.SetInParent()  # TF always writes `library {}`, even when empty

    def _add_node_defs(self, gd, op_nodes) -> None:
        add = gd.node.add
        rewired = self.rewired()
        for n in op_nodes:
            nd = add()
            nd.CopyFrom(n.nodedef)
            if rewired is not None and n.id not in rewired:
                continue
            inputs = self._inputs(n)
            if inputs != nd.input:  # most nodes keep the inputs they were read with
                del nd.input[:]
                nd.input.extend(inputs)

    def _inputs(self, n: TfNode) -> list[str]:
        """``n``'s NodeDef inputs as TF writes them from its in-edges: data inputs by slot,
        then control inputs sorted by source name (edges from _SOURCE/_SINK left out)."""
        nodes = self.nodes
        inputs = []  # the data inputs while their edges come in slot order 0, 1, ... (most nodes)
        data = None  # else (slot, ref) pairs
        ctrl = None
        for e in n.in_edges.values():
            slot = e.dst_input
            if slot == CONTROL:
                if e.src > SINK_ID:
                    if ctrl is None:
                        ctrl = []
                    ctrl.append(nodes[e.src].name)
                continue
            name = nodes[e.src].name
            if e.src_output:
                name = f"{name}:{e.src_output}"
            if data is None:
                if slot == len(inputs):
                    inputs.append(name)
                    continue
                data = list(enumerate(inputs))
            data.append((slot, name))
        if data is not None:
            # data inputs by slot (slots outside 0..k-1 left out, the last edge of a slot kept)
            data.sort(key=_first)
            k = len(data)
            if any(slot != i for i, (slot, _) in enumerate(data)):
                slots: list = [None] * k
                for slot, ref in data:
                    if 0 <= slot < k:
                        slots[slot] = ref
                inputs = [ref for ref in slots if ref is not None]
            else:
                inputs = [ref for _, ref in data]
        if ctrl:
            ctrl.sort()
            inputs += ["^" + c for c in ctrl]
        return inputs


# -- dumps taken after TF modified the graph ------------------------------------------------

# `<const>/clone_<k>`: CloneConstantsForBetterClustering's naming
CLONE_NAME_RE = re.compile(r"^(.*)/clone_\d+$")
# `<const>/replicate/_<k>`: ReplicateConstantsPass (POST_REWRITE_FOR_EXEC 3, before the dump)
# copies a small constant once per consumer device and removes the original
REPLICA_NAME_RE = re.compile(r"^(.*)/replicate/_\d+$")
_FEED_FETCH = (("_Arg", "_arg_"), ("_Retval", "_retval_"), ("_Recv", "_recv_"), ("_Send", "_send_"))
_FETCH = (("_Retval", "_retval_"), ("_Send", "_send_"))
_FEED_FETCH_PREFIX = dict(_FEED_FETCH)  # each op has one prefix
# the ops of the nodes _created_after_construction finds, but for IncreaseDynamism's slices
_MAYBE_ADDED_OPS = CONSTANT_OPS | frozenset(_FEED_FETCH_PREFIX)


def _is_replica(n: TfNode) -> bool:
    return n.op in CONSTANT_OPS and REPLICA_NAME_RE.match(n.name) is not None


def _created_after_construction(g: TfGraph, n: TfNode) -> bool:
    """Nodes TF adds to a graph after building it: session feeds/fetches
    (``_arg_*``/``_retval_*``), replicated and cloned constants and IncreaseDynamism's slices."""
    return _is_replica(n) or _added_after_construction(n.op, n.name, g.by_name, replicas=False)


def _added_after_construction(op: str, name: str, names, *, replicas: bool = True) -> bool:
    """:func:`_created_after_construction` by op and name; ``names``: the graph's node names."""
    prefix = _FEED_FETCH_PREFIX.get(op)
    if prefix is not None and name.startswith(prefix):
        return True
    if op in CONSTANT_OPS:
        if replicas and REPLICA_NAME_RE.match(name):
            return True
        m = CLONE_NAME_RE.match(name)
        if m and m.group(1) in names:
            return True
    return "/static_shaped_slice" in name


def is_rebuilt_graph(graph: Graph) -> bool:
    """Whether TF built the dumped graph with GraphConstructor after its last rewrite.

    A graph TF rebuilt from a GraphDef (after Grappler, which is the default for function
    graphs) has node ids in topological order, so its dump (written in id order) is topological.
    With Grappler off, or when Grappler failed and TF went on without it, TF clusters the graph
    as LowerFunctionalOps and function inlining left it in place: lowered and inlined nodes are
    appended after the nodes that consume them. NextIteration back edges and the nodes passes
    add after construction (session feeds/fetches, replicated or cloned constants,
    IncreaseDynamism's slices) do not count. Read from the :class:`Graph` model's edges (an
    edge from a node further down the file is the sign).
    """
    nodes = graph.nodes
    later: dict[str, bool] = {}  # only the ends of an edge from further down are ever asked

    def added_later(name: str) -> bool:
        got = later.get(name)
        if got is None:
            got = later[name] = _added_after_construction(nodes[name].op, name, nodes)
        return got

    upward = graph.upward_edges
    pairs = upward if upward is not None else ((e.src, e.dst) for e in graph.edges())
    for s, d in pairs:
        src = nodes[s]
        if src.index <= nodes[d].index:
            continue
        if src.op in NEXT_ITERATION_OPS or added_later(s) or added_later(d):
            continue
        return False
    return True


def is_rebuilt_dump(gd) -> bool:
    """:func:`is_rebuilt_graph` of a GraphDef."""
    return is_rebuilt_graph(Graph(gd, validate=False))


# Names LowerFunctionalOps and function inlining give the nodes they create: Graph::NewName's
# `<prefix>/_<n>` and the inliner's `Func/<caller>/{input,output,...}/_<n>`; the copies of a
# function body's nodes are named `<caller>/<name>` (the caller itself being a `.../_<n>` call).
_LOWERED_RE = re.compile(r"(^Func/)|(/_\d+(/|$))")
_INLINE_RE = re.compile(r"^Func/(.+)/(input_control_node|input|output|output_control_node)/_\d+$")
_NEW_NAME_RE = re.compile(r"/_\d+$")


def _rewrite_events(g: TfGraph, first: int) -> tuple[dict[int, tuple], dict[tuple, int]]:
    """Group the nodes from ``first`` on into the rewrites that created them, in id order: one
    function inlining (``("inline", caller)``: its ``Func/<caller>/...`` nodes and the body
    copies named ``<caller>/...``) or one functional-op lowering (``("lower", op name)``: the
    Enter/Merge/Switch/... nodes named ``<op>/<part>/_<n>`` and the substitute named ``<op>``).
    Returns node id -> event and event -> the last node it created before rewiring the old
    node's consumers (an inlining rewires them before adding its caller substitute)."""
    event_of: dict[int, tuple] = {}
    members: dict[tuple, list[int]] = {}
    cur = None
    body_done = False  # the current inlining has made its outputs: no more body copies
    for n in g.op_nodes():
        if n.id < first:
            continue
        m = _INLINE_RE.match(n.name)
        if m:
            key = ("inline", m.group(1))
            if key != cur:
                body_done = False
            if m.group(2) in ("output", "output_control_node"):
                body_done = True
        elif cur is not None and n.name == cur[1]:
            key = cur  # the substitute keeping the caller's (or the lowered op's) name
        elif (cur is not None and n.name.startswith(cur[1] + "/")
              and not (cur[0] == "inline" and body_done)):
            key = cur
        elif _NEW_NAME_RE.search(n.name):
            key = ("lower", n.name.rsplit("/", 2)[0])
        else:
            key = ("node", n.name)
        if key != cur and key[0] != "inline":
            body_done = False
        cur = key
        event_of[n.id] = key
        members.setdefault(key, []).append(n.id)
    end = {}
    for key, ids in members.items():
        last = ids[-1]
        if key[0] == "inline" and len(ids) > 1 and g.nodes[last].name == key[1]:
            last = ids[-2]
        end[key] = last
    return event_of, end


def _inline_input_keys(g: TfGraph) -> dict[int, tuple]:
    """Creation-order keys of the edges an inlining makes once the body is copied: for each
    function input in order, ``input_control_node -> input`` then the input's edges to the body
    nodes (the inliner connects the inputs after copying every body node and edge)."""
    inputs: dict[str, list[int]] = {}
    first_out: dict[str, int] = {}
    control: dict[str, int] = {}
    for n in g.op_nodes():
        m = _INLINE_RE.match(n.name)
        if not m:
            continue
        caller, part = m.group(1), m.group(2)
        if part == "input":
            inputs.setdefault(caller, []).append(n.id)
        elif part == "input_control_node":
            control[caller] = n.id
        else:
            first_out[caller] = min(first_out.get(caller, n.id), n.id)
    keys: dict[int, tuple] = {}
    for caller, ids in inputs.items():
        stop = first_out.get(caller, len(g.nodes))
        body = [n.id for n in g.op_nodes() if max(ids) < n.id < stop and n.name.startswith(caller + "/")]
        last = max(body) if body else max(ids)
        ic = control.get(caller)
        for i in sorted(ids):
            node = g.nodes[i]
            for e in node.in_edges.values():
                if e.src == ic:
                    keys[e.id] = (last, 2, i, -1)
            outs = sorted((e for e in node.out_edges.values() if e.dst <= last), key=lambda e: e.id)
            for k, e in enumerate(outs):
                keys[e.id] = (last, 2, i, k)
    return keys


def tfgraph_from_dump(graph, *, rebuilt: bool | None = None) -> TfGraph:
    """A :class:`TfGraph` for a dump of the JIT passes' input (or of a later stage, e.g.
    ``encapsulate_subgraphs_before``) with TF's edge-id order reconstructed as far as the dump
    allows (TF's edge ids are creation order; a dump records neither).

    Node ids are the dump's order. :meth:`TfGraph.from_graph` numbers edges by destination
    node, which is TF's order for the graph as constructed; but nodes added later (session
    feeds/fetches, constant clones, IncreaseDynamism's slices: the dump's tail, from the
    first such node on) got their edges when they were created. Here those edges come after
    all the others, per created node in id order (its in-edges, then its out-edges). As at
    construction, a node whose only consumers are session fetches (``_retval_*``) also had
    an edge to ``_SINK`` (so, in a cluster, it becomes a control output).

    A constant replica of ReplicateConstantsPass (``<const>/replicate/_<k>``, multi-device graphs)
    got its out-edges first (the original's, in its edge order), then its control in-edges, the
    one from ``_SOURCE`` included; the original's consumers had an in-edge at construction (from
    the original), so they get no ``_SOURCE`` edge.

    A graph TF never rebuilt (:func:`is_rebuilt_graph` false: Grappler off or failed) was
    lowered and inlined in place after construction, so the nodes those rewrites made count as
    created later too, and their edges follow the rewrites' own order: an inlining copies the
    body's nodes (a node without inputs gets its control edge from ``input_control_node`` as it
    is copied), then the body's edges, then connects each input (``input_control_node -> input``
    and the input's edges into the body); edges from a new node to an older one (consumers of
    the lowered op or of the call, NextIteration back edges) are made once the rewrite has
    created its nodes; a While's ``LoopControlInputs`` gets its edges to the Enters as it is made.

    Residual risk: edges created by a pass between existing nodes, and the order of several
    edges created together where TF iterates pointer-hashed edge sets (more than 8 edges on a
    node: the inliner and the lowerings walk those; TF's own order then varies between runs),
    are guesses.

    ``rebuilt``: :func:`is_rebuilt_graph` of ``graph``, when the caller has it already.
    """
    base = TfGraph.from_graph(graph, fixup=False)
    if rebuilt is None:
        rebuilt = is_rebuilt_graph(graph)
    # nodes LowerFunctionalOps and inlining made, on a graph TF never rebuilt
    lowered = set() if rebuilt else {n.id for n in base.op_nodes() if _LOWERED_RE.search(n.name)}
    created = [n.id for n in base.op_nodes()
               if n.id in lowered or ((n.op in _MAYBE_ADDED_OPS or "/static_shaped_slice" in n.name)
                                      and _created_after_construction(base, n))]
    if not created:
        base.fixup_source_and_sink_edges()
        return base
    first = min(created)
    edges = [e for e in base.edges() if e.id != 0]
    early = [e for e in edges if max(e.src, e.dst) < first]
    replicas = {n.id for n in base.op_nodes() if _is_replica(n)}

    special: dict[int, tuple] = {}
    if not rebuilt:
        special = _inline_input_keys(base)
        event_of, event_end = _rewrite_events(base, first)
        for e in edges:
            if e.id in special or e.src < first or e.src <= e.dst or e.src not in event_of:
                continue
            if "/LoopControlInputs/_" in base.nodes[e.src].name:
                special[e.id] = (e.src, 1, e.id, 0)
                continue
            back = base.nodes[e.src].op in NEXT_ITERATION_OPS and base.nodes[e.dst].op in MERGE_OPS
            special[e.id] = (event_end[event_of[e.src]], 3, 0 if back else 1, e.id)

    def late_key(e):
        if e.id in special:
            return special[e.id]
        m = max(e.src, e.dst)
        incoming = e.dst == m
        return (m, (1 if incoming else 0) if m in replicas else (0 if incoming else 1), e.id, 0)

    late = sorted((e for e in edges if max(e.src, e.dst) >= first), key=late_key)
    tg = TfGraph(library=base.library, versions=base.versions)
    for n in base.op_nodes():
        tg.add_node(n.nodedef)
    for e in early:
        tg.add_edge(e.src, e.src_output, e.dst, e.dst_input)
    fetch_ids = {n.id for n in base.op_nodes()
                 if any(n.op == op and n.name.startswith(p) for op, p in _FETCH)}
    for n in base.op_nodes():
        if n.id >= first:
            continue
        # an edge from a lowered/inlined node replaced one from the functional op or call that
        # the node consumed at construction: it had an input then, so no edge from _SOURCE
        if not any(e.src < first or e.src in replicas or e.src in lowered
                   for e in base.nodes[n.id].in_edges.values()):
            tg.add_control_edge(SOURCE_ID, n.id)
        outs = list(base.nodes[n.id].out_edges.values())
        if all(e.dst in fetch_ids for e in outs):
            tg.add_control_edge(n.id, SINK_ID)
    for i, e in enumerate(late):
        tg.add_edge(e.src, e.src_output, e.dst, e.dst_input)
        m = max(e.src, e.dst)
        if m in replicas and (i + 1 == len(late) or max(late[i + 1].src, late[i + 1].dst) != m):
            if not base.nodes[m].in_edges:
                tg.add_control_edge(SOURCE_ID, m)
    tg.fixup_source_and_sink_edges()
    return tg


# -- traversals (core/graph/algorithm.cc semantics) -------------------------------------------

EdgeFilter = Callable[[TfEdge], bool]


def not_back_edge(g: TfGraph) -> EdgeFilter:
    """TF's ``NotBackedge``: drop edges whose source is a NextIteration."""
    nodes = g.nodes

    def keep(e: TfEdge) -> bool:
        return nodes[e.src].op not in NEXT_ITERATION_OPS

    keep.not_back_edge = g  # dfs applies this filter without calling it
    return keep


def _name_ranks(g: TfGraph) -> list[int]:
    """Per node id, the rank of its name among all names (equal names, equal ranks): sorting
    node ids by it is sorting them by name. Kept until the graph gains nodes (names never
    change; removed nodes are never reached)."""
    nodes = g.nodes
    got = g._name_rank
    if got is not None and got[0] == len(nodes):
        return got[1]
    names = ["" if n is None else n.name for n in nodes]
    rank = [0] * len(nodes)
    r = -1
    prev = None
    for i in sorted(range(len(nodes)), key=names.__getitem__):
        if names[i] != prev:
            r += 1
            prev = names[i]
        rank[i] = r
    g._name_rank = (len(nodes), rank)
    return rank


def dfs(
    g: TfGraph,
    enter: Callable[[TfNode], None] | None,
    leave: Callable[[TfNode], None] | None,
    *,
    by_name: bool = False,
    edge_filter: EdgeFilter | None = None,
    start: Iterable[int] = (SOURCE_ID,),
    reverse: bool = False,
) -> None:
    """Iterative DFS like TF's ``DFS``/``ReverseDFSFrom``.

    With ``by_name`` (``NodeComparatorName``) the neighbours of a node are sorted by name
    and pushed in that order, so the largest name is explored first. ``reverse`` walks
    in-edges instead of out-edges.
    """
    nodes = g.nodes
    visited = bytearray(len(nodes))
    rank = _name_ranks(g).__getitem__ if by_name else None
    # not_back_edge(g): no edge out of a NextIteration, decided once per node
    no_back = edge_filter is not None and getattr(edge_filter, "not_back_edge", None) is g
    if no_back:
        edge_filter = None
    # the stack holds node ids to enter and ~id (negative) for a node to leave
    stack: list[int] = list(start)
    pop, push = stack.pop, stack.append
    while stack:
        nid = pop()
        if nid < 0:
            leave(nodes[~nid])
            continue
        if visited[nid]:
            continue
        visited[nid] = 1
        n = nodes[nid]
        if enter is not None:
            enter(n)
        if leave is not None:
            push(~nid)
        if reverse:
            if no_back:
                nbrs = [e.src for e in n.in_edges.values() if nodes[e.src].op not in NEXT_ITERATION_OPS]
            elif edge_filter is None:
                nbrs = [e.src for e in n.in_edges.values()]
            else:
                nbrs = [e.src for e in n.in_edges.values() if edge_filter(e)]
        elif edge_filter is None:
            if no_back and n.op in NEXT_ITERATION_OPS:
                continue
            nbrs = [e.dst for e in n.out_edges.values()]
        else:
            nbrs = [e.dst for e in n.out_edges.values() if edge_filter(e)]
        if len(nbrs) > 1 and by_name:
            nbrs.sort(key=rank)
        for m in nbrs:
            if not visited[m]:
                push(m)


def post_order(g: TfGraph, *, by_name: bool = False, edge_filter: EdgeFilter | None = None) -> list[TfNode]:
    out: list[TfNode] = []
    dfs(g, None, out.append, by_name=by_name, edge_filter=edge_filter)
    return out


def _topological_order(g: TfGraph) -> list[TfNode] | None:
    """The nodes in a topological order of the graph less its ``NextIteration`` out-edges (Kahn's,
    from ``_SOURCE``), when that graph is acyclic and every node is reachable from ``_SOURCE``
    in it; else None.

    Where this returns a list, TF's walks in the (reverse) post order of a by-name DFS from
    ``_SOURCE`` without back edges visit the same nodes and are topological orders too; an
    analysis whose answer is the same in every topological order (resource safety's unions
    over predecessors, constant analysis's marks of ancestors) takes this cheaper one and falls
    back to TF's walk on None (a cycle, or a node the DFS would not reach)."""
    nodes = g.nodes
    n = len(nodes)
    # out-edges from a NextIteration are the back edges left out
    ops = [v.op if v is not None else None for v in nodes]
    indeg = [0] * n
    for e in g.edges_by_id:
        if e is not None and ops[e.src] not in NEXT_ITERATION_OPS:
            indeg[e.dst] += 1
    if indeg[SOURCE_ID]:
        return None
    order = [nodes[SOURCE_ID]]
    for v in order:  # (grows while it is walked: Kahn's queue)
        if v.op in NEXT_ITERATION_OPS:
            continue
        for e in v.out_edges.values():
            d = e.dst
            indeg[d] -= 1
            if not indeg[d]:
                order.append(nodes[d])
    return order if len(order) == n - ops.count(None) else None


_KEPT_ORDERS: dict[int, list] = {}  # id(graph) -> [graph, its order], inside topological_order_kept(graph)
_NOT_YET = object()


@contextmanager
def topological_order_kept(g: TfGraph):
    """Within this block, :func:`topological_order` of ``g`` is computed once and each call gets
    a copy of it: for a pass whose analyses each ask for it while ``g``'s nodes and edges do not
    change (mark-for-compilation's constant and resource analyses; it sets attrs only). No node
    or edge of ``g`` may be added or removed inside."""
    key = id(g)
    outer = _KEPT_ORDERS.get(key)
    if outer is None:
        _KEPT_ORDERS[key] = [g, _NOT_YET]
    try:
        yield
    finally:
        if outer is None:
            _KEPT_ORDERS.pop(key, None)


def topological_order(g: TfGraph) -> list[TfNode] | None:
    """:func:`_topological_order` of ``g``, computed once inside :func:`topological_order_kept`."""
    kept = _KEPT_ORDERS.get(id(g))
    if kept is None or kept[0] is not g:
        return _topological_order(g)
    if kept[1] is _NOT_YET:
        kept[1] = _topological_order(g)
    return None if kept[1] is None else list(kept[1])


def reverse_post_order(g: TfGraph, *, by_name: bool = False, edge_filter: EdgeFilter | None = None) -> list[TfNode]:
    out = post_order(g, by_name=by_name, edge_filter=edge_filter)
    out.reverse()
    return out


class FrameInfo:
    """Per-node while-loop frame: ``frame`` (id of the Enter opening it, or _SOURCE),
    ``parent_frame`` and ``frame_name`` (``""`` for the root frame)."""

    __slots__ = ("frame", "parent_frame", "frame_name")

    def __init__(self, frame=-1, parent_frame=-1, frame_name=""):
        self.frame = frame
        self.parent_frame = parent_frame
        self.frame_name = frame_name


def control_flow_info(g: TfGraph) -> tuple[list[FrameInfo], list[str]]:
    """TF's ``BuildControlFlowInfo``: each node's frame, and the unreachable op nodes.

    Breadth-first from ``_SOURCE``; an ``Enter`` opens the frame named by its ``frame_name``
    attr, an ``Exit``'s successors return to the parent frame. Inconsistent frames raise.
    """
    nodes = g.nodes
    # FrameInfos are never changed once made: nodes of one frame share their frame's object
    unset = FrameInfo()
    info = [unset] * len(nodes)
    parent_of = [-1] * len(nodes)
    info[SOURCE_ID] = FrameInfo(SOURCE_ID, SOURCE_ID, "")
    ready = deque([SOURCE_ID])
    while ready:
        cur = nodes[ready.popleft()]
        ci = info[cur.id]
        if cur.op in EXIT_OPS:
            ci = info[ci.parent_frame]  # an Exit's successors are in the parent frame
        frame_name = ci.frame_name
        for e in cur.out_edges.values():
            oid = e.dst
            if oid <= SINK_ID:  # not an op
                continue
            out = nodes[oid]
            visited = parent_of[oid] != -1
            if not visited:
                parent_of[oid] = cur.id
                ready.append(oid)
            if out.op in ENTER_OPS:
                if visited:
                    if info[info[oid].parent_frame].frame_name != frame_name:
                        raise GraphError(f"node {out.name!r} enters from two different frames")
                else:
                    name = out.attr["frame_name"].s.decode() if "frame_name" in out.attr else ""
                    if not name:
                        raise GraphError(f"Enter node {out.name!r} has no frame_name")
                    info[oid] = FrameInfo(oid, ci.frame, name)
            elif visited:
                if info[oid].frame_name != frame_name:
                    raise GraphError(
                        f"node {out.name!r} is in two frames: {info[oid].frame_name!r} and {frame_name!r}"
                    )
            else:
                info[oid] = ci
    unreachable = [n.name for n in g.op_nodes() if parent_of[n.id] == -1]
    return info, unreachable
