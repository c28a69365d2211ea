"""Differential fuzzing against real TensorFlow: generated programs, TF's dumps, jitsim's prediction.

A campaign (``jitsim crosscheck fuzz --examples N --seed S``):

1. draws N programs (:func:`jitsim.testing.strategies.programs`, Hypothesis seeded with S)
   and one process configuration (TF_XLA_FLAGS, logical CPU devices) per batch;
2. runs each batch in **one** TF process (TF's start-up costs ~3 s; a batch of 40 programs
   costs ~10 s): every program is a file ``ex<id>.py`` run in turn, a marker line on stderr
   before each, so the dumps TF writes can be attributed to the program that caused them;
3. replays jitsim on every graph TF instantiated, in TF's order with one simulated process
   (fuel and cluster counters carry over, as in TF), starting from TF's own
   ``before_clone_constants_for_better_clustering`` dump, and compares every stage TF dumped:
   ``mark`` (partition *and* cluster names), ``mark`` again from ``before_mark_for_compilation``,
   ``decluster`` (``encapsulate_subgraphs_before``), ``encapsulate``
   (``encapsulate_subgraphs_after``), ``build-xla-ops`` (``build_xla_ops``), plus jitsim's own
   structural invariants (:mod:`jitsim.testing.invariants`) on TF's input graph;
4. runs the programs where jitsim differs from TF again under TF (the batch's differing programs
   reversed in one process, then each alone: :func:`tf_stability`) and compares TF with itself at
   the stage, cluster names canonicalised (:func:`canonical_form`): a difference where TF's own
   output changed is *TF-unstable* (evidence under ``OUT/tf-unstable/ex<id>/``), not a
   disagreement; every other difference is one, on a graph TF rebuilt or not;
5. shrinks each disagreeing program against TF (greedy one-step reductions, every round's
   candidates in one TF process) and writes a reproducer directory: ``program.py``,
   ``config.json``, TF's input graph, TF's and jitsim's graphs at the stage, the diff, and a
   standalone harvest of the program (``harvest/``) -- what a fixture under ``fixtures/fuzz/``
   keeps (see docs/fuzzing.md).

The last line of a campaign is ``N examples, M disagreements`` (M = examples with at least
one disagreement; TF-unstable differences and known TF nondeterminism do not count).
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from jitsim.crosscheck.dumps import group_dumps
from jitsim.crosscheck.harvest import harvest_env
from jitsim.errors import JitsimError

BEFORE_CLONE = "before_clone_constants_for_better_clustering"
BEFORE_MARK = "before_mark_for_compilation"
STAGE_TRUTH = {
    "mark": "mark_for_compilation",
    "mark-from-before-mark": "mark_for_compilation",
    "decluster": "encapsulate_subgraphs_before",
    "encapsulate": "encapsulate_subgraphs_after",
    "build-xla-ops": "build_xla_ops",
}
# See tests/test_pipeline_fidelity.py: the session's serialized ConfigProto on the lazy
# fallback call is in no dump.
IGNORED_ATTRS = ("config_proto",)
_BEGIN = "JITSIM_FUZZ_BEGIN "
_ERROR = "JITSIM_FUZZ_ERROR "
_END = "JITSIM_FUZZ_END"

# Each program gets PROGRAM_TIMEOUT seconds: a hung TF call (py_function in some nests does
# hang) ends the process, and run_programs restarts the rest of the batch without it.
PROGRAM_TIMEOUT = 120
_RUNNER = '''\
import faulthandler, json, os, runpy, sys, traceback
{header}
_progs = json.load(open(sys.argv[1]))
for _id, _path in _progs:
    print("{begin}%d" % _id, file=sys.stderr, flush=True)
    faulthandler.dump_traceback_later({timeout}, exit=True)
    try:
        runpy.run_path(_path, run_name="__main__")
    except Exception as _e:
        _lines = [l.strip() for l in str(_e).strip().splitlines() if l.strip()]
        _msg = (_lines[0] + (" | " + _lines[-1] if len(_lines) > 1 else ""))[:400] if _lines else ""
        print("{error}%d %s: %s" % (_id, type(_e).__name__, _msg), file=sys.stderr, flush=True)
    faulthandler.cancel_dump_traceback_later()
print("{end}", file=sys.stderr, flush=True)
'''


# -- the comparison ----------------------------------------------------------------------------


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
    :func:`jitsim.passes.tfgraph.is_rebuilt_dump`): False for a graph TF clustered as lowering
    and inlining left it (Grappler off or failed)."""
    from jitsim.passes.tfgraph import is_rebuilt_dump

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


def _input_graphdef(dumps: Path, rec):
    """TF's before_clone dump with the pass's function library (the dump carries the graph's own
    pruned library; TF's later dumps of the same graph carry the full one)."""
    from jitsim.graph.io import read_graphdef

    gd = read_graphdef(dumps / rec.files[BEFORE_CLONE])
    later = rec.files.get("encapsulate_subgraphs_before")
    if later is not None:
        have = {fn.signature.name for fn in gd.library.function}
        for fn in read_graphdef(dumps / later).library.function:
            if fn.signature.name not in have:
                gd.library.function.add().CopyFrom(fn)
    return gd


def check_dumps(dumps: Path | str, log_text: str | None, flags_text: str, *, owners: dict | None = None,
                invariants: bool = True) -> list[GraphCheck]:
    """Replay jitsim on every graph of a TF dump directory and compare every stage TF dumped.

    ``owners`` maps a dump file name to the example that caused it (graphs whose files are not
    in it get -1). One simulated process per input kind, in TF's order."""
    from jitsim.crosscheck.compare import compare_partitions
    from jitsim.crosscheck.graphdiff import diff_graphdefs
    from jitsim.crosscheck.scoring import labels_of_graphdef
    from jitsim.graph.io import read_graphdef
    from jitsim.graph.model import Graph
    from jitsim.passes.flags import parse_tf_xla_flags
    from jitsim.passes.mark_for_compilation import ProcessState
    from jitsim.passes.pipeline import cluster_graph, run_pipeline

    dumps = Path(dumps)
    flags = parse_tf_xla_flags(flags_text)
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
            gd = _input_graphdef(dumps, rec)
            chk.rebuilt = is_rebuilt(gd)
            st0 = copy.deepcopy(state)
            chk.stages.append("mark")
            try:
                res = cluster_graph(Graph(copy.deepcopy(gd), source=rec.files[BEFORE_CLONE], validate=False), flags,
                                    state=state, input_stage=BEFORE_CLONE)
            except Exception as e:  # a crash is a disagreement too
                chk.problems.append(Problem("mark", f"jitsim failed: {type(e).__name__}: {e}"))
                continue
            mark_file = rec.files.get("mark_for_compilation")
            predicted = res.labels()
            labels = dict(predicted)
            tl = labels_of_graphdef(truth("mark_for_compilation")) if mark_file else {n: None for n in predicted}
            d = compare_partitions(predicted, tl)
            if not d.same_names:
                chk.problems.append(Problem("mark", d.summary(), d.format_text(limit=30), res.to_graphdef(), mark_file,
                                            labels))
                _resync(state, tl, st0)
            if invariants:
                from jitsim.testing.invariants import check_invariants

                bad = check_invariants(Graph(copy.deepcopy(gd), source=rec.files[BEFORE_CLONE], validate=False),
                                       flags_text, state=copy.deepcopy(st0), determinism=False)
                chk.stages.append("invariants")
                if bad:
                    chk.problems.append(Problem("invariants", bad[0], "\n".join(bad)))
            for until in ("decluster", "encapsulate", "build-xla-ops"):
                tf_stage = STAGE_TRUTH[until]
                if tf_stage not in rec.files:
                    continue
                chk.stages.append(until)
                try:
                    pr = run_pipeline(Graph(copy.deepcopy(gd), source=rec.files[BEFORE_CLONE], validate=False), flags,
                                      until=until, state=copy.deepcopy(st0), input_stage=BEFORE_CLONE)
                    mine = pr.to_graphdef()
                except Exception as e:
                    chk.problems.append(Problem(until, f"jitsim failed: {type(e).__name__}: {e}"))
                    break
                d = diff_graphdefs(mine, truth(tf_stage), ignore_attrs=IGNORED_ATTRS)
                if d.identical:
                    continue
                if until == "build-xla-ops" and _only_int32_routing(d):
                    chk.tf_nondeterminism.append(f"{until}: int32 routing: {d.summary()}")
                    continue
                if _only_clone_permutation(d):
                    chk.tf_nondeterminism.append(f"{until}: constant clones permuted: {d.summary()}")
                    continue
                chk.problems.append(Problem(until, d.summary(), d.format_text(limit=30), mine, rec.files[tf_stage],
                                            labels))
                break  # later stages inherit the difference
        if BEFORE_MARK in rec.files:
            chk.stages.append("mark-from-before-mark")
            bm0 = copy.deepcopy(state_bm)
            try:
                g = Graph(read_graphdef(dumps / rec.files[BEFORE_MARK]), source=rec.files[BEFORE_MARK], validate=False)
                res = cluster_graph(g, flags, state=state_bm, input_stage=BEFORE_MARK)
                tl = labels_of_graphdef(truth("mark_for_compilation")) if "mark_for_compilation" in rec.files \
                    else {n: None for n in res.labels()}
                d = compare_partitions(res.labels(), tl)
                if not d.same_names:
                    chk.problems.append(Problem("mark-from-before-mark", d.summary(), d.format_text(limit=30),
                                                res.to_graphdef(), rec.files.get("mark_for_compilation"),
                                                dict(res.labels())))
                    _resync(state_bm, tl, bm0)
            except Exception as e:
                chk.problems.append(Problem("mark-from-before-mark", f"jitsim failed: {type(e).__name__}: {e}"))
    return out


# -- running programs under TF ------------------------------------------------------------------


@dataclass
class BatchRun:
    """One TF process over several programs."""

    root: Path  # holds dumps/, log.txt, ex<id>.py
    ids: list[int]
    ran: list[int]  # ids whose BEGIN marker TF printed
    errors: dict[int, str]  # id -> exception TF raised
    crashed: int | None  # id running when the process died, if it did
    owners: dict[str, int]  # dump file -> id
    wall_s: float
    log_text: str

    @property
    def dumps(self) -> Path:
        return self.root / "dumps"


def _parse_log(text: str) -> tuple[list[int], dict[int, str], dict[str, int], bool]:
    import re

    dumped = re.compile(r"Dumped (?:Graph|FunctionDef) to (\S+)")
    ran, errors, owners, ended = [], {}, {}, False
    current = -1
    for line in text.splitlines():
        if line.startswith(_BEGIN):
            current = int(line[len(_BEGIN):].split()[0])
            ran.append(current)
            continue
        if line.startswith(_ERROR):
            pid, _, msg = line[len(_ERROR):].partition(" ")
            errors[int(pid)] = msg
            continue
        if line.startswith(_END):
            ended = True
            continue
        m = dumped.search(line)
        if m:
            owners.setdefault(Path(m.group(1)).name, current)
    return ran, errors, owners, ended


def run_batch(programs: list[tuple[int, str]], flags: str, devices: int, root: Path, *, grappler: bool = True,
              timeout: float = 600.0, python: str | None = None) -> BatchRun:
    """Run ``(id, body source)`` programs in one TF process with the dump flags; ``root`` receives
    ``ex<id>.py``, ``dumps/`` and ``log.txt``."""
    from jitsim.testing.program import header_source

    # absolute: the runner runs with cwd=root, so a relative root would be joined twice
    root = Path(root).absolute()
    root.mkdir(parents=True, exist_ok=True)
    dumps = root / "dumps"
    if dumps.exists():
        shutil.rmtree(dumps)
    dumps.mkdir()
    paths = []
    for pid, src in programs:
        p = root / f"ex{pid}.py"
        p.write_text(header_source(1) + "\n" + src)
        paths.append([pid, str(p)])
    (root / "programs.json").write_text(json.dumps(paths))
    (root / "config.json").write_text(json.dumps({"flags": flags, "devices": devices, "grappler": grappler}) + "\n")
    runner = root / "runner.py"
    runner.write_text(_RUNNER.format(header=header_source(devices, grappler), begin=_BEGIN, error=_ERROR, end=_END,
                                      timeout=PROGRAM_TIMEOUT))
    env = harvest_env(dumps, flags)
    env["TF_CPP_MIN_LOG_LEVEL"] = "0"
    t0 = time.monotonic()
    log_path = root / "log.txt"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([python or sys.executable, str(runner), str(root / "programs.json")], cwd=root,
                                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        except KeyboardInterrupt:
            proc.kill()
            raise
    wall = time.monotonic() - t0
    text = log_path.read_text(errors="replace")
    ran, errors, owners, ended = _parse_log(text)
    crashed = None
    if not ended:
        crashed = ran[-1] if ran else (programs[0][0] if programs else None)
    return BatchRun(root, [p for p, _ in programs], ran, errors, crashed, owners, wall, text)


def run_programs(programs: list[tuple[int, str]], flags: str, devices: int, root: Path, *, grappler: bool = True,
                 timeout: float = 600.0) -> list[BatchRun]:
    """:func:`run_batch`, restarting after a TF crash with the programs not yet run (the crashing
    program is reported, not retried)."""
    runs = []
    todo = list(programs)
    k = 0
    while todo:
        r = run_batch(todo, flags, devices, root / f"run{k}", grappler=grappler, timeout=timeout)
        if not r.ran:
            from jitsim.crosscheck.harvest import _last_error_line

            raise JitsimError(f"TensorFlow did not start: {_last_error_line(r.log_text)}", r.root)
        runs.append(r)
        if r.crashed is None:
            break
        done = set(r.ran)
        todo = [(p, s) for p, s in todo if p not in done]
        k += 1
    return runs


# -- TF against TF: is TF stable where jitsim differs? --------------------------------------------
#
# With Grappler off TF clusters graphs whose edges it iterates in pointer-hashed sets while
# lowering and inlining, and the same program can give another encapsulate/build-xla-ops graph
# in another process. So every graph where jitsim differs from TF runs again (evaluate's
# ``tf_reruns``) and TF is compared with itself, cluster names canonicalised, before the
# difference counts.

# "input": TF's before_clone dump itself (node rows), the stage before every other one
STABILITY_STAGES = ("input", "mark", "decluster", "encapsulate", "build-xla-ops")
_STABILITY_STAGE = {"input": "input", "mark": "mark", "mark-from-before-mark": "mark", "decluster": "decluster",
                    "encapsulate": "encapsulate", "build-xla-ops": "build-xla-ops"}
_STAGE_FILE = dict(STAGE_TRUTH, input=BEFORE_CLONE)
LONE_RERUNS_PER_BATCH = 20  # programs rerun alone (one TF process each) per batch and round, at most
_CLUSTER_TOKEN = re.compile(r"(?<![\w.])cluster_\d+(?!\d)")


def _cluster_members(labels: dict) -> dict[str, list[str]]:
    """cluster -> its member nodes, for a labelling (node -> cluster or None)."""
    members: dict[str, list[str]] = {}
    for node, c in labels.items():
        if c:
            members.setdefault(c, []).append(node)
    return members


def cluster_partition(gd) -> list[str]:
    """The clusters of a graph (``_XlaCluster`` attrs) as sorted ``cluster{member, ...}`` strings:
    the partition without the names, which carry TF's process-wide counter."""
    from jitsim.crosscheck.scoring import labels_of_graphdef

    groups = _cluster_members(labels_of_graphdef(gd))
    return sorted("cluster{" + ", ".join(sorted(m)) + "}" for m in groups.values())


def canonical_cluster_names(labels: dict) -> dict[str, str]:
    """``cluster_<n>`` -> ``cluster{<its smallest member>}`` for a labelling (node -> cluster)."""
    return {c: "cluster{" + min(ns) + "}" for c, ns in _cluster_members(labels).items()}


def canonical_rows(gd, labels: dict) -> list[str]:
    """The node list of a graph as sorted ``name = op(inputs)`` rows, every ``cluster_<n>`` token
    (in names, ops -- encapsulate's call nodes -- and inputs) renamed after the cluster's members
    in ``labels`` (the mark labelling of the same run). Data inputs keep their order (argument
    and result order are what TF varies); control inputs are sorted; the function library and
    attrs are ignored. Sorted because encapsulate emits its call nodes in cluster-name order."""
    names = canonical_cluster_names(labels)

    def canon(s: str) -> str:
        return _CLUSTER_TOKEN.sub(lambda m: names.get(m.group(0), "cluster{?}"), s)

    rows = []
    for n in gd.node:
        data = [canon(x) for x in n.input if not x.startswith("^")]
        ctrl = sorted(canon(x) for x in n.input if x.startswith("^"))
        rows.append(f"{canon(n.name)} = {canon(n.op)}({', '.join(data + ctrl)})")
    return sorted(rows)


def canonical_form(stage: str, gd, labels: dict | None = None) -> list[str]:
    """What is compared between two TF runs (and jitsim) at a stage, as a sorted multiset of
    rows: ``mark`` the partition; ``decluster`` the partition and the node rows; ``input``,
    ``encapsulate`` and ``build-xla-ops`` the node rows (:func:`canonical_rows`, cluster names
    from ``labels``)."""
    stage = _STABILITY_STAGE[stage]
    if gd is None:
        return []
    if stage == "mark":
        return cluster_partition(gd)
    rows = canonical_rows(gd, labels or {})
    if stage == "decluster":
        rows = sorted(rows + cluster_partition(gd))
    return rows


def canonical_difference(a: list[str], b: list[str]) -> tuple[list[str], list[str]]:
    """Rows only in ``a``, rows only in ``b`` (as multisets)."""
    from collections import Counter

    ca, cb = Counter(a), Counter(b)
    return sorted((ca - cb).elements()), sorted((cb - ca).elements())


@dataclass
class _TFGraph:
    """One graph of one TF run, read lazily for TF-vs-TF comparison."""

    run: str  # "batch", "reversed", "ex12 alone", ...
    dumps: Path
    record: object  # dumps.DumpGraph
    _forms: dict = field(default_factory=dict)

    def path(self, stage: str) -> Path | None:
        f = self.record.files.get(_STAGE_FILE[_STABILITY_STAGE[stage]])
        return None if f is None else self.dumps / f

    def signature(self) -> tuple | None:
        from jitsim.graph.io import read_graphdef

        f = self.record.files.get(BEFORE_CLONE)
        if f is None:
            return None
        return tuple(sorted((n.name, n.op) for n in read_graphdef(self.dumps / f).node))

    def form(self, stage: str) -> list[str] | None:
        """The canonical form at a stage (None: TF dumped nothing for it)."""
        from jitsim.crosscheck.scoring import labels_of_graphdef
        from jitsim.graph.io import read_graphdef

        stage = _STABILITY_STAGE[stage]
        if stage not in self._forms:
            p = self.path(stage)
            if p is None:
                self._forms[stage] = None
            else:
                mark = self.path("mark")
                labels = labels_of_graphdef(read_graphdef(mark)) if mark is not None else {}
                self._forms[stage] = canonical_form(stage, read_graphdef(p), labels)
        return self._forms[stage]


@dataclass
class Instability:
    """A difference from TF on a graph where TF differed from itself when run again."""

    graph: int  # graph id in the first run
    problem: Problem
    stage: str  # where TF differed from itself (the problem's stage or an earlier one)
    runs: tuple[str, str]  # the first run and the rerun that differed
    tf: tuple  # the two _TFGraph (their dumps are in the campaign's work directory)
    only: tuple  # canonical rows only in runs[0], only in runs[1]
    jitsim_matches: list[str]  # runs whose output at the problem's stage equals jitsim's
    runs_compared: list[str]
    evidence: str = ""

    def line(self) -> str:
        m = ("jitsim matches TF's output of " + ", ".join(self.jitsim_matches)) if self.jitsim_matches \
            else "jitsim matches none of TF's outputs"
        return (f"graph {self.graph} {self.problem.stage}: TF differed from itself at {self.stage} "
                f"({self.runs[0]} vs {self.runs[1]}: {len(self.only[0])}/{len(self.only[1])} rows apart); {m}")

    def to_dict(self) -> dict:
        return {"graph": self.graph, "problem_stage": self.problem.stage, "summary": self.problem.summary,
                "tf_differs_at": self.stage, "runs": list(self.runs), "runs_compared": self.runs_compared,
                "only_in_first": self.only[0], "only_in_rerun": self.only[1],
                "jitsim_matches": self.jitsim_matches}


def _jitsim_form(p: Problem) -> list[str] | None:
    if p.predicted is None:
        return None
    return canonical_form(p.stage, p.predicted, p.labels)


def judge_stability(first: _TFGraph, reruns: list[_TFGraph], p: Problem, graph: int) -> Instability | None:
    """Whether TF's output for the graph differed between the first run and a rerun at the
    problem's stage or an earlier one (canonical forms); None when every run agreed."""
    upto = STABILITY_STAGES[:STABILITY_STAGES.index(_STABILITY_STAGE[p.stage]) + 1]
    for st in upto:
        base = first.form(st)
        for other in reruns:
            if other.form(st) == base:
                continue
            a, b = base or [], other.form(st) or []
            only = canonical_difference(a, b)
            mine = _jitsim_form(p)
            everyone = [first] + reruns
            matches = [g.run for g in everyone if mine is not None and g.form(p.stage) == mine]
            u = Instability(graph, p, st, (first.run, other.run), (first, other), only, matches,
                            [g.run for g in everyone])
            u.evidence = _evidence_text(u, first, other, base is None, other.form(st) is None)
            return u
    return None


def _evidence_text(u: Instability, first: _TFGraph, other: _TFGraph, first_none: bool, other_none: bool,
                   limit: int = 12) -> str:
    inp = first.record.files.get(BEFORE_CLONE, "?")
    out = [f"graph {u.graph} (TF input {inp}): jitsim differs from TF at {u.problem.stage}: {u.problem.summary}",
           f"The same graph (same input node list) ran under TF {len(u.runs_compared)} times: "
           + ", ".join(u.runs_compared) + ".",
           f"TF differed from itself at {u.stage} ({_STAGE_FILE[u.stage]}, cluster names canonicalised as "
           f"cluster{{<smallest member>}}): run '{u.runs[0]}' vs run '{u.runs[1]}':"]
    for run, rows, none in ((u.runs[0], u.only[0], first_none), (u.runs[1], u.only[1], other_none)):
        if none:
            out.append(f"  {run}: TF dumped no {_STAGE_FILE[u.stage]} for the graph")
        out.append(f"  {len(rows)} row(s) only in {run}:")
        out += [f"    {r}" for r in rows[:limit]] + ([f"    ... {len(rows) - limit} more"] if len(rows) > limit else [])
    out.append(("jitsim's prediction at " + u.problem.stage + " equals TF's output of: " + ", ".join(u.jitsim_matches))
               if u.jitsim_matches else
               f"jitsim's prediction at {u.problem.stage} equals none of TF's outputs"
               + (" (jitsim made none)" if u.problem.predicted is None else ""))
    return "\n".join(out)


def _index_runs(runs: list, label: str) -> list[tuple[int, tuple, _TFGraph]]:
    """(owner, input signature, graph) for every graph of a rerun with an input dump."""
    out = []
    for r in runs:
        for rec in group_dumps(r.dumps, r.log_text):
            g = _TFGraph(label, r.dumps, rec)
            sig = g.signature()
            if sig is not None:
                out.append((r.owners.get(next(iter(rec.files.values())), -1), sig, g))
    return out


def tf_stability(checks: list[tuple[GraphCheck, Path]], examples: list[Example], root: Path, *, rounds: int = 1,
                 timeout: float = 600.0, lone_cap: int = LONE_RERUNS_PER_BATCH, log=None) -> None:
    """Run a batch's disagreeing programs again under TF and mark each difference from TF
    (``GraphCheck.tf_unstable`` / ``tf_stable``) by whether TF agreed with itself there.

    ``checks``: the batch's checks with the dump directory of each; ``examples``: the batch, in
    the order it ran (one process configuration). Each round runs the programs owning a graph
    with a difference in reversed order in one process, then each of them alone in its own
    process (``lone_cap`` at most; not those already shown unstable). With clustering fuel, whose
    use carries over between graphs of a process, a round reruns the whole batch in the same
    order instead. A graph is matched by owner and the sorted (name, op) list of its input dump
    (the n-th such graph of its owner; else, if its owner ran in the rerun, any graph with that
    signature: warm-up graphs belong to whichever program runs first). TF's input dumps are
    compared too (stage ``input``): the signature leaves out the edges."""
    suspects = [(c, d) for c, d in checks if c.tf_problems() and BEFORE_CLONE in c.record.files]
    if rounds < 1 or not suspects or not examples:
        return
    from jitsim.passes.flags import INT64_MAX, parse_tf_xla_flags

    ex0 = examples[0]
    owners = {c.owner for c, _ in suspects}
    progs = [ex for ex in examples if ex.id in owners] or examples[:1]
    fuel = parse_tf_xla_flags(ex0.flags).clustering_fuel < INT64_MAX
    # the first run's graphs: signature and occurrence among its owner's graphs of that signature
    firsts: dict[int, tuple[_TFGraph, tuple, int]] = {}
    seen: dict[tuple, int] = {}
    for c, d in checks:
        if c.owner not in owners or BEFORE_CLONE not in c.record.files:
            continue
        g = _TFGraph("batch", d, c.record)
        sig = g.signature()
        k = seen.get((c.owner, sig), 0)
        seen[(c.owner, sig)] = k + 1
        firsts[id(c)] = (g, sig, k)
    variants: dict[int, list[_TFGraph]] = {id(c): [] for c, _ in suspects}

    def unstable(c) -> bool:
        first = firsts[id(c)][0]
        return all(judge_stability(first, variants[id(c)], p, c.record.id) for p in c.tf_problems())

    def rerun(label: str, exs: list[Example], where: Path) -> None:
        try:
            runs = run_programs([(ex.id, ex.source()) for ex in exs], ex0.flags, ex0.devices, where,
                                grappler=ex0.grappler, timeout=timeout)
        except JitsimError as e:
            if log:
                log(f"TF rerun {label} failed: {e}")
            return
        idx = _index_runs(runs, label)
        ran = {ex.id for ex in exs} | {-1}
        for c, _ in suspects:
            if c.owner not in ran:
                continue
            _, sig, k = firsts[id(c)]
            same = [g for o, s, g in idx if o == c.owner and s == sig]
            if len(same) <= k:  # a warm-up graph another program of the rerun owns now
                same = [g for o, s, g in idx if s == sig]
            if same:
                variants[id(c)].append(same[min(k, len(same) - 1)])

    for r in range(rounds):
        tag = "" if rounds == 1 else f" #{r + 1}"
        if fuel:
            rerun("batch again" + tag, examples, root / f"rerun{r}-same")
            continue
        rerun("reversed" + tag, progs[::-1], root / f"rerun{r}-reversed")
        if len(progs) > 1:
            for ex in progs[:lone_cap]:
                if all(unstable(c) for c, _ in suspects if c.owner == ex.id):
                    continue
                rerun(f"ex{ex.id} alone" + tag, [ex], root / f"rerun{r}-ex{ex.id}")
    for c, _ in suspects:
        first = firsts[id(c)][0]
        vs = variants[id(c)]
        if not vs:
            c.tf_stable.append(f"graph {c.record.id}: not found again in any TF rerun (counted)")
            continue
        for p in c.tf_problems():
            u = judge_stability(first, vs, p, c.record.id)
            if u is not None:
                c.tf_unstable.append(u)
            else:
                c.tf_stable.append(f"graph {c.record.id} {p.stage}: TF gave the same output in "
                                   f"{1 + len(vs)} runs ({', '.join(['batch'] + [g.run for g in vs])})")


# -- campaign ---------------------------------------------------------------------------------------


@dataclass
class Example:
    id: int
    program: object  # testing.program.Program
    flags: str
    devices: int
    grappler: bool = True

    def source(self) -> str:
        from jitsim.testing.program import body_source

        return body_source(self.program)


@dataclass
class Outcome:
    example: Example
    problems: list[tuple[int, Problem]] = field(default_factory=list)  # disagreements: (graph id, problem)
    # differences from TF where TF differed from itself when run again: not disagreements
    tf_unstable: list[Instability] = field(default_factory=list)
    tf_stable: list[str] = field(default_factory=list)  # differences the reruns found TF stable on
    not_rebuilt: list[int] = field(default_factory=list)  # graphs with differences that TF never rebuilt
    error: str | None = None  # exception TF raised running it (after its graphs ran, usually)
    crashed: bool = False
    graphs: int = 0
    tf_nondeterminism: list[str] = field(default_factory=list)


def draw_examples(n: int, seed: int, *, batch_size: int = 40, profile: str = "full", features=None) -> list[Example]:
    """N programs and their process configuration, reproducibly from ``seed``.

    ``profile``: ``full`` (every feature, any flags), ``ci`` (same programs, flags limited to
    the default and one varied configuration so that the sample runs in two TF processes),
    ``no-grappler`` (any flags, Grappler off in every process: TF then clusters graphs it never
    rebuilt, whose edge order jitsim reconstructs from node names -- see docs/fuzzing.md), ``large`` (as
    ``full`` with programs up to 30 top-level statements and control flow three deep)."""
    try:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import seed as hseed
    except ImportError:
        raise JitsimError("generating programs needs Hypothesis: pip install 'jitsim[fuzz]'") from None
    from jitsim.testing.strategies import (
        BASE_FLAGS, Features, ProcessConfig, process_configs, programs, same_draws_everywhere,
    )

    if features is None and profile == "large":
        features = Features(max_statements=30, block_statements=5, max_depth=3)

    drawn: list = []
    common = dict(database=None, phases=[Phase.generate], deadline=None, suppress_health_check=list(HealthCheck),
                  derandomize=False)

    @hseed(seed)
    @settings(max_examples=max(1, n), **common)
    @given(programs(features))
    def draw_programs(p):
        if len(drawn) < n:
            drawn.append(p)

    with same_draws_everywhere():  # the seed alone decides (not what the process imported)
        draw_programs()
    while len(drawn) < n:  # Hypothesis stops early only if it ran out of distinct examples
        drawn.append(drawn[len(drawn) % max(1, len(drawn))])
    n_batches = max(1, -(-n // batch_size))
    configs: list = []
    if profile == "ci":
        configs = [ProcessConfig(BASE_FLAGS, 1), ProcessConfig(
            BASE_FLAGS + " --tf_xla_min_cluster_size=2 --tf_xla_max_cluster_size=5", 2)]
    else:
        @hseed(seed + 1)
        @settings(max_examples=max(1, 4 * n_batches), **common)
        @given(process_configs(grappler="off" if profile == "no-grappler" else "on"))
        def draw_configs(c):
            if len(configs) < n_batches and c not in configs:
                configs.append(c)

        with same_draws_everywhere():
            draw_configs()
        if not configs:
            configs = [ProcessConfig(BASE_FLAGS, 1)]
    out = []
    for i, p in enumerate(drawn):
        if profile == "ci":  # half the sample in each configuration
            c = configs[i * len(configs) // max(1, n)]
        else:
            c = configs[(i // batch_size) % len(configs)]
        out.append(Example(i, p, c.flags, c.devices, c.grappler))
    return out


def evaluate(examples: list[Example], work: Path, *, timeout: float = 600.0, invariants: bool = True,
             batch_size: int = 40, progress=None, tf_reruns: int = 1,
             log=None) -> tuple[list[Outcome], list[GraphCheck]]:
    """Run examples under TF (batched by process configuration, at most ``batch_size`` per
    process) and compare jitsim with TF. Returns the outcome per example and the checks of
    graphs no example owns.

    ``tf_reruns``: rounds of TF reruns of each batch's programs with a difference from TF
    (:func:`tf_stability`; 0: none). A difference at a stage where TF's own output changed
    between runs (there or at an earlier stage) goes to ``Outcome.tf_unstable``; every other
    one is a disagreement, on a graph TF rebuilt or not."""
    by_config: dict[tuple, list[Example]] = {}
    for ex in examples:
        by_config.setdefault((ex.flags, ex.devices, ex.grappler), []).append(ex)
    groups: dict[tuple, list[Example]] = {}
    for key, exs in by_config.items():
        for k in range(0, len(exs), max(1, batch_size)):
            groups[key + (k,)] = exs[k:k + batch_size]
    outcomes = {ex.id: Outcome(ex) for ex in examples}
    orphans: list[GraphCheck] = []
    done = 0
    for gi, ((flags, devices, grappler, _), exs) in enumerate(groups.items()):
        root = work / f"batch{gi}"
        runs = run_programs([(ex.id, ex.source()) for ex in exs], flags, devices, root, grappler=grappler,
                            timeout=timeout)
        checks: list[tuple[GraphCheck, Path]] = []
        for r in runs:
            for pid, msg in r.errors.items():
                outcomes[pid].error = msg
            if r.crashed is not None and r.crashed in outcomes:
                outcomes[r.crashed].crashed = True
            checks += [(chk, r.dumps) for chk in check_dumps(r.dumps, r.log_text, flags, owners=r.owners,
                                                              invariants=invariants)]
        if tf_reruns > 0:
            tf_stability(checks, exs, root, rounds=tf_reruns, timeout=timeout, log=log)
        for chk, _ in checks:
            if chk.owner in outcomes:
                o = outcomes[chk.owner]
                o.graphs += 1
                o.problems += [(chk.record.id, p) for p in chk.counted()]
                o.tf_unstable += chk.tf_unstable
                o.tf_stable += chk.tf_stable
                if not chk.rebuilt and chk.tf_problems():
                    o.not_rebuilt.append(chk.record.id)
                o.tf_nondeterminism += chk.tf_nondeterminism
            else:
                orphans.append(chk)
        done += len(exs)
        if progress:
            progress(done, len(examples), sum(1 for o in outcomes.values() if o.problems))
    return [outcomes[ex.id] for ex in examples], orphans


def _signature(o: Outcome) -> set[str]:
    return {p.stage for _, p in o.problems}


def _kind(o: Outcome) -> str:
    """Stage and the kinds of difference of an outcome's first problem (for grouping)."""
    import re

    p = o.problems[0][1]
    return p.stage + ":" + ",".join(sorted(set(re.findall(r"\d+ ([a-z_ ]+?)(?:,|\s\(|$)", p.summary))))


def shrink(example: Example, outcome: Outcome, work: Path, *, budget_s: float = 180.0, max_candidates: int = 48,
           timeout: float = 600.0, log=None) -> tuple[Example, Outcome]:
    """Greedy shrinking against TF: each round runs every one-step reduction of the current
    program in one TF process and keeps the simplest one that still disagrees at a stage where
    the original did (no TF reruns there: a candidate's difference counts as it is). Returns the
    simplest example found and its outcome."""
    import dataclasses

    from jitsim.testing.program import chunk_reductions, reductions

    t0 = time.monotonic()
    cur = example
    target = _signature(outcome)
    best_outcome = outcome
    rnd = 0
    while time.monotonic() - t0 < budget_s:
        key = cur.program.shrink_key()
        big = [q for q in chunk_reductions(cur.program) if q.shrink_key() < key]
        small = sorted((q for q in reductions(cur.program) if q.shrink_key() < key), key=lambda q: q.shrink_key())
        cands = (big + small)[:max_candidates]
        if not cands:
            break
        rnd += 1
        exs = [dataclasses.replace(cur, id=k, program=q) for k, q in enumerate(cands)]
        outs, _ = evaluate(exs, work / f"round{rnd}", timeout=timeout, tf_reruns=0)
        hit = next((o for o in outs if o.problems and _signature(o) & target), None)
        shutil.rmtree(work / f"round{rnd}", ignore_errors=True)
        if hit is None:
            break
        cur = dataclasses.replace(hit.example, id=example.id)
        best_outcome = hit
        if log:
            log(f"  shrink round {rnd}: {cur.program.size()} statements")
    return cur, best_outcome


def write_reproducer(example: Example, outcome: Outcome, dest: Path, *, seed: int | None = None,
                     timeout: float = 600.0) -> Path:
    """Write a reproducer directory for a disagreeing example (see the module docstring). The
    program is run once more alone in a fresh TF process: that run's dumps are ``harvest/``
    (reduced like the corpus) and the graph files come from it when it reproduces."""
    from jitsim.crosscheck.corpus import KEEP_STAGES, _filter_log
    from jitsim.crosscheck.dumps import parse_stage
    from jitsim.graph.io import save
    from jitsim.testing.program import program_to_json, to_python

    dest.mkdir(parents=True, exist_ok=True)
    title = f"jitsim fuzz example {example.id}" + (f" (seed {seed})" if seed is not None else "")
    (dest / "program.py").write_text(to_python(example.program, flags=example.flags, devices=example.devices,
                                               grappler=example.grappler, title=title))
    (dest / "program.json").write_text(json.dumps(program_to_json(example.program), indent=1) + "\n")
    h = dest / "harvest"
    if h.exists():
        shutil.rmtree(h)
    (h / "dumps").mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="jitsim-repro-") as tmp:
        r = run_batch([(example.id, example.source())], example.flags, example.devices, Path(tmp),
                      grappler=example.grappler, timeout=timeout)
        for f in r.dumps.iterdir():
            st = parse_stage(f.name)
            if st is not None and st[0] in KEEP_STAGES:
                shutil.copyfile(f, h / "dumps" / f.name)
        (h / "log.txt").write_text(_filter_log(r.log_text))
    checks = check_dumps(h / "dumps", (h / "log.txt").read_text(), example.flags)
    found = [(c, p) for c in checks for p in c.problems]
    reproduced = bool(found)
    problems = [(c.record.id, p) for c, p in found] if found else outcome.problems
    gid, prob = problems[0]
    if found:
        chk = found[0][0]
        if BEFORE_CLONE in chk.record.files:
            shutil.copyfile(h / "dumps" / chk.record.files[BEFORE_CLONE], dest / "input.pbtxt")
        if prob.truth_file:
            shutil.copyfile(h / "dumps" / prob.truth_file, dest / "tf.pbtxt")
    if prob.predicted is not None:
        save(prob.predicted, dest / "jitsim.pbtxt")
    (dest / "diff.txt").write_text("\n\n".join(f"graph {g}, stage {p.stage}: {p.summary}\n{p.detail}"
                                             for g, p in problems) + "\n")
    config = {"schema": "jitsim.fuzz-reproducer/1", "example": example.id, "seed": seed, "flags": example.flags,
              "devices": example.devices, "grappler": example.grappler, "stage": prob.stage, "graph": gid, "summary": prob.summary,
              "statements": example.program.size(), "standalone_reproduces": reproduced,
              "problems": [dict(p.to_dict(), graph=g) for g, p in problems]}
    (dest / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    note = ("Run alone, the program reproduces it (harvest/ holds that run's dumps).\n" if reproduced else
            "Run alone, the program does NOT reproduce it: the batch's earlier graphs matter (process state).\n")
    (dest / "README.md").write_text(
        f"# {title}: {prob.stage} differs\n\n{prob.summary}\n\n"
        f"* `program.py`: the program (TF_XLA_FLAGS={example.flags!r}, {example.devices} CPU device(s)"
        f"{'' if example.grappler else ', Grappler off'})\n"
        "* `input.pbtxt`: TF's `before_clone_constants_for_better_clustering` dump of the graph\n"
        "* `tf.pbtxt` / `jitsim.pbtxt`: TF's and jitsim's graph after the stage; `diff.txt`: the comparison\n"
        "* `harvest/`: the program run alone under TF (`dumps/`, `log.txt`)\n\n" + note +
        "\nReplay jitsim on the dumps: `python -c \"from jitsim.crosscheck.fuzz import check_fixture; "
        "print(check_fixture('.'))\"`.\n"
        "Once fixed, make it a regression fixture: copy this directory to `fixtures/fuzz/<name>/`\n"
        "(tests/test_fuzz_fixtures.py replays every one).\n")
    return dest


FIXTURE_FILES = ("program.py", "program.json", "config.json", "README.md", "diff.txt", "evidence.txt")


def load_example(repro: Path | str) -> Example:
    """The example of a reproducer or fixture directory (its ``program.json`` and ``config.json``),
    e.g. to shrink it further: ``shrink(ex, evaluate([ex], work)[0][0], work)``."""
    from jitsim.testing.program import program_from_json

    repro = Path(repro)
    config = json.loads((repro / "config.json").read_text())
    program = program_from_json(json.loads((repro / "program.json").read_text()))
    return Example(config.get("example", 0), program, config["flags"], config.get("devices", 1),
                   config.get("grappler", True))


def make_fixture(repro: Path | str, dest: Path | str) -> Path:
    """Turn a reproducer directory into a regression fixture: the program, its configuration,
    the notes, and TF's dumps packed as a deterministic ``harvest.tar.xz``."""
    repro, dest = Path(repro), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for f in FIXTURE_FILES:
        if (repro / f).exists():
            shutil.copyfile(repro / f, dest / f)
    from jitsim.crosscheck.corpus import pack_tar_xz

    files = sorted(p for p in (repro / "harvest").rglob("*") if p.is_file())
    pack_tar_xz(dest / "harvest.tar.xz", [(str(p.relative_to(repro)), p.read_bytes()) for p in files])
    return dest


def check_fixture(path: Path | str) -> list[str]:
    """Replay a reproducer or fixture directory: jitsim vs the TF dumps in ``harvest/`` (or
    ``harvest.tar.xz``). Returns one line per problem (empty: jitsim agrees with TF on every
    graph; TF's known nondeterminism does not count)."""
    import tarfile

    path = Path(path)
    config = json.loads((path / "config.json").read_text())
    with tempfile.TemporaryDirectory(prefix="jitsim-fixture-") as tmp:
        h = path / "harvest"
        if not h.is_dir():
            with tarfile.open(path / "harvest.tar.xz", "r:xz") as tar:
                tar.extractall(tmp, filter="data")
            h = Path(tmp) / "harvest"
        out = []
        for chk in check_dumps(h / "dumps", (h / "log.txt").read_text(errors="replace"), config["flags"]):
            out += [f"graph {chk.record.id} {p.stage}: {p.summary}" for p in chk.problems]
    return out


def write_tf_unstable(example: Example, unstable: list[Instability], dest: Path, *, seed: int | None = None) -> Path:
    """Write the evidence that TF differed from itself where jitsim differed from TF:
    ``program.py``, for each graph TF's two outputs at the stage (``g<graph>-<stage>-<run>.pbtxt``,
    and at the earlier stage where TF first differed, if any), jitsim's prediction
    (``g<graph>-<stage>-jitsim.pbtxt``) and ``evidence.txt``."""
    from jitsim.graph.io import save
    from jitsim.testing.program import to_python

    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    title = f"jitsim fuzz example {example.id}" + (f" (seed {seed})" if seed is not None else "")
    (dest / "program.py").write_text(to_python(example.program, flags=example.flags, devices=example.devices,
                                               grappler=example.grappler, title=title))
    texts = []
    for u in unstable:
        files = []
        for st in dict.fromkeys((u.problem.stage, u.stage)):
            for g in u.tf:
                src = g.path(st)
                if src is not None and src.exists():
                    name = f"g{u.graph}-{st}-" + re.sub(r"[^A-Za-z0-9]+", "-", g.run).strip("-") + ".pbtxt"
                    shutil.copyfile(src, dest / name)
                    files.append(name)
        if u.problem.predicted is not None:
            name = f"g{u.graph}-{u.problem.stage}-jitsim.pbtxt"
            save(u.problem.predicted, dest / name)
            files.append(name)
        texts.append(u.evidence + "\nFiles: " + ", ".join(files))
    run = f"TF_XLA_FLAGS='{example.flags}' python program.py"
    (dest / "evidence.txt").write_text(
        f"{title}: jitsim differs from TF only where TF differs from itself\n"
        f"(TF_XLA_FLAGS={example.flags!r}, {example.devices} CPU device(s)"
        f"{'' if example.grappler else ', Grappler off'}; `{run}` with TF_DUMP_GRAPH_PREFIX set reruns it)\n\n"
        + "\n\n".join(texts) + "\n")
    return dest


@dataclass
class CampaignResult:
    examples: int
    disagreements: int  # examples with a difference TF's reruns did not explain, or a broken invariant
    outcomes: list[Outcome]
    orphans: list[GraphCheck]
    reproducers: list[Path]
    wall_s: float
    tf_errors: int
    crashes: int
    graphs: int
    tf_nondeterminism: int
    tf_unstable: int = 0  # examples whose only differences are on graphs where TF differed from itself
    tf_unstable_dirs: list[Path] = field(default_factory=list)  # OUT/tf-unstable/ex<id>/
    tf_reruns: int = 1

    def final_line(self) -> str:
        return f"{self.examples} examples, {self.disagreements} disagreements"


def campaign(n: int, seed: int = 0, *, out: Path | str = "fuzz-out", batch_size: int = 40, profile: str = "full",
             shrink_budget_s: float = 180.0, do_shrink: bool = True, max_shrink: int = 10, keep_work: bool = False,
             timeout: float = 600.0, tf_reruns: int = 1, progress=None, log=None) -> CampaignResult:
    """Draw, run, compare, shrink and write reproducers (see the module docstring). At most
    ``max_shrink`` disagreements are shrunk (the first of each kind first); the others get an
    unshrunk reproducer. ``tf_reruns``: see :func:`evaluate`; the evidence for every example
    with a difference where TF differed from itself goes to ``OUT/tf-unstable/ex<id>/``."""
    if n < 1:
        raise JitsimError("--examples must be at least 1")
    if tf_reruns < 0:
        raise JitsimError("--tf-reruns must be 0 or more")
    t0 = time.monotonic()
    out = Path(out).absolute()  # every path below is used from TF processes that run elsewhere
    out.mkdir(parents=True, exist_ok=True)
    examples = draw_examples(n, seed, batch_size=batch_size, profile=profile)
    work = Path(tempfile.mkdtemp(prefix="jitsim-fuzz-", dir=out))
    try:
        outcomes, orphans = evaluate(examples, work, timeout=timeout, batch_size=batch_size, progress=progress,
                                     tf_reruns=tf_reruns, log=log)
        bad = [o for o in outcomes if o.problems]
        # shrink one of each kind (stage and kind of difference) first
        kinds: dict[str, list[Outcome]] = {}
        for o in bad:
            kinds.setdefault(_kind(o), []).append(o)
        order = [os_[0] for os_ in kinds.values()] + [o for os_ in kinds.values() for o in os_[1:]]
        to_shrink = {id(o) for o in order[:max_shrink]} if do_shrink else set()
        repros = []
        for o in bad:
            if log:
                g, p = o.problems[0]
                log(f"example {o.example.id}: {p.stage}: {p.summary}"
                    + (" (graph TF never rebuilt)" if g in o.not_rebuilt else ""))
            ex, oc = o.example, o
            if id(o) in to_shrink:
                ex, oc = shrink(o.example, o, work / f"shrink{o.example.id}", budget_s=shrink_budget_s,
                                timeout=timeout, log=log)
            repros.append(write_reproducer(ex, oc, out / f"ex{o.example.id}-{oc.problems[0][1].stage}", seed=seed,
                                           timeout=timeout))
        unstable_root = out / "tf-unstable"
        if unstable_root.exists():
            shutil.rmtree(unstable_root)
        unstable_dirs = []
        for o in outcomes:
            if o.tf_unstable:
                if log:
                    log(f"example {o.example.id}: TF unstable: {o.tf_unstable[0].line()}"
                        + (" (graph TF never rebuilt)" if o.tf_unstable[0].graph in o.not_rebuilt else ""))
                unstable_dirs.append(write_tf_unstable(o.example, o.tf_unstable, unstable_root / f"ex{o.example.id}",
                                                       seed=seed))
        if orphans and log:
            for c in orphans:
                for p in c.counted():
                    log(f"graph {c.record.id} outside any example: {p.stage}: {p.summary}")
                for u in c.tf_unstable:
                    log(f"graph {c.record.id} outside any example: TF unstable: {u.line()}")
        n_orphan = sum(1 for c in orphans if c.counted())
        return CampaignResult(
            examples=len(examples), disagreements=len(bad) + n_orphan, outcomes=outcomes, orphans=orphans,
            reproducers=repros, wall_s=time.monotonic() - t0, tf_errors=sum(1 for o in outcomes if o.error),
            crashes=sum(1 for o in outcomes if o.crashed), graphs=sum(o.graphs for o in outcomes),
            tf_nondeterminism=sum(len(o.tf_nondeterminism) for o in outcomes),
            tf_unstable=sum(1 for o in outcomes if o.tf_unstable and not o.problems),
            tf_unstable_dirs=unstable_dirs, tf_reruns=tf_reruns)
    finally:
        if not keep_work:
            shutil.rmtree(work, ignore_errors=True)


def write_summary(res: CampaignResult, path: Path, *, seed: int, command: str) -> None:
    data = {
        "schema": "jitsim.fuzz-campaign/2", "command": command, "seed": seed, "examples": res.examples,
        "disagreements": res.disagreements, "graphs_compared": res.graphs, "wall_s": round(res.wall_s, 1),
        "tf_errors": res.tf_errors, "tf_crashes": res.crashes, "tf_nondeterminism": res.tf_nondeterminism,
        "reproducers": [str(p) for p in res.reproducers],
        "tf_error_messages": {str(o.example.id): o.error for o in res.outcomes if o.error},
        "tf_nondeterminism_cases": {str(o.example.id): o.tf_nondeterminism for o in res.outcomes
                                    if o.tf_nondeterminism},
        "tf_reruns": res.tf_reruns,
        "tf_unstable": res.tf_unstable,
        "tf_unstable_cases": {str(o.example.id): [u.to_dict() for u in o.tf_unstable] for o in res.outcomes
                              if o.tf_unstable},
        "tf_unstable_evidence": [str(p) for p in res.tf_unstable_dirs],
        "tf_stable_cases": {str(o.example.id): o.tf_stable for o in res.outcomes if o.problems and o.tf_stable},
        "disagreements_on_graphs_not_rebuilt": {
            str(o.example.id): [f"graph {g} {p.stage}: {p.summary}" for g, p in o.problems if g in o.not_rebuilt]
            for o in res.outcomes if any(g in o.not_rebuilt for g, _ in o.problems)},
        "python": sys.version.split()[0], "cpu_count": os.cpu_count(),
    }
    path.write_text(json.dumps(data, indent=1) + "\n")


__all__ = ["campaign", "canonical_form", "check_dumps", "check_fixture", "draw_examples", "evaluate", "run_batch",
           "shrink", "tf_stability", "write_reproducer", "write_tf_unstable"]
