"""unsafe_resource_pairs walks the graph in a cheap topological order where that gives TF's
answer (issue 25).

TF walks the nodes in the reverse post order of a by-name DFS from ``_SOURCE`` without back
edges. Each node's set of reaching resource ops is the union over its predecessors, so any
topological order of the same nodes gives the same pairs; ``_topological_order`` (Kahn's order)
is used when the graph less its ``NextIteration`` out-edges is acyclic and every node is
reachable from ``_SOURCE``, and otherwise returns None so that TF's walk is used. These tests
compare the pairs both ways on every committed TF dump and on generated graphs, and check the
fallback on graphs where the orders may not agree.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import before_mark_tfgraphs
from graphs import graph_of

from jitsim.analyses import resource_safety
from jitsim.analyses.resource_safety import _topological_order, unsafe_resource_pairs
from jitsim.graph.tfgraph import TfGraph


def _pairs_both_ways(tg: TfGraph, monkeypatch):
    fns = {f.signature.name for f in tg.library.function}
    fast = unsafe_resource_pairs(tg, fns)
    with monkeypatch.context() as m:
        m.setattr(resource_safety, "_topological_order", lambda g: None)  # TF's walk
        tf_walk = unsafe_resource_pairs(tg, fns)
    return fast, tf_walk


def test_same_pairs_on_every_committed_dump(corpus, monkeypatch):
    used = with_pairs = 0
    for run, f, tg in before_mark_tfgraphs(corpus):
        fast, tf_walk = _pairs_both_ways(tg, monkeypatch)
        assert fast == tf_walk, (run, f)
        used += _topological_order(tg) is not None
        with_pairs += bool(fast)
    # the cheap order is the one taken on TF's graphs (loops included), and pairs were compared
    assert used > 100 and with_pairs > 10


def _random_graph(rng: random.Random, n: int, loop: bool, cycle: bool) -> TfGraph:
    """Resource ops (reads, writes, modifies, function calls) and plain ops over a random DAG
    in node order; ``loop``: a NextIteration back edge into a Merge; ``cycle``: an edge that
    closes a cycle without one (a graph TF would refuse, here to exercise the fallback)."""
    kinds = ["ReadVariableOp", "AssignVariableOp", "AssignAddVariableOp", "Identity", "AddV2", "NoOp"]
    spec = []
    for i in range(n):
        ins = sorted({f"n{rng.randrange(i)}" for _ in range(rng.randrange(3))}) if i else []
        spec.append((f"n{i}", rng.choice(kinds), ins))
    if loop and n > 3:
        j = rng.randrange(1, n - 1)
        spec.append(("merge", "Merge", [f"n{j}", "next"]))
        spec.append(("next", "NextIteration", ["merge"]))
        spec.append(("after", "AssignVariableOp", ["merge"]))
    if cycle and n > 3:
        a = rng.randrange(n - 1)
        spec[a] = (spec[a][0], spec[a][1], spec[a][2] + [f"n{n - 1}"])
    return TfGraph.from_graph(graph_of(spec))  # (not validated: the cycle stays)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 40), st.integers(0, 10**9), st.booleans(), st.booleans())
def test_same_pairs_on_generated_graphs(n, seed, loop, cycle):
    tg = _random_graph(random.Random(seed), n, loop, cycle)
    with pytest.MonkeyPatch.context() as mp:
        fast, tf_walk = _pairs_both_ways(tg, mp)
    assert fast == tf_walk


def test_fallback_where_the_orders_may_differ():
    # a cycle that no NextIteration breaks: no topological order, TF's walk is used
    g = TfGraph.from_graph(graph_of([("a", "AssignVariableOp", ["c"]), ("b", "ReadVariableOp", ["a"]),
                                             ("c", "Identity", ["b"])]))
    assert _topological_order(g) is None
    # a node whose only input is a NextIteration's: the DFS from _SOURCE never reaches it
    g = TfGraph.from_graph(graph_of([("x", "AssignVariableOp", []), ("m", "Merge", ["x", "nx"]),
                                             ("nx", "NextIteration", ["m"]), ("r", "ReadVariableOp", ["nx"])]))
    assert _topological_order(g) is None
    # a plain DAG: every node, each after its inputs
    g = TfGraph.from_graph(graph_of([("w", "AssignVariableOp", []), ("r", "ReadVariableOp", ["w"])]))
    order = [v.id for v in _topological_order(g)]
    assert sorted(order) == [v.id for v in g.nodes if v is not None]
    assert order.index(g.by_name["w"]) < order.index(g.by_name["r"])
    assert unsafe_resource_pairs(g, set()) == {(g.by_name["w"], g.by_name["r"])}
