"""TF 2.21's ``EncapsulateSubgraphsPass`` (POST_REWRITE_FOR_EXEC 50, spec section 14).

Every set of nodes sharing an ``_XlaCluster`` value becomes a library function named after
the cluster, and one call node (``name = op = <cluster>``) replaces them in a brand-new graph.
The steps, in TF's order:

1. **Split** (``SplitIntoSubgraphs``): cluster members are copied, in node-id order, into one
   subgraph per cluster (``_XlaCluster`` removed, ``_XlaAlreadyClustered`` kept). Edges are
   then walked in edge-id order: an edge inside a cluster is copied; a data edge leaving a
   cluster creates (first time per tensor) a ``_Retval`` ``<src>_<slot>_retval``; a control
   edge leaving it makes its source a *control output*; a data edge entering it creates
   (first time per tensor) an ``_Arg`` ``<src>_<slot>_arg``. ``_Arg`` whose source is computed
   only from ``GuaranteeConst`` get ``_is_guaranteed_constant``.
2. **Optimize** each subgraph like TF's ``OptimizeGraph`` (up to 10 rounds, until nothing
   changes): dead-node pruning, ``Identity`` removal, constant folding (numpy evaluation of
   the folded ops; new constants ``<node>/_<n>__cf__<m>`` on the CPU device; skipped with
   ``--tf_xla_disable_constant_folding`` and for ops with a ``DT_VARIANT`` output),
   source/sink fix-up, common-subexpression elimination, function inlining.
3. **Argument order**: ``BackwardsConstAnalysis`` on the optimized subgraph decides which
   args must be compile-time constants; args are stably permuted to *constants, normal
   args, resources* (``_XlaNumConstantArgs``, ``_XlaNumResourceArgs`` on the call node).
4. **FunctionDef** (``GraphToFunctionDef``): signature names are the ``_Arg``/``_Retval``
   names normalised (lower-case, non-alphanumerics to ``_``, leading non-letters dropped)
   and uniquified; ``ret`` values are ``node:output_arg:index``; ``control_ret`` holds the
   control outputs still present after optimisation.
5. **Output graph**: non-cluster nodes (node-id order), then the call nodes, then every edge
   not internal to one cluster (edge-id order), mapped onto call nodes and deduplicated.
6. ``_XlaHasReferenceVars`` on every node. TF writes its ``encapsulate_subgraphs_after`` dump
   just before this step: :meth:`EncapsulateResult.dump_graphdef` is that dump, while
   :attr:`EncapsulateResult.graph` is the pass's final graph (what BuildXlaOps gets).

``EncapsulateResult.decisions`` records, per cluster, every argument (source tensor, first-seen
index, final position, kind and why: the consumer chain that makes it a compile-time constant,
``DT_RESOURCE``, or neither), the results, control outputs and what the optimizer did
(identities removed, constants folded, CSE merges, dead nodes pruned).

What jitsim cannot know
-----------------------
* TF iterates its clusters in an ``absl::flat_hash_map`` whose order is seeded per process:
  the order of call nodes (their node ids) and of the functions in the library is not
  reproducible. jitsim uses the order of each cluster's first node; pass ``cluster_order``
  (e.g. :func:`call_order_from_graphdef` of TF's dump) to follow a recorded run.
* Constant folding executes TF kernels; jitsim evaluates a set of common ops with numpy
  (:data:`jitsim.passes.folding.kernels.KERNELS`). When a folding round needs another op, nothing is folded in that
  round (as TF does when evaluation fails) and the cluster's decision carries a warning.
* Edge ids come from the caller's :class:`TfGraph`; argument order depends on them (spec
  trap 32). A graph loaded from a dump numbers its edges by destination node, but TF gave
  the edges of nodes created after graph construction (session feeds/fetches, constant
  clones, IncreaseDynamism's slices) the highest ids: :func:`tfgraph_from_dump` rebuilds
  that order (on the fixtures corpus it turns 7 mismatching graphs into exact ones).
* Constant folding needs a CPU kernel for the op; TF's CPU kernel registry snapshot is used
  when jitsim ships it (``devices.find_kernel``), else a kernel is assumed.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Callable, Iterable

from jitsim.errors import GraphError
from jitsim.graph import protos
from jitsim.graph.function_def import arg_count, graph_to_function_def, merge_debug_info
from jitsim.graph.model import CONTROL
from jitsim.passes.folding.evaluator import Evaluator
from jitsim.passes.folding.tensors import EvalError, Unsupported, to_tensor_proto, total_bytes
from jitsim.passes.optypes import DT_RESOURCE, DT_VARIANT, REF_OFFSET, NodeTypes
from jitsim.passes.tfgraph import (
    CONSTANT_OPS, ENTER_OPS, EXIT_OPS, IDENTITY_OPS, MERGE_OPS, NEXT_ITERATION_OPS, SINK_ID,
    SOURCE_ID, SWITCH_OPS, TfGraph, TfNode, dfs, post_order, reverse_post_order,
)
from jitsim.registry import op_def
from jitsim.registry.custom_ops import with_custom_op_signatures

CLUSTER_ATTR = "_XlaCluster"
COMPILED_KERNEL_ATTR = "_XlaCompiledKernel"
NUM_CONSTANT_ARGS_ATTR = "_XlaNumConstantArgs"
NUM_RESOURCE_ARGS_ATTR = "_XlaNumResourceArgs"
HAS_REFERENCE_VARS_ATTR = "_XlaHasReferenceVars"
GUARANTEED_CONSTANT_ATTR = "_is_guaranteed_constant"
# The device of the private CPU function runtime the pass creates; constants made by
# constant folding are placed on it.
CPU_DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"
MAX_CONSTANT_BYTES = 10 * 1024 * 1024  # ConstantFoldingOptions default
MAX_OPTIMIZER_ROUNDS = 10
MAX_REF_CALL_DEPTH = 10

CONTROL_FLOW_OPS = SWITCH_OPS | MERGE_OPS | ENTER_OPS | EXIT_OPS | NEXT_ITERATION_OPS
SEND_RECV_OPS = frozenset({"_Send", "_Recv", "_HostSend", "_HostRecv"})
SESSION_HANDLE_OPS = frozenset({"GetSessionHandle", "GetSessionHandleV2", "GetSessionTensor",
                                "DeleteSessionTensor"})
PLACEHOLDER_OPS = frozenset({"Placeholder", "PlaceholderV2", "PlaceholderWithDefault"})
CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
TPU_EXECUTE_OPS = frozenset({"TPUExecute", "TPUExecuteAndUpdateVariables"})


# -- results ------------------------------------------------------------------------------


@dataclass
class ArgDecision:
    """One function argument: where it comes from and why it sits where it does."""

    index: int  # order of first appearance (edge-id order)
    position: int  # final position in the signature
    name: str  # signature name
    source: str  # "node:slot" in the input graph
    dtype: int
    kind: str  # "constant" | "normal" | "resource"
    reason: str
    guaranteed_constant: bool = False

    def to_json(self) -> dict:
        return {"index": self.index, "position": self.position, "name": self.name,
                "source": self.source, "dtype": protos.dtype_name(self.dtype), "kind": self.kind,
                "reason": self.reason, "guaranteed_constant": self.guaranteed_constant}


@dataclass
class ResultDecision:
    index: int
    name: str
    source: str
    dtype: int

    def to_json(self) -> dict:
        return {"index": self.index, "name": self.name, "source": self.source,
                "dtype": protos.dtype_name(self.dtype)}


@dataclass
class ClusterDecision:
    """Evidence for one encapsulated cluster."""

    name: str
    device: str
    members: list[str]
    args: list[ArgDecision] = field(default_factory=list)
    results: list[ResultDecision] = field(default_factory=list)
    control_outputs: list[str] = field(default_factory=list)
    num_constant_args: int = 0
    num_resource_args: int = 0
    optimizer: dict = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        return {"name": self.name, "device": self.device, "members": list(self.members),
                "args": [a.to_json() for a in self.args],
                "results": [r.to_json() for r in self.results],
                "control_outputs": list(self.control_outputs),
                "num_constant_args": self.num_constant_args,
                "num_resource_args": self.num_resource_args,
                "optimizer": self.optimizer, "warnings": list(self.warnings)}


@dataclass
class EncapsulateResult:
    graph: TfGraph  # the new graph, in its final state (with _XlaHasReferenceVars)
    functions: list  # FunctionDefs added to graph.library, in the order jitsim built them
    decisions: dict  # cluster name -> ClusterDecision
    _dump_patches: list = field(default_factory=list, repr=False)

    def dump_graphdef(self):
        """The GraphDef TF dumps as ``encapsulate_subgraphs_after``: the new graph before
        ``_XlaHasReferenceVars`` was added."""
        gd = self.graph.to_graphdef()
        if self._dump_patches:
            previous = dict(self._dump_patches)
            for nd in gd.node:
                if nd.name in previous:
                    old = previous[nd.name]
                    if old is None:
                        del nd.attr[HAS_REFERENCE_VARS_ATTR]
                    else:
                        nd.attr[HAS_REFERENCE_VARS_ATTR].CopyFrom(old)
        return gd


def call_order_from_graphdef(graphdef) -> list[str]:
    """Cluster names in the order TF created their call nodes, read from an
    ``encapsulate_subgraphs_after`` (or later) dump: pass it as ``cluster_order``."""
    return [n.name for n in graphdef.node if COMPILED_KERNEL_ATTR in n.attr and n.op == n.name]


# -- node helpers -------------------------------------------------------------------------


def _is_ref(t: int) -> bool:
    return t > REF_OFFSET


def _copy_nodedef(nd):
    out = protos.NodeDef()
    out.CopyFrom(nd)
    del out.input[:]
    return out


def _add_node(g: TfGraph, nd) -> TfNode:
    """``Graph::AddNode``: TF allows duplicate names in a Graph, so no check here."""
    node = TfNode(len(g.nodes), nd.name, nd.op, nd)
    g.nodes.append(node)
    g.by_name.setdefault(nd.name, node.id)
    return node


def _fixup_source_and_sink(g: TfGraph) -> bool:
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


def _input_arg_name(nd, slot: int, types: NodeTypes) -> str:
    """The OpDef name of flat input ``slot`` (for evidence messages)."""
    od = op_def(nd.op)
    if od is None:
        return str(slot)
    pos = 0
    for arg in od.input_arg:
        n = arg_count(nd, od, arg)
        if pos <= slot < pos + n:
            return arg.name if n == 1 else f"{arg.name}[{slot - pos}]"
        pos += n
    return str(slot)


# -- the subgraph of one cluster ------------------------------------------------------------


class _Subgraph:
    def __init__(self, name: str, library, versions):
        self.name = name
        self.graph = TfGraph(library=library, versions=versions)
        self.graph.name_counter = 0  # Graph::NewName
        self.device = ""
        self.members: list[str] = []
        self.args_by_src: dict[tuple[int, int], int] = {}
        self.args_by_dst: dict[tuple[int, int], int] = {}
        self.args: list[TfNode] = []
        self.arg_sources: list[tuple[str, int]] = []
        self.results: dict[tuple[int, int], int] = {}
        self.result_nodes: list[TfNode] = []
        self.result_sources: list[tuple[str, int]] = []
        self.control_output_names: set[str] = set()
        self.call_nodedef = None
        self.decision: ClusterDecision | None = None


def _new_name(g: TfGraph, prefix: str) -> str:
    out = f"{prefix}/_{g.name_counter}"
    g.name_counter += 1
    return out


# -- the optimizer (GraphOptimizer with CSE, constant folding and inlining on) --------------


class _Optimizer:
    def __init__(self, g: TfGraph, types: NodeTypes, flags, report: dict, warnings: list[str]):
        self.g = g
        self.types = types
        self.fold = not getattr(flags, "disable_constant_folding", False)
        self.report = report
        self.warnings = warnings
        self._attr_keys: dict[int, tuple] = {}

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
            if _fixup_source_and_sink(g):
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
            if src.nodedef is not None and _is_ref(self.types.output_type(src.nodedef, e.src_output)):
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
            c = _add_node(g, nd)
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
            if any(_is_ref(t) for t in types.inputs(cand.nodedef)) or any(
                    _is_ref(t) for t in types.inputs(n.nodedef)):
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
        from jitsim.passes.devices import find_kernel
    except ImportError:  # pragma: no cover - registry snapshot not installed
        return True
    try:
        return find_kernel(nd, "CPU") is not None
    except Exception:  # pragma: no cover - unreadable snapshot
        return True


# -- _XlaHasReferenceVars ---------------------------------------------------------------------


class _RefVars:
    """``GetNodesRelatedToRefVariables``: nodes forward- or backward-connected to a node with a
    ref-typed output or a callee (to depth 10) that has one; unknown callees count as yes."""

    def __init__(self, library, types: NodeTypes, bodies: dict[str, TfGraph] | None = None):
        self.library = library
        self.types = types
        self.fns = types.fns
        self.bodies = bodies or {}  # function name -> its graph, when already at hand
        self._callee_cache: dict[tuple[str, bool, int], bool] = {}

    def related(self, g: TfGraph) -> set[int]:
        result: set[int] = set()
        self._direction(g, True, 0, result)
        self._direction(g, False, 0, result)
        return result

    def _targets(self, n: TfNode) -> list[str]:
        if n.op in self.fns:
            return [n.op]
        out = []
        for _, av in sorted(n.attr.items()):
            kind = av.WhichOneof("value")
            if kind == "func":
                out.append(av.func.name)
            elif kind == "list":
                out.extend(f.name for f in av.list.func)
        return out

    def _callee_has_refs(self, targets: list[str], forward: bool, depth: int) -> bool:
        if depth == MAX_REF_CALL_DEPTH and targets:
            return True
        for name in targets:
            od = op_def(name)
            if od is not None:
                if any(a.is_ref for a in od.output_arg):
                    return True
                continue
            if name not in self.fns:
                return True
            key = (name, forward, depth)
            if key not in self._callee_cache:
                self._callee_cache[key] = False
                from jitsim.graph.functions import function_to_graphdef
                from jitsim.graph.model import Graph

                try:
                    body = self.bodies.get(name) or TfGraph.from_graph(
                        Graph(function_to_graphdef(self.library, name), validate=False))
                except GraphError:
                    self._callee_cache[key] = True
                else:
                    found: set[int] = set()
                    self._direction(body, forward, depth + 1, found)
                    self._callee_cache[key] = bool(found)
            if self._callee_cache[key]:
                return True
        return False

    def _direction(self, g: TfGraph, forward: bool, depth: int, result: set[int]) -> None:
        types = self.types
        cache: dict[int, bool] = {}
        # TF's order (the fixpoint does not depend on it, the iteration count does)
        nodes = [n for n in (reverse_post_order(g, by_name=True) if forward else post_order(g, by_name=True))
                 if n.is_op]
        while True:
            before = len(result)
            for n in nodes:
                hit = False
                edges = n.in_edges.values() if forward else n.out_edges.values()
                for e in edges:
                    if (e.src if forward else e.dst) in result:
                        hit = True
                        break
                if hit:
                    result.add(n.id)
                    continue
                if forward and any(_is_ref(t) for t in types.outputs(n.nodedef)):
                    result.add(n.id)
                    continue
                if n.id not in cache:
                    cache[n.id] = self._callee_has_refs(self._targets(n), forward, depth)
                if cache[n.id]:
                    result.add(n.id)
            if len(result) == before:
                return


def nodes_related_to_ref_variables(g: TfGraph) -> set[int]:
    """Ids of the nodes of ``g`` TF's ``GetNodesRelatedToRefVariables`` returns (the ones that
    get ``_XlaHasReferenceVars=true``)."""
    return _RefVars(g.library, NodeTypes(g.library)).related(g)


# -- const-argument evidence -------------------------------------------------------------------


def _const_reason(sg: TfGraph, arg: TfNode, must: bytearray, analysis, types: NodeTypes) -> str:
    """A consumer chain showing why ``arg`` must be a compile-time constant."""
    from jitsim.passes.const_analysis import _traversable

    nodes = sg.nodes
    seen = {arg.id}
    queue = deque([(arg.id, [])])
    while queue:
        nid, path = queue.popleft()
        for e in sorted(nodes[nid].out_edges.values(), key=lambda e: e.id):
            if e.is_control:
                continue
            c = nodes[e.dst]
            if not c.is_op or c.nodedef is None:
                continue
            try:
                idxs = analysis.const_input_indices(c)
            except Exception:  # pragma: no cover - analysis of odd nodes
                idxs = []
            if e.dst_input in idxs:
                via = f"via {' -> '.join(path)}: " if path else ""
                return (f"{via}input {e.dst_input} ({_input_arg_name(c.nodedef, e.dst_input, types)}) "
                        f"of {c.op} '{c.name}' must be a compile-time constant")
            if (must[c.id] or _traversable(c.op)) and c.id not in seen:
                seen.add(c.id)
                queue.append((c.id, path + [f"{c.op} '{c.name}'"]))
    return "needed as a compile-time constant by the cluster (BackwardsConstAnalysis)"


# -- the pass ------------------------------------------------------------------------------------


@with_custom_op_signatures
def encapsulate_subgraphs(g: TfGraph, flags=None, *, cluster_order: Iterable[str] | None = None) -> EncapsulateResult:
    """Run TF's ``EncapsulateSubgraphsPass`` on ``g`` (not modified) and return the new graph.

    ``flags``: the run's :class:`~jitsim.passes.flags.XlaFlags` (only
    ``disable_constant_folding`` matters). ``cluster_order``: the order in which TF iterated
    its clusters (see the module docstring); clusters not named come after, in jitsim's order.
    """
    from jitsim.passes.const_analysis import ConstAnalysis

    if any(n.op in TPU_EXECUTE_OPS for n in g.op_nodes()):
        return EncapsulateResult(graph=g, functions=[], decisions={})

    library = protos.FunctionDefLibrary()
    library.CopyFrom(g.library)
    types = NodeTypes(library)

    # -- SplitIntoSubgraphs
    cluster_of: list[str] = [""] * g.num_node_ids
    subgraphs: dict[str, _Subgraph] = {}
    images: dict[int, TfNode] = {}
    for n in g.op_nodes():
        if CLUSTER_ATTR not in n.attr:
            continue
        av = n.attr[CLUSTER_ATTR]
        if av.WhichOneof("value") != "s":
            raise GraphError(f"attr {CLUSTER_ATTR} of node {n.name!r} is not a string")
        name = av.s.decode()
        if not name:
            continue
        cluster_of[n.id] = name
        sub = subgraphs.get(name)
        if sub is None:
            sub = subgraphs[name] = _Subgraph(name, library, g.versions)
        if not sub.device:
            sub.device = n.device
        nd = _copy_nodedef(n.nodedef)
        del nd.attr[CLUSTER_ATTR]
        images[n.id] = _add_node(sub.graph, nd)
        sub.members.append(n.name)

    src_arg_pairs: list[tuple[int, TfNode]] = []
    nodes = g.nodes
    for e in g.edges():
        src_c, dst_c = cluster_of[e.src], cluster_of[e.dst]
        if src_c and src_c == dst_c:
            sg = subgraphs[src_c].graph
            if e.is_control:
                sg.add_control_edge(images[e.src].id, images[e.dst].id)
            else:
                sg.add_edge(images[e.src].id, e.src_output, images[e.dst].id, e.dst_input)
            continue
        if src_c:
            sub = subgraphs[src_c]
            if e.is_control:
                sub.control_output_names.add(images[e.src].name)
            else:
                src = nodes[e.src]
                dtype = types.output_type(src.nodedef, e.src_output)
                if _is_ref(dtype):
                    raise GraphError("Ref Tensors (e.g., Variables) are not supported as results: "
                                     f"tensor {src.name}:{e.src_output}")
                key = (e.src, e.src_output)
                if key not in sub.results:
                    index = len(sub.results)
                    sub.results[key] = index
                    rd = protos.NodeDef(name=f"{src.name}_{e.src_output}_retval", op="_Retval")
                    rd.attr["T"].type = dtype
                    rd.attr["index"].i = index
                    merge_debug_info(src.nodedef, rd)
                    ret = _add_node(sub.graph, rd)
                    sub.graph.add_edge(images[e.src].id, e.src_output, ret.id, 0)
                    sub.result_nodes.append(ret)
                    sub.result_sources.append((src.name, e.src_output))
        if dst_c and not e.is_control:
            sub = subgraphs[dst_c]
            src, dst = nodes[e.src], nodes[e.dst]
            dtype = types.input_type(dst.nodedef, e.dst_input)
            if _is_ref(dtype):
                raise GraphError("Ref Tensors (e.g., Variables) are not supported as args: "
                                 f"tensor {src.name}:{e.src_output}")
            key = (e.src, e.src_output)
            index = sub.args_by_src.get(key)
            if index is None:
                index = sub.args_by_src[key] = len(sub.args_by_src)
                ad = protos.NodeDef(name=f"{src.name}_{e.src_output}_arg", op="_Arg")
                ad.attr["T"].type = dtype
                ad.attr["index"].i = index
                if src.nodedef is not None:
                    merge_debug_info(src.nodedef, ad)
                arg = _add_node(sub.graph, ad)
                src_arg_pairs.append((e.src, arg))
                sub.args.append(arg)
                sub.arg_sources.append((src.name, e.src_output))
            sub.args_by_dst[(e.dst, e.dst_input)] = index
            sub.graph.add_edge(sub.args[index].id, 0, images[e.dst].id, e.dst_input)

    _mark_guaranteed_constants(g, src_arg_pairs)
    for sub in subgraphs.values():
        _fixup_source_and_sink(sub.graph)

    # -- the order TF iterates its clusters in (see the module docstring)
    order = []
    for name in cluster_order or ():
        if name in subgraphs and name not in order:
            order.append(name)
    order += [name for name in subgraphs if name not in order]

    # -- BuildFunctionDefs
    analysis = ConstAnalysis(library)
    functions = []
    decisions: dict[str, ClusterDecision] = {}
    for name in order:
        sub = subgraphs[name]
        fdef = _build_function(sub, types, flags, analysis)
        library.function.add().CopyFrom(fdef)
        functions.append(fdef)
        decisions[name] = sub.decision

    # -- BuildOutputGraph
    out = TfGraph(library=library, versions=g.versions)
    image_out: dict[int, int] = {SOURCE_ID: SOURCE_ID, SINK_ID: SINK_ID}
    for n in g.op_nodes():
        if cluster_of[n.id]:
            continue
        image_out[n.id] = _add_node(out, _copy_nodedef(n.nodedef)).id
    call_ids: dict[str, int] = {}
    for name in order:
        call_ids[name] = _add_node(out, subgraphs[name].call_nodedef).id
    added: set[tuple[int, int, int, int]] = set()
    for e in g.edges():
        src_c, dst_c = cluster_of[e.src], cluster_of[e.dst]
        if src_c and src_c == dst_c:
            continue
        s = call_ids[src_c] if src_c else image_out[e.src]
        d = call_ids[dst_c] if dst_c else image_out[e.dst]
        if e.is_control:
            key = (s, CONTROL, d, CONTROL)
            if key not in added:
                added.add(key)
                out.add_control_edge(s, d)
            continue
        so = subgraphs[src_c].results[(e.src, e.src_output)] if src_c else e.src_output
        di = subgraphs[dst_c].args_by_dst[(e.dst, e.dst_input)] if dst_c else e.dst_input
        key = (s, so, d, di)
        if key not in added:
            added.add(key)
            out.add_edge(s, so, d, di)

    _sync_inputs(out)

    # -- _XlaHasReferenceVars on every node (after TF's encapsulate_subgraphs_after dump)
    # (the library now has the cluster functions; their bodies are the optimized subgraphs)
    related = _RefVars(library, NodeTypes(library), {name: sub.graph for name, sub in subgraphs.items()}).related(out)
    patches = []
    for n in out.op_nodes():
        old = None
        if HAS_REFERENCE_VARS_ATTR in n.attr:
            old = protos.AttrValue()
            old.CopyFrom(n.attr[HAS_REFERENCE_VARS_ATTR])
        patches.append((n.name, old))
        n.attr[HAS_REFERENCE_VARS_ATTR].b = n.id in related
    return EncapsulateResult(graph=out, functions=functions, decisions=decisions, _dump_patches=patches)


def _sync_inputs(g: TfGraph) -> None:
    """Rewrite every NodeDef's ``input`` list from the edges (as ``ToGraphDef`` writes it), so
    that readers of ``nodedef.input`` see the new graph."""
    nodes = g.nodes
    for n in g.op_nodes():
        data, ctrl = {}, []
        for e in n.in_edges.values():
            src = nodes[e.src]
            if e.is_control:
                if src.is_op:
                    ctrl.append(src.name)
            else:
                data[e.dst_input] = src.name if e.src_output == 0 else f"{src.name}:{e.src_output}"
        del n.nodedef.input[:]
        n.nodedef.input.extend(data[i] for i in sorted(data))
        n.nodedef.input.extend("^" + c for c in sorted(ctrl))


def _mark_guaranteed_constants(g: TfGraph, src_arg_pairs: list[tuple[int, TfNode]]) -> None:
    if not src_arg_pairs or not any(n.op == "GuaranteeConst" for n in g.op_nodes()):
        return  # nothing can be marked without a GuaranteeConst node
    nodes = g.nodes
    marked: set[int] = set()

    def leave(n: TfNode) -> None:
        if n.op == "GuaranteeConst":
            marked.add(n.id)
            return
        data = [e for e in n.in_edges.values() if not e.is_control]
        if data and all(e.src in marked for e in data):
            marked.add(n.id)

    dfs(g, None, leave, start=[s for s, _ in src_arg_pairs], reverse=True)
    for src, arg in src_arg_pairs:
        if src in marked and nodes[src] is not None:
            arg.attr[GUARANTEED_CONSTANT_ATTR].b = True


def _build_function(sub: _Subgraph, types: NodeTypes, flags, analysis):
    sg = sub.graph
    call = protos.NodeDef(name=sub.name, op=sub.name, device=sub.device)
    decision = ClusterDecision(name=sub.name, device=sub.device, members=list(sub.members))
    sub.decision = decision

    # the rewrite callback: optimize, const analysis, permutation
    _Optimizer(sg, types, flags, decision.optimizer, decision.warnings).run()
    num_args = len(sub.args)
    const_args = [False] * num_args
    must = analysis.run(sg, const_args)
    arg_types = [0] * num_args
    for n in sg.op_nodes():
        if n.op == "_Arg":
            index = n.attr["index"].i
            if not 0 <= index < num_args:
                raise GraphError(f"cluster {sub.name}: invalid argument number {index}")
            arg_types[index] = n.attr["T"].type
    num_consts = sum(const_args)
    num_resources = sum(1 for t in arg_types if t == DT_RESOURCE)
    num_normal = num_args - num_resources - num_consts
    if num_normal < 0:
        raise GraphError(f"cluster {sub.name}: num_nonconsts should be >= 0, was {num_normal}")
    perm = [0] * num_args
    const_pos, arg_pos, res_pos = 0, num_consts, num_consts + num_normal
    kinds = []
    for i in range(num_args):
        if const_args[i]:
            if arg_types[i] == DT_RESOURCE:
                raise GraphError(f"cluster {sub.name}: Resource arguments cannot be constant "
                                 f"(argument {i})")
            perm[i], const_pos, kind = const_pos, const_pos + 1, "constant"
        elif arg_types[i] == DT_RESOURCE:
            perm[i], res_pos, kind = res_pos, res_pos + 1, "resource"
        else:
            perm[i], arg_pos, kind = arg_pos, arg_pos + 1, "normal"
        kinds.append(kind)
    for n in sg.op_nodes():
        if n.op == "_Arg":
            n.attr["index"].i = perm[n.attr["index"].i]
    call.attr[COMPILED_KERNEL_ATTR].b = True
    call.attr[NUM_CONSTANT_ARGS_ATTR].i = num_consts
    call.attr[NUM_RESOURCE_ARGS_ATTR].i = num_resources
    for key in sub.args_by_src:
        sub.args_by_src[key] = perm[sub.args_by_src[key]]
    for key in sub.args_by_dst:
        sub.args_by_dst[key] = perm[sub.args_by_dst[key]]
    sub.call_nodedef = call
    decision.num_constant_args = num_consts
    decision.num_resource_args = num_resources

    fdef, names = graph_to_function_def(sg, sub.name, sub.control_output_names, types)

    # evidence
    arg_names = {n.attr["index"].i: names.get(n.name, n.name) for n in sg.op_nodes() if n.op == "_Arg"}
    for i, arg in enumerate(sub.args):
        src, slot = sub.arg_sources[i]
        kind = kinds[i]
        if kind == "constant":
            reason = (_const_reason(sg, arg, must, analysis, types) if arg.id < len(sg.nodes)
                      and sg.nodes[arg.id] is not None else "compile-time constant")
        elif kind == "resource":
            reason = "DT_RESOURCE argument: resource args go last"
        else:
            reason = "not needed at compile time"
        decision.args.append(ArgDecision(
            index=i, position=perm[i], name=arg_names.get(perm[i], arg.name), source=f"{src}:{slot}",
            dtype=arg_types[i], kind=kind, reason=reason,
            guaranteed_constant=GUARANTEED_CONSTANT_ATTR in arg.attr))
    decision.args.sort(key=lambda a: a.position)
    for i, ret in enumerate(sub.result_nodes):
        src, slot = sub.result_sources[i]
        decision.results.append(ResultDecision(index=i, name=names.get(ret.name, ret.name),
                                               source=f"{src}:{slot}", dtype=ret.attr["T"].type))
    decision.control_outputs = sorted(fdef.control_ret.keys())
    return fdef
