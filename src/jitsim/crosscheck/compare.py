"""Score a predicted XLA clustering against the real one (the partition scorer).

A *labelling* maps node name -> cluster name, or ``None`` for "not clustered".
Two labellings are compared: PREDICTED (what jitsim says) and TRUTH (what a real
TensorFlow dump says).  Cluster *names* are arbitrary: jitsim's ``cluster_7`` may
be TF's ``cluster_2``.  So equality is judged on the **partitions**: two
labellings are *identical* when they have the same node set, the same nodes are
unclustered, and the clustered nodes are grouped into the same sets.  Whether the
names also agree is reported separately (``same_names``).

Vocabulary used below: a node is *common* when it is a key of both labellings;
*both-clustered* when it is common and has a cluster in both.  For a TRUTH
cluster ``T`` and a PREDICTED cluster ``P`` their *overlap* is the number of
both-clustered nodes labelled ``T`` in TRUTH and ``P`` in PREDICTED.

The best-matching PREDICTED cluster of ``T`` (``cluster_map[T]``) is the ``P``
with the largest overlap with ``T``, ties broken by the smallest name (plain
string order, so ``"cluster_10" < "cluster_9"``); ``None`` if no node of ``T`` is
both-clustered.  Symmetrically, the best-matching TRUTH cluster of ``P`` is the
``T`` with the largest overlap, ties broken by the smallest name.

Difference kinds (each differing node gets exactly one, see precedence):

``absent_in_predicted``
    the node is a key of TRUTH only (the two graphs differ).
``absent_in_truth``
    the node is a key of PREDICTED only.
``missing``
    common; clustered in TRUTH, unclustered in PREDICTED.
``extra``
    common; unclustered in TRUTH, clustered in PREDICTED.
``split``
    both-clustered; the node's TRUTH cluster ``T`` overlaps more than one
    PREDICTED cluster, and the node's PREDICTED cluster is not
    ``cluster_map[T]``.  These are the nodes that would have to move for the
    prediction to stop splitting ``T``.  (Nodes of ``T`` that PREDICTED leaves
    unclustered are ``missing``; they do not make ``T`` split.)
``merged``
    both-clustered; the node's PREDICTED cluster ``P`` overlaps more than one
    TRUTH cluster, and the node's TRUTH cluster is not the best-matching TRUTH
    cluster of ``P``.  (TRUTH-unclustered nodes in ``P`` are ``extra``; they do
    not make ``P`` merged.)

Precedence: ``absent_*`` > ``missing``/``extra`` > ``split`` > ``merged``.  The
first two levels are mutually exclusive by definition; the only real choice is
that a node which is both ``split`` and ``merged`` is reported as ``split``.

Guarantees: ``identical`` is True iff ``diffs`` is empty; ``same_names``
implies ``identical``; ``agreeing_nodes + len(diffs) == n_nodes``.  Swapping the
arguments swaps ``missing``/``extra`` and ``absent_in_predicted``/
``absent_in_truth`` and keeps the set of ``split``-or-``merged`` nodes (``split``
for one direction is exactly ``merged`` for the other, before precedence).

Everything iterates in sorted order, so output never depends on the insertion
order of the input mappings.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

__all__ = [
    "KINDS",
    "NodeDiff",
    "ClusterMatch",
    "PartitionDiff",
    "compare_partitions",
    "CorpusRow",
    "corpus_table",
    "corpus_summary",
]

Labelling = Mapping[str, "str | None"]

#: All difference kinds, in the order used for sorting ``diffs`` and for counts.
KINDS: tuple[str, ...] = (
    "missing",
    "extra",
    "split",
    "merged",
    "absent_in_predicted",
    "absent_in_truth",
)
_KIND_RANK = {k: i for i, k in enumerate(KINDS)}

# Words used in human-readable text for the two sides.
_TRUTH_WHO = "TF"
_PRED_WHO = "jitsim"


@dataclass(frozen=True)
class NodeDiff:
    """One node whose class differs between PREDICTED and TRUTH.

    ``predicted`` / ``truth`` are the node's cluster in each labelling (``None``
    when unclustered or when the node is absent from that labelling).
    """

    node: str
    kind: str
    predicted: str | None
    truth: str | None
    detail: str

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "kind": self.kind,
            "predicted": self.predicted,
            "truth": self.truth,
            "detail": self.detail,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "NodeDiff":
        return cls(d["node"], d["kind"], d["predicted"], d["truth"], d["detail"])


@dataclass(frozen=True)
class ClusterMatch:
    """One row of the cluster correspondence table.

    Rows with ``truth`` set: a TRUTH cluster, its best-matching PREDICTED cluster
    (``None`` if none), their sizes (over the full labellings) and overlap.
    Rows with ``truth=None``: a PREDICTED cluster that is no TRUTH cluster's best
    match (``overlap`` is 0 and ``truth_size`` is 0 for those).
    """

    truth: str | None
    predicted: str | None
    truth_size: int
    predicted_size: int
    overlap: int

    @property
    def exact(self) -> bool:
        """True when the two clusters hold exactly the same nodes (by count)."""
        return (
            self.truth is not None
            and self.predicted is not None
            and self.truth_size == self.predicted_size == self.overlap
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "truth": self.truth,
            "predicted": self.predicted,
            "truth_size": self.truth_size,
            "predicted_size": self.predicted_size,
            "overlap": self.overlap,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "ClusterMatch":
        return cls(
            d["truth"], d["predicted"], d["truth_size"], d["predicted_size"], d["overlap"]
        )


def _pct(num: int, den: int) -> float:
    """Percentage, 100.0 for an empty denominator."""
    return 100.0 if den == 0 else 100.0 * num / den


def _fmt_pct(num: int, den: int) -> str:
    """Format a percentage with one decimal, never showing 100.0 unless exact."""
    value = _pct(num, den)
    if num < den and round(value, 1) >= 100.0:
        return "99.9%"
    return f"{value:.1f}%"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


@dataclass(frozen=True)
class PartitionDiff:
    """Result of :func:`compare_partitions`.

    ``n_nodes`` counts the union of both node sets (absent nodes count as
    disagreeing).  Cluster counts and sizes are over each full labelling.
    ``cluster_map`` maps every TRUTH cluster to its best-matching PREDICTED
    cluster (``None`` when none of its nodes is both-clustered).
    ``clusters`` is the correspondence table (see :class:`ClusterMatch`).

    Not hashable (holds a dict); compare with ``==``.
    """

    identical: bool
    same_names: bool
    n_nodes: int
    n_truth_clusters: int
    n_predicted_clusters: int
    n_clustered_truth: int
    n_clustered_predicted: int
    agreeing_nodes: int
    cluster_map: dict[str, str | None]
    diffs: tuple[NodeDiff, ...]
    clusters: tuple[ClusterMatch, ...] = field(default=())

    # -- derived ------------------------------------------------------------

    def agreement(self) -> float:
        """Fraction of nodes that agree: ``agreeing_nodes / n_nodes`` (1.0 if empty)."""
        return 1.0 if self.n_nodes == 0 else self.agreeing_nodes / self.n_nodes

    def counts(self) -> dict[str, int]:
        """Number of diffs of each kind, every kind present, in :data:`KINDS` order."""
        c = Counter(d.kind for d in self.diffs)
        return {k: c.get(k, 0) for k in KINDS}

    def by_kind(self, kind: str) -> tuple[NodeDiff, ...]:
        """The diffs of one kind, in ``diffs`` order."""
        if kind not in _KIND_RANK:
            raise ValueError(f"unknown diff kind {kind!r}; expected one of {KINDS}")
        return tuple(d for d in self.diffs if d.kind == kind)

    def summary(self) -> str:
        """One line.

        ``"identical (3 clusters, 41 nodes clustered)"`` (plus ``"; cluster names
        differ"`` when only the names disagree), or ``"DIFFERENT: 2 missing,
        1 split (95.1% nodes agree; TF 3 clusters, jitsim 4)"``.
        """
        if self.identical:
            s = (
                f"identical ({_plural(self.n_truth_clusters, 'cluster')}, "
                f"{_plural(self.n_clustered_truth, 'node')} clustered"
            )
            if not self.same_names:
                s += "; cluster names differ"
            return s + ")"
        parts = [f"{n} {k}" for k, n in self.counts().items() if n]
        return (
            f"DIFFERENT: {', '.join(parts)} "
            f"({_fmt_pct(self.agreeing_nodes, self.n_nodes)} nodes agree; "
            f"{_TRUTH_WHO} {_plural(self.n_truth_clusters, 'cluster')}, "
            f"{_PRED_WHO} {self.n_predicted_clusters})"
        )

    def format_text(self, limit: int = 50) -> str:
        """Multi-line report: summary, counts, correspondence table, node lists.

        The correspondence table and each per-kind node list show at most
        ``limit`` entries, followed by ``"... and N more"``.
        """
        if limit < 0:
            raise ValueError("limit must be >= 0")
        lines = [self.summary()]
        lines.append(
            f"nodes: {self.n_nodes}, agreeing {self.agreeing_nodes} "
            f"({_fmt_pct(self.agreeing_nodes, self.n_nodes)}); "
            f"{_TRUTH_WHO}: {self.n_clustered_truth} clustered in "
            f"{_plural(self.n_truth_clusters, 'cluster')}; "
            f"{_PRED_WHO}: {self.n_clustered_predicted} clustered in "
            f"{_plural(self.n_predicted_clusters, 'cluster')}"
        )
        if self.clusters:
            lines.append("")
            lines.append(f"cluster correspondence ({_TRUTH_WHO} -> {_PRED_WHO}):")
            header = (f"{_TRUTH_WHO} cluster", "size", f"{_PRED_WHO} cluster", "size", "overlap", "")
            table = []
            for m in self.clusters:
                if m.exact:
                    note = "exact"
                elif m.truth is None:
                    note = f"no {_TRUTH_WHO} counterpart"
                elif m.predicted is None:
                    note = f"not clustered by {_PRED_WHO}"
                else:
                    note = "partial"
                table.append(
                    (
                        m.truth if m.truth is not None else "-",
                        str(m.truth_size) if m.truth is not None else "-",
                        m.predicted if m.predicted is not None else "-",
                        str(m.predicted_size) if m.predicted is not None else "-",
                        str(m.overlap),
                        note,
                    )
                )
            shown = table[:limit]
            widths = [max(len(r[i]) for r in [header, *shown]) for i in range(len(header))]
            right = {1, 3, 4}
            for r in [header, *shown]:
                cells = [
                    c.rjust(widths[i]) if i in right else c.ljust(widths[i])
                    for i, c in enumerate(r)
                ]
                lines.append("  " + "  ".join(cells).rstrip())
            if len(table) > limit:
                lines.append(f"  ... and {len(table) - limit} more")
        for kind in KINDS:
            ds = self.by_kind(kind)
            if not ds:
                continue
            lines.append("")
            lines.append(f"{kind} ({len(ds)}):")
            width = max(len(d.node) for d in ds[:limit]) if limit else 0
            for d in ds[:limit]:
                lines.append(f"  {d.node.ljust(width)}  {d.detail}")
            if len(ds) > limit:
                lines.append(f"  ... and {len(ds) - limit} more")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """JSON-serialisable form; keys always in this order.

        - ``identical``, ``same_names``: bool
        - ``n_nodes``, ``n_truth_clusters``, ``n_predicted_clusters``,
          ``n_clustered_truth``, ``n_clustered_predicted``, ``agreeing_nodes``: int
        - ``agreement``: float in [0, 1] (derived, ignored by :meth:`from_dict`)
        - ``summary``: str, :meth:`summary` (derived, ignored by :meth:`from_dict`)
        - ``counts``: {kind: int} for every kind, in :data:`KINDS` order (derived)
        - ``cluster_map``: {truth cluster: predicted cluster or null}, sorted by key
        - ``clusters``: list of {``truth``, ``predicted``, ``truth_size``,
          ``predicted_size``, ``overlap``}, the correspondence table
        - ``diffs``: list of {``node``, ``kind``, ``predicted``, ``truth``,
          ``detail``}, in ``diffs`` order

        ``json.loads(json.dumps(d)) == d`` and ``PartitionDiff.from_dict(d) == self``.
        """
        return {
            "identical": self.identical,
            "same_names": self.same_names,
            "n_nodes": self.n_nodes,
            "n_truth_clusters": self.n_truth_clusters,
            "n_predicted_clusters": self.n_predicted_clusters,
            "n_clustered_truth": self.n_clustered_truth,
            "n_clustered_predicted": self.n_clustered_predicted,
            "agreeing_nodes": self.agreeing_nodes,
            "agreement": self.agreement(),
            "summary": self.summary(),
            "counts": self.counts(),
            "cluster_map": {k: self.cluster_map[k] for k in sorted(self.cluster_map)},
            "clusters": [m.to_dict() for m in self.clusters],
            "diffs": [d.to_dict() for d in self.diffs],
        }

    def to_json(self, **kwargs: Any) -> str:
        """``json.dumps(self.to_dict(), **kwargs)``."""
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PartitionDiff":
        """Inverse of :meth:`to_dict` (derived keys are ignored)."""
        return cls(
            identical=d["identical"],
            same_names=d["same_names"],
            n_nodes=d["n_nodes"],
            n_truth_clusters=d["n_truth_clusters"],
            n_predicted_clusters=d["n_predicted_clusters"],
            n_clustered_truth=d["n_clustered_truth"],
            n_clustered_predicted=d["n_clustered_predicted"],
            agreeing_nodes=d["agreeing_nodes"],
            cluster_map=dict(d["cluster_map"]),
            diffs=tuple(NodeDiff.from_dict(x) for x in d["diffs"]),
            clusters=tuple(ClusterMatch.from_dict(x) for x in d.get("clusters", ())),
        )


def _validate(labelling: Labelling, which: str) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for node, cluster in labelling.items():
        if not isinstance(node, str):
            raise TypeError(f"{which}: node name must be str, got {node!r}")
        if cluster is not None and not isinstance(cluster, str):
            raise TypeError(
                f"{which}: cluster of {node!r} must be str or None, got {cluster!r}"
            )
        if cluster == "":
            raise ValueError(
                f"{which}: node {node!r} has an empty cluster name; use None for unclustered"
            )
        out[node] = cluster
    return out


def _best(counter: Counter[str] | None) -> str | None:
    """Key with the largest count, ties -> smallest key; None when empty."""
    if not counter:
        return None
    return min(counter.items(), key=lambda kv: (-kv[1], kv[0]))[0]


def _names(counter: Counter[str]) -> str:
    return ", ".join(f"{k} ({counter[k]})" for k in sorted(counter))


def compare_partitions(predicted: Labelling, truth: Labelling) -> PartitionDiff:
    """Compare PREDICTED against TRUTH as partitions; see the module docstring.

    Raises TypeError for non-str node names or cluster values, ValueError for an
    empty-string cluster name (use None for "unclustered").
    """
    pred = _validate(predicted, "predicted")
    tru = _validate(truth, "truth")

    all_nodes = sorted(set(pred) | set(tru))
    t_sizes: Counter[str] = Counter(c for c in tru.values() if c is not None)
    p_sizes: Counter[str] = Counter(c for c in pred.values() if c is not None)

    # Overlaps over both-clustered nodes, indexed both ways.
    by_truth: dict[str, Counter[str]] = {}
    by_pred: dict[str, Counter[str]] = {}
    for n in all_nodes:
        if n in pred and n in tru:
            t, p = tru[n], pred[n]
            if t is not None and p is not None:
                by_truth.setdefault(t, Counter())[p] += 1
                by_pred.setdefault(p, Counter())[t] += 1

    cluster_map = {t: _best(by_truth.get(t)) for t in sorted(t_sizes)}
    pred_best = {p: _best(by_pred.get(p)) for p in sorted(p_sizes)}

    diffs: list[NodeDiff] = []
    for n in all_nodes:
        in_p, in_t = n in pred, n in tru
        p = pred.get(n)
        t = tru.get(n)
        if not in_p:
            where = f"in {t} with {_plural(t_sizes[t], 'node')}" if t is not None else "unclustered"
            diffs.append(
                NodeDiff(n, "absent_in_predicted", None, t,
                         f"only in {_TRUTH_WHO}'s graph ({where} there), not in {_PRED_WHO}'s")
            )
            continue
        if not in_t:
            where = f"in {p} with {_plural(p_sizes[p], 'node')}" if p is not None else "unclustered"
            diffs.append(
                NodeDiff(n, "absent_in_truth", p, None,
                         f"only in {_PRED_WHO}'s graph ({where} there), not in {_TRUTH_WHO}'s")
            )
            continue
        if t is not None and p is None:
            diffs.append(
                NodeDiff(n, "missing", None, t,
                         f"in {_TRUTH_WHO}'s {t} with {_plural(t_sizes[t], 'node')}, "
                         f"{_PRED_WHO} left it unclustered")
            )
            continue
        if t is None and p is not None:
            diffs.append(
                NodeDiff(n, "extra", p, None,
                         f"{_TRUTH_WHO} left it unclustered, "
                         f"{_PRED_WHO} put it in {p} with {_plural(p_sizes[p], 'node')}")
            )
            continue
        if t is None or p is None:
            continue  # unclustered in both: agrees
        parts = by_truth[t]
        if len(parts) > 1 and p != cluster_map[t]:
            main = cluster_map[t]
            diffs.append(
                NodeDiff(n, "split", p, t,
                         f"{_TRUTH_WHO}'s {t} ({_plural(t_sizes[t], 'node')}) is spread over "
                         f"{len(parts)} {_PRED_WHO} clusters [{_names(parts)}]; "
                         f"its main part is {main}, this node is in {p}")
            )
            continue
        sources = by_pred[p]
        if len(sources) > 1 and t != pred_best[p]:
            main = pred_best[p]
            diffs.append(
                NodeDiff(n, "merged", p, t,
                         f"{_PRED_WHO}'s {p} ({_plural(p_sizes[p], 'node')}) merges "
                         f"{len(sources)} {_TRUTH_WHO} clusters [{_names(sources)}]; "
                         f"it matches {main}, this node is from {t}")
            )
            continue

    diffs.sort(key=lambda d: (_KIND_RANK[d.kind], d.truth is not None, d.truth or "", d.node))

    identical = not diffs
    same_names = identical and all(pred[n] == tru[n] for n in all_nodes)

    clusters: list[ClusterMatch] = []
    for t in sorted(t_sizes):
        p = cluster_map[t]
        clusters.append(
            ClusterMatch(
                truth=t,
                predicted=p,
                truth_size=t_sizes[t],
                predicted_size=p_sizes[p] if p is not None else 0,
                overlap=by_truth[t][p] if p is not None else 0,
            )
        )
    matched = {p for p in cluster_map.values() if p is not None}
    for p in sorted(p_sizes):
        if p not in matched:
            clusters.append(ClusterMatch(None, p, 0, p_sizes[p], 0))

    return PartitionDiff(
        identical=identical,
        same_names=same_names,
        n_nodes=len(all_nodes),
        n_truth_clusters=len(t_sizes),
        n_predicted_clusters=len(p_sizes),
        n_clustered_truth=sum(t_sizes.values()),
        n_clustered_predicted=sum(p_sizes.values()),
        agreeing_nodes=len(all_nodes) - len(diffs),
        cluster_map=cluster_map,
        diffs=tuple(diffs),
        clusters=tuple(clusters),
    )


# ---------------------------------------------------------------------------
# Corpus level


@dataclass
class CorpusRow:
    """One graph of a corpus run: its comparison, or the error that prevented it.

    A row whose ``error`` is set is an error row even if ``diff`` is also set;
    a row with neither is an error row with the message "no result".
    """

    name: str
    diff: PartitionDiff | None
    error: str | None = None

    @property
    def failed(self) -> bool:
        return self.error is not None or self.diff is None

    @property
    def error_message(self) -> str | None:
        if self.error is not None:
            return self.error
        return "no result" if self.diff is None else None


def _first_line(s: str) -> str:
    lines = s.strip().splitlines()
    return lines[0] if lines else ""


def _first_difference(diff: PartitionDiff) -> str:
    if not diff.diffs:
        return "names differ" if not diff.same_names else ""
    d = diff.diffs[0]
    return f"{d.kind} {d.node}: {d.detail}"


def _clip(s: str, width: int) -> str:
    if width <= 0 or len(s) <= width:
        return s
    return s[: max(width - 3, 0)] + "..."


def corpus_summary(rows: Sequence[CorpusRow]) -> dict[str, Any]:
    """The data behind :func:`corpus_table`, JSON-serialisable, stable key order.

    Keys: ``graphs``, ``identical``, ``same_names``, ``errors`` (row counts);
    ``nodes``, ``agreeing_nodes`` (summed over non-error rows); ``agreement``
    (float, 1.0 when no nodes); ``counts`` ({kind: total} in :data:`KINDS`
    order); ``rows``: one dict per row, in input order, with ``name``, ``error``
    (str or null), ``n_nodes``, ``n_truth_clusters``, ``n_predicted_clusters``,
    ``agreement``, ``identical``, ``same_names``, ``first_difference`` (null for
    error rows' numeric/bool fields).  Error rows count as neither identical
    nor same-named.
    """
    out_rows: list[dict[str, Any]] = []
    n_ident = n_names = n_err = nodes = agreeing = 0
    counts = {k: 0 for k in KINDS}
    for r in rows:
        if r.failed:
            n_err += 1
            out_rows.append(
                {
                    "name": r.name,
                    "error": r.error_message,
                    "n_nodes": None,
                    "n_truth_clusters": None,
                    "n_predicted_clusters": None,
                    "agreement": None,
                    "identical": None,
                    "same_names": None,
                    "first_difference": None,
                }
            )
            continue
        d = r.diff
        assert d is not None
        n_ident += d.identical
        n_names += d.same_names
        nodes += d.n_nodes
        agreeing += d.agreeing_nodes
        for k, v in d.counts().items():
            counts[k] += v
        out_rows.append(
            {
                "name": r.name,
                "error": None,
                "n_nodes": d.n_nodes,
                "n_truth_clusters": d.n_truth_clusters,
                "n_predicted_clusters": d.n_predicted_clusters,
                "agreement": d.agreement(),
                "identical": d.identical,
                "same_names": d.same_names,
                "first_difference": _first_difference(d) or None,
            }
        )
    return {
        "graphs": len(rows),
        "identical": n_ident,
        "same_names": n_names,
        "errors": n_err,
        "nodes": nodes,
        "agreeing_nodes": agreeing,
        "agreement": 1.0 if nodes == 0 else agreeing / nodes,
        "counts": counts,
        "rows": out_rows,
    }


def _totals_line(s: Mapping[str, Any]) -> str:
    line = (
        f"{s['identical']}/{s['graphs']} graphs identical, "
        f"{_fmt_pct(s['agreeing_nodes'], s['nodes'])} nodes agree; "
        f"{s['same_names']}/{s['graphs']} same names"
    )
    if s["errors"]:
        line += f"; {_plural(s['errors'], 'error')}"
    return line


def corpus_table(rows: Sequence[CorpusRow], diff_width: int = 72) -> str:
    """Fixed-width text table, one line per row (input order), then a totals line.

    Columns: graph, nodes, TF clusters, predicted clusters, agreement %, exact
    partition (yes/no), same names (yes/no), first difference (clipped to
    ``diff_width`` characters; 0 = no clipping).  Error rows show ``ERROR`` in
    the partition column and ``error: <first line of message>`` as the first
    difference.  The last line reads e.g. ``"12/14 graphs identical, 98.7%
    nodes agree; 10/14 same names; 1 error"``.
    """
    s = corpus_summary(rows)
    header = (
        "graph", "nodes", f"{_TRUTH_WHO} cl", f"{_PRED_WHO} cl",
        "agree", "partition", "names", "first difference",
    )
    body: list[tuple[str, ...]] = []
    for r, d in zip(rows, s["rows"]):
        if d["error"] is not None:
            body.append(
                (r.name, "-", "-", "-", "-", "ERROR", "-",
                 _clip("error: " + _first_line(d["error"]), diff_width))
            )
            continue
        assert r.diff is not None
        body.append(
            (
                r.name,
                str(d["n_nodes"]),
                str(d["n_truth_clusters"]),
                str(d["n_predicted_clusters"]),
                _fmt_pct(r.diff.agreeing_nodes, r.diff.n_nodes),
                "yes" if d["identical"] else "no",
                "yes" if d["same_names"] else "no",
                _clip(d["first_difference"] or "", diff_width),
            )
        )
    widths = [max(len(row[i]) for row in [header, *body]) for i in range(len(header))]
    right = {1, 2, 3, 4}
    lines = []
    for row in [header, *body]:
        cells = [
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(row)
        ]
        lines.append("  ".join(cells).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append(_totals_line(s))
    return "\n".join(lines)
