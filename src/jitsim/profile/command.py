"""``jitsim profile TARGET -o DIR``: the whole command (see docs/cli.md).

Runs the two TF runs (:mod:`.runner`), converts their profiles (:mod:`.trace`), draws them
(:mod:`.timeline`), collects and draws XLA's HLO (:mod:`.hlo`), predicts the clusters with
jitsim and links everything (:mod:`.link`), and writes the page (:mod:`.page`). ``DIR`` is
assembled under a temporary name beside it and renamed at the end: a failure leaves no
partial directory. Layout::

    summary.json  index.html
    trace_xla_off.json  trace_xla_on.json     one profiled step each (Chrome Trace Event JSON)
    trace_xla_on_warmup.json                  the warm-up steps with XLA on (compilation)
    timeline_xla_off.svg  timeline_xla_on.svg the two traces drawn
    hlo/        module_NNNN.<cluster>.{before,after}_optimizations.{txt,svg}
    tf_off/ tf_on/   each run's harvest: TF's graph dumps, log.txt, index.json
    plugins/profile/xla_off/<host>.xplane.pb  TF's own profiles (XSpace) in the layout xprof and
    plugins/profile/xla_on/<host>.xplane.pb   TensorBoard's profile plugin read: `xprof --logdir DIR`
    plugins/profile/xla_on_warmup/<host>.xplane.pb
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from jitsim.crosscheck.fidelity import verify_dir
from jitsim.tfprocess.harvest import DEFAULT_FLAGS, checked_target_and_output
from jitsim.errors import JitsimError
from jitsim.flags import parse_tf_xla_flags
from jitsim.options import options_for
from jitsim.profile import hlo, link, page, runner, timeline
from jitsim.profile import trace as tr
from jitsim.defs import BUILD_XLA_OPS_DUMP, MARK_DUMP

DEVICES = ("cpu", "gpu")


def profile(target: Path | str, out: Path | str, *, steps: int = 20, warmup: int = 5, flags: str = DEFAULT_FLAGS,
            device: str = "cpu", signature: str | None = None, timeout: float = 600.0, overwrite: bool = False,
            progress=None, input_shapes=()) -> dict:
    """Profile ``target`` with auto-clustering off and on; write ``out/`` and return the summary.
    ``input_shapes``: a ``.keras`` file's call (``--input-shape``; unknown dims not given are 2)."""
    target = Path(target).resolve()
    out = Path(out).resolve()
    if steps < 1:
        raise JitsimError(f"--steps {steps}: give 1 or more")
    if warmup < 1:
        raise JitsimError(f"--warmup {warmup}: give 1 or more (XLA compiles during the warm-up)")
    if device not in DEVICES:
        raise JitsimError(f"--device {device!r}: use cpu or gpu")
    on_flags = flags
    parse_tf_xla_flags(on_flags)  # a bad flag is refused now, not after starting TF
    kind, work = checked_target_and_output(target, out, signature, overwrite)
    scratch = Path(tempfile.mkdtemp(prefix="jitsim-profile-"))
    try:
        runs = {}
        for label, fl in (("off", runner.off_flags(on_flags)), ("on", on_flags)):
            def run_progress(elapsed, ndumps, label=label):
                if progress:
                    progress(f"running {target.name} with XLA {label}: {elapsed:5.1f} s")
            runs[label] = runner.run_workload(target, scratch, label, fl, steps=steps, warmup=warmup,
                                              device=device, signature=signature, timeout=timeout,
                                              progress=run_progress, input_shapes=input_shapes)
        if progress:
            progress("converting the profiles, drawing HLO, predicting")
        summary, mismatches = _assemble(target, kind, device, steps, warmup, runs, work)
        (work / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
        (work / "index.html").write_text(page.render_page(summary, mismatches))
        if out.exists():
            shutil.rmtree(out)
        os.replace(work, out)
        return summary
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
        if work.exists():
            shutil.rmtree(work, ignore_errors=True)


def _assemble(target: Path, kind: str, device: str, steps: int, warmup: int, runs: dict, work: Path):
    traces = {}
    for label, r in runs.items():
        traces[label] = tr.xspace_to_trace(r.raw / "step")
        (work / f"trace_xla_{label}.json").write_text(json.dumps(traces[label]))
        (work / f"timeline_xla_{label}.svg").write_text(
            timeline.timeline_svg(traces[label], f"{target.name}: one step, XLA {label}"))
    warm_on = tr.xspace_to_trace(runs["on"].raw / "warmup")
    (work / "trace_xla_on_warmup.json").write_text(json.dumps(warm_on))
    for label, r in runs.items():
        shutil.copytree(r.harvest, work / f"tf_{label}")
    xspace = {"off": keep_xspace(runs["off"].raw / "step", work, "xla_off"),
              "on": keep_xspace(runs["on"].raw / "step", work, "xla_on"),
              "on_warmup": keep_xspace(runs["on"].raw / "warmup", work, "xla_on_warmup")}
    on_dir = work / "tf_on"
    modules = hlo.export_modules(hlo.collect_modules(runs["on"].xla_dump), work / "hlo")

    notes: list[str] = []
    prediction = mismatches = None
    try:
        result = verify_dir(on_dir, options_for(runs["on"].flags))
        prediction = result.to_dict()
        mismatches = result.format_text(limit=50)
    except JitsimError as e:
        notes.append(f"jitsim could not predict the clusters: {e}")
    index = runs["on"].index
    labels_of, ops_of = {}, {}
    functions: dict[str, str] = {}
    for g in index["graphs"]:
        mark = g["files"].get(MARK_DUMP)
        if mark and g.get("clusters"):
            labels_of[g["id"]], ops_of[g["id"]] = link.read_labels_and_ops(on_dir / "dumps" / mark)
        bxo = g["files"].get(BUILD_XLA_OPS_DUMP)
        if bxo and g.get("clusters"):
            functions.update(link.read_launch_functions(on_dir / "dumps" / bxo))
    clusters = link.link_clusters(link.tf_clusters(index["graphs"], labels_of, ops_of),
                                  link.prediction_by_graph(prediction or {}), modules,
                                  link.cluster_times(traces["on"], functions), tr.hlo_modules(traces["on"]))
    if not clusters:
        notes.append("TF compiled no auto-clustered cluster in this workload")
    for c in clusters:
        if c["launches_per_step"] == 0:
            notes.append(f"{c['cluster']}: not launched in the profiled step")
    summary = link.build_summary(
        target=str(target), kind=kind, device=device, steps=steps, warmup=warmup,
        flags={k: r.flags for k, r in runs.items()}, timing={k: r.timing for k, r in runs.items()},
        traces=traces, warmup_trace_on=warm_on, clusters=clusters, modules=modules, prediction=prediction,
        tf_version=index.get("tf_version"), notes=notes, xspace=xspace)
    return summary, mismatches


def keep_xspace(logdir: Path, work: Path, run: str) -> list[str]:
    """Copy the XSpace files TF's profiler wrote under ``logdir`` (``plugins/profile/<timestamp>/
    <host>.xplane.pb``) to ``work/plugins/profile/<run>/``, the layout xprof and TensorBoard's
    profile plugin read (one session per run, named after the run); their paths relative to ``work``."""
    dest = work / "plugins" / "profile" / run
    dest.mkdir(parents=True, exist_ok=True)
    kept = []
    for f in tr.xplane_files(logdir):
        shutil.copyfile(f, dest / f.name)
        kept.append((dest / f.name).relative_to(work).as_posix())
    return sorted(kept)
