"""The Python API: simulate TF's auto-clustering on one graph and ask why.

:func:`cluster` runs the simulated pipeline (by default up to partially-decluster, so the
clusters are the ones TF compiles) and returns a :class:`Clustering`: the clusters, one
record per node (its final reason code, the passes that decided it), the refused merges,
and :meth:`Clustering.explain`, :meth:`Clustering.diff`, :meth:`Clustering.render`,
:meth:`Clustering.report`. Everything reads the decision records the passes kept; nothing
here re-derives a decision.

>>> import jitsim
>>> c = jitsim.cluster("examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt",
...                    flags="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
>>> len(c.clusters), c.compiled_nodes
(5, 56)
>>> c.explain("add").code        # Grappler fused MatMul+BiasAdd into _FusedMatMul
'UNSUPPORTED_OP'
>>> w = c.whatif(force_compilable=["_FusedMatMul"])     # if XLA could compile the fused op
>>> len(w.clusters), w.compiled_nodes
(4, 66)
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass, field, replace

from jitsim.errors import JitsimError, JitsimWarning
from jitsim.explain.summary import op_summary
from jitsim.flags import parse_tf_xla_flags
from jitsim.graph.model import Graph
from jitsim.registry import protos
from jitsim.options import Call, Options, SessionConfig, resolve_flags
from jitsim.passes import pipeline as passes  # by module: tests replace its functions
from jitsim.records import MergeRefusal, NodeDecision
from jitsim.defs import CLUSTER_ATTR
from jitsim.words import count

SCHEMA = "jitsim.clustering/1"


@dataclass(slots=True)
class NodeRecord:
    """One node of the simulated graph and every decision made about it."""

    name: str
    op: str
    device: str
    cluster: str | None  # final cluster (what TF compiles)
    mark_cluster: str | None  # cluster after mark-for-compilation
    decision: NodeDecision | None  # the mark-for-compilation decision
    later: list[tuple[str, NodeDecision]] = field(default_factory=list)  # (pass, decision)
    group: str | None = None  # contraction group representative (candidates only)
    removed: bool = False  # a later pass deleted it (e.g. a Slice replaced by IncreaseDynamism)
    created_by: str | None = None  # the later pass that created it, if one did

    @property
    def final(self) -> NodeDecision | None:
        """The decision that explains the node's final state: a later pass's removal from its
        cluster if any (``DECLUSTERED_*``), else mark-for-compilation's. Other later decisions
        (``INPUT_HOSTMEM``, ``SLICE_MADE_STATIC``) annotate the node; they stay in ``later``."""
        for _, d in reversed(self.later):
            if d.code.startswith("DECLUSTERED_") or self.removed:
                return d
        return self.decision

    @property
    def code(self) -> str:
        """The reason code that explains the node's final state."""
        d = self.final
        return d.code if d is not None else "UNKNOWN"

    def to_dict(self) -> dict:
        return {"op": self.op, "device": self.device, "cluster": self.cluster, "mark_cluster": self.mark_cluster,
                "code": self.code, "removed": self.removed, "created_by": self.created_by,
                "mark_decision": None if self.decision is None else self.decision.to_dict(),
                "later": [{"pass": p, **d.to_dict()} for p, d in self.later]}


class Clustering:
    """The result of simulating TF's auto-clustering pipeline on one graph.

    ``clusters``: final cluster name -> member names (node-id order); ``nodes``: name ->
    :class:`NodeRecord`; ``refusals``: every merge TF attempted and refused;
    ``pipeline``: the underlying :class:`~jitsim.passes.pipeline.PipelineResult`."""

    def __init__(self, pipeline, options: Options, source: str | None, input_graph=None):
        self.pipeline = pipeline
        self.options = options
        self.source = source
        cr = pipeline.cluster
        self.mark = cr.mark
        self.notes = list(cr.notes)
        self.clones = list(cr.clones)
        self.route = None  # jitsim.frontend.resolve.Route: how the pass input was obtained (paths, TF objects)
        g = cr.graph
        self.graph = g
        self._input_graph = input_graph
        self._nodes: dict[str, NodeRecord] | None = None  # made on first use (rewrite never reads them)
        self._clusters: dict[str, list[str]] | None = None
        self.refusals: list[MergeRefusal] = list(cr.mark.refusals)
        self.seconds = cr.seconds

    @property
    def nodes(self) -> dict[str, NodeRecord]:
        if self._nodes is None:
            self._make_records()
        return self._nodes

    @property
    def clusters(self) -> dict[str, list[str]]:
        if self._clusters is None:
            self._make_records()
        return self._clusters

    def _make_records(self) -> None:
        cr = self.pipeline.cluster
        later: dict[str, list[tuple[str, NodeDecision]]] = {}
        for pname in passes.LATER_PASSES:
            res = self.pipeline.stage_results.get(pname)
            for name, d in (getattr(res, "decisions", None) or {}).items():
                later.setdefault(name, []).append((pname, d))
        mark_labels = _mark_labels(cr.mark)
        self._nodes = node_records(cr, later, mark_labels)
        clusters: dict[str, list[str]] = {}
        for rec in self._nodes.values():
            if rec.cluster is not None:
                clusters.setdefault(rec.cluster, []).append(rec.name)
        self._add_removed_and_created(later, mark_labels, self._input_graph)
        self._input_graph = None  # read once, for the ops of nodes a later pass removed
        # keep TF's numbering order of clusters
        order = {c: i for i, c in enumerate(cr.mark.clusters)}
        self._clusters = {c: clusters[c] for c in sorted(clusters, key=lambda c: (order.get(c, len(order)), c))}

    def _add_removed_and_created(self, later, mark_labels, input_graph) -> None:
        """Records for nodes a later pass deleted (their last decision says why) and a
        decision for nodes a later pass created (from the decision that created them)."""
        origin: dict[str, tuple[str, str, NodeDecision]] = {}
        for name, decs in later.items():
            for pname, d in decs:
                made = list(d.evidence.get("created") or [])
                for key in ("replacement", "clone"):
                    if d.evidence.get(key):
                        made.append(d.evidence[key])
                for m in made:
                    origin.setdefault(m, (pname, name, d))
        for name, rec in self.nodes.items():
            if rec.decision is None and name in origin:
                pname, src, d = origin[name]
                rec.created_by = pname
                if rec.cluster is not None:
                    rec.decision = NodeDecision("CLUSTERED", f"created by {pname} in {rec.cluster} ({src}: {d.code})",
                                                {"cluster": rec.cluster, "created_for": src})
                elif not rec.later:
                    rec.decision = NodeDecision(d.code, f"created by {pname} outside the cluster ({src}: {d.code})",
                                                {"created_for": src, **d.evidence})
        mark = self.mark
        ops = None
        for name in list(mark.decisions) + list(later):
            if name in self.nodes:
                continue
            if ops is None:
                ops = {n.name: (n.op, n.device) for n in input_graph} if input_graph is not None else {}
            op, dev = ops.get(name, ("?", ""))
            self.nodes[name] = NodeRecord(name, op, dev, None, mark_labels.get(name), mark.decisions.get(name),
                                          later.get(name, []), mark.groups.get(name), removed=True)

    # -- queries ---------------------------------------------------------------------------
    @property
    def graph_decision(self) -> NodeDecision | None:
        return self.mark.graph_decision

    @property
    def decisions(self) -> dict[str, NodeDecision]:
        """Node name -> the decision that explains its final state (a later pass's, if any)."""
        return {n: r.final for n, r in self.nodes.items() if r.final is not None}

    def cluster_of(self, node: str) -> str | None:
        return self.nodes[self.find_node(node)].cluster

    def labels(self) -> dict[str, str | None]:
        return {n: r.cluster for n, r in self.nodes.items()}

    @property
    def compiled_nodes(self) -> int:
        return sum(len(m) for m in self.clusters.values())

    def find_node(self, pattern: str) -> str:
        """The node ``pattern`` names: an exact name wins, else the one node whose name
        contains ``pattern`` or matches it as a regex (``re.search``). Raises a
        :class:`~jitsim.errors.JitsimError` listing candidates when none or several match."""
        return find_node(self.nodes, pattern, self.source,
                         provenance=getattr(self.route, "provenance", None) or {})

    def explain(self, node: str, other: str | None = None):
        """Why ``node`` is (not) in a cluster; with ``other``: why the two are (not) together.
        ``node`` may name a cluster (``cluster_0``, not a node's name): what it holds."""
        from jitsim.explain.explanation import explain_cluster, explain_node, explain_pair

        if other is None and node in self.clusters and node not in self.nodes:
            return explain_cluster(self, node)
        a = self.find_node(node)
        if other is None:
            return explain_node(self, a)
        return explain_pair(self, a, self.find_node(other))

    def diff(self, other: "Clustering"):
        """How ``other`` (a variant) differs from this one (the baseline): :class:`ClusterDiff`."""
        from jitsim.explain.diff import diff_clusterings

        return diff_clusterings(self, other)

    def whatif(self, *, flags: str | None = None, device: str | None = None, exclude_ops=(), force_compilable=()):
        """Rerun on the same graph with changed options; returns the variant :class:`Clustering`.
        ``flags`` are appended to the baseline's TF_XLA_FLAGS (later flags win, as in TF);
        ``exclude_ops`` / ``force_compilable`` add to the baseline's."""
        o = self.options
        variant = replace(o, flags=parse_tf_xla_flags(f"{o.flags_text} {flags}".strip()) if flags else o.flags,
                          flags_origin="--tf-xla-flags", device=device or o.device,
                          exclude_ops=tuple(o.exclude_ops) + tuple(exclude_ops),
                          force_compilable=tuple(o.force_compilable) + tuple(force_compilable),
                          explain_cycles=None)
        return cluster(self.input_graph(), options=variant,
                       move_devices=bool(device and device != o.device))  # the captured graph itself: no new route

    def input_graph(self):
        """A fresh copy of the graph the passes were given (TF's pass input, before any pass
        annotated it), as a jitsim :class:`~jitsim.graph.model.Graph`; None for a
        ``Clustering`` that :func:`cluster` did not make."""
        snap = getattr(self, "_input_snapshot", None)
        if snap is None:
            return None
        gd = protos.GraphDef()
        gd.ParseFromString(snap[0])
        return Graph(gd, source=snap[1], validate=False)

    def to_graphdef(self):
        """The graph as TF dumps it after the last simulated stage."""
        return self.pipeline.to_graphdef()

    def render(self, path, **kwargs):
        """Write a picture of the clusters (.dot/.svg/.png); see :mod:`jitsim.explain.render`."""
        from jitsim.explain.render import render_to_file

        return render_to_file(self, path, **kwargs)

    def report(self, directory, **kwargs):
        """Write a self-contained HTML report into ``directory``; see :mod:`jitsim.explain.report`."""
        from jitsim.explain.report import write_report

        return write_report(self, directory, **kwargs)

    def to_dict(self) -> dict:
        """JSON-ready (schema ``jitsim.clustering/1``, docs/cli.md)."""
        return {
            "schema": SCHEMA,
            "source": self.source,
            "options": self.options.to_dict(),
            "tf_version": {"version": self.options.tf_version, "reason": self.options.tf_version_reason},
            "input_stage": self.pipeline.cluster.input_stage,
            "route": None if self.route is None else self.route.to_dict(),
            "jit_level": self.mark.jit_level,
            "graph_decision": None if self.graph_decision is None else self.graph_decision.to_dict(),
            "clusters": [{"name": c, "size": len(m), "nodes": m} for c, m in self.clusters.items()],
            "nodes": {n: r.to_dict() for n, r in self.nodes.items()},
            "refused_merges": [r.to_dict() for r in self.refusals],
            "notes": self.notes,
        }

    def __repr__(self) -> str:
        return (f"<Clustering {self.source or '<graph>'}: {count(len(self.clusters), 'cluster')}, "
                f"{self.compiled_nodes}/{len(self.nodes)} nodes compiled>")

    def _repr_html_(self) -> str:  # notebooks
        from html import escape

        rows = "".join(f"<tr><td>{escape(c)}</td><td>{len(m)}</td><td>{escape(op_summary(self, m))}</td></tr>"
                       for c, m in self.clusters.items())
        return (f"<p>{escape(repr(self))}</p><table><tr><th>cluster</th><th>nodes</th><th>ops</th></tr>"
                f"{rows}</table>")


def node_records(cr, later=None, mark_labels=None) -> dict[str, NodeRecord]:
    """One :class:`NodeRecord` per op node of ``cr``'s graph (a
    :class:`~jitsim.passes.pipeline.ClusterResult`, its graph as the last simulated pass left
    it), in node order: its ``_XlaCluster`` now, its cluster after MarkForCompilation, the mark
    pass's decision (the graph's decision where the pass decided for the whole graph), and
    ``later``'s decisions (node -> ``[(pass, decision)]``). :class:`Clustering` and
    ``jitsim cluster``'s report (``jitsim.cluster/1``) both read nodes through it."""
    mark = cr.mark
    gd = mark.graph_decision
    later = later or {}
    if mark_labels is None:
        mark_labels = _mark_labels(mark)
    out: dict[str, NodeRecord] = {}
    decisions, groups = mark.decisions, mark.groups
    names: dict[bytes, str] = {}  # each cluster name decoded once
    for n in cr.graph.op_nodes():
        name, nd = n.name, n.nodedef
        av = nd.attr.get(CLUSTER_ATTR)  # (get: no entry added)
        if av is not None:
            raw = av.s
            cluster = names.get(raw)
            if cluster is None:
                cluster = names[raw] = raw.decode()
        else:
            cluster = None
        out[name] = NodeRecord(name, n.op, nd.device, cluster, mark_labels.get(name), decisions.get(name, gd),
                               later.get(name, []), groups.get(name))
    return out


def _mark_labels(mark) -> dict[str, str]:
    out = {}
    for c, members in mark.clusters.items():
        for m in members:
            out[m] = c
    return out


# TF's session rewrite (and a function's instantiation) replaces a fed tensor's node by an _Arg
# named _arg_<node>_<port>_<i>, a fetched one's by a _Retval named _retval_<node>_<port>_<i>
_RENAMED = ("_arg_{}_\\d+_\\d+", "_retval_{}_\\d+_\\d+")


def find_node(names, pattern: str, source: str | None = None, provenance=None) -> str:
    """Resolve a user's node name: exact > the node TF's rewrites renamed it to (a fed
    placeholder ``x`` became ``_arg_x_0_0``; said in a note) > the node a simulated rewrite took
    it into (``provenance``: a MatMul fused by the remapper; said in a note) > substring/regex
    match (unique) > error."""
    if pattern in names:
        return pattern
    if provenance and pattern in provenance and provenance[pattern][0] in names:
        new, words = provenance[pattern]
        warnings.warn(JitsimWarning(f"{pattern!r} is not in the graph TF clusters: {words}, explained here", source),
                      stacklevel=2)
        return new
    renamed = [n for n in names if any(re.fullmatch(r.format(re.escape(pattern)), n) for r in _RENAMED)]
    if len(renamed) == 1:
        warnings.warn(JitsimWarning(f"{pattern!r} is the call's {'feed' if renamed[0].startswith('_arg') else 'fetch'}"
                                    f": TF's session rewrite replaced it by {renamed[0]!r}, explained here", source),
                      stacklevel=2)
        return renamed[0]
    try:
        rx = re.compile(pattern)
    except re.error:
        rx = None
    matches = [n for n in names if pattern in n or (rx is not None and rx.search(n))]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        import difflib

        close = difflib.get_close_matches(pattern, list(names), n=5, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise JitsimError(f"no node named or matching {pattern!r}{hint}", source)
    shown = ", ".join(matches[:10]) + (f", ... ({len(matches) - 10} more)" if len(matches) > 10 else "")
    raise JitsimError(f"{pattern!r} matches {len(matches)} nodes: {shown}; give an exact name or a stricter regex",
                      source)


def cluster(graph, flags: str | None = None, *, device: str | None = None, exclude_ops=(), force_compilable=(),
            session_jit_level: int = 0, session_cpu_global_jit: bool = False, input_stage: str | None = None,
            signature: str | None = None, until: str = "decluster", explain_cycles: bool | None = None,
            cluster_number_start: int = 0, move_devices: bool = False, tf: str = "auto", fetch=(),
            feed=(), tf_version: str | None = None, input_shapes=None, input_signature=None,
            captured=None, options: Options | None = None) -> Clustering:
    """Simulate TF's auto-clustering on ``graph`` and return a :class:`Clustering`.

    ``graph``: a path (TF dump file or directory, SavedModel directory, ``.keras`` file,
    GraphDef ``.pbtxt``/``.pb``, ``.py`` program), a jitsim ``Graph``, a ``GraphDef`` proto, or a
    live ``tf.function`` / ``ConcreteFunction`` / Keras model. Paths and live objects go
    through :func:`jitsim.frontend.resolve.pass_inputs`, which gets TF's pass input the exact
    way where it can (``tf``: ``auto`` captures it with one TF run when TensorFlow is
    importable, ``always``, ``never``) and says which route it took (:attr:`Clustering.route`);
    for a target TF instantiates several graphs for, the result is the call's own graph.
    ``flags``: a TF_XLA_FLAGS string (default: ``$TF_XLA_FLAGS``, else
    ``--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit``). ``device``: ``cpu``/``gpu`` (or a full
    device name) for nodes without one.
    ``exclude_ops`` / ``force_compilable``: what-if knobs (ops treated as uncompilable /
    compilable). ``until``: last simulated stage (``mark``, ``decluster``, ``encapsulate``,
    ``build-xla-ops``). ``explain_cycles``: record the path behind every cycle refusal
    (default: for graphs up to 5,000 nodes). ``move_devices``: ``device`` also moves nodes
    that already have a device, where a kernel of that type exists (a CPU-vs-GPU what-if;
    approximate: TF's placer also colocates). ``fetch`` / ``feed``: the ``sess.run`` of a TF1
    GraphDef or MetaGraphDef (:mod:`jitsim.frontend.session_call`: ``"loss:0"`` fetches a tensor,
    ``"train_step"`` runs an op; ``"x=100,784"`` feeds ``x:0``); without them the call is assumed
    by a documented rule and the result labelled approximate. ``input_shapes`` /
    ``input_signature``: the call of a ``.keras`` file or live Keras model, as
    ``{"input_ids": (2, 128)}`` (a model input's name -> a concrete shape) or one
    ``tf.TensorSpec`` per model input, in order (:mod:`jitsim.tfprocess.keras_call`); unknown
    dimensions not given are set to 2, and :attr:`Clustering.route` says which were (for a
    tf.function's exported graph, ``input_shapes`` gives its captured variables' shapes).
    ``captured``: an exported tf.function graph's ``Const`` nodes that were eager tensors the
    function captured (``["none"]``: none), as ``--captured``
    (:mod:`jitsim.frontend.exported_function`).
    ``tf_version``: the TensorFlow release to simulate (``"2.16"`` ... ``"2.21"``); default: the
    release that wrote the graph (its ``versions.producer``), else the one a harvest recorded,
    else 2.21 (:func:`jitsim.registry.versions.choose_tf_version`; the choice and its reason
    are in :attr:`Clustering.options`).

    ``options``: an :class:`~jitsim.options.Options` built by the caller (the CLI builds one
    from its arguments; a what-if derives one from its baseline's) instead of the keywords
    from ``flags`` to ``tf_version``. Its ``tf_version`` (None: auto) and ``explain_cycles``
    (None: auto) are requests, resolved here with what depends on the graph.
    """
    from jitsim.registry.versions import check_tf_version
    from jitsim.simulation import simulate

    until = options.until if options is not None else until
    if until not in passes.STAGES:
        raise JitsimError(f"unknown stage {until!r}; one of {', '.join(passes.STAGES)}")
    tf_version = options.tf_version if options is not None else tf_version
    if tf_version is not None:
        check_tf_version(tf_version)  # before any work
    if options is None:
        choice = resolve_flags(flags)
        options = Options(choice.flags, choice.origin, device, tuple(exclude_ops), tuple(force_compilable),
                          SessionConfig(session_jit_level, session_cpu_global_jit), input_stage,
                          cluster_number_start, until, tf_version, explain_cycles=explain_cycles)
    call = Call(signature, tuple(fetch), tuple(feed), input_shapes, input_signature,
                tuple(captured) if captured else None)
    sim = simulate(graph, options, call, tf=tf, move_devices=move_devices)
    c = Clustering(sim.main_result, sim.options, sim.source, input_graph=sim.main_input)
    c.route = sim.route
    c.notes[:0] = ([sim.route.line] if sim.route is not None else []) + list(sim.notes)
    if move_devices and sim.options.device:
        c.notes.append(f"re-placed nodes on {sim.options.device} where a {sim.options.device.upper()} kernel exists "
                       "(approximate placement: TF's placer also colocates)")
    c._input_snapshot = (sim.input_snapshot, sim.source)
    return c
