"""Reading a shape stream: one JSON object per line, one line per step.

Each object maps a name to what the step gives it:

* ``"x": [2, 128, 16]`` - the shape of input ``x``;
* ``"n": {"shape": [], "value": 7}`` - shape and value (integer inputs that feed shape
  arithmetic: the value decides constant arguments);
* a name that is not an input (``"Unique"``, ``"Unique:1"``) states that tensor's shape (and
  value) for the step, for tensors whose shape depends on data;
* ``"while": {"iterations": 3}`` - a while loop's frame name and how many times its body ran
  in the step (units inside the body run once per iteration; default 1).

Blank lines and lines starting with ``#`` are skipped; step numbers count the other lines
from 0. Every problem is one :class:`~jitsim.errors.JitsimError` naming the line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from jitsim.errors import JitsimError

MAX_STEPS = 1_000_000
MAX_BYTES = 256 * 1024 * 1024


@dataclass
class StepInput:
    step: int
    line: int
    entries: dict  # name -> (shape tuple, value or None)
    iterations: dict = None  # while-loop frame name -> iterations this step


def _shape(v, where: str) -> tuple:
    if not isinstance(v, list) or not all(isinstance(d, int) and not isinstance(d, bool) for d in v):
        raise ValueError(f"{where}: a shape is a list of integers, e.g. [2, 128]")
    if any(d < 0 for d in v):
        raise ValueError(f"{where}: dimensions must be 0 or more (a step runs with concrete shapes)")
    return tuple(v)


def _entry(name: str, v, where: str):
    if isinstance(v, dict):
        unknown = set(v) - {"shape", "value"}
        if unknown:
            raise ValueError(f"{where}: {name!r}: unknown key(s) {', '.join(sorted(unknown))} (use shape, value)")
        value = v.get("value")
        if "shape" in v:
            shape = _shape(v["shape"], f"{where}: {name!r}")
        elif value is not None:
            shape = _shape(list(_value_shape(value)), f"{where}: {name!r}")
        else:
            raise ValueError(f"{where}: {name!r}: give its shape (and optionally its value)")
        if value is not None:
            import numpy as np

            arr = np.asarray(value)
            if arr.dtype.kind not in "iub" or tuple(arr.shape) != shape:
                raise ValueError(f"{where}: {name!r}: value must be integers (or booleans) of shape "
                                 f"{list(shape)}, got {json.dumps(value)[:60]}")
            value = arr
        return shape, value
    return _shape(v, f"{where}: {name!r}"), None


def _iterations(name: str, v: dict, where: str) -> int:
    n = v["iterations"]
    if set(v) != {"iterations"} or not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise ValueError(f"{where}: {name!r}: a loop's entry is {{\"iterations\": N}} with N 0 or more")
    return n


def _value_shape(value) -> tuple:
    shape = []
    while isinstance(value, list):
        shape.append(len(value))
        value = value[0] if value else None
    return tuple(shape)


def read_stream(path) -> list[StepInput]:
    """The steps of a shape stream file (see the module docstring)."""
    p = Path(path)
    from jitsim.graph.io import read_bytes

    if p.is_dir():
        raise JitsimError("is a directory; give a shape stream file (one JSON object per line)", p)

    data = read_bytes(p, limit=MAX_BYTES)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise JitsimError("not a UTF-8 text file (a shape stream has one JSON object per line)", p) from None
    steps: list[StepInput] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        where = f"line {lineno}"
        try:
            obj = json.loads(s)
        except json.JSONDecodeError as exc:
            raise JitsimError(f"{where}: not JSON ({exc.msg}); each line is one step, e.g. "
                              '{"x": [2, 128]}', p) from None
        if not isinstance(obj, dict):
            raise JitsimError(f"{where}: a step is a JSON object mapping input names to shapes, e.g. "
                              '{"x": [2, 128]}', p)
        loops = {str(k): v for k, v in obj.items() if isinstance(v, dict) and "iterations" in v}
        try:
            entries = {str(k): _entry(str(k), v, where) for k, v in obj.items() if str(k) not in loops}
            iterations = {k: _iterations(k, v, where) for k, v in loops.items()}
        except ValueError as exc:
            raise JitsimError(str(exc), p) from None
        steps.append(StepInput(len(steps), lineno, entries, iterations))
        if len(steps) > MAX_STEPS:
            raise JitsimError(f"more than {MAX_STEPS} steps", p)
    if not steps:
        raise JitsimError("no steps: the shape stream has no JSON object lines", p)
    return steps

