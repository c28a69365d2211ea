"""A Chrome trace drawn as an SVG timeline: one lane per thread, nested events stacked,
TF ops blue, XLA launches red, the HLO instructions XLA ran orange, the rest grey; every
event has a tooltip (an SVG ``<title>``: name, TF node and op, HLO module, start and duration).
For ``index.html`` (embedded as an ``<object>``, so that the tooltips show) and the docs; the
trace itself opens in chrome://tracing or Perfetto."""

from __future__ import annotations

from html import escape

from jitsim.profile import trace as tr

WIDTH = 1100
LEFT = 150
ROW = 16
COLOURS = {"launch": "#d62728", "compile": "#9467bd", "hlo": "#ff9f1c", "op": "#1f77b4", "other": "#c7c7c7"}


def _kind(e: dict) -> str:
    args = e.get("args") if isinstance(e.get("args"), dict) else {}
    if args.get("hlo_module"):
        return "hlo"
    long_name = str(args.get("long_name", ""))
    if ":" in long_name:
        op = long_name.rpartition(":")[2]
        if op in tr.XLA_LAUNCH_OPS:
            return "launch"
        if op in tr.XLA_COMPILE_OPS:
            return "compile"
        return "op"
    return "other"


def _lanes(events: list[dict]) -> list[tuple[str, list[tuple[dict, int]]]]:
    names: dict[tuple, str] = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e.get("pid"), e.get("tid"))] = str(e.get("args", {}).get("name", ""))
    by: dict[tuple, list[dict]] = {}
    for e in events:
        if e.get("ph") == "X" and "ts" in e and not str(e.get("name", "")).startswith("end: "):
            by.setdefault((e.get("pid"), e.get("tid")), []).append(e)
    lanes = []
    for key, evs in sorted(by.items(), key=lambda kv: min(float(e["ts"]) for e in kv[1])):
        evs.sort(key=lambda e: (float(e["ts"]), -float(e.get("dur", 0))))
        stack: list[float] = []
        placed = []
        for e in evs:
            start, end = float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))
            while stack and stack[-1] <= start:
                stack.pop()
            placed.append((e, len(stack)))
            stack.append(end)
        lanes.append((names.get(key, f"thread {key[1]}"), placed))
    return lanes


def tooltip(e: dict, t0: float) -> str:
    """The event's tooltip (the SVG ``<title>`` a browser shows on hover): its name, the TF node
    and op it ran for, the HLO module, and when and how long it ran in the step."""
    args = e.get("args") if isinstance(e.get("args"), dict) else {}
    lines = [str(e.get("name", ""))]
    if args.get("long_name") and str(args["long_name"]) != lines[0]:
        lines.append(f"TF node:op {args['long_name']}")
    if args.get("hlo_module"):
        lines.append(f"HLO module {args['hlo_module']}")
    if args.get("hlo_op"):
        lines.append(f"HLO op {args['hlo_op']}")
    lines.append(f"start +{float(e['ts']) - t0:.1f} µs, duration {float(e.get('dur', 0)):.1f} µs")
    return "\n".join(lines)


def timeline_svg(trace: dict, title: str) -> str:
    """The SVG text of ``trace``'s timeline."""
    events = trace["traceEvents"]
    lanes = _lanes(events)
    spans = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for _, placed in lanes for e, _ in placed]
    t0 = min((s for s, _ in spans), default=0.0)
    t1 = max((e for _, e in spans), default=1.0)
    scale = (WIDTH - LEFT - 10) / max(t1 - t0, 1e-9)
    parts, y = [], 40
    for name, placed in lanes:
        depth = max((d for _, d in placed), default=0) + 1
        parts.append(f'<text x="4" y="{y + 12}" class="lane">{escape(name[:22])}</text>')
        for e, d in placed:
            x = LEFT + (float(e["ts"]) - t0) * scale
            w = max(float(e.get("dur", 0)) * scale, 0.8)
            kind = _kind(e)
            label = escape(str(e.get("name", "")))
            parts.append(f'<g class="ev {kind}"><title>{escape(tooltip(e, t0))}</title>'
                         f'<rect x="{x:.1f}" y="{y + d * ROW}" width="{w:.1f}" height="{ROW - 2}" '
                         f'fill="{COLOURS[kind]}"/>')
            if w > 7 * len(label) * 0.6 + 4:
                parts.append(f'<text x="{x + 2:.1f}" y="{y + d * ROW + 11}" class="ev">{label}</text>')
            parts.append("</g>")
        y += depth * ROW + 10
    axis = []
    for i in range(6):
        t = (t1 - t0) * i / 5
        x = LEFT + t * scale
        axis.append(f'<line x1="{x:.1f}" y1="28" x2="{x:.1f}" y2="{y}" stroke="#eee"/>'
                    f'<text x="{x:.1f}" y="26" class="axis">{t:.0f} µs</text>')
    legend = " ".join(f'<tspan fill="{COLOURS[k]}">■</tspan> {k}' for k in ("op", "launch", "compile", "hlo"))
    height = y + 10
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
            f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif">'
            '<style>text{font-size:10px} .lane{font-size:11px} .axis{fill:#666}'
            ' text.ev{fill:#fff;pointer-events:none}</style>'
            f'<rect width="100%" height="100%" fill="#fff"/>'
            f'<text x="4" y="14" font-size="13" font-weight="bold">{escape(title)}</text>'
            f'<text x="{WIDTH - 330}" y="14" font-size="11">{legend}</text>'
            + "".join(axis) + "".join(parts) + "</svg>\n")
