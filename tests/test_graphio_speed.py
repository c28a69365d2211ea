"""The issue-25 fast paths of the graph models and the analyses around the mark pass, each
checked against the slower reference it replaces (the reference is written out here, as the
code before the change computed it), on real dumps and on small hand-built graphs."""

from __future__ import annotations

from pathlib import Path

import pytest

from jitsim.analyses.deadness import AND, PredicateFactory, deadness_analysis
from jitsim.graph.model import CONTROL, Edge, Graph, parse_input
from jitsim.opsets import NEXT_ITERATION_OPS
from jitsim.graph.tfgraph import TfGraph, dfs, not_back_edge, post_order, reverse_post_order
from jitsim.passes.clone_constants import clone_constants_for_better_clustering, uncloned
from jitsim.registry import protos

ROOT = Path(__file__).resolve().parents[1]
# loops and conditionals (tests/data/deadness), and TF's dumps after its constant cloning
FIXTURES = (sorted((ROOT / "tests" / "data" / "deadness").glob("*.pbtxt"))[:8]
            + sorted((ROOT / "fixtures" / "versions").glob("*/tf2.21/dumps/mark_for_compilation.pbtxt")))


def _load(path: Path) -> Graph:
    from jitsim.graph.io import read_graphdef

    return Graph(read_graphdef(path), source=str(path), validate=False)


def _with_clones() -> Graph:
    """A before_mark-like graph: constant ``c`` cloned twice (``c/clone_0`` feeds ``a``,
    ``c/clone_1`` feeds ``b`` twice over a data and a control input), and ``d`` with a repeated
    control input; folding the clones back must give ``c`` to ``a`` and ``b`` and drop the
    control inputs that repeat (``^c`` after ``c/clone_1`` folded, ``^x`` twice)."""
    def const(name):
        value = protos.AttrValue()
        value.tensor.dtype = 1
        value.tensor.float_val.append(1.0)
        return (name, "Const", [], {"dtype": protos.AttrValue(type=1), "value": value})
    return Graph.from_nodes([
        ("x", "Placeholder", []), const("c"), const("c/clone_0"), const("c/clone_1"),
        ("a", "AddV2", ["x", "c/clone_0"]),
        ("b", "AddV2", ["c/clone_1", "x", "^c", "^c/clone_1"]),
        ("d", "Identity", ["b", "^x", "^x"]),
    ])


def _with_clones_last() -> Graph:
    """:func:`_with_clones` with the clones after every other node, where TF appends them (the
    nodes to rewrite are then found from the edges up the file)."""
    g = _with_clones()
    order = [n for n in g.nodes if "/clone_" not in n] + [n for n in g.nodes if "/clone_" in n]
    gd = protos.GraphDef()
    for name in order:
        gd.node.add().CopyFrom(g.nodes[name].nodedef)
    return Graph(gd)


def _reference_in_edges(graph: Graph) -> dict[str, list[tuple]]:
    """The edges parsed from the NodeDefs, one at a time (what Graph.__init__ always did)."""
    out = {}
    for nd in graph.graphdef.node:
        slot, lst = 0, []
        for ref in nd.input:
            src, o = parse_input(ref)
            if o == CONTROL:
                lst.append((src, nd.name, CONTROL, CONTROL))
            else:
                lst.append((src, nd.name, o, slot))
                slot += 1
        out[nd.name] = lst
    return out


def test_edge_is_an_immutable_value():
    e = Edge("a", "b", 0, 1)
    assert (e.src, e.dst, e.src_output, e.dst_input) == ("a", "b", 0, 1)
    assert not e.is_control and Edge("a", "b", CONTROL, CONTROL).is_control
    assert e == Edge("a", "b", 0, 1) and hash(e) == hash(Edge("a", "b", 0, 1)) and e != Edge("a", "b", 0, 2)
    assert repr(e) == "Edge(src='a', dst='b', src_output=0, dst_input=1)"
    with pytest.raises(AttributeError):
        e.src = "z"


def test_uncloned_derives_the_model_a_fresh_parse_would_build():
    g = _with_clones()
    u, removed = uncloned(g)
    assert removed == ["c/clone_0", "c/clone_1"]
    fresh = Graph(u.graphdef, validate=False)
    assert list(u.nodes) == list(fresh.nodes) == ["x", "c", "a", "b", "d"]
    assert [n.index for n in u.nodes.values()] == [0, 1, 2, 3, 4]
    assert u._in == fresh._in == {k: [Edge(*t) for t in v] for k, v in _reference_in_edges(u).items()}
    assert list(u.graphdef.node[3].input) == ["c", "x", "^c"]  # the repeated ^c dropped
    assert list(u.graphdef.node[4].input) == ["b", "^x"]  # a repeat without clones dropped too
    assert list(g.graphdef.node[5].input) == ["c/clone_1", "x", "^c", "^c/clone_1"]  # the input is untouched


def _model(g: Graph) -> tuple:
    nodes = [(name, n.index, n.nodedef.SerializeToString(deterministic=True)) for name, n in g.nodes.items()]
    return g.graphdef.SerializeToString(deterministic=True), nodes, g._in, g.unwritten_inputs


_CLONED = [ROOT / "fixtures" / "versions" / "fft64" / "tf2.21" / "dumps" / "mark_for_compilation_1.pbtxt",
           ROOT / "tests" / "data" / "deadness" / "two_whiles.pbtxt", ROOT / "tests" / "data" / "profile" /
           "mark_for_compilation.pbtxt"]


@pytest.mark.parametrize("make", [_with_clones, _with_clones_last] + [lambda p=p: _load(p) for p in _CLONED])
def test_uncloned_in_place_is_the_copy(make):
    # the CLI's route (cluster_graph(own=True)): the graph itself becomes the uncloned one
    copy, removed = uncloned(make())
    assert removed  # (TF's mark dumps hold its clones)
    g = make()
    for released in (False, True):
        if released:  # (its edge index rebuilt from the NodeDefs before they change)
            g = make()
            g.release_edges()
        same, removed_too = uncloned(g, in_place=True)
        assert same is g and removed_too == removed
        assert _model(same) == _model(copy)
        fresh = Graph(same.graphdef, validate=False)
        assert list(same.nodes) == list(fresh.nodes) and same._in == fresh._in
        # the edges up the file it keeps are those a fresh read notes
        assert same._upward is None or sorted(same._upward) == sorted(fresh._upward)
    # the nodes to rewrite found from the upward edges, or by reading every node: the same
    g = make()
    g._upward = None
    assert _model(uncloned(g)[0]) == _model(copy)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem if "deadness" in str(p) else p.parts[-4])
def test_uncloned_and_release_edges_on_dumps(path):
    g = _load(path)
    u, _ = uncloned(g)
    fresh = Graph(u.graphdef, validate=False)
    assert list(u.nodes) == list(fresh.nodes) and u._in == fresh._in
    before = {n: g.in_edges(n) for n in g.nodes}
    g.release_edges()
    assert {n: g.in_edges(n) for n in g.nodes} == before  # rebuilt from the NodeDefs


def _reference_from_graph(graph: Graph) -> list[tuple]:
    """TfGraph.from_graph's edges as it made them from the NodeDefs' input strings."""
    ids = {n: i + 2 for i, n in enumerate(graph.nodes)}
    ops = {n: node.op for n, node in graph.nodes.items()}
    edges, back = [(0, CONTROL, 1, CONTROL)], []
    for name, node in graph.nodes.items():
        slot = 0
        for ref in node.nodedef.input:
            src, out = parse_input(ref)
            if out == CONTROL:
                edges.append((ids[src], CONTROL, ids[name], CONTROL))
                continue
            t = (ids[src], out, ids[name], slot)
            (back if ops[src] in NEXT_ITERATION_OPS and ops[name] in ("Merge", "RefMerge", "_XlaMerge") else edges).append(t)
            slot += 1
    return edges + back


def _loop_graph() -> Graph:
    """A while loop (Enter -> Merge <- NextIteration back edge) and a node with many consumers."""
    return Graph.from_nodes([
        ("x", "Placeholder", []),
        ("enter", "Enter", ["x"], {"frame_name": "f"}),
        ("merge", "Merge", ["enter", "next"]),
        ("cond", "LoopCond", ["p"]),
        ("p", "Placeholder", []),
        ("sw", "Switch", ["merge", "cond"]),
        ("body", "Neg", ["sw:1"]),
        ("next", "NextIteration", ["body"]),
        ("exit", "Exit", ["sw"]),
        ("z", "Identity", ["exit"]),
        ("w", "AddN", ["x", "x", "^p"]),
    ])


@pytest.mark.parametrize("make", [_loop_graph, _with_clones] + [lambda p=p: _load(p) for p in FIXTURES])
def test_from_graph_matches_the_input_strings(make):
    g = make()
    tg = TfGraph.from_graph(g, fixup=False)
    assert [(e.src, e.src_output, e.dst, e.dst_input) for e in tg.edges()] == _reference_from_graph(g)
    assert [e.id for e in tg.edges()] == list(range(len(tg.edges_by_id)))


def _reference_dfs(g, *, by_name, edge_filter=None, reverse=False, start=(0,)):
    """The DFS as written before (tuples on the stack, names compared per sort)."""
    nodes = g.nodes
    visited, order = set(), []
    stack = [(s, False) for s in start]
    while stack:
        nid, leave = stack.pop()
        if leave:
            order.append(("leave", nid))
            continue
        if nid in visited:
            continue
        visited.add(nid)
        order.append(("enter", nid))
        stack.append((nid, True))
        edges = nodes[nid].in_edges.values() if reverse else nodes[nid].out_edges.values()
        nbrs = [e.src if reverse else e.dst for e in edges if edge_filter is None or edge_filter(e)]
        if by_name and len(nbrs) > 1:
            nbrs.sort(key=lambda i: nodes[i].name)
        stack.extend((m, False) for m in nbrs if m not in visited)
    return order


@pytest.mark.parametrize("make", [_loop_graph, _with_clones] + [lambda p=p: _load(p) for p in FIXTURES])
@pytest.mark.parametrize("reverse", [False, True])
def test_dfs_orders_match_the_reference(make, reverse):
    tg = TfGraph.from_graph(make())
    clone_constants_for_better_clustering(tg)  # nodes added after the name ranks were first made
    start = (1,) if reverse else (0,)
    for by_name in (False, True):
        for flt in (None, not_back_edge(tg), lambda e: e.dst_input != 1):
            got = []
            dfs(tg, lambda n: got.append(("enter", n.id)), lambda n: got.append(("leave", n.id)),
                by_name=by_name, edge_filter=flt, reverse=reverse, start=start)
            assert got == _reference_dfs(tg, by_name=by_name, edge_filter=flt, reverse=reverse, start=start)
    ref = [nid for kind, nid in _reference_dfs(tg, by_name=True, edge_filter=not_back_edge(tg)) if kind == "leave"]
    assert [n.id for n in post_order(tg, by_name=True, edge_filter=not_back_edge(tg))] == ref
    assert [n.id for n in reverse_post_order(tg, by_name=True, edge_filter=not_back_edge(tg))] == ref[::-1]


def test_make_and_of_one_repeated_predicate_is_it_and_creates_nothing():
    """handle_generic's shortcut: the And of k copies of one predicate P that is no And (or
    of #true) is P, and the factory makes no predicate for it (no id is used up)."""
    f = PredicateFactory()
    a, b = f.make_symbol("a", 0, True), f.make_symbol("b", 0, False)
    true = f.make_true()
    for p in (a, f.make_not(b), f.make_or([a, b]), true):
        before = f.num_created
        assert f.make_and([p, p, p]) is p and f.num_created == before
    conj = f.make_and([a, b])
    assert conj.kind == AND and conj.operands  # an And with operands is not shortcut


@pytest.mark.parametrize("make", [lambda p=p: _load(p) for p in FIXTURES])
def test_deadness_shortcut_gives_the_factory_path(make, monkeypatch):
    tg = TfGraph.from_graph(make())
    fast = deadness_analysis(tg)
    import jitsim.analyses.deadness as dead

    def slow_generic(self, n, revisit):  # the handler before the shortcut
        p = self.f.make_and(self.input_preds(n))
        for i in range(self.num_outputs(n)):
            self.set_pred(n, i, p, revisit)
        self.set_pred(n, CONTROL, p, revisit)

    monkeypatch.setattr(dead._Analysis, "handle_generic", slow_generic)
    slow = deadness_analysis(TfGraph.from_graph(make()))
    assert fast.vlog() == slow.vlog()
    assert fast.factory.num_created == slow.factory.num_created
    assert {k: (p.id, str(p)) for k, p in fast.predicates.items()} == {k: (p.id, str(p)) for k, p in slow.predicates.items()}


def _random_graph(draw_edges, n: int, nexts: set[int]) -> Graph:
    inputs = {i: [] for i in range(n)}
    for s, d, control in draw_edges:
        inputs[d].append(("^" if control else "") + f"n{s}")
    for d in inputs:  # data inputs first, as TF requires
        inputs[d].sort(key=lambda r: r.startswith("^"))
    gd = protos.GraphDef()
    for i in range(n):
        gd.node.add(name=f"n{i}", op="NextIteration" if i in nexts else "Identity", input=inputs[i])
    return Graph(gd, validate=False)


def _has_cycle_reference(g: Graph) -> bool:
    """networkx over every edge but those out of a NextIteration (a loop's back edge)."""
    import networkx as nx

    dg = nx.DiGraph()
    dg.add_nodes_from(g.nodes)
    dg.add_edges_from((e.src, e.dst) for e in g.edges() if g.nodes[e.src].op != "NextIteration")
    return not nx.is_directed_acyclic_graph(dg)


try:
    from hypothesis import given, settings, strategies as st
except ImportError:  # pragma: no cover - hypothesis is a test dependency
    given = None

if given is not None:
    @settings(max_examples=300, deadline=None)
    @given(st.integers(2, 9).flatmap(lambda n: st.tuples(
        st.just(n),
        st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1), st.booleans()), max_size=14),
        st.sets(st.integers(0, n - 1), max_size=2))))
    def test_check_acyclic_refuses_exactly_the_cyclic_graphs(case):
        """The shortcut (edges up the file only from nodes without inputs, or loop back edges)
        never hides a cycle: check_acyclic refuses a graph exactly when networkx finds one.
        Upward edges out of input-less nodes are the cloned constants' shape of TF's dumps."""
        from jitsim.errors import GraphError

        n, edges, nexts = case
        g = _random_graph(edges, n, nexts)
        try:
            g.check_acyclic()
            refused = False
        except GraphError:
            refused = True
        assert refused == _has_cycle_reference(g)


@pytest.mark.parametrize("ref, refused", [("n", True), ("n:0", True), ("^n", False), ("x", False)])
def test_a_data_input_from_an_op_without_outputs_is_refused(ref, refused):
    """NoOp has no outputs: TF's importer refuses a data input naming it, plain (output 0) or
    indexed, and accepts a control input; the check looks at the inputs again only when some
    data input comes from such an op."""
    from jitsim.errors import GraphError
    from jitsim.graph.validate import check_nodes

    gd = protos.GraphDef()
    gd.node.add(name="x", op="Placeholder").attr["dtype"].type = 1
    gd.node.add(name="n", op="NoOp")
    a = gd.node.add(name="a", op="Identity", input=[ref] if not ref.startswith("^") else ["x", ref])
    a.attr["T"].type = 1
    g = Graph(gd, source="g.pbtxt", validate=False)
    if refused:
        with pytest.raises(GraphError, match=r"node 'a' \(Identity\): input 'n(:0)?' names output 0 of 'n', but NoOp "
                                             r"has no outputs"):
            check_nodes(g)
    else:
        check_nodes(g)


@pytest.mark.parametrize("make", [_loop_graph, _with_clones] + [lambda p=p: _load(p) for p in FIXTURES])
def test_the_model_keeps_its_nodes_in_index_order(make):
    """uncloned and TfGraph.from_graph read the model's nodes in dict order as TF's id order,
    without sorting: every way of building a model (a parse, a derived model) keeps them so."""
    g = make()
    for model in (g, uncloned(g)[0]):
        assert [n.index for n in model.nodes.values()] == list(range(len(model.nodes)))
        assert [n.name for n in model.nodes.values()] == [nd.name for nd in model.graphdef.node]


@pytest.mark.parametrize("path", FIXTURES + _CLONED, ids=lambda p: p.stem if "deadness" in str(p) else p.parts[-4])
def test_node_facts_read_in_c_build_the_same_model(path):
    # load()'s route for a user's file (issue 25): names and inputs read from one serialization
    # of the GraphDef, not node by node; the same model, the same keys check_nodes would make
    from jitsim.graph.model import read_node_facts

    from conftest import need_c_extension

    need_c_extension("jitsim.graph._fasttext")
    gd = _load(path).graphdef
    facts = read_node_facts(gd)
    assert facts.names == [nd.name for nd in gd.node]
    assert facts.inputs == [list(nd.input) for nd in gd.node]
    assert facts.keys == read_node_facts(gd, keys_only=True).keys
    g, fresh = Graph(gd, validate=False, facts=facts), Graph(gd, validate=False)
    assert list(g.nodes) == list(fresh.nodes) and g._in == fresh._in and g.unwritten_inputs == fresh.unwritten_inputs


def test_node_facts_refuse_names_as_the_model_does():
    import re

    from jitsim.errors import GraphError
    from jitsim.graph.model import read_node_facts

    for names, error in ((["a", ""], "node #1 (NoOp) has an empty name"), (["a", "a"], "duplicate node name 'a'")):
        gd = protos.GraphDef()
        for n in names:
            gd.node.add(name=n, op="NoOp")
        for facts in (None, read_node_facts(gd)):
            with pytest.raises(GraphError, match=re.escape(error)):
                Graph(gd, facts=facts)
