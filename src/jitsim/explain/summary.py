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
