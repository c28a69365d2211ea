"""``jitsim cluster``: the clusters MarkForCompilation forms, for every graph of the target.
"""

from __future__ import annotations

from pathlib import Path

from jitsim.errors import JitsimError

from jitsim.cli.arguments import _sim_args, _tensorboard_arg
from jitsim.cli.common import MARK, _call, _flags_choice, _is_dir, _options, _simulation_progress
from jitsim.cli.output import _console, _emit_json, _progress_done, _write_tensorboard, _wrote
from jitsim.words import count


def _graph_report(name: str, res, records: dict, *, nodes: bool = True) -> dict:
    """JSON-ready record of one graph after MarkForCompilation (schema jitsim.cluster/1,
    docs/json.md): ``res``'s records (``records``: :func:`~jitsim.explain.clustering.node_records`
    of it) as they are, clusters with the pass's effective size. ``nodes=False``: without the
    per-node entries, which the text report reads from ``records`` instead."""
    per_node = {}
    for node, rec in records.items() if nodes else ():
        out = per_node[node] = {"op": rec.op, "cluster": rec.cluster}
        d = rec.decision
        if d is not None:  # the graph's decision, where the pass decided for the whole graph, without evidence
            out.update(code=d.code, detail=d.detail, evidence=d.evidence if node in res.decisions else {})
    clusters = []
    for cname, members in res.clusters.items():
        clusters.append({"name": cname, "size": len(members), "effective_size": res.mark.effective_size(cname),
                         "nodes": members})
    return {
        "name": name,
        "source": res.source,
        "input_stage": res.input_stage,
        "jit_level": res.mark.jit_level,
        "nodes_total": len(records),
        "candidates": len(res.mark.candidates),
        "cloned_constants": res.clones,
        "graph_decision": None if res.mark.graph_decision is None else res.mark.graph_decision.to_dict(),
        "clusters": clusters,
        "nodes": per_node,
        "refused_merges": [r.to_dict() for r in res.mark.refusals],
        "notes": res.notes,
        "seconds": round(res.seconds, 4),
    }



def _print_graph_report(con, rep: dict, records: dict, top: int) -> None:
    from rich.table import Table

    clustered = sum(c["size"] for c in rep["clusters"])
    con.print(rep["name"], style="bold", end="")
    con.print(f": {rep['nodes_total']} nodes, {rep['candidates']} candidates, "
              f"{count(len(rep['clusters']), 'cluster')} ({clustered} nodes clustered)"
              + (f", {len(rep['cloned_constants'])} constants cloned" if rep["cloned_constants"] else ""))
    for note in rep["notes"]:
        con.print(f"  note: {note}")
    if rep["graph_decision"]:
        gd = rep["graph_decision"]
        con.print(f"  TF would not cluster this graph: {gd['code']} ({gd['detail']})")
    if rep["clusters"]:
        shown = rep["clusters"]
        title = None
        if len(shown) > top:  # a summary stays short: the largest clusters, then a count of the rest
            shown = sorted(shown, key=lambda c: -c["size"])[:top]
            title = f"the {top} largest of {len(rep['clusters'])} clusters (--top N for more, --format json for all)"
        t = Table(title=title, title_justify="left")
        for col, j in (("cluster", "left"), ("nodes", "right"), ("effective", "right"), ("ops", "left")):
            t.add_column(col, justify=j)
        for c in shown:
            hist: dict[str, int] = {}
            for m in c["nodes"]:
                op = records[m].op
                hist[op] = hist.get(op, 0) + 1
            ops = ", ".join(f"{o}×{k}" if k > 1 else o for o, k in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))
            t.add_row(c["name"], str(c["size"]), str(c["effective_size"]), ops)
        if len(shown) < len(rep["clusters"]):
            rest = len(rep["clusters"]) - len(shown)
            t.add_row(f"... {rest} more", str(clustered - sum(c["size"] for c in shown)), "", "")
        con.print(t)
    rows: dict[tuple[str, str], int] = {}
    for rec in records.values():
        if rec.cluster is None:
            key = (rec.op, rec.decision.code if rec.decision is not None else "?")
            rows[key] = rows.get(key, 0) + 1
    if rows:
        t = Table(title="unclustered", title_justify="left")
        for col, j in (("op", "left"), ("count", "right"), ("reason", "left")):
            t.add_column(col, justify=j)
        items = sorted(rows.items(), key=lambda kv: (-kv[1], kv[0]))
        for (op, code), k in items[:top]:
            t.add_row(op, str(k), code)
        if len(items) > top:
            t.add_row(f"... {len(items) - top} more", "", "")
        con.print(t)



# `cluster -o` writes graphs of up to this many nodes in another thread while it makes its report
# (their binary pieces held meanwhile; bigger ones are written after, a piece at a time)
BACKGROUND_WRITE_MAX_NODES = 250_000



def cmd_cluster(args) -> int:
    """Every graph of the target simulated through the front door, reported (text or JSON
    schema jitsim.cluster/1) and, with -o, the marked graph(s) written."""
    from jitsim.frontend.resolve import target_kind

    path = Path(args.graph)
    recorded = None
    if target_kind(path) == "dump-dir":
        from jitsim.crosscheck.fidelity import recorded_flags

        recorded = recorded_flags(path)
    choice = _flags_choice(args, args.tf_xla_flags, recorded=recorded)
    options = _options(args, choice, device=args.device, until=MARK, explain_cycles=args.explain_cycles)
    run = _ClusterRun(args, choice, Path(args.output) if args.output is not None else None)
    run.simulate(path, options)
    written = run.write_outputs()
    for f, what in written:
        _wrote(f, what)
    if args.tensorboard:
        chosen = [(rep["name"], res) for i, (rep, res) in enumerate(zip(run.reports, run.results))
                  if i == run.sim.main or res.mark.ran or res.mark.candidates]
        _write_tensorboard(args, lambda: [(label, res.to_graphdef()) for label, res in chosen])
    if args.format == "json":
        o = run.sim.options
        _emit_json({"schema": "jitsim.cluster/1", "input": str(path),
                    "tf_version": {"version": o.tf_version, "reason": o.tf_version_reason},
                    "tf_xla_flags": choice.flags.text, "flags_origin": choice.origin,
                    "route": run.sim.route.to_dict(), "main_graph": run.sim.main, "graphs": run.reports,
                    "outputs": [str(f) for f, _ in written]}, args)
        return 0
    if run.text is not None:
        run.con.file.write(run.text)
        run.con.file.flush()
    else:
        run.print_report(_console())
    return 0


class _ClusterRun:
    """One ``jitsim cluster`` run: the simulation, each graph's report, and the marked graph's
    write, begun in the background as soon as the call's graph is clustered (its report is
    then made while the file is written, and shown after the ``wrote`` line)."""

    def __init__(self, args, choice, out: Path | None) -> None:
        self.args, self.choice, self.out = args, choice, out
        self.sim = None
        self.results: list = []
        self.records_of: list = []
        self.reports: list = []
        self.started = None  # the marked graph's write (save_started), when begun
        self.con = None
        self.text = None  # the text report, when made before that write ended

    def writes_one(self) -> bool:
        sim = self.sim
        return self.out is not None and not _is_dir(self.out) and (len(sim.graphs) == 1
                                                                    or sim.route.method == "tf-capture")

    def _on_result(self, sim, i, res) -> None:
        from jitsim.graph.io import save_started

        self.sim = sim
        if i == sim.main and self.writes_one() and len(res.cluster.graph.nodes) <= BACKGROUND_WRITE_MAX_NODES:
            # its pieces made here, then printed and written beside the reports
            self.started = save_started(list(res.cluster.serialized_pieces()), self.out)

    def simulate(self, path: Path, options) -> None:
        from jitsim.explain.clustering import node_records
        from jitsim.graph.io import save
        from jitsim.simulation import simulate

        args = self.args
        try:
            self.sim = sim = simulate(path, options, _call(args), tf=args.tf, graphs="all",
                                      progress=_simulation_progress, on_result=self._on_result)
            self.results = [r.cluster for r in sim.results]
            self.records_of = [node_records(res) for res in self.results]
            self.reports = [
                _graph_report(label + (" (the call)" if i == sim.main and len(sim.graphs) > 1 else ""), res, records,
                              nodes=args.format == "json")
                for i, ((label, _, _), res, records) in enumerate(zip(sim.graphs, self.results, self.records_of))]
            if self.started is not None:
                if args.format != "json":  # the report made while the file is written, shown after its line
                    self.con = _console()
                    with self.con.capture() as capture:
                        self.print_report(self.con)
                    self.text = capture.get()
                self.started.finish()
            elif self.writes_one():  # a big graph: written piece by piece (not all its pieces held at once)
                save(self.results[sim.main].serialized_pieces(), self.out)
        finally:
            if self.started is not None:
                self.started.discard()  # (nothing after finish(): kept where the command failed before)
            _progress_done()

    def write_outputs(self) -> list:
        """``(path, what)`` of every file -o gave: the marked graph (written already), else one
        file per graph with candidates in the directory -o names."""
        from jitsim.graph.io import save

        out, written = self.out, []
        if out is None:
            return written
        if self.writes_one():
            n = len(self.results[self.sim.main].clusters)
            return [(out, f"the marked graph, {n} cluster{'' if n == 1 else 's'}")]
        if not _is_dir(out):
            raise JitsimError("with several graphs, -o must name an existing directory", out)
        k = 0
        for res in self.results:
            if res.mark.ran or res.mark.candidates:
                f = out / (f"mark_for_compilation_{k}.pbtxt" if k else "mark_for_compilation.pbtxt")
                save(res.serialized_pieces(), f)
                written.append((f, f"a marked graph, {count(len(res.clusters), 'cluster')}"))
                k += 1
        if k == 0:
            written.append((out, "nothing: no graph had candidates"))
        return written

    def print_report(self, con) -> None:
        o = self.sim.options
        _print_cluster_report(con, self.args, self.sim, self.choice, o.tf_version, o.tf_version_reason,
                              self.reports, self.records_of)


def _print_cluster_report(con, args, pin, choice, version, version_reason, reports, records_of) -> None:
    """`cluster`'s text report: what was simulated and how, then each graph's clusters."""
    con.print(f"jitsim simulating TensorFlow {version} ({version_reason}) auto-clustering with {choice.describe()}")
    con.print(pin.route.line + pin.route.cost, markup=False)
    shown = [i for i, r in enumerate(reports) if args.all or len(reports) == 1 or i == pin.main or r["clusters"]
             or r["candidates"] > 3]
    for i in shown:
        _print_graph_report(con, reports[i], records_of[i], args.top)
    if len(reports) > 1:
        n_cl = sum(len(r["clusters"]) for r in reports)
        con.print(f"{count(len(reports), 'graph')}, {count(n_cl, 'cluster')}" +
                  (f" ({len(reports) - len(shown)} small graphs without clusters hidden; --all shows them)"
                   if len(shown) < len(reports) else ""))
    # where the tables' words are explained (a newcomer met them undefined: issue 39)
    con.print("words: candidates, effective size and the reason codes are explained in docs/reasons.md#words; "
              "`jitsim explain GRAPH NODE` says why one node is (not) in a cluster")


def add_parser(sub) -> None:
    """The ``cluster`` command's parser."""
    cl = sub.add_parser("cluster", help="predict TF's XLA clusters for a graph (mark-for-compilation)",
                        description="The clusters MarkForCompilation forms (TF's mark_for_compilation dump; JSON "
                        "schema jitsim.cluster/1). Later passes can still take nodes out: explain, whatif, diff, "
                        "render, report and the Python API's jitsim.cluster() show the clusters after "
                        "PartiallyDecluster, the ones TF compiles (jitsim rewrite --until decluster writes that graph).")
    cl.add_argument("graph", help="TF dump file (best: before_clone_constants_for_better_clustering_N.pbtxt), "
                    "dump/harvest directory, .pbtxt/.pb GraphDef, or SavedModel directory")
    _sim_args(cl)
    cl.add_argument("-o", "--output", help="write the marked graph like TF's mark_for_compilation dump (.pbtxt/.pb; "
                    "a directory for several graphs)")
    _tensorboard_arg(cl)
    cl.add_argument("--explain-cycles", action="store_true",
                    help="record the path behind every merge refused for a cycle (slower on big graphs)")
    cl.add_argument("--all", action="store_true", help="also list graphs without clusters")
    cl.add_argument("--top", type=int, default=12,
                    help="rows of each table: the largest clusters, the most common unclustered ops (default 12)")
    cl.set_defaults(func=cmd_cluster)
