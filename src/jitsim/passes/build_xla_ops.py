"""``BuildXlaOpsPass`` (POST_REWRITE_FOR_EXEC phase 60): make encapsulated clusters executable.

Input: the graph after ``EncapsulateSubgraphsPass``, where every cluster is one call node
(``op = name = <cluster>``, ``_XlaCompiledKernel=true``, ``_XlaNumConstantArgs``,
``_XlaNumResourceArgs``, ``_XlaHasReferenceVars``) whose data inputs are ordered
constants, then ordinary arguments, then resources.

Each such node ``n`` (in node-id order) is replaced by nodes created under the scope
``<n>_1/`` (the scope name ``<n>`` is taken by ``n`` itself, so TF's scope naming adds
``_1``; tf-passes §15):

* ``xla_compile`` (``_XlaCompile``) takes all data inputs and ``n``'s control inputs;
* **strict** mode (``--tf_xla_enable_lazy_compilation=false``, or a device whose XLA
  registration says "always compile"): ``xla_run`` (``_XlaRun``) consumes the key and takes
  over all of ``n``'s out-edges; ``n`` disappears;
* **lazy** mode (the default on CPU/GPU): ``predicated_compilation_key`` (``Switch`` of the
  key on ``compilation_successful``) feeds ``xla_run`` on its true side and, through an
  ``Identity`` (``data_as_ctrl``), a control edge into ``stateful_partitioned_call``, the
  uncompiled fallback that replaces ``n``; each used output ``i`` becomes ``merge_oidx_<i>``
  (``_XlaMerge`` of fallback and ``xla_run``); control successors are reached through
  ``ctrl_as_data``/``ctrl_as_data_1`` (``Const``) -> ``ctrl_merge`` (``Merge``) ->
  ``data_as_ctrl`` (``Identity``); int32 fallback inputs whose producer keeps them in device
  memory go through ``int32_id_n`` (``IdentityN``) so that they are dead when XLA runs.

Debug flags add ``check_input_<i>`` (``CheckNumerics`` on floating ``xla_run`` inputs),
``print_<i>`` (``Print`` on the CPU) and ``check_output_<i>`` (``CheckNumerics``) on the
``xla_run`` side of each merged output (lazy mode only for the last two).

:func:`add_has_reference_vars_attrs` is the very last step of ``EncapsulateSubgraphsPass``
(it runs *after* TF writes the ``encapsulate_subgraphs_after`` dump): every node gets
``_XlaHasReferenceVars``, true iff it is connected to a reference-typed producer.

>>> from jitsim.options import options_for
>>> g = _example_graph()
>>> r = build_xla_ops(g, options_for(""))
>>> r.decisions["cluster_0"].mode, sorted(n.name for n in g.op_nodes())[:3]
('lazy', ['cluster_0_1/data_as_ctrl', 'cluster_0_1/merge_oidx_0', 'cluster_0_1/predicated_compilation_key'])
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jitsim.codes import Code
from jitsim.errors import GraphError
from jitsim.registry import protos
from jitsim.graph.model import Graph
from jitsim.registry import optypes
from jitsim.passes.encapsulate import nodes_related_to_ref_variables  # noqa: F401 (also re-exported)
from jitsim.analyses.devices import ALWAYS, pick_device_for_xla, registrations
from jitsim.graph.device_names import parse_device_name
from jitsim.registry.kernels import find_kernel
from jitsim.opsets import ENTER_OPS, EXIT_OPS, MERGE_OPS, NEXT_ITERATION_OPS, SWITCH_OPS
from jitsim.graph.tfgraph import SINK_ID, TfGraph, TfNode
from jitsim.registry import op_def
from jitsim.graph.custom_ops import with_custom_op_signatures
from jitsim.defs import (COMPILED_KERNEL_ATTR, DEVICES, HAS_REFERENCE_VARS_ATTR, MUST_COMPILE_ATTR, NUM_CONSTANT_ARGS_ATTR,
                         NUM_RESOURCE_ARGS_ATTR, XLA_COMPILE_OP, XLA_MERGE_OP, XLA_RUN_OP)
from jitsim.options import Options
from jitsim.opsets import CONTROL_FLOW_OPS, MEMORY_TYPES_CALL_OPS, SEND_RECV_OPS

# attribute names (compiler/jit/defs.h)

# DataType values used here (types.proto)
DT_FLOAT, DT_DOUBLE, DT_INT32, DT_STRING, DT_BFLOAT16, DT_HALF = 1, 2, 3, 7, 14, 19
FLOATING_TYPES = frozenset({DT_HALF, DT_BFLOAT16, DT_FLOAT, DT_DOUBLE})  # DataTypeIsFloating

# Print nodes are pinned here whatever the cluster's device (TF hard-codes it).
PRINT_DEVICE = DEVICES["cpu"]

# The serialized session ConfigProto TF 2.21 puts in the fallback call's ``config_proto``
# for an eager/tf.function program on a CPU-only host. It is runtime state (the session's
# options), not derivable from the graph: callers that know theirs pass it in.
DEFAULT_CONFIG_PROTO = (
    b"\n\x07\n\x03CPU\x10\x01\n\x07\n\x03GPU\x10\x002\x02J\x008\x01R\x04\x1a\x02 \x01\x82\x01\x00\x92\x01\x02J\x00"
)

# memory_types.cc IsFunctionCallOp: no kernel def is consulted for these
# EdgeSet keeps up to 64 / sizeof(void*) edges inline (insertion order); beyond that a
# hash set of pointers, whose iteration order TF does not define.
EDGESET_INLINE = 8

LAZY, STRICT = "lazy", "strict"


@dataclass
class ClusterBuild:
    """What BuildXlaOps decided for one cluster call: ``mode`` (lazy/strict), ``reasons``
    (``cluster``-kind codes of :mod:`jitsim.codes`) and ``detail``, ``device`` (the inferred XLA
    device) and ``device_candidates`` (in DeviceInfoCache order), ``must_compile_in_function``
    (informative: ``_XlaMustCompile`` does not matter here), whether TF's iteration orders
    were defined (past ``EDGESET_INLINE`` edges TF iterates a pointer-hash set), the input
    counts (``constants``, ``args``, ``resources``), ``has_reference_vars``, the name ``scope``
    of the nodes it made and those nodes (``created``)."""

    mode: str
    reasons: list
    detail: str
    device: str
    device_candidates: list
    must_compile_in_function: bool
    merge_order_defined: bool
    int32_order_defined: bool
    has_reference_vars: bool
    constants: int
    args: int
    resources: int
    scope: str
    created: list = field(default_factory=list)


@dataclass
class _RunContext:
    """What every cluster's rewrite of one BuildXlaOps run reads: the flags, whether lazy
    compilation is on, the XLA device registrations, the library's functions, the device
    cache, the session's ConfigProto and the graph's names."""

    flags: object
    lazy_enabled: bool
    regs: dict
    lib_fns: dict
    cache: object
    config_proto: bytes
    names: object


@dataclass
class BuildResult:
    """``changed``: any cluster rewritten. ``decisions``: a :class:`ClusterBuild` per cluster
    call node, in the order processed (node id)."""

    changed: bool
    decisions: dict[str, ClusterBuild] = field(default_factory=dict)


# -- small helpers ---------------------------------------------------------------------------


def _library_fns(g: TfGraph) -> dict:
    return {f.signature.name: f for f in g.library.function}


def _attr_bool(nodedef, name: str):
    if nodedef is None or name not in nodedef.attr:
        return None
    return nodedef.attr[name].b


def _attr_int(node: TfNode, name: str) -> int:
    if name not in node.attr:
        raise GraphError(f"cluster call {node.name!r} has no {name} attribute (not an encapsulated cluster?)")
    return node.attr[name].i


def _is_xla_compiled_kernel(node: TfNode) -> bool:
    return bool(_attr_bool(node.nodedef, COMPILED_KERNEL_ATTR))


def _type_list(av, types) -> None:
    av.list.SetInParent()
    av.list.type.extend(types)


class _NameMap:
    """A ``Scope``'s name map: a new name is kept if unused, else suffixed ``_1``, ``_2``..."""

    def __init__(self, names=()):
        self.counts: dict[str, int] = dict.fromkeys(names, 0)


    def unique(self, prefix: str) -> str:
        c = self.counts
        if prefix not in c:
            c[prefix] = 0
            return prefix
        while True:
            c[prefix] += 1
            cand = f"{prefix}_{c[prefix]}"
            if cand not in c:
                break
        c[cand] = 0
        return cand


class _GraphNames:
    """The names ``NewInternalScope``'s root map holds for the live graph (every node name and
    every ``/`` prefix of one), kept up to date as clusters are rewritten instead of rebuilt
    for each cluster (that made the pass quadratic on graphs with many clusters)."""

    def __init__(self, g: TfGraph):
        self.g = g
        self.uses: dict[str, int] = {}
        self.seen_ids = 0
        self.update()

    def _count(self, name: str, step: int) -> None:
        uses = self.uses
        uses[name] = uses.get(name, 0) + step
        i = name.find("/")
        while i != -1:
            prefix = name[:i]
            uses[prefix] = uses.get(prefix, 0) + step
            i = name.find("/", i + 1)

    def update(self, removed=()) -> None:
        """Count the nodes added since the last call and forget ``removed`` (dead nodes)."""
        nodes = self.g.nodes
        for n in nodes[self.seen_ids:]:
            if n is not None:
                self._count(n.name, 1)
        self.seen_ids = len(nodes)
        for name in removed:
            self._count(name, -1)

    def unique_scope(self, name: str) -> str:
        """``NewInternalScope(graph).NewSubScope(name)``'s name: ``name``, else the first free
        ``name_K``."""
        uses = self.uses
        if not uses.get(name):
            return name
        k = 1
        while uses.get(f"{name}_{k}"):
            k += 1
        return f"{name}_{k}"


class _Builder:
    """Creates nodes the way ``NodeBuilder`` does inside one cluster's scope: unique names
    under ``scope/``, data edges by slot, then control edges, default attrs from the OpDef."""

    def __init__(self, g: TfGraph, scope: str, device: str, lib_fns: dict):
        self.g = g
        self.scope = scope
        self.names = _NameMap()
        self.device = device
        self.lib_fns = lib_fns
        self.created: list[str] = []

    def out_type(self, nid: int, slot: int) -> int:
        return _output_type(self.g, nid, slot, self.lib_fns)

    def add(self, base: str, op: str, inputs, attrs: dict, *, device: str | None = None, ctrl=()) -> TfNode:
        nd = protos.NodeDef(name=f"{self.scope}/{self.names.unique(base)}", op=op,
                            device=self.device if device is None else device)
        for k, fill in attrs.items():
            fill(nd.attr[k])
        od = op_def(op)
        if od is not None:
            for a in od.attr:
                if a.name not in nd.attr and a.HasField("default_value"):
                    nd.attr[a.name].CopyFrom(a.default_value)
        node = self.g.add_node(nd)
        for slot, (src, out) in enumerate(inputs):
            self.g.add_edge(src, out, node.id, slot)
        for src in ctrl:
            add_control_edge(self.g, src, node.id)
        self.created.append(nd.name)
        return node


def add_control_edge(g: TfGraph, src: int, dst: int):
    """``Graph::AddControlEdge`` without duplicates: nothing if the edge already exists."""
    for e in g.nodes[dst].in_edges.values():
        if e.is_control and e.src == src:
            return None
    return g.add_control_edge(src, dst)


def _output_type(g: TfGraph, nid: int, slot: int, lib_fns: dict) -> int:
    node = g.nodes[nid]
    types = optypes.output_types(node.nodedef, lib_fns)
    if types is None or slot >= len(types):
        raise GraphError(f"cannot tell the type of output {slot} of {node.name!r} (op {node.op!r})")
    return types[slot]


def _tensor_name(g: TfGraph, nid: int, slot: int) -> str:
    """``Output::name()``: always ``node:index``."""
    return f"{g.nodes[nid].name}:{slot}"


# -- memory types (framework/memory_types.cc, for the int32 predication) -------------------


# Output args that TF 2.21's CPU kernels keep in host memory (``HostMemory(...)`` on an
# output in the kernel registration), from ``kernels.get_all_registered_kernels()`` of the
# TF 2.21 wheel. Every CPU kernel of these ops declares the same outputs, whatever its type
# constraints, so no kernel matching is needed on the CPU. (Host-memory *inputs* do not
# matter here.)
CPU_HOST_MEMORY_OUTPUTS: dict[str, tuple[str, ...]] = {
    "BroadcastArgs": ("r0",),
    "BroadcastGradientArgs": ("r0", "r1"),
    "InTopK": ("precision",),
    "InTopKV2": ("precision",),
    "IsTensorFloat32Enabled": ("enabled",),
    "LinSpace": ("output",),
    "MutexV2": ("resource",),
    "Rank": ("output",),
    "Shape": ("output",),
    "ShapeN": ("output",),
    "Size": ("output",),
    "SparseMatrixNNZ": ("nnz",),
    "StatelessRandomGetAlg": ("alg",),
    "StatelessRandomGetKeyCounter": ("key", "counter"),
    "StatelessRandomGetKeyCounterAlg": ("key", "counter", "alg"),
    "TensorArrayConcat": ("lengths",),
    "TensorArrayConcatV2": ("lengths",),
    "TensorArrayConcatV3": ("lengths",),
}
DT_RESOURCE = optypes.DT_RESOURCE
HOST_ONLY_TYPES = frozenset({DT_STRING, DT_STRING + optypes.REF_OFFSET, DT_RESOURCE})  # DataTypeAlwaysOnHost


def _output_arg_slots(nodedef, od, arg_names) -> set[int]:
    """Flat output indices of the named output args (``NameRangesForNode``)."""
    slots, pos = set(), 0
    for arg in od.output_arg:
        n = len(optypes._expand([arg], nodedef, od))
        if arg.name in arg_names:
            slots.update(range(pos, pos + n))
        pos += n
    return slots


def output_in_host_memory(g: TfGraph, nid: int, slot: int, lib_fns: dict) -> bool:
    """TF's ``MemoryTypesForNode`` for output ``slot`` of node ``nid`` on the device type of
    its assigned device: True for HOST_MEMORY.

    A node with a kernel (any placed registered op that is not a function call) keeps int32
    in device memory unless its kernel says ``HostMemory``; function calls (library functions,
    ``PartitionedCall``...) have no kernel, so their int32 outputs are host memory unless
    ``_XlaMustCompile`` is set. Strings and resources always live on the host; the
    ``_output_hostmem`` attr adds more. On other devices than the CPU, a kernel's outputs are in
    device memory unless its registration says ``HostMemory``: jitsim looks the kernel up in the
    shipped CPU/GPU kernel table, falling back to the op's ``DEFAULT`` kernel as TF does (e.g. the
    GPU ``ReadVariableOp`` of an int32 variable: only its resource input is host memory, so the
    value is on the device, as TF's build_xla_ops test
    ``NoDeviceToHostCopiesForClustersWithInt32Inputs`` expects). Only for an op the table has no
    kernel for at all does jitsim assume an int32 output lives on the host (what most GPU int32
    kernel registrations do).
    """
    node = g.nodes[nid]
    nd = node.nodedef
    dev = parse_device_name(node.device)
    if dev is None or dev.type is None:
        raise GraphError(f"node {node.name!r} has no usable device ({node.device!r}) for its memory types")
    od = op_def(nd.op)
    if od is None and nd.op not in lib_fns:
        raise GraphError(f"op {nd.op!r} of {node.name!r} is neither registered nor a library function")
    dtype = _output_type(g, nid, slot, lib_fns)
    # A placed node of a registered op has a kernel on its device (the placer made sure).
    kernel = od is not None and nd.op not in MEMORY_TYPES_CALL_OPS
    must_compile = bool(_attr_bool(nd, MUST_COMPILE_ATTR))
    int32_on_device = kernel or dev.type == "TPU" or must_compile
    host = dtype in HOST_ONLY_TYPES or (dtype == DT_INT32 and not int32_on_device)
    if kernel:
        if dev.type == "CPU":
            names = CPU_HOST_MEMORY_OUTPUTS.get(nd.op)
            if names and slot in _output_arg_slots(nd, od, names):
                host = True
        elif dtype == DT_INT32 and dev.type != "TPU":
            kdef = find_kernel(nd, dev.type)
            if kdef is None:
                host = True  # no kernel in jitsim's table: approximation, see above
            else:
                host = slot in _output_arg_slots(nd, od, set(kdef.host_memory_arg))
    if "_output_hostmem" in nd.attr and slot in list(nd.attr["_output_hostmem"].list.i):
        host = True
    return host


# -- the pass ------------------------------------------------------------------------------


class _DeviceInfoCache:
    """Device names in the order they were first queried (TF's DeviceId order), shared by
    all clusters of one pass run."""

    def __init__(self):
        self.ids: dict[str, int] = {}

    def id_for(self, name: str) -> int:
        if parse_device_name(name) is None:
            raise GraphError(f"cannot parse device name {name!r}")
        return self.ids.setdefault(name, len(self.ids))

    def names(self, ids) -> list[str]:
        by_id = {v: k for k, v in self.ids.items()}
        return [by_id[i] for i in sorted(ids)]


def _infer_device(cache: _DeviceInfoCache, node: TfNode, fdef) -> tuple[str, list[str]]:
    ids = set()
    for nd in fdef.node_def:
        if nd.device:
            ids.add(cache.id_for(nd.device))
    if node.device:
        ids.add(cache.id_for(node.device))
    if not ids:
        raise GraphError(f"cluster {node.name!r}: no device to compile for")
    cands = cache.names(ids)
    picked = pick_device_for_xla(cands, allow_mixing_unknown_and_cpu=True)
    if picked is None:
        raise GraphError(f"cluster {node.name!r}: conflicting devices {cands}")
    return picked, cands


@with_custom_op_signatures
def build_xla_ops(g: TfGraph, options: Options, *, lazy: bool | None = None,
                  config_proto: bytes = DEFAULT_CONFIG_PROTO) -> BuildResult:
    """Run TF 2.21's ``BuildXlaOpsPass`` on ``g`` in place.

    ``options``: the run's :class:`~jitsim.options.Options` (the pass reads its flags).
    ``lazy``: the pass's constructor override of ``--tf_xla_enable_lazy_compilation``
    (None: use the flag, as the registered pass does). ``config_proto``: the session's
    serialized ``ConfigProto`` (copied into every fallback call).
    """
    flags = options.flags
    lazy_enabled = flags.enable_lazy_compilation if lazy is None else lazy
    regs = registrations(flags.cpu_global_jit, flags.enable_xla_devices)
    lib_fns = _library_fns(g)
    cache = _DeviceInfoCache()

    todo = [n for n in g.op_nodes()
            if n.op not in SEND_RECV_OPS and n.op not in CONTROL_FLOW_OPS and _is_xla_compiled_kernel(n)]
    result = BuildResult(changed=bool(todo))
    run = _RunContext(flags, lazy_enabled, regs, lib_fns, cache, config_proto, _GraphNames(g))
    for n in todo:
        result.decisions[n.name] = _rewrite_cluster(g, n, run)
        run.names.update(removed=[n.name] if g.nodes[n.id] is None else ())
    return result


def _rewrite_cluster(g, n, run: _RunContext) -> ClusterBuild:
    flags, lazy_enabled, regs, lib_fns = run.flags, run.lazy_enabled, run.regs, run.lib_fns
    cache, config_proto, names = run.cache, run.config_proto, run.names
    # Inputs split into constants / ordinary / resources.
    n_const = _attr_int(n, NUM_CONSTANT_ARGS_ATTR)
    n_res = _attr_int(n, NUM_RESOURCE_ARGS_ATTR)
    in_types = optypes.input_types(n.nodedef, lib_fns)
    if in_types is None:
        raise GraphError(f"cluster call {n.name!r}: function {n.op!r} is not in the library")
    num_inputs = len(in_types)
    if n_const < 0 or n_res < 0 or n_const + n_res > num_inputs:
        raise GraphError("Invalid number of constant/resource arguments to XLA kernel.")
    by_slot = {e.dst_input: e for e in n.in_edges.values() if not e.is_control}
    if sorted(by_slot) != list(range(num_inputs)):
        raise GraphError(f"cluster call {n.name!r}: expects {num_inputs} data inputs, has slots {sorted(by_slot)}")
    inputs = [(by_slot[i].src, by_slot[i].src_output) for i in range(num_inputs)]
    constants = inputs[:n_const]
    args = inputs[n_const:num_inputs - n_res]
    resources = inputs[num_inputs - n_res:]

    # The function called: NameAttrList(name = op, attr = all of n's attrs, as they are now).
    func = protos.message_class("tensorflow.NameAttrList")(name=n.op)
    for k, v in n.attr.items():
        func.attr[k].CopyFrom(v)
    fdef = lib_fns[n.op]
    out_types = optypes.output_types(n.nodedef, lib_fns)

    device, candidates = _infer_device(cache, n, fdef)
    dev_type = parse_device_name(device).type
    reg = regs.get(dev_type)
    if reg is None:
        raise GraphError(f"cluster {n.name!r}: device {device!r} has no XLA compilation device registered")
    reasons, details = [], []
    if reg.policy == ALWAYS:
        reasons.append(Code.DEVICE_REQUIRES_COMPILATION)
        details.append(f"the {dev_type} XLA registration always compiles")
    if not lazy_enabled:
        reasons.append(Code.LAZY_COMPILATION_DISABLED)
        details.append("--tf_xla_enable_lazy_compilation=false")
    strict = bool(reasons)
    if not strict:
        reasons.append(Code.LAZY_COMPILATION_DEFAULT)
        details.append(f"{dev_type} does not require compilation and lazy compilation is enabled")
    has_ref_vars = _attr_bool(n.nodedef, HAS_REFERENCE_VARS_ATTR)
    if has_ref_vars is None:
        raise GraphError(f"cluster call {n.name!r} has no {HAS_REFERENCE_VARS_ATTR} attribute "
                         "(run add_has_reference_vars_attrs after encapsulation)")

    out_edge_count = len(n.out_edges)
    fallback_in_edges = 0 if strict else num_inputs + 1
    scope = names.unique_scope(n.name)
    b = _Builder(g, scope, device, lib_fns)
    ty = b.out_type

    def fill_func(av):
        av.func.CopyFrom(func)

    compile_node = b.add("xla_compile", XLA_COMPILE_OP, constants + args + resources, {
        "Tconstants": lambda av: _type_list(av, [ty(*x) for x in constants]),
        "Targs": lambda av: _type_list(av, [ty(*x) for x in args]),
        "Nresources": lambda av: setattr(av, "i", len(resources)),
        "must_compile": lambda av: setattr(av, "b", strict),
        "function": fill_func,
    })
    compile_node.attr[HAS_REFERENCE_VARS_ATTR].b = has_ref_vars
    for e in list(n.in_edges.values()):
        if e.is_control:
            add_control_edge(g, e.src, compile_node.id)

    # xla_run's arguments, optionally through CheckNumerics.
    run_args = []
    for i, (src, out) in enumerate(args):
        t = ty(src, out)
        if flags.check_cluster_input_numerics and t in FLOATING_TYPES:
            msg = f"CheckNumerics failed for input {i}({_tensor_name(g, src, out)}) into {func.name}"
            chk = b.add(f"check_input_{i}", "CheckNumerics", [(src, out)], {
                "T": lambda av, t=t: setattr(av, "type", t),
                "message": lambda av, m=msg: setattr(av, "s", m.encode()),
            })
            run_args.append((chk.id, 0))
        else:
            run_args.append((src, out))
    run_args += resources
    run_attrs = {
        "Targs": lambda av: _type_list(av, [ty(*x) for x in run_args]),
        "Tresults": lambda av: _type_list(av, out_types),
    }

    if strict:
        run = b.add("xla_run", XLA_RUN_OP, run_args + [(compile_node.id, 0)], run_attrs)
        for e in list(n.out_edges.values()):
            g.add_edge(run.id, e.src_output, e.dst, e.dst_input)
            g.remove_edge(e)
        g.remove_node(n.id)
    else:
        switch = b.add("predicated_compilation_key", "Switch", [(compile_node.id, 0), (compile_node.id, 1)],
                       {"T": lambda av: setattr(av, "type", DT_STRING)})
        run = b.add("xla_run", XLA_RUN_OP, run_args + [(switch.id, 1)], run_attrs)
        _merge_outgoing_control_edges(g, b, n, run)
        _merge_outgoing_data_edges(g, b, n, run, out_types, flags, func.name)
        for e in [e for e in n.in_edges.values() if e.is_control]:
            g.remove_edge(e)
        not_compiled = b.add("data_as_ctrl", "Identity", [(switch.id, 0)],
                             {"T": lambda av: setattr(av, "type", DT_STRING)})
        add_control_edge(g, not_compiled.id, n.id)
        del n.attr[COMPILED_KERNEL_ATTR]
        call = _replace_with_partitioned_call(g, b, n, func, out_types, config_proto)
        _predicate_int32_inputs(g, b, call, not_compiled)

    return ClusterBuild(
        mode=STRICT if strict else LAZY,
        reasons=reasons,
        detail="; ".join(details),
        device=device,
        device_candidates=candidates,
        # _XlaMustCompile (explicit jit_compile) inside the cluster plays no part here (tf-passes trap 34)
        must_compile_in_function=any(_attr_bool(nd, MUST_COMPILE_ATTR) for nd in fdef.node_def),
        # TF iterates EdgeSets; past EDGESET_INLINE edges their order is a pointer-hash order:
        # merge_oidx_* creation order (node ids only) / int32_id_n's input order are then TF's luck.
        merge_order_defined=out_edge_count <= EDGESET_INLINE,
        int32_order_defined=fallback_in_edges <= EDGESET_INLINE,
        has_reference_vars=has_ref_vars,
        constants=len(constants),
        args=len(args),
        resources=len(resources),
        scope=scope,
        created=list(b.created),
    )


def _merge_outgoing_control_edges(g: TfGraph, b: _Builder, old: TfNode, new: TfNode) -> None:
    ctrl = [e for e in old.out_edges.values() if e.is_control]
    if not ctrl:
        return
    if len(ctrl) == 1 and ctrl[0].dst == SINK_ID:
        add_control_edge(g, new.id, SINK_ID)
        return
    zero_int32 = _const_int32_empty
    old_data = b.add("ctrl_as_data", "Const", [], {"value": zero_int32, "dtype": _set_type(DT_INT32)})
    add_control_edge(g, old.id, old_data.id)
    new_data = b.add("ctrl_as_data", "Const", [], {"value": zero_int32, "dtype": _set_type(DT_INT32)})
    add_control_edge(g, new.id, new_data.id)
    merge = b.add("ctrl_merge", "Merge", [(old_data.id, 0), (new_data.id, 0)],
                  {"T": _set_type(DT_INT32), "N": lambda av: setattr(av, "i", 2)})
    as_ctrl = b.add("data_as_ctrl", "Identity", [(merge.id, 0)], {"T": _set_type(DT_INT32)})
    for e in ctrl:
        add_control_edge(g, as_ctrl.id, e.dst)
        g.remove_edge(e)


def _set_type(t: int):
    return lambda av: setattr(av, "type", t)


def _const_int32_empty(av) -> None:
    """``Tensor(DT_INT32, {0})`` as ``Input::Initializer`` writes it (no values, one dim of 0)."""
    av.tensor.dtype = DT_INT32
    av.tensor.tensor_shape.dim.add(size=0)


def _merge_outgoing_data_edges(g: TfGraph, b: _Builder, old: TfNode, new: TfNode, out_types,
                               flags, cluster_name: str) -> None:
    merged: dict[int, tuple[int, int]] = {}
    for e in [e for e in old.out_edges.values() if not e.is_control]:
        oidx = e.src_output
        if oidx not in merged:
            t = out_types[oidx]
            cur = (new.id, oidx)
            if flags.print_cluster_outputs:
                msg = f"output {oidx} from {old.name} is "
                p = b.add(f"print_{oidx}", "Print", [cur, cur], {
                    "T": _set_type(t),
                    "U": lambda av, t=t: _type_list(av, [t]),
                    "message": lambda av, m=msg: setattr(av, "s", m.encode()),
                    "first_n": lambda av: setattr(av, "i", 1000),
                    "summarize": lambda av: setattr(av, "i", -1),
                }, device=PRINT_DEVICE)
                cur = (p.id, 0)
            if flags.check_cluster_output_numerics and t in FLOATING_TYPES:
                msg = (f"CheckNumerics failed for output {oidx}({_tensor_name(g, *cur)}) "
                       f"from cluster {cluster_name}")
                c = b.add(f"check_output_{oidx}", "CheckNumerics", [cur], {
                    "T": _set_type(t),
                    "message": lambda av, m=msg: setattr(av, "s", m.encode()),
                }, device=new.device)
                cur = (c.id, 0)
            m = b.add(f"merge_oidx_{oidx}", XLA_MERGE_OP, [(old.id, oidx), cur], {"T": _set_type(t)})
            merged[oidx] = (m.id, 0)
        src, out = merged[oidx]
        dst, slot = e.dst, e.dst_input
        g.remove_edge(e)
        g.add_edge(src, out, dst, slot)


def _replace_with_partitioned_call(g: TfGraph, b: _Builder, n: TfNode, func, out_types,
                                   config_proto: bytes) -> TfNode:
    data = sorted((e for e in n.in_edges.values() if not e.is_control), key=lambda e: e.dst_input)
    args = [(e.src, e.src_output) for e in data]

    def fill_func(av):
        av.func.CopyFrom(func)

    call = b.add("stateful_partitioned_call", "StatefulPartitionedCall", args, {
        "Tin": lambda av: _type_list(av, [b.out_type(*x) for x in args]),
        "Tout": lambda av: _type_list(av, out_types),
        "f": fill_func,
        "config_proto": lambda av: setattr(av, "s", config_proto),
    })
    for e in list(n.in_edges.values()):
        if e.is_control:
            add_control_edge(g, e.src, call.id)
    for e in list(n.out_edges.values()):
        if e.is_control:
            add_control_edge(g, call.id, e.dst)
        else:
            g.add_edge(call.id, e.src_output, e.dst, e.dst_input)
        g.remove_edge(e)
    g.remove_node(n.id)
    return call


def _predicate_int32_inputs(g: TfGraph, b: _Builder, call: TfNode, predicate: TfNode) -> None:
    picked = []
    for e in call.in_edges.values():
        if e.is_control:
            continue
        if b.out_type(e.src, e.src_output) == DT_INT32 and not output_in_host_memory(
                g, e.src, e.src_output, b.lib_fns):
            picked.append(e)
    if not picked:
        return
    srcs = [(e.src, e.src_output) for e in picked]
    ident = b.add("int32_id_n", "IdentityN", srcs, {"T": lambda av: _type_list(av, [DT_INT32] * len(srcs))})
    add_control_edge(g, predicate.id, ident.id)
    for i, e in enumerate(picked):
        slot = e.dst_input
        g.remove_edge(e)
        g.add_edge(ident.id, i, call.id, slot)


# -- _XlaHasReferenceVars (the tail of EncapsulateSubgraphsPass) ---------------------------


def add_has_reference_vars_attrs(g: TfGraph) -> int:
    """Set ``_XlaHasReferenceVars`` on every op node (EncapsulateSubgraphsPass does this after
    its ``encapsulate_subgraphs_after`` dump). Returns how many are true."""
    related = nodes_related_to_ref_variables(g)
    for n in g.op_nodes():
        n.attr[HAS_REFERENCE_VARS_ATTR].b = n.id in related
    return len(related)


# -- doctest helper ------------------------------------------------------------------------


def _example_graph() -> TfGraph:
    """``x -> cluster_0 -> y`` on the CPU, as EncapsulateSubgraphsPass leaves it."""
    from google.protobuf import text_format

    cpu = DEVICES["cpu"]
    gd = protos.GraphDef()
    text_format.Parse(f"""
      node {{ name: "x" op: "_Arg" device: "{cpu}" attr {{ key: "T" value {{ type: DT_FLOAT }} }}
              attr {{ key: "index" value {{ i: 0 }} }} }}
      node {{ name: "y" op: "_Retval" input: "cluster_0" device: "{cpu}"
              attr {{ key: "T" value {{ type: DT_FLOAT }} }} attr {{ key: "index" value {{ i: 0 }} }} }}
      node {{ name: "cluster_0" op: "cluster_0" input: "x" device: "{cpu}"
              attr {{ key: "{COMPILED_KERNEL_ATTR}" value {{ b: true }} }}
              attr {{ key: "{NUM_CONSTANT_ARGS_ATTR}" value {{ i: 0 }} }}
              attr {{ key: "{NUM_RESOURCE_ARGS_ATTR}" value {{ i: 0 }} }} }}
      library {{ function {{ signature {{ name: "cluster_0" input_arg {{ name: "x_0_arg" type: DT_FLOAT }}
                                         output_arg {{ name: "neg_0_retval" type: DT_FLOAT }} }}
                            node_def {{ name: "Neg" op: "Neg" input: "x_0_arg" device: "{cpu}"
                                        attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
                            ret {{ key: "neg_0_retval" value: "Neg:y:0" }} }} }}
    """, gd)
    g = TfGraph.from_graph(Graph(gd))
    add_has_reference_vars_attrs(g)
    return g
