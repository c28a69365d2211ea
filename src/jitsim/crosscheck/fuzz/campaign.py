"""A differential campaign (``jitsim crosscheck fuzz``): draw, evaluate, shrink, write
reproducers, summarise (see :mod:`jitsim.crosscheck.fuzz`).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from jitsim.crosscheck.fuzz.check import GraphCheck
from jitsim.crosscheck.fuzz.evaluate import Outcome, outcome_kind, evaluate
from jitsim.crosscheck.fuzz.examples import draw_examples
from jitsim.crosscheck.fuzz.reproducers import write_reproducer, write_tf_unstable
from jitsim.crosscheck.fuzz.shrink import shrink
from jitsim.errors import JitsimError
from jitsim.files.output import write_atomic


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
             timeout: float = 600.0, tf_reruns: int = 1, progress=None, log=None,
             evaluator=None) -> CampaignResult:
    """Draw, run, compare, shrink and write reproducers (see the module docstring). At most
    ``max_shrink`` disagreements are shrunk (the first of each kind first); the others get an
    unshrunk reproducer. ``tf_reruns``: see :func:`evaluate`; the evidence for every example
    with a difference where TF differed from itself goes to ``OUT/tf-unstable/ex<id>/``.
    ``evaluator(examples, work)``: what runs the round instead of :func:`evaluate` (the
    distributed campaign of :mod:`jitsim.crosscheck.campaigns`), returning the same."""
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
        if evaluator is not None:
            outcomes, orphans = evaluator(examples, work)
        else:
            outcomes, orphans = evaluate(examples, work, timeout=timeout, batch_size=batch_size, progress=progress,
                                         tf_reruns=tf_reruns, log=log)
        bad = [o for o in outcomes if o.problems]
        # shrink one of each kind (stage and kind of difference) first
        kinds: dict[str, list[Outcome]] = {}
        for o in bad:
            kinds.setdefault(outcome_kind(o), []).append(o)
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


def write_summary(res: CampaignResult, path: Path, *, seed: int, command: str) -> dict:
    """Write ``path`` (schema ``jitsim.fuzz-campaign/2``, docs/json.md) and return what it holds."""
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
    write_atomic(path, (json.dumps(data, indent=1) + "\n").encode())
    return data

