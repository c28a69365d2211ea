"""Running the simulated JIT passes on a graph or on a whole TF dump directory.

Input kinds (what jitsim is given, and how faithful the result can be):

* ``before_clone_constants_for_better_clustering`` dump: the post-Grappler graph exactly
  as TF built it. jitsim runs clone-constants, cluster-scoping and mark-for-compilation.
  Exact node and edge ids.
* ``before_mark_for_compilation`` dump: after TF's constant cloning. jitsim folds the
  clones back (:func:`~jitsim.passes.clone_constants.uncloned`) and re-runs the cloning,
  which restores TF's ids.
* any other GraphDef (e.g. exported from Python): not post-Grappler, and devices may be
  missing (``device=`` places them). The result is an approximation and says so.
"""

from __future__ import annotations

import os
import re
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

from jitsim.errors import JitsimError
from jitsim.graph.functions import body_problem, called_functions
from jitsim.graph.model import Graph
from jitsim.passes.clone_constants import clone_constants_for_better_clustering, uncloned
from jitsim.passes.cluster_scoping import cluster_scoping
from jitsim.flags import DEFAULT_FLAGS, OFF, XlaFlags, parse_tf_xla_flags
from jitsim.passes.mark_for_compilation import (
    MarkResult, ProcessState, SessionConfig, global_jit_level, mark_for_compilation,
)
from jitsim.graph.tfgraph import CLONE_NAME_RE, CONSTANT_OPS, TfGraph, is_rebuilt_graph, tfgraph_from_dump
from jitsim.registry import current_tf_version, using_op_libraries, using_tf_version
from jitsim.graph.custom_ops import harvest_op_library, infer_op_library
from jitsim.defs import (
    BEFORE_CLONE_DUMP, BEFORE_MARK_DUMP, BUILD_XLA_OPS_DUMP, BUILD_XLA_OPS_PASS, ENCAPSULATE_AFTER_DUMP,
    ENCAPSULATE_BEFORE_DUMP, MARK_DUMP, MARK_FOR_COMPILATION_PASS,
)

# the two clustering inputs TF dumps (names kept for the modules that import them here)
BEFORE_CLONE = BEFORE_CLONE_DUMP
BEFORE_MARK = BEFORE_MARK_DUMP
RAW = "graphdef"

DEVICES = {
    "cpu": "/job:localhost/replica:0/task:0/device:CPU:0",
    "gpu": "/job:localhost/replica:0/task:0/device:GPU:0",
}


_FULL_DEVICE = re.compile(r"^/job:[^/]+/replica:\d+/task:\d+/device:[^/:]+:\d+$")


def detect_input_stage(graph: Graph) -> str:
    """What ``graph`` is, from its content (never its file name, which users and scripts change).

    TF's dumps of the pass input are placed (every node has a full device name
    ``/job:../replica:N/task:N/device:TYPE:N``, which only TF's placer writes) and hold no
    ``Placeholder`` (feeds are ``_Arg``s by then): such a graph is
    ``before_mark_for_compilation`` if it carries TF's constant clones (``X/clone_k``, a copy
    of constant ``X``), else ``before_clone_constants_for_better_clustering`` (a
    ``before_mark`` dump without clones is the same graph). Anything else is a raw GraphDef.
    """
    nodes = graph.nodes
    if not nodes or any(n.op == "Placeholder" or not _FULL_DEVICE.match(n.device) for n in nodes.values()):
        return RAW
    for name, n in nodes.items():
        m = CLONE_NAME_RE.match(name)
        if m and n.op in CONSTANT_OPS:
            base = nodes.get(m.group(1))
            if (base is not None and base.op == n.op
                    and base.nodedef.attr["value"].SerializeToString() == n.nodedef.attr["value"].SerializeToString()):
                return BEFORE_MARK
    return BEFORE_CLONE


@contextmanager
def _naming(graph: Graph):
    """A pass's error about something inside the graph (a function body it instantiates, a
    malformed cluster call) names the graph's file, as every user error does."""
    try:
        yield
    except JitsimError as e:
        if e.path is None and graph.source:
            e.path = graph.source
        raise


def _timer(timings: dict | None):
    """``timed(name)``: a context that adds its wall time to ``timings[name]`` (seconds); a
    no-op when ``timings`` is None. Used by the benchmarks; changes nothing else."""
    if timings is None:
        return lambda name: nullcontext()

    @contextmanager
    def timed(name):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            timings[name] = timings.get(name, 0.0) + time.perf_counter() - t0

    return timed


@dataclass
class FlagsChoice:
    flags: XlaFlags
    origin: str  # "--tf-xla-flags", "TF_XLA_FLAGS", "harvest index", "default"

    def describe(self) -> str:
        return f'TF_XLA_FLAGS="{self.flags.text}" ({self.origin})'


def resolve_flags(cli_value: str | None = None, recorded: str | None = None, env=None, *, additive: bool = False,
                  no_defaults: bool = False) -> FlagsChoice:
    """The TF_XLA_FLAGS of a run, and where they came from.

    The base: flags recorded by a harvest (what TF ran with) > ``$TF_XLA_FLAGS`` > jitsim's
    default (``no_defaults``: nothing, TF's own defaults: auto-clustering off).
    ``additive`` (the CLI's one rule): ``cli_value`` goes on top of the base, later flags
    winning as in TF. Otherwise (the Python API's ``flags=``) ``cli_value`` replaces the base."""
    env = os.environ if env is None else env
    if no_defaults:
        base, origin = "", "no defaults (--no-default-flags)"
    elif cli_value is not None and not additive:
        return FlagsChoice(parse_tf_xla_flags(cli_value), "--tf-xla-flags")
    elif recorded is not None:
        base, origin = recorded, "recorded by the harvest"
    elif "TF_XLA_FLAGS" in env:
        base, origin = env["TF_XLA_FLAGS"], "TF_XLA_FLAGS environment variable"
    else:
        base, origin = DEFAULT_FLAGS, "jitsim default: auto-jit on, CPU global jit"
    if cli_value:
        parse_tf_xla_flags(cli_value)  # its own errors first, naming only what the user typed
        return FlagsChoice(parse_tf_xla_flags(f"{base} {cli_value}".strip()), f"{origin} + --tf-xla-flags")
    return FlagsChoice(parse_tf_xla_flags(base), origin)


def auto_clustering_off(flags: XlaFlags, session_jit_level: int = 0) -> bool:
    """Whether these flags (and the session's jit level) leave auto-clustering off for every
    device: TF's global jit level is then off and no node is marked unless it asks for XLA itself."""
    level = flags.auto_jit_general if flags.auto_jit_general != 0 else session_jit_level
    gpu = flags.auto_jit_single_gpu if flags.auto_jit_single_gpu != 0 else session_jit_level
    return level <= 0 and gpu <= 0


@dataclass
class ClusterResult:
    """What the simulated pipeline did to one graph."""

    source: str | None
    input_stage: str
    mark: MarkResult
    clones: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0
    op_libraries: tuple = ()  # OpLibrary objects active for this graph (given, then inferred)
    tf_version: str = "2.21"  # the simulated TensorFlow release

    @property
    def graph(self) -> TfGraph:
        return self.mark.graph

    @property
    def clusters(self) -> dict[str, list[str]]:
        return self.mark.clusters

    @property
    def decisions(self):
        return self.mark.decisions

    def labels(self) -> dict[str, str | None]:
        return self.mark.labels()

    def to_graphdef(self):
        """The graph as TF's ``mark_for_compilation`` dump writes it."""
        return self.graph.to_graphdef()


def cluster_graph(
    graph: Graph,
    flags: XlaFlags,
    *,
    session: SessionConfig | None = None,
    state: ProcessState | None = None,
    input_stage: str | None = None,
    device: str | None = None,
    explain_cycles: bool = False,
    exclude_ops=frozenset(),
    force_compilable=frozenset(),
    op_libraries=(),
    timings: dict | None = None,
    tf_version: str | None = None,
) -> ClusterResult:
    """Simulate clone-constants, cluster-scoping and mark-for-compilation on ``graph``.
    ``exclude_ops`` / ``force_compilable``: what-if knobs (see :func:`mark_for_compilation`).
    ``op_libraries``: :class:`~jitsim.registry.OpLibrary` objects for ops TF core does not
    register (``--op-defs``); ops nobody describes get OpDefs inferred from the graph
    (:func:`~jitsim.graph.custom_ops.infer_op_library`), as TF with their library loaded
    would treat them: ops without an XLA kernel.
    ``timings``: a dict that gets each step's wall time in seconds (benchmarks).
    ``tf_version``: the TensorFlow release to simulate (``"2.16"``; default: the active one,
    :func:`~jitsim.registry.using_tf_version`, else 2.21); :mod:`jitsim.registry.versions`
    picks one for a graph."""
    t0 = time.perf_counter()
    timed = _timer(timings)
    with using_tf_version(tf_version), using_op_libraries(*op_libraries):
        with timed("infer_op_library"):
            inferred = infer_op_library(graph)
        libraries = tuple(op_libraries) + ((inferred.library,) if inferred else ())
        with using_op_libraries(*libraries[len(op_libraries):]), _naming(graph):
            res = _cluster_graph(graph, flags, session, state, input_stage, device, explain_cycles, exclude_ops,
                                 force_compilable, timed)
        res.tf_version = current_tf_version()
    res.op_libraries = libraries
    if inferred:
        res.notes.insert(0, inferred.note())
    res.seconds = time.perf_counter() - t0
    return res


def _cluster_graph(graph, flags, session, state, input_stage, device, explain_cycles, exclude_ops,
                   force_compilable, timed) -> ClusterResult:
    stage = input_stage or detect_input_stage(graph)
    notes: list[str] = []
    g = graph
    if stage == BEFORE_MARK:
        with timed("uncloned"):
            g, removed = uncloned(graph)
        if removed:
            notes.append(f"folded {len(removed)} constant clones back to re-run TF's cloning with its ids")
    # TF's edge ids, including edges TF created after building the graph (session feeds and
    # fetches, clones, ...): see tfgraph.tfgraph_from_dump
    with timed("is_rebuilt_dump"):
        rebuilt = is_rebuilt_graph(g)
    with timed("tfgraph_from_dump"):
        tg = tfgraph_from_dump(g, rebuilt=rebuilt)
    if device is not None:
        name = DEVICES.get(device, device)
        placed = 0
        for n in tg.op_nodes():
            if not n.nodedef.device:
                n.nodedef.device = name
                placed += 1
        if placed:
            notes.append(f"placed {placed} nodes without a device on {name}")
    unplaced = sum(1 for n in tg.op_nodes() if not n.nodedef.device)
    if unplaced:
        notes.append(f"{unplaced} nodes have no device (TF's pass would fail on them); pass --device cpu|gpu")
    if stage == RAW:
        notes.append("input is not a TF dump of the pass's input (not post-Grappler): the result is approximate")
    elif not rebuilt:
        notes.append("TF clustered this graph as lowering and inlining left it, without rebuilding it (Grappler off "
                     "or failed): its edge order is reconstructed from node names, and where TF walked an edge set "
                     "of more than 8 edges TF's own cluster numbering and argument order vary from run to run "
                     "(docs/fidelity.md)")
    session = session or SessionConfig()
    clones: list[str] = []
    if global_jit_level(flags, session, tg) != OFF:
        with timed("clone_constants"):
            clones = clone_constants_for_better_clustering(tg)
        with timed("cluster_scoping"):
            cluster_scoping(tg)
    tg.fixup_source_and_sink_edges()
    with timed(MARK_FOR_COMPILATION_PASS):
        mark = mark_for_compilation(tg, flags, session, state, explain_cycles=explain_cycles,
                                    exclude_ops=exclude_ops, force_compilable=force_compilable)
    _note_unchecked_bodies(tg, mark.body_errors, graph.source)
    return ClusterResult(graph.source, stage, mark, clones, notes)


def _note_unchecked_bodies(tg: TfGraph, rejected: dict, source) -> None:
    """TF checks a function body only where it instantiates the function: a broken body
    (a reference naming nothing) fails nothing unless a pass instantiates it. Say, once per
    such function, whether mark-for-compilation's compilability checks tried (the calls are then
    not compilable, FUNCTION_NOT_FOUND) or nothing instantiated it (so nothing checked it)."""
    library = tg.library
    if not library.function:
        return
    from jitsim.graph.io import assume

    fns = {f.signature.name: f for f in library.function}
    called = set()
    for n in tg.op_nodes():
        called.update(called_functions(n.nodedef, fns))
    for name in fns:
        prefix = f"function {name!r}: "
        if name in rejected:
            why = rejected[name].removeprefix(prefix)
            assume(f"function {name!r} cannot be instantiated ({why}): as in TF, its calls are not compilable "
                   "(FUNCTION_NOT_FOUND) instead of failing the pass", source)
            continue
        why = body_problem(fns, name)
        if why is None:
            continue
        why = why.removeprefix(prefix)
        if name in called:
            assume(f"function {name!r} is not instantiated by the clustering passes, so (as in TF) its body was not "
                   f"checked; running its call would fail: {why}", source)
        else:
            assume(f"function {name!r} is never instantiated, so (as in TF) its body was not checked; it would "
                   f"not instantiate: {why}", source)


def cluster_dump_dir(
    path: str | Path,
    flags: XlaFlags,
    *,
    session: SessionConfig | None = None,
    state: ProcessState | None = None,
    stage: str | None = None,
    explain_cycles: bool = False,
    progress=None,
    tf_version: str | None = None,
) -> list[tuple[object, ClusterResult]]:
    """Simulate every graph of a TF dump directory in order, as one TF process would:
    one fuel counter and one cluster-name counter across all graphs. ``tf_version``: as for
    :func:`cluster_graph` (one release for the whole directory)."""
    from jitsim.graph.io import load_dump_dir

    lib = harvest_op_library(path)  # ops of libraries the run loaded (tensorflow_text...)
    libraries = (lib,) if lib is not None else ()
    state = state or ProcessState()
    out = []
    graphs = load_dump_dir(path, stage=stage, validate=False)
    for i, (rec, g) in enumerate(graphs):
        if progress:
            progress(i, len(graphs))
        st = stage or rec.input_stage
        out.append((rec, cluster_graph(g, flags, session=session, state=state, input_stage=st,
                                       explain_cycles=explain_cycles, op_libraries=libraries,
                                       tf_version=tf_version)))
    return out


# -- the whole POST_REWRITE_FOR_EXEC pipeline ------------------------------------------------

STAGES = ("mark", "decluster", "encapsulate", "build-xla-ops")
# TF's dump that shows the graph after each stage
STAGE_DUMPS = {
    "mark": MARK_DUMP,
    "decluster": ENCAPSULATE_BEFORE_DUMP,
    "encapsulate": ENCAPSULATE_AFTER_DUMP,
    "build-xla-ops": BUILD_XLA_OPS_DUMP,
}


@dataclass
class PipelineResult:
    """The graph after ``until`` and what each pass decided."""

    cluster: ClusterResult
    graph: TfGraph
    until: str
    stage_results: dict = field(default_factory=dict)  # pass name -> its result object

    def to_graphdef(self):
        """The graph as TF dumps it at this stage. (TF writes ``encapsulate_subgraphs_after``
        inside the pass, before it adds ``_XlaHasReferenceVars`` to every node.)"""
        enc = self.stage_results.get("encapsulate_subgraphs")
        if self.until == "encapsulate" and enc is not None:
            return enc.dump_graphdef()
        return self.graph.to_graphdef()


def run_pipeline(graph: Graph, flags: XlaFlags, *, until: str = "build-xla-ops", timings: dict | None = None,
                 tf_version: str | None = None, **cluster_kwargs) -> PipelineResult:
    """Simulate TF's auto-clustering pipeline on ``graph`` up to and including ``until``:
    mark (clone constants, cluster scoping, mark for compilation), decluster
    (force-xla-constants-on-host, increase-dynamism, partially-decluster), encapsulate
    (encapsulate-subgraphs) and build-xla-ops. ``timings``: as for :func:`cluster_graph`,
    with the later passes too. ``tf_version``: the simulated release, for every pass (as for
    :func:`cluster_graph`)."""
    if until not in STAGES:
        raise JitsimError(f"unknown stage {until!r}; one of {', '.join(STAGES)}")
    with using_tf_version(tf_version):
        cr = cluster_graph(graph, flags, timings=timings, **cluster_kwargs)
        res = PipelineResult(cr, cr.graph, until)
        if until == "mark":
            return res
        with using_op_libraries(*cr.op_libraries), _naming(graph):
            _run_later_passes(res, flags, cluster_kwargs.get("state"), _timer(timings))
    return res


def _run_later_passes(res: PipelineResult, flags: XlaFlags, state: ProcessState | None, timed) -> None:
    until = res.until
    from jitsim.passes.force_constants_on_host import force_xla_constants_on_host
    from jitsim.passes.increase_dynamism import increase_dynamism_for_auto_jit
    from jitsim.passes.partially_decluster import partially_decluster

    g = res.graph
    with timed("force_xla_constants_on_host"):
        res.stage_results["force_xla_constants_on_host"] = force_xla_constants_on_host(g)
    with timed("increase_dynamism_for_auto_jit"):
        res.stage_results["increase_dynamism_for_auto_jit"] = increase_dynamism_for_auto_jit(g, flags)
    cpu_jit = flags.cpu_global_jit if state is None or state.cpu_global_jit_at_startup is None \
        else state.cpu_global_jit_at_startup
    with timed("partially_decluster"):
        res.stage_results["partially_decluster"] = partially_decluster(g, flags, cpu_global_jit_at_startup=cpu_jit)
    if until == "decluster":
        return
    from jitsim.passes.encapsulate import encapsulate_subgraphs

    with timed("encapsulate_subgraphs"):
        enc = encapsulate_subgraphs(g, flags)
    res.stage_results["encapsulate_subgraphs"] = enc
    res.graph = enc.graph
    if until == "encapsulate":
        return
    from jitsim.passes.build_xla_ops import build_xla_ops

    with timed(BUILD_XLA_OPS_PASS):
        res.stage_results[BUILD_XLA_OPS_PASS] = build_xla_ops(res.graph, flags)
