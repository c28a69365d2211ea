"""Campaigns (jitsim.crosscheck.campaigns, docs/campaigns.md): the campaign directory, items
retried once then reported, and -- with Ray (``pip install 'jitsim[ray]'``) and real TF,
marked ``tf`` and ``slow`` -- real small campaigns: ``crosscheck fuzz --ray local`` gives the
per-example verdicts and the summary of the serial run of its seed, an interrupted campaign
resumes without re-running what it finished, a lost worker costs one retry of its item, and
harvest/verify campaigns give what the serial commands give.

The tests without Ray use the in-process executor (the same items, records and retries).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from jitsim.crosscheck import campaigns
from jitsim.crosscheck.campaigns import CampaignDir, Item, run_items
from jitsim.errors import JitsimError

try:
    import ray  # noqa: F401

    HAVE_RAY = True
except ImportError:
    HAVE_RAY = False

needs_ray = pytest.mark.skipif(not HAVE_RAY, reason="Ray is not installed (pip install -e '.[ray]')")
ROOT = Path(__file__).resolve().parents[1]


# -- task functions (module level: Ray pickles them; by value, since tests/ is no package) ---


def _square(x, *, python=None):
    return {"square": x * x}, {"bytes": bytes([x])}


def _raise(x, *, python=None):
    raise ValueError(f"item {x} is broken")


def _die_once(marker, *, python=None):
    """Kills its worker process the first time (a lost worker), succeeds the second."""
    m = Path(marker)
    if not m.exists():
        m.write_text("died")
        os._exit(1)
    return {"ok_after": m.read_text()}, {}


def _fail_once(marker, *, python=None):
    m = Path(marker)
    if not m.exists():
        m.write_text("x")
        raise RuntimeError("first try fails")
    return {"second": True}, {}


# -- without Ray: the record, the retries ------------------------------------------------


def test_records_are_the_source_of_truth_and_a_rerun_runs_only_what_is_missing(tmp_path):
    store = CampaignDir(tmp_path, {"command": "test", "n": 3})
    items = [Item(f"i{x}", _square, (x,)) for x in range(3)]
    res = run_items(items, store)
    assert [res[f"i{x}"].value["square"] for x in range(3)] == [0, 1, 4]
    assert not any(r.resumed for r in res.values())
    rec = json.loads((tmp_path / "campaign" / "items" / "i2.json").read_text())
    assert rec["ok"] and rec["attempts"] == 1 and rec["tf_version"] and rec["schema"] == "jitsim.campaign-item/1"
    assert rec["files"] == {"bytes": hashlib.sha256(bytes([2])).hexdigest()} and rec["key"] == "i2"
    assert (tmp_path / "campaign" / "items" / "i2.bytes").read_bytes() == bytes([2])
    (tmp_path / "campaign" / "items" / "i1.json").unlink()  # as if the first run stopped before it finished
    res = run_items(items, CampaignDir(tmp_path, {"command": "test", "n": 3}))
    assert [res[f"i{x}"].resumed for x in range(3)] == [True, False, True]
    assert res["i1"].value == {"square": 1} and res["i2"].files == {"bytes": bytes([2])}


def test_another_campaign_in_the_same_directory_is_refused(tmp_path):
    CampaignDir(tmp_path, {"command": "fuzz", "seed": 1})
    with pytest.raises(JitsimError, match=r"holds another campaign \(seed: 1 there, 2 now\)"):
        CampaignDir(tmp_path, {"command": "fuzz", "seed": 2})


def test_a_failing_item_is_tried_twice_then_reported_and_the_others_finish(tmp_path):
    logged = []
    items = [Item("bad", _raise, (7,), label="item seven"), Item("good", _square, (3,)),
             Item("flaky", _fail_once, (str(tmp_path / "m"),))]
    res = run_items(items, CampaignDir(tmp_path, {"c": 1}), log=logged.append)
    assert not res["bad"].ok and res["bad"].attempts == 2
    assert res["bad"].reason == "ValueError: item 7 is broken"
    assert res["good"].ok and res["good"].attempts == 1
    assert res["flaky"].ok and res["flaky"].attempts == 2
    assert "item seven: failed 2 times: ValueError: item 7 is broken" in logged
    # a failed item is no finished item: the next run tries it again
    res = run_items(items, CampaignDir(tmp_path, {"c": 1}))
    assert not res["bad"].resumed and res["good"].resumed


def test_ray_missing_is_one_clear_error(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(JitsimError, match=r"--ray needs Ray: pip install 'jitsim\[ray\]'"):
        run_items([Item("a", _square, (1,))], CampaignDir(tmp_path, {}), ray="local")


# -- with Ray -----------------------------------------------------------------------------


@needs_ray
@pytest.mark.slow
def test_on_ray_a_lost_worker_costs_its_item_one_retry(tmp_path, monkeypatch):
    """...and a local Ray leaves nothing in $TMPDIR (its session files were in $TMPDIR/ray:
    issue 39, item 7)."""
    import tempfile

    import ray.cloudpickle

    tmp = Path(tempfile.mkdtemp(prefix="jt-", dir="/tmp"))  # short: Ray's socket paths must fit 107 bytes
    monkeypatch.setenv("TMPDIR", str(tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp))

    ray.cloudpickle.register_pickle_by_value(sys.modules[__name__])
    items = [Item("dies", _die_once, (str(tmp_path / "marker"),)), Item("bad", _raise, (1,)),
             Item("sq", _square, (4,))]
    res = run_items(items, CampaignDir(tmp_path, {"c": "ray"}), ray="local", workers=2)
    assert res["dies"].ok and res["dies"].attempts == 2 and res["dies"].value == {"ok_after": "died"}
    assert not res["bad"].ok and res["bad"].attempts == 2 and "item 1 is broken" in res["bad"].reason
    assert res["sq"].value == {"square": 16} and res["sq"].files == {"bytes": bytes([4])}
    left = list(tmp.iterdir())
    shutil.rmtree(tmp, ignore_errors=True)
    assert left == []


def _fuzz(out, *extra, timeout=900):
    return subprocess.run([sys.executable, "-m", "jitsim.cli", "crosscheck", "fuzz", "--examples", "8", "--seed", "11",
                           "--profile", "ci", "--batch-size", "2", "--format", "json", "-o", str(out), *extra],
                          capture_output=True, text=True, timeout=timeout)


# TF's known nondeterminism (int32 routing, permuted constant clones: docs/fuzzing.md) is counted,
# never a disagreement, and changes from one TF process to the next: two serial runs of a seed
# differ there too
TF_NOISE = ("tf_nondeterminism", "tf_nondeterminism_cases")


def _summary(stdout: str) -> dict:
    d = json.loads(stdout)
    return {k: v for k, v in d.items() if k not in TF_NOISE}


def _batch_records(items: Path) -> list[Path]:
    """The batches' records (batch<k>.json; not their outcomes, batch<k>.outcomes.json)."""
    return sorted(f for f in items.glob("batch*.json") if re.fullmatch(r"batch\d+\.json", f.name))


def _verdicts_of_records(out: Path) -> dict:
    v = {}
    for f in _batch_records(out / "campaign" / "items"):
        rec = json.loads(f.read_text())
        assert rec["ok"] and rec["tf_version"].startswith("2."), rec
        v.update(rec["value"]["verdicts"])
    return v


@needs_ray
@pytest.mark.tf
@pytest.mark.slow
def test_fuzz_on_ray_equals_the_serial_run_and_resumes_after_an_interruption(tmp_path):
    """8 programs (profile ci: two TF configurations, batches of 2: 4 items). The serial run's
    per-example verdicts come from its outcomes (jitsim.crosscheck.campaigns.verdict); the Ray
    run's from its records; the summaries are equal but for TF's own known nondeterminism
    (:data:`TF_NOISE`). Then the Ray campaign is interrupted (SIGTERM: jitsim ends cleanly, Ray's own handler put aside) once a record exists
    and re-run: the finished batches are not run again and the result is the same."""
    from jitsim.crosscheck.campaigns import verdict
    from jitsim.crosscheck.fuzz.campaign import campaign

    serial = campaign(8, 11, out=tmp_path / "serial", batch_size=2, profile="ci")
    want = {str(o.example.id): verdict(o) for o in serial.outcomes}
    s = _fuzz(tmp_path / "s")
    assert s.returncode == 0, s.stderr[-2000:]
    r = _fuzz(tmp_path / "r", "--ray", "local", "--workers", "2")
    assert r.returncode == 0, r.stderr[-2000:]
    assert _summary(r.stdout) == _summary(s.stdout)  # JSON leaves the wall time out
    assert _verdicts_of_records(tmp_path / "r") == want
    assert json.loads(r.stdout)["disagreements"] == serial.disagreements

    # interrupted after its first record, then run again
    out = tmp_path / "i"
    # its own temporary directory (short: Ray's sockets live under it): nothing of jitsim's may
    # be left there, though the workers were killed mid-batch
    tmp_root = Path(tempfile.mkdtemp(prefix="jt", dir="/tmp" if os.path.isdir("/tmp") else None))
    env = dict(os.environ, TMPDIR=str(tmp_root))
    p = subprocess.Popen([sys.executable, "-m", "jitsim.cli", "crosscheck", "fuzz", "--examples", "8", "--seed", "11",
                          "--profile", "ci", "--batch-size", "2", "--format", "json", "-o", str(out), "--ray", "local",
                          "--workers", "1"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    items = out / "campaign" / "items"
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline and not _batch_records(items):
        time.sleep(0.5)
    p.send_signal(signal.SIGTERM)  # (SIGINT: a test run started in the background ignores it)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 143 and err.decode().strip().endswith("jitsim: terminated by SIGTERM"), err[-2000:]
    left = sorted(x.name for x in tmp_root.iterdir() if x.name.startswith("jitsim-"))
    shutil.rmtree(tmp_root, ignore_errors=True)
    assert not left  # (before: the killed worker's batch directory, jitsim-campaign-*)
    first = {f.name: f.read_text() for f in _batch_records(items)}
    assert 1 <= len(first) < 4, sorted(first)
    again = _fuzz(out, "--ray", "local", "--workers", "2")
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{len(first)} from an earlier run" in again.stderr
    assert _summary(again.stdout) == _summary(s.stdout)
    for name, text in first.items():  # not run again: the same record, pid and wall time included
        assert (items / name).read_text() == text
    assert _verdicts_of_records(out) == want


@needs_ray
@pytest.mark.tf
@pytest.mark.slow
def test_harvest_and_verify_campaigns_on_ray_give_what_the_serial_commands_give(tmp_path):
    progs = [ROOT / "fixtures" / "programs" / "asserts_checks_print.py", ROOT / "fixtures" / "programs" /
             "attention_block.py"]
    cli = [sys.executable, "-m", "jitsim.cli", "crosscheck"]
    h = subprocess.run(cli + ["harvest", *map(str, progs), "-o", str(tmp_path / "h"), "--ray", "local",
                              "--format", "json"], capture_output=True, text=True, timeout=900)
    assert h.returncode == 0, h.stderr[-2000:]
    got = json.loads(h.stdout)
    assert [x["tf_version"] for x in got["harvests"]] == ["2.21.0", "2.21.0"] and not got["failed"]
    dirs = [tmp_path / "h" / p.stem for p in progs]
    assert json.loads((dirs[0] / "index.json").read_text())["target"] == str(progs[0].resolve())
    v = subprocess.run(cli + ["verify", *map(str, dirs), "--ray", "local", "-o", str(tmp_path / "v"), "--format",
                              "json"], capture_output=True, text=True, timeout=900)
    assert v.returncode == 0, v.stderr[-2000:]
    many = json.loads(v.stdout)
    for d, row in zip(dirs, many["harvests"]):
        one = json.loads(subprocess.run(cli + ["verify", str(d), "--format", "json"], capture_output=True, text=True,
                                        timeout=600).stdout)
        assert row["result"]["graphs"] == one["graphs"]
        assert row["graphs"] == len(one["graphs"]) and row["same_names"] == row["graphs"]
