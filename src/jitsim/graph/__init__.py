"""jitsim's graph model and its readers/writers.

>>> from jitsim.graph import Graph
>>> g = Graph.from_nodes([("a", "Const", []), ("b", "Neg", ["a"])])
>>> len(g), g["b"].op
(2, 'Neg')
"""

from jitsim.graph.io import load, read_graphdef, save
from jitsim.graph.model import CONTROL, Edge, Graph, Node, format_input, parse_input

__all__ = ["CONTROL", "Edge", "Graph", "Node", "format_input", "load", "parse_input", "read_graphdef", "save"]
