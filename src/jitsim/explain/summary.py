"""What every reader of a :class:`~jitsim.explain.clustering.Clustering` says about a group of
nodes: its op histogram, and that histogram as one line (explanations, the report, the
notebook table and the pictures share them)."""

from __future__ import annotations

from collections import Counter


def op_counts(c, members) -> list[tuple[str, int]]:
    """``(op, count)`` over ``members``, most frequent first, then by op name."""
    hist = Counter(c.nodes[m].op for m in members)
    return sorted(hist.items(), key=lambda kv: (-kv[1], kv[0]))


def op_summary(c, members: list[str], limit: int = 6) -> str:
    """``"MatMul×2, Add, … 3 more ops"``: the ``limit`` most frequent ops of ``members``."""
    items = op_counts(c, members)
    s = ", ".join(f"{o}×{k}" if k > 1 else o for o, k in items[:limit])
    return s + (f", … {len(items) - limit} more ops" if len(items) > limit else "")


# pastel fills for clusters (cycled), and a darker border of the same hue: the one palette of
# render, the report and the Model Explorer graph
_CLUSTER_COLOURS = [
    ("#e3f2fd", "#1e88e5"), ("#e8f5e9", "#43a047"), ("#fff8e1", "#ffb300"), ("#f3e5f5", "#8e24aa"),
    ("#e0f7fa", "#00acc1"), ("#fbe9e7", "#f4511e"), ("#f1f8e9", "#7cb342"), ("#ede7f6", "#5e35b1"),
    ("#fffde7", "#fdd835"), ("#e8eaf6", "#3949ab"), ("#fce4ec", "#d81b60"), ("#efebe9", "#6d4c41"),
]


def cluster_colours(c) -> dict[str, tuple[str, str]]:
    """Cluster name -> (fill, border), stable in the clusters' order."""
    return {name: _CLUSTER_COLOURS[i % len(_CLUSTER_COLOURS)] for i, name in enumerate(c.clusters)}
