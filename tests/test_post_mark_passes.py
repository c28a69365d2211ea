"""The three passes TF 2.21 runs between mark-for-compilation and encapsulation:
``ForceXlaConstantsOnHost`` (phase 12), ``IncreaseDynamismForAutoJit`` (20) and
``PartiallyDecluster`` (30, sub-phases A, B, C).

Corpus test: for every graph of every fixtures run, the three passes run in TF's order on
TF's ``mark_for_compilation`` dump must give exactly TF's ``encapsulate_subgraphs_before``
dump (the graph after them; ``ReportClusteringInfo`` in between changes nothing): same
node names *in the same order* (TF writes nodes in id order), ops, devices, data inputs
in order, control inputs as a set, every attribute (none ignored) and the nodes'
``experimental_debug_info``.

Unit tests: tiny hand-built graphs, one behaviour each, with the reason in the docstring.
Several mirror small TF 2.21 programs whose dumps were checked against these passes
(marked "checked with TF 2.21"): Slices with -1 sizes / int64 begin / in a while loop, a
BroadcastArgs feeding a jit_compile function's constant argument (phase A on CPU), root
shape consumers and must-be-constant chains. ``tf-passes`` is ``docs/tf-passes.md``.
"""

from __future__ import annotations

import struct

import pytest

from jitsim.crosscheck.corpus import Corpus
from jitsim.crosscheck.graphdiff import diff_graphdefs
from jitsim.errors import GraphError
from jitsim.graph import Graph, load
from jitsim.registry import protos
from jitsim.options import options_for
from jitsim.passes.force_constants_on_host import force_xla_constants_on_host
from jitsim.passes.increase_dynamism import (
    device_name_to_cpu_device_name, increase_dynamism_for_auto_jit, int_tensor,
)
from jitsim.registry.kernels import find_kernel
from jitsim.passes.partially_decluster import partially_decluster
from jitsim.graph.tfgraph import TfGraph

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
CPU1 = "/job:localhost/replica:0/task:0/device:CPU:1"
GPU = "/job:localhost/replica:0/task:0/device:GPU:0"
XLA_CPU = "/job:localhost/replica:0/task:0/device:XLA_CPU:0"
C0, C1 = "cluster_0", "cluster_1"

_DT = protos.DataType.values_by_name
F32, I32, I64, RES = (_DT[n].number for n in ("DT_FLOAT", "DT_INT32", "DT_INT64", "DT_RESOURCE"))

AUTO = options_for("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
XLA_DEVICES = options_for("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_enable_xla_devices")


# -- corpus: every graph, TF's own before/after dumps ---------------------------------------------

_CORPUS = Corpus()
MARK, AFTER = "mark_for_compilation", "encapsulate_subgraphs_before"


def _pairs(corpus, run):
    return [g for g in corpus.index(run)["graphs"] if MARK in g["files"] and AFTER in g["files"]]


RUNS = [r for r in _CORPUS.built() if _pairs(_CORPUS, r)]

# Runs where the passes must actually do something (so "identical" is not vacuous).
EXPECTED_DECISIONS = {
    "resnet101_train_nograppler": {"SLICE_MADE_STATIC"},
    "dynamic_shapes": {"DECLUSTERED_RECOMPILATION"},
    "dynamic_batch_signature": {"DECLUSTERED_RECOMPILATION"},
    "numeric_no_xla_kernel": {"DECLUSTERED_RECOMPILATION"},
    "nested_jit_compile": {"INPUT_HOSTMEM"},
}


def run_post_mark(tg: TfGraph, options):
    """The three passes in TF's order; returns their results."""
    return [
        force_xla_constants_on_host(tg, options),
        increase_dynamism_for_auto_jit(tg, options),
        partially_decluster(tg, options),
    ]


@pytest.mark.parametrize("run", RUNS)
def test_corpus_matches_tf(corpus, run):
    flags = options_for(corpus.run(run).flags)
    d = corpus.extract(run)
    failures, codes = [], set()
    for g in _pairs(corpus, run):
        files = g["files"]
        tg = TfGraph.from_graph(load(d / "dumps" / files[MARK]))
        for res in run_post_mark(tg, flags):
            codes.update(dec.code for dec in res.decisions.values())
        predicted = tg.to_graphdef()
        truth = load(d / "dumps" / files[AFTER]).graphdef
        diff = diff_graphdefs(predicted, truth)
        if not diff.identical:
            failures.append(f"{files[MARK]}:\n{diff.format_text(limit=10)}")
        elif [n.name for n in predicted.node] != [n.name for n in truth.node]:
            failures.append(f"{files[MARK]}: same nodes, different order (TF's node ids)")
        elif any(p.experimental_debug_info != t.experimental_debug_info for p, t in zip(predicted.node, truth.node)):
            failures.append(f"{files[MARK]}: experimental_debug_info differs")
    assert not failures, "\n".join(failures)
    missing = EXPECTED_DECISIONS.get(run, set()) - codes
    assert not missing, f"expected decisions {missing} in {run}, got {codes}"


def test_corpus_exercises_the_passes():
    assert set(EXPECTED_DECISIONS) <= set(RUNS)
    assert sum(len(_pairs(_CORPUS, r)) for r in RUNS) >= 600


# -- graph building helpers -------------------------------------------------------------------------


def ty(t: int):
    return protos.AttrValue(type=t)


def int_const_value(values, dtype=I32, shape=None, packed=False):
    av = protos.AttrValue()
    t = av.tensor
    t.dtype = dtype
    for s in ([len(values)] if shape is None else shape):
        t.tensor_shape.dim.add(size=s)
    if shape == []:
        t.tensor_shape.SetInParent()
    if packed:
        t.tensor_content = struct.pack(f"<{len(values)}{'i' if dtype == I32 else 'q'}", *values)
    elif dtype == I32:
        t.int_val.extend(values)
    else:
        t.int64_val.extend(values)
    return av


class G:
    """A graph as TF's pass sees it: nodes in id order, devices assigned, clusters marked."""

    def __init__(self):
        self.gd = protos.GraphDef()

    def add(self, name, op, inputs=(), *, cluster=None, device=CPU, **attrs):
        nd = self.gd.node.add(name=name, op=op, device=device)
        nd.input.extend(inputs)
        for k, v in attrs.items():
            if isinstance(v, bool):
                nd.attr[k].b = v
            elif isinstance(v, int):
                nd.attr[k].type = v
            else:
                nd.attr[k].CopyFrom(v)
        if cluster:
            nd.attr["_XlaCluster"].s = cluster.encode()
            nd.attr["_XlaAlreadyClustered"].b = True
        return self

    def const(self, name, values, dtype=I32, *, inputs=(), cluster=None, device=CPU, shape=None):
        return self.add(name, "Const", inputs, cluster=cluster, device=device,
                        value=int_const_value(values, dtype, shape), dtype=dtype)

    def arg(self, name, dtype=F32, index=0, device=CPU):
        return self.add(name, "_Arg", device=device, T=dtype, index=protos.AttrValue(i=index))

    def tf(self) -> TfGraph:
        return TfGraph.from_graph(Graph(self.gd))


def nodes_by_name(tg: TfGraph) -> dict:
    return {n.name: n for n in tg.to_graphdef().node}


def cluster(nd) -> str | None:
    return nd.attr["_XlaCluster"].s.decode() if "_XlaCluster" in nd.attr else None


def names(tg: TfGraph) -> list[str]:
    return [n.name for n in tg.op_nodes()]


# -- helpers ---------------------------------------------------------------------------------------


def test_int_tensor_reads_every_encoding():
    """Both packed ``tensor_content`` and repeated fields; a short repeated field is padded with
    its last value and an empty one means zeros (``Tensor::FromProto``)."""
    assert int_tensor(int_const_value([3, -1], I32, packed=True).tensor) == ([2], [3, -1])
    assert int_tensor(int_const_value([5, -1], I64, packed=True).tensor) == ([2], [5, -1])
    assert int_tensor(int_const_value([7], I32, shape=[3]).tensor) == ([3], [7, 7, 7])
    assert int_tensor(int_const_value([], I64, shape=[2]).tensor) == ([2], [0, 0])
    assert int_tensor(int_const_value([4], I32, shape=[]).tensor) == ([], [4])


def test_cpu_device_of_host():
    """Helper nodes of a static slice go to CPU:0 of the slice's job/replica/task."""
    assert device_name_to_cpu_device_name(GPU) == CPU
    assert (device_name_to_cpu_device_name("/job:w/replica:1/task:2/device:GPU:3")
            == "/job:w/replica:1/task:2/device:CPU:0")
    assert device_name_to_cpu_device_name("") == "/device:CPU:0"
    with pytest.raises(GraphError):
        device_name_to_cpu_device_name("not a device")


def test_kernel_lookup_uses_tf_cpu_gpu_kernels():
    """Regular TF kernels, not XLA's: ``Reshape`` exists on CPU and GPU, ``XlaSetBound`` only
    compiles, a ``_kernel`` label must match, string-valued constraints are checked
    (``SpaceToDepth`` with ``data_format=NCHW_VECT_C`` has no CPU kernel), and ``Const`` on any
    device falls back to its DEFAULT kernel."""
    nd = protos.NodeDef(name="r", op="Reshape")
    nd.attr["T"].type = F32
    nd.attr["Tshape"].type = I32
    assert find_kernel(nd, "CPU") is not None and find_kernel(nd, "GPU") is not None
    bound = protos.NodeDef(name="b", op="XlaSetBound")
    assert find_kernel(bound, "CPU") is None
    nd.attr["_kernel"].s = b"no_such_label"
    assert find_kernel(nd, "CPU") is None
    s2d = protos.NodeDef(name="s", op="SpaceToDepth")
    s2d.attr["T"].type = F32
    s2d.attr["block_size"].i = 2
    s2d.attr["data_format"].s = b"NHWC"
    assert find_kernel(s2d, "CPU") is not None
    s2d.attr["data_format"].s = b"NCHW_VECT_C"
    assert find_kernel(s2d, "CPU") is None
    c = protos.NodeDef(name="c", op="Const")
    c.attr["dtype"].type = F32
    assert find_kernel(c, "TPU").device_type == "DEFAULT"


# -- ForceXlaConstantsOnHost (tf-passes §10) ---------------------------------------------------------------


def _library_with_reshape_fn(gd, name="f_reshape"):
    """``f(x: float, shape: int32) = Reshape(x, shape)``: argument 1 must be a compile-time constant."""
    f = gd.library.function.add()
    f.signature.name = name
    f.signature.input_arg.add(name="x", type=F32)
    f.signature.input_arg.add(name="shape", type=I32)
    f.signature.output_arg.add(name="out", type=F32)
    r = f.node_def.add(name="r", op="Reshape", input=["x", "shape"])
    r.attr["T"].type = F32
    r.attr["Tshape"].type = I32
    f.ret["out"] = "r:output:0"
    return name


def test_input_hostmem_lists_constant_args_of_must_compile_calls():
    """A ``jit_compile=True`` call (``_XlaMustCompile=true``) to a function whose second argument
    is a Reshape shape gets ``_input_hostmem = [1]``: that argument must be known at compile
    time, so the executor keeps it in host memory. Calls without the attr (or with it false)
    are left alone."""
    g = G().arg("x").arg("s", I32, 1)
    fname = _library_with_reshape_fn(g.gd)
    f = protos.AttrValue()
    f.func.name = fname
    g.add("call", "StatefulPartitionedCall", ["x", "s"], f=f, Tin=protos.AttrValue(), Tout=protos.AttrValue(),
          _XlaMustCompile=True)
    g.add("plain", "StatefulPartitionedCall", ["x", "s"], f=f, Tin=protos.AttrValue(), Tout=protos.AttrValue())
    g.add("off", "PartitionedCall", ["x", "s"], f=f, Tin=protos.AttrValue(), Tout=protos.AttrValue(),
          _XlaMustCompile=False)
    tg = g.tf()
    res = force_xla_constants_on_host(tg)
    nodes = nodes_by_name(tg)
    assert list(nodes["call"].attr["_input_hostmem"].list.i) == [1]
    assert "_input_hostmem" not in nodes["plain"].attr and "_input_hostmem" not in nodes["off"].attr
    assert res.changed and res.decisions["call"].code == "INPUT_HOSTMEM"
    assert res.decisions["call"].evidence == {"function": fname, "input_hostmem": [1]}


def test_input_hostmem_written_even_when_empty_and_for_function_ops():
    """A must-compile node calling a function by op name (a library-function op) is handled the
    same way; with no constant argument TF still writes the attr, as ``list {}`` (checked with
    TF 2.21: ``nested_jit_compile``)."""
    g = G().arg("x")
    f = g.gd.library.function.add()
    f.signature.name = "f_neg"
    f.signature.input_arg.add(name="x", type=F32)
    f.signature.output_arg.add(name="y", type=F32)
    f.node_def.add(name="n", op="Neg", input=["x"]).attr["T"].type = F32
    f.ret["y"] = "n:y:0"
    g.add("call", "f_neg", ["x"], _XlaMustCompile=True)
    tg = g.tf()
    force_xla_constants_on_host(tg)
    av = nodes_by_name(tg)["call"].attr["_input_hostmem"]
    assert av.HasField("list") and list(av.list.i) == []


def test_must_compile_call_to_unknown_function_is_an_error():
    """TF cannot instantiate the function, which fails the whole graph."""
    g = G().arg("x")
    f = protos.AttrValue()
    f.func.name = "missing"
    g.add("call", "StatefulPartitionedCall", ["x"], f=f, _XlaMustCompile=True)
    with pytest.raises(GraphError, match="missing"):
        force_xla_constants_on_host(g.tf())


# -- IncreaseDynamismForAutoJit (tf-passes §11) -----------------------------------------------------------


def _slice_graph(size, *, begin_dtype=I32, size_dtype=I32, begin_const=False, clustered=True, device=CPU,
                 size_op="Const"):
    """x -> Tanh (clustered) -> Slice(begin from an Arg or Const, size) -> Neg (clustered)."""
    g = G().arg("x", device=device).arg("b", begin_dtype, 1, device=device)
    cl = C0 if clustered else None
    g.add("t", "Tanh", ["x"], cluster=cl, device=device, T=F32)
    if begin_const:
        g.const("bc", [0] * len(size), begin_dtype, cluster=cl, device=device)
    if size_op == "Const":
        g.const("size", size, size_dtype, cluster=cl, device=device)
    else:
        g.add("size", "Shape", ["t"], cluster=cl, device=device, T=F32, out_type=size_dtype)
    g.add("s", "Slice", ["t", "bc" if begin_const else "b", "size"], cluster=cl, device=device, T=F32,
          Index=begin_dtype)
    g.add("n", "Neg", ["s"], cluster=cl, device=device, T=F32)
    return g


def test_static_slice_with_constant_size_casts_begin_and_size():
    """All size elements >= 0 (checked with TF 2.21: resnet101's ``pool1_pad_1/Slice_1``):
    int32 ``begin``/``size`` are cast to int64 on the host CPU, the new Slice reads them, is
    marked ``_XlaCompileTimeConstantInputs=["size"]``, stays in the cluster (without
    ``_XlaAlreadyClustered``) and takes over the old slice's consumers; the old slice is gone."""
    tg = _slice_graph([2, 3]).tf()
    res = increase_dynamism_for_auto_jit(tg, AUTO)
    p = "s/static_shaped_slice/"
    assert names(tg)[-3:] == [p + "begin_s64", p + "size_s64", p + "static_shaped_slice"]
    nodes = nodes_by_name(tg)
    assert "s" not in nodes
    new = nodes[p + "static_shaped_slice"]
    assert list(new.input) == ["t", p + "begin_s64", p + "size_s64"]
    assert list(new.attr["_XlaCompileTimeConstantInputs"].list.s) == [b"size"]
    assert new.attr["Index"].type == I64 and new.attr["T"].type == F32
    assert cluster(new) == C0 and "_XlaAlreadyClustered" not in new.attr
    cast = nodes[p + "begin_s64"]
    assert cast.op == "Cast" and list(cast.input) == ["b"] and cast.attr["Truncate"].b is False
    assert cast.attr["SrcT"].type == I32 and cast.attr["DstT"].type == I64 and cluster(cast) == C0
    assert list(nodes["n"].input) == [p + "static_shaped_slice"]
    dec = res.decisions["s"]
    assert res.changed and dec.code == "SLICE_MADE_STATIC" and dec.evidence["size"] == [2, 3]


def test_minus_one_sizes_are_computed_from_the_input_shape():
    """Size ``[-1, 3]``: the -1 dimension becomes ``input_shape[0] - begin[0]`` (1-element Slices
    of a ``Shape`` and of the begin), the known one a cached 1-D constant ``const_3``, joined by
    ``ConcatV2`` over ``concat_axis``. Node creation order (= TF's ids, checked with TF 2.21):
    the constants for ``begin_0`` are created left to right (``const_0`` then ``const_1``)."""
    tg = _slice_graph([-1, 3]).tf()
    increase_dynamism_for_auto_jit(tg, AUTO)
    p = "s/static_shaped_slice/"
    created = [n for n in names(tg) if n.startswith(p)]
    assert created == [p + x for x in (
        "begin_s64", "size_s64", "input_shape", "const_0", "const_1", "begin_0", "input_shape_0", "slice_size_0",
        "const_3", "concat_axis", "slice_size", "static_shaped_slice")]
    nodes = nodes_by_name(tg)
    assert list(nodes[p + "begin_0"].input) == [p + "begin_s64", p + "const_0", p + "const_1"]
    assert list(nodes[p + "input_shape_0"].input) == [p + "input_shape", p + "const_0", p + "const_1"]
    assert list(nodes[p + "slice_size_0"].input) == [p + "input_shape_0", p + "begin_0"]
    assert list(nodes[p + "slice_size"].input) == [p + "slice_size_0", p + "const_3", p + "concat_axis"]
    assert nodes[p + "slice_size"].attr["N"].i == 2 and nodes[p + "slice_size"].attr["Tidx"].type == I32
    assert nodes[p + "input_shape"].attr["out_type"].type == I64
    assert list(nodes[p + "static_shaped_slice"].input) == ["t", p + "begin_s64", p + "slice_size"]
    c3 = nodes[p + "const_3"].attr["value"].tensor
    assert (c3.dtype, [d.size for d in c3.tensor_shape.dim], list(c3.int64_val)) == (I64, [1], [3])
    axis = nodes[p + "concat_axis"].attr["value"].tensor
    assert axis.dtype == I32 and axis.HasField("tensor_shape") and list(axis.int_val) == [0]
    assert all(cluster(nodes[p + x]) == C0 for x in ("input_shape", "const_0", "slice_size"))


def test_single_dimension_needs_no_concat_and_int64_begin_no_cast():
    """Size ``[-1]`` with an int64 begin: no ``begin_s64`` (already int64), no ``ConcatV2``
    (TF refuses trivial concats): the size is ``slice_size_0`` itself (checked with TF 2.21)."""
    tg = _slice_graph([-1], begin_dtype=I64, size_dtype=I64).tf()
    increase_dynamism_for_auto_jit(tg, AUTO)
    p = "s/static_shaped_slice/"
    created = [n for n in names(tg) if n.startswith(p)]
    assert created == [p + x for x in ("input_shape", "const_0", "const_1", "begin_0", "input_shape_0",
                                       "slice_size_0", "static_shaped_slice")]
    assert list(nodes_by_name(tg)[p + "static_shaped_slice"].input) == ["t", "b", p + "slice_size_0"]


@pytest.mark.parametrize("case", ["constant begin", "not clustered", "size below -1", "size not a Const",
                                  "scalar size"])
def test_slices_that_are_not_rewritten(case):
    """Only clustered Slices with a rank-1 ``Const`` size (all elements >= -1) and a begin that
    is not a constant are rewritten."""
    kw = {"constant begin": dict(begin_const=True), "not clustered": dict(clustered=False),
          "size below -1": dict(), "size not a Const": dict(size_op="Shape"), "scalar size": dict()}[case]
    size = {"size below -1": [-2, 3]}.get(case, [-1, 3])
    g = _slice_graph(size, **kw)
    if case == "scalar size":
        g.gd.node[3].attr["value"].CopyFrom(int_const_value([4], I32, shape=[]))
    tg = g.tf()
    before = tg.to_graphdef().SerializeToString(deterministic=True)
    res = increase_dynamism_for_auto_jit(tg, AUTO)
    assert not res.changed and not res.decisions
    assert tg.to_graphdef().SerializeToString(deterministic=True) == before


def test_control_inputs_of_size_and_slice_are_kept():
    """Constants created for the size copy the control inputs of the original size node (in a
    loop body that is the frame's pivot; checked with TF 2.21); the new slice copies the old
    slice's control inputs. Host nodes of a GPU slice are on the host CPU, the slice on the GPU."""
    g = G().arg("x", device=GPU).arg("b", I32, 1, device=GPU).add("pivot", "NoOp", device=GPU)
    g.add("t", "Tanh", ["x"], cluster=C0, device=GPU, T=F32)
    g.const("size", [-1, 2], inputs=["^pivot"], cluster=C0, device=GPU)
    g.add("s", "Slice", ["t", "b", "size", "^pivot"], cluster=C0, device=GPU, T=F32, Index=I32)
    tg = g.tf()
    increase_dynamism_for_auto_jit(tg, AUTO)
    nodes = nodes_by_name(tg)
    p = "s/static_shaped_slice/"
    for c in ("const_0", "const_1", "const_2", "concat_axis"):
        assert list(nodes[p + c].input) == ["^pivot"], c
        assert nodes[p + c].device == CPU
    assert list(nodes[p + "size_s64"].input) == ["size"]
    assert list(nodes[p + "static_shaped_slice"].input) == ["t", p + "begin_s64", p + "slice_size", "^pivot"]
    assert nodes[p + "static_shaped_slice"].device == GPU
    # the slice's former _SINK edge moved to the new slice: no dangling sink edges
    new = tg.nodes[tg.by_name[p + "static_shaped_slice"]]
    assert [tg.name(e.dst) for e in new.out_edges.values()] == ["_SINK"]


def test_sub_scope_name_is_made_unique():
    """TF's Scope makes the sub-scope unique against existing names and their prefixes."""
    g = _slice_graph([2, 3])
    g.add("s/static_shaped_slice/other", "NoOp")
    tg = g.tf()
    increase_dynamism_for_auto_jit(tg, AUTO)
    assert "s/static_shaped_slice_1/static_shaped_slice" in tg.by_name


# -- PartiallyDecluster phase A: device-to-host copies (tf-passes §12.1) ----------------------------------


def _hostmem_graph(*, in_cluster_consumer=True):
    """Checked with TF 2.21 (CPU): ``BroadcastArgs`` (int32 result in host memory on CPU) is
    clustered and feeds argument 1 of a ``jit_compile`` call outside the cluster whose
    ``_input_hostmem`` says it wants that argument in host memory."""
    g = G().arg("a").arg("b", F32, 1)
    fname = _library_with_reshape_fn(g.gd)
    g.add("sa", "Shape", ["a"], cluster=C0, T=F32, out_type=I32)
    g.add("sb", "Shape", ["b"], cluster=C0, T=F32, out_type=I32)
    g.add("ba", "BroadcastArgs", ["sa", "sb"], cluster=C0, T=I32)
    if in_cluster_consumer:
        g.add("cast", "Cast", ["ba"], cluster=C0, SrcT=I32, DstT=F32, Truncate=False)
    f = protos.AttrValue()
    f.func.name = fname
    g.add("call", "StatefulPartitionedCall", ["a", "ba"], f=f, _XlaMustCompile=True,
          Tin=protos.AttrValue(list=protos.AttrValue.ListValue(type=[F32, I32])),
          Tout=protos.AttrValue(list=protos.AttrValue.ListValue(type=[F32])))
    return g


def test_host_memory_output_to_host_memory_consumer_is_copied_out():
    """ForceXlaConstantsOnHost marks the call's input 1 host memory; the clustered producer's
    output is host memory too (its CPU kernel says so), so TF clones the producer as
    ``ba/declustered`` (unclustered, same inputs) to feed the call; the original stays for its
    in-cluster consumer."""
    tg = _hostmem_graph().tf()
    force_xla_constants_on_host(tg)
    res = partially_decluster(tg, AUTO)
    nodes = nodes_by_name(tg)
    clone = nodes["ba/declustered"]
    assert list(clone.input) == ["sa", "sb"] and cluster(clone) is None
    assert clone.attr["_XlaAlreadyClustered"].b and clone.device == CPU
    assert list(nodes["call"].input) == ["a", "ba/declustered"]
    assert cluster(nodes["ba"]) == C0 and list(nodes["cast"].input) == ["ba"]
    dec = res.decisions["ba"]
    assert dec.code == "DECLUSTERED_DEVICE_TO_HOST_COPY"
    assert dec.evidence["consumer"] == "call" and not dec.evidence["original_removed"]
    # the clustered BroadcastArgs needs s0/s1 at compile time and the Shapes read an _Arg:
    # phase B takes them out
    assert {k: v.code for k, v in res.decisions.items() if k != "ba"} == {
        "sa": "DECLUSTERED_RECOMPILATION", "sb": "DECLUSTERED_RECOMPILATION"}


def test_original_is_removed_when_nothing_in_the_cluster_reads_it():
    """As in the TF 2.21 run (where the Cast was in another cluster): every consumer of the
    original moved to the copy, so the original is removed; the Shapes then have no
    in-cluster consumer and no in-cluster input, and phase C takes them out."""
    tg = _hostmem_graph(in_cluster_consumer=False).tf()
    force_xla_constants_on_host(tg)
    res = partially_decluster(tg, AUTO)
    assert "ba" not in tg.by_name and "ba/declustered" in tg.by_name
    assert res.decisions["ba"].evidence["original_removed"]
    assert {k: v.code for k, v in res.decisions.items() if k != "ba"} == {
        "sa": "DECLUSTERED_ROOT_SHAPE_CONSUMER", "sb": "DECLUSTERED_ROOT_SHAPE_CONSUMER"}


def test_no_copy_without_host_memory_request():
    """Without ``_input_hostmem`` the must-compile call keeps int32 in device memory: no copy."""
    tg = _hostmem_graph().tf()
    partially_decluster(tg, AUTO)
    assert "ba/declustered" not in tg.by_name


def _gpu_chain():
    """GPU int32 kernels live in host memory; Reshape's ``shape`` input too."""
    g = G().arg("x", F32, 0, GPU).arg("k", I32, 1, GPU)
    g.add("t", "Tanh", ["x"], cluster=C0, device=GPU, T=F32)
    g.add("add", "AddV2", ["k", "k"], cluster=C0, device=GPU, T=I32)
    g.add("mul", "Mul", ["add", "k"], cluster=C0, device=GPU, T=I32)
    g.add("r", "Reshape", ["t", "mul"], device=GPU, T=F32, Tshape=I32)
    return g


def test_gpu_chain_is_copied_out_consumers_first():
    """On GPU, ``mul`` feeds an unclustered Reshape's host-memory ``shape``: selected. ``add``
    feeds ``mul``, already selected, which counts as outside the cluster (post order visits
    consumers first): selected too. Both copies are made and, with no clustered reader left,
    the originals are removed."""
    tg = _gpu_chain().tf()
    res = partially_decluster(tg, AUTO)
    nodes = nodes_by_name(tg)
    assert list(nodes["r"].input) == ["t", "mul/declustered"]
    assert list(nodes["mul/declustered"].input) == ["add/declustered", "k"]
    assert "mul" not in nodes and "add" not in nodes
    assert names(tg)[-2:] == ["mul/declustered", "add/declustered"]
    assert {k: v.code for k, v in res.decisions.items()} == {
        "mul": "DECLUSTERED_DEVICE_TO_HOST_COPY", "add": "DECLUSTERED_DEVICE_TO_HOST_COPY"}


def test_same_computation_on_cpu_or_in_cluster_stays():
    """On CPU the same int32 ops use device memory; on GPU, a consumer in the same cluster needs
    no copy (phase B then peels the shape computation off instead: its inputs are outside)."""
    g = _gpu_chain()
    for nd in g.gd.node:
        nd.device = CPU
    tg = g.tf()
    assert not partially_decluster(tg, AUTO).decisions
    g = _gpu_chain()
    g.gd.node[-1].attr["_XlaCluster"].s = C0.encode()
    tg = g.tf()
    res = partially_decluster(tg, AUTO)
    assert {k: v.code for k, v in res.decisions.items()} == {
        "add": "DECLUSTERED_RECOMPILATION", "mul": "DECLUSTERED_RECOMPILATION"}
    assert "mul/declustered" not in tg.by_name


def test_resource_ops_and_shape_consumers_are_never_copied():
    """A node with a resource input/output could be a variable update: never run twice. Shape
    consumers are left to phase C."""
    g = G().arg("v", RES).arg("x", F32, 1, GPU)
    g.add("rd", "ReadVariableOp", ["v"], cluster=C0, device=GPU, dtype=I32)
    g.add("t", "Tanh", ["x"], cluster=C0, device=GPU, T=F32)
    g.add("sh", "Shape", ["t"], cluster=C0, device=GPU, T=F32, out_type=I32)
    g.add("r", "Reshape", ["t", "rd"], device=GPU, T=F32, Tshape=I32)
    g.add("r2", "Reshape", ["t", "sh"], device=GPU, T=F32, Tshape=I32)
    tg = g.tf()
    res = partially_decluster(tg, AUTO)
    assert not any(v.code == "DECLUSTERED_DEVICE_TO_HOST_COPY" for v in res.decisions.values())
    assert "rd/declustered" not in tg.by_name and "sh/declustered" not in tg.by_name


def test_declustered_copy_sorts_original_node_names():
    """The copy's debug info is merged with the original's (TF's ``MergeDebugInfo``): the
    original names become a sorted set."""
    g = _gpu_chain()
    g.gd.node[4].experimental_debug_info.original_node_names.extend(["z", "a", "z"])
    tg = g.tf()
    partially_decluster(tg, AUTO)
    info = nodes_by_name(tg)["mul/declustered"].experimental_debug_info
    assert list(info.original_node_names) == ["a", "z"]


# -- phase B: reduce recompilation (tf-passes §12.2) -------------------------------------------------------


def _reshape_of(g, shape_producer, cl=C0):
    g.add("t", "Tanh", ["x"], cluster=cl, T=F32)
    g.add("r", "Reshape", ["t", shape_producer], cluster=cl, T=F32, Tshape=I32)
    return g


def test_shape_function_fed_from_outside_leaves_the_cluster():
    """``Arg -> Shape -> Reshape.shape`` in one cluster: the Shape must be a compile-time
    constant of the cluster and all its inputs come from outside, so computing it outside
    means one compilation per distinct shape value instead of per input (corpus:
    ``dynamic_batch_signature``)."""
    g = G().arg("x").arg("y", F32, 1)
    g.add("sh", "Shape", ["y"], cluster=C0, T=F32, out_type=I32)
    tg = _reshape_of(g, "sh").tf()
    res = partially_decluster(tg, AUTO)
    nodes = nodes_by_name(tg)
    assert cluster(nodes["sh"]) is None and nodes["sh"].attr["_XlaAlreadyClustered"].b
    dec = res.decisions["sh"]
    assert dec.code == "DECLUSTERED_RECOMPILATION" and dec.evidence["consumers"] == ["r"]


def test_chains_peel_off_in_reverse_post_order():
    """``Arg -> Neg -> Abs -> Reshape.shape``: Neg goes first; then all of Abs's inputs are
    outside too, so it follows (the F0 -> F1 -> Reshape case)."""
    g = G().arg("x").arg("k", I32, 1)
    g.add("neg", "Neg", ["k"], cluster=C0, T=I32)
    g.add("abs", "Abs", ["neg"], cluster=C0, T=I32)
    tg = _reshape_of(g, "abs").tf()
    res = partially_decluster(tg, AUTO)
    assert {k: v.code for k, v in res.decisions.items()} == {
        "neg": "DECLUSTERED_RECOMPILATION", "abs": "DECLUSTERED_RECOMPILATION"}
    assert res.decisions["neg"].evidence["consumers"] == ["abs"]


def test_in_cluster_operand_keeps_the_node():
    """``Mul(Shape(arg), Const)``: the Const is an in-cluster input of Mul, so Mul stays (tf-passes
    §12.2 [V]); the Shape still leaves, and the Const (no input but _SOURCE) stays."""
    g = G().arg("x").arg("y", F32, 1)
    g.add("sh", "Shape", ["y"], cluster=C0, T=F32, out_type=I32)
    g.const("two", [2], cluster=C0, shape=[])
    g.add("mul", "Mul", ["sh", "two"], cluster=C0, T=I32)
    tg = _reshape_of(g, "mul").tf()
    res = partially_decluster(tg, AUTO)
    assert set(res.decisions) == {"sh"}
    nodes = nodes_by_name(tg)
    assert cluster(nodes["mul"]) == C0 and cluster(nodes["two"]) == C0


def test_identity_is_looked_through():
    """Const analysis marks the producer behind an Identity, not the Identity: Shape ->
    Identity -> Reshape declusters the Shape, the Identity stays."""
    g = G().arg("x").arg("y", F32, 1)
    g.add("sh", "Shape", ["y"], cluster=C0, T=F32, out_type=I32)
    g.add("id", "Identity", ["sh"], cluster=C0, T=I32)
    tg = _reshape_of(g, "id").tf()
    res = partially_decluster(tg, AUTO)
    assert set(res.decisions) == {"sh"} and res.decisions["sh"].evidence["consumers"] == ["r"]


def test_only_intra_cluster_edges_make_a_node_constant():
    """A Shape in cluster_0 feeding a Reshape in cluster_1 is no constant of its own cluster;
    with an input from its own cluster it is no root shape consumer either: it stays."""
    g = G().arg("x")
    g.add("t0", "Tanh", ["x"], cluster=C0, T=F32)
    g.add("sh", "Shape", ["t0"], cluster=C0, T=F32, out_type=I32)
    g.add("t", "Tanh", ["x"], cluster=C1, T=F32)
    g.add("r", "Reshape", ["t", "sh"], cluster=C1, T=F32, Tshape=I32)
    tg = g.tf()
    assert not partially_decluster(tg, AUTO).decisions


def test_const_leaves_only_with_a_cross_device_input():
    """A must-be-constant Const fed only from outside normally stays (nothing to gain); one with
    a control input from another device leaves (it may coordinate loops across devices). A
    control input from the same device or from an unplaced node does not count."""
    g = G().arg("x").add("other", "NoOp", device=CPU1).add("same", "NoOp").add("unplaced", "NoOp", device="")
    g.const("c1", [2, -1], inputs=["^other"], cluster=C0)
    g.const("c2", [2, -1], inputs=["^same"], cluster=C0)
    g.const("c3", [2, -1], cluster=C0)
    g.const("c4", [2, -1], inputs=["^unplaced"], cluster=C0)
    g.add("t", "Tanh", ["x"], cluster=C0, T=F32)
    for c in ("c1", "c2", "c3", "c4"):
        g.add("r_" + c, "Reshape", ["t", c], cluster=C0, T=F32, Tshape=I32)
    tg = g.tf()
    res = partially_decluster(tg, AUTO)
    assert {k: v.code for k, v in res.decisions.items()} == {"c1": "DECLUSTERED_CONST_CROSS_DEVICE"}
    assert res.decisions["c1"].evidence["input_device"] == CPU1


def test_nodes_that_must_be_compiled_stay():
    """No regular CPU kernel (``XlaSetBound`` only exists for XLA), or a device whose
    registration always compiles (``XLA_CPU`` with ``--tf_xla_enable_xla_devices``): TF could
    not run the node outside the cluster, so it stays. (jitsim ships TF's kernels for CPU and
    GPU only: on any other device type a node is assumed to need compilation.)"""
    g = G().arg("x").arg("k", I32, 1).arg("k2", I32, 2, XLA_CPU).arg("x2", F32, 3, XLA_CPU)
    g.add("bound", "XlaSetBound", ["k", "k"], cluster=C0)
    g = _reshape_of(g, "bound")
    g.add("neg", "Neg", ["k2"], cluster=C1, device=XLA_CPU, T=I32)
    g.add("t2", "Tanh", ["x2"], cluster=C1, device=XLA_CPU, T=F32)
    g.add("r2", "Reshape", ["t2", "neg"], cluster=C1, device=XLA_CPU, T=F32, Tshape=I32)
    tg = g.tf()
    assert not partially_decluster(tg, XLA_DEVICES).decisions
    assert not partially_decluster(g.tf(), AUTO).decisions


# -- phase C: root shape consumers (tf-passes §12.3) --------------------------------------------------------


@pytest.mark.parametrize("op", ["Shape", "Size", "Rank"])
def test_root_shape_consumer_leaves_the_cluster(op):
    """A Shape/Size/Rank whose input comes from outside its cluster only needs metadata XLA
    would get anyway; TF takes it out (checked with TF 2.21: ``Shape`` of an ``_Arg`` feeding a
    ``Cast``). Its value is not a compile-time constant here, so phase B does not apply."""
    g = G().arg("x")
    attrs = {"T": F32} if op == "Rank" else {"T": F32, "out_type": I32}
    g.add("sh", op, ["x"], cluster=C0, **attrs)
    g.add("c", "Cast", ["sh"], cluster=C0, SrcT=I32, DstT=F32, Truncate=False)
    tg = g.tf()
    res = partially_decluster(tg, AUTO)
    assert res.changed and res.decisions["sh"].code == "DECLUSTERED_ROOT_SHAPE_CONSUMER"
    assert cluster(nodes_by_name(tg)["sh"]) is None and cluster(nodes_by_name(tg)["c"]) == C0


def test_shape_consumer_with_any_in_cluster_input_stays():
    """A control input from the same cluster is enough to keep it; ShapeN is not a shape
    consumer for this rule."""
    g = G().arg("x")
    g.add("t", "Tanh", ["x"], cluster=C0, T=F32)
    g.add("sh", "Shape", ["x", "^t"], cluster=C0, T=F32, out_type=I32)
    g.add("shn", "ShapeN", ["x"], cluster=C0, T=F32, out_type=I32, N=protos.AttrValue(i=1))
    g.add("c", "Cast", ["sh"], cluster=C0, SrcT=I32, DstT=F32, Truncate=False)
    g.add("c2", "Cast", ["shn"], cluster=C0, SrcT=I32, DstT=F32, Truncate=False)
    tg = g.tf()
    assert not partially_decluster(tg, AUTO).decisions


def test_unclustered_graph_is_untouched():
    g = G().arg("x").add("t", "Tanh", ["x"], T=F32).add("sh", "Shape", ["t"], T=F32, out_type=I32)
    tg = g.tf()
    before = tg.to_graphdef().SerializeToString(deterministic=True)
    res = partially_decluster(tg, AUTO)
    assert not res.changed and tg.to_graphdef().SerializeToString(deterministic=True) == before


# -- all three in order ------------------------------------------------------------------------------


def test_inserted_casts_are_declustered_by_phase_b():
    """The pipeline order matters: the rewritten slice's helper ``begin_0`` Slice needs its
    begin (``begin_s64``, a Cast of an ``_Arg``) at compile time, and the Cast's input is
    outside the cluster, so phase B takes the new Cast out again (checked with TF 2.21)."""
    tg = _slice_graph([-1, 3]).tf()
    results = run_post_mark(tg, AUTO)
    assert results[2].decisions["s/static_shaped_slice/begin_s64"].code == "DECLUSTERED_RECOMPILATION"
    assert cluster(nodes_by_name(tg)["s/static_shaped_slice/begin_s64"]) is None
