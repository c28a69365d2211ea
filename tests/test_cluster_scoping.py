"""TF's ClusterScopingPass (passes/cluster_scoping.py): the exact ``_XlaInternalScope`` tags.

TF's own tests (cluster_scoping_pass_test.cc, transcribed in test_tf_pass_tests_mark.py) only
check which nodes share a scope. These pin the tags themselves, derived by hand from
``ClusterScopingPassImpl`` (cluster_scoping_pass.cc): nodes are visited in id order (the list
order below: ids 2, 3, ...); each ``Unstage`` tags itself and everything reachable from it, each
``Stage`` itself and everything that reaches it, with ``_<k>`` for the k-th Stage/Unstage met
(k from 0); a node already tagged gets ``&_<k>`` appended (``AddOrAppendXlaInternalScope``).
"""

from __future__ import annotations

from graphs import F32, Types, const, graph, node, op
from jitsim.graph.tfgraph import TfGraph
from jitsim.passes.cluster_scoping import SCOPE_ATTR, cluster_scoping


def _scoped(*nodes) -> tuple[int, dict[str, str]]:
    tg = TfGraph.from_graph(graph(*nodes))
    tg.fixup_source_and_sink_edges()
    k = cluster_scoping(tg)
    return k, {n.name: n.attr[SCOPE_ATTR].s.decode() for n in tg.op_nodes() if SCOPE_ATTR in n.attr}


def _stage(name, *inputs, **attrs):
    return node(name, "Stage", inputs, dtypes=Types(tuple(F32 for _ in inputs)), **attrs)


def _unstage(name, **attrs):
    return node(name, "Unstage", dtypes=Types((F32,)), **attrs)


def test_unstage_and_stage_tags_in_id_order():
    """unstage (id 2) -> y -> stage (id 5) <- x (id 4); TF's own comment's example.

    unstage is met first: ``_0`` on unstage, y and stage (its successors). stage is met next:
    ``_1`` on stage, x, y and unstage (its predecessors), appended where ``_0`` is. x alone
    has only ``_1``, so x and y can never share a cluster. Two scopes were created."""
    k, tags = _scoped(_unstage("unstage"), op("y", "Neg", "unstage"), const("x"), _stage("stage", "x", "y"))
    assert k == 2
    assert tags == {"unstage": "_0&_1", "y": "_0&_1", "x": "_1", "stage": "_0&_1"}


def test_nodes_outside_the_pipeline_keep_no_tag_and_initial_scopes_are_extended():
    """x -> a -> stage; z -> b -> c, with no path to or from a Stage/Unstage.

    stage is the only Stage/Unstage: ``_0`` on stage and its predecessors a and x, appended to
    a's own ``_XlaInternalScope`` "A"; z, b and c are untouched."""
    k, tags = _scoped(const("x"), op("a", "Neg", "x", **{SCOPE_ATTR: "A"}), _stage("stage", "a"), const("z"),
                      op("b", "Neg", "z"), op("c", "Exp", "b"))
    assert k == 1
    assert tags == {"x": "_0", "a": "A&_0", "stage": "_0"}


def test_no_stage_no_scope():
    k, tags = _scoped(const("x"), op("a", "Neg", "x"))
    assert (k, tags) == (0, {})
