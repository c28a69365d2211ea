"""The command line: exit codes, one-line errors without traceback, no half-written output."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

from jitsim.graph import Graph, save


def jitsim(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "jitsim.cli", *map(str, args)], capture_output=True, text=True, cwd=cwd)


def _annotated(tmp_path, name, clusters):
    g = Graph.from_nodes([(n, "Neg", []) for n in clusters])
    for n, c in clusters.items():
        if c:
            g[n].set_attr("_XlaCluster", c)
    return save(g, tmp_path / name)


def _one_error_line(r, *fragments):
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "Traceback" not in r.stderr
    for f in fragments:
        assert f in lines[0]
    assert lines[0].startswith("jitsim: ")


@pytest.mark.parametrize(
    "content,fragments",
    [
        (None, ["missing.pbtxt", "no such file"]),
        ('node { name: "a" op: "Neg" input: "zz" }', ["bad.pbtxt", "names no node"]),
        ("node { name: ", ["bad.pbtxt", "malformed text GraphDef"]),
    ],
)
def test_bad_graph_gives_one_line(tmp_path, content, fragments):
    path = tmp_path / ("missing.pbtxt" if content is None else "bad.pbtxt")
    if content is not None:
        path.write_text(content)
    _one_error_line(jitsim("show", path), *fragments)


def test_truncated_pb(tmp_path):
    p = _annotated(tmp_path, "g.pb", {"a": "cluster_0", "b": None})
    p.write_bytes(p.read_bytes()[:-3])
    _one_error_line(jitsim("show", p), "g.pb", "truncated or corrupt")


def test_bad_flag_is_a_usage_error():
    r = jitsim("show", "--no-such-flag", "x.pbtxt")
    assert r.returncode == 2 and "Traceback" not in r.stderr and "unrecognized arguments" in r.stderr


def test_show_json_lists_clusters(tmp_path):
    p = _annotated(tmp_path, "g.pbtxt", {"a": "cluster_1", "b": "cluster_1", "c": None})
    r = jitsim("show", p, "--format", "json")
    assert r.returncode == 0
    data = json.loads(r.stdout)
    assert data["clusters"] == {"cluster_1": 2} and data["nodes"] == 3


def test_compare_exit_codes(tmp_path):
    truth = _annotated(tmp_path, "t.pbtxt", {"a": "cluster_0", "b": "cluster_0", "c": None})
    renamed = _annotated(tmp_path, "r.pbtxt", {"a": "cluster_9", "b": "cluster_9", "c": None})
    nothing = _annotated(tmp_path, "n.pbtxt", {"a": None, "b": None, "c": None})
    assert jitsim("crosscheck", "compare", truth, truth).returncode == 0
    # same partition, other names: identical unless --names is asked for
    assert jitsim("crosscheck", "compare", renamed, truth).returncode == 0
    assert jitsim("crosscheck", "compare", "--names", renamed, truth).returncode == 1
    r = jitsim("crosscheck", "compare", nothing, truth, "--format", "json")
    assert r.returncode == 1
    diff = json.loads(r.stdout)["graphs"][0]["diff"]
    assert sorted(d["node"] for d in diff["diffs"]) == ["a", "b"]


def test_compare_directories_graph_by_graph(corpus):
    run = corpus.built()[0]
    d = corpus.extract(run)
    r = jitsim("crosscheck", "compare", d, d)
    assert r.returncode == 0, r.stdout
    assert "graphs identical" in r.stdout


def test_index_of_unknown_dir_is_one_line(tmp_path):
    _one_error_line(jitsim("crosscheck", "index", tmp_path / "nowhere"), "nowhere", "no such dump directory")


def test_cluster_unknown_op_is_a_custom_op(tmp_path):
    """An op TF core does not register is accepted as TF with the op's library loaded would
    take it (no XLA kernel), and the output says so."""
    p = tmp_path / "g.pbtxt"
    p.write_text('node { name: "a" op: "NoSuchOp" device: "/device:CPU:0" }\n')
    r = jitsim("cluster", p, "--tf", "never", "--format", "json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["route"]["method"] == "no-tf" and rep["route"]["exact"] is False
    g = rep["graphs"][0]
    assert g["nodes"]["a"]["code"] == "CUSTOM_OP"
    assert any("NoSuchOp" in n and "does not register" in n for n in g["notes"])


def test_cluster_cyclic_graph_is_one_line(tmp_path):
    p = tmp_path / "c.pbtxt"
    p.write_text('node { name: "a" op: "Neg" input: "b" }\nnode { name: "b" op: "Neg" input: "a" }\n')
    _one_error_line(jitsim("cluster", p), "c.pbtxt", "cycle")


def test_cluster_bad_flags_are_one_line():
    r = jitsim("cluster", "examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt",
               "--tf-xla-flags", "--tf_xla_min_cluster_size=abc", cwd=ROOT)
    _one_error_line(r, "--tf_xla_min_cluster_size", "not an integer")
    r = jitsim("cluster", "examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt",
               "--tf-xla-flags", "--tf_xla_cluster_exclude_ops=MatMul", cwd=ROOT)
    _one_error_line(r, "The operation 'MatMul' passed to --tf_xla_cluster_exclude_ops is not supported by XLA.")


def test_cluster_writes_tf_identical_dump(tmp_path):
    """On the shipped example, -o writes exactly the bytes of TF's own mark_for_compilation dump."""
    out = tmp_path / "marked.pbtxt"
    r = jitsim("cluster", ROOT / "examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt",
               "-o", out)
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == (ROOT / "examples/mnist_softmax/mark_for_compilation.pbtxt").read_bytes()


def test_cluster_failed_output_leaves_nothing(tmp_path):
    r = jitsim("cluster", ROOT / "examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt",
               "-o", tmp_path / "missing_dir" / "out.pbtxt")
    _one_error_line(r, "missing_dir", "output directory does not exist")
    assert list(tmp_path.iterdir()) == []


def test_cluster_json_records_every_node(tmp_path):
    r = jitsim("cluster", ROOT / "examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt",
               "--format", "json")
    doc = json.loads(r.stdout)
    assert doc["schema"] == "jitsim.cluster/1"
    g = doc["graphs"][0]
    assert all("code" in n for n in g["nodes"].values())
    assert {n["cluster"] for n in g["nodes"].values() if n["code"] == "CLUSTERED"} == {c["name"] for c in g["clusters"]}


def test_cluster_table_stays_short(tmp_path):
    # The MNIST step has 5 clusters; with --top 2 the text table lists the 2 largest and counts
    # the rest (their nodes included), while the JSON still lists every cluster.
    ex = ROOT / "examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt"
    doc = json.loads(jitsim("cluster", ex, "--format", "json").stdout)
    clusters = sorted(doc["graphs"][0]["clusters"], key=lambda c: -c["size"])
    assert len(clusters) == 5
    r = jitsim("cluster", ex, "--top", "2")
    assert r.returncode == 0, r.stderr
    assert "the 2 largest of 5 clusters" in r.stdout
    rest = sum(c["size"] for c in clusters[2:])
    assert any(line.split("│")[1:3] == [" ... 3 more ", f" {rest:>5} "] for line in r.stdout.splitlines()), r.stdout
    for c in clusters[:2]:
        assert f" {c['name']} " in r.stdout
    full = jitsim("cluster", ex).stdout
    assert all(f" {c['name']} " in full for c in clusters) and "largest" not in full


def test_tf_xla_flags_env_is_honoured(tmp_path, monkeypatch):
    """Like TF: with TF_XLA_FLAGS lacking --tf_xla_cpu_global_jit nothing is clustered on CPU."""
    env_run = subprocess.run(
        [sys.executable, "-m", "jitsim.cli", "cluster", "--format", "json",
         str(ROOT / "examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt")],
        capture_output=True, text=True, env={**__import__("os").environ, "TF_XLA_FLAGS": "--tf_xla_auto_jit=2"})
    doc = json.loads(env_run.stdout)
    assert doc["flags_origin"].startswith("TF_XLA_FLAGS") and doc["graphs"][0]["clusters"] == []


@pytest.mark.parametrize("until,stage", [("encapsulate", "encapsulate_subgraphs_after"), ("build-xla-ops", "build_xla_ops")])
def test_rewrite_writes_tfs_dump_of_the_stage(tmp_path, corpus, until, stage):
    """The shipped MNIST example is graph 8 of the mnist_softmax fixture run: `rewrite --until`
    must write what TF dumped at that stage (config_proto is the session's, see docs/fidelity.md)."""
    out = tmp_path / "out.pbtxt"
    r = jitsim("rewrite", ROOT / "examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt",
               "--until", until, "-o", out)
    assert r.returncode == 0, r.stderr
    truth = corpus.extract("mnist_softmax") / "dumps" / corpus.index("mnist_softmax")["graphs"][8]["files"][stage]
    r = jitsim("crosscheck", "compare", "--graph", "--ignore-attr", "config_proto", out, truth)
    assert r.returncode == 0, r.stdout


def test_python_dash_m_jitsim_is_the_command():
    import subprocess
    import sys

    r = subprocess.run([sys.executable, "-m", "jitsim", "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("jitsim ")


def test_harvest_without_tensorflow_says_what_to_install(tmp_path, monkeypatch, capsys):
    """The light install has no TensorFlow: a command that runs real TF says so in one line,
    before making anything (no output directory, no TF process)."""
    from jitsim.cli import main
    from jitsim.tfprocess import harvest

    monkeypatch.setattr(harvest, "tf_importable", lambda: False)
    out = tmp_path / "sub" / "h"
    prog = Path(__file__).resolve().parents[1] / "examples/mnist_softmax/mnist_softmax_xla.py"
    assert main(["crosscheck", "harvest", str(prog), "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"jitsim: {prog}: this runs real TensorFlow, which is not installed here: pip install "
                   "'jitsim[tf]' (or give --python of an environment that has it)"]
    assert not (tmp_path / "sub").exists()


def test_a_command_line_builds_only_its_commands_parser():
    # _run builds the parser of the command it is given (5 ms less per run, issue 25): that
    # parser, and each nested one under it, is the full parser's, help text included
    import argparse

    from jitsim import cli

    def subparsers(p):
        return next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices

    full = cli.build_parser()
    assert tuple(subparsers(full)) == cli.COMMANDS
    for command, parser in subparsers(full).items():
        one = cli.build_parser(command)
        assert list(subparsers(one)) == [command]
        assert [q.format_help() for q in cli._leaf_parsers(subparsers(one)[command])] == \
            [q.format_help() for q in cli._leaf_parsers(parser)]


def test_help_and_unknown_commands_still_see_every_command(capsys):
    from jitsim import cli

    with pytest.raises(SystemExit) as e:
        cli.main(["no-such-command"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'no-such-command'" in err and "'runtime'" in err
