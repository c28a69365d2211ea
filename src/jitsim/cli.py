"""The ``jitsim`` command line. Thin: parsing and printing; the work is in the library.

Exit codes (docs/cli.md): 0 success (``compare``/``verify``/``diff``: identical), 1 differences
found, 2 bad input or usage (exactly one ``jitsim: ...`` line on stderr, no traceback, no output
file; also stdout that cannot be written), 129/130/143 ended by HUP/INT/TERM (temporary files
removed), 141 the reader of stdout went away, 3 an internal error (a bug: one line, JITSIM_DEBUG=1 for
the traceback). Notes on what jitsim assumed to accept an odd input go to stderr after a
successful run. Every ``-o`` is checked before any work (:func:`_check_outputs`) and said in one
``wrote PATH (...)`` line (:func:`_wrote`); every ``--*tf-xla-flags`` option follows one rule
(:func:`_flags_choice`); ``--format``/``--timings`` have one definition for every command
(:func:`_output_args`) and JSON is written by one function (:func:`_emit_json`, docs/json.md).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import shutil
import sys
import warnings
from dataclasses import replace
from pathlib import Path

from jitsim import __version__, process
from jitsim.errors import JitsimError, JitsimWarning
from jitsim.defs import BEFORE_CLONE_DUMP, BEFORE_MARK_DUMP, DEVICES, MARK_DUMP, STAGES
from jitsim.flags import parse_tf_xla_flags
from jitsim.options import Call, Options, SessionConfig, auto_clustering_off, debug_mode, resolve_flags

MARK, DECLUSTER, _, BUILD_XLA_OPS = STAGES  # the stages a command stops after (--until names them all)


def _stderr_is_tty() -> bool:
    return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


# The one progress display of every command: a rich status line (spinner and text) on stderr,
# only when stderr is a terminal; nothing is written otherwise (pipes, files, CI logs).
_STATUS = None


def _progress_line(text: str) -> None:
    """Show ``text`` as the command's progress (replacing the previous one)."""
    global _STATUS
    if not _stderr_is_tty():
        return
    from rich.text import Text

    line = Text(text, no_wrap=True, overflow="ellipsis")  # one line, cut to the terminal's width
    if _STATUS is None:
        from rich.console import Console
        from rich.status import Status

        _STATUS = Status(line, console=Console(stderr=True, highlight=False, emoji=False), spinner="dots")
        _STATUS.start()
    else:
        _STATUS.update(line)


def _progress_done() -> None:
    """Clear the progress line (before the command prints its results or an error)."""
    global _STATUS
    if _STATUS is not None:
        status, _STATUS = _STATUS, None
        status.stop()


def _console():
    from rich.console import Console

    class _Console(Console):
        def on_broken_pipe(self) -> None:  # rich would exit 1 ("differences found"): one rule in main()
            raise BrokenPipeError(32, "Broken pipe")

    # emoji off: a node named "a:smile:" is printed as it is (and rich's emoji table not loaded)
    return _Console(highlight=False, soft_wrap=True, emoji=False)


# keys whose values are wall-clock times of jitsim's own work (or of a TF run it started): left out
# of JSON unless --timings, so that JSON is byte-identical from run to run (docs/json.md)
TIMING_KEYS = frozenset({"seconds", "wall_s", "capture_seconds", "mark_pass_us"})


def without_timings(obj):
    """``obj`` (JSON-ready) without :data:`TIMING_KEYS`, at any depth."""
    if isinstance(obj, dict):
        return {k: without_timings(v) for k, v in obj.items() if k not in TIMING_KEYS}
    if isinstance(obj, list):
        return [without_timings(v) for v in obj]
    return obj


def _emit_json(obj, args) -> None:
    """The one way a command writes JSON to stdout: a versioned ``schema`` first, timings only
    with ``--timings``, two-space indent."""
    assert isinstance(obj, dict) and str(obj.get("schema", "")).startswith("jitsim."), "JSON output needs a schema"
    if not getattr(args, "timings", False):
        obj = without_timings(obj)
    text = json.dumps(obj, indent=2)
    if _STDIN_FILE is not None:  # a graph read from stdin is named <stdin>, as in messages
        text = text.replace(json.dumps(_STDIN_FILE)[1:-1], "<stdin>")
    sys.stdout.write(text + "\n")


def _tensorboard_arg(p) -> None:
    """``--tensorboard DIR``: the one definition every command that makes a clustered graph uses."""
    p.add_argument("--tensorboard", metavar="DIR",
                   help="also write the clustered graph as a TensorBoard event file in DIR "
                        "(events.out.tfevents.<seconds>.<host>.jitsim; `tensorboard --logdir DIR`, Graphs, "
                        "color by XLA cluster); several graphs: one run (subdirectory) each")


def _write_tensorboard(args, make_graphs) -> None:
    """Write the graphs ``make_graphs()`` gives (``[(label, GraphDef)]``, made only when
    ``--tensorboard`` asks) for ``--tensorboard``: one graph into DIR, several into
    DIR/<NN>_<label> (one TensorBoard run each); one line on stderr says where."""
    logdir = getattr(args, "tensorboard", None)
    if not logdir:
        return
    graphs = make_graphs()
    if not graphs:
        return
    import re

    from jitsim.graph.events import write_graph_event_file

    if len(graphs) == 1:
        paths = [write_graph_event_file(logdir, graphs[0][1])]
    else:
        paths = [write_graph_event_file(Path(logdir) / f"{i:02d}_{re.sub(r'[^A-Za-z0-9_.-]+', '_', label).strip('_')[:80]}",
                                        gd) for i, (label, gd) in enumerate(graphs)]
    where = paths[0] if len(paths) == 1 else f"{len(paths)} event files under {logdir}"
    _wrote(where, f"the clustered graph for TensorBoard: tensorboard --logdir {logdir}")


def _wrote(path, what: str = "") -> None:
    """The one line every command that writes an output file or directory prints on stderr."""
    from jitsim.files.output import wrote_line

    print(wrote_line(path, what), file=sys.stderr)


# -- show ---------------------------------------------------------------------------------


def cmd_show(args) -> int:
    from jitsim.graph import load

    g = load(args.graph, signature=args.signature)  # a summary: odd nodes are shown, not refused
    s = g.summary()
    if args.format == "json":
        _emit_json({"schema": "jitsim.show/1", **s}, args)
        return 0
    from rich.table import Table

    con = _console()
    con.print(f"[bold]{_shown(s['source'])}[/]: {s['nodes']} nodes, {s['edges']} edges "
              f"({s['control_edges']} control), {s['functions']} library functions")
    if s["devices"]:
        con.print("devices: " + ", ".join(d or "(unassigned)" for d in s["devices"]))
    if s["clusters"]:
        t = Table(title="XLA clusters (_XlaCluster)", title_justify="left")
        t.add_column("cluster")
        t.add_column("nodes", justify="right")
        t.add_column("ops")
        clusters = g.clusters()
        for c, n in s["clusters"].items():
            hist: dict[str, int] = {}
            for name, cc in clusters.items():
                if cc == c:
                    hist[g[name].op] = hist.get(g[name].op, 0) + 1
            ops = ", ".join(f"{op}×{k}" if k > 1 else op for op, k in sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))
            t.add_row(c, str(n), ops)
        con.print(t)
    else:
        con.print("no node carries _XlaCluster")
    t = Table(title="op histogram", title_justify="left")
    t.add_column("op")
    t.add_column("count", justify="right")
    for op, n in list(s["ops"].items())[: args.top]:
        t.add_row(op, str(n))
    if len(s["ops"]) > args.top:
        t.add_row(f"... {len(s['ops']) - args.top} more ops", "")
    con.print(t)
    return 0


# -- cluster ------------------------------------------------------------------------------

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
    con.print(f"[bold]{rep['name']}[/]: {rep['nodes_total']} nodes, {rep['candidates']} candidates, "
              f"{len(rep['clusters'])} clusters ({clustered} nodes clustered)"
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
    from jitsim.explain.clustering import node_records
    from jitsim.frontend.resolve import target_kind
    from jitsim.graph.io import save, save_started
    from jitsim.simulation import simulate

    path = Path(args.graph)
    recorded = None
    if target_kind(path) == "dump-dir":
        from jitsim.crosscheck.fidelity import recorded_flags

        recorded = recorded_flags(path)
    choice = _flags_choice(args, args.tf_xla_flags, recorded=recorded)
    options = _options(args, choice, device=args.device, until=MARK, explain_cycles=args.explain_cycles)
    out = Path(args.output) if args.output is not None else None
    started = []  # the marked graph's write, begun as soon as its graph is clustered

    def writes_one(sim) -> bool:
        return out is not None and not _is_dir(out) and (len(sim.graphs) == 1 or sim.route.method == "tf-capture")

    def on_result(sim, i, res) -> None:
        if i == sim.main and writes_one(sim) and len(res.cluster.graph.nodes) <= BACKGROUND_WRITE_MAX_NODES:
            # its pieces made here, then printed and written beside the reports
            started.append(save_started(list(res.cluster.serialized_pieces()), out))

    text = None  # the text report, when made before that write ended
    try:
        sim = simulate(path, options, _call(args), tf=args.tf, graphs="all", progress=_simulation_progress,
                       on_result=on_result)
        pin, version, version_reason = sim, sim.options.tf_version, sim.options.tf_version_reason
        results = [r.cluster for r in sim.results]
        records_of = [node_records(res) for res in results]
        reports = [_graph_report(label + (" (the call)" if i == sim.main and len(sim.graphs) > 1 else ""), res,
                                 records, nodes=args.format == "json")
                   for i, ((label, _, _), res, records) in enumerate(zip(sim.graphs, results, records_of))]
        if started:
            if args.format != "json":  # the report made while the file is written, shown after its line
                con = _console()
                with con.capture() as capture:
                    _print_cluster_report(con, args, pin, choice, version, version_reason, reports, records_of)
                text = capture.get()
            started[0].finish()
        elif writes_one(sim):  # a big graph: written piece by piece (not all its pieces held at once)
            save(results[sim.main].serialized_pieces(), out)
    finally:
        if started:
            started[0].discard()  # (nothing after finish(): kept where the command failed before)
        _progress_done()
    written = []
    if args.output is not None:
        if writes_one(sim):
            n = len(results[sim.main].clusters)
            written.append((out, f"the marked graph, {n} cluster{'' if n == 1 else 's'}"))
        else:
            if not _is_dir(out):
                raise JitsimError("with several graphs, -o must name an existing directory", out)
            k = 0
            for res in results:
                if res.mark.ran or res.mark.candidates:
                    f = out / (f"mark_for_compilation_{k}.pbtxt" if k else "mark_for_compilation.pbtxt")
                    save(res.serialized_pieces(), f)
                    written.append((f, f"a marked graph, {len(res.clusters)} clusters"))
                    k += 1
            if k == 0:
                written.append((out, "nothing: no graph had candidates"))
    for f, what in written:
        _wrote(f, what)
    if args.tensorboard:
        chosen = [(rep["name"], res) for i, (rep, res) in enumerate(zip(reports, results))
                  if i == sim.main or res.mark.ran or res.mark.candidates]
        _write_tensorboard(args, lambda: [(label, res.to_graphdef()) for label, res in chosen])
    doc = {"schema": "jitsim.cluster/1", "input": str(path),
           "tf_version": {"version": version, "reason": version_reason},
           "tf_xla_flags": choice.flags.text, "flags_origin": choice.origin, "route": sim.route.to_dict(),
           "main_graph": sim.main, "graphs": reports, "outputs": [str(f) for f, _ in written]}
    if args.format == "json":
        _emit_json(doc, args)
        return 0
    if text is not None:
        con.file.write(text)
        con.file.flush()
    else:
        _print_cluster_report(_console(), args, pin, choice, version, version_reason, reports, records_of)
    return 0


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
        con.print(f"{len(reports)} graphs, {n_cl} clusters" +
                  (f" ({len(reports) - len(shown)} small graphs without clusters hidden; --all shows them)"
                   if len(shown) < len(reports) else ""))


FLAGS_RULE = ("added on top of the base flags (a harvest's recorded flags, else $TF_XLA_FLAGS, else jitsim's "
              "default --tf_xla_auto_jit=2 --tf_xla_cpu_global_jit); later flags win, as in TF. "
              "--no-default-flags: start from nothing (TF's own defaults: auto-clustering off)")


def _flags_choice(args, *parts, recorded=None, warn: bool = True):
    """The one rule for every command's flag options: ``parts`` (the command's --*-tf-xla-flags,
    in order) on top of the base flags, later flags winning, as in TF; ``--no-default-flags``
    starts from nothing. Warns when the result leaves auto-clustering off."""
    given = " ".join(x for x in parts if x)
    choice = resolve_flags(given or None, recorded, additive=True,
                           no_defaults=getattr(args, "no_default_flags", False))
    if warn:
        _warn_if_off(choice, args)
    return choice


def _warn_if_off(choice, args) -> None:
    level = _JIT_LEVELS.get(getattr(args, "session_jit_level", "default"), 0)
    if auto_clustering_off(choice.flags, level):
        warnings.warn(JitsimWarning(f'TF_XLA_FLAGS="{choice.flags.text}" ({choice.origin}) leave auto-clustering off '
                                    "(no --tf_xla_auto_jit=1|2|fusible): only nodes that ask for XLA themselves are "
                                    "compiled"))


def _check_device(value, option: str = "--device") -> None:
    if value is None or value in DEVICES or value.startswith("/"):
        if value is not None and value.startswith("/"):
            from jitsim.graph.device_names import parse_device_name

            if parse_device_name(value) is None:
                raise JitsimError(f"{option} {value!r}: not a device name (cpu, gpu, or a full name such as "
                                  "/job:localhost/replica:0/task:0/device:CPU:0)")
        return
    raise JitsimError(f"{option} {value!r}: use cpu or gpu (or a full device name such as "
                      "/job:localhost/replica:0/task:0/device:GPU:0)")


def _check_common(args) -> None:
    """Option values argparse cannot check by itself, refused before any work."""
    for opt in ("tf_version", "a_tf_version", "b_tf_version"):
        value = getattr(args, opt, None)
        for v in (value if isinstance(value, list) else [value] if value is not None else []):
            from jitsim.registry.versions import check_tf_version

            try:
                check_tf_version(v)
            except JitsimError as e:
                raise JitsimError(f"--{opt.replace('_', '-')}: {e}") from None
    for opt in ("device", "baseline_device", "a_device", "b_device"):
        _check_device(getattr(args, opt, None), "--" + opt.replace("_", "-"))
    n = getattr(args, "cluster_number_start", None)
    if n is not None and n < 0:
        raise JitsimError(f"--cluster-number-start {n}: TF's cluster counter starts at 0 and only grows; give 0 or more")
    for opt in ("top", "limit", "max_nodes"):
        v = getattr(args, opt, None)
        if v is not None and v < 0:
            raise JitsimError(f"--{opt.replace('_', '-')} {v}: give 0 or more")


_INPUT_STAGES = (BEFORE_CLONE_DUMP, BEFORE_MARK_DUMP, "graphdef")
_JIT_LEVELS = {"default": 0, "off": -1, "on": 1, "1": 1, "2": 2}


def _session(args) -> SessionConfig:
    return SessionConfig(_JIT_LEVELS[args.session_jit_level], args.session_cpu_global_jit)


def _options(args, choice, *, device=None, exclude=(), force=(), until=DECLUSTER, explain_cycles=None) -> Options:
    """The one place a command's arguments become the :class:`~jitsim.options.Options` of a
    simulation (built once, then handed unchanged to every pass): ``choice`` (the flags, from
    :func:`_flags_choice`), the session's ConfigProto, the input stage, the cluster counter's
    start and the requested TF release from ``args``; the device, what-if knobs, last stage and
    cycle explanations as the command asks."""
    return Options(choice.flags, choice.origin, device, tuple(exclude), tuple(force), _session(args),
                   getattr(args, "input_stage", None), getattr(args, "cluster_number_start", 0) or 0, until,
                   getattr(args, "tf_version", None), explain_cycles=explain_cycles)


def _add_session_args(p) -> None:
    p.add_argument("--session-jit-level", choices=sorted(_JIT_LEVELS), default="default",
                   help="the ConfigProto's global_jit_level (tf.config.optimizer.set_jit / TF1 session config); "
                        "TF_XLA_FLAGS' --tf_xla_auto_jit overrides it, as in TF")
    p.add_argument("--session-cpu-global-jit", action="store_true",
                   help="the ConfigProto's optimizer_options.cpu_global_jit (TF1 sessions)")


def cmd_rewrite(args) -> int:
    """The graph after ``--until``, taken by the same route and options as every simulating
    command (:func:`_simulate`: a raw GraphDef or SavedModel gets TF's pass input first)."""
    from jitsim.graph.io import save

    _single_graph(args.graph)
    choice = _flags_choice(args, args.tf_xla_flags)
    c = _simulate(args, _options(args, choice, device=args.device, until=args.until, explain_cycles=False))
    save(c.pipeline.serialized_pieces(), args.output)
    o = c.options
    n_clusters = len(c.pipeline.cluster.clusters)
    if c.route is not None:
        print(c.route.line, file=sys.stderr)
    _wrote(args.output, f"TF's {c.pipeline.stage_dump} dump of the graph, {n_clusters} clusters")
    _write_tensorboard(args, lambda: [(Path(args.graph).name, c.to_graphdef())])
    if args.format == "json":
        _emit_json({"schema": "jitsim.rewrite/1", "input": str(args.graph), "output": str(args.output),
                    "until": args.until, "stage_dump": c.pipeline.stage_dump,
                    "tf_version": {"version": o.tf_version, "reason": o.tf_version_reason},
                    "tf_xla_flags": choice.flags.text, "flags_origin": choice.origin,
                    "clusters": {k: list(m) for k, m in c.pipeline.cluster.clusters.items()}}, args)
    else:
        print(f"{Path(args.graph).name}: simulated TensorFlow {o.tf_version} ({o.tf_version_reason}) up to "
              f"{args.until} with {choice.describe()}; {n_clusters} clusters")
    return 0


def cmd_verify(args) -> int:
    from jitsim.crosscheck.fidelity import recorded_flags, verify_dir
    from jitsim.frontend.resolve import check_route_options, target_kind

    _check_ray_args(args)
    if len(args.dir) > 1 or args.ray is not None or args.output is not None:
        return _verify_campaign(args)
    path = Path(args.dir[0])
    if target_kind(path) != "dump-dir":
        raise JitsimError("verify compares jitsim with TF's own dumps: give a harvest or TF dump directory "
                          "(`jitsim crosscheck harvest` makes one from a model)", path)
    # the shared options mean what they mean for `jitsim cluster DIR`; those stating another
    # target's call are refused the same way
    check_route_options("dump-dir", signature=args.signature, fetch=args.fetch, feed=args.feed,
                        input_shapes=args.input_shape, captured=getattr(args, "captured", None))
    choice = _flags_choice(args, args.tf_xla_flags, recorded=recorded_flags(path))

    def progress(i, n):
        _progress_line(f"simulating graph {i + 1}/{n}")

    try:
        result = verify_dir(path, _options(args, choice, device=args.device, explain_cycles=False), progress=progress)
    finally:
        _progress_done()
    version = {"version": result.tf_version, "reason": result.tf_version_reason}
    if args.format == "json":
        _emit_json({**result.to_dict(), "schema": "jitsim.verify/1", "tf_xla_flags": choice.flags.text,
                    "flags_origin": choice.origin, "tf_version": version}, args)
    else:
        con = _console()
        con.print(f"jitsim simulating TensorFlow {result.tf_version} ({result.tf_version_reason}) with "
                  f"{choice.describe()}", markup=False)
        _print_compare(con, result, args.limit)
    return 0 if result.all_same_names else 1


def _verify_campaign(args) -> int:
    """``crosscheck verify DIR...`` with several directories, ``--ray`` or ``-o``: a harvest per
    item (jitsim.crosscheck.campaigns), one line per directory and the totals."""
    from jitsim.crosscheck.campaigns import verify_campaign
    from jitsim.crosscheck.fidelity import recorded_flags
    from jitsim.frontend.resolve import check_route_options, target_kind

    dirs = [Path(d) for d in args.dir]
    for d in dirs:
        if target_kind(d) != "dump-dir":
            raise JitsimError("verify compares jitsim with TF's own dumps: give a harvest or TF dump directory "
                              "(`jitsim crosscheck harvest` makes one from a model)", d)
    check_route_options("dump-dir", signature=args.signature, fetch=args.fetch, feed=args.feed,
                        input_shapes=args.input_shape, captured=getattr(args, "captured", None))
    choices = [_flags_choice(args, args.tf_xla_flags, recorded=recorded_flags(d)) for d in dirs]
    options = [_options(args, c, device=args.device, explain_cycles=False) for c in choices]
    identity = {"command": "verify", "dirs": [str(d.absolute()) for d in dirs],
                "tf_xla_flags": [c.flags.text for c in choices], "device": args.device,
                "tf_version": getattr(args, "tf_version", None)}

    def log(msg):
        _progress_done()
        print(f"jitsim: {msg}", file=sys.stderr, flush=True)

    try:
        rows, failed = verify_campaign(dirs, options, Path(args.output) if args.output else None, ray=args.ray,
                                       workers=args.workers, identity=identity,
                                       progress=_campaign_progress("verify", "harvests"), log=log)
    finally:
        _progress_done()
    if args.output:
        _wrote(args.output, f"campaign/ (a record per harvest, {len(rows)} verified)")
    graphs = sum(v["graphs"] for _, _, v in rows)
    same = sum(v["identical"] for _, _, v in rows)
    names = sum(v["same_names"] for _, _, v in rows)
    if args.format == "json":
        _emit_json({"schema": "jitsim.verify-campaign/1",
                    "harvests": [{"dir": str(d), "graphs": v["graphs"], "identical": v["identical"],
                                  "same_names": v["same_names"], "tf_version": v["simulated_tf_version"],
                                  "result": v["result"]} for d, _, v in rows],
                    "failed": [{"dir": str(d), "reason": r} for d, r in failed],
                    "graphs": graphs, "identical": same, "same_names": names}, args)
    else:
        for d, _, v in rows:
            print(f"{d}: TF {v['simulated_tf_version']}: {v['identical']}/{v['graphs']} graphs identical, "
                  f"{v['same_names']}/{v['graphs']} same names")
        for d, r in failed:
            print(f"{d}: not verified: {r}")
        print(f"{same}/{graphs} graphs identical, {names}/{graphs} same names; {len(rows)}/{len(dirs)} harvests "
              "verified")
    return 0 if names == graphs and not failed else 1


def _print_compare(con, result, limit: int) -> None:
    """A clustering comparison (verify, compare) as a rich table, one row per graph, then the
    differences of each graph that differs."""
    from rich.table import Table

    from jitsim.crosscheck.compare import corpus_summary

    if len(result.rows) == 1 and result.rows[0].diff is not None:
        con.print(result.rows[0].diff.format_text(limit=limit), markup=False, highlight=False)
    else:
        summ = corpus_summary(result.rows)
        t = Table(title=None if result.truth_stage == MARK_DUMP else
                  f"TF's clusters read from {result.truth_stage}", title_justify="left")
        for col, just in (("graph", "left"), ("nodes", "right"), ("TF cl", "right"), ("jitsim cl", "right"),
                          ("agree", "right"), ("partition", "left"), ("names", "left"), ("first difference", "left")):
            t.add_column(col, justify=just, overflow="fold")
        t.columns[0].no_wrap = True
        for d in summ["rows"]:
            # "graph 3 (before_clone_..._3.pbtxt)" -> "graph 3": the file is in the details and the JSON
            m = re.fullmatch(r"(graph \S+) \(.*\)", d["name"])
            d["name"] = m.group(1) if m else _middle_cut(d["name"])
            if d["error"] is not None:
                t.add_row(d["name"], "-", "-", "-", "-", "ERROR", "-", "error: " + d["error"].splitlines()[0])
                continue
            t.add_row(d["name"], str(d["n_nodes"]), str(d["n_truth_clusters"]), str(d["n_predicted_clusters"]),
                      f"{100 * d['agreement']:.1f}%", "yes" if d["identical"] else "no",
                      "yes" if d["same_names"] else "no", d["first_difference"] or "")
        con.print(t)
        con.print(f"{summ['identical']}/{summ['graphs']} graphs identical, {100 * summ['agreement']:.1f}% nodes "
                  f"agree; {summ['same_names']}/{summ['graphs']} same names"
                  + (f"; {summ['errors']} error{'s' if summ['errors'] != 1 else ''}" if summ["errors"] else ""),
                  markup=False)
        for r in result.rows:
            if r.diff is not None and not r.diff.identical:
                con.print(f"\n== {r.name}\n{r.diff.format_text(limit=limit)}", markup=False, highlight=False)
    for n in result.notes:
        con.print(f"note: {n}", markup=False)


def cmd_registry_export(args) -> int:
    from jitsim.graph.io import write_atomic
    from jitsim.registry.regen import export_op_library

    doc = export_op_library(args.modules, args.load_library, all_ops=args.all)
    if not doc["ops"]:  # an empty library is of no use to --op-defs (which refuses it): say so now
        what = (f"{', '.join(args.modules or [])} {', '.join(args.load_library or [])}".strip()
                or "no --import or --load-library given")
        raise JitsimError(f"nothing to export: no op beyond TF core's is registered ({what}); name the Python "
                          "module or .so that registers the custom ops (--import MODULE, --load-library LIB.so), or "
                          "--all for every op", args.output)
    write_atomic(Path(args.output), (json.dumps(doc, indent=1) + "\n").encode())
    names = f" ({', '.join(doc['op_names'][:8])}{', ...' if doc['ops'] > 8 else ''})" if doc["op_names"] else ""
    _wrote(args.output, f"{doc['ops']} ops{names}, "
                        f"{doc['xla_kernel_count']} XLA kernels, {doc['kernel_count']} CPU/GPU kernels from "
                        f"TensorFlow {doc['tf_version']}")
    if args.format == "json":
        _emit_json({"schema": "jitsim.registry-export/1", "output": str(args.output), "file_schema": doc["schema"],
                    "tf_version": doc["tf_version"], "modules": doc["modules"], "libraries": doc["libraries"],
                    "ops": doc["ops"], "op_names": doc["op_names"], "xla_kernel_count": doc["xla_kernel_count"],
                    "kernel_count": doc["kernel_count"]}, args)
    return 0


# -- explain, whatif, diff, render, report ---------------------------------------------------


def _sim_args(p, *, flags: bool = True, device: bool = True, releases: bool = False) -> None:
    """The options of one simulation and its input route, defined once for every command that
    simulates (cluster, rewrite, explain, whatif, diff, render, report, crosscheck verify), so
    that each takes the same inputs by the same routes with options meaning the same thing.
    ``flags``/``device``: whatif's --tf-xla-flags and --device state its variant, so it adds
    its own (and --baseline-... for these). ``releases``: --tf-version may be given twice (diff)."""
    if flags:
        p.add_argument("--tf-xla-flags", help="TF_XLA_FLAGS " + FLAGS_RULE)
    if device:
        p.add_argument("--device", help="place nodes without a device on cpu or gpu (raw GraphDefs)")
    p.add_argument("--input-stage", choices=_INPUT_STAGES,
                   help="what a graph file is, taken as it is: no TF capture, no simulated rewrites (default: decided from its content)")
    p.add_argument("--signature", help="SavedModel signature (default: serving_default)")
    _tf_arg(p)
    _call_args(p)
    _tf_version_arg(p, repeat=releases)
    _input_shape_arg(p)
    _no_defaults_arg(p)
    p.add_argument("--cluster-number-start", type=int, default=0,
                   help="first cluster number: TF's process-wide counter when this graph ran (0 or more)")
    _add_session_args(p)
    _op_defs_arg(p)


def _no_defaults_arg(p) -> None:
    p.add_argument("--no-default-flags", action="store_true",
                   help="start the TF_XLA_FLAGS from nothing (TF's own defaults) instead of the base flags; the "
                        "--*tf-xla-flags options then give all of them")


def _tf_arg(p) -> None:
    p.add_argument("--tf", choices=("auto", "always", "never"), default="auto",
                   help="for a SavedModel, .keras file, raw GraphDef or program: get TF's exact pass input from a "
                        "dry TensorFlow run (TF builds the call's graph and runs none of the model; a .py program "
                        "runs, sandboxed; cached), or predict without TensorFlow, running nothing (approximate); "
                        "auto: with TensorFlow when it is importable (default auto)")


def _call_args(p) -> None:
    p.add_argument("--fetch", action="append", default=[], metavar="NAME",
                   help="a TF1 graph's (GraphDef/MetaGraphDef) call, as sess.run takes names: NODE:N fetches a "
                        "tensor, NODE runs an op (repeatable). Without it jitsim assumes the call by a documented "
                        "rule (the train_op collection, else the sinks) and labels the result approximate")
    p.add_argument("--feed", action="append", default=[], metavar="NAME[=SHAPE]",
                   help="a tensor the call feeds (repeatable; NAME means NAME:0), e.g. --feed x=100,784; every "
                        "placeholder the call needs is fed anyway, the shape only lets TensorFlow run it")
    p.add_argument("--captured", action="append", default=[], metavar="CONST",
                   help="a tf.function's exported graph (cf.graph.as_graph_def()): a Const that was an eager tensor "
                        "the function captured, an argument of the live call (repeatable); --captured none: it "
                        "captured none. Until stated the result is approximate")


def _tf_version_arg(p, repeat: bool = False) -> None:
    from jitsim.registry import DEFAULT_TF_VERSION, SUPPORTED_TF_VERSIONS

    p.add_argument("--tf-version", metavar="X.Y", action="append" if repeat else "store",
                   help=f"TensorFlow release to simulate ({SUPPORTED_TF_VERSIONS[0]} to {SUPPORTED_TF_VERSIONS[-1]}); "
                        "default: the TF a capture or harvest ran, else the release that wrote the graph (its GraphDef "
                        f"producer; one two releases write is checked under both), else {DEFAULT_TF_VERSION}"
                        + ("; given twice, the two releases to compare" if repeat else ""))


def _input_shape_arg(p) -> None:
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=SHAPE",
                   help="a .keras model's call: the concrete shape of its input NAME (repeatable), e.g. "
                        "--input-shape input_ids=2,128. Unknown dims not given are set to 2, and the route line "
                        "says so: TF clusters the graph of that call")


def _op_defs_arg(p) -> None:
    p.add_argument("--op-defs", action="append", default=[], metavar="FILE",
                   help="OpDefs of ops TF core does not register (a custom-op library's), as written by `jitsim "
                        "registry export` (or an OpList .pbtxt/.pb); repeatable. Without it, jitsim infers them "
                        "from the graph")


def _whatif_args(p, prefix: str = "") -> None:
    p.add_argument(f"--{prefix}exclude-op", action="append", default=[], metavar="OP",
                   help="what-if: treat OP as uncompilable (repeatable; code WHATIF_EXCLUDED)")
    p.add_argument(f"--{prefix}force-compilable", action="append", default=[], metavar="OP",
                   help="what-if: treat OP as compilable, skipping every compilability check (repeatable)")


def _simulate(args, options: Options, graph=None, *, move_devices=False):
    """``graph`` (default: ``args.graph``) simulated with ``options`` (:func:`_options`), by the
    route the command's arguments state (signature, TF capture, session call, Keras call)."""
    from jitsim.explain.clustering import cluster

    shapes, signature = args.input_shape, args.signature
    if getattr(args, "other", None):  # diff of two targets: a Keras call or a signature applies to its own kind
        from jitsim.frontend.resolve import target_kind

        kind = target_kind(graph or args.graph)
        shapes = shapes if kind == "keras" else None
        signature = signature if kind == "saved_model" else None
    _progress_line(f"simulating {Path(str(graph or args.graph)).name}")
    try:
        return cluster(graph or args.graph, options=options, signature=signature, move_devices=move_devices,
                       tf=args.tf, fetch=args.fetch, feed=args.feed, input_shapes=shapes, captured=args.captured)
    finally:
        _progress_done()


def _call(args):
    """The call of the target the command's arguments state (:class:`~jitsim.options.Call`)."""
    captured = getattr(args, "captured", None)
    return Call(getattr(args, "signature", None), tuple(getattr(args, "fetch", ()) or ()),
                tuple(getattr(args, "feed", ()) or ()), getattr(args, "input_shape", None), None,
                tuple(captured) if captured else None)


def _simulation_progress(kind, *values) -> None:
    """:func:`jitsim.simulation.simulate`'s progress, as the command's progress line."""
    if kind == "capture":
        elapsed, ndumps = values
        _progress_line(f"TensorFlow running the call (fuel 0): {elapsed:.0f} s, {ndumps} dump files")
    elif kind == "graph":
        i, n = values
        _progress_line(f"simulating graph {i + 1}/{n}")


def _single_graph(path: str) -> None:
    p = Path(path)
    from jitsim.graph.io import is_saved_model_dir

    if p.is_dir() and not is_saved_model_dir(p):
        raise JitsimError("takes one graph file; for a harvest, name one of its dumps "
                          "(best: dumps/before_clone_constants_for_better_clustering_N.pbtxt; "
                          "`jitsim crosscheck index` lists them)", p)


def _simulate_given(args):
    """One graph simulated with the command's options and what-if knobs (explain, render, report)."""
    _single_graph(args.graph)
    choice = _flags_choice(args, args.tf_xla_flags)
    c = _simulate(args, _options(args, choice, device=args.device, exclude=args.exclude_op,
                                 force=args.force_compilable))
    _check_ops_exist(c, args.exclude_op, "--exclude-op")
    _check_ops_exist(c, args.force_compilable, "--force-compilable")
    return c


def _check_ops_exist(c, ops, option: str) -> None:
    """A what-if op no node has changes nothing: say so, with the op names it may have meant."""
    import difflib

    have = {rec.op for rec in c.nodes.values()}
    if all(op in have for op in ops):
        return
    given = c.input_graph()
    if given is not None:  # ops inside library functions count too (what-if knobs apply inside calls)
        have |= {nd.op for f in given.graphdef.library.function for nd in f.node_def}
    have = sorted(have)
    for op in ops:
        if op in have:
            continue
        close = [h for h in have if h.lower() == op.lower()] or difflib.get_close_matches(op, have, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise JitsimError(f"{option} {op}: no node of this graph has op {op!r}, so it would change nothing{hint}",
                          c.source if getattr(c, "source", None) else None)


def cmd_explain(args) -> int:
    if args.shapes:
        return _explain_recompiles(args)
    c = _simulate_given(args)
    ex = c.explain(args.node, args.other)
    if args.format == "json":
        _emit_json(ex.to_dict(), args)
    else:
        sys.stdout.write(ex.format_text(all_merges=args.all) + "\n")
    return 0


def _explain_recompiles(args) -> int:
    """``explain GRAPH UNIT --shapes S``: why a compiled unit recompiles (docs/runtime.md)."""
    from jitsim.runtime import recompile
    from jitsim.runtime.simulate import runtime
    from jitsim.runtime.stream import read_stream
    from jitsim.runtime.table import format_recompiles

    if args.other:
        raise JitsimError("with --shapes, explain answers why one compiled unit recompiles: give one cluster (or a "
                          "jit_compile call, or a node in one), not two nodes")
    steps = read_stream(args.shapes)  # bad input before any simulation
    _single_graph(args.graph)
    choice = _flags_choice(args, args.tf_xla_flags)
    c = _simulate(args, _options(args, choice, device=args.device, exclude=args.exclude_op,
                                 force=args.force_compilable, until=BUILD_XLA_OPS, explain_cycles=False))
    _check_ops_exist(c, args.exclude_op, "--exclude-op")
    _check_ops_exist(c, args.force_compilable, "--force-compilable")
    res = runtime(c.pipeline, c.options, steps, path=args.shapes)
    try:
        r = recompile.find_unit(res, args.node)
    except KeyError as e:
        raise JitsimError(e.args[0], args.graph) from None
    doc = recompile.explain(res, r)
    if args.format == "json":
        _emit_json({"schema": doc["schema"], "input": str(args.graph), "shapes": args.shapes,
                    "tf_xla_flags": choice.flags.text, "flags_origin": choice.origin,
                    "route": c.route.to_dict() if c.route is not None else None,
                    **{k: v for k, v in doc.items() if k != "schema"}}, args)
        return 0
    if c.route is not None:
        _console().print(c.route.line, markup=False, highlight=False)
    sys.stdout.write(format_recompiles(doc, all_compiles=args.all) + "\n")
    return 0


def cmd_whatif(args) -> int:
    _single_graph(args.graph)
    if not (args.tf_xla_flags or args.device or args.exclude_op or args.force_compilable):
        raise JitsimError("what if what? give --tf-xla-flags, --device, --exclude-op or --force-compilable")
    base_choice = _flags_choice(args, args.baseline_tf_xla_flags, warn=False)
    base = _simulate(args, _options(args, base_choice, device=args.baseline_device))
    _check_ops_exist(base, args.exclude_op, "--exclude-op")
    _check_ops_exist(base, args.force_compilable, "--force-compilable")
    if args.tf_xla_flags:  # on top of the baseline's, as every --*tf-xla-flags
        _flags_choice(args, args.baseline_tf_xla_flags, args.tf_xla_flags)
    else:
        _warn_if_off(base_choice, args)
    var = base.whatif(flags=args.tf_xla_flags, device=args.device, exclude_ops=args.exclude_op,
                      force_compilable=args.force_compilable)
    d = base.diff(var)
    if args.format == "json":
        _emit_json(d.to_dict(), args)
    else:
        sys.stdout.write(d.format_text(limit=args.limit) + "\n")
    return 0


def cmd_diff(args) -> int:
    _single_graph(args.graph)
    if args.other:
        _single_graph(args.other)
    fa = _flags_choice(args, args.tf_xla_flags, args.a_tf_xla_flags)
    fb = _flags_choice(args, args.tf_xla_flags, args.b_tf_xla_flags)
    da, db = args.a_device or args.device, args.b_device or args.device
    ta, tb = _diff_releases(args)
    if (not args.other and fa.flags.text == fb.flags.text and da == db and ta == tb
            and not (args.b_exclude_op or args.b_force_compilable)):
        raise JitsimError("nothing to compare: give a second graph, or --a-/--b- flags, devices or TF releases that "
                          "differ")
    a = _simulate(args, replace(_options(args, fa, device=da), tf_version=ta), move_devices=bool(args.a_device))
    b = _simulate(args, replace(_options(args, fb, device=db, exclude=args.b_exclude_op, force=args.b_force_compilable),
                                tf_version=tb), args.other, move_devices=bool(args.b_device))
    _check_ops_exist(b, args.b_exclude_op, "--b-exclude-op")
    _check_ops_exist(b, args.b_force_compilable, "--b-force-compilable")
    la = (Path(args.graph).name + " " if args.other else "") + a.options.describe()
    lb = (Path(args.other).name + " " if args.other else "") + b.options.describe()
    if a.options.tf_version != b.options.tf_version:
        la, lb = f"TF {a.options.tf_version}, {la}", f"TF {b.options.tf_version}, {lb}"
    from jitsim.explain.diff import diff_clusterings, upgrade_report

    if not args.other and a.options.tf_version != b.options.tf_version:  # the upgrade report: with why
        d = upgrade_report(a, b, baseline=la, variant=lb)
    else:
        d = diff_clusterings(a, b, baseline=la, variant=lb)
    if args.format == "json":
        _emit_json(d.to_dict(), args)
    else:
        sys.stdout.write(d.format_text(limit=args.limit) + "\n")
    return 0 if d.same_partition else 1


def _diff_releases(args) -> tuple[str | None, str | None]:
    """The releases a diff compares: ``--a-tf-version``/``--b-tf-version``, or ``--tf-version``
    given twice (the upgrade report: ``jitsim diff G --tf-version 2.21 --tf-version 2.22``), or
    one ``--tf-version`` for both sides (None: each side's own rule)."""
    given = args.tf_version if isinstance(args.tf_version, list) else ([args.tf_version] if args.tf_version else [])
    if len(given) > 2:
        raise JitsimError("--tf-version: a diff compares two releases (give it twice at most)")
    base = given[0] if len(given) == 1 else None
    ta = args.a_tf_version or (given[0] if len(given) == 2 else base)
    tb = args.b_tf_version or (given[1] if len(given) == 2 else base)
    args.tf_version = ta  # what the simulations start from; each side gets its own below
    return ta, tb


def _simulation_json(c, args) -> dict:
    """What every JSON of one simulated graph starts with (render, report): the input as given,
    the release, the flags, the route."""
    o = c.options
    return {"input": str(args.graph), "tf_version": {"version": o.tf_version, "reason": o.tf_version_reason},
            "tf_xla_flags": o.flags_text, "flags_origin": o.flags_origin,
            "route": None if c.route is None else c.route.to_dict()}


def cmd_render(args) -> int:
    from jitsim.explain.render import render_file

    c = _simulate_given(args)
    view = "collapsed" if args.collapsed else ("full" if args.full else "auto")
    try:
        info = render_file(c, args.output, view=view, max_nodes=args.max_nodes, progress=_progress_line)
    finally:
        _progress_done()
    _wrote(info["output"], info["what"])
    if args.format == "json":
        _emit_json({"schema": "jitsim.render/1", **_simulation_json(c, args),
                    **{k: info[k] for k in ("output", "format", "view", "clusters", "nodes")}}, args)
    _write_tensorboard(args, lambda: [(Path(args.graph).name, c.to_graphdef())])
    return 0


def cmd_report(args) -> int:
    from jitsim.explain.report import write_report_file

    steps = None
    if args.shapes:
        from jitsim.runtime.stream import read_stream

        steps = read_stream(args.shapes)  # bad input before any simulation
    c = _simulate_given(args)
    rt = _report_runtime(args, steps) if steps is not None else None
    _progress_line("writing the report (graphviz dot draws the picture)")
    try:
        info = write_report_file(c, args.output, runtime=rt)
    finally:
        _progress_done()
    _wrote(info["output"], info["what"] + (f"; {info['problem']}" if info["problem"] else ""))
    if args.format == "json":
        _emit_json({"schema": "jitsim.report/1", **_simulation_json(c, args),
                    **{k: info[k] for k in ("output", "clusters", "nodes", "bytes", "problem")}}, args)
    _write_tensorboard(args, lambda: [(Path(args.graph).name, c.to_graphdef())])
    return 0


def _report_runtime(args, steps) -> dict:
    """``report --shapes``: the run-time section's data (the timeline picture, one row per unit),
    from a simulation up to build-xla-ops with the report's options."""
    from jitsim.runtime.simulate import runtime
    from jitsim.runtime.svg import timeline_svg

    c = _simulate(args, _options(args, _flags_choice(args, args.tf_xla_flags, warn=False), device=args.device,
                                 exclude=args.exclude_op, force=args.force_compilable, until=BUILD_XLA_OPS,
                                 explain_cycles=False))
    res = runtime(c.pipeline, c.options, steps, path=args.shapes)
    units = []
    for r in res.units:
        d = r.to_dict()
        units.append({"name": d["name"], "kind": d["kind"], "mode": d["mode"], "signatures": len(d["signatures"]),
                      "compiles": d["compiles"], "compile_steps": d["compile_steps"],
                      "megamorphic_at_step": d["megamorphic_at_step"], "fallbacks": len(d["fallback_steps"]),
                      "executions": len(d["fallback_steps"]) + len(d["compiled_steps"]),
                      "ran_compiled": len(d["compiled_steps"]), "recompiles_with": d["recompiles_with"]})
    title = f"{Path(args.graph).name}: {res.steps} steps ({args.shapes})"
    return {"stream": str(args.shapes), "steps": res.steps, "svg": timeline_svg(res, title=title), "units": units}


# -- crosscheck ---------------------------------------------------------------------------


def cmd_harvest(args) -> int:
    from jitsim.crosscheck.harvest import DEFAULT_FLAGS, harvest

    base = "" if args.no_default_flags else os.environ.get("TF_XLA_FLAGS", DEFAULT_FLAGS)
    flags = f"{base} {args.tf_xla_flags or ''}".strip()  # on top of the base, later flags win (one rule)
    parse_tf_xla_flags(flags)  # TF would abort on a bad flag: say so now, not after starting TF
    _check_ray_args(args)
    if len(args.target) > 1 or args.ray is not None:
        return _harvest_campaign(args, flags)
    args.target = args.target[0]

    def progress(elapsed, ndumps):
        _progress_line(f"running TensorFlow on {args.target}: {elapsed:5.1f} s, {ndumps} dump files")

    call = None
    if getattr(args, "captured", None):
        raise JitsimError("--captured states an exported function's call for jitsim's TF route; crosscheck harvest runs "
                          "a GraphDef as a session call", args.target)
    if args.fetch or args.feed:  # a TF1 graph's sess.run, as jitsim cluster --fetch makes it
        from jitsim.crosscheck.targets import target_kind
        from jitsim.frontend.session_call import is_session_graph, session_call
        from jitsim.graph.io import load

        if target_kind(Path(args.target)) != "graphdef":
            raise JitsimError("--fetch/--feed apply to a GraphDef or MetaGraphDef file", args.target)
        graph = load(args.target, validate=True, check_ops=True)
        if not is_session_graph(graph):
            raise JitsimError("--fetch/--feed name a session call, but this graph has _Arg/_Retval nodes",
                              args.target)
        call = session_call(graph, args.fetch, args.feed).to_dict()
    shapes = ()
    if args.input_shape:  # a .keras model's call, as jitsim cluster --input-shape makes it
        from jitsim.crosscheck.targets import target_kind
        from jitsim.crosscheck.keras_call import normalize_input_shapes

        try:
            shapes = normalize_input_shapes(args.input_shape)
        except JitsimError as e:
            e.path = args.target
            raise
        if target_kind(Path(args.target)) != "keras":
            raise JitsimError("--input-shape states a Keras model's call: it applies to a .keras file", args.target)
    try:
        index = harvest(args.target, args.output, flags=flags, signature=args.signature,
                        python=args.python, timeout=args.timeout, progress=progress,
                        overwrite=args.overwrite, call=call, input_shapes=shapes)
    finally:
        _progress_done()
    _wrote(args.output, f"TF's dumps of {len(index['graphs'])} graphs, log.txt, index.json")
    if args.format == "json":
        _emit_json(index, args)
        return 0
    _print_index(index, args.output)
    return 0


def _harvest_campaign(args, flags: str) -> int:
    """``crosscheck harvest TARGET...`` with several targets or ``--ray``: a target per item
    (jitsim.crosscheck.campaigns), each harvest in ``OUT/<name>/``."""
    from jitsim.crosscheck.campaigns import harvest_campaign

    if args.fetch or args.feed or args.input_shape:
        raise JitsimError("--fetch/--feed/--input-shape state one target's call: harvest that target alone, "
                          "without --ray", args.target[0])

    def log(msg):
        _progress_done()
        print(f"jitsim: {msg}", file=sys.stderr, flush=True)

    targets = [Path(t) for t in args.target]
    try:
        rows, failed = harvest_campaign(targets, Path(args.output), flags=flags, signature=args.signature,
                                        python=args.python, timeout=args.timeout, ray=args.ray,
                                        workers=args.workers, progress=_campaign_progress("harvest", "targets"),
                                        log=log)
    finally:
        _progress_done()
    _wrote(args.output, f"{len(rows)} harvests (a directory per target), campaign/")
    if args.format == "json":
        _emit_json({"schema": "jitsim.harvest-campaign/1",
                    "harvests": [{"target": str(t), "dir": str(d), "graphs": v["graphs"],
                                  "tf_version": v["tf_version"]} for t, d, v in rows],
                    "failed": [{"target": str(t), "reason": r} for t, r in failed]}, args)
    else:
        for t, d, v in rows:
            print(f"{t}: {v['graphs']} graphs under TF {v['tf_version']} -> {d}")
        for t, r in failed:
            print(f"{t}: not harvested: {r}")
        print(f"{len(rows)}/{len(targets)} targets harvested")
    return 1 if failed else 0


def cmd_matrix(args) -> int:
    """``crosscheck matrix``: a corpus under several TF releases, jitsim verified on each."""
    from jitsim.crosscheck.campaigns import matrix_campaign
    from jitsim.crosscheck.corpus import Corpus

    _check_ray_args(args)
    corpus = Corpus(args.corpus)
    runs = corpus.runs()
    if args.only:
        unknown = sorted(set(args.only) - {r.name for r in runs})
        if unknown:
            raise JitsimError(f"no run named {unknown[0]!r} in the manifest", corpus.root / "manifest.toml")
        runs = [r for r in runs if r.name in args.only]
    if args.limit is not None:
        runs = runs[:args.limit]
    for py in args.python:
        if not (Path(py).exists() or shutil.which(py)):
            raise JitsimError("no such Python", py)

    def log(msg):
        _progress_done()
        print(f"jitsim: {msg}", file=sys.stderr, flush=True)

    try:
        table = matrix_campaign(runs, corpus.root, args.python, Path(args.output), timeout=args.timeout,
                                ray=args.ray, workers=args.workers, progress=_campaign_progress("matrix", "runs"),
                                log=log)
    finally:
        _progress_done()
    _wrote(args.output, f"campaign/ (a record per run and release, {len(runs) * len(args.python)} in all)")
    out, ok = [], True
    for py, (release, rows) in table.items():
        done = [(r, v) for r, v, _ in rows if v is not None]
        graphs = sum(v["graphs"] for _, v in done)
        same = sum(v["identical"] for _, v in done)
        names = sum(v["same_names"] for _, v in done)
        ok = ok and same == graphs and len(done) == len(rows)
        out.append({"python": py, "tf_version": release, "runs": len(rows), "harvested": len(done),
                    "graphs": graphs, "identical": same, "same_names": names,
                    "simulated": sorted({v["simulated_tf_version"] for _, v in done}),
                    "differing": [{"run": r.name, "graphs": v["graphs"], "identical": v["identical"]}
                                  for r, v in done if v["identical"] != v["graphs"]],
                    "failed": [{"run": r.name, "reason": why} for r, v, why in rows if v is None]})
    if args.format == "json":
        _emit_json({"schema": "jitsim.version-matrix/1", "corpus": str(corpus.root), "releases": out}, args)
    else:
        for rel in out:
            print(f"TF {rel['tf_version']}: {rel['identical']}/{rel['graphs']} graphs identical, "
                  f"{rel['same_names']}/{rel['graphs']} same names, {rel['harvested']}/{rel['runs']} runs harvested "
                  f"(jitsim simulated {', '.join(rel['simulated']) or '-'}; {rel['python']})")
            for d in rel["differing"]:
                print(f"  {d['run']}: {d['identical']}/{d['graphs']} graphs identical")
            for f in rel["failed"]:
                print(f"  {f['run']}: not harvested/verified: {f['reason']}")
    return 0 if ok else 1


def cmd_profile(args) -> int:
    from jitsim.crosscheck.harvest import DEFAULT_FLAGS
    from jitsim.profile.command import profile

    base = "" if args.no_default_flags else os.environ.get("TF_XLA_FLAGS", DEFAULT_FLAGS)
    flags = f"{base} {args.tf_xla_flags or ''}".strip()  # the XLA-on run's flags (one rule, as harvest)
    try:
        s = profile(args.target, args.output, steps=args.steps, warmup=args.warmup, flags=flags, device=args.device,
                    signature=args.signature, timeout=args.timeout, overwrite=args.overwrite,
                    progress=_progress_line, input_shapes=args.input_shape)
    finally:
        _progress_done()
    _wrote(args.output, "summary.json, index.html, traces, timelines, hlo/")
    if args.format == "json":
        _emit_json(s, args)
        return 0
    st = s["step_time"]

    def ms(x):
        return "-" if x is None else f"{x * 1000:.3f} ms"

    ratio = "-" if s["step_time_ratio"] is None else f"{s['step_time_ratio']:.2f}"
    print(f"{args.output}: {s['steps']} steps after {s['warmup']} warm-up, device {s['device']}")
    print(f"step time  XLA off: median {ms(st['off']['median_s'])} (IQR {ms(st['off']['iqr_s'])}), "
          f"{s['tf_ops_per_step']['off']} TF ops/step")
    print(f"step time  XLA on:  median {ms(st['on']['median_s'])} (IQR {ms(st['on']['iqr_s'])}), "
          f"{s['xla_launches_per_step']['on']} XLA launches + {s['tf_ops_per_step']['on']} TF ops/step")
    print(f"step_time_ratio (off/on) {ratio}; XLA compile {ms(s['compile_s'])} once "
          f"({s['compilations']} HLO module{'' if s['compilations'] == 1 else 's'} compiled)")
    for c in s["clusters"]:
        print(f"  {c['cluster']}: {c['nodes']} TF nodes, predicted {c['predicted_cluster'] or '-'} ({c['prediction']}), "
              f"HLO {c['hlo_module'] or '-'}, {c['fusions'] if c['fusions'] is not None else '-'} fusions, "
              f"{c['time_per_step_us']:.1f} us/step")
    for n in s["notes"]:
        print(f"  note: {n}")
    return 0


def cmd_runtime(args) -> int:
    """What the JIT does at run time (docs/runtime.md): compiles, fallbacks, megamorphic units."""
    from jitsim.runtime.simulate import runtime
    from jitsim.runtime.stream import read_stream
    from jitsim.runtime.table import print_result

    if args.output and not args.shapes:
        raise JitsimError("-o draws the steps' timeline: give --shapes", args.output)
    steps = read_stream(args.shapes) if args.shapes else None  # bad input before any simulation
    _single_graph(args.graph)
    choice = _flags_choice(args, args.tf_xla_flags)
    c = _simulate(args, _options(args, choice, device=args.device, until=BUILD_XLA_OPS, explain_cycles=False))
    res = runtime(c.pipeline, c.options, steps, path=args.shapes)
    if args.output:
        from jitsim.graph.io import write_atomic
        from jitsim.runtime.svg import timeline_svg

        write_atomic(Path(args.output), timeline_svg(res, title=f"{Path(args.graph).name}: {res.steps} steps "
                                                                 f"({args.shapes})").encode())
    check = None
    if args.check_with_tf:
        from jitsim.runtime.compare import compare
        from jitsim.runtime.tflog import parse_log
        from jitsim.runtime.tfrun import measure

        if not args.shapes or Path(args.graph).suffix != ".py":
            raise JitsimError("--check-with-tf runs a .py program's tf.function over --shapes under TensorFlow: give "
                              "both", args.graph)
        _progress_line("TensorFlow running the stream")
        try:
            check = compare(res.to_dict(), parse_log(measure(args.graph, args.shapes, flags=choice.flags.text,
                                                             function=args.function)))
        finally:
            _progress_done()
    if args.format == "json":
        _emit_json({**res.to_dict(), "input": str(args.graph), "shapes": args.shapes,
                    "tf_xla_flags": choice.flags.text, "flags_origin": choice.origin,
                    "route": c.route.to_dict() if c.route is not None else None, "tf_check": check}, args)
        return 0 if check is None or check["identical"] else 1
    con = _console()
    if c.route is not None:
        con.print(c.route.line, markup=False, highlight=False)
    print_result(con, res, source=Path(args.graph).name)
    if check is not None:
        from jitsim.runtime.table import print_check

        print_check(con, check)
    return 0 if check is None or check["identical"] else 1


def _print_index(index: dict, where) -> None:
    from rich.table import Table

    con = _console()
    tot = index["totals"]
    flags = index.get("tf_xla_flags")
    con.print(f"{where}: TF {index.get('tf_version') or 'version not recorded'}, "
              + (f'TF_XLA_FLAGS="{flags}"' if flags is not None else "TF_XLA_FLAGS not recorded"), markup=False)
    con.print(f"{tot['graphs']} graphs, {tot['graphs_with_candidates']} with candidates, "
              f"{tot['graphs_with_clusters']} with clusters, {tot['clusters']} clusters")
    t = Table()
    for col, just in (("graph", "right"), ("input dump", "left"), ("nodes", "right"),
                      ("clusters", "left"), ("TF pass time", "right")):
        t.add_column(col, justify=just, no_wrap=col != "clusters")
    for g in index["graphs"]:
        clusters = ", ".join(f"{c}({n})" for c, n in g["clusters"].items()) or "-"
        us = g.get("mark_pass_us")
        t.add_row(str(g["id"]), _middle_cut(g["files"].get(g.get("input_stage") or "", "-")), str(g["nodes"]),
                  clusters, "-" if us is None else f"{us / 1000:.2f} ms")
    con.print(t)


def _middle_cut(name: str, keep: int = 32) -> str:
    """A long dump file name cut in the middle, its start (the stage) and its end (the unique
    ``_N.pbtxt`` suffix) kept, so rows stay apart (--format json has the full names)."""
    if len(name) <= keep:
        return name
    tail = keep * 2 // 3
    return name[:keep - tail - 1] + "…" + name[-tail:]


def cmd_index(args) -> int:
    from jitsim.graph.dumps import INDEX_SCHEMA, dump_dir, index_dump_dir
    from jitsim.crosscheck.harvest import totals

    from jitsim.files.input import read_json, read_text

    where = dump_dir(args.dumps)
    if args.log:  # a regular file only, bounded: /dev/zero or a FIFO is refused, never a hang
        log_text = read_text(args.log, what="TF's log (a text file)")
    else:  # a harvest's own log, as verify and cluster read it
        log_text = where.log_text()
    graphs = index_dump_dir(where.dumps, log_text)
    recorded = {}
    if os.path.lexists(where.root / "index.json"):  # a harvest: what it recorded about its run
        recorded = read_json(where.root / "index.json", what="a harvest's index.json")
        recorded = recorded if isinstance(recorded, dict) else {}
    index = {"schema": INDEX_SCHEMA, "target": recorded.get("target"), "kind": recorded.get("kind", "dump_dir"),
             "tf_version": recorded.get("tf_version"), "tf_xla_flags": recorded.get("tf_xla_flags"),
             "graphs": graphs, "totals": totals(graphs)}
    if args.output:
        from jitsim.graph.io import write_atomic

        write_atomic(Path(args.output), (json.dumps(index, indent=1) + "\n").encode())
        _wrote(args.output, f"the index of {len(graphs)} graph{'' if len(graphs) == 1 else 's'}, "
                            f"schema {INDEX_SCHEMA}")
    if args.format == "json":
        _emit_json(index, args)
    else:
        _print_index(index, args.dumps)
    return 0


def _graph_pairs(predicted: Path, truth: Path, stage: str):
    """(label, predicted file, truth file) for files, or per graph for two dump directories."""
    from jitsim.graph.dumps import dump_dir

    if not predicted.is_dir() and not truth.is_dir():
        return [(truth.name, predicted, truth)]

    def files(root: Path):
        where = dump_dir(root)
        return [(r.id, where.dumps / r.files[stage]) for r in where.records() if stage in r.files]

    if not (predicted.is_dir() and truth.is_dir()):
        raise JitsimError("compare a file with a file, or a directory with a directory", predicted)
    a, b = files(predicted), files(truth)
    if len(a) != len(b):
        raise JitsimError(f"cannot pair graphs: {len(a)} {stage} dumps vs {len(b)}", predicted)
    return [(f"graph {ib} ({tb.name})", pa, tb) for (_, pa), (ib, tb) in zip(a, b)]


def cmd_compare_graphs(args) -> int:
    from jitsim.crosscheck.graphdiff import diff_graphdefs
    from jitsim.graph.io import read_graphdef

    results = []
    for label, p, t in _graph_pairs(Path(args.predicted), Path(args.truth), args.stage):
        results.append((label, diff_graphdefs(read_graphdef(p), read_graphdef(t), ignore_attrs=args.ignore_attr or ())))
    if args.format == "json":
        _emit_json({"schema": "jitsim.graphdiff/1", "graphs": [{"name": n, **d.to_dict()} for n, d in results]}, args)
    else:
        for n, d in results:
            sys.stdout.write(f"== {n}: " + d.format_text(limit=args.limit) + "\n")
        same = sum(d.identical for _, d in results)
        sys.stdout.write(f"{same}/{len(results)} graphs identical\n")
    return 0 if all(d.identical for _, d in results) else 1


def cmd_compare(args) -> int:
    from jitsim.crosscheck.scoring import compare_paths

    if args.graph:
        return cmd_compare_graphs(args)

    result = compare_paths(args.predicted, args.truth, stage=args.stage)
    if args.format == "json":
        _emit_json(result.to_dict(), args)
    else:
        _print_compare(_console(), result, args.limit)
    ok = result.all_same_names if args.names else result.all_identical
    return 0 if ok else 1


def cmd_fuzz(args) -> int:
    from jitsim.crosscheck.fuzz.campaign import campaign, write_summary

    def progress(done, total, bad):
        _progress_line(f"fuzz: {done}/{total} examples compared with TF, {bad} disagreeing")

    def log(msg):
        _progress_done()
        print(msg, file=sys.stderr, flush=True)

    evaluator = None
    _check_ray_args(args)
    if args.ray is not None:  # one batch per Ray task, OUT/campaign/ the record (resumes)
        from jitsim.crosscheck.campaigns import FuzzCampaign

        if args.examples < 1:
            raise JitsimError("--examples must be at least 1")
        identity = {"command": "fuzz", "examples": args.examples, "seed": args.seed, "profile": args.profile,
                    "batch_size": args.batch_size, "tf_reruns": args.tf_reruns}
        evaluator = FuzzCampaign(Path(args.output).absolute(), identity, args.batch_size, args.timeout,
                                 args.tf_reruns, ray=args.ray, workers=args.workers,
                                 progress=_campaign_progress("fuzz", "batches"), log=log)
    try:
        res = campaign(args.examples, args.seed, out=args.output, batch_size=args.batch_size, profile=args.profile,
                       shrink_budget_s=args.shrink_seconds, do_shrink=not args.no_shrink, max_shrink=args.max_shrink,
                       keep_work=args.keep_work, tf_reruns=args.tf_reruns,
                       timeout=args.timeout, progress=progress, log=log, evaluator=evaluator)
    finally:
        _progress_done()
    cmd = (f"jitsim crosscheck fuzz --examples {args.examples} --seed {args.seed} --profile {args.profile} "
           f"--tf-reruns {args.tf_reruns}")
    summary = write_summary(res, Path(args.output) / "summary.json", seed=args.seed, command=cmd)
    if evaluator is not None:
        _wrote(args.output, f"summary.json, {len(res.reproducers)} reproducers, campaign/ (a record per batch, "
                            f"{evaluator.resumed} from an earlier run)")
        for label, reason in evaluator.failed:
            print(f"jitsim: {label}: failed twice: {reason}", file=sys.stderr)
    else:
        _wrote(args.output, f"summary.json, {len(res.reproducers)} reproducers")
    if args.format == "json":
        _emit_json(summary, args)
        return 1 if res.disagreements else 0
    unstable = (f"{res.tf_unstable} examples differ only where TF differed from itself when rerun"
                + (f" (evidence: {Path(args.output) / 'tf-unstable'})" if res.tf_unstable_dirs else "")
                if args.tf_reruns > 0 else "TF reruns off")
    print(f"{res.graphs} graphs compared in {res.wall_s:.0f} s; TF raised in {res.tf_errors} examples, "
          f"crashed in {res.crashes}; {res.tf_nondeterminism} known TF nondeterminism; {unstable} "
          "(docs/fuzzing.md)")
    for path in res.reproducers:
        print(f"reproducer: {path}")
    print(res.final_line())
    return 1 if res.disagreements or (evaluator is not None and evaluator.failed) else 0


def _campaign_progress(what: str, unit: str):
    """The progress line of a campaign (jitsim.crosscheck.campaigns): counts and ETA."""

    def progress(done, total, failed, eta, resumed):
        left = "" if eta is None else f", ETA {int(eta) // 60}m{int(eta) % 60:02d}s"
        _progress_line(f"{what}: {done}/{total} {unit} done ({resumed} from an earlier run), {failed} failed{left}")

    return progress


def _ray_args(p, what: str) -> None:
    """``--ray [ADDRESS]`` and ``--workers N``: the same options, with the same meaning, on every
    command that runs a campaign (crosscheck fuzz, harvest, verify, matrix)."""
    p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                   help=f"run {what} as Ray tasks, a record per item in OUT/campaign/ (re-running resumes): "
                        "'local' (the default value) starts Ray on this machine, an address ('auto', "
                        "'ray://HOST:10001', 'HOST:PORT') joins a running cluster; needs pip install "
                        "'jitsim[ray]' (docs/campaigns.md)")
    p.add_argument("--workers", type=_positive_int, metavar="N",
                   help="with --ray: items running at once (default: the cluster's CPUs)")


def _check_ray_args(args) -> None:
    if args.workers is not None and args.ray is None:
        raise JitsimError("--workers N applies to a campaign on Ray: add --ray [ADDRESS]")


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return v


# -- parser -------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line too (``jitsim: jitsim cluster: ...``), exit 2, like bad input.
    Options are never matched by a prefix (``--tf`` is not ``--tf-xla-flags``): every parser,
    subcommands' included, is made with ``allow_abbrev=False``."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"jitsim: {_one_line(message)} (see {self.prog} --help)\n")


class _Skipped:
    """What :class:`_OneCommand` gives for a command not being run: takes every call (add_argument,
    set_defaults, nested add_subparsers...) and builds nothing."""

    def __getattr__(self, name):
        return self._take

    def __setattr__(self, name, value) -> None:
        pass

    def _take(self, *args, **kwargs):
        return self


class _OneCommand:
    """The top-level ``add_subparsers`` action, building only ``command``'s parser: a command
    line that names its command needs no other (19 parsers: 5 ms of every run)."""

    def __init__(self, sub, command: str) -> None:
        self._sub = sub
        self._command = command

    def add_parser(self, name: str, **kwargs):
        return self._sub.add_parser(name, **kwargs) if name == self._command else _Skipped()


# the top-level commands, in build_parser's order (a test checks them against it)
COMMANDS = ("show", "cluster", "rewrite", "explain", "whatif", "diff", "render", "report", "registry", "crosscheck",
            "profile", "runtime")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ``command`` (one of :data:`COMMANDS`), only that
    command's parser under it (what parsing a line that starts with it needs)."""
    p = _Parser(
        prog="jitsim",
        description="Predict and explain TensorFlow's XLA auto-clustering without running the model.",
    )
    p.add_argument("--version", action="version", version=f"jitsim {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    if command is not None:
        sub = _OneCommand(sub, command)

    s = sub.add_parser("show", help="summarise a graph: nodes, ops, devices, and TF's _XlaCluster marks")
    s.add_argument("graph", help=".pbtxt/.pb GraphDef, TF dump file, or SavedModel directory")
    s.add_argument("--signature", help="SavedModel signature (default: serving_default)")
    s.add_argument("--top", type=int, default=15, help="ops shown in the histogram (default 15)")
    _op_defs_arg(s)
    s.set_defaults(func=cmd_show)

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

    rw = sub.add_parser("rewrite", help="simulate TF's JIT pipeline up to a stage and write the graph as TF dumps it")
    rw.add_argument("graph", help="one graph (as for explain): TF dump file (best: "
                    "before_clone_constants_for_better_clustering_N.pbtxt), .pbtxt/.pb GraphDef, SavedModel "
                    "directory, .keras file or .py program; taken by the same route as cluster")
    rw.add_argument("--until", default=BUILD_XLA_OPS, choices=STAGES,
                    help="last stage to simulate (default build-xla-ops); the output matches TF's dump of that "
                         "stage: mark_for_compilation, encapsulate_subgraphs_before, encapsulate_subgraphs_after, "
                         "build_xla_ops")
    rw.add_argument("-o", "--output", required=True, help="output GraphDef (.pbtxt text, else binary)")
    _sim_args(rw)
    _tensorboard_arg(rw)
    rw.set_defaults(func=cmd_rewrite)

    ex = sub.add_parser("explain", help="why a node is (not) in a cluster; with two nodes, why they are (not) "
                        "in the same cluster")
    ex.add_argument("graph", help="one graph: TF dump file (best: before_clone_constants_for_better_clustering_N"
                    ".pbtxt), .pbtxt/.pb GraphDef, or SavedModel directory")
    ex.add_argument("node", help="node name; else a substring or regex matching exactly one node")
    ex.add_argument("other", nargs="?", help="a second node: explain why the two are (not) together")
    _sim_args(ex)
    _whatif_args(ex)
    ex.add_argument("--all", action="store_true", help="list every merge TF refused, one line each (default: grouped "
                    "by reason and by the other cluster, with a count and an example); with --shapes, every compile")
    ex.add_argument("--shapes", metavar="SHAPES.jsonl",
                    help="the steps of a run, as for runtime: NODE then names a compiled unit (a cluster, a jit_compile "
                         "call, or a node in one) and explain says why it recompiles: per compile, the arguments that "
                         "changed and the inputs they come from, and suggestions, each simulated on the stream")
    ex.set_defaults(func=cmd_explain)

    wi = sub.add_parser("whatif", help="rerun with changed flags / device / op lists and show the cluster diff")
    wi.add_argument("graph", help="one graph (as for explain)")
    wi.add_argument("--tf-xla-flags", help="the variant: TF_XLA_FLAGS added on top of the baseline's (later flags "
                    "win, as in TF)")
    wi.add_argument("--device", help="re-place the graph on cpu or gpu (nodes with a kernel there; approximate)")
    _whatif_args(wi)
    wi.add_argument("--baseline-tf-xla-flags", help="the baseline: TF_XLA_FLAGS " + FLAGS_RULE)
    wi.add_argument("--baseline-device", help="the baseline's --device (raw GraphDefs)")
    _sim_args(wi, flags=False, device=False)
    wi.add_argument("--limit", type=int, default=20, help="changes listed (default 20)")
    wi.set_defaults(func=cmd_whatif)

    df = sub.add_parser("diff", help="compare the clusters of two graphs, two flag sets, or CPU vs GPU "
                        "(exit 0 same clusters, 1 different)")
    df.add_argument("graph", help="the baseline graph")
    df.add_argument("other", nargs="?", help="the variant graph (default: the same graph)")
    _sim_args(df, releases=True)
    df.add_argument("--a-tf-xla-flags", help="the baseline: TF_XLA_FLAGS added on top of the base flags and "
                    "--tf-xla-flags (later flags win)")
    df.add_argument("--b-tf-xla-flags", help="the variant: TF_XLA_FLAGS added on top of the base flags and "
                    "--tf-xla-flags (later flags win)")
    df.add_argument("--a-device", help="re-place the baseline on cpu or gpu")
    df.add_argument("--b-device", help="re-place the variant on cpu or gpu")
    df.add_argument("--a-tf-version", metavar="X.Y", help="the baseline's TensorFlow release")
    df.add_argument("--b-tf-version", metavar="X.Y", help="the variant's TensorFlow release: with the baseline's, "
                    "the upgrade report (what changes in the clusters, node by node, and the data or rule that "
                    "changed; also: --tf-version A --tf-version B)")
    _whatif_args(df, "b-")
    df.add_argument("--limit", type=int, default=20, help="changes listed (default 20)")
    df.set_defaults(func=cmd_diff)

    rd = sub.add_parser("render", help="draw the clusters with graphviz (.dot, .svg, .png)")
    rd.add_argument("graph", help="one graph (as for explain)")
    rd.add_argument("-o", "--output", required=True, help="output file: .dot, .svg or .png (images need graphviz's dot)")
    view = rd.add_mutually_exclusive_group()
    view.add_argument("--collapsed", action="store_true", help="one box per cluster (default for big graphs)")
    view.add_argument("--full", action="store_true", help="every node, even on big graphs")
    rd.add_argument("--max-nodes", type=int, default=400,
                    help="above this many nodes the collapsed view is the default (default 400)")
    _sim_args(rd)
    _whatif_args(rd)
    _tensorboard_arg(rd)
    rd.set_defaults(func=cmd_render)

    rp = sub.add_parser("report", help="write a self-contained HTML report (summary, tables, search, "
                        "explanations, picture)")
    rp.add_argument("graph", help="one graph (as for explain)")
    rp.add_argument("-o", "--output", required=True, help="output directory (index.html)")
    rp.add_argument("--shapes", metavar="SHAPES.jsonl",
                    help="the steps of a run, as for runtime: the report also shows the run-time timeline (one row "
                         "per compiled unit: compiles, fallbacks, the megamorphic step) and a row per unit")
    _sim_args(rp)
    _whatif_args(rp)
    _tensorboard_arg(rp)
    rp.set_defaults(func=cmd_report)

    rg = sub.add_parser("registry", help="jitsim's copy of TF's op and kernel registries")
    rgs = rg.add_subparsers(dest="registry_command", metavar="SUBCOMMAND")
    rgs.required = True
    rx = rgs.add_parser("export", help="write the OpDefs (and kernels) of ops TF core does not register, from a TF "
                        "process with your op libraries loaded (needs TensorFlow); use the file with --op-defs")
    rx.add_argument("--import", dest="modules", action="append", default=[], metavar="MODULE",
                    help="Python module that registers ops when imported, e.g. tensorflow_text (repeatable)")
    rx.add_argument("--load-library", action="append", default=[], metavar="SO",
                    help="custom-op shared library to load with tf.load_op_library (repeatable)")
    rx.add_argument("--all", action="store_true", help="export every registered op, TF core's included")
    rx.add_argument("-o", "--output", required=True, help="output file (JSON, schema jitsim.op-library/1)")
    rx.set_defaults(func=cmd_registry_export)

    cc = sub.add_parser("crosscheck", help="ground truth from real TensorFlow: harvest, index, compare")
    ccs = cc.add_subparsers(dest="crosscheck_command", metavar="SUBCOMMAND")
    ccs.required = True

    h = ccs.add_parser("harvest", help="run a TF program / GraphDef / SavedModel under real TF and collect its JIT dumps")
    h.add_argument("target", nargs="+", help="a .py program, a .pb/.pbtxt GraphDef, or a SavedModel directory; "
                   "several: a campaign (OUT/<name>/ per target, docs/campaigns.md)")
    h.add_argument("-o", "--output", required=True, help="output directory (dumps/, log.txt, index.json; with "
                   "several targets or --ray, a harvest directory per target and campaign/)")
    h.add_argument("--tf-xla-flags", help="TF_XLA_FLAGS for the run, added on top of the base ($TF_XLA_FLAGS, else "
                   "'--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_clustering_debug'); later flags win, as "
                   "in TF; --no-default-flags starts from nothing")
    _no_defaults_arg(h)
    h.add_argument("--signature", help="SavedModel signature to call (default: serving_default)")
    _call_args(h)
    _input_shape_arg(h)
    h.add_argument("--python", help="Python interpreter with TensorFlow (default: this one)")
    h.add_argument("--timeout", type=float, default=600.0, help="seconds before the run is killed (default 600)")
    h.add_argument("--overwrite", action="store_true", help="replace a non-empty output directory")
    _ray_args(h, "one target per task")
    h.set_defaults(func=cmd_harvest)

    i = ccs.add_parser("index", help="pair the dump files of a TF_DUMP_GRAPH_PREFIX directory graph by graph")
    i.add_argument("dumps", help="a harvest directory, its dumps/, or a TF_DUMP_GRAPH_PREFIX directory")
    i.add_argument("--log", help="TF's stderr from the same run (gives exact write order and pass times; default: "
                   "the directory's log.txt)")
    i.add_argument("-o", "--output", help="also write the index as JSON to this file")
    i.set_defaults(func=cmd_index)

    v = ccs.add_parser("verify", help="run jitsim on every graph of a harvest and compare with TF's own clusters")
    v.add_argument("dir", nargs="+", help="harvest or dump directory; several: one line each and the totals "
                   "(docs/campaigns.md)")
    _sim_args(v)
    v.add_argument("--limit", type=int, default=30, help="differing nodes listed per graph")
    v.add_argument("-o", "--output", help="campaign directory: a record per harvest verified (re-running resumes)")
    _ray_args(v, "one harvest directory per task")
    v.set_defaults(func=cmd_verify)

    mx = ccs.add_parser("matrix", help="the version matrix: a corpus's programs harvested under several TF releases "
                                       "and jitsim verified on each (exit 1 unless every graph is identical)")
    mx.add_argument("--python", action="append", required=True, metavar="PYTHON",
                    help="a Python with the TF release to run (repeat: one per release, e.g. "
                         "/tmp/tfvenvs/2.16/bin/python)")
    mx.add_argument("--corpus", help="fixtures directory with manifest.toml (default: this checkout's fixtures/)")
    mx.add_argument("--only", nargs="+", metavar="RUN", help="these manifest runs only")
    mx.add_argument("--limit", type=_positive_int, metavar="N", help="the first N runs of the manifest")
    mx.add_argument("-o", "--output", required=True, help="campaign directory: a record per run and release")
    mx.add_argument("--timeout", type=float, default=900.0, help="seconds per TF run (default 900)")
    _ray_args(mx, "one run and release per task")
    mx.set_defaults(func=cmd_matrix)

    c = ccs.add_parser("compare", help="compare two clusterings as partitions (exit 0 identical, 1 different)")
    c.add_argument("predicted", help="annotated graph file, or a harvest/dump directory")
    c.add_argument("truth", help="annotated graph file (e.g. mark_for_compilation_N.pbtxt), or a harvest/dump directory")
    c.add_argument("--stage", default=MARK_DUMP,
                   help="for directories: which dump stage's _XlaCluster marks to compare (default mark_for_compilation)")
    c.add_argument("--names", action="store_true", help="also require identical cluster names for exit 0")
    c.add_argument("--graph", action="store_true",
                   help="compare whole graphs node by node and function by function (rewritten stages), "
                        "not just the clustering")
    c.add_argument("--ignore-attr", action="append", metavar="ATTR", help="with --graph: an attr to ignore (repeatable)")
    c.add_argument("--limit", type=int, default=50, help="differing nodes listed per graph (default 50)")
    c.set_defaults(func=cmd_compare)

    pf = sub.add_parser("profile", help="run a workload under real TF with XLA auto-clustering off and on: traces, "
                                        "step times, XLA's HLO, linked to jitsim's predicted clusters")
    pf.add_argument("target", help="a .py program defining jitsim_step(), a .pb/.pbtxt GraphDef, or a SavedModel "
                                   "directory (as for crosscheck harvest)")
    pf.add_argument("-o", "--output", required=True, help="output directory (summary.json, index.html, traces, hlo/)")
    pf.add_argument("--steps", type=int, default=20, help="timed steps after the warm-up (default 20)")
    pf.add_argument("--warmup", type=int, default=5, help="warm-up steps, XLA compiles there (default 5)")
    pf.add_argument("--tf-xla-flags", help="TF_XLA_FLAGS of the XLA-on run, added on top of the base ($TF_XLA_FLAGS, "
                                           "else jitsim's default); the XLA-off run adds --tf_xla_auto_jit=-1")
    _no_defaults_arg(pf)
    pf.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                    help="run the steps on /CPU:0 (default) or /GPU:0 (fails when TF sees no GPU)")
    pf.add_argument("--signature", help="SavedModel signature to call (default: serving_default)")
    _input_shape_arg(pf)
    pf.add_argument("--timeout", type=float, default=600.0, help="seconds before each TF run is killed (default 600)")
    pf.add_argument("--overwrite", action="store_true", help="replace a non-empty output directory")
    pf.set_defaults(func=cmd_profile)

    rt = sub.add_parser("runtime", help="predict what the JIT does at run time: compiles per input signature, lazy "
                                        "fallbacks, megamorphic clusters (docs/runtime.md)")
    rt.add_argument("graph", help="one graph or model, as for explain (TF dump file, GraphDef, SavedModel, .keras, "
                                  ".py program)")
    rt.add_argument("--shapes", metavar="SHAPES.jsonl",
                    help="the steps: one JSON object per line mapping each input to its shape, e.g. "
                         '{"x": [2, 128]} (an integer input: {"n": {"shape": [], "value": 7}}); without it: which '
                         "argument dimensions and constants can vary, and which input dimension each follows")
    _sim_args(rt)
    rt.add_argument("-o", "--output", metavar="TIMELINE.svg",
                    help="with --shapes: also draw the timeline (one row per unit, one cell per execution: compile, "
                         "ran compiled, fallback; the megamorphic step marked) as an SVG picture")
    rt.add_argument("--check-with-tf", action="store_true",
                    help="also run the stream under real TensorFlow (a .py program's tf.function, see --function) "
                         "and compare its logged compiles, fallbacks and megamorphic step unit by unit (exit 1 when "
                         "they differ)")
    rt.add_argument("--function", default="f",
                    help="with --check-with-tf: the program's tf.function to call (needs an input_signature; "
                         "default f)")
    rt.set_defaults(func=cmd_runtime)

    fz = ccs.add_parser("fuzz", help="differential fuzzing: generated programs under real TF vs jitsim, stage by "
                                     "stage (exit 1 on any disagreement)")
    fz.add_argument("--examples", type=int, default=100, help="programs to generate (default 100)")
    fz.add_argument("--seed", type=int, default=0, help="Hypothesis seed (default 0)")
    fz.add_argument("-o", "--output", default="fuzz-out", help="reproducers and summary.json (default fuzz-out/)")
    fz.add_argument("--profile", choices=("full", "large", "ci", "no-grappler"), default="full",
                    help="full: any flags per batch; large: full with bigger programs; ci: two fixed "
                         "configurations; no-grappler: any flags, Grappler off (TF clusters graphs it never "
                         "rebuilt; use --tf-reruns 2) (default full)")
    fz.add_argument("--batch-size", type=int, default=40, help="programs per TF process (default 40)")
    fz.add_argument("--shrink-seconds", type=float, default=180.0, help="time to shrink each disagreement (default 180)")
    fz.add_argument("--no-shrink", action="store_true", help="write reproducers without shrinking them")
    fz.add_argument("--max-shrink", type=int, default=10, help="disagreements to shrink at most, one of each "
                                                              "kind first (default 10)")
    fz.add_argument("--tf-reruns", type=int, default=1, metavar="K",
                    help="rounds of TF reruns of the programs that differ (reversed batch, then each alone) to "
                         "tell TF's own nondeterminism from disagreements; 0: off (default 1)")
    fz.add_argument("--keep-work", action="store_true", help="keep the TF runs (output/jitsim-fuzz-*)")
    fz.add_argument("--timeout", type=float, default=600.0, help="seconds per TF process (default 600)")
    _ray_args(fz, "one batch per task")
    fz.set_defaults(func=cmd_fuzz)
    for leaf in _leaf_parsers(p):  # options that mean the same in every command: one definition each
        _output_args(leaf)
    return p


def _leaf_parsers(parser):
    """Every parser that runs a command (subcommands of subcommands included), in order."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield parser
        return
    for action in subs:
        for child in dict.fromkeys(action.choices.values()):
            yield from _leaf_parsers(child)


def _output_args(p) -> None:
    """``--format`` and ``--timings``: the same options, with the same meaning, in every command
    (docs/json.md)."""
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="output format: text for people, or JSON on stdout with a versioned \"schema\" "
                        "(docs/json.md; byte-identical from run to run) (default: text)")
    p.add_argument("--timings", action="store_true",
                   help="with --format json: also give how long jitsim's own steps took (\"seconds\" fields; they "
                        "differ from run to run, so JSON leaves them out by default)")


_FLAG_VALUE_OPTIONS = ("--tf-xla-flags", "--baseline-tf-xla-flags", "--a-tf-xla-flags", "--b-tf-xla-flags")


def _join_flag_values(argv: list[str]) -> list[str]:
    """``--tf-xla-flags "--tf_xla_..."``: argparse would take the value for an option."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a in _FLAG_VALUE_OPTIONS and i + 1 < len(argv):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def _op_libraries(paths) -> list:
    if not paths:
        return []
    from jitsim.graph.custom_ops import read_op_library

    return [read_op_library(p) for p in paths]


def _one_line(text: str) -> str:
    """A message as one line: control characters (a newline in a node name, a byte quoted
    from a garbled file) are written as escapes; a graph read from stdin is named ``<stdin>``,
    not the temporary file it was kept in."""
    if _STDIN_FILE is not None:
        text = text.replace(_STDIN_FILE, "<stdin>")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _shown(path) -> str:
    """A path as the user gave it: the temporary file of a graph read from stdin is <stdin>."""
    return "<stdin>" if _STDIN_FILE is not None and str(path) == _STDIN_FILE else str(path)


# ``-`` (or /dev/stdin) as the graph: the bytes read from standard input, kept in a temporary file
# for the command (removed at its end); messages name it <stdin>
STDIN_NAMES = ("-", "/dev/stdin", "/dev/fd/0", "/proc/self/fd/0")
_STDIN_FILE: str | None = None


def _stdin_inputs(args) -> None:
    """A graph argument ``-`` reads the graph from standard input (bounded like every input:
    2 GiB; text, binary or gzip by content, as for a file without a telling name)."""
    global _STDIN_FILE
    from jitsim.files.input import MAX_INPUT_BYTES
    from jitsim.files.output import temporary_directory

    _STDIN_FILE = None
    names = ("graph",) if args.command == "explain" else ("graph", "other", "predicted", "truth")
    given = [n for n in names if isinstance(getattr(args, n, None), str) and getattr(args, n) in STDIN_NAMES]
    if not given:
        return
    if len(given) > 1:
        raise JitsimError("only one input can come from stdin (-)", "<stdin>")
    if sys.stdin is None or sys.stdin.isatty():
        raise JitsimError("a graph to read from stdin (-), but stdin is a terminal: pipe or redirect a graph in, "
                          "e.g. jitsim cluster - < graph.pbtxt", "<stdin>")
    stream = sys.stdin.buffer
    parts, n = [], 0
    while n <= MAX_INPUT_BYTES:
        b = stream.read(min(1 << 20, MAX_INPUT_BYTES + 1 - n))
        if not b:
            break
        parts.append(b)
        n += len(b)
    if n > MAX_INPUT_BYTES:
        raise JitsimError(f"more than {MAX_INPUT_BYTES} bytes on stdin, more than any protobuf message can hold",
                          "<stdin>")
    if n == 0:
        raise JitsimError("is empty: a graph needs at least one node", "<stdin>")
    f = temporary_directory(prefix="jitsim-stdin-") / "stdin"
    f.write_bytes(b"".join(parts))
    _STDIN_FILE = str(f)
    setattr(args, given[0], _STDIN_FILE)


def _show_warning(message) -> None:
    if isinstance(message, JitsimWarning):
        where = f"{message.path}: " if message.path else ""
        print(_one_line(f"jitsim: {where}note: {message.message}"), file=sys.stderr)
    else:
        print(_one_line(f"jitsim: warning: {message}"), file=sys.stderr)


# (command, subcommand) -> how its -o is used: "file", "dir", or "file-or-dir" (cluster)
_OUTPUT_KIND = {"cluster": "file-or-dir", "rewrite": "file", "render": "file", "report": "dir",
                "registry": "file", "harvest": "dir", "index": "file", "fuzz": "dir",
                "profile": "dir", "verify": "dir", "matrix": "dir"}


def _is_dir(path) -> bool:
    """``Path.is_dir`` without its exceptions (a name too long is no directory)."""
    import stat

    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def _check_outputs(args) -> None:
    """One rule for every command's ``-o``: checked before any work (graph/io.check_output)."""
    from jitsim.graph.io import check_output

    tb = getattr(args, "tensorboard", None)
    if tb is not None:
        try:
            check_output(tb, directory=True)
        except JitsimError as e:
            raise JitsimError(f"--tensorboard: {e.message}", tb) from None
    out = getattr(args, "output", None)
    if out is None:
        return

    if out == "":
        raise JitsimError("-o: an empty output name: give a file or directory name (- for stdout)")
    key = getattr(args, "crosscheck_command", None) or args.command
    kind = _OUTPUT_KIND.get(key, "file")
    if key == "render":
        from jitsim.explain.render import FORMATS

        ext = Path(out).suffix.lower()
        if ext not in FORMATS:
            raise JitsimError(f"unknown picture format {ext or '(no extension)'!r}; use .dot, .svg or .png", out)
    if kind == "file-or-dir":
        check_output(out, directory=_is_dir(out))
    else:
        check_output(out, directory=kind == "dir")


# Python's cyclic garbage collector, tuned for one batch command: a graph's nodes, edges and
# records live until the command ends, and with the default thresholds every full collection
# walks all of them again (0.25 s of 1.7 s on a 12.6k-node graph, 2.2 s of 13.7 s at 100k
# nodes, issue 14). Rarer collections keep freeing short-lived cycles; the memory peak is the
# same (benchmarks/). The benchmarks' in-process child uses the same setting.
GC_THRESHOLDS = (100_000, 50, 100)
# The commands that read one graph, simulate and report, run with the collector off: what they
# build lives until they end, so even the young-generation collections only walk live objects
# (0.35 s of 7 s on the 101k-node tiled ResNet-50), and the cycles they leave are a few thousand
# small objects (gc.get_stats() after a run). Commands that run TF, campaigns or fuzzing keep it.
GC_OFF_COMMANDS = frozenset({"show", "cluster", "rewrite", "explain", "whatif", "diff", "render"})

EXIT_INTERNAL = 3  # an unexpected exception: a bug in jitsim (docs/cli.md, exit codes)


# the positional arguments that name a command's input, for the one error line of an input
# that exhausts the stack or the memory, or meets a bug
_MAIN_INPUT_ARGS = ("graph", "target", "dir", "dumps", "predicted")


def _main_input(args):
    v = next((getattr(args, k) for k in _MAIN_INPUT_ARGS if getattr(args, k, None)), None) if args else None
    return v[0] if isinstance(v, list) else v  # harvest TARGET..., verify DIR...: the first names the input


def _resource_error(args, e: BaseException) -> JitsimError:
    path = _main_input(args)
    if isinstance(e, RecursionError):
        return JitsimError("nested too deeply for jitsim (Python's recursion limit reached); TF may accept "
                           "it: please report it to jitsim with this input", path)
    return JitsimError("jitsim ran out of memory on this input (MemoryError); try a machine with more "
                       "memory", path)


def main(argv: list[str] | None = None) -> int:
    """The command line; returns the exit code (docs/cli.md "Exit codes")."""
    from jitsim.files import output as _output

    gc.set_threshold(*GC_THRESHOLDS)
    process.occupy_closed_fds()
    saved_stdout, saved_stderr = sys.stdout, sys.stderr
    if sys.stderr is None:
        sys.stderr = open(os.devnull, "w")
    process.setup_streams()
    guard = sys.stdout = process.GuardedStdout(sys.stdout) if sys.stdout is not None else process.ClosedStdout()
    restore_signals = process.install_signal_handlers()
    try:
        try:
            rc = _run(argv)
            guard.flush()  # what is still buffered: its errors are this command's too
            sys.stdout.flush()
        except process.StdoutError as e:
            process.silence_stdout(saved_stdout)
            process.print_error(f"jitsim: {_one_line(str(e))}")
            rc = e.exit_code
        except BrokenPipeError:  # the reader went away (`| head`): quiet, as other Unix tools
            process.silence_stdout(saved_stdout)
            rc = process.EXIT_BROKEN_PIPE
        except process.Signalled as e:
            rc = 128 + e.signum
        except KeyboardInterrupt:
            process.print_error("jitsim: interrupted")
            rc = 130
    finally:
        process.SIGNALS_MUTED.append(True)  # a signal now would only interrupt the cleanup below
        _output.stdout_stream = None
        sys.stdout, sys.stderr = saved_stdout, (saved_stderr if saved_stderr is not None else sys.stderr)
        _output.cleanup()
        restore_signals()
        process.SIGNALS_MUTED.clear()
    return rc


def _run(argv: list[str] | None) -> int:
    """Parse and run one command; every error becomes its one line and exit code."""
    notes: list = []
    args = None
    try:
        argv = _join_flag_values(sys.argv[1:] if argv is None else list(argv))
        parser = build_parser(argv[0] if argv and argv[0] in COMMANDS else None)
        args = parser.parse_args(argv)
        with warnings.catch_warnings(record=True) as notes:
            warnings.simplefilter("always", JitsimWarning)
            _stdin_inputs(args)
            _check_inputs(args)
            _check_outputs(args)
            _check_common(args)
            _reports_to_stderr_if_output_is_stdout(args)
            libraries = _op_libraries(getattr(args, "op_defs", None) or ())
            from jitsim.registry import using_op_libraries

            gc_was_on = gc.isenabled()
            if getattr(args, "command", None) in GC_OFF_COMMANDS:
                gc.disable()
            try:
                with using_op_libraries(*libraries):
                    rc = args.func(args)
            finally:
                if gc_was_on:
                    gc.enable()
        # what jitsim assumed to accept the input: said once the command succeeded (a failing
        # command prints its one error line only)
        seen = set()
        for w in notes:
            if str(w.message) not in seen:
                seen.add(str(w.message))
                _show_warning(w.message)
        return rc
    except process.StdoutError:
        raise
    except JitsimError as e:
        _progress_done()
        process.print_error(f"jitsim: {_one_line(str(e))}")
        return e.exit_code
    except (RecursionError, MemoryError) as e:
        # input-sized limits, not bugs to show as a traceback: an input too deep for a walk
        # still recursive, or too large for this machine's memory (docs/cli.md, exit codes)
        print(f"jitsim: {_one_line(str(_resource_error(args, e)))}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        _progress_done()
        process.print_error("jitsim: interrupted")
        return 130
    except process.Signalled as e:
        import signal

        process.print_error(f"jitsim: terminated by {signal.Signals(e.signum).name}")
        raise
    except OSError as e:
        if isinstance(e, BrokenPipeError):
            raise
        # the last resort for the environment's errors a command did not name itself: one line
        from jitsim.files.input import os_problem

        where = f"{e.filename}: " if e.filename else ""
        process.print_error(f"jitsim: {_one_line(where + os_problem(e, 'cannot use'))}")
        return 2
    except Exception as e:  # noqa: BLE001 - a bug in jitsim: one line naming the input, exit 3
        if debug_mode():
            raise
        _progress_done()
        where = _main_input(args)
        where = f"{_shown(where)}: " if where else ""
        detail = f"{type(e).__name__}: {e}"[:300]
        process.print_error(_one_line(f"jitsim: {where}internal error ({detail}); please report it with this "
                                      "input and command (JITSIM_DEBUG=1 shows the traceback)"))
        return EXIT_INTERNAL


# every option and positional argument that names an input file or directory
_INPUT_ARGS = ("graph", "other", "target", "dumps", "dir", "predicted", "truth", "log", "op_defs", "python",
               "load_library")


def _check_inputs(args) -> None:
    """Input paths that no command can use whatever they hold (a name over 255 bytes, a path
    over 4,095, a symbolic link loop): one line before any work."""
    from jitsim.files.input import input_problem

    names = ("graph", "op_defs") if args.command == "explain" else _INPUT_ARGS  # explain's 'other' is a node
    for name in names:
        v = getattr(args, name, None)
        for p in (v if isinstance(v, list) else [v]):
            if isinstance(p, str) and p:
                problem = input_problem(p)
                if problem:
                    raise JitsimError(problem, p)


def _reports_to_stderr_if_output_is_stdout(args) -> None:
    """``-o -``: standard output carries the written file, so the command's report goes to
    stderr."""
    from jitsim.files import output as _output

    out = getattr(args, "output", None)
    if isinstance(out, str) and _output.is_stdout(out):
        _output.stdout_stream = sys.stdout
        sys.stdout = sys.stderr


def entry():
    """The ``jitsim`` console script: :func:`main`, then the process ends without the
    interpreter's teardown (:func:`jitsim.process.exit_process`)."""
    process.exit_process(main())


if __name__ == "__main__":
    entry()
