"""Campaigns: many independent TF items (fuzz batches, harvests, verifications, a corpus under
several TF releases) run in this process or as Ray tasks, with a campaign directory as the
source of truth (see docs/campaigns.md).

* :class:`CampaignDir` -- ``OUT/campaign/campaign.json`` (what the campaign is; resuming
  another one into the same directory is refused) and ``OUT/campaign/items/<key>.json`` (one
  record per finished item, written as it finishes, with the files it returned beside it as
  ``<key>.<name>``). Re-running the same command runs only the items without a successful
  record.
* :func:`run_items` -- runs the items not done: in this process one after another, or as Ray
  tasks (``ray`` = ``local`` starts Ray on this machine; an address -- ``auto``,
  ``ray://host:10001``, ``host:port`` -- joins a running cluster). Every item is one task with
  its own deadline; an exception, a timeout or a lost worker fails that item only: it is tried
  once more, then recorded with its reason. A task receives its input as bytes and returns its
  result and files as bytes (no shared file system), and the TF version its TF process ran.
* The items of each command: :func:`fuzz_evaluator` (one fuzz batch per item,
  :func:`jitsim.crosscheck.fuzz.evaluate.evaluate_batch`), :func:`harvest_campaign`,
  :func:`verify_campaign` and :func:`matrix_campaign` (harvest and verify a corpus under
  several TF releases: one Ray runtime environment per release).

Ray is imported only here, only when a campaign runs on it (``pip install 'jitsim[ray]'``).
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import pickle
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import jitsim
from jitsim import process
from jitsim.crosscheck.fuzz.evaluate import Outcome, evaluate_batch, plan_batches
from jitsim.tfprocess.harvest import harvest
from jitsim.errors import JitsimError
from jitsim.files.output import write_atomic
from jitsim.options import options_for

SCHEMA = "jitsim.campaign/1"
RETRIES = 1  # a failed item is tried once more
# the environment variable of a release's runtime environment naming its Python with TensorFlow
PYTHON_ENV = "JITSIM_TF_PYTHON"


# -- bytes in, bytes out ------------------------------------------------------------------


def pack(path: Path | str) -> bytes:
    """A file or directory as a gzipped tar (its content under the name ``item``)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(str(path), arcname="item")
    return buf.getvalue()


def unpack(data: bytes, dest: Path | str) -> Path:
    """Extract :func:`pack`'s bytes into ``dest``; returns the file or directory it held."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(dest, filter="data")
    return dest / "item"


@functools.lru_cache(maxsize=None)
def tf_version(python: str | None = None) -> str:
    """The TensorFlow version a Python has installed (its package metadata: TF is not imported)."""
    code = ("import importlib.metadata as m\n"
            "for d in ('tensorflow', 'tensorflow-cpu', 'tensorflow_cpu', 'tf-nightly'):\n"
            "    try: print(m.version(d)); break\n"
            "    except m.PackageNotFoundError: pass\n"
            "else: print('none')")
    try:
        r = subprocess.run([python or sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        return r.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError) as e:
        return f"unknown ({type(e).__name__})"


# -- the campaign directory ---------------------------------------------------------------


class CampaignDir:
    """``OUT/campaign/``: what the campaign is and one record per finished item."""

    def __init__(self, out: Path | str, identity: dict):
        self.root = Path(out).absolute() / "campaign"
        self.items = self.root / "items"
        self.identity = identity
        meta = self.root / "campaign.json"
        if meta.exists():
            try:
                old = json.loads(meta.read_text())
            except (OSError, ValueError) as e:
                raise JitsimError(f"unreadable campaign record: {e}", meta) from None
            if old.get("identity") != identity:
                raise JitsimError("holds another campaign (" + _identity_diff(old.get("identity") or {}, identity)
                                  + "): give another output directory", meta)
        else:
            self.items.mkdir(parents=True, exist_ok=True)
            write_atomic(meta, (json.dumps({"schema": SCHEMA, "identity": identity}, indent=1) + "\n").encode())
        self.items.mkdir(parents=True, exist_ok=True)

    def record(self, key: str) -> dict | None:
        p = self.items / f"{key}.json"
        if not p.exists():
            return None
        try:
            return json.loads(p.read_text())
        except (OSError, ValueError):
            return None  # a record cut short is not a record: the item runs again

    def done(self, key: str) -> bool:
        r = self.record(key)
        return bool(r and r.get("ok"))

    def file(self, key: str, name: str) -> bytes | None:
        p = self.items / f"{key}.{name}"
        return p.read_bytes() if p.exists() else None

    def save(self, key: str, record: dict, files: dict[str, bytes]) -> None:
        """The item's files first, its record last: a record means the item is complete."""
        for name, data in files.items():
            write_atomic(self.items / f"{key}.{name}", data)
        write_atomic(self.items / f"{key}.json", (json.dumps(record, indent=1, sort_keys=True) + "\n").encode())


def _identity_diff(old: dict, new: dict) -> str:
    keys = sorted(set(old) | set(new))
    return "; ".join(f"{k}: {old.get(k)!r} there, {new.get(k)!r} now" for k in keys if old.get(k) != new.get(k)) \
        or "different"


# -- items and how they run ---------------------------------------------------------------


@dataclass
class Item:
    key: str
    func: object  # a module-level function (Ray pickles it by reference): (*args) -> (value dict, files dict)
    args: tuple
    python: str | None = None  # the Python with TensorFlow its TF process runs (a release's runtime env)
    label: str = ""


@dataclass
class ItemResult:
    key: str
    ok: bool
    value: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)
    reason: str = ""
    attempts: int = 1
    resumed: bool = False


def run_task(func, args: tuple, python: str | None, scratch: str | None = None) -> dict:
    """What one task does wherever it runs: call ``func(*args)``; an exception becomes the
    item's failure (with its reason) instead of the task's. ``scratch``: the driver's directory
    for the tasks' temporary files, where it exists on this machine (a local Ray): a worker
    killed mid-task (the campaign interrupted, a task cancelled) cannot remove its own, the
    driver removes this one once Ray is down."""
    t0 = time.monotonic()
    python = os.environ.get(PYTHON_ENV) or python
    out = {"node": socket.gethostname(), "pid": os.getpid(), "tf_version": tf_version(python)}
    ray = sys.modules.get("ray")  # in a Ray worker: which node of the cluster ran it
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        out["ray_node"] = ray.get_runtime_context().get_node_id()[:12]
    try:
        with _temporary_files_in(scratch):
            value, files = func(*args, python=python)
        out.update(ok=True, value=value, files=files)
    except Exception as e:  # the item fails, not the worker (Ctrl-C and signals end the campaign)
        msg = str(e).strip().splitlines()
        out.update(ok=False, reason=f"{type(e).__name__}: {msg[0] if msg else ''}"[:500])
    out["wall_s"] = round(time.monotonic() - t0, 2)
    return out


@contextlib.contextmanager
def _temporary_files_in(scratch: str | None):
    """Python's temporary files go under ``scratch`` meanwhile, where it exists on this machine
    (one task at a time per worker process); else nothing changes."""
    if scratch is None or not os.path.isdir(scratch):
        yield
        return
    saved = tempfile.tempdir
    tempfile.tempdir = scratch
    try:
        yield
    finally:
        tempfile.tempdir = saved


def _record(res: dict, attempts: int, label: str) -> dict:
    rec = {k: v for k, v in res.items() if k != "files"}
    rec.update(attempts=attempts, label=label, files=sorted(res.get("files") or {}))
    return rec


def run_items(items: list[Item], store: CampaignDir, *, ray: str | None = None, workers: int | None = None,
              item_timeout: float = 3600.0, progress=None, log=None) -> dict[str, ItemResult]:
    """Run every item without a successful record in ``store`` (in order here, or as Ray
    tasks at most ``workers`` at a time) and record each as it finishes; returns the result
    of every item, those of earlier runs included (``resumed``)."""
    results: dict[str, ItemResult] = {}
    todo = []
    for it in items:
        rec = store.record(it.key)
        if rec and rec.get("ok"):
            files = {n: store.file(it.key, n) for n in rec.get("files", [])}
            if all(v is not None for v in files.values()):
                results[it.key] = ItemResult(it.key, True, rec.get("value", {}), files, attempts=rec.get("attempts", 1),
                                             resumed=True)
                continue
        todo.append(it)
    clock = _Clock(len(items), len(items) - len(todo), progress)
    clock.tick()

    def finish(it: Item, res: dict, attempts: int) -> None:
        rec = _record(res, attempts, it.label)
        store.save(it.key, rec, (res.get("files") or {}) if res.get("ok") else {})
        results[it.key] = ItemResult(it.key, bool(res.get("ok")), res.get("value") or {}, res.get("files") or {},
                                     res.get("reason", ""), attempts)
        if not res.get("ok") and log:
            log(f"{it.label or it.key}: failed {attempts} times: {res.get('reason')}")
        clock.item_done(not res.get("ok"))
        clock.tick()

    if not todo:
        return results
    if ray is None:
        for it in todo:
            for attempt in range(1, RETRIES + 2):
                res = run_task(it.func, it.args, it.python)
                if res.get("ok") or attempt == RETRIES + 1:
                    break
                if log:
                    log(f"{it.label or it.key}: {res.get('reason')}; trying again")
            finish(it, res, attempt)
        return results
    _run_on_ray(todo, ray, workers, item_timeout, finish, log)
    return results


class _Clock:
    """Counts and ETA for the progress line: items done / total, failed, time left at the
    rate of the items run in this session."""

    def __init__(self, total: int, resumed: int, progress):
        self.total, self.resumed, self.done, self.failed = total, resumed, resumed, 0
        self.t0 = time.monotonic()
        self.progress = progress

    def tick(self) -> None:
        if self.progress is None:
            return
        ran = self.done - self.resumed
        elapsed = time.monotonic() - self.t0
        eta = elapsed / ran * (self.total - self.done) if ran else None
        self.progress(self.done, self.total, self.failed, eta, self.resumed)

    def item_done(self, failed: bool) -> None:
        self.done += 1
        self.failed += int(failed)


def _ray_module():
    try:
        import ray
    except ImportError:
        raise JitsimError("--ray needs Ray: pip install 'jitsim[ray]'") from None
    return ray


_RAY_TEMP_DIRS: list[str] = []  # a local Ray's session directories, removed once Ray is down


def start_ray(address: str, workers: int | None = None):
    """Start (``local``) or join (an address) Ray; returns the module. A joined cluster gets
    jitsim's code through the runtime environment (no shared file system)."""
    ray = _ray_module()
    pkg = str(Path(jitsim.__file__).parent)
    # Ray's core installs its own handlers (TERM: log and die); jitsim's (a clean end, temporary
    # files removed, exit 128 + N: jitsim.process) are put back once Ray runs
    names = [n for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)]
    mine = {getattr(signal, n): signal.getsignal(getattr(signal, n)) for n in names} if process.threading_main() \
        else {}
    try:
        if address == "local":
            # Ray's own session files (sockets, logs) in a directory of jitsim's, removed when the
            # campaign ends, not in $TMPDIR/ray (a short path: Ray's socket paths must fit 107 bytes)
            _RAY_TEMP_DIRS.append(tempfile.mkdtemp(prefix="jitsim-ray-"))
            ray.init(num_cpus=workers or os.cpu_count(), include_dashboard=False, log_to_driver=False,
                     configure_logging=False, _temp_dir=_RAY_TEMP_DIRS[-1], runtime_env={"env_vars": {
                         "PYTHONPATH": os.pathsep.join([str(Path(pkg).parent)]
                                                       + [x for x in [os.environ.get("PYTHONPATH")] if x])}})
        else:
            ray.init(address=address, log_to_driver=False, configure_logging=False,
                     runtime_env={"py_modules": [pkg]})
    except ConnectionError as e:
        raise JitsimError(f"--ray {address}: no Ray cluster there ({_first_line(e)})") from None
    except Exception as e:  # Ray's own start-up errors (RuntimeError, ValueError...)
        raise JitsimError(f"--ray {address}: Ray did not start: {type(e).__name__}: {_first_line(e)}") from None
    for sig, h in mine.items():
        if h is not None:
            signal.signal(sig, h)
    return ray


def _first_line(e: BaseException) -> str:
    lines = [x for x in str(e).splitlines() if x.strip()]
    return lines[0].strip()[:300] if lines else type(e).__name__


def _run_on_ray(todo: list[Item], address: str, workers: int | None, item_timeout: float, finish, log) -> None:
    # Ray's driver prints what its raylets report ("(raylet) A worker died ...") on sys.stdout:
    # the command's own output (JSON) must stay alone there
    with contextlib.redirect_stdout(sys.stderr):
        _run_on_ray_quietly(todo, address, workers, item_timeout, finish, log)


def _run_on_ray_quietly(todo: list[Item], address: str, workers: int | None, item_timeout: float, finish,
                        log) -> None:
    ray = start_ray(address, workers)
    # the tasks' temporary files (see run_task), on this machine's workers
    scratch = tempfile.mkdtemp(prefix="jitsim-campaign-") if address == "local" else None
    try:
        task = ray.remote(num_cpus=1, max_retries=0)(run_task)
        limit = workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        queue = [(it, 1) for it in todo]
        running: dict = {}  # ref -> (item, attempt, started)
        while queue or running:
            while queue and len(running) < limit:
                it, attempt = queue.pop(0)
                opts = {"runtime_env": {"env_vars": {PYTHON_ENV: it.python}}} if it.python else {}
                ref = task.options(**opts).remote(it.func, it.args, it.python, scratch)
                running[ref] = (it, attempt, time.monotonic())
            try:
                ready, _ = ray.wait(list(running), num_returns=1, timeout=1.0)
            except SystemError as e:  # a signal's exception (jitsim.process) raised inside Ray's Cython
                if isinstance(e.__cause__, BaseException) and not isinstance(e.__cause__, Exception):
                    raise e.__cause__ from None
                raise
            now = time.monotonic()
            for ref in list(running):
                it, attempt, started = running[ref]
                if ref in ready:
                    del running[ref]
                    try:
                        res = ray.get(ref)
                    except Exception as e:  # the worker died, the node went away, the task was cancelled
                        res = {"ok": False, "reason": f"{type(e).__name__}: {_first_line(e)}"}
                elif now - started > item_timeout:
                    del running[ref]
                    ray.cancel(ref, force=True)
                    res = {"ok": False, "reason": f"timed out after {item_timeout:.0f} s"}
                else:
                    continue
                if not res.get("ok") and attempt <= RETRIES:
                    if log:
                        log(f"{it.label or it.key}: {res.get('reason')}; trying again")
                    queue.append((it, attempt + 1))
                    continue
                finish(it, res, attempt)
    finally:
        ray.shutdown()  # the workers end (killed, where a task still ran) before their files go
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
        while _RAY_TEMP_DIRS:
            shutil.rmtree(_RAY_TEMP_DIRS.pop(), ignore_errors=True)


# -- fuzz: one batch (one TF process configuration) per item ------------------------------


def verdict(o: Outcome) -> str:
    """One word per example, the same however the campaign ran."""
    if o.problems:
        return "disagree"
    if o.tf_unstable:
        return "tf-unstable"
    if o.crashed:
        return "tf-crashed"
    if o.error:
        return "tf-error"
    return "agree"


def fuzz_batch_task(exs: list, timeout: float, tf_reruns: int, *, python: str | None = None) -> tuple[dict, dict]:
    """One fuzz batch on a worker, in a directory of its own: the outcomes (pickled) and, when
    TF differed from itself, the batch's TF runs (the evidence OUT/tf-unstable/ is made from)."""
    with tempfile.TemporaryDirectory(prefix="jitsim-campaign-") as tmp:
        root = Path(tmp) / "batch"
        logs: list[str] = []
        outcomes, orphans = evaluate_batch(exs, root, timeout=timeout, tf_reruns=tf_reruns, log=logs.append)
        files = {"pkl": pickle.dumps({"outcomes": outcomes, "orphans": orphans, "logs": logs, "root": str(root)})}
        if any(o.tf_unstable for o in outcomes.values()) or any(c.tf_unstable for c in orphans):
            files["tar.gz"] = pack(root)
    value = {"examples": len(exs), "verdicts": {str(i): verdict(o) for i, o in outcomes.items()},
             "graphs": sum(o.graphs for o in outcomes.values())}
    return value, files


def _remap(outcomes: dict, orphans: list, old: Path, new: Path) -> None:
    """Point the TF runs of TF-unstable evidence at where the driver unpacked them."""
    for u in [u for o in outcomes.values() for u in o.tf_unstable] + [u for c in orphans for u in c.tf_unstable]:
        for g in u.tf:
            try:
                g.dumps = new / Path(g.dumps).relative_to(old)
            except ValueError:
                pass


@dataclass
class FuzzCampaign:
    """The evaluator :func:`jitsim.crosscheck.fuzz.campaign.campaign` runs its round with when
    the campaign is distributed (``--ray``): a batch per item, ``OUT/campaign/`` the record."""

    out: Path
    identity: dict
    batch_size: int
    timeout: float
    tf_reruns: int
    ray: str | None = "local"
    workers: int | None = None
    progress: object = None
    log: object = None
    failed: list = field(default_factory=list)  # (label, reason) of the batches that failed twice
    resumed: int = 0

    def __call__(self, examples: list, work: Path):
        store = CampaignDir(self.out, self.identity)
        batches = plan_batches(examples, self.batch_size)
        items = [Item(f"batch{gi}", fuzz_batch_task, (exs, self.timeout, self.tf_reruns),
                      label=f"batch {gi} (examples {exs[0].id}-{exs[-1].id})") for gi, exs in enumerate(batches)]
        # a batch's TF processes: the batch, its restarts, the reruns of its differences
        budget = self.timeout * (2 + 2 * self.tf_reruns) + 120
        results = run_items(items, store, ray=self.ray, workers=self.workers, item_timeout=budget,
                            progress=self.progress, log=self.log)
        self.resumed = sum(1 for r in results.values() if r.resumed)
        outcomes = {ex.id: Outcome(ex) for ex in examples}
        orphans = []
        for gi, (it, exs) in enumerate(zip(items, batches)):
            r = results[it.key]
            if not r.ok:
                self.failed.append((it.label, r.reason))
                for ex in exs:
                    outcomes[ex.id].error = f"not run: campaign item failed: {r.reason}"
                continue
            data = pickle.loads(r.files["pkl"])
            if "tar.gz" in r.files:
                _remap(data["outcomes"], data["orphans"], Path(data["root"]),
                       unpack(r.files["tar.gz"], work / f"batch{gi}"))
            if self.log:
                for line in data["logs"]:
                    self.log(line)
            outcomes.update(data["outcomes"])
            orphans += data["orphans"]
        return [outcomes[ex.id] for ex in examples], orphans


# -- harvest: one target per item ---------------------------------------------------------


def _unique_names(paths: list[Path]) -> list[str]:
    """A directory name per target: its name without the suffix, ``-2``... when taken."""
    names, seen = [], set()
    for p in paths:
        base = p.name[:-len(p.suffix)] if p.suffix and p.is_file() else p.name
        name, k = base or "target", 1
        while name in seen:
            k += 1
            name = f"{base}-{k}"
        seen.add(name)
        names.append(name)
    return names


def harvest_task(target: bytes, name: str, flags: str, signature: str | None, timeout: float, *,
                 python: str | None = None) -> tuple[dict, dict]:
    """One target harvested on a worker (it arrives packed; its harvest goes back packed)."""
    with tempfile.TemporaryDirectory(prefix="jitsim-campaign-") as tmp:
        src = unpack(target, Path(tmp) / "in")
        t = src.rename(src.parent / name)  # the target's own name (its suffix says what it is)
        index = harvest(t, Path(tmp) / "out", flags=flags, signature=signature, python=python, timeout=timeout)
        return ({"graphs": len(index["graphs"]), "tf_version": index.get("tf_version")},
                {"tar.gz": pack(Path(tmp) / "out")})


def harvest_campaign(targets: list[Path], out: Path, *, flags: str, signature: str | None, python: str | None,
                     timeout: float, ray: str | None, workers: int | None, progress=None, log=None):
    """Harvest every target into ``OUT/<name>/`` (a harvest directory each); returns
    ``(rows, failed)``: (target, directory, value) of each harvested target, (target, reason)
    of each that failed."""
    out = Path(out).absolute()
    names = _unique_names(targets)
    identity = {"command": "harvest", "targets": [str(t) for t in targets], "tf_xla_flags": flags,
                "signature": signature, "python": python}
    for t in targets:  # before anything is written
        if not t.exists():
            raise JitsimError("no such file or directory", t)
    store = CampaignDir(out, identity)
    items = []
    for t, name in zip(targets, names):
        items.append(Item(name, harvest_task, (pack(t), t.name, flags, signature, timeout), python=python,
                          label=str(t)))
    results = run_items(items, store, ray=ray, workers=workers, item_timeout=timeout + 300, progress=progress,
                        log=log)
    rows, failed = [], []
    for t, name in zip(targets, names):
        r = results[name]
        if not r.ok:
            failed.append((t, r.reason))
            continue
        dest = out / name
        if not (dest / "index.json").exists() or not r.resumed:
            with tempfile.TemporaryDirectory(prefix=".jitsim-unpack-", dir=out) as tmp:
                got = unpack(r.files["tar.gz"], tmp)
                idx = json.loads((got / "index.json").read_text())
                idx["target"] = str(t.resolve())  # where it is here, not on the worker
                (got / "index.json").write_text(json.dumps(idx, indent=1) + "\n")
                if dest.exists():
                    shutil.rmtree(dest)
                got.rename(dest)
        rows.append((t, dest, r.value))
    return rows, failed


# -- verify: one harvest directory per item -----------------------------------------------


def verify_task(harvest: bytes, options, *, python: str | None = None) -> tuple[dict, dict]:
    """One harvest verified on a worker (jitsim only: no TF process)."""
    from jitsim.crosscheck.fidelity import verify_dir

    with tempfile.TemporaryDirectory(prefix="jitsim-campaign-") as tmp:
        res = verify_dir(unpack(harvest, tmp), options)
    rows = [r for r in res.rows]
    value = {"graphs": len(rows), "identical": sum(r.diff is not None and r.diff.identical for r in rows),
             "same_names": sum(r.diff is not None and r.diff.same_names for r in rows),
             "simulated_tf_version": res.tf_version, "result": res.to_dict()}
    return value, {}


def verify_campaign(dirs: list[Path], options: list, out: Path | None, *, ray: str | None, workers: int | None,
                    identity: dict, progress=None, log=None):
    """Verify every harvest directory (``options[i]`` for ``dirs[i]``); returns ``(rows,
    failed)`` as :func:`harvest_campaign`. Without ``out`` the records go to a temporary
    directory (nothing to resume)."""
    names = _unique_names(dirs)
    with tempfile.TemporaryDirectory(prefix="jitsim-verify-") as tmp:
        store = CampaignDir(out if out is not None else tmp, identity)
        items = [Item(name, verify_task, (pack(d), opt), label=str(d)) for d, name, opt in zip(dirs, names, options)]
        results = run_items(items, store, ray=ray, workers=workers, item_timeout=3600, progress=progress, log=log)
    rows, failed = [], []
    for d, name in zip(dirs, names):
        r = results[name]
        (rows.append((d, name, r.value)) if r.ok else failed.append((d, r.reason)))
    return rows, failed


# -- the version matrix: a corpus under several TF releases -------------------------------


def matrix_task(program: bytes, name: str, flags: str, session, timeout: float, *,
                python: str | None = None) -> tuple[dict, dict]:
    """One corpus program harvested under a release's TF (``python``: the runtime
    environment's :data:`PYTHON_ENV`) and verified with jitsim simulating the release that
    wrote the dumps."""
    from jitsim.crosscheck.fidelity import verify_dir

    with tempfile.TemporaryDirectory(prefix="jitsim-campaign-") as tmp:
        src = unpack(program, Path(tmp) / "in")
        t = src.rename(src.parent / name)
        index = harvest(t, Path(tmp) / "out", flags=flags, python=python, timeout=timeout)
        res = verify_dir(Path(tmp) / "out", options_for(flags, session=session))
    rows = res.rows
    return ({"graphs": len(rows), "identical": sum(r.diff is not None and r.diff.identical for r in rows),
             "same_names": sum(r.diff is not None and r.diff.same_names for r in rows),
             "harvest_tf_version": index.get("tf_version"), "simulated_tf_version": res.tf_version,
             "simulated_reason": res.tf_version_reason}, {})


def matrix_campaign(runs: list, corpus_root: Path, pythons: list[str], out: Path, *, timeout: float,
                    ray: str | None, workers: int | None, progress=None, log=None):
    """Every corpus run under every Python's TF release (an item each); returns
    ``{python: (release, [(run, value or None, reason)])}`` in the order given."""
    identity = {"command": "matrix", "corpus": str(corpus_root), "runs": [r.name for r in runs],
                "pythons": list(pythons)}
    store = CampaignDir(out, identity)
    releases = {py: tf_version(py) for py in pythons}
    items = []
    for k, py in enumerate(pythons):
        for r in runs:
            prog = corpus_root / r.program
            items.append(Item(f"tf{releases[py]}-{k}-{r.name}", matrix_task,
                              (pack(prog), prog.name, r.flags, r.session(), timeout), python=py,
                              label=f"TF {releases[py]}: {r.name}"))
    results = run_items(items, store, ray=ray, workers=workers, item_timeout=timeout + 300, progress=progress,
                        log=log)
    table = {}
    it = iter(items)
    for py in pythons:
        rows = []
        for r in runs:
            res = results[next(it).key]
            rows.append((r, res.value if res.ok else None, res.reason))
        table[py] = (releases[py], rows)
    return table
