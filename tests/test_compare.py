"""Tests for jitsim.crosscheck.compare, the partition scorer.

Style follows TensorFlow's mark_for_compilation_pass_test.cc: each test builds a
tiny hand-made case, states in its docstring why the expected answer is right,
and checks one behaviour.  Property tests (hypothesis) at the end check the
invariants promised in the module docstring on arbitrary labellings.

Naming convention in hand-made cases: TRUTH (TF) clusters are ``T1, T2, ...``,
PREDICTED (jitsim) clusters are ``P1, P2, ...`` so that a renamed-but-equal
partition is the default situation, as it is in real runs.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jitsim.crosscheck.compare import (
    KINDS,
    ClusterMatch,
    CorpusRow,
    NodeDiff,
    PartitionDiff,
    compare_partitions,
    corpus_summary,
    corpus_table,
)


def kinds_of(diff: PartitionDiff) -> dict[str, str]:
    return {d.node: d.kind for d in diff.diffs}


# ---------------------------------------------------------------------------
# Identical / renamed


def test_identical_labellings_are_identical_with_same_names():
    """The same labelling on both sides: same partition and same names, so
    nothing differs and every node agrees."""
    lab = {"a": "cluster_0", "b": "cluster_0", "c": None, "d": "cluster_1"}
    r = compare_partitions(lab, dict(lab))
    assert r.identical
    assert r.same_names
    assert r.diffs == ()
    assert r.agreement() == 1.0
    assert r.agreeing_nodes == r.n_nodes == 4
    assert (r.n_truth_clusters, r.n_predicted_clusters) == (2, 2)
    assert (r.n_clustered_truth, r.n_clustered_predicted) == (3, 3)
    assert r.cluster_map == {"cluster_0": "cluster_0", "cluster_1": "cluster_1"}


def test_renamed_clusters_are_identical_but_names_differ():
    """jitsim numbers clusters differently from TF; as partitions the two agree
    ({a,b}, {d}, c unclustered), so identical is True but same_names is False."""
    truth = {"a": "cluster_0", "b": "cluster_0", "c": None, "d": "cluster_1"}
    pred = {"a": "cluster_7", "b": "cluster_7", "c": None, "d": "cluster_2"}
    r = compare_partitions(pred, truth)
    assert r.identical
    assert not r.same_names
    assert r.diffs == ()
    assert r.agreement() == 1.0
    assert r.cluster_map == {"cluster_0": "cluster_7", "cluster_1": "cluster_2"}


def test_swapped_cluster_names_are_identical_but_names_differ():
    """Each cluster name is used on both sides but for the other group: the
    partitions agree, the names do not (a pure name check would be fooled)."""
    truth = {"a": "X", "b": "X", "c": "Y"}
    pred = {"a": "Y", "b": "Y", "c": "X"}
    r = compare_partitions(pred, truth)
    assert r.identical and not r.same_names


def test_nothing_clustered_on_either_side_is_identical():
    """Every node unclustered in both: the partitions are all singletons on
    both sides, so identical and same_names, with zero clusters."""
    lab = {"a": None, "b": None}
    r = compare_partitions(lab, lab)
    assert r.identical and r.same_names
    assert r.n_truth_clusters == r.n_predicted_clusters == 0
    assert r.cluster_map == {}
    assert r.summary() == "identical (0 clusters, 0 nodes clustered)"


def test_empty_graphs_have_agreement_one():
    """No nodes at all: vacuously identical; agreement is defined as 1.0 rather
    than dividing by zero."""
    r = compare_partitions({}, {})
    assert r.identical and r.same_names
    assert r.n_nodes == 0
    assert r.agreement() == 1.0


# ---------------------------------------------------------------------------
# Each diff kind


def test_missing_node():
    """c is in TF's T1 (3 nodes) but jitsim leaves it out; a and b still form a
    cluster in both, so only c differs, as 'missing'."""
    truth = {"a": "T1", "b": "T1", "c": "T1"}
    pred = {"a": "P1", "b": "P1", "c": None}
    r = compare_partitions(pred, truth)
    assert r.diffs == (
        NodeDiff("c", "missing", None, "T1",
                 "in TF's T1 with 3 nodes, jitsim left it unclustered"),
    )
    assert not r.identical
    assert r.agreeing_nodes == 2


def test_extra_node():
    """c is unclustered in TF but jitsim adds it to the cluster with a and b:
    'extra'.  It does not make P1 'merged', since c has no TF cluster."""
    truth = {"a": "T1", "b": "T1", "c": None}
    pred = {"a": "P1", "b": "P1", "c": "P1"}
    r = compare_partitions(pred, truth)
    assert r.diffs == (
        NodeDiff("c", "extra", "P1", None,
                 "TF left it unclustered, jitsim put it in P1 with 3 nodes"),
    )


def test_split_flags_the_minority_part():
    """TF's T1 = {a,b,c,d}; jitsim puts a,b,c in P1 and d alone in P2.  The
    majority part is P1, so only d would have to move: d is 'split'."""
    truth = {"a": "T1", "b": "T1", "c": "T1", "d": "T1"}
    pred = {"a": "P1", "b": "P1", "c": "P1", "d": "P2"}
    r = compare_partitions(pred, truth)
    assert r.diffs == (
        NodeDiff("d", "split", "P2", "T1",
                 "TF's T1 (4 nodes) is spread over 2 jitsim clusters [P1 (3), P2 (1)]; "
                 "its main part is P1, this node is in P2"),
    )
    assert r.cluster_map == {"T1": "P1"}


def test_split_tie_goes_to_smallest_predicted_name():
    """T1 = {a,b,c,d} split 2/2 over 'cluster_9' and 'cluster_10'.  Ties go to
    the smallest name in plain string order, which is 'cluster_10', so the two
    nodes in 'cluster_9' are the split ones."""
    truth = {"a": "T1", "b": "T1", "c": "T1", "d": "T1"}
    pred = {"a": "cluster_9", "b": "cluster_9", "c": "cluster_10", "d": "cluster_10"}
    r = compare_partitions(pred, truth)
    assert r.cluster_map == {"T1": "cluster_10"}
    assert [(d.node, d.kind) for d in r.diffs] == [("a", "split"), ("b", "split")]


def test_merged_flags_the_minority_truth_cluster():
    """TF has T1 = {a,b,c} and T2 = {d,e}; jitsim fuses all five into P1.  P1
    best matches T1 (overlap 3), so d and e are the nodes merged in."""
    truth = {"a": "T1", "b": "T1", "c": "T1", "d": "T2", "e": "T2"}
    pred = {n: "P1" for n in truth}
    r = compare_partitions(pred, truth)
    detail = ("jitsim's P1 (5 nodes) merges 2 TF clusters [T1 (3), T2 (2)]; "
              "it matches T1, this node is from T2")
    assert r.diffs == (
        NodeDiff("d", "merged", "P1", "T2", detail),
        NodeDiff("e", "merged", "P1", "T2", detail),
    )
    # Both TF clusters map to P1: it is the best (only) match of each.
    assert r.cluster_map == {"T1": "P1", "T2": "P1"}


def test_merged_tie_goes_to_smallest_truth_name():
    """P1 holds two nodes of TF's 'B' and two of TF's 'A'.  The tie is broken by
    the smallest TF name 'A', so the 'B' nodes are the merged ones."""
    truth = {"a": "B", "b": "B", "c": "A", "d": "A"}
    pred = {n: "P1" for n in truth}
    r = compare_partitions(pred, truth)
    assert [(d.node, d.kind, d.truth) for d in r.diffs] == [
        ("a", "merged", "B"),
        ("b", "merged", "B"),
    ]


def test_absent_nodes_in_either_graph():
    """x exists only in TF's graph, y only in jitsim's (the graphs differ, e.g.
    different grappler rewrites).  They are reported as absent, count against
    agreement, and do not disturb the comparison of the common nodes."""
    truth = {"a": "T1", "b": "T1", "x": "T1"}
    pred = {"a": "P1", "b": "P1", "y": None}
    r = compare_partitions(pred, truth)
    assert r.diffs == (
        NodeDiff("x", "absent_in_predicted", None, "T1",
                 "only in TF's graph (in T1 with 3 nodes there), not in jitsim's"),
        NodeDiff("y", "absent_in_truth", None, None,
                 "only in jitsim's graph (unclustered there), not in TF's"),
    )
    assert r.n_nodes == 4
    assert r.agreeing_nodes == 2
    assert not r.identical


def test_cluster_nothing_prediction_gives_only_missing():
    """A predictor that clusters nothing (e.g. auto-jit off) against a TF run
    with two clusters: every TF-clustered node is 'missing', nothing else
    differs, and the unclustered node still agrees."""
    truth = {"a": "T1", "b": "T1", "c": "T2", "d": "T2", "e": None}
    pred = {n: None for n in truth}
    r = compare_partitions(pred, truth)
    assert {d.kind for d in r.diffs} == {"missing"}
    assert [d.node for d in r.diffs] == ["a", "b", "c", "d"]
    assert r.agreement() == pytest.approx(1 / 5)
    assert r.agreement() < 1
    assert r.cluster_map == {"T1": None, "T2": None}


# ---------------------------------------------------------------------------
# Precedence and interactions


def test_split_takes_precedence_over_merged():
    """TF: T1 = {a,b,c}, T2 = {d,e}.  jitsim: P1 = {a,b}, P2 = {c,d,e}.  Node c
    is both split (T1's main part is P1) and merged (P2 best matches T2); it is
    reported once, as 'split'.  d and e agree with P2."""
    truth = {"a": "T1", "b": "T1", "c": "T1", "d": "T2", "e": "T2"}
    pred = {"a": "P1", "b": "P1", "c": "P2", "d": "P2", "e": "P2"}
    r = compare_partitions(pred, truth)
    assert [(d.node, d.kind) for d in r.diffs] == [("c", "split")]


def test_missing_takes_precedence_and_does_not_make_a_split():
    """T1 = {a,b,c}; jitsim clusters a,b and leaves c out.  c is 'missing'; the
    truth cluster is not 'split' because only one predicted cluster holds any of
    its nodes (unclustered is not a part)."""
    truth = {"a": "T1", "b": "T1", "c": "T1"}
    pred = {"a": "P1", "b": "P1", "c": None}
    r = compare_partitions(pred, truth)
    assert [(d.node, d.kind) for d in r.diffs] == [("c", "missing")]


def test_extra_does_not_make_a_merge():
    """P1 holds T1's a,b plus TF-unclustered c, d.  c and d are 'extra'; a and
    b agree because P1 holds nodes of one TF cluster only."""
    truth = {"a": "T1", "b": "T1", "c": None, "d": None}
    pred = {n: "P1" for n in truth}
    r = compare_partitions(pred, truth)
    assert [(d.node, d.kind) for d in r.diffs] == [("c", "extra"), ("d", "extra")]


def test_absent_takes_precedence_over_everything():
    """x is in T1 in TF's graph and absent from jitsim's: it is
    'absent_in_predicted', not 'missing', and it is not counted as part of
    T1's overlap with jitsim's clusters."""
    truth = {"a": "T1", "b": "T1", "x": "T1"}
    pred = {"a": "P1", "b": "P1"}
    r = compare_partitions(pred, truth)
    assert [(d.node, d.kind) for d in r.diffs] == [("x", "absent_in_predicted")]
    assert r.clusters[0] == ClusterMatch("T1", "P1", 3, 2, 2)


def test_diffs_sorted_by_kind_then_truth_cluster_then_node():
    """Kinds come in KINDS order (missing, extra, split, merged, absent_*), then
    by TF cluster (unclustered first), then by node name; input order is
    irrelevant."""
    truth = {"z": "T2", "y": "T1", "m": "T1", "a": "T1", "k": "T2", "e": None, "q": "T3"}
    pred = {"z": None, "y": None, "m": "P1", "a": "P1", "k": "P2", "e": "P2", "r": None}
    r = compare_partitions(pred, truth)
    assert [(d.kind, d.truth, d.node) for d in r.diffs] == [
        ("missing", "T1", "y"),
        ("missing", "T2", "z"),
        ("extra", None, "e"),
        ("absent_in_predicted", "T3", "q"),
        ("absent_in_truth", None, "r"),
    ]


def test_cluster_map_and_correspondence_table():
    """cluster_map sends each TF cluster to the jitsim cluster with the largest
    overlap (None when jitsim clustered none of it).  The correspondence table
    lists TF clusters, then jitsim clusters that nobody maps to."""
    truth = {"a": "T1", "b": "T1", "c": "T1", "d": "T2", "e": None}
    pred = {"a": "P1", "b": "P1", "c": "P3", "d": None, "e": "P2"}
    r = compare_partitions(pred, truth)
    assert r.cluster_map == {"T1": "P1", "T2": None}
    assert r.clusters == (
        ClusterMatch("T1", "P1", 3, 2, 2),
        ClusterMatch("T2", None, 1, 0, 0),
        ClusterMatch(None, "P2", 0, 1, 0),
        ClusterMatch(None, "P3", 0, 1, 0),
    )


def test_rejects_non_string_cluster_and_empty_name():
    """Cluster values must be str or None; '' is rejected rather than silently
    treated as a cluster, since it usually means a parsing bug upstream."""
    with pytest.raises(TypeError):
        compare_partitions({"a": 3}, {"a": None})  # type: ignore[dict-item]
    with pytest.raises(ValueError):
        compare_partitions({"a": ""}, {"a": None})


# ---------------------------------------------------------------------------
# Text and data output


def test_summary_identical_line():
    """The one-line summary of an identical result names the cluster and
    clustered-node counts, in the documented form."""
    lab = {"a": "c0", "b": "c0", "c": "c1", "d": "c1", "e": None}
    assert compare_partitions(lab, lab).summary() == "identical (2 clusters, 4 nodes clustered)"


def test_summary_different_line_counts_kinds():
    """A different result lists the non-zero counts per kind in KINDS order."""
    truth = {"a": "T1", "b": "T1", "c": "T1", "d": "T1", "e": None}
    pred = {"a": "P1", "b": "P1", "c": None, "d": "P2", "e": None}
    s = compare_partitions(pred, truth).summary()
    assert s.startswith("DIFFERENT: 1 missing, 1 split (")
    assert "60.0% nodes agree" in s


def test_format_text_truncates_each_list():
    """With 7 missing nodes and limit=3 the report shows 3 of them and says
    how many were left out; the summary and the table are included."""
    truth = {f"n{i}": "T1" for i in range(7)}
    pred = {n: None for n in truth}
    text = compare_partitions(pred, truth).format_text(limit=3)
    lines = text.splitlines()
    assert lines[0].startswith("DIFFERENT: 7 missing")
    assert "cluster correspondence (TF -> jitsim):" in text
    assert "missing (7):" in text
    assert sum(1 for ln in lines if "jitsim left it unclustered" in ln) == 3
    assert "  ... and 4 more" in lines


def test_format_text_of_identical_result_has_no_node_lists():
    """An identical result prints the summary and an all-'exact' table only."""
    lab = {"a": "c0", "b": "c0"}
    text = compare_partitions(lab, lab).format_text()
    assert "exact" in text
    assert not any(f"{k} (" in text for k in KINDS)


def test_to_dict_round_trips_through_json():
    """to_dict is JSON-serialisable with no loss: dumps/loads gives the same
    dict, and from_dict rebuilds an equal PartitionDiff."""
    truth = {"a": "T1", "b": "T1", "c": "T1", "d": "T2", "e": None, "x": "T2"}
    pred = {"a": "P1", "b": "P1", "c": "P2", "d": "P2", "e": "P2", "y": None}
    r = compare_partitions(pred, truth)
    d = r.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert PartitionDiff.from_dict(json.loads(r.to_json())) == r


def test_to_dict_key_order_is_stable():
    """Consumers (golden files, diffs of reports) rely on a fixed key order."""
    d = compare_partitions({"a": "P"}, {"a": "T"}).to_dict()
    assert list(d) == [
        "identical", "same_names", "n_nodes", "n_truth_clusters",
        "n_predicted_clusters", "n_clustered_truth", "n_clustered_predicted",
        "agreeing_nodes", "agreement", "summary", "counts", "cluster_map",
        "clusters", "diffs",
    ]
    assert list(d["counts"]) == list(KINDS)


# ---------------------------------------------------------------------------
# Corpus table


def _corpus() -> list[CorpusRow]:
    same = {"a": "c0", "b": "c0", "c": None}
    return [
        CorpusRow("mlp", compare_partitions(same, same)),
        CorpusRow("resnet_block", compare_partitions({"a": "P", "b": None}, {"a": "T", "b": "T"})),
        CorpusRow("renamed", compare_partitions({"a": "c9", "b": "c9"}, {"a": "c1", "b": "c1"})),
        CorpusRow("broken_graph", None, "ValueError: unknown op Foo\ntraceback..."),
    ]


def test_corpus_table_lists_every_row_and_totals():
    """One line per graph (in input order) after a header and a rule, then a
    totals line: 2 of 4 graphs identical (the error row counts as not
    identical), and (3+1+2)/(3+2+2) = 85.7% of the non-error graphs' nodes
    agree.  The differing graph's first difference is its missing node b."""
    text = corpus_table(_corpus())
    lines = text.splitlines()
    assert len(lines) == 2 + 4 + 1
    for i, name in enumerate(["mlp", "resnet_block", "renamed", "broken_graph"]):
        assert lines[2 + i].startswith(name)
    assert lines[-1] == "2/4 graphs identical, 85.7% nodes agree; 1/4 same names; 1 error"
    assert "missing b: in TF's T with 2 nodes" in lines[3]


def test_corpus_table_columns_are_aligned():
    """Fixed-width: every column starts at the same offset on all data lines,
    so the 'partition' column lines up."""
    lines = corpus_table(_corpus()).splitlines()
    col = lines[0].index("partition")
    assert [ln[col:col + 3] for ln in lines[2:6]] == ["yes", "no ", "yes", "ERR"]


def test_corpus_table_shows_error_row():
    """A graph that could not be compared shows ERROR and the first line of
    its message instead of numbers."""
    line = corpus_table(_corpus()).splitlines()[5]
    assert "ERROR" in line
    assert "error: ValueError: unknown op Foo" in line
    assert "traceback" not in line


def test_corpus_summary_matches_table():
    """corpus_summary is the table as data and is JSON-serialisable."""
    s = corpus_summary(_corpus())
    assert json.loads(json.dumps(s)) == s
    assert (s["graphs"], s["identical"], s["same_names"], s["errors"]) == (4, 2, 1, 1)
    assert (s["nodes"], s["agreeing_nodes"]) == (7, 6)
    assert s["counts"]["missing"] == 1
    assert [r["name"] for r in s["rows"]] == ["mlp", "resnet_block", "renamed", "broken_graph"]
    assert s["rows"][3]["error"].startswith("ValueError")
    assert s["rows"][2]["first_difference"] == "names differ"


def test_empty_corpus():
    """No graphs: the totals line still renders, with 100% vacuous agreement."""
    assert corpus_table([]).splitlines()[-1].startswith("0/0 graphs identical, 100.0% nodes agree")


# ---------------------------------------------------------------------------
# Properties

NODES = [f"n{i}" for i in range(9)]
CLUSTER_NAMES = ["c0", "c1", "c2", "cluster_9", "cluster_10"]
cluster = st.one_of(st.none(), st.sampled_from(CLUSTER_NAMES))
labelling = st.dictionaries(st.sampled_from(NODES), cluster, max_size=len(NODES))


@st.composite
def labelling_pairs(draw):
    """Two labellings over mostly the same nodes (sometimes exactly the same)."""
    common = draw(st.sets(st.sampled_from(NODES)))
    only_p = draw(st.sets(st.sampled_from(["p_only1", "p_only2"]), max_size=2)) if draw(st.booleans()) else set()
    only_t = draw(st.sets(st.sampled_from(["t_only1", "t_only2"]), max_size=2)) if draw(st.booleans()) else set()
    pred = {n: draw(cluster) for n in sorted(common | only_p)}
    truth = {n: draw(cluster) for n in sorted(common | only_t)}
    return pred, truth


def partition_of(lab):
    """Independent oracle: (node set, set of clustered groups)."""
    groups: dict[str, set[str]] = {}
    for n, c in lab.items():
        if c is not None:
            groups.setdefault(c, set()).add(n)
    return frozenset(lab), frozenset(frozenset(g) for g in groups.values())


@given(labelling)
def test_prop_compare_with_itself_is_identical(lab):
    """Any labelling equals itself: identical, same names, agreement 1."""
    r = compare_partitions(lab, lab)
    assert r.identical and r.same_names and r.diffs == () and r.agreement() == 1.0


@given(labelling_pairs())
def test_prop_identical_iff_no_diffs_iff_same_partition(pair):
    """identical <-> no diffs <-> the partitions are equal by an independent
    set-of-sets computation; same_names -> identical."""
    pred, truth = pair
    r = compare_partitions(pred, truth)
    assert r.identical == (r.diffs == ()) == (partition_of(pred) == partition_of(truth))
    assert not r.same_names or r.identical
    assert r.same_names == (pred == truth)


@given(labelling_pairs())
def test_prop_accounting(pair):
    """Every node is counted once: agreeing + diffs = n_nodes = |union|; each
    diff node appears once and carries its clusters from the inputs; diffs are
    sorted as documented."""
    pred, truth = pair
    r = compare_partitions(pred, truth)
    assert r.agreeing_nodes + len(r.diffs) == r.n_nodes == len(set(pred) | set(truth))
    assert len({d.node for d in r.diffs}) == len(r.diffs)
    for d in r.diffs:
        assert d.kind in KINDS
        assert d.predicted == pred.get(d.node) and d.truth == truth.get(d.node)
    keys = [(KINDS.index(d.kind), d.truth is not None, d.truth or "", d.node) for d in r.diffs]
    assert keys == sorted(keys)
    assert 0.0 <= r.agreement() <= 1.0


@given(labelling_pairs())
def test_prop_swapping_arguments(pair):
    """Swapping PREDICTED and TRUTH swaps missing<->extra and
    absent_in_predicted<->absent_in_truth, keeps the set of split-or-merged
    nodes (split one way is merged the other way), and keeps identical,
    same_names and agreeing_nodes."""
    pred, truth = pair
    fwd, back = compare_partitions(pred, truth), compare_partitions(truth, pred)
    swap = {"missing": "extra", "extra": "missing",
            "absent_in_predicted": "absent_in_truth", "absent_in_truth": "absent_in_predicted"}
    kf, kb = kinds_of(fwd), kinds_of(back)
    for node, kind in kf.items():
        if kind in swap:
            assert kb[node] == swap[kind]
    assert {n for n, k in kf.items() if k in ("split", "merged")} == \
           {n for n, k in kb.items() if k in ("split", "merged")}
    assert (fwd.identical, fwd.same_names, fwd.agreeing_nodes) == \
           (back.identical, back.same_names, back.agreeing_nodes)


@given(labelling_pairs(), st.data())
def test_prop_injective_renaming_keeps_identical(pair, data):
    """Renaming PREDICTED's clusters by any injective map does not change its
    partition, so whether it equals TRUTH's partition is unchanged."""
    pred, truth = pair
    used = sorted({c for c in pred.values() if c is not None})
    new = data.draw(st.lists(st.text("abxyz_019", min_size=1, max_size=5),
                             min_size=len(used), max_size=len(used), unique=True))
    renamed = {n: (None if c is None else new[used.index(c)]) for n, c in pred.items()}
    assert compare_partitions(renamed, truth).identical == compare_partitions(pred, truth).identical


@given(labelling_pairs(), st.data())
def test_prop_order_preserving_renaming_keeps_every_kind(pair, data):
    """If the renaming also preserves name order, even the tie-breaks (which
    compare predicted names) are unchanged, so every node keeps its diff kind
    and the agreement is the same."""
    pred, truth = pair
    used = sorted({c for c in pred.values() if c is not None})
    new = sorted(data.draw(st.lists(st.text("abxyz_019", min_size=1, max_size=5),
                                    min_size=len(used), max_size=len(used), unique=True)))
    renamed = {n: (None if c is None else new[used.index(c)]) for n, c in pred.items()}
    before, after = compare_partitions(pred, truth), compare_partitions(renamed, truth)
    assert kinds_of(after) == kinds_of(before)
    assert after.agreeing_nodes == before.agreeing_nodes


@given(labelling, st.data())
def test_prop_renamed_self_is_identical(lab, data):
    """A labelling against an injective renaming of itself is identical; names
    agree only if the renaming fixes every used name."""
    used = sorted({c for c in lab.values() if c is not None})
    new = data.draw(st.lists(st.sampled_from(CLUSTER_NAMES + ["q1", "q2", "q3"]),
                             min_size=len(used), max_size=len(used), unique=True))
    renamed = {n: (None if c is None else new[used.index(c)]) for n, c in lab.items()}
    r = compare_partitions(renamed, lab)
    assert r.identical
    assert r.same_names == (new == used)


@given(labelling_pairs(), st.randoms(use_true_random=False))
def test_prop_input_order_does_not_matter(pair, rnd):
    """Output is deterministic: shuffling the insertion order of the input
    mappings gives byte-identical JSON."""
    pred, truth = pair
    p2 = list(pred.items()); rnd.shuffle(p2)
    t2 = list(truth.items()); rnd.shuffle(t2)
    assert compare_partitions(dict(p2), dict(t2)).to_json() == compare_partitions(pred, truth).to_json()


@settings(max_examples=50)
@given(labelling_pairs())
def test_prop_to_dict_json_round_trip(pair):
    """For arbitrary results, to_dict survives JSON and from_dict inverts it;
    format_text and summary never fail."""
    r = compare_partitions(*pair)
    d = r.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert PartitionDiff.from_dict(d) == r
    assert r.format_text(limit=2).splitlines()[0] == r.summary()
