"""jitsim's run-time prediction against TF's measured log, compiled unit by compiled unit.

Units are matched by function name: an auto-cluster's function is its cluster name; a
must-compile call's is the ``tf.function``'s instantiated name (``__inference_<name>_<uid>``),
whose uid depends on how many functions the process traced before, so it is matched without
the uid when the exact name is not found. Compared per unit: ``compiles``, ``compile_steps``,
``fallback_steps``, ``megamorphic_at_step`` and the number of distinct signatures.
"""

from __future__ import annotations

import re

FIELDS = ("compiles", "compile_steps", "fallback_steps", "megamorphic_at_step", "distinct_signatures")


def _stem(fn: str) -> str:
    return re.sub(r"_\d+$", "", fn)


def compare(predicted: dict, measured: dict) -> dict:
    """``predicted``: :meth:`RuntimeResult.to_dict`; ``measured``: :func:`tflog.parse_log`.
    Returns ``{"identical": bool, "units": [{"name", "tf_function", "identical", "fields":
    {field: {"jitsim": .., "tf": ..}}}], "unmatched_tf": [function...], "unmatched_tf_units":
    {function: {field: TF's value}}}`` (a unit TF compiled that jitsim did not predict, with
    TF's numbers)."""
    left = dict(measured)
    rows = []
    for u in predicted["clusters"]:
        fn = u["function"]
        tf_fn = fn if fn in left else next((k for k in left if _stem(k) == _stem(fn) and k.startswith("__")), None)
        m = left.pop(tf_fn, None) if tf_fn else None
        row = {"name": u["name"], "kind": u["kind"], "tf_function": tf_fn, "fields": {}}
        if m is None and u.get("mode") == "deferred":
            # --tf_xla_always_defer_compilation: _XlaCompile returns before the compiler, so TF's
            # profiler and cache log nothing; what the log can show is that nothing compiled
            for f, v in (("compiles", 0), ("compile_steps", []), ("megamorphic_at_step", None)):
                row["fields"][f] = {"jitsim": u[f], "tf": v}
            row["identical"] = all(x["jitsim"] == x["tf"] for x in row["fields"].values())
            row["note"] = "always-defer: TF logs no compile, cache or megamorphic line (its fallbacks are not logged)"
            rows.append(row)
            continue
        if m is None:
            ran = bool(u["compile_steps"] or u["fallback_steps"] or u["compiled_steps"])
            row["identical"] = not ran
            row["note"] = "TF logged no execution of this unit" + ("" if not ran else "; jitsim predicted some")
            rows.append(row)
            continue
        ok = True
        for f in FIELDS:
            a = len(u["signatures"]) if f == "distinct_signatures" else u[f]
            b = len(m["signatures"]) if f == "distinct_signatures" else m[f]
            row["fields"][f] = {"jitsim": a, "tf": b}
            ok = ok and a == b
        row["identical"] = ok
        rows.append(row)
    unmatched = sorted(left)
    # what TF logged of a unit jitsim did not predict, with its numbers (not only its name)
    tf_only = {fn: {f: (len(left[fn]["signatures"]) if f == "distinct_signatures" else left[fn][f]) for f in FIELDS}
               for fn in unmatched}
    return {"identical": all(r["identical"] for r in rows) and not unmatched, "units": rows,
            "unmatched_tf": unmatched, "unmatched_tf_units": tf_only}
