"""The run-time timeline as a picture: one row per compiled unit, one cell per execution.

Colours: compile (orange), ran an earlier compile (green), fell back to TF ops (grey); a red
line where the unit became megamorphic. Each cell's tooltip (an SVG ``<title>``) says the step,
the outcome, why (its reason code and in words), and the signature's request count. Plain SVG, no dependency.
"""

from __future__ import annotations

from html import escape

from jitsim.runtime import policy as pol

COLOURS = {pol.COMPILED: "#e8891d", pol.CACHED: "#3a9e4f", pol.FALLBACK: "#b9b9b9"}
LABELS = {pol.COMPILED: "compile", pol.CACHED: "ran an earlier compile", pol.FALLBACK: "fell back to TF ops"}


def timeline_svg(res, *, title: str = "") -> str:
    units = [r for r in res.units if r.policy is not None]
    n = max((len(r.policy.history) for r in units), default=0)
    cell = max(3, min(14, 900 // max(n, 1)))
    left = 8 + 7 * max((len(r.unit.name) for r in units), default=8)
    row, top = 22, 40
    width = left + cell * n + 20
    height = top + row * len(units) + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'font-family="sans-serif" font-size="12">',
           f'<text x="8" y="18" font-weight="bold">{escape(title)}</text>']
    for k, r in enumerate(units):
        y = top + k * row
        out.append(f'<text x="8" y="{y + 13}">{escape(r.unit.name)}</text>')
        for i, e in enumerate(r.policy.history):
            x = left + i * cell
            tip = f"{r.unit.name} step {e.step}: {LABELS[e.outcome]} ({e.code}: {e.reason}; request {e.request})"
            out.append(f'<rect x="{x}" y="{y}" width="{cell - 1}" height="{row - 6}" fill="{COLOURS[e.outcome]}">'
                       f'<title>{escape(tip)}</title></rect>')
            if e.became_megamorphic:
                out.append(f'<line x1="{x - 0.5}" y1="{y - 3}" x2="{x - 0.5}" y2="{y + row - 3}" stroke="#d0021b" '
                           f'stroke-width="2"><title>{escape(r.unit.name)} megamorphic from step {e.step}</title>'
                           '</line>')
    ly = top + row * len(units) + 18
    x = 8
    for outcome in (pol.COMPILED, pol.CACHED, pol.FALLBACK):
        out.append(f'<rect x="{x}" y="{ly - 10}" width="10" height="10" fill="{COLOURS[outcome]}"/>')
        out.append(f'<text x="{x + 14}" y="{ly}">{LABELS[outcome]}</text>')
        x += 30 + 7 * len(LABELS[outcome])
    out.append(f'<line x1="{x}" y1="{ly - 11}" x2="{x}" y2="{ly + 1}" stroke="#d0021b" stroke-width="2"/>')
    out.append(f'<text x="{x + 6}" y="{ly}">megamorphic from here</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
