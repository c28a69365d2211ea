"""jitsim against TF's dumps, stage by stage, for the graphs one TF process instantiated.

:func:`check_dumps` replays jitsim on every graph in TF's order with one simulated process
(fuel and cluster counters carry over), from TF's ``before_clone_constants_for_better_clustering``
dump, and compares each stage TF dumped (:data:`STAGE_TRUTH`): a :class:`GraphCheck` per graph,
its :class:`Problem` s the differences.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from jitsim.graph.dumps import group_dumps
from jitsim.graph.model import Graph
from jitsim.graph.tfgraph import is_rebuilt_dump
from jitsim.defs import BEFORE_CLONE_DUMP, BEFORE_MARK_DUMP, MARK_DUMP
from jitsim.options import options_for
from jitsim.passes.mark_for_compilation import ProcessState
from jitsim.passes.pipeline import BUILD_XLA_OPS, MARK, STAGE_DUMPS, STAGES, cluster_graph, run_pipeline

# the two clustering inputs TF dumps (names kept for the modules that import them here)
BEFORE_CLONE = BEFORE_CLONE_DUMP
BEFORE_MARK = BEFORE_MARK_DUMP
# TF's dump of each stage (jitsim.passes.pipeline.STAGE_DUMPS), and of the mark stage run from
# TF's before_mark dump
# the stage mark run again from TF's before_mark dump (TF's own constant clones)
MARK_FROM_BEFORE_MARK = "mark-from-before-mark"
STAGE_TRUTH = {MARK: MARK_DUMP, MARK_FROM_BEFORE_MARK: MARK_DUMP, **STAGE_DUMPS}
# See tests/test_pipeline_fidelity.py: the session's serialized ConfigProto on the lazy
# fallback call is in no dump.
IGNORED_ATTRS = ("config_proto",)


@dataclass
class Problem:
    """One stage of one graph where jitsim and TF disagree."""

    stage: str
    summary: str
    detail: str = ""
    predicted: object = None  # jitsim's GraphDef at the stage (None for invariants / errors)
    truth_file: str | None = None
    labels: dict | None = None  # jitsim's mark labels of the graph (names its clusters in ``predicted``)

    def to_dict(self) -> dict:
        return {"stage": self.stage, "summary": self.summary, "detail": self.detail, "truth_file": self.truth_file}


@dataclass
class GraphCheck:
    record: object  # dumps.DumpGraph
    owner: int  # example id, -1 for graphs before the first program
    problems: list[Problem] = field(default_factory=list)
    tf_nondeterminism: list[str] = field(default_factory=list)
    stages: list[str] = field(default_factory=list)  # stages compared
    # False when TF's input dump is not in topological order: TF clustered a graph it never
    # rebuilt from a GraphDef (Grappler off, or Grappler failed and TF went on without it); its
    # edge order, which no dump records, is reconstructed (tfgraph.tfgraph_from_dump)
    rebuilt: bool = True
    # differences from TF at a stage where TF differed from itself when the graph ran again
    # (:func:`evaluate` with ``tf_reruns``): not disagreements
    tf_unstable: list = field(default_factory=list)  # Instability
    tf_stable: list[str] = field(default_factory=list)  # what the reruns found stable, one line each

    def tf_problems(self) -> list[Problem]:
        """Differences from TF (not jitsim's own invariants)."""
        return [p for p in self.problems if p.stage != "invariants"]

    def counted(self) -> list[Problem]:
        """The disagreements: every problem but those TF's reruns showed TF unstable on."""
        unstable = {id(u.problem) for u in self.tf_unstable}
        return [p for p in self.problems if id(p) not in unstable]


def is_rebuilt(gd) -> bool:
    """Whether TF rebuilt the dumped graph from a GraphDef after its last rewrite (see
    :func:`jitsim.graph.tfgraph.is_rebuilt_dump`): False for a graph TF clustered as lowering
    and inlining left it (Grappler off or failed)."""
    return is_rebuilt_dump(gd)


def _only_int32_routing(d) -> bool:
    """TF rewrites clusters in the order of a hash map seeded per process (EncapsulateSubgraphs),
    so whether a call's producer was already rewritten when BuildXlaOps reaches it (its int32
    outputs then go through ``<cluster>_1/int32_id_n``) varies between TF runs; the same test as
    tests/test_pipeline_fidelity.py."""
    touched = set(d.node_diffs) | set(d.extra_nodes) | set(d.missing_nodes)
    return (bool(touched) and not d.function_diffs and not d.missing_functions and not d.extra_functions
            and all(n.endswith(("/int32_id_n", "/stateful_partitioned_call", "/xla_compile", "/xla_run"))
                    for n in touched)
            and all(x.startswith(("data inputs", "control inputs")) or (n.endswith("/int32_id_n")
                                                                        and x.startswith("attr T:"))
                    for n, ds in d.node_diffs.items() for x in ds))


_CLONE = re.compile(r"^(.*)/clone_\d+$")


def _only_clone_permutation(d) -> bool:
    """The only difference is which clone of one constant feeds which input of a node.

    ReplicateConstantsPass (multi-device graphs) redirects a constant's consumers to per-device
    replicas while iterating the constant's out-edges, a pointer-hashed set in TF: the edge ids,
    and so which consumer input CloneConstantsForBetterClustering serves first, change from run
    to run with the same input dump (docs/fuzzing.md has the evidence)."""
    if not d.node_diffs or d.missing_nodes or d.extra_nodes or d.function_diffs or d.missing_functions \
            or d.extra_functions:
        return False
    pat = re.compile(r"^data inputs: jitsim (\[.*\]), TF (\[.*\])$")
    import ast

    for ds in d.node_diffs.values():
        for x in ds:
            m = pat.match(x)
            if not m:
                return False
            a, b = ast.literal_eval(m.group(1)), ast.literal_eval(m.group(2))
            if sorted(a) != sorted(b) or len(a) != len(b):
                return False
            for p, q in zip(a, b):
                if p != q and not (_CLONE.match(p) and _CLONE.match(q)
                                   and _CLONE.match(p).group(1) == _CLONE.match(q).group(1)):
                    return False
    return True


def _resync(state, truth_labels: dict, before) -> None:
    """After a graph where jitsim and TF disagree, continue numbering clusters where TF did, so
    that one disagreement does not shift every later graph's cluster names (``cluster_<n>``)."""
    nums = [int(m.group(1)) for v in truth_labels.values() if v and (m := re.fullmatch(r"cluster_(\d+)", v))]
    state.counters[0] = max(nums) + 1 if nums else before.counters.get(0, 0)


def check_dumps(dumps: Path | str, log_text: str | None, flags_text: str, *, owners: dict | None = None,
                invariants: bool = True) -> list[GraphCheck]:
    """Replay jitsim on every graph of a TF dump directory and compare every stage TF dumped.

    ``owners`` maps a dump file name to the example that caused it (graphs whose files are not
    in it get -1). One simulated process per input kind, in TF's order."""
    from jitsim.crosscheck.compare import compare_partitions
    from jitsim.crosscheck.fidelity import pass_input_graphdef
    from jitsim.crosscheck.graphdiff import diff_graphdefs
    from jitsim.crosscheck.scoring import labels_of_graphdef
    from jitsim.graph.io import read_graphdef
    dumps = Path(dumps)
    options = options_for(flags_text)
    from_clone, from_mark = replace(options, input_stage=BEFORE_CLONE), replace(options, input_stage=BEFORE_MARK)
    records = group_dumps(dumps, log_text)
    state, state_bm = ProcessState(), ProcessState()
    out = []
    for rec in records:
        first = next(iter(rec.files.values()))
        chk = GraphCheck(rec, (owners or {}).get(first, -1))
        out.append(chk)
        truth_cache: dict = {}

        def truth(stage_file):
            if stage_file not in truth_cache:
                truth_cache[stage_file] = read_graphdef(dumps / rec.files[stage_file])
            return truth_cache[stage_file]

        if BEFORE_CLONE in rec.files:
            gd = pass_input_graphdef(dumps, rec)
            chk.rebuilt = is_rebuilt(gd)
            st0 = copy.deepcopy(state)
            chk.stages.append(MARK)
            try:
                res = cluster_graph(Graph(copy.deepcopy(gd), source=rec.files[BEFORE_CLONE], validate=False),
                                    from_clone, state)
            except Exception as e:  # a crash is a disagreement too
                chk.problems.append(Problem(MARK, f"jitsim failed: {type(e).__name__}: {e}"))
                continue
            mark_file = rec.files.get(MARK_DUMP)
            predicted = res.labels()
            labels = dict(predicted)
            tl = labels_of_graphdef(truth(MARK_DUMP)) if mark_file else {n: None for n in predicted}
            d = compare_partitions(predicted, tl)
            if not d.same_names:
                chk.problems.append(Problem(MARK, d.summary(), d.format_text(limit=30), res.to_graphdef(), mark_file,
                                            labels))
                _resync(state, tl, st0)
            if invariants:
                from jitsim.testing.invariants import check_invariants

                bad = check_invariants(Graph(copy.deepcopy(gd), source=rec.files[BEFORE_CLONE], validate=False),
                                       flags_text, state=copy.deepcopy(st0), determinism=False)
                chk.stages.append("invariants")
                if bad:
                    chk.problems.append(Problem("invariants", bad[0], "\n".join(bad)))
            for until in STAGES[1:]:
                tf_stage = STAGE_TRUTH[until]
                if tf_stage not in rec.files:
                    continue
                chk.stages.append(until)
                try:
                    pr = run_pipeline(Graph(copy.deepcopy(gd), source=rec.files[BEFORE_CLONE], validate=False),
                                      replace(from_clone, until=until), copy.deepcopy(st0))
                    mine = pr.to_graphdef()
                except Exception as e:
                    chk.problems.append(Problem(until, f"jitsim failed: {type(e).__name__}: {e}"))
                    break
                d = diff_graphdefs(mine, truth(tf_stage), ignore_attrs=IGNORED_ATTRS)
                if d.identical:
                    continue
                if until == BUILD_XLA_OPS and _only_int32_routing(d):
                    chk.tf_nondeterminism.append(f"{until}: int32 routing: {d.summary()}")
                    continue
                if _only_clone_permutation(d):
                    chk.tf_nondeterminism.append(f"{until}: constant clones permuted: {d.summary()}")
                    continue
                chk.problems.append(Problem(until, d.summary(), d.format_text(limit=30), mine, rec.files[tf_stage],
                                            labels))
                break  # later stages inherit the difference
        if BEFORE_MARK in rec.files:
            chk.stages.append(MARK_FROM_BEFORE_MARK)
            bm0 = copy.deepcopy(state_bm)
            try:
                g = Graph(read_graphdef(dumps / rec.files[BEFORE_MARK]), source=rec.files[BEFORE_MARK], validate=False)
                res = cluster_graph(g, from_mark, state_bm)
                tl = labels_of_graphdef(truth(MARK_DUMP)) if MARK_DUMP in rec.files \
                    else {n: None for n in res.labels()}
                d = compare_partitions(res.labels(), tl)
                if not d.same_names:
                    chk.problems.append(Problem(MARK_FROM_BEFORE_MARK, d.summary(), d.format_text(limit=30),
                                                res.to_graphdef(), rec.files.get(MARK_DUMP),
                                                dict(res.labels())))
                    _resync(state_bm, tl, bm0)
            except Exception as e:
                chk.problems.append(Problem(MARK_FROM_BEFORE_MARK, f"jitsim failed: {type(e).__name__}: {e}"))
    return out
