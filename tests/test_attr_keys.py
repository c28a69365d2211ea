"""Mark-for-compilation makes a node's compilability key once per op-and-attrs as read (issue 25).

load() reads each node's op and attrs as serialized (``Graph.attr_keys``, from
``read_node_facts``); for the graph the CLI hands over (``cluster_graph(own=True)``) the pipeline
gives them to the TfGraph (``read_attr_keys``), and ``find_candidates`` makes one ``node_key`` per
key and device type instead of one per node. These tests check that the clustering, its decisions
and the written graph are the same with the keys and without them, on the fixtures corpus and
on generated graphs, and that a pass changing attrs before mark drops them.
"""

from __future__ import annotations

import pytest

from conftest import clustering_inputs, need_c_extension

from jitsim.graph.io import read_graphdef, to_text
from jitsim.graph.model import Graph, read_node_facts
from jitsim.options import options_for
from jitsim.passes import mark_for_compilation as mfc
from jitsim.passes import pipeline

OPTIONS = options_for("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")


def _result(path, keys: bool):
    gd = read_graphdef(path)
    g = Graph(gd, source=str(path), validate=False, facts=read_node_facts(gd) if keys else None)
    seen = []
    real = mfc.MarkForCompilation.find_candidates

    def spy(self):
        seen.append(self.g.read_attr_keys is not None)
        return real(self)

    mfc.MarkForCompilation.find_candidates = spy
    try:
        cr = pipeline.cluster_graph(g, OPTIONS, own=True)
    finally:
        mfc.MarkForCompilation.find_candidates = real
    m = cr.mark
    return ((to_text(cr.to_graphdef()), m.clusters, repr(m.decisions), repr(m.refusals), m.candidates, m.groups),
            any(seen))


def _corpus_check(corpus, every: int) -> None:
    need_c_extension("jitsim.graph._fasttext")
    used = 0
    for run, g, path in clustering_inputs(corpus, every):
        with_keys, had_keys = _result(path, True)
        without, had_none = _result(path, False)
        assert with_keys == without, (run, g["id"])
        assert not had_none
        used += had_keys
    assert used > (10 if every > 1 else 100)  # the keys reached the pass on most graphs


def test_sampled_corpus_graphs_same_with_and_without_attr_keys(corpus):
    _corpus_check(corpus, every=12)


@pytest.mark.slow
def test_every_corpus_graph_same_with_and_without_attr_keys(corpus):
    _corpus_check(corpus, every=1)


def test_keys_follow_the_nodes_an_in_place_unclone_keeps():
    from test_graphio_speed import _with_clones

    from jitsim.passes.clone_constants import uncloned

    need_c_extension("jitsim.graph._fasttext")
    g = _with_clones()
    g = Graph(g.graphdef, validate=False, facts=read_node_facts(g.graphdef))
    before = dict(zip(g.nodes, g.attr_keys))
    u, removed = uncloned(g, in_place=True)
    assert removed and u.attr_keys == [before[name] for name in u.nodes]
    assert uncloned(Graph(g.graphdef, validate=False), in_place=False)[0].attr_keys is None


def test_cluster_scoping_drops_the_keys_when_it_tags_nodes():
    from jitsim.graph.tfgraph import TfGraph
    from jitsim.passes.cluster_scoping import cluster_scoping

    g = Graph.from_nodes([("s", "Stage", []), ("x", "Identity", ["s"])])
    tg = TfGraph.from_graph(g)
    tg.read_attr_keys = [b"", b""]
    assert cluster_scoping(tg) == 1 and tg.read_attr_keys is None
