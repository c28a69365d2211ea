"""``jitsim render`` and ``jitsim report``: the clusters drawn, and the HTML report.
"""

from __future__ import annotations

from pathlib import Path

from jitsim.cli.arguments import _sim_args, _tensorboard_arg, _whatif_args
from jitsim.cli.common import BUILD_XLA_OPS, _flags_choice, _options, _simulate, _simulate_given, _simulation_json
from jitsim.cli.output import _emit_json, _progress_done, _progress_line, _write_tensorboard, _wrote


def cmd_render(args) -> int:
    from jitsim.explain.render import render_file

    c = _simulate_given(args)
    view = "collapsed" if args.collapsed else ("full" if args.full else ("scopes" if args.scopes else "auto"))
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


def add_parser(sub) -> None:
    """The ``render`` command's parser (and ``report``'s)."""
    rd = sub.add_parser("render", help="draw the clusters with graphviz (.dot, .svg, .png) or for Model Explorer (.json)")
    rd.add_argument("graph", help="one graph (as for explain)")
    rd.add_argument("-o", "--output", required=True, help="output file: .dot, .svg or .png (images need graphviz's dot), or .json: a "
                    "Model Explorer graph, each cluster a layer (model-explorer FILE.json opens it)")
    view = rd.add_mutually_exclusive_group()
    view.add_argument("--scopes", action="store_true",
                      help="the top level of the name scopes, each box with a bar of its clusters (default for big "
                           "graphs; jitsim report opens each box)")
    view.add_argument("--collapsed", action="store_true", help="one box per cluster")
    view.add_argument("--full", action="store_true", help="every node, even on big graphs")
    rd.add_argument("--max-nodes", type=int, default=400,
                    help="above this many nodes the scope view is the default (default 400)")
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
