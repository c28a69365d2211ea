"""benchmarks/run.py's TF figure (issue 25): TF's own pass time, taken without dump flags.

With ``TF_DUMP_GRAPH_PREFIX`` and ``--tf_xla_clustering_debug`` TF writes its dumps inside the
region it times (``MarkForCompilationPassImpl::Run``), so the benchmark's TF runs must have
neither, and only the logging that prints the time.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import run  # noqa: E402


def test_timing_runs_have_no_dump_flags(monkeypatch):
    # whatever the caller's environment holds, a timing run dumps nothing and logs only the
    # pass time's module, with the benchmark's JIT flags
    monkeypatch.setenv("TF_DUMP_GRAPH_PREFIX", "/tmp/somewhere")
    monkeypatch.setenv("TF_XLA_FLAGS", "--tf_xla_clustering_debug --tf_xla_auto_jit=2")
    monkeypatch.setenv("TF_CPP_VMODULE", "mark_for_compilation_pass=5,encapsulate_subgraphs_pass=1")
    env = run.tf_nodump_env()
    assert "TF_DUMP_GRAPH_PREFIX" not in env
    assert "clustering_debug" not in env["TF_XLA_FLAGS"] and env["TF_XLA_FLAGS"] == run.FLAGS
    assert env["TF_CPP_VMODULE"] == "mark_for_compilation_pass=1"


def test_the_benchmarked_graph_is_found_by_its_place_in_the_harvest(tmp_path):
    # The harvest (with dumps) lists graphs in TF's order; a timing run logs one pass time per
    # graph in the same order, so the benchmarked (largest) graph is the one at its position
    # among the graphs that have a pass time.
    import json

    graphs = [{"id": 0, "nodes": 10, "files": {"before_clone_constants_for_better_clustering": "a"}, "mark_pass_us": 5},
              {"id": 1, "nodes": 7, "files": {}, "mark_pass_us": None},
              {"id": 2, "nodes": 900, "files": {"before_clone_constants_for_better_clustering": "b"}, "mark_pass_us": 9},
              {"id": 3, "nodes": 30, "files": {"before_clone_constants_for_better_clustering": "c"}, "mark_pass_us": 1}]
    (tmp_path / "index.json").write_text(json.dumps({"graphs": graphs}))
    assert run._graph_ordinal(tmp_path, run.BEFORE_CLONE) == (1, 3)
    assert run._graph_ordinal(tmp_path / "none", run.BEFORE_CLONE) is None


@pytest.mark.tf
def test_tf_pass_time_without_dumps(tmp_path, monkeypatch):
    # A real TF run of a small program: two timing runs, a pass time each, and no dump file
    # anywhere (the runs' working directory stays empty apart from what the program writes).
    pytest.importorskip("tensorflow")
    prog = tmp_path / "programs" / "tiny.py"
    prog.parent.mkdir()
    prog.write_text(
        "import tensorflow as tf\n"
        "@tf.function\n"
        "def f(x):\n"
        "    return tf.nn.relu(tf.matmul(x, x) + 1.0)\n"
        "print(float(tf.reduce_sum(f(tf.ones([4, 4])))))\n")
    monkeypatch.setattr(run, "PROGRAMS", prog.parent)
    got = run.tf_pass_nodump("tiny", 2, 300, tmp_path / "no-harvest", run.BEFORE_CLONE)
    assert got is not None and len(got["runs_s"]) == 2
    assert all(0 < t < 60 for t in got["runs_s"])
    assert got["median_s"] == sorted(got["runs_s"])[0] + (sorted(got["runs_s"])[1] - sorted(got["runs_s"])[0]) / 2
    assert got["picked"] == "slowest pass"
    assert not list(tmp_path.glob("**/*.pbtxt"))
