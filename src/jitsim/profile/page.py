"""``index.html`` of ``jitsim profile``: the summary as a page (step times, the cluster table,
the two timelines, XLA's HLO graphs, links to the traces and HLO text). Static: no script,
every value escaped; pictures and traces are files beside it."""

from __future__ import annotations

from html import escape


def _ms(s) -> str:
    return "–" if s is None else f"{s * 1000:.3f} ms"


def _link(href: str | None, text: str) -> str:
    return escape(text) if not href else f'<a href="{escape(href, quote=True)}">{escape(text)}</a>'


def breakable(text: str) -> str:
    """``text`` escaped, with a line-break opportunity (``<wbr>``) after each ``_``, ``.``, ``/``
    and ``:``: long HLO module and node names wrap between their parts, never inside a word."""
    out = escape(text)
    for sep in ("_", ".", "/", ":"):
        out = out.replace(sep, sep + "<wbr>")
    return out


def _ops(hist: dict) -> str:
    return ", ".join(f"{op}×{n}" if n > 1 else op for op, n in hist.items())


def render_page(summary: dict, mismatches: str | None) -> str:
    s = summary
    st = s["step_time"]
    ratio = s["step_time_ratio"]
    head = (f"<tr><th></th><th>XLA off</th><th>XLA on</th></tr>"
            f"<tr><th>median step time</th><td>{_ms(st['off']['median_s'])}</td><td>{_ms(st['on']['median_s'])}</td></tr>"
            f"<tr><th>spread (IQR; min–max)</th><td>{_ms(st['off']['iqr_s'])}; {_ms(st['off']['min_s'])}–"
            f"{_ms(st['off']['max_s'])}</td><td>{_ms(st['on']['iqr_s'])}; {_ms(st['on']['min_s'])}–"
            f"{_ms(st['on']['max_s'])}</td></tr>"
            f"<tr><th>first step (warm-up)</th><td>{_ms(s['first_step_s']['off'])}</td>"
            f"<td>{_ms(s['first_step_s']['on'])}</td></tr>"
            f"<tr><th>TF op executions per step</th><td>{s['tf_ops_per_step']['off']}</td>"
            f"<td>{s['tf_ops_per_step']['on']}</td></tr>"
            f"<tr><th>XLA launches per step</th><td>{s['xla_launches_per_step']['off']}</td>"
            f"<td>{s['xla_launches_per_step']['on']}</td></tr>"
            f"<tr><th>trace (one step)</th><td>{_link(s['traces']['off'], s['traces']['off'])}</td>"
            f"<td>{_link(s['traces']['on'], s['traces']['on'])}</td></tr>")
    rows = []
    for c in s["clusters"]:
        f = c.get("hlo_files") or {}
        href = f.get("after_txt") or f.get("before_txt")
        hlo = breakable(c["hlo_module"] or "–")
        hlo = f'<a href="{escape(href, quote=True)}">{hlo}</a>' if href else hlo
        rows.append(f'<tr class="cluster" data-cluster="{escape(c["cluster"], quote=True)}">'
                    f"<td>{escape(c['cluster'])}</td><td>{escape(_ops(c['tf_ops']))}</td>"
                    f"<td>{escape(str(c['predicted_cluster'] or '–'))} ({escape(c['prediction'])})</td>"
                    f"<td class='hlo'>{hlo}</td><td>{'–' if c['fusions'] is None else c['fusions']}</td>"
                    f"<td>{c['launches_per_step']}</td><td>{c['time_per_step_us']:.1f} µs</td></tr>")
    table = ("<table id='clusters'><tr><th>cluster (TF)</th><th>TF ops in it</th><th>jitsim's prediction</th>"
             "<th>HLO module</th><th>fusions (optimised HLO)</th><th>launches / step</th><th>time / step</th></tr>"
             + ("".join(rows) or "<tr><td colspan='7'>TF compiled no auto-clustered cluster</td></tr>")
             + "</table>")
    pics = []
    for m in s["hlo_modules"]:
        f = m["files"]
        for stage in ("before", "after"):
            svg = f.get(f"{stage}_svg")
            if svg:
                pics.append(f"<figure><a href='{escape(svg, quote=True)}'><img class='hlo' src='{escape(svg, quote=True)}' "
                            f"alt='{escape(m['module'], quote=True)} {stage}'></a><figcaption>"
                            f"{escape(m['module'])}, {stage} optimisation "
                            f"({_link(f.get(stage + '_txt'), 'HLO text')})</figcaption></figure>")
        for note in m["notes"]:
            pics.append(f"<p>{escape(m['module'])}: {escape(note)}</p>")
    # <object>, not <img>: a browser shows an SVG's <title> tooltips only in an embedded document
    timelines = "".join(
        f"<figure><object class='timeline' type='image/svg+xml' data='{escape(s['timelines'][k], quote=True)}'>"
        f"timeline XLA {k}</object><figcaption>one step, XLA {k}: hover an event for its node, op and "
        f"times; {_link(s['traces'][k], 'the trace')} opens in Perfetto or chrome://tracing</figcaption></figure>"
        for k in ("off", "on"))
    xspace = s.get("xspace") or {}
    xprof = ""
    if any(xspace.values()):
        runs = ", ".join(f"<code>plugins/profile/xla_{escape(k)}/</code>" for k, v in xspace.items() if v)
        xprof = (f"<p id='xprof'>TF's own profiles (XSpace) of both runs are kept in the layout xprof and "
                 f"TensorBoard's profile plugin read ({runs}): <code>xprof --logdir DIR</code> or "
                 "<code>tensorboard --logdir DIR</code> (DIR: this page's directory), Profile tab; see "
                 "<a href='https://github.com/openxla/xprof'>xprof</a>.</p>")
    eff = s.get("tf_xla_flags_effective") or s["tf_xla_flags"]
    notes = "".join(f"<li>{escape(n)}</li>" for n in s["notes"])
    ratio_text = "–" if ratio is None else f"{ratio:.2f}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>jitsim profile: {escape(s['target'])}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
table {{ border-collapse: collapse; margin: .5em 0 1.5em; }}
td, th {{ border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }}
td, th, code {{ overflow-wrap: normal; word-break: keep-all; }}
td.hlo {{ max-width: 24em; }}
img.hlo {{ max-width: 100%; max-height: 600px; border: 1px solid #ddd; }}
object.timeline {{ width: 100%; max-width: 1100px; border: 1px solid #ddd; }}
pre {{ background: #f6f6f6; padding: .5em; overflow-x: auto; }}
</style></head><body>
<h1>jitsim profile</h1>
<p id="target">{escape(s['target'])} ({escape(s['kind'])}), TF {escape(str(s['tf_version']))}, device {escape(s['device'])};
{s['steps']} timed steps after {s['warmup']} warm-up steps.
TF_XLA_FLAGS in force (later flags win, as in TF), XLA off: <code id="flags-off">{escape(eff['off'])}</code>;
XLA on: <code id="flags-on">{escape(eff['on'])}</code></p>
<p>step time ratio (off / on): <b id="ratio">{ratio_text}</b>; one-off XLA compile time
{_ms(s['compile_s'])} ({s['compilations']} HLO modules compiled).</p>
<table id="steps">{head}</table>
<h2>Clusters: TF ↔ jitsim ↔ HLO ↔ trace</h2>
{table}
<h2>Prediction vs what ran</h2>
<pre id="mismatches">{escape(mismatches or 'no prediction')}</pre>
<h2>Timelines</h2>
{timelines}
{xprof}
<h2>XLA's HLO</h2>
{''.join(pics) or '<p>no HLO module was dumped</p>'}
{f'<h2>Notes</h2><ul>{notes}</ul>' if notes else ''}
</body></html>
"""
