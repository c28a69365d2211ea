"""The C forms of GraphCycles' edge contraction and bulk construction against the Python
reference (issue 25).

``_fastcycles.contract_edge`` does :meth:`GraphCycles._contract_edge_python`'s steps in place on
the same lists and OrderedSets; :meth:`GraphCycles.with_edges` builds the sets inside the C
insertion. Both must leave exactly the Python state: every rank, every sequence order (the
clustering walks them, so the order decides cluster names), the index dicts, the free list and
each answer. The graphs are random DAGs (edges oriented along a hidden order, inserted in random
order so ranks get re-dealt), then random contraction attempts, some refused (another path),
some re-attaching many neighbours with wide rank windows.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import need_c_extension

from jitsim.analyses import graphcycles
from jitsim.analyses.graphcycles import GraphCycles, OrderedSet


def _state(g: GraphCycles):
    return (g.ranks(), [g.successors_copy(v) for v in range(g.num_nodes)],
            [g.predecessors_copy(v) for v in range(g.num_nodes)], g.free_nodes())


def _dag_edges(rng: random.Random, n: int, m: int, span: int):
    order = list(range(n))
    rng.shuffle(order)
    edges = []
    for _ in range(m):
        i = rng.randrange(1, n)
        j = rng.randrange(max(0, i - span), i)
        edges.append((order[j], order[i]))
    rng.shuffle(edges)
    return edges


def _contract_both(n, edges, picks):
    """Run the same contraction attempts with the C form and the Python form; return both
    answer lists and final states."""
    out = []
    for impl in ("c", "python"):
        g = GraphCycles(n)
        for x, y in edges:
            g.insert_edge(x, y)
        answers = []
        contract = g.contract_edge if impl == "c" else g._contract_edge_python
        for p in picks:
            free = set(g.free_nodes())
            live = [v for v in range(n) if v not in free and g.successors(v)]
            if not live:
                break
            a = live[p % len(live)]
            succ = g.successors(a)
            b = succ[(p // 7) % len(succ)]
            answers.append(contract(a, b))
        assert g.check_invariants()
        assert all(o._idx == {v: i for i, v in enumerate(o._seq)} for o in g._out + g._in)
        out.append((answers, _state(g)))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(2, 40), st.integers(0, 10**9), st.integers(0, 160), st.integers(1, 40),
       st.lists(st.integers(0, 10**6), max_size=60))
def test_c_contract_edge_is_python_contract_edge(n, seed, m, span, picks):
    need_c_extension("jitsim.analyses._fastcycles")
    edges = _dag_edges(random.Random(seed), n, m, span)
    c, py = _contract_both(n, edges, picks)
    assert c == py


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_c_contract_edge_wide_windows(seed):
    # 2,000 nodes with long-range edges, contracted until few edges are left: the re-attached
    # edges re-deal rank windows of hundreds of nodes (qsort path, many refusals on the way).
    need_c_extension("jitsim.analyses._fastcycles")
    rng = random.Random(seed)
    n = 2000
    edges = _dag_edges(rng, n, 6000, 400)
    picks = [rng.randrange(10**6) for _ in range(1500)]
    c, py = _contract_both(n, edges, picks)
    assert sum(a is None for a in c[0]) > 0 and sum(a is not None for a in c[0]) > 0
    assert c == py


def test_c_contract_edge_requires_the_edge():
    need_c_extension("jitsim.analyses._fastcycles")
    g = GraphCycles(3)
    g.insert_edge(0, 1)
    with pytest.raises(ValueError):
        g.contract_edge(1, 0)
    with pytest.raises(ValueError):
        g._contract_edge_python(1, 0)


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 30), st.integers(0, 10**9), st.integers(0, 120), st.booleans())
def test_with_edges_is_new_graph_then_insert_edges(n, seed, m, close_cycle):
    # with_edges' C path makes the OrderedSets inside the C insertion; the state and the
    # stopping edge must be those of GraphCycles(n) + insert_edges (the Python one too).
    rng = random.Random(seed)
    edges = _dag_edges(rng, n, m, n) if n > 1 else []
    if close_cycle and edges:
        x, y = edges[rng.randrange(len(edges))]
        edges.insert(rng.randrange(len(edges) + 1), (y, x))
    ref = GraphCycles(n)
    saved = graphcycles._c
    graphcycles._c = None
    try:
        ref_stop = ref.insert_edges(edges)
    finally:
        graphcycles._c = saved
    g, stop = GraphCycles.with_edges(n, edges)
    assert stop == ref_stop
    assert _state(g) == _state(ref)
    assert all(type(o) is OrderedSet for o in g._out + g._in)
    assert g.check_invariants()
