#!/usr/bin/env python3
"""jitsim's memory on the TF-free route: calls nested D deep and millions of NoOps (issue 39).

    python benchmarks/memory_scale.py                                   # depths 500..4k, 200k/500k NoOps
    python benchmarks/memory_scale.py --baseline-src /tmp/old/src       # before/after, same runs
    python benchmarks/memory_scale.py --depths 10k --noops 5M --limit-mb 6144   # under ulimit -v

Graphs (``benchmarks/generate.py``): ``nested_calls(D, kind="PartitionedCall")`` (``f0`` calls
``f1`` ... ``f{D-1}``, each 4 nodes), ``noops(N)`` (N unconnected NoOps, 18 bytes each in the
.pb) and ``noops(N, chain=True)`` (each waiting on the one before). Each runs ``cluster FILE
--tf never`` in a fresh process (the parse cache off), for this checkout and, with
``--baseline-src``, another checkout's ``src``; the table gives the peak resident memory
(``ru_maxrss``), the wall time, and per row what the growth means: for nesting, MB per D²
(constant: quadratic, as the inlined graph's node names are: TF names a node inlined D deep
after all D callers), for NoOps KB per node. ``--limit-mb`` runs each command under an
address-space limit (``RLIMIT_AS``) and records how it ended: ``ok``, ``out of memory``
(exit 2 and jitsim's one out-of-memory line: ``refused`` when refused before the work) or
anything else (``exit 139`` a crash). ``jitsim.memory``'s lower bound for each graph is shown
beside it. Results go to ``benchmarks/results/memory_scale.json`` (``--name``).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

import generate  # noqa: E402
import run  # noqa: E402

SIZES = {"500": 500, "1k": 1_000, "2k": 2_000, "4k": 4_000, "5k": 5_000, "10k": 10_000,
         "100k": 100_000, "200k": 200_000, "300k": 300_000, "500k": 500_000, "1M": 1_000_000, "5M": 5_000_000}


def _cmd(src: Path, args: list) -> list[str]:
    code = f"import sys; sys.path.insert(0, {str(src)!r}); from jitsim.cli import main; sys.exit(main())"
    return [sys.executable, "-c", code, *map(str, args)]


def measure_one(src: Path, graph: Path, limit_mb: int | None, timeout: float) -> dict:
    """One ``cluster --tf never`` run: peak RSS, wall time, how it ended."""
    def limited():
        if limit_mb:
            resource.setrlimit(resource.RLIMIT_AS, (limit_mb << 20, limit_mb << 20))

    env = dict(os.environ, JITSIM_PARSE_CACHE="off")
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as errf:
        p = subprocess.Popen(_cmd(src, ["cluster", graph, "--tf", "never"]), stdout=subprocess.DEVNULL, stderr=errf,
                             env=env, cwd=ROOT, preexec_fn=limited)
        while True:
            pid, status, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t0 > timeout:
                p.kill()
                _, status, ru = os.wait4(p.pid, 0)
                return {"wall_s": None, "ended": f"timeout ({timeout:.0f} s)", "peak_rss_mb": ru.ru_maxrss / 1024}
            time.sleep(0.01)
        wall = time.perf_counter() - t0
        rc = os.waitstatus_to_exitcode(status)
        errf.seek(0)
        err = errf.read().decode(errors="replace").strip().splitlines()
    lines = [ln for ln in err if ln.startswith("jitsim: ") and ": note: " not in ln]
    if rc == 0:
        ended = "ok"
    elif rc == 2 and len(lines) == 1 and "would run out of memory" in lines[0]:
        ended = "out of memory (refused)"
    elif rc == 2 and len(lines) == 1 and "out of memory" in lines[0]:
        ended = "out of memory"
    else:
        ended = f"exit {rc}" if rc >= 0 else f"exit {128 - rc} (signal {-rc})"
    return {"wall_s": round(wall, 2), "peak_rss_mb": round(ru.ru_maxrss / 1024, 1), "ended": ended,
            "line": lines[-1][:300] if rc and lines else None}


def bound(graph: Path) -> dict:
    from jitsim.graph.io import load
    from jitsim.memory import BYTES_PER_NAME_BYTE, BYTES_PER_NODE, inlined_size

    nodes, names = inlined_size(load(graph, validate=False))
    return {"inlined_nodes": nodes, "inlined_name_mb": round(names / 1e6, 1),
            "bound_mb": round((nodes * BYTES_PER_NODE + names * BYTES_PER_NAME_BYTE) / 1e6, 1)}


def table(rows: list[dict], codes: list[str]) -> str:
    head = ["graph", "size", "bound MB"]
    for c in codes:
        head += [f"{c} peak RSS MB", f"{c} s", f"{c} growth", f"{c} ended"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * 2 + "---:|" * (len(head) - 2)]
    for r in rows:
        cells = [r["kind"], f"{r['n']:,}", f"{r['bound_mb']:,.0f}"]
        for c in codes:
            m = r[c]
            mb = m["peak_rss_mb"]
            growth = (f"{mb / (r['n'] / 1000) ** 2:.0f} MB/(D/1000)²" if r["kind"] == "nested"
                      else f"{mb * 1024 / r['n']:.1f} KB/node")
            cells += [f"{mb:,.0f}", "–" if m["wall_s"] is None else f"{m['wall_s']:.1f}", growth, m["ended"]]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--depths", default="500,1k,2k,4k", help=f"nesting depths, of {', '.join(SIZES)} ('' for none)")
    ap.add_argument("--noops", default="200k,500k", help="NoOp counts ('' for none)")
    ap.add_argument("--chains", default="", help="NoOp chain lengths ('' for none)")
    ap.add_argument("--baseline-src", type=Path, help="another checkout's src directory, measured the same way")
    ap.add_argument("--limit-mb", type=int, help="run each command under this address-space limit (RLIMIT_AS)")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--name", default="memory_scale")
    a = ap.parse_args(argv)
    from jitsim.graph.io import save

    srcs = {"this": ROOT / "src"}
    if a.baseline_src:
        srcs["baseline"] = a.baseline_src.resolve()
    rows = []
    with tempfile.TemporaryDirectory(prefix="jitsim-memory-scale-") as tmp:
        cases = [("nested", SIZES[s], lambda n: generate.nested_calls(n, kind="PartitionedCall"))
                 for s in a.depths.split(",") if s]
        cases += [("noops", SIZES[s], generate.noops) for s in a.noops.split(",") if s]
        cases += [("noop chain", SIZES[s], lambda n: generate.noops(n, chain=True)) for s in a.chains.split(",") if s]
        for kind, n, make in cases:
            path = save(make(n), Path(tmp) / f"{kind.replace(' ', '_')}_{n}.pb")
            row = {"kind": kind, "n": n, "file_mb": round(path.stat().st_size / 1e6, 2), **bound(path)}
            for code, src in srcs.items():
                row[code] = measure_one(src, path, a.limit_mb, a.timeout)
            rows.append(row)
            print(json.dumps(row), flush=True)
    doc = {"schema": "jitsim.bench.memory/1", "when": datetime.datetime.now().isoformat(timespec="seconds"),
           "machine": run.machine(), "limit_mb": a.limit_mb,
           "baseline_src": str(a.baseline_src) if a.baseline_src else None, "rows": rows}
    out = HERE / "results" / f"{a.name}.json"
    out.write_text(json.dumps(doc, indent=1) + "\n")
    print(f"wrote {out}")
    print(table(rows, list(srcs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
