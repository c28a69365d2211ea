"""The mark pass's candidate selection remembers, per node signature, that a node passed the
compilability check (``CompilabilityChecker.node_key`` / ``check_top_level``) and shares input /
output dtypes between nodes of one signature; const analysis skips ops that cannot have
compile-time-constant inputs. These tests check that the shortcuts never change an answer:

* hand-made graphs where a compilable node comes first and a node differing from it in one
  thing the check reads comes after it (the memo must not let the second one through);
* every committed fixture graph (a sample of runs, both input stages) decided with and without
  the memo, and const analysis with and without its shortcut: the results must be equal.
"""

from __future__ import annotations

import json

import pytest

from graphs import AUTO, F32, STR, Shape, Type, arg, graph, node, op, ret
from jitsim.analyses import compilability, const_analysis
from jitsim.analyses.compilability import CompilabilityChecker
from jitsim.crosscheck.fidelity import dump_dir
from jitsim.graph import Graph
from jitsim.graph.io import read_graphdef
from jitsim.graph.tfgraph import TfGraph
from jitsim.options import options_for
from jitsim.passes.mark_for_compilation import ProcessState
from jitsim.passes.pipeline import BEFORE_CLONE, BEFORE_MARK, cluster_graph
from jitsim.registry import const_inputs, protos


def cluster(g: Graph):
    return cluster_graph(g, options_for(f"{AUTO} --tf_xla_min_cluster_size=1", input_stage=BEFORE_CLONE))


# -- a compilable node first, then one that differs in what the check reads -------------------


def test_type_attr_is_part_of_the_signature():
    """Two Identity nodes; the first on DT_FLOAT (XLA_CPU_JIT's Identity kernel allows it), the
    second on DT_STRING (its ``T`` constraint does not): the second is refused with its own
    name in TF's kernel-lookup text, although an Identity passed just before."""
    g = graph(arg("x"), op("a", "Identity", "x"), ret("y", "a", 0),
              arg("s", 1, dtype=STR), op("b", "Identity", "s", dtype=STR), ret("z", "b", 1, dtype=STR))
    res = cluster(g)
    assert "a" in res.mark.candidates
    assert res.decisions["b"].code == "UNSUPPORTED_OP"
    assert "{{node b}}" in res.decisions["b"].detail


def test_kernel_label_is_part_of_the_signature():
    """A ``_kernel`` label no XLA kernel carries makes TF's kernel lookup fail (FindKernelDef
    matches labels exactly); the same op without the label just before it passed."""
    g = graph(arg("x"), op("a", "Neg", "x"), op("b", "Neg", "a", _kernel="custom"), ret("y", "b"))
    res = cluster(g)
    assert "a" in res.mark.candidates
    assert res.decisions["b"].code == "UNSUPPORTED_OP"


def test_scoped_allocator_marker_is_part_of_the_signature():
    """IsCompilableNode refuses a node with a ``_scoped_allocator`` attr (tf-passes §7.3.1),
    whatever its op: the plain Neg before it does not let it through."""
    g = graph(arg("x"), op("a", "Neg", "x"), op("b", "Neg", "a", _scoped_allocator=protos.AttrValue(list=protos.AttrValue.ListValue(i=[0, 1]))), ret("y", "b"))
    res = cluster(g)
    assert "a" in res.mark.candidates
    assert res.decisions["b"].code == "SCOPED_ALLOCATOR"


def test_identity_of_a_ref_is_checked_apart():
    """An Identity whose producer outputs a ref (VariableV2's ``float_ref``) is an "unsafe
    cast" to TF (``HasForwardedRefInput``), while an Identity of the same ``T`` on a plain float
    before it is compilable: the producer's ref-ness is part of an Identity's signature."""
    g = graph(arg("x"), op("a", "Identity", "x"),
              node("v", "VariableV2", dtype=Type(F32), shape=Shape(()), container="", shared_name="v"),
              op("b", "Identity", "v"), op("c", "AddV2", "a", "b"), ret("y", "c"))
    res = cluster(g)
    assert "a" in res.mark.candidates
    assert res.decisions["b"].code == "IDENTITY_UNSAFE_CAST"


def test_node_key_separates_what_check_node_reads():
    """Direct: the key differs exactly when an attr the check reads differs, and not for the
    node's name or for an attr it never reads (a Const's value)."""
    gd = graph(node("c1", "Const", dtype=Type(F32), value=1.0), node("c2", "Const", dtype=Type(F32), value=2.0),
               node("c3", "Const", dtype=Type(STR), value=b"x")).graphdef
    ch = CompilabilityChecker(gd.library)
    k1, k2, k3 = (ch.node_key(nd) for nd in gd.node)
    assert k1 == k2 and k1 != k3
    assert ch.check_node(gd.node[2]).code == "STRING_CONST"


# -- every fixture graph, with and without the shortcuts ----------------------------------------


def _unmemoized(self, nodedef, key, node=None, input_types_of=None, producer_types_of=None, output_types_of=None):
    def bind(f):
        return (lambda: f(node)) if f is not None else None

    return self.check_node(nodedef, 1, bind(input_types_of), bind(producer_types_of), bind(output_types_of))


def _digest(cr) -> str:
    m = cr.mark
    dec = {k: [str(v.code), v.detail, json.dumps(v.evidence, sort_keys=True, default=str)]
           for k, v in m.decisions.items()}
    return json.dumps([dec, m.clusters, m.candidates, m.body_errors, cr.notes], sort_keys=True, default=str)


def _sample_graphs(corpus, every: int = 6):
    for i, run in enumerate(r.name for r in corpus.runs()):
        if i % every:
            continue
        spec = corpus.run(run)
        where = dump_dir(corpus.extract(run))
        for stage in (BEFORE_CLONE, BEFORE_MARK):
            opts = options_for(spec.flags, input_stage=stage, session=spec.session())
            for rec in where.records():
                if stage in rec.files:
                    yield f"{run}/{rec.files[stage]}", where.dumps / rec.files[stage], opts


def test_fixture_graphs_decide_the_same_without_the_memo(corpus, monkeypatch):
    """The decisions (code, detail, evidence), candidates, clusters and notes of every sampled
    fixture graph are the same when every node is checked on its own."""
    graphs = list(_sample_graphs(corpus))
    assert len(graphs) > 30
    for key, path, opts in graphs:
        fast = _digest(cluster_graph(Graph(read_graphdef(path), validate=False), opts, ProcessState.starting(opts)))
        with monkeypatch.context() as mp:
            mp.setattr(CompilabilityChecker, "check_top_level", _unmemoized)
            slow = _digest(cluster_graph(Graph(read_graphdef(path), validate=False), opts,
                                         ProcessState.starting(opts)))
        assert fast == slow, key


def test_fixture_graphs_const_analysis_without_the_shortcut(corpus, monkeypatch):
    """Const analysis gives the same bits when it asks every op for its constant inputs (the
    shortcut skips ops with no registered ones and no ``_XlaCompileTimeConstantInputs``)."""
    graphs = list(_sample_graphs(corpus, every=3))
    every_op = frozenset(const_inputs.const_input_table()) | frozenset(
        n.op for _, path, _ in graphs for n in read_graphdef(path).node)
    for key, path, _ in graphs:
        g = TfGraph.from_graph(Graph(read_graphdef(path), validate=False))
        fast = const_analysis.ConstAnalysis(g.library).run(g)
        with monkeypatch.context() as mp:
            mp.setattr(const_inputs, "const_input_ops", lambda: every_op)
            slow = const_analysis.ConstAnalysis(g.library).run(g)
        assert fast == slow, key


@pytest.mark.parametrize("name", ["Const", "AddN", "Identity", "While", "StatefulPartitionedCall"])
def test_attrs_read_cover_the_dtype_attrs(name):
    """Every attr an op's input/output dtypes expand by is in the key (so the dtypes shared by
    one key are right for every node of it)."""
    from jitsim.registry import op_def

    od = op_def(name)
    names = CompilabilityChecker(graph().graphdef.library)._attrs_read(name)
    for a in (*od.input_arg, *od.output_arg):
        for x in (a.type_attr, a.type_list_attr, a.number_attr):
            assert not x or x in names
    assert "_kernel" in names and "_scoped_allocator" in names
    assert all(x in names for x in compilability._CALLEE_ATTRS.get(name, ()))
