"""``jitsim whatif``: rerun with changed options and show the cluster diff.
"""

from __future__ import annotations

from jitsim.errors import JitsimError

from jitsim.cli.arguments import _sim_args, _whatif_args
from jitsim.cli.common import (FLAGS_RULE, _check_ops_exist, _flags_choice, _options, _simulate, _single_graph,
                               _warn_if_off)
from jitsim.cli.output import _emit_json, _write_out


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
        _write_out(d.format_text(limit=args.limit) + "\n")
    return 0


def add_parser(sub) -> None:
    """The ``whatif`` command's parser."""
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
