"""TF profiler output as Chrome Trace Event JSON, and what a trace's events say.

The conversion is xprof's (``pip install xprof``, the TensorBoard profile plugin's
converter; imported only here, only when converting): the XSpace (``*.xplane.pb``) that
``tf.profiler.experimental`` writes becomes the ``trace_viewer`` tool's JSON,
``{"traceEvents": [...]}``, which chrome://tracing and Perfetto open.

In such a trace a TF op's kernel is a complete event (``"ph": "X"``) named by its op type,
with ``args.long_name`` ``"<node name>:<op type>"``; an auto-clustered launch is an
``_XlaRun`` op event (``_XlaCompile`` before it), and the HLO instructions XLA runs inside
it carry ``args.hlo_module``.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from jitsim.errors import JitsimError
from jitsim.files.input import read_file, read_text
from jitsim.defs import XLA_COMPILE_OP, XLA_MERGE_OP, XLA_RUN_OP

XLA_LAUNCH_OPS = (XLA_RUN_OP, "XlaLaunch")
XLA_COMPILE_OPS = (XLA_COMPILE_OP,)
XLA_SUPPORT_OPS = (XLA_COMPILE_OP, XLA_MERGE_OP)  # bookkeeping around a launch, not work


def xplane_files(logdir: Path) -> list[Path]:
    return sorted(Path(logdir).glob("plugins/profile/*/*.xplane.pb"))


def xspace_to_trace(logdir: Path) -> dict:
    """The Chrome trace (a dict with ``traceEvents``) of a TF profiler log directory."""
    files = xplane_files(logdir)
    if not files:
        raise JitsimError("TF's profiler wrote no XSpace (*.xplane.pb)", logdir)
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError:
        raise JitsimError("converting TF's profile to a trace needs xprof (pip install xprof, or "
                          "pip install 'jitsim[profile]')", logdir) from None
    with _quiet_stderr() as log:  # xprof's native code logs every step of its work on fd 2
        data, _ = raw_to_tool_data.xspace_to_tool_data([str(f) for f in files], "trace_viewer", {})
    if not data:
        last = (read_text(log).strip().splitlines() or ["no message"])[-1]
        raise JitsimError(f"xprof could not convert TF's profile to a trace: {last[:300]}", files[0])
    trace = json.loads(data)
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise JitsimError("xprof's trace has no traceEvents list", files[0])
    trace["traceEvents"] = [e for e in trace["traceEvents"] if e]  # xprof ends the list with an empty {}
    return trace


@contextlib.contextmanager
def _quiet_stderr():
    """File descriptor 2 into a temporary file for the block; yields the file's path."""
    with tempfile.TemporaryDirectory(prefix="jitsim-xprof-") as d:
        path = Path(d) / "stderr.txt"
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            with open(path, "wb") as f:
                os.dup2(f.fileno(), 2)
                try:
                    yield path
                finally:
                    os.dup2(saved, 2)
        finally:
            os.close(saved)


def read_trace(path: Path) -> dict:
    try:
        trace = json.loads(read_file(path, what="a Chrome trace (JSON)"))
    except (ValueError, RecursionError) as e:
        raise JitsimError(f"not a Chrome trace: {e}", path) from None
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        raise JitsimError("not a Chrome trace: no traceEvents list", path)
    return trace


def op_events(trace: dict) -> list[dict]:
    """The TF op kernel events of a trace (complete events with ``args.long_name``)."""
    return [e for e in trace["traceEvents"]
            if e.get("ph") == "X" and isinstance(e.get("args"), dict) and ":" in str(e["args"].get("long_name", ""))]


def node_and_op(event: dict) -> tuple[str, str]:
    name, _, op = event["args"]["long_name"].rpartition(":")
    return name, op


def launch_events(trace: dict) -> list[dict]:
    return [e for e in op_events(trace) if node_and_op(e)[1] in XLA_LAUNCH_OPS]


def compile_events(trace: dict) -> list[dict]:
    return [e for e in op_events(trace) if node_and_op(e)[1] in XLA_COMPILE_OPS]


def duration_s(events) -> float:
    """Total duration of events, in seconds (trace ``dur`` is in microseconds)."""
    return sum(float(e.get("dur", 0.0)) for e in events) / 1e6


def hlo_modules(trace: dict) -> set[str]:
    """HLO module names the trace's XLA events name (``args.hlo_module``)."""
    return {e["args"]["hlo_module"] for e in trace["traceEvents"]
            if isinstance(e.get("args"), dict) and e["args"].get("hlo_module")}


_LAUNCH_NODE = re.compile(r"^(?P<node>.+)/xla_(?:run|compile)$")


def launch_node(event: dict) -> str:
    """The clustered call node a launch event belongs to: ``cluster_0_1`` for
    ``cluster_0_1/xla_run`` (the node TF's build-xla-ops pass split into compile and run)."""
    name, _ = node_and_op(event)
    m = _LAUNCH_NODE.match(name)
    return m.group("node") if m else name


def step_counts(trace: dict) -> dict:
    """Per profiled step: TF op executions (XLA's bookkeeping ops not counted), XLA launches,
    and the op types executed."""
    ops = op_events(trace)
    types: dict[str, int] = {}
    for e in ops:
        op = node_and_op(e)[1]
        types[op] = types.get(op, 0) + 1
    launches = sum(v for k, v in types.items() if k in XLA_LAUNCH_OPS)
    work = sum(v for k, v in types.items() if k not in XLA_LAUNCH_OPS and k not in XLA_SUPPORT_OPS)
    return {"tf_ops": work, "xla_launches": launches, "op_types": dict(sorted(types.items()))}
