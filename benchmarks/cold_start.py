#!/usr/bin/env python3
"""Cold start: `jitsim show` on a small graph vs. bare Python and vs. `import tensorflow`.

    python benchmarks/cold_start.py [GRAPH] [--repeat N]

Each command runs N times in a fresh process; the median wall time is reported, with the
ratios against the two baselines measured in the same run. Target (issue 25): jitsim ≤ 0.25 s.
"""

import argparse
import importlib.util
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def median_wall(cmd, repeat):
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("graph", nargs="?", default=str(ROOT / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt"))
    ap.add_argument("--repeat", type=int, default=7)
    a = ap.parse_args()
    py = sys.executable
    rows = [("python -c pass", median_wall([py, "-c", "pass"], a.repeat))]
    rows.append((f"jitsim show {Path(a.graph).name}", median_wall([py, "-m", "jitsim.cli", "show", a.graph, "--format", "json"], a.repeat)))
    if importlib.util.find_spec("tensorflow"):
        rows.append(("python -c 'import tensorflow'", median_wall([py, "-c", "import tensorflow"], max(3, a.repeat // 2))))
    base = rows[0][1]
    js = rows[1][1]
    print(f"{'command':45} {'median s':>9} {'x python':>9}")
    for name, t in rows:
        print(f"{name:45} {t:9.3f} {t / base:9.2f}")
    if len(rows) > 2:
        print(f"jitsim cold start is {rows[2][1] / js:.1f}x faster than importing TensorFlow")
    print(f"target ≤ 0.25 s (issue 25): {'met' if js <= 0.25 else 'NOT met'} ({js:.3f} s)")


if __name__ == "__main__":
    main()
