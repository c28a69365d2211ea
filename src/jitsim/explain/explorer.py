"""The HTML report's graph explorer: a graph of any size, opened level by level.

At first paint the explorer draws the top level of :mod:`jitsim.explain.hierarchy`'s tree
(tens of boxes: name scopes, or the groups the tree made of a wide level). A click on a box
opens it in place; a click on an open group's title closes it. Every box carries a bar of its
members' XLA clusters (the cluster palette, grey for nodes outside any cluster), so which
clusters span which scopes shows at a glance; the second view ("by cluster") makes each
cluster the outer group. Edges are bundled between whatever is drawn: one arrow per pair of
boxes, as wide as the log of the edges it stands for, dashed when all of them are control
edges. A node's click shows its explanation (the report's own), and the report's search
opens the path to the node it finds.

The layout is `dagre <https://github.com/dagrejs/dagre>`_ (vendored: ``vendor/``), run on the
drawn boxes only, in the browser; the page stays self-contained. Costs are measured by
``benchmarks/report_view.py`` (docs/reports.md).
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from jitsim.explain.hierarchy import UNCLUSTERED, build, cluster_tree, scope_paths, scope_tree
from jitsim.explain.summary import cluster_colours

VENDOR = Path(__file__).parent / "vendor"
LIMIT = 800  # boxes and nodes drawn at once; opening more says so instead
DELETED = "(deleted by later passes)"


@lru_cache(maxsize=1)
def dagre_js() -> str:
    """The vendored dagre, its source-map comment removed (nothing else is fetched)."""
    text = (VENDOR / "dagre.min.js").read_text(encoding="utf-8")
    return "\n".join(line for line in text.splitlines() if not line.startswith("//# sourceMappingURL"))


def explorer_data(c) -> dict:
    """What the explorer's script needs beyond the report's node list (same node order:
    ``c.nodes``): the two trees, the edges as flat index pairs (data, control), the cluster
    palette, each reason code's fill."""
    from jitsim.explain.render import FAMILIES, code_family

    names = list(c.nodes)
    recs = c.nodes
    removed = [getattr(recs[n], "removed", False) for n in names]
    if any(removed):
        paths, leaves = scope_paths(names)
        paths = [(DELETED,) + p if r else p for p, r in zip(paths, removed)]
        scope = build(paths, leaves)
        clusters = [None if r else recs[n].cluster for n, r in zip(names, removed)]
        cpaths = [((DELETED,) if r else (cl or UNCLUSTERED,)) + p
                  for p, r, cl in zip(scope_paths(names)[0], removed, clusters)]
        by_cluster = build(cpaths, leaves, cluster_groups={cl for cl in clusters if cl} | {UNCLUSTERED, DELETED})
    else:
        scope = scope_tree(names)
        by_cluster = cluster_tree(names, [recs[n].cluster for n in names])
    index = {n: i for i, n in enumerate(names)}
    data: dict[tuple[int, int], bool] = {}
    nodes = c.graph.nodes
    for e in c.graph.edges():
        s, d = nodes[e.src], nodes[e.dst]
        if s is None or d is None:
            continue
        a, b = index.get(s.name), index.get(d.name)
        if a is None or b is None or a == b:
            continue
        data[(a, b)] = data.get((a, b), False) or not e.is_control
    flat_data, flat_ctrl = [], []
    for (a, b), is_data in data.items():
        (flat_data if is_data else flat_ctrl).extend((a, b))
    colours = cluster_colours(c)
    return {"trees": {"scope": scope.to_dict(), "cluster": by_cluster.to_dict()},
            "edges": flat_data, "ctrl": flat_ctrl,
            "colours": [list(colours[name]) for name in c.clusters],
            "code_fill": {rec.code: FAMILIES[code_family(rec.code)][0] for rec in recs.values()},
            "limit": LIMIT}


def explorer_section(c) -> str:
    """The report's graph section for the explorer (the script fills ``#explorer``)."""
    return ('<section id="graph"><h2>Graph</h2>'
            '<p class="muted" id="explorer-help">Boxes are name scopes (or groups of a wide level: '
            '<code>name_*</code> a series, <code>name*</code> names that start alike, <code>a … b</code> a run); '
            'the bar under a box shows its nodes\' XLA clusters (grey: not in a cluster). Click a box to open '
            'it, an open group\'s title to close it, a node for its explanation; drag to pan.</p>'
            '<p id="explorer-bar">'
            '<span class="seg" role="group" aria-label="group by">group by '
            '<button type="button" id="by-scope" aria-pressed="true">name scope</button> '
            '<button type="button" id="by-cluster" aria-pressed="false">XLA cluster</button></span> '
            '<button type="button" id="ex-collapse" title="close every group">close all</button> '
            'zoom <button type="button" id="ex-out" title="zoom out">−</button> '
            '<span id="ex-zoom">100%</span> <button type="button" id="ex-in" title="zoom in">+</button> '
            '<button type="button" id="ex-fit" title="the whole picture in the width">fit</button> '
            '<span id="ex-status" class="muted" role="status"></span></p>'
            '<div id="explorer" tabindex="0"></div><pre id="ex-explanation" aria-live="polite"></pre></section>')


EXPLORER_CSS = """
#explorer{overflow:auto;height:78vh;max-height:78vh;border:1px solid #ddd;cursor:grab;background:#fff}
#explorer.panning{cursor:grabbing;user-select:none}#explorer svg{display:block}
#explorer .box,#explorer .ttl{cursor:pointer}#explorer .node{cursor:pointer}
#explorer text{font:12px system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;fill:#1d1d1f}
#explorer text.sub{font-size:10.5px;fill:#555}#explorer .edge{fill:none;stroke:#8a8a8a}
#explorer .edge.ctrl{stroke-dasharray:4 3}#explorer .elabel{font-size:10px;fill:#666}
#explorer g.hl rect.body{stroke:#d00;stroke-width:3px}
#ex-explanation{background:#f7f7f9;border:1px solid #e3e3e8;padding:10px;white-space:pre-wrap;word-break:break-word}
#ex-explanation:empty{display:none}#explorer-bar button[aria-pressed=true]{font-weight:bold}#ex-zoom{display:inline-block;min-width:3.2em;text-align:center}
"""

EXPLORER_JS = r"""
(function () {
  "use strict";
  var host = document.getElementById("explorer");
  if (!host || typeof dagre === "undefined") return;
  var t0 = performance.now();
  var D = JSON.parse(document.getElementById("jitsim-data").textContent);
  var X = D.explorer, N = D.nodes, nN = N.length, E = X.edges, C = X.ctrl;
  var status = document.getElementById("ex-status");
  var NS = "http://www.w3.org/2000/svg";
  function esc(s) {
    return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  }
  function cut(s, n) { return s.length > n ? s.slice(0, n - 1) + "\u2026" : s; }
  function prep(t) {
    var G = t.labels.length, par = t.parents, ng = t.node_group, g, i, c;
    var size = new Int32Array(G), comp = new Array(G), kids = new Array(G);
    for (g = 0; g < G; g++) { comp[g] = new Map(); kids[g] = 0; }
    for (g = 1; g < G; g++) kids[par[g]]++;
    for (i = 0; i < nN; i++) {
      g = ng[i]; size[g]++; kids[g]++; c = N[i][2];
      comp[g].set(c, (comp[g].get(c) || 0) + 1);
    }
    for (g = G - 1; g > 0; g--) {
      var p = par[g];
      size[p] += size[g];
      comp[g].forEach(function (v, k) { comp[p].set(k, (comp[p].get(k) || 0) + v); });
    }
    return {G: G, labels: t.labels, kinds: t.kinds, par: par, ng: ng, size: size, comp: comp, kids: kids,
            open: new Set([0])};
  }
  var trees = {scope: prep(X.trees.scope), cluster: prep(X.trees.cluster)}, T = trees.scope;
  var zoom = 1, natural = 1, naturalH = 1, lit = -1;
  function reps() {
    var r = new Int32Array(T.G);
    r[0] = -1;
    for (var g = 1; g < T.G; g++) {
      var p = r[T.par[g]];
      r[g] = p !== -1 ? p : (T.open.has(g) ? -1 : g);
    }
    return r;
  }
  function drawnCount(r) {
    var k = 0, g, i;
    for (g = 1; g < T.G; g++) if (r[g] === g) k++;
    for (i = 0; i < nN; i++) if (r[T.ng[i]] === -1) k++;
    return k;
  }
  function clusterName(c) { return c >= 0 ? D.clusters[c] : null; }
  function boxInfo(g) {
    var parts = [], cl = 0;
    T.comp[g].forEach(function (v, k) { if (k >= 0) cl++; });
    parts.push(T.size[g] + (T.size[g] === 1 ? " node" : " nodes"));
    if (cl) parts.push(cl + (cl === 1 ? " cluster" : " clusters"));
    return parts.join(" \u00b7 ");
  }
  function leafLabel(i) { var s = N[i][0]; return s.slice(s.lastIndexOf("/") + 1); }
  function leafSub(i) {
    var n = N[i];
    return n[1] + " \u00b7 " + (n[2] >= 0 ? D.clusters[n[2]] : D.codes[n[3]]);
  }
  function width(a, b) { return Math.max(110, Math.min(260, 14 + 6.8 * Math.max(a.length, b.length * 0.9))); }
  function bar(g, x, y, w) {
    // the members' clusters, widest first, grey for the nodes in none
    var segs = [], total = T.size[g], s = "", at = x;
    T.comp[g].forEach(function (v, k) { segs.push([k, v]); });
    segs.sort(function (a, b) { return (a[0] < 0) - (b[0] < 0) || b[1] - a[1]; });
    segs.forEach(function (p) {
      var w2 = w * p[1] / total, col = p[0] >= 0 ? X.colours[p[0] % X.colours.length][1] : "#d0d0d0";
      s += '<rect x="' + at.toFixed(1) + '" y="' + y + '" width="' + Math.max(0.5, w2).toFixed(1) +
           '" height="6" fill="' + col + '"><title>' + esc((p[0] >= 0 ? D.clusters[p[0]] : "not in a cluster") +
           ": " + p[1]) + '</title></rect>';
      at += w2;
    });
    return s;
  }
  // Each open group is laid out on its own (dagre, its direct members only), deepest first,
  // and then placed as one block in its parent's layout: a group's members stay together and
  // its box is as small as they are. An edge is drawn at the level of the innermost open group
  // holding both ends, between the members of that group that hold them (so an edge into an
  // open group ends at the group's box).
  var TITLE = 22, PAD = 8;
  function draw() {
    var t1 = performance.now(), r = reps(), g, i;
    var depth = new Int32Array(T.G);
    for (g = 1; g < T.G; g++) depth[g] = depth[T.par[g]] + 1;
    var items = new Map();  // open group -> its drawn members [{id, kind, g|i, w, h}]
    items.set(0, []);
    var openList = [];
    for (g = 1; g < T.G; g++) if (r[g] === -1) { items.set(g, []); openList.push(g); }
    var byId = {};
    function put(parent, it) { items.get(parent).push(it); byId[it.id] = it; }
    for (g = 1; g < T.G; g++) {
      if (r[g] === g) {
        var lab = cut(T.labels[g], 34), info = boxInfo(g);
        put(T.par[g], {id: "g" + g, kind: "box", g: g, lab: lab, info: info, w: width("\u25b8 " + lab, info), h: 46});
      } else if (r[g] === -1) {
        put(T.par[g], {id: "g" + g, kind: "open", g: g, w: 0, h: 0});
      }
    }
    var nLeaves = 0;
    for (i = 0; i < nN; i++) {
      if (r[T.ng[i]] !== -1) continue;
      var ll = cut(leafLabel(i), 34), sub = cut(leafSub(i), 40);
      put(T.ng[i], {id: "n" + i, kind: "leaf", i: i, lab: ll, sub: sub, w: width(ll, sub), h: 38});
      nLeaves++;
    }
    // bundled edges, each at the level of the innermost open group holding both ends
    var levels = new Map(), M = nN + T.G;
    function rep(v) { var q = r[T.ng[v]]; return q === -1 ? v : nN + q; }
    function add(list, ctrl) {
      for (var j = 0; j < list.length; j += 2) {
        var a = rep(list[j]), b = rep(list[j + 1]);
        if (a === b) continue;
        var ia = a < nN ? "n" + a : "g" + (a - nN), ib = b < nN ? "n" + b : "g" + (b - nN);
        var pa = a < nN ? T.ng[a] : T.par[a - nN], pb = b < nN ? T.ng[b] : T.par[b - nN];
        while (pa !== pb) {
          if (depth[pa] >= depth[pb]) { ia = "g" + pa; pa = T.par[pa]; }
          else { ib = "g" + pb; pb = T.par[pb]; }
        }
        if (ia === ib) continue;
        var lv = levels.get(pa);
        if (!lv) levels.set(pa, lv = new Map());
        var key = ia + ">" + ib, e = lv.get(key);
        if (!e) lv.set(key, e = {a: ia, b: ib, n: 0, data: 0});
        e.n++;
        if (!ctrl) e.data++;
      }
    }
    add(E, false);
    add(C, true);
    var t2 = performance.now(), layouts = new Map();
    // deepest first: a group's size is known before its parent is laid out
    openList.sort(function (x, y) { return depth[y] - depth[x]; });
    openList.push(0);
    openList.forEach(function (og) {
      var G = new dagre.graphlib.Graph();
      G.setGraph({rankdir: "TB", nodesep: 18, ranksep: 34, marginx: og ? PAD : 14, marginy: og ? PAD : 14});
      G.setDefaultEdgeLabel(function () { return {}; });
      items.get(og).forEach(function (it) { G.setNode(it.id, {width: it.w, height: it.h}); });
      (levels.get(og) || new Map()).forEach(function (e) {
        G.setEdge(e.a, e.b, {n: e.n, data: e.data, weight: e.data ? 2 : 1});
      });
      dagre.layout(G);
      layouts.set(og, G);
      if (og) {
        var it = byId["g" + og], tw = 24 + 6.8 * Math.min(60, T.labels[og].length);
        it.cw = G.graph().width || 40;
        it.w = Math.max(it.cw, tw);
        it.h = (G.graph().height || 20) + TITLE;
      }
    });
    var t3 = performance.now();
    // place: each group's members relative to its top left
    var root = layouts.get(0), gw = Math.ceil(root.graph().width || 100), gh = Math.ceil(root.graph().height || 60);
    var placed = [], edges = [];
    function place(og, ox, oy) {
      var G = layouts.get(og);
      items.get(og).forEach(function (it) {
        var d = G.node(it.id), x = ox + d.x - it.w / 2, y = oy + d.y - it.h / 2;
        placed.push({it: it, x: x, y: y, depth: og ? depth[og] : 0});
        if (it.kind === "open") place(it.g, x + (it.w - it.cw) / 2, y + TITLE);
      });
      G.edges().forEach(function (ed) {
        var e = G.edge(ed);
        if (e.points && e.points.length > 1)
          edges.push({e: e, pts: e.points.map(function (p) { return {x: p.x + ox, y: p.y + oy}; })});
      });
    }
    place(0, 0, 0);
    var s = ['<svg xmlns="' + NS + '" width="' + gw + '" height="' + gh + '" viewBox="0 0 ' + gw + " " + gh + '">',
             '<defs><marker id="ex-arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="9" markerHeight="9" ' +
             'markerUnits="userSpaceOnUse" orient="auto-start-reverse"><path d="M0,0L10,5L0,10z" fill="#8a8a8a"/></marker></defs>'];
    var nBoxes = 0, nOpen = 0;
    placed.filter(function (p) { return p.it.kind === "open"; })
      .sort(function (a, b) { return a.depth - b.depth; })
      .forEach(function (p) {
        var d = p.it, kind = T.kinds[d.g];
        var fill = kind === "cluster" ? clusterFill(T.labels[d.g], 0) : "#f7f8fa";
        var stroke = kind === "cluster" ? clusterFill(T.labels[d.g], 1) : "#c8ccd2";
        nOpen++;
        s.push('<g class="grp" data-g="' + d.g + '"><rect x="' + p.x + '" y="' + p.y + '" width="' + d.w +
               '" height="' + d.h + '" rx="8" fill="' + fill + '" stroke="' + stroke + '"/><text class="ttl" data-g="' +
               d.g + '" x="' + (p.x + 8) + '" y="' + (p.y + 15) + '">\u25be ' + esc(cut(T.labels[d.g], 60)) +
               "<title>" + esc(path(d.g)) + ": click to close</title></text></g>");
      });
    edges.forEach(function (x) {
      var e = x.e, pts = x.pts;
      var dpath = "M" + pts.map(function (p) { return p.x.toFixed(1) + "," + p.y.toFixed(1); }).join("L");
      var w = Math.min(6, 1 + Math.log2(e.n));
      s.push('<path class="edge' + (e.data ? "" : " ctrl") + '" d="' + dpath + '" stroke-width="' + w.toFixed(1) +
             '" marker-end="url(#ex-arrow)"><title>' + e.n + (e.n === 1 ? " edge" : " edges") +
             (e.data < e.n ? " (" + (e.n - e.data) + " control)" : "") + "</title></path>");
      if (e.n > 1) {
        var m = pts[Math.floor(pts.length / 2)];
        s.push('<text class="elabel" x="' + (m.x + 4).toFixed(1) + '" y="' + (m.y - 2).toFixed(1) + '">' + e.n + "</text>");
      }
    });
    placed.forEach(function (p) {
      var d = p.it, x = p.x, y = p.y;
      if (d.kind === "box") {
        nBoxes++;
        var fill = T.kinds[d.g] === "cluster" ? clusterFill(T.labels[d.g], 0) : "#ffffff";
        s.push('<g class="box" data-g="' + d.g + '" id="g' + d.g + '"><rect class="body" x="' + x + '" y="' + y +
               '" width="' + d.w + '" height="' + d.h + '" rx="6" fill="' + fill + '" stroke="#7d8590"/>' +
               '<text x="' + (x + 8) + '" y="' + (y + 16) + '">\u25b8 ' + esc(d.lab) + '</text><text class="sub" x="' +
               (x + 8) + '" y="' + (y + 31) + '">' + esc(d.info) + "</text>" + bar(d.g, x + 1, y + d.h - 8, d.w - 2) +
               "<title>" + esc(path(d.g)) + " (" + esc(d.info) + "): click to open</title></g>");
      } else if (d.kind === "leaf") {
        var n = N[d.i];
        var lf = n[2] >= 0 ? X.colours[n[2] % X.colours.length][0] : (X.code_fill[D.codes[n[3]]] || "#fff");
        var ls = n[2] >= 0 ? X.colours[n[2] % X.colours.length][1] : "#9aa0a6";
        s.push('<g class="node' + (d.i === lit ? " hl" : "") + '" id="n' + d.i + '"><rect class="body" x="' + x + '" y="' +
               y + '" width="' + d.w + '" height="' + d.h + '" rx="4" fill="' + lf + '" stroke="' + ls +
               '"/><text x="' + (x + 7) + '" y="' + (y + 15) + '">' + esc(d.lab) + '</text><text class="sub" x="' +
               (x + 7) + '" y="' + (y + 30) + '">' + esc(d.sub) + "</text><title>" + esc(n[0]) + "</title></g>");
      }
    });
    s.push("</svg>");
    host.innerHTML = s.join("");
    natural = gw;
    naturalH = gh;
    setZoom(zoom);
    var t4 = performance.now();
    host.setAttribute("data-drawn", String(nBoxes + nLeaves));
    host.setAttribute("data-open", String(nOpen));
    host.setAttribute("data-layout-ms", (t3 - t2).toFixed(1));
    status.textContent = (nBoxes + nLeaves) + " boxes drawn, " + nOpen + " open; layout " +
      Math.round(t3 - t2) + " ms, drawn in " + Math.round(t4 - t1) + " ms";
  }
  function clusterFill(name, which) {
    var c = D.clusters.indexOf(name);
    return c >= 0 ? X.colours[c % X.colours.length][which] : (which ? "#c8ccd2" : "#f7f8fa");
  }
  function path(g) {
    var out = [];
    while (g > 0) { out.push(T.labels[g]); g = T.par[g]; }
    return out.reverse().join(" / ");
  }
  function toggle(g) {
    var opening = !T.open.has(g);
    if (!opening) {
      T.open.delete(g);
    } else {
      T.open.add(g);
      var k = drawnCount(reps());
      if (k > X.limit) {
        T.open.delete(g);
        status.textContent = "opening " + path(g) + " would draw " + k + " boxes (more than " + X.limit +
          "): close another group first, or search for a node";
        return;
      }
    }
    draw();
    // the group just opened (or the box it closed into) comes into view, its top left first
    var el = host.querySelector('[data-g="' + g + '"]');
    if (el) {
      var b = el.getBBox();
      if (opening) {
        host.scrollLeft = Math.max(0, (b.x - 20) * zoom);
        host.scrollTop = Math.max(0, (b.y - 20) * zoom);
      } else {
        centre(el);
      }
    }
  }
  function setZoom(z) {
    zoom = Math.min(4, Math.max(0.05, z));
    var svg = host.querySelector("svg");
    if (svg) svg.style.width = (natural * zoom) + "px";
    if (svg) svg.style.height = "auto";
    // the box is as tall as the drawing (up to most of the window): no empty screen below it
    host.style.height = Math.max(160, Math.min(window.innerHeight * 0.78, naturalH * zoom + 24)) + "px";
    document.getElementById("ex-zoom").textContent = Math.round(zoom * 100) + "%";
  }
  function centre(el) {
    var b = el.getBBox(), sx = b.x + b.width / 2, sy = b.y + b.height / 2;
    host.scrollLeft = sx * zoom - host.clientWidth / 2;
    host.scrollTop = sy * zoom - host.clientHeight / 2;
  }
  // the report's search and hash links open the path to the node they show
  window.jitsimReveal = function (i) {
    lit = i;
    var el = document.getElementById("n" + i);
    if (!el || !host.contains(el)) {
      var g = T.ng[i], want = [];
      while (g > 0) { want.push(g); g = T.par[g]; }
      want.forEach(function (h) { T.open.add(h); });
      if (drawnCount(reps()) > X.limit) T.open = new Set([0].concat(want));
      draw();
      el = document.getElementById("n" + i);
      if (el) centre(el);
    }
    host.querySelectorAll("g.node.hl").forEach(function (h) { h.classList.remove("hl"); });
    if (el) el.classList.add("hl");
  };
  var drag = null, moved = false;
  host.addEventListener("mousedown", function (e) {
    if (e.button !== 0) return;
    drag = {x: e.clientX, y: e.clientY, left: host.scrollLeft, top: host.scrollTop};
    moved = false;
  });
  window.addEventListener("mousemove", function (e) {
    if (!drag) return;
    var dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) { moved = true; host.classList.add("panning"); }
    host.scrollLeft = drag.left - dx;
    host.scrollTop = drag.top - dy;
  });
  window.addEventListener("mouseup", function () { drag = null; host.classList.remove("panning"); });
  host.addEventListener("click", function (e) {
    if (moved) { moved = false; return; }
    var n = e.target.closest("g.node"), b = e.target.closest(".box, .ttl");
    if (n) {
      var i = +n.id.slice(1);
      if (window.jitsimShow) window.jitsimShow(i);
      var pane = document.getElementById("ex-explanation");
      if (pane && window.jitsimText) { pane.textContent = window.jitsimText(i); pane.setAttribute("data-node", N[i][0]); }
    } else if (b) {
      toggle(+b.getAttribute("data-g"));
    }
  });
  function mode(m) {
    T = trees[m];
    document.getElementById("by-scope").setAttribute("aria-pressed", String(m === "scope"));
    document.getElementById("by-cluster").setAttribute("aria-pressed", String(m === "cluster"));
    draw();
  }
  document.getElementById("by-scope").addEventListener("click", function () { mode("scope"); });
  document.getElementById("by-cluster").addEventListener("click", function () { mode("cluster"); });
  document.getElementById("ex-collapse").addEventListener("click", function () { T.open = new Set([0]); draw(); });
  document.getElementById("ex-in").addEventListener("click", function () { setZoom(zoom * 1.25); });
  document.getElementById("ex-out").addEventListener("click", function () { setZoom(zoom / 1.25); });
  document.getElementById("ex-fit").addEventListener("click", function () {
    setZoom(Math.min(1, (host.clientWidth - 2) / natural));
  });
  draw();
  host.setAttribute("data-first-paint-ms", (performance.now() - t0).toFixed(1));  // this script's share
  host.setAttribute("data-painted-at-ms", performance.now().toFixed(1));  // since the page's navigation began
})();
"""
