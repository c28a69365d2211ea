"""``jitsim show``: summarise a graph.
"""

from __future__ import annotations

from jitsim.cli.arguments import _op_defs_arg
from jitsim.cli.output import _console, _emit_json, _shown


def cmd_show(args) -> int:
    from jitsim.graph import load

    g = load(args.graph, signature=args.signature)  # a summary: odd nodes are shown, not refused
    s = g.summary()
    if args.format == "json":
        _emit_json({"schema": "jitsim.show/1", **s}, args)
        return 0
    from rich.table import Table

    con = _console()
    con.print(_shown(s["source"]), style="bold", end="")
    con.print(f": {s['nodes']} nodes, {s['edges']} edges "
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


def add_parser(sub) -> None:
    """The ``show`` command's parser."""
    s = sub.add_parser("show", help="summarise a graph: nodes, ops, devices, and TF's _XlaCluster marks")
    s.add_argument("graph", help=".pbtxt/.pb GraphDef, TF dump file, or SavedModel directory")
    s.add_argument("--signature", help="SavedModel signature (default: serving_default)")
    s.add_argument("--top", type=int, default=15, help="ops shown in the histogram (default 15)")
    _op_defs_arg(s)
    s.set_defaults(func=cmd_show)
