"""The whole simulated pipeline against TF's dumps of every stage, on the fixtures corpus.

Unlike the per-pass tests (each starting from TF's dump of the previous stage), this runs
jitsim end to end from TF's ``before_clone_constants_for_better_clustering`` dump, with
jitsim's own node and edge ids flowing through every pass, and compares each graph with
TF's dump of the stage: ``encapsulate_subgraphs_before`` (after partially-decluster),
``encapsulate_subgraphs_after`` and ``build_xla_ops``. Attributes TF fills from runtime
shape inference are ignored (``IGNORED_ATTRS``, documented in docs/fidelity.md).
"""

import pytest

from jitsim.crosscheck.corpus import Corpus
from jitsim.crosscheck.fidelity import verify_pipeline_dir
from jitsim.crosscheck.scoring import labels_of_graphdef
from jitsim.options import options_for

# config_proto (on the lazy-compilation fallback call) is the session's serialized ConfigProto:
# it differs between TF2 functions, eager single-op functions and TF1 sessions and is not in
# any dump, so it cannot be predicted from the graph.
IGNORED_ATTRS = ("config_proto",)
_CORPUS = Corpus()
RUNS = [r for r in _CORPUS.built()
        if any("before_clone_constants_for_better_clustering" in g["files"] for g in _CORPUS.index(r)["graphs"])]


# TF rewrites clusters in the iteration order of a hash map seeded per process
# (EncapsulateSubgraphs), so whether a call's producer was already rewritten when BuildXlaOps
# reaches it (its int32 outputs then go through `<cluster>_1/int32_id_n`) varies between TF
# runs. These graphs hit it; the test checks that nothing else differs there.
TF_NONDETERMINISTIC = {
    ("numeric_no_xla_kernel", "build-xla-ops"): {"graph 2"},
    ("cnn_train_max3_min2", "build-xla-ops"): {"graph 42"},
}


def _only_int32_routing(d) -> bool:
    touched = set(d.node_diffs) | set(d.extra_nodes) | set(d.missing_nodes)
    return (not d.function_diffs and not d.missing_functions and not d.extra_functions
            and all(n.endswith(("/int32_id_n", "/stateful_partitioned_call", "/xla_compile", "/xla_run"))
                    for n in touched)
            and all(x.startswith(("data inputs", "control inputs")) or (n.endswith("/int32_id_n") and x.startswith("attr T:"))
                    for n, ds in d.node_diffs.items() for x in ds))


@pytest.mark.parametrize("until", ["decluster", "encapsulate", "build-xla-ops"])
@pytest.mark.parametrize("run", RUNS)
def test_stage_equals_tf_dump(corpus, run, until):
    spec = corpus.run(run)
    if "--tf_xla_deterministic_cluster_names" in spec.flags:
        pytest.skip("cluster names embed TF's graph fingerprint, not recoverable from dumps (docs/fidelity.md)")
    diffs = verify_pipeline_dir(corpus.extract(run), options_for(spec.flags, until=until, session=spec.session()),
                                ignore_attrs=IGNORED_ATTRS)
    known = TF_NONDETERMINISTIC.get((run, until), set())
    bad = [(name, d) for name, d in diffs
           if not d.identical and not (name.split(" (")[0] in known and _only_int32_routing(d))]
    assert not bad, "\n".join(f"{n}: {d.format_text(limit=10)}" for n, d in bad[:3])
