"""What the JIT does at run time: per cluster, its signature at each step and TF's decision.

:func:`runtime` takes the pipeline's result (:class:`~jitsim.passes.pipeline.PipelineResult`) simulated up to
``build-xla-ops`` (the clusters TF compiles, their functions' arguments as
``EncapsulateSubgraphs`` ordered them, each cluster's lazy/strict mode from ``BuildXlaOps``)
and, optionally, a shape stream (:mod:`jitsim.runtime.stream`). For each step it propagates
the step's input shapes through the graph before encapsulation (:mod:`jitsim.runtime.propagate`)
and builds each compiled unit's signature the way ``DeviceCompilationClusterSignature::Build``
does: the function, then per argument its dtype and shape (ordinary arguments and resources)
or its value (compile-time-constant arguments). The signatures then go through TF's policy
(:mod:`jitsim.runtime.policy`).

Compiled units:

* ``auto``: every auto-cluster (``_XlaCompile``/``_XlaRun``, lazy unless
  ``--tf_xla_enable_lazy_compilation=false`` or the device always compiles);
* ``must-compile``: every ``tf.function(jit_compile=True)`` called outside the auto-clusters
  (a ``PartitionedCall`` with ``_XlaMustCompile``): TF runs it as ``XlaLaunch``, strict, its
  constant arguments those its body needs at compile time. TF keys compile stats and the
  cache by function, so all call sites of one function are one unit (one execution per site).

Assumptions, stated in :attr:`RuntimeResult.notes`: every unit runs once per step (units
inside a loop body or an untaken branch are not counted differently); a value jitsim cannot
compute (it depends on tensor contents) is *data-dependent* and taken to change every step
unless the stream states it.

Without a stream, :func:`runtime` gives the static answer: each argument dimension and
constant value that can vary, and which input dimensions it follows (found by changing one
unknown input dimension at a time and recomputing the signatures).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jitsim.errors import GraphError, JitsimError
from jitsim.registry import protos
from jitsim.graph.model import parse_input
from jitsim.analyses.const_analysis import ConstAnalysis
from jitsim.analyses.shape_inference import recorded
from jitsim.graph.tfgraph import control_flow_info
from jitsim.runtime import policy as pol
from jitsim.opsets import PARTITIONED_CALL_OPS
from jitsim.runtime.propagate import Propagator, Seed
from jitsim.runtime.recompile import recompiles
from jitsim.defs import BUILD_XLA_OPS_PASS, CLUSTER_ATTR, MUST_COMPILE_ATTR
from jitsim.passes.pipeline import ENCAPSULATE_SUBGRAPHS

SCHEMA = "jitsim.runtime/1"
DT_RESOURCE = 20
# the unknown input dimensions take these sizes in the static analysis (distinct, so that a
# dimension's origin is unambiguous), then each one in turn the size + 1
STATIC_SIZES = (3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47)


@dataclass
class UnitArg:
    position: int
    name: str
    kind: str  # constant | parameter | resource
    dtype: int
    source: tuple  # (node, port) in the graph before encapsulation

    def to_dict(self) -> dict:
        return {"position": self.position, "name": self.name, "kind": self.kind,
                "dtype": protos.dtype_name(self.dtype), "source": f"{self.source[0]}:{self.source[1]}"}


@dataclass
class Unit:
    """One compiled unit: an auto-cluster or a must-compile call."""

    name: str  # TF's cluster function name (auto) / the call node (must-compile)
    kind: str  # auto | must-compile
    function: str
    mode: str  # lazy | strict
    nodes: list
    args: list
    mode_reason: str = ""
    loop_frame: str | None = None  # the while loop whose body holds the unit (runs per iteration)
    sites: list = field(default_factory=list)  # every call site's args (a must-compile function called twice)
    inside: str | None = None  # a must-compile call inside this auto-cluster: runs on its fallbacks only

    def __post_init__(self):
        if not self.sites:
            self.sites = [self.args]


@dataclass
class InputSpec:
    name: str  # the input node
    aliases: tuple  # other names the stream may use (signature name, node:0)
    dtype: int
    shape: tuple | None  # static shape (-1 unknown dims), None: unknown rank

    def to_dict(self) -> dict:
        return {"name": self.name, "aliases": list(self.aliases), "dtype": protos.dtype_name(self.dtype),
                "shape": None if self.shape is None else [None if d < 0 else d for d in self.shape]}


@dataclass
class UnitResult:
    unit: Unit
    signatures: list = field(default_factory=list)  # per step: the signature (tuple of arg parts)
    data_dependent: dict = field(default_factory=dict)  # arg position -> sources (why unknown)
    policy: pol.ClusterPolicy | None = None
    varies: list = field(default_factory=list)  # static answer
    recompiles_with: list = field(default_factory=list)  # with a stream: what changes its signature
    recompiles: list = field(default_factory=list)  # with a stream: per compile, what changed (runtime.recompile)

    def to_dict(self) -> dict:
        u = self.unit
        d = {"name": u.name, "kind": u.kind, "function": u.function, "mode": u.mode,
             "mode_reason": u.mode_reason, "loop_frame": u.loop_frame, "inside": u.inside, "nodes": list(u.nodes),
             "args": [a.to_dict() for a in u.args], "varies": self.varies}
        p = self.policy
        if p is None:
            d.update({"compiles": None, "compile_steps": None, "megamorphic_at_step": None, "fallback_steps": None,
                      "compiled_steps": None, "signatures": None})
            return d
        first, steps_of = {}, {}
        for e in p.history:
            first.setdefault(e.signature, e.step)
            steps_of.setdefault(e.signature, []).append(e.step)
        compiled_at = {e.signature: e.step for e in p.history if e.outcome == pol.COMPILED}
        sigs = []
        ordered = sorted(first.items(), key=lambda kv: kv[1])
        for i, (sig, step) in enumerate(ordered):
            base = ordered[0][0]
            changed = [self.unit.args[k].name for k, (a, b) in enumerate(zip(base, sig))
                       if a != b and k < len(self.unit.args)]
            sigs.append({"id": i, "first_step": step, "steps": len(steps_of[sig]),
                         "compiled_at_step": compiled_at.get(sig), "args": [_part_text(x) for x in sig],
                         "differs_from_first": changed})
        d.update({
            "compiles": p.compile_count,
            "compile_steps": p.steps(pol.COMPILED),
            "megamorphic_at_step": p.megamorphic_at_step,
            "fallback_steps": [e.step for e in p.history if not e.compiled_run],
            "compiled_steps": [e.step for e in p.history if e.compiled_run],
            "signatures": sigs,
            "data_dependent_args": {str(k): v for k, v in sorted(self.data_dependent.items())},
            "recompiles_with": list(self.recompiles_with),
            "recompiles": list(self.recompiles),
        })
        return d


@dataclass
class RuntimeResult:
    units: list  # UnitResult
    inputs: list  # InputSpec
    steps: int | None
    lazy_default: bool
    notes: list = field(default_factory=list)
    suggestions: list = field(default_factory=list)  # jitsim.runtime.advice, checked by re-simulation
    not_proposed: list = field(default_factory=list)  # suggestions simulated that gain nothing (not offered)
    rerun: object = field(default=None, repr=False)  # steps -> unit results for another stream (the planner)

    def unit(self, name: str) -> UnitResult:
        for u in self.units:
            if u.unit.name == name:
                return u
        raise KeyError(name)

    def to_dict(self) -> dict:
        return {"schema": SCHEMA, "steps": self.steps,
                "inputs": [i.to_dict() for i in self.inputs],
                "policy": {"lazy_compilation": self.lazy_default,
                           "megamorphic": f"more than {pol.COMPILE_THRESHOLD} compiles and fewer than "
                                          f"{pol.MIN_EXECUTIONS_PER_COMPILE} executions per compile (sticky)",
                           "lazy_threshold": pol.LAZY_REQUESTS},
                "clusters": [u.to_dict() for u in self.units], "suggestions": list(self.suggestions),
                "not_proposed": list(self.not_proposed), "notes": list(self.notes)}


# -- signatures --------------------------------------------------------------------------

def _part_text(part) -> str:
    kind = part[0]
    if kind == "constant":
        _, dt, shape, vals = part
        return f"{protos.dtype_name(dt).removeprefix('DT_').lower()}{list(shape)} = {list(vals)}"
    if kind == "unknown":
        return f"data-dependent ({part[1]}) at step {part[2]}"
    _, dt, shape = part
    if kind == "resource":
        return f"resource (variable {list(shape)})"
    return f"{protos.dtype_name(dt).removeprefix('DT_').lower()} {list(shape)}"


def _signature(unit: Unit, st, step: int, dd: dict, args=None) -> tuple:
    parts = []
    for a in (unit.args if args is None else args):
        if a.kind == "resource":
            # a variable keeps its dtype and shape from step to step
            hs = st.inference.handle_shape(a.source) if st.inference is not None else None
            parts.append(("resource", a.dtype, tuple(hs) if hs is not None else ()))
            continue
        shape = st.shape(a.source)
        if shape is None or any(d < 0 for d in shape):
            srcs = tuple(st.shape_sources(a.source))
            why = "shape unknown from " + ", ".join(srcs or ["?"])
            dd.setdefault(a.position, why)
            parts.append(("unknown", why, step, srcs))
            continue
        if a.kind == "constant":
            v = st.value(a.source)
            if v is None:
                srcs = tuple(st.value_sources(a.source))
                why = "value depends on " + ", ".join(srcs or ["?"])
                dd.setdefault(a.position, why)
                parts.append(("unknown", why, step, srcs))
                continue
            parts.append(("constant", a.dtype, shape, tuple(v.reshape(-1).tolist())))
        else:
            parts.append(("parameter", a.dtype, shape))
    return tuple(parts)


# -- the units ---------------------------------------------------------------------------

def _units(pipeline, flat_nodes: dict, library) -> list[Unit]:
    enc = pipeline.stage_results.get(ENCAPSULATE_SUBGRAPHS)
    bx = pipeline.stage_results.get(BUILD_XLA_OPS_PASS)
    if enc is None or bx is None:
        raise JitsimError("the runtime simulation needs the clustering simulated up to build-xla-ops")
    units = []
    for name, dec in enc.decisions.items():
        b = bx.decisions.get(name)
        args = [UnitArg(a.position, a.name, "parameter" if a.kind == "normal" else a.kind, a.dtype,
                        _ref(a.source)) for a in sorted(dec.args, key=lambda a: a.position)]
        units.append(Unit(name, "auto", name, b.mode if b is not None else pol.LAZY, list(dec.members), args,
                          b.detail if b is not None else ""))
    ca = None
    # a must-compile call the auto-clustering put into a cluster: TF compiles the cluster; where
    # the cluster falls back (lazy compilation), TF's executor runs the cluster's function and
    # the call in it through XlaLaunch, a strict unit of its own (measured: jit_in_cluster)
    enclosing = {m: u.name for u in units for m in u.nodes}
    for nd in flat_nodes.values():
        if nd.op not in PARTITIONED_CALL_OPS:
            continue
        if not (MUST_COMPILE_ATTR in nd.attr and nd.attr[MUST_COMPILE_ATTR].b):
            continue
        inside = enclosing.get(nd.name)
        if inside is None and CLUSTER_ATTR in nd.attr:
            continue
        fname = nd.attr["f"].func.name
        ca = ca or ConstAnalysis(library)
        const = ca.function_const_args(fname) if fname in ca.fns else []
        fdef = ca.fns.get(fname)
        args = []
        data = [r for r in nd.input if not r.startswith("^")]
        for i, r in enumerate(data):
            dt = fdef.signature.input_arg[i].type if fdef is not None and i < len(fdef.signature.input_arg) else 0
            kind = "resource" if dt == DT_RESOURCE else "constant" if i < len(const) and const[i] else "parameter"
            arg_name = fdef.signature.input_arg[i].name if fdef is not None and i < len(fdef.signature.input_arg) \
                else f"arg{i}"
            args.append(UnitArg(i, arg_name, kind, dt, _ref(r)))
        same = next((u for u in units if u.kind == "must-compile" and u.function == fname and u.inside == inside),
                    None)
        if same is not None:
            # TF keeps compile stats and the cache per function: call sites of one function share them
            same.nodes.append(nd.name)
            same.sites.append(args)
            continue
        reason = "tf.function(jit_compile=True): XlaLaunch compiles every new signature at once"
        if inside is not None:
            reason += f"; inside {inside}, it runs only where {inside} falls back (TF runs the cluster's function)"
        units.append(Unit(nd.name, "must-compile", fname, pol.STRICT, [nd.name], args, reason, inside=inside))
    return units


def _runtime_flags(options, units, res) -> None:
    """XlaCompileOp's run-time flags: async compilation, always-defer (auto-clusters only)."""
    flags = options.flags  # parsed once, when the simulation's options were built
    for u in units:
        if u.kind != "auto" or u.mode == pol.STRICT:
            continue
        if flags.always_defer_compilation:
            u.mode, u.mode_reason = pol.DEFERRED, "--tf_xla_always_defer_compilation: _XlaCompile never compiles"
        elif flags.async_compilation:
            u.mode, u.mode_reason = pol.ASYNC, "--tf_xla_async_compilation: compiles are queued, executions fall back"
    if flags.async_compilation and any(u.mode == pol.ASYNC for u in units):
        res.notes.append("--tf_xla_async_compilation: a new signature's compile is queued and executions fall back "
                         "until it finishes; when is TF's timing (a compile takes ~0.1-1 s, a step may take "
                         "milliseconds): jitsim assumes it is done by the signature's next request, so its fallback "
                         "counts are a lower bound")


def _mark_loops(g, units) -> None:
    """Each unit's while-loop frame (TF's BuildControlFlowInfo), if its nodes are in one."""
    try:
        info, _ = control_flow_info(g)
    except GraphError:
        return
    frame = {n.name: info[n.id].frame_name for n in g.op_nodes()}
    for u in units:
        names = [frame.get(m) for m in u.nodes if frame.get(m)]
        if names:
            u.loop_frame = names[0]


def _ref(s: str) -> tuple:
    return parse_input(s)


# -- inputs ------------------------------------------------------------------------------

def _input_specs(prop: Propagator) -> list[InputSpec]:
    out = []
    for nd in prop.inputs():
        dt = nd.attr["T"].type if nd.op == "_Arg" else nd.attr["dtype"].type
        if dt == DT_RESOURCE:
            continue
        ok, shape = recorded(nd, 0)
        if not ok:
            if "shape" in nd.attr:
                sh = nd.attr["shape"].shape
                shape = None if sh.unknown_rank else tuple(d.size if d.size >= 0 else -1 for d in sh.dim)
            else:
                shape = None
        aliases = [f"{nd.name}:0"]
        if "_user_specified_name" in nd.attr:
            aliases.insert(0, nd.attr["_user_specified_name"].s.decode(errors="replace"))
        out.append(InputSpec(nd.name, tuple(a for a in aliases if a != nd.name), dt, shape))
    return out


def _seeds(step, inputs: list[InputSpec], prop: Propagator, path) -> dict:
    by_name = {}
    for spec in inputs:
        for n in (spec.name,) + spec.aliases:
            by_name.setdefault(n, spec)
    seeds, given = {}, set()
    where = f"line {step.line} (step {step.step})"
    for key, (shape, value) in step.entries.items():
        spec = by_name.get(key)
        if spec is not None:
            if spec.shape is not None and (len(spec.shape) != len(shape) or
                                           any(s >= 0 and s != d for s, d in zip(spec.shape, shape))):
                raise JitsimError(f"{where}: input {key!r} has shape {list(shape)}, but the call's signature says "
                                  f"{_shape_text(spec.shape)}: TF would refuse this call", path)
            seeds[(spec.name, 0)] = Seed(shape, value)
            given.add(spec.name)
            continue
        node, port = parse_input(key)
        if node not in prop.nodes:
            names = ", ".join(s.name for s in inputs) or "none"
            raise JitsimError(f"{where}: {key!r} is neither an input of the call (inputs: {names}) nor a node of "
                              "the graph", path)
        seeds[(node, port)] = Seed(shape, value)
    for spec in inputs:
        if spec.name in given:
            continue
        if spec.shape is None or any(d < 0 for d in spec.shape):
            raise JitsimError(f"{where}: input {spec.name!r} ({_shape_text(spec.shape)}) has unknown dimensions: "
                              "give its shape on every line", path)
        seeds[(spec.name, 0)] = Seed(spec.shape)
    return seeds


MAX_CACHED_STATES = 4096


def _dead(unit: Unit, st, args) -> bool:
    """Whether the unit's call (at the site with ``args``) gets a dead input (an untaken cond
    branch) this step."""
    if any(st.is_dead(a.source) for a in args):
        return True
    return unit.kind == "auto" and bool(unit.nodes) and all(m in st.dead_nodes for m in unit.nodes)


def _seeds_key(seeds: dict) -> tuple:
    return tuple(sorted((ref, sd.shape, None if sd.value is None else (str(sd.value.dtype), sd.value.tobytes()))
                        for ref, sd in seeds.items()))


def _shape_text(shape) -> str:
    if shape is None:
        return "unknown rank"
    return "[" + ", ".join("?" if d < 0 else str(d) for d in shape) + "]"


# -- the simulation ----------------------------------------------------------------------

def runtime(pipeline, options, steps=None, *, path=None) -> RuntimeResult:
    """The run-time prediction for ``pipeline`` (a :class:`~jitsim.passes.pipeline.
    PipelineResult` simulated up to build-xla-ops with ``options``: its run-time flags) and the
    shape stream ``steps`` (:func:`jitsim.runtime.stream.read_stream`), or the static answer
    when ``steps`` is None. ``path``: the stream's file, for error messages."""
    flat = pipeline.cluster.graph.to_graphdef()
    prop = Propagator(list(flat.node), flat.library)
    units = _units(pipeline, prop.nodes, flat.library)
    inputs = _input_specs(prop)
    lazy_default = not any(u.mode == pol.STRICT for u in units if u.kind == "auto") if units else True
    res = RuntimeResult([UnitResult(u) for u in units], inputs, None if steps is None else len(steps), lazy_default)
    _runtime_flags(options, units, res)
    _mark_loops(pipeline.cluster.graph, units)
    res.notes.append("a unit runs once per step, except in an untaken tf.cond branch (when the predicate has a "
                     "value) and in a while loop's body (once per iteration: counted from the loop's condition, or "
                     "stated in the stream)")
    loop_note = [u for u in units if u.loop_frame is not None]
    if steps is None:
        for u in loop_note:
            res.notes.append(f"{u.name} is inside the while loop {u.loop_frame!r}: TF runs it once per iteration "
                             "(with a stream, jitsim counts them from the loop's condition where it can; a line can "
                             f'also state them: {{"{u.loop_frame}": {{"iterations": 3}}}})')
        _static(res, prop)
        return res
    res.rerun = lambda other: _rerun(units, inputs, prop, other, path)
    unknown_switches: set = set()
    counted = _run_steps(res.units, inputs, prop, steps, path, unknown_switches=unknown_switches)
    if unknown_switches:
        res.notes.append("the predicate of cond switch(es) " + ", ".join(sorted(unknown_switches)[:5])
                         + " depends on data jitsim does not have: units behind them are counted as running every "
                         "step (give the predicate's input value in the stream)")
    for u in loop_note:
        if u.loop_frame not in counted:
            res.notes.append(f"{u.name} is inside the while loop {u.loop_frame!r}: TF runs it once per iteration "
                             "(every execution counts); jitsim could not count the iterations from the loop's "
                             "condition and the stream gives none "
                             f'({{"{u.loop_frame}": {{"iterations": N}}}}), so one per step was assumed')
    for r in res.units:
        for pos, why in sorted(r.data_dependent.items()):
            res.notes.append(f"{r.unit.name}: argument {r.unit.args[pos].name}: {why}; taken to change every step "
                             "(state it in the stream to fix it)")
    if any(len(set(r.signatures)) > 1 for r in res.units):
        from jitsim.runtime.advice import recompile_causes, suggestions

        _static(res, prop)
        causes = recompile_causes(res, steps)
        for r in res.units:
            r.recompiles_with = causes.get(r.unit.name, [])
        res.suggestions = suggestions(
            res, lambda st, mode=None, changed=None: _rerun(units, inputs, prop, st, path, mode, changed), steps,
            move_out=lambda u: _moved_out(u, prop))
    for r in res.units:
        r.recompiles = recompiles(r, steps, inputs)
    return res


def _rerun(units, inputs, prop, steps, path, mode=None, changed=None) -> list:
    """The units' results for another stream (or another mode, or ``changed``: unit name ->
    the unit as a suggestion would change it): what a suggestion would give."""
    results = [UnitResult((changed or {}).get(u.name, u)) for u in units]
    _run_steps(results, inputs, prop, steps, path, mode)
    return results


def _moved_out(unit: Unit, prop: Propagator) -> Unit | None:
    """``unit`` as it would be with its shape computation kept out of it: the member ops that
    compute from its compile-time-constant arguments (``Pack`` of a shape) and the first ops
    that read such a value as a compile-time-constant input (``Reshape``'s shape) run outside
    the cluster; those constants leave the signature, and the moved ops' outputs that the rest
    of the cluster reads come in as arguments (ordinary ones, keyed by shape; constants where
    the value is still needed as one). None when the unit has no constant argument or is not
    an auto-cluster."""
    from jitsim.registry.const_inputs import compile_time_const_input_indices

    consts = {a.source for a in unit.args if a.kind == "constant"}
    if unit.kind != "auto" or not consts:
        return None
    members = set(unit.nodes)
    const_refs = set(consts)
    moved: list = []
    for name in prop.order:
        if name not in members:
            continue
        nd = prop.nodes[name]
        data = [_ref(r) for r in nd.input if not r.startswith("^")]
        hit = [i for i, r in enumerate(data) if r in const_refs]
        if not hit:
            continue
        moved.append(nd)
        if set(hit) & set(compile_time_const_input_indices(nd)):
            continue  # reads the value as a compile-time constant: its outputs are ordinary tensors
        const_refs.update((name, p) for p in range(len(prop.types.outputs(nd) or [])))
    moved_names = {nd.name for nd in moved}
    args = [a for a in unit.args if a.kind != "constant"]
    pos = len(unit.args)
    for nd in moved:
        for port, dt in enumerate(prop.types.outputs(nd) or []):
            read = any(_ref(r) == (nd.name, port) for m in members - moved_names if m in prop.nodes
                       for r in prop.nodes[m].input if not r.startswith("^"))
            if read:
                kind = "constant" if (nd.name, port) in const_refs else "parameter"
                args.append(UnitArg(pos, f"{nd.name}:{port}", kind, dt, (nd.name, port)))
                pos += 1
    return Unit(unit.name, unit.kind, unit.function, unit.mode, [m for m in unit.nodes if m not in moved_names],
                args, unit.mode_reason, unit.loop_frame)


def _run_steps(results, inputs, prop, steps, path, mode=None, unknown_switches=None) -> set:
    """Feed ``steps`` to fresh policies of ``results`` (``mode``: every unit's mode, or each
    unit's own); returns the loop frames whose iterations the stream gave."""
    from jitsim.runtime import loops

    units = [r.unit for r in results]
    for r in results:  # ``mode`` changes the auto-clusters' mode; must-compile calls stay strict
        r.policy = pol.ClusterPolicy(mode=mode if mode and r.unit.kind == "auto" else r.unit.mode)
    frames = sorted({u.loop_frame for u in units if u.loop_frame is not None})
    conds = loops.frames(prop.nodes) if frames else {}
    counted = set()
    states: dict = {}  # one propagation per distinct step input
    for step in steps:
        for name in step.iterations or {}:
            if name not in frames:
                raise JitsimError(f"line {step.line} (step {step.step}): {name!r} is not a while loop holding a "
                                  f"compiled unit (loops: {', '.join(frames) or 'none'})", path)
        seeds = _seeds(step, inputs, prop, path)
        key = _seeds_key(seeds)
        st = states.get(key)
        if st is None:
            st = prop.run(seeds)
            if len(states) < MAX_CACHED_STATES:
                states[key] = st
        if unknown_switches is not None:
            unknown_switches.update(st.unknown_switches)
        trips = st.trip_counts
        if trips is None:
            trips = st.trip_counts = {f: loops.trip_count(prop.nodes, prop.types, c, st, conds) for f, c in conds.items()
                                      if f in frames}
        fallbacks: dict[str, int] = {}  # auto-cluster -> its executions that fell back this step
        for r in results:
            times = 1
            frame = r.unit.loop_frame
            if frame is not None and frame in (step.iterations or {}):
                times = step.iterations[frame]
                counted.add(frame)
            elif frame is not None and trips.get(frame) is not None:
                times = trips[frame]
                counted.add(frame)
            if r.unit.inside is not None:
                times = fallbacks.get(r.unit.inside, 0)  # the enclosing cluster ran its function
                if not times:
                    continue
            before = len(r.policy.history)
            for args in r.unit.sites:
                if _dead(r.unit, st, args):
                    continue  # in an untaken branch: TF's _XlaCompile never runs this step
                sig = _signature(r.unit, st, step.step, r.data_dependent, args)
                r.signatures.append(sig)
                for _ in range(times):
                    r.policy.execute(step.step, sig)
            fallbacks[r.unit.name] = sum(1 for e in r.policy.history[before:] if not e.compiled_run)
    return counted


def _static(res: RuntimeResult, prop: Propagator) -> None:
    """Which argument dims and constant values follow which input dims (one at a time)."""
    unknown = []  # (input, dim)
    base_shapes = {}
    k = 0
    for spec in res.inputs:
        if spec.shape is None:
            res.notes.append(f"input {spec.name} has unknown rank: its dimensions are not traced")
            continue
        shape = []
        for i, d in enumerate(spec.shape):
            if d < 0:
                shape.append(STATIC_SIZES[k % len(STATIC_SIZES)] + 100 * (k // len(STATIC_SIZES)))
                unknown.append((spec.name, i))
                k += 1
            else:
                shape.append(d)
        base_shapes[spec.name] = tuple(shape)

    def run(shapes):
        seeds = {(n, 0): Seed(s) for n, s in shapes.items()}
        st = prop.run(seeds)
        dd = {}
        return {r.unit.name: _signature(r.unit, st, 0, dd) for r in res.units}, dd

    base, _ = run(base_shapes)
    follows: dict = {}  # (unit, position, what) -> [input dims]
    for name, dim in unknown:
        shapes = dict(base_shapes)
        s = list(shapes[name])
        s[dim] += 1
        shapes[name] = tuple(s)
        sigs, _ = run(shapes)
        for r in res.units:
            a_parts, b_parts = base[r.unit.name], sigs[r.unit.name]
            for a, pa, pb in zip(r.unit.args, a_parts, b_parts):
                if pa == pb or pa[0] == "unknown":
                    continue
                if a.kind == "constant" and pa[0] == "constant" and pb[0] == "constant" and pa[2] == pb[2]:
                    what = "value"
                elif pa[0] == pb[0] and len(pa[2]) == len(pb[2]):
                    dims = [i for i, (x, y) in enumerate(zip(pa[2], pb[2])) if x != y]
                    what = "shape" + "".join(f"[{i}]" for i in dims) if len(dims) == 1 else \
                        "shape[" + ",".join(map(str, dims)) + "]"
                else:
                    what = "shape"
                follows.setdefault((r.unit.name, a.position, what), []).append(f"{name}.shape[{dim}]")
    input_nodes = {f"{nd.op} '{nd.name}'": nd.name for nd in prop.inputs()}
    for r in res.units:
        for a, part in zip(r.unit.args, base[r.unit.name]):
            if part[0] == "unknown":
                what = "value" if "value" in part[1] else "shape"
                srcs = part[3]
                if srcs and all(x in input_nodes for x in srcs):
                    # an input's contents (an integer input feeding shape arithmetic): the stream states it
                    r.varies.append({"arg": a.name, "position": a.position, "what": what,
                                     "follows": [f"value of {input_nodes[x]}" for x in srcs],
                                     "data_dependent": False, "why": part[1]})
                else:
                    r.varies.append({"arg": a.name, "position": a.position, "what": what, "follows": [],
                                     "data_dependent": True, "why": part[1]})
        for (uname, pos, what), srcs in follows.items():
            if uname == r.unit.name:
                a = r.unit.args[pos]
                r.varies.append({"arg": a.name, "position": pos, "what": what, "follows": srcs,
                                 "data_dependent": False, "why": ""})
        r.varies.sort(key=lambda v: (v["position"], v["what"]))


def recompiles_per(r: UnitResult) -> list[str]:
    """The input dims whose every distinct value (combination) makes a new signature."""
    out = []
    for v in r.varies:
        for s in v["follows"]:
            if s not in out:
                out.append(s)
    return out
