"""One entry for whatever a user holds: what a path is, and how jitsim gets TF's pass input.

TF clusters the graph its function runtime (or session) built for a call: functions
inlined, functional ops lowered, nodes placed, Grappler run. jitsim is exact from that graph.
:func:`pass_inputs` picks the route by what ``target`` is (decided from content, never from
a file name) and says which it took, and how exact the result is, in :attr:`Route.line`:

================================  ==============================================================
target                            route
================================  ==============================================================
TF dump of the pass input         ``dump``: exact (TF's own graph; ``before_mark`` dumps have
(``before_clone_...``/            their constant clones folded back)
``before_mark_...``, any name)
TF dump / harvest directory       ``dump``: exact, every graph in TF's order
SavedModel, ``.keras`` file,      ``tf-capture`` when TensorFlow is importable: one TF run of the
GraphDef, ``.py`` program,        call that compiles nothing (``--tf_xla_clustering_fuel=0``),
live tf.function/Keras model      cached by content (:mod:`jitsim.frontend.capture`): exact
SavedModel, GraphDef              ``no-tf`` without TensorFlow (or ``tf="never"``): TF's
                                  rewrites before clustering simulated
                                  (:mod:`jitsim.frontend.prepare`): approximate, with the
                                  ways it may differ listed per graph
================================  ==============================================================
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from jitsim.errors import HarvestError, JitsimError

TF_MODES = ("auto", "always", "never")
KIND_WORDS = {
    "dump-file": "TF dump of the pass input",
    "dump-dir": "TF dump directory",
    "saved_model": "SavedModel",
    "keras": ".keras model file",
    "graphdef": "GraphDef",
    "program": "Python program",
    "function": "tf.function / Keras model",
}


@dataclass
class Route:
    """How jitsim got TF's pass input: ``kind`` (what the target is), ``method`` (``dump``,
    ``tf-capture`` or ``no-tf``), ``exact``, and ``detail`` (what was done, its cost)."""

    kind: str
    method: str
    exact: bool
    detail: str

    @property
    def line(self) -> str:
        """One line for people: what the input is, the route, how exact."""
        return f"input: {KIND_WORDS.get(self.kind, self.kind)}; {'exact' if self.exact else 'approximate'}: {self.detail}"

    def to_dict(self) -> dict:
        return {"kind": self.kind, "method": self.method, "exact": self.exact, "detail": self.detail}


@dataclass
class PassInput:
    """TF's pass input for every graph of the target, in TF's order: ``graphs`` holds
    ``(label, Graph, input_stage)``; ``main`` indexes the graph of the call itself (the one
    users care about; the others are what TF instantiated around it, e.g. variable reads);
    ``notes`` apply to the main graph."""

    route: Route
    graphs: list = field(default_factory=list)
    main: int = 0
    notes: list[str] = field(default_factory=list)
    recorded_flags: str | None = None
    op_libraries: tuple = ()  # ops of libraries TF's run loaded (a capture or harvest's op_defs.pb)
    session_jit: bool | None = None  # a live object's process: tf.config.optimizer.set_jit on/off, None: never set

    @property
    def main_graph(self):
        return self.graphs[self.main][1]


def have_tensorflow() -> bool:
    return importlib.util.find_spec("tensorflow") is not None


def target_kind(target) -> str:
    """What ``target`` is: ``dump-dir``, ``saved_model``, ``keras``, ``program``, ``graphdef``
    (a GraphDef file; whether it is a TF dump is decided from its content later), or
    ``function`` for a live TF object (or a function bundle directory)."""
    from jitsim.crosscheck.harvest import FUNCTION_BUNDLE
    from jitsim.crosscheck.harvest import target_kind as harvest_kind
    from jitsim.graph.io import is_saved_model_dir

    if not isinstance(target, (str, Path)):
        return "function"
    p = Path(target)
    if p.is_dir() and not is_saved_model_dir(p) and not (p / FUNCTION_BUNDLE).exists():
        return "dump-dir"
    if p.name in ("saved_model.pb", "saved_model.pbtxt"):
        return "saved_model"
    return harvest_kind(p)


def pass_inputs(target, *, flags: str, tf: str = "auto", signature: str | None = None, device: str | None = None,
                input_stage: str | None = None, cache_dir=None, progress=None) -> PassInput:
    """TF's pass input for ``target``; see :func:`_pass_inputs`. Errors name the target."""
    try:
        return _pass_inputs(target, flags=flags, tf=tf, signature=signature, device=device, input_stage=input_stage,
                            cache_dir=cache_dir, progress=progress)
    except JitsimError as e:
        if e.path is None and isinstance(target, (str, Path)):
            e.path = str(target)
        raise


def _pass_inputs(target, *, flags: str, tf: str, signature: str | None, device: str | None,
                 input_stage: str | None, cache_dir, progress) -> PassInput:
    """TF's pass input for ``target`` (a path or a live TF object); see the module docstring.

    ``flags``: the TF_XLA_FLAGS the simulation will use (a capture runs TF with them, fuel 0);
    ``tf``: ``auto`` (capture with TF when it is importable), ``always`` or ``never``;
    ``device``: placement for the TF-free route (default CPU); ``input_stage``: what a graph file
    is, taken as it is without a capture or simulated rewrites (``graphdef``: approximate)."""
    from jitsim.graph.io import load, load_dump_dir
    from jitsim.passes.pipeline import RAW, detect_input_stage

    if tf not in TF_MODES:
        raise JitsimError(f"--tf must be one of {', '.join(TF_MODES)}, not {tf!r}")
    kind = target_kind(target)
    if kind == "dump-dir":
        from jitsim.crosscheck.fidelity import recorded_flags

        pairs = load_dump_dir(target, stage=input_stage, validate=False)
        graphs = [(f"graph {rec.id} ({Path(g.source).name})", g, input_stage or rec.input_stage) for rec, g in pairs]
        main = max(range(len(graphs)), key=lambda i: len(graphs[i][1]))
        return PassInput(Route(kind, "dump", True, f"TF's own dumps of the pass input, {len(graphs)} graphs in TF's "
                               "order, one simulated process"), graphs, main, recorded_flags=recorded_flags(Path(target)),
                         op_libraries=_recorded_libraries(target))
    graph = None
    if kind == "graphdef":
        graph = load(target, validate=True, check_ops=True)
        if input_stage is not None:  # the user says what the graph is: take it as it is
            exact = input_stage != RAW
            detail = (f"taken as TF's pass input (--input-stage {input_stage})" if exact else
                      "taken as it is (--input-stage graphdef): not TF's pass input, so approximate")
            return PassInput(Route("graphdef", "as-given", exact, detail), [(Path(target).name, graph, input_stage)])
        stage = detect_input_stage(graph)
        if stage != RAW:
            words = "folded back TF's constant clones, " if stage != "before_clone_constants_for_better_clustering" else ""
            return PassInput(Route("dump-file", "dump", True, f"TF's own graph ({stage}; {words}TF's node and edge ids "
                                   "reconstructed)"), [(Path(target).name, graph, stage)])
    use_tf = tf == "always" or (tf == "auto" and have_tensorflow())
    fallback = None
    if use_tf:
        if not have_tensorflow():
            raise JitsimError("--tf always: TensorFlow is not importable here (pip install 'jitsim[tf]')")
        try:
            return _captured(target, kind, flags, signature, cache_dir, progress)
        except HarvestError as e:
            # TF cannot run the call (an op library it lacks, inputs it cannot generate...): in
            # auto mode a SavedModel or GraphDef is still predicted, without TF, and says why
            if tf == "always" or kind not in ("saved_model", "graphdef"):
                raise
            fallback = f"TensorFlow could not run the call ({_short(e.message)}): predicted without TensorFlow"
    if kind == "function":  # a live object with tf="never": its function body, predicted without running TF
        return _prepared(_function_graph(target), kind, device)
    if kind in ("program", "keras"):
        what = {"program": "a Python program runs only under TensorFlow",
                "keras": "a .keras file holds a model's configuration and weights, not a graph: tracing it needs "
                         "TensorFlow and Keras"}[kind]
        raise JitsimError(f"{what} (pip install 'jitsim[tf]'), or give a SavedModel or GraphDef to predict without "
                          "TensorFlow", target)
    if graph is None:
        graph = load(target, signature=signature, validate=True, check_ops=True)
    pin = _prepared(graph, kind, device)
    if fallback:
        pin.notes.insert(0, fallback)
        pin.route.detail = fallback + "; " + pin.route.detail
    return pin


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _captured(target, kind: str, flags: str, signature, cache_dir, progress) -> PassInput:
    from jitsim.frontend.capture import capture
    from jitsim.graph.io import load_dump_dir

    cap = capture(target, flags=flags, signature=signature, cache_dir=cache_dir, progress=progress)
    pairs = load_dump_dir(cap.dump_dir, validate=False)
    graphs = [(f"graph {rec.id} ({Path(g.source).name})", g, rec.input_stage) for rec, g in pairs]
    if not graphs:
        raise JitsimError("TensorFlow's run of the call wrote no pass input (auto-clustering never ran)", target)
    ids = [rec.id for rec, _ in pairs]
    main = ids.index(cap.main_graph) if cap.main_graph in ids else max(range(len(graphs)), key=lambda i: len(graphs[i][1]))
    cost = "served from jitsim's cache" if cap.cached else f"{cap.seconds:.1f} s"
    sig = f" (signature {signature or 'serving_default'})" if cap.kind == "saved_model" else ""
    detail = (f"TensorFlow built the pass input{sig} in one run of the call that compiled nothing "
              f"(--tf_xla_clustering_fuel=0; {cost}; {cap.dump_dir})")
    return PassInput(Route(cap.kind if kind != "function" else "function", "tf-capture", True, detail), graphs, main,
                     notes=list(cap.notes), op_libraries=_recorded_libraries(cap.dump_dir),
                     session_jit=getattr(cap, "session_jit", None))


def _recorded_libraries(root) -> tuple:
    from jitsim.registry.custom_ops import harvest_op_library

    lib = harvest_op_library(root)
    return (lib,) if lib is not None else ()


def _prepared(graph, kind: str, device: str | None) -> PassInput:
    from jitsim.frontend.prepare import prepare_without_tf
    from jitsim.passes.pipeline import RAW

    prep = prepare_without_tf(graph, device=device or "cpu")
    done = ", ".join(f"{name} {count}" for name, count, _ in prep.steps if count) or "nothing to rewrite"
    detail = (f"TensorFlow's rewrites before clustering simulated without TensorFlow ({done}); the notes say how "
              "this may differ from TF")
    return PassInput(Route(kind, "no-tf", False, detail), [(Path(graph.source or "graph").name, prep.graph, RAW)],
                     notes=list(prep.caveats))


def _function_graph(obj):
    """The body of a live tf.function / ConcreteFunction / Keras model's call as TF's function
    runtime instantiates it (``_Arg``/``_Retval``, library attached), before any rewrite."""
    from jitsim.frontend.capture import concrete_function
    from jitsim.graph import protos
    from jitsim.graph.functions import function_to_graphdef
    from jitsim.graph.model import Graph

    cf = concrete_function(obj)
    lib = protos.FunctionDefLibrary()
    lib.ParseFromString(cf.graph.as_graph_def().library.SerializeToString())
    fdef = protos.FunctionDef()
    fdef.ParseFromString(cf.function_def.SerializeToString())
    if fdef.signature.name not in {f.signature.name for f in lib.function}:
        lib.function.add().CopyFrom(fdef)
    gd = function_to_graphdef(lib, fdef.signature.name, source=f"tf.function {fdef.signature.name}")
    gd.library.CopyFrom(lib)
    return Graph(gd, source=f"<tf.function {fdef.signature.name}>")
