"""TensorFlow 2.21's ``IncreaseDynamismForAutoJitPass`` (POST_REWRITE_FOR_EXEC phase 20).

A clustered ``Slice`` whose ``size`` is a rank-1 ``Const`` (all elements >= -1) but whose
``begin`` is not a constant makes XLA compile one executable per ``begin`` value when the
size has ``-1`` entries (the output shape depends on ``begin``). The pass replaces such a
slice with a "static shaped" one whose ``size`` input is computed explicitly and marked
as the only compile-time-constant input (``_XlaCompileTimeConstantInputs = ["size"]``),
so the compiled shape depends on the size alone (tf-passes §11).

For a slice ``S`` in cluster ``C``, new nodes live under ``S/static_shaped_slice/`` (made
unique like TF's ``Scope`` does), all carry ``_XlaCluster = C`` (no
``_XlaAlreadyClustered``); helper nodes go on the CPU device of ``S``'s host:

* ``begin_s64`` / ``size_s64``: ``Cast`` to int64 when needed;
* only when some size element is -1: ``input_shape`` (``Shape``, int64), per dimension
  either a cached 1-element constant ``const_<v>`` or
  ``slice_size_<i> = input_shape_<i> - begin_<i>`` (1-element ``Slice``s), then
  ``slice_size`` = ``ConcatV2`` over ``concat_axis`` unless there is a single dimension.
  Constants inherit the control inputs of the original size node;
* ``static_shaped_slice``: the new ``Slice`` on ``S``'s own device. It takes over all of
  ``S``'s out-edges and control inputs; ``S`` is removed.

Candidates are collected first (node-id order), then rewritten one by one (inputs are
re-read at rewrite time, as TF does); the graph's source/sink edges are fixed up once.
"""

from __future__ import annotations

import struct

from jitsim.codes import Code
from jitsim.errors import GraphError
from jitsim.registry import protos
from jitsim.registry import optypes
from jitsim.graph.device_names import parse_device_name
from jitsim.records import PassResult
from jitsim.opsets import CONSTANT_OPS
from jitsim.graph.tfgraph import TfGraph, TfNode
from jitsim.registry import op_def
from jitsim.graph.custom_ops import with_custom_op_signatures
from jitsim.defs import CLUSTER_ATTR, COMPILE_TIME_CONSTANT_INPUTS_ATTR
from jitsim.options import Options

CONST_INPUTS_ATTR = COMPILE_TIME_CONSTANT_INPUTS_ATTR
DT_INT32, DT_INT64 = optypes.DT_INT32, optypes.DT_INT64


# -- small TF utilities ------------------------------------------------------------------------


def cluster_of(nodedef) -> str | None:
    """TF's ``GetXlaClusterForNode``: the string ``_XlaCluster`` attr, or None."""
    if nodedef is None or CLUSTER_ATTR not in nodedef.attr:
        return None
    av = nodedef.attr[CLUSTER_ATTR]
    if av.WhichOneof("value") != "s":
        return None
    return av.s.decode()


def int_tensor(tp) -> tuple[list[int], list[int]] | None:
    """``(shape, values)`` of an int32/int64 ``TensorProto`` (TF's ``Tensor::FromProto``:
    packed ``tensor_content`` or repeated values, the last value repeated to fill), or None
    for another dtype or a malformed proto."""
    if tp.dtype not in (DT_INT32, DT_INT64):
        return None
    if tp.tensor_shape.unknown_rank:
        return None
    shape = [d.size for d in tp.tensor_shape.dim]
    if any(s < 0 for s in shape):
        return None
    n = 1
    for s in shape:
        n *= s
    width, fmt = (4, "i") if tp.dtype == DT_INT32 else (8, "q")
    if tp.tensor_content:
        if len(tp.tensor_content) != n * width:
            return None
        return shape, list(struct.unpack(f"<{n}{fmt}", tp.tensor_content))
    vals = list(tp.int_val if tp.dtype == DT_INT32 else tp.int64_val)
    if len(vals) > n:
        return None
    if n and not vals:
        vals = [0]
    vals += [vals[-1]] * (n - len(vals)) if n else []
    return shape, vals


def device_name_to_cpu_device_name(name: str) -> str:
    """TF's ``DeviceNameToCpuDeviceName``: the same job/replica/task with ``device:CPU:0``."""
    p = parse_device_name(name) if name else None
    if name and p is None:
        raise GraphError(f"Could not parse device name {name!r}")
    out = ""
    if p is not None:
        if p.job is not None:
            out += f"/job:{p.job}"
        if p.replica is not None:
            out += f"/replica:{p.replica}"
        if p.task is not None:
            out += f"/task:{p.task}"
    return out + "/device:CPU:0"


def add_default_attrs(nodedef) -> None:
    """Give ``nodedef`` every OpDef attr default it does not set (as ``NodeBuilder`` does)."""
    od = op_def(nodedef.op)
    if od is None:
        return
    for a in od.attr:
        if a.name not in nodedef.attr and a.HasField("default_value"):
            nodedef.attr[a.name].CopyFrom(a.default_value)


def add_control_edge_once(g: TfGraph, src: int, dst: int) -> None:
    """TF's ``Graph::AddControlEdge`` (duplicates not allowed): no-op if the edge exists."""
    for e in g.nodes[dst].in_edges.values():
        if e.is_control and e.src == src:
            return
    g.add_control_edge(src, dst)


def output_dtype(g: TfGraph, nid: int, out: int, fallback: int) -> int:
    """Base dtype of output ``out`` of node ``nid`` (``Output::type()`` with refs stripped)."""
    n = g.nodes[nid]
    fns = {f.signature.name: f for f in g.library.function} if g.library.function else None
    types = optypes.output_types(n.nodedef, fns) if n.nodedef is not None else None
    if not types or out >= len(types):
        return fallback
    t = types[out]
    return t - optypes.REF_OFFSET if optypes.is_ref_type(t) else t


def _type_attr(nodedef, name: str, default: int) -> int:
    if name in nodedef.attr and nodedef.attr[name].WhichOneof("value") == "type":
        return nodedef.attr[name].type
    return default


class _Scope:
    """The part of TF's C++ ``Scope`` the rewrite uses: a sub-scope made unique against the
    graph's node names (and their ``/`` prefixes), op names unique inside it, a cluster
    attr and an assigned device per node."""

    def __init__(self, g: TfGraph, sub: str, cluster: str):
        self.g = g
        self.cluster = cluster
        self.prefix = self._unique_subscope(sub)
        self.used: dict[str, int] = {}
        self.created: list[str] = []

    def _unique_subscope(self, sub: str) -> str:
        taken = set()
        for name in self.g.by_name:
            if name == sub or name.startswith(sub):
                taken.add(name)
                idx = name.find("/")
                while idx != -1:
                    taken.add(name[:idx])
                    idx = name.find("/", idx + 1)
        if sub not in taken:
            return sub
        k = 0
        while True:
            k += 1
            cand = f"{sub}_{k}"
            if cand not in taken:
                return cand

    def _op_name(self, name: str) -> str:
        if name in self.used:
            while True:
                self.used[name] += 1
                cand = f"{name}_{self.used[name]}"
                if cand not in self.used:
                    break
            name = cand
        self.used[name] = 0
        return f"{self.prefix}/{name}"

    def add(self, name: str, op: str, device: str, inputs: list[tuple[int, int]], attrs: dict) -> int:
        nd = protos.NodeDef(name=self._op_name(name), op=op, device=device)
        for k, v in attrs.items():
            nd.attr[k].CopyFrom(v)
        add_default_attrs(nd)
        nd.attr[CLUSTER_ATTR].s = self.cluster.encode()
        node = self.g.add_node(nd)
        for slot, (src, out) in enumerate(inputs):
            self.g.add_edge(src, out, node.id, slot)
        self.created.append(nd.name)
        return node.id


def _type(t: int):
    return protos.AttrValue(type=t)


def _const_1d_int64(v: int):
    tp = protos.AttrValue()
    tp.tensor.dtype = DT_INT64
    tp.tensor.tensor_shape.dim.add(size=1)
    tp.tensor.int64_val.append(v)
    return tp


def _const_scalar_int32(v: int):
    tp = protos.AttrValue()
    tp.tensor.dtype = DT_INT32
    tp.tensor.tensor_shape.SetInParent()
    tp.tensor.int_val.append(v)
    return tp


# -- the pass ---------------------------------------------------------------------------------


class _SliceInputs:
    __slots__ = ("input", "begin", "size", "size_node", "sizes")

    def __init__(self, inp, begin, size, size_node, sizes):
        self.input, self.begin, self.size, self.size_node, self.sizes = inp, begin, size, size_node, sizes


def slice_inputs(g: TfGraph, n: TfNode) -> _SliceInputs | None:
    """TF's ``GetSliceInputs``: the three producers, and the size if it is a rank-1 ``Const``."""
    edges = {}
    for e in n.in_edges.values():
        if not e.is_control:
            edges[e.dst_input] = e
    for i in (0, 1, 2):
        if i not in edges:
            raise GraphError(f"Slice {n.name!r} has no input {i}")
    size_node = g.nodes[edges[2].src]
    if size_node.op != "Const":
        return None
    if "value" not in size_node.attr:
        raise GraphError(f"Const {size_node.name!r} has no value")
    parsed = int_tensor(size_node.attr["value"].tensor)
    if parsed is None:
        raise GraphError(f"Const {size_node.name!r}: cannot read its value as an integer tensor")
    shape, vals = parsed
    if len(shape) != 1:
        return None
    return _SliceInputs((edges[0].src, edges[0].src_output), (edges[1].src, edges[1].src_output),
                        (edges[2].src, edges[2].src_output), size_node, vals)


def should_rewrite(g: TfGraph, n: TfNode) -> tuple[bool, _SliceInputs | None]:
    """TF's ``ShouldRewriteSlice``."""
    if n.op != "Slice" or cluster_of(n.nodedef) is None:
        return False, None
    si = slice_inputs(g, n)
    if si is None:
        return False, None
    if not all(v >= -1 for v in si.sizes):
        return False, si
    return g.nodes[si.begin[0]].op not in CONSTANT_OPS, si


def rewrite_slice(g: TfGraph, n: TfNode, si: _SliceInputs, cluster: str) -> tuple[int, list[str]]:
    """Replace slice ``n`` by a static-shaped one; returns the new slice's id and the names created."""
    host = device_name_to_cpu_device_name(n.device)
    scope = _Scope(g, f"{n.name}/static_shaped_slice", cluster)
    index_t = _type_attr(n.nodedef, "Index", DT_INT32)
    in_t = output_dtype(g, si.input[0], si.input[1], _type_attr(n.nodedef, "T", 1))

    def int64(name: str, x: tuple[int, int]) -> tuple[int, int]:
        t = output_dtype(g, x[0], x[1], index_t)
        if t == DT_INT64:
            return x
        nid = scope.add(f"{name}_s64", "Cast", host, [x], {"SrcT": _type(t), "DstT": _type(DT_INT64)})
        return nid, 0

    begin = int64("begin", si.begin)
    size = int64("size", si.size)
    ctrl_deps = [e.src for e in si.size_node.in_edges.values() if e.is_control]

    if any(v < 0 for v in si.sizes):
        shape = scope.add("input_shape", "Shape", host, [si.input], {"T": _type(in_t), "out_type": _type(DT_INT64)})
        consts: dict[int, int] = {}

        def const(v: int) -> tuple[int, int]:
            if v not in consts:
                nid = scope.add(f"const_{v}", "Const", host, [],
                                {"value": _const_1d_int64(v), "dtype": _type(DT_INT64)})
                for src in ctrl_deps:
                    add_control_edge_once(g, src, nid)
                consts[v] = nid
            return consts[v], 0

        parts: list[tuple[int, int]] = []
        for i, v in enumerate(si.sizes):
            if v >= 0:
                parts.append(const(v))
                continue
            # C++ evaluates the call's arguments left to right here (clang): const_<i>, then const_1.
            start, one = const(i), const(1)
            b_i = scope.add(f"begin_{i}", "Slice", host, [begin, start, one],
                            {"T": _type(DT_INT64), "Index": _type(DT_INT64)})
            s_i = scope.add(f"input_shape_{i}", "Slice", host, [(shape, 0), start, one],
                            {"T": _type(DT_INT64), "Index": _type(DT_INT64)})
            parts.append((scope.add(f"slice_size_{i}", "Sub", host, [(s_i, 0), (b_i, 0)], {"T": _type(DT_INT64)}), 0))
        if len(parts) == 1:
            size = parts[0]
        else:
            axis = scope.add("concat_axis", "Const", host, [],
                             {"value": _const_scalar_int32(0), "dtype": _type(DT_INT32)})
            for src in ctrl_deps:
                add_control_edge_once(g, src, axis)
            size = (scope.add("slice_size", "ConcatV2", host, parts + [(axis, 0)],
                              {"N": protos.AttrValue(i=len(parts)), "T": _type(DT_INT64),
                               "Tidx": _type(DT_INT32)}), 0)

    new = scope.add("static_shaped_slice", "Slice", n.device, [si.input, begin, size],
                    {"T": _type(in_t), "Index": _type(DT_INT64)})
    new_nd = g.nodes[new].nodedef
    new_nd.attr[CONST_INPUTS_ATTR].list.s.append(b"size")

    # Hand over the old slice's consumers and control inputs, then drop it.
    for e in list(n.out_edges.values()):
        g.remove_edge(e)
        g.add_edge(new, e.src_output, e.dst, e.dst_input)
    for e in list(n.in_edges.values()):
        if e.is_control:
            add_control_edge_once(g, e.src, new)
    g.remove_node(n.id)
    return new, scope.created


@with_custom_op_signatures
def increase_dynamism_for_auto_jit(g: TfGraph, options: Options | None = None) -> PassResult:
    """Rewrite every dynamic-begin clustered ``Slice`` of ``g`` in place (``options`` is taken
    as every pass takes it; TF only reads ``tf_xla_clustering_debug`` here, to dump graphs)."""
    result = PassResult()
    todo = []
    for n in g.op_nodes():
        ok, _ = should_rewrite(g, n)
        if ok:
            todo.append(n)
    for n in todo:
        si = slice_inputs(g, n)
        if si is None:
            raise GraphError(f"Slice {n.name!r} stopped being rewritable during the pass")
        cluster = cluster_of(n.nodedef)
        sizes = list(si.sizes)
        name = n.name
        new, created = rewrite_slice(g, n, si, cluster)
        result.decide(name, Code.SLICE_MADE_STATIC,
                      f"begin is computed at run time; replaced by {g.nodes[new].name} whose shape depends "
                      f"only on its constant size {sizes}",
                      cluster=cluster, size=sizes, replacement=g.nodes[new].name, created=created)
    if todo:
        g.fixup_source_and_sink_edges()
        result.changed = True
    return result

