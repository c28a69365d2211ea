"""Pictures of a clustering: graphviz DOT, and SVG/PNG through graphviz's ``dot``.

Two views (``jitsim render``, docs/reports.md):

* **full**: every node. Each final cluster is a ``subgraph cluster_N`` labelled with its
  name and size; nodes show their name and op; a node outside every cluster is filled
  with the colour of its reason code's family and carries the code as a last label line;
  control edges are dashed.
* **collapsed** (the default above ``max_nodes`` nodes): one box per cluster (name, size,
  top ops); unclustered nodes only where an edge joins them to a cluster, grouped by
  (reason code, op, neighbouring clusters); edges aggregated between boxes with their
  count. What is left out is summarised in the picture's caption.

Everything is read from the :class:`~jitsim.explain.clustering.Clustering` records; no
decision is re-derived here. DOT is built with the ``graphviz`` package; images need the
``dot`` program (Debian/Ubuntu: ``apt-get install graphviz``).
"""

from __future__ import annotations

import math
import shutil
import subprocess
from collections import Counter, defaultdict
from pathlib import Path

import graphviz

from jitsim.codes import FAMILIES as CODE_FAMILIES, Code
from jitsim.errors import JitsimError
from jitsim.explain.summary import cluster_colours, op_counts
from jitsim.words import count

VIEWS = ("auto", "full", "scopes", "collapsed")
FORMATS = {".dot": None, ".gv": None, ".svg": "svg", ".png": "png"}
MODEL_EXPLORER = ".json"  # render -o FILE.json: Model Explorer's graph (jitsim.explain.model_explorer)
INSTALL_HINT = "install graphviz (Debian/Ubuntu: apt-get install graphviz; macOS: brew install graphviz)"
LABEL_WIDTH = 32  # characters per line of a node name in a label (the tooltip has all of it)
COLLAPSED_MAX_BOXES = 120  # unclustered boxes in the collapsed view before the smallest are summarised
TOP_OPS = 4

# the colour of each reason-code family (jitsim.codes.FAMILIES: each code's ``family``):
# family -> (fill colour, what the family means)
_FILLS = {
    "unsupported": "#f8c6c6",
    "declustered": "#fddcaa",
    "configuration": "#c9ddff",
    "structural": "#e4e4e4",
    "clustered": "#ffffff",
    "record": "#ffffff",
}
FAMILIES = {**{family: (_FILLS[family], meaning) for family, meaning in CODE_FAMILIES.items()},
            "unknown": ("#ffffff", "no decision recorded")}


def code_family(code: str) -> str:
    """The colour family of a reason code (the catalogue's, :class:`~jitsim.codes.Code`);
    ``unknown`` for a node without a decision."""
    try:
        return Code(code).family
    except ValueError:  # UNKNOWN: no decision
        return "unknown"


def node_ids(c) -> dict[str, str]:
    """Node name -> the id its box has in the DOT source and the SVG (``n<index>``)."""
    return {name: f"n{i}" for i, name in enumerate(c.nodes)}


def cluster_ids(c) -> dict[str, str]:
    """Cluster name -> the id of its subgraph (full view) or box (collapsed view)."""
    return {name: f"c{i}" for i, name in enumerate(c.clusters)}


def choose_view(c, view: str = "auto", max_nodes: int = 400) -> str:
    if view not in VIEWS:
        raise JitsimError(f"unknown view {view!r}; one of {', '.join(VIEWS)}")
    if view == "auto":
        return "scopes" if len(c.nodes) > max_nodes else "full"
    return view


def _name_lines(name: str, width: int = LABEL_WIDTH) -> list[str]:
    """A node name as at most two label lines, broken after a '/' and keeping its end (the
    most specific part); what does not fit becomes '…' (the tooltip has the whole name)."""
    if len(name) <= width:
        return [name]
    parts = name.split("/")
    lines: list[str] = []
    while parts and len(lines) < 2:
        line = parts.pop()
        while parts and len(parts[-1]) + 1 + len(line) <= width:
            line = parts.pop() + "/" + line
        lines.insert(0, line)
    lines = [x if len(x) <= width + 8 else "…" + x[-(width + 7):] for x in lines]
    lines = [x + "/" for x in lines[:-1]] + lines[-1:]
    if parts:
        lines[0] = "…/" + lines[0]
    return lines


def _esc(s: str) -> str:
    """A string as a literal DOT escString: backslashes, a leading '<' and '&' (dot reads
    HTML entities like ``&amp;`` in any label) keep their plain meaning."""
    return graphviz.escape(s.replace("\r", " ").replace("&", "&amp;"))


def _label(*lines: str) -> str:
    """Label lines joined by DOT's centred line break, each line literal."""
    return graphviz.nohtml("\\n".join(_esc(x) for x in lines))


def _ops_text(counts: list[tuple[str, int]], limit: int) -> list[str]:
    out = [f"{op} ×{k}" if k > 1 else op for op, k in counts[:limit]]
    if len(counts) > limit:
        out.append(f"… {len(counts) - limit} more ops")
    return out


def _title(c) -> str:
    src = Path(c.source).name if c.source else "<graph>"
    return (f"{src}: {count(len(c.clusters), 'cluster')}, {c.compiled_nodes}/{len(c.nodes)} nodes compiled "
            f"({c.options.describe()})")


def _new_graph(c, view: str) -> graphviz.Digraph:
    g = graphviz.Digraph("jitsim", comment=f"jitsim render, {view} view")
    g.attr(rankdir="TB", fontname="Helvetica", fontsize="11", labelloc="t", labeljust="l", newrank="true",
           nodesep="0.25", ranksep="0.35")
    g.attr("node", shape="box", style="rounded,filled", fillcolor="#ffffff", fontname="Helvetica",
           fontsize="9", height="0.3", margin="0.08,0.03")
    g.attr("edge", color="#555555", arrowsize="0.6")
    return g


def _legend(g: graphviz.Digraph, codes: Counter) -> None:
    """A legend node: each unclustered reason code present, its family colour and count."""
    if not codes:
        return
    rows = []
    for code, n in sorted(codes.items(), key=lambda kv: (code_family(kv[0]), -kv[1], kv[0])):
        fill = FAMILIES[code_family(code)][0]
        rows.append(f'<TR><TD BGCOLOR="{fill}" ALIGN="LEFT">{_html(code)}</TD><TD ALIGN="RIGHT">{n}</TD></TR>')
    g.node("legend", label=("<<TABLE BORDER=\"0\" CELLBORDER=\"1\" CELLSPACING=\"0\" CELLPADDING=\"3\">"
                            "<TR><TD COLSPAN=\"2\"><B>not in a cluster</B></TD></TR>" + "".join(rows) + "</TABLE>>"),
           shape="plaintext", style="", id="legend", tooltip="reason codes of the nodes outside every cluster")


def _html(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _removed(rec) -> bool:
    """A node a later pass deleted: it has a record (and an explanation) but is not drawn."""
    return getattr(rec, "removed", False)


def _removed_note(c) -> list[str]:
    gone = [n for n, r in c.nodes.items() if _removed(r)]
    if not gone:
        return []
    shown = ", ".join(gone[:3]) + (", …" if len(gone) > 3 else "")
    return [f"not drawn: {len(gone)} nodes later passes deleted ({shown}); jitsim explain says why"]


def _edges(c):
    """(src name, dst name, is_control) for every edge between op nodes, deduplicated
    (a data edge wins over a control edge between the same two nodes)."""
    nodes, recs = c.graph.nodes, c.nodes
    seen: dict[tuple[str, str], bool] = {}
    for e in c.graph.edges():
        s, d = nodes[e.src], nodes[e.dst]
        if s is None or d is None or s.name not in recs or d.name not in recs:
            continue
        key = (s.name, d.name)
        seen[key] = seen.get(key, True) and e.is_control
    return [(s, d, ctrl) for (s, d), ctrl in seen.items()]


# -- full view ------------------------------------------------------------------------------


def _full(c) -> graphviz.Digraph:
    g = _new_graph(c, "full")
    ids, cids, colours = node_ids(c), cluster_ids(c), cluster_colours(c)
    for cname, members in c.clusters.items():
        fill, border = colours[cname]
        with g.subgraph(name=f"cluster_{cids[cname][1:]}") as sg:
            sg.attr(label=_esc(f"{cname} ({len(members)} nodes)"), style="rounded,filled", fillcolor=fill,
                    color=border, penwidth="1.5", fontsize="11", id=cids[cname], tooltip=_esc(cname))
            for m in members:
                rec = c.nodes[m]
                lines = [*_name_lines(m), rec.op] + ([rec.code] if rec.code != "CLUSTERED" else [])
                sg.node(ids[m], label=_label(*lines), color=border, id=ids[m],
                        tooltip=_esc(f"{m} ({rec.op}) in {cname}"))
    codes: Counter = Counter()
    for name, rec in c.nodes.items():
        if rec.cluster is not None or _removed(rec):
            continue
        codes[rec.code] += 1
        fill = FAMILIES[code_family(rec.code)][0]
        g.node(ids[name], label=_label(*_name_lines(name), rec.op, f"[{rec.code}]"), fillcolor=fill, id=ids[name],
               tooltip=_esc(f"{name} ({rec.op}): {rec.code}"))
    for s, d, ctrl in _edges(c):
        if ctrl:
            g.edge(ids[s], ids[d], style="dashed", color="#999999")
        else:
            g.edge(ids[s], ids[d])
    _legend(g, codes)
    g.attr(label=_label(_title(c), *_removed_note(c)))
    return g


# -- collapsed view -------------------------------------------------------------------------


def _collapsed(c) -> graphviz.Digraph:
    g = _new_graph(c, "collapsed")
    cids, colours = cluster_ids(c), cluster_colours(c)
    recs = c.nodes
    edges = _edges(c)
    # unclustered nodes that touch a cluster: the clusters they feed / are fed by
    ins: dict[str, set[str]] = defaultdict(set)
    outs: dict[str, set[str]] = defaultdict(set)
    for s, d, _ in edges:
        cs, cd = recs[s].cluster, recs[d].cluster
        if cs is not None and cd is None:
            ins[d].add(cs)
        elif cd is not None and cs is None:
            outs[s].add(cd)
    touching = [n for n, r in recs.items() if r.cluster is None and (n in ins or n in outs)]

    def key_of(n: str, with_op: bool):
        r = recs[n]
        return (r.code, r.op if with_op else None, tuple(sorted(ins.get(n, ()))), tuple(sorted(outs.get(n, ()))))

    groups: dict[tuple, list[str]] = {}
    for with_op in (True, False):
        groups = {}
        for n in touching:
            groups.setdefault(key_of(n, with_op), []).append(n)
        if len(groups) <= COLLAPSED_MAX_BOXES:
            break
    ordered = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0][0], kv[0][1] or "", kv[1][0]))
    kept, dropped = ordered[:COLLAPSED_MAX_BOXES], ordered[COLLAPSED_MAX_BOXES:]

    box_of: dict[str, str] = {}
    for cname, members in c.clusters.items():
        fill, border = colours[cname]
        lines = [cname, f"{len(members)} nodes"] + _ops_text(op_counts(c, members), TOP_OPS)
        g.node(cids[cname], label=_label(*lines), shape="box", style="filled,bold", fillcolor=fill, color=border,
               fontsize="10", id=cids[cname], tooltip=_esc(f"{cname}: {len(members)} nodes"))
        for m in members:
            box_of[m] = cids[cname]
    ids = node_ids(c)
    for i, ((code, op, _, _), members) in enumerate(kept):
        bid = f"u{i}"
        svg_id = ids[members[0]] if len(members) == 1 else bid
        fill = FAMILIES[code_family(code)][0]
        if len(members) == 1:
            m = members[0]
            label = _label(*_name_lines(m), recs[m].op, f"[{code}]")
            tip = f"{m} ({recs[m].op}): {code}"
        else:
            ops = _ops_text(op_counts(c, members), 2) if op is None else [f"{op} ×{len(members)}"]
            label = _label(f"{len(members)} nodes", *ops, f"[{code}]")
            shown = ", ".join(members[:10]) + (f", … {len(members) - 10} more" if len(members) > 10 else "")
            tip = f"{len(members)} nodes ({code}): {shown}"
        g.node(bid, label=label, fillcolor=fill, tooltip=_esc(tip), shape="box", id=svg_id,
               style="rounded,filled" + (",bold" if len(members) > 1 else ""))
        for m in members:
            box_of[m] = bid
    # aggregated edges between boxes; paths through hidden (unboxed) nodes become bridges
    agg: dict[tuple[str, str], list[int]] = {}
    hidden_succ: dict[str, list[str]] = defaultdict(list)  # hidden node -> successors
    box_exits: dict[str, list[str]] = defaultdict(list)  # box -> hidden successors of its members
    for s, d, ctrl in edges:
        bs, bd = box_of.get(s), box_of.get(d)
        if bs is not None and bd is not None:
            if bs != bd:
                a = agg.setdefault((bs, bd), [0, 0])
                a[1 if ctrl else 0] += 1
        elif bs is not None:
            box_exits[bs].append(d)
        else:
            hidden_succ[s].append(d)
    for (bs, bd), (data, ctrl) in agg.items():
        n = data + ctrl
        attrs = {"penwidth": f"{min(1 + math.log2(n) / 2, 5):.2f}"}
        if n > 1:
            attrs["label"] = f"{n}"
            attrs["fontsize"] = "8"
        if not data:
            attrs.update(style="dashed", color="#999999")
        g.edge(bs, bd, **attrs)
    bridges, complete = _bridges(box_of, box_exits, hidden_succ)
    bridges = _reduce_bridges(set(agg), bridges)
    for (bs, bd), k in sorted(bridges.items()):
        g.edge(bs, bd, style="dotted", color="#777777", tooltip=_esc(f"through {k} hidden unclustered nodes"))
    _legend(g, Counter(r.code for r in recs.values() if r.cluster is None and not _removed(r)))

    caption = [_title(c), "collapsed view: one box per cluster; unclustered nodes next to a cluster, grouped "
               "by reason code, op and neighbouring clusters; edge labels count the edges they stand for"]
    hidden = Counter(r.code for n, r in recs.items()
                     if r.cluster is None and n not in ins and n not in outs and not _removed(r))
    for _, members in dropped:
        for m in members:
            hidden[recs[m].code] += 1
    if hidden:
        parts = ", ".join(f"{code} {k}" for code, k in sorted(hidden.items(), key=lambda kv: (-kv[1], kv[0])))
        caption.append(f"not shown: {sum(hidden.values())} unclustered nodes ({parts})")
    if bridges:
        caption.append("dotted edges: paths through unclustered nodes that are not shown"
                       + ("" if complete else " (not all traced: graph too large)"))
    caption += _removed_note(c)
    caption.append("jitsim render --full draws every node")
    g.attr(label=_label(*caption))
    return g


# -- scope view -----------------------------------------------------------------------------

SCOPE_BAR_WIDTH = 120  # points: the cluster bar under a scope box


def _scope_bar(comp: Counter, colours) -> str:
    """An HTML-like table row: one cell per cluster of the box's nodes, as wide as its share
    (grey: nodes in no cluster), widest first."""
    total = sum(comp.values())
    cells = []
    for cl, k in sorted(comp.items(), key=lambda kv: (kv[0] is None, -kv[1], kv[0] or "")):
        w = max(1, round(SCOPE_BAR_WIDTH * k / total))
        col = colours[cl][1] if cl is not None else "#d0d0d0"
        cells.append(f'<TD WIDTH="{w}" HEIGHT="5" FIXEDSIZE="TRUE" BGCOLOR="{col}"></TD>')
    return ('<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="0"><TR>' + "".join(cells)
            + "</TR></TABLE>")


def _scopes(c) -> graphviz.Digraph:
    """The top level of the name-scope tree (:mod:`jitsim.explain.hierarchy`, the report's
    explorer at first paint): one box per top-level group with its node count and a bar of its
    nodes' clusters, the nodes at the top level as in the full view, edges bundled."""
    from jitsim.explain.hierarchy import scope_tree

    g = _new_graph(c, "scopes")
    recs = c.nodes
    names = [n for n, r in recs.items() if not _removed(r)]
    h = scope_tree(names)
    top_of: dict[str, str] = {}
    members: dict[int, list[str]] = defaultdict(list)
    for name, gid in zip(names, h.node_group):
        while gid and h.parents[gid] != 0:
            gid = h.parents[gid]
        if gid:
            top_of[name] = f"s{gid}"
            members[gid].append(name)
        else:
            top_of[name] = name
    colours, ids = cluster_colours(c), node_ids(c)
    for gid, ms in members.items():
        comp = Counter(recs[m].cluster for m in ms)
        ncl = sum(1 for cl in comp if cl is not None)
        info = count(len(ms), "node") + (f" · {count(ncl, 'cluster')}" if ncl else "")
        label = (f'<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="1">'
                 f'<TR><TD ALIGN="LEFT"><B>{_html(h.labels[gid])}</B></TD></TR>'
                 f'<TR><TD ALIGN="LEFT"><FONT POINT-SIZE="8" COLOR="#555555">{_html(info)}</FONT></TD></TR>'
                 f"<TR><TD>{_scope_bar(comp, colours)}</TD></TR></TABLE>>")
        top = ", ".join(f"{cl} {k}" for cl, k in comp.most_common(4) if cl is not None)
        g.node(f"s{gid}", label=label, id=f"s{gid}", style="rounded", color="#7d8590",
               tooltip=_esc(f"{'/'.join(h.path(gid))}: {info}" + (f" ({top}…)" if top else "")))
    for name in names:
        if top_of[name] != name:
            continue
        rec = recs[name]
        if rec.cluster is not None:
            fill, border = colours[rec.cluster]
            g.node(ids[name], label=_label(*_name_lines(name), rec.op, rec.cluster), fillcolor=fill, color=border,
                   id=ids[name], tooltip=_esc(name))
        else:
            g.node(ids[name], label=_label(*_name_lines(name), rec.op, f"[{rec.code}]"),
                   fillcolor=FAMILIES[code_family(rec.code)][0], id=ids[name], tooltip=_esc(name))
        top_of[name] = ids[name]
    agg: dict[tuple[str, str], list[int]] = {}
    for s_, d, ctrl in _edges(c):
        a, b = top_of.get(s_), top_of.get(d)
        if a is None or b is None or a == b:
            continue
        agg.setdefault((a, b), [0, 0])[1 if ctrl else 0] += 1
    for (a, b), (data, ctrl) in agg.items():
        n = data + ctrl
        attrs = {"penwidth": f"{min(1 + math.log2(n) / 2, 5):.2f}"}
        if n > 1:
            attrs.update(label=str(n), fontsize="8")
        if not data:
            attrs.update(style="dashed", color="#999999")
        g.edge(a, b, **attrs)
    g.attr(label=_label(_title(c), "scope view: the top level of the graph's name scopes (a wide level is grouped: "
                        "name_* a series, name* names that start alike, a … b a run); the bar under a box: its "
                        "nodes' clusters (grey: none); edge labels count the edges they stand for",
                        *_removed_note(c),
                        "jitsim report opens each box; jitsim render --collapsed: one box per cluster"))
    return g


def _bridges(box_of, box_exits, hidden_succ, budget: int = 2_000_000):
    """(box, box) -> number of hidden nodes on the paths from one box to the other that run
    through hidden nodes only; and whether every path was traced within ``budget`` steps."""
    out: dict[tuple[str, str], int] = {}
    steps = 0
    for b, starts in box_exits.items():
        seen: set[str] = set()
        stack = [n for n in starts if n not in box_of]
        reached: set[str] = set()
        while stack:
            n = stack.pop()
            if n in seen:
                continue
            seen.add(n)
            steps += 1
            if steps > budget:
                return out, False
            for m in hidden_succ.get(n, ()):
                bm = box_of.get(m)
                if bm is None:
                    stack.append(m)
                elif bm != b:
                    reached.add(bm)
        for bm in reached:
            out[(b, bm)] = len(seen)
    return out, True


def _reduce_bridges(direct: set, bridges: dict) -> dict:
    """Bridges not implied by other box-to-box paths (a transitive reduction; long implied
    edges are what make big pictures slow and unreadable). Keeps them all on a cyclic box graph."""
    import networkx as nx

    bridges = {k: v for k, v in bridges.items() if k not in direct}
    if not bridges:
        return bridges
    g = nx.DiGraph()
    g.add_edges_from(direct)
    g.add_edges_from(bridges)
    if not nx.is_directed_acyclic_graph(g):
        return bridges
    keep = nx.transitive_reduction(g)
    return {k: v for k, v in bridges.items() if keep.has_edge(*k)}


# dot's default layout search grows much faster than the picture: a collapsed ResNet-50
# training step (~470 boxes) ran for minutes. Above this many DOT statements the layout is
# bounded (one network-simplex pass, a cheaper crossing search, straight edges): seconds.
BOUNDED_LAYOUT_STATEMENTS = 300
BOUNDED_LAYOUT = {"nslimit": "1", "nslimit1": "1", "mclimit": "0.1", "splines": "line"}
# ... and dot never runs longer than this (seconds); then the command says so.
DOT_TIMEOUT_S = 120


def to_dot(c, view: str = "auto", max_nodes: int = 400) -> str:
    """The DOT source of the picture of ``c`` (see the module docstring for the views);
    a big picture carries :data:`BOUNDED_LAYOUT` so that dot lays it out in seconds."""
    view = choose_view(c, view, max_nodes)
    g = {"full": _full, "scopes": _scopes, "collapsed": _collapsed}[view](c)
    if len(g.body) > BOUNDED_LAYOUT_STATEMENTS:
        g.graph_attr.update(BOUNDED_LAYOUT)
    return g.source


def write_file(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically (never a half-written file)."""
    from jitsim.graph.io import write_atomic

    write_atomic(path, data)


def run_dot(source: str, fmt: str, dot: str | None = None, timeout: float | None = None) -> bytes:
    """``dot -T<fmt>`` on ``source``; raises :class:`JitsimError` when dot is missing, fails
    or runs longer than ``timeout`` seconds (default :data:`DOT_TIMEOUT_S`)."""
    dot = dot or shutil.which("dot")
    if dot is None:
        raise JitsimError(f"graphviz's dot is not installed: {INSTALL_HINT}")
    timeout = DOT_TIMEOUT_S if timeout is None else timeout
    try:
        p = subprocess.run([dot, f"-T{fmt}"], input=source.encode("utf-8"), capture_output=True, check=False,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        raise JitsimError(f"dot -T{fmt} did not finish within {timeout:.0f} s") from None
    except OSError as e:
        raise JitsimError(f"cannot run {dot}: {e}") from None
    if p.returncode != 0 or not p.stdout:
        err = (p.stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"])[-1]
        raise JitsimError(f"dot -T{fmt} failed (exit {p.returncode}): {err}")
    return p.stdout


def render_svg(c, view: str = "auto", max_nodes: int = 400) -> str | None:
    """The picture as SVG text, or None when graphviz's dot is not installed."""
    dot = shutil.which("dot")
    if dot is None:
        return None
    return run_dot(to_dot(c, view, max_nodes), "svg", dot).decode("utf-8")


def render_to_file(c, path, view: str = "auto", max_nodes: int = 400, progress=None) -> str:
    """Write the picture to ``path``; see :func:`render_file`. Returns a one-line message for
    the user (``wrote PATH (...)``)."""
    from jitsim.files.output import wrote_line

    info = render_file(c, path, view, max_nodes, progress)
    return wrote_line(info["output"], info["what"])


def check_suffix(path) -> None:
    """Refuse an output name ``render`` cannot write (before any simulation: the CLI checks it
    first, :func:`render_file` again)."""
    ext = Path(path).suffix.lower()
    if ext not in FORMATS and ext != MODEL_EXPLORER:
        raise JitsimError(f"unknown picture format {ext or '(no extension)'!r}; use .dot, .svg, .png or .json "
                          f"(a Model Explorer graph)", path)


def render_file(c, path, view: str = "auto", max_nodes: int = 400, progress=None) -> dict:
    """Write the picture to ``path`` (.dot/.gv: DOT source; .svg/.png: through ``dot``; .json:
    Model Explorer's graph, :mod:`jitsim.explain.model_explorer`, every node whatever ``view``).

    Without ``dot``, or when dot runs past :data:`DOT_TIMEOUT_S`, an image request writes the
    DOT source next to ``path`` (same stem, ``.dot``) and raises :class:`JitsimError` saying
    so. Files are written atomically. ``progress(text)`` hears what is being drawn before dot
    starts. Returns what was written: ``output``, ``format`` (the extension), ``view``, ``clusters``,
    ``nodes``, ``what`` (those in words)."""
    path = Path(path)
    ext = path.suffix.lower()
    check_suffix(path)
    if ext == MODEL_EXPLORER:  # Model Explorer's graph JSON: every node, each cluster a layer
        return _model_explorer_file(c, path)
    chosen = choose_view(c, view, max_nodes)
    source = to_dot(c, chosen, max_nodes)
    what = f"{count(len(c.clusters), 'cluster')}, {count(len(c.nodes), 'node')}, {chosen} view"
    info = {"output": str(path), "format": ext[1:], "view": chosen, "clusters": len(c.clusters),
            "nodes": len(c.nodes), "what": what}
    fmt = FORMATS[ext]
    if fmt is None:
        write_file(path, source.encode("utf-8"))
        return info
    dot = shutil.which("dot")
    if dot is None:
        dot_path = path.with_suffix(".dot")
        write_file(dot_path, source.encode("utf-8"))
        raise JitsimError(f"graphviz's dot is not installed, so no {ext[1:]} was written; wrote {dot_path} "
                          f"instead: {INSTALL_HINT}, then run: dot -T{fmt} {dot_path} -o {path}")
    if progress is not None:
        progress(f"graphviz dot drawing {what} (at most {DOT_TIMEOUT_S} s)")
    try:
        data = run_dot(source, fmt, dot)
    except JitsimError as e:
        if "did not finish" not in e.message:
            raise
        dot_path = path.with_suffix(".dot")
        write_file(dot_path, source.encode("utf-8"))
        raise JitsimError(f"{e.message}, so no {ext[1:]} was written; wrote {dot_path} instead "
                          f"(try --collapsed, or a .dot file and your own dot settings)", path) from None
    write_file(path, data)
    return info


def _model_explorer_file(c, path: Path) -> dict:
    """``render -o FILE.json``: the Model Explorer graph of :mod:`jitsim.explain.model_explorer`."""
    import json

    from jitsim.explain.model_explorer import collection_json

    doc = collection_json(c, f"jitsim: {Path(c.source).name if c.source else path.stem}")
    write_file(path, json.dumps(doc, separators=(",", ":")).encode("utf-8"))
    shown = len(doc["graphs"][0]["nodes"])
    return {"output": str(path), "format": "json", "view": "model-explorer", "clusters": len(c.clusters),
            "nodes": shown, "what": f"a Model Explorer graph ({count(len(c.clusters), 'cluster')} as layers, "
                                    f"{count(shown, 'node')}; open it with: model-explorer {path})"}
