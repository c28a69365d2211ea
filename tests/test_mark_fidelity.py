"""jitsim's mark-for-compilation reproduces TF 2.21 on every graph of the fixtures corpus.

For each run, every graph is simulated from TF's own input dump, in TF's order with one
simulated process (fuel and the cluster counter carry over between graphs), and compared
with TF's mark_for_compilation dump: same partition *and* same cluster names. Both input
kinds are checked: before_clone_constants_for_better_clustering (exact ids) and
before_mark_for_compilation (clones folded back, then re-cloned).
"""

import pytest

from jitsim.crosscheck.corpus import Corpus
from jitsim.crosscheck.fidelity import verify_dir
from jitsim.options import options_for
from jitsim.passes.pipeline import BEFORE_CLONE, BEFORE_MARK

_CORPUS = Corpus()
RUNS = _CORPUS.built()


def _has_stage(corpus, run, stage):
    return any(stage in g["files"] for g in corpus.index(run)["graphs"])


@pytest.mark.parametrize("stage", [BEFORE_CLONE, BEFORE_MARK])
@pytest.mark.parametrize("run", RUNS)
def test_same_clusters_as_tf(corpus, run, stage):
    if not _has_stage(corpus, run, stage):
        pytest.skip(f"TF wrote no {stage} dump in this run (auto-jit off)")
    spec = corpus.run(run)
    result = verify_dir(corpus.extract(run), options_for(spec.flags, input_stage=stage, session=spec.session()))
    assert result.all_same_names, result.format_text(limit=20)


def test_corpus_has_both_input_kinds(corpus):
    assert sum(_has_stage(corpus, r, BEFORE_CLONE) for r in RUNS) >= 80
    assert all(_has_stage(corpus, r, BEFORE_MARK) for r in RUNS if corpus.index(r)["totals"]["graphs_with_candidates"])
