#!/usr/bin/env python3
"""jitsim on function libraries: N functions each called once, and calls nested D deep (issue 22).

    python benchmarks/functions_scale.py                                # 500..20k functions, 1k/5k deep
    python benchmarks/functions_scale.py --sizes 500,1k,2k --baseline-src /tmp/old/src   # before/after
    python benchmarks/functions_scale.py --quick                        # CI-sized smoke run

Graphs: ``generate.functions(N)`` (``x`` -> ``call{i}`` = ``f{i}(x)`` by PartitionedCall,
StatefulPartitionedCall or the function's name in turn -> one ``AddN`` of all N results) and
``generate.nested_calls(D)`` (``f0`` calls ``f1`` ... by PartitionedCall). Each command runs as a
user runs it, in a fresh process (start-up included; the parse cache off): ``cluster --tf never``
(every call inlined and Grappler simulated), ``cluster --input-stage graphdef`` (the graph as it
is: the calls are candidates), ``rewrite --until mark`` and ``--until build-xla-ops``, and
``explain`` of one node.

Ratios, all from this run: ``per-function vs smallest`` = (seconds per function at N) / (seconds per
function at the smallest N) -- 1.0 is linear time, 2.0 at 2x the size means quadratic; with
``--baseline-src`` (another checkout's ``src``, e.g. before a change) each command also runs on
that code, and ``baseline / this`` is its time over this checkout's (``timeout`` when it ran past
``--timeout``; larger sizes of that command are then skipped). Results go to
``benchmarks/results/functions_scale.json`` (``--name``) with the machine and its load.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

import generate  # noqa: E402
import run  # noqa: E402

SIZES = {"500": 500, "1k": 1_000, "2k": 2_000, "5k": 5_000, "10k": 10_000, "20k": 20_000}
DEPTHS = {"1k": 1_000, "5k": 5_000}
COMMANDS = {
    "cluster": lambda g, o: ["cluster", g, "--tf", "never"],
    "cluster graphdef": lambda g, o: ["cluster", g, "--input-stage", "graphdef"],
    "rewrite mark": lambda g, o: ["rewrite", g, "--until", "mark", "-o", o],
    "rewrite build-xla-ops": lambda g, o: ["rewrite", g, "--until", "build-xla-ops", "-o", o],
    "explain": lambda g, o: ["explain", g, "result", "--tf", "never"],
}


def _cmd(src: Path, args: list) -> list[str]:
    # the checkout's src first on sys.path, whatever PYTHONPATH says
    code = f"import sys; sys.path.insert(0, {str(src)!r}); from jitsim.cli import main; sys.exit(main())"
    return [sys.executable, "-c", code, *map(str, args)]


def _measure(src: Path, args: list, repeat: int, timeout: float) -> dict:
    try:
        return run.whole_process(_cmd(src, args), repeat, timeout)
    except TimeoutError:
        return {"wall_s": None, "timeout_s": timeout}
    except RuntimeError as e:  # a failed run: 137 = killed, on Linux mostly by the OOM killer
        code = str(e).split(" failed (", 1)[-1].split(")", 1)[0]
        return {"wall_s": None, "failed": f"exit {code}" + (" (killed: out of memory?)" if code == "137" else "")}


def measure(cases: list[tuple[str, str, int, Path]], srcs: dict[str, Path], repeat: int,
            timeout: float, tmp: Path) -> list[dict]:
    rows = []
    given_up: set[tuple[str, str, str]] = set()  # (code, kind, command) that timed out
    for kind, label, n, path in cases:
        for cname, make in COMMANDS.items():
            if kind == "nested" and cname == "explain":
                continue
            row = {"kind": kind, "size": label, "n": n, "command": cname}
            for code, src in srcs.items():
                if (code, kind, cname) in given_up:
                    row[code] = {"wall_s": None, "skipped": "a smaller size timed out or failed"}
                    continue
                r = _measure(src, make(path, tmp / "out.pbtxt"), repeat, timeout)
                if r["wall_s"] is None:
                    given_up.add((code, kind, cname))  # larger sizes: skipped
                row[code] = r
            rows.append(row)
            print(_line(row), flush=True)
    _ratios(rows)
    return rows


def _line(row: dict) -> str:
    parts = [f"{row['kind']:9} {row['size']:>4} {row['command']:22}"]
    for code in ("this", "baseline"):
        if code in row:
            w = row[code]["wall_s"]
            parts.append(f"{code} {'timeout/failed' if w is None else f'{w:7.2f} s'}")
    return "  ".join(parts)


def _ratios(rows: list[dict]) -> None:
    for kind in {r["kind"] for r in rows}:
        for cname in COMMANDS:
            sel = [r for r in rows if r["kind"] == kind and r["command"] == cname]
            for code in ("this", "baseline"):
                timed = [r for r in sel if code in r and r[code]["wall_s"] is not None]
                if not timed:
                    continue
                base = min(timed, key=lambda r: r["n"])
                per = base[code]["wall_s"] / base["n"]
                for r in timed:
                    r[code]["per_function_vs_smallest"] = round(r[code]["wall_s"] / r["n"] / per, 2)
            for r in sel:
                if "baseline" in r and r["baseline"]["wall_s"] and r["this"]["wall_s"]:
                    r["baseline_over_this"] = round(r["baseline"]["wall_s"] / r["this"]["wall_s"], 2)


def table(rows: list[dict]) -> str:
    has_base = any("baseline" in r for r in rows)
    head = ["graph", "size", "command", "s", "peak RSS MB", "per-function vs smallest"]
    if has_base:
        head += ["baseline s", "baseline per-function vs smallest", "baseline / this"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * 3 + "---:|" * (len(head) - 3)]

    def s(r, code):
        if code not in r:
            return "–"
        w = r[code]["wall_s"]
        if w is None:
            if "timeout_s" in r[code]:
                return f"> {r[code]['timeout_s']:.0f} (timeout)"
            return r[code].get("failed") or "not run (smaller size failed)"
        return f"{w:.2f}"

    for r in rows:
        what = "functions" if r["kind"] == "functions" else "nested calls (depth)"
        cells = [what, f"{r['n']:,}", f"`{r['command']}`", s(r, "this"),
                 f"{r['this'].get('peak_rss_mb', 0):,.0f}" if r["this"]["wall_s"] else "–",
                 str(r["this"].get("per_function_vs_smallest", "–"))]
        if has_base:
            cells += [s(r, "baseline"), str(r.get("baseline", {}).get("per_function_vs_smallest", "–")),
                      str(r.get("baseline_over_this", "–"))]
        out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="500,1k,2k,10k,20k", help=f"functions, of {', '.join(SIZES)}")
    ap.add_argument("--depths", default="1k,5k", help=f"nesting depths, of {', '.join(DEPTHS)} ('' for none)")
    ap.add_argument("--baseline-src", type=Path, help="another checkout's src directory, measured the same way")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--timeout", type=float, default=300.0)
    ap.add_argument("--quick", action="store_true", help="50 and 100 functions, depth 50 (a smoke run)")
    ap.add_argument("--name", default="functions_scale")
    a = ap.parse_args(argv)
    from jitsim.graph.io import save

    if a.quick:
        sizes, depths = [("50", 50), ("100", 100)], [("50", 50)]
    else:
        sizes = [(s, SIZES[s]) for s in a.sizes.split(",") if s]
        depths = [(d, DEPTHS[d]) for d in a.depths.split(",") if d]
    srcs = {"this": ROOT / "src"}
    if a.baseline_src:
        srcs["baseline"] = a.baseline_src.resolve()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="jitsim-functions-scale-") as tmp:
        tmp = Path(tmp)
        cases = []
        for label, n in sizes:
            cases.append(("functions", label, n, save(generate.functions(n), tmp / f"functions_{label}.pb")))
        for label, d in depths:
            cases.append(("nested", label, d, save(generate.nested_calls(d, kind="PartitionedCall"),
                                                  tmp / f"nested_{label}.pb")))
        rows = measure(cases, srcs, a.repeat, a.timeout, tmp)
    doc = {"schema": "jitsim.bench.functions/1", "when": datetime.datetime.now().isoformat(timespec="seconds"),
           "machine": {**run.machine(), "load_before": load_before, "load_after": os.getloadavg()},
           "baseline_src": str(a.baseline_src) if a.baseline_src else None, "rows": rows}
    if not a.quick:
        out = HERE / "results" / f"{a.name}.json"
        out.write_text(json.dumps(doc, indent=1) + "\n")
        print(f"wrote {out}")
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
