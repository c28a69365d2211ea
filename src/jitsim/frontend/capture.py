"""The exact route for what users hold: one TF run that clusters nothing, then simulate.

Running a call under real TensorFlow with the user's ``TF_XLA_FLAGS`` plus
``--tf_xla_clustering_debug --tf_xla_clustering_fuel=0`` makes TF write the input of its
clustering pass (``before_clone_constants_for_better_clustering*.pbtxt``) byte-identical to
a normal run's, while marking, and so compiling, nothing. jitsim simulates those dumps
exactly (:func:`jitsim.passes.pipeline.cluster_dump_dir` with the user's flags, one
simulated process across the graphs). :func:`capture` does the TF run, in a subprocess
through :func:`jitsim.tfprocess.harvest.harvest` (the same runners and output format as
``jitsim crosscheck harvest``), and caches its result by content.

What *the call* is, per target:

* SavedModel directory: signature ``signature`` (default ``serving_default``; a SavedModel
  without it is an error listing its signatures), called with generated inputs;
* ``.keras`` file: ``keras.models.load_model(path, compile=False)``, then
  :func:`jitsim.tfprocess.keras_call.keras_call` (``tf.function(lambda *xs: model(xs,
  training=False))`` traced from ``model.inputs``, with the stated ``input_shapes``, unknown
  dims not given set to 2, :attr:`Capture.inputs` says which) called with generated inputs;
* GraphDef or MetaGraphDef file: the ``sess.run`` of a ``tf.compat.v1.Session`` that
  :class:`jitsim.frontend.session_call.SessionCall` states (the user's fetches and feeds, or
  those assumed by its documented rule);
* ``.py`` program: the program, run as ``__main__``;
* a live object (``tf.function`` with an ``input_signature`` or traced exactly once,
  ``ConcreteFunction``, Keras model): its ConcreteFunction (for a Keras model, the call above)
  is serialized (:func:`write_function_bundle`: the function library, and per input its
  dtype/shape, for a captured variable the variable's dtype/shape, for a captured constant its
  value) with the process's Grappler options and jit setting; the runner registers the
  functions in a fresh eager context and calls the function by name, as a ConcreteFunction
  call does, with generated tensors and fresh variables. TF instantiates the same function
  graph it would in the user's process.

Generated inputs: floats N(0, 1), ints in {0, 1}, bools, ``b"jitsim"`` strings, seeded.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path

from jitsim.tfprocess import harvest as _harvest
from jitsim.tfprocess import targets as _targets
from jitsim.errors import HarvestError, JitsimError, StorageError
from jitsim.files.input import hash_file, os_problem, read_json
from jitsim.files.output import (STORAGE_ERRNOS, private_directory, remove_tree, storage_words, temporary_directory,
                                 write_probe)
from jitsim.defs import BEFORE_CLONE_DUMP

RUNNER_VERSION = "capture/9"  # bump when a runner's behaviour changes: old cache entries go stale
CAPTURE_FLAGS = "--tf_xla_clustering_debug --tf_xla_clustering_fuel=0"
KINDS = ("saved_model", "keras", "graphdef", "function", "program")


@dataclass
class Capture:
    """One TF run's dumps of the clustering pass input for a call (see the module docstring).

    ``main_graph`` is the ``DumpGraph.id`` of the called function's body: of the graphs TF
    dumped after the runner's call marker, the one with the most nodes (the other graphs of
    the call are TF's single-op graphs for eager ops); for a ``program``, the largest graph of
    the run. ``tf_xla_flags`` is what TF ran with; ``auto_jit_added`` says that the user's
    flags (and jit setting) left auto-clustering off and ``--tf_xla_auto_jit=2`` was added
    for the capture (simulate with the user's flags to get TF's answer: nothing clustered).
    """

    dump_dir: Path
    kind: str
    seconds: float
    cached: bool
    key: str
    main_graph: int | None
    tf_xla_flags: str = ""
    user_flags: str = ""
    auto_jit_added: bool = False
    notes: list[str] = field(default_factory=list)
    session_jit: bool | None = None  # a live object's process: set_jit on (True), off (False), never set (None)
    inputs: list | None = None  # a Keras model's call: per input name, dtype, shape, given, assumed dims

    @property
    def index(self) -> dict:
        return read_json(self.dump_dir / "index.json", what="a capture's index.json")

    def main_dump(self, stage: str = BEFORE_CLONE_DUMP) -> Path | None:
        """The path of the main graph's dump of ``stage`` (None if TF wrote none)."""
        if self.main_graph is None:
            return None
        for g in self.index["graphs"]:
            if g["id"] == self.main_graph and stage in g["files"]:
                return self.dump_dir / "dumps" / g["files"][stage]
        return None


# -- flags and keys ------------------------------------------------------------------------

# TF_XLA_FLAGS that TensorFlow reads only from its clustering passes on (mark_for_compilation,
# partially decluster, encapsulate, build_xla_ops, the compile and launch ops at run time):
# the pass input a capture dumps (before_clone_constants_for_better_clustering, the first of
# the POST_REWRITE_FOR_EXEC passes) is written before any of them is read, so a capture runs
# without them and one capture serves every value (the simulation applies them, as whatif does)
AFTER_THE_DUMP = frozenset({
    "tf_xla_min_cluster_size", "tf_xla_max_cluster_size", "tf_xla_ops_to_cluster", "tf_xla_cluster_exclude_ops",
    "tf_xla_clustering_debug", "tf_xla_cpu_global_jit", "tf_xla_clustering_fuel",
    "tf_xla_disable_deadness_safety_checks_for_debugging",
    "tf_xla_disable_resource_variable_safety_checks_for_debugging", "tf_xla_deterministic_cluster_names",
    "tf_xla_enable_lazy_compilation", "tf_xla_print_cluster_outputs", "tf_xla_check_cluster_input_numerics",
    "tf_xla_check_cluster_output_numerics", "tf_xla_disable_constant_folding", "tf_xla_always_defer_compilation",
    "tf_xla_async_compilation", "tf_xla_persistent_cache_directory", "tf_xla_persistent_cache_device_types",
    "tf_xla_persistent_cache_read_only", "tf_xla_persistent_cache_prefix",
})


def capture_flags(user_flags: str, *, session_jit_on: bool = False) -> tuple[str, bool]:
    """``(flags TF runs with, whether --tf_xla_auto_jit=2 was added)``. The user's flags are
    checked as strictly as TF checks them (unknown flags are an error), then reduced to what
    can change the dumped pass input: the flags of :data:`AFTER_THE_DUMP` are left out, and
    ``--tf_xla_auto_jit`` is kept only as far as TF reads it before the dump: whether the
    clustering passes run at all (``GetGlobalJitLevelForGraph`` is not OFF) and whether
    Grappler sees XLA auto-clustering on (meta_optimizer.cc's ``IsXlaGlobalJitOn``: the
    general and single-GPU levels both ON_1 or ON_2, which changes the remapper's fusions and
    turns the memory optimizer off). Levels 1 and 2 give the same dump: both become ``2``."""
    import shlex

    from jitsim.flags import ON_1, parse_tf_xla_flags

    parsed = parse_tf_xla_flags(user_flags)
    general, single = parsed.auto_jit_general, parsed.auto_jit_single_gpu
    added = general <= 0 and single <= 0 and not session_jit_on
    if added or (general >= ON_1 and single >= ON_1):
        jit = "--tf_xla_auto_jit=2"
    elif single >= ON_1:  # single-gpu(N): on for graphs placed on one GPU only
        jit = f"--tf_xla_auto_jit=single-gpu({single})"
    else:  # no level of its own: the caller's process's jit setting (set_jit) decides, as in TF
        jit = ""
    keep = []
    for tok in shlex.split(user_flags or ""):
        name = tok[2:].partition("=")[0]
        base = name[2:] if name.startswith("no") and name[2:] in AFTER_THE_DUMP else name
        if base not in AFTER_THE_DUMP and base != "tf_xla_auto_jit":
            keep.append(tok)
    return " ".join(x for x in (jit, *keep, CAPTURE_FLAGS) if x), added


def remapper_view(user_flags: str) -> str:
    """What Grappler's remapper reads of ``TF_XLA_FLAGS``: it skips its CPU fusions when XLA
    auto-clustering is on and the raw variable holds the token ``--tf_xla_cpu_global_jit``
    (:func:`jitsim.flags.remapper_sees_cpu_global_jit`: split on commas before TF 2.22, on commas,
    spaces and tabs since). A capture's TF sees the user's raw variable there
    (:data:`jitsim.tfprocess.runners.PRELUDE`), so the cache key holds this view, not the flags."""
    from jitsim.flags import remapper_sees_cpu_global_jit

    return "remapper:" + "".join(str(int(remapper_sees_cpu_global_jit(user_flags, r))) for r in ("2.21", "2.22"))


def tf_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("tensorflow")
    except PackageNotFoundError:
        try:
            return version("tensorflow-cpu")
        except PackageNotFoundError:
            return "none"


# A file over this size is known to the cache key by its size, modification time and first and
# last MiB, not its whole content: a SavedModel's 16 GiB (sparse) asset is not read before TF
# starts, and TF's dry run does not read it at all (a table's initializer is never run)
BIG_FILE = 64 * 2**20


def _hash_path(h, path: Path) -> None:
    """Every file under ``path`` (or ``path`` itself), by relative path, symbolic links followed
    (a SavedModel's ``variables/`` may be a link to another disk; a link loop is an error, as a
    FIFO or device is)."""
    if not path.is_dir():
        h.update(b"F" + path.name.encode("utf-8", "surrogateescape") + b"\0")
        _hash_file(h, path)
        return
    files = []
    for root, dirs, names in os.walk(path, followlinks=True):
        here = os.path.realpath(root)
        for d in dirs:
            real = os.path.realpath(os.path.join(root, d))
            if here == real or here.startswith(real.rstrip(os.sep) + os.sep):  # a link to a directory above it
                raise HarvestError("holds a symbolic link loop (a directory that contains itself)",
                                   os.path.join(root, d))
        files.extend(Path(root) / n for n in names)
    for p in sorted(files, key=lambda q: q.relative_to(path).as_posix()):
        h.update(b"F" + p.relative_to(path).as_posix().encode("utf-8", "surrogateescape") + b"\0")
        _hash_file(h, p)


def _hash_file(h, path: Path) -> None:
    """A regular file's content (a FIFO or device in a SavedModel directory is refused, never read
    forever); over :data:`BIG_FILE`, its size, modification time and first and last MiB."""
    hash_file(h, path, what="a regular file", error=HarvestError, sample_over=BIG_FILE)


def cache_key(target: Path, kind: str, signature: str | None, flags: str, call: str = "", shapes: str = "") -> str:
    """sha256 over the target's bytes (every file of a directory, sorted by relative path),
    kind, signature, the flags TF runs with, the session call (a GraphDef's), the stated input
    shapes (a Keras model's, :func:`jitsim.tfprocess.keras_call.shapes_key`), TF's version and
    :data:`RUNNER_VERSION`."""
    h = hashlib.sha256()
    for part in (RUNNER_VERSION, tf_version(), kind, signature or "", flags, call, shapes):
        h.update(part.encode() + b"\0")
    _hash_path(h, target)
    return h.hexdigest()


def default_cache_dir() -> Path | None:
    """``$JITSIM_CACHE``, else ``~/.cache/jitsim/capture`` (None: no home directory)."""
    env = os.environ.get("JITSIM_CACHE")
    if env:
        return Path(env)
    try:
        return Path.home() / ".cache" / "jitsim" / "capture"
    except (RuntimeError, KeyError):  # no HOME and no password entry
        return None


def usable_cache_dir(cache_dir: Path | None) -> tuple[Path, str | None]:
    """``(directory for the capture, note)``: ``cache_dir`` (created if needed) when a file can
    be written there; else a temporary directory removed when the command ends, and a note
    saying why nothing is cached (a ``$JITSIM_CACHE`` that is a file, a read-only home...). A
    capture needs somewhere to write TF's dumps, but the cache itself is only a speed-up."""
    if cache_dir is not None and os.path.lexists(cache_dir) and not os.path.isdir(cache_dir):
        why = "it is not a directory"
    elif cache_dir is not None:
        try:
            private_directory(cache_dir)
            fd, probe = tempfile.mkstemp(prefix=".jitsim-probe.", dir=cache_dir)
            os.close(fd)
            os.unlink(probe)
            return cache_dir, None
        except OSError as e:
            why = os_problem(e, "cannot write")
    else:
        why = "no home directory"
    tmp = temporary_directory(prefix="jitsim-capture-")
    where = f"the capture cache {cache_dir}" if cache_dir is not None else "the capture cache"
    return tmp, f"{where} cannot be used ({why}; set JITSIM_CACHE to a writable directory): captured into a " \
                "temporary directory, nothing cached"


# -- live objects ----------------------------------------------------------------------------

def _is_keras_model(obj) -> bool:
    try:
        import keras
    except ImportError:
        return False
    return isinstance(obj, keras.Model)


_KERAS_CALLS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def keras_model_inputs(obj, input_shapes=()) -> list | None:
    """A live Keras model's call inputs (:func:`jitsim.tfprocess.keras_call.keras_inputs`), None
    for another object. A stated shape the model cannot take is a :class:`~jitsim.errors.JitsimError`."""
    if not _is_keras_model(obj):
        return None
    from jitsim.tfprocess.keras_call import keras_inputs

    return keras_inputs(obj, input_shapes)[1]


def concrete_function(obj, input_shapes=()):
    """The ConcreteFunction a live object stands for (see the module docstring). A Keras
    model's call is traced once per model and stated shapes (``input_shapes``, see
    :func:`jitsim.tfprocess.keras_call.normalize_input_shapes`) and reused, so that capturing
    the same model again serializes the same function (same names: a cache hit); the traced
    function refers to the model, so a captured model lives as long as the process."""
    if _is_keras_model(obj):
        from jitsim.tfprocess.keras_call import as_pairs, keras_call, keras_specs

        shapes = as_pairs(input_shapes)
        calls = _KERAS_CALLS.setdefault(obj, {})
        cf = calls.get(shapes)
        if cf is None:
            fn, _ = keras_call(obj, keras_specs(obj, shapes))
            cf = calls[shapes] = fn.get_concrete_function()
        return cf
    if input_shapes:
        raise HarvestError("input shapes apply to a Keras model or a .keras file; a tf.function's call is its "
                           "input_signature (or the one shape it was traced with)")
    if hasattr(obj, "function_def") and hasattr(obj, "graph"):
        return obj
    if hasattr(obj, "get_concrete_function"):
        if getattr(obj, "input_signature", None) is not None:
            return obj.get_concrete_function()
        traced = []
        lister = getattr(obj, "_list_all_concrete_functions", None)
        if lister is not None:
            traced = list(lister())
        if len(traced) == 1:
            return traced[0]
        raise HarvestError("this tf.function has no input_signature and was traced "
                           f"{len(traced)} times: pass fn.get_concrete_function(*example_args)")
    raise HarvestError(f"cannot capture a {type(obj).__name__}: give a SavedModel / .keras / GraphDef / "
                       ".py path, a tf.function, a ConcreteFunction or a Keras model")


def _resource_input(placeholder, value) -> dict:
    """What a captured resource needs in the runner: a fresh variable of the same dtype and
    shape (what TF's runtime records as ``_handle_dtypes``/``_handle_shapes``), or a hash
    table for the lookup ops."""
    from tensorflow.python.ops import handle_data_util

    hd = None
    for t in (value, placeholder):
        try:
            hd = handle_data_util.get_resource_handle_data(t)
        except Exception:  # noqa: BLE001 - no handle data on this tensor
            hd = None
        if hd is not None and hd.shape_and_type:
            break
    if hd is not None and hd.shape_and_type:
        import tensorflow as tf

        st = hd.shape_and_type[0]
        shape = None if st.shape.unknown_rank else [None if d.size < 0 else d.size for d in st.shape.dim]
        return {"kind": "variable", "dtype": tf.as_dtype(st.dtype).name, "shape": shape or []}
    for c in placeholder.consumers():
        if "LookupTable" in c.type:
            return {"kind": "table", "key_dtype": c.get_attr("Tin").name, "value_dtype": c.get_attr("Tout").name}
    raise HarvestError(f"cannot recreate the captured resource {placeholder.name!r} (not a variable or a "
                       "lookup table): capture a SavedModel of the object instead")


def _session_jit() -> bool | None:
    """The process's jit setting (``tf.config.optimizer.set_jit``): True (autoclustering),
    False (explicitly off) or None (never set). ``get_jit()`` says "" for both of the last
    two, which TF's ConfigProto tells apart (OFF vs DEFAULT), so read the context's value."""
    import tensorflow as tf
    from tensorflow.python.eager import context

    v = getattr(context.context(), "_optimizer_jit", None)
    if v is None and tf.config.optimizer.get_jit():
        v = True
    return None if v is None else bool(v)


def write_function_bundle(obj, directory: Path, input_shapes=()) -> dict:
    """Serialize the ConcreteFunction of ``obj`` (a Keras model's: called with ``input_shapes``)
    for the function runner: ``library.pb`` (its FunctionDefLibrary: the functions it calls,
    then itself), ``function.json`` (name, outputs, inputs, Grappler options, jit setting) and
    ``value_<i>.pb`` per captured constant. Returns the function.json content."""
    import tensorflow as tf
    from tensorflow.core.framework import function_pb2

    cf = concrete_function(obj, input_shapes)
    directory.mkdir(parents=True, exist_ok=True)
    main = cf.function_def
    lib = function_pb2.FunctionDefLibrary()
    seen = set()
    for f in cf.graph.as_graph_def().library.function:
        if f.signature.name not in seen and f.signature.name != main.signature.name:
            lib.function.add().CopyFrom(f)
            seen.add(f.signature.name)
    lib.function.add().CopyFrom(main)
    (directory / "library.pb").write_bytes(lib.SerializeToString(deterministic=True))

    placeholders = list(cf.inputs)
    captured = list(cf.captured_inputs)
    n_args = len(placeholders) - len(captured)
    inputs = []
    for i, ph in enumerate(placeholders):
        if i < n_args:
            if ph.dtype == tf.resource:
                inputs.append(_resource_input(ph, None))
            else:
                shape = ph.shape.as_list() if ph.shape.rank is not None else [2]
                inputs.append({"kind": "tensor", "dtype": ph.dtype.name, "shape": shape})
            continue
        value = captured[i - n_args]
        if value.dtype == tf.resource:
            inputs.append(_resource_input(ph, value))
        else:
            f = f"value_{i}.pb"
            (directory / f).write_bytes(tf.make_tensor_proto(value.numpy()).SerializeToString())
            inputs.append({"kind": "value", "dtype": value.dtype.name, "file": f})
    spec = {
        "name": main.signature.name,
        "num_outputs": len(main.signature.output_arg),
        "inputs": inputs,
        "grappler": tf.config.optimizer.get_experimental_options(),
        "jit": _session_jit(),
    }
    (directory / _targets.FUNCTION_BUNDLE).write_text(json.dumps(spec, indent=1, sort_keys=True) + "\n")
    return spec


# -- capture -----------------------------------------------------------------------------------

def capture(target, *, flags: str, signature: str | None = None, cache_dir: Path | None = None,
            timeout: float = 600, progress=None, call=None, input_shapes=()) -> Capture:
    """Run the call of ``target`` once under TF with fuel 0 (see the module docstring) and
    return where its dumps are. ``flags``: the user's ``TF_XLA_FLAGS`` string. The result is
    cached under ``cache_dir`` (else ``$JITSIM_CACHE``, else ``~/.cache/jitsim/capture``) by
    :func:`cache_key`; a cache hit returns ``seconds=0.0, cached=True``. ``call``: a GraphDef's
    :class:`~jitsim.frontend.session_call.SessionCall` (default: every sink fetched).
    ``input_shapes``: a ``.keras`` file's or live Keras model's stated input shapes
    (:func:`jitsim.tfprocess.keras_call.normalize_input_shapes`; unknown dims not given are 2);
    :attr:`Capture.inputs` says what the call used."""
    from jitsim.tfprocess.keras_call import as_pairs, shapes_key

    cache_dir, cache_note = usable_cache_dir(Path(cache_dir) if cache_dir is not None else default_cache_dir())
    shapes = as_pairs(input_shapes)
    bundle_tmp = None
    notes: list[str] = []
    inputs = None
    try:
        if isinstance(target, (str, os.PathLike)):
            path = Path(target).resolve()
            kind = _targets.target_kind(path)
            session_jit = None
            if shapes and kind != "keras":
                raise HarvestError("input shapes (--input-shape) apply to a .keras file or a live Keras model",
                                   path)
        else:
            inputs = keras_model_inputs(target, shapes)
            bundle_tmp = temporary_directory(prefix="jitsim-function-")
            spec = write_function_bundle(target, bundle_tmp, shapes)
            path, kind = bundle_tmp, "function"
            session_jit = spec["jit"]
            notes.append(f"function {spec['name']} called by name in a fresh process")
        if cache_note:
            notes.append(cache_note)
        if signature is not None and kind != "saved_model":
            raise HarvestError("a signature applies to SavedModels only", path)
        if kind == "saved_model":
            _harvest.check_signature(path, signature)
        tf_flags, added = capture_flags(flags, session_jit_on=session_jit is True)
        if added:
            notes.append("the flags leave auto-clustering off: captured with --tf_xla_auto_jit=2 added")
        call_dict = call.to_dict() if call is not None else None
        key = cache_key(path, kind, signature, f"{tf_flags} {remapper_view(flags)}",
                        call.key() if call is not None else "", shapes_key(shapes))
        out = cache_dir / key
        extra = {"capture": {"runner_version": RUNNER_VERSION, "key": key, "user_flags": flags,
                             "auto_jit_added": added, "notes": notes}}
        idx = _verified_entry(out, key)
        if idx is None and out.exists():  # a stale or damaged entry: captured again (the note says why it took time)
            try:
                changed = changed_program_file(_cached_index(out)) if _harvest.checksums_ok(out) else None
            except HarvestError:
                changed = None
            _remove_entry(out)
            notes.append(f"{changed} changed since the cached capture: TensorFlow was run again" if changed else
                         "the cached capture was damaged or edited: TensorFlow was run again")
        if idx is not None:
            return Capture(out, kind, 0.0, True, key, idx.get("main_graph"), tf_flags, flags, added,
                           notes + list(idx.get("run_notes", [])), session_jit, _inputs(idx, inputs))
        t0 = time.monotonic()
        _check_cache_room(cache_dir, cache_note)
        # harvest assembles the directory under a temporary name next to `out` and renames it
        # at the end: a concurrent or failed capture never leaves a half-written entry
        try:
            idx = _harvest.harvest(path, out, flags=tf_flags, signature=signature, timeout=timeout,
                                   progress=progress, extra=extra, call=call_dict,
                                   input_shapes=shapes if kind == "keras" else (), dry_run=True, isolate=True,
                                   env_extra={"JITSIM_USER_TF_XLA_FLAGS": flags or ""})
        except StorageError as e:
            if e.path in (str(out), str(out.resolve())):  # the cache's entry (not $TMPDIR, where TF works)
                raise _cache_full(e.problem, cache_dir, cache_note) from None
            raise
        except HarvestError as e:
            if (out / "index.json").exists():  # another process finished the same capture
                idx = _cached_index(out)
            elif "output directory exists" in str(e):
                raise HarvestError("a cache entry is incomplete (remove it)", out) from None
            else:
                raise
        return Capture(out, kind, round(time.monotonic() - t0, 3), False, key, idx.get("main_graph"),
                       tf_flags, flags, added, notes + list(idx.get("run_notes", [])), session_jit,
                       _inputs(idx, inputs))
    finally:
        if bundle_tmp is not None:
            remove_tree(bundle_tmp)


# free room a capture needs in the cache before TF runs: a small model's dumps and log take about
# 150 KiB (a cache with less cannot take them; a larger model's that fill it are caught as TF's run ends)
CAPTURE_ROOM = 256 << 10


def _cache_full(problem: str, cache_dir: Path, cache_note: str | None) -> StorageError:
    """The error for a capture cache that cannot take TF's dumps of the call (``problem``: ``no
    space left on device``...): the cache named as the user set it, or the temporary directory
    used instead of a cache that could not be used (``cache_note``), by where it is."""
    if cache_note:
        return StorageError(problem, "the temporary directory a capture uses instead of the capture cache (which "
                            "cannot be used) could not take TensorFlow's dumps of the call (free some space, or set "
                            "JITSIM_CACHE to a writable directory)", cache_dir.parent)
    return StorageError(problem, "the capture cache could not take TensorFlow's dumps of the call (free some space, "
                        "or set JITSIM_CACHE to another directory)", cache_dir)


def _check_cache_room(cache_dir: Path, cache_note: str | None) -> None:
    """Before TF runs: the cache takes :data:`CAPTURE_ROOM` bytes, else the one-line error
    (:func:`_cache_full`). A full disk is said as such, never taken for TF failing on the call."""
    try:
        write_probe(cache_dir, CAPTURE_ROOM)
    except OSError as e:
        if e.errno not in STORAGE_ERRNOS:
            raise
        raise _cache_full(storage_words(e), cache_dir, cache_note) from None


def _cached_index(entry: Path) -> dict:
    """A cache entry's ``index.json``; a damaged one is one line naming it."""
    try:
        idx = read_json(entry / "index.json", what="a capture cache entry's index.json", error=HarvestError)
    except JitsimError as e:
        raise HarvestError(f"{e.message}: a damaged cache entry (remove it)", entry / "index.json") from None
    if not isinstance(idx, dict):
        raise HarvestError("a damaged cache entry: index.json is not a JSON object (remove it)", entry)
    return idx


def _verified_entry(out: Path, key: str) -> dict | None:
    """The index of cache entry ``out`` if it is whole and unchanged: every file as its
    checksums list says, and recorded under ``key`` (an entry copied to another key is not
    taken); else None."""
    if not (out / "index.json").is_file() or not _harvest.checksums_ok(out):
        return None
    try:
        idx = read_json(out / "index.json", what="a capture cache entry's index.json")
    except JitsimError:
        return None
    if not isinstance(idx, dict) or idx.get("capture", {}).get("key") != key:
        return None
    if changed_program_file(idx) is not None:  # a module the program imports (or a file it read) changed
        return None
    return idx


def changed_program_file(index: dict) -> str | None:
    """The first file a cached program capture read beyond the program (its own modules, the files
    it opened: the index's ``program_files``) that is no longer what it was, or None."""
    for entry in index.get("program_files") or ():
        if not isinstance(entry, dict) or _harvest.file_digest(Path(str(entry.get("path")))) != entry.get("sha256"):
            return str(entry.get("path") if isinstance(entry, dict) else entry)
    return None


def _remove_entry(out: Path) -> None:
    """Take a damaged entry out of the way first (a rename: a concurrent reader sees it whole
    or not at all), then delete it."""
    trash = out.with_name(f".{out.name}.damaged.{os.getpid()}")
    try:
        os.replace(out, trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


def _inputs(index: dict, live: list | None) -> list | None:
    """A Keras call's inputs: a live model's (known here), else what the ``.keras`` runner
    recorded in the capture's index."""
    if live is not None:
        return live
    kc = index.get("keras_call")
    return kc["inputs"] if kc else None


def simulate(cap: Capture, flags: str | None = None, *, session=None):
    """jitsim on every graph of a capture, one simulated process (``cluster_dump_dir``), with
    the user's flags (``flags`` overrides them) and, for a live object, its process's jit
    setting (``session`` overrides it): ``[(DumpGraph, ClusterResult)]``."""
    from jitsim.flags import ON_1, OFF
    from jitsim.options import SessionConfig, options_for
    from jitsim.passes.pipeline import cluster_dump_dir

    if session is None and cap.session_jit is not None:
        session = SessionConfig(global_jit_level=ON_1 if cap.session_jit else OFF)
    options = options_for(cap.user_flags if flags is None else flags, session=session or SessionConfig())
    return cluster_dump_dir(cap.dump_dir, options)
