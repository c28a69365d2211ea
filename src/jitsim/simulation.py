"""The front door of a simulation: what a target is run as, from start to end, in one place.

:func:`simulate` takes what the user holds (a path, a TF object, a GraphDef or a jitsim Graph),
the :class:`~jitsim.options.Options` of the run (built once, by the CLI's argument parsing or
:func:`jitsim.cluster`'s keywords) and the call the user states (:class:`~jitsim.options.Call`),
and does, once each:

1. **TF's pass input** (:func:`jitsim.frontend.resolve.pass_inputs`; a Graph or GraphDef is
   taken as it is): every graph TF instantiates for the target, the route taken, its notes;
2. **the release** (:func:`jitsim.registry.versions.choose_tf_version`: ``--tf-version``, else
   the TF a capture or harvest ran, else the graph's producer), checked under every release
   that writes the same producer (:func:`jitsim.passes.releases.check_releases`);
3. **the options completed**: the release and why, the op libraries TF's run loaded, the
   session's jit setting of a live object's process, the main graph's input stage and the
   cluster counter where the call's graph starts;
4. **one TF process** (:class:`~jitsim.passes.mark_for_compilation.ProcessState`) over the
   target's graphs, each run through the pipeline (:func:`jitsim.passes.pipeline.run_pipeline`,
   which enters the release's registries) up to ``options.until``.

``graphs="main"`` (what :func:`jitsim.cluster` and the commands that explain one graph use): the
graphs before the call's own only advance the cluster counter (without the what-if knobs), the
call's graph runs on a copy (the input is kept for what-ifs); ``graphs="all"`` (``jitsim
cluster``): every graph is simulated and reported, each given away to the passes.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from jitsim.errors import JitsimError
from jitsim.graph.model import Graph
from jitsim.options import Call, Options
from jitsim.passes.mark_for_compilation import ProcessState
from jitsim.passes import pipeline as passes  # by module: tests replace its functions
from jitsim.passes.pipeline import PipelineResult
from jitsim.registry import protos, simulating

# the graph size up to which a simulation records the path behind every cycle refusal by default
AUTO_EXPLAIN_CYCLES_NODES = 5000


@dataclass
class Simulation:
    """One target simulated (:func:`simulate`). ``options``: as completed (release, op libraries,
    session, the main graph's stage); ``graphs``: ``(label, pass input, input stage)`` per graph,
    in TF's order, ``main`` the call's own; ``results``: the pipeline's result per graph (None
    for a graph only run to advance the counter); ``route``: how the pass input was obtained
    (None for a Graph or GraphDef given as it is); ``notes``: the route's and the release
    check's notes for the main graph; ``input_snapshot``: the main graph's pass input as bytes
    (``graphs="main"``), kept for what-ifs."""

    options: Options
    graphs: list
    main: int
    results: list
    route: object | None = None
    notes: list[str] = field(default_factory=list)
    recorded_flags: str | None = None
    input_snapshot: bytes | None = None
    state: ProcessState | None = None

    @property
    def main_result(self) -> PipelineResult:
        return self.results[self.main]

    @property
    def main_input(self) -> Graph:
        return self.graphs[self.main][1]

    @property
    def source(self) -> str | None:
        return self.main_input.source


def is_tf_object(obj) -> bool:
    """A live TensorFlow or Keras object (jitsim's protos have no module of theirs)."""
    return (type(obj).__module__ or "").startswith(("tensorflow", "keras"))


def to_graph(obj, *, signature: str | None = None) -> Graph:
    """A path, a jitsim ``Graph`` or a ``GraphDef`` -> a jitsim :class:`~jitsim.graph.model.Graph`
    (as given: no route to TF's pass input is taken; :func:`simulate` takes one for paths)."""
    if isinstance(obj, Graph):
        return obj
    if isinstance(obj, (str, Path)):
        from jitsim.graph.io import load

        return load(obj, signature=signature, validate=True)
    if hasattr(obj, "node") and hasattr(obj, "SerializeToString") and hasattr(obj, "library"):
        gd = protos.GraphDef()
        gd.ParseFromString(obj.SerializeToString())
        return Graph(gd, source="<GraphDef>")
    raise JitsimError(f"cannot simulate a {type(obj).__name__}: give a path, a GraphDef, a jitsim Graph, "
                      "a tf.function/ConcreteFunction or a Keras model")


def simulate(target, options: Options, call: Call = Call(), *, tf: str = "auto", graphs: str = "main",
             move_devices: bool = False, progress=None, on_result=None) -> Simulation:
    """Simulate ``target`` with ``options`` (see the module doc). ``tf``: how a path or TF
    object's pass input is obtained (``auto``, ``always``, ``never``: :func:`jitsim.frontend.
    resolve.pass_inputs`). ``move_devices``: ``options.device`` also moves nodes that have a
    device, where a kernel of that type exists (``graphs="main"``). ``progress(kind, *values)``:
    ``("capture", seconds, dump files)`` while TF runs, ``("graph", i, n)`` before each graph of
    several (``graphs="all"``). ``on_result(sim, i, result)``: each graph's result as soon as it
    is simulated (``graphs="all"``: the CLI starts writing the main graph while it reports)."""
    from jitsim.passes.releases import check_releases
    from jitsim.registry.versions import choose_tf_version, producer_of, recorded_tf_version, release_candidates

    if graphs not in ("main", "all"):
        raise ValueError(f"graphs={graphs!r}: 'main' or 'all'")
    route, notes, recorded_flags, recorded = None, [], None, None
    if isinstance(target, (str, Path)) or is_tf_object(target):
        from jitsim.frontend.resolve import pass_inputs

        pin = pass_inputs(target, flags=options.flags_text, tf=tf, signature=call.signature, device=options.device,
                          input_stage=options.input_stage,
                          progress=(lambda s, n: progress("capture", s, n)) if progress else None,
                          fetch=call.fetch, feed=call.feed, input_shapes=call.input_shapes,
                          input_signature=call.input_signature, captured=call.captured,
                          tf_version=options.tf_version)
        session = options.session
        if pin.session_jit is not None and not session.global_jit_level:  # the caller's set_jit, as TF would see it
            session = replace(session, global_jit_level=1 if pin.session_jit else -1)
        options = replace(options, session=session, op_libraries=tuple(pin.op_libraries))
        recorded = recorded_tf_version(target) if isinstance(target, (str, Path)) else None
        route, notes, recorded_flags = pin.route, list(pin.notes), pin.recorded_flags
        inputs, main = list(pin.graphs), pin.main
        pin = None  # (its graphs are in inputs: the call's is given up once copied, _simulate_the_call)
    else:
        if call.fetch or call.feed or call.captured:
            raise JitsimError("fetch/feed/captured state the call of a graph file: give the GraphDef or MetaGraphDef "
                              "path")
        if call.input_shapes or call.input_signature is not None:
            raise JitsimError("input_shapes/input_signature state a Keras model's call: give the .keras path or the "
                              "Keras model")
        g = to_graph(target, signature=call.signature)
        inputs, main = [(g.source or "graph", g, options.input_stage)], 0
    main_graph, main_stage = inputs[main][1], inputs[main][2]
    version, reason = choose_tf_version(options.tf_version, producer_of(main_graph), recorded)
    check = check_releases(main_graph, replace(options, tf_version=version, input_stage=main_stage),
                           release_candidates(options.tf_version, producer_of(main_graph), recorded))
    main_graph = None
    options = replace(options, tf_version=version, tf_version_reason=check.reason(reason))
    if not check.agree:  # the result holds for one of the releases the graph may be from
        if route is not None:
            route.exact = False
            route.extra_notes.append(check.note())
        else:
            notes.append(check.note())
    sim = Simulation(options, inputs, main, [None] * len(inputs), route, notes, recorded_flags,
                     state=ProcessState.starting(options))
    if graphs == "all":
        _simulate_every_graph(sim, progress, on_result)
    else:
        _simulate_the_call(sim, target, move_devices)
    return sim


def _simulate_every_graph(sim: Simulation, progress, on_result) -> None:
    """``graphs="all"``: every graph through the pipeline, each given away to the passes."""
    n = len(sim.graphs)
    for i, (_, g, stage) in enumerate(sim.graphs):
        if progress and n > 1:
            progress("graph", i, n)
        res = passes.run_pipeline(g, replace(sim.options, input_stage=stage), sim.state, own=True)
        if i == sim.main:
            res.cluster.notes[:0] = sim.notes
        sim.results[i] = res
        if on_result is not None:
            on_result(sim, i, res)


def _simulate_the_call(sim: Simulation, target, move_devices: bool) -> None:
    """``graphs="main"``: the graphs TF instantiated before the call's own advance the process's
    counter (without the what-if knobs: they are about the call's graph); the call's graph runs
    on a copy of its pass input, which is kept (``input_snapshot``)."""
    options = sim.options
    for _, before, stage in sim.graphs[:sim.main]:
        passes.run_pipeline(before, replace(options, input_stage=stage, until="mark", explain_cycles=False,
                                            exclude_ops=(), force_compilable=()), sim.state)
    label, g, stage = sim.graphs[sim.main]
    if sim.route is not None:
        options = replace(options, input_stage=stage, cluster_number_start=sim.state.counters.get(0, 0))
    # the passes annotate NodeDefs in place: keep the input intact (for the caller and for whatif)
    snapshot = g.graphdef.SerializeToString()
    if g is target or sim.route is not None:
        source = g.source
        if g is not target:  # the route's own graph: dropped before its copy is made (issue 39)
            sim.graphs[sim.main] = (label, None, stage)
            g = None
        gd = protos.GraphDef()
        gd.ParseFromString(snapshot)
        g = Graph(gd, source=source, validate=False)
    if move_devices and options.device:
        from jitsim.rewrites.placement import replace_devices

        with simulating(options.tf_version):  # the kernels of the simulated release
            g = replace_devices(g, options.device)
    if options.explain_cycles is None:
        options = replace(options, explain_cycles=len(g) <= AUTO_EXPLAIN_CYCLES_NODES)
    sim.options = options
    sim.graphs[sim.main] = (label, g, stage)
    sim.input_snapshot = snapshot
    sim.results[sim.main] = passes.run_pipeline(g, options, sim.state)
