"""Same-sitting A/B of whole `jitsim` processes: the code of two (or more) source trees on one
graph, run alternately, so that the machine's drift (±10–15% within minutes on the development
VM) falls on both sides alike.

    python benchmarks/ab.py GRAPH --src OLD/src --src NEW/src [--runs 5] [-- extra jitsim args]

Each tree runs ``jitsim cluster GRAPH -o OUT`` (or the command given after ``--``, with
``{graph}`` and ``{out}`` filled in) with ``PYTHONPATH=TREE`` and the parse cache off: one
warm-up run each (writes the .pyc files, warms the page cache), then ``--runs`` rounds, each
tree once per round, in turn. Prints per tree the minimum and median wall time and the peak RSS
(``os.wait4``), then whether the outputs are byte for byte the same (``cmp``). A source tree
needs its C extensions built in place (``python setup.py build_ext --inplace``), else it runs
the pure-Python code. Exit 1 where the outputs differ or a run fails.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def run_once(src: str, cmd: list[str]) -> tuple[float, int, int]:
    """(wall seconds, peak RSS in KiB, exit status) of one process."""
    env = dict(os.environ, PYTHONPATH=src, JITSIM_PARSE_CACHE="off")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # the warm-up writes each tree's .pyc files
    t = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    _, status, usage = os.wait4(p.pid, 0)
    return time.perf_counter() - t, usage.ru_maxrss, status


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("graph")
    ap.add_argument("--src", action="append", required=True, help="a source tree (its src/ folder); twice or more")
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args(argv)
    if len(args.src) < 2:
        ap.error("give --src at least twice")
    suffix = "".join(Path(args.graph).suffixes[-1:]) or ".pbtxt"
    with tempfile.TemporaryDirectory(prefix="jitsim-ab-") as tmp:
        outs = [str(Path(tmp) / f"out{k}{suffix}") for k in range(len(args.src))]
        cmds = [[sys.executable, "-m", "jitsim", *([a.format(graph=args.graph, out=o) for a in extra] if extra
                                                    else ["cluster", args.graph, "-o", o])] for o in outs]
        times: list[list[float]] = [[] for _ in args.src]
        peak = [0] * len(args.src)
        for r in range(args.runs + 1):
            for k, src in enumerate(args.src):
                dt, rss, status = run_once(src, cmds[k])
                if status != 0:
                    print(f"{src}: exit status {status}", file=sys.stderr)
                    return 1
                if r:  # round 0 is the warm-up
                    times[k].append(dt)
                    peak[k] = max(peak[k], rss)
        for k, src in enumerate(args.src):
            ts = sorted(times[k])
            print(f"{src}: min {ts[0]:.3f} s, median {ts[len(ts) // 2]:.3f} s, peak RSS {peak[k] / 1024:,.0f} MiB "
                  f"({len(ts)} runs)")
        if not all(os.path.exists(o) for o in outs):
            print("outputs: not compared (the command wrote no file at {out})")
            return 0
        same = all(filecmp.cmp(outs[0], o, shallow=False) for o in outs[1:])
        print("outputs: identical" if same else "outputs: DIFFER")
        return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
