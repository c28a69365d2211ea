"""benchmarks/: the graph generator and the runner (issue 14), on tiny sizes."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jitsim.graph.io import read_graphdef
from jitsim.graph.model import Graph
from jitsim.options import options_for
from jitsim.passes.pipeline import BEFORE_CLONE, cluster_graph, detect_input_stage
from jitsim.graph.tfgraph import is_rebuilt_dump

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import generate  # noqa: E402

FLAGS = options_for("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
MNIST = ROOT / "examples" / "mnist_softmax" / f"{BEFORE_CLONE}.pbtxt"


def _edges(gd):
    return sorted((x, n.name) for n in gd.node for x in n.input)


def _cluster(gd):
    # on a copy: the passes annotate the NodeDefs they are given (e.g. _XlaCluster)
    copy = type(gd)()
    copy.CopyFrom(gd)
    return cluster_graph(Graph(copy, source="bench", validate=False), FLAGS)


def test_tile_makes_k_disjoint_copies():
    gd = read_graphdef(MNIST)
    k = 3
    t = generate.tile(gd, k)
    assert len(t.node) == k * len(gd.node)
    assert len(_edges(t)) == k * len(_edges(gd))
    # copy i is the original with every name (and every data/control input) prefixed tile{i}/
    for i in range(k):
        p = f"tile{i}/"
        copy = [n for n in t.node if n.name.startswith(p)]
        assert [n.name for n in copy] == [p + n.name for n in gd.node]
        for a, b in zip(copy, gd.node):
            assert list(a.input) == [("^" + p + x[1:]) if x.startswith("^") else p + x for x in b.input]
            assert a.op == b.op and a.device == b.device
    # the copies' _Arg indices do not collide: a function with k times the arguments
    args = sorted(n.attr["index"].i for n in t.node if n.op == "_Arg")
    assert args == list(range(len(args)))
    assert len(t.library.function) == len(gd.library.function)
    assert is_rebuilt_dump(t) and detect_input_stage(Graph(t, validate=False)) == BEFORE_CLONE


def test_tiled_clusters_are_k_times_the_originals():
    """No edge joins two copies, and the mark pass only ever merges two clusters across an
    edge between them (with a cycle check over paths, which stay inside one copy), and every
    limit it applies (cluster size, resource-op safety, deadness) is per cluster; the default
    flags set no global fuel. So each copy is clustered exactly as the original: k times the
    clusters, each one a prefixed copy of an original cluster."""
    gd = read_graphdef(MNIST)
    orig = _cluster(gd)
    assert len(orig.clusters) >= 2
    k = 4
    tiled = _cluster(generate.tile(gd, k))
    assert len(tiled.clusters) == k * len(orig.clusters)
    names = {n.name for n in gd.node}
    want = sorted(sorted(m for m in ms if m in names) for ms in orig.clusters.values())
    for i in range(k):
        p = f"tile{i}/"
        got = [sorted(m[len(p):] for m in ms if m.startswith(p) and m[len(p):] in names)
               for ms in tiled.clusters.values()]
        assert sorted(g for g in got if g) == want
    # and no cluster spans two copies
    for ms in tiled.clusters.values():
        assert len({m.split("/", 1)[0] for m in ms}) == 1


def test_layered_graph_is_a_realistic_clustering_input():
    gd = generate.layered(600, width=4, seed=1)
    assert 450 < len(gd.node) <= 600
    assert {n.op for n in gd.node} >= {"_Arg", "_Retval", "ReadVariableOp", "MatMul", "AddV2", "Relu", "Const",
                                       "Mul", "StringFormat", "PrintV2"}
    assert all(n.device.endswith("device:CPU:0") for n in gd.node)
    assert is_rebuilt_dump(gd)  # topological, as TF's dump of a rebuilt graph
    g = Graph(gd, validate=True)
    assert detect_input_stage(g) == BEFORE_CLONE
    res = _cluster(gd)
    # the prints (no XLA kernel) stay out, and the layers waiting on them start new clusters
    labels = res.labels()
    assert all(labels[n.name] is None for n in gd.node if n.op in ("PrintV2", "StringFormat"))
    assert sum(1 for n in gd.node if n.op == "PrintV2") >= 2
    assert len(res.clusters) >= 3
    # without the prints, the same layers make one cluster
    assert len(_cluster(generate.layered(600, width=4, seed=1, print_every=10**9)).clusters) == 1
    # the generator is deterministic for a seed
    assert generate.layered(600, width=4, seed=1) == gd


def test_runner_quick_writes_every_figure(tmp_path, monkeypatch):
    monkeypatch.setenv("JITSIM_BENCH_CACHE", str(tmp_path / "cache"))
    cmd = [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--quick", "--cases", "tiled:2x", "layered:200",
           "--out-dir", str(tmp_path), "--name", "t"]
    # no tight timeout: under load (the suite on 2 busy cores) a quick run takes tens of seconds
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["schema"] == "jitsim.bench/1" and doc["quick"]
    m = doc["machine"]
    assert m["nproc"] >= 1 and len(m["loadavg_start"]) == 3 and m["python"] and m["protobuf"]
    assert [r["case"] for r in doc["cases"]] == ["tiled:2x mlp_train_sgd", "layered:200"]
    for r in doc["cases"]:
        assert "error" not in r, f"{r['case']}: {r.get('error')}"  # the runner's own message (also in p.stdout)
        for key in ("parse_s", "model_s", "cluster_s", "write_s", "total_s", "later_s", "peak_rss_inprocess_mb"):
            assert r[key] >= 0, key
        assert {"clone_constants", "cluster_scoping", "mark_for_compilation"} <= set(r["passes"])
        assert {"encapsulate_subgraphs", "build_xla_ops"} <= set(r["later_passes"])
        for cmd_key in ("cluster_cmd", "rewrite_cmd", "cluster_cmd_cached"):
            assert r[cmd_key]["wall_s"] > 0 and r[cmd_key]["peak_rss_mb"] > 5
        assert r["nodes"] > 0 and r["clusters"] >= 1
    assert doc["cases"][0]["nodes"] == 2 * 34
    # the other commands, timed on the case that asks for them (the ResNet-50 in a full run)
    cmds = doc["cases"][0]["commands"]
    assert set(cmds) == {"explain", "whatif", "diff", "render", "report"}
    assert all(c["wall_s"] > 0 for c in cmds.values()) and cmds["explain"]["node"]
    assert doc["cases"][1]["commands"] is None
    assert "tiled:2x mlp_train_sgd" in p.stdout  # the printed table
    # the doc table and the targets render from it (no matplotlib needed)
    q = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "plot.py"), str(tmp_path / "t.json"), "--no-plot"],
                       capture_output=True, text=True, timeout=60)
    assert q.returncode == 0, q.stderr
    assert "| layered:200 |" in q.stdout and "target (issue 25)" in q.stdout


def test_plot_png(tmp_path):
    pytest.importorskip("matplotlib")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import plot

    row = {"case": "layered:1k", "kind": "layered", "nodes": 1000, "parse_s": 0.1, "model_s": 0.01, "cluster_s": 0.3,
           "write_s": 0.1, "total_s": 0.51, "cluster_cmd": {"wall_s": 0.8, "peak_rss_mb": 50},
           "rewrite_cmd": {"wall_s": 0.9, "peak_rss_mb": 55}, "rewrite_over_cluster": 1.1, "tf_pass_s": None,
           "tf_source": None, "ratio_vs_tf": None}
    big = dict(row, case="layered:10k", nodes=10_000, cluster_cmd={"wall_s": 5.0, "peak_rss_mb": 200})
    doc = {"machine": {"nproc": 2, "loadavg_start": [1.0, 1.0, 1.0], "date": "2026-01-01T00:00:00"},
           "cases": [row, big]}
    out = tmp_path / "p.png"
    plot.plot(doc, out)
    assert out.read_bytes()[:4] == b"\x89PNG"


def test_core_package_does_not_import_matplotlib():
    code = ("import sys, jitsim.cli, jitsim.passes.pipeline, jitsim.explain.render; "
            "assert 'matplotlib' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_ab_runs_each_tree_in_turn_and_compares_outputs(tmp_path):
    # benchmarks/ab.py with the same tree twice: both sides time their runs, the outputs are
    # the same bytes; a command after `--` (here `rewrite`) replaces `cluster`
    src = str(ROOT / "src")
    for extra in ([], ["--", "rewrite", "{graph}", "--until", "encapsulate", "-o", "{out}"]):
        r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ab.py"), str(MNIST), "--src", src, "--src", src,
                            "--runs", "1", *extra], capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        assert len(lines) == 3 and all(line.startswith(f"{src}: min ") for line in lines[:2]), r.stdout
        assert lines[2] == "outputs: identical"
    r = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "ab.py"), str(MNIST), "--src", src, "--runs", "1"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--src at least twice" in r.stderr
