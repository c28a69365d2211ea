"""Issue #12: every input, flag and output path gets a clear answer; one rule for flags.

Most malformed inputs are in tests/bad_inputs/ (tests/test_bad_inputs.py); these are the
behaviours that need more than one input file or a look inside the result."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jitsim.errors import JitsimError

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt"


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path):
    monkeypatch.setenv("JITSIM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)


def _run(capsys, *argv):
    from jitsim.cli import main

    rc = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


# -- 1. output paths ------------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["/proc/x.pbtxt", "{file}/x.pbtxt", "{tmp}/no/dir/x.pbtxt"])
def test_check_output_refuses_before_any_work(tmp_path, bad):
    from jitsim.graph.io import check_output

    f = tmp_path / "file"
    f.write_text("x")
    with pytest.raises(JitsimError):
        check_output(bad.format(file=f, tmp=tmp_path))
    check_output(tmp_path / "ok.pbtxt")
    check_output(tmp_path / "new" / "dir", directory=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_unwritable_output_is_one_line_in_a_subprocess(tmp_path):
    """The real process: no traceback, exit 2 (the in-process tests cannot see a traceback)."""
    f = tmp_path / "file"
    f.write_text("x")
    for argv in (["cluster", EX, "-o", f / "x.pbtxt"], ["render", EX, "-o", "/proc/x.svg"],
                 ["rewrite", EX, "-o", "/proc/x.pbtxt"], ["crosscheck", "index", EX.parent, "-o", "/proc/i.json"]):
        r = subprocess.run([sys.executable, "-m", "jitsim.cli", *map(str, argv)], capture_output=True, text=True,
                           env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1


# -- 4. one rule for flags ------------------------------------------------------------------


def test_tf_xla_flags_go_on_top_of_the_defaults(capsys):
    rc, out, err = _run(capsys, "cluster", EX, "--tf-xla-flags", "--tf_xla_min_cluster_size=1", "--format", "json")
    doc = json.loads(out)
    assert rc == 0 and doc["tf_xla_flags"] == "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_min_cluster_size=1"
    assert doc["flags_origin"].endswith("+ --tf-xla-flags")
    assert sum(len(g["clusters"]) for g in doc["graphs"]) > 5  # auto-jit still on, smaller clusters allowed


def test_no_default_flags_starts_from_nothing_and_warns(capsys):
    rc, out, err = _run(capsys, "cluster", EX, "--no-default-flags", "--tf-xla-flags", "--tf_xla_min_cluster_size=1",
                        "--format", "json")
    doc = json.loads(out)
    assert rc == 0 and doc["tf_xla_flags"] == "--tf_xla_min_cluster_size=1"
    assert "auto-clustering off" in err and err.startswith("jitsim: ")


def test_later_flags_win(capsys):
    rc, out, _ = _run(capsys, "cluster", EX, "--tf-xla-flags", "--tf_xla_auto_jit=0", "--format", "json")
    doc = json.loads(out)
    assert doc["tf_xla_flags"].endswith("--tf_xla_auto_jit=0")
    assert all(not g["clusters"] for g in doc["graphs"])


def test_whatif_and_diff_follow_the_same_rule(capsys):
    rc, out, _ = _run(capsys, "whatif", EX, "--tf-xla-flags", "--tf_xla_min_cluster_size=1", "--format", "json")
    w = json.loads(out)
    rc2, out2, _ = _run(capsys, "diff", EX, "--b-tf-xla-flags", "--tf_xla_min_cluster_size=1", "--format", "json")
    d = json.loads(out2)
    assert w["variant"] == d["variant"] and w["clusters"] == d["clusters"]
    assert "--tf_xla_auto_jit=2" in d["variant"]


def test_every_help_states_the_rule():
    from jitsim.cli import build_parser

    p = build_parser()
    sub = p._subparsers._group_actions[0].choices
    for cmd in ("cluster", "rewrite", "explain", "render", "report", "diff"):
        text = " ".join(sub[cmd].format_help().split())
        assert "on top of" in text and "--no-default-flags" in text, cmd
    assert "on top of the baseline" in " ".join(sub["whatif"].format_help().split())


def test_resolve_flags_order():
    from jitsim.options import resolve_flags

    env = {"TF_XLA_FLAGS": "--tf_xla_auto_jit=1"}
    assert resolve_flags(None, "--tf_xla_auto_jit=2", env).origin == "recorded by the harvest"
    assert resolve_flags(None, None, env).origin == "TF_XLA_FLAGS environment variable"
    c = resolve_flags("--tf_xla_min_cluster_size=2", None, env, additive=True)
    assert c.flags.text == "--tf_xla_auto_jit=1 --tf_xla_min_cluster_size=2" and c.flags.auto_jit_general == 1
    assert resolve_flags("--tf_xla_min_cluster_size=2", None, env).flags.auto_jit_general == 0  # the API replaces


# -- 5. verify prefers and prints the harvest's flags ----------------------------------------


def test_verify_uses_the_recorded_flags_and_says_so(corpus, capsys, monkeypatch):
    d = corpus.extract("cycle_avoidance")
    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_auto_jit=1")
    rc, out, _ = _run(capsys, "crosscheck", "verify", d)
    assert out.splitlines()[0].endswith("(recorded by the harvest)")
    assert "--tf_xla_auto_jit=2" in out.splitlines()[0] and rc == 0


# -- 6. dump directories ---------------------------------------------------------------------


def test_dumps_sharing_one_mtime_are_paired_by_content(corpus, tmp_path):
    import warnings

    from jitsim.graph.dumps import group_dumps

    d = corpus.extract("cnn_inference")
    truth = group_dumps(d / "dumps", (d / "log.txt").read_text())
    copy = tmp_path / "dumps"
    shutil.copytree(d / "dumps", copy)
    for p in copy.iterdir():
        os.utime(p, ns=(1_600_000_000_000_000_000, 1_600_000_000_000_000_000))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = group_dumps(copy)
    assert any("share one modification time" in str(x.message) for x in w)
    keep = ("before_clone_constants_for_better_clustering", "before_mark_for_compilation", "mark_for_compilation")
    strip = lambda gs: [f for f in ({k: v for k, v in g.files.items() if k in keep} for g in gs) if f]  # noqa: E731
    assert strip(got) == strip(truth)


def test_dumps_with_misleading_mtimes_are_paired_by_content(corpus, tmp_path):
    """Distinct modification times in the wrong order (files copied one by one): the content
    (a before_mark dump holds its before_clone dump's nodes) overrules them."""
    import warnings

    from jitsim.graph.dumps import group_dumps

    d = corpus.extract("cnn_inference")
    truth = group_dumps(d / "dumps", (d / "log.txt").read_text())
    copy = tmp_path / "dumps"
    shutil.copytree(d / "dumps", copy)
    files = sorted(copy.iterdir())
    for i, p in enumerate(files):
        os.utime(p, ns=(10**18 + i * 1000, 10**18 + i * 1000))
    marks = [p for p in files if p.name.startswith("before_mark")]
    times = [p.stat().st_mtime_ns for p in marks]
    for p, t in zip(marks, reversed(times)):
        os.utime(p, ns=(t, t))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        got = group_dumps(copy)
    assert any("nodes differ" in str(x.message) for x in w)
    keep = ("before_clone_constants_for_better_clustering", "before_mark_for_compilation", "mark_for_compilation")
    strip = lambda gs: [f for f in ({k: v for k, v in g.files.items() if k in keep} for g in gs) if f]  # noqa: E731
    assert strip(got) == strip(truth)


def test_log_without_dump_lines_is_said(corpus, tmp_path, capsys):
    d = corpus.extract("cycle_avoidance")
    log = tmp_path / "log.txt"
    log.write_text("some unrelated output\n")
    rc, _, err = _run(capsys, "crosscheck", "index", d / "dumps", "--log", log)
    assert rc == 0 and "no 'Dumped Graph to' line" in err


def test_index_of_an_empty_directory_is_refused(tmp_path, capsys):
    rc, _, err = _run(capsys, "crosscheck", "index", tmp_path)
    assert rc == 2 and "no TF dump files" in err and len(err.strip().splitlines()) == 1


# -- 9. remapper-made ops get the origin hint --------------------------------------------------


@pytest.mark.parametrize("op", ["_FusedMatMul", "_FusedConv2D", "_FusedDepthwiseConv2dNative", "_FusedBatchNormEx",
                                "_MklFusedConv2D", "_MklNativeFusedMatMul", "_FusedConv3D"])
def test_fused_ops_get_the_origin_hint(op):
    from jitsim.registry import protos
    from jitsim.registry import kernel_mismatch

    nd = protos.NodeDef(name="n", op=op)
    for attr in ("T", "TArgs"):
        nd.attr[attr].type = 1
    ev = kernel_mismatch(nd)
    if ev:  # a kernel that matches float (none of these on CPU today) needs no hint
        assert "remapper" in ev["origin"] and "remapping" in ev["origin"]


def test_fused_conv2d_on_a_real_dump_names_its_origin(corpus, capsys):
    d = corpus.extract("cnn_inference")
    f = next(p for p in sorted((d / "dumps").glob("before_clone_constants_for_better_clustering*.pbtxt"))
             if b'op: "_FusedConv2D"' in p.read_bytes())
    rc, out, _ = _run(capsys, "explain", f, "conv2d_1/Relu", "--format", "json")
    ex = json.loads(out)
    assert ex["op"] == "_FusedConv2D" and "remapper" in ex["evidence"]["origin"]


# -- 10. headlines summarise cluster names -----------------------------------------------------


def test_headline_summarises_many_cluster_names():
    from jitsim.explain.diff import ClusterChange, ClusterDiff

    names = [f"cluster_{i}" for i in range(300)]
    d = ClusterDiff("a", "b", [ClusterChange("merge", names, ["cluster_0"], size_b=900)], 300, 1, 900, 900, {})
    h = d.headline()
    assert len(h) < 200 and "and 297 more" in h


# -- 11. fuzz paths ----------------------------------------------------------------------------


def test_fuzz_batch_paths_are_absolute(tmp_path, monkeypatch):
    """A relative output directory used to be joined twice (runner run with cwd=root)."""
    import jitsim.crosscheck.fuzz.tf_runner as fuzz

    seen = {}

    class FakePopen:
        def __init__(self, cmd, cwd=None, env=None, **kw):
            seen.update(cmd=cmd, cwd=cwd, env=env)

        def wait(self, timeout=None):
            return 0

    monkeypatch.setattr(fuzz.subprocess, "Popen", FakePopen)
    monkeypatch.chdir(tmp_path)
    fuzz.run_batch([(0, "x = 1\n")], "--tf_xla_auto_jit=2", 1, Path("fuzz-out/work"))
    cwd = Path(seen["cwd"])
    for arg in seen["cmd"][1:]:
        assert Path(arg).is_absolute() and Path(arg).exists(), arg
        assert (cwd / arg).resolve() == Path(arg)  # the same file from the runner's cwd
    assert Path(seen["env"]["TF_DUMP_GRAPH_PREFIX"]).is_absolute()


# -- 15. gzip and text/binary by content ---------------------------------------------------------


def test_gzip_and_misnamed_files_read_the_same(tmp_path):
    import gzip
    import warnings

    from jitsim.graph.io import read_graphdef

    ref = read_graphdef(EX)
    (tmp_path / "a.pbtxt.gz").write_bytes(gzip.compress(EX.read_bytes()))
    (tmp_path / "b.pb").write_bytes(EX.read_bytes())
    (tmp_path / "c.pbtxt").write_bytes(ref.SerializeToString())
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        for name in ("a.pbtxt.gz", "b.pb", "c.pbtxt"):
            assert read_graphdef(tmp_path / name) == ref, name
