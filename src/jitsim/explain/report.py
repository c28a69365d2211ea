"""A self-contained HTML report of one clustering (``jitsim report GRAPH -o DIR``).

``DIR/index.html`` holds everything inline (CSS, JS, data, picture; no network access):
the summary, a table of the clusters, the unclustered nodes grouped by reason code with
the catalogue's text for each code, a search by node name (exact name, substring or regex
as ``jitsim explain`` takes them; ``code:``, ``cluster:`` and ``op:`` filters) showing the
node's explanation, the text ``jitsim explain`` prints, and the picture of
:mod:`jitsim.explain.render` when graphviz's ``dot`` is installed.

Explanations are precomputed for every node with :meth:`Clustering.explain` itself; what
the members of a cluster or contraction group share (op summary, refused merges) is
computed once per cluster/group and stored once in the page, so a 30k-node graph takes
seconds and its page stays a few MB.

Stable element ids (tests, scripts): ``#summary``, ``#clusters``, ``#reasons`` (rows
``#reason-CODE``), ``#search``, ``#results``, ``#explanation``, ``#graph`` (SVG node ``n<i>``
is the i-th node of ``Clustering.nodes``; ``#node=NAME`` in the URL opens a node).
"""

from __future__ import annotations

import html
import json
import re
import jitsim
from collections import Counter
from pathlib import Path
from urllib.parse import quote

from jitsim.errors import JitsimError
from jitsim.explain.reasons import REASONS
from jitsim.explain.summary import op_summary
from jitsim.words import count

RESULTS_SHOWN = 200  # search results listed
NAMES_PER_REASON = 12  # node names listed per reason code in the unclustered table


def _e(s) -> str:
    return html.escape(str(s), quote=True)


# -- explanations ---------------------------------------------------------------------------


def explanations(c):
    """Yield ``(name, text)`` for every node in ``c.nodes`` order: exactly
    ``str(c.explain(name))`` (linear in the graph: explanations compute what a cluster's
    members share once)."""
    for name in c.nodes:
        yield name, str(c.explain(name))


def _data(c) -> dict:
    """What the page's script needs: the nodes, and the text chunks their explanations
    are made of (interned: what a cluster's or a group's members share is stored once).
    A node's explanation is ``name + chunks[head]`` (``chunks[head]`` alone when
    ``node[6]`` is 0), then a newline and ``chunks[rest]`` when there is a rest."""
    chunks: list[str] = []
    index: dict[str, int] = {}

    def intern(s: str) -> int:
        i = index.get(s)
        if i is None:
            i = index[s] = len(chunks)
            chunks.append(s)
        return i

    clusters = list(c.clusters)
    cl_index = {n: i for i, n in enumerate(clusters)}
    codes: list[str] = []
    code_index: dict[str, int] = {}
    nodes = []
    for name, text in explanations(c):
        rec = c.nodes[name]
        ci = code_index.get(rec.code)
        if ci is None:
            ci = code_index[rec.code] = len(codes)
            codes.append(rec.code)
        first, nl, rest = text.partition("\n")
        named = int(first.startswith(name))
        nodes.append([name, rec.op, cl_index.get(rec.cluster, -1), ci, intern(first[len(name):] if named else first),
                      intern(rest) if nl else -1, named])
    return {"clusters": clusters, "codes": codes, "chunks": chunks, "nodes": nodes, "results_shown": RESULTS_SHOWN}


def _json_script(obj) -> str:
    """JSON safe inside <script>: no '<', '>' or '&' can end the element or start a comment."""
    s = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return (s.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


# -- page parts -----------------------------------------------------------------------------


def _wrap(s) -> str:
    """``s`` escaped, with a line-break opportunity (``<wbr>``) after each ``/``, ``_``, ``.`` and
    ``:``: long node names and paths wrap between their parts, never inside a word (the page's CSS
    forbids breaks inside words: ``word-break: keep-all; overflow-wrap: normal``)."""
    out = _e(s)
    for sep in ("/", "_", ".", ":"):
        out = out.replace(sep, sep + "<wbr>")
    return out


def _code(code: str) -> str:
    """A reason code: never broken, linked to its row of this page where it has one."""
    return f'<code class="rc">{_e(code)}</code>'


_FLAG = re.compile(r"--tf_xla_[A-Za-z0-9_]+(?:=[^\s,;)]+)?")


def _flags_as_code(text: str) -> str:
    """``text`` escaped, each TF_XLA_FLAGS flag in it as an unbreakable ``<code>``."""
    out, pos = [], 0
    for m in _FLAG.finditer(text):
        out.append(_e(text[pos:m.start()]) + _code(m.group()))
        pos = m.end()
    return "".join(out) + _e(text[pos:])


def _docs_link(r) -> str:
    """Where docs/reasons.md documents the reason, as text: the page is self-contained (the
    catalogue's text for the code is embedded beside it) and never points into a checkout."""
    return f'<span class="docs">{_e(r.anchor)}</span>'


def _node_link(name: str) -> str:
    return f'<a href="#node={_e(quote(name, safe=""))}">{_wrap(name)}</a>'


def _summary(c) -> str:
    unclustered = sum(1 for r in c.nodes.values() if r.cluster is None)
    rows = [
        ("source", c.source or "<graph>"),
        ("options", c.options.describe()),
        ("input stage", c.pipeline.cluster.input_stage),
        ("jit level", c.mark.jit_level),
        ("nodes", len(c.nodes)),
        ("compiled", f"{count(c.compiled_nodes, 'node')} in {count(len(c.clusters), 'cluster')}"),
        ("not compiled", unclustered),
        ("refused merges", len(c.refusals)),
    ]
    gd = c.graph_decision
    if gd is not None:
        title = REASONS[gd.code].title if gd.code in REASONS else gd.code
        rows.append(("whole graph", f"{gd.code}: {title}"))
    out = ['<section id="summary"><h2>Summary</h2><dl>']
    out += [f"<dt>{_e(k)}</dt><dd>{_wrap(v) if k == 'source' else _e(v)}</dd>" for k, v in rows]
    out.append("</dl>")
    refused = Counter(r.code for r in c.refusals)
    if refused:
        out.append("<p>Refused merges by reason: " + ", ".join(
            f'<a href="#merge-{_e(code)}">{_code(code)}</a> {k}'
            for code, k in sorted(refused.items(), key=lambda kv: (-kv[1], kv[0]))) + "</p>")
    if c.notes:
        out.append('<ul class="notes">' + "".join(f"<li>{_e(n)}</li>" for n in c.notes) + "</ul>")
    release = getattr(c.options, "tf_version", None) or "?"
    out.append(f'<p class="muted">jitsim {_e(jitsim.__version__)}: a simulation of TensorFlow {_e(release)}\'s '
               "auto-clustering; <code>jitsim explain</code> prints the same explanations.</p></section>")
    return "".join(out)


def _clusters(c) -> str:
    if not c.clusters:
        return '<section id="clusters"><h2>Clusters</h2><p>No cluster: nothing is compiled.</p></section>'
    rows = "".join(
        f'<tr id="cluster-{_e(name)}"><td><a href="#q=cluster:{_e(quote(name, safe=""))}">{_e(name)}</a></td>'
        f'<td class="num">{len(m)}</td><td>{_e(op_summary(c, m))}</td></tr>'
        for name, m in c.clusters.items())
    return ('<section id="clusters"><h2>Clusters</h2><div class="scroll"><table id="cluster-table"><thead><tr>'
            '<th>cluster</th><th>nodes</th><th>ops</th></tr></thead><tbody>' + rows + "</tbody></table></div></section>")


def _why(code: str) -> str:
    """The catalogue's text for a reason code (title, what to change, TF's log line, the
    explanation, where docs/reasons.md has it)."""
    r = REASONS.get(code)
    if r is None:
        return f"<b>{_e(code)}</b>"
    why = [f"<b>{_e(r.title)}</b>"]
    if r.hint:
        why.append(f'<div><span class="k">change:</span> {_flags_as_code(r.hint)}</div>')
    if r.tf_log:
        why.append(f'<div><span class="k">TF logs:</span> <code>{_e(r.tf_log)}</code></div>')
    if r.explanation:
        why.append(f"<p>{_flags_as_code(r.explanation)}</p>")
    why.append(f'<div class="muted">docs: {_docs_link(r)}</div>')
    return "".join(why)


def _merges(c) -> str:
    """Refused merges grouped by reason code, with the catalogue's text."""
    by_code: dict[str, list] = {}
    for r in c.refusals:
        by_code.setdefault(r.code, []).append(r)
    if not by_code:
        return ""
    rows = []
    for code, rs in sorted(by_code.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        pairs = []
        seen = set()
        for r in rs:
            if (r.from_node, r.to_node) not in seen:
                seen.add((r.from_node, r.to_node))
                pairs.append(f"{_node_link(r.from_node)} → {_node_link(r.to_node)}")
        shown = "; ".join(pairs[:6]) + (f"; … {len(pairs) - 6} more" if len(pairs) > 6 else "")
        rows.append(f'<tr id="merge-{_e(code)}"><td>{_code(code)}</td><td class="num">{len(rs)}</td>'
                    f"<td>{_why(code)}</td><td>{shown}</td></tr>")
    return ('<section id="merges"><h2>Merges TF refused, by reason</h2><p class="muted">Each row counts the '
            "attempts (a pair can be tried again in a later phase); a node's explanation lists the refused "
            'merges of its cluster.</p><table id="merge-table"><thead><tr><th>reason</th><th>attempts</th>'
            "<th>why</th><th>between (first node of each side)</th></tr></thead><tbody>" + "".join(rows)
            + "</tbody></table></section>")


def _reasons(c) -> str:
    by_code: dict[str, list[str]] = {}
    for name, rec in c.nodes.items():
        if rec.cluster is None:
            by_code.setdefault(rec.code, []).append(name)
    if not by_code:
        return ('<section id="reasons"><h2>Not in a cluster</h2><p>Every node is in a cluster.</p></section>')
    rows = []
    for code, names in sorted(by_code.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        why = _why(code)
        shown = ", ".join(_node_link(n) for n in names[:NAMES_PER_REASON])
        more = len(names) - NAMES_PER_REASON
        shown += (f', <a href="#q=code:{_e(code)}">… all {len(names)}</a>' if more > 0 else "")
        rows.append(f'<tr id="reason-{_e(code)}"><td>{_code(code)}</td><td class="num">{len(names)}</td>'
                    f"<td>{_e(op_summary(c, names))}</td><td>{why}</td><td>{shown}</td></tr>")
    return ('<section id="reasons"><h2>Not in a cluster, by reason</h2><table id="reason-table"><thead><tr>'
            "<th>reason</th><th>nodes</th><th>ops</th><th>why</th><th>nodes</th></tr></thead><tbody>"
            + "".join(rows) + "</tbody></table></section>")


def uses_explorer(c, view: str, max_nodes: int) -> bool:
    """The report draws the graph explorer (:mod:`jitsim.explain.explorer`) instead of a
    graphviz picture: ``view="explorer"``, or ``auto`` on a graph over ``max_nodes`` nodes
    (where graphviz's picture would be the whole graph, unreadable)."""
    from jitsim.explain.render import choose_view

    return view == "explorer" or (view == "auto" and choose_view(c, view, max_nodes) != "full")


def _graph(c, view: str, max_nodes: int) -> tuple[str, str | None]:
    """(the graph section, a problem to tell the user or None)."""
    from jitsim.explain.explorer import explorer_section
    from jitsim.explain.render import INSTALL_HINT, choose_view, render_svg

    if uses_explorer(c, view, max_nodes):
        return explorer_section(c), None
    chosen = choose_view(c, view, max_nodes)
    try:
        svg = render_svg(c, chosen, max_nodes)
    except JitsimError as e:
        svg, problem = None, f"no picture: {e.message}"
    else:
        problem = None if svg is not None else f"no picture: graphviz's dot is not installed; {INSTALL_HINT}"
    head = f'<section id="graph"><h2>Graph ({_e(chosen)} view)</h2>'
    if svg is None:
        return (head + f'<p id="graph-missing">{_e(problem)}, then run <code>jitsim report</code> again '
                "(or draw it with <code>jitsim render GRAPH -o graph.svg</code>).</p></section>", problem)
    svg = svg[svg.index("<svg"):]
    return (head + '<p class="muted">Click a node for its explanation; drag to pan. Zoom: '
            '<button type="button" id="zoom-out" title="zoom out">−</button> '
            '<span id="zoom">100%</span> '
            '<button type="button" id="zoom-in" title="zoom in">+</button> '
            '<button type="button" id="zoom-fit" title="the whole width">fit to width</button> '
            '<button type="button" id="zoom-1" title="graphviz\'s own size">100%</button></p>'
            f'<div id="graph-box">{svg}</div></section>', None)


_CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;margin:0;color:#1d1d1f}
header,main{max-width:1200px;margin:auto;padding:0 16px}
header{border-bottom:1px solid #ddd}h1{font-size:22px;margin:14px 0 4px}h2{font-size:18px;margin:26px 0 8px}
nav a{margin-right:14px}code,pre{font-family:ui-monospace,Menlo,Consolas,monospace;font-size:12.5px}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px}dt{color:#555}dd{margin:0}
dd,th,td,code,a{overflow-wrap:normal;word-break:keep-all}code.rc{white-space:nowrap}
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #e5e5e5;padding:4px 8px;text-align:left;
vertical-align:top}th{background:#f6f6f6;position:sticky;top:0;white-space:nowrap}td.num{text-align:right}td p{margin:4px 0}tr:target{background:#fff6d5}
.scroll{max-height:520px;overflow:auto;border:1px solid #eee}.muted{color:#777}.k{color:#555}a{color:#0b5cad;text-decoration:none}a:hover{text-decoration:underline}
#search{width:100%;max-width:560px;font-size:15px;padding:6px 8px}#count{color:#555;margin:6px 0}
#results{max-height:260px;overflow:auto;margin:0;padding-left:20px;columns:2}#results li{break-inside:avoid}
#explanation{background:#f7f7f9;border:1px solid #e3e3e8;padding:10px;white-space:pre-wrap;word-break:break-word}
#explanation:empty{display:none}#graph-box{overflow:auto;max-height:85vh;border:1px solid #ddd;cursor:grab}
#graph-box.panning{cursor:grabbing;user-select:none}#graph-box svg{display:block;height:auto}#graph-box g.node{cursor:pointer}
#zoom{display:inline-block;min-width:3.5em;text-align:center}
#graph-box g.hl path,#graph-box g.hl polygon{stroke:#d00;stroke-width:4px}
"""

_JS = r"""
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("jitsim-data").textContent);
  var N = D.nodes, byName = new Map();
  N.forEach(function (n, i) { byName.set(n[0], i); });
  var $ = function (id) { return document.getElementById(id); };
  var search = $("search"), results = $("results"), count = $("count"), expl = $("explanation");
  var lit = null;
  function text(i) {
    var n = N[i], t = (n[6] ? n[0] : "") + D.chunks[n[4]];
    return n[5] >= 0 ? t + "\n" + D.chunks[n[5]] : t;
  }
  function show(i) {
    var n = N[i], code = D.codes[n[3]];
    expl.textContent = text(i);
    expl.setAttribute("data-node", n[0]);
    expl.setAttribute("data-code", code);
    var r = $("explanation-reason");
    r.replaceChildren();
    if (document.getElementById("reason-" + code)) {
      var a = document.createElement("a");
      a.href = "#reason-" + code;
      a.textContent = "more about " + code + " and the other nodes it applies to";
      r.appendChild(a);
    }
    if (window.jitsimReveal) { window.jitsimReveal(i); return; }  // the explorer opens the node's path
    if (lit) lit.classList.remove("hl");
    lit = document.getElementById("n" + i);
    if (lit) lit.classList.add("hl");
  }
  window.jitsimShow = function (i) { show(i); search.value = N[i][0]; run(); };
  window.jitsimText = text;
  function matches(q) {
    q = q.trim();
    if (!q) return [];
    if (byName.has(q)) return [byName.get(q)];
    var out = [], i, f = /^(code|cluster|op):(.*)$/.exec(q);
    if (f) {
      var v = f[2].trim();
      for (i = 0; i < N.length; i++) {
        var n = N[i];
        if ((f[1] === "code" && D.codes[n[3]] === v) || (f[1] === "op" && n[1] === v) ||
            (f[1] === "cluster" && n[2] >= 0 && D.clusters[n[2]] === v)) out.push(i);
      }
      return out;
    }
    var rx = null;
    try { rx = new RegExp(q); } catch (e) { rx = null; }
    for (i = 0; i < N.length; i++) {
      var s = N[i][0];
      if (s.indexOf(q) >= 0 || (rx && rx.test(s))) out.push(i);
    }
    return out;
  }
  function run() {
    var q = search.value, m = matches(q);
    results.replaceChildren();
    count.textContent = !q.trim() ? "" : m.length === 0 ? "no node matches" :
      m.length + (m.length === 1 ? " node matches" : " nodes match") +
      (m.length > D.results_shown ? " (first " + D.results_shown + " listed)" : "");
    m.slice(0, D.results_shown).forEach(function (i) {
      var n = N[i], li = document.createElement("li"), a = document.createElement("a"),
          s = document.createElement("span");
      a.href = "#node=" + encodeURIComponent(n[0]);
      a.textContent = n[0];
      s.className = "muted";
      s.textContent = " " + n[1] + (n[2] >= 0 ? " in " + D.clusters[n[2]] : " " + D.codes[n[3]]);
      li.appendChild(a);
      li.appendChild(s);
      results.appendChild(li);
    });
    if (m.length === 1) show(m[0]);
  }
  var timer = null;
  search.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(run, 120); });
  search.addEventListener("keydown", function (e) { if (e.key === "Enter") { clearTimeout(timer); run(); } });
  function fromHash() {
    var h = location.hash, v;
    if (h.indexOf("#node=") === 0) {
      v = decodeURIComponent(h.slice(6));
      if (byName.has(v)) { show(byName.get(v)); $("search-section").scrollIntoView(); }
    } else if (h.indexOf("#q=") === 0) {
      search.value = decodeURIComponent(h.slice(3));
      run();
      $("search-section").scrollIntoView();
    }
  }
  window.addEventListener("hashchange", fromHash);
  fromHash();
  var box = $("graph-box");
  if (box) {
    // zoom: the picture's width as a multiple of graphviz's own size;
    // default: 100% when it fits, else fit to the width, but never below READABLE (text stays legible;
    // the box scrolls and pans)
    var svg = box.querySelector("svg"), READABLE = 0.6;
    var w = svg.getAttribute("width") || "";  // graphviz writes points: 1 pt = 4/3 CSS px
    var natural = (parseFloat(w) * (/pt$/.test(w) ? 4 / 3 : 1)) || svg.getBBox().width || 1;
    var zoom = 1;
    function setZoom(z) {
      zoom = Math.min(4, Math.max(0.05, z));
      svg.style.width = (natural * zoom) + "px";
      $("zoom").textContent = Math.round(zoom * 100) + "%";
    }
    function fitScale() { return Math.min(1, (box.clientWidth - 2) / natural); }
    setZoom(Math.max(fitScale(), READABLE));
    $("zoom-in").addEventListener("click", function () { setZoom(zoom * 1.25); });
    $("zoom-out").addEventListener("click", function () { setZoom(zoom / 1.25); });
    $("zoom-fit").addEventListener("click", function () { setZoom((box.clientWidth - 2) / natural); });
    $("zoom-1").addEventListener("click", function () { setZoom(1); });
    var drag = null, moved = false;
    box.addEventListener("mousedown", function (e) {
      if (e.button !== 0) return;
      drag = {x: e.clientX, y: e.clientY, left: box.scrollLeft, top: box.scrollTop};
      moved = false;
    });
    window.addEventListener("mousemove", function (e) {
      if (!drag) return;
      var dx = e.clientX - drag.x, dy = e.clientY - drag.y;
      if (Math.abs(dx) + Math.abs(dy) > 3) { moved = true; box.classList.add("panning"); }
      box.scrollLeft = drag.left - dx;
      box.scrollTop = drag.top - dy;
    });
    window.addEventListener("mouseup", function () { drag = null; box.classList.remove("panning"); });
    box.addEventListener("click", function (e) {
      if (moved) { moved = false; return; }
      var g = e.target.closest("g.node, g.cluster");
      if (!g) return;
      e.preventDefault();
      var id = g.id, m = /^n(\d+)$/.exec(id), c = /^c(\d+)$/.exec(id);
      if (m && N[+m[1]]) { show(+m[1]); search.value = N[+m[1]][0]; run(); }
      else if (c && D.clusters[+c[1]] !== undefined) { search.value = "cluster:" + D.clusters[+c[1]]; run(); }
      $("search-section").scrollIntoView();
    });
  }
})();
"""


def _runtime(rt: dict | None) -> str:
    """The run-time section (``report --shapes``): the per-unit timeline picture (inline SVG,
    drawn by jitsim.runtime.svg) and one row per compiled unit. ``rt``: ``{"stream", "steps",
    "svg", "units": [{"name", "kind", "mode", "signatures", "compiles", "compile_steps",
    "megamorphic_at_step", "fallbacks", "executions", "ran_compiled", "recompiles_with"}]}``."""
    if rt is None:
        return ""
    head = (f'<section id="runtime"><h2>Run time: {rt["steps"]} steps of <code>{_wrap(rt["stream"])}</code></h2>'
            '<p class="muted">What TF does at run time with this stream (<code>jitsim runtime</code>): each compiled '
            "unit's compiles, runs of an earlier compile and fallbacks to TF ops, step by step; hover a cell for "
            "its step and why.</p>")
    if not rt["units"]:
        return head + "<p>No compiled cluster and no jit_compile call: nothing is compiled at run time.</p></section>"
    rows = []
    for u in rt["units"]:
        mega = "-" if u["megamorphic_at_step"] is None else f"step {u['megamorphic_at_step']}"
        follows = ", ".join(c["input"] for c in u["recompiles_with"] if c.get("input")) or "-"
        rows.append(f"<tr><td>{_wrap(u['name'])}</td><td>{_e(u['kind'])}/{_e(u['mode'])}</td>"
                    f"<td>{u['signatures']}</td><td>{u['compiles']}</td><td>{_e(mega)}</td>"
                    f"<td>{u['fallbacks']}</td><td>{u['ran_compiled']}/{u['executions']}</td>"
                    f"<td>{_e(follows)}</td></tr>")
    svg = rt["svg"]
    svg = svg[svg.index("<svg"):]
    return (head + f'<div class="scroll" id="runtime-timeline">{svg}</div>'
            '<div class="scroll"><table id="runtime-table"><thead><tr><th>unit</th><th>kind/mode</th>'
            "<th>signatures</th><th>compiles</th><th>megamorphic</th><th>fallbacks</th><th>ran compiled</th>"
            "<th>recompiles with</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table></div></section>")


def report_html(c, view: str = "auto", max_nodes: int = 400, runtime: dict | None = None) -> tuple[str, str | None]:
    """The page, and a problem to tell the user (no picture) or None. ``runtime``: the run-time
    section's data (:func:`_runtime`), or None for none."""
    from jitsim.explain.explorer import EXPLORER_CSS, EXPLORER_JS, dagre_js, explorer_data

    src = Path(c.source).name if c.source else "<graph>"
    graph, problem = _graph(c, view, max_nodes)
    explorer = uses_explorer(c, view, max_nodes)
    data = _data(c)
    if explorer:
        data["explorer"] = explorer_data(c)
    parts = [
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
        "style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:\">",
        '<link rel="icon" href="data:,">',
        f"<title>jitsim report: {_e(src)}</title><style>{_CSS}{EXPLORER_CSS if explorer else ''}</style></head><body>",
        f"<header><h1>jitsim report: {_e(src)}</h1><p>{count(len(c.clusters), 'cluster')}, {c.compiled_nodes} of "
        f"{len(c.nodes)} nodes compiled</p><nav><a href=\"#summary\">summary</a><a href=\"#search-section\">"
        'search</a><a href="#clusters">clusters</a><a href="#reasons">not in a cluster</a>'
        '<a href="#merges">refused merges</a><a href="#graph">graph</a>'
        + ('<a href="#runtime">run time</a>' if runtime is not None else "") + '</nav></header><main>',
        _summary(c),
        '<section id="search-section"><h2>Why is a node (not) in a cluster?</h2>'
        '<input id="search" type="search" autocomplete="off" spellcheck="false" '
        'placeholder="node name, substring or regex; or code:REASON, cluster:NAME, op:OP" '
        'aria-label="search nodes">'
        '<div id="count"></div><ul id="results"></ul><pre id="explanation"></pre>'
        '<div id="explanation-reason"></div></section>',
        _clusters(c),
        _reasons(c),
        _merges(c),
        graph,
        _runtime(runtime),
        f'</main><script type="application/json" id="jitsim-data">{_json_script(data)}</script>',
        f"<script>{_JS}</script>",
        f"<script>{dagre_js()}</script><script>{EXPLORER_JS}</script>" if explorer else "",
        "</body></html>\n",
    ]
    return "".join(parts), problem


def write_report(c, directory, view: str = "auto", max_nodes: int = 400) -> str:
    """Write ``directory/index.html`` (created if needed); returns a one-line message."""
    from jitsim.files.output import wrote_line

    info = write_report_file(c, directory, view, max_nodes)
    return wrote_line(info["output"], info["what"]) + (f"; {info['problem']}" if info["problem"] else "")


def write_report_file(c, directory, view: str = "auto", max_nodes: int = 400, runtime: dict | None = None) -> dict:
    """Write ``directory/index.html`` (created if needed; removed again, with the missing parents
    created for it, when the write fails); returns what was written: ``output``, ``clusters``,
    ``nodes``, ``bytes``, ``what`` (in words), ``problem`` (why the picture is missing, or None)."""
    from jitsim.explain.render import write_file
    from jitsim.files.output import check_output, output_directory

    d = Path(directory)
    check_output(d, directory=True)
    page, problem = report_html(c, view, max_nodes, runtime)
    data = page.encode("utf-8")
    out = d / "index.html"
    with output_directory(d):
        write_file(out, data)
    size = f"{len(data) / 1e6:.1f} MB" if len(data) >= 1e6 else f"{max(1, round(len(data) / 1e3))} kB"
    return {"output": str(out), "clusters": len(c.clusters), "nodes": len(c.nodes), "bytes": len(data),
            "what": f"{count(len(c.clusters), 'cluster')}, {count(len(c.nodes), 'node')}, {size}", "problem": problem or None}
