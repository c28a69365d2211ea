"""jitsim's graph model and its readers/writers.

>>> from jitsim.graph import Graph
>>> g = Graph.from_nodes([("a", "Const", []), ("b", "Neg", ["a"])])
>>> len(g), g["b"].op
(2, 'Neg')

The names below are resolved on first use (like :mod:`jitsim`'s), so that importing one
submodule does not load the readers, the model and networkx.
"""

from __future__ import annotations

_LAZY = {
    "load": "jitsim.graph.io",
    "read_graphdef": "jitsim.graph.io",
    "save": "jitsim.graph.io",
    "CONTROL": "jitsim.graph.model",
    "Edge": "jitsim.graph.model",
    "Graph": "jitsim.graph.model",
    "Node": "jitsim.graph.model",
    "format_input": "jitsim.graph.model",
    "parse_input": "jitsim.graph.model",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'jitsim.graph' has no attribute {name!r}")
