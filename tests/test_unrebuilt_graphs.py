"""Graphs TF never rebuilt from a GraphDef (Grappler off or failed).

TF then clusters the function graph as LowerFunctionalOps and the function inliner left it, and
its edge ids are the order those rewrites made the edges. The dumps record neither; jitsim
reconstructs the order from node names and ids (``tfgraph_from_dump``). Ground truth: real TF
2.21 dumps in fixtures/fuzz/no-grappler-* (regenerable from their program.py, see
docs/fuzzing.md); each fixture's evidence.txt states TF's rule it exercises.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest

from jitsim.graph.dumps import group_dumps
from jitsim.graph.io import read_graphdef
from jitsim.graph.model import Graph
from jitsim.options import options_for
from jitsim.passes.pipeline import BEFORE_CLONE, cluster_graph
from jitsim.graph.tfgraph import is_rebuilt_dump, tfgraph_from_dump

ROOT = Path(__file__).resolve().parents[1]


def _input_graphs(tmp_path: Path, fixture: str):
    with tarfile.open(ROOT / "fixtures" / "fuzz" / fixture / "harvest.tar.xz", "r:xz") as tar:
        tar.extractall(tmp_path, filter="data")
    h = tmp_path / "harvest"
    recs = group_dumps(h / "dumps", (h / "log.txt").read_text())
    config = json.loads((ROOT / "fixtures" / "fuzz" / fixture / "config.json").read_text())
    return [(h / "dumps" / r.files[BEFORE_CLONE]) for r in recs if BEFORE_CLONE in r.files], config


def test_grappler_off_dump_is_not_rebuilt_and_a_grappler_on_one_is(tmp_path):
    paths, _ = _input_graphs(tmp_path / "a", "no-grappler-inline-input-order")
    assert any(not is_rebuilt_dump(read_graphdef(p)) for p in paths)
    # Grappler on (the same kind of while loop, rebuilt after Grappler): topological
    paths, _ = _input_graphs(tmp_path / "b", "replicated-constant-edge-order")
    assert paths and all(is_rebuilt_dump(read_graphdef(p)) for p in paths)


def _while_graph(tmp_path):
    paths, config = _input_graphs(tmp_path, "no-grappler-inline-input-order")
    for p in paths:
        gd = read_graphdef(p)
        if not is_rebuilt_dump(gd) and any(n.name.startswith("Func/v13/cond/") for n in gd.node):
            return Graph(gd, source=str(p), validate=False), config
    pytest.fail("the fixture lost its lowered while loop")


def test_inliner_connects_inputs_after_copying_the_body(tmp_path):
    """TF's inliner copies the body's nodes (an input-less copy gets its control edge from
    input_control_node as it is made), then the body's edges, and only then makes
    input_control_node -> input Identity edges. So input_control_node's out-edges in TF's id
    order list the body constants before the input Identities."""
    g, _ = _while_graph(tmp_path)
    tg = tfgraph_from_dump(g)
    ic = next(n for n in tg.op_nodes() if n.name.startswith("Func/v13/cond/_0/input_control_node/"))
    succ = [tg.name(e.dst) for e in sorted(ic.out_edges.values(), key=lambda e: e.id)]
    const = succ.index("v13/cond/_0/v13/Less/y")
    inputs = [i for i, s in enumerate(succ) if s.startswith("Func/v13/cond/_0/input/")]
    assert inputs and const < min(inputs)
    # an input Identity's edge into the body comes after every body-internal edge of that body
    body_edges = [e.id for e in tg.edges() if tg.name(e.src).startswith("v13/cond/_0/")
                  and tg.name(e.dst).startswith("v13/cond/_0/")]
    from_inputs = [e.id for e in tg.edges() if tg.name(e.src).startswith("Func/v13/cond/_0/input/")
                   and tg.name(e.dst).startswith("v13/cond/_0/")]
    assert body_edges and from_inputs and max(body_edges) < min(from_inputs)


def test_rebuilt_graph_edges_stay_in_graphconstructor_order(tmp_path):
    """For a rebuilt (topological) dump nothing changes: edges by destination node, as
    GraphConstructor makes them."""
    from jitsim.graph.tfgraph import TfGraph

    paths, _ = _input_graphs(tmp_path, "encapsulate-folds-sin")
    compared = 0
    for p in paths:
        gd = read_graphdef(p)
        assert is_rebuilt_dump(gd)
        a = tfgraph_from_dump(Graph(gd, validate=False))
        b = TfGraph.from_graph(Graph(read_graphdef(p), validate=False))
        if not any(n.name.startswith(("_arg_", "_retval_")) or "/replicate/_" in n.name for n in gd.node):
            assert [(e.src, e.dst, e.dst_input) for e in a.edges()] == [(e.src, e.dst, e.dst_input) for e in b.edges()]
            compared += 1
    assert compared


def test_clustering_a_graph_tf_never_rebuilt_says_so(tmp_path):
    g, config = _while_graph(tmp_path)
    res = cluster_graph(g, options_for(config["flags"], input_stage=BEFORE_CLONE))
    assert any("without rebuilding it" in n for n in res.notes)
    paths, config = _input_graphs(tmp_path / "b", "encapsulate-folds-sin")
    res = cluster_graph(Graph(read_graphdef(paths[-1]), source=str(paths[-1]), validate=False),
                        options_for(config["flags"], input_stage=BEFORE_CLONE))
    assert not any("without rebuilding it" in n for n in res.notes)
