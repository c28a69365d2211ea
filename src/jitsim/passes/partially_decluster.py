"""TensorFlow 2.21's ``PartiallyDeclusterPass`` (POST_REWRITE_FOR_EXEC phase 30).

Three phases over the clusters ``MarkForCompilation`` made (tf-passes §12), each only
ever removing work from clusters:

A. *Device-to-host copies.* Visiting nodes consumers-first (post order of a name-sorted
   DFS, loop back edges ignored), a clustered node (not ``Shape``/``Rank``/``Size``, no
   resource input or output) is selected when one of its data outputs is produced in
   host memory and feeds, in host memory, a node outside its cluster (or one already
   selected). Each selected node gets an unclustered copy ``<name>/declustered`` (same
   inputs, same device) that takes over the out-of-cluster data consumers; the original
   is removed if nothing is left reading it. Memory types are TF's
   ``MemoryTypesForNode``, computed from TF's CPU/GPU kernel registrations
   (:func:`~jitsim.registry.kernels.find_kernel`). It matters mostly on GPU (int32 shape math lives in host
   memory there), but it also fires on CPU: a few CPU kernels keep int32 results in host
   memory (``BroadcastArgs``, ``BroadcastGradientArgs``, ``LinSpace``...) and a
   ``jit_compile`` call reads its constant arguments there (``_input_hostmem``).
B. *Recompilation.* Compile-time-constant analysis restricted to edges inside one
   cluster; then, in reverse post order, a must-be-constant node whose inputs all come
   from outside its cluster leaves the cluster, unless it must be compiled (its device
   always compiles, or TF has no regular kernel for it there). A ``Const`` leaves only
   when one of its inputs comes from another (non-empty) device. Chains peel off one by
   one because the order is reverse post order.
C. *Root shape consumers.* A clustered ``Shape``/``Rank``/``Size`` with no input from its
   own cluster leaves it.

Only ``_XlaCluster`` is removed; ``_XlaAlreadyClustered`` stays. Clusters may fall below
``tf_xla_min_cluster_size``; they are still compiled.

TF's kernel registry for CPU and GPU (plus ``DEFAULT`` kernels, TF's fallback for any
device) is read by :mod:`jitsim.analyses.devices`.
"""

from __future__ import annotations

from jitsim.codes import Code
from jitsim.errors import GraphError, JitsimError
from jitsim.registry import optypes
from jitsim.analyses.const_analysis import ConstAnalysis
from jitsim.analyses.devices import ALWAYS, registrations
from jitsim.graph.device_names import parse_device_name
from jitsim.registry.kernels import find_kernel
from jitsim.passes.increase_dynamism import cluster_of
from jitsim.passes.mark_for_compilation import ProcessState
from jitsim.records import PassResult
from jitsim.opsets import CONSTANT_OPS, IDENTITY_OPS, SHAPE_SIZE_RANK_OPS, WHILE_OPS
from jitsim.graph.tfgraph import TfGraph, TfNode, not_back_edge, post_order
from jitsim.registry import op_def
from jitsim.graph.custom_ops import with_custom_op_signatures
from jitsim.defs import CLUSTER_ATTR, INPUT_HOSTMEM_ATTR, MUST_COMPILE_ATTR
from jitsim.options import Options
from jitsim.opsets import MEMORY_TYPES_CALL_OPS

HOST_MEMORY, DEVICE_MEMORY = "HOST_MEMORY", "DEVICE_MEMORY"
DT_STRING_REF = optypes.DT_STRING + optypes.REF_OFFSET
# Ops MemoryTypesForNode treats as function calls (no kernel def consulted).


# -- memory types (core/framework/memory_types.cc) ------------------------------------------------


def _signature(nodedef, fns):
    if fns and nodedef.op in fns:
        return fns[nodedef.op].signature, None

    od = op_def(nodedef.op)
    return od, od


def _name_ranges(args, nodedef, opdef) -> dict[str, tuple[int, int]]:
    out, start = {}, 0
    for a in args:
        if a.number_attr:
            av = optypes.attr_or_default(nodedef, opdef, a.number_attr)
            n = av.i if av is not None else 0
        elif a.type_list_attr:
            av = optypes.attr_or_default(nodedef, opdef, a.type_list_attr)
            n = len(av.list.type) if av is not None else 0
        else:
            n = 1
        out[a.name] = (start, start + n)
        start += n
    return out


def _int_list_attr(nodedef, name: str) -> list[int]:
    if name not in nodedef.attr:
        return []
    av = nodedef.attr[name]
    return list(av.list.i) if av.WhichOneof("value") == "list" else []


# Attr kinds that can change a node's dtypes, argument lengths or kernel match (not tensors,
# shapes or functions), plus the attrs MemoryTypesForNode reads itself.
_KEY_ATTR_KINDS = frozenset({"type", "list(type)", "int", "list(int)", "bool", "string", "list(string)"})
_SPECIAL_ATTRS = ("_kernel", MUST_COMPILE_ATTR, INPUT_HOSTMEM_ATTR, "_output_hostmem")


class MemoryTypes:
    """TF's ``MemoryTypesForNode`` (plus the node's input and output dtypes), cached per
    device type, op and the attrs that can influence the answer."""

    def __init__(self, g: TfGraph):
        self.fns = {f.signature.name: f for f in g.library.function}
        self._key_attrs: dict[str, tuple[str, ...]] = {}
        self._cache: dict[tuple, tuple] = {}
        self._dev: dict[str, str] = {}

    def device_type(self, name: str) -> str:
        t = self._dev.get(name)
        if t is None:
            t = self._dev[name] = _device_type(name)
        return t

    def key(self, nodedef, device_type: str) -> tuple:
        op = nodedef.op
        names = self._key_attrs.get(op)
        if names is None:
            od = None if op in self.fns else op_def(op)
            names = tuple(a.name for a in od.attr if a.type in _KEY_ATTR_KINDS) if od is not None else ()
            names = self._key_attrs[op] = names + _SPECIAL_ATTRS
        attr = nodedef.attr
        return device_type, op, tuple(attr[n].SerializeToString() if n in attr else None for n in names)

    def dtypes(self, nodedef, key: tuple) -> tuple[list[int], list[int]]:
        """The node's input and output dtypes (``key`` from :meth:`key`)."""
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = [optypes.input_types(nodedef, self.fns) or [],
                                      optypes.output_types(nodedef, self.fns) or [], None]
        return hit[0], hit[1]

    def memory_types(self, nodedef, key: tuple) -> tuple[list[str], list[str]]:
        """Input and output memory types on device type ``key[0]``."""
        self.dtypes(nodedef, key)
        hit = self._cache[key]
        if hit[2] is None:
            hit[2] = self.for_node(nodedef, key[0])
        return hit[2]

    def for_node(self, nodedef, device_type: str) -> tuple[list[str], list[str]]:
        sig, od = _signature(nodedef, self.fns)
        if sig is None:
            raise GraphError(f"node {nodedef.name!r}: op {nodedef.op!r} is not registered")
        kdef = find_kernel(nodedef, device_type)
        in_t = optypes.input_types(nodedef, self.fns) or []
        out_t = optypes.output_types(nodedef, self.fns) or []
        must = MUST_COMPILE_ATTR in nodedef.attr and nodedef.attr[MUST_COMPILE_ATTR].b
        has_kernel_def = kdef is not None and nodedef.op not in MEMORY_TYPES_CALL_OPS
        int32_on_device = has_kernel_def or device_type == "TPU" or must

        def host_required(dt: int) -> bool:
            return dt in (optypes.DT_STRING, DT_STRING_REF, optypes.DT_RESOURCE) or (
                dt == optypes.DT_INT32 and not int32_on_device)

        if has_kernel_def:
            in_r = _name_ranges(sig.input_arg, nodedef, od)
            out_r = _name_ranges(sig.output_arg, nodedef, od)
            in_m = [DEVICE_MEMORY] * max([r[1] for r in in_r.values()], default=0)
            out_m = [DEVICE_MEMORY] * max([r[1] for r in out_r.values()], default=0)
            left = []
            for arg in kdef.host_memory_arg:
                if arg in in_r:
                    for j in range(*in_r[arg]):
                        in_m[j] = HOST_MEMORY
                else:
                    left.append(arg)
            still = []
            for arg in left:
                if arg in out_r:
                    for j in range(*out_r[arg]):
                        out_m[j] = HOST_MEMORY
                else:
                    still.append(arg)
            if still:
                raise GraphError(f"HostMemory args {still} of the {device_type} kernel of {nodedef.op} "
                                 "are not in its OpDef")
        else:
            in_m = [DEVICE_MEMORY] * len(in_t)
            out_m = [DEVICE_MEMORY] * len(out_t)
        for i in range(min(len(in_m), len(in_t))):
            if host_required(in_t[i]):
                in_m[i] = HOST_MEMORY
        for i in range(min(len(out_m), len(out_t))):
            if host_required(out_t[i]):
                out_m[i] = HOST_MEMORY
        for i in _int_list_attr(nodedef, INPUT_HOSTMEM_ATTR):
            if 0 <= i < len(in_m):
                in_m[i] = HOST_MEMORY
        for i in _int_list_attr(nodedef, "_output_hostmem"):
            if 0 <= i < len(out_m):
                out_m[i] = HOST_MEMORY
        return in_m, out_m


def _device_type(name: str) -> str:
    """TF's ``DeviceNameToDeviceType`` (an empty name gives the empty type)."""
    if not name:
        return ""
    p = parse_device_name(name)
    if p is None:
        raise GraphError(f"Malformed assigned device {name!r}")
    return p.type or ""


# -- phase A --------------------------------------------------------------------------------------


def _find_device_to_host_copies(g: TfGraph, post: list[TfNode], mt: MemoryTypes) -> dict[int, dict]:
    """Node id -> evidence for every node phase A declusters (insertion order = ``post``)."""
    nodes = g.nodes
    selected: dict[int, dict] = {}
    for n in post:
        cluster = cluster_of(n.nodedef)
        if cluster is None or n.op in SHAPE_SIZE_RANK_OPS:
            continue
        key = mt.key(n.nodedef, None)
        in_t, out_t = mt.dtypes(n.nodedef, key)
        if optypes.DT_RESOURCE in in_t or optypes.DT_RESOURCE in out_t:
            continue  # TF's HasResourceInputOrOutput: never run a variable update twice
        dev_t = mt.device_type(n.device)
        out_m = mt.memory_types(n.nodedef, (dev_t,) + key[1:])[1]
        for e in n.out_edges.values():
            if e.is_control or out_m[e.src_output] == DEVICE_MEMORY:
                continue
            dst = nodes[e.dst]
            mt.device_type(dst.device)  # TF parses it (and fails on a malformed name) but uses n's type
            dst_in = mt.memory_types(dst.nodedef, mt.key(dst.nodedef, dev_t))[0]
            if dst_in[e.dst_input] != HOST_MEMORY:
                continue
            dst_cluster = None if dst.id in selected else cluster_of(dst.nodedef)
            if dst_cluster != cluster:
                selected[n.id] = {"consumer": dst.name, "output": e.src_output, "consumer_input": e.dst_input,
                                  "cluster": cluster, "consumer_cluster": dst_cluster, "device_type": dev_t}
                break
    return selected


def _merge_debug_info(nodedef) -> None:
    """``MergeDebugInfo`` of a node's copy with itself: original names become a sorted set."""
    if not nodedef.HasField("experimental_debug_info"):
        return
    info = nodedef.experimental_debug_info
    for field in (info.original_node_names, info.original_func_names):
        if len(field):
            merged = sorted(set(field))
            del field[:]
            field.extend(merged)


def _decluster_copy(g: TfGraph, n: TfNode) -> tuple[int, bool]:
    """TF's ``PartiallyDeclusterNode``: returns the copy's id and whether ``n`` was removed."""
    cluster = cluster_of(n.nodedef)
    nodes = g.nodes
    moved = [e for e in n.out_edges.values() if not e.is_control and cluster_of(nodes[e.dst].nodedef) != cluster]
    if not moved:
        raise JitsimError(f"PartiallyDecluster: {n.name} has no consumer outside its cluster")
    nd = type(n.nodedef)()
    nd.CopyFrom(n.nodedef)
    nd.name = n.name + "/declustered"
    _merge_debug_info(nd)
    del nd.attr[CLUSTER_ATTR]
    clone = g.add_node(nd)
    for e in list(n.in_edges.values()):
        g.add_edge(e.src, e.src_output, clone.id, e.dst_input)
    for e in moved:
        g.add_edge(clone.id, e.src_output, e.dst, e.dst_input)
        g.remove_edge(e)
    removed = not n.out_edges
    if removed:
        g.remove_node(n.id)
    return clone.id, removed


def _post_order(g: TfGraph) -> list[TfNode]:
    """TF's ``DFS`` from ``_SOURCE`` with ``NodeComparatorName`` and ``NotBackedge`` (a
    NextIteration's out-edges are not followed): every reached node in leave order."""
    return post_order(g, by_name=True, edge_filter=not_back_edge(g))


def reduce_device_to_host_copies(g: TfGraph, result: PassResult, mt: MemoryTypes | None = None,
                                 ) -> tuple[bool, list[TfNode]]:
    """Phase A; returns whether the graph changed and its post order (after the change)."""
    mt = mt or MemoryTypes(g)
    post = _post_order(g)
    selected = _find_device_to_host_copies(g, post, mt)
    for n in post:
        if n.id not in selected:
            continue
        name = n.name
        clone, removed = _decluster_copy(g, n)
        ev = selected[n.id]
        result.decide(name, Code.DECLUSTERED_DEVICE_TO_HOST_COPY,
                      f"output {ev['output']} lives in host memory and {ev['consumer']} (outside cluster "
                      f"{ev['cluster']}) reads it in host memory: an unclustered copy {g.nodes[clone].name} feeds it",
                      clone=g.nodes[clone].name, original_removed=removed, **ev)
    if selected:
        post = _post_order(g)
        again = _find_device_to_host_copies(g, post, mt)
        if again:
            names = [g.nodes[i].name for i in again]
            raise JitsimError(f"PartiallyDecluster: nodes still need declustering after phase A: {names}")
    return bool(selected), post


# -- phase B --------------------------------------------------------------------------------------


def _must_compile(n: TfNode, regs) -> tuple[bool, str]:
    """TF's ``MustCompileNode``: (must compile, why)."""
    dev_t = _device_type(n.device)
    reg = regs.get(dev_t)
    if reg is not None and reg.policy == ALWAYS:
        return True, f"device type {dev_t} always compiles"
    if dev_t not in ("CPU", "GPU"):
        # jitsim ships TF's regular kernels for CPU and GPU only: assume it needs compiling
        return True, f"no kernel registry for device type {dev_t or '(none)'}; assumed to need compilation"
    if find_kernel(n.nodedef, dev_t) is None:
        return True, f"no TensorFlow {dev_t or '(no device)'} kernel for {n.op} with these attrs"
    return False, ""


def _const_consumers(g: TfGraph, n: TfNode, must: bytearray, clusters: dict[int, str | None],
                     analysis: ConstAnalysis) -> list[str]:
    """In-cluster consumers that need ``n``'s value at compile time (evidence only): followed
    through Identity/IdentityN/While as the analysis looks through them."""
    nodes = g.nodes
    out: list[str] = []
    cluster = clusters.get(n.id)
    stack = [(n.id, e) for e in n.out_edges.values() if not e.is_control]
    seen = set()
    while stack:
        _, e = stack.pop()
        if e.id in seen or clusters.get(e.dst) != cluster:
            continue
        seen.add(e.id)
        dst = nodes[e.dst]
        if dst.op in IDENTITY_OPS or dst.op == "IdentityN" or dst.op in WHILE_OPS:
            port = 0 if dst.op in IDENTITY_OPS else e.dst_input
            stack.extend((dst.id, x) for x in dst.out_edges.values() if not x.is_control and x.src_output == port)
            continue
        try:
            wanted = must[dst.id] or e.dst_input in analysis.const_input_indices(dst)
        except Exception:  # evidence only; never fail the pass on it
            wanted = bool(must[dst.id])
        if wanted and dst.name not in out:
            out.append(dst.name)
    return out


def reduce_recompilation(g: TfGraph, result: PassResult, regs, analysis: ConstAnalysis, rpo: list[TfNode]) -> bool:
    """Phase B; True if some node left its cluster."""
    clusters = {n.id: cluster_of(n.nodedef) for n in g.op_nodes()}
    if not any(c is not None for c in clusters.values()):
        return False
    nodes = g.nodes

    def intra_cluster(e) -> bool:
        c = clusters.get(e.src)
        return c is not None and c == clusters.get(e.dst)

    must = analysis.run(g, None, intra_cluster)
    live = dict(clusters)
    changed = False
    for n in rpo:
        if not must[n.id]:
            continue
        cluster = live[n.id]
        if any(live.get(e.src) == cluster for e in n.in_edges.values()):
            continue
        forced, why = _must_compile(n, regs)
        if forced:
            continue
        consumers = _const_consumers(g, n, must, clusters, analysis)
        name = n.name
        if n.op in CONSTANT_OPS:
            cross = [nodes[e.src] for e in n.in_edges.values()
                     if nodes[e.src].device and nodes[e.src].device != n.device]
            if not cross:
                continue
            del n.nodedef.attr[CLUSTER_ATTR]
            live[n.id] = None
            result.decide(name, Code.DECLUSTERED_CONST_CROSS_DEVICE,
                          f"must-be-constant Const with an input from another device ({cross[0].name} on "
                          f"{cross[0].device}) left {cluster}", cluster=cluster, input=cross[0].name,
                          input_device=cross[0].device, consumers=consumers)
        else:
            del n.nodedef.attr[CLUSTER_ATTR]
            live[n.id] = None
            result.decide(name, Code.DECLUSTERED_RECOMPILATION,
                          f"its value must be a compile-time constant of {cluster} "
                          f"(for {', '.join(consumers) or 'a consumer'}) and all its inputs come from outside "
                          "the cluster: computed outside so that fewer distinct constants reach the compiler",
                          cluster=cluster, consumers=consumers)
        changed = True
    return changed


# -- phase C --------------------------------------------------------------------------------------


def decluster_root_shape_consumers(g: TfGraph, result: PassResult, rpo: list[TfNode]) -> bool:
    """Phase C; True if some shape consumer left its cluster."""
    nodes = g.nodes
    changed = False
    for n in rpo:
        if n.op not in SHAPE_SIZE_RANK_OPS:
            continue
        cluster = cluster_of(n.nodedef)
        if cluster is None:
            continue
        if any(cluster_of(nodes[e.src].nodedef) == cluster for e in n.in_edges.values()):
            continue
        del n.nodedef.attr[CLUSTER_ATTR]
        srcs = [nodes[e.src].name for e in n.in_edges.values() if not e.is_control]
        name = n.name
        result.decide(name, Code.DECLUSTERED_ROOT_SHAPE_CONSUMER,
                      f"{n.op} of {', '.join(srcs) or 'nothing'}, which is outside {cluster}: "
                      "only the shape is needed, computed outside the cluster", cluster=cluster, inputs=srcs)
        changed = True
    return changed


# -- the pass -------------------------------------------------------------------------------------


@with_custom_op_signatures
def partially_decluster(g: TfGraph, options: Options, state: ProcessState | None = None, *,
                        analysis: ConstAnalysis | None = None) -> PassResult:
    """Run phases A, B and C on ``g`` in place.

    ``options.flags`` only matters through ``tf_xla_enable_xla_devices`` (XLA_CPU/XLA_GPU
    devices always compile) and ``--tf_xla_cpu_global_jit``, which selects the CPU registration
    like mark-for-compilation: as the process froze it (``state.cpu_global_jit_at_startup``,
    set by the first mark-for-compilation of the process), else as the flags say.
    """
    result = PassResult()
    flags = options.flags
    cpu_jit = flags.cpu_global_jit if state is None or state.cpu_global_jit_at_startup is None \
        else state.cpu_global_jit_at_startup
    regs = registrations(cpu_jit, flags.enable_xla_devices)
    if not any(cluster_of(n.nodedef) is not None for n in g.op_nodes()):
        return result
    changed, post = reduce_device_to_host_copies(g, result)
    rpo = post[::-1]  # phase A leaves the graph as this order describes
    analysis = analysis or ConstAnalysis(g.library)
    changed |= reduce_recompilation(g, result, regs, analysis, rpo)
    changed |= decluster_root_shape_consumers(g, result, rpo)  # phase B changes no edge: same order
    result.changed = changed
    return result

