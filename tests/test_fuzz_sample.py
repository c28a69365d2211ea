"""Differential testing against real TensorFlow 2.21 (marked ``tf``): a CI-sized sample of
generated programs runs under TF and jitsim must reproduce every stage TF dumps; a forced
disagreement (jitsim broken on purpose) must come out as a shrunk, standalone reproducer."""

from __future__ import annotations

import copy
import json
import subprocess
import sys

import pytest

from jitsim.crosscheck.fuzz.campaign import campaign
from jitsim.crosscheck.fuzz.reproducers import check_fixture
from jitsim.passes.mark_for_compilation import MarkForCompilation

pytestmark = pytest.mark.tf


def test_ci_sample_agrees_with_tf(tmp_path):
    """40 generated programs in two TF processes (default flags, and min/max cluster size with two
    CPU devices): zero disagreements, and the CLI's last line says so."""
    out = tmp_path / "fuzz"
    r = subprocess.run([sys.executable, "-m", "jitsim.cli", "crosscheck", "fuzz", "--examples", "40", "--seed", "0",
                        "--profile", "ci", "-o", str(out)], capture_output=True, text=True, timeout=600)
    lines = r.stdout.strip().splitlines()
    assert lines and lines[-1] == "40 examples, 0 disagreements", r.stdout[-3000:] + r.stderr[-3000:]
    assert r.returncode == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["examples"] == 40 and summary["disagreements"] == 0
    assert summary["graphs_compared"] >= 40
    assert summary["tf_crashes"] == 0


def test_forced_disagreement_gives_a_shrunk_reproducer(tmp_path, monkeypatch):
    """jitsim keeps clusters of any size (TF's min is 4): every program with a compilable op
    disagrees. The campaign must report it (TF rerun on it gives the same clusters: a
    disagreement, not TF's nondeterminism), shrink the program to one or two statements against
    TF and write a reproducer that the program alone reproduces."""
    orig = MarkForCompilation.create_clusters

    def keep_small_clusters(self, cands):
        self.flags = copy.copy(self.flags)
        self.flags.min_cluster_size = 1
        return orig(self, cands)

    monkeypatch.setattr(MarkForCompilation, "create_clusters", keep_small_clusters)
    res = campaign(2, seed=5, out=tmp_path / "out", profile="ci", batch_size=2, shrink_budget_s=90)
    assert res.disagreements >= 1
    # the program ran again under TF, which gave the same clusters: a disagreement, not TF's noise
    assert res.tf_unstable == 0 and not any(o.tf_unstable for o in res.outcomes)
    rerun = [o for o in res.outcomes if any(p.stage != "invariants" for _, p in o.problems)]
    assert rerun
    for o in rerun:
        assert any("TF gave the same output in 2 runs" in line for line in o.tf_stable), o.tf_stable
    assert res.final_line() == f"2 examples, {res.disagreements} disagreements"
    repro = res.reproducers[0]
    for f in ("program.py", "config.json", "README.md", "diff.txt", "input.pbtxt", "tf.pbtxt", "jitsim.pbtxt",
              "harvest/log.txt"):
        assert (repro / f).exists(), f
    config = json.loads((repro / "config.json").read_text())
    assert config["standalone_reproduces"] is True
    assert config["stage"] in ("mark", "mark-from-before-mark", "invariants")
    assert config["statements"] <= 2, (repro / "program.py").read_text()
    assert "TF_XLA_FLAGS=" in (repro / "program.py").read_text()
    assert any((repro / "harvest" / "dumps").glob("before_clone_constants_for_better_clustering*.pbtxt"))
    assert check_fixture(repro)  # still broken: the replay sees it
    monkeypatch.setattr(MarkForCompilation, "create_clusters", orig)
    assert check_fixture(repro) == []  # "fixed": the replay agrees with TF
