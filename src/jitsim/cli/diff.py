"""``jitsim diff``: two graphs, two flag sets, CPU vs GPU, or two TF releases (the upgrade report).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from jitsim.errors import JitsimError

from jitsim.cli.arguments import _sim_args, _whatif_args
from jitsim.cli.common import _check_ops_exist, _flags_choice, _options, _simulate, _single_graph
from jitsim.cli.output import _emit_json, _write_out


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
        _write_out(d.format_text(limit=args.limit) + "\n")
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


def add_parser(sub) -> None:
    """The ``diff`` command's parser."""
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
