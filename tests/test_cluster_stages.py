"""The two stages jitsim calls "cluster", each named, and the one effective-size rule.

``jitsim cluster`` (schema ``jitsim.cluster/1``) reports the clusters after MarkForCompilation;
``jitsim.cluster()`` (``Clustering``, ``jitsim.clustering/1``) runs on through PartiallyDecluster
and keeps each node's cluster after marking as ``mark_cluster`` (docs/cli.md, "Which clusters").
"""

from __future__ import annotations

import json
import subprocess
import sys

import jitsim
from graphs import AUTO, arg, const, graph, op, ret
from jitsim.defs import CLUSTER_ATTR
from jitsim.options import options_for
from jitsim.graph import save
from jitsim.passes.mark_for_compilation import effective_size
from jitsim.passes.pipeline import BEFORE_CLONE, cluster_graph

EXAMPLE = "examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt"


def _cli_json(*args) -> dict:
    r = subprocess.run([sys.executable, "-m", "jitsim", "cluster", *map(str, args), "--tf", "never",
                        "--format", "json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def _const_identity_chain():
    """x -> a = Add(x, k) with k a Const -> i = Identity(a) -> b = Neg(i) -> y.

    Candidates: k, a, i, b (the function's _Arg/_Retval never are at top level). Every edge
    between them contracts, so one cluster of size 4 forms; its effective size counts every
    node but the Const (k) and the Identity (i): 2. With --tf_xla_min_cluster_size=2 it is kept,
    with the default minimum of 4 it is not (CLUSTER_TOO_SMALL)."""
    return graph(arg("x"), const("k"), op("a", "Add", "x", "k"), op("i", "Identity", "a"), op("b", "Neg", "i"),
                 ret("y", "b"))


def test_effective_size_rule_counts_all_but_constants_and_identities():
    assert effective_size(["Const", "Identity", "Add", "Neg", "HostConst", "RefIdentity"]) == 2


def test_pass_json_and_evidence_use_one_effective_size(tmp_path):
    res = cluster_graph(_const_identity_chain(), options_for(f"{AUTO} --tf_xla_min_cluster_size=2",
                                                             input_stage=BEFORE_CLONE))
    assert res.clusters == {"cluster_0": ["k", "a", "i", "b"]}
    assert res.mark.effective_size("cluster_0") == 2
    assert res.decisions["a"].evidence == {"cluster": "cluster_0", "cluster_size": 4, "effective_size": 2}
    small = cluster_graph(_const_identity_chain(), options_for(AUTO, input_stage=BEFORE_CLONE))
    assert small.clusters == {} and small.decisions["a"].code == "CLUSTER_TOO_SMALL"

    path = save(_const_identity_chain(), tmp_path / "chain.pbtxt")
    doc = _cli_json(path, "--tf-xla-flags=--tf_xla_min_cluster_size=2")
    (rep,) = doc["graphs"]
    assert rep["clusters"] == [{"name": "cluster_0", "size": 4, "effective_size": 2, "nodes": ["k", "a", "i", "b"]}]
    assert rep["nodes"]["a"]["evidence"]["effective_size"] == 2


def test_cluster_command_reports_the_api_mark_stage():
    """The command's clusters are the API's clusters after marking: per node, the JSON's
    ``cluster`` is ``Clustering.nodes[n].mark_cluster`` and its code is the mark decision's; the
    API's ``until="mark"`` gives the same clusters."""
    doc = _cli_json(EXAMPLE, "--no-default-flags", "--tf-xla-flags=--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
    (rep,) = doc["graphs"]
    c = jitsim.cluster(EXAMPLE, flags="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit", tf="never")
    assert {n: r["cluster"] for n, r in rep["nodes"].items()} == {n: r.mark_cluster for n, r in c.nodes.items()}
    assert {n: r["code"] for n, r in rep["nodes"].items()} == {n: r.decision.code for n, r in c.nodes.items()}
    m = jitsim.cluster(EXAMPLE, flags="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit", tf="never", until="mark")
    assert {cl["name"]: cl["nodes"] for cl in rep["clusters"]} == m.clusters


def test_input_graph_is_a_fresh_copy_of_the_pass_input():
    """Given a GraphDef message of jitsim's own protos (docs/api.md), ``input_graph()`` is the
    graph as given: no pass's ``_XlaCluster`` in it, a new copy on each call."""
    c = jitsim.cluster(_const_identity_chain().graphdef, flags=f"{AUTO} --tf_xla_min_cluster_size=2")
    assert c.clusters == {"cluster_0": ["k", "a", "i", "b"]}
    given = c.input_graph()
    assert [n.name for n in given.graphdef.node] == ["x", "k", "a", "i", "b", "y"]
    assert not any(CLUSTER_ATTR in n.attr for n in given.graphdef.node)  # the passes' marks are not in it
    assert c.input_graph() is not given
