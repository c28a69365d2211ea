"""TF against TF, without TensorFlow: the canonical comparison the fuzz campaign uses to decide
whether TF itself changed its output for a graph between two runs (jitsim.crosscheck.fuzz,
``tf_stability``). Cluster names carry a process-wide counter, so two runs are compared with
every ``cluster_<n>`` renamed after its members in that run's mark dump."""

from __future__ import annotations

from graphs import parse_graphdef
from jitsim.graph.dumps import DumpGraph
from jitsim.crosscheck.fuzz.check import BEFORE_CLONE, STAGE_TRUTH, Problem
from jitsim.crosscheck.fuzz.stability import _TFGraph, canonical_difference, canonical_form, judge_stability
from jitsim.graph.io import save


def node(name, op, inputs=(), cluster=None):
    ins = "".join(f' input: "{x}"' for x in inputs)
    attr = f' attr {{ key: "_XlaCluster" value {{ s: "{cluster}" }} }}' if cluster else ""
    return f'node {{ name: "{name}" op: "{op}"{ins}{attr} }}'


def mark(c_ab: str, c_d: str):
    """x -> a, b (one cluster) -> c (not clustered) ; d (another cluster)."""
    return parse_graphdef("\n".join([node("x", "_Arg"), node("a", "Sin", ["x"], c_ab), node("b", "Cos", ["x"], c_ab),
                         node("c", "AddV2", ["a", "b"]), node("d", "Exp", ["c"], c_d),
                         node("r", "_Retval", ["d"])]))


def encapsulated(c_ab: str, c_d: str, results=("0", "1"), arg_order=False):
    """encapsulate_subgraphs_after: the clusters became call nodes named (and typed) after them,
    emitted in cluster-name order."""
    calls = [node(c_ab, c_ab, ["x"] + (["^x"] if arg_order else [])), node(c_d, c_d, ["c"])]
    if c_d < c_ab:
        calls.reverse()
    ra, rb = (f"{c_ab}:{results[0]}", f"{c_ab}:{results[1]}")
    return parse_graphdef("\n".join([node("x", "_Arg"), node("c", "AddV2", [ra, rb]), node("r", "_Retval", [c_d])] + calls))


def labels(g):
    return {n.name: (n.attr["_XlaCluster"].s.decode() if "_XlaCluster" in n.attr else None) for n in g.node}


def test_cluster_numbering_does_not_matter():
    m1, m2 = mark("cluster_0", "cluster_1"), mark("cluster_7", "cluster_5")
    assert canonical_form("mark", m1) == canonical_form("mark", m2) == ["cluster{a, b}", "cluster{d}"]
    e1, e2 = encapsulated("cluster_0", "cluster_1"), encapsulated("cluster_7", "cluster_5")
    f1, f2 = canonical_form("encapsulate", e1, labels(m1)), canonical_form("encapsulate", e2, labels(m2))
    assert f1 == f2
    assert "c = AddV2(cluster{a}:0, cluster{a}:1)" in f1
    # build_xla_ops names its nodes <cluster>_1/...: the token is renamed inside longer names too
    b1 = parse_graphdef(node("cluster_0_1/xla_run", "_XlaRun", ["x", "cluster_0_1/xla_compile:1"]))
    b2 = parse_graphdef(node("cluster_7_1/xla_run", "_XlaRun", ["x", "cluster_7_1/xla_compile:1"]))
    assert canonical_form("build-xla-ops", b1, labels(m1)) == canonical_form("build-xla-ops", b2, labels(m2)) \
        == ["cluster{a}_1/xla_run = _XlaRun(x, cluster{a}_1/xla_compile:1)"]


def test_result_order_or_partition_differences_are_seen():
    m1, m2 = mark("cluster_0", "cluster_1"), mark("cluster_4", "cluster_3")
    f1 = canonical_form("encapsulate", encapsulated("cluster_0", "cluster_1"), labels(m1))
    f2 = canonical_form("encapsulate", encapsulated("cluster_4", "cluster_3", results=("1", "0")), labels(m2))
    assert f1 != f2
    only1, only2 = canonical_difference(f1, f2)
    assert only1 == ["c = AddV2(cluster{a}:0, cluster{a}:1)"]
    assert only2 == ["c = AddV2(cluster{a}:1, cluster{a}:0)"]
    assert canonical_form("mark", mark("cluster_0", "cluster_0")) != canonical_form("mark", m1)  # d joins a, b


def _tf_graph(tmp_path, run, m, e, inp=None):
    d = tmp_path / run
    d.mkdir()
    save(m, d / "mark_for_compilation.pbtxt")
    save(e, d / "encapsulate_subgraphs_after.pbtxt")
    save(inp if inp is not None else mark(None, None), d / "before_clone.pbtxt")
    rec = DumpGraph(0, {BEFORE_CLONE: "before_clone.pbtxt", STAGE_TRUTH["mark"]: "mark_for_compilation.pbtxt",
                        STAGE_TRUTH["encapsulate"]: "encapsulate_subgraphs_after.pbtxt"})
    return _TFGraph(run, d, rec)


def test_judge_stability(tmp_path):
    """Same output up to numbering: TF stable, the difference counts. Another result order in
    the rerun: TF unstable at encapsulate, and jitsim (which gave the rerun's order) matches it."""
    first = _tf_graph(tmp_path, "batch", mark("cluster_0", "cluster_1"), encapsulated("cluster_0", "cluster_1"))
    same = _tf_graph(tmp_path, "reversed", mark("cluster_9", "cluster_8"), encapsulated("cluster_9", "cluster_8"))
    swapped = _tf_graph(tmp_path, "ex3 alone", mark("cluster_2", "cluster_3"),
                        encapsulated("cluster_2", "cluster_3", results=("1", "0")))
    mine_m = mark("cluster_0", "cluster_1")
    p = Problem("encapsulate", "1 node differs", predicted=encapsulated("cluster_0", "cluster_1", results=("1", "0")),
                labels=labels(mine_m))
    assert judge_stability(first, [same], p, 5) is None
    u = judge_stability(first, [same, swapped], p, 5)
    assert u is not None and u.stage == "encapsulate" and u.runs == ("batch", "ex3 alone")
    assert u.jitsim_matches == ["ex3 alone"]
    assert u.only == (["c = AddV2(cluster{a}:0, cluster{a}:1)"], ["c = AddV2(cluster{a}:1, cluster{a}:0)"])
    assert "ex3 alone" in u.evidence and "equals TF's output of: ex3 alone" in u.evidence
    # a mark problem is judged on the partition only: the same partition under other names is stable
    pm = Problem("mark", "names differ", predicted=mark("cluster_5", "cluster_6"))
    assert judge_stability(first, [same, swapped], pm, 5) is None
    # TF's input dump differs (same nodes, other edges: what the match signature leaves out):
    # unstable before any clustering stage
    other_input = _tf_graph(tmp_path, "ex4 alone", mark("cluster_1", "cluster_2"),
                            encapsulated("cluster_1", "cluster_2"),
                            parse_graphdef("\n".join([node("x", "_Arg"), node("a", "Sin", ["x"]), node("b", "Cos", ["x"]),
                                          node("c", "AddV2", ["b", "a"]), node("d", "Exp", ["c"]),
                                          node("r", "_Retval", ["d"])])))
    assert first.signature() == other_input.signature()
    u = judge_stability(first, [same, other_input], pm, 5)
    assert u is not None and u.stage == "input" and u.only == (["c = AddV2(a, b)"], ["c = AddV2(b, a)"])
