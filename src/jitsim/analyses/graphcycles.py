"""Incremental cycle detection with edge contraction (the auto-clustering "cycles graph").

This module re-implements, behaviour for behaviour, the data structures that TensorFlow's
``MarkForCompilationPass`` uses to decide which clusters may be merged
(XLA ``graphcycles.cc`` / ``ordered_set.h`` / ``union_find.h``; tf-passes §4 and §7.5).

Algorithm
---------
``GraphCycles`` keeps a directed acyclic graph together with a *rank* per node — a
permutation of ``0..N-1`` (N = number of node slots ever allocated) such that every edge
``x -> y`` satisfies ``rank[x] < rank[y]``.  This is the dynamic topological order of
Pearce & Kelly (JEA 2006):

* Inserting ``x -> y`` with ``rank[x] < rank[y]`` costs O(1).
* Otherwise only the rank window ``[rank[y], rank[x]]`` can be affected.  A forward DFS from
  ``y`` restricted to ranks below ``rank[x]`` collects ``deltaf``; reaching a node whose rank
  *equals* ``rank[x]`` (i.e. ``x`` itself) means the edge closes a cycle, so the edge is taken
  out again and ``False`` is returned.  Otherwise a backward DFS from ``x`` restricted to ranks
  above ``rank[y]`` collects ``deltab`` (nodes already marked by the forward search are
  skipped), and the ranks owned by ``deltab ∪ deltaf`` are re-dealt in sorted order: first to
  ``deltab`` (sorted by old rank), then to ``deltaf`` (sorted by old rank).
* ``contract_edge(a, b)`` removes ``a -> b``, checks with a rank-bounded DFS whether ``a`` still
  reaches ``b`` (then merging would create a cycle: the edge is re-inserted and ``None`` is
  returned), otherwise folds the node with fewer neighbours into the one with more and frees
  the folded slot; a freed slot keeps its rank and is handed out again by ``new_node``.

Where exactness matters
-----------------------
The clustering pass walks ``all_nodes_in_post_order()`` (descending rank) and, per node, the
``successors()`` sequence.  Both orders are observable in which clusters form, so this module
reproduces upstream *exactly*, not just "some valid topological order":

* ``OrderedSet`` is a vector plus an index map; insertion appends and erasure *swap-removes*
  (the last element moves into the hole), which reorders the sequence.
* DFS is iterative with an explicit stack, successors pushed in sequence order, visited flags
  set when a node is popped (not when pushed).
* A refused contraction removes and re-inserts the edge, so the edge moves to the **end** of
  both ``out[a]`` and ``in[b]``.  ``can_contract_edge`` does the same even when it says yes.
* The survivor of a contraction is ``b`` when ``b`` has strictly more in+out neighbours
  (after ``a -> b`` was removed), else ``a``; the loser's successors are re-attached first
  (in its out-sequence order), then its predecessors (in its in-sequence order).
* ``new_node`` reuses the most recently freed slot (LIFO) and keeps its old rank.

Example
-------
>>> g = GraphCycles(4)
>>> g.insert_edge(0, 2), g.insert_edge(0, 1), g.insert_edge(1, 2), g.insert_edge(2, 0)
(True, True, True, False)
>>> g.insert_edge(3, 0)          # rank[3] > rank[0]: ranks are re-dealt
True
>>> g.ranks()
[1, 2, 3, 0]
>>> g.all_nodes_in_post_order()
[2, 1, 0, 3]
>>> g.successors(0)
[2, 1]
>>> g.contract_edge(0, 2) is None   # 0 -> 1 -> 2 remains: contracting would make a cycle
True
>>> g.successors(0)                 # the refused edge was re-inserted at the end
[1, 2]
>>> g.contract_edge(0, 1)           # 0 keeps 2 neighbours, 1 keeps 1: node 0 survives
0
>>> g.successors(0), g.predecessors(0), g.free_nodes()
([2], [3], [1])
>>> g.check_invariants()
True
"""

from __future__ import annotations

import heapq
import itertools
from typing import Any, Iterator

from jitsim.accel import load
from jitsim.beside import Started, several_cpus

__all__ = ["OrderedSet", "GraphCycles", "UnionFind"]

# C form of insert_edges and contract_edge (setup.py builds it where a compiler is found; see
# jitsim.accel)
_c = load("jitsim.analyses._fastcycles")


class OrderedSet:
    """Set of ints with a deterministic, insertion/erasure-history dependent order.

    ``_seq`` is the iteration sequence, ``_idx`` maps each value to its position.
    ``insert`` appends; ``erase`` moves the last element into the erased slot.
    """

    __slots__ = ("_seq", "_idx")

    def __init__(self) -> None:
        self._seq: list[int] = []
        self._idx: dict[int, int] = {}

    def insert(self, v: int) -> bool:
        idx = self._idx
        if v in idx:
            return False
        seq = self._seq
        idx[v] = len(seq)
        seq.append(v)
        return True

    def erase(self, v: int) -> None:
        """Remove ``v`` (which must be present) by swap-remove."""
        idx = self._idx
        seq = self._seq
        pos = idx.pop(v)  # KeyError if absent (upstream: DCHECK)
        last = seq.pop()
        if last != v:
            seq[pos] = last
            idx[last] = pos

    def clear(self) -> None:
        self._seq.clear()
        self._idx.clear()

    def __contains__(self, v: object) -> bool:
        return v in self._idx

    def __len__(self) -> int:
        return len(self._seq)

    def __iter__(self) -> Iterator[int]:
        return iter(self._seq)

    def items(self) -> list[int]:
        """The live sequence (do not mutate; copy before mutating the set while iterating)."""
        return self._seq

    def __repr__(self) -> str:
        return f"OrderedSet({self._seq!r})"


class GraphCycles:
    """Pearce–Kelly dynamic topological order with cycle-refusing edge contraction.

    Node ids are dense ints.  ``GraphCycles(n)`` pre-creates nodes ``0..n-1`` with
    ``rank == id`` (exactly what ``n`` calls of ``new_node()`` on an empty graph give).
    """

    __slots__ = ("_rank", "_visited", "_out", "_in", "_free", "_deltaf", "_deltab")

    def __init__(self, num_nodes: int = 0) -> None:
        if num_nodes < 0:
            raise ValueError("num_nodes must be >= 0")
        self._rank: list[int] = list(range(num_nodes))
        self._visited: list[bool] = [False] * num_nodes
        self._out: list[OrderedSet] = [OrderedSet() for _ in range(num_nodes)]
        self._in: list[OrderedSet] = [OrderedSet() for _ in range(num_nodes)]
        self._free: list[int] = []
        # Scratch lists reused by the searches (like the upstream Rep's scratch vectors).
        self._deltaf: list[int] = []
        self._deltab: list[int] = []

    @classmethod
    def with_edges(cls, num_nodes: int, edges) -> tuple["GraphCycles", int | None]:
        """``GraphCycles(num_nodes)`` after :meth:`insert_edges` of ``edges``, and what that
        returned. Where the C insertion does it all, the per-node sets come straight from it
        (not made empty first and then replaced)."""
        if _c is None or num_nodes <= 0:
            g = cls(num_nodes)
            return g, g.insert_edges(edges)
        g = cls(0)
        g._rank = list(range(num_nodes))
        g._visited = [False] * num_nodes
        g._out = g._in = None  # no sets yet: the first C insertion makes them
        return g, g.insert_edges(edges)

    @classmethod
    def with_edges_started(cls, num_nodes: int, edges) -> Started:
        """:meth:`with_edges` begun: its result comes from the returned object's ``result()``.

        Where the C extension inserts the edges, this process may run on more than one CPU and
        the graph is not too small or too big (``BACKGROUND_MIN_EDGES``, ``BACKGROUND_MAX_NODES``),
        the insertion runs in another thread: its edge-by-edge search holds no Python lock, so
        the caller's Python goes on beside it (the mark pass finds its candidates meanwhile).
        The result is :meth:`with_edges`' in every respect: the thread works on a graph of its
        own and on ``edges`` (which the caller must not change until ``result()``)."""
        return Started(lambda: cls.with_edges(num_nodes, edges), thread=cls.built_beside(num_nodes, len(edges)))

    @classmethod
    def built_beside(cls, num_nodes: int, num_edges: int) -> bool:
        """Whether :meth:`with_edges_started` inserts this many edges in another thread (else
        it inserts them at once, in the caller's)."""
        return (_c is not None and cls.BACKGROUND_MIN_EDGES <= num_edges and num_nodes <= cls.BACKGROUND_MAX_NODES
                and several_cpus())

    # ------------------------------------------------------------------ nodes

    @property
    def num_nodes(self) -> int:
        """Number of allocated node slots (live + freed)."""
        return len(self._rank)

    def new_node(self) -> int:
        free = self._free
        if free:
            # Reuse the most recently freed slot; its rank is kept so that ranks stay a
            # permutation of 0..N-1.
            return free.pop()
        v = len(self._rank)
        self._rank.append(v)
        self._visited.append(False)
        self._out.append(OrderedSet())
        self._in.append(OrderedSet())
        return v

    def remove_node(self, v: int) -> None:
        """Detach ``v`` from all neighbours and free its slot (no double-free check, as upstream)."""
        out_v = self._out[v]
        in_v = self._in[v]
        ins = self._in
        outs = self._out
        for y in out_v._seq:
            ins[y].erase(v)
        for y in in_v._seq:
            outs[y].erase(v)
        out_v.clear()
        in_v.clear()
        self._free.append(v)

    def rank(self, v: int) -> int:
        return self._rank[v]

    def ranks(self) -> list[int]:
        """Copy of the rank of every slot (freed slots included)."""
        return list(self._rank)

    def free_nodes(self) -> list[int]:
        """Copy of the free-slot stack (last element is handed out next)."""
        return list(self._free)

    # ------------------------------------------------------------------ edges

    def has_edge(self, x: int, y: int) -> bool:
        return y in self._out[x]._idx

    def remove_edge(self, x: int, y: int) -> None:
        # Deleting an edge never invalidates the rank order.
        self._out[x].erase(y)
        self._in[y].erase(x)

    def insert_edge(self, x: int, y: int) -> bool:
        """Add ``x -> y``; return False (graph unchanged) if it would close a cycle.

        An edge that already exists returns True without touching anything.
        """
        if x == y:
            return False
        out_x = self._out[x]
        ox_idx = out_x._idx
        if y in ox_idx:
            return True
        # Inline OrderedSet.insert (hot path).
        ox_seq = out_x._seq
        ox_idx[y] = len(ox_seq)
        ox_seq.append(y)
        in_y = self._in[y]
        in_y._idx[x] = len(in_y._seq)
        in_y._seq.append(x)

        rank = self._rank
        rx = rank[x]
        ry = rank[y]
        if rx <= ry:
            return True

        # Ranks disagree with the new edge: only ranks in [ry, rx] can be involved.
        if not self._forward_dfs(y, x, rx):
            out_x.erase(y)
            in_y.erase(x)
            visited = self._visited
            for v in self._deltaf:
                visited[v] = False
            return False
        self._backward_dfs(x, ry)
        self._reorder()
        return True

    def _forward_dfs(self, n: int, target: int, upper_bound: int, budget: int = -1) -> bool | None:
        """Collect into ``_deltaf`` the nodes reachable from ``n`` through ranks < upper_bound.

        ``target`` is the node holding rank ``upper_bound`` (ranks are a permutation, so it is
        unique); meeting it as a successor means a path exists and False is returned at once.
        Visited flags of the collected nodes are left set (the caller clears them).
        Exploration order is upstream's: pop, skip if visited, mark, scan successors in
        sequence order pushing the unvisited in-window ones. With a ``budget`` >= 0 the search
        gives up (None) once it has collected more than that many nodes.
        """
        rank = self._rank
        visited = self._visited
        outs = self._out
        deltaf = self._deltaf
        deltaf.clear()
        stack = [n]
        pop = stack.pop
        push = stack.append
        add = deltaf.append
        while stack:
            n = pop()
            if visited[n]:
                continue
            visited[n] = True
            add(n)
            if budget == 0:
                return None
            budget -= 1
            o = outs[n]
            # Upstream tests rank[w] == upper_bound per successor; with unique ranks that is
            # exactly "target is a successor", which one dict probe answers.
            if target in o._idx:
                return False
            for w in o._seq:
                if rank[w] < upper_bound and not visited[w]:
                    push(w)
        return True

    def _backward_dfs(self, n: int, lower_bound: int) -> None:
        """Collect into ``_deltab`` the unvisited nodes reaching ``n`` through ranks > lower_bound.

        Nodes still marked by the preceding forward search are skipped (as upstream).
        """
        rank = self._rank
        visited = self._visited
        ins = self._in
        deltab = self._deltab
        deltab.clear()
        stack = [n]
        pop = stack.pop
        push = stack.append
        add = deltab.append
        while stack:
            n = pop()
            if visited[n]:
                continue
            visited[n] = True
            add(n)
            for w in ins[n]._seq:
                if lower_bound < rank[w] and not visited[w]:
                    push(w)

    def _reorder(self) -> None:
        """Re-deal the ranks held by deltab ∪ deltaf: deltab first, each in old-rank order."""
        rank = self._rank
        visited = self._visited
        key = rank.__getitem__
        deltab = self._deltab
        deltaf = self._deltaf
        deltab.sort(key=key)
        deltaf.sort(key=key)
        nodes = deltab + deltaf
        ranks = [rank[v] for v in nodes]  # two ascending runs; sort() merges them
        ranks.sort()
        for v in nodes:
            visited[v] = False
        for v, r in zip(nodes, ranks):
            rank[v] = r

    # ------------------------------------------------------------ bulk insertion

    # A forward search that grows past this many nodes is finished over a snapshot of the graph
    # (each search costs O(N) set-up, so small windows stay with the Python search) ...
    BULK_SEARCH_BUDGET = 100
    # ... but only once the Python searches have visited this many nodes in all (a snapshot
    # costs about what the Python search spends on this many visits).
    BULK_SNAPSHOT_AFTER = 100_000
    # The snapshot: up to this many nodes, every node's descendant set as a Python int bitset
    # (computed in one pass in reverse rank order; n^2/8 bytes at most, 110 MB at 30k nodes);
    # above, scipy's breadth-first search over a CSR matrix (importing scipy.sparse costs 0.2 s).
    BULK_BITSET_MAX_NODES = 30_000
    # The clone batch (:class:`_CloneBatch`) is tried on graphs of at least this many node slots
    # whose edge list ends in at least this many edges of the cloned-constant shape; below, TF's
    # edge-by-edge insertion is fast enough. The batch gives up (and the edge-by-edge insertion
    # finishes) once its work passes this many units per node slot (a safety net: the next
    # rule stops it long before on graphs it does not suit) ...
    CLONE_BATCH_MIN_NODES = 50_000
    CLONE_BATCH_MIN_EDGES = 64
    CLONE_BATCH_WORK_PER_NODE = 1024
    # ... or once its work times this factor passes the number of nodes the edge-by-edge
    # insertion would have re-ranked for the same clones (plus a quarter of the node count:
    # the set-up is paid anyway; measured: a unit of the batch's Python work costs about as
    # much as 16 nodes re-ranked in C)
    CLONE_BATCH_COST_C = 16
    CLONE_BATCH_COST_PYTHON = 1  # (0: never give up on this ground)
    CLONE_BATCH_COST_C_BATCH = 1  # the C batch against the C edge-by-edge insertion
    # :meth:`with_edges_started` uses another thread from this many edges on (below, the
    # thread's start costs more than what runs beside it), up to this many nodes (above, the
    # peak memory of the insertion and of what runs beside it would add up: +108 MiB at 1M)
    BACKGROUND_MIN_EDGES = 2048
    BACKGROUND_MAX_NODES = 250_000

    def insert_edges(self, edges) -> int | None:
        """``insert_edge`` on each ``(x, y)`` of ``edges`` in order, stopping at the first edge
        that would close a cycle (not inserted); returns its index, or None when all went in.

        The result is the one of the one-by-one insertions in every respect (ranks, sequence
        orders). What differs is how a forward search's node set is found when its rank window
        is wide: building the cycle graph of a training step inserts thousands of edges from
        freshly cloned constants (sources with the highest ranks) into the body of the graph,
        each re-ranking everything downstream of its consumer. Only the *set* of nodes reached
        matters (it is sorted by rank before the ranks are re-dealt), so those searches are
        answered from a snapshot of the graph (each node's descendants as a bitset, or scipy's
        breadth-first search over a CSR matrix on the biggest graphs), which stays exact as long
        as no edge added or removed since the snapshot starts at a node the search reaches
        (checked on every answer; otherwise the snapshot is rebuilt or the Python search used).

        On big graphs whose edge list ends with cloned constants' edges (:func:`clone_tail`),
        those go in as one batch (:class:`_CloneBatch`) that computes the same ranks without
        re-ranking each consumer's descendants, as long as that is the cheaper way.
        """
        if not isinstance(edges, (list, tuple)):
            edges = list(edges)
        if len(self._rank) >= self.CLONE_BATCH_MIN_NODES and isinstance(self._rank, list):
            tail = clone_tail(edges)
            if tail is not None and len(edges) - tail[0] >= self.CLONE_BATCH_MIN_EDGES:
                t, clones = tail
                stop = self._insert_edges_one_by_one(edges[:t])
                if stop is not None:
                    return stop
                done = _CloneBatch(self, edges, t, clones).run()
                if done == len(edges):
                    return None
                stop = self._insert_edges_one_by_one(edges[done:])
                return None if stop is None else stop + done
        return self._insert_edges_one_by_one(edges)

    def _insert_edges_one_by_one(self, edges) -> int | None:
        """:meth:`insert_edges` without the clone-batch shortcut: TF's edge-by-edge insertion
        (the C extension's, or Python's with the snapshot searches)."""
        if _c is not None and isinstance(self._rank, list):
            return self._insert_edges_c(edges)
        outs = self._out
        ins = self._in
        rank = self._rank
        bulk = _BulkSearch(self)
        try:
            for i, (x, y) in enumerate(edges):
                if x == y:
                    return i
                out_x = outs[x]
                ox_idx = out_x._idx
                if y in ox_idx:
                    continue
                ox_seq = out_x._seq
                ox_idx[y] = len(ox_seq)
                ox_seq.append(y)
                in_y = ins[y]
                in_y._idx[x] = len(in_y._seq)
                in_y._seq.append(x)
                bulk.changed(x)
                ry = rank[y]
                if rank[x] <= ry:
                    continue
                deltaf = bulk.forward(y, x, rank[x])
                if deltaf is None:
                    out_x.erase(y)
                    in_y.erase(x)
                    return i
                self._backward_dfs(x, ry)
                bulk.reorder(self._deltab, deltaf)
                rank = self._rank  # a numpy array once the snapshot exists
            return None
        finally:
            self._deltaf.clear()
            if not isinstance(self._rank, list):
                self._rank = self._rank.tolist()

    def _insert_edges_c(self, edges) -> int | None:
        """:meth:`insert_edges` by the C extension: every edge searched one by one as
        :meth:`insert_edge` does (no snapshot needed at C speed), the same ranks and sequences."""
        if not isinstance(edges, (list, tuple)):
            edges = list(edges)
        if self._out is None:  # a fresh graph of with_edges: every node without edges
            outs = ins = [[]] * len(self._rank)
        else:
            outs, ins = [o._seq for o in self._out], [o._seq for o in self._in]
        # the sets come back new (nothing outside this object holds them)
        stop, self._rank, self._out, self._in = _c.insert_edges(self._rank, outs, ins, edges, OrderedSet)
        return stop

    # ------------------------------------------------------------ reachability

    def is_reachable(self, x: int, y: int) -> bool:
        """True iff there is a path ``x ~> y`` (``x == y`` counts as reachable).

        Uses the rank-bounded search of upstream ``IsReachableNonConst``; upstream's const
        ``IsReachable`` runs an unbounded ``FindPath`` but yields the same answer.
        """
        if x == y:
            return True
        rank = self._rank
        ry = rank[y]
        if rank[x] >= ry:
            return False
        reachable = not self._forward_dfs(x, y, ry)
        visited = self._visited
        for v in self._deltaf:
            visited[v] = False
        return reachable

    is_reachable_non_const = is_reachable

    def find_path(self, x: int, y: int, max_len: int = 1000) -> list[int]:
        """A path ``[x, ..., y]`` found by upstream's debug DFS, or ``[]`` if none.

        Successors are pushed in sequence order and marked seen when pushed; the path is
        truncated to its first ``max_len`` nodes (upstream fills at most that many slots).
        """
        outs = self._out
        path: list[int] = []
        path_len = 0
        seen: set[int] = set()
        stack = [x]
        while stack:
            n = stack.pop()
            if n < 0:
                path_len -= 1
                continue
            if path_len < max_len:
                del path[path_len:]
                path.append(n)
            path_len += 1
            stack.append(-1)
            if n == y:
                return path[: min(path_len, max_len)]
            for w in outs[n]._seq:
                if w not in seen:
                    seen.add(w)
                    stack.append(w)
        return []

    # ------------------------------------------------------------- contraction

    def contract_edge(self, a: int, b: int) -> int | None:
        """Merge the endpoints of edge ``a -> b``; return the surviving id, or None.

        None means another path ``a ~> b`` exists (merging would create a cycle); the edge is
        then restored, at the end of ``out[a]`` and ``in[b]``.

        The C extension's ``contract_edge`` does the same steps in place on this object's lists
        (:meth:`_contract_edge_python` is the reference it is tested against).
        """
        c_form = getattr(_c, "contract_edge", None)  # (None: no extension, or an older build)
        if c_form is not None and type(self._rank) is list:
            return c_form(self._rank, self._out, self._in, self._free, a, b)
        return self._contract_edge_python(a, b)

    def _contract_edge_python(self, a: int, b: int) -> int | None:
        """:meth:`contract_edge` in Python."""
        outs = self._out
        ins = self._in
        if b not in outs[a]._idx:
            raise ValueError(f"contract_edge: no edge {a} -> {b}")
        outs[a].erase(b)
        ins[b].erase(a)

        if self.is_reachable(a, b):
            self.insert_edge(a, b)
            return None

        if len(ins[b]._seq) + len(outs[b]._seq) > len(ins[a]._seq) + len(outs[a]._seq):
            a, b = b, a  # fold the node with fewer neighbours into the other one

        b_out = outs[b]
        b_in = ins[b]
        outs[b] = OrderedSet()
        ins[b] = OrderedSet()
        for y in b_out._seq:
            ins[y].erase(b)
        for y in b_in._seq:
            outs[y].erase(b)
        self._free.append(b)

        insert_edge = self.insert_edge
        for y in b_out._seq:
            insert_edge(a, y)
        for y in b_in._seq:
            insert_edge(y, a)
        return a

    def can_contract_edge(self, a: int, b: int) -> bool:
        """Whether ``contract_edge(a, b)`` would succeed.

        Not side-effect free: the edge is removed and re-inserted, so it moves to the end of
        ``out[a]`` and ``in[b]`` whatever the answer.
        """
        if b not in self._out[a]._idx:
            raise ValueError(f"can_contract_edge: no edge {a} -> {b}")
        self.remove_edge(a, b)
        reachable = self.is_reachable(a, b)
        self.insert_edge(a, b)
        return not reachable

    # ------------------------------------------------------------------ views

    def successors(self, v: int) -> list[int]:
        """The live out-sequence of ``v`` (copy it before mutating the graph)."""
        return self._out[v]._seq

    def predecessors(self, v: int) -> list[int]:
        """The live in-sequence of ``v`` (copy it before mutating the graph)."""
        return self._in[v]._seq

    def successors_copy(self, v: int) -> list[int]:
        return list(self._out[v]._seq)

    def predecessors_copy(self, v: int) -> list[int]:
        return list(self._in[v]._seq)

    def all_nodes_in_post_order(self) -> list[int]:
        """Live nodes by descending rank: if ``x`` reaches ``y``, ``y`` comes first."""
        rank = self._rank
        n = len(rank)
        by_rank = [0] * n
        for v in range(n):
            by_rank[rank[v]] = v
        by_rank.reverse()
        free = self._free
        if not free:
            return by_rank
        free_set = set(free)
        return [v for v in by_rank if v not in free_set]

    def debug_string(self) -> str:
        """Graphviz text listing the edges of live nodes (upstream ``DebugString``)."""
        free_set = set(self._free)
        lines = ["digraph {"]
        for v in range(len(self._rank)):
            if v in free_set:
                continue
            for w in self._out[v]._seq:
                lines.append(f'  "{v}" -> "{w}"')
        lines.append("}")
        return "\n".join(lines) + "\n"

    def check_invariants(self) -> bool:
        """Ranks are a permutation of 0..N-1, edges go up in rank, in/out lists mirror
        each other, index maps match sequences, no visited flag is left set, and freed
        slots have no edges."""
        return self.invariant_violation() is None

    def invariant_violation(self) -> str | None:
        """Description of the first broken invariant, or None."""
        rank = self._rank
        n = len(rank)
        if sorted(rank) != list(range(n)):
            return "ranks are not a permutation of 0..N-1"
        if len(self._visited) != n or len(self._out) != n or len(self._in) != n:
            return "per-node arrays have inconsistent lengths"
        for v in range(n):
            if self._visited[v]:
                return f"visited flag left set on node {v}"
            for name, os_ in (("out", self._out[v]), ("in", self._in[v])):
                if len(os_._seq) != len(os_._idx):
                    return f"{name}[{v}] sequence/index size mismatch"
                for i, w in enumerate(os_._seq):
                    if os_._idx.get(w) != i:
                        return f"{name}[{v}] index map wrong for {w}"
            for w in self._out[v]._seq:
                if w == v:
                    return f"self-loop on {v}"
                if rank[v] >= rank[w]:
                    return f"edge {v}->{w} has bad rank assignment {rank[v]}->{rank[w]}"
                if v not in self._in[w]._idx:
                    return f"edge {v}->{w} missing from in[{w}]"
            for w in self._in[v]._seq:
                if v not in self._out[w]._idx:
                    return f"edge {w}->{v} missing from out[{w}]"
        free = self._free
        if len(set(free)) != len(free):
            return "a slot is on the free list twice"
        for v in free:
            if self._out[v]._seq or self._in[v]._seq:
                return f"freed node {v} still has edges"
        return None


class _BulkSearch:
    """The forward searches of :meth:`GraphCycles.insert_edges` (see there): the Python search
    while it stays small, else a lookup in a snapshot of the graph (descendant bitsets, or
    scipy's breadth-first search over a CSR matrix for the biggest graphs). Once the
    snapshot exists the ranks are a numpy array (``GraphCycles._rank`` until the bulk
    insertion ends), so that wide windows are re-ranked without a Python loop."""

    def __init__(self, gc: GraphCycles) -> None:
        self.gc = gc
        self.csr = None  # the snapshot of a big graph: scipy CSR matrix
        self.reach = None  # the snapshot of a smaller one: node -> int bitset of its descendants
        self.edges = 0  # edges in the snapshot
        self.dirty = None  # numpy bool: node whose out-edges changed since the snapshot (None:
        # no snapshot yet; one is taken on the first wide search)
        self.node_at = None  # numpy: rank -> node, kept with the numpy ranks
        self.python_visits = 0  # Python search work since the last snapshot

    def changed(self, v: int) -> None:
        if self.dirty is not None:
            self.dirty[v] = True

    def forward(self, y: int, x: int, rx: int):
        """The nodes reachable from ``y`` through ranks below ``rx`` (any order), or None when
        ``x`` (holding rank ``rx``) is among them. Leaves no visited flag set."""
        done = self._python(y, x, rx, self.gc.BULK_SEARCH_BUDGET)
        if done is not None:
            return done[0]
        if self.dirty is None:
            if self.python_visits < self.gc.BULK_SNAPSHOT_AFTER:
                return self._python(y, x, rx, None)[0]
            self._snapshot(x)
        reach = self._reach(y)
        if self.dirty[reach].any():  # an out-edge changed on the way: stale for this search
            if self.python_visits * 4 < self.edges:  # a rebuild would cost more than it saved
                return self._python(y, x, rx, None)[0]
            self._snapshot(x)
            reach = self._reach(y)
        if (reach == x).any():
            return None
        return reach[self.gc._rank[reach] < rx]

    def _python(self, y: int, x: int, rx: int, budget):
        """The Python search (upstream's order); ``(deltaf or None,)``, or None past ``budget``."""
        gc = self.gc
        found = gc._forward_dfs(y, x, rx, -1 if budget is None else budget)
        visited = gc._visited
        deltaf = gc._deltaf
        self.python_visits += len(deltaf)
        for v in deltaf:
            visited[v] = False
        if found is None:
            return None
        return (list(deltaf) if found else None,)

    def _reach(self, y: int):
        """The snapshot's nodes reachable from ``y`` (``y`` included), a numpy int array."""
        if self.reach is not None:
            import numpy as np

            bits = self.reach[y]
            n = len(self.dirty)
            flags = np.unpackbits(np.frombuffer(bits.to_bytes((n + 7) // 8, "little"), dtype=np.uint8),
                                  bitorder="little")
            return np.flatnonzero(flags)
        from scipy.sparse.csgraph import breadth_first_order

        return breadth_first_order(self.csr, y, directed=True, return_predecessors=False)

    def _snapshot(self, x: int) -> None:
        """Take the snapshot during the search for the edge ``x -> y`` being inserted: the one
        edge whose ranks are still out of order, so ``x``'s bitset may miss ``y``'s part; ``x``
        is marked changed (a later search that reaches it does not trust the snapshot). A CSR
        snapshot is exact for every node."""
        import numpy as np

        gc = self.gc
        n = len(gc._rank)
        seqs = [o._seq for o in gc._out]
        if n <= gc.BULK_BITSET_MAX_NODES:
            order = np.argsort(np.asarray(gc._rank))[::-1].tolist()  # decreasing rank
            self.reach = self._descendant_bitsets(seqs, order)
            self.edges = sum(map(len, seqs))
        else:
            self.csr = self._csr(seqs, n)
            self.edges = self.csr.nnz
        self.dirty = np.zeros(n, dtype=bool)
        if self.reach is not None:
            self.dirty[x] = True
        self.python_visits = 0
        if isinstance(gc._rank, list):
            gc._rank = np.array(gc._rank, dtype=np.int64)
            self.node_at = np.empty(n, dtype=np.int64)
            self.node_at[gc._rank] = np.arange(n, dtype=np.int64)

    @staticmethod
    def _descendant_bitsets(seqs: list[list[int]], order: list[int]) -> list[int]:
        """Bit ``w`` of entry ``v``: ``w`` is ``v`` or a descendant of it. ``order``: the nodes
        by decreasing rank; ranks are a topological order, so every successor comes first."""
        reach = [0] * len(seqs)
        for v in order:
            r = 1 << v
            for w in seqs[v]:
                r |= reach[w]
            reach[v] = r
        return reach

    @staticmethod
    def _csr(seqs: list[list[int]], n: int):
        import itertools

        import numpy as np
        from scipy.sparse import csr_matrix

        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum([len(q) for q in seqs], out=indptr[1:])
        nnz = int(indptr[-1])
        indices = np.fromiter(itertools.chain.from_iterable(seqs), dtype=np.int32, count=nnz)
        csr = csr_matrix((np.ones(nnz), indices, indptr), shape=(n, n))
        csr.sort_indices()
        return csr

    def reorder(self, deltab: list[int], deltaf) -> None:
        """Upstream's re-dealing of ranks (``GraphCycles._reorder``) for a ``deltaf`` that is a
        list (Python search) or a numpy array (snapshot search)."""
        gc = self.gc
        rank = gc._rank
        visited = gc._visited
        key = rank.__getitem__
        node_at = self.node_at
        for v in deltab:
            visited[v] = False
        deltab.sort(key=key)
        if isinstance(deltaf, list):
            deltaf.sort(key=key)
            nodes = deltab + deltaf
            ranks = sorted(map(key, nodes))
            for v, r in zip(nodes, ranks):
                rank[v] = r
            if node_at is not None:
                node_at[ranks] = nodes
            return
        import numpy as np

        n = len(rank)
        rf = rank[deltaf]
        back = np.array(deltab, dtype=np.int64)
        if len(rf) * 100 > n:
            # a wide window: the ranks in order by marking them (O(n), no comparison sort);
            # the nodes in rank order through the rank -> node map
            mark = np.zeros(n, dtype=bool)
            mark[rf] = True
            front = node_at[np.flatnonzero(mark)]
            mark[rank[back]] = True
            pool = np.flatnonzero(mark)
        else:
            front = deltaf[np.argsort(rf)]
            pool = np.sort(np.concatenate((rank[back], rf)))
        nodes = np.concatenate((back, front))
        rank[nodes] = pool
        node_at[pool] = nodes


def clone_tail(edges) -> tuple[int, set[int]] | None:
    """Where the clone-shaped tail of an edge list begins, and its clones (None: no such tail).

    The tail holds, in any order, one out-edge ``(c, y)`` per *clone* ``c`` (a node with exactly
    one out-edge in the whole list, touched by no edge before the tail, and neither a ``y`` nor
    the source of another clone's in-edge) and in-edges ``(u, c)`` of the clones from other
    nodes: what TF's cloned constants add after the graph's own edges (the control edge from
    ``_SOURCE``, the edge into the consumer). This is the shape only; :class:`_CloneBatch`
    checks the ranks as it goes."""
    outdeg: dict[int, int] = {}
    for x, _ in edges:
        outdeg[x] = outdeg.get(x, 0) + 1
    limit = 0
    for _ in range(16):
        clones: set[int] = set()
        targets: set[int] = set()
        sources: set[int] = set()
        t = len(edges)
        while t > limit:
            a, b = edges[t - 1]
            if a == b:
                break
            if b in clones and a not in clones:
                sources.add(a)
            elif outdeg[a] == 1 and a not in targets and a not in sources and b not in clones:
                clones.add(a)
                targets.add(b)
            else:
                break
            t -= 1
        if not clones:
            return None
        # a clone with edges before the tail is not one: the tail starts after its last edge
        bad = {v for e in edges[:t] for v in e if v in clones}
        if not bad:
            return t, clones
        limit = 1 + max(i for i in range(t, len(edges)) if edges[i][0] in bad or edges[i][1] in bad)
    return None


class _CloneBatch:
    """TF's edge-by-edge insertion of a clone-shaped edge tail (:func:`clone_tail`), computed
    without its quadratic re-ranking; the result is the same in every respect.

    Why it is the same. Let ``M`` be the nodes reachable from the clones' consumers ``y`` in the
    graph before the tail (the tail adds no path between them). Inserting ``c -> y`` where
    ``c`` holds a rank above every node of ``M`` and every predecessor of ``c`` ranks below
    ``y`` (checked at each edge; otherwise the batch stops and edge-by-edge insertion goes on
    from there) is a Pearce-Kelly step whose backward set is ``{c}`` and whose forward set is
    ``D = desc(y)`` (all of it lies below ``c``): the ranks held by ``D ∪ {c}`` are re-dealt in
    order, ``c`` first. Nodes outside ``M`` and ``c`` never move, so only the order of ``M``
    over the ranks (*slots*) ``M`` holds matters. Written over that sequence ``s`` of ``M``
    (``p``: the index of ``y``): ``c`` takes ``y``'s slot, which leaves ``M``'s slots, and
    ``c``'s old slot joins them at the top; every ``D`` element moves to the slot of the next
    ``D`` element. On ``s`` that is: each maximal run of non-``D`` elements after ``y`` swaps
    places with the ``D`` element just before it, and nothing else changes. So a step costs
    the non-descendants of ``y`` that follow it in ``s`` (few, where each consumer reaches most
    of the rest: the quadratic case), not ``|D|``. They are found without walking ``D``: a
    node after ``y`` is not in ``D`` exactly when none of its predecessors in ``M`` is, so they
    are the nodes after ``y`` whose latest ``M`` predecessor lies before ``y`` (a range-minimum
    tree over ``s`` finds them) and, in order along ``s``, those successors of found ones whose
    ``M`` predecessors are all before ``y`` or found. The slots are a Fenwick tree (the slot
    of index ``p`` is ``y``'s rank). ``tests/test_graphcycles_batch.py`` compares the result
    with edge-by-edge insertion.
    """

    def __init__(self, gc: GraphCycles, edges, start: int, clones: set[int]) -> None:
        self.gc = gc
        self.edges = edges
        self.start = start
        self.clones = clones

    def run(self) -> int:
        """Insert ``edges[start:]``; returns how many edges of the list are in: all of them, or
        the index where the batch stopped (the state is then exactly TF's up to there)."""
        tail = self.edges[self.start:]
        if _c is not None and hasattr(_c, "clone_batch") and len(set(tail)) == len(tail):
            return self._run_c(tail)
        return self._run_python()

    def _run_c(self, tail) -> int:
        """:meth:`run` by the C extension (the same steps; where it gives up may differ, the
        state up to there does not). It hands back the ranks; the sequences get the edges it
        took appended here, as insert_edge appends them."""
        gc = self.gc
        done, rank = _c.clone_batch(gc._rank, [o._seq for o in gc._out], [o._seq for o in gc._in], tail,
                                    self.clones, gc.CLONE_BATCH_WORK_PER_NODE * len(gc._rank),
                                    gc.CLONE_BATCH_COST_C_BATCH)
        if rank is None:
            return self.start
        gc._rank = rank
        outs = gc._out
        ins = gc._in
        for x, y in tail[:done]:
            out_x = outs[x]
            out_x._idx[y] = len(out_x._seq)
            out_x._seq.append(y)
            in_y = ins[y]
            in_y._idx[x] = len(in_y._seq)
            in_y._seq.append(x)
        return self.start + done

    def _run_python(self) -> int:
        gc = self.gc
        edges = self.edges
        clones = self.clones
        rank = gc._rank
        outs = gc._out
        ins = gc._in
        n = len(rank)
        tail = edges[self.start:]
        # M: everything the consumers reach before the tail's edges go in
        pos = [-1] * n
        members = []
        stack = []
        for x, y in tail:
            if x in clones and pos[y] < 0:
                pos[y] = 0
                stack.append(y)
        members.extend(stack)
        while stack:
            v = stack.pop()
            for w in outs[v]._seq:
                if pos[w] < 0:
                    pos[w] = 0
                    members.append(w)
                    stack.append(w)
        for x, y in tail:
            if x not in clones and pos[x] >= 0:  # a clone's other input inside M: not this shape
                return self.start
        members.sort(key=rank.__getitem__)
        seq = members
        k = len(seq)
        for i, v in enumerate(seq):
            pos[v] = i
        # Fenwick tree of the slots M holds (1-based), for the slot at an index of seq
        held = bytearray(n)  # the same, one flag per slot
        for v in seq:
            held[rank[v]] = 1
        fen = [0, *held]
        for i in range(1, n + 1):
            j = i + (i & -i)
            if j <= n:
                fen[j] += fen[i]
        top_slot = rank[seq[-1]] if seq else -1
        log = 1
        while log * 2 <= n:
            log *= 2
        # latest M predecessor of each M node (-1: none), in a range-minimum tree over seq
        latest = [-1] * n
        for v in seq:
            m = -1
            for u in ins[v]._seq:
                pu = pos[u]
                if pu > m:
                    m = pu
            latest[v] = m
        size = 1
        while size < max(k, 1):
            size *= 2
        big = n + 1
        tree = [big] * (2 * size)
        for i, v in enumerate(seq):
            tree[size + i] = latest[v]
        for i in range(size - 1, 0, -1):
            l, r = tree[2 * i], tree[2 * i + 1]
            tree[i] = l if l < r else r

        def set_leaf(i: int, val: int) -> None:
            i += size
            tree[i] = val
            i >>= 1
            while i:
                l, r = tree[2 * i], tree[2 * i + 1]
                m = l if l < r else r
                if tree[i] == m:
                    break
                tree[i] = m
                i >>= 1

        def roots_after(p: int) -> list[int]:
            """Indices after ``p`` whose latest M predecessor is before ``p``."""
            found = []
            todo = [(1, 0, size - 1)]
            while todo:
                node, lo, hi = todo.pop()
                if hi <= p or tree[node] >= p:
                    continue
                if lo == hi:
                    found.append(lo)
                    continue
                mid = (lo + hi) >> 1
                todo.append((2 * node + 1, mid + 1, hi))
                todo.append((2 * node, lo, mid))
            return found

        budget = work0 = gc.CLONE_BATCH_WORK_PER_NODE * n
        # a unit of work here against a node re-ranked by the edge-by-edge insertion: about
        # 16 times dearer than the C extension's, cheaper than the Python search's
        cheaper = gc.CLONE_BATCH_COST_C if _c is not None else gc.CLONE_BATCH_COST_PYTHON
        reranked = 0
        slack = n // 4
        placed: dict[int, int] = {}
        done = self.start

        for x, y in tail:
            if x in clones:
                # c -> y: checks that make it the Pearce-Kelly step described above
                rc = placed.get(x, rank[x])
                if x in placed or outs[x]._seq or rc <= top_slot:
                    break
                p = pos[y]
                # the slot at index p: smallest s with prefix count p + 1
                want = p + 1
                at = 0
                step = log
                while step:
                    nxt = at + step
                    if nxt <= n and fen[nxt] < want:
                        at = nxt
                        want -= fen[nxt]
                    step >>= 1
                ry = at  # slot index (0-based) = (1-based position at + 1) - 1
                if any(placed.get(u, rank[u]) >= ry for u in ins[x]._seq):
                    break
                # the non-descendants of y after it, in seq order
                heap = roots_after(p)
                budget -= len(heap) + 1
                heapq.heapify(heap)
                seen = set(heap)
                nond: set[int] = set()
                runs_idx = []
                # the work the edge-by-edge insertion would spend, at most, with this clone
                allowed = (reranked + k - p + slack) // cheaper - work0 if cheaper else work0
                while heap:
                    i = heapq.heappop(heap)
                    w = seq[i]
                    ok = True
                    for u in ins[w]._seq:
                        pu = pos[u]
                        if pu >= p and u not in nond:
                            ok = False
                            break
                    budget -= len(ins[w]._seq) + 1
                    if -budget > allowed:
                        break
                    if not ok:
                        continue
                    nond.add(w)
                    runs_idx.append(i)
                    for s2 in outs[w]._seq:
                        j = pos[s2]
                        if j not in seen:
                            seen.add(j)
                            heapq.heappush(heap, j)
                # give up where the edge-by-edge steps would be cheaper: a step re-ranks
                # |D| = the elements after y less the non-descendants found
                if budget < 0 or -budget > allowed:
                    break
                reranked += k - p - len(runs_idx)
                # each run of non-descendants swaps places with the D element before it
                r = 0
                nr = len(runs_idx)
                while r < nr:
                    s0 = runs_idx[r]
                    e = s0
                    while r + 1 < nr and runs_idx[r + 1] == e + 1:
                        r += 1
                        e += 1
                    r += 1
                    d = seq[s0 - 1]
                    for i in range(s0, e + 1):
                        w = seq[i]
                        seq[i - 1] = w
                        pos[w] = i - 1
                    seq[e] = d
                    pos[d] = e
                    budget -= e - s0 + 2
                    # latest predecessors: d moved later, the run one place earlier
                    for w2 in outs[d]._seq:
                        if latest[w2] < e:
                            latest[w2] = e
                            set_leaf(pos[w2], e)
                    for i in range(s0 - 1, e):
                        for w2 in outs[seq[i]]._seq:
                            if latest[w2] == i + 1:
                                m = -1
                                for u in ins[w2]._seq:
                                    pu = pos[u]
                                    if pu > m:
                                        m = pu
                                latest[w2] = m
                                j = pos[w2]
                                if j < s0 - 1 or j > e:
                                    set_leaf(j, m)
                    # the moved stretch's leaves, then their parents level by level
                    lo = size + s0 - 1
                    hi = size + e
                    for i in range(lo, hi + 1):
                        tree[i] = latest[seq[i - size]]
                    while lo > 1:
                        lo >>= 1
                        hi >>= 1
                        for i in range(lo, hi + 1):
                            l, r2 = tree[2 * i], tree[2 * i + 1]
                            tree[i] = l if l < r2 else r2
                # c takes y's slot; c's slot joins M's at the top
                i = ry + 1
                while i <= n:
                    fen[i] -= 1
                    i += i & -i
                i = rc + 1
                while i <= n:
                    fen[i] += 1
                    i += i & -i
                held[ry] = 0
                held[rc] = 1
                top_slot = rc
                placed[x] = ry
            else:
                rx = placed.get(x, rank[x])
                # not a forward edge, or one already there: not this shape
                if rx >= placed.get(y, rank[y]) or y in outs[x]._idx:
                    break
            # the sequences, as insert_edge appends them
            out_x = outs[x]
            out_x._idx[y] = len(out_x._seq)
            out_x._seq.append(y)
            in_y = ins[y]
            in_y._idx[x] = len(in_y._seq)
            in_y._seq.append(x)
            done += 1
        # the ranks: seq over M's slots in order, each placed clone at its slot
        for r, v in zip(itertools.compress(range(n), held), seq):
            rank[v] = r
        for c, r in placed.items():
            rank[c] = r
        return done


class UnionFind:
    """Union-find element carrying a value (XLA ``union_find.h``).

    ``a.merge(b)`` unites the two sets by rank, and the merged set's value is always the one
    ``a``'s set had: when ``a``'s root ends up below ``b``'s root, the value is copied up.
    """

    __slots__ = ("_parent", "_rank", "_size", "_value")

    def __init__(self, value: Any = None) -> None:
        self._parent: UnionFind | None = None
        self._rank = 0
        self._size = 1
        self._value = value

    def find(self) -> "UnionFind":
        """Root of this element's set, compressing the path to it."""
        root = self
        while root._parent is not None:
            root = root._parent
        node = self
        while node is not root:
            nxt = node._parent
            node._parent = root
            node = nxt  # type: ignore[assignment]
        return root

    def get(self) -> Any:
        return self.find()._value

    def set(self, value: Any) -> None:
        self.find()._value = value

    def size(self) -> int:
        return self.find()._size

    def merge(self, other: "UnionFind") -> None:
        a = self.find()
        b = other.find()
        if a is b:
            return
        if a._rank > b._rank:
            b._parent = a
            a._size += b._size
            return
        a._parent = b
        if a._rank == b._rank:
            b._rank += 1
        b._value = a._value
        b._size += a._size
