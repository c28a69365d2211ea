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

The passes are data: :data:`PIPELINE` lists TF's eight JIT passes in TF's order, each with
its stage (``jitsim.defs.STAGES``, what ``--until`` names), the dump TF writes after it and
one function ``(graph, options, state) -> result``; :func:`run_pipeline` runs them up to
``options.until``, handing every pass the same :class:`~jitsim.options.Options` and the TF
process's :class:`~jitsim.passes.mark_for_compilation.ProcessState`. With
``options.debug_checks`` (``JITSIM_DEBUG=1``) :func:`check_graph` runs after each pass and
names the pass that left a broken graph.
"""

from __future__ import annotations

import re
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from jitsim.errors import JitsimError
from jitsim.graph.functions import body_problem, called_functions
from jitsim.graph.model import Graph
from jitsim.passes.clone_constants import clone_constants_for_better_clustering, uncloned
from jitsim.passes.cluster_scoping import cluster_scoping
from jitsim.flags import OFF
from jitsim.options import Options
from jitsim.passes.mark_for_compilation import MarkResult, ProcessState, global_jit_level, mark_for_compilation
from jitsim.graph.tfgraph import (
    CLONE_NAME_RE, CONSTANT_OPS, TfGraph, is_rebuilt_graph, not_back_edge, tfgraph_from_dump,
)
from jitsim.registry import current_tf_version, simulating
from jitsim.graph.custom_ops import harvest_op_library, infer_op_library
from jitsim.defs import (
    AFTER_CLONE_DUMP, BEFORE_CLONE_DUMP, BEFORE_MARK_DUMP, BUILD_XLA_OPS_DUMP, BUILD_XLA_OPS_PASS, CLUSTER_ATTR,
    DEVICES, ENCAPSULATE_AFTER_DUMP, ENCAPSULATE_BEFORE_DUMP, MARK_DUMP, MARK_FOR_COMPILATION_PASS, STAGES,
)

# the two clustering inputs TF dumps (names kept for the modules that import them here)
BEFORE_CLONE = BEFORE_CLONE_DUMP
BEFORE_MARK = BEFORE_MARK_DUMP
RAW = "graphdef"



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
    if not nodes:
        return RAW
    devices = set()
    for n in nodes.values():
        nd = n.nodedef
        if nd.op == "Placeholder":
            return RAW
        devices.add(nd.device)
    if not all(_FULL_DEVICE.match(d) for d in devices):  # each device string once
        return RAW
    for name, n in nodes.items():
        if "/clone_" not in name:  # what CLONE_NAME_RE needs, checked first
            continue
        m = CLONE_NAME_RE.match(name)
        if m and n.op in CONSTANT_OPS:
            base = nodes.get(m.group(1))
            if (base is not None and base.op == n.op
                    and base.nodedef.attr["value"].SerializeToString() == n.nodedef.attr["value"].SerializeToString()):
                return BEFORE_MARK
    return BEFORE_CLONE


@contextmanager
def _naming(graph):
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

    def serialized_pieces(self):
        """:meth:`to_graphdef`'s serialization in pieces (:meth:`TfGraph.serialized_pieces`),
        for :func:`~jitsim.graph.io.save`."""
        return self.graph.serialized_pieces()


def cluster_graph(graph: Graph, options: Options, state: ProcessState | None = None, *,
                  own: bool = False) -> ClusterResult:
    """Simulate the stage ``mark`` on ``graph``: clone-constants, cluster-scoping and
    mark-for-compilation (the first entries of :data:`PIPELINE`), with ``options`` (the same
    object every pass reads) in the TF process ``state`` (default: a fresh one,
    :meth:`ProcessState.starting`).

    ``options.op_libraries``: :class:`~jitsim.registry.OpLibrary` objects for ops TF core does
    not register (``--op-defs``); ops nobody describes get OpDefs inferred from the graph
    (:func:`~jitsim.graph.custom_ops.infer_op_library`), as TF with their library loaded
    would treat them: ops without an XLA kernel. ``options.timings``: a dict that gets each
    step's wall time in seconds (benchmarks). ``options.tf_version``: the TensorFlow release
    to simulate (``"2.16"``; None: the active one, :func:`~jitsim.registry.using_tf_version`,
    else 2.21); :mod:`jitsim.registry.versions` picks one for a graph. ``own``: the caller gives
    ``graph`` away (it has no other use for it, as the CLI): it may be changed instead of copied."""
    t0 = time.perf_counter()
    timed = _timer(options.timings)
    state = state if state is not None else ProcessState.starting(options)
    given = tuple(options.op_libraries)
    with simulating(options.tf_version, given):
        with timed("infer_op_library"):
            inferred = infer_op_library(graph)
        libraries = given + ((inferred.library,) if inferred else ())
        with simulating(None, libraries[len(given):]), _naming(graph):
            res = _cluster_graph(graph, options, state, timed, own)
        res.tf_version = current_tf_version()
    res.op_libraries = libraries
    if inferred:
        res.notes.insert(0, inferred.note())
    res.seconds = time.perf_counter() - t0
    return res


def _cluster_graph(graph: Graph, options: Options, state: ProcessState, timed, own: bool = False) -> ClusterResult:
    stage = options.input_stage or detect_input_stage(graph)
    notes: list[str] = []
    g = graph
    if stage == BEFORE_MARK:
        with timed("uncloned"):
            g, removed = uncloned(graph, in_place=own)
        if removed:
            notes.append(f"folded {len(removed)} constant clones back to re-run TF's cloning with its ids")
    # TF's edge ids, including edges TF created after building the graph (session feeds and
    # fetches, clones, ...): see tfgraph.tfgraph_from_dump
    with timed("is_rebuilt_dump"):
        rebuilt = is_rebuilt_graph(g)
    with timed("tfgraph_from_dump"):
        tg = tfgraph_from_dump(g, rebuilt=rebuilt)
    keys = g.attr_keys
    if own and keys is not None:
        # the caller's own graph, as load() read it: each node's op-and-attrs key still holds
        # (the TfGraph holds them for mark, which drops them)
        if tg.nodes_read == len(keys):
            tg.read_attr_keys = keys
        g.attr_keys = None
    # the passes read the TfGraph only: the Graph models' edge indexes (rebuilt if asked for
    # again) and the unclone copy's model need not stay alive beside it
    g.release_edges()
    if g is not graph:
        graph.release_edges()
    del g
    device = options.device
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
    results = _run_passes(tg, _stage_entries(MARK), options, state, timed)
    mark = results[MARK_FOR_COMPILATION_PASS]
    _note_unchecked_bodies(tg, mark.body_errors, graph.source)
    return ClusterResult(graph.source, stage, mark, results[CLONE_CONSTANTS] or [], notes)


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


def cluster_dump_dir(path: str | Path, options: Options, state: ProcessState | None = None, *,
                     progress=None) -> list[tuple[object, ClusterResult]]:
    """Simulate every graph of a TF dump directory in order, as one TF process would:
    one fuel counter and one cluster-name counter across all graphs. ``options.input_stage``:
    the stage to read (None: each graph's clustering input); ``options.tf_version``: one
    release for the whole directory. The op libraries the run loaded (found in the directory)
    are added to ``options.op_libraries``."""
    from jitsim.graph.io import load_dump_dir

    lib = harvest_op_library(path)  # ops of libraries the run loaded (tensorflow_text...)
    if lib is not None:
        options = replace(options, op_libraries=tuple(options.op_libraries) + (lib,))
    state = state if state is not None else ProcessState.starting(options)
    out = []
    graphs = load_dump_dir(path, stage=options.input_stage, validate=False)
    for i, (rec, g) in enumerate(graphs):
        if progress:
            progress(i, len(graphs))
        out.append((rec, cluster_graph(g, replace(options, input_stage=options.input_stage or rec.input_stage),
                                       state)))
    return out


# -- the whole POST_REWRITE_FOR_EXEC pipeline, as data ----------------------------------------

MARK, DECLUSTER, ENCAPSULATE, BUILD_XLA_OPS = STAGES
# jitsim's names for the passes' results and timings (PipelineResult.stage_results, benchmarks)
CLONE_CONSTANTS = "clone_constants"
CLUSTER_SCOPING = "cluster_scoping"
FORCE_XLA_CONSTANTS_ON_HOST = "force_xla_constants_on_host"
INCREASE_DYNAMISM = "increase_dynamism_for_auto_jit"
PARTIALLY_DECLUSTER = "partially_decluster"
ENCAPSULATE_SUBGRAPHS = "encapsulate_subgraphs"


@dataclass(frozen=True)
class PassEntry:
    """One of TF's JIT passes in :data:`PIPELINE`."""

    tf_name: str  # TF's class (tensorflow/compiler/jit/*.cc)
    key: str  # jitsim's name for its result and its timing
    stage: str  # the stage (jitsim.defs.STAGES) it belongs to
    dump: str | None  # the dump (jitsim.defs) that shows the graph after it, where TF writes one
    run: Callable  # (TfGraph, Options, ProcessState) -> its result; a result with a new
    #                ``graph`` (encapsulation) hands that graph to the next pass


def _clone_constants(g, options: Options, state: ProcessState):
    # TF's pass returns at once when the graph's global jit level is off
    if global_jit_level(options.flags, options.session, g) == OFF:
        return None
    return clone_constants_for_better_clustering(g)


def _cluster_scoping(g, options: Options, state: ProcessState):
    if global_jit_level(options.flags, options.session, g) == OFF:
        return None
    return cluster_scoping(g)


def _mark_for_compilation(g, options: Options, state: ProcessState):
    g.fixup_source_and_sink_edges()
    return mark_for_compilation(g, options, state)


def _force_xla_constants_on_host(g, options: Options, state: ProcessState):
    from jitsim.passes.force_constants_on_host import force_xla_constants_on_host

    return force_xla_constants_on_host(g, options)


def _increase_dynamism(g, options: Options, state: ProcessState):
    from jitsim.passes.increase_dynamism import increase_dynamism_for_auto_jit

    return increase_dynamism_for_auto_jit(g, options)


def _partially_decluster(g, options: Options, state: ProcessState):
    from jitsim.passes.partially_decluster import partially_decluster

    return partially_decluster(g, options, state)


def _encapsulate_subgraphs(g, options: Options, state: ProcessState):
    from jitsim.passes.encapsulate import encapsulate_subgraphs

    return encapsulate_subgraphs(g, options)


def _build_xla_ops(g, options: Options, state: ProcessState):
    from jitsim.passes.build_xla_ops import build_xla_ops

    return build_xla_ops(g, options)


# TF's POST_REWRITE_FOR_EXEC JIT passes in the order TF runs them (their phase numbers in
# jit_compilation_pass_registration.cc). The passes after mark-for-compilation are imported
# when a simulation goes that far.
PIPELINE: tuple[PassEntry, ...] = (
    PassEntry("CloneConstantsForBetterClusteringPass", CLONE_CONSTANTS, MARK, AFTER_CLONE_DUMP, _clone_constants),
    PassEntry("ClusterScopingPass", CLUSTER_SCOPING, MARK, None, _cluster_scoping),
    PassEntry("MarkForCompilationPass", MARK_FOR_COMPILATION_PASS, MARK, MARK_DUMP, _mark_for_compilation),
    PassEntry("ForceXlaConstantsOnHostPass", FORCE_XLA_CONSTANTS_ON_HOST, DECLUSTER, None,
              _force_xla_constants_on_host),
    PassEntry("IncreaseDynamismForAutoJitPass", INCREASE_DYNAMISM, DECLUSTER, None, _increase_dynamism),
    PassEntry("PartiallyDeclusterPass", PARTIALLY_DECLUSTER, DECLUSTER, ENCAPSULATE_BEFORE_DUMP, _partially_decluster),
    PassEntry("EncapsulateSubgraphsPass", ENCAPSULATE_SUBGRAPHS, ENCAPSULATE, ENCAPSULATE_AFTER_DUMP,
              _encapsulate_subgraphs),
    PassEntry("BuildXlaOpsPass", BUILD_XLA_OPS_PASS, BUILD_XLA_OPS, BUILD_XLA_OPS_DUMP, _build_xla_ops),
)
# TF's dump that shows the graph after each stage: the dump of the stage's last pass
STAGE_DUMPS = {e.stage: e.dump for e in PIPELINE}
# the passes after mark-for-compilation that can take a node out of its cluster or rewrite it
LATER_PASSES = tuple(e.key for e in PIPELINE if e.stage == DECLUSTER)


def _stage_entries(stage: str) -> tuple[PassEntry, ...]:
    return tuple(e for e in PIPELINE if e.stage == stage)


def _entries_after(stage: str, until: str) -> tuple[PassEntry, ...]:
    """The entries after ``stage`` up to and including the stage ``until``."""
    lo, hi = STAGES.index(stage), STAGES.index(until)
    return tuple(e for e in PIPELINE if lo < STAGES.index(e.stage) <= hi)


def _run_passes(g: TfGraph, entries, options: Options, state: ProcessState, timed, results=None) -> dict:
    """Run ``entries`` in order on ``g``, each with the same ``options`` and ``state``; with
    ``options.debug_checks``, check the graph after each (:func:`check_graph`)."""
    results = {} if results is None else results
    for e in entries:
        with timed(e.key):
            r = e.run(g, options, state)
        results[e.key] = r
        new = getattr(r, "graph", None)
        if isinstance(new, TfGraph):
            g = new
        if options.debug_checks:
            problem = check_graph(g)
            if problem is not None:
                raise PassCheckError(f"after {e.tf_name} ({e.key}): the graph is broken: {problem}")
    return results


@dataclass
class PipelineResult:
    """The graph after ``until`` and what each pass decided."""

    cluster: ClusterResult
    graph: TfGraph
    until: str
    stage_results: dict = field(default_factory=dict)  # pass key -> its result object

    def to_graphdef(self):
        """The graph as TF dumps it at this stage. (TF writes ``encapsulate_subgraphs_after``
        inside the pass, before it adds ``_XlaHasReferenceVars`` to every node.)"""
        enc = self._encapsulate_dump()
        return enc.dump_graphdef() if enc is not None else self.graph.to_graphdef()

    @property
    def stage_dump(self) -> str:
        """The name of the dump TF writes after this result's last stage."""
        return STAGE_DUMPS[self.until]

    def serialized_pieces(self):
        """:meth:`to_graphdef`'s deterministic serialization in pieces, for
        :func:`~jitsim.graph.io.save` (:meth:`TfGraph.serialized_pieces`)."""
        enc = self._encapsulate_dump()
        if enc is not None:
            return [enc.dump_graphdef().SerializeToString(deterministic=True)]
        return self.graph.serialized_pieces()

    def _encapsulate_dump(self):
        """Encapsulation's result where the stage ends with its own dump (``until`` encapsulate)."""
        enc = self.stage_results.get(ENCAPSULATE_SUBGRAPHS)
        return enc if self.until == ENCAPSULATE else None


def run_pipeline(graph: Graph, options: Options, state: ProcessState | None = None, *,
                 own: bool = False) -> PipelineResult:
    """Simulate TF's auto-clustering pipeline on ``graph``: the entries of :data:`PIPELINE` up
    to and including the stage ``options.until`` (``mark``: clone constants, cluster scoping,
    mark for compilation; ``decluster``: force-xla-constants-on-host, increase-dynamism,
    partially-decluster; ``encapsulate``: encapsulate-subgraphs; ``build-xla-ops``), every pass
    reading the same ``options``, in the TF process ``state`` (default: a fresh one). ``own``:
    the caller gives ``graph`` away (:func:`cluster_graph`)."""
    until = options.until
    if until not in STAGES:
        raise JitsimError(f"unknown stage {until!r}; one of {', '.join(STAGES)}")
    state = state if state is not None else ProcessState.starting(options)
    with simulating(options.tf_version, options.op_libraries):
        cr = cluster_graph(graph, options, state, own=own)
        return run_later_passes(PipelineResult(cr, cr.graph, until), options, state)


def run_later_passes(res: PipelineResult, options: Options, state: ProcessState | None = None) -> PipelineResult:
    """Continue ``res`` (the stage ``mark`` of one graph, :func:`cluster_graph`'s result in a
    :class:`PipelineResult`) with the entries of :data:`PIPELINE` after it, up to
    ``options.until``."""
    later = _entries_after(MARK, options.until)
    if not later:
        return res
    res.until = options.until
    state = state if state is not None else ProcessState.starting(options)
    cr = res.cluster
    with simulating(options.tf_version, cr.op_libraries), _naming(cr):
        _run_passes(res.graph, later, options, state, _timer(options.timings), res.stage_results)
    for e in later:
        new = getattr(res.stage_results[e.key], "graph", None)
        if isinstance(new, TfGraph):
            res.graph = new
    return res


# -- the check between passes (options.debug_checks, JITSIM_DEBUG=1) ------------------------------


class PassCheckError(RuntimeError):
    """A pass left a broken graph (found by the debug check between passes): a bug in jitsim,
    not in the input (the CLI reports it as an internal error; in debug mode, with its traceback)."""


def check_graph(g: TfGraph) -> str | None:
    """What is wrong with ``g`` as a graph a pass hands to the next one, or None: every edge
    joins two live nodes and is listed on both; no input slot is fed twice; every node's data
    inputs are its slots 0..k-1; no cycle except through NextIteration back edges (TF's
    executor frames); every ``_XlaCluster`` is a non-empty string."""
    nodes = g.nodes
    for e in g.edges():
        if not (0 <= e.src < len(nodes) and 0 <= e.dst < len(nodes)) or nodes[e.src] is None \
                or nodes[e.dst] is None:
            return f"edge #{e.id} joins a removed node ({e.src} -> {e.dst})"
        if e.id not in nodes[e.src].out_edges or e.id not in nodes[e.dst].in_edges:
            return f"edge #{e.id} {nodes[e.src].name} -> {nodes[e.dst].name} is missing from a node's edge list"
    for n in g.all_nodes():
        for e in list(n.in_edges.values()) + list(n.out_edges.values()):
            if g.edges_by_id[e.id] is not e:
                return f"node {n.name!r} lists removed edge #{e.id}"
    for n in g.op_nodes():
        if g.by_name.get(n.name) != n.id:
            return f"node {n.name!r} is not found by its name"
        slots = [e.dst_input for e in n.data_inputs()]
        if slots != list(range(len(slots))):
            return f"node {n.name!r}: its data inputs are slots {slots}, not 0..{len(slots) - 1}"
        if CLUSTER_ATTR in n.attr:
            v = n.attr[CLUSTER_ATTR]
            if v.WhichOneof("value") != "s" or not v.s:
                return f"node {n.name!r}: {CLUSTER_ATTR} is not a cluster name"
    # Kahn's algorithm without the back edges out of NextIteration
    keep = not_back_edge(g)
    indeg = [0] * len(nodes)
    for e in g.edges():
        if keep(e):
            indeg[e.dst] += 1
    ready = [n.id for n in g.all_nodes() if indeg[n.id] == 0]
    seen = 0
    while ready:
        nid = ready.pop()
        seen += 1
        for e in nodes[nid].out_edges.values():
            if keep(e):
                indeg[e.dst] -= 1
                if indeg[e.dst] == 0:
                    ready.append(e.dst)
    if seen != sum(1 for _ in g.all_nodes()):
        stuck = sorted(n.name for n in g.all_nodes() if indeg[n.id] > 0)
        return f"a cycle not through NextIteration, among {', '.join(stuck[:5])}" + (" ..." if len(stuck) > 5 else "")
    return None
