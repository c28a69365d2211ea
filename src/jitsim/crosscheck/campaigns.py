"""Campaigns: many independent TF items (fuzz batches, harvests, verifications, a corpus under
several TF releases) run in this process or as Ray tasks, with a campaign directory as the
source of truth (see docs/campaigns.md).

* :class:`CampaignDir` -- ``OUT/campaign/campaign.json`` (what the campaign is; resuming
  another one into the same directory is refused) and ``OUT/campaign/items/<key>.json`` (one
  record per finished item, ``jitsim.campaign-item/1``, written as it finishes, with the files
  it returned beside it as ``<key>.<name>``). Re-running the same command runs only the items
  without a successful record. Everything there is data (JSON, a packed directory), never
  unpickled: a record is checked field by field, against its item's input (sha256), against its
  files (sha256) and against what its own data shows (an item's ``load``); one that does not
  hold up is not done, and the item runs again (docs/campaigns.md).
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
import hashlib
import io
import json
import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tarfile
import tempfile
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import jitsim
from jitsim import process
from jitsim.files.input import kind_of_mode, os_problem
from jitsim.files.paths import missing_reason
from jitsim.crosscheck.campaign_state import (BOOL, DICT, FILE_NAME, NONNEG, NUM, SHA256, STR, INT, StateError,
                                              canonical_json, decode_fuzz_batch, dict_of, encode_fuzz_batch, fields,
                                              list_of, opt, parse_json, sha256_hex)
from jitsim.crosscheck.fuzz.evaluate import Outcome, evaluate_batch, plan_batches
from jitsim.tfprocess.harvest import harvest
from jitsim.errors import JitsimError
from jitsim.files.output import write_atomic
from jitsim.options import options_for

SCHEMA = "jitsim.campaign/1"
ITEM_SCHEMA = "jitsim.campaign-item/1"  # OUT/campaign/items/<key>.json
RETRIES = 1  # a failed item is tried once more
# the environment variable of a release's runtime environment naming its Python with TensorFlow
PYTHON_ENV = "JITSIM_TF_PYTHON"


# -- bytes in, bytes out ------------------------------------------------------------------


def pack(path: Path | str, *, follow_links: bool = False) -> bytes:
    """A file or directory as a gzipped tar (its content under the name ``item``).

    ``follow_links``: for the user's own input (a target, a harvest directory), which a
    worker must get as the serial command reads it: every symbolic link, inside or out of the
    directory, is packed as what it points to (a SavedModel's ``variables/`` linked to another
    disk arrives as a directory), since :func:`unpack` keeps refusing links that leave the
    archive. A link to nothing or a loop is a :class:`~jitsim.errors.JitsimError` naming it.
    Without it (what a worker sends back), links are packed as links."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", dereference=follow_links) as tar:
        if follow_links:
            _add_followed(tar, Path(path), "item")
        else:
            tar.add(str(path), arcname="item")
    return buf.getvalue()


def _followed(path: Path, ancestors: tuple = ()):
    """``(relative path, path)`` of ``path`` and everything under it, symbolic links followed,
    in a fixed order (sorted names); a link to nothing, a loop (a directory inside itself) or
    something that is not a file or a directory (a FIFO, a device) is refused."""
    stack = [(Path(), path, ancestors)]
    while stack:
        rel, p, above = stack.pop()
        try:
            st = os.stat(p)
        except OSError:
            raise JitsimError(missing_reason(p), p) from None
        if stat.S_ISDIR(st.st_mode):
            here = (st.st_dev, st.st_ino)
            if here in above:
                raise JitsimError("is a symbolic link loop (following its links leads back to a directory it is in)",
                                  p)
            yield rel, p
            try:
                names = sorted(os.listdir(p))
            except OSError as e:
                raise JitsimError(os_problem(e), p) from None
            stack.extend((rel / n, p / n, above + (here,)) for n in reversed(names))
        elif stat.S_ISREG(st.st_mode):
            yield rel, p
        else:
            raise JitsimError(f"is {kind_of_mode(st.st_mode)}, not a regular file or directory: a campaign packs "
                              "only files and directories", p)


def _add_followed(tar: tarfile.TarFile, path: Path, arcname: str) -> None:
    """Add ``path`` to ``tar`` (opened with ``dereference=True``) with its links followed."""
    for rel, p in _followed(path):
        name = arcname if rel == Path() else f"{arcname}/{rel.as_posix()}"
        tar.add(str(p), arcname=name, recursive=False)


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
            except (OSError, ValueError, RecursionError) as e:
                raise JitsimError(f"unreadable campaign record: {e}", meta) from None
            if type(old) is not dict:
                raise JitsimError("unreadable campaign record: not a JSON object", meta)
            if old.get("identity") != identity:
                old_identity = old.get("identity") if type(old.get("identity")) is dict else {}
                raise JitsimError("holds another campaign (" + _identity_diff(old_identity, identity)
                                  + "): give another output directory", meta)
        else:
            self.items.mkdir(parents=True, exist_ok=True)
            write_atomic(meta, (json.dumps({"schema": SCHEMA, "identity": identity}, indent=1) + "\n").encode())
        self.items.mkdir(parents=True, exist_ok=True)

    def load(self, key: str) -> tuple[dict | None, str | None]:
        """The item's record, checked against :data:`ITEM_SCHEMA`, or None and why not (None:
        there is none)."""
        p = self.items / f"{key}.json"
        try:
            data = p.read_bytes()
        except FileNotFoundError:
            return None, None
        except OSError as e:
            return None, f"its record {p.name} is unreadable ({type(e).__name__}: {e.strerror or e})"
        try:
            rec = check_record(parse_json(data, p.name), p.name)
            if rec["key"] != key:
                raise StateError(f"{p.name}: the record of item {rec['key']!r}")
        except StateError as e:
            return None, f"its record is damaged ({e})"
        return rec, None

    def record(self, key: str) -> dict | None:
        """The item's record if it holds up to its schema."""
        return self.load(key)[0]

    def files(self, key: str, rec: dict) -> tuple[dict | None, str | None]:
        """The files the record names, each matching its sha256, or None and why not."""
        out = {}
        for name, digest in rec["files"].items():
            p = self.items / f"{key}.{name}"
            try:
                data = p.read_bytes()
            except FileNotFoundError:
                return None, f"its file {p.name} is missing"
            except OSError as e:
                return None, f"its file {p.name} is unreadable ({type(e).__name__}: {e.strerror or e})"
            if sha256_hex(data) != digest:
                return None, f"its file {p.name} is not the one its record names (sha256 differs)"
            out[name] = data
        return out, None

    def save(self, key: str, record: dict, files: dict[str, bytes]) -> None:
        """The item's files first, its record last: a record means the item is complete."""
        for name, data in files.items():
            write_atomic(self.items / f"{key}.{name}", data)
        write_atomic(self.items / f"{key}.json", (json.dumps(record, indent=1, sort_keys=True) + "\n").encode())


# the fields of an item's record (jitsim.campaign-item/1); run_task's and Ray's own are optional
RECORD_FIELDS = {"schema": STR, "key": STR, "label": STR, "input_sha256": SHA256, "ok": BOOL, "attempts": NONNEG,
                 "value": DICT, "files": dict_of(SHA256, key=FILE_NAME)}
RECORD_OPTIONAL = {"reason": STR, "tf_version": STR, "node": STR, "pid": INT, "ray_node": STR, "wall_s": NUM}


def check_record(rec, where: str = "record") -> dict:
    """An item's record as :data:`ITEM_SCHEMA` says, or :class:`StateError`."""
    fields(rec, where, RECORD_FIELDS, RECORD_OPTIONAL)
    if rec["schema"] != ITEM_SCHEMA:
        raise StateError(f"{where}: schema {rec['schema']!r}, not {ITEM_SCHEMA!r}")
    return rec


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
    # what the item runs on, as JSON data: its sha256 is in the record, and a record of another
    # input is not this item's
    input: object = None
    # (value, files) -> the item's data, read from its files and checked against the value (what
    # the record claims); raises StateError where they disagree. None: the value is the data
    load: object = None

    def input_sha256(self) -> str:
        return sha256_hex(canonical_json({"key": self.key, "input": self.input}))


@dataclass
class ItemResult:
    key: str
    ok: bool
    value: dict = field(default_factory=dict)
    files: dict = field(default_factory=dict)
    reason: str = ""
    attempts: int = 1
    resumed: bool = False
    data: object = None  # what the item's load made of its value and files (else its value)


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


def _record(it: Item, res: dict, attempts: int, files: dict[str, bytes]) -> dict:
    rec = {"schema": ITEM_SCHEMA, "key": it.key, "label": it.label, "input_sha256": it.input_sha256(),
           "ok": bool(res.get("ok")), "attempts": attempts, "value": (res.get("value") or {}) if res.get("ok") else {},
           "files": {name: sha256_hex(data) for name, data in files.items()}}
    rec.update({k: res[k] for k in RECORD_OPTIONAL if k in res})
    return rec


def _load(it: Item, value: dict, files: dict):
    """The item's data from its value and files (:attr:`Item.load`), or StateError."""
    if it.load is None:
        return value
    try:
        return it.load(value, files)
    except StateError:
        raise
    except Exception as e:  # a file the loader could not read (a broken archive...): not this item's data
        raise StateError(f"{type(e).__name__}: {str(e)[:200]}") from None


def _resume(store: CampaignDir, it: Item) -> tuple[ItemResult | None, str | None]:
    """The item's earlier result when its record holds up; else None, and why not (None: no
    record, or a failed one: the item simply runs)."""
    rec, problem = store.load(it.key)
    if rec is None or not rec["ok"]:
        return None, problem
    if rec["input_sha256"] != it.input_sha256():
        return None, "its record is of another input (its sha256 differs)"
    files, problem = store.files(it.key, rec)
    if files is None:
        return None, problem
    try:
        data = _load(it, rec["value"], files)
    except StateError as e:
        return None, f"its record does not hold up ({e})"
    return ItemResult(it.key, True, rec["value"], files, attempts=rec["attempts"], resumed=True, data=data), None


def run_items(items: list[Item], store: CampaignDir, *, ray: str | None = None, workers: int | None = None,
              item_timeout: float = 3600.0, progress=None, log=None) -> dict[str, ItemResult]:
    """Run every item without a successful record in ``store`` (in order here, or as Ray
    tasks at most ``workers`` at a time) and record each as it finishes; returns the result
    of every item, those of earlier runs included (``resumed``)."""
    results: dict[str, ItemResult] = {}
    todo = []
    for it in items:
        res, problem = _resume(store, it)
        if res is not None:
            results[it.key] = res
            continue
        if problem and log:  # one line
            log(f"{it.label or it.key}: {' '.join(problem.split())}; running it again")
        todo.append(it)
    clock = _Clock(len(items), len(items) - len(todo), progress)
    clock.tick()

    def finish(it: Item, res: dict, attempts: int) -> None:
        files, data = (res.get("files") or {}) if res.get("ok") else {}, None
        if res.get("ok"):  # what the task returned is read back as a resumed record would be
            try:
                data = _load(it, res.get("value") or {}, files)
            except StateError as e:
                res = {**res, "ok": False, "reason": f"its result does not hold up: {e}"[:500]}
                files = {}
        rec = _record(it, res, attempts, files)
        store.save(it.key, rec, files)
        results[it.key] = ItemResult(it.key, bool(res.get("ok")), rec["value"], files, res.get("reason", ""), attempts,
                                     data=data)
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
    """One fuzz batch on a worker, in a directory of its own: the outcomes (``outcomes.json``,
    ``jitsim.fuzz-batch/1``: :mod:`jitsim.crosscheck.campaign_state`) and, when TF differed from
    itself, the batch's TF runs (``tar.gz``: the evidence OUT/tf-unstable/ is made from)."""
    with tempfile.TemporaryDirectory(prefix="jitsim-campaign-") as tmp:
        root = Path(tmp) / "batch"
        logs: list[str] = []
        outcomes, orphans = evaluate_batch(exs, root, timeout=timeout, tf_reruns=tf_reruns, log=logs.append)
        files = {"outcomes.json": encode_fuzz_batch(outcomes, orphans, logs, root)}
        if _has_unstable(outcomes, orphans):
            files["tar.gz"] = pack(root)
    return _fuzz_value(exs, outcomes), files


def _has_unstable(outcomes: dict, orphans: list) -> bool:
    return any(o.tf_unstable for o in outcomes.values()) or any(c.tf_unstable for c in orphans)


def _fuzz_value(exs: list, outcomes: dict) -> dict:
    """A batch's record's value: what its outcomes show."""
    return {"examples": len(exs), "verdicts": {str(i): verdict(o) for i, o in outcomes.items()},
            "graphs": sum(o.graphs for o in outcomes.values())}


def _claims_differ(claims: dict, shown: dict, what: str) -> str | None:
    """Where a record's value says other than its data shows (one difference), or None."""
    for k in sorted(set(claims) | set(shown)):
        if claims.get(k) != shown.get(k):
            a, b = claims.get(k), shown.get(k)
            if isinstance(a, dict) and isinstance(b, dict):
                sub = next(x for x in sorted(set(a) | set(b)) if a.get(x) != b.get(x))
                return f"its record says {k} {sub}: {a.get(sub)!r}, its {what} {b.get(sub)!r}"
            return f"its record says {k}: {a!r}, its {what} {b!r}"
    return None


def load_fuzz_batch(exs: list, value: dict, files: dict) -> tuple[dict, list, list[str]]:
    """A batch's outcomes read back (for the batch ``exs``, as the driver drew it) and checked
    against its record's value: the verdicts and graph count it claims must be those of its
    outcomes, and its TF runs (``tar.gz``) there exactly when an outcome shows TF unstable."""
    fields(value, "value", {"examples": NONNEG, "verdicts": dict_of(STR), "graphs": NONNEG})
    extra = sorted(set(files) - {"outcomes.json", "tar.gz"})
    if extra or "outcomes.json" not in files:
        raise StateError(f"a batch's files are outcomes.json (and tar.gz), not {sorted(files)}")
    outcomes, orphans, logs = decode_fuzz_batch(files["outcomes.json"], exs)
    why = _claims_differ(value, _fuzz_value(exs, outcomes), "outcomes")
    if why:
        raise StateError(why)
    if _has_unstable(outcomes, orphans) != ("tar.gz" in files):
        raise StateError("TF-unstable outcomes without their TF runs (tar.gz)" if "tar.gz" not in files else
                         "TF runs (tar.gz) with no TF-unstable outcome")
    if "tar.gz" in files:
        _check_archive(files["tar.gz"])
    return outcomes, orphans, logs


def _check_archive(data: bytes) -> None:
    """:func:`pack`'s bytes: a gzipped tar read to its end, every member under ``item``."""
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            for m in tar:
                if m.name != "item" and not m.name.startswith("item/"):
                    raise StateError(f"tar.gz: a member {m.name[:100]!r} outside item/")
    except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
        raise StateError(f"tar.gz: not a readable archive ({type(e).__name__}: {str(e)[:100]})") from None


def _place_tf_runs(outcomes: dict, orphans: list, where: Path) -> None:
    """Point the TF runs of TF-unstable evidence (relative to the batch's directory in its
    file) at where the driver unpacked them."""
    for u in [u for o in outcomes.values() for u in o.tf_unstable] + [u for c in orphans for u in c.tf_unstable]:
        for g in u.tf:
            g.dumps = where / g.dumps


def _fuzz_input(exs: list) -> list:
    """A batch's input: its programs and their TF configuration."""
    return [[ex.id, ex.flags, ex.devices, ex.grappler, ex.source()] for ex in exs]


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
                      label=f"batch {gi} (examples {exs[0].id}-{exs[-1].id})", input=_fuzz_input(exs),
                      load=functools.partial(load_fuzz_batch, exs)) for gi, exs in enumerate(batches)]
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
            mine, lost, logs = r.data
            if "tar.gz" in r.files:
                _place_tf_runs(mine, lost, unpack(r.files["tar.gz"], work / f"batch{gi}"))
            if self.log:
                for line in logs:
                    self.log(line)
            outcomes.update(mine)
            orphans += lost
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
        return _harvest_value(index), {"tar.gz": pack(Path(tmp) / "out")}


def _harvest_value(index: dict) -> dict:
    return {"graphs": len(index["graphs"]), "tf_version": index.get("tf_version")}


MAX_INDEX_BYTES = 256 << 20


def load_harvest(value: dict, files: dict) -> dict:
    """A harvest item's value as its packed harvest shows it (its ``index.json``: the graphs
    harvested, the TF version), or StateError where the record claims otherwise."""
    fields(value, "value", {"graphs": NONNEG, "tf_version": opt(STR)})
    if sorted(files) != ["tar.gz"]:
        raise StateError(f"a harvest's file is tar.gz, not {sorted(files)}")
    _check_archive(files["tar.gz"])
    try:
        with tarfile.open(fileobj=io.BytesIO(files["tar.gz"]), mode="r:gz") as tar:
            m = tar.getmember("item/index.json")
            if not m.isfile() or m.size > MAX_INDEX_BYTES:
                raise StateError("tar.gz: item/index.json is no harvest index")
            data = tar.extractfile(m).read()
    except KeyError:
        raise StateError("tar.gz: no item/index.json") from None
    except (tarfile.TarError, EOFError, OSError, zlib.error) as e:
        raise StateError(f"tar.gz: not a readable archive ({type(e).__name__})") from None
    index = parse_json(data, "index.json")
    if type(index) is not dict:
        raise StateError("index.json: not an object")
    list_of(DICT)(index.get("graphs"), "index.json.graphs")
    opt(STR)(index.get("tf_version"), "index.json.tf_version")
    why = _claims_differ(value, _harvest_value(index), "index.json")
    if why:
        raise StateError(why)
    return _harvest_value(index)


def _tree_sha256(path: Path) -> str:
    """A file's or directory's content (names, bytes) as one sha256: what :func:`pack` with
    ``follow_links`` packs, so a symbolic link counts as what it points to (another file
    behind it is another input)."""
    h = hashlib.sha256()
    path = Path(path)
    if not path.is_dir():
        h.update(b"file\0")
        h.update(path.read_bytes())
        return h.hexdigest()
    for rel, p in _followed(path):
        if rel == Path():
            continue
        name = rel.as_posix().encode("utf-8", "surrogateescape")
        if p.is_dir():
            h.update(b"dir\0" + name + b"\0")
        else:
            data = p.read_bytes()
            h.update(b"file\0" + name + b"\0" + str(len(data)).encode() + b"\0" + data)
    return h.hexdigest()


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
    # the targets as the serial harvest reads them: links followed (a SavedModel's variables/
    # linked elsewhere travels as a directory); a link to nothing refused before anything is written
    packed = [pack(t, follow_links=True) for t in targets]
    store = CampaignDir(out, identity)
    items = []
    for t, name, data in zip(targets, names, packed):
        items.append(Item(name, harvest_task, (data, t.name, flags, signature, timeout), python=python,
                          label=str(t), input={"target": str(t), "name": t.name, "sha256": _tree_sha256(t)},
                          load=load_harvest))
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
        rows.append((t, dest, r.data))
    return rows, failed


# -- verify: one harvest directory per item -----------------------------------------------


def verify_task(harvest: bytes, options, *, python: str | None = None) -> tuple[dict, dict]:
    """One harvest verified on a worker (jitsim only: no TF process)."""
    from jitsim.crosscheck.fidelity import verify_dir

    with tempfile.TemporaryDirectory(prefix="jitsim-campaign-") as tmp:
        res = verify_dir(unpack(harvest, tmp), options)
    value = {**_counts(res.rows), "simulated_tf_version": res.tf_version, "result": res.to_dict()}
    return value, {}


def _counts(rows: list) -> dict:
    return {"graphs": len(rows), "identical": sum(r.diff is not None and r.diff.identical for r in rows),
            "same_names": sum(r.diff is not None and r.diff.same_names for r in rows)}


def _rows_of_result(result, where: str = "result") -> list:
    """The per-graph rows of a ``jitsim.compare/1`` result, each graph's comparison checked
    against its own node differences (identical: none; same names: identical and every cluster
    named as TF named it; agreeing nodes: the others) and the whole result against its rows
    (its summary and derived fields are what they make): StateError where not."""
    from jitsim.crosscheck.compare import KINDS, CorpusRow, PartitionDiff
    from jitsim.crosscheck.scoring import CompareResult

    fields(result, where, {"schema": STR, "truth_stage": STR, "notes": list_of(STR), "summary": DICT,
                           "graphs": list_of(DICT)})
    if result["schema"] != "jitsim.compare/1":
        raise StateError(f"{where}: schema {result['schema']!r}, not 'jitsim.compare/1'")
    rows = []
    for i, g in enumerate(result["graphs"]):
        w = f"{where}.graphs[{i}]"
        fields(g, w, {"name": STR, "error": opt(STR), "diff": opt(DICT)})
        if (g["error"] is None) == (g["diff"] is None):
            raise StateError(f"{w}: an error or a comparison, one of them")
        diff = None
        if g["diff"] is not None:
            d = fields(g["diff"], f"{w}.diff", {
                "identical": BOOL, "same_names": BOOL, "n_nodes": NONNEG, "n_truth_clusters": NONNEG,
                "n_predicted_clusters": NONNEG, "n_clustered_truth": NONNEG, "n_clustered_predicted": NONNEG,
                "agreeing_nodes": NONNEG, "agreement": NUM, "summary": STR, "counts": dict_of(NONNEG),
                "cluster_map": dict_of(opt(STR)), "clusters": list_of(DICT), "diffs": list_of(DICT)})
            for k, x in enumerate(d["diffs"]):
                fields(x, f"{w}.diff.diffs[{k}]", {"node": STR, "kind": STR, "predicted": opt(STR), "truth": opt(STR),
                                                   "detail": STR})
                if x["kind"] not in KINDS:
                    raise StateError(f"{w}.diff.diffs[{k}]: no difference of kind {x['kind']!r}")
            for k, x in enumerate(d["clusters"]):
                fields(x, f"{w}.diff.clusters[{k}]", {"truth": opt(STR), "predicted": opt(STR), "truth_size": NONNEG,
                                                      "predicted_size": NONNEG, "overlap": NONNEG})
            diff = PartitionDiff.from_dict(d)
            if diff.identical != (not diff.diffs) or diff.agreeing_nodes != diff.n_nodes - len(diff.diffs) \
                    or diff.same_names != (diff.identical and all(k == v for k, v in diff.cluster_map.items())) \
                    or diff.n_truth_clusters != len(diff.cluster_map) or diff.to_dict() != d:
                raise StateError(f"{w}.diff: its counts and flags are not what its node differences show")
        rows.append(CorpusRow(g["name"], diff, g["error"]))
    if CompareResult(rows, truth_stage=result["truth_stage"], notes=list(result["notes"])).to_dict() != result:
        raise StateError(f"{where}: its summary is not what its graphs show")
    return rows


def load_verify(value: dict, files: dict, extra: dict | None = None) -> dict:
    """A verification's value with its counts derived from its per-graph results (the
    comparison it holds), or StateError where the record claims other counts."""
    fields(value, "value", {"graphs": NONNEG, "identical": NONNEG, "same_names": NONNEG,
                            "simulated_tf_version": STR, "result": DICT, **(extra or {})})
    if files:
        raise StateError(f"no files expected, not {sorted(files)}")
    shown = _counts(_rows_of_result(value["result"], "value.result"))
    why = _claims_differ({k: value[k] for k in shown}, shown, "per-graph results")
    if why:
        raise StateError(why)
    return {**value, **shown}


def verify_campaign(dirs: list[Path], options: list, out: Path | None, *, ray: str | None, workers: int | None,
                    identity: dict, progress=None, log=None):
    """Verify every harvest directory (``options[i]`` for ``dirs[i]``); returns ``(rows,
    failed)`` as :func:`harvest_campaign`. Without ``out`` the records go to a temporary
    directory (nothing to resume)."""
    names = _unique_names(dirs)
    packed = [pack(d, follow_links=True) for d in dirs]  # links followed, as for harvest targets
    with tempfile.TemporaryDirectory(prefix="jitsim-verify-") as tmp:
        store = CampaignDir(out if out is not None else tmp, identity)
        items = [Item(name, verify_task, (data, o), label=str(d), load=load_verify,
                      input={"dir": str(Path(d).absolute()), "sha256": _tree_sha256(d)})
                 for d, name, o, data in zip(dirs, names, options, packed)]
        results = run_items(items, store, ray=ray, workers=workers, item_timeout=3600, progress=progress, log=log)
    rows, failed = [], []
    for d, name in zip(dirs, names):
        r = results[name]
        (rows.append((d, name, r.data)) if r.ok else failed.append((d, r.reason)))
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
    return ({**_counts(res.rows), "harvest_tf_version": index.get("tf_version"), "simulated_tf_version": res.tf_version,
             "simulated_reason": res.tf_version_reason, "result": res.to_dict()}, {})


def load_matrix(value: dict, files: dict) -> dict:
    """:func:`load_verify` for a matrix item (its value also says which TF harvested)."""
    return load_verify(value, files, {"harvest_tf_version": opt(STR), "simulated_reason": STR})


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
                              (pack(prog, follow_links=True), prog.name, r.flags, r.session(), timeout), python=py,
                              label=f"TF {releases[py]}: {r.name}", load=load_matrix,
                              input={"python": py, "tf_version": releases[py], "run": r.name, "program": str(prog),
                                     "flags": r.flags, "sha256": _tree_sha256(prog)}))
    results = run_items(items, store, ray=ray, workers=workers, item_timeout=timeout + 300, progress=progress,
                        log=log)
    table = {}
    it = iter(items)
    for py in pythons:
        rows = []
        for r in runs:
            res = results[next(it).key]
            rows.append((r, res.data if res.ok else None, res.reason))
        table[py] = (releases[py], rows)
    return table
