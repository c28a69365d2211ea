"""Run real TensorFlow with the JIT dump flags and collect the dumps: jitsim's ground truth.

A *target* is a Python program, a GraphDef (``.pb``/``.pbtxt``; its ``Placeholder``s are
fed generated data and every sink is fetched in a ``tf.compat.v1.Session``), a
SavedModel directory (one signature, called with generated inputs), a ``.keras`` file
(loaded with ``compile=False`` and called through ``tf.function`` with the stated input
shapes, unknown dims not given set to 2, see :mod:`jitsim.crosscheck.keras_call`) or a *function bundle* (a directory written by
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

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from jitsim.graph.dumps import INDEX_SCHEMA, index_dump_dir
from jitsim.errors import HarvestError, JitsimError
from jitsim.registry import protos
from jitsim.graph.events import is_event_file
from jitsim.files.input import read_file, read_text
from jitsim.graph.io import check_signature_name, read_graph_file, read_graphdef, read_saved_model
from jitsim.files.output import release, remove_tree, temporary_directory
from jitsim.registry import OP_LIBRARY_FILE, op_defs
from jitsim.defs import MARK_DUMP
from jitsim.crosscheck.targets import target_kind

DEFAULT_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_clustering_debug"
VMODULE = (
    "mark_for_compilation_pass=1,encapsulate_subgraphs_pass=1,build_xla_ops_pass=1,"
    "clone_constants_for_better_clustering=1"
)
_VERSION_MARK = "JITSIM_TF_VERSION="

# Runs the user's program as __main__ and reports the TF version it used, at exit.
_BOOTSTRAP = textwrap.dedent(
    """
    import atexit, os, runpy, sys
    def _report():
        tf = sys.modules.get("tensorflow")
        print("%s" + (getattr(tf, "__version__", "") if tf else ""), file=sys.stderr, flush=True)
        out = os.environ.get("JITSIM_OP_DEFS_OUT")
        if tf is not None and out:  # every op this process registered (op libraries included)
            try:
                from tensorflow.python.client import pywrap_tf_session as c
                with open(out, "wb") as f:
                    f.write(c.TF_GetBuffer(c.TF_GetAllOpList()))
            except Exception:
                pass
    atexit.register(_report)
    prog = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, __import__("os").path.dirname(prog))
    runpy.run_path(prog, run_name="__main__")
    """
    % _VERSION_MARK
)

CALL_MARK = "JITSIM_CALL_BEGIN"

# Shared by every runner: generated inputs (seeded: floats N(0,1), ints in {0,1}, bools,
# b"jitsim" strings; unknown dims = 2), the call marker, and the imports of op libraries the
# target needs (tensorflow_text's ops are not in TF core) named in JITSIM_RUNNER_IMPORTS.
_INPUT_GEN = textwrap.dedent(
    """
    import os, importlib
    import numpy as np
    import tensorflow as tf
    for _m in filter(None, os.environ.get("JITSIM_RUNNER_IMPORTS", "").split(",")):
        importlib.import_module(_m)
    _rng = np.random.default_rng(0)
    def _gen(dtype, shape):
        shape = [2 if d is None or d < 0 else d for d in shape]
        dtype = tf.as_dtype(dtype)
        if dtype == tf.string:
            return np.full(shape, b"jitsim", dtype=object)
        if dtype == tf.bool:
            return _rng.random(shape) < 0.5
        if dtype.is_integer:
            return _rng.integers(0, 2, size=shape).astype(dtype.as_numpy_dtype)
        if dtype.is_complex:
            return (_rng.standard_normal(shape) + 1j * _rng.standard_normal(shape)).astype(dtype.as_numpy_dtype)
        return _rng.standard_normal(shape).astype(dtype.as_numpy_dtype)
    def _mark_call():
        import sys
        sys.stdout.flush()
        print("%s", file=sys.stderr, flush=True)
    """
    % CALL_MARK
)

# A GraphDef or MetaGraphDef run in a tf.compat.v1.Session. With a call file (argv[2], JSON:
# jitsim.frontend.session_call.SessionCall.to_dict()) it makes exactly that sess.run: those
# fetches, targets and feeds, each resource placeholder bound to a fresh variable (a VarHandleOp
# of the same name, as jitsim.frontend.session_call.bound_to_variables makes it); without one,
# every placeholder fed and every sink fetched. A given call that fails at run time (after TF
# built, and dumped, the graph of the call) is reported as a note, not fatal.
_GRAPHDEF_RUNNER = _INPUT_GEN + textwrap.dedent(
    """
    import json, sys
    from google.protobuf import text_format
    path = sys.argv[1]
    call = json.load(open(sys.argv[2])) if len(sys.argv) > 2 and sys.argv[2] else None
    data = open(path, "rb").read()
    if data[:2] == b"\\x1f\\x8b":
        import gzip
        data = gzip.decompress(data)
    def _parse(msg):
        try:
            msg.ParseFromString(data)
        except Exception:
            msg.Clear()
            text_format.Parse(data.decode("utf-8-sig"), msg)
        return msg
    meta = None
    try:
        gd = _parse(tf.compat.v1.GraphDef())
        if not gd.node:
            raise ValueError("no nodes")
    except Exception:
        meta = _parse(tf.compat.v1.MetaGraphDef())
        gd = meta.graph_def
    variables = set(call["variables"]) if call else set()
    for n in gd.node:
        if n.name not in variables:
            continue
        dt = n.attr["_handle_dtypes"].list.type[0] if n.attr["_handle_dtypes"].list.type else 0
        if not dt:
            dt = next((m.attr["dtype"].type for m in gd.node if m.attr["dtype"].type and
                       any(i == n.name or i.startswith(n.name + ":") for i in m.input)), 1)
        hs = list(n.attr["_handle_shapes"].list.shape)
        for k in list(n.attr):
            del n.attr[k]
        n.op = "VarHandleOp"
        n.attr["dtype"].type = dt
        if hs:
            n.attr["shape"].shape.CopyFrom(hs[0])
        else:
            n.attr["shape"].shape.unknown_rank = True
        n.attr["shared_name"].s = n.name.encode()
        n.attr["container"].s = b""
        n.attr["allowed_devices"].list.SetInParent()
    g = tf.Graph()
    with g.as_default():
        if meta is not None:
            tf.compat.v1.train.import_meta_graph(meta)
        else:
            tf.graph_util.import_graph_def(gd, name="")
    feeds, fetches = {}, []
    if call is not None:
        shapes = call.get("feed_shapes", {})
        for name in call["feeds"]:
            t = g.get_tensor_by_name(name)
            dims = shapes.get(name)
            if dims is None:
                dims = t.shape.as_list() if t.shape.rank is not None else [2]
            feeds[t] = _gen(t.dtype, dims)
        fetches = list(call["fetches"]) + list(call["targets"])
    else:
        for op in g.get_operations():
            if op.type == "Placeholder":
                t = op.outputs[0]
                if t.dtype in (tf.variant, tf.resource) and not t.consumers():
                    continue  # e.g. a frozen while loop's unused_control_flow_input: nothing to feed
                dims = t.shape.as_list() if t.shape.rank is not None else [2]
                feeds[t] = _gen(t.dtype, dims)
            elif not any(c for o in op.outputs for c in o.consumers()) and not op._control_outputs:
                fetches.extend(op.outputs or [op])
    sess = tf.compat.v1.Session(graph=g)
    init = [op for op in g.get_operations() if op.name == "init"]
    if not init and call is not None:
        # a TF1 program runs its variables' initializer before the call (and TF instantiates that
        # run's graph first, which moves the process-wide cluster counter): the graph's own init
        # op, else global_variables_initializer() of a MetaGraph's variables, else the
        # initializers of a GraphDef's variables (their <variable>/Assign ops), grouped as "init"
        with g.as_default():
            if tf.compat.v1.global_variables():
                init = [tf.compat.v1.variables_initializer(tf.compat.v1.global_variables(), name="init")]
            else:
                kinds = ("VariableV2", "Variable", "VarHandleOp")
                names = {op.name for op in g.get_operations() if op.type in kinds}
                assigns = [op for op in g.get_operations() if op.type in ("Assign", "AssignVariableOp")
                           and op.name.endswith("/Assign") and op.name[:-len("/Assign")] in names]
                if assigns:
                    init = [tf.group(*assigns, name="init")]
    if init:
        try:
            sess.run(init, feed_dict=feeds)
        except tf.errors.OpError as e:
            if call is None:
                raise
            print("JITSIM_NOTE: the init op failed: %s" % str(e).splitlines()[0], file=sys.stderr)
    assigns = []  # fresh values for the variables the call binds, written in one run
    for name in sorted(variables):
        op = g.get_operation_by_name(name)
        shape = tf.TensorShape(op.get_attr("shape"))
        dims = [2 if d is None else d for d in shape.as_list()] if shape.rank is not None else [2]
        try:
            with g.as_default():
                assigns.append(tf.raw_ops.AssignVariableOp(resource=op.outputs[0],
                                                           value=tf.constant(_gen(op.get_attr("dtype"), dims))))
        except Exception as e:
            print("JITSIM_NOTE: variable %s left uninitialised: %s" % (name, str(e).splitlines()[0]),
                  file=sys.stderr)
    if assigns:
        try:
            sess.run(assigns)
        except tf.errors.OpError as e:
            print("JITSIM_NOTE: the variables were left uninitialised: %s" % str(e).splitlines()[0],
                  file=sys.stderr)
    def _step():
        if call is None:
            return sess.run(fetches, feed_dict=feeds)
        try:
            return sess.run(fetches, feed_dict=feeds)
        except tf.errors.OpError as e:
            print("JITSIM_NOTE: the call failed at run time, after TF built its graph: %s"
                  % str(e).splitlines()[0], file=sys.stderr)
    """
)

_SAVED_MODEL_RUNNER = _INPUT_GEN + textwrap.dedent(
    """
    import sys
    m = tf.saved_model.load(sys.argv[1])
    sig = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else "serving_default"
    if sig not in m.signatures:
        raise SystemExit("JITSIM_ERROR: the SavedModel has no signature %r; its signatures: %s"
                         % (sig, ", ".join(sorted(m.signatures)) or "none"))
    f = m.signatures[sig]
    _, kwargs = f.structured_input_signature
    args = {k: tf.constant(_gen(s.dtype, s.shape.as_list() if s.shape.rank is not None else [2]))
            for k, s in kwargs.items()}
    def _step():
        return f(**args)
    """
)

# "The call" of a .keras file: jitsim.crosscheck.keras_call.keras_call with the stated shapes
# (argv[2], JSON: {"input_shapes": [[name or position, dims], ...]}), unknown dims not given set
# to 2. It reports the inputs it used (KERAS_CALL_MARK, JSON) and a stated shape the model
# cannot take (INPUT_ERROR_MARK: a user's error, said as it is).
KERAS_CALL_MARK = "JITSIM_KERAS_CALL: "
INPUT_ERROR_MARK = "JITSIM_INPUT_ERROR: "
_KERAS_RUNNER = _INPUT_GEN + textwrap.dedent(
    """
    import json, sys
    import keras
    from jitsim.errors import JitsimError
    from jitsim.crosscheck.keras_call import keras_call, keras_inputs
    model = keras.models.load_model(sys.argv[1], compile=False)
    _shapes = json.load(open(sys.argv[2]))["input_shapes"] if len(sys.argv) > 2 and sys.argv[2] else []
    try:
        specs, _inputs = keras_inputs(model, _shapes)
    except JitsimError as e:
        print("%s" + e.message, file=sys.stderr, flush=True)
        raise SystemExit(3)
    print("%s" + json.dumps(_inputs), file=sys.stderr, flush=True)
    fn, specs = keras_call(model, specs)
    args = [tf.constant(_gen(s.dtype, s.shape.as_list())) for s in specs]
    fn.get_concrete_function()
    def _step():
        return fn(*args)
    """
    % (INPUT_ERROR_MARK, KERAS_CALL_MARK)
)

# A function bundle (jitsim.frontend.capture.write_function_bundle): register the library in
# the eager context and call the function by name, as a ConcreteFunction call does
# (function-as-op eager execution), with the caller's Grappler options and jit setting.
_FUNCTION_RUNNER = _INPUT_GEN + textwrap.dedent(
    """
    import json, sys
    from tensorflow.core.framework import function_pb2, tensor_pb2
    from tensorflow.python.eager import context
    d = sys.argv[1]
    spec = json.load(open(os.path.join(d, "function.json")))
    if spec.get("grappler"):
        tf.config.optimizer.set_experimental_options(spec["grappler"])
    if spec.get("jit") is not None:
        tf.config.optimizer.set_jit("autoclustering" if spec["jit"] else False)
    lib = function_pb2.FunctionDefLibrary()
    lib.ParseFromString(open(os.path.join(d, "library.pb"), "rb").read())
    ctx = context.context()
    ctx.ensure_initialized()
    for fdef in lib.function:
        ctx.add_function_def(fdef)
    keep, args = [], []
    for i, a in enumerate(spec["inputs"]):
        if a["kind"] == "tensor":
            args.append(tf.constant(_gen(a["dtype"], a["shape"])))
        elif a["kind"] == "value":
            tp = tensor_pb2.TensorProto()
            tp.ParseFromString(open(os.path.join(d, a["file"]), "rb").read())
            args.append(tf.constant(tf.make_ndarray(tp)))
        elif a["kind"] == "variable":
            v = tf.Variable(tf.zeros([1 if x is None or x < 0 else x for x in a["shape"]], a["dtype"]))
            keep.append(v)
            args.append(v.handle)
        elif a["kind"] == "table":
            t = tf.lookup.experimental.MutableHashTable(a["key_dtype"], a["value_dtype"],
                                                        tf.zeros([], a["value_dtype"]))
            keep.append(t)
            args.append(t.resource_handle)
        else:
            raise SystemExit("JITSIM_ERROR: unsupported input kind %r" % a["kind"])
    def _step():
        return ctx.call_function(spec["name"].encode(), args, spec["num_outputs"])
    """
)

# Every runner above defines ``_step()``, *the call*; a harvest makes it once, after the mark.
# ``harvest(..., tail=CODE)`` appends CODE instead (``jitsim profile`` times and profiles it).
CALL_ONCE = "_mark_call()\n_step()\n"

# A program as a step function (``harvest(..., tail=...)`` only): the program is run under
# the name ``__jitsim_step__`` (its ``if __name__ == "__main__":`` block is skipped) and must
# define ``jitsim_step()``, one step of its workload.
STEP_FUNCTION = "jitsim_step"
_PROGRAM_STEP_RUNNER = _INPUT_GEN + textwrap.dedent(
    """
    import runpy, sys
    _prog = os.environ["JITSIM_PROGRAM"]
    sys.path.insert(0, os.path.dirname(_prog))
    sys.argv = [_prog]
    _ns = runpy.run_path(_prog, run_name="__jitsim_step__")
    _step = _ns.get("%s")
    if not callable(_step):
        raise SystemExit("JITSIM_ERROR: the program defines no %s() function (one step of its workload, "
                         "called by jitsim profile; see docs/cli.md)")
    """
    % (STEP_FUNCTION, STEP_FUNCTION)
)

RUNNERS = {"graphdef": _GRAPHDEF_RUNNER, "saved_model": _SAVED_MODEL_RUNNER, "keras": _KERAS_RUNNER,
           "function": _FUNCTION_RUNNER}


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
    boot.write_text(_BOOTSTRAP)
    if kind == "program" and tail is None:
        return [python, str(boot), str(target)]
    runner = workdir / f"_jitsim_{kind}_runner.py"
    body = _PROGRAM_STEP_RUNNER if kind == "program" else RUNNERS[kind]
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
    to_dict`); default: every placeholder fed and every sink fetched. ``input_shapes``: for a
    ``.keras`` file, the stated input shapes (:func:`jitsim.crosscheck.keras_call.
    normalize_input_shapes`); the inputs the call used are in the index's ``keras_call``.
    """
    if input_shapes:
        from jitsim.crosscheck.keras_call import as_pairs

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
    kind, work = checked_target_and_output(target, out, signature, overwrite)
    runtmp = None
    try:
        dumps = work / "dumps"
        dumps.mkdir()
        runtmp = temporary_directory(prefix="jitsim-run-")
        cmd = _command(target, kind, signature, python or sys.executable, runtmp, tail, call, input_shapes)
        env = harvest_env(dumps, flags)
        env.update(env_extra or {})
        # TF's and Keras' own temporary files (a .keras file's weights unpacked) go under runtmp,
        # which is removed whatever happens
        (runtmp / "tmp").mkdir()
        env["TMPDIR"] = str(runtmp / "tmp")
        if kind == "program" and tail is not None:
            env["JITSIM_PROGRAM"] = str(target)
        imports = runner_imports(target, kind)
        if imports:
            env["JITSIM_RUNNER_IMPORTS"] = ",".join(imports)
        if kind != "program":  # the runners import this jitsim (jitsim.crosscheck.keras_call)
            src = str(Path(__file__).resolve().parents[2])
            env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
        all_ops = runtmp / "all_ops.pb"
        env["JITSIM_OP_DEFS_OUT"] = str(all_ops)
        log_path = work / "log.txt"
        t0 = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                cmd, cwd=runtmp, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            )
            try:
                while True:
                    try:
                        proc.wait(timeout=0.5)
                        break
                    except subprocess.TimeoutExpired:
                        elapsed = time.monotonic() - t0
                        if elapsed > timeout:
                            proc.kill()
                            proc.wait()
                            raise HarvestError(f"TensorFlow run timed out after {timeout:.0f} s", target)
                        if progress:
                            progress(elapsed, sum(1 for _ in dumps.iterdir()))
            except BaseException:  # Ctrl-C, a signal, an error: TF's process ends with jitsim
                proc.kill()
                proc.wait()
                raise
        wall = time.monotonic() - t0
        library_ops = _library_op_defs(all_ops, work / OP_LIBRARY_FILE)
        log_text = read_text(log_path, what="TF's log")
        if proc.returncode != 0:
            bad = [ln[len(INPUT_ERROR_MARK):].strip() for ln in log_text.splitlines() if ln.startswith(INPUT_ERROR_MARK)]
            if bad:  # the stated call does not fit the model: the user's error, in its own words
                raise HarvestError(bad[-1], target)
            last = last_error_line(log_text)
            if "No module named 'tensorflow'" in last:  # the --python given has none
                raise HarvestError(f"{_NO_TF} ({python or sys.executable} cannot import it)", target)
            raise HarvestError(f"TensorFlow run failed (exit {proc.returncode}): {last}", target)
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
            "graphs": index_dump_dir(dumps, log_text),
        }
        if call is not None:
            index["call"] = call
        keras_lines = [ln[len(KERAS_CALL_MARK):] for ln in log_text.splitlines() if ln.startswith(KERAS_CALL_MARK)]
        if keras_lines:
            index["keras_call"] = {"inputs": json.loads(keras_lines[-1]),
                                   "input_shapes": [[k, list(v)] for k, v in input_shapes]}
        notes = [ln[len("JITSIM_NOTE: "):].strip() for ln in log_text.splitlines() if ln.startswith("JITSIM_NOTE: ")]
        if notes:
            index["run_notes"] = notes
        if imports:
            index["runner_imports"] = imports
        if library_ops:
            index["op_library_ops"] = library_ops
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
    finally:
        if runtmp is not None:
            remove_tree(runtmp)
        if work.exists():
            remove_tree(work)


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
        if line.startswith(_VERSION_MARK):
            return line[len(_VERSION_MARK):].strip() or None
    return None


def last_error_line(log_text: str) -> str:
    lines = [l.strip() for l in log_text.splitlines() if l.strip() and not l.startswith(_VERSION_MARK)]
    for l in reversed(lines):
        if l.startswith("JITSIM_ERROR: "):
            return l[len("JITSIM_ERROR: "):][:500]
    for l in reversed(lines):
        if "Error" in l or "error" in l:
            return l[:300]
    return lines[-1][:300] if lines else "no output"
