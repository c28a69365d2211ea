"""The two TF runs of ``jitsim profile``: the workload with auto-clustering off, then on.

Each run is a :func:`jitsim.tfprocess.harvest.harvest` of the target (same targets, same
fresh subprocess, same dump flags) whose *call* is replaced by :data:`PROFILE_TAIL`: the
step (the runner's ``_step()``, or a program's ``jitsim_step()``) is run ``warmup`` times
under TF's profiler (XLA compiles there), ``steps`` times timed, then once more under the
profiler: that is the trace. The "on" run also sets ``XLA_FLAGS`` so that XLA dumps the
HLO of every module it compiles. The child writes into ``raw``::

    timing.json          first (warm-up) and timed step times, in seconds
    warmup/, step/       TF profiler log directories (XSpace ``*.xplane.pb``)
    xla/                 XLA's dump directory ("on" run only)
"""

from __future__ import annotations

import os
import textwrap
from dataclasses import dataclass
from pathlib import Path

from jitsim.tfprocess.harvest import harvest
from jitsim.errors import HarvestError
from jitsim.files.input import read_json

OFF_FLAG = "--tf_xla_auto_jit=-1"  # later flags win: appended, it turns auto-clustering off

PROFILE_TAIL = textwrap.dedent(
    """
    import json as _json, os as _os, time as _time
    _raw = _os.environ["JITSIM_PROFILE_RAW"]
    _steps = int(_os.environ["JITSIM_PROFILE_STEPS"])
    _warm = int(_os.environ["JITSIM_PROFILE_WARMUP"])
    _dev = _os.environ.get("JITSIM_PROFILE_DEVICE", "cpu")
    if _dev == "gpu" and not tf.config.list_physical_devices("GPU"):
        raise SystemExit("JITSIM_ERROR: --device gpu: TensorFlow sees no GPU on this machine")
    _where = "/GPU:0" if _dev == "gpu" else "/CPU:0"
    def _timed():
        t0 = _time.perf_counter()
        with tf.device(_where):
            r = _step()
        for t in tf.nest.flatten(r):
            if hasattr(t, "numpy"):
                t.numpy()  # wait for the step's results
        return _time.perf_counter() - t0
    _mark_call()
    tf.profiler.experimental.start(_os.path.join(_raw, "warmup"))
    _first = [_timed() for _ in range(max(1, _warm))]
    tf.profiler.experimental.stop()
    _times = [_timed() for _ in range(_steps)]
    tf.profiler.experimental.start(_os.path.join(_raw, "step"))
    _traced = _timed()
    tf.profiler.experimental.stop()
    with open(_os.path.join(_raw, "timing.json"), "w") as _f:
        _json.dump({"warmup_s": _first, "steps_s": _times, "traced_step_s": _traced}, _f)
    """
)


@dataclass
class Run:
    """One finished run: ``harvest`` is its harvest directory (dumps/, log.txt, index.json),
    ``raw`` what the child wrote (see the module doc)."""

    label: str  # "off" or "on"
    flags: str
    harvest: Path
    raw: Path
    index: dict

    @property
    def timing(self) -> dict:
        return read_json(self.raw / "timing.json")

    @property
    def xla_dump(self) -> Path:
        return self.raw / "xla"


def xla_dump_flags(dump_dir: Path, base: str | None = None) -> str:
    """``XLA_FLAGS`` that dump every compiled module's HLO as text and as a graphviz graph,
    before and after optimisation, on top of the user's own ``XLA_FLAGS``."""
    ours = f"--xla_dump_to={dump_dir} --xla_dump_hlo_as_text --xla_dump_hlo_as_dot"
    return f"{base} {ours}".strip() if base else ours


def run_workload(target: Path, work: Path, label: str, flags: str, *, steps: int, warmup: int, device: str,
                 signature: str | None = None, timeout: float = 600.0, progress=None, input_shapes=()) -> Run:
    """Run ``target`` once under real TF with ``flags`` (see the module doc); ``input_shapes``:
    a ``.keras`` file's stated call (:func:`jitsim.tfprocess.keras_call.normalize_input_shapes`)."""
    raw = work / f"raw_{label}"
    raw.mkdir(parents=True)
    env = {
        "JITSIM_PROFILE_RAW": str(raw),
        "JITSIM_PROFILE_STEPS": str(steps),
        "JITSIM_PROFILE_WARMUP": str(warmup),
        "JITSIM_PROFILE_DEVICE": device,
    }
    if label == "on":
        env["XLA_FLAGS"] = xla_dump_flags(raw / "xla", os.environ.get("XLA_FLAGS"))
    if device == "gpu":
        env["CUDA_VISIBLE_DEVICES"] = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    out = work / f"harvest_{label}"
    index = harvest(target, out, flags=flags, signature=signature, timeout=timeout, progress=progress,
                    env_extra=env, tail=PROFILE_TAIL, require_dumps=False, input_shapes=input_shapes)
    if not (raw / "timing.json").is_file():
        raise HarvestError(f"the XLA-{label} run ended without timing its steps (see its log)", target)
    return Run(label, flags, out, raw, index)


def off_flags(on_flags: str) -> str:
    return f"{on_flags} {OFF_FLAG}".strip()
