"""TensorFlow's own C++ tests of the JIT passes, re-expressed as GraphDef inputs for jitsim.

Each test here rebuilds the graph one TEST of ``tensorflow/compiler/jit/<file>_test.cc`` builds
(same node names, same node-id order, same devices and flags as TF's harness gives them),
runs jitsim's pass the way that TEST runs TF's, and checks what the TEST checks. The TEST's
name is in each docstring; docs/tf-pass-tests.md lists every TEST of the files covered here
and why the few that are not here cannot be expressed as a graph.

Files: build_xla_ops_pass_test.cc, force_xla_constants_on_host_pass_test.cc,
increase_dynamism_for_auto_jit_pass_test.cc, partially_decluster_pass_test.cc,
deadness_analysis_test.cc, encapsulate_subgraphs_pass_test.cc.

How TF's harnesses translate:

* TF's ``Scope`` gives a second node asking for a taken name the suffix ``_1``; node ids follow
  creation order, so the GraphDefs below list nodes in the order the TEST creates them.
* A harness that sets *assigned* devices (which a NodeDef cannot hold) is modelled by the
  NodeDef's ``device``, which is what jitsim's passes read as the assigned device.
* ``DeviceFactory::AddDevices`` in a TEST's setup creates TF's XLA_CPU / XLA_GPU devices, which
  registers them for compilation; TF 2.21 only does that under ``--tf_xla_enable_xla_devices``,
  so those TESTs run with that flag.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from google.protobuf import text_format

from jitsim.errors import GraphError
from jitsim.registry import protos
from jitsim.graph.model import Graph
from jitsim.passes.build_xla_ops import build_xla_ops
from jitsim.analyses.deadness import deadness_analysis
from jitsim.options import options_for
from jitsim.passes.force_constants_on_host import force_xla_constants_on_host
from jitsim.passes.increase_dynamism import increase_dynamism_for_auto_jit
from jitsim.passes.partially_decluster import partially_decluster
from jitsim.graph.tfgraph import SINK_ID, TfGraph
from jitsim.registry import OpLibrary, using_op_libraries

_DT = protos.DataType.values_by_name
F32, I32, I64, BOOL, RES = (_DT[n].number for n in ("DT_FLOAT", "DT_INT32", "DT_INT64", "DT_BOOL", "DT_RESOURCE"))

NO_FLAGS = options_for("")
XLA_DEVICES = options_for("--tf_xla_enable_xla_devices")


# -- building graphs -----------------------------------------------------------------------------


def ty(t: int) -> protos.AttrValue:
    return protos.AttrValue(type=t)


def types(*ts: int) -> protos.AttrValue:
    av = protos.AttrValue()
    av.list.SetInParent()
    av.list.type.extend(ts)
    return av


def tensor(values, dtype=I32, shape=None) -> protos.AttrValue:
    """A Const ``value``: ``values`` a flat list (``shape`` defaults to its length), or a scalar."""
    av = protos.AttrValue()
    t = av.tensor
    t.dtype = dtype
    t.tensor_shape.SetInParent()
    if not isinstance(values, list):
        values = [values]
        shape = [] if shape is None else shape
    for s in ([len(values)] if shape is None else shape):
        t.tensor_shape.dim.add(size=s)
    field = {I32: t.int_val, I64: t.int64_val, F32: t.float_val, BOOL: t.bool_val}[dtype]
    field.extend(values)
    return av


def shape(*dims: int) -> protos.AttrValue:
    av = protos.AttrValue()
    av.shape.SetInParent()
    for d in dims:
        av.shape.dim.add(size=d)
    return av


def func(name: str) -> protos.AttrValue:
    av = protos.AttrValue()
    av.func.name = name
    return av


class GraphBuilder:
    """Nodes in TF's node-id order; ``device`` is given to every node that names none."""

    def __init__(self, device: str = ""):
        self.gd = protos.GraphDef()
        self.device = device

    def add(self, name, op, inputs=(), *, device=None, cluster=None, **attrs):
        nd = self.gd.node.add(name=name, op=op, device=self.device if device is None else device)
        nd.input.extend(inputs)
        for k, v in attrs.items():
            if isinstance(v, protos.AttrValue):
                nd.attr[k].CopyFrom(v)
            elif isinstance(v, bool):
                nd.attr[k].b = v
            elif isinstance(v, int):
                nd.attr[k].i = v
            elif isinstance(v, (str, bytes)):
                nd.attr[k].s = v.encode() if isinstance(v, str) else v
            elif isinstance(v, list):
                nd.attr[k].list.SetInParent()
                nd.attr[k].list.s.extend(x.encode() for x in v)
            else:
                raise TypeError(v)
        if cluster:
            nd.attr["_XlaCluster"].s = cluster.encode()
        return nd

    def node(self, name):
        return next(n for n in self.gd.node if n.name == name)

    def placeholder(self, name, dtype=F32, **kw):
        return self.add(name, "Placeholder", dtype=ty(dtype), **kw)

    def const(self, name, values, dtype=I32, inputs=(), **kw):
        return self.add(name, "Const", inputs, dtype=ty(dtype), value=tensor(values, dtype), **kw)

    def tf(self) -> TfGraph:
        return TfGraph.from_graph(Graph(self.gd))


def node(tg: TfGraph, name: str):
    return tg.nodes[tg.by_name[name]]


def find(tg: TfGraph, name: str):
    nid = tg.by_name.get(name)
    return None if nid is None else tg.nodes[nid]


def data_in(tg: TfGraph, name: str, slot: int):
    """(producer node, output index) of ``name``'s data input ``slot``."""
    e = tg.input_edge(tg.by_name[name], slot)
    return tg.nodes[e.src], e.src_output


def ctrl_in(tg: TfGraph, nid: int) -> list:
    return [tg.nodes[e.src] for e in tg.nodes[nid].in_edges.values() if e.is_control]


def in_names(tg: TfGraph, name: str) -> list[str]:
    """Every in-edge's source (data and control), sorted by name (TF's GetInputsForNode)."""
    return sorted(tg.nodes[e.src].name for e in node(tg, name).in_edges.values())


def cluster_of(tg: TfGraph, name: str):
    n = node(tg, name)
    return n.attr["_XlaCluster"].s.decode() if "_XlaCluster" in n.attr else None


# ================================================================================================
# build_xla_ops_pass_test.cc
# ================================================================================================

LOCAL_CPU = "/job:localhost/replica:0/task:0/cpu:0"  # what TF's BuildXlaOps helper assigns
WORKER_XLA_CPU = "/job:worker/replica:0/task:0/device:XLA_CPU:0"
WORKER_GPU = "/job:worker/replica:0/task:0/device:GPU:0"


def _library_with_const_function(gd, name="cluster_0"):
    """TF's CreateFunctionDefLibWithConstFunction: no inputs, one float output; the body holds
    a Const ``one`` but the output names ``out:output:0``, a node the body does not have (TF
    never instantiates the body in these TESTs, so it never notices)."""
    f = gd.library.function.add()
    f.signature.name = name
    f.signature.output_arg.add(name="out", type=F32)
    f.node_def.add(name="one", op="Const").attr["dtype"].type = F32
    f.node_def[0].attr["value"].CopyFrom(tensor(1.0, F32))
    f.ret["out"] = "out:output:0"


def _library_with_int32_identity(gd, name="cluster_int32"):
    f = gd.library.function.add()
    f.signature.name = name
    f.signature.input_arg.add(name="in", type=I32)
    f.signature.output_arg.add(name="out", type=I32)
    f.node_def.add(name="out", op="Identity", input=["in"]).attr["T"].type = I32
    f.ret["out"] = "out:output:0"


def _compiled_call(b: GraphBuilder, name, fn, *, n_const=0, n_res=0, ref_vars=False, inputs=(), device=None):
    """TF's MakeXlaCompiledKernel (+ the ``_XlaHasReferenceVars`` the TESTs add)."""
    nd = b.add(name, fn, inputs, device=device, _XlaCompiledKernel=True, _XlaNumConstantArgs=n_const,
               _XlaNumResourceArgs=n_res)
    if ref_vars is not None:
        nd.attr["_XlaHasReferenceVars"].b = ref_vars
    return nd


def _write(b: GraphBuilder, value: str | None, suffix: str):
    """TF's MakeWrite: VarHandleOp ``Var_<id>`` and AssignVariableOp ``Assignee_<id>``; without a
    value, a Const ``ValueToAssign<id>`` (created before the two)."""
    if value is None:
        b.const(f"ValueToAssign{suffix}", 1.0, F32)
        value = f"ValueToAssign{suffix}"
    b.add(f"Var_{suffix}", "VarHandleOp", dtype=ty(F32), shape=shape())
    return b.add(f"Assignee_{suffix}", "AssignVariableOp", [f"Var_{suffix}", value], dtype=ty(F32))


def _build_xla_ops(b: GraphBuilder, flags=NO_FLAGS) -> TfGraph:
    tg = b.tf()
    tg.fixup_source_and_sink_edges()
    build_xla_ops(tg, flags, lazy=True)  # TF's harness: BuildXlaOpsPass(enable_lazy_compilation=true)
    return tg


def _control_deps_graph() -> GraphBuilder:
    b = GraphBuilder(WORKER_XLA_CPU)
    _library_with_const_function(b.gd)
    _compiled_call(b, "C", "cluster_0")
    w = _write(b, None, "write")
    w.attr["_XlaHasReferenceVars"].b = False
    w.input.append("^C")
    return b


def test_ControlDepsPreserved():
    """build_xla_ops_pass_test ``ControlDepsPreserved``: a control successor of a cluster on an
    XLA_CPU device (strict: that device always compiles) is made to wait for ``_XlaRun``.
    The cluster's function body is broken (see ``_library_with_const_function``): the pass never
    instantiates it, so it must not matter."""
    tg = _build_xla_ops(_control_deps_graph(), XLA_DEVICES)
    assert [n.op for n in ctrl_in(tg, tg.by_name["Assignee_write"])] == ["_XlaRun"]


def test_ControlDepsPreserved_through_the_command_line(tmp_path, capsys):
    """The same graph through ``jitsim rewrite`` (mark-for-compilation first): TF's compilability
    check instantiates ``cluster_0`` for the call on the always-compiling device, fails, and
    only rejects the call (FUNCTION_NOT_FOUND); the pass goes on, so the input is not refused,
    and a note says what was not instantiable. A second, unused broken function is never
    instantiated: a note says its body was not checked."""
    from jitsim.cli import main

    b = _control_deps_graph()
    _library_with_const_function(b.gd, "never_called")
    src, out = tmp_path / "g.pbtxt", tmp_path / "out.pbtxt"
    src.write_text(text_format.MessageToString(b.gd))
    rc = main(["rewrite", str(src), "--until", "build-xla-ops", "-o", str(out), "--no-default-flags",
               "--tf-xla-flags=--tf_xla_enable_xla_devices"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "function 'cluster_0' cannot be instantiated (input 'out:output:0' names no node or argument)" in err
    assert "function 'never_called' is never instantiated, so (as in TF) its body was not checked" in err
    result = protos.GraphDef()
    text_format.Parse(out.read_text(), result)
    assign = next(n for n in result.node if n.name == "Assignee_write")
    run = next(n for n in result.node if n.op == "_XlaRun")
    assert "^" + run.name in assign.input


def test_broken_body_of_a_called_function_still_fails_where_tf_instantiates_it():
    """Where TF does instantiate a body and cannot, the pass fails as TF's does: a
    must-compile call's constant analysis (ForceXlaConstantsOnHost) needs the body."""
    b = GraphBuilder(LOCAL_CPU)
    _library_with_const_function(b.gd)
    b.add("call", "StatefulPartitionedCall", f=func("cluster_0"), Tin=types(), Tout=types(F32),
          _XlaMustCompile=True)
    with pytest.raises(GraphError, match="out:output:0"):
        force_xla_constants_on_host(b.tf())


def test_broken_body_that_tf_instantiates_is_one_error_line_naming_the_file(tmp_path, capsys):
    """A PartitionedCall of the broken function: TF's mark-for-compilation instantiates the body
    for the call's compile-time-constant analysis and fails, so jitsim refuses the input, with
    one ``jitsim: FILE: ...`` line and exit code 2."""
    from jitsim.cli import main

    b = GraphBuilder("/job:localhost/replica:0/task:0/device:CPU:0")
    _library_with_const_function(b.gd)
    b.add("call", "PartitionedCall", f=func("cluster_0"), Tin=types(), Tout=types(F32))
    b.add("neg", "Neg", ["call"], T=ty(F32))
    src = tmp_path / "g.pbtxt"
    src.write_text(text_format.MessageToString(b.gd))
    rc = main(["cluster", str(src), "--tf", "never"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2
    assert err == [f"jitsim: {src}: function 'cluster_0': input 'out:output:0' names no node or argument"]


def test_broken_body_of_a_call_no_pass_checks_gets_a_note():
    """The call ``C`` of the broken function on the CPU with auto-clustering off: it is no
    candidate, so no clustering pass instantiates ``cluster_0`` (TF would only when the call
    runs). The input is accepted; the note says so."""
    import warnings

    from jitsim.errors import JitsimWarning
    from jitsim.passes.pipeline import cluster_graph

    b = GraphBuilder("/job:localhost/replica:0/task:0/device:CPU:0")
    _library_with_const_function(b.gd)
    _compiled_call(b, "C", "cluster_0")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", JitsimWarning)
        res = cluster_graph(Graph(b.gd, source="g.pbtxt"), NO_FLAGS)
    notes = [str(w.message) for w in caught if isinstance(w.message, JitsimWarning)]
    assert notes == ["g.pbtxt: function 'cluster_0' is not instantiated by the clustering passes, so (as in TF) its "
                     "body was not checked; running its call would fail: input 'out:output:0' names no node or "
                     "argument"]
    assert res.mark.decisions["C"].code == "POLICY_NOT_ENABLED"


def test_CleanFailureOnBogusAttr():
    """build_xla_ops_pass_test ``CleanFailureOnBogusAttr``: a cluster call claiming 100 constant
    and 100 resource arguments (it has none) is an invalid-argument error, not a crash."""
    b = GraphBuilder(LOCAL_CPU)
    _library_with_const_function(b.gd)
    _compiled_call(b, "C", "cluster_0", n_const=100, n_res=100, ref_vars=None)
    _write(b, None, "write").input.append("^C")
    with pytest.raises(GraphError, match="Invalid number of constant/resource arguments"):
        _build_xla_ops(b)


def test_OnNonXlaDevice():
    """build_xla_ops_pass_test ``OnNonXlaDevice``: on the CPU the rewrite is lazy. The consumer
    reads ``_XlaMerge(fallback call, _XlaRun)``; ``_XlaRun`` takes the true side of the Switch of
    ``_XlaCompile``'s key on its success flag; the fallback ``StatefulPartitionedCall`` waits on an
    Identity of the false side; ``_XlaCompile`` has ``must_compile=false``."""
    b = GraphBuilder(LOCAL_CPU)
    _library_with_const_function(b.gd)
    _compiled_call(b, "C", "cluster_0")
    _write(b, "C", "write_result").attr["_XlaHasReferenceVars"].b = False
    tg = _build_xla_ops(b)
    merge, mi = data_in(tg, "Assignee_write_result", 1)
    assert merge.op == "_XlaMerge" and mi == 0
    call, ci = data_in(tg, merge.name, 0)
    run, ri = data_in(tg, merge.name, 1)
    assert (call.op, ci, run.op, ri) == ("StatefulPartitionedCall", 0, "_XlaRun", 0)
    switch, si = data_in(tg, run.name, 0)  # the cluster has no arguments: the key is input 0
    assert switch.op == "Switch" and si == 1
    compile_, k0 = data_in(tg, switch.name, 0)
    compile2, k1 = data_in(tg, switch.name, 1)
    assert compile_ is compile2 and compile_.op == "_XlaCompile" and (k0, k1) == (0, 1)
    assert not compile_.attr["must_compile"].b
    (ident,) = ctrl_in(tg, call.id)
    assert ident.op == "Identity" and data_in(tg, ident.name, 0) == (switch, 0)


def test_OnXlaDevice():
    """build_xla_ops_pass_test ``OnXlaDevice``: on an XLA_CPU device (always compiles) the
    rewrite is strict: the consumer reads ``_XlaRun`` directly, which reads ``_XlaCompile``."""
    b = GraphBuilder(WORKER_XLA_CPU)
    _library_with_const_function(b.gd)
    _compiled_call(b, "C", "cluster_0")
    _write(b, "C", "write_result").attr["_XlaHasReferenceVars"].b = False
    tg = _build_xla_ops(b, XLA_DEVICES)
    run, ri = data_in(tg, "Assignee_write_result", 1)
    assert run.op == "_XlaRun" and ri == 0
    assert data_in(tg, run.name, 0)[0].op == "_XlaCompile"
    assert data_in(tg, "Assignee_write_result", 0)[0].name == "Var_write_result"


def test_NoExtraMergeForEdgeToSink():
    """build_xla_ops_pass_test ``NoExtraMergeForEdgeToSink``: a cluster whose only successor is
    ``_SINK`` gets no control Merge: ``_XlaRun`` and the fallback call both feed ``_SINK``.
    (TF's expected set also names a NoOp that none of the TEST's nodes or the pass creates;
    see docs/tf-pass-tests.md.)"""
    b = GraphBuilder(LOCAL_CPU)
    _library_with_const_function(b.gd)
    _compiled_call(b, "C", "cluster_0")
    tg = _build_xla_ops(b)
    sink_deps = {n.op for n in ctrl_in(tg, SINK_ID)}
    assert {"_XlaRun", "StatefulPartitionedCall"} <= sink_deps
    assert not any(n.op == "Merge" for n in tg.op_nodes())


def test_NoDeviceToHostCopiesForClustersWithInt32Inputs():
    """build_xla_ops_pass_test ``NoDeviceToHostCopiesForClustersWithInt32Inputs`` (CUDA builds):
    on a GPU an int32 cluster input read from a resource variable lives in device memory, so
    the single fallback ``StatefulPartitionedCall`` reads it through an ``IdentityN`` that waits
    on the Identity of the Switch's false side."""
    b = GraphBuilder(WORKER_GPU)
    _library_with_int32_identity(b.gd)
    _compiled_call(b, "C", "cluster_int32", inputs=["int32_on_device"])
    b.add("var", "VarHandleOp", dtype=ty(I32), shape=shape())
    b.add("int32_on_device", "ReadVariableOp", ["var"], dtype=ty(I32))
    # the GraphDef lists C's input although TF adds the edge after creating the variable nodes
    tg = _build_xla_ops(b)
    calls = [n for n in tg.op_nodes() if n.op == "StatefulPartitionedCall"]
    assert len(calls) == 1
    idn, _ = data_in(tg, calls[0].name, 0)
    assert idn.op == "IdentityN"
    (ident,) = ctrl_in(tg, idn.id)
    switch, si = data_in(tg, ident.name, 0)
    assert ident.op == "Identity" and switch.op == "Switch" and si == 0
    assert data_in(tg, switch.name, 0)[0].op == "_XlaCompile"
    assert data_in(tg, switch.name, 1)[0].op == "_XlaCompile"


# ================================================================================================
# force_xla_constants_on_host_pass_test.cc
# ================================================================================================


def test_ForceXlaConstantsOnHost_Simple():
    """force_xla_constants_on_host_pass_test ``Simple``: the one must-compile call (a
    PartitionedCall of a Transpose function) gets ``_input_hostmem = [1]``: its permutation is
    a compile-time constant, so the executor keeps it in host memory."""
    b = GraphBuilder()
    f = b.gd.library.function.add()
    f.signature.name = "TransposeCall"
    f.signature.input_arg.add(name="a", type=F32)
    f.signature.input_arg.add(name="b", type=I32)
    f.signature.output_arg.add(name="c", type=F32)
    t0 = f.node_def.add(name="t0", op="Transpose", input=["a", "b"])
    t0.attr["T"].type = F32
    t0.attr["Tperm"].type = I32
    f.ret["c"] = "t0:y:0"
    f.attr["_XlaMustCompile"].b = True
    b.placeholder("Placeholder")
    b.const("Const", [3, 1, 2, 0])
    b.add("call", "PartitionedCall", ["Placeholder", "Const"], Tin=types(F32, I32), Tout=types(F32),
          f=func("TransposeCall"), _XlaMustCompile=True)
    tg = b.tf()
    force_xla_constants_on_host(tg)
    marked = [n for n in tg.op_nodes() if "_input_hostmem" in n.attr]
    assert [n.name for n in marked] == ["call"]
    assert list(marked[0].attr["_input_hostmem"].list.i) == [1]


# ================================================================================================
# increase_dynamism_for_auto_jit_pass_test.cc
# ================================================================================================

HOST = "/job:worker/replica:0/task:0/device:CPU:0"
DEVICE = "/job:worker/replica:0/task:0/device:GPU:0"
SESSION_ON_2 = options_for("--tf_xla_auto_jit=2")  # TF's harness: global_jit_level ON_2
STATIC = "slice/static_shaped_slice/static_shaped_slice"


def _slice_graph(size, *, begin_dtype=I32, size_dtype=I32, clustered=True):
    """``input`` (float), ``begin`` Placeholders and a Const ``size`` feeding ``slice``, all in
    cluster_0 on the GPU (TF's Scope ``WithAssignedDevice(GPU).WithXlaCluster("cluster_0")``)."""
    cl = "cluster_0" if clustered else None
    b = GraphBuilder(DEVICE)
    b.placeholder("input", cluster=cl)
    b.placeholder("begin", begin_dtype, cluster=cl)
    b.const("size", size, size_dtype, cluster=cl)
    b.add("slice", "Slice", ["input", "begin", "size"], T=ty(F32), Index=ty(begin_dtype), cluster=cl)
    return b


def _dynamism(b: GraphBuilder) -> TfGraph:
    tg = b.tf()
    increase_dynamism_for_auto_jit(tg, SESSION_ON_2)
    return tg


def _const_value(n):
    from jitsim.passes.increase_dynamism import int_tensor

    return int_tensor(n.attr["value"].tensor)[1], n.attr["dtype"].type


def _rewritten(tg):
    return [n for n in tg.op_nodes() if n.op == "Slice" and "_XlaCompileTimeConstantInputs" in n.attr]


def test_SliceToDynamicSlice_Basic():
    """increase_dynamism_for_auto_jit_pass_test ``Basic``: a clustered Slice with size [-1, 500]
    becomes a Slice of (input, int64 begin, size) whose size is computed on the host:
    ConcatV2(Sub(Slice(Shape(input), 0, 1), Slice(begin_s64, 0, 1)), 500, axis 0), every helper
    on the host CPU, the new Slice on the GPU and marked ``size`` compile-time constant."""
    tg = _dynamism(_slice_graph([-1, 500]))
    s = node(tg, STATIC)
    assert s.op == "Slice" and s.device == DEVICE
    assert list(s.attr["_XlaCompileTimeConstantInputs"].list.s) == [b"size"]
    assert data_in(tg, STATIC, 0)[0].name == "input"
    cast, _ = data_in(tg, STATIC, 1)
    assert cast.op == "Cast" and data_in(tg, cast.name, 0)[0].name == "begin"
    concat, _ = data_in(tg, STATIC, 2)
    assert concat.op == "ConcatV2" and concat.device == HOST
    sub, _ = data_in(tg, concat.name, 0)
    assert sub.op == "Sub" and sub.device == HOST
    assert _const_value(data_in(tg, concat.name, 1)[0]) == ([500], I64)
    assert _const_value(data_in(tg, concat.name, 2)[0]) == ([0], I32)
    for i, src in ((0, "shape"), (1, "begin")):
        sl, _ = data_in(tg, sub.name, i)
        assert sl.op == "Slice" and sl.device == HOST
        x, _ = data_in(tg, sl.name, 0)
        if src == "shape":
            assert x.op == "Shape" and data_in(tg, x.name, 0)[0].name == "input"
        else:
            assert x is cast
        assert _const_value(data_in(tg, sl.name, 1)[0]) == ([0], I64)
        assert _const_value(data_in(tg, sl.name, 2)[0]) == ([1], I64)


def test_SliceToDynamicSlice_SliceFromVector():
    """``SliceFromVector``: a one-dimensional size needs no ConcatV2."""
    tg = _dynamism(_slice_graph([-1]))
    assert find(tg, STATIC) is not None
    assert not any(n.op == "ConcatV2" for n in tg.op_nodes())


def test_SliceToDynamicSlice_ControlDependencePreserved():
    """``ControlDependencePreserved``: the old Slice's control input moves to the new Slice."""
    b = _slice_graph([-1, 500])
    b.gd.node.insert(3, protos.NodeDef(name="control", op="Placeholder", device=DEVICE))
    b.node("control").attr["dtype"].type = BOOL
    b.node("control").attr["_XlaCluster"].s = b"cluster_0"
    b.node("slice").input.append("^control")
    tg = _dynamism(b)
    assert [n.name for n in ctrl_in(tg, tg.by_name[STATIC])] == ["control"]


def test_SliceToDynamicSlice_Int64Indices():
    """``Int64Indices``: int64 begin and size need no Cast."""
    tg = _dynamism(_slice_graph([-1, 500], begin_dtype=I64, size_dtype=I64))
    assert find(tg, STATIC) is not None
    assert not any(n.op == "Cast" for n in tg.op_nodes())


def test_SliceToDynamicSlice_DontRewriteInvalidSlice():
    """``DontRewriteInvalidSlice``: a size element below -1 (-8) is not rewritten."""
    b = GraphBuilder(DEVICE)
    for name, dt in (("input", F32), ("begin", I32), ("size_placeholder", I32)):
        b.placeholder(name, dt, cluster="cluster_0")
    b.add("slice", "Slice", ["input", "begin", "size"], T=ty(F32), Index=ty(I32), cluster="cluster_0")
    b.const("size", [-8, 500], cluster="cluster_0")
    assert not _rewritten(_dynamism(b))


def test_SliceToDynamicSlice_DontRewriteUnclusteredSlice():
    """``DontRewriteUnclusteredSlice``: a Slice outside any cluster is left alone."""
    assert not _rewritten(_dynamism(_slice_graph([-1, 500], clustered=False)))


def test_SliceToDynamicSlice_DontRewriteSliceWithNonConstSize():
    """``DontRewriteSliceWithNonConstSize``: the size must be a Const."""
    b = GraphBuilder(DEVICE)
    b.placeholder("input", cluster="cluster_0")
    b.placeholder("begin", I64, cluster="cluster_0")
    b.placeholder("size", I64, cluster="cluster_0")
    b.add("slice", "Slice", ["input", "begin", "size"], T=ty(F32), Index=ty(I64), cluster="cluster_0")
    assert not _rewritten(_dynamism(b))


def test_SliceToDynamicSlice_ScalarSlice():
    """``ScalarSlice``: an empty size (slicing a scalar) is rewritten; the new Slice reads the
    original size Const directly."""
    b = GraphBuilder(DEVICE)
    b.placeholder("input", cluster="cluster_0")
    b.placeholder("begin", I64, cluster="cluster_0")
    b.add("size", "Const", dtype=ty(I64), value=tensor([], I64, shape=[0]), cluster="cluster_0")
    b.add("slice", "Slice", ["input", "begin", "size"], T=ty(F32), Index=ty(I64), cluster="cluster_0")
    tg = _dynamism(b)
    s = find(tg, STATIC)
    assert s is not None and "_XlaCompileTimeConstantInputs" in s.attr
    assert data_in(tg, STATIC, 2)[0].name == "size"


def test_SliceToDynamicSlice_IndicesNotVector():
    """``IndicesNotVector``: a size of shape [2, 1] (not a vector) is not rewritten."""
    b = GraphBuilder(DEVICE)
    b.placeholder("input", cluster="cluster_0")
    b.placeholder("begin", I64, cluster="cluster_0")
    b.placeholder("size", I64, cluster="cluster_0")
    b.add("slice", "Slice", ["input", "begin", "size_1"], T=ty(F32), Index=ty(I64), cluster="cluster_0")
    b.add("size_1", "Const", dtype=ty(I64), value=tensor([-1, 500], I64, shape=[2, 1]), cluster="cluster_0")
    assert not _rewritten(_dynamism(b))


def test_SliceToDynamicSlice_SliceWithSliceInput():
    """``SliceWithSliceInput``: a Slice of a rewritten Slice is rewritten too and reads the
    first one's replacement; its output type stays float."""
    b = _slice_graph([-1, 500])
    b.const("size_a_1", [-1, 200], cluster="cluster_0")  # TF's Scope renames the second "size_a"
    b.node("size").name = "size_a"
    b.node("slice").input[2] = "size_a"
    b.add("slice_with_slice_input", "Slice", ["slice", "begin", "size_a_1"], T=ty(F32), Index=ty(I32),
          cluster="cluster_0")
    tg = _dynamism(b)
    name = "slice_with_slice_input/static_shaped_slice/static_shaped_slice"
    s = node(tg, name)
    assert s.attr["T"].type == F32
    assert data_in(tg, name, 0)[0].name == STATIC


def test_SliceToDynamicSlice_SliceWithSliceBegin():
    """``SliceWithSliceBegin``: a Slice whose begin is a rewritten Slice reads the replacement."""
    b = GraphBuilder(DEVICE)
    b.placeholder("input_float", cluster="cluster_0")
    b.placeholder("input_i64", I64, cluster="cluster_0")
    b.placeholder("begin_begin", I32, cluster="cluster_0")
    b.const("begin_size", [-1], cluster="cluster_0")
    b.add("begin", "Slice", ["input_i64", "begin_begin", "begin_size"], T=ty(I64), Index=ty(I32),
          cluster="cluster_0")
    b.const("size", [-1, 200], I64, cluster="cluster_0")
    b.add("slice_with_slice_begin", "Slice", ["input_float", "begin", "size"], T=ty(F32), Index=ty(I64),
          cluster="cluster_0")
    tg = _dynamism(b)
    name = "slice_with_slice_begin/static_shaped_slice/static_shaped_slice"
    assert node(tg, name).attr["T"].type == F32
    assert data_in(tg, name, 1)[0].name == "begin/static_shaped_slice/static_shaped_slice"


def test_SliceToDynamicSlice_WithControlDepsToConstant():
    """``WithControlDepsToConstant``: the new constants copy the size Const's control inputs
    (needed for TF2 control flow), here from the Placeholder ``dependency``."""
    b = _slice_graph([-1])
    b.placeholder("dependency", BOOL, cluster="cluster_0")
    b.node("size").input.append("^dependency")
    tg = _dynamism(b)
    c = node(tg, "slice/static_shaped_slice/const_0")
    assert c.op == "Const" and [n.name for n in ctrl_in(tg, c.id)] == ["dependency"]


def test_SliceToDynamicSlice_DontRewriteSliceWithConstBegin():
    """``DontRewriteSliceWithConstBegin``: with a constant begin the Slice stays as it is."""
    b = GraphBuilder(DEVICE)
    b.placeholder("input", cluster="cluster_0")
    b.const("begin", [10, 10], cluster="cluster_0")
    b.const("size", [-1, 500], cluster="cluster_0")
    b.add("slice", "Slice", ["input", "begin", "size"], T=ty(F32), Index=ty(I32), cluster="cluster_0")
    tg = _dynamism(b)
    assert [data_in(tg, "slice", i)[0].op for i in range(3)] == ["Placeholder", "Const", "Const"]
    assert not _rewritten(tg)


# ================================================================================================
# partially_decluster_pass_test.cc
# ================================================================================================

XLA_GPU = "/job:localhost/replica:0/task:0/device:XLA_GPU:0"

# The ops and CPU kernels the TEST file registers itself, as an op library (what
# `jitsim registry export` writes for a custom-op library, --op-defs)
_FAKE_OPS = """
op { name: "FakeNullary" output_arg { name: "out" type: DT_INT32 } }
op { name: "FakeBinary" input_arg { name: "host_in" type: DT_INT32 } input_arg { name: "device_in" type: DT_INT32 }
     output_arg { name: "host_out" type: DT_INT32 } output_arg { name: "device_out" type: DT_INT32 } }
op { name: "FakeResourceVar" output_arg { name: "out" type: DT_RESOURCE } }
op { name: "FakeResourceUpdate" input_arg { name: "in" type: DT_RESOURCE }
     output_arg { name: "out" type: DT_RESOURCE } output_arg { name: "something_else" type: DT_INT32 } }
"""
_FAKE_KERNELS = """
kernel { op: "FakeBinary" device_type: "CPU" host_memory_arg: "host_in" host_memory_arg: "host_out" }
kernel { op: "FakeResourceUpdate" device_type: "CPU" host_memory_arg: "something_else" }
"""


def _fake_library() -> OpLibrary:
    ol = text_format.Parse(_FAKE_OPS, protos.OpList())
    kl = text_format.Parse(_FAKE_KERNELS, protos.KernelList())
    return OpLibrary({o.name: o for o in ol.op}, (), tuple(kl.kernel), source="partially_decluster_pass_test.cc")


def _decluster(b: GraphBuilder, flags=NO_FLAGS) -> TfGraph:
    """TF's PartiallyDecluster helper: every node without a device on the local CPU, the
    test binary's flags (no TF_XLA_FLAGS: CPU global jit off at startup)."""
    for nd in b.gd.node:
        if not nd.device:
            nd.device = LOCAL_CPU
    with using_op_libraries(_fake_library()):
        tg = b.tf()
        tg.fixup_source_and_sink_edges()
        partially_decluster(tg, flags)  # the flags leave --tf_xla_cpu_global_jit off, as at TF's startup
    return tg


def _fake(b, name, op, inputs=(), cluster=None):
    return b.add(name, op, inputs, cluster=cluster)


def test_PartiallyDecluster_ClusteredAndUnclustered():
    """partially_decluster_pass_test ``ClusteredAndUnclustered``: a clustered producer whose
    host-memory output feeds a host-memory input outside the cluster is copied out
    (``/declustered``) for that consumer; the clustered consumer keeps the original."""
    b = GraphBuilder()
    _fake(b, "Input", "FakeNullary")
    _fake(b, "ClusteredProducer", "FakeBinary", ["Input", "Input"], "cluster_0")
    _fake(b, "UnclusteredConsumer", "FakeBinary", ["ClusteredProducer", "Input"])
    _fake(b, "ClusteredConsumer", "FakeBinary", ["ClusteredProducer:1", "Input"], "cluster_0")
    tg = _decluster(b)
    assert in_names(tg, "UnclusteredConsumer") == ["ClusteredProducer/declustered", "Input"]
    assert in_names(tg, "ClusteredConsumer") == ["ClusteredProducer", "Input"]


def test_PartiallyDecluster_DifferentClusters():
    """``DifferentClusters``: a consumer in another cluster counts as outside: copied out."""
    b = GraphBuilder()
    _fake(b, "Input", "FakeNullary")
    _fake(b, "ClusteredProducer", "FakeBinary", ["Input", "Input"], "cluster_0")
    _fake(b, "ConsumerInDifferentCluster", "FakeBinary", ["ClusteredProducer", "Input"], "cluster_1")
    _fake(b, "ClusteredConsumer", "FakeBinary", ["Input", "ClusteredProducer:1"], "cluster_0")
    tg = _decluster(b)
    assert in_names(tg, "ConsumerInDifferentCluster") == ["ClusteredProducer/declustered", "Input"]


def test_PartiallyDecluster_DontDeclusterIfUserIsDeviceMem():
    """``DontDeclusterIfUserIsDeviceMem``: the outside consumer reads the host-memory output
    into its device-memory input: no copy."""
    b = GraphBuilder()
    _fake(b, "Input", "FakeNullary")
    _fake(b, "ClusteredProducer", "FakeBinary", ["Input", "Input"], "cluster_0")
    _fake(b, "ConsumerInDifferentCluster", "FakeBinary", ["Input", "ClusteredProducer"], "cluster_1")
    _fake(b, "ClusteredConsumer", "FakeBinary", ["Input", "ClusteredProducer:1"], "cluster_0")
    tg = _decluster(b)
    assert in_names(tg, "ConsumerInDifferentCluster") == ["ClusteredProducer", "Input"]


def test_PartiallyDecluster_DontDuplicateResourceVarOps():
    """``DontDuplicateResourceVarOps``: a producer with a resource input (it may update a
    variable) is never run twice, even for a host-to-host edge."""
    b = GraphBuilder()
    _fake(b, "Input", "FakeNullary")
    _fake(b, "ResourceVar", "FakeResourceVar")
    _fake(b, "ClusteredProducer", "FakeResourceUpdate", ["ResourceVar"], "cluster_0")
    _fake(b, "ConsumerInDifferentCluster", "FakeBinary", ["ClusteredProducer:1", "Input"], "cluster_1")
    _fake(b, "ClusteredConsumer", "FakeBinary", ["Input", "ClusteredProducer:1"], "cluster_0")
    tg = _decluster(b)
    assert in_names(tg, "ConsumerInDifferentCluster") == ["ClusteredProducer", "Input"]


def test_PartiallyDecluster_DeclusterDependentNodes():
    """``DeclusterDependentNodes``: copying ``ClusteredProducer1`` out makes its clustered
    input ``ClusteredProducer0`` feed outside too, so it is copied as well, and the copies are
    chained."""
    b = GraphBuilder()
    _fake(b, "Input", "FakeNullary")
    _fake(b, "ClusteredProducer0", "FakeBinary", ["Input", "Input"], "cluster_0")
    _fake(b, "ClusteredProducer1", "FakeBinary", ["ClusteredProducer0", "Input"], "cluster_0")
    _fake(b, "UnclusteredConsumer", "FakeBinary", ["ClusteredProducer1", "Input"])
    _fake(b, "ClusteredConsumer", "FakeBinary", ["ClusteredProducer1:1", "Input"], "cluster_0")
    tg = _decluster(b)
    assert in_names(tg, "UnclusteredConsumer") == ["ClusteredProducer1/declustered", "Input"]
    assert in_names(tg, "ClusteredProducer1/declustered") == ["ClusteredProducer0/declustered", "Input"]


def _shape_reshape(b: GraphBuilder, shape_cluster="cluster_0", reshape_cluster="cluster_0"):
    b.placeholder("shape_a", I32)
    b.placeholder("shape_b", I32)
    b.add("shape", "Add", ["shape_a", "shape_b"], T=ty(I32), cluster=shape_cluster)
    b.placeholder("reshape_input")
    b.add("reshape", "Reshape", ["reshape_input", "shape"], T=ty(F32), Tshape=ty(I32), cluster=reshape_cluster)
    return b


def test_PartiallyDecluster_DeclusterMustBeConstantNodes():
    """``DeclusterMustBeConstantNodes``: a clustered node that must be a compile-time constant
    of its cluster (a Reshape's shape) and has only outside inputs leaves the cluster: each
    new shape would otherwise recompile it. """
    tg = _decluster(_shape_reshape(GraphBuilder()))
    assert cluster_of(tg, "shape") is None


def test_PartiallyDecluster_DeclusteringStopsAtMetadataOps():
    """``DeclusteringStopsAtMetadataOps``: the shape computation reads a Shape of an in-cluster
    Mul: its value is known at compile time without the Mul, yet it is an in-cluster input, so
    ``shape`` stays."""
    b = GraphBuilder()
    b.placeholder("input_a", I32)
    b.placeholder("shape_b")
    b.add("mul", "Mul", ["shape_b", "shape_b"], T=ty(F32), cluster="cluster_0")
    b.add("shape_of_mul", "Shape", ["mul"], T=ty(F32), out_type=ty(I32), cluster="cluster_0")
    b.add("shape", "Add", ["shape_of_mul", "input_a"], T=ty(I32), cluster="cluster_0")
    b.placeholder("reshape_input")
    b.add("reshape", "Reshape", ["reshape_input", "shape"], T=ty(F32), Tshape=ty(I32), cluster="cluster_0")
    tg = _decluster(b)
    assert cluster_of(tg, "shape") == "cluster_0"


def test_PartiallyDecluster_EdgeAcrossDifferentClusters():
    """``EdgeAcrossDifferentClusters``: a shape computed in cluster_1 for a Reshape in
    cluster_0 is no constant of its own cluster: it stays in cluster_1."""
    tg = _decluster(_shape_reshape(GraphBuilder(), "cluster_1", "cluster_0"))
    assert cluster_of(tg, "shape") == "cluster_1"


def test_PartiallyDecluster_DontDeclusterXlaDeviceOps():
    """``DontDeclusterXlaDeviceOps``: on an XLA_GPU device (always compiles) the node could not
    run outside the cluster: it stays."""
    b = _shape_reshape(GraphBuilder())
    b.node("shape").device = XLA_GPU
    tg = _decluster(b, XLA_DEVICES)
    assert cluster_of(tg, "shape") == "cluster_0"


def test_PartiallyDecluster_EliminatedUnusedNodes():
    """``EliminatedUnusedNodes``: when every consumer of the clustered producers reads the
    copies, the originals are removed."""
    b = GraphBuilder()
    _fake(b, "Input", "FakeNullary")
    _fake(b, "ClusteredProducer0", "FakeBinary", ["Input", "Input"], "cluster_0")
    _fake(b, "ClusteredProducer1", "FakeBinary", ["ClusteredProducer0", "Input"], "cluster_0")
    _fake(b, "UnclusteredConsumer", "FakeBinary", ["ClusteredProducer1", "Input"])
    tg = _decluster(b)
    assert find(tg, "ClusteredProducer0") is None and find(tg, "ClusteredProducer1") is None


def test_PartiallyDecluster_MetadataOpsDontStartClusters():
    """``MetadataOpsDontStartClusters``: Shape -> Rank -> Size -> Shape, all clustered, fed from
    outside: each only needs metadata, one after another they all leave the cluster."""
    b = GraphBuilder()
    b.placeholder("a")
    b.add("b", "Shape", ["a"], T=ty(F32), out_type=ty(I32), cluster="cluster_0")
    b.add("c", "Rank", ["b"], T=ty(I32), cluster="cluster_0")
    b.add("d", "Size", ["c"], T=ty(I32), out_type=ty(I32), cluster="cluster_0")
    b.add("e", "Shape", ["d"], T=ty(I32), out_type=ty(I32), cluster="cluster_0")
    tg = _decluster(b)
    assert [cluster_of(tg, n) for n in "bcde"] == [None] * 4


def test_PartiallyDecluster_MetaConsumersArentDeclustered():
    """``MetaConsumersArentDeclustered``: a Rank of an in-cluster Add feeding an outside op's
    host-memory input is neither copied out nor declustered; the Add stays too."""
    b = GraphBuilder()
    b.placeholder("a")
    b.add("b", "Add", ["a", "a"], T=ty(F32), cluster="cluster_0")
    b.add("c", "Rank", ["b"], T=ty(F32), cluster="cluster_0")
    _fake(b, "e", "FakeBinary", ["c", "c"])
    tg = _decluster(b)
    assert (cluster_of(tg, "b"), cluster_of(tg, "c")) == ("cluster_0", "cluster_0")


def test_PartiallyDecluster_ConstInputsToSliceArentDeclustered():
    """``ConstInputsToSliceArentDeclustered``: constants without outside inputs stay in the
    cluster (nothing to gain by moving them)."""
    b = GraphBuilder()
    b.add("a", "Placeholder", dtype=ty(F32),
          shape=shape(4))
    b.const("b", [1], cluster="cluster_0")
    b.const("c", [2], cluster="cluster_0")
    b.add("d", "Slice", ["a", "b", "c"], T=ty(F32), Index=ty(I32), cluster="cluster_0")
    tg = _decluster(b)
    assert (cluster_of(tg, "b"), cluster_of(tg, "c")) == ("cluster_0", "cluster_0")


def test_PartiallyDecluster_ConstInLoopWithCrossDeviceControlInputsAreDeclustered():
    """``ConstInLoopWithCrossDeviceControlInputsAreDeclustered``: a must-be-constant Const with a
    control input from a node on another device (an XLA_GPU Identity in a loop) leaves the
    cluster; its sibling without one stays."""
    b = GraphBuilder()
    b.add("a", "Placeholder", dtype=ty(F32),
          shape=shape(4))
    b.const("b", [1], cluster="cluster_0", inputs=["^identity"])
    b.const("c", [2], cluster="cluster_0")
    b.add("slice", "Slice", ["a", "b", "c"], T=ty(F32), Index=ty(I32), cluster="cluster_0")
    b.placeholder("cond", BOOL)
    b.placeholder("value")
    b.add("loop_cond", "LoopCond", ["cond"])
    b.add("switch", "Switch", ["value", "loop_cond"], T=ty(F32))
    b.add("identity", "Identity", ["switch:1"], T=ty(F32), device=XLA_GPU)
    tg = _decluster(b, XLA_DEVICES)
    assert (cluster_of(tg, "b"), cluster_of(tg, "c")) == (None, "cluster_0")


# ================================================================================================
# deadness_analysis_test.cc
# ================================================================================================


class Dead(GraphBuilder):
    """TF's deadness TESTs' graph helpers (node names and creation order as TF's Scope makes
    them)."""

    def switch(self, prefix):
        """TF's CreateSwitch: float ``<p>/value`` switched on bool ``<p>/pred``."""
        self.placeholder(f"{prefix}/value")
        self.placeholder(f"{prefix}/pred", BOOL)
        self.add(f"{prefix}/switch", "Switch", [f"{prefix}/value", f"{prefix}/pred"], T=ty(F32))
        return f"{prefix}/switch:1", f"{prefix}/switch"  # (true, false) outputs

    def binop(self, name, a, b, op="Add"):
        self.add(name, op, [a, b], T=ty(F32))
        return name

    def merge(self, name, *inputs):
        self.add(name, "Merge", list(inputs), T=ty(F32), N=len(inputs))
        return name

    def induction_var(self, p, frame, init, *, init_is_const=True):
        """TF's CreateInductionVariable: Enter -> Merge ``<p>/iv`` (back edge from
        ``<p>/next_iteration``) -> Less ``<p>/cond`` -> Switch ``<p>/latch``; Exit on the false
        side, Add one and NextIteration on the true side. Returns (iv, cond)."""
        if init_is_const:
            self.const(f"{p}/init", init)
            init = f"{p}/init"
        self.add(f"{p}/enter", "Enter", [init], T=ty(I32), frame_name=frame)
        self.add(f"{p}/iv", "Merge", [f"{p}/enter", f"{p}/next_iteration"], T=ty(I32), N=2)
        self.const(f"{p}/incr", 1, inputs=[f"^{p}/iv"])
        self.const(f"{p}/final", 10, inputs=[f"^{p}/iv"])
        self.add(f"{p}/cond", "Less", [f"{p}/iv", f"{p}/final"], T=ty(I32))
        self.add(f"{p}/latch", "Switch", [f"{p}/iv", f"{p}/cond"], T=ty(I32))
        self.add(f"{p}/exit", "Exit", [f"{p}/latch"], T=ty(I32))
        self.add(f"{p}/ivnext", "Add", [f"{p}/latch:1", f"{p}/incr"], T=ty(I32))
        self.add(f"{p}/next_iteration", "NextIteration", [f"{p}/ivnext"], T=ty(I32))
        return f"{p}/iv", f"{p}/cond"

    def dependent_invariant(self, p, frame, loop_cond, value, *, value_is_const=True):
        """TF's CreateDependentLoopInvariantValue: Enter -> Merge ``<p>/iv`` -> Switch on
        ``loop_cond`` -> Exit / NextIteration back to the Merge. Returns the Merge."""
        if value_is_const:
            self.const(f"{p}/init", value)
            value = f"{p}/init"
        self.add(f"{p}/enter", "Enter", [value], T=ty(I32), frame_name=frame)
        self.add(f"{p}/iv", "Merge", [f"{p}/enter", f"{p}/next_iteration"], T=ty(I32), N=2)
        self.add(f"{p}/latch", "Switch", [f"{p}/iv", loop_cond], T=ty(I32))
        self.add(f"{p}/exit", "Exit", [f"{p}/latch"], T=ty(I32))
        self.add(f"{p}/next_iteration", "NextIteration", [f"{p}/latch:1"], T=ty(I32))
        return f"{p}/iv"

    def analyse(self):
        tg = self.tf()
        tg.fixup_source_and_sink_edges()
        return tg, deadness_analysis(tg)


def mismatching(tg: TfGraph, r, name: str) -> bool:
    """TF's HasInputsWithMismatchingDeadness: do two in-edges (data or control) of ``name``
    carry different predicates? Predicates are interned, so identity is equality."""
    preds = []
    for e in node(tg, name).in_edges.values():
        preds.append(r.control_predicate(e.src) if e.is_control else r.tensor_predicate(e.src, e.src_output))
    return any(p is not preds[0] for p in preds)


def ctrl_pred(r, name: str) -> str:
    return r.as_strings()[f"^{name}"]


def test_Deadness_BasicPositive():
    """deadness_analysis_test ``BasicPositive``: the two sides of one Switch never both live."""
    d = Dead()
    t, f = d.switch("0")
    d.binop("add", t, f)
    assert mismatching(*d.analyse(), "add")


def test_Deadness_BasicNegative():
    """``BasicNegative``: two Placeholders are always alive together."""
    d = Dead()
    d.placeholder("a")
    d.placeholder("b")
    d.binop("add", "a", "b")
    assert not mismatching(*d.analyse(), "add")


def test_Deadness_AndIsCommutative():
    """``AndIsCommutative``: A&B equals B&A; A&B differs from A&~B."""
    d = Dead()
    t0, f0 = d.switch("0")
    t1, f1 = d.switch("1")
    d.binop("a0", f0, f1)
    d.binop("a1", f1, f0)
    d.binop("b0", f0, t1)
    d.binop("b1", t1, f0)
    d.binop("live0", "a0", "a1")
    d.binop("live1", "b0", "b1")
    d.binop("halfdead0", "a0", "b0")
    d.binop("halfdead1", "a1", "b1")
    tg, r = d.analyse()
    assert not mismatching(tg, r, "live0") and not mismatching(tg, r, "live1")
    assert mismatching(tg, r, "halfdead0") and mismatching(tg, r, "halfdead1")


def test_Deadness_AndIsAssociative():
    """``AndIsAssociative``: (A&B)&C equals A&(B&C)."""
    d = Dead()
    _, f0 = d.switch("0")
    _, f1 = d.switch("1")
    _, f2 = d.switch("2")
    d.binop("a0", f0, f1)
    d.binop("a1", "a0", f2)
    d.binop("b0", f1, f2)
    d.binop("b1", f0, "b0")
    d.binop("add", "a1", "b1")
    assert not mismatching(*d.analyse(), "add")


def test_Deadness_OrIsCommutative():
    """``OrIsCommutative``: Merges of the same inputs in either order agree."""
    d = Dead()
    t0, f0 = d.switch("0")
    t1, f1 = d.switch("1")
    d.merge("m0", f0, f1)
    d.merge("m1", f1, f0)
    d.merge("m2", f0, t1)
    d.merge("m3", t1, f0)
    d.binop("live0", "m0", "m1")
    d.binop("live1", "m2", "m3")
    d.binop("halfdead0", "m0", "m2")
    d.binop("halfdead1", "m1", "m3")
    tg, r = d.analyse()
    assert not mismatching(tg, r, "live0") and not mismatching(tg, r, "live1")
    assert mismatching(tg, r, "halfdead0") and mismatching(tg, r, "halfdead1")


def test_Deadness_OrIsAssociative():
    """``OrIsAssociative``: (A|B)|C equals A|(B|C)."""
    d = Dead()
    _, f0 = d.switch("0")
    _, f1 = d.switch("1")
    _, f2 = d.switch("2")
    d.merge("m0", f0, f1)
    d.merge("m1", "m0", f2)
    d.merge("m2", f1, f2)
    d.merge("m3", f0, "m2")
    d.binop("add", "m1", "m3")
    assert not mismatching(*d.analyse(), "add")


def test_Deadness_AndOfOr():
    """``AndOfOr``: two Adds of the same two Merges agree."""
    d = Dead()
    fs = [d.switch(str(i))[1] for i in range(4)]
    d.merge("m0", fs[0], fs[1])
    d.merge("m1", fs[2], fs[3])
    d.binop("add0", "m0", "m1")
    d.binop("add1", "m0", "m1")
    d.binop("add2", "add0", "add1")
    assert not mismatching(*d.analyse(), "add2")


def test_Deadness_OrOfAnd():
    """``OrOfAnd``: two Merges of the same two Adds agree."""
    d = Dead()
    fs = [d.switch(str(i))[1] for i in range(4)]
    d.binop("add0", fs[0], fs[1])
    d.binop("add1", fs[2], fs[3])
    d.merge("m0", "add0", "add1")
    d.merge("m1", "add0", "add1")
    d.binop("add2", "m0", "m1")
    assert not mismatching(*d.analyse(), "add2")


def test_Deadness_AndOrDistributiveSimplified():
    """``AndOrDistributiveSimplified``: *A | (~*A & ((~*B & ~*A) | (~*A & *B))) simplifies
    to #true."""
    d = Dead()
    ta, fa = d.switch("A")
    tb, fb = d.switch("B")
    d.binop("and0", fa, tb)
    d.binop("and1", fa, fb)
    d.merge("or2", "and0", "and1")
    d.binop("and3", "or2", fa)
    d.merge("or4", "and3", ta)
    _, r = d.analyse()
    assert ctrl_pred(r, "or4") == "#true"


def test_Deadness_AndOrDistributive():
    """``AndOrDistributive``: (A|B)&C equals (A&C)|(B&C)."""
    d = Dead()
    _, f0 = d.switch("0")
    _, f1 = d.switch("1")
    _, f2 = d.switch("2")
    d.merge("m0", f0, f1)
    d.binop("add0", "m0", f2)
    d.binop("add1", f0, f2)
    d.binop("add2", f1, f2)
    d.merge("m1", "add1", "add2")
    d.binop("add3", "add0", "m1")
    assert not mismatching(*d.analyse(), "add3")


def test_Deadness_Ternary():
    """``Ternary``: a Merge of the two sides of Switches on one predicate is always alive."""
    d = Dead()
    d.placeholder("predicate", BOOL)
    d.placeholder("true_value")
    d.placeholder("false_value")
    d.add("predicated_true", "Switch", ["true_value", "predicate"], T=ty(F32))
    d.add("predicated_false", "Switch", ["true_value", "predicate"], T=ty(F32))
    d.merge("ternary", "predicated_true:1", "predicated_false")
    d.placeholder("addend")
    d.binop("add", "ternary", "addend")
    assert not mismatching(*d.analyse(), "add")


@pytest.mark.parametrize("op", ["_Recv", "_HostRecv"])
def test_Deadness_Recv_and_HostRecv(op):
    """``Recv`` and ``HostRecv``: each receive may be dead on its own (an opaque symbol each)."""
    d = Dead()
    for x in "ab":
        d.add(f"recv_{x}", op, tensor_type=ty(F32), tensor_name=f"tensor_{x}", send_device="sender",
              send_device_incarnation=0, recv_device="receiver")
    d.binop("add", "recv_a", "recv_b")
    assert mismatching(*d.analyse(), "add")


def _loop_graph() -> Dead:
    d = Dead()
    iv0, _ = d.induction_var("iv0", "fr0", 0)
    iv1, _ = d.induction_var("iv1", "fr0", 0)
    iv2, _ = d.induction_var("iv2", "fr0", 1)
    d.add("add0", "Add", [iv0, iv1], T=ty(I32))
    d.add("add1", "Add", [iv1, iv2], T=ty(I32))
    return d


def _equivalent_bodies_graph() -> Dead:
    d = Dead()
    _, cond = d.induction_var("iv0", "loop", 0)
    div0 = d.dependent_invariant("div0", "loop", cond, 0)
    div1 = d.dependent_invariant("div1", "loop", cond, 0)
    d.add("add0", "Add", [div0, div1], T=ty(I32))
    return d


def _invariant_backedge_graph() -> Dead:
    d = Dead()
    _, cond = d.induction_var("iv0", "frame", 0)
    d.dependent_invariant("div0", "frame", cond, 0)
    d.node("div0/latch").input[0] = "iv0/iv"  # TF's UpdateEdge: the latch now reads the other loop
    return d


def _nested(d: Dead, suffix=""):
    """The outer loop, a constant entering it switched on its condition, and the inner loop
    started from that Switch's true side (TF's Scope suffixes repeated names with ``_1``)."""
    s = suffix
    iv_outer, cond_outer = d.induction_var_named("iv_outer", "outer_loop", s)
    d.const(f"constant{s}", 5)
    d.add(f"constant_enter_outer_loop{s}", "Enter", [f"constant{s}"], T=ty(I32), frame_name="outer_loop",
          is_constant=True)
    d.add(f"outer_is_live{s}", "Switch", [f"constant_enter_outer_loop{s}", cond_outer], T=ty(I32))
    iv_inner, cond_inner = d.induction_var_named("iv_inner", "inner_loop", s, init=f"outer_is_live{s}:1")
    return iv_outer, cond_outer, iv_inner, cond_inner


def _induction_var_named(self, p, frame, s, init=None):
    """induction_var with TF's uniquified names for a second copy (``<p>/enter_1``...)."""
    if init is None:
        self.const(f"{p}/init{s}", 0)
        init = f"{p}/init{s}"
    n = {k: f"{p}/{k}{s}" for k in ("enter", "iv", "incr", "final", "cond", "latch", "exit", "ivnext",
                                       "next_iteration")}
    self.add(n["enter"], "Enter", [init], T=ty(I32), frame_name=frame)
    self.add(n["iv"], "Merge", [n["enter"], n["next_iteration"]], T=ty(I32), N=2)
    self.const(n["incr"], 1, inputs=["^" + n["iv"]])
    self.const(n["final"], 10, inputs=["^" + n["iv"]])
    self.add(n["cond"], "Less", [n["iv"], n["final"]], T=ty(I32))
    self.add(n["latch"], "Switch", [n["iv"], n["cond"]], T=ty(I32))
    self.add(n["exit"], "Exit", [n["latch"]], T=ty(I32))
    self.add(n["ivnext"], "Add", [n["latch"] + ":1", n["incr"]], T=ty(I32))
    self.add(n["next_iteration"], "NextIteration", [n["ivnext"]], T=ty(I32))
    return n["iv"], n["cond"]


Dead.induction_var_named = _induction_var_named


def _equivalent_nested_graph() -> Dead:
    d = Dead()
    _, cond_outer, _, cond_inner = _nested(d)
    o0 = d.dependent_invariant("dependent_outer_iv0", "outer_loop", cond_outer, 0)
    o1 = d.dependent_invariant("dependent_outer_iv1", "outer_loop", cond_outer, 0)
    i0 = d.dependent_invariant("dependent_inner_iv0", "inner_loop", cond_inner, o0, value_is_const=False)
    i1 = d.dependent_invariant("dependent_inner_iv1", "inner_loop", cond_inner, o1, value_is_const=False)
    d.add("add0", "Add", [i0, i1], T=ty(I32))
    return d


def _non_equivalent_nested_graph() -> Dead:
    d = Dead()
    _, _, inner0, _ = _nested(d)
    _, _, inner1, _ = _nested(d, "_1")
    d.add("add0", "Add", [inner0, inner1], T=ty(I32))
    return d


# TEST -> (graph, what the TF run fetches, the control predicates compared); the TF 2.21
# answers are in tests/data/tf_pass_tests/deadness.json (make_deadness.py regenerates them)
DEADNESS_LOOP_GRAPHS = {
    "Loop": (_loop_graph, ["add0", "add1"], ["^iv0/iv", "^iv1/iv", "^iv2/iv", "^add0", "^add1"]),
    "ControlEquivalentLoopBodies": (_equivalent_bodies_graph, ["add0"],
                                    ["^iv0/iv", "^div0/iv", "^div1/iv", "^add0"]),
    "LoopInvariantPredicateOnBackedge": (_invariant_backedge_graph, ["div0/iv", "iv0/exit"], ["^div0/iv"]),
    "ControlEquivalentNestedLoopBodies": (_equivalent_nested_graph, ["add0"],
                                          ["^iv_outer/iv", "^iv_inner/iv", "^dependent_inner_iv0/iv",
                                           "^dependent_inner_iv1/iv", "^add0"]),
    "ControlNonEquivalentNestedLoopBodies": (_non_equivalent_nested_graph, ["add0"],
                                             ["^iv_outer/iv", "^iv_inner/iv", "^iv_outer/iv_1", "^iv_inner/iv_1",
                                              "^add0"]),
}

# What the TESTs' text (the version of deadness_analysis_test.cc read, which predates TF's
# optimistic mode) expects from ComputePredicates: the pessimistic analysis. Operand order
# inside "&" follows predicate creation order, which that older TF assigned differently; the
# comparison below ignores it (see _canonical).
_PESSIMISTIC = {
    "Loop": {
        "^iv0/iv": "{#true,&,*iv0/cond:0}<fr0>", "^iv1/iv": "{#true,&,*iv1/cond:0}<fr0>",
        "^iv2/iv": "{#true,&,*iv2/cond:0}<fr0>",
        "^add0": "({#true,&,*iv1/cond:0}<fr0> & {#true,&,*iv0/cond:0}<fr0>)",
        "^add1": "({#true,&,*iv1/cond:0}<fr0> & {#true,&,*iv2/cond:0}<fr0>)",
    },
    "ControlEquivalentLoopBodies": {
        "^iv0/iv": "{#true,&,*iv0/cond:0}<loop>", "^div0/iv": "{#true,&,(*iv0/cond:0 & iv0/iv:0)}<loop>",
        "^div1/iv": "{#true,&,(*iv0/cond:0 & iv0/iv:0)}<loop>", "^add0": "{#true,&,(*iv0/cond:0 & iv0/iv:0)}<loop>",
    },
    "LoopInvariantPredicateOnBackedge": {"^div0/iv": "div0/iv:0"},
    "ControlEquivalentNestedLoopBodies": {
        "^iv_outer/iv": "{#true,&,*iv_outer/cond:0}<outer_loop>",
        "^iv_inner/iv": "{({#true,&,*iv_outer/cond:0}<outer_loop> & *iv_outer/cond:0),&,*iv_inner/cond:0}"
                        "<inner_loop;outer_loop>",
        **{k: "{{#true,&,(iv_outer/iv:0 & *iv_outer/cond:0)}<outer_loop>,&,(*iv_inner/cond:0 & iv_inner/iv:0)}"
              "<inner_loop;outer_loop>" for k in ("^dependent_inner_iv0/iv", "^dependent_inner_iv1/iv", "^add0")},
    },
    "ControlNonEquivalentNestedLoopBodies": {
        "^iv_outer/iv": "{#true,&,*iv_outer/cond:0}<outer_loop>",
        "^iv_inner/iv": "{({#true,&,*iv_outer/cond:0}<outer_loop> & *iv_outer/cond:0),&,*iv_inner/cond:0}"
                        "<inner_loop;outer_loop>",
        "^iv_outer/iv_1": "{#true,&,*iv_outer/cond_1:0}<outer_loop>",
        "^iv_inner/iv_1": "{({#true,&,*iv_outer/cond_1:0}<outer_loop> & *iv_outer/cond_1:0),&,*iv_inner/cond_1:0}"
                          "<inner_loop;outer_loop>",
        "^add0": "({({#true,&,*iv_outer/cond:0}<outer_loop> & *iv_outer/cond:0),&,*iv_inner/cond:0}"
                 "<inner_loop;outer_loop> & {({#true,&,*iv_outer/cond_1:0}<outer_loop> & *iv_outer/cond_1:0),&,"
                 "*iv_inner/cond_1:0}<inner_loop;outer_loop>)",
    },
}

# HasInputsWithMismatchingDeadness of add0 (and add1), as each TEST expects it
_MISMATCH = {"Loop": {"add0": True, "add1": True}, "ControlEquivalentLoopBodies": {"add0": False},
             "ControlEquivalentNestedLoopBodies": {"add0": False},
             "ControlNonEquivalentNestedLoopBodies": {"add0": True}}


def _canonical(pred: str) -> str:
    """A predicate string with the operands of every ``(a & b ...)`` / ``(a | b ...)`` sorted."""
    def parse(i):
        if pred[i] in "({":
            close = ")" if pred[i] == "(" else "}"
            parts, depth, start, j = [], 0, i + 1, i + 1
            while True:
                c = pred[j]
                if c in "({":
                    depth += 1
                elif c in ")}":
                    if depth == 0:
                        break
                    depth -= 1
                j += 1
            inner = pred[i + 1:j]
            if close == ")":
                for sep in (" & ", " | "):
                    items, depth, last = [], 0, 0
                    for k, c in enumerate(inner):
                        depth += c in "({"
                        depth -= c in ")}"
                        if depth == 0 and inner.startswith(sep, k):
                            items.append(inner[last:k])
                            last = k + len(sep)
                    if items:
                        items.append(inner[last:])
                        parts = sorted(_canonical(x) for x in items)
                        return "(" + sep.join(parts) + ")", j + 1
                return "(" + _canonical(inner) + ")", j + 1
            fields, depth, last = [], 0, 0
            for k, c in enumerate(inner):
                depth += c in "({"
                depth -= c in ")}"
                if depth == 0 and c == ",":
                    fields.append(inner[last:k])
                    last = k + 1
            fields.append(inner[last:])
            return "{" + ",".join(_canonical(x) if x != "&" else x for x in fields) + "}", j + 1
        return None, i

    if pred and pred[0] in "({":
        head, end = parse(0)
        return head + pred[end:]
    if pred.startswith("~"):
        return "~" + _canonical(pred[1:])
    return pred


@pytest.mark.parametrize("test", list(DEADNESS_LOOP_GRAPHS))
def test_Deadness_loops_as_tf_2_21_computes_them(test):
    """deadness_analysis_test ``Loop``, ``ControlEquivalentLoopBodies``,
    ``LoopInvariantPredicateOnBackedge``, ``ControlEquivalentNestedLoopBodies`` and
    ``ControlNonEquivalentNestedLoopBodies``, in TF 2.21's default (optimistic) mode: the
    control predicates equal what real TF 2.21 logs for the same graph (deadness.json), and
    HasInputsWithMismatchingDeadness answers as each TEST expects (equivalent loop bodies
    agree, different conditions do not)."""
    import json

    truth = json.loads((Path(__file__).parent / "data" / "tf_pass_tests" / "deadness.json").read_text())[test]
    builder, _, keep = DEADNESS_LOOP_GRAPHS[test]
    tg, r = builder().analyse()
    got = {k: r.as_strings()[k] for k in keep}
    assert got == truth
    for name, expected in _MISMATCH.get(test, {}).items():
        assert mismatching(tg, r, name) is expected, name


@pytest.mark.parametrize("test", list(DEADNESS_LOOP_GRAPHS))
def test_Deadness_loops_pessimistic_mode(test):
    """The same five TESTs as their text states them: ComputePredicates without the optimistic
    mode (TF's ``enable_optimistic=false``) treats a loop-invariant Merge as a recurrence whose
    step includes the Merge's own symbol, and leaves a Merge whose back edge does not depend on
    it (``LoopInvariantPredicateOnBackedge``) an opaque symbol."""
    builder, _, keep = DEADNESS_LOOP_GRAPHS[test]
    tg = builder().tf()
    tg.fixup_source_and_sink_edges()
    r = deadness_analysis(tg, enable_optimistic=False)
    got = {k: _canonical(r.as_strings()[k]) for k in keep}
    assert got == {k: _canonical(v) for k, v in _PESSIMISTIC[test].items()}


def test_Deadness_AndRecurrenceNeedsFrameName():
    """``AndRecurrenceNeedsFrameName``: the same start and step in two frames are two different
    recurrences (the frame is part of the predicate)."""
    d = Dead()
    d.induction_var("iv_0", "frame_0", 10)
    d.induction_var("iv_1", "frame_1", 9)
    init, _ = d.switch("init")
    step, _ = d.switch("step")
    for i in (0, 1):
        d.add(f"init_enter_frame_{i}", "Enter", [init], T=ty(F32), frame_name=f"frame_{i}", is_constant=True)
        d.add(f"step_enter_frame_{i}", "Enter", [step], T=ty(F32), frame_name=f"frame_{i}", is_constant=True)
        d.add(f"expr_{i}", "Merge", [f"init_enter_frame_{i}", f"expr_{i}_next_iteration"], T=ty(F32), N=2)
        d.binop(f"add_{i}", f"expr_{i}", f"step_enter_frame_{i}")
        d.add(f"expr_{i}_next_iteration", "NextIteration", [f"add_{i}"], T=ty(F32))
        d.add(f"exit_{i}", "Exit", [f"expr_{i}"], T=ty(F32))
    _, r = d.analyse()
    for kind in ("exit_", "expr_{}_next_iteration"):
        names = [kind + str(i) if "{}" not in kind else kind.format(i) for i in (0, 1)]
        p0, p1 = (ctrl_pred(r, n) for n in names)
        assert p0 and p1 and p0 != p1


def test_Deadness_ControlInputs():
    """``ControlInputs``: constants with control inputs from opposite sides of a Switch
    differ."""
    d = Dead()
    t, f = d.switch("0")
    d.add("id0", "Identity", [f], T=ty(F32))
    d.add("id1", "Identity", [t], T=ty(F32))
    d.const("const0", 1, inputs=["^id0"])
    d.const("const1", 2, inputs=["^id1"])
    d.add("add", "Add", ["const0", "const1"], T=ty(I32))
    assert mismatching(*d.analyse(), "add")


def test_Deadness_ControlTrigger():
    """``ControlTrigger``: a ControlTrigger is alive even when its inputs are dead, so the
    constants behind two of them agree."""
    d = Dead()
    t, f = d.switch("0")
    d.add("id0", "Identity", [f], T=ty(F32))
    d.add("id1", "Identity", [t], T=ty(F32))
    d.add("ctrl_trigger0", "ControlTrigger", ["^id0"])
    d.add("ctrl_trigger1", "ControlTrigger", ["^id1"])
    d.const("const0", 1, inputs=["^ctrl_trigger0"])
    d.const("const1", 2, inputs=["^ctrl_trigger1"])
    d.add("add", "Add", ["const0", "const1"], T=ty(I32))
    assert not mismatching(*d.analyse(), "add")


def test_Deadness_ControlInputsToMerge():
    """``ControlInputsToMerge``: a Merge ignores its control inputs: two Merges of one constant
    agree whatever controls them."""
    d = Dead()
    t, f = d.switch("0")
    d.add("id0", "Identity", [f], T=ty(F32))
    d.add("id1", "Identity", [t], T=ty(F32))
    d.const("constant", 5)
    d.add("m0", "Merge", ["constant", "^id0"], T=ty(I32), N=1)
    d.add("m0_1", "Merge", ["constant", "^id1"], T=ty(I32), N=1)
    d.add("add", "Add", ["m0", "m0_1"], T=ty(I32))
    assert not mismatching(*d.analyse(), "add")


def _recv_vs_switch() -> Dead:
    d = Dead()
    d.add("recv", "_Recv", tensor_type=ty(BOOL), tensor_name="tensor", send_device="sender",
          send_device_incarnation=0, recv_device="receiver")
    d.placeholder("value", BOOL)
    d.add("switch", "Switch", ["value", "recv"], T=ty(BOOL))
    d.add("and", "LogicalAnd", ["recv", "switch:1"])
    return d


def test_Deadness_RecvVsSwitch():
    """``RecvVsSwitch``: "the _Recv is alive" and "its value is true" are different symbols."""
    assert mismatching(*_recv_vs_switch().analyse(), "and")


def test_Deadness_RecvVsSwitchText():
    """``RecvVsSwitchText``: the LogicalAnd's control predicate prints as TF prints it."""
    _, r = _recv_vs_switch().analyse()
    assert ctrl_pred(r, "and") == "(recv:0 & *recv:0)"


def test_Deadness_DeMorgan():
    """``DeMorgan``: (A & B) & (~A | ~B) is #false, (A & B) | (~A | ~B) is #true."""
    d = Dead()
    d.placeholder("cond_0", BOOL)
    d.placeholder("cond_1", BOOL)
    d.placeholder("value")
    d.add("switch_0", "Switch", ["value", "cond_0"], T=ty(F32))
    d.add("switch_1", "Switch", ["value", "cond_1"], T=ty(F32))
    d.binop("and_0_1", "switch_0:1", "switch_1:1")
    d.merge("or_not0_not1", "switch_0", "switch_1")
    d.binop("should_always_be_dead", "and_0_1", "or_not0_not1")
    d.merge("should_always_be_alive", "and_0_1", "or_not0_not1")
    _, r = d.analyse()
    assert ctrl_pred(r, "should_always_be_dead") == "#false"
    assert ctrl_pred(r, "should_always_be_alive") == "#true"


def test_canonical_predicate_ignores_only_operand_order():
    """The pessimistic comparison's helper: operand order inside & and | is ignored at every
    depth, nothing else is."""
    assert _canonical("({#true,&,(b & a)}<f> & c)") == _canonical("(c & {#true,&,(a & b)}<f>)")
    assert _canonical("(a & b)") != _canonical("(a & c)")
    assert _canonical("{#true,&,(a & b)}<f>") != _canonical("{#true,&,(a & b)}<g>")
    assert _canonical("(a | b)") != _canonical("(a & b)")


# ================================================================================================
# encapsulate_subgraphs_pass_test.cc
# ================================================================================================
# These TESTs call TF's EncapsulateSubgraphsInFunctions directly: nodes grouped by the attribute
# "_encapsulate" (or "_cluster"), no rewrite callback, no reuse of existing functions. jitsim's
# encapsulate_subgraphs(group_attribute=..., xla_rewrite=False) is that call.

from jitsim.passes.encapsulate import encapsulate_subgraphs  # noqa: E402

# The test file's own ops (REGISTER_OP in the TEST file), as an op library
_ENCAPSULATE_OPS = """
op { name: "InputTest" output_arg { name: "o" type: DT_FLOAT } }
op { name: "UnaryTest" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "o" type: DT_FLOAT } }
op { name: "BinaryTest" input_arg { name: "a" type: DT_FLOAT } input_arg { name: "b" type: DT_FLOAT }
     output_arg { name: "o" type: DT_FLOAT } }
"""


def _encapsulate_library() -> OpLibrary:
    ol = text_format.Parse(_ENCAPSULATE_OPS, protos.OpList())
    return OpLibrary({o.name: o for o in ol.op}, source="encapsulate_subgraphs_pass_test.cc")


def _x_times_two():
    """TF's test::function::XTimesTwo (a library function the TESTs carry through unchanged)."""
    f = protos.FunctionDef()
    text_format.Parse("""
      signature { name: "XTimesTwo" input_arg { name: "x" type_attr: "T" } output_arg { name: "y" type_attr: "T" }
                  attr { name: "T" type: "type" } }
      node_def { name: "two" op: "Const" attr { key: "dtype" value { type: DT_INT64 } }
                 attr { key: "value" value { tensor { dtype: DT_INT64 tensor_shape { } int64_val: 2 } } } }
      node_def { name: "scale" op: "Cast" input: "two:output:0" attr { key: "SrcT" value { type: DT_INT64 } }
                 attr { key: "DstT" value { placeholder: "T" } } }
      node_def { name: "y" op: "Mul" input: "x" input: "scale:y:0" attr { key: "T" value { placeholder: "T" } } }
      ret { key: "y" value: "y:z:0" }
    """, f)
    return f


def _encapsulate(b: GraphBuilder, group="_encapsulate"):
    with using_op_libraries(_encapsulate_library()):
        return encapsulate_subgraphs(b.tf(), group_attribute=group, xla_rewrite=False)


def _fn_summary(f) -> dict:
    """What TF's EqualFunctionDef compares: signature, attrs, ret, and per node op, device,
    inputs (in order) and attrs."""
    return {
        "inputs": [(a.name, a.type) for a in f.signature.input_arg],
        "outputs": [(a.name, a.type) for a in f.signature.output_arg],
        "attr": {k: v.SerializeToString(deterministic=True) for k, v in f.attr.items()},
        "ret": dict(f.ret),
        "nodes": {n.name: (n.op, n.device, list(n.input),
                           {k: v.SerializeToString(deterministic=True) for k, v in n.attr.items()})
                  for n in f.node_def},
    }


def _graph_summary(gd) -> dict:
    """What TF's EqualGraphDef compares: per node op, device, data inputs in order, control
    inputs as a set, attrs."""
    return {n.name: (n.op, n.device, [i for i in n.input if not i.startswith("^")],
                     sorted(i for i in n.input if i.startswith("^")),
                     {k: v.SerializeToString(deterministic=True) for k, v in n.attr.items()}) for n in gd.node}


def _ab_graph() -> GraphBuilder:
    b = GraphBuilder()
    b.add("A", "InputTest")
    b.add("B", "InputTest")
    b.gd.library.function.add().CopyFrom(_x_times_two())
    return b


def test_Encapsulate_NoFunctions():
    """encapsulate_subgraphs_pass_test ``NoFunctions``: with no marked node the graph and the
    library come back unchanged."""
    b = _ab_graph()
    b.add("C", "UnaryTest", ["A"])
    b.add("D", "BinaryTest", ["B", "C"])
    res = _encapsulate(b)
    out = res.graph.to_graphdef()
    assert _graph_summary(out) == _graph_summary(b.gd)
    assert [f.signature.name for f in out.library.function] == ["XTimesTwo"]
    assert out.library.function[0] == _x_times_two()


def test_Encapsulate_OneFunction():
    """``OneFunction``: ``C`` and ``c`` (names that collide once lower-cased) become function
    F1(a_0_arg, b_0_arg) -> c_0_retval, the in-function control edge kept, the group attribute
    dropped; the graph calls ``F1`` (op F1, no attributes) with A and B, and E reads it."""
    b = _ab_graph()
    b.add("C", "UnaryTest", ["A"], _encapsulate="F1")
    b.add("c", "BinaryTest", ["B", "C", "^C"], _encapsulate="F1")
    b.add("E", "BinaryTest", ["A", "c"])
    res = _encapsulate(b)
    out = res.graph.to_graphdef()
    assert _graph_summary(out) == {
        "A": ("InputTest", "", [], [], {}), "B": ("InputTest", "", [], [], {}),
        "F1": ("F1", "", ["A", "B"], [], {}), "E": ("BinaryTest", "", ["A", "F1"], [], {})}
    fns = {f.signature.name: f for f in out.library.function}
    assert set(fns) == {"XTimesTwo", "F1"} and fns["XTimesTwo"] == _x_times_two()
    assert _fn_summary(fns["F1"]) == {
        "inputs": [("a_0_arg", F32), ("b_0_arg", F32)], "outputs": [("c_0_retval", F32)], "attr": {},
        "ret": {"c_0_retval": "c:o:0"},
        "nodes": {"C": ("UnaryTest", "", ["a_0_arg"], {}), "c": ("BinaryTest", "", ["b_0_arg", "C:o:0", "^C"], {})}}


def test_Encapsulate_TwoFunctions():
    """``TwoFunctions``: C -> F1, D -> F2; F2's second argument is F1's result, named after its
    source ``C`` (c_0_arg); both calls keep the shared control input."""
    b = _ab_graph()
    b.add("Control", "InputTest")
    b.add("C", "UnaryTest", ["A", "^Control"], _encapsulate="F1")
    b.add("D", "BinaryTest", ["B", "C", "^Control"], _encapsulate="F2")
    b.add("E", "BinaryTest", ["A", "D"])
    out = _encapsulate(b).graph.to_graphdef()
    g = _graph_summary(out)
    assert g["F1"] == ("F1", "", ["A"], ["^Control"], {})
    assert g["F2"] == ("F2", "", ["B", "F1"], ["^Control"], {})
    assert g["E"] == ("BinaryTest", "", ["A", "F2"], [], {})
    assert set(g) == {"A", "B", "Control", "F1", "F2", "E"}
    fns = {f.signature.name: f for f in out.library.function}
    assert set(fns) == {"XTimesTwo", "F1", "F2"}
    assert _fn_summary(fns["F1"]) == {
        "inputs": [("a_0_arg", F32)], "outputs": [("c_0_retval", F32)], "attr": {},
        "ret": {"c_0_retval": "C:o:0"}, "nodes": {"C": ("UnaryTest", "", ["a_0_arg"], {})}}
    assert _fn_summary(fns["F2"]) == {
        "inputs": [("b_0_arg", F32), ("c_0_arg", F32)], "outputs": [("d_0_retval", F32)], "attr": {},
        "ret": {"d_0_retval": "D:o:0"}, "nodes": {"D": ("BinaryTest", "", ["b_0_arg", "c_0_arg"], {})}}


def _edges(gd) -> list[tuple[str, str]]:
    """TF's GraphEdges: sorted (src:output, dst:input) data edges (control inputs count
    -1 on both sides; source and sink edges left out)."""
    out = []
    for n in gd.node:
        slot = 0
        for ref in n.input:
            if ref.startswith("^"):
                out.append((f"{ref[1:]}:-1", f"{n.name}:-1"))
                continue
            src, _, idx = ref.partition(":")
            out.append((f"{src}:{idx or 0}", f"{n.name}:{slot}"))
            slot += 1
    return sorted(out)


def test_Encapsulate_InputDeduplication():
    """``InputDeduplication``: add1 (cluster1) feeds add2 (cluster2) twice and mul once: the
    output graph has one edge per distinct (source, destination argument) pair."""
    b = GraphBuilder(LOCAL_CPU)
    b.placeholder("x")
    b.add("add1", "Add", ["x", "x"], T=ty(F32), _cluster="cluster1")
    b.add("add2", "Add", ["add1", "add1"], T=ty(F32), _cluster="cluster2")
    b.add("mul", "Mul", ["add1", "add2"], T=ty(F32))
    out = _encapsulate(b, "_cluster").graph.to_graphdef()
    assert sorted(n.name for n in out.node) == ["cluster1", "cluster2", "mul", "x"]
    assert _edges(out) == [("cluster1:0", "cluster2:0"), ("cluster1:0", "mul:0"), ("cluster2:0", "mul:1"),
                           ("x:0", "cluster1:0")]


def _guaranteed_args(res) -> dict[str, bool]:
    """Every _Arg of the built functions (by the name it had in the subgraph, which is what
    TF's rewrite callback sees) -> whether it carries ``_is_guaranteed_constant``."""
    out = {}
    for dec in res.decisions.values():
        for a in dec.args:
            out[a.source.rsplit(":", 1)[0]] = a.guaranteed_constant
    return out


def test_EncapsulateWithGuaranteeConst_Simple():
    """encapsulate_subgraphs_pass_test ``EncapsulateSubgraphsWithGuaranteeConstOpTest.Simple``:
    both arguments of the encapsulated Add come from GuaranteeConst nodes, so both ``_Arg``
    nodes carry ``_is_guaranteed_constant`` (two)."""
    b = GraphBuilder(LOCAL_CPU)
    b.placeholder("x1")
    b.placeholder("x2")
    b.add("const_guarantee_x2", "GuaranteeConst", ["x2"], T=ty(F32))
    b.add("const_guarantee_x1", "GuaranteeConst", ["x1"], T=ty(F32))
    b.add("add1", "Add", ["const_guarantee_x1", "const_guarantee_x2"], T=ty(F32), _encapsulate="encapsulate1")
    args = _guaranteed_args(_encapsulate(b))
    assert args == {"const_guarantee_x1": True, "const_guarantee_x2": True}


def test_guaranteed_constant_needs_a_guarantee_const_ancestor():
    """TF 2.21's AreAllParentsGuaranteedConst (encapsulate_subgraphs_pass.cc): a node is a
    guaranteed constant if it is a GuaranteeConst, or has at least one data input and all its
    data inputs are; a plain Const (no data input) is not one (an older version of the
    ``Simple`` TEST counted it)."""
    b = GraphBuilder(LOCAL_CPU)
    b.placeholder("x1")
    b.const("const_x2", 10.0, F32)
    b.add("const_guarantee_x1", "GuaranteeConst", ["x1"], T=ty(F32))
    b.add("add1", "Add", ["const_guarantee_x1", "const_x2"], T=ty(F32), _encapsulate="encapsulate1")
    assert _guaranteed_args(_encapsulate(b)) == {"const_guarantee_x1": True, "const_x2": False}


def test_EncapsulateWithGuaranteeConst_Add():
    """``EncapsulateSubgraphsWithGuaranteeConstOpTest.Add``: an Add of two GuaranteeConsts is
    guaranteed constant; an Add of one and a Placeholder is not: exactly one guaranteed
    argument (``const_guarantee_add1``)."""
    b = GraphBuilder(LOCAL_CPU)
    b.placeholder("x1")
    b.placeholder("x2")
    b.add("const_guarantee_x1", "GuaranteeConst", ["x1"], T=ty(F32))
    b.add("const_guarantee_x2", "GuaranteeConst", ["x2"], T=ty(F32))
    b.add("const_guarantee_add1", "Add", ["const_guarantee_x1", "const_guarantee_x2"], T=ty(F32))
    b.add("add2", "Add", ["const_guarantee_x1", "x2"], T=ty(F32))
    b.add("mul1", "Mul", ["const_guarantee_add1", "add2"], T=ty(F32), _encapsulate="encapsulate1")
    res = _encapsulate(b)
    args = _guaranteed_args(res)
    assert args == {"const_guarantee_add1": True, "add2": False}
    assert sum(args.values()) == 1
