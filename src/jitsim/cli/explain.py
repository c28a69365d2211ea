"""``jitsim explain``: why a node is (not) in a cluster, or why a unit recompiles.
"""

from __future__ import annotations

from jitsim.errors import JitsimError

from jitsim.cli.arguments import _sim_args, _whatif_args
from jitsim.cli.common import (BUILD_XLA_OPS, _check_ops_exist, _flags_choice, _options, _simulate, _simulate_given,
                               _single_graph)
from jitsim.cli.output import _console, _emit_json, _write_out


def cmd_explain(args) -> int:
    if args.shapes:
        return _explain_recompiles(args)
    c = _simulate_given(args)
    ex = c.explain(args.node, args.other)
    if args.format == "json":
        _emit_json(ex.to_dict(), args)
    else:
        _write_out(ex.format_text(all_merges=args.all) + "\n")
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
    _write_out(format_recompiles(doc, all_compiles=args.all) + "\n")
    return 0


def add_parser(sub) -> None:
    """The ``explain`` command's parser."""
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
