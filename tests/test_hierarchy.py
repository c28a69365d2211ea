"""The tree the report's explorer opens level by level (jitsim.explain.hierarchy)."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings, strategies as st

from jitsim.explain.hierarchy import MAX_CHILDREN, UNCLUSTERED, Hierarchy, cluster_tree, scope_tree

SYNTHETIC = {"series", "stem", "range"}


def _level_sizes(h: Hierarchy) -> Counter:
    """Entries per group: its subgroups and the nodes it holds directly."""
    return Counter(h.parents[1:]) + Counter(h.node_group)


def _scope_of(h: Hierarchy, i: int) -> list[str]:
    """Node i's path with the synthetic groups left out."""
    g, out = h.node_group[i], []
    while g > 0:
        if h.kinds[g] not in SYNTHETIC:
            out.append(h.labels[g])
        g = h.parents[g]
    return out[::-1]


def _check(h: Hierarchy, names, max_children=MAX_CHILDREN):
    assert len(h.node_group) == len(names)
    assert h.parents[0] == -1 and all(0 <= p < g for g, p in enumerate(h.parents) if g)  # pre-order
    # every level readable: never more than max_children entries, except the cluster view's
    # outer groups (kept whole); no empty group
    sizes = _level_sizes(h)
    clusters = Counter(p for k, p in enumerate(h.parents) if h.kinds[k] == "cluster")
    for g in range(len(h.labels)):
        assert sizes[g] >= 1 or g == 0
        assert sizes[g] - clusters[g] <= max_children, (g, h.labels[g], sizes[g])
    return sizes


def test_small_levels_are_the_scopes_themselves():
    names = ["a/b/x", "a/b/y", "a/z", "w"]
    h = scope_tree(names)
    assert h.labels == ["", "a", "b"] and h.kinds == ["root", "scope", "scope"]
    assert [h.path(g) for g in h.node_group] == [["a", "b"], ["a", "b"], ["a"], []]


def test_a_wide_level_is_grouped_by_series_then_stem_then_range():
    """Hand-derived: 40 ``ReadVariableOp_N`` and 40 ``conv2_blockK_...``/``conv3_...`` names at
    the top level (80 entries > 30). Series groups the ReadVariableOps (one ``ReadVariableOp_*``);
    the conv names have no common series but split by their first word (conv2*, conv3*); each
    group of 20 then fits."""
    names = [f"ReadVariableOp_{k}" if k else "ReadVariableOp" for k in range(40)]
    names += [f"conv{2 + k % 2}_block{k}_conv" for k in range(40)]
    h = scope_tree(names)
    top = [h.labels[g] for g, p in enumerate(h.parents) if p == 0]
    assert top == ["ReadVariableOp_*", "conv2*", "conv3*"]
    assert [h.kinds[g] for g, p in enumerate(h.parents) if p == 0] == ["series", "stem", "stem"]
    _check(h, names)
    # 40 ReadVariableOps are more than a level holds: their series is cut into runs
    rv = h.labels.index("ReadVariableOp_*")
    runs = [g for g, p in enumerate(h.parents) if p == rv]
    assert runs and all(h.kinds[g] == "range" for g in runs)
    assert h.labels[runs[0]].startswith("ReadVariableOp …")


def test_stem_takes_as_few_words_as_split_the_level():
    """Every name starts ``model_1_``: one and two words do not split them, three do."""
    names = [f"model_1_conv{1 + k % 3}_bn_{k}_resource" for k in range(45)]
    h = scope_tree(names)
    assert sorted(h.labels[g] for g, p in enumerate(h.parents) if p == 0) == \
        ["model_1_conv1*", "model_1_conv2*", "model_1_conv3*"]


def test_cluster_tree_puts_each_cluster_outside_and_keeps_them_whole():
    """60 clusters (more than a level holds): the outer groups are the 60 clusters and the
    unclustered group, never a series or a range of them."""
    names = [f"s{k}/op" for k in range(120)]
    clusters = [f"cluster_{k // 2}" if k % 4 else None for k in range(120)]
    h = cluster_tree(names, clusters)
    top = [h.labels[g] for g, p in enumerate(h.parents) if p == 0]
    assert set(top) == {c for c in clusters if c} | {UNCLUSTERED}
    assert all(h.kinds[g] == "cluster" for g, p in enumerate(h.parents) if p == 0)
    for i, c in enumerate(clusters):
        assert h.path(h.node_group[i])[0] == (c or UNCLUSTERED)
    _check(h, names)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["a", "b", "add", "add_1", "add_2", "conv2_x", "conv3_y", "m_1_k",
                                          "m_1_j", "Read", "Read_7"]), min_size=1, max_size=4),
                min_size=1, max_size=400),
       st.integers(min_value=2, max_value=12))
def test_any_names_any_width(parts, max_children):
    """Whatever the names: levels stay within max_children, every node is placed once, and
    leaving the synthetic groups out of a node's path gives back its TF scope."""
    names = ["/".join(p) + f"_{i}" for i, p in enumerate(parts)]
    h = scope_tree(names, max_children=max_children)
    _check(h, names, max_children)
    for i, n in enumerate(names):
        assert _scope_of(h, i) == n.split("/")[:-1]


@pytest.mark.parametrize("n", [1000, 100_000])
def test_a_flat_graph_of_many_nodes(n):
    """A graph with no scopes at all (generated names ``op_N``): the top level is still at most
    max_children entries, and depth grows as a logarithm."""
    names = [f"op_{k}" for k in range(n)]
    h = scope_tree(names)
    sizes = _check(h, names)
    assert sizes[0] <= MAX_CHILDREN
    depth = max(len(h.path(g)) for g in set(h.node_group))
    assert depth <= 4
