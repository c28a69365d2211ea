"""Run a program's ``tf.function`` under real TensorFlow, one call per line of a shape stream,
and collect TF's own compile/fallback/megamorphic log (:mod:`jitsim.runtime.tflog`).

:func:`measure` starts ``python -m jitsim.runtime.tfrun`` in a subprocess (TF's flags are
process-wide) with ``TF_XLA_FLAGS`` and ``TF_CPP_VMODULE`` set, and returns TF's stderr.
The program is run with ``__name__ == "__jitsim_runtime__"`` (its ``if __name__ ==
"__main__":`` block does not run); its function ``function`` (default ``f``) must have an
``input_signature``. Each step calls it with tensors of the step's shapes: floats N(0, 1),
integers the stated value or uniform in [0, 4), booleans random, seeded by the step number.
Stream keys name the function's parameters (or their ``TensorSpec`` names).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from jitsim.errors import HarvestError
from jitsim.runtime.tflog import STEP_MARK, VMODULE


def measure(program, stream, *, flags: str, function: str = "f", timeout: float = 600, vmodule: str = VMODULE) -> str:
    """TF's stderr for the run of ``program`` over ``stream`` with ``TF_XLA_FLAGS=flags`` (and
    ``TF_CPP_VMODULE=vmodule``)."""
    env = dict(os.environ)
    env["TF_XLA_FLAGS"] = flags
    env["TF_CPP_VMODULE"] = vmodule
    env["TF_CPP_MIN_LOG_LEVEL"] = "0"
    env.setdefault("CUDA_VISIBLE_DEVICES", "")
    src = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [sys.executable, "-m", "jitsim.runtime.tfrun", str(program), str(stream), function]
    try:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise HarvestError(f"TensorFlow did not finish the stream in {timeout:.0f} s", program) from None
    if p.returncode != 0:
        tail = [ln for ln in p.stderr.splitlines() if ln.strip()][-1:] or ["(no output)"]
        prefix = f"jitsim: {program}: "
        if tail[0].startswith(prefix):
            raise HarvestError(tail[0][len(prefix):], program)
        raise HarvestError(f"the TensorFlow run failed (exit {p.returncode}): {tail[0][:300]}", program)
    return p.stderr


def _main(program: str, stream: str, function: str) -> int:
    import inspect
    import runpy

    import numpy as np
    import tensorflow as tf

    from jitsim.runtime.stream import read_stream

    ns = runpy.run_path(program, run_name="__jitsim_runtime__")
    fn = ns.get(function)
    if fn is None or getattr(fn, "input_signature", None) is None:
        print(f"jitsim: {program}: no tf.function {function!r} with an input_signature", file=sys.stderr)
        return 2
    specs = list(fn.input_signature)
    params = list(inspect.signature(fn.python_function).parameters)
    steps = read_stream(stream)
    for st in steps:
        rng = np.random.RandomState(st.step)
        args = []
        for i, spec in enumerate(specs):
            keys = [params[i] if i < len(params) else None, spec.name]
            entry = next((st.entries[k] for k in keys if k and k in st.entries), None)
            shape = entry[0] if entry else tuple(spec.shape.as_list())
            value = entry[1] if entry else None
            dt = spec.dtype
            if value is not None:
                arr = np.asarray(value).astype(dt.as_numpy_dtype)
            elif dt.is_floating:
                arr = rng.standard_normal(shape).astype(dt.as_numpy_dtype)
            elif dt.is_integer:
                arr = rng.randint(0, 4, size=shape).astype(dt.as_numpy_dtype)
            elif dt == tf.bool:
                arr = rng.randint(0, 2, size=shape).astype(bool)
            else:
                arr = np.zeros(shape, dt.as_numpy_dtype)
            args.append(tf.constant(arr))
        print(f"{STEP_MARK}{st.step} ===", file=sys.stderr, flush=True)
        out = fn(*args)
        tf.nest.map_structure(lambda t: t.numpy() if hasattr(t, "numpy") else t, out)
    print("=== jitsim end ===", file=sys.stderr, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(_main(*sys.argv[1:4]))
