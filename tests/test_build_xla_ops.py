"""jitsim's BuildXlaOpsPass reproduces TF 2.21's ``build_xla_ops`` dumps.

Corpus test: for every graph of every fixtures run that has both dumps, TF's
``encapsulate_subgraphs_after`` dump goes through

1. :func:`add_has_reference_vars_attrs`: EncapsulateSubgraphsPass sets
   ``_XlaHasReferenceVars`` on every node *after* writing that dump (TF's dump has no such
   attr, TF's ``build_xla_ops`` dump has it on every node);
2. :func:`build_xla_ops` with the run's TF_XLA_FLAGS,

and must equal TF's ``build_xla_ops`` dump node for node (name, op, device, data inputs in
order, control inputs as a set, every attr) plus the library. Nothing is ignored, with two
stated exceptions:

* the fallback call's ``config_proto`` is TF's serialized *session* ConfigProto, runtime
  state that is not in the graph (it even varies between graphs of one run: the
  ``device_count`` map is serialized in hash order). The test passes TF's value in, as the
  session would, so it is still checked to land on every fallback call;
* ``int32_id_n``'s input order, when the fallback call has more than 8 in-edges: TF walks the
  call's in-edge set, which past 8 edges is a hash set of pointers (unordered). There the
  IdentityN's inputs are compared as a set (with the fallback's inputs resolved through it).

Node *order* in the file is not compared (``diff_graphdefs`` ignores it): the ``merge_oidx_*``
nodes are created in the order of the call node's out-edge set, which depends on edge ids
EncapsulateSubgraphsPass assigned from an earlier graph (and on hash order past 8 edges).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from google.protobuf import text_format

from graphs import Type, set_attr
from jitsim.crosscheck.corpus import Corpus
from jitsim.crosscheck.graphdiff import diff_graphdefs
from jitsim.errors import GraphError
from jitsim.graph import load
from jitsim.registry import protos
from jitsim.graph.model import Graph
from jitsim.passes.build_xla_ops import (
    EDGESET_INLINE,
    add_has_reference_vars_attrs,
    build_xla_ops,
    nodes_related_to_ref_variables,
)
from jitsim.options import options_for
from jitsim.graph.tfgraph import SINK_ID, TfGraph

DATA = Path(__file__).parent / "data" / "build_xla_ops"
CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
_CORPUS = Corpus()
RUNS = _CORPUS.built()


# -- comparison helpers ----------------------------------------------------------------------


def _fallback_config(tg: TfGraph, truth) -> dict:
    """TF's ``config_proto`` (the session's) from its fallback calls, as build_xla_ops kwargs."""
    clusters = {n.name for n in tg.op_nodes()
                if "_XlaCompiledKernel" in n.attr and n.attr["_XlaCompiledKernel"].b}
    values = set()
    for n in truth.node:
        m = re.fullmatch(r"(.*)_\d+/stateful_partitioned_call", n.name)
        if n.op == "StatefulPartitionedCall" and m and m.group(1) in clusters:
            values.add(n.attr["config_proto"].s)
    assert len(values) <= 1, f"several session configs in one graph: {values}"
    return {"config_proto": values.pop()} if values else {}


def _canonical_int32_id_n(gd):
    """Make ``<scope>/int32_id_n``'s input order irrelevant where TF's is a hash order."""
    gd2 = protos.GraphDef()
    gd2.CopyFrom(gd)
    by_name = {n.name: n for n in gd2.node}
    for idn in [n for n in gd2.node if n.op == "IdentityN" and n.name.endswith("/int32_id_n")]:
        call = by_name.get(idn.name[: -len("int32_id_n")] + "stateful_partitioned_call")
        if call is None or len(call.input) <= EDGESET_INLINE:
            continue
        data = [i for i in idn.input if not i.startswith("^")]
        ctrl = [i for i in idn.input if i.startswith("^")]
        resolved = {f"{idn.name}:{k}" if k else idn.name: f"<via int32_id_n {src}>"
                    for k, src in enumerate(data)}
        new_inputs = [resolved.get(i, i) for i in call.input]
        del call.input[:]
        call.input.extend(new_inputs)
        del idn.input[:]
        idn.input.extend(sorted(data) + ctrl)
    return gd2


def _simulate(path_in: Path, flags, truth) -> tuple[TfGraph, object]:
    tg = TfGraph.from_graph(load(path_in, validate=False))
    add_has_reference_vars_attrs(tg)
    result = build_xla_ops(tg, flags, **_fallback_config(tg, truth))
    return tg, result


def _diff(tg: TfGraph, truth):
    return diff_graphdefs(_canonical_int32_id_n(tg.to_graphdef()), _canonical_int32_id_n(truth))


# -- ground truth: the fixtures corpus --------------------------------------------------------


def _pairs(run):
    return [g for g in _CORPUS.index(run)["graphs"]
            if "encapsulate_subgraphs_after" in g["files"] and "build_xla_ops" in g["files"]]


@pytest.mark.slow
@pytest.mark.parametrize("run", RUNS)
def test_same_graph_as_tf(corpus, run):
    graphs = _pairs(run)
    if not graphs:
        pytest.skip("TF wrote no build_xla_ops dump in this run")
    d = corpus.extract(run) / "dumps"
    flags = options_for(corpus.run(run).flags)
    failures = []
    for g in graphs:
        truth = load(d / g["files"]["build_xla_ops"], validate=False).graphdef
        tg, _ = _simulate(d / g["files"]["encapsulate_subgraphs_after"], flags, truth)
        diff = _diff(tg, truth)
        if not diff.identical:
            failures.append(f"graph {g['id']}: {diff.format_text(limit=10)}")
    assert not failures, "\n".join(failures[:5])


def test_corpus_covers_the_pass(corpus):
    """The corpus exercises what the pass distinguishes (counted over TF's own output)."""
    seen = {"graphs": 0, "clusters": 0, "ctrl_merge": 0, "int32_id_n": 0, "constants": 0, "resources": 0,
            "ref_vars": 0, "hash_ordered_int32": 0}
    for run in RUNS:
        d = corpus.extract(run) / "dumps"
        for g in _pairs(run):
            seen["graphs"] += 1
            if not g.get("clusters"):
                continue
            truth = load(d / g["files"]["build_xla_ops"], validate=False).graphdef
            names = {n.name: n for n in truth.node}
            for n in truth.node:
                seen["ref_vars"] += n.attr.get("_XlaHasReferenceVars", protos.AttrValue()).b
                if n.op == "_XlaCompile":
                    seen["clusters"] += 1
                    seen["constants"] += len(n.attr["Tconstants"].list.type) > 0
                    seen["resources"] += n.attr["Nresources"].i > 0
                seen["ctrl_merge"] += n.name.endswith("/ctrl_merge")
                if n.name.endswith("/int32_id_n"):
                    seen["int32_id_n"] += 1
                    call = names[n.name[: -len("int32_id_n")] + "stateful_partitioned_call"]
                    seen["hash_ordered_int32"] += len(call.input) > EDGESET_INLINE
    assert seen["graphs"] >= 4537 and seen["clusters"] >= 847, seen
    assert min(seen.values()) > 0, seen


# -- ground truth: strict mode and the debugging flags (tests/data/build_xla_ops/make.sh) -----


@pytest.mark.parametrize("name", ["lazy", "strict", "lazy_debug", "strict_debug"])
def test_flag_variants_match_tf(name):
    """One cluster with constant, int32, float and resource inputs, a control input, float
    and int32 outputs and three control successors, rewritten by TF 2.21 under
    ``--tf_xla_enable_lazy_compilation=false`` and/or the print / check-numerics flags.
    Here even the node order (TF's node ids) must match."""
    flags = options_for((DATA / f"{name}.flags").read_text().strip())
    truth = load(DATA / f"{name}.build_xla_ops.pbtxt").graphdef
    tg, result = _simulate(DATA / f"{name}.encapsulate_subgraphs_after.pbtxt", flags, truth)
    diff = _diff(tg, truth)
    assert diff.identical, diff.format_text()
    assert [n.name for n in tg.to_graphdef().node] == [n.name for n in truth.node]
    decision = result.decisions["cluster_0"]
    assert decision.mode == ("strict" if name.startswith("strict") else "lazy")
    assert (decision.constants, decision.args, decision.resources) == (1, 2, 1)


# -- unit tests: small encapsulated graphs --------------------------------------------------


F32, I32, RES = 1, 3, 20


def make_graph(nodes, clusters, *, device=CPU, fn_device=CPU, extra_functions=()) -> TfGraph:
    """``nodes``: (name, op, inputs, {attr: value}) in node-id order; a node whose op is a
    key of ``clusters`` is a call to that cluster: ``clusters[op] = (input types, output
    types, n_const, n_res)``."""
    gd = protos.GraphDef()
    for name, op, inputs, attrs in nodes:
        nd = gd.node.add(name=name, op=op, device=device)
        nd.input.extend(inputs)
        for k, v in attrs.items():
            set_attr(nd.attr[k], v)
        if op in clusters:
            _, _, n_const, n_res = clusters[op]
            set_attr(nd.attr["_XlaCompiledKernel"], True)
            set_attr(nd.attr["_XlaNumConstantArgs"], n_const)
            set_attr(nd.attr["_XlaNumResourceArgs"], n_res)
    for fname, (ins, outs, _, _) in clusters.items():
        f = gd.library.function.add()
        f.signature.name = fname
        for i, t in enumerate(ins):
            f.signature.input_arg.add(name=f"a{i}", type=t)
        for i, t in enumerate(outs):
            f.signature.output_arg.add(name=f"r{i}", type=t)
        f.node_def.add(name="body", op="NoOp", device=fn_device)
    for fname in extra_functions:
        f = gd.library.function.add()
        f.signature.name = fname
    tg = TfGraph.from_graph(Graph(gd))
    add_has_reference_vars_attrs(tg)
    return tg


def _arg(name, t, i):
    return (name, "_Arg", [], {"T": Type(t), "index": i})


def _node(tg, name):
    return tg.nodes[tg.by_name[name]]


def _inputs(tg, name):
    return list(tg.to_graphdef().node[[n.name for n in tg.op_nodes()].index(name)].input)


LAZY = options_for("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
STRICT = options_for("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_enable_lazy_compilation=false")


def test_scope_name_skips_names_already_in_the_graph():
    """Scope's name map holds every node name and every '/'-prefix of one; the sub-scope
    for ``cluster_0`` takes the first free ``cluster_0_<k>``: here ``_1`` is a node and
    ``_2`` a prefix, so ``_3``."""
    tg = make_graph([
        _arg("cluster_0_1", F32, 0),
        ("cluster_0_2/y", "Identity", ["cluster_0_1"], {"T": Type(F32)}),
        ("cluster_0", "cluster_0", ["cluster_0_2/y"], {}),
        ("out", "_Retval", ["cluster_0"], {"T": Type(F32), "index": 0}),
    ], {"cluster_0": ([F32], [F32], 0, 0)})
    result = build_xla_ops(tg, LAZY)
    assert result.decisions["cluster_0"].scope == "cluster_0_3"
    assert _inputs(tg, "out") == ["cluster_0_3/merge_oidx_0"]


def test_lazy_structure_and_names():
    """Default CPU flags: lazy. The fallback keeps every input (constants too) behind the
    Switch's false side; _XlaRun gets non-constant and resource inputs plus the true side;
    only used outputs get a merge; the int32 argument goes through int32_id_n."""
    tg = make_graph([
        _arg("n", I32, 0), _arg("x", F32, 1), _arg("v", RES, 2),
        ("c", "c", ["n", "x", "v", "^n"], {}),
        ("out", "_Retval", ["c:1"], {"T": Type(F32), "index": 0}),
    ], {"c": ([I32, F32, RES], [F32, F32], 1, 1)})
    result = build_xla_ops(tg, LAZY)
    p = "c_1/"
    assert _inputs(tg, p + "xla_compile") == ["n", "x", "v", "^n"]
    assert _inputs(tg, p + "predicated_compilation_key") == [p + "xla_compile", p + "xla_compile:1"]
    assert _inputs(tg, p + "xla_run") == ["x", "v", p + "predicated_compilation_key:1"]
    assert _inputs(tg, p + "merge_oidx_1") == [p + "stateful_partitioned_call:1", p + "xla_run:1"]
    assert p + "merge_oidx_0" not in tg.by_name
    assert _inputs(tg, p + "data_as_ctrl") == [p + "predicated_compilation_key"]
    assert _inputs(tg, p + "stateful_partitioned_call") == [p + "int32_id_n", "x", "v", "^" + p + "data_as_ctrl"]
    assert _inputs(tg, p + "int32_id_n") == ["n", "^" + p + "data_as_ctrl"]
    assert "c" not in tg.by_name
    call = _node(tg, p + "stateful_partitioned_call")
    assert call.attr["f"].func.name == "c" and call.attr["f"].func.attr["_XlaCompiledKernel"].b
    assert not _node(tg, p + "xla_compile").attr["must_compile"].b
    assert result.changed and result.decisions["c"].mode == "lazy"


def test_control_successors_are_merged():
    """Two control successors: both get their control edge from ``data_as_ctrl``, the
    Identity of the Merge of two empty int32 Consts fired by the fallback and by _XlaRun;
    the fallback's predicate identity, created later, becomes ``data_as_ctrl_1``."""
    tg = make_graph([
        _arg("x", F32, 0),
        ("c", "c", ["x"], {}),
        ("a", "NoOp", ["^c"], {}),
        ("b", "NoOp", ["^c"], {}),
    ], {"c": ([F32], [F32], 0, 0)})
    build_xla_ops(tg, LAZY)
    assert _inputs(tg, "a") == ["^c_1/data_as_ctrl"] and _inputs(tg, "b") == ["^c_1/data_as_ctrl"]
    assert _inputs(tg, "c_1/ctrl_as_data") == ["^c_1/stateful_partitioned_call"]
    assert _inputs(tg, "c_1/ctrl_as_data_1") == ["^c_1/xla_run"]
    assert _inputs(tg, "c_1/ctrl_merge") == ["c_1/ctrl_as_data", "c_1/ctrl_as_data_1"]
    assert _inputs(tg, "c_1/data_as_ctrl") == ["c_1/ctrl_merge"]
    assert _inputs(tg, "c_1/stateful_partitioned_call") == ["x", "^c_1/data_as_ctrl_1"]


def test_only_control_edge_to_sink_needs_no_merge():
    """A call without consumers only has the fixup edge to _SINK: TF just adds
    ``xla_run -> _SINK`` (no ctrl_merge), and the fallback inherits the old edge."""
    tg = make_graph([_arg("x", F32, 0), ("c", "c", ["x"], {})], {"c": ([F32], [F32], 0, 0)})
    build_xla_ops(tg, LAZY)
    assert "c_1/ctrl_merge" not in tg.by_name
    assert _inputs(tg, "c_1/stateful_partitioned_call") == ["x", "^c_1/data_as_ctrl"]
    for name in ("c_1/xla_run", "c_1/stateful_partitioned_call"):
        assert [e.dst for e in _node(tg, name).out_edges.values()] == [SINK_ID]


def test_strict_mode_moves_every_out_edge_to_xla_run():
    """``--tf_xla_enable_lazy_compilation=false``: only xla_compile (must_compile=true, with
    the control inputs) and xla_run (all data consumers and control successors)."""
    tg = make_graph([
        _arg("n", I32, 0), _arg("x", F32, 1),
        ("pre", "NoOp", [], {}),
        ("c", "c", ["n", "x", "^pre"], {}),
        ("out", "_Retval", ["c"], {"T": Type(F32), "index": 0}),
        ("after", "NoOp", ["^c"], {}),
    ], {"c": ([I32, F32], [F32], 1, 0)})
    result = build_xla_ops(tg, STRICT)
    assert sorted(n for n in tg.by_name if n.startswith("c_1/")) == ["c_1/xla_compile", "c_1/xla_run"]
    assert _inputs(tg, "c_1/xla_compile") == ["n", "x", "^pre"]
    assert _node(tg, "c_1/xla_compile").attr["must_compile"].b
    assert _inputs(tg, "c_1/xla_run") == ["x", "c_1/xla_compile"]
    assert _inputs(tg, "out") == ["c_1/xla_run"] and _inputs(tg, "after") == ["^c_1/xla_run"]
    assert result.decisions["c"].mode == "strict"
    assert result.decisions["c"].reasons == ["lazy_compilation_disabled"]
    # the pass's constructor override wins over the flag, both ways
    tg2 = make_graph([_arg("x", F32, 0), ("c", "c", ["x"], {})], {"c": ([F32], [F32], 0, 0)})
    assert build_xla_ops(tg2, LAZY, lazy=False).decisions["c"].mode == "strict"


def test_always_compiling_device_is_strict_even_when_lazy():
    """A cluster on an XLA_CPU device (registered with policy "always" by
    --tf_xla_enable_xla_devices) must compile: strict, regardless of the lazy flag."""
    flags = options_for("--tf_xla_auto_jit=2 --tf_xla_enable_xla_devices")
    xla = "/job:localhost/replica:0/task:0/device:XLA_CPU:0"
    tg = make_graph([_arg("x", F32, 0), ("c", "c", ["x"], {}),
                     ("out", "_Retval", ["c"], {"T": Type(F32), "index": 0})],
                    {"c": ([F32], [F32], 0, 0)}, device=xla, fn_device=xla)
    d = build_xla_ops(tg, flags).decisions["c"]
    assert d.mode == "strict" and d.device == xla and d.reasons == ["device_requires_compilation"]


def test_device_is_picked_from_function_body_and_call():
    """InferDeviceForCluster: body devices plus the call's; with CPU and GPU the GPU wins,
    and every new node is assigned to it."""
    gpu = "/job:localhost/replica:0/task:0/device:GPU:0"
    tg = make_graph([_arg("x", F32, 0), ("c", "c", ["x"], {}),
                     ("out", "_Retval", ["c"], {"T": Type(F32), "index": 0})],
                    {"c": ([F32], [F32], 0, 0)}, fn_device=gpu)
    d = build_xla_ops(tg, LAZY).decisions["c"]
    assert d.device == gpu and d.device_candidates == [gpu, CPU]
    assert {_node(tg, n).device for n in d.created} == {gpu}


def test_int32_predication_follows_memory_types():
    """Only int32 inputs whose producer output is in device memory are routed through
    int32_id_n. On the CPU: an _Arg (has a kernel) -> device; Shape (its CPU kernel declares
    HostMemory("output")) -> host; a call of a library function, such as a cluster not yet
    rewritten (no kernel) -> host; a float input is never considered."""
    tg = make_graph([
        _arg("a", I32, 0), _arg("x", F32, 1),
        ("shape", "Shape", ["x"], {"T": Type(F32), "out_type": Type(I32)}),
        ("early", "early", ["a", "shape", "late", "x"], {}),
        ("late", "late", ["x"], {}),
        ("o1", "_Retval", ["early"], {"T": Type(F32), "index": 0}),
    ], {"early": ([I32, I32, I32, F32], [F32], 0, 0), "late": ([F32], [I32], 0, 0)})
    result = build_xla_ops(tg, LAZY)
    assert list(result.decisions) == ["early", "late"]  # node-id order
    assert _inputs(tg, "early_1/int32_id_n") == ["a", "^early_1/data_as_ctrl"]
    assert _inputs(tg, "early_1/stateful_partitioned_call")[:4] == [
        "early_1/int32_id_n", "shape", "late_1/merge_oidx_0", "x"]


def test_gpu_int32_from_a_read_variable_is_predicated():
    """TF's own build_xla_ops_pass_test ``NoDeviceToHostCopiesForClustersWithInt32Inputs``
    (CUDA builds): on a GPU, a cluster whose input is the int32 value of a ReadVariableOp is
    fed through ``int32_id_n``. ReadVariableOp has no GPU kernel of its own in TF 2.21; its
    DEFAULT kernel declares only the resource input ``HostMemory``, so the value is in device
    memory. A GPU Shape's int32 output, declared HostMemory by its GPU kernel, is not."""
    gpu = "/job:worker/replica:0/task:0/device:GPU:0"
    tg = make_graph([
        ("var", "VarHandleOp", [], {"dtype": Type(I32)}),
        ("int32_on_device", "ReadVariableOp", ["var"], {"dtype": Type(I32)}),
        ("x", "_Arg", [], {"T": Type(F32), "index": 0}),
        ("shape", "Shape", ["x"], {"T": Type(F32), "out_type": Type(I32)}),
        ("C", "cluster_int32", ["int32_on_device", "shape"], {}),
        ("o", "_Retval", ["C"], {"T": Type(I32), "index": 0}),
    ], {"cluster_int32": ([I32, I32], [I32], 0, 0)}, device=gpu, fn_device=gpu)
    build_xla_ops(tg, LAZY)
    assert _inputs(tg, "C_1/int32_id_n") == ["int32_on_device", "^C_1/data_as_ctrl"]
    assert _inputs(tg, "C_1/stateful_partitioned_call")[:2] == ["C_1/int32_id_n", "shape"]


def test_int32_from_an_already_rewritten_cluster_is_predicated():
    """Same producer/consumer, ids swapped: the producer cluster is rewritten first, so the
    consumer's fallback sees an _XlaMerge (it has a CPU kernel) and predicates it."""
    tg = make_graph([
        _arg("x", F32, 0),
        ("late", "late", ["x"], {}),
        ("early", "early", ["late"], {}),
        ("o1", "_Retval", ["early"], {"T": Type(F32), "index": 0}),
    ], {"early": ([I32], [F32], 0, 0), "late": ([F32], [I32], 0, 0)})
    build_xla_ops(tg, LAZY)
    assert _inputs(tg, "early_1/int32_id_n") == ["late_1/merge_oidx_0", "^early_1/data_as_ctrl"]


def test_debug_nodes_only_where_tf_puts_them():
    """check_input_<i> on floating xla_run arguments (i counts non-constant inputs),
    print_<i> on every merged output (pinned to the CPU), check_output_<i> only on floating
    outputs; the fallback side is untouched."""
    flags = options_for("--tf_xla_print_cluster_outputs --tf_xla_check_cluster_input_numerics "
                               "--tf_xla_check_cluster_output_numerics")
    tg = make_graph([
        _arg("n", I32, 0), _arg("x", F32, 1), _arg("k", I32, 2),
        ("c", "c", ["n", "k", "x"], {}),
        ("o1", "_Retval", ["c"], {"T": Type(F32), "index": 0}),
        ("o2", "_Retval", ["c:1"], {"T": Type(I32), "index": 1}),
    ], {"c": ([I32, I32, F32], [F32, I32], 1, 0)})
    build_xla_ops(tg, flags)
    made = sorted(n for n in tg.by_name if n.startswith("c_1/"))
    assert [n for n in made if "check" in n or "print" in n] == [
        "c_1/check_input_1", "c_1/check_output_0", "c_1/print_0", "c_1/print_1"]
    assert _inputs(tg, "c_1/xla_run") == ["k", "c_1/check_input_1", "c_1/predicated_compilation_key:1"]
    assert _node(tg, "c_1/check_input_1").attr["message"].s == b"CheckNumerics failed for input 1(x:0) into c"
    assert _inputs(tg, "c_1/merge_oidx_0") == ["c_1/stateful_partitioned_call", "c_1/check_output_0"]
    assert _node(tg, "c_1/check_output_0").attr["message"].s == (
        b"CheckNumerics failed for output 0(c_1/print_0:0) from cluster c")
    assert _inputs(tg, "c_1/merge_oidx_1") == ["c_1/stateful_partitioned_call:1", "c_1/print_1"]
    assert _node(tg, "c_1/print_1").attr["message"].s == b"output 1 from c is "


def test_graph_without_clusters_is_unchanged():
    tg = make_graph([_arg("x", F32, 0), ("y", "Neg", ["x"], {"T": Type(F32)})], {})
    before = tg.to_graphdef().SerializeToString(deterministic=True)
    result = build_xla_ops(tg, LAZY)
    assert not result.changed and result.decisions == {}
    assert tg.to_graphdef().SerializeToString(deterministic=True) == before


def test_malformed_calls_are_errors():
    tg = make_graph([_arg("x", F32, 0), ("c", "c", ["x"], {})], {"c": ([F32], [F32], 1, 1)})
    with pytest.raises(GraphError, match="Invalid number of constant/resource arguments"):
        build_xla_ops(tg, LAZY)
    tg = make_graph([_arg("x", F32, 0), ("c", "c", ["x"], {})], {"c": ([F32], [F32], 0, 0)})
    del _node(tg, "c").attr["_XlaHasReferenceVars"]
    with pytest.raises(GraphError, match="_XlaHasReferenceVars"):
        build_xla_ops(tg, LAZY)


def test_reference_variable_relatives():
    """GetNodesRelatedToRefVariables: everything downstream of a ref-typed producer, then
    everything upstream of those. ``w`` only shares an input with the related nodes, so it
    stays false; a node calling a function TF cannot instantiate counts as related."""
    gd = protos.GraphDef()
    text_format.Parse(f"""
      node {{ name: "var" op: "VariableV2" device: "{CPU}" attr {{ key: "dtype" value {{ type: DT_FLOAT }} }}
              attr {{ key: "shape" value {{ shape {{ }} }} }} }}
      node {{ name: "x" op: "_Arg" device: "{CPU}" attr {{ key: "T" value {{ type: DT_FLOAT }} }}
              attr {{ key: "index" value {{ i: 0 }} }} }}
      node {{ name: "read" op: "Identity" input: "var" device: "{CPU}"
              attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
      node {{ name: "add" op: "AddV2" input: "read" input: "x" device: "{CPU}"
              attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
      node {{ name: "w" op: "Neg" input: "x" device: "{CPU}" attr {{ key: "T" value {{ type: DT_FLOAT }} }} }}
      node {{ name: "call" op: "PartitionedCall" device: "{CPU}"
              attr {{ key: "f" value {{ func {{ name: "missing" }} }} }}
              attr {{ key: "Tin" value {{ list {{ }} }} }} attr {{ key: "Tout" value {{ list {{ }} }} }} }}
    """, gd)
    tg = TfGraph.from_graph(Graph(gd))
    related = {tg.name(i) for i in nodes_related_to_ref_variables(tg)}
    assert related == {"var", "read", "add", "x", "call"}
    assert add_has_reference_vars_attrs(tg) == 5
    assert not _node(tg, "w").attr["_XlaHasReferenceVars"].b
