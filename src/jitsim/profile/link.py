"""The link between the views of ``jitsim profile``, as ``summary.json`` (schema
``jitsim.profile/1``, docs/cli.md).

Each cluster TF compiled (its ``mark_for_compilation`` dump names it and its nodes) is
joined with:

* jitsim's predicted cluster: jitsim is run on the same graph (TF's dump of the pass's
  input) and its partition compared with TF's, as ``crosscheck verify``/``compare`` do
  (:func:`jitsim.crosscheck.fidelity.verify_dir`); the best-matching predicted cluster;
* its HLO module: XLA names the module after the cluster's function
  (``cluster_0__XlaCompiledKernel_...``), see :mod:`.hlo`;
* its trace events: the ``_XlaRun`` events of the node TF's build-xla-ops pass made for it
  (``cluster_0_1/xla_run``; TF's ``build_xla_ops`` dump says which function the node's
  ``_XlaCompile`` compiles), see :mod:`.trace`.
"""

from __future__ import annotations

import re
import statistics
from pathlib import Path

from jitsim.crosscheck.scoring import labels_of_graphdef
from jitsim.graph.io import read_graphdef
from jitsim.profile import trace as tr

SCHEMA = "jitsim.profile/1"


def step_stats(times_s: list[float]) -> dict:
    """Median and spread of step times (seconds)."""
    if not times_s:
        return {"n": 0, "median_s": None, "min_s": None, "max_s": None, "iqr_s": None}
    xs = sorted(times_s)
    q = statistics.quantiles(xs, n=4) if len(xs) >= 2 else [xs[0]] * 3
    return {"n": len(xs), "median_s": statistics.median(xs), "min_s": xs[0], "max_s": xs[-1],
            "iqr_s": q[2] - q[0]}


def launch_functions(build_xla_ops_gd) -> dict[str, str]:
    """Launch node (``cluster_0_1``) -> the cluster function it compiles (``cluster_0``), from
    TF's ``build_xla_ops`` dump."""
    out = {}
    for n in build_xla_ops_gd.node:
        if n.op in tr.XLA_COMPILE_OPS and "function" in n.attr:
            node = n.name.rsplit("/", 1)[0] if "/" in n.name else n.name
            out[node] = n.attr["function"].func.name
    return out


def _launch_cluster(node: str, functions: dict[str, str]) -> str:
    if node in functions:
        return functions[node]
    return re.sub(r"_\d+$", "", node)  # TF names the call node after its function, uniquified


def cluster_times(step_trace: dict, functions: dict[str, str]) -> dict[str, dict]:
    """cluster -> launches and launch time (microseconds) in one profiled step."""
    out: dict[str, dict] = {}
    for e in tr.launch_events(step_trace):
        c = _launch_cluster(tr.launch_node(e), functions)
        rec = out.setdefault(c, {"launches": 0, "time_us": 0.0})
        rec["launches"] += 1
        rec["time_us"] += float(e.get("dur", 0.0))
    return out


def tf_clusters(graphs: list[dict], labels_of: dict[int, dict], ops_of: dict[int, dict]) -> list[dict]:
    """TF's clusters, graph by graph: ``graphs`` are a harvest index's graph records,
    ``labels_of[id]`` node -> cluster of that graph's mark dump, ``ops_of[id]`` node -> op."""
    out = []
    for g in graphs:
        labels = labels_of.get(g["id"], {})
        for cname in g.get("clusters", {}):
            members = sorted(n for n, c in labels.items() if c == cname)
            hist: dict[str, int] = {}
            for n in members:
                op = ops_of.get(g["id"], {}).get(n, "?")
                hist[op] = hist.get(op, 0) + 1
            out.append({"cluster": cname, "graph": g["id"], "nodes": len(members),
                        "tf_ops": dict(sorted(hist.items(), key=lambda kv: (-kv[1], kv[0])))})
    return out


def link_clusters(clusters: list[dict], prediction: dict[int, dict], modules: list[dict],
                  times: dict[str, dict], traced_modules: set[str]) -> list[dict]:
    """Join TF's clusters (:func:`tf_clusters`) with jitsim's prediction (graph id -> the
    graph's ``PartitionDiff.to_dict()``), the HLO module records (:func:`.hlo.export_modules`),
    the per-cluster launch times (:func:`cluster_times`) and the HLO module names the step's
    trace shows."""
    rows = []
    for c in clusters:
        diff = prediction.get(c["graph"])
        pred = match = None
        if diff is not None:
            pred = diff["cluster_map"].get(c["cluster"])
            m = next((m for m in diff.get("clusters", []) if m["truth"] == c["cluster"]), None)
            if m is not None:
                exact = m["predicted"] is not None and m["truth_size"] == m["predicted_size"] == m["overlap"]
                match = "exact" if exact else ("partial" if m["predicted"] else "missed")
        mods = [m for m in modules if m["cluster"] == c["cluster"]]
        ran = [m for m in mods if m["module"] in traced_modules]
        mod = (ran or mods or [None])[-1]
        t = times.get(c["cluster"], {"launches": 0, "time_us": 0.0})
        rows.append({
            **c,
            "predicted_cluster": pred,
            "prediction": match if diff is not None else "not predicted",
            "hlo_module": None if mod is None else mod["module"],
            "hlo_modules": [m["module"] for m in mods],
            "hlo_files": {} if mod is None else mod["files"],
            "fusions": None if mod is None else mod["fusions"],
            "launches_per_step": t["launches"],
            "time_per_step_us": round(t["time_us"], 3),
        })
    return rows


def build_summary(*, target: str, kind: str, device: str, steps: int, warmup: int, flags: dict,
                  timing: dict, traces: dict, warmup_trace_on: dict, clusters: list[dict],
                  modules: list[dict], prediction: dict | None, tf_version: str | None,
                  notes: list[str], xspace: dict | None = None) -> dict:
    """The whole ``summary.json``. ``timing``/``traces``: ``{"off": ..., "on": ...}`` (the
    child's timing.json, the profiled step's trace); ``xspace``: run -> the XSpace files kept
    (:func:`jitsim.profile.command.keep_xspace`)."""
    from jitsim.flags import effective_flags

    stats = {k: step_stats(timing[k]["steps_s"]) for k in ("off", "on")}
    counts = {k: tr.step_counts(traces[k]) for k in ("off", "on")}
    off_m, on_m = stats["off"]["median_s"], stats["on"]["median_s"]
    compile_events = tr.compile_events(warmup_trace_on)
    return {
        "schema": SCHEMA,
        "target": target,
        "kind": kind,
        "tf_version": tf_version,
        "device": device,
        "steps": steps,
        "warmup": warmup,
        "tf_xla_flags": flags,
        "tf_xla_flags_effective": {k: effective_flags(v) for k, v in flags.items()},
        "step_time": stats,
        "step_time_ratio": (off_m / on_m) if off_m and on_m else None,
        "first_step_s": {k: timing[k]["warmup_s"][0] for k in ("off", "on")},
        "compile_s": tr.duration_s(compile_events),
        "compilations": len(modules),
        "xla_compile_calls": len(compile_events),
        "tf_ops_per_step": {k: counts[k]["tf_ops"] for k in ("off", "on")},
        "xla_launches_per_step": {k: counts[k]["xla_launches"] for k in ("off", "on")},
        "op_types_per_step": {k: counts[k]["op_types"] for k in ("off", "on")},
        "traces": {"off": "trace_xla_off.json", "on": "trace_xla_on.json"},
        "timelines": {"off": "timeline_xla_off.svg", "on": "timeline_xla_on.svg"},
        "xspace": xspace or {},
        "clusters": clusters,
        "hlo_modules": modules,
        "prediction": prediction,
        "notes": notes,
    }


def prediction_by_graph(compare_dict: dict) -> dict[int, dict]:
    """graph id -> PartitionDiff dict, from ``CompareResult.to_dict()`` (rows named
    ``graph <id> (<file>)``)."""
    out = {}
    for g in compare_dict.get("graphs", []):
        m = re.match(r"^graph (\d+) ", g["name"])
        if m and g.get("diff") is not None:
            out[int(m.group(1))] = g["diff"]
    return out


def read_launch_functions(path: Path) -> dict[str, str]:
    """:func:`launch_functions` of a ``build_xla_ops`` dump file."""
    return launch_functions(read_graphdef(path))


def read_labels_and_ops(path: Path) -> tuple[dict, dict]:
    """node -> ``_XlaCluster`` and node -> op of a TF dump."""
    gd = read_graphdef(path)
    return labels_of_graphdef(gd), {n.name: n.op for n in gd.node}
