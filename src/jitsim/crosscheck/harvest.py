"""Run real TensorFlow with the JIT dump flags and collect the dumps: jitsim's ground truth.

A *target* is a Python program, a GraphDef (``.pb``/``.pbtxt``; its ``Placeholder``s are
fed generated data and every sink is fetched in a ``tf.compat.v1.Session``) or a
SavedModel directory (one signature, called with generated inputs). The program runs
in a subprocess with::

    TF_XLA_FLAGS=<flags>  TF_DUMP_GRAPH_PREFIX=<out>/dumps
    TF_CPP_VMODULE=mark_for_compilation_pass=1,encapsulate_subgraphs_pass=1,
                   build_xla_ops_pass=1,clone_constants_for_better_clustering=1

and the output directory gets ``dumps/``, ``log.txt`` (TF's stdout+stderr) and
``index.json`` (schema ``jitsim.dump-index/1``, documented in docs/ground-truth.md).
The directory is assembled under a temporary name and renamed at the end, so a failed
harvest leaves no partial output.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from jitsim.crosscheck.dumps import INDEX_SCHEMA, index_dump_dir
from jitsim.errors import HarvestError

DEFAULT_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_clustering_debug"
VMODULE = (
    "mark_for_compilation_pass=1,encapsulate_subgraphs_pass=1,build_xla_ops_pass=1,"
    "clone_constants_for_better_clustering=1"
)
_VERSION_MARK = "JITSIM_TF_VERSION="

# Runs the user's program as __main__ and reports the TF version it used, at exit.
_BOOTSTRAP = textwrap.dedent(
    """
    import atexit, runpy, sys
    def _report():
        tf = sys.modules.get("tensorflow")
        print("%s" + (getattr(tf, "__version__", "") if tf else ""), file=sys.stderr, flush=True)
    atexit.register(_report)
    prog = sys.argv[1]
    sys.argv = sys.argv[1:]
    sys.path.insert(0, __import__("os").path.dirname(prog))
    runpy.run_path(prog, run_name="__main__")
    """
    % _VERSION_MARK
)

_INPUT_GEN = textwrap.dedent(
    """
    import numpy as np
    import tensorflow as tf
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
    """
)

_GRAPHDEF_RUNNER = _INPUT_GEN + textwrap.dedent(
    """
    import sys
    from google.protobuf import text_format
    path = sys.argv[1]
    gd = tf.compat.v1.GraphDef()
    data = open(path, "rb").read()
    if path.endswith((".pbtxt", ".pbtext", ".txt", ".prototxt")):
        text_format.Parse(data.decode(), gd)
    else:
        gd.ParseFromString(data)
    g = tf.Graph()
    with g.as_default():
        tf.graph_util.import_graph_def(gd, name="")
    feeds, fetches = {}, []
    for op in g.get_operations():
        if op.type == "Placeholder":
            t = op.outputs[0]
            dims = t.shape.as_list() if t.shape.rank is not None else [2]
            feeds[t] = _gen(t.dtype, dims)
        elif not any(c for o in op.outputs for c in o.consumers()) and not op._control_outputs:
            fetches.extend(op.outputs or [op])
    with tf.compat.v1.Session(graph=g) as sess:
        init = [op for op in g.get_operations() if op.name == "init"]
        if init:
            sess.run(init, feed_dict=feeds)
        sess.run(fetches, feed_dict=feeds)
    """
)

_SAVED_MODEL_RUNNER = _INPUT_GEN + textwrap.dedent(
    """
    import sys
    m = tf.saved_model.load(sys.argv[1])
    sig = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else "serving_default"
    f = m.signatures[sig]
    _, kwargs = f.structured_input_signature
    f(**{k: tf.constant(_gen(s.dtype, s.shape.as_list() if s.shape.rank is not None else [2]))
         for k, s in kwargs.items()})
    """
)


def target_kind(target: Path) -> str:
    if target.is_dir():
        if (target / "saved_model.pb").exists() or (target / "saved_model.pbtxt").exists():
            return "saved_model"
        raise HarvestError("is a directory but not a SavedModel", target)
    if not target.exists():
        raise HarvestError("no such file or directory", target)
    if target.suffix == ".py":
        return "program"
    return "graphdef"


def _command(target: Path, kind: str, signature: str | None, python: str, workdir: Path) -> list[str]:
    boot = workdir / "_jitsim_bootstrap.py"
    boot.write_text(_BOOTSTRAP)
    if kind == "program":
        return [python, str(boot), str(target)]
    runner = workdir / f"_jitsim_{kind}_runner.py"
    runner.write_text(_GRAPHDEF_RUNNER if kind == "graphdef" else _SAVED_MODEL_RUNNER)
    args = [python, str(boot), str(runner), str(target)]
    if kind == "saved_model":
        args.append(signature or "")
    return args


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
) -> dict:
    """Run ``target`` under real TF with the dump flags; write ``out/`` and return its index.

    ``progress``, if given, is called about twice a second with
    ``(elapsed_seconds, number_of_dump_files)`` while TF runs.
    """
    target = Path(target).resolve()
    out = Path(out).resolve()  # TF runs in a scratch cwd: the dump prefix must be absolute
    kind = target_kind(target)
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise HarvestError("output directory exists and is not empty (use --overwrite)", out)
    out.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    try:
        dumps = work / "dumps"
        dumps.mkdir()
        runtmp = Path(tempfile.mkdtemp(prefix="jitsim-run-"))
        cmd = _command(target, kind, signature, python or sys.executable, runtmp)
        log_path = work / "log.txt"
        t0 = time.monotonic()
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                cmd, cwd=runtmp, env=harvest_env(dumps, flags), stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
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
            except KeyboardInterrupt:
                proc.kill()
                raise
        wall = time.monotonic() - t0
        shutil.rmtree(runtmp, ignore_errors=True)
        log_text = log_path.read_text(errors="replace")
        if proc.returncode != 0:
            raise HarvestError(
                f"TensorFlow run failed (exit {proc.returncode}): {_last_error_line(log_text)}", target
            )
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
        index["totals"] = totals(index["graphs"])
        (work / "index.json").write_text(json.dumps(index, indent=1) + "\n")
        if out.exists():
            shutil.rmtree(out)
        os.replace(work, out)
        return index
    finally:
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def totals(graphs: list[dict]) -> dict:
    return {
        "graphs": len(graphs),
        "graphs_with_candidates": sum(1 for g in graphs if "mark_for_compilation" in g["files"]),
        "graphs_with_clusters": sum(1 for g in graphs if g["clusters"]),
        "clusters": sum(len(g["clusters"]) for g in graphs),
        "max_nodes": max((g["nodes"] for g in graphs), default=0),
    }


def _tf_version(log_text: str) -> str | None:
    for line in reversed(log_text.splitlines()):
        if line.startswith(_VERSION_MARK):
            return line[len(_VERSION_MARK):].strip() or None
    return None


def _last_error_line(log_text: str) -> str:
    lines = [l.strip() for l in log_text.splitlines() if l.strip() and not l.startswith(_VERSION_MARK)]
    for l in reversed(lines):
        if "Error" in l or "error" in l:
            return l[:300]
    return lines[-1][:300] if lines else "no output"
