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

from collections import deque
from typing import Callable

from jitsim.registry import protos
from jitsim.graph.function_def import merge_debug_info
from jitsim.registry.kernels import find_kernel
from jitsim.rewrites.folding.evaluator import Evaluator
from jitsim.rewrites.folding.tensors import EvalError, Unsupported, to_tensor_proto, total_bytes
from jitsim.registry.optypes import DT_RESOURCE, DT_VARIANT, NodeTypes, is_ref_type
from jitsim.graph.tfgraph import CONSTANT_OPS, ENTER_OPS, EXIT_OPS, IDENTITY_OPS, MERGE_OPS, NEXT_ITERATION_OPS, SINK_ID, SOURCE_ID, SWITCH_OPS, TfGraph, TfNode, dfs
from jitsim.registry import op_def

# The device of the private CPU function runtime the pass creates; constants made by
# constant folding are placed on it.
CPU_DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"
MAX_CONSTANT_BYTES = 10 * 1024 * 1024  # ConstantFoldingOptions default
MAX_OPTIMIZER_ROUNDS = 10
CONTROL_FLOW_OPS = SWITCH_OPS | MERGE_OPS | ENTER_OPS | EXIT_OPS | NEXT_ITERATION_OPS
SEND_RECV_OPS = frozenset({"_Send", "_Recv", "_HostSend", "_HostRecv"})
SESSION_HANDLE_OPS = frozenset({"GetSessionHandle", "GetSessionHandleV2", "GetSessionTensor",
                                "DeleteSessionTensor"})
PLACEHOLDER_OPS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})


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

def _post_order(g: TfGraph, key: Callable[[TfNode], object]) -> list[TfNode]:
    """TF's ``DFS`` from ``_SOURCE`` with a stable comparator: leave order."""
    nodes = g.nodes
    visited = bytearray(len(nodes))
    out: list[TfNode] = []
    stack: list[tuple[int, bool]] = [(SOURCE_ID, False)]
    while stack:
        nid, leave = stack.pop()
        if leave:
            out.append(nodes[nid])
            continue
        if visited[nid]:
            continue
        visited[nid] = 1
        stack.append((nid, True))
        nbrs = sorted((nodes[e.dst] for e in nodes[nid].out_edges.values()), key=key)
        for m in nbrs:
            if not visited[m.id]:
                stack.append((m.id, False))
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
        self._attr_keys: dict[int, tuple] = {}
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
        g, types = self.g, self.types
        keep = set()
        queue = deque()
        for n in g.all_nodes():
            if (n.id in (SOURCE_ID, SINK_ID) or n.op in CONTROL_FLOW_OPS
                    or types.is_stateful(n.op)):
                keep.add(n.id)
                queue.append(n.id)
        nodes = g.nodes
        while queue:
            n = nodes[queue.popleft()]
            for e in n.in_edges.values():
                if e.src not in keep:
                    keep.add(e.src)
                    queue.append(e.src)
        removed = [n for n in g.op_nodes() if n.id not in keep]
        for n in removed:
            g.remove_node(n.id)
        if removed:
            self.report.setdefault("dead_nodes_removed", []).extend(n.name for n in removed)
        return bool(removed)

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

    def constant_fold(self) -> bool:
        g = self.g
        nodes = g.nodes
        deps: dict[int, set[int]] = {}  # constant_control_deps
        order: list[TfNode] = []
        internal = [False]

        def leave(n: TfNode) -> None:
            if not n.is_op or not self._foldable(n):
                return
            for e in n.in_edges.values():
                if not e.is_control and e.src not in deps:
                    return
            mine: set[int] = set()
            for e in n.in_edges.values():
                if e.src not in deps:
                    if e.src != SOURCE_ID:
                        mine.add(e.src)
                else:
                    mine |= deps[e.src]
            deps[n.id] = mine
            order.append(n)
            if n.op not in CONSTANT_OPS:
                internal[0] = True

        dfs(g, None, leave, by_name=True, start=(SINK_ID,), reverse=True)
        if not internal[0]:
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
    def _attrs_key(self, n: TfNode) -> tuple:
        key = self._attr_keys.get(n.id)
        if key is None:
            key = tuple(sorted((k, v.SerializeToString(deterministic=True)) for k, v in n.attr.items()))
            self._attr_keys[n.id] = key
        return key

    def _inputs(self, n: TfNode):
        data, ctrl = [], []
        for e in n.in_edges.values():
            if e.is_control:
                ctrl.append(e.src)
            else:
                data.append((e.dst_input, e.src, e.src_output))
        data.sort()
        ins = [(s, o) for _, s, o in data]
        if self.types.is_commutative(n.op):
            ins.sort()
        ctrl.sort()
        return tuple(ins), tuple(ctrl)

    def cse(self) -> bool:
        g, types = self.g, self.types
        order = _post_order(g, key=lambda m: m.id)
        order.reverse()
        available: dict[tuple, TfNode] = {}
        changed = False
        merged = []
        for n in order:
            if not n.is_op or n.op in PLACEHOLDER_OPS:
                continue
            ins, ctrl = self._inputs(n)
            key = (n.op, tuple(types.outputs(n.nodedef)), ins, self._attrs_key(n))
            cand = available.get(key)
            if cand is None:
                available[key] = n
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
