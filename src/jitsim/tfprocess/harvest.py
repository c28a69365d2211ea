"""Run real TensorFlow with the JIT dump flags and collect the dumps: jitsim's ground truth.

A *target* is a Python program, a GraphDef (``.pb``/``.pbtxt``; its ``Placeholder``s are
fed generated data and every sink is fetched in a ``tf.compat.v1.Session``), a
SavedModel directory (one signature, called with generated inputs), a ``.keras`` file
(loaded with ``compile=False`` and called through ``tf.function`` with the stated input
shapes, unknown dims not given set to 2, see :mod:`jitsim.tfprocess.keras_call`) or a *function bundle* (a directory written by
:func:`jitsim.frontend.capture.write_function_bundle`: a serialized ConcreteFunction that
the runner registers and calls by name). Every kind but ``program`` runs through one of
the runner scripts below; all of them run in a subprocess with::

    TF_XLA_FLAGS=<flags>  TF_DUMP_GRAPH_PREFIX=<out>/dumps
    TF_CPP_VMODULE=mark_for_compilation_pass=1,encapsulate_subgraphs_pass=1,
                   build_xla_ops_pass=1,clone_constants_for_better_clustering=1

and the output directory gets ``dumps/``, ``log.txt`` (TF's stdout+stderr) and
``index.json`` (schema ``jitsim.dump-index/1``, documented in docs/ground-truth.md).
The directory is assembled under a temporary name and renamed at the end, so a failed
harvest leaves no partial output.

The runners print :data:`CALL_MARK` just before *the call* (the signature, the model, the
session run, the function); :func:`main_graph_id` uses it to find the call's graph.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from jitsim.graph.dumps import INDEX_SCHEMA, index_dump_dir
from jitsim.errors import HarvestError, JitsimError, StorageError
from jitsim.registry import protos
from jitsim.graph.events import is_event_file
from jitsim.files.input import read_file, read_text
from jitsim.graph.io import check_signature_name, read_graph_file, read_graphdef, read_saved_model
from jitsim.files.output import (STORAGE_ERRNOS, release, remove_tree, storage_words, temporary_directory,
                                 write_probe)
from jitsim.registry import OP_LIBRARY_FILE, op_defs
from jitsim.defs import MARK_DUMP
from jitsim.tfprocess.targets import target_kind
from jitsim.tfprocess import sandbox
from jitsim.tfprocess.runners import (  # noqa: F401 - the runner's names, re-exported
    BOOTSTRAP, CALL_MARK, CALL_ONCE, INPUT_ERROR_MARK, KERAS_CALL_MARK, NOTE_MARK, PROGRAM_STEP, REFUSED_MARK,
    RUNNERS, STEP_FUNCTION, VERSION_MARK,
)

DEFAULT_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_clustering_debug"
VMODULE = (
    "mark_for_compilation_pass=1,encapsulate_subgraphs_pass=1,build_xla_ops_pass=1,"
    "clone_constants_for_better_clustering=1"
)
_NO_TF = ("this runs real TensorFlow, which is not installed here: pip install 'jitsim[tf]' (or give --python of "
          "an environment that has it)")


def tf_importable() -> bool:
    """Whether this Python can import TensorFlow (without importing it)."""
    import importlib.util

    return importlib.util.find_spec("tensorflow") is not None


def saved_model_signatures(target: Path) -> list[str]:
    """Signature names of a SavedModel's first MetaGraph (read without TensorFlow)."""
    sm = read_saved_model(target)
    return sorted(sm.meta_graphs[0].signature_def) if sm.meta_graphs else []


def check_signature(target: Path, signature: str | None) -> None:
    """A clear error, before starting TF, when the signature to call is not there (the
    default ``serving_default`` included: never fall back to another one) or is one of TF's
    internal entries (``__saved_model_init_op``): the rule of the TF-free route
    (:func:`jitsim.graph.io.check_signature_name`)."""
    sigs = saved_model_signatures(target)
    if not sigs:
        raise HarvestError(f"the SavedModel has no signature {signature or 'serving_default'!r}; it has no "
                           "signatures", target)
    try:
        check_signature_name(sigs, signature, target)
    except JitsimError as e:
        raise HarvestError(e.message, target) from None


def _ops_of_graphdef(gd) -> set[str]:
    ops = {n.op for n in gd.node}
    for f in gd.library.function:
        ops.update(n.op for n in f.node_def)
    return ops


def target_ops(target: Path, kind: str) -> set[str]:
    """Op types a target uses (SavedModel, GraphDef, function bundle; empty for others)."""
    try:
        if kind == "saved_model":
            ops: set[str] = set()
            for mg in read_saved_model(target).meta_graphs:
                ops |= _ops_of_graphdef(mg.graph_def)
            return ops
        if kind == "graphdef":
            return _ops_of_graphdef(read_graphdef(target))
        if kind == "function":
            lib = protos.FunctionDefLibrary()
            lib.ParseFromString(read_file(target / "library.pb"))
            return {n.op for f in lib.function for n in f.node_def}
    except Exception:  # noqa: BLE001 - unreadable here: TF will say what is wrong
        return set()
    return set()


def runner_imports(target: Path, kind: str) -> list[str]:
    """Op libraries to import before loading the target: ``tensorflow_text`` when the target
    uses ops TF core does not register and tensorflow-text is installed."""
    import importlib.util

    ops = target_ops(target, kind)
    if not ops:
        return []
    known = op_defs()
    fns = set()
    if kind == "function":
        lib = protos.FunctionDefLibrary()
        lib.ParseFromString(read_file(target / "library.pb"))
        fns = {f.signature.name for f in lib.function}
    unknown = {o for o in ops if o not in known and o not in fns and not o.startswith("__inference")}
    if unknown and importlib.util.find_spec("tensorflow_text") is not None:
        return ["tensorflow_text"]
    return []


def _command(target: Path, kind: str, signature: str | None, python: str, workdir: Path,
             tail: str | None = None, call: dict | None = None, input_shapes=()) -> list[str]:
    boot = workdir / "_jitsim_bootstrap.py"
    boot.write_text(BOOTSTRAP)
    if kind == "program" and tail is None:
        return [python, str(boot), str(target)]
    runner = workdir / f"_jitsim_{kind}_runner.py"
    body = PROGRAM_STEP if kind == "program" else RUNNERS[kind]
    runner.write_text(body + (CALL_ONCE if tail is None else tail))
    if kind == "keras" and target.suffix != ".keras":  # Keras loads archives by their .keras name only
        link = workdir / "model.keras"
        link.symlink_to(Path(target).resolve())
        target = link
    args = [python, str(boot), str(runner), str(_tf_readable(target, kind, workdir))]
    if kind == "saved_model":
        args.append(signature or "")
    if kind == "graphdef" and call is not None:
        spec = workdir / "_jitsim_call.json"
        spec.write_text(json.dumps(call, sort_keys=True))
        args.append(str(spec))
    if kind == "keras" and input_shapes:
        spec = workdir / "_jitsim_input_shapes.json"
        spec.write_text(json.dumps({"input_shapes": [[k, list(v)] for k, v in input_shapes]}))
        args.append(str(spec))
    return args


def _tf_readable(target: Path, kind: str, workdir: Path) -> Path:
    """The file TF's GraphDef runner reads: ``target`` itself, or for a TensorBoard event file
    (which jitsim reads by content, :mod:`jitsim.graph.events`) its graph as a binary
    GraphDef or MetaGraphDef in ``workdir``."""
    if kind != "graphdef":
        return target
    if not is_event_file(target):
        return target
    gd, meta = read_graph_file(target)
    out = workdir / ("_jitsim_graph.meta" if meta is not None else "_jitsim_graph.pb")
    out.write_bytes((meta if meta is not None else gd).SerializeToString(deterministic=True))
    return out


def harvest_env(dump_dir: Path, flags: str, base: dict | None = None) -> dict:
    env = dict(os.environ if base is None else base)
    env.update(
        TF_XLA_FLAGS=flags,
        TF_DUMP_GRAPH_PREFIX=str(dump_dir),
        TF_CPP_VMODULE=VMODULE,
        TF_CPP_MIN_LOG_LEVEL="0",
        PYTHONHASHSEED="0",
        CUDA_VISIBLE_DEVICES=env.get("CUDA_VISIBLE_DEVICES", "-1"),
    )
    return env


def main_graph_id(graphs: list[dict], log_text: str) -> int | None:
    """The graph of *the call*: of the graphs TF dumped after the runner's :data:`CALL_MARK`
    line, the one with the most nodes (the called function's body, into which TF inlined the
    functions it calls; the other graphs of the call are TF's single-op graphs for eager
    ops). Without a mark (a ``program`` target), the largest graph of the run. None when
    no graph was dumped."""
    if not graphs:
        return None
    pos = log_text.find("\n" + CALL_MARK)
    after = graphs
    if pos >= 0:
        first_line = {}
        for m in re.finditer(r"Dumped (?:Graph|FunctionDef) to (\S+)", log_text):
            first_line.setdefault(Path(m.group(1)).name, m.start())
        after = [g for g in graphs
                 if min((first_line.get(f, -1) for f in g["files"].values()), default=-1) > pos]
        if not after:
            return None
    return max(after, key=lambda g: (g["nodes"], -g["id"]))["id"]


def checked_target_and_output(target: Path, out: Path, signature: str | None, overwrite: bool) -> tuple[str, Path]:
    """``(kind of target, a fresh work directory beside out)`` once the target is known
    (a SavedModel's signature exists) and ``out`` may be written: empty, or ``overwrite``.
    The command fills the work directory and renames it to ``out`` when it has succeeded."""
    kind = target_kind(target)
    if kind == "saved_model":
        check_signature(target, signature)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise HarvestError("output directory exists and is not empty (use --overwrite)", out)
    out.parent.mkdir(parents=True, exist_ok=True)
    return kind, temporary_directory(prefix=f".{out.name[:200]}.", dir=out.parent)


def harvest(
    target: Path | str,
    out: Path | str,
    *,
    flags: str = DEFAULT_FLAGS,
    signature: str | None = None,
    python: str | None = None,
    timeout: float = 600.0,
    progress=None,
    overwrite: bool = False,
    extra: dict | None = None,
    env_extra: dict | None = None,
    tail: str | None = None,
    require_dumps: bool = True,
    call: dict | None = None,
    input_shapes=(),
    dry_run: bool = False,
    isolate: bool = False,
) -> dict:
    """Run ``target`` under real TF with the dump flags; write ``out/`` and return its index.

    ``progress``, if given, is called about twice a second with
    ``(elapsed_seconds, number_of_dump_files)`` while TF runs. ``extra`` entries are added
    to ``index.json`` (the capture front end records its own facts there).
    ``env_extra``: more environment variables for TF's process. ``tail``: Python code run
    instead of the one call (it finds the runner's ``_step()``; a program target must then
    define ``jitsim_step()``, see :data:`STEP_FUNCTION`). ``require_dumps=False``: a run
    that dumped no graph (auto-clustering off) is no error. ``call``: for a GraphDef or
    MetaGraphDef, the ``sess.run`` to make (:meth:`jitsim.frontend.session_call.SessionCall.
    to_dict`) or the exported function to call (:meth:`jitsim.frontend.exported_function.
    ExportedFunction.to_dict`); default: every placeholder fed and every sink fetched.
    ``input_shapes``: for a ``.keras`` file, the stated input shapes
    (:func:`jitsim.tfprocess.keras_call.normalize_input_shapes`); the inputs the call used are
    in the index's ``keras_call``.

    ``dry_run``: TF builds the call's graph and dumps it but runs nothing of the model
    (:mod:`jitsim.tfprocess.runners`; a program still runs). ``isolate``: the process gets the
    sandbox's environment (no secrets, its own home, no network where the system allows it,
    :mod:`jitsim.tfprocess.sandbox`). Every run dies with jitsim and at ``timeout`` (its own
    alarm), and a reaper removes its files if jitsim is killed.
    """
    if input_shapes:
        from jitsim.tfprocess.keras_call import as_pairs

        try:
            input_shapes = as_pairs(input_shapes)
        except HarvestError:
            raise
        except JitsimError as e:
            raise HarvestError(e.message, target) from None
        if target_kind(Path(target).resolve()) != "keras":
            raise HarvestError("--input-shape applies to a .keras file (a Keras model's inputs)", target)
    target = Path(target).resolve()
    out = Path(out).resolve()  # TF runs in a scratch cwd: the dump prefix must be absolute
    if python is None and not tf_importable():  # said before anything is made or started
        raise HarvestError(_NO_TF, target)
    try:
        kind, work = checked_target_and_output(target, out, signature, overwrite)
    except OSError as e:
        if e.errno not in STORAGE_ERRNOS:
            raise
        raise StorageError(storage_words(e), OUT_UNWRITABLE, out) from None
    runtmp = reaper = None
    ran = False
    try:
        dumps = work / "dumps"
        dumps.mkdir()
        try:
            runtmp = temporary_directory(prefix="jitsim-run-")
        except OSError as e:
            if e.errno not in STORAGE_ERRNOS:
                raise
            raise StorageError(storage_words(e), TMP_UNWRITABLE, tempfile.gettempdir()) from None
        # started before TF: if jitsim is killed, it kills TF's process group and removes both
        reaper = sandbox.Reaper([runtmp, work], timeout)
        try:  # the runner script and a GraphDef TF can read go into the temporary directory
            cmd = _command(target, kind, signature, python or sys.executable, runtmp, tail, call, input_shapes)
        except OSError as e:
            if e.errno not in STORAGE_ERRNOS:
                raise
            raise StorageError(storage_words(e), TMP_UNWRITABLE, runtmp.parent) from None
        # TF's and Keras' own temporary files (a .keras file's weights unpacked) go under runtmp,
        # which is removed whatever happens
        if isolate:
            env = harvest_env(dumps, flags, sandbox.environment(dict(os.environ), runtmp))
        else:
            env = harvest_env(dumps, flags)
            (runtmp / "tmp").mkdir()
            env["TMPDIR"] = str(runtmp / "tmp")
        env.update(env_extra or {})
        env.update(sandbox.sandbox_variables(os.getpid(), timeout, network=isolate))
        if dry_run:
            env["JITSIM_DRY_RUN"] = "1"
        if kind == "program" and tail is not None:
            env["JITSIM_PROGRAM"] = str(target)
        deps = runtmp / "deps.json"
        if kind == "program":
            env["JITSIM_DEPS_OUT"] = str(deps)
        imports = runner_imports(target, kind)
        if imports:
            env["JITSIM_RUNNER_IMPORTS"] = ",".join(imports)
        if kind != "program":  # the runners import this jitsim (jitsim.tfprocess.keras_call)
            src = str(Path(__file__).resolve().parents[2])
            env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        all_ops = runtmp / "all_ops.pb"
        env["JITSIM_OP_DEFS_OUT"] = str(all_ops)
        log_path = work / "log.txt"
        t0 = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                cmd, cwd=runtmp, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                process_group=0,
            )
            reaper.watch(proc.pid)
            try:
                while True:
                    try:
                        proc.wait(timeout=0.5)
                        break
                    except subprocess.TimeoutExpired:
                        elapsed = time.monotonic() - t0
                        if elapsed > timeout:
                            raise HarvestError(f"TensorFlow run timed out after {timeout:.0f} s", target)
                        if progress:
                            progress(elapsed, sum(1 for _ in dumps.iterdir()))
            finally:  # Ctrl-C, a signal, an error, the time limit: TF's process group ends with jitsim
                _kill_group(proc)
        wall = time.monotonic() - t0
        ran = True
        # a full disk (or a file size limit) cuts TF's dumps and log short, often silently: said
        # as such, before what TF made of it and before anything is indexed or cached
        check_room(work, runtmp if proc.returncode != 0 or _dumps_cut_short(dumps) else None, out)
        library_ops = _library_op_defs(all_ops, work / OP_LIBRARY_FILE)
        log_text = read_text(log_path, what="TF's log")
        notes = [ln[len(NOTE_MARK):].strip() for ln in log_text.splitlines() if ln.startswith(NOTE_MARK)]
        graphs = None
        if proc.returncode != 0:
            lines = log_text.splitlines()
            bad = [ln[len(INPUT_ERROR_MARK):].strip() for ln in lines if ln.startswith(INPUT_ERROR_MARK)]
            if bad:  # the stated call does not fit the model: the user's error, in its own words
                raise HarvestError(bad[-1], target)
            refused = [ln[len(REFUSED_MARK):].strip() for ln in lines if ln.startswith(REFUSED_MARK)]
            if refused:
                raise HarvestError(refused[-1], target)
            last = last_error_line(log_text)
            if "No module named 'tensorflow'" in last:  # the --python given has none
                raise HarvestError(f"{_NO_TF} ({python or sys.executable} cannot import it)", target)
            if proc.returncode in (-14, 142):  # its own alarm (SIGALRM): the deadline
                raise HarvestError(f"TensorFlow run timed out after {timeout:.0f} s", target)
            graphs = index_dump_dir(dumps, log_text) if keep_failed_call(kind, tail) and any(dumps.iterdir()) else []
            if main_graph_id(graphs, log_text) is None:
                raise HarvestError(f"TensorFlow run failed (exit {proc.returncode}): {last}", target)
            # the call failed after TF built (and dumped) its graph: what TF built is kept
            notes.append(f"the call failed after TensorFlow built its graph{failed_op(log_text)}: {last}")
        if require_dumps and not any(dumps.iterdir()):
            raise HarvestError("TensorFlow ran but wrote no graph dumps: no function or session graph reached its "
                               "optimization passes (does the program call a tf.function or run a session?)", target)
        index = {
            "schema": INDEX_SCHEMA,
            "target": str(target),
            "kind": kind,
            "signature": signature,
            "tf_version": _tf_version(log_text),
            "tf_xla_flags": flags,
            "tf_cpp_vmodule": VMODULE,
            "wall_s": round(wall, 3),
            "graphs": graphs if graphs is not None else index_dump_dir(dumps, log_text),
            "run": {"dry_run": dry_run and kind != "program", "isolated": isolate,
                    "network": sandbox.network_note(log_text) or "not isolated"},
        }
        if call is not None:
            index["call"] = call
        keras_lines = [ln[len(KERAS_CALL_MARK):] for ln in log_text.splitlines() if ln.startswith(KERAS_CALL_MARK)]
        if keras_lines:
            index["keras_call"] = {"inputs": json.loads(keras_lines[-1]),
                                   "input_shapes": [[k, list(v)] for k, v in input_shapes]}
        if notes:
            index["run_notes"] = notes
        if imports:
            index["runner_imports"] = imports
        if library_ops:
            index["op_library_ops"] = library_ops
        if kind == "program":
            index["program_files"] = program_files(deps, target, (runtmp, work))
        index["totals"] = totals(index["graphs"])
        index["main_graph"] = main_graph_id(index["graphs"], log_text)
        index.update(extra or {})
        (work / "index.json").write_text(json.dumps(index, indent=1) + "\n")
        write_checksums(work)
        if out.exists():
            shutil.rmtree(out)
        os.replace(work, out)
        release(work)
        return index
    except StorageError:
        raise
    except (JitsimError, OSError) as e:
        # a directory that cannot take TF's files explains a failure better than what TF (or a
        # write of jitsim's) made of it: never taken for the call's failure
        if ran:
            check_room(work, runtmp, out)
        if isinstance(e, OSError):
            where = _storage_directory(e, work, runtmp, out)
            if where is not None:
                raise StorageError(storage_words(e), *where) from None
        raise
    finally:
        if runtmp is not None:
            remove_tree(runtmp)
        if work.exists():
            remove_tree(work)
        if reaper is not None:
            reaper.done()


# what could not be written, and what to do, where a harvest's directories cannot take its files
OUT_UNWRITABLE = "TensorFlow's dumps and log of the run could not be written there (free some space, or write the " \
                 "output elsewhere)"
TMP_UNWRITABLE = "the temporary directory TensorFlow's run works in could not be written (free some space, or set " \
                 "TMPDIR to another directory)"
# bytes written where TF's run failed, to tell a directory that is full from a failure of the call
ROOM_PROBE = 64 << 10


def _dumps_cut_short(dumps: Path) -> bool:
    """No dump, or an empty one (TF never writes an empty graph: its write failed)."""
    files = list(dumps.iterdir())
    return not files or any(p.stat().st_size == 0 for p in files)


def check_room(work: Path, runtmp: Path | None, out: Path) -> None:
    """Raise :class:`~jitsim.errors.StorageError` naming the directory the user can act on
    (``out``, or the temporary directory) when ``work`` (beside ``out``) or ``runtmp``
    cannot take :data:`ROOM_PROBE` more bytes now, or a file in ``work`` reached the process's
    file size limit (``ulimit -f``: a write past it failed)."""
    limit = _file_size_limit()
    if limit is not None and work.is_dir():
        for p in work.rglob("*"):
            if p.is_file() and p.stat().st_size >= limit:
                raise StorageError(storage_words(OSError(errno.EFBIG, "File too large")), OUT_UNWRITABLE, out)
    places = [(work, out, OUT_UNWRITABLE)] + ([(runtmp, runtmp.parent, TMP_UNWRITABLE)] if runtmp else [])
    for d, where, what in places:
        if not d.is_dir():
            continue
        try:
            write_probe(d, ROOM_PROBE)
        except OSError as e:
            if e.errno in STORAGE_ERRNOS:
                raise StorageError(storage_words(e), what, where) from None


def _file_size_limit() -> int | None:
    """The process's file size limit in bytes (``ulimit -f``), None when there is none."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    except (ImportError, OSError, ValueError, AttributeError):
        return None
    return None if soft == resource.RLIM_INFINITY or soft < 0 else soft


def _storage_directory(e: OSError, work: Path, runtmp: Path | None, out: Path) -> tuple[str, Path] | None:
    """``(what, directory)`` when ``e`` says one of the harvest's own directories cannot take a
    file (a write of jitsim's names no file: it is of ``work``); None for anything else."""
    if e.errno not in STORAGE_ERRNOS:
        return None
    if e.filename is None:
        return OUT_UNWRITABLE, out
    f = os.path.abspath(os.fsdecode(e.filename))
    for d, where, what in ((work, out, OUT_UNWRITABLE), (out, out, OUT_UNWRITABLE),
                           (runtmp, runtmp.parent if runtmp else None, TMP_UNWRITABLE)):
        if d is not None and (f == str(d) or f.startswith(str(d) + os.sep)):
            return what, where
    return None


def _kill_group(proc: subprocess.Popen) -> None:
    """End TF's process and everything it started (its process group), and reap it."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            proc.kill()
    else:
        try:  # what the process started and left running
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
    proc.wait()


def keep_failed_call(kind: str, tail: str | None) -> bool:
    """Whether a run that failed after TF dumped the call's graph keeps what TF built: the one
    call of a runner or a program (not a profile's timed loop, which must run)."""
    return tail is None


_FAILED_NODE = re.compile(r"\{\{node ([^}]+)\}\}")


def failed_op(log_text: str) -> str:
    """`` (at node X)`` for the node TF's error names, else ``""``."""
    found = _FAILED_NODE.findall(log_text)
    return f" (at node {found[-1]})" if found else ""


# the kernel's files (/proc/stat, /sys/..., /dev/urandom): what a program reads there is the
# machine's state, never an input of the program; they change on every read (psutil, a font
# cache, a random seed read them), so a capture keyed by them would never be reused
PSEUDO_FILESYSTEMS = ("/proc/", "/sys/", "/dev/")


def program_files(deps: Path, target: Path, scratch=()) -> list[dict]:
    """What a program's run read beyond its own file (the files of its own modules, the files
    it opened, as the run's bootstrap listed them; not those of the run's own scratch
    directories): path and SHA-256 each, so that a cached capture of it is used only while they
    are unchanged."""
    try:
        paths = json.loads(read_text(deps, what="the program's files"))
    except (JitsimError, ValueError):
        return []
    skip = tuple(os.path.realpath(d) + os.sep for d in scratch) + PSEUDO_FILESYSTEMS
    out = []
    for p in sorted(set(paths) - {str(target)}):
        if os.path.realpath(p).startswith(skip):
            continue
        digest = file_digest(Path(p))
        if digest is not None:
            out.append({"path": p, "sha256": digest})
    return out


def file_digest(path: Path) -> str | None:
    """The SHA-256 of a regular file (None: not one, or unreadable)."""
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()
    except OSError:
        return None


CHECKSUMS_FILE = "checksums.sha256"


def _file_digests(root: Path) -> dict[str, str]:
    """SHA-256 of each regular file under ``root``; anything else (a link, a pipe, a device:
    never opened, so it cannot hang the reader) gets a marker no digest equals."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        mode = p.lstat().st_mode
        if rel == CHECKSUMS_FILE or stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            out[rel] = "not a regular file"
            continue
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        out[rel] = h.hexdigest()
    return out


def write_checksums(root: Path) -> None:
    """``root/checksums.sha256``: the SHA-256 of every file under ``root`` (``sha256sum``'s
    format), so that a reader can tell a damaged or edited directory (:func:`checksums_ok`)."""
    lines = [f"{d}  {rel}\n" for rel, d in _file_digests(root).items()]
    (root / CHECKSUMS_FILE).write_text("".join(lines))


def checksums_ok(root: Path) -> bool:
    """Whether ``root`` holds exactly the files its ``checksums.sha256`` lists, unchanged."""
    try:
        listed = {}
        f = root / CHECKSUMS_FILE
        if not stat.S_ISREG(f.lstat().st_mode) or f.stat().st_size > 64 * 2**20:
            return False
        for line in f.read_text().splitlines():
            digest, sep, rel = line.partition("  ")
            if not sep:
                return False
            listed[rel] = digest
        return bool(listed) and _file_digests(root) == listed
    except (OSError, UnicodeDecodeError):
        return False


def _library_op_defs(all_ops: Path, out: Path) -> list[str]:
    """Keep the OpDefs of the run's ops that TF core does not register (loaded op libraries,
    e.g. tensorflow_text) in ``out`` (``op_defs.pb``), so that jitsim can read graphs using
    them (:func:`jitsim.graph.custom_ops.harvest_op_library`). Returns their names."""
    if not all_ops.is_file():
        return []
    ol = protos.OpList()
    try:
        ol.ParseFromString(read_file(all_ops))
    except Exception:  # noqa: BLE001 - a truncated file: nothing to keep
        return []
    known = op_defs()
    extra = protos.OpList()
    extra.op.extend(sorted((o for o in ol.op if o.name not in known), key=lambda o: o.name))
    if not extra.op:
        return []
    out.write_bytes(extra.SerializeToString(deterministic=True))
    return [o.name for o in extra.op]


def totals(graphs: list[dict]) -> dict:
    return {
        "graphs": len(graphs),
        "graphs_with_candidates": sum(1 for g in graphs if MARK_DUMP in g["files"]),
        "graphs_with_clusters": sum(1 for g in graphs if g["clusters"]),
        "clusters": sum(len(g["clusters"]) for g in graphs),
        "max_nodes": max((g["nodes"] for g in graphs), default=0),
    }


def _tf_version(log_text: str) -> str | None:
    for line in reversed(log_text.splitlines()):
        if line.startswith(VERSION_MARK):
            return line[len(VERSION_MARK):].strip() or None
    return None


# what TF logs on every start (its own log lines: ``E0000 00:00:... file.cc:52] ...``), "error" in
# words but never why a run failed: oneDNN's round-off errors and, on a machine without a GPU or
# its libraries, ``failed call to cuInit: ... UNKNOWN ERROR (303)``, a cuDNN/cuFFT/cuBLAS factory
# registered twice, TensorRT missing. A Python exception's line is never one of them.
_START_NOISE = re.compile(r"[IWE]\d{4} .*(oneDNN custom operations|cuInit|\bCUDA\b|\bcuda|cuDNN|cuFFT|cuBLAS|"
                          r"TensorRT|TF-TRT|GPU will not be used)")


def last_error_line(log_text: str) -> str:
    """The line of TF's log that says why its run failed: the runner's own ``JITSIM_ERROR``,
    else the last line that speaks of an error (a Python exception's, a TF error's), TF's start-up
    lines about a missing GPU left out; ``no error in its log`` when none does."""
    lines = [l.strip() for l in log_text.splitlines() if l.strip() and not l.startswith(VERSION_MARK)]
    for l in reversed(lines):
        if l.startswith("JITSIM_ERROR: "):
            return cut_message(l[len("JITSIM_ERROR: "):], 800)
    lines = [l for l in lines if not _START_NOISE.match(l)]
    for l in reversed(lines):
        if "Error" in l or "error" in l:
            return cut_message(l, 800)
    # else the last line the program printed (sys.exit("why")), not TF's information or jitsim's marks
    plain = [l for l in lines if not _INFO_LINE.match(l)]
    if plain:
        return cut_message(plain[-1], 800)
    return "no error in its log" if log_text.strip() else "no output"


_INFO_LINE = re.compile(r"[IW]\d{4} |WARNING: All log messages before absl|To enable the following instructions|"
                        r"JITSIM_[A-Z_]+(: |=|$)")


def cut_message(text: str, limit: int) -> str:
    """``text`` kept whole up to ``limit`` characters; a longer one cut after its last whole
    sentence that fits (else at a word, marked ``...``), never mid-sentence unmarked.

    >>> cut_message("One. Two three four.", 12)
    'One.'
    >>> cut_message("averyveryverylongword and more", 12)
    'averyveryverylongword...'
    """
    if len(text) <= limit:
        return text
    end = text.rfind(". ", 0, limit)
    if end > 0:
        return text[:end + 1]
    space = text.rfind(" ", 0, limit)
    return (text[:space] if space > 0 else text[:text.find(" ", limit) if " " in text[limit:] else len(text)]) + "..."
