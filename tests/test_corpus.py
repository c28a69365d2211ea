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


def _a_small_run(c):
    return min(c.built(), key=lambda r: c.archive(r).stat().st_size)


def _private_copy(tmp_path):
    """A fixtures root of one run, copied: no other Corpus of this test session holds it."""
    import shutil

    from jitsim.crosscheck.corpus import Corpus

    src = Corpus()
    run = _a_small_run(src)
    root = tmp_path / "fixtures"
    (root / "corpus").mkdir(parents=True)
    shutil.copy(src.root / "manifest.toml", root / "manifest.toml")
    shutil.copy(src.archive(run), root / "corpus" / src.archive(run).name)
    return root, run


def test_corpora_share_one_unpacked_copy_and_the_last_close_removes_it(tmp_path):
    """Two Corpus objects reading the same run get the same directory (unpacked once); it stays
    while either holds it and goes with the last close, so a test session leaves nothing behind
    in the temporary directory (it once left a 247 MB copy per Corpus per run, and filled CI's disk)."""
    import gc

    from jitsim.crosscheck.corpus import Corpus

    root, run = _private_copy(tmp_path)
    a, b = Corpus(root), Corpus(root)
    da = a.extract(run)
    assert (da / "index.json").exists()
    assert b.extract(run) == da
    a.close()
    assert (da / "index.json").exists(), "removed while another corpus still holds it"
    b.close()
    assert not da.exists()
    c = Corpus(root)
    dc = c.extract(run)
    assert (dc / "index.json").exists(), "a closed corpus's run unpacks again on demand"
    del c
    gc.collect()
    assert not dc.exists(), "a corpus that is never closed lets go when it is collected"


def test_a_rebuilt_archive_is_unpacked_again(tmp_path):
    import os

    from jitsim.crosscheck.corpus import Corpus

    root, run = _private_copy(tmp_path)
    c = Corpus(root)
    first = c.extract(run)
    st = c.archive(run).stat()
    os.utime(c.archive(run), ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    second = c.extract(run)
    assert second != first and (second / "index.json").exists()
    assert not first.exists(), "the copy of the old archive is let go"
    c.close()
    assert not second.exists()


def test_a_process_that_never_closes_its_corpus_leaves_nothing(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "TMPDIR": str(tmp_path)}
    prog = ("import sys\nfrom jitsim.crosscheck.corpus import Corpus\n_KEEP = Corpus()\n"
            "r = min(_KEEP.built(), key=lambda r: _KEEP.archive(r).stat().st_size)\n"
            "print(_KEEP.extract(r))\n")
    p = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().startswith(str(tmp_path)), p.stdout
    assert list(tmp_path.iterdir()) == []
