"""TensorFlow 2.21's ``MarkForCompilationPass``: candidates, contraction, cluster names.

Given the graph TF's pass sees (a :class:`TfGraph` with TF's node and edge ids), this
reproduces which nodes get ``_XlaCluster`` and with which name, and records why
(:mod:`jitsim.explain.reasons`): one :class:`NodeDecision` per node and one
:class:`MergeRefusal` per refused contraction attempt.

Steps (tf-passes §7): candidate filters in node-id order; the cycle-detection graph
with loop frames collapsed; deadness predicates; unsafe resource pairs; one cluster per
candidate; edge contraction over GraphCycles' post order in three phases plus an
idempotence check; ``Fill`` declustering; names from a process-wide counter in order of
each kept cluster's smallest node id.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jitsim.codes import Code
from jitsim.errors import GraphError, JitsimError
from jitsim.registry import optypes
from jitsim.analyses.compilability import CompilabilityChecker, OperationFilter
from jitsim.analyses.const_analysis import ConstAnalysis
from jitsim.analyses.devices import Registration, pick_device_for_xla, registrations, should_compile
from jitsim.graph.device_names import device_type
from jitsim.flags import OFF, DEFAULT, XlaFlags, allow_where_op, ops_allowlist
from jitsim.options import Options, SessionConfig
from jitsim.analyses.graphcycles import GraphCycles
from jitsim.beside import Started
from jitsim.records import MergeRefusal, NodeDecision
from jitsim.analyses.resource_safety import is_stack_or_tensor_array_op, may_call_function, unsafe_resource_pairs
from jitsim.opsets import CONSTANT_OPS, ENTER_OPS, EXIT_OPS, IDENTITY_OPS, IF_OPS, NEXT_ITERATION_OPS, SHAPE_SIZE_RANK_OPS, SWITCH_OPS, WHILE_OPS
from jitsim.graph.tfgraph import SINK_ID, TfGraph, TfNode, control_flow_info, topological_order_kept
from jitsim.registry import op_def
from jitsim.graph.custom_ops import with_custom_op_signatures
from jitsim.defs import ALREADY_CLUSTERED_ATTR, CLUSTER_ATTR, COMPILE_ATTR, INTERNAL_SCOPE_ATTR, MUST_COMPILE_ATTR, SCOPE_ATTR
from jitsim.opsets import TPU_EXECUTE_OPS

# ops CompilabilityChecker.check_node refuses at the top level before reading any attr
_NEVER_AT_TOP_LEVEL = frozenset({"_SOURCE", "_SINK", "_Arg", "_Retval"})
# the ops IsScalarIntegerResourceOperation looks for
SCALAR_INTEGER_UPDATE_OPS = frozenset({"AssignAddVariableOp", "AssignSubVariableOp"})
# a graph without control flow ops skips the deadness analysis (analyses.deadness.all_alive);
# False runs it on every graph (the reference the tests compare with)
USE_ALL_ALIVE = True


def effective_size(ops) -> int:
    """How many of ``ops`` count toward ``--tf_xla_min_cluster_size``: TF's effective cluster
    size (``MarkForCompilationPassImpl::Initialize`` starts each candidate's cluster at 0 for a
    constant or an identity, else 1, and contraction adds the sizes up). The one copy of the rule:
    the pass, :meth:`MarkResult.effective_size`, ``jitsim cluster``'s report and the invariant
    checks (:mod:`jitsim.testing.invariants`) all count with it."""
    return sum(1 for op in ops if op not in IDENTITY_OPS and op not in CONSTANT_OPS)


# -- options and process-wide state ---------------------------------------------------------


@dataclass
class ProcessState:
    """State TF keeps per process: clustering fuel and the cluster-name counters."""

    fuel: int | None = None  # initialised from the flag on first use
    counters: dict[int, int] = field(default_factory=dict)  # fingerprint -> next number
    cpu_global_jit_at_startup: bool | None = None  # frozen on first registry query

    @classmethod
    def starting(cls, options: Options | None = None) -> ProcessState:
        """A fresh TF process for a simulation with ``options``: its cluster-name counter starts
        at ``options.cluster_number_start`` (the one place that option is applied)."""
        state = cls()
        if options is not None and options.cluster_number_start:
            state.counters[0] = options.cluster_number_start
        return state

    def next_cluster_number(self, fingerprint: int = 0) -> int:
        n = self.counters.get(fingerprint, 0)
        self.counters[fingerprint] = n + 1
        return n


def global_jit_level(flags: XlaFlags, session: SessionConfig, g: TfGraph) -> int:
    """TF's ``GetGlobalJitLevelForGraph`` (tf-passes §2.2)."""
    base = OFF if session.global_jit_level == DEFAULT else session.global_jit_level
    single_gpu = flags.auto_jit_single_gpu or base
    general = flags.auto_jit_general or base
    if single_gpu == general:
        return general
    gpus = {n.device for n in g.op_nodes() if n.device and device_type(n.device) == "GPU"}
    return single_gpu if len(gpus) == 1 else general


# the shared empty resource ids and sets of clusters without resource ops (see Cluster.merge)
_NO_IDS: tuple = ()
_NONE: frozenset = frozenset()


class Cluster:
    """TF's ``Cluster`` of ``MarkForCompilationPassImpl``: one per candidate, contracted together.

    ``fwd``: the cluster that absorbed this one (None while it is live); ``dkey``: a small int
    standing for ``(devices, resource_op_device)`` (the pass keeps it current)."""

    __slots__ = ("cycles_id", "size", "effective_size", "has_functional_control_flow", "devices",
                 "resource_op_device", "resource_ids", "resource_set", "forbidden", "deadness", "explicit",
                 "scope", "first_node", "fwd", "dkey")

    def merge(self, other: "Cluster") -> None:
        self.size += other.size
        self.effective_size += other.effective_size
        if other.has_functional_control_flow:
            self.has_functional_control_flow = True
        if other.devices != self.devices:
            # a new list: build_clusters shares one list among the clusters of a device
            self.devices = sorted(set(self.devices) | set(other.devices))
        if self.resource_op_device is None:
            self.resource_op_device = other.resource_op_device
        if other.explicit:
            self.explicit = True
        if self.scope is None:
            self.scope = other.scope
        # resource ids and sets: an empty one may be a shared immutable value (build_clusters),
        # so it is replaced, never grown in place: below, the longer/larger side is always a
        # non-empty list/set of this cluster's own
        if other.resource_ids:
            # self's ids then other's (TF appends); moved into the longer list, not copied
            if len(self.resource_ids) < len(other.resource_ids):
                other.resource_ids[:0] = self.resource_ids
                self.resource_ids = other.resource_ids
            else:
                self.resource_ids.extend(other.resource_ids)
            other.resource_ids = _NO_IDS
        # sets: merge the smaller into the larger (same contents, linear total cost)
        if other.resource_set:
            if len(self.resource_set) < len(other.resource_set):
                self.resource_set, other.resource_set = other.resource_set, self.resource_set
            self.resource_set |= other.resource_set
        if other.forbidden:
            if len(self.forbidden) < len(other.forbidden):
                self.forbidden, other.forbidden = other.forbidden, self.forbidden
            self.forbidden |= other.forbidden


@dataclass
class MarkResult:
    graph: TfGraph
    ran: bool  # False when the pass exited early (no candidates, already clustered...)
    jit_level: int
    clusters: dict[str, list[str]] = field(default_factory=dict)  # name -> members (id order)
    decisions: dict[str, NodeDecision] = field(default_factory=dict)
    refusals: list[MergeRefusal] = field(default_factory=list)
    candidates: list[str] = field(default_factory=list)
    graph_decision: NodeDecision | None = None
    # candidate -> representative of the cluster contraction left it in (before the
    # min-size/policy/Fill decisions): lets refused merges be mapped to final clusters
    groups: dict[str, str] = field(default_factory=dict)
    # function -> why TF could not instantiate it, for the functions the compilability checks
    # tried to instantiate (their calls are rejected with FUNCTION_NOT_FOUND)
    body_errors: dict[str, str] = field(default_factory=dict)

    def cluster_of(self, node: str) -> str | None:
        n = self.graph.nodes[self.graph.by_name[node]]
        return n.attr[CLUSTER_ATTR].s.decode() if CLUSTER_ATTR in n.attr else None

    def labels(self) -> dict[str, str | None]:
        return {n.name: (n.attr[CLUSTER_ATTR].s.decode() if CLUSTER_ATTR in n.attr else None)
                for n in self.graph.op_nodes()}

    def effective_size(self, cluster: str) -> int:
        """The :func:`effective_size` of the nodes the pass put in ``cluster`` (its final members:
        a ``Fill`` declustered after contraction no longer counts, unlike the decisions'
        ``effective_size`` evidence, which is the contracted cluster's as TF compared it)."""
        g = self.graph
        return effective_size(g.nodes[g.by_name[m]].op for m in self.clusters[cluster])


# -- the pass ----------------------------------------------------------------------------------


def cycle_description(cycles: GraphCycles, g: TfGraph, src: int, dst: int) -> str:
    """TF's ``DescribeCycle`` (xla_cluster_util.cc): why edge ``src -> dst`` would close a cycle
    of the cycle graph, as the path ``dst ~> src`` already there, one node a line
    (``+-> dst``, ``|   ...``, ``+-- src``); "" when no such path is found."""
    path = cycles.find_path(dst, src, g.num_node_ids + 1)
    if not path:
        return ""

    def name(v: int) -> str:
        n = g.nodes[v] if 0 <= v < g.num_node_ids else None
        return n.name if n is not None else "(null)"
    lines = [f"Edge from {name(src)} to {name(dst)} would create a cycle."]
    for v in path:
        art = "+-> " if v == dst else ("|   " if v != src else "+-- ")
        lines.append(art + name(v))
    return "\n".join(lines) + "\n"


class MarkForCompilation:
    def __init__(self, g: TfGraph, options: Options, state: ProcessState | None = None):
        self.g = g
        # what-if knobs (not TF flags): ops treated as uncompilable / as compilable
        self.exclude_ops = frozenset(options.exclude_ops)
        self.force_compilable = frozenset(options.force_compilable)
        self.flags = flags = options.flags
        self.session = options.session
        self.state = state or ProcessState.starting(options)
        self.explain_cycles = options.explain_cycles
        self.fns = {f.signature.name: f for f in g.library.function}
        if self.state.cpu_global_jit_at_startup is None:
            self.state.cpu_global_jit_at_startup = flags.cpu_global_jit
        if self.state.fuel is None:
            self.state.fuel = flags.clustering_fuel
        self.regs = registrations(self.state.cpu_global_jit_at_startup, flags.enable_xla_devices)
        self.level = global_jit_level(flags, self.session, g)
        self.result = MarkResult(graph=g, ran=False, jit_level=self.level)
        self.device_ids: dict[str, int] = {}
        self.device_names: list[str] = []
        self._should_compile_cache: dict[int, bool] = {}
        self._in_types: dict[int, list[int]] = {}
        self._out_types: dict[int, list[int]] = {}
        # node id -> (jit device, CompilabilityChecker.node_key): equal keys, equal dtypes
        self._node_keys: dict[int, tuple] = {}
        self._in_by_key: dict[tuple, list[int]] = {}
        self._out_by_key: dict[tuple, list[int]] = {}
        self._compat_cache: dict[tuple, bool] = {}

    # -- helpers -------------------------------------------------------------------------------
    def decide(self, n: TfNode, code: str, detail: str = "", **evidence) -> None:
        self.result.decisions[n.name] = NodeDecision(code, detail, evidence)

    def device_id(self, name: str) -> int:
        i = self.device_ids.get(name)
        if i is None:
            i = self.device_ids[name] = len(self.device_names)
            self.device_names.append(name)
        return i

    def _bool_attr(self, n: TfNode, key: str) -> bool | None:
        """TF's ``GetNodeOrFuncAttr``: the node's bool attr, else the called function's."""
        attrs = n.nodedef.attr
        if key in attrs:
            av = attrs[key]
            if av.WhichOneof("value") == "b":
                return av.b
        f = self.fns.get(n.op)
        if f is not None and key in f.attr and f.attr[key].WhichOneof("value") == "b":
            return f.attr[key].b
        return None

    def _bool_attr_any(self, n: TfNode, key: str) -> bool:
        """True if the node's bool attr or its called function's is true."""
        attrs = n.nodedef.attr
        if key in attrs:
            av = attrs[key]
            if av.WhichOneof("value") == "b" and av.b:
                return True
        f = self.fns.get(n.op)
        return bool(f is not None and key in f.attr and f.attr[key].WhichOneof("value") == "b" and f.attr[key].b)

    def explicit(self, n: TfNode) -> bool:
        """Compilation explicitly requested: _XlaCompile, or _XlaMustCompile when jit is on."""
        if not self.may_be_explicit(n):
            return False
        if self._bool_attr_any(n, COMPILE_ATTR):
            return True
        return self.level != OFF and self._bool_attr_any(n, MUST_COMPILE_ATTR)

    def may_be_explicit(self, n: TfNode) -> bool:
        """Whether ``n`` or the function it calls can hold the attrs :meth:`explicit` (and
        ``_XlaCompile``'s check) read: False for most nodes, answered without reading them."""
        attrs = n.nodedef.attr
        return n.op in self.fns or COMPILE_ATTR in attrs or MUST_COMPILE_ATTR in attrs

    def is_stateful(self, n: TfNode) -> bool:
        f = self.fns.get(n.op)
        if f is not None:
            return f.signature.is_stateful

        od = op_def(n.op)
        return bool(od and od.is_stateful)

    def identity_driving_consts_in_loop(self, n: TfNode) -> bool:
        if n.op not in IDENTITY_OPS:
            return False
        nodes = self.g.nodes
        sw = next((e for e in n.in_edges.values() if nodes[e.src].op in SWITCH_OPS and e.src_output == 1), None)
        if sw is None:
            return False
        pred = self.g.input_edge(sw.src, 1)
        if pred is None or nodes[pred.src].op != "LoopCond":
            return False
        return any(e.is_control and nodes[e.dst].op in CONSTANT_OPS for e in n.out_edges.values())

    # -- candidate selection --------------------------------------------------------------------
    def find_candidates(self) -> list[TfNode]:
        g = self.g
        allow = ops_allowlist(self.flags)
        allow_where = allow_where_op(self.flags)
        const_nodes = ConstAnalysis(g.library).run(g)
        checkers: dict[str, CompilabilityChecker] = {}
        cands: list[TfNode] = []
        state = self.state
        exclude_ops = self.exclude_ops
        node_keys = self._node_keys
        signatures: dict[tuple, tuple] = {}
        # per distinct device string: its device type; per (device type, explicit): the
        # registration and whether the policy compiles (both functions of those alone)
        dev_types: dict[str, str | None] = {}
        policy: dict[tuple[str | None, bool], tuple[Registration | None, bool]] = {}
        # the candidates whose compilation is explicitly requested (build_clusters reads it)
        explicit_ids = self.explicit_ids = set()
        # the nodes' op-and-attrs keys as read (TfGraph.read_attr_keys): node_key (a function of
        # the op and attrs) made once per key and device type
        read_keys = g.read_attr_keys
        g.read_attr_keys = None  # (read once; create_clusters changes attrs)
        n_read = len(read_keys) + 2 if read_keys is not None else 0
        by_fact: dict[tuple, tuple] = {}
        for n in g.op_nodes():
            if state.fuel <= 0:
                self.decide(n, Code.FUEL_EXHAUSTED, "Hit fuel limit; not marking any remaining ops as clusterable.")
                continue
            nodedef = n.nodedef
            device = nodedef.device
            if not device:
                self.decide(n, Code.NO_DEVICE, "node has no assigned device (TF's pass fails on such a graph)")
                continue
            dtype = dev_types.get(device, "")
            if dtype == "":
                dtype = dev_types[device] = device_type(device)
            op = n.op
            if not self.may_be_explicit(n):
                xla_compile, explicit = None, False  # what _bool_attr / explicit() answer here
            else:
                xla_compile = self._bool_attr(n, COMPILE_ATTR)
                if xla_compile is False:
                    self.decide(n, Code.XLA_COMPILE_FALSE, "disallowed by _XlaCompile attribute")
                    continue
                explicit = self.explicit(n)
            got = policy.get((dtype, explicit))
            if got is None:
                reg = self.regs.get(dtype or "")
                got = policy[dtype, explicit] = (reg, reg is not None and should_compile(
                    explicit, dtype, reg.policy, self.level, self.session.cpu_global_jit))
            reg, compiles = got
            if reg is None:
                self.decide(n, Code.NO_JIT_DEVICE, f"could not find JIT device for {dtype}", device=n.device)
                continue
            if not compiles:
                self.decide(n, Code.POLICY_NOT_ENABLED, f"{dtype} policy {reg.policy}, jit level {self.level}",
                            device_type=dtype, policy=reg.policy, jit_level=self.level)
                continue
            if op in exclude_ops:
                self.decide(n, Code.WHATIF_EXCLUDED, f"{op} excluded by the what-if option --exclude-op", op=op)
                continue
            checker = checkers.get(dtype)
            if checker is None:
                checker = checkers[dtype] = CompilabilityChecker(g.library, reg.jit_device, _op_filter(reg, allow_where),
                                                                 force_compilable=self.force_compilable)
            if op in _NEVER_AT_TOP_LEVEL:  # refused before anything node-specific is read
                fail = checker.check_node(nodedef, 1)
            else:
                fact = read_keys[n.id - 2] if read_keys is not None and n.id < n_read else None
                if fact is not None:  # (one node_key per op-and-attrs as read)
                    nk = by_fact.get((dtype, fact))
                    if nk is None:
                        nk = by_fact[(dtype, fact)] = checker.node_key(nodedef)
                else:
                    nk = checker.node_key(nodedef)
                key = (reg.jit_device, nk)
                key = node_keys[n.id] = signatures.setdefault(key, key)  # one tuple per signature
                fail = checker.check_top_level(nodedef, key, n, input_types_of=self.input_types,
                                               producer_types_of=self.producer_types,
                                               output_types_of=self.output_types)
            if fail is not None:
                code, detail, path = fail.code, fail.detail, fail.path
                ev = {"jit_device": reg.jit_device}
                if path:
                    ev["inside"] = list(path)
                    inner = checker.inner_code(path)
                    if inner is not None and inner != code:
                        ev["inner_code"] = inner
                if code in (Code.UNSUPPORTED_OP, Code.CUSTOM_OP):
                    ev.update(checker.kernel_evidence(nodedef, path))
                elif code == Code.WHERE_EXCLUDED:
                    ev["flag"] = f"--tf_xla_cluster_exclude_ops={self.flags.cluster_exclude_ops}"
                self.decide(n, code, detail, **ev)
                continue
            if allow and op not in allow:
                self.decide(n, Code.NOT_IN_OPS_TO_CLUSTER, f"{op} is not listed in --tf_xla_ops_to_cluster",
                            flag=f"--tf_xla_ops_to_cluster={self.flags.ops_to_cluster}")
                continue
            if const_nodes[n.id] and self.is_stateful(n) and not is_stack_or_tensor_array_op(op):
                self.decide(n, Code.MUST_BE_CONSTANT_STATEFUL, "must-be-constant stateful op",
                            consumers=self._const_consumers(n))
                continue
            if op in IDENTITY_OPS and self.identity_driving_consts_in_loop(n):
                self.decide(n, Code.IDENTITY_DRIVING_CONSTS_IN_LOOP,
                            "including it can create dependencies between while loop condition and body computations")
                continue
            cands.append(n)
            if explicit:
                explicit_ids.add(n.id)
            state.fuel -= 1
        for checker in checkers.values():
            self.result.body_errors.update(checker.instantiation_errors)
        return cands

    def input_types(self, n: TfNode) -> list[int]:
        """The node's input dtypes per its OpDef (once per node: the pass never changes them;
        shared by the nodes of one op signature: do not modify)."""
        return self._op_types(self._in_types, self._in_by_key, optypes.input_types, n)

    def output_types(self, n: TfNode) -> list[int]:
        return self._op_types(self._out_types, self._out_by_key, optypes.output_types, n)

    def _op_types(self, memo: dict[int, list[int]], by_key: dict[tuple, list[int]], types_of, n: TfNode) -> list[int]:
        t = memo.get(n.id)
        if t is None:
            # the node's key from find_candidates covers every attr the dtypes depend on
            key = self._node_keys.get(n.id)
            t = by_key.get(key) if key is not None else None
            if t is None:
                t = types_of(n.nodedef, self.fns) or []
                if key is not None:
                    by_key[key] = t
            memo[n.id] = t
        return t

    def producer_types(self, n: TfNode) -> list[int]:
        """The dtypes ``n``'s data producers output into it (refs included), by input slot."""
        out = []
        for e in n.data_inputs():
            types = self.output_types(self.g.nodes[e.src])
            if 0 <= e.src_output < len(types):
                out.append(types[e.src_output])
        return out

    def _const_consumers(self, n: TfNode) -> list[str]:
        return sorted({self.g.nodes[e.dst].name for e in n.out_edges.values() if not e.is_control})

    # -- cycle graph -------------------------------------------------------------------------------
    def _cycles_input(self) -> tuple[int, list[tuple[int, int]], list, list[bool]]:
        """What the cycle graph is built from: its node count, TF's edge order as ``(src, dst)``
        pairs, the graph's edge for each pair and whether the pair goes to or from a frame's
        node. Sets ``self.control_flow`` and ``self.frame_nodes``."""
        g = self.g
        nodes = g.nodes
        ops = [n.op if n is not None else None for n in nodes]
        no_loops = _without_loops(ops)
        # the frames: without loop ops every node is in the root frame, and only the deadness
        # analysis would read the rest (the unreachable nodes), which finds them itself
        self.control_flow = None if no_loops else control_flow_info(g)
        info = self.control_flow[0] if self.control_flow is not None else None
        frames: dict[str, int] = {}
        first_frame = g.num_node_ids  # the cycle graph's frame nodes follow the graph's ids

        def frame_node(name: str) -> int:
            if name not in frames:
                frames[name] = first_frame + len(frames)
            return frames[name]

        self.frame_nodes = frames
        # TF's edge order; Enter/Exit edges go to/from their frame's node (created on first use)
        pairs: list[tuple[int, int]] = []
        frame_edge: list[bool] = []
        edges = []
        if no_loops:  # every edge goes in as it is
            edges = [e for e in g.edges_by_id if e is not None]
            pairs = [(e.src, e.dst) for e in edges]
            frame_edge = [False] * len(edges)
        for e in (() if no_loops else g.edges()):
            src_op, dst_op = ops[e.src], ops[e.dst]
            if dst_op in ENTER_OPS or src_op in EXIT_OPS:
                s, d = e.src, e.dst
                if dst_op in ENTER_OPS:
                    d = frame_node(info[e.dst].frame_name)
                if src_op in EXIT_OPS:
                    s = frame_node(info[e.src].frame_name)
                pairs.append((s, d))
                frame_edge.append(True)
            elif src_op not in NEXT_ITERATION_OPS:
                pairs.append((e.src, e.dst))
                frame_edge.append(False)
            else:
                continue
            edges.append(e)
        return first_frame + len(frames), pairs, edges, frame_edge

    def start_cycles_graph(self) -> tuple[tuple, Started] | None:
        """:meth:`build_cycles_graph` begun before :meth:`find_candidates` (which reads neither
        what it reads nor what it sets): the cycle graph's edges go in beside the candidates'
        search, in another thread where that pays (:meth:`GraphCycles.with_edges_started`).
        None where the graph has loop ops (the frames are found after the candidates, as
        before: the order in which a malformed graph's problems are met stays the same), and
        where no other thread would build it (it would be built first, and its memory held
        beside the candidates' search: +100 MiB at 1M nodes)."""
        g = self.g
        if not GraphCycles.built_beside(g.num_node_ids, len(g.edges_by_id)):
            return None
        if not _without_loops({n.op for n in g.nodes if n is not None}):
            return None
        got = self._cycles_input()
        return got, GraphCycles.with_edges_started(got[0], got[1])

    def build_cycles_graph(self, started: tuple[tuple, Started] | None = None) -> GraphCycles | None:
        """TF's cycle graph of the graph (None: an edge through a frame's node closes a cycle);
        ``started``: what :meth:`start_cycles_graph` began."""
        if started is None:
            got = self._cycles_input()
            cycles, bad = GraphCycles.with_edges(got[0], got[1])
        else:
            got, pending = started
            cycles, bad = pending.result()
        _, _, edges, frame_edge = got
        if bad is not None:
            if frame_edge[bad]:
                return None
            e = edges[bad]
            g = self.g
            raise GraphError("Found cycle in graph without control flow operator during XLA compilation: "
                             + cycle_description(cycles, g, e.src, e.dst))
        return cycles

    # -- initial clusters --------------------------------------------------------------------------
    def build_clusters(self, cands: list[TfNode], deadness) -> None:
        """One cluster per candidate (TF's ``MarkForCompilationPassImpl::Initialize``), after the
        unsafe resource pairs (``CreateClusters``' resource safety input)."""
        g = self.g
        regs = self.regs
        ignored_device: dict[str, bool] = {}

        def ignore(n: TfNode) -> bool:
            dev = n.device
            if not dev:
                return False
            hit = ignored_device.get(dev)
            if hit is None:
                reg = regs.get(device_type(dev) or "")
                hit = ignored_device[dev] = reg is None or reg.cluster_resource_variable_ops_unsafely
            return hit

        calls: dict[int, bool] = {}  # node id -> may_call_function, as unsafe_resource_pairs found it
        self.unsafe = (set() if self.flags.disable_resource_variable_safety_checks_for_debugging
                       else unsafe_resource_pairs(g, self.fns, ignore, calls=calls))
        unsafe_from = self.unsafe_from = {}
        for r1, r2 in self.unsafe:
            got = unsafe_from.get(r1)
            if got is None:
                unsafe_from[r1] = {r2}
            else:
                got.add(r2)
        self.clusters_of = cl = [None] * g.num_node_ids
        self._dkeys: dict[tuple, int] = {}  # see _device_key
        self.max_cluster_size = self.flags.max_cluster_size
        # per-value work done once per distinct op / device
        sizes: dict[str, tuple[int, bool]] = {}
        # (device, is a resource op) -> (devices, resource_op_device, dkey); the devices list is
        # shared (Cluster.merge makes a new one when it changes)
        per_device: dict[tuple[str, bool], tuple] = {}
        scope_key = INTERNAL_SCOPE_ATTR if self.level != OFF else SCOPE_ATTR
        fns = self.fns
        input_types = self.input_types
        output_types = self.output_types
        node_keys = self._node_keys
        resource_by_key: dict[tuple, bool] = {}  # node key -> a resource input or output
        explicit_ids = self.explicit_ids
        dt_resource = optypes.DT_RESOURCE
        predicate = deadness.control_predicate if deadness is not None else None
        for n in cands:
            nid = n.id
            op = n.op
            c = Cluster()
            c.cycles_id = nid
            c.first_node = nid
            c.size = 1
            per_op = sizes.get(op)
            if per_op is None:
                per_op = sizes[op] = (effective_size((op,)), op in WHILE_OPS or op in IF_OPS)
            c.effective_size, c.has_functional_control_flow = per_op
            key = node_keys.get(nid)  # (dtypes are a function of it: _op_types)
            is_resource = resource_by_key.get(key) if key is not None else None
            if is_resource is None:
                is_resource = dt_resource in input_types(n) or dt_resource in output_types(n)
                if key is not None:
                    resource_by_key[key] = is_resource
            device = n.nodedef.device
            per_dev = per_device.get((device, is_resource))
            if per_dev is None:
                dev = self.device_id(device)
                c.devices = [dev]
                c.resource_op_device = dev if is_resource else None
                per_dev = per_device[(device, is_resource)] = (c.devices, c.resource_op_device, self._device_key(c))
            c.devices, c.resource_op_device, c.dkey = per_dev
            if is_resource:
                calls_fn = True
            else:
                calls_fn = calls.get(nid)
                if calls_fn is None:
                    calls_fn = may_call_function(n, fns)
            if calls_fn:
                c.resource_ids = [nid]
                c.resource_set = {nid}
                # resource ops this cluster may not absorb: union of unsafe successors of its members
                forbidden = unsafe_from.get(nid)
                c.forbidden = set(forbidden) if forbidden else _NONE
            else:
                # most clusters hold no resource op: one shared empty value each (memory on big
                # graphs); Cluster.merge never grows an empty one in place
                c.resource_ids = _NO_IDS
                c.resource_set = _NONE
                c.forbidden = _NONE
            c.deadness = predicate(nid) if predicate is not None else None
            c.explicit = nid in explicit_ids  # explicit(n), as find_candidates found it
            attrs = n.nodedef.attr
            scope = attrs[scope_key].s.decode() if scope_key in attrs else ""
            c.scope = scope or None
            c.fwd = None
            cl[nid] = c

    # -- contraction ---------------------------------------------------------------------------
    # TF keeps a UnionFind<Cluster*> per node; its merges always keep the first argument's
    # value. The same answers come from one Cluster (or None) per node id in ``self.clusters_of``
    # plus a forwarding pointer (``Cluster.fwd``) from each cluster absorbed by a contraction to
    # the one that absorbed it: a node's cluster is the end of that chain (compressed on the way).
    def cluster_for(self, v: int) -> Cluster | None:
        cl = self.clusters_of
        c = cl[v] if v < len(cl) else None
        if c is None or c.fwd is None:
            return c
        return self._forwarded(v)

    def _forwarded(self, v: int) -> Cluster:
        """The live cluster of node ``v`` whose recorded cluster was absorbed (path compression)."""
        cl = self.clusters_of
        c = root = cl[v]
        while root.fwd is not None:
            root = root.fwd
        while c.fwd is not None and c.fwd is not root:
            c.fwd, c = root, c.fwd
        cl[v] = root
        return root

    def devices_compatible(self, a: Cluster, b: Cluster) -> bool:
        """TF's ``AreDevicesCompatible`` (memoized on the device sets involved)."""
        key = (a.dkey, b.dkey)
        hit = self._compat_cache.get(key)
        if hit is None:
            devs = sorted(set(a.devices) | set(b.devices))
            picked = pick_device_for_xla([self.device_names[d] for d in devs], False)
            if picked is None:
                hit = False
            else:
                pid = self.device_ids[picked]
                hit = all(c.resource_op_device is None or c.resource_op_device == pid for c in (a, b))
            self._compat_cache[key] = hit
        return hit

    def _device_key(self, c: Cluster) -> int:
        """A small int standing for ``(c.devices, c.resource_op_device)``: what
        :meth:`devices_compatible` depends on."""
        k = (tuple(c.devices), c.resource_op_device)
        i = self._dkeys.get(k)
        if i is None:
            i = self._dkeys[k] = len(self._dkeys)
        return i

    def only_node(self, c: Cluster) -> TfNode | None:
        return self.g.nodes[c.cycles_id] if c.size == 1 else None

    def is_sink_like(self, c: Cluster) -> bool:
        n = self.only_node(c)
        if n is None or n.op != "NoOp" or len(n.out_edges) != 1:
            return False
        return next(iter(n.out_edges.values())).dst == SINK_ID

    def is_scalar_integer_resource_operation(self, c: Cluster) -> bool:
        n = self.only_node(c)
        if n is None or n.op not in SCALAR_INTEGER_UPDATE_OPS:
            return False
        if "dtype" not in n.attr or not _is_integer(n.attr["dtype"].type):
            return False
        nodes = self.g.nodes
        const = next((nodes[e.src] for e in n.in_edges.values() if not e.is_control and nodes[e.src].op in CONSTANT_OPS), None)
        if const is None or "value" not in const.attr:
            return False
        shape = const.attr["value"].tensor.tensor_shape
        return not shape.unknown_rank and len(shape.dim) == 0

    def _refuse(self, phase: int, a: Cluster, b: Cluster, code: str, detail: str, **evidence) -> bool:
        nodes = self.g.nodes
        self.result.refusals.append(MergeRefusal(phase, nodes[a.cycles_id].name, nodes[b.cycles_id].name,
                                                 a.size, b.size, code, detail, evidence))
        return False

    def try_contract(self, phase: int, a: Cluster, b: Cluster) -> bool:
        """TF's ``TryToContractEdge``: merge ``b`` into ``a`` unless a rule refuses (recorded)."""
        if a.deadness is not b.deadness:
            pa, pb = a.deadness.text(), b.deadness.text()
            return self._refuse(phase, a, b, Code.MERGE_DEADNESS, f"the two nodes have mismatching deadness: {pa} and {pb}",
                                from_predicate=pa, to_predicate=pb)
        if not self.devices_compatible(a, b):
            return self._refuse(phase, a, b, Code.MERGE_DEVICES, "the two nodes have incompatible devices",
                                from_devices=[self.device_names[d] for d in a.devices],
                                to_devices=[self.device_names[d] for d in b.devices])
        if a.scope is not None and b.scope is not None and a.scope != b.scope:
            return self._refuse(phase, a, b, Code.MERGE_SCOPE, "the two nodes have mismatching XLA scopes",
                                from_scope=a.scope, to_scope=b.scope)
        if a.size + b.size > self.max_cluster_size:
            return self._refuse(phase, a, b, Code.MERGE_MAX_SIZE, "the new cluster will be larger than the max cluster size",
                                size=a.size + b.size, max_cluster_size=self.max_cluster_size)
        # With one device in the whole graph every device check passes: skip the
        # (quadratic) scan over the target's predecessors.
        if len(self.device_names) > 1:
            for p in list(self.cycles.predecessors(b.cycles_id)):
                cp = self.cluster_for(p)
                if cp is not None and (not self.devices_compatible(b, cp) or not self.devices_compatible(a, cp)):
                    return self._refuse(phase, a, b, Code.MERGE_CROSS_DEVICE,
                                        "the new cluster will introduce a cross device dependency",
                                        via=self.g.nodes[cp.cycles_id].name)
        # TF checks every (r1 in from, r2 in to) pair against the unsafe set; equivalently,
        # `to` holds a resource op that some member of `from` forbids.
        if (a.forbidden and b.resource_set and not self.flags.disable_resource_variable_safety_checks_for_debugging
                and not a.forbidden.isdisjoint(b.resource_set)):
            r1, r2 = self._unsafe_pair(a, b)
            nodes = self.g.nodes
            return self._refuse(phase, a, b, Code.MERGE_RESOURCE,
                                "the new cluster would break resource variable semantics",
                                writer=nodes[r1].name, writer_op=nodes[r1].op,
                                reader=nodes[r2].name, reader_op=nodes[r2].op)
        ida, idb = a.cycles_id, b.cycles_id
        survivor = self.cycles.contract_edge(ida, idb)
        if survivor is None:
            ev = {}
            if self.explain_cycles:
                ev["path"] = self.describe_cycle(ida, idb)
            return self._refuse(phase, a, b, Code.MERGE_CYCLE, "contracting the edge would create a cycle", **ev)
        same_devices = a.dkey == b.dkey
        a.merge(b)
        if not same_devices:
            a.dkey = self._device_key(a)
        a.cycles_id = survivor
        b.fwd = a
        self.clusters_of[survivor] = a
        return True

    def _unsafe_pair(self, a: Cluster, b: Cluster) -> tuple[int, int]:
        """The first (r1, r2) in TF's iteration order that makes the merge unsafe."""
        for r1 in a.resource_ids:
            s = self.unsafe_from.get(r1)
            if s and not s.isdisjoint(b.resource_set):
                for r2 in b.resource_ids:
                    if r2 in s:
                        return r1, r2
        raise AssertionError("no unsafe pair")

    def for_each_edge_in_post_order(self, phase: int) -> bool:
        """TF's ``ForEachEdgeInPostOrder`` with one phase's filter and ``TryToContractEdge``:
        for each cycle-graph node in post order (taken once, at the start) with a cluster ``a``,
        for each successor in ``a``'s out-sequence as it is before the first contraction (a
        copy), try to merge the successor's cluster into ``a``. True if anything merged.

        Phase 0 only absorbs single ``Shape``/``Rank``/``Size`` nodes; phase 1 skips sink-like
        targets and scalar integer resource updates as the source; phases 2 and 3 take every
        edge."""
        changed = False
        cycles = self.cycles
        successors = cycles.successors
        cl = self.clusters_of
        ncl = len(cl)
        forwarded = self._forwarded
        try_contract = self.try_contract
        nodes = self.g.nodes
        # phase 0 can only absorb a node of this set (a single-node cluster is its node's own):
        # a node none of whose successors is in it has nothing to try
        shape_consumers = {c.cycles_id for c in cl if c is not None and c.size == 1
                           and nodes[c.cycles_id].op in SHAPE_SIZE_RANK_OPS} if phase == 0 else None
        for v in cycles.all_nodes_in_post_order():
            if v >= ncl:
                continue
            a = cl[v]
            if a is None:
                continue
            if a.fwd is not None:
                a = forwarded(v)
            succ = successors(a.cycles_id)
            if phase == 0 and shape_consumers.isdisjoint(succ):
                continue
            for w in list(succ):
                if w >= ncl:
                    continue
                b = cl[w]
                if b is None:
                    continue
                if b.fwd is not None:
                    b = forwarded(w)
                if phase == 0:
                    if b.size != 1 or nodes[b.cycles_id].op not in SHAPE_SIZE_RANK_OPS:
                        continue
                elif phase == 1:
                    if b.size == 1 and self.is_sink_like(b):
                        continue
                    if (a.size == 1 and nodes[a.cycles_id].op in SCALAR_INTEGER_UPDATE_OPS
                            and self.is_scalar_integer_resource_operation(a)):
                        continue
                if try_contract(phase, a, b):
                    changed = True
        return changed

    def contract(self) -> None:
        self.for_each_edge_in_post_order(0)
        self.for_each_edge_in_post_order(1)
        self.for_each_edge_in_post_order(2)
        n_refusals = len(self.result.refusals)
        if self.for_each_edge_in_post_order(3):
            raise JitsimError("internal: edge contraction did not reach a fixed point (TF would fail here too)")
        # the idempotence sweep repeats phase 2's refusals; keep only the real phases
        del self.result.refusals[n_refusals:]

    def describe_cycle(self, a: int, b: int) -> list[str]:
        """An alternative path a ~> b (TF's ``FindAlternatePathForDebugging``), as names."""
        cycles = self.cycles
        rpo = cycles.all_nodes_in_post_order()[::-1]
        best: dict[int, int] = {a: -1}
        for cur in rpo:
            some = pref = None
            for p in cycles.predecessors(cur):
                if p not in best or (cur == b and p == a):
                    continue
                some = p
                if self.cluster_for(p) is None:
                    pref = p
            if some is not None or pref is not None:
                best[cur] = pref if pref is not None else some
            if cur == b:
                break
        path, cur = [], best.get(b, a)
        while cur not in (a, -1):
            path.append(cur)
            cur = best.get(cur, -1)
        path.reverse()
        return [self._cycles_node_name(v) for v in path]

    def _cycles_node_name(self, v: int) -> str:
        c = self.cluster_for(v)
        if c is not None:
            return self.g.nodes[c.cycles_id].name + (f" (+{c.size - 1} others)" if c.size > 1 else "")
        if v >= self.g.num_node_ids:
            for name, fid in self.frame_nodes.items():
                if fid == v:
                    return f"<loop frame {name}>"
            return f"<#{v}>"
        n = self.g.nodes[v]
        return n.name if n is not None else f"<#{v}>"

    # -- post-processing ---------------------------------------------------------------------------
    def should_compile_cluster(self, c: Cluster) -> bool:
        key = id(c)
        if key not in self._should_compile_cache:
            picked = pick_device_for_xla([self.device_names[d] for d in sorted(c.devices)], False)
            ok = False
            if picked is not None:
                dt = device_type(picked)
                reg = self.regs.get(dt or "")
                ok = reg is not None and should_compile(c.explicit, dt, reg.policy, self.level, self.session.cpu_global_jit)
            self._should_compile_cache[key] = ok
        return self._should_compile_cache[key]

    def create_clusters(self, cands: list[TfNode]) -> None:
        """TF's ``CreateClusters``: the ``Fill`` declustering, then per candidate in id order
        its cluster's name (numbered on first use) or why it stays out."""
        nodes = self.g.nodes
        cluster_for = self.cluster_for
        cl = self.clusters_of
        forwarded = self._forwarded
        of = []  # each candidate's cluster after contraction (cluster_for, inlined)
        for n in cands:
            c = cl[n.id]
            of.append(c if c.fwd is None else forwarded(n.id))
        declustered = set()
        for n, c in zip(cands, of):
            if n.op != "Fill":
                continue
            outs = [e.dst for e in n.out_edges.values()]
            if outs and all(cluster_for(d) is not c for d in outs):
                declustered.add(n.id)
        fp = self.fingerprint() if self.flags.deterministic_cluster_names else 0
        names: dict[int, str] = {}
        encoded: dict[int, bytes] = {}
        groups = self.result.groups
        for n, c in zip(cands, of):
            groups[n.name] = nodes[c.cycles_id].name
        names_of: dict[int, list[str]] = {}

        def member_names(c) -> list[str]:  # one list per cluster, shared by its members' records
            if not names_of:  # (made on first use: only clusters too small need them)
                for m, mc in zip(cands, of):
                    got = names_of.get(id(mc))
                    if got is None:
                        names_of[id(mc)] = [m.name]
                    else:
                        got.append(m.name)
            return names_of[id(c)]
        decisions = self.result.decisions
        clusters = self.result.clusters
        min_size = self.flags.min_cluster_size
        should_compile_cluster = self.should_compile_cluster
        compiles = self._should_compile_cache
        clustered: dict[int, NodeDecision] = {}  # per cluster: the one decision its members share
        for n, c in zip(cands, of):
            info = {"cluster_size": c.size, "effective_size": c.effective_size}
            ok = compiles.get(id(c))
            if not (ok if ok is not None else should_compile_cluster(c)):
                self.decide(n, Code.CLUSTER_NOT_COMPILED, "Not compiling cluster", **info)
                continue
            if declustered and n.id in declustered:
                self.decide(n, Code.FILL_DECLUSTERED, "Fill with no consumer in its cluster",
                            consumers=sorted(nodes[e.dst].name for e in n.out_edges.values()))
                continue
            if (c.effective_size >= min_size or c.has_functional_control_flow or c.explicit):
                cid = c.cycles_id
                name = names.get(cid)
                if name is None:
                    prefix = f"{self.session.cluster_name_prefix}_" if self.session.cluster_name_prefix else "cluster_"
                    if self.flags.deterministic_cluster_names:
                        prefix += f"{fp}_"
                    name = names[cid] = prefix + str(self.state.next_cluster_number(fp))
                    encoded[cid] = name.encode()
                    clusters[name] = []
                    clustered[cid] = NodeDecision(Code.CLUSTERED, name, {"cluster": name, **info})
                attrs = n.nodedef.attr
                attrs[CLUSTER_ATTR].s = encoded[cid]
                attrs[ALREADY_CLUSTERED_ATTR].b = True
                clusters[name].append(n.name)
                decisions[n.name] = clustered[cid]
            else:
                self.decide(n, Code.CLUSTER_TOO_SMALL,
                            f"effective size {c.effective_size} < --tf_xla_min_cluster_size={self.flags.min_cluster_size}",
                            min_cluster_size=self.flags.min_cluster_size,
                            flag=f"--tf_xla_min_cluster_size={self.flags.min_cluster_size}",
                            would_be_members=member_names(c), **info)

    def fingerprint(self) -> int:
        from jitsim.analyses.fingerprint import fingerprint_graphdef

        return fingerprint_graphdef(self.g.to_graphdef())

    # -- driver ----------------------------------------------------------------------------------
    def run(self) -> MarkResult:
        g = self.g
        for n in g.op_nodes():
            if ALREADY_CLUSTERED_ATTR in n.attr or n.op in TPU_EXECUTE_OPS:
                self.result.graph_decision = NodeDecision(Code.GRAPH_ALREADY_CLUSTERED, f"{n.name} ({n.op})",
                                                          {"node": n.name})
                return self.result
        # the pass adds and removes no node or edge (it sets attrs): the constant and the
        # resource analyses share one topological order of the graph
        with topological_order_kept(g):
            return self._run(g)

    def _run(self, g: TfGraph) -> MarkResult:
        started = self.start_cycles_graph()
        try:
            cands = self.find_candidates()
        except BaseException:
            if started is not None:
                started[1].wait()  # (nothing left running)
            raise
        self.result.candidates = [n.name for n in cands]
        if not cands:
            if started is not None:
                started[1].wait()
            self.result.graph_decision = NodeDecision(Code.GRAPH_NO_CANDIDATES, "No compilable candidates")
            return self.result
        cycles = self.build_cycles_graph(started)
        if cycles is None:
            self.result.graph_decision = NodeDecision(Code.GRAPH_CYCLE_GRAPH_FAILED, "Could not form cycle detection graph")
            for n in cands:
                self.decide(n, Code.GRAPH_CYCLE_GRAPH_FAILED, "Could not form cycle detection graph")
            return self.result
        self.cycles = cycles
        deadness = None
        if not self.flags.disable_deadness_safety_checks_for_debugging:
            from jitsim.analyses.deadness import all_alive, deadness_analysis

            # the graph is unchanged since the cycle graph was built: its frames are reused;
            # without control flow ops every predicate is #true, known without the analysis
            deadness = all_alive(g, self.control_flow) if USE_ALL_ALIVE else None
            if deadness is None:
                deadness = deadness_analysis(g, control_flow=self.control_flow)
        self.result.ran = True
        self.build_clusters(cands, deadness)
        self.contract()
        self.create_clusters(cands)
        return self.result


def _without_loops(ops) -> bool:
    """Whether none of ``ops`` is a loop op (Enter, Exit, NextIteration): the cycle graph then
    has no frame nodes."""
    return ENTER_OPS.isdisjoint(ops) and EXIT_OPS.isdisjoint(ops) and NEXT_ITERATION_OPS.isdisjoint(ops)


def _is_integer(dtype: int) -> bool:
    # DT_INT8..: int32=3, uint8=4, int16=5, int8=6, int64=9, uint16=17, uint32=22, uint64=23, qint*: no
    return dtype in (3, 4, 5, 6, 9, 17, 22, 23)


def _op_filter(reg: Registration, allow_where: bool) -> OperationFilter:
    return OperationFilter(
        allow_where_op=allow_where,
        allow_resource_ops_in_called_functions=reg.cluster_resource_variable_ops_unsafely,
        allow_stack_ops=reg.cluster_stack_ops,
        allow_tensor_array_ops=reg.cluster_tensor_array_ops,
        allow_stateful_rng_ops=reg.cluster_stateful_rng_ops,
        allow_control_trigger=reg.cluster_control_trigger,
        allow_eliding_assert_and_checknumerics_ops=reg.elide_assert_and_checknumerics,
        allow_ops_producing_or_consuming_variant=reg.cluster_variant_ops,
        allow_slow_ops=reg.cluster_slow_ops,
        allow_inaccurate_ops=reg.cluster_inaccurate_ops,
    )


@with_custom_op_signatures
def mark_for_compilation(g: TfGraph, options: Options, state: ProcessState | None = None) -> MarkResult:
    """Run TF's MarkForCompilationPass on ``g`` in place; return what it decided and why.

    Reads ``options.flags``, ``options.session``, ``options.explain_cycles`` and the what-if
    knobs ``options.exclude_ops`` / ``options.force_compilable`` (not TF behaviour: ops
    treated as if XLA could not / could compile them). ``state``: the TF process the pass
    runs in (fuel, cluster counter); default: a fresh one."""
    return MarkForCompilation(g, options, state).run()
