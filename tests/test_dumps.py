"""Pairing TF's dump files into per-graph records.

The rule under test (measured on TF 2.21, see docs/ground-truth.md): every dump name has its
own counter, a graph without compilation candidates writes no mark_for_compilation files
but still writes encapsulate/build_xla_ops files, so suffixes drift apart; files are grouped
by the order TF wrote them, a new graph starting whenever the pipeline stage goes back.
"""

import os

from jitsim.graph.dumps import group_dumps, parse_stage, scan_node_names
from jitsim.crosscheck.scoring import labels_of_file


NODE = 'node {{ name: "{}" op: "NoOp" }}\n'


def _write_run(tmp_path, files):
    """Write dump files in this order with increasing mtimes; return (dir, fake TF log)."""
    d = tmp_path / "dumps"
    d.mkdir()
    log = []
    for i, (name, nodes) in enumerate(files):
        p = d / name
        p.write_text("".join(NODE.format(n) for n in nodes))
        os.utime(p, ns=(10**9 + i * 1000, 10**9 + i * 1000))
        log.append(f"I0000 dump_graph.cc:245] Dumped Graph to {p}")
        if name.startswith("mark_for_compilation") and "annotated" not in name:
            log.append(f"I0000 mark_for_compilation_pass.cc:1637] MarkForCompilationPassImpl::Run time: {i}.5 ms (x)")
    return d, "\n".join(log)


# graph A has candidates, graph B has none (no mark dumps), graph C has candidates again:
# C's mark file is mark_for_compilation_1 while its build file is build_xla_ops_2.
RUN = [
    ("before_clone_constants_for_better_clustering.pbtxt", ["a"]),
    ("before_mark_for_compilation.pbtxt", ["a"]),
    ("mark_for_compilation.pbtxt", ["a"]),
    ("encapsulate_subgraphs_before.pbtxt", ["a"]),
    ("build_xla_ops.pbtxt", ["a"]),
    ("before_clone_constants_for_better_clustering_1.pbtxt", ["b"]),
    ("encapsulate_subgraphs_before_1.pbtxt", ["b"]),
    ("build_xla_ops_1.pbtxt", ["b"]),
    ("before_clone_constants_for_better_clustering_2.pbtxt", ["c"]),
    ("before_mark_for_compilation_1.pbtxt", ["c"]),
    ("mark_for_compilation_1.pbtxt", ["c"]),
    ("encapsulate_subgraphs_before_2.pbtxt", ["c"]),
    ("build_xla_ops_2.pbtxt", ["c"]),
]


def test_suffixes_drift_after_a_graph_without_candidates(tmp_path):
    d, log = _write_run(tmp_path, RUN)
    graphs = group_dumps(d, log)
    assert [g.files.get("mark_for_compilation") for g in graphs] == ["mark_for_compilation.pbtxt", None, "mark_for_compilation_1.pbtxt"]
    assert [g.files["build_xla_ops"] for g in graphs] == ["build_xla_ops.pbtxt", "build_xla_ops_1.pbtxt", "build_xla_ops_2.pbtxt"]
    # run times attach to the graph being processed when TF printed them
    assert graphs[0].mark_pass_us == 2500.0 and graphs[1].mark_pass_us is None and graphs[2].mark_pass_us == 10500.0


def test_without_log_file_times_give_the_same_pairing(tmp_path):
    d, log = _write_run(tmp_path, RUN)
    assert [g.files for g in group_dumps(d)] == [g.files for g in group_dumps(d, log)]


def test_naive_suffix_pairing_would_be_wrong(tmp_path):
    # Guard for the test above: pairing by equal suffix would put graph C's mark file
    # with graph B's build file, so the rule really matters on this input.
    d, _ = _write_run(tmp_path, RUN)
    assert labels_of_file(d / "mark_for_compilation_1.pbtxt").keys() != labels_of_file(d / "build_xla_ops_1.pbtxt").keys()


def test_parse_stage_does_not_confuse_annotated():
    assert parse_stage("mark_for_compilation_annotated_12.pbtxt") == ("mark_for_compilation_annotated", 12)
    assert parse_stage("mark_for_compilation_12.pbtxt") == ("mark_for_compilation", 12)
    assert parse_stage("encapsulate_subgraphs_subgraph_cluster_3.pbtxt") is None


def test_scan_node_names_agrees_with_protobuf(corpus):
    run = corpus.built()[0]
    d = corpus.extract(run) / "dumps"
    for f in sorted(d.glob("*.pbtxt"))[:20]:
        assert scan_node_names(f) == list(labels_of_file(f)), f.name


def test_corpus_pairing_matches_content(corpus):
    """On every real fixture graph, the files paired into one record are the same graph:
    TF's mark_for_compilation dump has exactly the nodes of its before_mark input, and
    its encapsulate_subgraphs_before dump is, among all of the run's, the one sharing most
    node names with it."""
    checked = 0
    for run in corpus.built():
        d = corpus.extract(run) / "dumps"
        names = {p.name: frozenset(scan_node_names(p)) for p in d.glob("*.pbtxt")}
        encs = sorted(n for n in names if n.startswith("encapsulate_subgraphs_before"))
        for g in corpus.index(run)["graphs"]:
            files = g["files"]
            if "mark_for_compilation" not in files:
                continue
            mark = names[files["mark_for_compilation"]]
            assert mark == names[files["before_mark_for_compilation"]], (run, g["id"])

            def overlap(name):
                return len(mark & names[name]) / len(mark | names[name])

            assert overlap(files["encapsulate_subgraphs_before"]) == max(map(overlap, encs)), (run, g["id"])
            checked += 1
    assert checked > 0
