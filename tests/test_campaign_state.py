"""Campaign state is data (issue 39, item 1; docs/campaigns.md, "The campaign directory"):
``OUT/campaign/items/`` holds JSON and packed directories, read back field by field and
checked, never unpickled. A file planted there runs nothing; a damaged item (cut short,
another file, a record that does not follow its schema) is run again with a note naming it;
a record whose claims its own data does not show (a verification's "999/999 graphs
identical") is not taken.

The campaigns run without Ray and without TensorFlow: the fuzz batches' evaluation and the
harvest are replaced by fakes (the campaign's own code, records and checks are what is tested);
the verification is real (jitsim only) on a committed corpus run.
"""

from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jitsim.crosscheck import campaigns
from jitsim.crosscheck.campaigns import CampaignDir, FuzzCampaign, Item, run_items

ROOT = Path(__file__).resolve().parents[1]


class _Planted:
    """A pickle whose loading makes a directory (what an attacker's code would do)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return os.mkdir, (self.marker,)


def _record_files(items: Path, key: str) -> list[str]:
    """The file names an item's record lists (a list of names before, a name -> sha256 map now)."""
    return list(json.loads((items / f"{key}.json").read_text())["files"])


# -- fuzz: a fake batch evaluation (no TF) ------------------------------------------------


def _examples():
    from jitsim.crosscheck.fuzz.examples import draw_examples

    return draw_examples(4, 3, batch_size=2, profile="ci")  # two TF configurations: two batches of 2


def _fake_evaluate(calls: list):
    """evaluate_batch's stand-in: the first example of a batch disagrees at mark (jitsim's
    graph and labels kept), the second raised in TF; no TF runs."""
    from jitsim.crosscheck.fuzz.check import Problem
    from jitsim.crosscheck.fuzz.evaluate import Outcome
    from jitsim.registry import protos

    def evaluate_batch(exs, root, *, timeout=600.0, tf_reruns=1, log=None):
        calls.append([ex.id for ex in exs])
        Path(root).mkdir(parents=True, exist_ok=True)
        gd = protos.GraphDef()
        gd.node.add(name="a", op="Relu")
        out = {ex.id: Outcome(ex, graphs=2) for ex in exs}
        first, second = exs
        out[first.id].problems = [(1, Problem("mark", "DIFFERENT: 1 missing", "detail", gd, "m.pbtxt",
                                              {"a": "cluster_0", "b": None}))]
        out[second.id].error = "InvalidArgumentError: boom"
        if log:
            log(f"batch of {first.id} evaluated")
        return out, []

    return evaluate_batch


def _fuzz(out: Path, logged: list):
    ev = FuzzCampaign(out, {"command": "fuzz", "test": 1}, 2, 60.0, 0, ray=None, log=logged.append)
    work = out / "work"
    work.mkdir(parents=True, exist_ok=True)
    outcomes, orphans = ev(_examples(), work)
    return ev, outcomes, orphans


def test_a_pickle_planted_in_items_runs_nothing_and_the_item_runs_again(tmp_path, monkeypatch):
    """Every file batch0's record names, and batch0.pkl (the old format's), replaced with a
    pickle that makes a directory when loaded: the campaign resumed makes none, runs batch 0
    again (a note names it) and gives the same outcomes. (Before: the pickle ran, then
    'TypeError', exit 3.)"""
    calls: list = []
    monkeypatch.setattr(campaigns, "evaluate_batch", _fake_evaluate(calls))
    out = tmp_path / "out"
    _, first, _ = _fuzz(out, [])
    assert len(calls) == 2
    items = out / "campaign" / "items"
    marker = tmp_path / "pwned"
    evil = pickle.dumps(_Planted(marker))
    for name in set(_record_files(items, "batch0")) | {"pkl"}:
        (items / f"batch0.{name}").write_bytes(evil)
    logged: list = []
    ev, again, _ = _fuzz(out, logged)
    assert not marker.exists()
    assert calls[2:] == [calls[0]]  # batch 0 ran again, batch 1 was taken from its record
    assert ev.resumed == 1
    assert any(line.startswith("batch 0 (examples 0-1): ") and "running it again" in line for line in logged), logged
    assert [(o.example.id, o.error, [(g, p.stage, p.summary, p.labels) for g, p in o.problems]) for o in again] == \
        [(o.example.id, o.error, [(g, p.stage, p.summary, p.labels) for g, p in o.problems]) for o in first]
    assert again[0].problems[0][1].predicted.node[0].name == "a"  # jitsim's graph, read back as a GraphDef


def test_fuzz_outcomes_round_trip_as_json_with_their_tf_runs(tmp_path, monkeypatch):
    """TF-unstable evidence (an outcome's and a graph outside any example's) read back from
    outcomes.json and tar.gz: each TF run's dumps where the driver unpacked them, a check's
    unstable problem still the check's own (not counted)."""
    from jitsim.crosscheck.fuzz.check import GraphCheck, Problem
    from jitsim.crosscheck.fuzz.evaluate import Outcome
    from jitsim.crosscheck.fuzz.stability import Instability, _TFGraph
    from jitsim.graph.dumps import DumpGraph

    def evaluate_batch(exs, root, *, timeout=600.0, tf_reruns=1, log=None):
        root = Path(root)
        runs = []
        for run in ("run0", "rerun0-reversed/run0"):
            d = root / run / "dumps"
            d.mkdir(parents=True)
            (d / "m.pbtxt").write_text("node { name: 'a' op: 'Relu' }\n")
            runs.append(_TFGraph(run, d, DumpGraph(3, {"mark_for_compilation": "m.pbtxt"})))

        def unstable(p):
            return Instability(3, p, "mark", ("batch", "reversed"), tuple(runs), (["x"], ["y"]), ["batch"],
                               ["batch", "reversed"], "evidence")

        out = {ex.id: Outcome(ex, graphs=1) for ex in exs}
        out[exs[0].id].tf_unstable = [unstable(Problem("mark", "DIFFERENT: 1 split"))]
        q1, q2 = Problem("mark", "DIFFERENT: 1 extra"), Problem("encapsulate", "DIFFERENT")
        orphan = GraphCheck(DumpGraph(7, {"mark_for_compilation": "m.pbtxt"}, ["aux.txt"], 12.5), -1, [q1, q2],
                            ["int32 routing"], ["mark", "encapsulate"], False, [unstable(q2)], ["stable"])
        return out, [orphan]

    monkeypatch.setattr(campaigns, "evaluate_batch", evaluate_batch)
    for attempt in ("ran", "resumed"):
        ev, outcomes, orphans = _fuzz(tmp_path / "out", [])
        assert ev.resumed == (0 if attempt == "ran" else 2)
        u = outcomes[0].tf_unstable[0]
        assert [g.run for g in u.tf] == ["run0", "rerun0-reversed/run0"]
        assert u.tf[1].path("mark").read_text().startswith("node")  # in OUT/work/batch0/item/...
        assert u.only == (["x"], ["y"]) and u.problem.summary == "DIFFERENT: 1 split"
        c = orphans[0]
        assert c.counted() == [c.problems[0]] and c.tf_unstable[0].problem is c.problems[1]
        assert (c.record.id, c.record.aux, c.record.mark_pass_us, c.rebuilt) == (7, ["aux.txt"], 12.5, False)
        assert campaigns.verdict(outcomes[0]) == "tf-unstable"


def test_a_forged_fuzz_record_is_not_taken(tmp_path, monkeypatch):
    """A record whose verdicts say 'agree' where its outcomes show a disagreement, and an
    outcomes file edited with its sha256 made to match: both run again."""
    calls: list = []
    monkeypatch.setattr(campaigns, "evaluate_batch", _fake_evaluate(calls))
    out = tmp_path / "out"
    _fuzz(out, [])
    items = out / "campaign" / "items"
    rec = json.loads((items / "batch0.json").read_text())
    rec["value"]["verdicts"] = {k: "agree" for k in rec["value"]["verdicts"]}
    (items / "batch0.json").write_text(json.dumps(rec))
    data = json.loads((items / "batch1.outcomes.json").read_text())
    data["outcomes"][0]["example"] = 0  # another batch's example
    raw = json.dumps(data).encode()
    (items / "batch1.outcomes.json").write_bytes(raw)
    rec1 = json.loads((items / "batch1.json").read_text())
    rec1["files"]["outcomes.json"] = __import__("hashlib").sha256(raw).hexdigest()
    (items / "batch1.json").write_text(json.dumps(rec1))
    logged: list = []
    ev, outcomes, _ = _fuzz(out, logged)
    assert ev.resumed == 0 and len(calls) == 4
    assert any("batch 0" in x and "verdicts" in x and "running it again" in x for x in logged), logged
    assert any("batch 1" in x and "not of the batch's" in x for x in logged), logged
    assert [campaigns.verdict(o) for o in outcomes] == ["disagree", "tf-error", "disagree", "tf-error"]


# -- records that do not follow their schema ---------------------------------------------


def _square(x, *, python=None):
    return {"square": x * x}, {"bytes": bytes([x])}


@pytest.mark.parametrize("damage", ["cut", "unknown field", "mistyped", "another key", "not an object",
                                    "file cut", "file missing"])
def test_a_damaged_record_is_run_again_with_a_note(tmp_path, damage):
    items = [Item(f"i{x}", _square, (x,), label=f"item {x}") for x in range(2)]
    run_items(items, CampaignDir(tmp_path, {"c": 1}))
    d = tmp_path / "campaign" / "items"
    p = d / "i1.json"
    rec = json.loads(p.read_text())
    if damage == "cut":
        p.write_bytes(p.read_bytes()[:40])
    elif damage == "unknown field":
        p.write_text(json.dumps({**rec, "exec": "os.system('x')"}))
    elif damage == "mistyped":
        p.write_text(json.dumps({**rec, "attempts": "1"}))
    elif damage == "another key":
        p.write_text((d / "i0.json").read_text())
    elif damage == "not an object":
        p.write_text("[1, 2]")
    elif damage == "file cut":
        (d / "i1.bytes").write_bytes(b"")
    else:
        (d / "i1.bytes").unlink()
    logged: list = []
    res = run_items(items, CampaignDir(tmp_path, {"c": 1}), log=logged.append)
    assert res["i0"].resumed and not res["i1"].resumed
    assert res["i1"].value == {"square": 1} and res["i1"].files == {"bytes": bytes([1])}
    assert len(logged) == 1 and logged[0].startswith("item 1: ") and logged[0].endswith("; running it again")


# -- harvest: a truncated item file (CLI, a fake harvest: no TF) --------------------------

_HARVEST_CLI = r"""
import json, os, sys
from pathlib import Path
import jitsim.crosscheck.campaigns as c

def harvest(t, out, *, flags, signature, python, timeout):
    out = Path(out)
    (out / "dumps").mkdir(parents=True)
    idx = {"graphs": [{"id": 0, "files": {}}], "tf_version": os.environ.get("FAKE_TF", "2.21.0"), "target": str(t)}
    (out / "index.json").write_text(json.dumps(idx))
    with open(sys.argv[1], "a") as f:
        f.write(Path(t).name + "\n")
    return idx

c.harvest = harvest
from jitsim.cli import main
sys.exit(main(sys.argv[2:]))
"""


def test_a_truncated_harvest_file_runs_that_target_again(tmp_path):
    """sm_B's packed harvest cut in half and its directory gone: the re-run harvests sm_B again
    (a note names it), exit 0. (Before: 'sm_A.py: internal error (EOFError ...)', exit 3.)"""
    targets = []
    for n in ("sm_A", "sm_B"):
        t = tmp_path / f"{n}.py"
        t.write_text("import tensorflow as tf\n")
        targets.append(str(t))
    calls, out = tmp_path / "calls.txt", tmp_path / "out"

    def run():
        return subprocess.run([sys.executable, "-c", _HARVEST_CLI, str(calls), "crosscheck", "harvest", *targets,
                               "-o", str(out)], capture_output=True, text=True, timeout=300)

    p = run()
    assert p.returncode == 0, p.stderr
    f = out / "campaign" / "items" / "sm_B.tar.gz"
    f.write_bytes(f.read_bytes()[:len(f.read_bytes()) // 2])
    shutil.rmtree(out / "sm_B")
    p = run()
    assert p.returncode == 0, p.stderr
    assert "internal error" not in p.stderr
    assert f"jitsim: {targets[1]}: its file sm_B.tar.gz is not the one its record names" in p.stderr, p.stderr
    assert "sm_A" not in p.stderr
    assert calls.read_text().split() == ["sm_A.py", "sm_B.py", "sm_B.py"]
    assert json.loads((out / "sm_B" / "index.json").read_text())["graphs"] == [{"id": 0, "files": {}}]
    assert "2/2 targets harvested" in p.stdout


def test_what_a_campaign_prints_from_its_data_is_terminal_safe(tmp_path):
    """A TF version with an OSC title sequence in a harvest's index (data a worker or a forger
    wrote): printed escaped."""
    ts = [tmp_path / "m.py", tmp_path / "n.py"]
    for t in ts:
        t.write_text("x = 1\n")
    p = subprocess.run([sys.executable, "-c", _HARVEST_CLI, str(tmp_path / "calls"), "crosscheck", "harvest",
                        *map(str, ts), "-o", str(tmp_path / "o")], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ, FAKE_TF="2.21\x1b]0;pwned\x07"))
    assert p.returncode == 0, p.stderr
    assert "\x1b" not in p.stdout and "2.21\\x1b]0;pwned\\x07" in p.stdout


# -- verify: a forged record (CLI, jitsim only) -------------------------------------------


def _verify(d: Path, out: Path):
    return subprocess.run([sys.executable, "-m", "jitsim.cli", "crosscheck", "verify", str(d), "-o", str(out)],
                          capture_output=True, text=True, timeout=300)


def test_a_forged_verify_record_is_not_reported(corpus, tmp_path):
    """The record's counts raised to 999/999: the resumed campaign does not print them; it
    verifies the harvest again (a note names it) and prints what the comparison shows."""
    d = tmp_path / "cycle_avoidance"
    shutil.copytree(corpus.extract("cycle_avoidance"), d)
    out = tmp_path / "v"
    first = _verify(d, out)
    assert first.returncode in (0, 1), first.stderr
    p = out / "campaign" / "items" / "cycle_avoidance.json"
    rec = json.loads(p.read_text())
    real = (rec["value"]["identical"], rec["value"]["graphs"])
    assert real[1] < 999
    rec["value"].update(graphs=999, identical=999, same_names=999)
    p.write_text(json.dumps(rec))
    again = _verify(d, out)
    assert "999" not in again.stdout
    assert again.stdout == first.stdout and again.returncode == first.returncode
    assert f"{real[0]}/{real[1]} graphs identical" in again.stdout
    assert f"jitsim: {d}: its record does not hold up (its record says graphs: 999" in again.stderr, again.stderr
    assert json.loads(p.read_text())["value"]["graphs"] == real[1]


def test_a_verify_result_must_agree_with_its_per_graph_data(corpus):
    """load_verify: counts are derived from the per-graph comparisons, and a comparison's
    flags from its node differences; a result edited in one place only is refused."""
    import copy

    from jitsim.crosscheck.campaign_state import StateError
    from jitsim.crosscheck.fidelity import verify_dir
    from jitsim.options import options_for

    d = corpus.extract("cycle_avoidance")
    res = verify_dir(d, options_for("--tf_xla_auto_jit=2"))
    value = {**campaigns._counts(res.rows), "simulated_tf_version": res.tf_version, "result": res.to_dict()}
    assert campaigns.load_verify(copy.deepcopy(value), {}) == value

    def refused(edit):
        v = copy.deepcopy(value)
        edit(v)
        with pytest.raises(StateError):
            campaigns.load_verify(v, {})

    g0 = "result", "graphs", 0, "diff"

    def at(v, path):
        for k in path:
            v = v[k]
        return v

    refused(lambda v: v.update(identical=v["identical"] + 1))
    refused(lambda v: at(v, g0).update(identical=not at(v, g0)["identical"]))  # the summary then disagrees
    refused(lambda v: at(v, g0)["diffs"].append({"node": "x", "kind": "missing", "predicted": None, "truth": "c",
                                                 "detail": ""}))
    refused(lambda v: at(v, g0).update(agreeing_nodes="7"))
    refused(lambda v: at(v, ("result",)).update(extra=1))
    refused(lambda v: v.update(result=[]))


def test_real_checks_round_trip(corpus, tmp_path):
    """jitsim's own checks of a corpus run (wrong flags: real problems, with jitsim's graphs and
    labels) written as a batch file and read back, field by field the same."""
    from jitsim.crosscheck.campaign_state import decode_fuzz_batch, encode_fuzz_batch
    from jitsim.crosscheck.fuzz.check import check_dumps
    from jitsim.crosscheck.fuzz.evaluate import Outcome

    d = corpus.extract("tiny_pieces")
    checks = check_dumps(d / "dumps", (d / "log.txt").read_text(),
                         "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_min_cluster_size=1")
    assert any(p.predicted is not None and p.labels for c in checks for p in c.problems)
    ex = _examples()[0]
    o = Outcome(ex, [(c.record.id, p) for c in checks for p in c.problems], graphs=len(checks))
    outcomes, orphans, logs = decode_fuzz_batch(encode_fuzz_batch({ex.id: o}, checks, ["a line"], tmp_path), [ex])
    assert logs == ["a line"] and outcomes[ex.id].example is ex
    assert outcomes[ex.id] == o  # dataclass equality: every field, GraphDefs compared as protos
    assert [vars(c) for c in orphans] == [vars(c) for c in checks]
