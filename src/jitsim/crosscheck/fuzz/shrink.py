"""Shrinking a disagreeing program against TF: greedy one-step reductions, every round's
candidates in one TF process, kept while the same disagreement remains.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

from jitsim.crosscheck.fuzz.evaluate import Outcome, outcome_signature, evaluate
from jitsim.crosscheck.fuzz.examples import Example


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
    target = outcome_signature(outcome)
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
        hit = next((o for o in outs if o.problems and outcome_signature(o) & target), None)
        shutil.rmtree(work / f"round{rnd}", ignore_errors=True)
        if hit is None:
            break
        cur = dataclasses.replace(hit.example, id=example.id)
        best_outcome = hit
        if log:
            log(f"  shrink round {rnd}: {cur.program.size()} statements")
    return cur, best_outcome
