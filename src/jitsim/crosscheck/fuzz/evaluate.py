"""One evaluation round: run examples under TF (a process per configuration batch), check
jitsim against TF's dumps, rerun the differences for TF's stability; an :class:`Outcome` per
example.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from jitsim.crosscheck.fuzz.check import GraphCheck, Problem, check_dumps
from jitsim.crosscheck.fuzz.examples import Example
from jitsim.crosscheck.fuzz.stability import Instability, tf_stability
from jitsim.crosscheck.fuzz.tf_runner import run_programs


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
    groups = plan_batches(examples, batch_size)
    outcomes = {ex.id: Outcome(ex) for ex in examples}
    orphans: list[GraphCheck] = []
    done = 0
    for gi, exs in enumerate(groups):
        mine, lost = evaluate_batch(exs, work / f"batch{gi}", timeout=timeout, invariants=invariants,
                                    tf_reruns=tf_reruns, log=log)
        outcomes.update(mine)
        orphans += lost
        done += len(exs)
        if progress:
            progress(done, len(examples), sum(1 for o in outcomes.values() if o.problems))
    return [outcomes[ex.id] for ex in examples], orphans


def plan_batches(examples: list[Example], batch_size: int) -> list[list[Example]]:
    """The TF processes of a round: examples grouped by process configuration (flags, devices,
    Grappler) in order of first appearance, at most ``batch_size`` per process. Each batch is
    independent of the others (one simulated TF process each), so a campaign may run them in
    any order or place (:mod:`jitsim.crosscheck.campaigns`)."""
    by_config: dict[tuple, list[Example]] = {}
    for ex in examples:
        by_config.setdefault((ex.flags, ex.devices, ex.grappler), []).append(ex)
    groups = []
    for exs in by_config.values():
        for k in range(0, len(exs), max(1, batch_size)):
            groups.append(exs[k:k + batch_size])
    return groups


def evaluate_batch(exs: list[Example], root: Path, *, timeout: float = 600.0, invariants: bool = True,
                   tf_reruns: int = 1, log=None) -> tuple[dict[int, Outcome], list[GraphCheck]]:
    """One batch (one process configuration) under TF, in ``root``: the outcome of each of its
    examples and the checks of the graphs none of them owns."""
    ex0 = exs[0]
    flags, devices, grappler = ex0.flags, ex0.devices, ex0.grappler
    outcomes = {ex.id: Outcome(ex) for ex in exs}
    orphans: list[GraphCheck] = []
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
    return outcomes, orphans


def outcome_signature(o: Outcome) -> set[str]:
    return {p.stage for _, p in o.problems}


def outcome_kind(o: Outcome) -> str:
    """Stage and the kinds of difference of an outcome's first problem (for grouping)."""
    import re

    p = o.problems[0][1]
    return p.stage + ":" + ",".join(sorted(set(re.findall(r"\d+ ([a-z_ ]+?)(?:,|\s\(|$)", p.summary))))
