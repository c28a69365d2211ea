"""Regression fixtures from differential fuzzing, replayed without TensorFlow.

Each ``fixtures/fuzz/<name>/`` is a reproducer written by ``jitsim crosscheck fuzz`` for a
disagreement that was then fixed in jitsim: ``program.py`` (the shrunk program),
``config.json`` (its TF_XLA_FLAGS and devices) and ``harvest/`` (TF 2.21's dumps of the program
run alone). jitsim must now agree with TF on every graph and every stage there. The campaign's
comparison itself is also checked on fixture corpus runs, where jitsim is known to agree.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jitsim.crosscheck.fuzz.check import check_dumps
from jitsim.crosscheck.fuzz.reproducers import check_fixture
from jitsim.crosscheck.fuzz.tf_runner import _parse_log

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = sorted(p.parent.name for p in (ROOT / "fixtures" / "fuzz").glob("*/config.json"))
KNOWN = sorted(p.parent.name for p in (ROOT / "fixtures" / "fuzz" / "known").glob("*/config.json"))


@pytest.mark.parametrize("name", FIXTURES or [pytest.param("none", marks=pytest.mark.skip(reason="no fuzz fixtures"))])
def test_fuzz_fixture_replays_without_disagreement(name):
    assert check_fixture(ROOT / "fixtures" / "fuzz" / name) == []


@pytest.mark.parametrize("name", KNOWN or [pytest.param("none", marks=pytest.mark.skip(reason="no known limits"))])
def test_known_limit_still_differs(name):
    """fixtures/fuzz/known/: disagreements documented as outside what a dump lets jitsim know
    (docs/fuzzing.md). If one starts to agree, jitsim learnt something: move the fixture up to
    fixtures/fuzz/ and update the docs."""
    assert check_fixture(ROOT / "fixtures" / "fuzz" / "known" / name) != []


@pytest.mark.parametrize("run", ["tiny_pieces_min1", "cond_compilable", "resource_var_order", "while_loop_numeric",
                                 "control_deps", "decluster_slices"])
def test_campaign_comparison_agrees_on_corpus_runs(corpus, run):
    d = corpus.extract(run)
    spec = corpus.run(run)
    checks = check_dumps(d / "dumps", (d / "log.txt").read_text(), spec.flags)
    assert checks
    assert all("mark" in c.stages for c in checks if "before_clone_constants_for_better_clustering" in c.record.files)
    bad = [(c.record.id, p.stage, p.summary) for c in checks for p in c.problems]
    assert not bad


def test_campaign_comparison_notices_wrong_flags(corpus):
    d = corpus.extract("tiny_pieces")
    checks = check_dumps(d / "dumps", (d / "log.txt").read_text(),
                         "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_min_cluster_size=1")
    stages = {p.stage for c in checks for p in c.problems}
    assert {"mark", "mark-from-before-mark"} <= stages


def test_log_markers_attribute_dumps_to_programs():
    log = "\n".join([
        "I0 dump_graph.cc:245] Dumped Graph to /x/dumps/before_clone_constants_for_better_clustering.pbtxt",
        "JITSIM_FUZZ_BEGIN 3",
        "I0 dump_graph.cc:245] Dumped Graph to /x/dumps/before_clone_constants_for_better_clustering_1.pbtxt",
        "JITSIM_FUZZ_ERROR 3 InvalidArgumentError: boom",
        "JITSIM_FUZZ_BEGIN 4",
        "I0 dump_graph.cc:245] Dumped Graph to /x/dumps/build_xla_ops_1.pbtxt",
    ])
    ran, errors, owners, ended = _parse_log(log)
    assert ran == [3, 4] and not ended
    assert errors == {3: "InvalidArgumentError: boom"}
    assert owners == {"before_clone_constants_for_better_clustering.pbtxt": -1,
                      "before_clone_constants_for_better_clustering_1.pbtxt": 3, "build_xla_ops_1.pbtxt": 4}


def test_replicated_constant_clone_order_is_reported_as_tf_nondeterminism(tmp_path):
    import json
    import tarfile

    fx = ROOT / "fixtures" / "fuzz" / "replicated-constant-clone-order"
    with tarfile.open(fx / "harvest.tar.xz", "r:xz") as tar:
        tar.extractall(tmp_path, filter="data")
    h = tmp_path / "harvest"
    flags = json.loads((fx / "config.json").read_text())["flags"]
    checks = check_dumps(h / "dumps", (h / "log.txt").read_text(), flags)
    assert not [p for c in checks for p in c.problems]
    assert any("constant clones permuted" in x for c in checks for x in c.tf_nondeterminism)


def test_replicated_constant_edge_order_fixture_needs_the_fix(monkeypatch):
    """Without jitsim.graph.tfgraph's replica rule the fixture disagrees again (TF: no cluster)."""
    import jitsim.graph.tfgraph as tfgraph

    fx = ROOT / "fixtures" / "fuzz" / "replicated-constant-edge-order"
    assert check_fixture(fx) == []
    monkeypatch.setattr(tfgraph, "_is_replica", lambda n: False)
    assert any(" mark: " in line for line in check_fixture(fx))


def test_graphs_tf_never_rebuilt_are_recognised(corpus, tmp_path):
    """is_rebuilt: a post-Grappler dump is in topological order, a Grappler-off one is not."""
    import tarfile

    from jitsim.graph.dumps import group_dumps
    from jitsim.crosscheck.fuzz.check import is_rebuilt
    from jitsim.graph.io import read_graphdef

    d = corpus.extract("cond_compilable")
    recs = group_dumps(d / "dumps", (d / "log.txt").read_text())
    stage = "before_clone_constants_for_better_clustering"
    assert all(is_rebuilt(read_graphdef(d / "dumps" / r.files[stage])) for r in recs if stage in r.files)
    with tarfile.open(ROOT / "fixtures/fuzz/no-grappler-contraction-order/harvest.tar.xz", "r:xz") as tar:
        tar.extractall(tmp_path, filter="data")
    h = tmp_path / "harvest"
    checks = check_dumps(h / "dumps", (h / "log.txt").read_text(),
                         "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_min_cluster_size=1 "
                         "--tf_xla_max_cluster_size=2")
    # the Grappler-off graph is recognised, and jitsim's reconstructed edge order agrees with TF there
    assert any(not c.rebuilt for c in checks)
    assert not any(c.tf_problems() for c in checks)
    # nodes added after construction (here ReplicateConstantsPass's replicas) do not make a graph
    # "not rebuilt": the bug the fixture below caught must stay a disagreement
    with tarfile.open(ROOT / "fixtures/fuzz/replicated-constant-edge-order/harvest.tar.xz", "r:xz") as tar:
        tar.extractall(tmp_path / "r", filter="data")
    h = tmp_path / "r" / "harvest"
    recs = group_dumps(h / "dumps", (h / "log.txt").read_text())
    assert all(is_rebuilt(read_graphdef(h / "dumps" / r.files[stage])) for r in recs if stage in r.files)


def test_encapsulate_folds_sin_fixture_needs_the_fix(monkeypatch):
    """Without a numpy kernel for Sin, encapsulate's folding leaves Sin(const) in the cluster."""
    import jitsim.rewrites.folding.kernels as fk

    fx = ROOT / "fixtures" / "fuzz" / "encapsulate-folds-sin"
    assert check_fixture(fx) == []
    ops = dict(fk.KERNELS)
    del ops["Sin"]
    monkeypatch.setattr(fk, "KERNELS", ops)
    assert any(" encapsulate: " in line for line in check_fixture(fx))


@pytest.mark.parametrize("fixture,kernels", [("encapsulate-folds-strided-slice-grad", ["StridedSliceGrad"]),
                                             ("encapsulate-folds-cumsum", ["Cumsum", "Cumprod"]),
                                             ("encapsulate-folds-add-n", ["AddN"]),
                                             ("encapsulate-folds-permutation-grad", ["InvertPermutation"]),
                                             ("encapsulate-folds-permutation-grad", ["ListDiff"]),
                                             ("encapsulate-folds-permutation-grad", ["FloorMod"])])
def test_encapsulate_folding_fixtures_need_their_kernels(monkeypatch, fixture, kernels):
    """Without these numpy kernels, encapsulate's folding leaves constant-only chains in the
    cluster function where TF folds them (Grappler off lets them reach the cluster)."""
    import jitsim.rewrites.folding.kernels as fk

    fx = ROOT / "fixtures" / "fuzz" / fixture
    assert check_fixture(fx) == []
    ops = dict(fk.KERNELS)
    for k in kernels:
        del ops[k]
    monkeypatch.setattr(fk, "KERNELS", ops)
    assert any(" encapsulate: " in line for line in check_fixture(fx))
