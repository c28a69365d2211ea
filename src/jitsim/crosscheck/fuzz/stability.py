"""TF against TF: is TF stable where jitsim differs?

With Grappler off TF clusters graphs whose edges it iterates in pointer-hashed sets while
lowering and inlining, and the same program can give another encapsulate/build-xla-ops graph
in another process. So every graph where jitsim differs from TF runs again (evaluate's
``tf_reruns``) and TF is compared with itself, cluster names canonicalised
(:func:`canonical_form`), before the difference counts (:func:`tf_stability`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from jitsim.graph.dumps import group_dumps
from jitsim.crosscheck.fuzz.check import BEFORE_CLONE, MARK_FROM_BEFORE_MARK, STAGE_TRUTH, GraphCheck, Problem
from jitsim.defs import STAGES
from jitsim.passes.pipeline import MARK
from jitsim.crosscheck.fuzz.examples import Example
from jitsim.crosscheck.fuzz.tf_runner import run_programs
from jitsim.errors import JitsimError
from jitsim.flags import INT64_MAX, parse_tf_xla_flags
from jitsim.graph.io import read_graphdef

# "input": TF's before_clone dump itself (node rows), the stage before every other one
STABILITY_STAGES = ("input", *STAGES)
_STABILITY_STAGE = {"input": "input", MARK_FROM_BEFORE_MARK: MARK, **{s: s for s in STAGES}}
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
        f = self.record.files.get(BEFORE_CLONE)
        if f is None:
            return None
        return tuple(sorted((n.name, n.op) for n in read_graphdef(self.dumps / f).node))

    def form(self, stage: str) -> list[str] | None:
        """The canonical form at a stage (None: TF dumped nothing for it)."""
        from jitsim.crosscheck.scoring import labels_of_graphdef

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
