#!/usr/bin/env python3
"""jitsim's clustering time and memory vs TF's MarkForCompilationPass on the fixtures corpus's
largest graphs: a shortcut for ``benchmarks/run.py --sizes '' --cases fixture:`` (every option of
run.py applies, e.g. ``--repeat 5`` or ``--cases fixture:resnet101``). See docs/performance.md.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import run  # noqa: E402

if __name__ == "__main__":
    args = sys.argv[1:]
    if "--cases" not in args:
        args += ["--cases", "fixture:"]
    sys.exit(run.main(["--sizes", "", "--name", "cluster_speed", *args]))
