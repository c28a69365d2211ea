"""Group a graph's nodes into a tree a person can open level by level.

TF names nodes by name scope (``resnet50/conv2_block1_1_conv/Conv2D``), so the scopes are the
natural groups, as in TensorBoard's graph dashboard. A real model's level is often too wide
to read (ResNet-50's training step has 879 nodes at its top level, most of them
``ReadVariableOp_N``, ``Identity_N``...), so a level with more than ``max_children`` entries is
grouped further, in this order, each step only where it helps:

1. *series*: names that differ only by a ``_N`` suffix (``ReadVariableOp``, ``ReadVariableOp_1``,
   ... -> ``ReadVariableOp_*``), TensorBoard's series grouping;
2. *stem*: the names' first words, as few as split the level (``conv2_block1_1_conv``,
   ``conv2_block2_0_bn`` -> ``conv2*``; ``model_conv2_a``, ``model_conv3_b`` -> ``model_conv2*``...);
3. *range*: consecutive runs in graph order (``a … k``), when nothing else is left.

A group made this way is a *synthetic* group: its label says so (``*`` or ``…``), and it never
stands for a TF scope. The same builder makes the report's second view, where each XLA cluster
is the outer group (``cluster_N``, then the member's scopes inside it); cluster groups are kept
as they are, never merged into a series.

>>> h = build([("a",), ("a",), ()], ["x", "y", "z"])
>>> h.labels, h.parents, h.node_group
(['', 'a'], [-1, 0], [1, 1, 0])
>>> h = build([()] * 5, ["add", "add_1", "add_2", "mul", "sub"], max_children=3)
>>> h.labels, h.kinds, h.node_group
(['', 'add_*'], ['root', 'series'], [1, 1, 1, 0, 0])
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

MAX_CHILDREN = 30  # entries of one level before it is grouped further (readable at first paint)
MAX_STEM_WORDS = 8  # the longest run of first words a stem group is keyed by

_SERIES = re.compile(r"(?:_\d+)+$")
_STEM = re.compile(r"^[^_/]*?\d*(?=_|$)")


@dataclass
class Hierarchy:
    """Groups in pre-order (a parent before its children; group 0 is the root, label ``""``).
    ``node_group[i]``: the group that holds node ``i`` directly."""

    labels: list[str] = field(default_factory=list)
    parents: list[int] = field(default_factory=list)
    kinds: list[str] = field(default_factory=list)  # root | scope | cluster | series | stem | range
    node_group: list[int] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"labels": self.labels, "parents": self.parents, "kinds": self.kinds, "node_group": self.node_group}

    def path(self, group: int) -> list[str]:
        """The labels from the root's child down to ``group``."""
        out = []
        while group > 0:
            out.append(self.labels[group])
            group = self.parents[group]
        return out[::-1]


def series_key(label: str) -> str:
    """``add_12`` -> ``add``; ``add`` -> ``add``.

    >>> series_key("ReadVariableOp_31"), series_key("conv2_block1_1_conv")
    ('ReadVariableOp', 'conv2_block1_1_conv')
    """
    return _SERIES.sub("", label)


def stem_key(label: str, words: int = 1) -> str:
    """The first ``words`` words of a name (``_``-separated).

    >>> stem_key("conv2_block1_1_conv"), stem_key("conv2_block1_1_conv", 2), stem_key("Identity", 3)
    ('conv2', 'conv2_block1', 'Identity')
    """
    return "_".join(label.split("_", words)[:words]) or label


def build(paths, leaves, max_children: int = MAX_CHILDREN, cluster_groups=()) -> Hierarchy:
    """The tree of ``len(leaves)`` nodes: node ``i`` sits under the groups ``paths[i]`` (outer
    first) and is called ``leaves[i]`` at its level. First components named in
    ``cluster_groups`` are groups of kind ``cluster`` (the cluster view's outer groups)."""
    cluster_groups = set(cluster_groups)
    labels, parents, kinds = [""], [-1], ["root"]
    index: dict[tuple[int, str], int] = {}
    node_group = [0] * len(leaves)
    for i, path in enumerate(paths):
        g = 0
        for depth, comp in enumerate(path):
            key = (g, comp)
            child = index.get(key)
            if child is None:
                child = index[key] = len(labels)
                labels.append(comp)
                parents.append(g)
                kinds.append("cluster" if depth == 0 and comp in cluster_groups else "scope")
            g = child
        node_group[i] = g
    # each group's entries in order of first appearance: ("g", group) or ("n", node)
    entries: list[list[tuple[str, int]]] = [[] for _ in labels]
    first_seen: list[int] = [-1] * len(labels)
    for i, g in enumerate(node_group):
        entries[g].append(("n", i))
        # a subgroup enters its parent's list where its first node appears
        while g > 0 and first_seen[g] < 0:
            first_seen[g] = i
            entries[parents[g]].append(("g", g))
            g = parents[g]

    def label_of(entry) -> str:
        kind, k = entry
        return leaves[k] if kind == "n" else labels[k]

    def new_group(label: str, kind: str, parent: int) -> int:
        labels.append(label)
        parents.append(parent)
        kinds.append(kind)
        entries.append([])
        return len(labels) - 1

    def move(entry, group: int) -> None:
        kind, k = entry
        if kind == "n":
            node_group[k] = group
        else:
            parents[k] = group

    def regroup(group: int, items: list) -> list:
        if len(items) <= max_children:
            return items
        for kind, keyfn, fmt in (("series", series_key, "{}_*"), ("stem", None, "{}*")):
            if keyfn is None:  # the shortest run of first words that splits the level
                keyfn = next((lambda lb, k=k: stem_key(lb, k) for k in range(1, MAX_STEM_WORDS + 1)
                              if 1 < len({stem_key(label_of(e), k) for e in items}) < len(items)), None)
                if keyfn is None:
                    continue
            buckets: dict[str, list] = {}
            for e in items:
                fixed = e[0] == "g" and kinds[e[1]] == "cluster"
                buckets.setdefault(f"\0{e[1]}" if fixed else keyfn(label_of(e)), []).append(e)
            if len(buckets) == len(items) or len(buckets) == 1:
                continue  # no gain: every key differs, or one key holds everything
            out = []
            for key, members in buckets.items():
                if len(members) == 1:
                    out.append(members[0])
                    continue
                sg = new_group(fmt.format(key), kind, group)
                for m in members:
                    move(m, sg)
                entries[sg] = regroup(sg, members)
                out.append(("g", sg))
            items = out
            if len(items) <= max_children:
                return items
        # the cluster view's outer groups stay whole; the rest is cut into consecutive runs
        out = [e for e in items if e[0] == "g" and kinds[e[1]] == "cluster"]
        items = [e for e in items if not (e[0] == "g" and kinds[e[1]] == "cluster")]
        if not items or len(items) + len(out) <= max_children:
            return out + items
        size = math.ceil(len(items) / max(1, max_children - len(out)))
        for s in range(0, len(items), size):
            chunk = items[s:s + size]
            if len(chunk) == 1:
                out.append(chunk[0])
                continue
            sg = new_group(f"{label_of(chunk[0])} … {label_of(chunk[-1])}", "range", group)
            for m in chunk:
                move(m, sg)
            entries[sg] = regroup(sg, chunk)
            out.append(("g", sg))
        return out

    for g in range(len(labels)):  # groups made by regroup are appended and handled there
        if len(entries[g]) > max_children:
            entries[g] = regroup(g, entries[g])
    # renumber in pre-order, children in entry order
    order, stack = [], [0]
    while stack:
        g = stack.pop()
        order.append(g)
        stack.extend(k for kind, k in reversed(entries[g]) if kind == "g")
    new = {old: i for i, old in enumerate(order)}
    return Hierarchy(labels=[labels[g] for g in order],
                     parents=[-1 if g == 0 else new[parents[g]] for g in order],
                     kinds=[kinds[g] for g in order],
                     node_group=[new[g] for g in node_group])


def scope_paths(names) -> tuple[list[tuple[str, ...]], list[str]]:
    """(scope path, leaf label) of each TF node name.

    >>> scope_paths(["a/b/c", "d"])
    ([('a', 'b'), ()], ['c', 'd'])
    """
    paths, leaves = [], []
    for n in names:
        *scope, leaf = n.split("/")
        paths.append(tuple(scope))
        leaves.append(leaf)
    return paths, leaves


def scope_tree(names, max_children: int = MAX_CHILDREN) -> Hierarchy:
    """Nodes grouped by TF name scope."""
    paths, leaves = scope_paths(names)
    return build(paths, leaves, max_children)


UNCLUSTERED = "(not in a cluster)"


def cluster_tree(names, clusters, max_children: int = MAX_CHILDREN) -> Hierarchy:
    """Each XLA cluster an outer group (``clusters[i]``: node ``i``'s cluster or None), its
    members under their scopes inside it; the other nodes under one group, :data:`UNCLUSTERED`."""
    paths, leaves = scope_paths(names)
    outer = [(c if c else UNCLUSTERED,) + p for c, p in zip(clusters, paths)]
    return build(outer, leaves, max_children, cluster_groups={c for c in clusters if c} | {UNCLUSTERED})
