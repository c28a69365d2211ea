"""What users do about recompilation, each suggestion checked by simulating it.

For a stream where some unit sees more than one signature, :func:`suggestions` re-runs the
simulation with:

* ``bucket``: every input dimension a unit's signature follows rounded up to the next power
  of two (pad the inputs to length buckets);
* ``pad-to-max``: those dimensions padded to their largest value in the stream (one shape);
* ``lazy-off``: ``--tf_xla_enable_lazy_compilation=false`` (every new signature compiles at
  once: no fallback, every compile paid) — offered when a unit runs lazily;
* ``lazy-on``: ``--tf_xla_enable_lazy_compilation=true`` — offered when an auto-cluster runs
  strictly (lazy compilation off): a signature seen once is not compiled;
* ``defer-off``: without ``--tf_xla_always_defer_compilation`` (clusters compile lazily again)
  — offered when it is set;
* ``move-out``: keep the shape computation out of the cluster — offered when a recompiling
  auto-cluster has a compile-time-constant argument that changes: the member ops that read
  the constants run outside the cluster (``tf.xla.experimental.jit_scope(compile_ops=False)``
  around them, or compute them before the ``tf.function``), so the constants leave the
  signature and those ops' outputs come in as ordinary arguments, keyed by their shapes.

``pad-to-max`` also says the fixed ``input_signature`` it allows.

Each suggestion reports the totals it would give (compiles, fallback executions, executions
that run compiled) next to the stream's own, per unit too. Padding changes what the model
computes: the padded positions must be masked; the suggestion says so.
"""

from __future__ import annotations

import re
from dataclasses import replace

from jitsim.runtime import policy as pol

_DIM = re.compile(r"^(.+)\.shape\[(\d+)\]$")


def _totals(results) -> dict:
    compiles = sum(r.policy.compile_count for r in results)
    fallbacks = sum(not e.compiled_run for r in results for e in r.policy.history)
    executions = sum(len(r.policy.history) for r in results)
    ran = sum(e.compiled_run for r in results for e in r.policy.history)
    return {"compiles": compiles, "fallbacks": fallbacks, "executions": executions, "ran_compiled": ran}


def _per_unit(results) -> list:
    return [{"name": r.unit.name, "signatures": len(set(r.signatures)), "compiles": r.policy.compile_count,
             "fallbacks": sum(not e.compiled_run for e in r.policy.history), "megamorphic_at_step": r.policy.megamorphic_at_step,
             "executions": len(r.policy.history), "ran_compiled": sum(e.compiled_run for e in r.policy.history)}
            for r in results]


def stream_values(res, steps) -> dict:
    """``{(input node, dim): [values in order of first appearance]}`` over the stream, and
    ``{("value of", input node): [...]}`` for stated integer values."""
    node_of = {}
    for spec in res.inputs:
        for n in (spec.name,) + spec.aliases:
            node_of[n] = spec.name
    seen: dict = {}
    for st in steps:
        for key, (shape, value) in st.entries.items():
            node = node_of.get(key)
            if node is None:
                continue
            for i, d in enumerate(shape):
                vals = seen.setdefault((node, i), [])
                if d not in vals:
                    vals.append(d)
            if value is not None:
                vals = seen.setdefault(("value of", node), [])
                v = tuple(value.reshape(-1).tolist())
                if v not in vals:
                    vals.append(v)
    return seen


def recompile_causes(res, steps) -> dict:
    """Per unit with more than one signature: each input dimension (or integer input's value)
    its signature follows that takes more than one value in the stream, with the count."""
    seen = stream_values(res, steps)
    out = {}
    for r in res.units:
        if len(set(r.signatures)) <= 1:
            continue
        causes = []
        for v in r.varies:
            for f in v["follows"]:
                m = _DIM.match(f)
                key = (m.group(1), int(m.group(2))) if m else ("value of", f.removeprefix("value of "))
                n = len(seen.get(key, ()))
                if n > 1 and not any(c["input"] == f for c in causes):
                    causes.append({"input": f, "distinct_values": n, "argument": v["arg"], "what": v["what"]})
            if v["data_dependent"]:
                causes.append({"input": None, "distinct_values": None, "argument": v["arg"], "what": v["what"],
                               "why": v["why"]})
        out[r.unit.name] = causes
    return out


def _followed_dims(res, steps) -> list[tuple[str, int]]:
    """Input dimensions some recompiling unit follows that vary in the stream."""
    out = []
    for causes in recompile_causes(res, steps).values():
        for c in causes:
            m = _DIM.match(c["input"] or "")
            if m and (m.group(1), int(m.group(2))) not in out:
                out.append((m.group(1), int(m.group(2))))
    return out


def _reshaped(steps, inputs, dims, new_size):
    """The stream with each followed dimension of each input replaced by ``new_size(...)``."""
    names = {}
    for spec in inputs:
        for n in (spec.name,) + spec.aliases:
            names[n] = spec.name
    out = []
    for st in steps:
        entries = {}
        for key, (shape, value) in st.entries.items():
            node = names.get(key)
            if node is not None and value is None:
                shape = tuple(new_size(node, i, d) if (node, i) in dims else d for i, d in enumerate(shape))
            entries[key] = (shape, value)
        out.append(replace(st, entries=entries))
    return out


def _next_pow2(n: int) -> int:
    p = 1
    while p < n:
        p *= 2
    return p


def suggestions(res, rerun, steps, move_out=None) -> list[dict]:
    """``rerun(steps, mode=None, changed=None)`` -> unit results for another stream, mode, or
    changed units (``{name: Unit}``); ``move_out(unit)`` -> the unit with its constant-reading
    ops outside it, or None."""
    base = _totals(res.units)
    out = []
    no_gain = []

    def add(name: str, what: str, results, caveat: str = ""):
        t = _totals(results)
        if t["compiles"] >= base["compiles"] and t["fallbacks"] >= base["fallbacks"]:
            no_gain.append(name)  # simulated on the stream: neither fewer compiles nor fewer fallbacks
            return
        out.append({"name": name, "what": what, "totals": t, "baseline": base, "units": _per_unit(results),
                    "caveat": caveat})

    dims = _followed_dims(res, steps)
    if dims:
        text = ", ".join(f"{n}.shape[{i}]" for n, i in dims)
        largest: dict = {}
        for st in _reshaped(steps, res.inputs, set(dims), lambda n, i, d: d):
            for key, (shape, value) in st.entries.items():
                for i, d in enumerate(shape):
                    largest[(key, i)] = max(largest.get((key, i), 0), d)
        node_of = {}
        for spec in res.inputs:
            for n in (spec.name,) + spec.aliases:
                node_of[n] = spec.name
        maxima: dict = {}
        for (key, i), d in largest.items():
            node = node_of.get(key)
            if node is not None:
                maxima[(node, i)] = max(maxima.get((node, i), 0), d)
        caveat = "padding changes what the model computes: mask the padded positions"
        add("bucket", f"pad {text} up to the next power of two",
            rerun(_reshaped(steps, res.inputs, set(dims), lambda n, i, d: _next_pow2(d))), caveat)
        fixed = []
        for spec in res.inputs:
            if spec.shape is not None and any(n == spec.name for n, _ in dims):
                shape = [maxima.get((spec.name, i), d) if (spec.name, i) in dims else d
                         for i, d in enumerate(spec.shape)]
                fixed.append(f"{spec.name}: [" + ", ".join("None" if d < 0 else str(d) for d in shape) + "]")
        add("pad-to-max", f"pad {text} to the largest value in the stream ("
            + ", ".join(f"{n}.shape[{i}]={maxima.get((n, i), '?')}" for n, i in dims) + ")",
            rerun(_reshaped(steps, res.inputs, set(dims), lambda n, i, d: maxima.get((n, i), d))),
            caveat + ("; the input_signature can then fix it (" + ", ".join(fixed) + ")" if fixed else ""))
    if move_out is not None:
        changed = {}
        for r in res.units:
            varying = {c["argument"] for c in r.recompiles_with}
            if any(a.kind == "constant" and a.name in varying for a in r.unit.args):
                u = move_out(r.unit)
                if u is not None:
                    changed[r.unit.name] = u
        results = rerun(steps, changed=changed) if changed else None
        # offered only where jitsim knows the moved ops' output shapes at every step
        if changed and not any(r.data_dependent for r in results if r.unit.name in changed):
            names = ", ".join(sorted(changed))
            add("move-out", f"keep the ops that compute {names}'s compile-time constants outside it (their outputs "
                "become ordinary arguments)", results, "those ops then run as TF ops, and the cluster may split")
    if any(r.unit.mode in (pol.LAZY, pol.ASYNC) for r in res.units):
        add("lazy-off", "TF_XLA_FLAGS=--tf_xla_enable_lazy_compilation=false: every new signature compiles at once",
            rerun(steps, pol.STRICT), "no fallback, but every new signature's compile time is paid")
    elif any(r.unit.kind == "auto" and r.unit.mode == pol.DEFERRED for r in res.units):
        add("defer-off", "drop --tf_xla_always_defer_compilation: clusters compile (lazily) again",
            rerun(steps, pol.LAZY), "")
    elif any(r.unit.kind == "auto" and r.unit.mode == pol.STRICT for r in res.units):
        add("lazy-on", "TF_XLA_FLAGS=--tf_xla_enable_lazy_compilation=true: a new signature compiles at its second "
            "request", rerun(steps, pol.LAZY), "signatures seen once run as TF ops instead of compiling")
    res.not_proposed = no_gain
    return out
