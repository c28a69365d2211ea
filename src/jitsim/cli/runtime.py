"""``jitsim runtime``: what the JIT does at run time.
"""

from __future__ import annotations

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
    rt.add_argument("--function", default="f",
                    help="with --check-with-tf: the program's tf.function to call (needs an input_signature; "
                         "default f)")
    rt.set_defaults(func=cmd_runtime)
