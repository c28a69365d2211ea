"""Writing a graph rebuilds a NodeDef's ``input`` only where it may have changed (issue 25).

:meth:`TfGraph.serialized_pieces` writes each node's inputs as TF writes them from its in-edges
(data inputs by slot, ``a`` for output 0, control inputs sorted by name). A node whose in-edges
are the ones read from its NodeDef, and whose NodeDef already lists them that way, is written as
it was read, without rebuilding the list (:meth:`TfGraph.rewired` names the others:
:attr:`Graph.unwritten_inputs`, and every node an edge was added to or removed from since). These
tests check the sets on hand-made cases, and that the output is the same as with every node
rebuilt (``_as_read = None``) on generated graphs under random edits and on the fixtures corpus.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphs import const, graph_of, op

from jitsim.graph.model import CONTROL, Graph
from jitsim.graph.tfgraph import TfGraph
from jitsim.registry import protos


def _graph(spec) -> Graph:
    return Graph.from_nodes(spec)


def _written_both_ways(tg: TfGraph, nodes_per_piece: int = 50_000) -> tuple[bytes, bytes]:
    fast = b"".join(tg.serialized_pieces(nodes_per_piece))
    saved = tg._as_read
    tg._as_read = None  # every node's inputs rebuilt from its edges and compared, node by node
    try:
        full = b"".join(tg.serialized_pieces(nodes_per_piece))
        assert tg.to_graphdef().SerializeToString(deterministic=True) == full
    finally:
        tg._as_read = saved
    return fast, full


# -- which NodeDefs are not written as TF writes them -------------------------------------


@pytest.mark.parametrize("inputs, unwritten", [
    (["a", "b:1", "^c", "^d"], False),  # TF's own form
    (["a", "^d", "^c"], True),  # control inputs out of name order (TF sorts them)
    (["a:0"], True),  # TF writes output 0 as the bare name
    (["b:01"], True),  # read as output 1, written b:1
    (["^c", "a"], True),  # a data input after a control input
    (["^c", "^c"], False),  # a repeated control input: TF writes both edges (sorted is sorted)
    ([], False),
])
def test_unwritten_inputs(inputs, unwritten):
    g = _graph([("a", "Const", []), ("b", "Unique", ["a"]), ("c", "NoOp", []), ("d", "NoOp", []),
                ("x", "IdentityN", inputs)])
    assert ("x" in g.unwritten_inputs) is unwritten
    assert g.unwritten_inputs <= {"x"}


def test_unwritten_inputs_come_back_after_release_edges():
    g = _graph([("a", "Const", []), ("x", "Identity", ["a:0"])])
    g.release_edges()
    assert g.unwritten_inputs == {"x"}


def test_rewired_names_the_changed_nodes():
    # a -> x, b -> y, c -> z (ids 2..7 in file order); z's NodeDef lists "c:0"
    g = _graph([("a", "Const", []), ("b", "Const", []), ("c", "Const", []),
                ("x", "Identity", ["a"]), ("y", "Identity", ["b"]), ("z", "Identity", ["c:0"])])
    tg = TfGraph.from_graph(g)
    ids = tg.by_name
    assert tg.rewired() == {ids["z"]}  # fixup's _SOURCE/_SINK control edges are not written
    e = next(iter(tg.nodes[ids["y"]].in_edges.values()))
    tg.remove_edge(e)
    tg.add_edge(ids["a"], 0, ids["y"], 0)  # y now reads a
    tg.add_control_edge(ids["c"], ids["x"])
    assert tg.rewired() == {ids["z"], ids["y"], ids["x"]}
    fast, full = _written_both_ways(tg)
    assert fast == full
    assert [list(nd.input) for nd in tg.to_graphdef().node] == [[], [], [], ["a", "^c"], ["a"], ["c"]]


def test_a_graph_not_read_from_nodedefs_is_checked_everywhere():
    tg = TfGraph()
    assert tg.rewired() is None


# -- the same output as rebuilding every node --------------------------------------------


@st.composite
def _edited_graphs(draw):
    """A random DAG whose NodeDefs list inputs in any of the forms TF reads (``a:0``, control
    inputs in any order, repeated), then random edits: edges removed and added, small constants
    cloned (TF's clone pass)."""
    from jitsim.passes.clone_constants import clone_constants_for_better_clustering

    rng = random.Random(draw(st.integers(0, 2**32 - 1)))
    n = draw(st.integers(2, 14))
    spec = []
    for i in range(n):
        data, ctrl = [], []
        for j in rng.sample(range(i), min(i, rng.randint(0, 3))):
            kind = rng.random()
            if kind < 0.5:
                data.append(f"n{j}" if rng.random() < 0.7 else f"n{j}:0")
            else:
                ctrl.append(f"^n{j}")
        rng.shuffle(ctrl)
        if ctrl and rng.random() < 0.2:
            ctrl.append(ctrl[0])  # a repeated control input
        spec.append(op(f"n{i}", "AddN", *(data + ctrl)) if data else const(f"n{i}", inputs=ctrl))
    tg = TfGraph.from_graph(graph_of(spec))
    if draw(st.booleans()):
        clone_constants_for_better_clustering(tg)
    for _ in range(draw(st.integers(0, 4))):
        live = [e for e in tg.edges() if e.src > 1 and e.dst > 1]
        if rng.random() < 0.1:
            victim = rng.randrange(2, tg.num_node_ids)
            if tg.nodes[victim] is not None:
                tg.remove_node(victim)  # (the graph is no longer the GraphDef it was read from)
        elif live and rng.random() < 0.5:
            tg.remove_edge(rng.choice(live))
        else:
            a, b = sorted(rng.sample(range(2, tg.num_node_ids), 2))
            if tg.nodes[a] is not None and tg.nodes[b] is not None:
                tg.add_edge(a, CONTROL, b, CONTROL)
    return tg


@settings(max_examples=300, deadline=None)
@given(_edited_graphs(), st.sampled_from([1, 3, 50_000]))
def test_same_output_as_rebuilding_every_node(tg, nodes_per_piece):
    fast, full = _written_both_ways(tg, nodes_per_piece)
    assert fast == full
    # (pieces of any size join to the same bytes, and hold at most nodes_per_piece nodes each)
    assert fast == b"".join(tg.serialized_pieces())
    assert all(len(protos.GraphDef.FromString(p).node) <= nodes_per_piece for p in tg.serialized_pieces(nodes_per_piece))


def test_records_cut_from_the_graphdef_as_read():
    # the nodes still as read are written from one serialization of the GraphDef they came
    # from; a removed node, or a GraphDef changed since, sends every node down the node-by-node
    # route (checked by the same output above)
    g = _graph([("a", "Const", []), ("b", "Const", []), ("x", "AddN", ["a", "b"]), ("y", "AddN", ["x:0"])])
    tg = TfGraph.from_graph(g)
    end, whole, offsets = tg._records_as_read(tg.rewired())
    assert end == 6 and whole == g.graphdef.SerializeToString(deterministic=True)
    assert [protos.NodeDef.FromString(whole[offsets[i] + 2:offsets[i + 1]]).name for i in range(4)] == list("abxy")
    tg.remove_node(tg.by_name["y"])
    assert tg._records_as_read(tg.rewired()) is None
    tg = TfGraph.from_graph(g)
    g.graphdef.node.add(name="late", op="NoOp")
    assert tg._records_as_read(tg.rewired()) is None


def _corpus_check(corpus, every: int) -> None:
    from conftest import clustering_inputs

    from jitsim.errors import JitsimError
    from jitsim.graph.io import read_graphdef
    from jitsim.options import options_for
    from jitsim.passes.pipeline import cluster_graph

    options = options_for("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
    checked = 0
    for run, g, path in clustering_inputs(corpus, every):
        try:
            cr = cluster_graph(Graph(read_graphdef(path), source=str(path), validate=False), options)
        except JitsimError:
            continue
        if cr.graph.rewired() is None:
            continue
        fast, full = _written_both_ways(cr.graph)
        assert fast == full, (run, g["id"])
        checked += 1
    assert checked > (10 if every > 1 else 100)


def test_sampled_corpus_graphs_written_as_when_every_node_is_rebuilt(corpus):
    _corpus_check(corpus, every=12)


@pytest.mark.slow
def test_every_corpus_graph_written_as_when_every_node_is_rebuilt(corpus):
    _corpus_check(corpus, every=1)


@settings(max_examples=200, deadline=None)
@given(_edited_graphs())
def test_a_second_fixup_adds_the_edges_a_full_one_adds(tg):
    # fixup_source_and_sink_edges looks only at the nodes that can have lost their last in- or
    # out-edge since the last call (issue 25): the same edges, in the same order, as a full pass
    import copy

    a, b = copy.deepcopy(tg), copy.deepcopy(tg)
    b._since_fixup = None  # (every node looked at)
    a.fixup_source_and_sink_edges()
    b.fixup_source_and_sink_edges()
    assert [(e.id, e.src, e.src_output, e.dst, e.dst_input) for e in a.edges()] == \
        [(e.id, e.src, e.src_output, e.dst, e.dst_input) for e in b.edges()]
