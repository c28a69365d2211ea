"""``jitsim runtime``'s text output: a table per run and a timeline per compiled unit."""

from __future__ import annotations

from jitsim.runtime import policy as pol
from jitsim.runtime import recompile

TIMELINE_MAX = 120  # steps drawn one character each
MARKS = {pol.COMPILED: "C", pol.CACHED: "·", pol.FALLBACK: "f"}
ASYNC_MARK = "c"  # an async compile queued: the execution itself fell back
LISTED = 8  # explain --shapes: compiles listed one per line (``--all``: every one)


def ranges(steps) -> str:
    """``[0, 41, 42, 43, 50]`` -> ``"0, 41-43, 50"``."""
    if not steps:
        return "-"
    out, start, prev = [], steps[0], steps[0]
    for s in steps[1:]:
        if s == prev + 1:
            prev = s
            continue
        out.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = s
    out.append(str(start) if start == prev else f"{start}-{prev}")
    return ", ".join(out)


def timeline(p: pol.ClusterPolicy) -> str:
    """One character per step: C compile, · ran an earlier compile, f fallback (TF ops);
    the step that makes the cluster megamorphic is marked ``|`` before it."""
    out = []
    for e in p.history:
        if e.became_megamorphic:
            out.append("|")
        out.append(ASYNC_MARK if e.outcome == pol.COMPILED and not e.compiled_run else MARKS[e.outcome])
    return "".join(out)


def print_result(con, res, *, source: str) -> None:
    from rich.table import Table

    from jitsim.runtime.simulate import recompiles_per

    if not res.units:
        con.print(f"{source}: no compiled clusters and no jit_compile calls: nothing is compiled at run time")
        return
    if res.steps is None:
        t = Table(title=f"{source}: what can change a cluster's signature (static; give --shapes for the steps)",
                  title_justify="left")
        for col in ("cluster", "kind", "argument", "varies", "follows"):
            t.add_column(col)
        for r in res.units:
            u = r.unit
            if not r.varies:
                t.add_row(u.name, _kind(u), "-", "nothing", "compiles once")
            for i, v in enumerate(r.varies):
                follows = ", ".join(v["follows"]) if v["follows"] else (
                    "data-dependent: " + v["why"] if v["data_dependent"] else "?")
                t.add_row(u.name if i == 0 else "", _kind(u) if i == 0 else "",
                          v["arg"], v["what"], follows)
        con.print(t)
        for r in res.units:
            per = recompiles_per(r)
            dd = any(v["data_dependent"] for v in r.varies)
            if dd:
                con.print(f"{r.unit.name}: an argument depends on tensor contents: a new signature (compile or "
                          "fallback) can come at any step")
            elif per:
                con.print(f"{r.unit.name}: compiles once per distinct {' × '.join(per)}")
        _print_policy(con, res)
        _print_notes(con, res)
        return
    t = Table(title=f"{source}: {res.steps} steps", title_justify="left")
    t.add_column("cluster (kind/mode)", overflow="fold")
    for col in ("sigs", "compiles", "megamorphic", "fallbacks", "compiled/runs"):
        t.add_column(col, justify="right", no_wrap=True)
    for r in res.units:
        p = r.policy
        d = r.to_dict()
        t.add_row(f"{r.unit.name} ({_kind(r.unit)})", str(len(d["signatures"])), str(p.compile_count),
                  "-" if p.megamorphic_at_step is None else f"step {p.megamorphic_at_step}",
                  str(len(d["fallback_steps"])), f"{len(d['compiled_steps'])}/{len(p.history)}")
    con.print(t)
    if res.steps <= TIMELINE_MAX:
        con.print("timeline (C compile, · ran an earlier compile, f fell back to TF ops, | megamorphic from here):")
        width = max(len(r.unit.name) for r in res.units)
        for r in res.units:
            con.print(f"  {r.unit.name:<{width}}  {timeline(r.policy)}", markup=False, highlight=False)
    for r in res.units:
        fb = [e.step for e in r.policy.history if not e.compiled_run]
        con.print(f"{r.unit.name}: compiles at steps {ranges(r.policy.steps(pol.COMPILED))}"
                  + (f"; falls back to TF ops at steps {ranges(fb)}" if fb else ""), highlight=False)
    for r in res.units:
        causes = [c for c in r.recompiles_with if c["input"]]
        if causes:
            con.print(f"{r.unit.name} recompiles with " + ", ".join(
                f"{c['input']} ({c['distinct_values']} values in the stream; argument {c['argument']} {c['what']})"
                for c in causes), highlight=False)
    if res.suggestions:
        con.print("what would change it (each simulated on this stream):", highlight=False)
        for sg in res.suggestions:
            t, b = sg["totals"], sg["baseline"]
            con.print(f"  {sg['name']}: {sg['what']}: {t['compiles']} compiles (now {b['compiles']}), "
                      f"{t['fallbacks']} fallbacks (now {b['fallbacks']}), {t['ran_compiled']}/{t['executions']} "
                      f"executions compiled (now {b['ran_compiled']})" + (f"; {sg['caveat']}" if sg["caveat"] else ""),
                      highlight=False)
    if res.not_proposed:
        con.print(f"not proposed (simulated on this stream: no fewer compiles or fallbacks): "
                  f"{', '.join(res.not_proposed)}", highlight=False)
    _print_policy(con, res)
    _print_notes(con, res)


def _kind(u) -> str:
    return f"{'jit_compile' if u.kind == 'must-compile' else u.kind}/{u.mode}"


def _print_policy(con, res) -> None:
    modes = {r.unit.mode for r in res.units if r.unit.kind == "auto"}
    if pol.LAZY in modes:
        con.print("lazy compilation: a new signature runs as TF ops on its first request and compiles on its second "
                  "(--tf_xla_enable_lazy_compilation=false compiles at once); more than "
                  f"{pol.COMPILE_THRESHOLD} compiles with fewer than {pol.MIN_EXECUTIONS_PER_COMPILE} executions "
                  "per compile make a cluster megamorphic: new signatures then always fall back", highlight=False)
    if any(r.unit.kind == "must-compile" for r in res.units):
        con.print("must-compile (jit_compile=True) calls compile every new signature at once and never fall back",
                  highlight=False)


def _print_notes(con, res) -> None:
    for n in res.notes:
        con.print(f"note: {n}", markup=False, highlight=False)


def print_check(con, check: dict) -> None:
    """``--check-with-tf``: jitsim against TF's log, unit by unit."""
    con.print("against TensorFlow (its log of this stream): " + ("identical" if check["identical"] else "DIFFERENT"),
              highlight=False)
    for u in check["units"]:
        line = f"  {u['name']} (TF: {u['tf_function'] or '-'}): {'identical' if u['identical'] else 'different'}"
        diffs = [f"{f}: jitsim {v['jitsim']} TF {v['tf']}" for f, v in u["fields"].items() if v["jitsim"] != v["tf"]]
        if u.get("note"):
            diffs.append(u["note"])
        con.print(line + ("; " + "; ".join(diffs) if diffs else ""), markup=False, highlight=False)
    for fn in check["unmatched_tf"]:
        fields = check.get("unmatched_tf_units", {}).get(fn, {})
        numbers = ", ".join(f"{f} {v}" for f, v in fields.items())
        con.print(f"  TF compiled {fn}, which jitsim did not predict" + (f" ({numbers})" if numbers else ""),
                  markup=False, highlight=False)


_CODE_TEXT = {
    pol.FIRST_EXECUTION: "the unit's first execution",
    pol.SECOND_REQUEST: "lazy compilation: the signature's second request",
    pol.STRICT_NEW_SIGNATURE: "a new signature (strict: compiled at once)",
    pol.ASYNC_QUEUED: "a new signature (async: compile queued)",
}


def format_recompiles(doc: dict, *, all_compiles: bool = False) -> str:
    """``explain UNIT --shapes``'s text: ``doc`` (:func:`jitsim.runtime.recompile.explain`) for
    people; the answer first."""
    u = doc["unit"]
    lines = []
    n = u["compiles"]
    mega = "" if u["megamorphic_at_step"] is None else f"; megamorphic at step {u['megamorphic_at_step']}"
    fb = u["fallback_steps"]
    head = (f"{u['name']} ({u['kind']}, {u['mode']}) compiles {n} time{'s' if n != 1 else ''} over {doc['steps']} "
            f"steps, at steps {ranges(u['compile_steps'])}{mega}"
            + (f"; {len(fb)} of {len(u['fallback_steps']) + len(doc['compiled_steps'])} executions fall back to TF ops"
               if fb else ""))
    causes = [c for c in doc["follows"] if c.get("input")]
    dd = [c for c in doc["follows"] if not c.get("input")]
    if n <= 1 and doc["signatures"] <= 1:
        lines.append(head + ": its signature is the same at every step, so it never recompiles")
    else:
        why = []
        if causes:
            why.append("its signature follows " + ", ".join(f"{c['input']} ({c['distinct_values']} values in the "
                                                             "stream)" for c in causes))
        if dd:
            why.append("argument(s) " + ", ".join(c["argument"] for c in dd) + " depend on tensor contents "
                       "(taken to change every step)")
        lines.append(head + (": " + "; ".join(why) if why else ""))
    recs = doc["recompiles"]
    shown = recs if all_compiles or len(recs) <= LISTED + 1 else recs[:LISTED]
    for rec in shown:
        text = f"  compile {rec['compile']} at step {rec['step']}: {rec['code']} ({_CODE_TEXT.get(rec['code'], '')})"
        if "changes" in rec:
            prev = f"compile {rec['compile'] - 1} (step {rec['previous_step']})"
            if rec["changes"]:
                text += f"; changed since {prev}: " + "; ".join(recompile.change_text(c) for c in rec["changes"])
            else:
                text += f"; same arguments as {prev} at another call site"
        lines.append(text)
    if len(shown) < len(recs):
        lines.append(f"  ... {len(recs) - len(shown)} more compiles (--all lists every one)")
    if doc["suggestions"]:
        lines.append(f"what would change it (each simulated on this stream; {u['name']}: before -> after):")
        for sg in doc["suggestions"]:
            b, a = sg["before"], sg["after"]
            mm = ""
            if a["megamorphic_at_step"] != b["megamorphic_at_step"]:
                mm = (f", megamorphic {'-' if b['megamorphic_at_step'] is None else 'step ' + str(b['megamorphic_at_step'])}"
                      f" -> {'-' if a['megamorphic_at_step'] is None else 'step ' + str(a['megamorphic_at_step'])}")
            lines.append(f"  {sg['name']}: {sg['what']}: compiles {b['compiles']} -> {a['compiles']}, fallbacks "
                         f"{b['fallbacks']} -> {a['fallbacks']}, ran compiled {b['ran_compiled']}/{b['executions']} -> "
                         f"{a['ran_compiled']}/{a['executions']}{mm}" + (f"; {sg['caveat']}" if sg["caveat"] else ""))
    if doc.get("not_proposed"):
        lines.append(f"not proposed (simulated on this stream: no fewer compiles or fallbacks for {u['name']}): "
                     f"{', '.join(doc['not_proposed'])}")
    for note in doc["notes"]:
        lines.append(f"note: {note}")
    return "\n".join(lines)
