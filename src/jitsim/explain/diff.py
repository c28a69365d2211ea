"""Cluster diffs: how one simulation (the variant) differs from another (the baseline).

Clusters are matched by the nodes they share, not by name (numbering changes whenever
clusters appear or vanish): the baseline's and the variant's clusters form a bipartite
"shares a node" graph, and each connected component is one change: unchanged, grown or
shrunk, several clusters merging, one splitting, a reshuffle, a new cluster, or one gone.
Node names pair the two sides, so the diff also works across two graphs; where one side's
names carry a prefix the other's lack (TF inlines a called function's body under its call
node's name: a SavedModel's signature wrapper adds ``StatefulPartitionedCall/`` to every node
of the model a ``.keras`` file holds), the prefix is removed first (:func:`match_names`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from jitsim.codes import Code
from jitsim.words import count

SCHEMA = "jitsim.diff/1"
# below this share of the smaller graph's nodes paired by name, the two graphs are said to be
# unrelated in one note line and the per-cluster changes are not listed (the JSON keeps them)
FEW_NAMES_MATCH = 0.25
PREFIX_DEPTH = 3  # name prefixes tried: up to this many leading path components
PREFIX_SHARE = 0.2  # ... shared by at least this share of a side's names


def _prefixes(names: list[str]) -> list[str]:
    """Leading path components (``a/``, ``a/b/``...) shared by many of ``names``, with ``""``."""
    counts: dict[str, int] = {}
    for n in names:
        parts = n.split("/")[:-1]
        for k in range(1, min(PREFIX_DEPTH, len(parts)) + 1):
            p = "/".join(parts[:k]) + "/"
            counts[p] = counts.get(p, 0) + 1
    need = max(1, int(PREFIX_SHARE * len(names)))
    return [""] + sorted((p for p, k in counts.items() if k >= need), key=lambda p: (-counts[p], p))[:8]


def _keyed(names: list[str], prefix: str) -> dict[str, str]:
    """name without ``prefix`` -> name, for the keys only one name gives."""
    out: dict[str, str | None] = {}
    for n in names:
        k = n[len(prefix):] if prefix and n.startswith(prefix) else n
        out[k] = None if k in out else n
    return {k: n for k, n in out.items() if n is not None}


def match_names(names_a: list[str], names_b: list[str]) -> tuple[dict[str, str], tuple[str, str]]:
    """Pair the nodes of two graphs by name: ``({name in b: name in a}, (prefix a, prefix b))``.
    Each side may drop one leading path prefix (``StatefulPartitionedCall/``, a function-inlining
    prefix) from the names that carry it, chosen among the prefixes many names share so that the
    most names pair unambiguously (a name two nodes of one side would take pairs with none); no
    prefix wins ties, and none is tried when 90% of the smaller side pairs as it is."""
    set_a = set(names_a)
    best, best_n = ("", ""), sum(1 for n in names_b if n in set_a)
    if best_n < 0.9 * min(len(names_a), len(names_b)):  # (nearly) every name already pairs: nothing to try
        pa_list, pb_list = _prefixes(names_a), _prefixes(names_b)
        keyed_a = {p: _keyed(names_a, p) for p in pa_list}
        for pb in pb_list:
            kb = _keyed(names_b, pb)
            for pa in pa_list:
                if (pa, pb) == ("", ""):
                    continue
                n = sum(1 for k in kb if k in keyed_a[pa])
                if n > best_n:
                    best, best_n = (pa, pb), n
    if best == ("", ""):
        return {n: n for n in names_b if n in set_a}, best
    ka, kb = _keyed(names_a, best[0]), _keyed(names_b, best[1])
    return {nb: ka[k] for k, nb in kb.items() if k in ka}, best


def _n(k: int) -> str:
    return f"{k} node" if k == 1 else f"{k} nodes"


@dataclass
class ClusterChange:
    kind: str  # same | grown | shrunk | changed | merge | split | reshuffle | new | gone
    a: list[str]  # baseline clusters involved
    b: list[str]  # variant clusters involved
    added: list[str] = field(default_factory=list)  # nodes compiled in b's clusters but not a's
    removed: list[str] = field(default_factory=list)  # nodes compiled in a's clusters but not b's
    size_a: int = 0
    size_b: int = 0

    def to_dict(self) -> dict:
        return {"kind": self.kind, "baseline": self.a, "variant": self.b, "size_baseline": self.size_a,
                "size_variant": self.size_b, "added": self.added, "removed": self.removed}

    def sentence(self, limit: int | None = None) -> str:
        """One sentence; ``limit``: at most that many cluster names per side, then "and N more"."""
        a, b = _names(self.a, limit), _names(self.b, limit)
        delta = ""
        if self.added or self.removed:
            delta = " (" + ", ".join(x for x in (f"+{_n(len(self.added))}" if self.added else "",
                                                 f"-{_n(len(self.removed))}" if self.removed else "") if x) + ")"
        if self.kind == "same":
            return f"{a} unchanged" + (f" (now {b})" if self.a != self.b else "")
        if self.kind in ("grown", "shrunk", "changed"):
            return f"{a} {self.kind} to {self.size_b} nodes" + (f" (now {b})" if self.a != self.b else "") + delta
        if self.kind == "merge":
            return f"{a} merge into {b} ({_n(self.size_b)})" + delta
        if self.kind == "split":
            return f"{a} splits into {b}" + delta
        if self.kind == "reshuffle":
            return f"{a} are regrouped as {b}" + delta
        if self.kind == "new":
            return f"new cluster {b} ({_n(self.size_b)})"
        return f"{a} disappears ({_n(self.size_a)} no longer compiled)"


def _names(names: list[str], limit: int | None = None) -> str:
    """``a``, ``a and b``, ``a, b and c``; beyond ``limit`` names: ``a, b, c and 97 more``."""
    if limit is not None and len(names) > limit:
        return ", ".join(names[:limit]) + f" and {len(names) - limit} more"
    return " and ".join(names) if len(names) <= 2 else ", ".join(names[:-1]) + " and " + names[-1]


HEADLINE_NAMES = 3  # cluster names per change in a headline (ResNet-50 merges hundreds)


@dataclass
class ClusterDiff:
    baseline: str
    variant: str
    changes: list[ClusterChange]
    clusters_a: int
    clusters_b: int
    compiled_a: int
    compiled_b: int
    code_changes: dict[tuple[str, str], list[str]]  # (code in a, code in b) -> nodes
    only_in_a: list[str] = field(default_factory=list)
    only_in_b: list[str] = field(default_factory=list)
    # how nodes were paired: {"paired", "baseline_nodes", "variant_nodes", "baseline_prefix",
    # "variant_prefix"}; notes: the pairing in words, when it is not plain equal names
    name_match: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    # why the two sides differ, where jitsim knows it (two releases: the data and rules that
    # changed, :func:`release_causes`): {"cause": words, "ops": [...], "nodes": [...]} each
    why: list[dict] = field(default_factory=list)

    @property
    def unrelated(self) -> bool:
        """Almost no node names pair: the two graphs are not one graph's variants."""
        m = self.name_match
        return bool(m) and m["paired"] < FEW_NAMES_MATCH * min(m["baseline_nodes"], m["variant_nodes"])

    @property
    def identical(self) -> bool:
        return (all(c.kind == "same" for c in self.changes) and not self.code_changes and not self.only_in_a
                and not self.only_in_b)

    @property
    def same_partition(self) -> bool:
        return all(c.kind == "same" for c in self.changes)

    def headline(self) -> str:
        """One line, e.g. ``cluster_3 and cluster_5 merge; 41 more nodes compiled``."""
        parts = []
        by_kind: dict[str, list[ClusterChange]] = {}
        for c in self.changes:
            by_kind.setdefault(c.kind, []).append(c)
        for kind in ("merge", "split", "reshuffle"):
            for c in by_kind.get(kind, [])[:3]:
                text = c.sentence(HEADLINE_NAMES)
                parts.append(text.split(" (")[0].replace(" into ", " (into ", 1) + (")" if " into " in text else ""))
            if len(by_kind.get(kind, [])) > 3:
                parts.append(f"{len(by_kind[kind]) - 3} more {kind}s")
        for kind, verb in (("grown", "grow"), ("shrunk", "shrink"), ("changed", "change members"),
                           ("new", "new"), ("gone", "disappear")):
            cs = by_kind.get(kind, [])
            if len(cs) == 1:
                parts.append(cs[0].sentence(HEADLINE_NAMES).split(" (")[0])
            elif cs:
                parts.append(f"{len(cs)} new clusters" if kind == "new" else f"{len(cs)} clusters {verb}")
        d = self.compiled_b - self.compiled_a
        if d:
            parts.append(f"{abs(d)} {'more' if d > 0 else 'fewer'} nodes compiled")
        if not parts:
            return "no change in the clusters" + ("" if not self.code_changes else " (some reasons changed)")
        return "; ".join(parts)

    def to_dict(self) -> dict:
        return {"schema": SCHEMA, "baseline": self.baseline, "variant": self.variant, "headline": self.headline(),
                "identical": self.identical, "clusters": [self.clusters_a, self.clusters_b],
                "compiled_nodes": [self.compiled_a, self.compiled_b],
                "changes": [c.to_dict() for c in self.changes if c.kind != "same"],
                "unchanged_clusters": [c.a[0] for c in self.changes if c.kind == "same"],
                "reason_changes": [{"baseline": a, "variant": b, "nodes": n}
                                   for (a, b), n in sorted(self.code_changes.items())],
                "only_in_baseline": self.only_in_a, "only_in_variant": self.only_in_b,
                "name_match": self.name_match, "notes": self.notes, "why": self.why}

    def format_text(self, limit: int = 20) -> str:
        out = [f"baseline: {self.baseline}: {count(self.clusters_a, 'cluster')}, {count(self.compiled_a, 'node')} compiled",
               f"variant:  {self.variant}: {count(self.clusters_b, 'cluster')}, {count(self.compiled_b, 'node')} compiled "
               f"({self.compiled_b - self.compiled_a:+d})",
               ""]
        out.extend(f"note: {n}" for n in self.notes)
        if self.unrelated:  # the changes would list every cluster as new and gone
            return "\n".join(out)
        out.append(self.headline())
        changed = [c for c in self.changes if c.kind != "same"]
        if changed:
            out.append("")
            for c in changed[:limit]:
                out.append("  " + c.sentence(12))
            if len(changed) > limit:
                out.append(f"  ... {len(changed) - limit} more (--format json lists all)")
        same = sum(1 for c in self.changes if c.kind == "same")
        if same:
            out.append(f"  {same} cluster{'s' if same != 1 else ''} unchanged")
        if self.code_changes:
            out.append("")
            out.append("nodes whose reason changed (baseline -> variant):")
            items = sorted(self.code_changes.items(), key=lambda kv: (-len(kv[1]), kv[0]))
            for (a, b), nodes in items[:limit]:
                shown = ", ".join(nodes[:5]) + (f", ... ({len(nodes) - 5} more)" if len(nodes) > 5 else "")
                out.append(f"  {a} -> {b}: {len(nodes)} node{'s' if len(nodes) != 1 else ''} ({shown})")
            if len(items) > limit:
                out.append(f"  ... {len(items) - limit} more")
        if self.why:
            out.append("")
            out.append("why:")
            for w in self.why[:limit]:
                nodes = w.get("nodes") or []
                shown = (": " + ", ".join(nodes[:5]) + (f", ... ({len(nodes) - 5} more)" if len(nodes) > 5 else "")
                         if nodes else "")
                out.append(f"  {w['cause']}" + (f" ({_n(len(nodes))}{shown})" if nodes else ""))
        for label, names in (("only in the baseline graph", self.only_in_a), ("only in the variant graph", self.only_in_b)):
            if names:
                out.append(f"{len(names)} nodes {label}: {', '.join(names[:8])}" + (" ..." if len(names) > 8 else ""))
        return "\n".join(out)


def diff_clusterings(a, b, *, baseline: str | None = None, variant: str | None = None) -> ClusterDiff:
    """Compare two :class:`~jitsim.explain.clustering.Clustering` results (``a`` = baseline)."""
    import networkx as nx

    la, lb_own = a.labels(), b.labels()
    to_a, (pa, pb) = match_names(list(la), list(lb_own))
    # the variant's names as the baseline's (a name that pairs with none stays as it is)
    rename = {n: to_a.get(n, n) for n in lb_own}
    lb = {rename[n]: c for n, c in lb_own.items() if n in to_a}
    common = [n for n in la if n in lb]
    b_members = {c: [rename[m] for m in ms] for c, ms in b.clusters.items()}
    bip = nx.Graph()
    for c in a.clusters:
        bip.add_node(("a", c))
    for c in b.clusters:
        bip.add_node(("b", c))
    for n in common:
        if la[n] is not None and lb[n] is not None:
            bip.add_edge(("a", la[n]), ("b", lb[n]))
    order_a = {c: i for i, c in enumerate(a.clusters)}
    order_b = {c: i for i, c in enumerate(b.clusters)}
    changes = []
    for comp in nx.connected_components(bip):
        ca = sorted((c for s, c in comp if s == "a"), key=order_a.get)
        cb = sorted((c for s, c in comp if s == "b"), key=order_b.get)
        ma = {m for c in ca for m in a.clusters[c]}
        mb = {m for c in cb for m in b_members[c]}
        added = sorted(mb - ma)
        removed = sorted(ma - mb)
        if not ca:
            kind = "new"
        elif not cb:
            kind = "gone"
        elif len(ca) == 1 and len(cb) == 1:
            kind = "same" if ma == mb else ("grown" if ma < mb else "shrunk" if mb < ma else "changed")
        elif len(cb) == 1:
            kind = "merge"
        elif len(ca) == 1:
            kind = "split"
        else:
            kind = "reshuffle"
        changes.append(ClusterChange(kind, ca, cb, added, removed, len(ma), len(mb)))
    changes.sort(key=lambda c: (order_a.get(c.a[0], 1 << 30) if c.a else 1 << 30,
                                order_b.get(c.b[0], 1 << 30) if c.b else 1 << 30))
    code_changes: dict[tuple[str, str], list[str]] = {}
    from_a = {na: nb for nb, na in to_a.items()}
    for n in common:
        ca_, cb_ = a.nodes[n].code, b.nodes[from_a[n]].code
        if ca_ != cb_:
            code_changes.setdefault((ca_, cb_), []).append(n)
    match = {"paired": len(common), "baseline_nodes": len(la), "variant_nodes": len(lb_own),
             "baseline_prefix": pa, "variant_prefix": pb}
    notes = []
    if pa or pb:
        which = " and ".join(f"{side}'s {p!r}" for side, p in (("the baseline", pa), ("the variant", pb)) if p)
        notes.append(f"nodes paired by name after removing {which} from the names that carry it (TF inlines a "
                     f"called function's nodes under the call's name): {len(common)} of {len(la)} baseline and "
                     f"{len(lb_own)} variant nodes paired")
    d = ClusterDiff(
        baseline or a.options.describe(), variant or b.options.describe(), changes,
        len(a.clusters), len(b.clusters), a.compiled_nodes, b.compiled_nodes, code_changes,
        [n for n in la if n not in lb], [n for n in lb_own if n not in to_a], match, notes)
    for side, c in (("baseline", a), ("variant", b)):
        gd = getattr(c, "graph_decision", None)
        if gd is not None and gd.code == Code.GRAPH_ALREADY_CLUSTERED:
            d.notes.append(f"the {side} graph already carries TF's clustering (_XlaAlreadyClustered: a "
                           "mark_for_compilation dump or a later stage), which TF never clusters again, so its nodes "
                           "are GRAPH_ALREADY_CLUSTERED here; to score jitsim's clusters against TF's marks, use "
                           "`jitsim crosscheck compare PREDICTED TRUTH` (the dump jitsim clusters, TF's marked dump)")
    if d.unrelated:
        d.notes.append(f"only {len(common)} of {len(la)} baseline and {len(lb_own)} variant node names pair (even "
                       "without a common prefix): the two graphs do not look like one model, so their clusters "
                       "are not compared cluster by cluster (--format json has the raw comparison)")
    return d


def changed_nodes(d: ClusterDiff) -> set[str]:
    """The nodes a diff moved (in or out of a cluster, or to another one) or gave another reason."""
    out = set()
    for c in d.changes:
        if c.kind != "same":
            out.update(c.added)
            out.update(c.removed)
    for nodes in d.code_changes.values():
        out.update(nodes)
    return out


def release_causes(a, b, ra: str, rb: str, *, route: str | None = None, flags: str = "") -> list[dict]:
    """Why clusterings ``a`` (TF ``ra``) and ``b`` (TF ``rb``) of one graph differ: for each op of
    the graph whose data differ between the releases (:func:`jitsim.registry.releases.
    op_differences`), the change and the nodes of that op the diff moved or re-reasoned (all
    its nodes when none was: the change did not move them); and each rule of
    :data:`jitsim.registry.releases.RULES` that differs between them on the simulation's route
    and, for these ``flags``, changes what TF does; and each entry of
    :data:`jitsim.registry.releases.GRAPH_BUILDS` the graph shows (the older release's Python
    built these nodes: the newer one builds other nodes for the same call)."""
    from jitsim.flags import remapper_cpu_fusions_off
    from jitsim.registry.releases import graph_build_differences, op_differences, rule_differences

    moved = changed_nodes(diff_clusterings(a, b))
    out = []
    for op, nodes in sorted(_ops_of(a).items()):
        diffs = op_differences(op, ra, rb)
        if not diffs:
            continue
        hit = sorted(n for n in nodes if n in moved)
        out.append({"cause": f"{op}: {'; '.join(diffs)}", "ops": [op], "nodes": hit,
                    "moved": bool(hit)})
    for rule in rule_differences(ra, rb):
        if rule.name == "remapper_flag_split" and \
                remapper_cpu_fusions_off(flags, ra) == remapper_cpu_fusions_off(flags, rb):
            continue  # these flags read the same under both releases
        new, old = (rb, ra) if rule.applies(rb) else (ra, rb)
        cause = f"rule {rule.name}: TF {old}: {rule.before}; TF {new}: {rule.after}"
        if rule.route == "all" or rule.route == route:  # simulated here: the nodes it moved
            out.append({"cause": cause, "ops": [], "nodes": sorted(moved), "moved": bool(moved)})
        else:  # it acts before this graph (TF's pass input of one release): the nodes it made
            fused = sorted(n for op, nodes in _ops_of(a).items() if op.startswith(_FUSED_PREFIXES) for n in nodes)
            if fused:
                out.append({"cause": cause + f" (this graph is TF {ra}'s pass input: its remapper's fused nodes would "
                                             f"not be fused under TF {new}, and the clusters around them change)",
                            "ops": [], "nodes": fused, "moved": False})
    for gb, hit in graph_build_differences(a.graph.op_nodes(), ra, rb):
        old, new = (ra, rb) if gb.applies(rb) else (rb, ra)
        which = f"this graph is TF {old}'s build" if gb.certain else f"if this graph is TF {old}'s build"
        out.append({"cause": f"python {gb.name}: TF {old}'s Python builds {gb.api} as {gb.before}; TF {new}'s as "
                             f"{gb.after} ({which}: rebuilt under TF {new}, it holds other nodes here and their "
                             f"clusters may differ; capture the program under TF {new} for them)",
                    "ops": sorted({n.op for n in a.graph.op_nodes() if n.name in set(hit)}), "nodes": sorted(hit),
                    "moved": False})
    return out


def upgrade_report(a, b, *, baseline: str | None = None, variant: str | None = None) -> ClusterDiff:
    """The upgrade report: one graph's clusterings ``a`` and ``b`` under two TF releases (their
    ``options.tf_version``), diffed node by node (:func:`diff_clusterings`), with ``why``
    (:func:`release_causes`): the release data and rules behind each change. ``jitsim diff G
    --tf-version A --tf-version B`` prints it."""
    ra, rb = a.options.tf_version, b.options.tf_version
    d = diff_clusterings(a, b, baseline=baseline, variant=variant)
    route = a.route.method if a.route is not None else None
    d.why = release_causes(a, b, ra, rb, route=route, flags=a.options.flags_text)
    return d


# the ops Grappler's remapper makes (its CPU and oneDNN fusions)
_FUSED_PREFIXES = ("_Fused", "_Mkl")


def _ops_of(c) -> dict[str, list[str]]:
    """op type -> the names of its nodes, in a clustering's input graph."""
    out: dict[str, list[str]] = {}
    for name, rec in c.nodes.items():
        out.setdefault(rec.op, []).append(name)
    return out
