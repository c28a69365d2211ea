"""The ``jitsim`` command line. Thin: parsing and printing; the work is in the library.

Exit codes: 0 success (for ``compare``: partitions identical), 1 ``compare`` found
differences, 2 bad input or usage (one ``jitsim: ...`` line on stderr), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from jitsim import __version__
from jitsim.errors import JitsimError


def _stderr_is_tty() -> bool:
    return sys.stderr.isatty() and os.environ.get("TERM") != "dumb"


def _progress_line(text: str) -> None:
    if _stderr_is_tty():
        sys.stderr.write("\r\x1b[2K" + text)
        sys.stderr.flush()


def _progress_done() -> None:
    if _stderr_is_tty():
        sys.stderr.write("\r\x1b[2K")
        sys.stderr.flush()


def _console():
    from rich.console import Console

    return Console(highlight=False, soft_wrap=True)


def _emit_json(obj) -> None:
    json.dump(obj, sys.stdout, indent=2)
    sys.stdout.write("\n")


# -- show ---------------------------------------------------------------------------------


def cmd_show(args) -> int:
    from jitsim.graph import load

    g = load(args.graph, signature=args.signature)
    s = g.summary()
    if args.format == "json":
        _emit_json({"schema": "jitsim.show/1", **s})
        return 0
    from rich.table import Table

    con = _console()
    con.print(f"[bold]{s['source']}[/]: {s['nodes']} nodes, {s['edges']} edges "
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


# -- crosscheck ---------------------------------------------------------------------------


def cmd_harvest(args) -> int:
    from jitsim.crosscheck.harvest import DEFAULT_FLAGS, harvest

    flags = args.tf_xla_flags if args.tf_xla_flags is not None else os.environ.get("TF_XLA_FLAGS", DEFAULT_FLAGS)

    def progress(elapsed, ndumps):
        _progress_line(f"running TensorFlow on {args.target}: {elapsed:5.1f} s, {ndumps} dump files")

    try:
        index = harvest(args.target, args.output, flags=flags, signature=args.signature,
                        python=args.python, timeout=args.timeout, progress=progress,
                        overwrite=args.overwrite)
    finally:
        _progress_done()
    if args.format == "json":
        _emit_json(index)
        return 0
    _print_index(index, args.output)
    return 0


def _print_index(index: dict, where) -> None:
    from rich.table import Table

    con = _console()
    tot = index["totals"]
    con.print(f"{where}: TF {index.get('tf_version') or '?'}, TF_XLA_FLAGS=\"{index.get('tf_xla_flags', '')}\"")
    con.print(f"{tot['graphs']} graphs, {tot['graphs_with_candidates']} with candidates, "
              f"{tot['graphs_with_clusters']} with clusters, {tot['clusters']} clusters")
    t = Table()
    for col, just in (("graph", "right"), ("input dump", "left"), ("nodes", "right"),
                      ("clusters", "left"), ("TF pass time", "right")):
        t.add_column(col, justify=just)
    for g in index["graphs"]:
        clusters = ", ".join(f"{c}({n})" for c, n in g["clusters"].items()) or "-"
        us = g.get("mark_pass_us")
        t.add_row(str(g["id"]), g["files"].get(g.get("input_stage") or "", "-"), str(g["nodes"]),
                  clusters, "-" if us is None else f"{us / 1000:.2f} ms")
    con.print(t)


def cmd_index(args) -> int:
    from jitsim.crosscheck.dumps import INDEX_SCHEMA, index_dump_dir
    from jitsim.crosscheck.harvest import totals

    log_text = None
    if args.log:
        try:
            log_text = Path(args.log).read_text(errors="replace")
        except OSError as e:
            raise JitsimError(f"cannot read log: {e.strerror}", args.log) from None
    graphs = index_dump_dir(args.dumps, log_text)
    index = {"schema": INDEX_SCHEMA, "target": None, "kind": "dump_dir", "tf_version": None,
             "tf_xla_flags": None, "graphs": graphs, "totals": totals(graphs)}
    if args.output:
        from jitsim.graph.io import write_atomic

        write_atomic(Path(args.output), (json.dumps(index, indent=1) + "\n").encode())
    if args.format == "json":
        _emit_json(index)
    else:
        _print_index(index, args.dumps)
    return 0


def cmd_compare(args) -> int:
    from jitsim.crosscheck.scoring import compare_paths

    result = compare_paths(args.predicted, args.truth, stage=args.stage)
    if args.format == "json":
        _emit_json(result.to_dict())
    else:
        sys.stdout.write(result.format_text(limit=args.limit) + "\n")
    ok = result.all_same_names if args.names else result.all_identical
    return 0 if ok else 1


# -- parser -------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="jitsim",
        description="Predict and explain TensorFlow's XLA auto-clustering without running the model.",
    )
    p.add_argument("--version", action="version", version=f"jitsim {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    fmt = dict(choices=("text", "json"), default="text", help="output format (default: text)")

    s = sub.add_parser("show", help="summarise a graph: nodes, ops, devices, and TF's _XlaCluster marks")
    s.add_argument("graph", help=".pbtxt/.pb GraphDef, TF dump file, or SavedModel directory")
    s.add_argument("--signature", help="SavedModel signature (default: serving_default)")
    s.add_argument("--top", type=int, default=15, help="ops shown in the histogram (default 15)")
    s.add_argument("--format", **fmt)
    s.set_defaults(func=cmd_show)

    cc = sub.add_parser("crosscheck", help="ground truth from real TensorFlow: harvest, index, compare")
    ccs = cc.add_subparsers(dest="crosscheck_command", metavar="SUBCOMMAND")
    ccs.required = True

    h = ccs.add_parser("harvest", help="run a TF program / GraphDef / SavedModel under real TF and collect its JIT dumps")
    h.add_argument("target", help="a .py program, a .pb/.pbtxt GraphDef, or a SavedModel directory")
    h.add_argument("-o", "--output", required=True, help="output directory (dumps/, log.txt, index.json)")
    h.add_argument("--tf-xla-flags", help="TF_XLA_FLAGS for the run (default: $TF_XLA_FLAGS, else "
                   "'--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_clustering_debug')")
    h.add_argument("--signature", help="SavedModel signature to call (default: serving_default)")
    h.add_argument("--python", help="Python interpreter with TensorFlow (default: this one)")
    h.add_argument("--timeout", type=float, default=600.0, help="seconds before the run is killed (default 600)")
    h.add_argument("--overwrite", action="store_true", help="replace a non-empty output directory")
    h.add_argument("--format", **fmt)
    h.set_defaults(func=cmd_harvest)

    i = ccs.add_parser("index", help="pair the dump files of a TF_DUMP_GRAPH_PREFIX directory graph by graph")
    i.add_argument("dumps", help="the dump directory")
    i.add_argument("--log", help="TF's stderr from the same run (gives exact write order and pass times)")
    i.add_argument("-o", "--output", help="also write the index as JSON to this file")
    i.add_argument("--format", **fmt)
    i.set_defaults(func=cmd_index)

    c = ccs.add_parser("compare", help="compare two clusterings as partitions (exit 0 identical, 1 different)")
    c.add_argument("predicted", help="annotated graph file, or a harvest/dump directory")
    c.add_argument("truth", help="annotated graph file (e.g. mark_for_compilation_N.pbtxt), or a harvest/dump directory")
    c.add_argument("--stage", default="mark_for_compilation",
                   help="for directories: which dump stage's _XlaCluster marks to compare (default mark_for_compilation)")
    c.add_argument("--names", action="store_true", help="also require identical cluster names for exit 0")
    c.add_argument("--limit", type=int, default=50, help="differing nodes listed per graph (default 50)")
    c.add_argument("--format", **fmt)
    c.set_defaults(func=cmd_compare)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except JitsimError as e:
        print(f"jitsim: {e}", file=sys.stderr)
        return e.exit_code
    except KeyboardInterrupt:
        print("jitsim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        try:
            sys.stdout = None  # type: ignore[assignment]
        finally:
            return 0


if __name__ == "__main__":
    sys.exit(main())
