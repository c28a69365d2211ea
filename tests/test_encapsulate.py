"""jitsim's EncapsulateSubgraphsPass reproduces TF 2.21.

Corpus: for every graph of every fixture run with both dumps, jitsim runs the pass on TF's
``encapsulate_subgraphs_before`` dump and must produce TF's ``encapsulate_subgraphs_after``
dump: every main-graph node (name, op, device, data inputs in order, control inputs as a set,
attrs, debug info) and every library function (signature, attrs, arg attrs, body nodes, ret,
control_ret). Only the order of nodes/functions in the file is ignored (TF iterates its
clusters in a per-process-seeded hash map). No attribute is ignored: TF writes that dump
before it sets ``_XlaHasReferenceVars``, which :meth:`EncapsulateResult.dump_graphdef`
reproduces, and the dumps carry no runtime-inferred attrs that jitsim would have to guess
(``_output_shapes`` present on input nodes is copied through and compared). The
``_XlaHasReferenceVars`` values jitsim sets are checked against TF's next dump
(``build_xla_ops``), where they are visible.

Unit tests: tiny hand-built graphs for argument order, names, control outputs, the optimizer
steps (identity removal, constant folding, CSE), guaranteed constants and ref-variable marks.
"""

from __future__ import annotations

import os

import pytest

from jitsim.crosscheck.corpus import Corpus
from jitsim.crosscheck.graphdiff import diff_graphdefs
from jitsim.graph import load
from jitsim.registry import protos
from jitsim.graph.function_def import normalize_arg_name
from jitsim.graph.model import Graph
from jitsim.passes.encapsulate import EncapsulateResult, call_order_from_graphdef, encapsulate_subgraphs
from jitsim.options import options_for
from jitsim.rewrites.folding.tensors import tensor_proto_to_numpy
from jitsim.graph.tfgraph import tfgraph_from_dump
from jitsim.graph.tfgraph import TfGraph

_CORPUS = Corpus()
RUNS = _CORPUS.built()
# Nothing is ignored (see the module docstring); kept as a named constant for the report.
IGNORED_ATTRS: tuple[str, ...] = ()

BEFORE, AFTER, NEXT = "encapsulate_subgraphs_before", "encapsulate_subgraphs_after", "build_xla_ops"


# -- corpus ---------------------------------------------------------------------------------------


def _debug_infos(gd) -> dict:
    out = {("", n.name): n.experimental_debug_info.SerializeToString(deterministic=True) for n in gd.node}
    for f in gd.library.function:
        for n in f.node_def:
            out[(f.signature.name, n.name)] = n.experimental_debug_info.SerializeToString(deterministic=True)
    return out


def _check_graph(run_dir, files, flags) -> list[str]:
    """Problems for one graph (empty: identical to TF)."""
    before = load(os.path.join(run_dir, "dumps", files[BEFORE]))
    truth = load(os.path.join(run_dir, "dumps", files[AFTER])).graphdef
    res = encapsulate_subgraphs(tfgraph_from_dump(before), flags, cluster_order=call_order_from_graphdef(truth))
    got = res.dump_graphdef()
    problems = []
    diff = diff_graphdefs(got, truth, ignore_attrs=IGNORED_ATTRS)
    if not diff.identical:
        problems.append(diff.format_text(limit=8))
    mine, theirs = _debug_infos(got), _debug_infos(truth)
    dbg = sorted(k for k in mine.keys() & theirs.keys() if mine[k] != theirs[k])
    if dbg:
        problems.append(f"experimental_debug_info differs on {dbg[:5]}")
    # call nodes come in TF's order when cluster_order is given
    if call_order_from_graphdef(got) != call_order_from_graphdef(truth):
        problems.append("call-node order differs")
    # _XlaHasReferenceVars: visible in TF's next dump on every node the pass copied
    if NEXT in files:
        nxt = load(os.path.join(run_dir, "dumps", files[NEXT])).graphdef
        marks = {n.name: n.attr["_XlaHasReferenceVars"].b for n in res.graph.op_nodes()
                 if n.name not in res.decisions}
        for n in nxt.node:
            if n.name in marks and marks[n.name] != n.attr["_XlaHasReferenceVars"].b:
                problems.append(f"_XlaHasReferenceVars of {n.name}: jitsim {marks[n.name]}, TF "
                                f"{n.attr['_XlaHasReferenceVars'].b}")
                break
    # decisions agree with what was written
    for name, dec in res.decisions.items():
        call = next(n for n in got.node if n.name == name)
        if (dec.num_constant_args, dec.num_resource_args) != (
                call.attr["_XlaNumConstantArgs"].i, call.attr["_XlaNumResourceArgs"].i):
            problems.append(f"decision counts of {name} disagree with the call node")
        if [a.name for a in dec.args] != [a.name for a in next(
                f for f in got.library.function if f.signature.name == name).signature.input_arg]:
            problems.append(f"decision args of {name} disagree with the signature")
        if dec.warnings:
            problems.append(f"{name}: {dec.warnings}")
    return problems


@pytest.mark.parametrize("run", RUNS)
def test_same_graph_and_functions_as_tf(corpus, run):
    graphs = [g for g in corpus.index(run)["graphs"] if BEFORE in g["files"] and AFTER in g["files"]]
    if not graphs:
        pytest.skip("TF wrote no encapsulate dumps in this run")
    run_dir = corpus.extract(run)
    flags = options_for(corpus.run(run).flags)
    bad = {}
    for g in graphs:
        problems = _check_graph(run_dir, g["files"], flags)
        if problems:
            bad[g["id"]] = problems
    assert not bad, f"{len(bad)}/{len(graphs)} graphs differ:\n" + "\n".join(
        f"graph {gid}:\n" + "\n".join(ps) for gid, ps in list(bad.items())[:3])


def test_corpus_exercises_the_pass(corpus):
    n = sum(1 for r in RUNS for g in corpus.index(r)["graphs"] if BEFORE in g["files"] and AFTER in g["files"])
    assert n > 4000


# -- tiny graphs ------------------------------------------------------------------------------------

DEV = "/job:localhost/replica:0/task:0/device:CPU:0"
F32, I32, I64, BOOL, RES = 1, 3, 9, 10, 20


class _T(int):
    """A DataType attr value."""


def _tensor(tp, dtype, values, shape=()):
    tp.dtype = dtype
    tp.tensor_shape.SetInParent()
    for d in shape:
        tp.tensor_shape.dim.add(size=d)
    field = {F32: tp.float_val, I32: tp.int_val, I64: tp.int64_val, BOOL: tp.bool_val}[dtype]
    field.extend(values)


def _graph(spec, functions=()) -> TfGraph:
    """``spec``: (name, op, inputs, attrs[, cluster]). Attr values: ``_T`` -> type, bool, int,
    str, list of _T, ("tensor", dtype, values, shape)."""
    gd = protos.GraphDef()
    for item in spec:
        name, op, inputs, attrs = item[:4]
        cluster = item[4] if len(item) > 4 else None
        nd = gd.node.add(name=name, op=op, device=DEV)
        nd.input.extend(inputs)
        for k, v in attrs.items():
            av = nd.attr[k]
            if isinstance(v, _T):
                av.type = int(v)
            elif isinstance(v, bool):
                av.b = v
            elif isinstance(v, int):
                av.i = v
            elif isinstance(v, str):
                av.s = v.encode()
            elif isinstance(v, list):
                av.list.type.extend(int(t) for t in v)
            elif isinstance(v, tuple) and v[0] == "tensor":
                _tensor(av.tensor, *v[1:])
            elif isinstance(v, tuple) and v[0] == "func":
                av.func.name = v[1]
        if cluster:
            nd.attr["_XlaCluster"].s = cluster.encode()
            nd.attr["_XlaAlreadyClustered"].b = True
    for f in functions:
        gd.library.function.add().CopyFrom(f)
    return TfGraph.from_graph(Graph(gd))


def _const(name, dtype, values, shape=(), cluster=None):
    return (name, "Const", [], {"dtype": _T(dtype), "value": ("tensor", dtype, values, shape)}, cluster)


def _fn(res: EncapsulateResult, name="cluster_0"):
    return next(f for f in res.functions if f.signature.name == name)


def _node(gd, name):
    return next(n for n in gd.node if n.name == name)


def _body(fdef, name):
    return next(n for n in fdef.node_def if n.name == name)


def _spec_v9():
    """tf-passes §14.4: x, y -> mul -> add -> Relu -> Sum -> mul_1; Sum -> AsString."""
    c = "cluster_0"
    return [
        ("x", "_Arg", [], {"T": _T(F32), "index": 0}),
        ("y", "_Arg", [], {"T": _T(F32), "index": 1}),
        ("mul", "Mul", ["x", "y"], {"T": _T(F32)}, c),
        _const("add/y", F32, [1.0], cluster=c),
        ("add", "AddV2", ["mul", "add/y"], {"T": _T(F32)}, c),
        ("Relu", "Relu", ["add"], {"T": _T(F32)}, c),
        _const("Const", I32, [0]),
        ("Sum", "Sum", ["Relu", "Const"], {"T": _T(F32), "Tidx": _T(I32), "keep_dims": False}, c),
        _const("mul_1/y", F32, [2.0], cluster=c),
        ("mul_1", "Mul", ["Sum", "mul_1/y"], {"T": _T(F32)}, c),
        ("AsString", "AsString", ["Sum"], {"T": _T(F32)}),
        ("identity_RetVal", "_Retval", ["mul_1"], {"T": _T(F32), "index": 0}),
        ("as_string_RetVal", "_Retval", ["AsString"], {"T": _T(7), "index": 1}),
    ]


def test_basic_encapsulation_matches_spec_example():
    g = _graph(_spec_v9())
    before = g.to_graphdef().SerializeToString(deterministic=True)
    res = encapsulate_subgraphs(g, options_for(""))
    assert g.to_graphdef().SerializeToString(deterministic=True) == before  # input untouched
    gd = res.dump_graphdef()
    call = _node(gd, "cluster_0")
    assert call.op == "cluster_0" and call.device == DEV
    assert list(call.input) == ["Const", "x", "y"]
    assert call.attr["_XlaCompiledKernel"].b is True
    assert call.attr["_XlaNumConstantArgs"].i == 1  # Sum's reduction indices
    assert call.attr["_XlaNumResourceArgs"].i == 0
    assert "_XlaHasReferenceVars" not in call.attr  # TF dumps before setting it
    assert list(_node(gd, "AsString").input) == ["cluster_0"]
    assert list(_node(gd, "identity_RetVal").input) == ["cluster_0:1"]
    assert not any(n.name in ("mul", "add", "Sum") for n in gd.node)
    f = _fn(res)
    assert [a.name for a in f.signature.input_arg] == ["const_0_arg", "x_0_arg", "y_0_arg"]
    assert [a.name for a in f.signature.output_arg] == ["sum_0_retval", "mul_1_0_retval"]
    assert dict(f.ret) == {"sum_0_retval": "Sum:output:0", "mul_1_0_retval": "mul_1:z:0"}
    assert list(_body(f, "Sum").input) == ["Relu:activations:0", "const_0_arg"]
    assert list(_body(f, "mul").input) == ["x_0_arg", "y_0_arg"]
    assert "_XlaCluster" not in _body(f, "mul").attr and _body(f, "mul").attr["_XlaAlreadyClustered"].b
    # the final graph carries _XlaHasReferenceVars on every node
    assert all(n.attr["_XlaHasReferenceVars"].b is False for n in res.graph.op_nodes())
    dec = res.decisions["cluster_0"]
    assert [(a.name, a.kind) for a in dec.args] == [("const_0_arg", "constant"), ("x_0_arg", "normal"),
                                                  ("y_0_arg", "normal")]
    assert "reduction_indices" in dec.args[0].reason and "Sum 'Sum'" in dec.args[0].reason


def test_arg_order_is_constants_then_normal_then_resources():
    c = "cluster_0"
    spec = [
        ("v", "_Arg", [], {"T": _T(RES), "index": 0}),
        ("x", "_Arg", [], {"T": _T(F32), "index": 1}),
        ("n", "_Arg", [], {"T": _T(I32), "index": 2}),
        # the resource is seen first, then x, then n (edge-id order)
        ("read", "ReadVariableOp", ["v"], {"dtype": _T(F32)}, c),
        ("add", "AddV2", ["read", "x"], {"T": _T(F32)}, c),
        _const("one", I32, [1], cluster=c),
        ("pack", "Pack", ["n", "one"], {"T": _T(I32), "N": 2, "axis": 0}, c),
        ("reshape", "Reshape", ["add", "pack"], {"T": _T(F32), "Tshape": _T(I32)}, c),
        ("out", "_Retval", ["reshape"], {"T": _T(F32), "index": 0}),
    ]
    res = encapsulate_subgraphs(_graph(spec))
    gd = res.dump_graphdef()
    call = _node(gd, "cluster_0")
    assert list(call.input) == ["n", "x", "v"]
    assert (call.attr["_XlaNumConstantArgs"].i, call.attr["_XlaNumResourceArgs"].i) == (1, 1)
    f = _fn(res)
    assert [(a.name, a.type) for a in f.signature.input_arg] == [("n_0_arg", I32), ("x_0_arg", F32),
                                                                ("v_0_arg", RES)]
    dec = res.decisions["cluster_0"]
    assert [(a.index, a.position, a.kind) for a in dec.args] == [(2, 0, "constant"), (1, 1, "normal"),
                                                              (0, 2, "resource")]
    assert "Pack 'pack'" in dec.args[0].reason and "Reshape 'reshape'" in dec.args[0].reason
    assert dec.args[0].source == "n:0"


def test_name_normalisation_and_uniquification():
    assert normalize_arg_name("Sum_0_retval") == "sum_0_retval"
    assert normalize_arg_name("StringToNumber_0_arg") == "stringtonumber_0_arg"
    assert normalize_arg_name("gradient_tape/Mul:0") == "gradient_tape_mul_0"
    assert normalize_arg_name("_1/x") == "x"
    assert normalize_arg_name("123") == "unknown" and normalize_arg_name("") == "unknown"
    assert normalize_arg_name("caf\u00e9") == "caf__"  # non-ASCII bytes become '_'
    c = "cluster_0"
    spec = [
        ("A", "_Arg", [], {"T": _T(F32), "index": 0}),
        ("a", "_Arg", [], {"T": _T(F32), "index": 1}),
        ("m", "Mul", ["A", "a"], {"T": _T(F32)}, c),
        ("Neg", "Neg", ["m"], {"T": _T(F32)}, c),
        ("r0", "_Retval", ["Neg"], {"T": _T(F32), "index": 0}),
        ("r1", "_Retval", ["m"], {"T": _T(F32), "index": 1}),
    ]
    f = _fn(encapsulate_subgraphs(_graph(spec)))
    assert [a.name for a in f.signature.input_arg] == ["a_0_arg", "a_0_arg_0"]
    assert [a.name for a in f.signature.output_arg] == ["neg_0_retval", "m_0_retval"]
    assert list(_body(f, "m").input) == ["a_0_arg", "a_0_arg_0"]


def test_control_outputs():
    c = "cluster_0"
    spec = [
        ("x", "_Arg", [], {"T": _T(F32), "index": 0}),
        ("v", "_Arg", [], {"T": _T(RES), "index": 1}),
        ("neg", "Neg", ["x"], {"T": _T(F32)}, c),
        ("assign", "AssignVariableOp", ["v", "neg"], {"dtype": _T(F32)}, c),  # no consumer: _SINK edge
        ("sq", "Square", ["neg"], {"T": _T(F32)}, c),
        ("after", "NoOp", ["^sq"], {}),
        ("out", "_Retval", ["sq"], {"T": _T(F32), "index": 0}),
    ]
    res = encapsulate_subgraphs(_graph(spec))
    f = _fn(res)
    assert dict(f.control_ret) == {"assign": "assign", "sq": "sq"}
    assert list(f.signature.control_output) == ["assign", "sq"]
    gd = res.dump_graphdef()
    assert list(_node(gd, "after").input) == ["^cluster_0"]
    assert res.decisions["cluster_0"].control_outputs == ["assign", "sq"]


def test_has_reference_vars():
    spec = [
        ("var", "VariableV2", [], {"dtype": _T(F32), "shape": 0, "container": "", "shared_name": ""}),
        ("read", "Identity", ["var"], {"T": _T(F32)}),
        ("neg", "Neg", ["read"], {"T": _T(F32)}, "cluster_0"),
        ("sq", "Square", ["neg"], {"T": _T(F32)}, "cluster_0"),
        ("out", "_Retval", ["sq"], {"T": _T(F32), "index": 0}),
        ("c", "Const", [], {"dtype": _T(F32), "value": ("tensor", F32, [1.0])}),
        ("lonely", "Neg", ["c"], {"T": _T(F32)}),
        ("caller", "PartitionedCall", [], {"Tin": [], "Tout": [], "f": ("func", "missing_fn")}),
    ]
    g = _graph(spec)
    g.nodes[g.by_name["var"]].attr["shape"].shape.SetInParent()
    res = encapsulate_subgraphs(g)
    marks = {n.name: n.attr["_XlaHasReferenceVars"].b for n in res.graph.op_nodes()}
    assert marks == {"var": True, "read": True, "cluster_0": True, "out": True, "c": False,
                     "lonely": False, "caller": True}  # an unknown callee counts as "may have refs"
    assert all("_XlaHasReferenceVars" not in n.attr for n in res.dump_graphdef().node)


def test_identity_removal_and_constant_folding():
    c = "cluster_0"
    spec = [
        ("x", "_Arg", [], {"T": _T(I64), "index": 0}),
        ("ident", "Identity", ["x"], {"T": _T(I64)}, c),
        _const("k", I32, [3], cluster=c),
        ("cast", "Cast", ["k"], {"SrcT": _T(I32), "DstT": _T(I64), "Truncate": False}, c),
        ("add", "AddV2", ["ident", "cast"], {"T": _T(I64)}, c),
        ("out", "_Retval", ["add"], {"T": _T(I64), "index": 0}),
    ]
    res = encapsulate_subgraphs(_graph(spec))
    f = _fn(res)
    names = {n.name for n in f.node_def}
    assert names == {"add", "cast/_0__cf__0"}
    folded = _body(f, "cast/_0__cf__0")
    assert folded.op == "Const" and folded.device == DEV and "_XlaAlreadyClustered" not in folded.attr
    assert folded.attr["dtype"].type == I64 and list(folded.attr["value"].tensor.int64_val) == [3]
    assert list(_body(f, "add").input) == ["x_0_arg", "cast/_0__cf__0:output:0"]
    opt = res.decisions[c].optimizer
    assert opt["identities_removed"] == ["ident"]
    assert opt["constants_folded"] == [{"tensor": "cast:0", "constant": "cast/_0__cf__0"}]
    # --tf_xla_disable_constant_folding keeps the Cast
    f2 = _fn(encapsulate_subgraphs(_graph(spec), options_for("--tf_xla_disable_constant_folding")))
    assert {n.name for n in f2.node_def} == {"add", "cast", "k"}


def test_folded_constants_keep_control_dependencies_and_multi_element_tensors():
    c = "cluster_0"
    spec = [
        ("v", "_Arg", [], {"T": _T(RES), "index": 0}),
        ("read", "ReadVariableOp", ["v"], {"dtype": _T(F32)}, c),
        _const("shape", I32, [2, 3], shape=(2,), cluster=c),
        ("ident", "Identity", ["shape", "^read"], {"T": _T(I32)}, c),  # control input: not removed
        ("fill_v", "Const", [], {"dtype": _T(F32), "value": ("tensor", F32, [0.5])}, c),
        ("fill", "Fill", ["ident", "fill_v"], {"T": _T(F32), "index_type": _T(I32)}, c),
        ("add", "AddV2", ["fill", "read"], {"T": _T(F32)}, c),
        ("out", "_Retval", ["add"], {"T": _T(F32), "index": 0}),
    ]
    f = _fn(encapsulate_subgraphs(_graph(spec)))
    folded = _body(f, "fill/_0__cf__0")
    assert list(folded.input) == ["^read"]
    t = folded.attr["value"].tensor
    assert t.tensor_content and tensor_proto_to_numpy(t).tolist() == [[0.5] * 3] * 2
    assert {n.name for n in f.node_def} == {"read", "fill/_0__cf__0", "add"}


def test_cse_merges_identical_constant_clones():
    c = "cluster_0"
    spec = [
        ("x", "_Arg", [], {"T": _T(F32), "index": 0}),
        _const("two", F32, [2.0], cluster=c),
        ("m", "Mul", ["x", "two"], {"T": _T(F32)}, c),
        _const("two/clone_0", F32, [2.0], cluster=c),
        ("m2", "Mul", ["m", "two/clone_0"], {"T": _T(F32)}, c),
        ("out", "_Retval", ["m2"], {"T": _T(F32), "index": 0}),
    ]
    res = encapsulate_subgraphs(_graph(spec))
    f = _fn(res)
    assert {n.name for n in f.node_def} == {"two", "m", "m2"}
    assert list(_body(f, "m2").input) == ["m:z:0", "two:output:0"]
    assert res.decisions[c].optimizer["cse_merged"] == [{"removed": "two/clone_0", "kept": "two"}]


def test_guaranteed_constant_args():
    spec = [
        _const("k", F32, [1.0]),
        ("gc", "GuaranteeConst", ["k"], {"T": _T(F32)}),
        ("x", "_Arg", [], {"T": _T(F32), "index": 0}),
        ("m", "Mul", ["x", "gc"], {"T": _T(F32)}, "cluster_0"),
        ("out", "_Retval", ["m"], {"T": _T(F32), "index": 0}),
    ]
    res = encapsulate_subgraphs(_graph(spec))
    f = _fn(res)
    assert [a.name for a in f.signature.input_arg] == ["x_0_arg", "gc_0_arg"]
    assert dict(f.arg_attr[1].attr)["_is_guaranteed_constant"].b is True
    assert 0 not in f.arg_attr
    assert [a.guaranteed_constant for a in res.decisions["cluster_0"].args] == [False, True]


def test_edges_between_clusters_and_duplicates():
    spec = [
        ("x", "_Arg", [], {"T": _T(F32), "index": 0}),
        ("a", "Neg", ["x"], {"T": _T(F32)}, "cluster_0"),
        ("b", "Mul", ["a", "a"], {"T": _T(F32)}, "cluster_1"),
        ("c", "Square", ["a"], {"T": _T(F32)}, "cluster_1"),
        ("d", "AddV2", ["b", "c"], {"T": _T(F32)}, "cluster_1"),
        ("out", "_Retval", ["d"], {"T": _T(F32), "index": 0}),
    ]
    res = encapsulate_subgraphs(_graph(spec))
    gd = res.dump_graphdef()
    assert list(_node(gd, "cluster_1").input) == ["cluster_0"]
    assert [a.name for a in _fn(res, "cluster_1").signature.input_arg] == ["a_0_arg"]
    assert list(_body(_fn(res, "cluster_1"), "b").input) == ["a_0_arg", "a_0_arg"]
    assert call_order_from_graphdef(gd) == ["cluster_0", "cluster_1"]
    other = encapsulate_subgraphs(_graph(spec), cluster_order=["cluster_1"])
    assert call_order_from_graphdef(other.dump_graphdef()) == ["cluster_1", "cluster_0"]
    assert [f.signature.name for f in other.functions] == ["cluster_1", "cluster_0"]
    assert diff_graphdefs(other.dump_graphdef(), gd).identical


def test_clone_edges_come_last_in_dump_reconstruction():
    """A cloned constant's edge was created after the graph was built: its arg comes last."""
    c = "cluster_0"
    spec = [
        _const("k", F32, [1.0]),
        ("x", "_Arg", [], {"T": _T(F32), "index": 0}),
        ("m", "Mul", ["k/clone_0", "x"], {"T": _T(F32)}, c),
        ("n", "Neg", ["k"], {"T": _T(F32)}),
        ("out", "_Retval", ["m"], {"T": _T(F32), "index": 0}),
        ("out2", "_Retval", ["n"], {"T": _T(F32), "index": 1}),
        _const("k/clone_0", F32, [1.0]),
    ]
    gd = protos.GraphDef()
    gd.CopyFrom(_graph(spec).to_graphdef())
    naive = encapsulate_subgraphs(TfGraph.from_graph(Graph(gd)))
    assert [a.name for a in _fn(naive).signature.input_arg] == ["k_clone_0_0_arg", "x_0_arg"]
    rebuilt = encapsulate_subgraphs(tfgraph_from_dump(Graph(gd)))
    assert [a.name for a in _fn(rebuilt).signature.input_arg] == ["x_0_arg", "k_clone_0_0_arg"]


def test_session_fetch_only_nodes_are_control_outputs():
    """In a TF1 session graph a node consumed only by a fetch (_retval_*) had a _SINK edge."""
    spec = [
        ("_arg_x_0_0", "_Arg", [], {"T": _T(F32), "index": 0}),
        ("neg", "Neg", ["_arg_x_0_0"], {"T": _T(F32)}, "cluster_0"),
        ("sq", "Square", ["neg"], {"T": _T(F32)}, "cluster_0"),
        ("_retval_sq_0_0", "_Retval", ["sq"], {"T": _T(F32), "index": 0}),
    ]
    gd = _graph(spec).to_graphdef()
    # the feed node is a created node: move it after the others, as in TF's dumps
    nodes = list(gd.node)
    del gd.node[:]
    gd.node.extend(nodes[1:3] + nodes[:1] + nodes[3:])
    res = encapsulate_subgraphs(tfgraph_from_dump(Graph(gd)))
    assert dict(_fn(res).control_ret) == {"sq": "sq"}


def test_tpu_execute_graph_is_left_alone():
    g = _graph([("x", "_Arg", [], {"T": _T(F32), "index": 0}),
                ("t", "TPUExecute", ["x"], {}, "cluster_0")])
    res = encapsulate_subgraphs(g)
    assert res.graph is g and res.functions == [] and res.decisions == {}


def test_decisions_serialise():
    res = encapsulate_subgraphs(_graph(_spec_v9()))
    j = res.decisions["cluster_0"].to_json()
    assert j["num_constant_args"] == 1 and j["args"][0]["dtype"] == "DT_INT32"
    assert j["results"][0] == {"index": 0, "name": "sum_0_retval", "source": "Sum:0", "dtype": "DT_FLOAT"}
