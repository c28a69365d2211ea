"""``jitsim runtime``: what the JIT does at run time.
"""

from __future__ import annotations

import json
from pathlib import Path

from jitsim.errors import JitsimError

from jitsim.cli.arguments import _sim_args
from jitsim.cli.common import BUILD_XLA_OPS, _flags_choice, _options, _simulate, _single_graph
from jitsim.cli.output import _console, _emit_json, _progress_done, _progress_line


def cmd_runtime(args) -> int:
    """What the JIT does at run time (docs/runtime.md): compiles, fallbacks, megamorphic units."""
    from jitsim.runtime.simulate import runtime
    from jitsim.runtime.stream import read_stream
    from jitsim.runtime.table import print_result

    if args.output and not args.shapes:
        raise JitsimError("-o draws the steps' timeline: give --shapes", args.output)
    if args.plan and (not args.shapes or (Path(args.plan).exists() and not Path(args.plan).is_dir())):
        raise JitsimError("--plan writes a directory and plans from a stream: give --shapes and a directory",
                          args.plan)
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
    plan = _plan(args, res, steps, choice) if args.plan else None
    check = None
    if args.check_with_tf and plan is not None:
        check = _check_plan(args, plan, choice)
    elif args.check_with_tf:
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
                    "route": c.route.to_dict() if c.route is not None else None, "tf_check": check,
                    "plan": plan.to_dict() if plan is not None else None}, args)
        return 0 if check is None or check["identical"] else 1
    con = _console()
    if c.route is not None:
        con.print(c.route.line, markup=False, highlight=False)
    print_result(con, res, source=Path(args.graph).name)
    if plan is not None:
        _print_plan(con, args, plan)
    if check is not None and plan is not None:
        _print_plan_check(con, check)
    elif check is not None:
        from jitsim.runtime.table import print_check

        print_check(con, check)
    return 0 if check is None or check["identical"] else 1


def _print_plan_check(con, check: dict) -> None:
    con.print(f"against TensorFlow (the warm-up, then the bucketed stream under its cache): "
              f"{'identical' if check['identical'] else 'DIFFERENT'}; cache files {check['cache_files']} "
              f"(predicted {check['predicted_files']}); on replay {check['replay_builds']} executables built, "
              f"{check['replay_loads']} loaded from the cache", markup=False, highlight=False)
    for u in check["units"]:
        con.print(f"  {u['function']}: {len(u['tf_saved'])} entries saved (predicted {len(u['predicted'])})"
                  + ("" if u["identical"] else f"; TF {u['tf_saved']}, jitsim {u['predicted']}"),
                  markup=False, highlight=False)


def _plan(args, res, steps, choice):
    """``--plan DIR``: buckets, the cache entries, DIR/plan.json, DIR/bucketed.jsonl and (for a
    .py program) DIR/warmup.py."""
    from jitsim.graph.io import write_atomic
    from jitsim.runtime.plan import make_plan, stream_text, warmup_program

    plan = make_plan(res, steps, res.rerun, args.padding_weight)
    out = Path(args.plan)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "plan.json", (json.dumps(plan.to_dict(), indent=1) + "\n").encode())
    write_atomic(out / "bucketed.jsonl", stream_text(plan.bucketed).encode())
    if Path(args.graph).suffix == ".py":
        program = str(Path(args.graph).resolve())
        text = warmup_program(plan, program, args.function, choice.flags.text, str((out / "xla_cache").resolve()))
        write_atomic(out / "warmup.py", text.encode())
    return plan


def _print_plan(con, args, plan) -> None:
    b, a = plan.before, plan.after
    dims = "; ".join(f"{n}.shape[{i}] -> {sizes}" for (n, i), sizes in plan.dims.items())
    what = (f"buckets {dims}; padded work +{plan.padded_work:.1%}; on this stream compiles {b['compiles']} -> "
            f"{a['compiles']}, fallbacks {b['fallbacks']} -> {a['fallbacks']}" if dims else "no buckets")
    con.print(f"warm-up plan ({args.plan}): {what}; {plan.entries} cache entries from {len(plan.warmup)} input "
              f"shapes, each run twice" + ("; run warmup.py before serving" if Path(args.graph).suffix == ".py" else "")
              + (f" ({plan.note})" if plan.note else ""), markup=False, highlight=False)


def _check_plan(args, plan, choice) -> dict:
    from jitsim.runtime.plan import check_with_tf

    if Path(args.graph).suffix != ".py":
        raise JitsimError("--check-with-tf runs a .py program's tf.function under TensorFlow", args.graph)
    _progress_line("TensorFlow running the warm-up, then the bucketed stream")
    try:
        return check_with_tf(Path(args.plan), plan, args.graph, choice.flags.text, args.function)
    finally:
        _progress_done()


def add_parser(sub) -> None:
    """The ``runtime`` command's parser."""
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
    rt.add_argument("--plan", metavar="DIR",
                    help="with --shapes: plan a warm-up: buckets for the varying input dimensions (fewest compiles "
                         "plus padded work), the compile cache entries serving needs, and DIR/warmup.py, which "
                         "compiles them into TF's persistent cache (DIR/xla_cache) before serving; with "
                         "--check-with-tf, runs it and replays the bucketed stream under TF")
    rt.add_argument("--padding-weight", type=float, default=20.0, metavar="W",
                    help="with --plan: how much padded work one compile is worth (cost = buckets + W x padded "
                         "fraction; default 20: a compile for 5%% of the work)")
    rt.add_argument("--function", default="f",
                    help="with --check-with-tf: the program's tf.function to call (needs an input_signature; "
                         "default f)")
    rt.set_defaults(func=cmd_runtime)
