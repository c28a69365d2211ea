"""Explanations: why a node is (not) in a cluster, why two nodes are (not) together.

Built only from the records the passes kept (:class:`~jitsim.explain.clustering.Clustering`):
each node's decisions, the contraction group each candidate ended in, the refused merges.
``str()`` gives the text ``jitsim explain`` prints; ``to_dict()`` the JSON
(schema ``jitsim.explain/1``, docs/cli.md).
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field

from jitsim.codes import Code
from jitsim.explain import summary
from jitsim.explain.reasons import REASONS
from jitsim.defs import MARK_FOR_COMPILATION_PASS
from jitsim.opsets import CONSTANT_OPS

SCHEMA = "jitsim.explain/1"
# the text stays readable: no line longer than this (the JSON keeps every record whole) ...
LINE_LIMIT = 300
# ... and refused merges are grouped by reason, then by the other cluster: this many of each shown
MERGE_TARGETS_SHOWN = 3


MERGES_LISTED = 8  # up to this many refused merges are listed one by one
NOTE_WIDTH = 120  # a note longer than LINE_LIMIT is wrapped to this width


def fit(line: str, limit: int = LINE_LIMIT) -> str:
    """``line`` at most ``limit`` characters: its middle left out (both ends tell: a path's
    first and last steps), saying how much."""
    if len(line) <= limit:
        return line
    keep = limit - 48
    head, tail = line[:keep * 2 // 3], line[len(line) - keep // 3:]
    return f"{head} … ({len(line) - len(head) - len(tail)} chars; --format json has all) … {tail}"


def _reason_dict(code: str) -> dict:
    r = REASONS.get(code)
    if r is None:
        return {"code": code, "title": code, "hint": "", "explanation": "", "docs": ""}
    return {"code": code, "title": r.title, "hint": r.hint, "explanation": r.explanation, "docs": r.anchor}


def _index(c) -> tuple[dict[str, list[str]], dict[str, str]]:
    """(group -> members, group -> cluster name), computed once per Clustering."""
    idx = getattr(c, "_group_index", None)
    if idx is None:
        members: dict[str, list[str]] = {}
        names: dict[str, str] = {}
        for n, rec in c.nodes.items():
            if rec.group is not None:
                members.setdefault(rec.group, []).append(n)
                if rec.group not in names and (rec.cluster or rec.mark_cluster):
                    names[rec.group] = rec.cluster or rec.mark_cluster
        idx = c._group_index = (members, names)
    return idx


def group_name(c, group: str | None) -> str | None:
    """A name for a contraction group: its final cluster, else its mark cluster, else None."""
    return None if group is None else _index(c)[1].get(group)


def _groups(c) -> dict[str, list[str]]:
    return _index(c)[0]


def _label(c, group: str, members: list[str]) -> str:
    name = group_name(c, group)
    if name:
        return name
    return f"the unclustered group of {members[0]}" + (f" (+{len(members) - 1})" if len(members) > 1 else "")


def _adjacent(c, ga: str, gb: str) -> bool:
    g = c.graph
    nodes = g.nodes
    recs = c.nodes
    for e in g.edges():
        s, d = nodes[e.src], nodes[e.dst]
        if s is None or d is None or s.name not in recs or d.name not in recs:
            continue
        if {recs[s.name].group, recs[d.name].group} == {ga, gb} and ga != gb:
            return True
    return False


# evidence keys shown elsewhere in an explanation, or folded into another key's line
_SHOWN_ELSEWHERE = {"would_be_members", "min_cluster_size", "cluster", "jit_device"}


def format_evidence(ev: dict) -> list[str]:
    """Evidence as short readable lines."""
    lines = []
    done = set(_SHOWN_ELSEWHERE)
    if "attr" in ev and "type" in ev:
        allowed = ev.get("allowed")
        where = f" on {ev['jit_device']}" if ev.get("jit_device") else ""
        lines.append(f"{ev.get('op', 'the op')}'s {ev['attr']}={ev['type']}"
                     + (f" is not among the types XLA accepts{where}: {', '.join(allowed)}" if allowed else " is not set"))
        done |= {"attr", "type", "allowed", "op"}
    elif ev.get("kernel") is False:
        lines.append(f"XLA has no {ev.get('jit_device', 'XLA')} kernel at all for op {ev.get('op')}")
        done |= {"kernel", "op"}
    if "writer" in ev and "reader" in ev:
        lines.append(f"{ev['writer']} ({ev.get('writer_op', '?')}) writes a resource and "
                     f"{ev['reader']} ({ev.get('reader_op', '?')}) would then read one inside the merged cluster")
        done |= {"writer", "writer_op", "reader", "reader_op"}
    for a, b, what in (("from_predicate", "to_predicate", "deadness"), ("from_scope", "to_scope", "scopes"),
                       ("from_devices", "to_devices", "devices")):
        if a in ev and b in ev:
            lines.append(f"{what}: {_short(ev[a])}  vs  {_short(ev[b])}")
            done |= {a, b}
    if "cluster_size" in ev and "effective_size" in ev:
        lines.append(f"size {ev['cluster_size']}, effective size {ev['effective_size']} (Const and Identity "
                     "do not count)")
        done |= {"cluster_size", "effective_size"}
    for k, v in ev.items():
        if k in done:
            continue
        if k == "path" and "route" not in ev:
            lines.append("cycle through: " + " -> ".join(v) if v else "cycle: (path not recorded)")
        elif k == "path":
            continue
        elif k == "route":
            lines.append("the other path: " + " -> ".join(v))
        elif k == "inside":
            lines.append("inside: " + " -> ".join(v))
        elif isinstance(v, list):
            lines.append(f"{k}: {_short(v)}")
        else:
            lines.append(f"{k}: {v}")
    return lines


def _short(v, limit: int = 12) -> str:
    if isinstance(v, list):
        return ", ".join(str(x) for x in v[:limit]) + (f", ... ({len(v) - limit} more)" if len(v) > limit else "")
    return str(v)


@dataclass
class MergeNote:
    """A refused merge as seen from one cluster."""

    other: str  # the other cluster (or group) label
    direction: str  # "into" (this group was the source) or "from"
    phase: int
    code: str
    detail: str
    evidence: dict

    def to_dict(self) -> dict:
        return {"other": self.other, "direction": self.direction, "phase": self.phase, "code": self.code,
                "detail": self.detail, "evidence": self.evidence, **{"reason": _reason_dict(self.code)}}

    @property
    def arrow(self) -> str:
        return f"-> {self.other}" if self.direction == "into" else f"<- {self.other}"

    def line(self) -> str:
        title = REASONS[self.code].title if self.code in REASONS else self.code
        ev = "; ".join(format_evidence(self.evidence))
        return f"{self.arrow} (phase {self.phase}) {self.code}: {title}" + (f" [{ev}]" if ev else "")


def merge_lines(merges: list[MergeNote], indent: str, all_merges: bool = False) -> list[str]:
    """Refused merges as short lines: one line each with ``all_merges`` (or when there are few),
    else grouped by reason code, then by the other cluster (count, phases, one example each, at
    most :data:`MERGE_TARGETS_SHOWN` other clusters per code), most frequent first."""
    if all_merges or len(merges) <= MERGES_LISTED:
        return [fit(indent + m.line()) for m in merges]
    by_code: dict[str, dict[str, list[MergeNote]]] = {}
    for m in merges:  # in TF's order: the first of each group is its example
        by_code.setdefault(m.code, {}).setdefault(m.arrow, []).append(m)
    out = []
    for code, targets in sorted(by_code.items(), key=lambda kv: -sum(len(v) for v in kv[1].values())):
        title = REASONS[code].title if code in REASONS else code
        n = sum(len(v) for v in targets.values())
        out.append(fit(f"{indent}{code} ×{n}: {title}" + (f" ({len(targets)} other clusters)" if len(targets) > 1
                                                            else "")))
        ranked = sorted(targets.items(), key=lambda kv: -len(kv[1]))
        for arrow, ms in ranked[:MERGE_TARGETS_SHOWN]:
            phases = ", ".join(str(p) for p in sorted({m.phase for m in ms}))
            ev = "; ".join(format_evidence(ms[0].evidence))
            count = f" ×{len(ms)}" if len(ms) > 1 else ""
            out.append(fit(f"{indent}  {arrow}{count} (phase {phases})" + (f", e.g. [{ev}]" if ev else "")))
        if len(ranked) > MERGE_TARGETS_SHOWN:
            rest = ranked[MERGE_TARGETS_SHOWN:]
            out.append(f"{indent}  ... {sum(len(v) for _, v in rest)} more with {len(rest)} other clusters")
    out.append(f"{indent}(--all lists each of the {len(merges)} refused merges; --format json has every record)")
    return out


@dataclass
class NodeExplanation:
    node: str
    op: str
    device: str
    cluster: str | None
    mark_cluster: str | None
    code: str
    detail: str
    evidence: dict
    history: list[dict] = field(default_factory=list)  # every pass's decision, in order
    cluster_size: int = 0
    cluster_ops: str = ""
    group_members: list[str] = field(default_factory=list)
    boundary: list[dict] = field(default_factory=list)  # for a too-small group: its outside neighbours
    merges: list[MergeNote] = field(default_factory=list)  # refused merges of its cluster/group
    notes: list[str] = field(default_factory=list)
    removed: bool = False
    created_by: str | None = None

    @property
    def reason(self) -> dict:
        return _reason_dict(self.code)

    def to_dict(self) -> dict:
        return {"schema": SCHEMA, "kind": "node", "node": self.node, "op": self.op, "device": self.device,
                "cluster": self.cluster, "mark_cluster": self.mark_cluster, "code": self.code,
                "reason": self.reason, "detail": self.detail, "evidence": self.evidence, "history": self.history,
                "cluster_size": self.cluster_size, "group_members": self.group_members, "boundary": self.boundary,
                "refused_merges": [m.to_dict() for m in self.merges], "notes": self.notes,
                "removed": self.removed, "created_by": self.created_by}

    def __str__(self) -> str:
        return self.format_text()

    def format_text(self, all_merges: bool = False) -> str:
        """The text ``jitsim explain`` prints: the answer first (where the node is, why, what to
        change), then the history, the would-be cluster, the refused merges grouped
        (``all_merges``: one line each), the notes; no line longer than :data:`LINE_LIMIT`."""
        r = self.reason
        head = f"{self.node} ({self.op}" + (f" on {self.device}" if self.device else "") + ")"
        if self.removed:
            out = [f"{head} is no longer in the graph: a later pass replaced it."]
        elif self.cluster:
            out = [f"{head} is in {self.cluster} ({self.cluster_size} nodes: {self.cluster_ops})."]
        else:
            out = [f"{head} is not in any cluster."]
        if self.code != Code.CLUSTERED:
            out.append(f"  reason:    {self.code}: {r['title']}")
            if self.detail and self.detail != r["title"]:
                out.append(f"  TF says:   {self.detail.splitlines()[0]}")
            for line in format_evidence(self.evidence):
                out.append(f"  evidence:  {line}")
            if r["hint"]:
                out.append(f"  change:    {r['hint']}")
            out.append(f"  docs:      {r['docs']}")
        if len(self.history) > 1:
            out.append("  history:   " + " -> ".join(f"{h['pass']}: {h['code']}" for h in self.history))
        if self.group_members and not self.cluster and self.code in (Code.CLUSTER_TOO_SMALL, Code.CLUSTER_NOT_COMPILED):
            out.append(f"  its would-be cluster: {_short(self.group_members)}")
            if self.boundary:
                out.append("  which could not grow past: " + "; ".join(
                    f"{'<-' if b['direction'] == 'in' else '->'} {b['node']} ({b['op']}: {b['code']})"
                    for b in self.boundary[:8]) + (f"; ... ({len(self.boundary) - 8} more)" if len(self.boundary) > 8 else ""))
        if self.merges:
            out.append("  merges TF refused for its cluster:" if self.cluster or self.group_members else
                       "  merges TF refused:")
            out.extend(merge_lines(self.merges, "    ", all_merges))
        out = [fit(line) for line in out]
        for n in self.notes:  # last; a long one wrapped, not cut: a note's every clause counts
            line = f"  note: {n}"
            out.extend([line] if len(line) <= LINE_LIMIT else
                       textwrap.wrap(line, NOTE_WIDTH, subsequent_indent="        ", break_on_hyphens=False))
        return "\n".join(out)


def _refusals_by_group(c) -> dict[str, list]:
    idx = getattr(c, "_refusal_index", None)
    if idx is None:
        idx = {}
        for r in c.refusals:
            fa, fb = c.nodes[r.from_node].group, c.nodes[r.to_node].group
            if fa == fb:
                continue
            idx.setdefault(fa, []).append((r, fa, fb))
            idx.setdefault(fb, []).append((r, fa, fb))
        c._refusal_index = idx
    return idx


def _where(c, entry: str) -> str:
    """A cycle-path entry (``name`` or ``name (+k others)``) with the node's final cluster."""
    name = entry.split(" (+", 1)[0]
    rec = c.nodes.get(name)
    if rec is None:
        return entry
    where = rec.cluster or (rec.code if rec.group is None else None)
    return f"{entry} [{where}]" if where else entry


def _merge_notes(c, group: str) -> list[MergeNote]:
    groups = _groups(c)
    notes = []
    seen = set()
    for r, fa, fb in _refusals_by_group(c).get(group, ()):
        other = fb if fa == group else fa
        key = (other, r.code, fa == group, r.detail, repr(sorted(r.evidence.items())))
        if key in seen:  # the same refusal repeats in later phases
            continue
        seen.add(key)
        ev = dict(r.evidence)
        if r.code == Code.MERGE_CYCLE and ev.get("path"):
            ev["route"] = [_where(c, x) for x in [r.from_node, *ev["path"], r.to_node]]
        notes.append(MergeNote(_label(c, other, groups.get(other, [other])), "into" if fa == group else "from",
                               r.phase, r.code, r.detail, ev))
    return notes


def _boundary(c, group: str) -> list[dict]:
    """Data/control neighbours of a contraction group that are outside it (non-candidates or
    other groups), each with its reason code: what the group could not absorb."""
    g = c.graph
    nodes = g.nodes
    members = set(_groups(c)[group])
    out, seen = [], set()
    for m in _groups(c)[group]:
        if m not in g.by_name:  # deleted by a later pass
            continue
        n = nodes[g.by_name[m]]
        for direction, edges, end in (("in", n.in_edges.values(), "src"), ("out", n.out_edges.values(), "dst")):
            for e in edges:
                other = nodes[getattr(e, end)]
                if other is None or other.name in members or other.name not in c.nodes or (direction, other.name) in seen:
                    continue
                seen.add((direction, other.name))
                r = c.nodes[other.name]
                out.append({"direction": direction, "node": other.name, "op": other.op,
                            "code": r.cluster or r.code})
    return out


def _per(c, kind: str, key, compute):
    """What every member of a cluster / contraction group shares, computed once per
    Clustering (explaining every node of a 14k-node cluster is otherwise quadratic)."""
    caches = c.__dict__.setdefault("_explain_cache", {})
    cache = caches.setdefault(kind, {})
    if key not in cache:
        cache[key] = compute()
    return cache[key]


def explain_node(c, name: str) -> NodeExplanation:
    rec = c.nodes[name]
    final = rec.final
    history = []
    if rec.decision is not None:
        history.append({"pass": MARK_FOR_COMPILATION_PASS, **rec.decision.to_dict()})
    for p, d in rec.later:
        history.append({"pass": p, **d.to_dict()})
    ex = NodeExplanation(name, rec.op, rec.device, rec.cluster, rec.mark_cluster, rec.code,
                         final.detail if final else "", dict(final.evidence) if final else {}, history,
                         removed=rec.removed, created_by=rec.created_by)
    if rec.created_by:
        ex.notes.append(f"created by {rec.created_by}")
    if rec.cluster:
        members = c.clusters[rec.cluster]
        ex.cluster_size = len(members)
        ex.cluster_ops = _per(c, "ops", rec.cluster, lambda: summary.op_summary(c, members))
    if rec.group is not None:
        ex.group_members = list(_groups(c)[rec.group])
        ex.merges = list(_per(c, "merges", rec.group, lambda: _merge_notes(c, rec.group)))
        if rec.cluster is None and not rec.removed:
            ex.boundary = list(_per(c, "boundary", rec.group, lambda: _boundary(c, rec.group)))
    if rec.cluster is None and rec.mark_cluster is not None and not rec.removed:
        ex.notes.append(f"mark-for-compilation put it in {rec.mark_cluster}; a later pass took it out")
    if c.graph_decision is not None and rec.code == c.graph_decision.code:
        ex.notes.append("this decision is about the whole graph: TF did not run clustering on it")
    ex.notes.extend(c.notes)
    return ex


@dataclass
class ClusterExplanation:
    """What a cluster is (``jitsim explain GRAPH cluster_N``): its nodes and ops, the nodes
    mark-for-compilation put in it that a later pass took out (each with that pass's code), the
    merges TF refused for it, and where to go next (a node of it; ``--shapes`` for its
    recompiles)."""

    cluster: str
    members: list[str]
    ops: str
    taken_out: list[dict] = field(default_factory=list)  # node, code: mark put it in, a later pass took it out
    merges: list[MergeNote] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    example: str = ""  # a member to explain next (not a constant, where there is one)

    def to_dict(self) -> dict:
        return {"schema": SCHEMA, "kind": "cluster", "cluster": self.cluster, "size": len(self.members),
                "members": self.members, "ops": self.ops, "taken_out": self.taken_out,
                "refused_merges": [m.to_dict() for m in self.merges], "notes": self.notes}

    def format_text(self, all_merges: bool = False) -> str:
        out = [f"{self.cluster} is a cluster of {len(self.members)} nodes ({self.ops}): TF compiles them as one "
               "XLA computation.",
               f"  nodes:     {_short(self.members)}"]
        if self.taken_out:
            out.append("  taken out after mark-for-compilation: " + ", ".join(
                f"{t['node']} ({t['code']})" for t in self.taken_out[:8])
                + (f", ... ({len(self.taken_out) - 8} more)" if len(self.taken_out) > 8 else ""))
        if self.merges:
            out.append("  merges TF refused for it:")
            out.extend(merge_lines(self.merges, "    ", all_merges))
        out.append(f"  next:      jitsim explain GRAPH {self.example} (why a node is in it); with --shapes "
                   "SHAPES.jsonl, why it recompiles")
        out = [fit(line) for line in out]
        out.extend(f"  note: {n}" for n in self.notes)
        return "\n".join(out)


def explain_cluster(c, name: str) -> ClusterExplanation:
    members = list(c.clusters[name])
    ex = ClusterExplanation(name, members, summary.op_summary(c, members))
    ex.example = next((m for m in members if c.nodes[m].op not in CONSTANT_OPS), members[0])
    ex.taken_out = [{"node": n, "code": str(r.code)} for n, r in c.nodes.items()
                    if r.mark_cluster == name and r.cluster is None and not r.removed]
    group = c.nodes[members[0]].group if members else None
    if group is not None:
        ex.merges = list(_merge_notes(c, group))
    ex.notes.extend(c.notes)
    return ex


@dataclass
class PairExplanation:
    a: NodeExplanation
    b: NodeExplanation
    together: bool
    verdict: str
    refusals: list[MergeNote] = field(default_factory=list)
    adjacent: bool | None = None

    def to_dict(self) -> dict:
        return {"schema": SCHEMA, "kind": "pair", "together": self.together, "verdict": self.verdict,
                "adjacent": self.adjacent, "refused_merges": [m.to_dict() for m in self.refusals],
                "a": self.a.to_dict(), "b": self.b.to_dict()}

    @property
    def codes(self) -> list[str]:
        return [m.code for m in self.refusals]

    def __str__(self) -> str:
        return self.format_text()

    def format_text(self, all_merges: bool = False) -> str:
        """The verdict first, then the merges refused between the two (grouped unless
        ``all_merges``), then each node not clustered, as :meth:`NodeExplanation.format_text`."""
        out = [fit(self.verdict)]
        if self.refusals:
            out.append("merges TF refused between them:")
            out.extend(merge_lines(self.refusals, "  ", all_merges))
        for ex in (self.a, self.b):
            if not self.together and ex.code != Code.CLUSTERED:
                out.append("")
                out.append(ex.format_text(all_merges))
        return "\n".join(out)


def explain_pair(c, a: str, b: str) -> PairExplanation:
    ea, eb = explain_node(c, a), explain_node(c, b)
    ra, rb = c.nodes[a], c.nodes[b]
    if a == b:
        return PairExplanation(ea, eb, True, f"{a} and {b} are the same node")
    if ra.cluster is not None and ra.cluster == rb.cluster:
        return PairExplanation(ea, eb, True, f"{a} and {b} are both in {ra.cluster}.")
    outside = [x for x, r in ((a, ra), (b, rb)) if r.group is None]
    if outside:
        who = " and ".join(f"{x} ({c.nodes[x].code})" for x in outside)
        verb = "is" if len(outside) == 1 else "are"
        return PairExplanation(ea, eb, False, f"{a} and {b} cannot share a cluster: {who} {verb} not a "
                               "compilation candidate.")
    if ra.group == rb.group:
        why = []
        for x, r in ((a, ra), (b, rb)):
            if r.cluster is None:
                why.append(f"{x}: {r.code}")
        return PairExplanation(ea, eb, False, f"{a} and {b} were contracted into the same group, but "
                               + ("; ".join(why) or "a later pass separated them") + ".")
    groups = _groups(c)
    la, lb = _label(c, ra.group, groups[ra.group]), _label(c, rb.group, groups[rb.group])
    notes = [m for m in _merge_notes(c, ra.group) if m.other == lb]
    adjacent = _adjacent(c, ra.group, rb.group)
    if notes:
        codes = sorted({m.code for m in notes})
        verdict = (f"{a} is in {la} and {b} in {lb}: TF tried to merge the two and refused "
                   f"({', '.join(codes)}).")
    elif not adjacent:
        verdict = (f"{a} is in {la} and {b} in {lb}: no edge joins the two, and TF only merges clusters "
                   "along an edge (what lies between them is not clusterable or belongs to other clusters).")
    else:
        verdict = f"{a} is in {la} and {b} in {lb}: adjacent, but no refused merge was recorded between them."
    return PairExplanation(ea, eb, False, verdict, notes, adjacent)
