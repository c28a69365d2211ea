#!/usr/bin/env python3
"""What the HTML report's graph costs at real-model size (issue 40): writing the report, its
size, and in headless Chromium the time to the first paint of the graph and the page's
JavaScript heap, for the explorer and, as the baseline measured in the same run, the graphviz
collapsed picture the report drew before it.

    python benchmarks/report_view.py                      # resnet50 (12.6k), tiled x8 (101k), layered 100k
    python benchmarks/report_view.py --cases resnet50 --out benchmarks/results/report_view.json

Needs jitsim's dev extras (selenium) and Debian's chromium + chromium-driver. Graphs are
cached under out/bench (JITSIM_BENCH_CACHE). Prints a table; ``--out`` also writes JSON
(schema ``jitsim.report-view-bench/1``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path[:0] = [str(HERE), str(ROOT / "docs" / "tools")]

FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"


def cache() -> Path:
    return Path(os.environ.get("JITSIM_BENCH_CACHE") or ROOT / "out" / "bench") / "report_view"


def resnet_dump() -> Path:
    import run
    from jitsim.crosscheck.corpus import Corpus

    out = cache() / "resnet50_train_adam.pbtxt"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        corpus = Corpus()  # its extracted files live as long as it does
        path, _ = run._fixture_graph(corpus, "resnet50_train_adam", run.BEFORE_MARK)
        out.write_bytes(path.read_bytes())
        del corpus
    return out


def case_path(name: str) -> Path:
    import generate
    from jitsim.graph.io import read_graphdef, save

    if name == "resnet50":
        return resnet_dump()
    out = cache() / f"{name}.pbtxt"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        gd = generate.tile(read_graphdef(resnet_dump()), 8) if name == "resnet50_x8" else generate.layered(100_000, width=16)
        save(gd, out)
    return out


CASES = ("resnet50", "resnet50_x8", "layered_100k")


def open_in_browser(page: Path, wait_for: str, timeout: float = 120) -> dict:
    """Load ``page``; wait until ``wait_for`` (a JS expression) is true; the time since
    navigation began and the page's JS heap (Chrome's Performance metrics)."""
    from screenshots import browser

    d = browser(1400, 1000)
    try:
        d.execute_cdp_cmd("Performance.enable", {})
        t0 = time.perf_counter()
        d.get(page.as_uri())
        end = time.monotonic() + timeout
        while not d.execute_script(f"return !!({wait_for})"):
            if time.monotonic() > end:
                return {"error": f"not drawn within {timeout:.0f} s"}
            time.sleep(0.05)
        wall = time.perf_counter() - t0
        painted = d.execute_script("var e = document.getElementById('explorer');"
                                   "return e ? parseFloat(e.getAttribute('data-painted-at-ms')) : performance.now()")
        metrics = {m["name"]: m["value"] for m in d.execute_cdp_cmd("Performance.getMetrics", {})["metrics"]}
        drawn = d.execute_script("var e = document.getElementById('explorer');"
                                 "return e ? +e.getAttribute('data-drawn') : document.querySelectorAll('#graph-box g.node').length")
        layout = d.execute_script("var e = document.getElementById('explorer');"
                                  "return e ? parseFloat(e.getAttribute('data-layout-ms')) : null")
        return {"first_paint_s": round(painted / 1000, 3), "wall_s": round(wall, 3), "drawn": drawn,
                "layout_ms": layout, "js_heap_mb": round(metrics.get("JSHeapUsedSize", 0) / 1e6, 1),
                "dom_nodes": int(metrics.get("Nodes", 0))}
    finally:
        d.quit()


def measure(name: str) -> dict:
    from jitsim.explain.clustering import cluster
    from jitsim.explain.report import write_report_file

    path = case_path(name)
    t = time.perf_counter()
    c = cluster(path, flags=FLAGS, tf="never")
    sim_s = time.perf_counter() - t
    row = {"case": name, "nodes": len(c.nodes), "clusters": len(c.clusters), "simulate_s": round(sim_s, 2)}
    with tempfile.TemporaryDirectory(prefix="jitsim-report-view-") as tmp:
        for view, wait in (("explorer", "document.getElementById('explorer') && "
                                        "document.getElementById('explorer').getAttribute('data-painted-at-ms')"),
                           ("collapsed", "document.querySelector('#graph-box svg, #graph-missing')")):
            out = Path(tmp) / view
            t = time.perf_counter()
            info = write_report_file(c, out, view=view)
            write_s = time.perf_counter() - t
            r = {"write_s": round(write_s, 2), "mb": round(info["bytes"] / 1e6, 2), "problem": info["problem"]}
            r.update(open_in_browser(out / "index.html", wait))
            row[view] = r
    return row


def main(argv) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    ap.add_argument("--out", help="also write the rows as JSON here")
    a = ap.parse_args(argv)
    rows = []
    for name in a.cases.split(","):
        row = measure(name)
        rows.append(row)
        e, g = row["explorer"], row["collapsed"]
        print(f"{name}: {row['nodes']} nodes, {row['clusters']} clusters, simulated in {row['simulate_s']} s")
        for view, r in (("explorer", e), ("graphviz collapsed (baseline)", g)):
            print(f"  {view:30s} write {r['write_s']:6.2f} s  {r['mb']:6.2f} MB  first paint "
                  f"{r.get('first_paint_s', '-')} s  drawn {r.get('drawn', '-')}  layout {r.get('layout_ms') or '-'} ms  "
                  f"JS heap {r.get('js_heap_mb', '-')} MB  DOM {r.get('dom_nodes', '-')}"
                  + (f"  ({r['error']})" if r.get("error") else "") + (f"  [{r['problem']}]" if r["problem"] else ""))
    if a.out:
        Path(a.out).write_text(json.dumps({"schema": "jitsim.report-view-bench/1", "machine": platform.node(),
                                           "cpus": os.cpu_count(), "date": time.strftime("%Y-%m-%d"),
                                           "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
