"""``jitsim explain`` / ``whatif`` / ``diff`` and the Python API behind them.

Graphs are hand-built (TF's before_clone form: _Arg/_Retval, all on the CPU); the
clustering behaviour each one relies on is covered against real TF elsewhere
(tests/test_mark_for_compilation.py states the reasoning, the corpus checks it), so these
tests check what the explanation layer adds: name resolution, the records it reads, the
pair verdicts, the diffs and the CLI contract.
"""

from __future__ import annotations

import json

import pytest

import jitsim
from jitsim.cli import main
from jitsim.errors import JitsimError
from jitsim.graph import save
from graphs import AUTO, arg, graph, op, ret

EXAMPLE = "examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt"


def chain_with_string_break():
    """x -> a -> b -> s(AsString) -> n(StringToNumber) -> c -> d -> y: two float pairs split
    by two ops XLA has no kernel for."""
    from test_mark_for_compilation import _split_by_strings

    return _split_by_strings()


def diamond():
    """A -> X -> B and A -> B with X uncompilable: merging A and B would create a cycle."""
    return graph(arg("x"), op("A", "Neg", "x"), op("X", "BesselJ0", "A"), op("B", "AddV2", "A", "X"), ret("y", "B"))


def two_chains():
    """Two independent compilable chains joined by nothing."""
    return graph(arg("x"), arg("z", 1), op("a1", "Neg", "x"), op("a2", "Exp", "a1"), op("b1", "Neg", "z"),
                 op("b2", "Exp", "b1"), ret("y", "a2"), ret("w", "b2", 1))


def sim(g, flags="--tf_xla_min_cluster_size=1", **kw):
    return jitsim.cluster(g, flags=f"{AUTO} {flags}", input_stage="before_clone_constants_for_better_clustering", **kw)


# -- node names --------------------------------------------------------------------------------


def test_exact_name_wins_over_substring_and_regex():
    g = graph(arg("x"), op("a", "Neg", "x"), op("ab", "Exp", "a"), op("xab", "Abs", "ab"), ret("y", "xab"))
    c = sim(g)
    assert c.find_node("a") == "a"  # exact, although "ab" and "xab" contain it
    assert c.find_node("^xa") == "xab"  # a regex matching one name
    assert c.find_node("xa") == "xab"  # a substring matching one name
    with pytest.raises(JitsimError, match="matches 2 nodes: ab, xab"):
        c.find_node("b$")


def test_ambiguous_name_lists_the_candidates():
    c = sim(two_chains())
    with pytest.raises(JitsimError) as e:
        c.find_node("1")
    assert "'1' matches 2 nodes: a1, b1" in str(e.value)
    assert c.find_node("b1$") == "b1"
    with pytest.raises(JitsimError, match="did you mean a2"):
        c.find_node("a3")


# -- one node --------------------------------------------------------------------------------------


def test_unclustered_node_reports_code_and_kernel_evidence():
    c = sim(chain_with_string_break(), "--tf_xla_min_cluster_size=2")
    ex = c.explain("s")
    assert (ex.code, ex.cluster, ex.op) == ("UNSUPPORTED_OP", None, "AsString")
    assert ex.evidence["kernel"] is False
    text = str(ex)
    assert "s (AsString" in text and "is not in any cluster" in text and "docs/reasons.md#unsupported_op" in text
    d = ex.to_dict()
    assert d["schema"] == "jitsim.explain/1" and d["reason"]["title"] and d["history"][0]["code"] == "UNSUPPORTED_OP"


def test_clustered_node_names_its_cluster_and_refused_merges():
    c = sim(diamond())
    ex = c.explain("A")
    assert ex.code == "CLUSTERED" and ex.cluster == c.cluster_of("A") and ex.cluster_size == 1
    # the refused A -> B contraction shows up from A's side, with the cycle through X
    assert [(m.direction, m.code, m.other) for m in ex.merges] == [("into", "MERGE_CYCLE", c.cluster_of("B"))]
    assert ex.merges[0].evidence["path"] == ["X"]
    # the path the merge would have swallowed, with each node's cluster or reason
    assert "the other path: A [cluster_0] -> X [UNSUPPORTED_OP] -> B [cluster_1]" in str(ex)


def test_too_small_cluster_lists_would_be_members():
    c = sim(chain_with_string_break(), "--tf_xla_min_cluster_size=3")
    ex = c.explain("a")
    assert ex.code == "CLUSTER_TOO_SMALL" and ex.group_members == ["a", "b"]
    assert ex.evidence["flag"] == "--tf_xla_min_cluster_size=3"
    assert "its would-be cluster: a, b" in str(ex)
    # what the group could not absorb: the _Arg before it and the string op after it
    assert [(b["direction"], b["node"], b["code"]) for b in ex.boundary] == [
        ("in", "x", "TOP_LEVEL_ARG_RETVAL"), ("out", "s", "UNSUPPORTED_OP")]


# -- two nodes ---------------------------------------------------------------------------------------


def test_pair_in_one_cluster():
    p = sim(chain_with_string_break(), "--tf_xla_min_cluster_size=2").explain("a", "b")
    assert p.together and "both in cluster_0" in p.verdict


def test_pair_split_by_a_refused_merge_lists_it():
    c = sim(diamond())
    p = c.explain("A", "B")
    assert not p.together and p.adjacent
    assert p.codes == ["MERGE_CYCLE"]  # phase 1 and 2 refuse the same merge: listed once
    assert "refused (MERGE_CYCLE)" in p.verdict


def test_pair_without_an_edge_between_them():
    p = sim(two_chains()).explain("a1", "b2")
    assert not p.together and p.adjacent is False and not p.refusals
    assert "no edge joins the two" in p.verdict


def test_pair_with_a_non_candidate():
    p = sim(chain_with_string_break(), "--tf_xla_min_cluster_size=2").explain("a", "s")
    assert not p.together and "s (UNSUPPORTED_OP)" in p.verdict


# -- what-if and diffs --------------------------------------------------------------------------------


def test_force_compilable_merges_the_clusters_around_an_op():
    base = sim(chain_with_string_break(), "--tf_xla_min_cluster_size=2")
    var = base.whatif(force_compilable=["AsString", "StringToNumber"])
    assert var.explain("s").code == "CLUSTERED"
    d = base.diff(var)
    assert [(ch.kind, ch.a, ch.b) for ch in d.changes] == [("merge", ["cluster_0", "cluster_1"], ["cluster_0"])]
    assert d.headline() == "cluster_0 and cluster_1 merge (into cluster_0); 2 more nodes compiled"
    assert d.code_changes == {("UNSUPPORTED_OP", "CLUSTERED"): ["s", "n"]}


def test_exclude_op_splits_a_cluster():
    g = graph(arg("x"), op("a", "Neg", "x"), op("b", "Exp", "a"), op("c", "Neg", "b"), op("d", "Exp", "c"),
              ret("y", "d"))
    base = sim(g)
    var = base.whatif(exclude_ops=["Exp"])  # b and d leave: a and c are cut apart
    assert var.explain("b").code == "WHATIF_EXCLUDED"
    d = base.diff(var)
    assert [(ch.kind, len(ch.b), ch.removed) for ch in d.changes] == [("split", 2, ["b", "d"])]
    assert "2 fewer nodes compiled" in d.headline()


def test_whatif_flags_append_to_the_baseline():
    base = sim(chain_with_string_break(), "--tf_xla_min_cluster_size=2")
    var = base.whatif(flags="--tf_xla_min_cluster_size=3")
    assert var.options.flags_text.endswith("--tf_xla_min_cluster_size=2 --tf_xla_min_cluster_size=3")
    d = base.diff(var)
    assert sorted(ch.kind for ch in d.changes) == ["gone", "gone"] and d.compiled_b == 0


def test_gpu_whatif_moves_nodes_with_a_gpu_kernel_only():
    base = sim(chain_with_string_break(), "--tf_xla_min_cluster_size=2")
    var = base.whatif(device="gpu")
    assert var.nodes["a"].device.endswith("GPU:0")
    assert var.nodes["s"].device.endswith("CPU:0")  # AsString has no GPU kernel in TF 2.21
    assert any("re-placed" in n for n in var.notes)


def test_simulating_does_not_touch_the_callers_graph():
    g = chain_with_string_break()
    before = g.graphdef.SerializeToString()
    sim(g)
    assert g.graphdef.SerializeToString() == before


def test_diff_of_two_graphs_pairs_nodes_by_name():
    a = sim(two_chains())
    b = sim(graph(arg("x"), op("a1", "Neg", "x"), op("a2", "Exp", "a1"), op("a3", "Abs", "a2"), ret("y", "a3")))
    d = jitsim.diff(a, b)
    assert d.only_in_a == ["z", "b1", "b2", "w"] and d.only_in_b == ["a3"]
    assert [(ch.kind, ch.added) for ch in d.changes if ch.kind != "gone"] == [("grown", ["a3"])]


# -- CLI -------------------------------------------------------------------------------------------------


def test_cli_explain_on_the_example(capsys):
    assert main(["explain", EXAMPLE, "add"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("add (_FusedMatMul on ") and "UNSUPPORTED_OP" in out and "remapper" in out


def test_cli_explain_pair_json(capsys):
    assert main(["explain", EXAMPLE, "AssignSubVariableOp_5", "^stack$", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["kind"] == "pair" and not d["together"]
    assert {m["code"] for m in d["refused_merges"]} == {"MERGE_RESOURCE", "MERGE_CYCLE"}
    res = [m for m in d["refused_merges"] if m["code"] == "MERGE_RESOURCE"]
    assert {(m["evidence"]["writer"], m["evidence"]["reader"]) for m in res} >= {
        ("AssignSubVariableOp_5", "add_3/ReadVariableOp")}


def test_cli_explain_ambiguous_name_is_one_line_exit_2(capsys):
    assert main(["explain", EXAMPLE, "Assign"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "matches 6 nodes" in err and "AssignSubVariableOp_5" in err


def test_cli_whatif_and_diff(tmp_path, capsys):
    assert main(["whatif", EXAMPLE, "--force-compilable", "_FusedMatMul"]) == 0
    out = capsys.readouterr().out
    assert "cluster_0 and cluster_3 merge (into cluster_0)" in out and "10 more nodes compiled" in out
    assert main(["whatif", EXAMPLE]) == 2
    assert "what if what?" in capsys.readouterr().err
    # diff: exit 1 when the clusters differ, 0 when not
    assert main(["diff", EXAMPLE, "--b-tf-xla-flags", f"{AUTO} --tf_xla_min_cluster_size=1"]) == 1
    assert "6 new clusters" in capsys.readouterr().out
    g = tmp_path / "same.pbtxt"
    save(jitsim.load(EXAMPLE), g)
    assert main(["diff", EXAMPLE, str(g), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["schema"] == "jitsim.diff/1" and d["identical"] and d["changes"] == []


# -- decisions of the passes after mark-for-compilation ----------------------------------------------------


def test_later_pass_removal_is_the_final_reason_and_history_keeps_both(corpus):
    """decluster_shapes (real TF 2.21): mark-for-compilation clusters ``Size``, then
    PartiallyDecluster phase B takes it out (TF's encapsulate_subgraphs_before dump shows it
    without ``_XlaCluster``); the explanation must say so, with the mark decision in history."""
    from jitsim.graph.io import load

    d = corpus.extract("decluster_shapes")
    f = d / "dumps" / "before_clone_constants_for_better_clustering_3.pbtxt"
    c = jitsim.cluster(f, flags=corpus.index("decluster_shapes")["tf_xla_flags"])
    tf_after = load(d / "dumps" / "encapsulate_subgraphs_before_3.pbtxt").clusters()
    assert tf_after["Size"] is None and c.nodes["Size"].cluster is None
    ex = c.explain("Size")
    assert ex.code == "DECLUSTERED_RECOMPILATION" and ex.mark_cluster == "cluster_0"
    assert [h["code"] for h in ex.history] == ["CLUSTERED", "DECLUSTERED_RECOMPILATION"]
    assert ex.evidence["consumers"] == ["range"]


def test_annotations_of_later_passes_do_not_replace_the_reason(corpus):
    """decluster_hostmem: ForceXlaConstantsOnHost annotates a must-compile call it never
    clusters; the node's reason stays mark-for-compilation's."""
    d = corpus.extract("decluster_hostmem")
    f = d / "dumps" / "before_clone_constants_for_better_clustering_3.pbtxt"
    c = jitsim.cluster(f, flags=corpus.index("decluster_hostmem")["tf_xla_flags"])
    r = c.nodes["StatefulPartitionedCall"]
    assert r.code == "UNSUPPORTED_FUNCTION" and [d.code for _, d in r.later] == ["INPUT_HOSTMEM"]
    assert "force_xla_constants_on_host: INPUT_HOSTMEM" in str(c.explain("StatefulPartitionedCall"))
