"""Why a compiled unit recompiles: for each compile after the first, what changed.

TF keys a unit's compilation by its signature (``DeviceCompilationClusterSignature``: per
argument a compile-time constant's value, or a tensor's dtype and shape). A compile after the
first is a signature the cache did not have, so it differs from the signature of the compile
before it in at least one argument. :func:`recompiles` records, per such compile, each
differing argument as a change code, and traces the change back to the inputs of the call
whose stream entries changed between the two steps and that the argument follows (the static
answer, :attr:`~jitsim.runtime.simulate.UnitResult.varies`).

Change codes (``changes[].code``):

* ``ARG_SHAPE``: an ordinary argument's shape changed in some dimensions (``dims``: ``dim``,
  ``before``, ``after``);
* ``ARG_RANK``: an ordinary argument's rank changed;
* ``ARG_DTYPE``: its dtype changed;
* ``CONSTANT_VALUE``: a compile-time-constant argument's value changed (``before``, ``after``);
* ``CONSTANT_SHAPE``: a compile-time constant's shape changed (so did its value);
* ``RESOURCE_SHAPE``: a variable's dtype or shape changed;
* ``DATA_DEPENDENT``: jitsim cannot compute the argument (it depends on tensor contents) and
  takes it to be new at every step.

Input codes (``changes[].inputs[].code``): ``INPUT_DIM`` (an input's dimension, ``before`` and
``after``), ``INPUT_VALUE`` (an integer input's stated value), ``STATED_TENSOR`` (a graph
tensor's shape or value stated in the stream). ``traced`` is false when the static answer does
not connect the argument to any input that changed: every changed input is then listed.
"""

from __future__ import annotations

import re

from jitsim.runtime import policy as pol

ARG_SHAPE, ARG_RANK, ARG_DTYPE = "ARG_SHAPE", "ARG_RANK", "ARG_DTYPE"
CONSTANT_VALUE, CONSTANT_SHAPE = "CONSTANT_VALUE", "CONSTANT_SHAPE"
RESOURCE_SHAPE, DATA_DEPENDENT = "RESOURCE_SHAPE", "DATA_DEPENDENT"
INPUT_DIM, INPUT_VALUE, STATED_TENSOR = "INPUT_DIM", "INPUT_VALUE", "STATED_TENSOR"


def _values(vals) -> list:
    return list(vals)


def _arg_change(arg, a, b) -> dict | None:
    """The change from signature part ``a`` to ``b`` of ``arg`` (None: the same)."""
    if a == b:
        return None
    base = {"argument": arg.name, "position": arg.position, "kind": arg.kind}
    if a[0] == "unknown" or b[0] == "unknown":
        why = b[1] if b[0] == "unknown" else a[1]
        return {**base, "code": DATA_DEPENDENT, "why": why}
    if a[0] == "resource" or b[0] == "resource":
        return {**base, "code": RESOURCE_SHAPE, "before": list(a[2]), "after": list(b[2])}
    if a[0] == "constant" and b[0] == "constant":
        if a[2] != b[2]:
            return {**base, "code": CONSTANT_SHAPE, "before": _values(a[3]), "after": _values(b[3])}
        return {**base, "code": CONSTANT_VALUE, "before": _values(a[3]), "after": _values(b[3])}
    if a[1] != b[1]:
        return {**base, "code": ARG_DTYPE, "before": a[1], "after": b[1]}
    if len(a[2]) != len(b[2]):
        return {**base, "code": ARG_RANK, "before": list(a[2]), "after": list(b[2])}
    dims = [{"dim": i, "before": x, "after": y} for i, (x, y) in enumerate(zip(a[2], b[2])) if x != y]
    return {**base, "code": ARG_SHAPE, "dims": dims, "before": list(a[2]), "after": list(b[2])}


def _step_inputs(step, node_of: dict) -> dict:
    """``{"x.shape[1]": 17, "value of n": (3,), "Unique:1": ...}`` for one stream line."""
    out = {}
    for key, (shape, value) in step.entries.items():
        node = node_of.get(key)
        if node is None:  # a graph tensor stated in the stream
            out[f"{key} (stated)"] = (tuple(shape), None if value is None else tuple(value.reshape(-1).tolist()))
            continue
        for i, d in enumerate(shape):
            out[f"{node}.shape[{i}]"] = d
        if value is not None:
            out[f"value of {node}"] = tuple(value.reshape(-1).tolist())
    return out


def _input_change(name: str, before, after) -> dict:
    if name.endswith(" (stated)"):
        return {"code": STATED_TENSOR, "input": name.removesuffix(" (stated)"), "before": _plain(before),
                "after": _plain(after)}
    if name.startswith("value of "):
        return {"code": INPUT_VALUE, "input": name.removeprefix("value of "), "before": _plain(before),
                "after": _plain(after)}
    node, _, dim = name.rpartition(".shape[")
    return {"code": INPUT_DIM, "input": node, "dim": int(dim.rstrip("]")), "before": before, "after": after}


def _plain(v):
    if isinstance(v, tuple):
        return [_plain(x) for x in v]
    return v


def recompiles(r, steps, inputs) -> list[dict]:
    """Per compile of unit result ``r`` (in order): its step, policy code, and for every compile
    after the first, the argument changes against the previous compile's signature, traced to
    the stream's inputs (``steps``: the stream; ``inputs``: the call's InputSpecs)."""
    node_of = {}
    for spec in inputs:
        for n in (spec.name,) + spec.aliases:
            node_of[n] = spec.name
    by_step = {s.step: s for s in steps}
    follows: dict = {}  # arg position -> input names it follows
    for v in r.varies:
        follows.setdefault(v["position"], []).extend(v["follows"])
    args = {a.position: a for a in r.unit.args}
    out = []
    prev = None
    for e in r.policy.history:
        if e.outcome != pol.COMPILED:
            continue
        rec = {"compile": len(out) + 1, "step": e.step, "code": e.code}
        if prev is not None:
            rec["previous_step"] = prev.step
            a_in = _step_inputs(by_step[prev.step], node_of) if prev.step in by_step else {}
            b_in = _step_inputs(by_step[e.step], node_of) if e.step in by_step else {}
            changed_inputs = [k for k in b_in if a_in.get(k) != b_in[k]]
            changes = []
            for k, (pa, pb) in enumerate(zip(prev.signature, e.signature)):
                arg = args.get(k)
                if arg is None:
                    continue
                ch = _arg_change(arg, pa, pb)
                if ch is None:
                    continue
                want = follows.get(k, [])
                traced = [n for n in changed_inputs if n in want]
                ch["traced"] = bool(traced)
                ch["inputs"] = [_input_change(n, a_in.get(n), b_in[n]) for n in (traced or changed_inputs)]
                changes.append(ch)
            rec["changes"] = changes
            if prev.step == e.step:
                rec["same_step"] = True  # another call site (or the site's signature within a loop)
        out.append(rec)
        prev = e
    return out


def change_text(ch: dict) -> str:
    """One change for people: ``x_0_arg shape[1] 5 -> 6 (from x.shape[1] 5 -> 6)``."""
    code = ch["code"]
    if code == ARG_SHAPE:
        what = ", ".join(f"shape[{d['dim']}] {d['before']} -> {d['after']}" for d in ch["dims"])
    elif code in (CONSTANT_VALUE, CONSTANT_SHAPE):
        what = f"constant value {_short(ch['before'])} -> {_short(ch['after'])}"
    elif code == DATA_DEPENDENT:
        what = f"data-dependent ({ch['why']})"
    elif code == ARG_RANK:
        what = f"rank {len(ch['before'])} -> {len(ch['after'])}"
    else:
        what = f"{code.lower().replace('_', ' ')} {ch['before']} -> {ch['after']}"
    srcs = [input_text(i) for i in ch.get("inputs", [])]
    tail = ""
    if srcs:
        tail = (" (from " if ch.get("traced") else " (not traced; inputs that changed: ") + ", ".join(srcs) + ")"
    return f"{ch['argument']} {what}{tail}"


def input_text(i: dict) -> str:
    if i["code"] == INPUT_DIM:
        return f"{i['input']}.shape[{i['dim']}] {i['before']} -> {i['after']}"
    if i["code"] == INPUT_VALUE:
        return f"value of {i['input']} {_short(i['before'])} -> {_short(i['after'])}"
    return f"{i['input']} {i['before']} -> {i['after']}"


def _short(v, limit: int = 8) -> str:
    if isinstance(v, list) and len(v) > limit:
        return "[" + ", ".join(map(str, v[:limit])) + f", ... ({len(v)} values)]"
    return str(v)


SCHEMA = "jitsim.recompile/1"


def find_unit(res, text: str):
    """The unit result ``text`` names: a unit's exact name, its function's, or a member node's;
    else the one unit whose name contains ``text`` or matches it as a regex. Raises KeyError
    with the problem."""
    for r in res.units:
        if text in (r.unit.name, r.unit.function):
            return r
    for r in res.units:
        if text in r.unit.nodes:
            return r
    try:
        rx = re.compile(text)
    except re.error:
        rx = None
    hits = [r for r in res.units if any(text in n or (rx is not None and rx.search(n))
                                        for n in (r.unit.name, r.unit.function))]
    names = ", ".join(r.unit.name for r in res.units) or "none: nothing is compiled at run time"
    if len(hits) == 1:
        return hits[0]
    if not hits:
        raise KeyError(f"{text!r} names no compiled unit (a cluster, a jit_compile call, or a node in one); "
                       f"units: {names}")
    raise KeyError(f"{text!r} matches {len(hits)} compiled units: {', '.join(r.unit.name for r in hits)}")


def explain(res, r) -> dict:
    """Why unit result ``r`` of ``res`` (a run with a stream) recompiles: its compiles with the
    changes that caused them, what its signature follows, and each suggestion's simulated
    numbers for this unit (before -> after)."""
    p = r.policy
    d = r.to_dict()
    now = {"compiles": p.compile_count, "fallbacks": len(d["fallback_steps"]), "executions": len(p.history),
           "ran_compiled": len(d["compiled_steps"]), "megamorphic_at_step": p.megamorphic_at_step}
    sugg, not_proposed = [], list(res.not_proposed)
    for sg in res.suggestions:
        after = next((u for u in sg["units"] if u["name"] == r.unit.name), None)
        if after is None:
            continue
        if after["compiles"] >= now["compiles"] and after["fallbacks"] >= now["fallbacks"]:
            not_proposed.append(sg["name"])  # it helps other units, not this one
            continue
        sugg.append({"name": sg["name"], "what": sg["what"], "caveat": sg["caveat"], "before": now,
                     "after": {k: after[k] for k in ("compiles", "fallbacks", "executions", "ran_compiled",
                                                     "megamorphic_at_step")}})
    return {"schema": SCHEMA, "steps": res.steps,
            "unit": {k: d[k] for k in ("name", "kind", "function", "mode", "mode_reason", "loop_frame", "compiles",
                                       "compile_steps", "megamorphic_at_step", "fallback_steps")},
            "compiled_steps": d["compiled_steps"],
            "signatures": len(d["signatures"]), "follows": list(r.recompiles_with), "recompiles": list(r.recompiles),
            "suggestions": sugg, "not_proposed": not_proposed, "notes": [n for n in res.notes if n.startswith(r.unit.name + ":")
                                           or f" {r.unit.name} " in n]}
