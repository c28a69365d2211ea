"""The clone batch of ``GraphCycles.insert_edges`` (``graphcycles._CloneBatch``, issue 25) gives
exactly what TF's edge-by-edge insertion gives.

Building the cycle graph inserts, after the graph's own edges, the cloned constants' edges
(``_SOURCE -> clone``, ``clone -> consumer``); edge by edge, each clone re-ranks everything its
consumer reaches (quadratic). The batch computes the same ranks from the order of the consumers'
descendants over the slots they hold. The reference is ``insert_edge`` called edge by edge (the
Pearce-Kelly step as TF's graphcycles.cc takes it, kept in the module for this), compared on
the whole state the clustering reads afterwards: every rank and every neighbour sequence.
"""

from __future__ import annotations

import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jitsim.analyses import graphcycles
from jitsim.analyses.graphcycles import GraphCycles, clone_tail


def _state(g: GraphCycles):
    return g.ranks(), [g.successors_copy(v) for v in range(g.num_nodes)], \
        [g.predecessors_copy(v) for v in range(g.num_nodes)]


def _one_by_one(n: int, edges):
    g = GraphCycles(n)
    stop = next((i for i, (x, y) in enumerate(edges) if not g.insert_edge(x, y)), None)
    return stop, _state(g)


@pytest.fixture
def batch_always(monkeypatch):
    """The batch on graphs of any size, with a budget it never runs out of and never judged
    dearer than the edge-by-edge insertion (the tests of giving up set their own), and
    records (start, edges done, edges) of each batch."""
    monkeypatch.setattr(GraphCycles, "CLONE_BATCH_MIN_NODES", 0)
    monkeypatch.setattr(GraphCycles, "CLONE_BATCH_MIN_EDGES", 1)
    monkeypatch.setattr(GraphCycles, "CLONE_BATCH_WORK_PER_NODE", 10**9)
    monkeypatch.setattr(GraphCycles, "CLONE_BATCH_COST_C", 0)
    monkeypatch.setattr(GraphCycles, "CLONE_BATCH_COST_PYTHON", 0)
    monkeypatch.setattr(GraphCycles, "CLONE_BATCH_COST_C_BATCH", 0)
    calls = []
    run = graphcycles._CloneBatch.run

    def counted(self):
        done = run(self)
        calls.append((self.start, done, len(self.edges)))
        return done

    monkeypatch.setattr(graphcycles._CloneBatch, "run", counted)
    return calls


@st.composite
def _graphs_with_clones(draw):
    """A DAG (hidden topological order ``order``, node 0 a source feeding some nodes like
    TF's ``_SOURCE``) whose edges arrive in any order, then clones: fresh nodes, each with an
    edge from node 0 and one into the body (in either order, sometimes two in-edges, sometimes
    none), as clone_constants_for_better_clustering adds them."""
    n = draw(st.integers(2, 24))
    order = [0] + draw(st.permutations(list(range(1, n))))
    at = {v: i for i, v in enumerate(order)}
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=70))
    edges = sorted({(a, b) if at[a] < at[b] else (b, a) for a, b in pairs if a != b},
                   key=lambda e: draw(st.integers(0, 1000)))
    k = draw(st.integers(1, 14))
    extra = draw(st.integers(0, 3))  # nodes after the clones (frame nodes, say): not clones
    shuffle_tail = draw(st.booleans())
    tail = []
    for j in range(k):
        c = n + j
        y = draw(st.integers(1, n - 1))
        ins = [(0, c)] if draw(st.integers(0, 3)) else []
        if draw(st.integers(0, 20)) == 0:  # a second input, from anywhere (maybe the body)
            ins.append((draw(st.integers(0, n - 1)), c))
        out = [(c, y)]
        tail += (ins + out) if draw(st.booleans()) else (out + ins)
    if shuffle_tail:
        tail = [tail[i] for i in draw(st.permutations(list(range(len(tail)))))]
    cyc = []
    if edges and draw(st.integers(0, 4)) == 0:  # an edge closing a cycle, in the tail or before
        a, b = edges[draw(st.integers(0, len(edges) - 1))]
        cyc = [(b, a)]
    where = draw(st.integers(0, 2))
    seq = (edges + cyc + tail) if where == 0 else (edges + tail + cyc) if where == 1 else (edges + tail)
    return n + k + extra, seq


@settings(max_examples=int(os.environ.get("JITSIM_GC_EXAMPLES", "600")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(_graphs_with_clones(), st.sampled_from(["python", "c"]))
def test_batch_is_edge_by_edge(batch_always, monkeypatch, case, impl):
    # Whatever the batch does (all of the tail, part of it and then edge by edge, or nothing),
    # ranks, sequences and the refused edge are the edge-by-edge ones.
    n, edges = case
    if impl == "python":
        monkeypatch.setattr(graphcycles, "_c", None)
    want = _one_by_one(n, edges)
    g = GraphCycles(n)
    got = g.insert_edges(edges)
    assert (got, _state(g)) == want
    assert g.check_invariants()



def _layered(rng, layers: int, width: int):
    """Node 0 feeding the first layer, each later node fed by 2 random nodes of the layer
    before: ``(node count, node(layer, i) -> id, shuffled edges)``."""
    n = 1 + layers * width
    node = lambda l, i: 1 + l * width + i  # noqa: E731
    edges = [(0, node(0, i)) for i in range(width)]
    for l in range(1, layers):
        for i in range(width):
            for j in rng.sample(range(width), 2):
                edges.append((node(l - 1, j), node(l, i)))
    rng.shuffle(edges)
    return n, node, edges

def test_batch_runs_and_finishes_on_clone_shaped_tails(batch_always):
    # The property test above must not pass by always falling back: on a graph whose tail is
    # exactly TF's clone shape the batch takes every edge. A layered graph (each layer's nodes
    # feed the next one's), clones wired into every layer from node 0.
    rng = random.Random(5)
    layers, width = 30, 6
    n, node, edges = _layered(rng, layers, width)
    clones = []
    for j in range(120):
        c = n + j
        clones += [(0, c), (c, node(rng.randrange(layers), rng.randrange(width)))]
    edges += clones
    want = _one_by_one(n + 120, edges)
    g = GraphCycles(n + 120)
    assert g.insert_edges(edges) is None
    assert (None, _state(g)) == want
    assert batch_always == [(len(edges) - len(clones), len(edges), len(edges))]


@pytest.mark.parametrize("limit", ["budget", "dearer"])
def test_giving_up_finishes_edge_by_edge(batch_always, monkeypatch, limit):
    # With no work allowed (budget), or judged dearer than re-ranking (the batch's work
    # counted 10^6 times a re-ranked node), the batch stops at its first clone and hands the
    # rest to the edge-by-edge insertion: still the same state.
    if limit == "budget":
        monkeypatch.setattr(GraphCycles, "CLONE_BATCH_WORK_PER_NODE", 0)
    else:
        monkeypatch.setattr(GraphCycles, "CLONE_BATCH_COST_C", 10**6)
        monkeypatch.setattr(GraphCycles, "CLONE_BATCH_COST_PYTHON", 10**6)
        monkeypatch.setattr(GraphCycles, "CLONE_BATCH_COST_C_BATCH", 10**6)
    n = 40
    edges = [(i, i + 1) for i in range(1, n - 1)] + [(0, 1)]
    tail = []
    for j in range(10):
        tail += [(0, n + j), (n + j, 1 + 3 * j)]
    edges += tail
    want = _one_by_one(n + 10, edges)
    g = GraphCycles(n + 10)
    g.insert_edges(edges)
    assert _state(g) == want[1]
    start, done, total = batch_always[0]
    assert start < total and done < total


def test_clone_input_inside_the_body_is_not_batched(batch_always):
    # A "clone" with a second input from a node its consumers reach is not TF's shape (the
    # descendants could change): the batch declines before touching anything.
    edges = [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    edges += [(0, 6), (6, 2), (4, 7), (7, 1)]
    want = _one_by_one(8, edges)
    g = GraphCycles(8)
    g.insert_edges(edges)
    assert _state(g) == want[1]
    assert batch_always and all(done == start for start, done, _ in batch_always)


def test_clone_tail_shape():
    # The tail is found from the end: (0, c) / (c, y) pairs; a node with more than one out-edge,
    # or one touched before the tail, ends it.
    edges = [(0, 1), (1, 2), (0, 3), (3, 2), (0, 4), (4, 1)]
    assert clone_tail(edges) == (2, {3, 4})
    assert clone_tail([(0, 1), (1, 2)]) == (0, {1})
    assert clone_tail([(1, 2), (1, 3)]) is None  # node 1 has two out-edges
    assert clone_tail([(2, 2)]) is None
    # node 5 has an edge before the tail (2 -> 5): not a clone, and the tail starts after its
    # last edge, leaving clone 6
    assert clone_tail([(2, 5), (0, 1), (5, 1), (0, 6), (6, 1)]) == (3, {6})


@pytest.mark.slow
def test_every_corpus_graph_same_with_the_batch(corpus, monkeypatch):
    # Every graph of the fixtures corpus clustered twice: the batch forced onto every
    # clone-shaped tail (no size threshold, never giving up) and the batch off. The cycle graph
    # right after the insertion (ranks, sequences) and the whole result (the marked graph's
    # text, TF's names and the explanations' records) must be the same.
    from conftest import corpus_graphs

    from jitsim.graph.io import read_graphdef, to_text
    from jitsim.graph.model import Graph
    from jitsim.passes.pipeline import cluster_graph

    from jitsim.errors import JitsimError
    from jitsim.options import options_for

    options = options_for("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
    states = []
    build = GraphCycles.with_edges.__func__  # the pass builds its cycle graph with this

    def recorded(cls, num_nodes, edges):
        g, out = build(cls, num_nodes, edges)
        states.append((out, _state(g)))
        return g, out

    monkeypatch.setattr(GraphCycles, "with_edges", classmethod(recorded))
    took = []
    run_batch = graphcycles._CloneBatch.run

    def counted(self):
        done = run_batch(self)
        took.append(done - self.start)
        return done

    monkeypatch.setattr(graphcycles._CloneBatch, "run", counted)
    for run, g, d in corpus_graphs(corpus):
        stage = next((s for s in ("before_clone_constants_for_better_clustering", "before_mark_for_compilation")
                      if s in g["files"]), None)
        if stage is None:
            continue
        path = d / "dumps" / g["files"][stage]
        results = []
        for forced in (True, False):
            monkeypatch.setattr(GraphCycles, "CLONE_BATCH_MIN_NODES", 0 if forced else 10**12)
            monkeypatch.setattr(GraphCycles, "CLONE_BATCH_MIN_EDGES", 1)
            monkeypatch.setattr(GraphCycles, "CLONE_BATCH_COST_C", 0)
            monkeypatch.setattr(GraphCycles, "CLONE_BATCH_COST_PYTHON", 0)
            monkeypatch.setattr(GraphCycles, "CLONE_BATCH_COST_C_BATCH", 0)
            monkeypatch.setattr(GraphCycles, "CLONE_BATCH_WORK_PER_NODE", 10**9)
            states.clear()
            try:
                cr = cluster_graph(Graph(read_graphdef(path), source=str(path), validate=False), options)
                m = cr.mark
                results.append((to_text(cr.to_graphdef()), m.clusters, repr(m.decisions), repr(m.refusals),
                                m.candidates, repr(m.graph_decision), m.groups, list(states)))
            except JitsimError as e:  # the same refusal both ways
                results.append((type(e).__name__, str(e), list(states)))
        assert results[0] == results[1], (run, g["id"])
    assert sum(took) > 1000  # the batch did take the corpus's clones (not only fallbacks)


def test_c_batch_is_python_batch(batch_always, monkeypatch):
    # The C form of the batch (_fastcycles.clone_batch) against the Python one on a graph of a
    # few thousand nodes with a few hundred clones (windows far wider than the generated cases):
    # the same state, which is the edge-by-edge one.
    from conftest import need_c_extension

    need_c_extension("jitsim.analyses._fastcycles")
    rng = random.Random(11)
    layers, width = 200, 12
    n, node, edges = _layered(rng, layers, width)
    k = 400
    for j in range(k):
        edges += [(0, n + j), (n + j, node(rng.randrange(layers), rng.randrange(width)))]
    states = []
    for impl in ("c", "python"):
        if impl == "python":
            monkeypatch.setattr(graphcycles, "_c", None)
        g = GraphCycles(n + k)
        assert g.insert_edges(edges) is None
        states.append(_state(g))
    assert states[0] == states[1] == _one_by_one(n + k, edges)[1]
    assert [done for _, done, _ in batch_always] == [len(edges), len(edges)]
