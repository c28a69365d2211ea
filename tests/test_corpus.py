"""The fixtures corpus and the scorer on it.

Done-when of the foundation issue: truth vs truth scores 100% on every fixture graph, and a
"cluster nothing" prediction scores below 100% on every graph where TF formed a cluster.
"""

import json

import pytest

from jitsim.crosscheck.compare import compare_partitions
from jitsim.graph.dumps import scan_dump
from jitsim.crosscheck.scoring import labels_of_file

from conftest import corpus_graphs

REQUIRED_CASES = 30


def test_corpus_is_big_enough(corpus):
    runs = corpus.runs()
    assert len({r.program for r in runs}) >= REQUIRED_CASES
    assert sorted(corpus.built()) == sorted(r.name for r in runs), "every manifest run has an archive"


def test_corpus_size_budget(corpus):
    total = sum(corpus.archive(n).stat().st_size for n in corpus.built())
    assert total < 30 * 2**20


def test_truth_vs_truth_and_cluster_nothing(corpus):
    with_clusters = 0
    for run, g, d in corpus_graphs(corpus):
        f = g["files"].get("mark_for_compilation")
        if f is None:
            continue
        truth = labels_of_file(d / "dumps" / f)
        same = compare_partitions(truth, truth)
        assert same.identical and same.same_names and same.agreement() == 1.0
        nothing = compare_partitions({n: None for n in truth}, truth)
        if any(truth.values()):
            with_clusters += 1
            assert not nothing.identical and nothing.agreement() < 1.0, (run, g["id"])
            assert {x.kind for x in nothing.diffs} == {"missing"}
        else:
            assert nothing.identical
    assert with_clusters >= REQUIRED_CASES


def test_committed_index_matches_archives(corpus):
    """fixtures/index.json is derived from the archives; it must not drift from them."""
    top = json.loads((corpus.root / "index.json").read_text())["runs"]
    assert sorted(top) == sorted(corpus.built())
    for run in corpus.built():
        idx = corpus.index(run)
        assert [g["clusters"] for g in top[run]["graphs"]] == [g["clusters"] for g in idx["graphs"]]
        d = corpus.extract(run)
        for g in idx["graphs"]:
            mark = g["files"].get("mark_for_compilation")
            if mark:
                # the fast scanner and the full protobuf parse agree on TF's clusters
                full = labels_of_file(d / "dumps" / mark)
                sizes = {}
                for c in full.values():
                    if c:
                        sizes[c] = sizes.get(c, 0) + 1
                assert scan_dump(d / "dumps" / mark)["clusters"] == dict(sorted(sizes.items()))


def test_corpus_covers_large_graphs(corpus):
    sizes = [g["nodes"] for _, g, _ in corpus_graphs(corpus)]
    assert max(sizes) >= 10_000


@pytest.mark.tf
@pytest.mark.slow
def test_regenerating_a_sample_reproduces_clusters(corpus, request):
    """Re-run a sample of the corpus under real TF: same partitions and cluster names.

    The sample is small in CI; `pytest -m slow --full-corpus` style runs use
    `python fixtures/generate.py --verify` for all runs."""
    sample = ["mnist_softmax"] + [n for n in corpus.built() if n != "mnist_softmax"][:: max(1, len(corpus.built()) // 3)][:2]
    for name, res in corpus.verify(sample):
        assert res.all_same_names, f"{name}:\n{res.format_text(limit=20)}"
