"""The warm-up planner: buckets for a stream of input shapes, and the warm-up that compiles
every signature serving will need before it serves (``jitsim runtime PROGRAM --shapes S --plan
DIR``, docs/runtime.md).

From the stream (or a histogram written as one) and the run-time prediction
(:mod:`jitsim.runtime.simulate`), the planner

1. takes the input dimensions the compiled units' signatures follow
   (:func:`jitsim.runtime.advice.recompile_causes`) and, for each, chooses buckets (sizes the
   dimension is padded up to) that minimise ``buckets + padding_weight × padded work`` over the
   stream (:func:`choose_buckets`: exact, by dynamic programming over the sizes seen; the
   padded work is the fraction of elements added along the dimension);
2. re-simulates the bucketed stream: per unit, the signatures serving will request, which are
   the entries TF's persistent compilation cache (``--tf_xla_persistent_cache_directory``)
   holds after the warm-up, one file per unit and signature;
3. writes the warm-up (``warmup.py``): a program that runs the function twice per bucketed
   input shape with serving's flags (lazy compilation compiles a signature at its second
   request) and the persistent cache on, so that a serving process with the same flags and
   cache directory loads every executable instead of building it; the warm-up's simulation
   gives the entries it writes (a strict unit inside an auto-cluster is compiled on the
   cluster's fallbacks, in the warm-up as in serving).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace

from jitsim.runtime import policy as pol

DEFAULT_PADDING_WEIGHT = 20.0  # one more compile is worth 5% of the stream's work padded away


def choose_buckets(counts: dict[int, int], padding_weight: float = DEFAULT_PADDING_WEIGHT) -> list[int]:
    """The bucket sizes minimising ``len(buckets) + padding_weight × padded / total`` for a
    dimension whose sizes occur ``counts`` times (size -> count): each size is padded up to the
    smallest bucket at least as large, the largest size is always a bucket.

    >>> choose_buckets({1: 10, 2: 10, 3: 10, 64: 1}, padding_weight=2.0)
    [3, 64]
    >>> choose_buckets({5: 1, 6: 1, 7: 1, 8: 1}, padding_weight=0.0)
    [8]
    """
    sizes = sorted(counts)
    if not sizes:
        return []
    total = sum(s * c for s, c in counts.items()) or 1

    def pad(i: int, j: int) -> float:  # sizes[i..j] padded up to sizes[j]
        return sum((sizes[j] - sizes[k]) * counts[sizes[k]] for k in range(i, j + 1)) / total

    n = len(sizes)
    best = [0.0] + [float("inf")] * n  # best[j]: cost of sizes[:j], the last bucket at sizes[j - 1]
    prev = [0] * (n + 1)
    for j in range(1, n + 1):
        for i in range(j):
            cost = best[i] + 1 + padding_weight * pad(i, j - 1)
            if cost < best[j] - 1e-12:
                best[j], prev[j] = cost, i
    out, j = [], n
    while j > 0:
        out.append(sizes[j - 1])
        j = prev[j]
    return sorted(out)


def bucket_of(buckets: list[int], size: int) -> int:
    return next((b for b in buckets if b >= size), size)


@dataclass
class Plan:
    dims: dict = field(default_factory=dict)  # (input, dim) -> buckets
    warmup: list = field(default_factory=list)  # the distinct bucketed steps' entries, first seen first
    bucketed: list = field(default_factory=list)  # every step's entries, bucketed (the stream serving sees)
    units: list = field(default_factory=list)  # per unit: name, function, signatures (cache entries)
    before: dict = field(default_factory=dict)  # the stream's compiles / fallbacks
    after: dict = field(default_factory=dict)  # the bucketed stream's
    padded_work: float = 0.0  # elements added along the bucketed dimensions, a fraction of the stream's
    note: str = ""  # why the plan does not bucket, where it does not

    @property
    def entries(self) -> int:
        return sum(len(u["signatures"]) for u in self.units)

    def to_dict(self) -> dict:
        return {"schema": "jitsim.plan/1",
                "buckets": [{"input": n, "dim": i, "sizes": b} for (n, i), b in self.dims.items()],
                "warmup_steps": len(self.warmup), "padded_work": round(self.padded_work, 4),
                "before": self.before, "after": self.after, "cache_entries": self.entries, "units": self.units,
                "note": self.note}


WARMUP_REPEAT = 2  # each shape twice: under lazy compilation a signature compiles at its second request


def make_plan(res, steps, rerun, padding_weight: float = DEFAULT_PADDING_WEIGHT) -> Plan:
    """The plan for ``res`` (a run with the stream ``steps``); ``rerun(steps)`` re-simulates
    another stream (:func:`jitsim.runtime.simulate.runtime`'s). Bucketing is kept only where
    the bucketed stream costs less (compiles plus the weighted padding) than the stream as it
    is; the warm-up runs each distinct (bucketed) input shape :data:`WARMUP_REPEAT` times in
    serving's own compilation mode, so that it compiles what serving compiles, the strict units
    that run on an auto-cluster's fallbacks included; its simulation gives the cache entries."""
    from jitsim.runtime.advice import _followed_dims, _reshaped, _totals
    from jitsim.runtime.simulate import _part_text

    dims = _followed_dims(res, steps) if any(len(set(r.signatures)) > 1 for r in res.units) else []
    node_of = {n: spec.name for spec in res.inputs for n in (spec.name,) + spec.aliases}
    counts: dict = {d: {} for d in dims}
    for st in steps:
        for key, (shape, value) in st.entries.items():
            node = node_of.get(key)
            for i, d in enumerate(shape):
                if (node, i) in counts and value is None:
                    counts[(node, i)][d] = counts[(node, i)].get(d, 0) + 1
    plan = Plan(dims={d: choose_buckets(c, padding_weight) for d, c in counts.items()})
    bucketed = _reshaped(steps, res.inputs, set(dims), lambda n, i, d: bucket_of(plan.dims[(n, i)], d))
    after = rerun(bucketed)
    plan.before, plan.after = _totals(res.units), _totals(after)
    plan.padded_work = _padded(steps, bucketed)
    if plan.dims and plan.after["compiles"] + padding_weight * plan.padded_work >= plan.before["compiles"]:
        plan.note = ("bucketing " + ", ".join(f"{n}.shape[{i}]" for n, i in plan.dims) + " gains nothing on this "
                     "stream (no fewer compiles for the padding): the warm-up covers the stream's own shapes")
        plan.dims, bucketed, plan.after, plan.padded_work = {}, list(steps), dict(plan.before), 0.0
    plan.bucketed = [_entries(st) for st in bucketed]
    seen, distinct = set(), []
    for st in bucketed:
        key = json.dumps(_entries(st), sort_keys=True)
        if key not in seen:
            seen.add(key)
            distinct.append(st)
            plan.warmup.append(_entries(st))
    warm = rerun([replace(st, step=k) for k, st in enumerate(s for s in distinct for _ in range(WARMUP_REPEAT))])
    for r in warm:
        sigs = list(dict.fromkeys(e.signature for e in r.policy.history if e.outcome == pol.COMPILED
                                  and not any(p[0] == "unknown" for p in e.signature)))
        plan.units.append({"name": r.unit.name, "function": r.unit.function, "kind": r.unit.kind,
                           "signatures": [[_part_text(p) for p in s] for s in sigs],
                           "keys": [signature_key(s) for s in sigs]})
    return plan


def _entries(st) -> dict:
    return {k: (list(s), None if v is None else _plain(v)) for k, (s, v) in st.entries.items()}


def _padded(steps, bucketed) -> float:
    """The elements bucketing adds, a fraction of the stream's."""
    added = total = 0
    for a, b in zip(steps, bucketed):
        for key, (shape, _) in a.entries.items():
            n_old, n_new = _elements(shape), _elements(b.entries[key][0])
            total += n_old
            added += n_new - n_old
    return added / total if total else 0.0


def signature_key(parts) -> str:
    """A signature as its cache entry is told apart: per argument its dimensions, and a
    constant's values (jitsim's parts, :func:`jitsim.runtime.simulate._signature`)."""
    out = []
    for p in parts:
        if p[0] == "constant":
            out.append(f"{list(p[2])}={list(p[3])}")
        else:
            out.append(str(list(p[2])))
    return " ".join(out)


_TF_CONST = re.compile(r"Tensor<type: \w+ shape: \[([\d,]*)\] values: ([^>]*)>")
_TF_SHAPE = re.compile(r"(?:^|,)\w+ \[([\d,]*)\]")


def tf_signature_key(signature: str) -> str:
    """The same key for a signature as TF logs it (``DeviceCompilationClusterSignature::
    HumanString``: the function, its attributes, then each constant as its tensor and each
    other argument as ``<dtype> [<dims>]``)."""
    head, _, args = signature.partition("]")
    out = []
    for m in _TF_CONST.finditer(args):
        dims = [int(x) for x in m.group(1).split(",") if x]
        values = [int(float(x)) if x.lstrip("-").replace(".", "", 1).isdigit() else x for x in m.group(2).split()]
        out.append(f"{dims}={values}")
    rest = _TF_CONST.sub("", args)
    for m in _TF_SHAPE.finditer(rest):
        out.append(str([int(x) for x in m.group(1).split(",") if x]))
    return " ".join(out)


def _elements(shape) -> int:
    n = 1
    for d in shape:
        n *= max(int(d), 0)
    return n


def _plain(v):
    import numpy as np

    return np.asarray(v).tolist()


WARMUP_TEMPLATE = '''"""Warm-up for {program}: run once before serving (written by jitsim runtime --plan).

It calls the program's tf.function `{function}` twice per input shape serving will request
({n} shapes: the stream's, bucketed), with serving's TF_XLA_FLAGS and TensorFlow's persistent
compilation cache on, so every signature serving compiles (lazy compilation: at its second
request) is compiled now and saved in {cache}. A serving
process with the same TF_XLA_FLAGS plus --tf_xla_persistent_cache_directory={cache} loads each
executable instead of building it. Pad the serving inputs up to the same buckets:
{buckets}
"""
import json
import os
import runpy
import sys

PROGRAM = {program!r}
FUNCTION = {function!r}
CACHE = os.environ.get("JITSIM_WARMUP_CACHE", {cache!r})
FLAGS = {flags!r}
SHAPES = json.loads({shapes!r})

os.environ["TF_XLA_FLAGS"] = FLAGS + " --tf_xla_persistent_cache_directory=" + CACHE

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

ns = runpy.run_path(PROGRAM, run_name="__jitsim_warmup__")
fn = ns[FUNCTION]
specs = list(fn.input_signature)
names = [s.name for s in specs]
params = list(__import__("inspect").signature(fn.python_function).parameters)
for entries in SHAPES:
    args = []
    for i, spec in enumerate(specs):
        key = next((k for k in (params[i] if i < len(params) else None, names[i]) if k and k in entries), None)
        shape, value = entries[key] if key else (spec.shape.as_list(), None)
        dt = spec.dtype
        arr = np.asarray(value) if value is not None else np.zeros(shape)
        args.append(tf.constant(arr.astype(dt.as_numpy_dtype)))
    for _ in range({repeat}):
        fn(*args)
print(f"warm-up done: {{len(SHAPES)}} shapes, cache {{CACHE}}", file=sys.stderr)
'''


def warmup_program(plan: Plan, program: str, function: str, flags: str, cache: str) -> str:
    buckets = "; ".join(f"{n}.shape[{i}] -> {b}" for (n, i), b in plan.dims.items()) or "(nothing varies)"
    shapes = json.dumps([{k: v for k, v in e.items()} for e in plan.warmup])
    return WARMUP_TEMPLATE.format(program=program, function=function, n=len(plan.warmup), cache=cache,
                                  buckets=buckets, flags=flags, shapes=shapes, repeat=WARMUP_REPEAT)


def stream_text(entries: list) -> str:
    """Steps' entries as a shape stream (:mod:`jitsim.runtime.stream`)."""
    return "".join(json.dumps({k: ({"shape": sh, "value": v} if v is not None else sh) for k, (sh, v) in e.items()})
                   + "\n" for e in entries)


_SAVED = re.compile(r"XlaSerializedCacheEntry saved for signature: \[(.*)\] with signature hash: (\d+)")
_LOADED = re.compile(r"Loading cached entry for: (.*?)\s*$")
PERSISTOR_VMODULE = "device_executable_persistor=3"


def check_with_tf(out_dir, plan: Plan, program, flags: str, function: str = "f", timeout: float = 600) -> dict:
    """Run the warm-up (``out_dir/warmup.py``) into a fresh ``out_dir/xla_cache``, then the
    bucketed stream under the same cache, both under real TensorFlow, and compare: the cache
    entries the warm-up saved (per function, and the files) against the plan's, and whether
    the replay built any executable (a build saves a new entry; a load logs ``Loading cached
    entry``)."""
    import os
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from jitsim.errors import HarvestError
    from jitsim.runtime.compare import _stem
    from jitsim.runtime.tflog import VMODULE, function_of
    from jitsim.runtime.tfrun import measure

    out_dir = Path(out_dir)
    cache = out_dir / "xla_cache"
    shutil.rmtree(cache, ignore_errors=True)
    env = dict(os.environ, TF_CPP_VMODULE=PERSISTOR_VMODULE, TF_CPP_MIN_LOG_LEVEL="0", JITSIM_WARMUP_CACHE=str(cache))
    env.setdefault("CUDA_VISIBLE_DEVICES", "")
    try:
        p = subprocess.run([sys.executable, str(out_dir / "warmup.py")], env=env, capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise HarvestError(f"the warm-up did not finish in {timeout:.0f} s", out_dir / "warmup.py") from None
    if p.returncode != 0:
        raise HarvestError(f"the warm-up failed: {(p.stderr.strip().splitlines() or ['?'])[-1][:300]}",
                           out_dir / "warmup.py")
    def key_of(fn: str) -> str:  # a jit function's uid differs from process to process
        return _stem(fn) if fn.startswith("__") else fn

    saved: dict = {}
    for m in _SAVED.finditer(p.stderr):
        saved.setdefault(key_of(function_of(m.group(1))), []).append(tf_signature_key(m.group(1)))
    files = sorted(f.name for f in cache.glob("*.pb")) if cache.is_dir() else []
    replay = measure(program, out_dir / "bucketed.jsonl", function=function, timeout=timeout,
                     flags=f"{flags} --tf_xla_persistent_cache_directory={cache}",
                     vmodule=f"{VMODULE},{PERSISTOR_VMODULE}")
    builds = len(_SAVED.findall(replay))
    loads = sum(1 for line in replay.splitlines() if _LOADED.search(line))
    predicted: dict = {}
    for u in plan.units:
        if u["keys"]:
            predicted.setdefault(key_of(u["function"]), []).extend(u["keys"])
    same = {fn: sorted(predicted.get(fn, [])) == sorted(saved.get(fn, [])) for fn in set(predicted) | set(saved)}
    identical = all(same.values()) and len(files) == plan.entries and builds == 0
    return {"identical": identical, "units": [{"function": fn, "identical": ok, "predicted": sorted(predicted.get(fn, [])),
                                               "tf_saved": sorted(saved.get(fn, []))} for fn, ok in sorted(same.items())],
            "cache_files": len(files), "predicted_files": plan.entries, "replay_builds": builds,
            "replay_loads": loads}
