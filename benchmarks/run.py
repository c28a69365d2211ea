#!/usr/bin/env python3
"""jitsim's speed and memory on real and generated graphs of 50 to 1M nodes (issue 14).

    python benchmarks/run.py --prepare             # harvest the issue's programs with TF (once)
    python benchmarks/run.py                       # every case up to 100k nodes
    python benchmarks/run.py --sizes 1k,10k,100k,1M  # generated sizes to include (1M is opt-in)
    python benchmarks/run.py --rerun-tf            # measure TF's pass again now (same machine)
    python benchmarks/run.py --quick               # CI-sized smoke run (tiny graphs, 1 repeat)
    python benchmarks/run.py --cases resnet50 --profile   # cProfile of one case's passes

Cases: the fixtures corpus's largest graphs, the issue's graphs (harvested from
``benchmarks/programs/`` by ``--prepare``; the ResNet-50 one falls back to the identical fixture
graph), real graphs tiled K times (``generate.tile``) and generated layered graphs
(``generate.layered``). Generated graphs and harvests live in the cache directory
(``$JITSIM_BENCH_CACHE``, default ``out/bench/``, git-ignored); only ``benchmarks/baseline.json``
(TF's times and node counts from the last ``--prepare``) is committed.

Per case, two kinds of figure:

* in-process, in a fresh Python process: parse (protobuf), model (``Graph``), each pass of
  ``cluster_graph``/``run_later_passes`` (``Options.timings``), write (``mark_for_compilation`` graph to
  text), and peak RSS;
* whole process: wall time and peak RSS of ``jitsim cluster G -o OUT.pbtxt`` and
  ``jitsim rewrite G --until build-xla-ops -o OUT.pbtxt`` as a user runs them (start-up
  included). ``PYTHONDONTWRITEBYTECODE`` is unset for these and one untimed run comes first,
  so modules load from ``.pyc`` files as in an installed package.

The TF figure is ``MarkForCompilationPassImpl::Run`` as TF logs it, measured in the same
benchmark run on the same machine (``--tf-runs``, default 3, median kept; each TF run just before
one of the timed ``jitsim cluster`` runs of the same graph, so that both sides see the same
minutes of the machine) by running each issue program with only the logging that prints that line (``TF_CPP_VMODULE=mark_for_compilation_pass=1``)
and **no dump flags**: with ``TF_DUMP_GRAPH_PREFIX`` and ``--tf_xla_clustering_debug`` TF writes
its dumps inside the timed region (0.56 s becomes 0.9-1.0 s on the ResNet-50 step). The harvests
(``--prepare``), which do dump, give jitsim its input graphs; their pass times are kept in
baseline.json for reference only. ``ratio`` = whole-process ``jitsim cluster`` wall / TF's
no-dump pass time; fixture cases show their recorded (dumping, other machine) time and no ratio. Results go to
``benchmarks/results/<name>.json`` with the machine (cpu, nproc, load average before and after).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
HERE = Path(__file__).resolve().parent
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import generate  # noqa: E402

SCHEMA = "jitsim.bench/1"
BEFORE_CLONE = "before_clone_constants_for_better_clustering"
BEFORE_MARK = "before_mark_for_compilation"
BASELINE = HERE / "baseline.json"
PROGRAMS = HERE / "programs"
# the issue's graphs: harvested program -> the dump the issue measured
ISSUE_PROGRAMS = {
    "resnet50_train": BEFORE_MARK,       # 12,620 nodes
    "deep_mlp_train": BEFORE_CLONE,      # 25,866 nodes
    "efficientnetb0_inference": BEFORE_CLONE,
}
FIXTURE_RUNS = ["resnet101_train_nograppler", "resnet50_train_adam", "mobilenetv2_inference"]
SIZES = {"1k": 1_000, "10k": 10_000, "100k": 100_000, "1M": 1_000_000}
DEFAULT_SIZES = "1k,10k,100k"
RESNET50_NODES = 12_620
FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"


def cache_dir() -> Path:
    return Path(os.environ.get("JITSIM_BENCH_CACHE") or ROOT / "out" / "bench")


# -- cases ----------------------------------------------------------------------------------

@dataclass
class Case:
    name: str
    kind: str            # fixture | issue | tiled | layered | small
    path: Path | None = None
    make: object = None  # () -> GraphDef, for generated graphs not yet in the cache
    tf_pass_s: float | None = None
    tf_source: str | None = None
    tf_fair: bool = False  # tf_pass_s measured without dump flags, in this run (a ratio is shown)
    tf_runs: list | None = None
    # (program, runs, timeout, harvest dir, stage): TF's no-dump runs to make in measure()
    tf_program: tuple | None = None
    note: str = ""
    commands: bool = False  # also time explain / whatif / diff / render / report

    def ensure(self) -> Path:
        if not self.path.exists():
            from jitsim.graph.io import save

            self.path.parent.mkdir(parents=True, exist_ok=True)
            save(self.make(), self.path)
        return self.path


def _largest(index: dict, stage: str) -> dict:
    return max((g for g in index["graphs"] if stage in g["files"]), key=lambda g: g["nodes"])


def load_baseline() -> dict:
    return json.loads(BASELINE.read_text()) if BASELINE.exists() else {"programs": {}}


def _fixture_graph(corpus, run: str, stage: str) -> tuple[Path, dict]:
    root = corpus.extract(run)
    g = _largest(corpus.index(run), stage)
    return root / "dumps" / g["files"][stage], g


def build_cases(sizes: list[str], *, quick: bool, corpus, measured_tf: dict | None = None,
                tf_runs: int = 0, timeout: float = 3600, keep=lambda name: True) -> list[Case]:
    """Every case of a run (graphs generated lazily: :meth:`Case.ensure`)."""
    from jitsim.graph.io import read_graphdef

    cache = cache_dir()
    cases: list[Case] = []
    if quick:
        small, gsmall = _fixture_graph(corpus, "mlp_train_sgd", BEFORE_CLONE)
        cases.append(Case("fixture:mlp_train_sgd", "fixture", small, tf_pass_s=gsmall["mark_pass_us"] / 1e6,
                          tf_source="fixture harvest (recorded elsewhere)"))
        for k in (2, 4):
            cases.append(Case(f"tiled:{k}x mlp_train_sgd", "tiled", cache / "quick" / f"tile{k}_mlp_train_sgd.pbtxt",
                              make=lambda k=k: generate.tile(read_graphdef(small), k), commands=k == 2))
        for n in (200, 1000):
            cases.append(Case(f"layered:{n}", "layered", cache / "quick" / f"layered_{n}.pbtxt",
                              make=lambda n=n: generate.layered(n, width=4)))
        return cases

    cases.append(Case("small:mnist_softmax", "small", ROOT / "examples" / "mnist_softmax" / f"{BEFORE_CLONE}.pbtxt",
                      note="the issue's 50-node graph"))
    for run in FIXTURE_RUNS:
        path, g = _fixture_graph(corpus, run, BEFORE_CLONE)
        cases.append(Case(f"fixture:{run}", "fixture", path, tf_pass_s=g["mark_pass_us"] / 1e6,
                          tf_source="fixture harvest (recorded elsewhere, with dump flags)"))
    base = load_baseline()["programs"]
    resnet_mark = None
    for prog, stage in ISSUE_PROGRAMS.items():
        harvest_dir = cache / "tf" / prog
        rec = (measured_tf or {}).get(prog) or base.get(prog)
        if (harvest_dir / "index.json").exists():
            g = _largest(json.loads((harvest_dir / "index.json").read_text()), stage)
            path = harvest_dir / "dumps" / g["files"][stage]
            src = "measured now (--rerun-tf)" if measured_tf and prog in measured_tf else \
                f"harvest on this machine ({rec['date'] if rec else '?'})"
        elif prog == "resnet50_train":
            path, _ = _fixture_graph(corpus, "resnet50_train_adam", stage)
            src = "baseline.json (harvest on the benchmark machine)"
        else:
            print(f"skipping issue:{prog}: not harvested (run with --prepare)", file=sys.stderr)
            continue
        if prog == "resnet50_train":
            resnet_mark = path
        case = Case(f"issue:{prog}", "issue", path, note=stage, commands=prog == "resnet50_train")
        if tf_runs and keep(case.name):  # TF's runs are made by measure(), between jitsim's
            case.tf_program = (prog, tf_runs, timeout, harvest_dir, stage)
        if case.tf_pass_s is None and rec:  # (until measure() has TF's own figure)
            case.tf_pass_s = rec["tf_pass_s"]
            case.tf_source = src + ", with dump flags (inside TF's timed region)"
        cases.append(case)
    for label in sizes:
        n = SIZES[label]
        cases.append(Case(f"layered:{label}", "layered", cache / "graphs" / f"layered_{label}.{_ext(n)}",
                          make=lambda n=n: generate.layered(n, width=16)))
        k = max(1, round(n / RESNET50_NODES))
        if n >= 100_000 and resnet_mark is not None:
            cases.append(Case(f"tiled:{k}x resnet50_train", "tiled",
                              cache / "graphs" / f"tile{k}_resnet50_train.{_ext(n)}",
                              make=lambda k=k, p=resnet_mark: generate.tile(read_graphdef(p), k),
                              note=f"{k} copies of the {BEFORE_MARK} dump"))
    return cases


def _ext(n: int) -> str:
    # TF dumps are text; at 1M nodes the text file is ~1 GB, so the 1M graphs are binary
    return "pb" if n >= 1_000_000 else "pbtxt"


# -- measuring ------------------------------------------------------------------------------

_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
def hwm():  # this process's own peak RSS (VmHWM: the mm made by exec, nothing of the parent's)
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
import gc
gc.disable()  # as `jitsim cluster` runs (jitsim.cli.GC_OFF_COMMANDS)
from jitsim.graph.io import read_graphdef, to_text, write_atomic
from jitsim.graph.model import Graph
from dataclasses import replace
from jitsim.options import options_for
from jitsim.passes import pipeline
t_import = time.perf_counter() - t0
path, flags_text, out = sys.argv[1], sys.argv[2], sys.argv[3]
t = time.perf_counter(); gd = read_graphdef(path); parse = time.perf_counter() - t
t = time.perf_counter(); g = Graph(gd, source=path, validate=False); model = time.perf_counter() - t
timings = {}
options = options_for(flags_text, timings=timings)
t = time.perf_counter(); cr = pipeline.cluster_graph(g, options); cluster = time.perf_counter() - t
t = time.perf_counter(); write_atomic(out, to_text(cr.to_graphdef()).encode()); write = time.perf_counter() - t
rss_cluster = hwm()
later = {}
res = pipeline.PipelineResult(cr, cr.graph, pipeline.MARK)
t = time.perf_counter()
pipeline.run_later_passes(res, replace(options, until=pipeline.BUILD_XLA_OPS, timings=later))
later_s = time.perf_counter() - t
print(json.dumps({"nodes": len(gd.node), "nodes_marked": sum(1 for _ in cr.graph.op_nodes()),
                  "clusters": len(cr.clusters), "stage": cr.input_stage, "import_s": t_import, "parse_s": parse,
                  "model_s": model, "passes": timings, "cluster_s": cluster, "write_s": write,
                  "later_passes": later, "later_s": later_s, "peak_rss_cluster_mb": rss_cluster,
                  "peak_rss_mb": hwm()}))
"""


def _env(parse_cache: str = "off") -> dict:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed jitsim has .pyc files
    # every figure parses the text itself unless a cache directory is given (cached runs)
    env["JITSIM_PARSE_CACHE"] = parse_cache
    env["PYTHONPATH"] = str(ROOT / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def whole_process(cmd: list[str], repeat: int, timeout: float, *, parse_cache: str = "off",
                  ok_codes=(0,)) -> dict:
    """``repeat`` runs of ``cmd``: min and median wall time, peak RSS (max over runs)."""
    walls, rss = [], 0.0
    for _ in range(repeat):
        r = _run_wait4(cmd, timeout, parse_cache=parse_cache, ok_codes=ok_codes)
        walls.append(r["wall_s"])
        rss = max(rss, r["peak_rss_mb"])
    return _runs_summary(walls, rss)


def _runs_summary(walls: list[float], peak_rss_mb: float) -> dict:
    return {"wall_s": min(walls), "wall_s_median": statistics.median(walls), "runs": len(walls),
            "peak_rss_mb": peak_rss_mb}


def cluster_beside_tf(case: Case, cluster_cmd: list[str], repeat: int, timeout: float) -> dict:
    """:func:`whole_process` of ``cluster_cmd`` with TF's no-dump pass runs of ``case``'s program
    in between (a TF run, then a ``cluster`` run, and so on): the ratio's two sides measured
    over the same minutes, so that the machine's drift (10-20 % within minutes on the 2-CPU
    development VM) falls on both. Sets ``case``'s TF figure (the median of its runs), or
    leaves the recorded one where TF cannot run here."""
    prog, tf_runs, tf_timeout, harvest_dir, stage = case.tf_program
    walls, rss, tf_times, version = [], 0.0, [], None
    for i in range(max(repeat, tf_runs)):
        if i < tf_runs and tf_times is not None:
            t = tf_pass_nodump(prog, 1, tf_timeout, harvest_dir, stage)
            if t is None:
                tf_times = None  # (said why already: no ratio for this case)
            else:
                tf_times += t["runs_s"]
                version = t["tf_version"]
        if i < repeat:
            r = _run_wait4(cluster_cmd, timeout)
            walls.append(r["wall_s"])
            rss = max(rss, r["peak_rss_mb"])
    if tf_times:
        case.tf_pass_s, case.tf_runs, case.tf_fair = statistics.median(tf_times), tf_times, True
        case.tf_source = (f"TF {version or '?'}, no dump flags, median of {len(tf_times)} runs in this benchmark run, "
                          f"each just before one of the timed `cluster` runs ({', '.join(f'{x:.3f}' for x in tf_times)} s)")
    return _runs_summary(walls, rss)


# Linux's ru_maxrss of a child started with vfork (Python's subprocess does) starts at the
# parent's high-water mark, so the runner's own size would leak into the figure. GNU time
# forks the measured command from its own small process; without it, a peak below the
# runner's own is unmeasurable and reported as such.
TIME = "/usr/bin/time" if Path("/usr/bin/time").exists() else None


def _run_wait4(cmd: list[str], timeout: float, *, parse_cache: str = "off", ok_codes=(0,)) -> dict:
    t0 = time.perf_counter()
    rss_file = tempfile.NamedTemporaryFile(prefix="jitsim-bench-rss-", delete=False)
    rss_file.close()
    try:
        if TIME:
            cmd = [TIME, "-f", "%M", "-o", rss_file.name, *cmd]
        with tempfile.TemporaryFile() as errf:
            p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=errf, env=_env(parse_cache), cwd=ROOT)
            deadline = t0 + timeout
            while True:
                pid, status, ru = os.wait4(p.pid, os.WNOHANG)
                if pid:
                    break
                if time.perf_counter() > deadline:
                    p.kill()
                    os.wait4(p.pid, 0)
                    raise TimeoutError(f"{' '.join(cmd)}: over {timeout:.0f} s")
                time.sleep(0.005)
            wall = time.perf_counter() - t0
            p.returncode = os.waitstatus_to_exitcode(status)
            if p.returncode not in ok_codes:
                errf.seek(0)
                raise RuntimeError(f"{' '.join(cmd)} failed ({p.returncode}): {errf.read().decode()[-2000:]}")
        rss_kb = ru.ru_maxrss
        if TIME:
            rss_kb = int(Path(rss_file.name).read_text().split()[-1])
    finally:
        os.unlink(rss_file.name)
    return {"wall_s": wall, "peak_rss_mb": rss_kb / 1024}


def in_process(path: Path, repeat: int, timeout: float, out_dir: Path) -> dict:
    """The phase times of the fastest of ``repeat`` fresh processes (peak RSS: the max)."""
    runs = []
    for _ in range(repeat):
        cmd = [sys.executable, "-c", _CHILD, str(path), FLAGS, str(out_dir / "inproc.pbtxt")]
        p = subprocess.run(cmd, capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=timeout)
        if p.returncode:
            raise RuntimeError(f"in-process measurement of {path} failed: {p.stderr[-2000:]}")
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    best = min(runs, key=lambda r: r["parse_s"] + r["model_s"] + r["cluster_s"] + r["write_s"])
    best["peak_rss_mb"] = max(r["peak_rss_mb"] for r in runs)
    best["total_s"] = best["parse_s"] + best["model_s"] + best["cluster_s"] + best["write_s"]
    return best


def measure(case: Case, repeat: int, timeout: float) -> dict:
    path = case.ensure()
    nodes_hint = path.stat().st_size
    rep = 1 if nodes_hint > 100e6 else repeat  # the biggest files: one run of each
    if nodes_hint < 2e6:  # graphs that take a second or less: a busy moment is a large error
        rep = max(rep, 5)
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="jitsim-bench-") as tmp:
        tmp = Path(tmp)
        ip = in_process(path, rep, timeout, tmp)
        cluster_cmd = [py, "-m", "jitsim.cli", "cluster", str(path), "--tf-xla-flags", FLAGS,
                       "-o", str(tmp / "cluster.pbtxt")]
        rewrite_cmd = [py, "-m", "jitsim.cli", "rewrite", str(path), "--tf-xla-flags", FLAGS,
                       "--until", "build-xla-ops", "-o", str(tmp / "rewrite.pbtxt")]
        if rep > 1:  # untimed: writes the .pyc files, warms the page cache
            _run_wait4(cluster_cmd, timeout)
        cl = cluster_beside_tf(case, cluster_cmd, rep, timeout) if case.tf_program else \
            whole_process(cluster_cmd, rep, timeout)
        rw = whole_process(rewrite_cmd, rep, timeout)
        # a second read of the same text file: served by the parsed-text cache (after one
        # untimed run that fills it)
        cache = str(tmp / "parse-cache")
        _run_wait4(cluster_cmd, timeout, parse_cache=cache)
        cl_cached = whole_process(cluster_cmd, rep, timeout, parse_cache=cache)
        commands = measure_commands(path, rep, timeout, tmp) if case.commands else None
    row = {"case": case.name, "kind": case.kind, "file": _rel(path), "file_mb": round(path.stat().st_size / 2**20, 2),
           "note": case.note, "nodes": ip["nodes"], "nodes_marked": ip["nodes_marked"], "clusters": ip["clusters"],
           "input_stage": ip["stage"], "import_s": ip["import_s"], "parse_s": ip["parse_s"],
           "model_s": ip["model_s"], "passes": ip["passes"], "cluster_s": ip["cluster_s"], "write_s": ip["write_s"],
           "total_s": ip["total_s"], "later_passes": ip["later_passes"], "later_s": ip["later_s"],
           "peak_rss_inprocess_mb": ip["peak_rss_mb"],
           "cluster_cmd": cl, "rewrite_cmd": rw, "cluster_cmd_cached": cl_cached, "commands": commands,
           "rewrite_over_cluster": rw["wall_s"] / cl["wall_s"],
           "tf_pass_s": case.tf_pass_s, "tf_source": case.tf_source, "tf_fair": case.tf_fair,
           "tf_runs_s": case.tf_runs,
           # jitsim over TF only where TF's time was taken without dump flags, in this run
           "ratio_vs_tf": cl["wall_s"] / case.tf_pass_s if case.tf_pass_s and case.tf_fair else None,
           "inprocess_ratio_vs_tf": ip["total_s"] / case.tf_pass_s if case.tf_pass_s and case.tf_fair else None}
    return row


def _some_node(path: Path) -> str:
    """A clustered compute node of the graph, for ``explain`` (the first Conv2D, else MatMul)."""
    from jitsim.graph.io import read_graphdef

    gd = read_graphdef(path)
    for op in ("Conv2D", "MatMul", "AddV2"):
        for n in gd.node:
            if n.op == op:
                return n.name
    return gd.node[len(gd.node) // 2].name


def measure_commands(path: Path, repeat: int, timeout: float, tmp: Path) -> dict:
    """Whole-process wall time of the other commands a user runs on the graph (issue 14:
    explain, whatif, diff in a few seconds; render/report bounded), parse cache off."""
    py = sys.executable
    node = _some_node(path)
    cli = [py, "-m", "jitsim.cli"]
    cmds = {
        "explain": cli + ["explain", str(path), node],
        "whatif": cli + ["whatif", str(path), "--tf-xla-flags=--tf_xla_min_cluster_size=10"],
        "diff": cli + ["diff", str(path), str(path), "--b-tf-xla-flags=--tf_xla_min_cluster_size=10"],
        # SVG needs graphviz's dot program; without it the DOT source (still the whole layout input)
        "render": cli + ["render", str(path), "-o", str(tmp / ("clusters.svg" if shutil.which("dot") else "clusters.dot"))],
        "report": cli + ["report", str(path), "-o", str(tmp / "report")],
    }
    # diff exits 1 when the clusters differ: a result like 0
    out = {name: whole_process(cmd, repeat, timeout, ok_codes=(0, 1) if name == "diff" else (0,))
           for name, cmd in cmds.items()}
    out["explain"]["node"] = node
    return out


def _rel(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


# -- TF baseline ----------------------------------------------------------------------------

# the line TF 2.21's MarkForCompilationPassImpl::Run logs at VLOG level 1, once per graph
_RUN_TIME = re.compile(r"MarkForCompilationPassImpl::Run time: ([0-9.]+) ?(ns|us|ms|s|min)\b")
_UNIT_S = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "min": 60.0}


def tf_nodump_env() -> dict:
    """The environment of a timing run: the issue's JIT flags, and of TF's logging only the
    module that prints the pass time; no dump directory, no ``--tf_xla_clustering_debug``."""
    env = dict(os.environ)
    for k in ("TF_DUMP_GRAPH_PREFIX", "TF_CPP_VMODULE", "TF_CPP_MAX_VLOG_LEVEL", "XLA_FLAGS"):
        env.pop(k, None)
    env.update(TF_XLA_FLAGS=FLAGS, TF_CPP_VMODULE="mark_for_compilation_pass=1", TF_CPP_MIN_LOG_LEVEL="0",
               PYTHONHASHSEED="0", CUDA_VISIBLE_DEVICES="-1")
    return env


def _graph_ordinal(harvest_dir: Path, stage: str) -> tuple[int, int] | None:
    """(position of the benchmarked graph among the graphs TF logged a pass time for, their
    number) in the dumping harvest; TF runs the same graphs in the same order without dumps."""
    idx_file = harvest_dir / "index.json"
    if not idx_file.exists():
        return None
    graphs = [g for g in json.loads(idx_file.read_text())["graphs"] if g.get("mark_pass_us") is not None]
    target = _largest({"graphs": [g for g in graphs if stage in g["files"]]}, stage) if graphs else None
    return (graphs.index(target), len(graphs)) if target else None


def tf_pass_nodump(prog: str, runs: int, timeout: float, harvest_dir: Path, stage: str) -> dict | None:
    """TF's own pass time for the program's benchmarked graph, without dump flags: ``runs``
    fresh processes (niced: the machine is shared), the median kept. The graph is the one at
    the harvest's position in TF's sequence of pass runs, else the slowest pass of the run."""
    import importlib.util

    if importlib.util.find_spec("tensorflow") is None:
        print(f"issue:{prog}: TensorFlow not installed: no TF pass time measured", file=sys.stderr)
        return None
    where = _graph_ordinal(harvest_dir, stage)
    times, version = [], None
    for i in range(runs):
        print(f"  TF pass of {prog}, no dump flags, run {i + 1}/{runs} ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="jitsim-bench-tf-") as tmp:
            p = subprocess.run(["nice", "-n", "10", sys.executable, str(PROGRAMS / f"{prog}.py")],
                               capture_output=True, text=True, env=tf_nodump_env(), cwd=tmp, timeout=timeout)
        if p.returncode:
            print(f"issue:{prog}: TF run failed ({p.returncode}): {p.stderr[-500:]}", file=sys.stderr)
            return None
        log = p.stdout + p.stderr
        if "Dumped Graph to" in log or "Dumped FunctionDef to" in log:
            raise RuntimeError(f"{prog}: TF dumped graphs in a run meant to be without dump flags")
        found = [float(m.group(1)) * _UNIT_S[m.group(2)] for m in _RUN_TIME.finditer(log)]
        if not found:
            print(f"issue:{prog}: TF logged no pass time", file=sys.stderr)
            return None
        times.append(found[where[0]] if where and len(found) == where[1] else max(found))
    try:
        from importlib.metadata import version as dist_version

        version = dist_version("tensorflow")
    except Exception:
        pass
    return {"median_s": statistics.median(times), "runs_s": times, "tf_version": version,
            "picked": "harvest position" if where else "slowest pass"}


def prepare(programs: list[str], *, rerun: bool, timeout: float) -> dict:
    """Harvest the issue's programs with real TF (once; ``rerun``: again) into the cache and
    record TF's pass time and node counts in baseline.json. Returns the measured programs."""
    from jitsim.tfprocess.harvest import harvest
    from jitsim.graph.io import read_graphdef

    base = load_baseline()
    measured = {}
    recorded = False
    for prog in programs:
        out = cache_dir() / "tf" / prog
        fresh = not (out / "index.json").exists() or rerun
        if fresh:
            print(f"harvesting {prog} with TF ...", file=sys.stderr, flush=True)
            t = time.perf_counter()
            idx = harvest(PROGRAMS / f"{prog}.py", out, timeout=timeout, overwrite=True)
            took = round(time.perf_counter() - t, 1)
        elif prog not in base["programs"]:  # harvested earlier, not yet recorded
            idx = json.loads((out / "index.json").read_text())
            took = None
        else:
            continue
        stage = ISSUE_PROGRAMS[prog]
        g = _largest(idx, stage)
        nodes = {st: len(read_graphdef(out / "dumps" / g["files"][st]).node)
                 for st in (BEFORE_CLONE, BEFORE_MARK) if st in g["files"]}
        date = datetime.date.fromtimestamp((out / "index.json").stat().st_mtime).isoformat()
        rec = {"tf_pass_s": g["mark_pass_us"] / 1e6, "nodes": nodes, "input_stage": stage,
               "tf_clusters": len(g.get("clusters") or {}), "harvest_s": took, "date": date,
               "machine": machine_brief(), "loadavg": os.getloadavg() if fresh else None}
        base["programs"][prog] = rec
        if fresh:
            measured[prog] = rec
        recorded = True
    if recorded:
        base["note"] = ("TF's MarkForCompilationPassImpl::Run time (TF 2.21 CPU, its own log) on the largest graph "
                        "of each benchmark program, from benchmarks/run.py --prepare / --rerun-tf")
        BASELINE.write_text(json.dumps(base, indent=1, sort_keys=True) + "\n")
    return measured


# -- machine --------------------------------------------------------------------------------

def machine_brief() -> dict:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "nproc": os.cpu_count(), "sched_cpus": len(os.sched_getaffinity(0))}


def machine() -> dict:
    import google.protobuf

    m = machine_brief()
    mem = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    try:
        from google.protobuf.internal import api_implementation

        impl = api_implementation.Type()
    except Exception:
        impl = None
    m.update({"mem_gb": mem, "python": platform.python_version(), "protobuf": google.protobuf.__version__,
              "protobuf_impl": impl, "platform": platform.platform(), "loadavg_start": os.getloadavg(),
              "date": datetime.datetime.now().isoformat(timespec="seconds")})
    return m


# -- output ---------------------------------------------------------------------------------

def _f(x, spec=".2f"):
    return "-" if x is None else format(x, spec)


def table(rows: list[dict]) -> str:
    head = (f"{'case':34} {'nodes':>9} {'parse':>7} {'model':>7} {'passes':>7} {'write':>7} {'total':>7} "
            f"{'cluster':>8} {'rewrite':>8} {'RSS MB':>7} {'TF s':>7} {'ratio':>6}")
    lines = [head]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['case']:34} error: {r['error']}")
            continue
        lines.append(f"{r['case'][:34]:34} {r['nodes']:9,d} {_f(r['parse_s'])} {_f(r['model_s']):>7} "
                     f"{_f(r['cluster_s']):>7} {_f(r['write_s']):>7} {_f(r['total_s']):>7} "
                     f"{_f(r['cluster_cmd']['wall_s']):>8} {_f(r['rewrite_cmd']['wall_s']):>8} "
                     f"{r['cluster_cmd']['peak_rss_mb']:7.0f} {_f(r['tf_pass_s']):>7} {_f(r['ratio_vs_tf']):>6}")
    lines.append("seconds; parse/model/passes/write/total: in-process phases of clustering; cluster/rewrite: whole "
                 "`jitsim cluster -o` / `jitsim rewrite --until build-xla-ops -o` processes; RSS: peak of the cluster "
                 "process; TF s: TF's MarkForCompilationPass (median of --tf-runs runs without dump flags in this run, where a "
                 "ratio is shown); ratio: cluster / TF")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=DEFAULT_SIZES, help=f"generated sizes, of {','.join(SIZES)} (default "
                    f"{DEFAULT_SIZES}; '' for none)")
    ap.add_argument("--cases", nargs="*", help="only cases whose name contains one of these")
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (min reported; files > 100 MB: 1)")
    ap.add_argument("--quick", action="store_true", help="tiny graphs, one run each (CI smoke test)")
    ap.add_argument("--prepare", action="store_true", help="harvest the issue's programs with TF first (once)")
    ap.add_argument("--rerun-tf", action="store_true", help="harvest them again now: a same-machine TF baseline")
    ap.add_argument("--tf-runs", type=int, default=3, help="TF runs without dump flags per issue program, in this "
                    "benchmark run (median kept; 0: take the harvest's dumping time, shown without a ratio)")
    ap.add_argument("--timeout", type=float, default=3600)
    ap.add_argument("--name", help="results file name (default: quick, or full)")
    ap.add_argument("--out-dir", default=str(HERE / "results"))
    ap.add_argument("--profile", action="store_true", help="cProfile the passes of the (first) chosen case instead")
    a = ap.parse_args(argv)
    sizes = [s for s in a.sizes.split(",") if s] if not a.quick else []
    bad = [s for s in sizes if s not in SIZES]
    if bad:
        ap.error(f"unknown size {bad[0]!r}; of {', '.join(SIZES)}")
    measured = None
    if a.prepare or a.rerun_tf:
        measured = prepare(list(ISSUE_PROGRAMS), rerun=a.rerun_tf, timeout=a.timeout)
        if not a.rerun_tf:
            measured = None
    from jitsim.crosscheck.corpus import Corpus

    corpus = Corpus()
    try:
        keep = (lambda name: any(s in name for s in a.cases)) if a.cases else (lambda name: True)
        tf_runs = 0 if a.quick or a.profile or not any(keep(f"issue:{p}") for p in ISSUE_PROGRAMS) else a.tf_runs
        cases = build_cases(sizes, quick=a.quick, corpus=corpus, measured_tf=measured, tf_runs=tf_runs,
                            timeout=a.timeout, keep=keep)
        cases = [c for c in cases if keep(c.name)]
        if a.profile:
            return profile(cases[0])
        mach = machine()
        rows = []
        out = Path(a.out_dir) / f"{a.name or ('quick' if a.quick else 'full')}.json"
        out.parent.mkdir(parents=True, exist_ok=True)
        doc = {"schema": SCHEMA, "machine": mach, "flags": FLAGS, "quick": a.quick, "sizes": sizes,
               "repeat": 1 if a.quick else a.repeat, "cases": rows}
        for c in cases:
            print(f"{c.name} ...", file=sys.stderr, flush=True)
            try:
                rows.append(measure(c, 1 if a.quick else a.repeat, a.timeout))
            except Exception as e:  # one failing case is a result too
                rows.append({"case": c.name, "kind": c.kind, "error": f"{type(e).__name__}: {e}"[:2000]})
            mach["loadavg_end"] = os.getloadavg()
            out.write_text(json.dumps(doc, indent=1) + "\n")  # after every case: a long run keeps what it has
        print(table(rows))
        print(f"load average at start {mach['loadavg_start']}, at end {mach['loadavg_end']}; "
              f"{mach['nproc']} CPUs ({mach['cpu']}); wrote {_rel(out)}")
    finally:
        corpus.close()
    return 1 if any("error" in r for r in rows) else 0


def profile(case: Case) -> int:
    """cProfile of parse + model + clustering of one case, top functions by cumulative time."""
    import cProfile
    import io
    import pstats

    from jitsim.graph.io import read_graphdef
    from jitsim.graph.model import Graph
    from jitsim.options import options_for
    from jitsim.passes.pipeline import cluster_graph

    path = case.ensure()
    prof = cProfile.Profile()
    prof.enable()
    g = Graph(read_graphdef(path), source=str(path), validate=False)
    cluster_graph(g, options_for(FLAGS))
    prof.disable()
    s = io.StringIO()
    for key in ("tottime", "cumulative"):
        pstats.Stats(prof, stream=s).sort_stats(key).print_stats(25)
    print(s.getvalue().replace(str(ROOT) + "/", ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
