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
4. shrinks each disagreeing program against TF (greedy one-step reductions, every round's
   candidates in one TF process) and writes a reproducer directory: ``program.py``,
   ``config.json``, TF's input graph, TF's and jitsim's graphs at the stage, the diff, and a
   standalone harvest of the program (``harvest/``) -- what a fixture under ``fixtures/fuzz/``
   keeps (see docs/fuzzing.md).

The last line of a campaign is ``N examples, M disagreements`` (M = examples with at least
one disagreement).
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
    # rebuilt from a GraphDef (Grappler off, or Grappler failed and TF went on without it), whose
    # edge order -- which decides contraction order and cluster result order -- no dump records
    rebuilt: bool = True

    def tf_problems(self) -> list[Problem]:
        """Differences from TF (not jitsim's own invariants)."""
        return [p for p in self.problems if p.stage != "invariants"]


def is_rebuilt(gd) -> bool:
    """Whether a dump's node order is topological, as for every graph TF's GraphConstructor
    built (after Grappler node ids follow a topological order). NextIteration back edges and
    nodes passes add after construction (replicated or cloned constants, feeds, IncreaseDynamism's
    slices: :func:`jitsim.passes.tfgraph.tfgraph_from_dump` places their edges) do not count."""
    from jitsim.passes.tfgraph import CLONE_NAME_RE, CONSTANT_OPS, REPLICA_NAME_RE

    pos = {n.name: i for i, n in enumerate(gd.node)}
    nodes = list(gd.node)

    def added_later(n) -> bool:
        if n.op in CONSTANT_OPS and (REPLICA_NAME_RE.match(n.name) or CLONE_NAME_RE.match(n.name)):
            return True
        return n.name.startswith(("_arg_", "_retval_", "_recv_", "_send_")) or "/static_shaped_slice" in n.name

    for i, n in enumerate(nodes):
        for x in n.input:
            j = pos.get(x[1:] if x.startswith("^") else x.rsplit(":", 1)[0])
            if j is None or j <= i:
                continue
            src = nodes[j]
            if src.op in ("NextIteration", "RefNextIteration") or added_later(src) or added_later(n):
                continue
            return False
    return True


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
            tl = labels_of_graphdef(truth("mark_for_compilation")) if mark_file else {n: None for n in predicted}
            d = compare_partitions(predicted, tl)
            if not d.same_names:
                chk.problems.append(Problem("mark", d.summary(), d.format_text(limit=30), res.to_graphdef(), mark_file))
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
                chk.problems.append(Problem(until, d.summary(), d.format_text(limit=30), mine, rec.files[tf_stage]))
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
                                                res.to_graphdef(), rec.files.get("mark_for_compilation")))
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
    problems: list[tuple[int, Problem]] = field(default_factory=list)  # (graph id, problem)
    # differences from TF on graphs TF never rebuilt (GraphCheck.rebuilt): reported, not counted
    unrebuilt: list[tuple[int, Problem]] = field(default_factory=list)
    error: str | None = None  # exception TF raised running it (after its graphs ran, usually)
    crashed: bool = False
    graphs: int = 0
    tf_nondeterminism: list[str] = field(default_factory=list)


def draw_examples(n: int, seed: int, *, batch_size: int = 40, profile: str = "full", features=None) -> list[Example]:
    """N programs and their process configuration, reproducibly from ``seed``.

    ``profile``: ``full`` (every feature, any flags), ``ci`` (same programs, flags limited to
    the default and one varied configuration so that the sample runs in two TF processes),
    ``no-grappler`` (any flags, Grappler off in every process: TF then clusters a graph it never
    rebuilt, whose edge order the dumps do not record -- see docs/fuzzing.md), ``large`` (as
    ``full`` with programs up to 30 top-level statements and control flow three deep)."""
    try:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import seed as hseed
    except ImportError:
        raise JitsimError("generating programs needs Hypothesis: pip install 'jitsim[fuzz]'") from None
    from jitsim.testing.strategies import BASE_FLAGS, Features, ProcessConfig, process_configs, programs

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
             batch_size: int = 40, progress=None) -> tuple[list[Outcome], list[GraphCheck]]:
    """Run examples under TF (batched by process configuration, at most ``batch_size`` per
    process) and compare jitsim with TF. Returns the outcome per example and the checks of
    graphs no example owns."""
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
        runs = run_programs([(ex.id, ex.source()) for ex in exs], flags, devices, work / f"batch{gi}",
                            grappler=grappler, timeout=timeout)
        for r in runs:
            for pid, msg in r.errors.items():
                outcomes[pid].error = msg
            if r.crashed is not None and r.crashed in outcomes:
                outcomes[r.crashed].crashed = True
            for chk in check_dumps(r.dumps, r.log_text, flags, owners=r.owners, invariants=invariants):
                if chk.owner in outcomes:
                    o = outcomes[chk.owner]
                    o.graphs += 1
                    if chk.rebuilt:
                        o.problems += [(chk.record.id, p) for p in chk.problems]
                    else:
                        o.problems += [(chk.record.id, p) for p in chk.problems if p.stage == "invariants"]
                        o.unrebuilt += [(chk.record.id, p) for p in chk.tf_problems()]
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
    the original did. Returns the simplest example found and its outcome."""
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
        outs, _ = evaluate(exs, work / f"round{rnd}", timeout=timeout)
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


@dataclass
class CampaignResult:
    examples: int
    disagreements: int  # examples with a difference on a graph TF rebuilt, or a broken invariant
    outcomes: list[Outcome]
    orphans: list[GraphCheck]
    reproducers: list[Path]
    wall_s: float
    tf_errors: int
    crashes: int
    graphs: int
    tf_nondeterminism: int
    unrebuilt: int = 0  # examples whose only differences are on graphs TF never rebuilt

    def final_line(self) -> str:
        return f"{self.examples} examples, {self.disagreements} disagreements"


def campaign(n: int, seed: int = 0, *, out: Path | str = "fuzz-out", batch_size: int = 40, profile: str = "full",
             shrink_budget_s: float = 180.0, do_shrink: bool = True, max_shrink: int = 10, keep_work: bool = False,
             timeout: float = 600.0, progress=None, log=None) -> CampaignResult:
    """Draw, run, compare, shrink and write reproducers (see the module docstring). At most
    ``max_shrink`` disagreements are shrunk (the first of each kind first); the others get an
    unshrunk reproducer."""
    if n < 1:
        raise JitsimError("--examples must be at least 1")
    t0 = time.monotonic()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    examples = draw_examples(n, seed, batch_size=batch_size, profile=profile)
    work = Path(tempfile.mkdtemp(prefix="jitsim-fuzz-", dir=out))
    try:
        outcomes, orphans = evaluate(examples, work, timeout=timeout, batch_size=batch_size, progress=progress)
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
                log(f"example {o.example.id}: {o.problems[0][1].stage}: {o.problems[0][1].summary}")
            ex, oc = o.example, o
            if id(o) in to_shrink:
                ex, oc = shrink(o.example, o, work / f"shrink{o.example.id}", budget_s=shrink_budget_s,
                                timeout=timeout, log=log)
            repros.append(write_reproducer(ex, oc, out / f"ex{o.example.id}-{oc.problems[0][1].stage}", seed=seed,
                                           timeout=timeout))
        if log:
            for o in outcomes:
                for g, p in o.unrebuilt[:1]:
                    log(f"example {o.example.id}: graph {g} was never rebuilt by Grappler (edge order unknown): "
                        f"{p.stage}: {p.summary}")
        if orphans and log:
            for c in orphans:
                for p in c.problems:
                    log(f"graph {c.record.id} outside any example: {p.stage}: {p.summary}")
        n_orphan = sum(1 for c in orphans if (c.problems if c.rebuilt else len(c.problems) > len(c.tf_problems())))
        return CampaignResult(
            examples=len(examples), disagreements=len(bad) + n_orphan, outcomes=outcomes, orphans=orphans,
            reproducers=repros, wall_s=time.monotonic() - t0, tf_errors=sum(1 for o in outcomes if o.error),
            crashes=sum(1 for o in outcomes if o.crashed), graphs=sum(o.graphs for o in outcomes),
            tf_nondeterminism=sum(len(o.tf_nondeterminism) for o in outcomes),
            unrebuilt=sum(1 for o in outcomes if o.unrebuilt))
    finally:
        if not keep_work:
            shutil.rmtree(work, ignore_errors=True)


def write_summary(res: CampaignResult, path: Path, *, seed: int, command: str) -> None:
    data = {
        "schema": "jitsim.fuzz-campaign/1", "command": command, "seed": seed, "examples": res.examples,
        "disagreements": res.disagreements, "graphs_compared": res.graphs, "wall_s": round(res.wall_s, 1),
        "tf_errors": res.tf_errors, "tf_crashes": res.crashes, "tf_nondeterminism": res.tf_nondeterminism,
        "reproducers": [str(p) for p in res.reproducers],
        "tf_error_messages": {str(o.example.id): o.error for o in res.outcomes if o.error},
        "tf_nondeterminism_cases": {str(o.example.id): o.tf_nondeterminism for o in res.outcomes
                                    if o.tf_nondeterminism},
        "not_rebuilt": res.unrebuilt,
        "not_rebuilt_cases": {str(o.example.id): [f"graph {g} {p.stage}: {p.summary}" for g, p in o.unrebuilt]
                              for o in res.outcomes if o.unrebuilt},
        "python": sys.version.split()[0], "cpu_count": os.cpu_count(),
    }
    path.write_text(json.dumps(data, indent=1) + "\n")


__all__ = ["campaign", "check_dumps", "check_fixture", "draw_examples", "evaluate", "run_batch", "shrink",
           "write_reproducer"]
