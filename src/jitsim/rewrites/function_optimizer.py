"""The optimizer EncapsulateSubgraphs runs on each cluster's subgraph before it becomes a
function: TF's ``GraphOptimizer`` with common-subexpression elimination, constant folding
and function inlining on (``OptimizeGraph``), up to 10 rounds until nothing changes.

Each round: dead-node pruning (``PruneForReverseReachability``), ``Identity`` removal,
constant folding (numpy evaluation, :mod:`jitsim.rewrites.folding`; new constants
``<node>/_<n>__cf__<m>`` on the CPU device; skipped with ``--tf_xla_disable_constant_folding``
and for ops with a ``DT_VARIANT`` output), source/sink fix-up, CSE, function inlining (only
reported: calls of library functions by name are not inlined by jitsim). What it did lands in
the cluster's ``ClusterDecision.optimizer`` report.
"""

from __future__ import annotations

from jitsim.registry import protos
from jitsim.graph.function_def import merge_debug_info
from jitsim.registry.kernels import find_kernel
from jitsim.rewrites.folding.evaluator import Evaluator
from jitsim.rewrites.folding.tensors import EvalError, Unsupported, to_tensor_proto, total_bytes
from jitsim.registry.optypes import DT_RESOURCE, DT_VARIANT, NodeTypes, is_ref_type
from jitsim.opsets import CONSTANT_OPS, ENTER_OPS, EXIT_OPS, IDENTITY_OPS, MERGE_OPS, NEXT_ITERATION_OPS, SWITCH_OPS
from jitsim.graph.tfgraph import CONTROL, SINK_ID, SOURCE_ID, TfGraph, TfNode
from jitsim.registry import op_def
from jitsim.opsets import CONTROL_FLOW_OPS, FEEDABLE_PLACEHOLDER_OPS, SEND_RECV_OPS
from jitsim.defs import DEVICES

# The device of the private CPU function runtime the pass creates; constants made by
# constant folding are placed on it.
CPU_DEVICE = DEVICES["cpu"]
MAX_CONSTANT_BYTES = 10 * 1024 * 1024  # ConstantFoldingOptions default
MAX_OPTIMIZER_ROUNDS = 10
SESSION_HANDLE_OPS = frozenset({"GetSessionHandle", "GetSessionHandleV2", "GetSessionTensor",
                                "DeleteSessionTensor"})


def add_node(g: TfGraph, nd) -> TfNode:
    """``Graph::AddNode``: TF allows duplicate names in a Graph, so no check here."""
    node = TfNode(len(g.nodes), nd.name, nd.op, nd)
    g.nodes.append(node)
    g.by_name.setdefault(nd.name, node.id)
    return node


def fixup_source_and_sink(g: TfGraph) -> bool:
    changed = False
    for n in list(g.nodes):
        if n is None:
            continue
        if n.id != SOURCE_ID and not n.in_edges:
            g.add_control_edge(SOURCE_ID, n.id)
            changed = True
        if n.id != SINK_ID and not n.out_edges:
            g.add_control_edge(n.id, SINK_ID)
            changed = True
    return changed

def _post_order(g: TfGraph) -> list[TfNode]:
    """TF's ``DFS`` from ``_SOURCE`` with a stable comparator on node ids: leave order."""
    nodes = g.nodes
    visited = bytearray(len(nodes))
    out: list[TfNode] = []
    stack: list[int] = [SOURCE_ID]  # a node id to enter, or ~id to leave it
    while stack:
        nid = stack.pop()
        if nid < 0:
            out.append(nodes[~nid])
            continue
        if visited[nid]:
            continue
        visited[nid] = 1
        stack.append(~nid)
        # (ids sort as the nodes do by id: an edge's ends are live nodes)
        nbrs = [e.dst for e in nodes[nid].out_edges.values()]
        if len(nbrs) > 1:
            nbrs.sort()
        for m in nbrs:
            if not visited[m]:
                stack.append(m)
    return out


def _new_name(g: TfGraph, prefix: str) -> str:
    out = f"{prefix}/_{g.name_counter}"
    g.name_counter += 1
    return out

class FunctionOptimizer:
    """TF's ``OptimizeGraph`` on one cluster subgraph, recording what it did in ``report``."""

    def __init__(self, g: TfGraph, types: NodeTypes, flags, report: dict, warnings: list[str]):
        self.g = g
        self.types = types
        self.fold = not getattr(flags, "disable_constant_folding", False)
        self.report = report
        self.warnings = warnings
        self._static_keys: dict[int, tuple] = {}  # node id -> (node, output types, attrs)
        self._commutative: dict[str, bool] = {}
        self._stateful: dict[str, bool] = {}  # op -> is_stateful (the library does not change)
        self._foldable_memo: dict[int, tuple] = {}

    def run(self) -> None:
        g = self.g
        rounds = 0
        for _ in range(MAX_OPTIMIZER_ROUNDS):
            rounds += 1
            changed = False
            if self.remove_dead_nodes():
                changed = True
            if self.remove_identity_nodes():
                changed = True
            if self.constant_fold():
                self.remove_dead_nodes()
                changed = True
            if fixup_source_and_sink(g):
                changed = True
            if self.cse():
                changed = True
            if self.expand_inline_functions():
                changed = True
            if not changed:
                break
        self.report["rounds"] = rounds

    # RemoveDeadNodes / PruneForReverseReachability
    def remove_dead_nodes(self) -> bool:
        g = self.g
        nodes = g.nodes
        keep = bytearray(len(nodes))
        stack: list[TfNode] = []
        for n in nodes:
            if n is None:
                continue
            op = n.op
            if n.id <= SINK_ID or op in CONTROL_FLOW_OPS or self._is_stateful(op):
                keep[n.id] = 1
                stack.append(n)
        while stack:
            for e in stack.pop().in_edges.values():
                src = e.src
                if not keep[src]:
                    keep[src] = 1
                    stack.append(nodes[src])
        removed = [n for n in nodes[2:] if n is not None and not keep[n.id]]
        for n in removed:
            g.remove_node(n.id)
        if removed:
            self.report.setdefault("dead_nodes_removed", []).extend(n.name for n in removed)
        return bool(removed)

    def _is_stateful(self, op: str) -> bool:
        got = self._stateful.get(op)
        if got is None:
            got = self._stateful[op] = self.types.is_stateful(op)
        return got

    # RemoveIdentityNodes
    def _only_data_edge(self, n: TfNode):
        ret = None
        nodes = self.g.nodes
        for e in n.in_edges.values():
            if e.is_control or ret is not None:
                return None
            src = nodes[e.src]
            if src.nodedef is not None and is_ref_type(self.types.output_type(src.nodedef, e.src_output)):
                return None
            if src.op in SEND_RECV_OPS - {"_Send", "_HostSend"} or src.op in SWITCH_OPS:
                return None
            ret = e
        return ret

    def remove_identity_nodes(self) -> bool:
        g = self.g
        matches = [n for n in g.op_nodes()
                   if n.op in IDENTITY_OPS and self._only_data_edge(n) is not None and n.out_edges]
        for n in matches:
            e_in = self._only_data_edge(n)
            if e_in is None:  # cannot happen in TF's graphs; be safe
                continue
            for out in list(n.out_edges.values()):
                if out.is_control:
                    g.add_control_edge(e_in.src, out.dst)
                else:
                    g.add_edge(e_in.src, e_in.src_output, out.dst, out.dst_input)
            g.remove_node(n.id)
        if matches:
            self.report.setdefault("identities_removed", []).extend(n.name for n in matches)
        return bool(matches)

    # ConstantFold (common_runtime/constant_folding.cc), no shape map
    def _foldable(self, n: TfNode) -> bool:
        """Whether ``n`` may be folded (once per node: the rounds never change a node's op or
        attrs, and nodes they create get new ids)."""
        got = self._foldable_memo.get(n.id)
        if got is None or got[0] is not n:
            got = self._foldable_memo[n.id] = (n, self._foldable_uncached(n))
        return got[1]

    def _foldable_uncached(self, n: TfNode) -> bool:
        op = n.op
        if op in CONSTANT_OPS:
            return self.types.output_type(n.nodedef, 0) != DT_RESOURCE
        if self.types.is_stateful(op):
            return False
        if not self.fold:
            return False
        od = op_def(op)
        if od is not None and any(a.type == DT_VARIANT for a in od.output_arg):
            return False
        if op in CONTROL_FLOW_OPS or op in SEND_RECV_OPS or op in SESSION_HANDLE_OPS:
            return False
        if op == "FakeParam":
            return False
        if od is None:  # a function called by name: no CPU kernel
            return False
        if "_scoped_allocator" in n.attr:
            return False
        return _cpu_kernel_available(n.nodedef)

    def _may_fold(self) -> bool:
        """Whether some node other than a constant could be folded: a necessary condition of
        :meth:`constant_fold` finding anything, checked first because it is cheap (no sorting).

        A node can be folded only if it is foldable and all its data inputs can; so the nodes
        that can be form the closure, from the foldable nodes without data inputs along data
        edges, of the foldable nodes whose every data input is in it (a superset of what the
        name-ordered walk of :meth:`constant_fold` takes)."""
        nodes = self.g.nodes
        foldable = self._foldable
        pending: dict[int, int] = {}
        ready: list[TfNode] = []
        for n in nodes:
            if n is None:
                continue
            k = 0
            for e in n.in_edges.values():
                if e.src_output != CONTROL:
                    k += 1
            if k:
                pending[n.id] = k
            elif n.id > SINK_ID:
                ready.append(n)
        while ready:
            n = ready.pop()
            if not foldable(n):
                continue
            if n.op not in CONSTANT_OPS:
                return True
            for e in n.out_edges.values():
                if e.src_output != CONTROL:
                    left = pending[e.dst] - 1
                    pending[e.dst] = left
                    if not left and e.dst > SINK_ID:
                        ready.append(nodes[e.dst])
        return False

    def constant_fold(self) -> bool:
        g = self.g
        nodes = g.nodes
        if not self._may_fold():
            return False
        deps: dict[int, set[int]] = {}  # constant_control_deps
        order: list[TfNode] = []
        internal = False
        foldable = self._foldable
        # TF's ReverseDFSFrom(_SINK) with NodeComparatorName, the leave step inline: a node
        # is taken when it is foldable and all its data inputs were taken
        names = [n.name if n is not None else "" for n in nodes]
        visited = bytearray(len(nodes))
        stack: list[tuple[int, bool]] = [(SINK_ID, False)]
        while stack:
            nid, is_leave = stack.pop()
            n = nodes[nid]
            if is_leave:
                if nid <= SINK_ID:
                    continue
                ins = n.in_edges.values()
                for e in ins:
                    if e.src_output != CONTROL and e.src not in deps:
                        break
                else:
                    if not foldable(n):
                        continue
                    mine: set[int] = set()
                    for e in ins:
                        src = e.src
                        if src not in deps:
                            if src != SOURCE_ID:
                                mine.add(src)
                        else:
                            mine |= deps[src]
                    deps[nid] = mine
                    order.append(n)
                    if n.op not in CONSTANT_OPS:
                        internal = True
                continue
            if visited[nid]:
                continue
            visited[nid] = 1
            stack.append((nid, True))
            nbrs = [e.src for e in n.in_edges.values()]
            if len(nbrs) > 1:
                nbrs.sort(key=names.__getitem__)
            for m in nbrs:
                if not visited[m]:
                    stack.append((m, False))
        if not internal:
            return False
        fetch = set()
        for n in order:
            for e in n.out_edges.values():
                if not e.is_control and e.dst not in deps:
                    fetch.add((n.id, e.src_output))
        if not fetch:
            return False
        fetch_sorted = sorted(fetch, key=lambda t: (nodes[t[0]].name, t[1]))
        evaluator = Evaluator(g, self.types)
        values = {}
        try:
            for t in fetch_sorted:
                values[t] = evaluator.value(*t)
        except Unsupported as exc:
            self.warnings.append(
                f"constant folding not simulated: {exc}; TF may have folded "
                f"{', '.join(sorted({nodes[t[0]].name for t in fetch_sorted if nodes[t[0]].op not in CONSTANT_OPS})[:5])}")
            return False
        except EvalError:
            return False  # TF's GraphRunner fails too: nothing is folded
        replaced = 0
        cf_counter = 0
        for nid, slot in fetch_sorted:
            n = nodes[nid]
            if n.op in CONSTANT_OPS:
                continue
            arr, dtype = values[(nid, slot)]
            if total_bytes(arr, dtype) > MAX_CONSTANT_BYTES:
                continue
            name = f"{_new_name(g, n.name)}__cf__{cf_counter}"
            cf_counter += 1
            nd = protos.NodeDef(name=name, op="Const", device=CPU_DEVICE)
            nd.attr["dtype"].type = dtype
            to_tensor_proto(arr, dtype, nd.attr["value"].tensor)
            c = add_node(g, nd)
            for e in [e for e in n.out_edges.values() if e.src_output == slot]:
                g.add_edge(c.id, 0, e.dst, e.dst_input)
                g.remove_edge(e)
            cdeps = deps.get(nid, set())
            if not cdeps:
                g.add_control_edge(SOURCE_ID, c.id)
            else:
                for d in sorted(cdeps):
                    g.add_control_edge(d, c.id)
            replaced += 1
            self.report.setdefault("constants_folded", []).append(
                {"tensor": f"{n.name}:{slot}", "constant": name})
        return replaced > 0

    # OptimizeCSE
    def _static_key(self, n: TfNode) -> tuple:
        """The part of a node's CSE hash that the rounds never change: its output types and
        attrs (once per node; nodes the rounds create get new ids)."""
        key = self._static_keys.get(n.id)
        if key is None or key[0] is not n:
            attrs = n.attr
            key = self._static_keys[n.id] = (n, tuple(self.types.outputs(n.nodedef)), tuple(
                (k, attrs[k].SerializeToString(deterministic=True)) for k in sorted(attrs)))
        return key[1:]

    def _is_commutative(self, op: str) -> bool:
        got = self._commutative.get(op)
        if got is None:
            got = self._commutative[op] = self.types.is_commutative(op)
        return got

    def _inputs(self, n: TfNode):
        """(data inputs as (node id, slot) by input slot, or sorted for a commutative op;
        sorted control input ids)."""
        edges = n.in_edges
        if len(edges) == 1:  # the common case, without sorting
            for e in edges.values():
                if e.src_output == CONTROL:
                    return (), (e.src,)
                return ((e.src, e.src_output),), ()
        data, ctrl = [], []
        for e in n.in_edges.values():
            if e.src_output == CONTROL:
                ctrl.append(e.src)
            else:
                data.append((e.dst_input, e.src, e.src_output))
        data.sort()
        ins = [(s, o) for _, s, o in data]
        if self._is_commutative(n.op):
            ins.sort()
        ctrl.sort()
        return tuple(ins), tuple(ctrl)

    def cse(self) -> bool:
        """TF's ``OptimizeCSE``: in reverse post order, a node whose op, output types, inputs
        and attrs equal an earlier node's is replaced by it. The nodes are bucketed by op and
        inputs first; the rest of the hash is worked out only where a bucket has two nodes."""
        g, types = self.g, self.types
        order = _post_order(g)
        order.reverse()
        # (op, inputs) -> the first node with them, or {rest of the key: first node}
        available: dict[tuple, object] = {}
        changed = False
        merged = []
        for n in order:
            if n.id <= SINK_ID or n.op in FEEDABLE_PLACEHOLDER_OPS:
                continue
            ins, ctrl = self._inputs(n)
            head = (n.op, ins)
            bucket = available.get(head)
            if bucket is None:
                available[head] = n
                continue
            if type(bucket) is not dict:
                bucket = available[head] = {self._static_key(bucket): bucket}
            rest = self._static_key(n)
            cand = bucket.get(rest)
            if cand is None:
                bucket[rest] = n
                continue
            if types.is_stateful(cand.op):
                continue
            if any(is_ref_type(t) for t in types.inputs(cand.nodedef)) or any(
                    is_ref_type(t) for t in types.inputs(n.nodedef)):
                continue
            if self._inputs(cand)[1] != ctrl:
                continue
            for e in list(n.out_edges.values()):
                g.add_edge(cand.id, e.src_output, e.dst, e.dst_input)
            merge_debug_info(n.nodedef, cand.nodedef)
            g.remove_node(n.id)
            merged.append((n.name, cand.name))
            changed = True
        if merged:
            self.report.setdefault("cse_merged", []).extend(
                {"removed": a, "kept": b} for a, b in merged)
        return changed

    # ExpandInlineFunctions: only calls of library functions by name are inlined (the pass
    # disables multi-device inlining, so PartitionedCall/StatefulPartitionedCall stay).
    def expand_inline_functions(self) -> bool:
        calls = [n.name for n in self.g.op_nodes() if n.op in self.types.fns]
        if calls:
            noinline = []
            for n in self.g.op_nodes():
                if n.op in self.types.fns:
                    fa = self.types.fns[n.op].attr
                    if "_noinline" in fa and fa["_noinline"].b:
                        noinline.append(n.name)
            todo = [c for c in calls if c not in noinline]
            if todo:
                msg = f"inlining of function calls not simulated: {', '.join(todo[:5])}"
                if msg not in self.warnings:
                    self.warnings.append(msg)
        return False


def _cpu_kernel_available(nd) -> bool:
    """``KernelDefAvailable(DEVICE_CPU, node)``, from TF's CPU kernel registry snapshot when
    jitsim ships one (assumed available otherwise)."""
    try:
        return find_kernel(nd, "CPU") is not None
    except Exception:  # pragma: no cover - unreadable snapshot
        return True
