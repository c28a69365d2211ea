#!/usr/bin/env python3
"""Plot and tabulate a results file of benchmarks/run.py.

    python benchmarks/plot.py benchmarks/results/full.json                # docs/img/performance.png
    python benchmarks/plot.py benchmarks/results/full.json --update-doc docs/performance.md

The plot is log-log, time against nodes: the whole ``jitsim cluster`` and ``jitsim rewrite``
processes, the in-process phases (parse, passes, write) and TF's MarkForCompilationPass where a
TF time exists, with a slope-1 line (linear growth) for reference. ``--update-doc`` rewrites
the part of the document between ``<!-- results:begin -->`` and ``<!-- results:end -->`` with
the table and the targets. Needs matplotlib (``pip install jitsim[bench]``) for the plot only.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

# the figures are MiB (ru_maxrss / 1024); the issue's limits are decimal GB
_GB_MIB = 1e9 / 2**20

ROOT = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"


def ok_rows(doc: dict) -> list[dict]:
    return sorted((r for r in doc["cases"] if "error" not in r), key=lambda r: r["nodes"])


def plot(doc: dict, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = ok_rows(doc)
    fig, ax = plt.subplots(figsize=(9.5, 4.8), dpi=100)
    kinds = {"small": "o", "fixture": "s", "issue": "D", "tiled": "^", "layered": "v"}

    def series(label, key, color, line=False, **kw):
        pts = [(r["nodes"], key(r), r["kind"]) for r in rows if key(r)]
        if not pts:
            return
        if line:
            xs, ys, _ = zip(*pts)
            ax.plot(xs, ys, "-", color=color, alpha=0.35, lw=1)
        for k, m in kinds.items():
            sel = [(x, y) for x, y, kk in pts if kk == k]
            if sel:
                ax.scatter(*zip(*sel), marker=m, color=color, s=28, **kw)
        ax.plot([], [], "-", color=color, label=label)

    layered = [r for r in rows if r["kind"] == "layered"]
    for name, key, color in (
        ("jitsim cluster (whole process)", lambda r: r["cluster_cmd"]["wall_s"], "C0"),
        ("jitsim rewrite --until build-xla-ops", lambda r: r["rewrite_cmd"]["wall_s"], "C1"),
        ("in-process: parse", lambda r: r["parse_s"], "C2"),
        ("in-process: passes (clone, scoping, mark)", lambda r: r["cluster_s"], "C4"),
        ("in-process: write", lambda r: r["write_s"], "C5"),
        ("TF MarkForCompilationPass", lambda r: r["tf_pass_s"], "C3"),
    ):
        series(name, key, color)
        lay = [(r["nodes"], key(r)) for r in layered if key(r)]
        if len(lay) > 1:
            ax.plot(*zip(*lay), "-", color=color, alpha=0.4, lw=1)
    if layered:  # anchored at 10k+ nodes where possible: below that, start-up dominates
        ref = next((r for r in layered if r["nodes"] >= 9_000), layered[0])
        x0, y0 = ref["nodes"], ref["cluster_cmd"]["wall_s"]
        xs = [x0, max(r["nodes"] for r in rows)]
        ax.plot(xs, [y0, y0 * xs[1] / x0], ":", color="gray", label=f"linear (slope 1) through layered {x0:,}")
    for k, m in kinds.items():
        ax.scatter([], [], marker=m, color="gray", label=f"{k} graphs")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("nodes")
    ax.set_ylabel("seconds")
    m = doc["machine"]
    ax.set_title(f"jitsim vs graph size ({m['nproc']} CPUs, load {m['loadavg_start'][0]:.1f}, {m['date'][:10]})",
                 fontsize=10)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=100)
    plt.close(fig)


def _f(x, spec=".2f"):
    return "–" if x is None else format(x, spec)


def _tf(r: dict) -> str:
    """TF's pass time; in parentheses where it was not taken without dump flags in this run
    (a dumping harvest's time, kept for reference: no ratio is computed against it)."""
    t = _f(r["tf_pass_s"], ".3f" if (r["tf_pass_s"] or 1) < 0.1 else ".2f")
    return t if r.get("tf_fair") or r["tf_pass_s"] is None else f"({t})"


def markdown_table(doc: dict) -> str:
    m = doc["machine"]
    lines = [
        f"Measured {m['date']} on {m['nproc']} CPUs ({m['cpu']}), {m.get('mem_gb')} GB, Python {m['python']}, "
        f"protobuf {m['protobuf']} ({m.get('protobuf_impl')}); load average at start "
        f"{', '.join(f'{x:.2f}' for x in m['loadavg_start'])}, at end "
        f"{', '.join(f'{x:.2f}' for x in m.get('loadavg_end') or [])}; {doc.get('repeat', '?')} run(s) per figure "
        f"(at least 5 for files under 2 MB; fastest kept). Source: `{doc.get('_path', 'benchmarks/results/full.json')}`.",
        "",
        "| case | nodes | parse s | model s | passes s | write s | in-process total s | `cluster` s "
        "| `cluster`, cached parse s | `rewrite` s | rewrite / cluster | peak RSS MB (`cluster` or `rewrite`, the larger) | TF pass s | `cluster` / TF "
        "| in-process / TF |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in doc["cases"]:
        if "error" in r:
            lines.append(f"| {r['case']} | | | | | | | | | | | | | | error: {r['error'][:80]} |")
            continue
        rss = max(r["cluster_cmd"]["peak_rss_mb"], r["rewrite_cmd"]["peak_rss_mb"])
        lines.append(
            f"| {r['case']} | {r['nodes']:,} | {_f(r['parse_s'])} | {_f(r['model_s'])} | {_f(r['cluster_s'])} | "
            f"{_f(r['write_s'])} | {_f(r['total_s'])} | {_f(r['cluster_cmd']['wall_s'])} | "
            f"{_f((r.get('cluster_cmd_cached') or {}).get('wall_s'))} | {_f(r['rewrite_cmd']['wall_s'])} | {_f(r['rewrite_over_cluster'])} | {rss:,.0f} | "
            f"{_tf(r)} | {_f(r['ratio_vs_tf'])} | {_f(r.get('inprocess_ratio_vs_tf'))} |")
    lines += ["", "TF pass: `MarkForCompilationPassImpl::Run` as TF logs it. Without parentheses: measured in this "
              "benchmark run, on this machine, with no dump flags (only `TF_CPP_VMODULE=mark_for_compilation_pass=1`, "
              "which prints that line; no `TF_DUMP_GRAPH_PREFIX`, no `--tf_xla_clustering_debug`: TF writes its dumps "
              "inside the timed region), the median of the runs listed below; the ratios are against these only. In "
              "parentheses: a dumping harvest's time (another machine or day), for reference.",
              "", "TF times: " + "; ".join(sorted({f"{r['case']}: {r['tf_source']}" for r in doc["cases"]
                                                   if r.get("tf_source")})),
              "", "`cluster`, cached parse: the same command reading the same text file again, its binary form "
              "served by the parsed-text cache (`JITSIM_PARSE_CACHE`); every other figure parses the text."]
    for r in doc["cases"]:
        if r.get("commands"):
            c = r["commands"]
            lines += ["", f"Other commands on `{r['case']}` ({r['nodes']:,} nodes), whole process, parse cache off "
                          f"(`explain` of `{c['explain'].get('node')}`; `whatif`/`diff`: "
                          "`--tf_xla_min_cluster_size=10`, two simulations):", "",
                      "| " + " | ".join(f"`{k}` s" for k in c) + " |", "|" + "---:|" * len(c),
                      "| " + " | ".join(_f(v.get("wall_s")) for v in c.values()) + " |"]
    return "\n".join(lines)


def targets(doc: dict) -> str:
    """The issue's done-when figures, checked against this results file."""
    by = {r["case"]: r for r in doc["cases"] if "error" not in r}

    def find(*subs):
        for name, r in by.items():
            if all(s in name for s in subs):
                return r
        return None

    rows = []

    def add(what, value, limit, fmt, ok):
        rows.append(f"| {what} | {value if value is not None else 'not measured'} | {limit} | "
                    f"{'–' if ok is None else ('met' if ok else '**not met**')} |")

    for subs, label in ((("issue:resnet50",), "ResNet-50 training step (12.6k)"),
                        (("issue:deep_mlp",), "deep MLP training step (25.9k)")):
        r = find(*subs)
        ratio = r and r["ratio_vs_tf"]
        add(f"{label}: whole `cluster` process / TF's pass without dumps", ratio and f"{ratio:.2f}",
            "≤ 1.0", "", None if ratio is None else ratio <= 1.0)
        ratio = r and r.get("inprocess_ratio_vs_tf")
        add(f"{label}: in-process (parse, model, passes, write) / TF's pass", ratio and f"{ratio:.2f}",
            "goal ≤ 0.5", "", None if ratio is None else ratio <= 0.5)
    r = find("issue:efficientnet")
    add("EfficientNetB0 inference (1.5k): whole process", r and f"{r['cluster_cmd']['wall_s']:.2f} s", "≤ 0.3 s",
        "", None if r is None else r["cluster_cmd"]["wall_s"] <= 0.3)
    r = find("small:")
    add("50-node graph: whole process (about the cold start)", r and f"{r['cluster_cmd']['wall_s']:.2f} s",
        "≤ 0.25 s", "", None if r is None else r["cluster_cmd"]["wall_s"] <= 0.25)
    for subs in (("tiled:8x",), ("layered:100k",)):
        r = find(*subs)
        name = r["case"] if r else subs[0]
        add(f"100k nodes ({name}): whole process", r and f"{r['cluster_cmd']['wall_s']:.1f} s", "≤ 5 s", "",
            None if r is None else r["cluster_cmd"]["wall_s"] <= 5)
        rss = r and r["cluster_cmd"]["peak_rss_mb"]
        add(f"100k nodes ({name}): peak RSS of `cluster`", rss and f"{rss:,.0f} MB", "≤ 1.5 GB", "",
            None if rss is None else rss <= _GB_MIB * 1.5)
    m1 = [x for x in by.values() if x["nodes"] >= 900_000]
    add("1M nodes: whole process", ", ".join(f"{x['case']}: {x['cluster_cmd']['wall_s']:.0f} s" for x in m1) or None,
        "≤ 120 s", "", all(x["cluster_cmd"]["wall_s"] <= 120 for x in m1) if m1 else None)
    add("1M nodes: peak RSS", ", ".join(f"{x['cluster_cmd']['peak_rss_mb']:,.0f} MB" for x in m1) or None,
        "≤ 4 GB", "", all(x["cluster_cmd"]["peak_rss_mb"] <= _GB_MIB * 4 for x in m1) if m1 else None)
    a, b = find("layered:10k"), find("layered:100k")
    if a and b:
        g = (b["cluster_cmd"]["wall_s"] / a["cluster_cmd"]["wall_s"]) / (b["nodes"] / a["nodes"])
        add("growth 10k → 100k (layered): time ratio / node ratio", f"{g:.2f}", "≈ 1 or less (linear)", "", g <= 1.2)
    else:
        add("growth 10k → 100k (layered)", None, "≈ linear", "", None)
    r = find("issue:resnet50")
    c = r and r.get("commands")
    add("`explain` / `whatif` / `diff` on the 12.6k graph (whole process)",
        c and " / ".join(f"{c[k]['wall_s']:.1f}" for k in ("explain", "whatif", "diff")) + " s",
        "a few seconds", "", None)
    r = find("issue:deep_mlp")
    add("`rewrite --until build-xla-ops` / `cluster` on the 25.9k graph", r and f"{r['rewrite_over_cluster']:.2f}",
        "≤ 2", "", None if r is None else r["rewrite_over_cluster"] <= 2)
    return "\n".join(["| target (issue 25) | measured | limit | |", "|---|---:|---:|---|", *rows])


def update_doc(doc: dict, path: Path) -> None:
    text = path.read_text()
    body = f"{BEGIN}\n{markdown_table(doc)}\n\n{targets(doc)}\n{END}"
    new, n = re.subn(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: body, text, flags=re.S)
    if not n:
        raise SystemExit(f"{path}: no {BEGIN} ... {END} block")
    path.write_text(new)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="?", default=str(ROOT / "benchmarks" / "results" / "full.json"))
    ap.add_argument("-o", "--output", default=str(ROOT / "docs" / "img" / "performance.png"))
    ap.add_argument("--update-doc", metavar="MD", help="rewrite the results block of this markdown file")
    ap.add_argument("--no-plot", action="store_true")
    a = ap.parse_args(argv)
    doc = json.loads(Path(a.results).read_text())
    try:
        doc["_path"] = str(Path(a.results).resolve().relative_to(ROOT))
    except ValueError:
        doc["_path"] = a.results
    if not a.no_plot:
        plot(doc, Path(a.output))
        print(f"wrote {a.output} ({Path(a.output).stat().st_size / 1024:.0f} KB)")
    if a.update_doc:
        update_doc(doc, Path(a.update_doc))
        print(f"updated {a.update_doc}")
    else:
        print(markdown_table(doc))
        print()
        print(targets(doc))
    return 0


if __name__ == "__main__":
    sys.exit(main())
