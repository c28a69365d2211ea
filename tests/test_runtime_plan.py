"""The warm-up planner (jitsim.runtime.plan, `jitsim runtime ... --plan DIR`)."""

import itertools
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from jitsim.runtime.plan import bucket_of, choose_buckets

ROOT = Path(__file__).resolve().parents[1]
RT = ROOT / "fixtures" / "runtime"


def _cost(counts, buckets, weight):
    total = sum(s * c for s, c in counts.items())
    padded = sum((bucket_of(buckets, s) - s) * c for s, c in counts.items())
    return len(buckets) + weight * padded / total


def test_the_buckets_are_the_cheapest_set():
    """Against every subset of the sizes that holds the largest (the brute force), on random
    histograms: the dynamic programme's buckets cost the least."""
    rng = random.Random(0)
    for _ in range(200):
        sizes = sorted(rng.sample(range(1, 40), rng.randint(1, 7)))
        counts = {s: rng.randint(1, 20) for s in sizes}
        weight = rng.choice([0.0, 1.0, 5.0, 20.0, 100.0])
        best = min(_cost(counts, list(sub) + [sizes[-1]], weight)
                   for k in range(len(sizes)) for sub in itertools.combinations(sizes[:-1], k))
        got = choose_buckets(counts, weight)
        assert got[-1] == sizes[-1] and set(got) <= set(sizes)
        assert _cost(counts, got, weight) == pytest.approx(best)


def test_a_plan_from_the_pass_input(tmp_path):
    """mlp_batch over 14 batch sizes, from TF's dumped pass input (no TF run): the plan buckets
    the batch, compiles less on the stream, writes plan.json and the bucketed stream (no
    warm-up program for a graph file: it has no function to call), and predicts one cache entry
    per signature the warm-up compiles, each bucketed shape run twice."""
    out = tmp_path / "plan"
    p = subprocess.run([sys.executable, "-m", "jitsim.cli", "runtime", str(RT / "graphs" / "mlp_batch.pbtxt"),
                        "--shapes", str(RT / "streams" / "batch_many.jsonl"), "--plan", str(out), "--tf", "never",
                        "--format", "json"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    plan = json.loads(p.stdout)["plan"]
    assert plan == json.loads((out / "plan.json").read_text())
    assert not (out / "warmup.py").exists()
    (b,) = plan["buckets"]
    assert (b["input"], b["dim"]) == ("x", 0) and b["sizes"][-1] == 14
    assert plan["after"]["compiles"] < plan["before"]["compiles"]
    assert plan["cache_entries"] == len(b["sizes"]) == plan["warmup_steps"]
    batches = {json.loads(line)["x"][0] for line in (out / "bucketed.jsonl").read_text().splitlines()}
    assert batches == set(b["sizes"])


def test_the_measured_plans_leave_no_build_on_replay():
    """plan_results.json (fixtures/runtime/measure_plans.py, real TF 2.21): for every case the
    warm-up saved exactly the predicted cache entries (per unit, each entry's signature) and
    the bucketed stream replayed under that cache built no executable."""
    doc = json.loads((RT / "plan_results.json").read_text())
    assert doc["total"] >= 5 and doc["identical"] == doc["total"]
    for case in doc["cases"]:
        c = case["tf_check"]
        assert c["identical"] and c["replay_builds"] == 0 and c["cache_files"] == c["predicted_files"] > 0, case["program"]
        assert c["replay_loads"] > 0


@pytest.mark.tf
def test_the_warmup_under_tensorflow(tmp_path):
    """One case run for real: the warm-up, then the stream replayed under its cache."""
    p = subprocess.run([sys.executable, "-m", "jitsim.cli", "runtime", str(RT / "programs" / "mlp_batch.py"),
                        "--shapes", str(RT / "streams" / "partial_last_batch.jsonl"), "--plan", str(tmp_path / "p"),
                        "--check-with-tf", "--format", "json"], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0, p.stderr[-2000:]
    check = json.loads(p.stdout)["tf_check"]
    assert check["identical"] and check["replay_builds"] == 0 and check["cache_files"] == 2
