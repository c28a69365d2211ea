"""Counts in words, one rule for every message: ``1 cluster``, ``2 clusters``.

>>> count(1, "cluster"), count(3, "cluster"), count(1, "graph", "graphs")
('1 cluster', '3 clusters', '1 graph')
"""


def count(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, in the plural (``plural``, else ``noun + "s"``) unless ``n`` is 1."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"
