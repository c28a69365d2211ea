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

A GraphDef or MetaGraphDef that a session runs (no ``_Arg``/``_Retval``) is clustered for one
``sess.run`` (:mod:`jitsim.frontend.session_call`): the user's ``fetch``/``feed``, else a
call assumed by a documented rule. Both routes run that call (TF's capture makes exactly that
``sess.run``; the TF-free route simulates the session's feed/fetch rewrite and pruning), the
route line states it, and an assumed call is never labelled exact.

A Keras model (a ``.keras`` file or a live model) is called with one concrete shape per input
(:mod:`jitsim.tfprocess.keras_call`): the user's ``input_shapes`` (``--input-shape``), else the
model's with unknown dimensions set to 2. The route line states the call's shapes and which
were assumed; the result stays exact for that call, and the line says how to state the real
one. A SavedModel's signature call goes through TF's signature wrapper (one
``StatefulPartitionedCall`` more than calling the model, node names prefixed
``StatefulPartitionedCall/``): the route line says so (:data:`SAVED_MODEL_NOTE`), since the
SavedModel and the ``.keras`` file of one model may cluster differently.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

from jitsim.errors import HarvestError, JitsimError
from jitsim.defs import BEFORE_CLONE_DUMP

TF_MODES = ("auto", "always", "never")
KIND_WORDS = {
    "dump-file": "TF dump of the pass input",
    "dump-dir": "TF dump directory",
    "saved_model": "SavedModel",
    "keras": ".keras model file",
    "graphdef": "GraphDef",
    "metagraph": "MetaGraphDef",
    "program": "Python program",
    "function": "tf.function / Keras model",
}


SAVED_MODEL_NOTE = ("a SavedModel's signature call goes through TF's signature wrapper: one StatefulPartitionedCall "
                    "(PartitionedCall without variables) more than calling the Keras model or its .keras file, "
                    "node names prefixed StatefulPartitionedCall/ (or PartitionedCall/), so the SavedModel and the "
                    ".keras file of one model may cluster differently")


@dataclass
class Route:
    """How jitsim got TF's pass input: ``kind`` (what the target is), ``method`` (``dump``,
    ``tf-capture`` or ``no-tf``), ``exact``, and ``detail`` (what was done, its cost);
    ``call``: a session graph's :class:`~jitsim.frontend.session_call.SessionCall`;
    ``inputs``: a Keras model's call, per input (:func:`jitsim.tfprocess.keras_call.keras_inputs`)."""

    kind: str
    method: str
    exact: bool
    detail: str
    call: object = None  # a session graph's SessionCall
    inputs: list | None = None  # a Keras model's call: name, dtype, shape, given, assumed dims per input
    # a TF capture: what it cost this time (0.0: served from jitsim's cache). Said on the text line;
    # in JSON only as the timing `capture_seconds` (--timings), so JSON is the same run to run
    capture_seconds: float | None = None
    # what the simulation found that the route's reader must know (e.g. releases that cluster the
    # graph differently: jitsim.passes.releases)
    extra_notes: list = field(default_factory=list)
    # the no-tf route: the rewrites the simulation could not be sure of (Prepared.uncertain)
    uncertain: list = field(default_factory=list)
    # the no-tf route: a node of the input a simulated rewrite took into another (not in JSON)
    provenance: dict = field(default_factory=dict)

    @property
    def shapes_assumed(self) -> bool:
        """Whether the Keras call has dimensions jitsim set to 2 (the user did not state them)."""
        from jitsim.tfprocess.keras_call import any_assumed

        return any_assumed(self.inputs)

    @property
    def notes(self) -> list[str]:
        """What a user should know about the route beyond its detail (a SavedModel's wrapper)."""
        return ([SAVED_MODEL_NOTE] if self.kind == "saved_model" else []) + list(self.extra_notes)

    @property
    def line(self) -> str:
        """One line for people: what the input is, the route, how exact (and the call: a session
        graph's, a Keras model's shapes; a SavedModel's signature wrapper)."""
        text = f"input: {KIND_WORDS.get(self.kind, self.kind)}; {'exact' if self.exact else 'approximate'}: {self.detail}"
        if self.call is not None:
            text += f"; the call: {self.call.describe()}"
            if not self.call.exact:
                hint = getattr(self.call, "hint", None) or "name the call's fetches with --fetch"
                text += f" ({hint} for an exact answer)"
        if self.inputs is not None:
            from jitsim.tfprocess.keras_call import ASSUMED_DIM, HOW_TO_SET, describe_inputs

            text += f"; the call: {describe_inputs(self.inputs)}"
            if self.shapes_assumed:
                text += (f"; the model's unknown dims were assumed to be {ASSUMED_DIM}, so this is exact for that "
                         f"call only: state the real shapes with {HOW_TO_SET}")
        for note in self.notes:
            text += f"; note: {note}"
        if self.uncertain:
            where = ", ".join(f"{u['rewrite']} at {u['count']} node{'s' if u['count'] != 1 else ''} (e.g. {u['nodes'][0]})"
                              for u in self.uncertain)
            text += f"; may differ from TF where the simulation was not sure: {where} (--format json lists them)"
        return text

    @property
    def cost(self) -> str:
        """What the capture cost this time, for the line a command prints (never in notes or
        JSON, which stay the same from run to run): ``" (12.3 s)"``, ``" (served from jitsim's
        cache)"``, or ``""`` without a capture."""
        if self.capture_seconds is None:
            return ""
        return " (served from jitsim's cache)" if self.capture_seconds == 0.0 else f" ({self.capture_seconds:.1f} s)"

    def to_dict(self) -> dict:
        out = {"kind": self.kind, "method": self.method, "exact": self.exact, "detail": self.detail}
        if self.capture_seconds is not None:
            out["capture_seconds"] = round(self.capture_seconds, 3)
        if self.call is not None:
            out["call"] = self.call.to_dict()
        if self.inputs is not None:
            out["inputs"] = [dict(d) for d in self.inputs]
            out["shapes_assumed"] = self.shapes_assumed
        if self.notes:
            out["notes"] = self.notes
        if self.uncertain:
            out["uncertain"] = [dict(u) for u in self.uncertain]
        return out


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
    from jitsim.tfprocess.targets import FUNCTION_BUNDLE
    from jitsim.tfprocess.targets import target_kind as harvest_kind
    from jitsim.graph.io import is_saved_model_dir

    if not isinstance(target, (str, Path)):
        return "function"
    p = Path(target)
    if p.is_dir() and not is_saved_model_dir(p) and not (p / FUNCTION_BUNDLE).exists():
        return "dump-dir"
    if p.name in ("saved_model.pb", "saved_model.pbtxt"):
        from jitsim.graph.io import holds_graph

        if not (p.is_file() and holds_graph(p)):  # a graph saved under that name is read as one (io.load says so)
            return "saved_model"
    return harvest_kind(p)


def pass_inputs(target, *, flags: str, tf: str = "auto", signature: str | None = None, device: str | None = None,
                input_stage: str | None = None, cache_dir=None, progress=None, fetch=(), feed=(),
                input_shapes=None, input_signature=None, captured=None, tf_version=None) -> PassInput:
    """TF's pass input for ``target``; see :func:`_pass_inputs`. Errors name the target.
    ``tf_version``: the release the user asked for (``--tf-version``), for the TF-free route's
    release-dependent rewrites."""
    from jitsim.tfprocess.keras_call import normalize_input_shapes

    try:
        shapes = normalize_input_shapes(input_shapes, input_signature)
        return _pass_inputs(target, flags=flags, tf=tf, signature=signature, device=device, input_stage=input_stage,
                            cache_dir=cache_dir, progress=progress, fetch=tuple(fetch), feed=tuple(feed),
                            input_shapes=shapes, captured=tuple(captured) if captured else None,
                            tf_version=tf_version)
    except JitsimError as e:
        if e.path is None and isinstance(target, (str, Path)):
            e.path = str(target)
        raise


def check_route_options(kind: str, *, signature=None, fetch=(), feed=(), input_shapes=None, captured=None,
                        what=None) -> None:
    """Options that state the call of one kind of target, refused (one line) for another:
    ``--signature`` (a SavedModel's), ``--fetch``/``--feed`` (a TF1 graph's session call),
    ``--input-shape`` (a Keras model's). Every simulating command checks them here."""
    words = what or f"a {KIND_WORDS.get(kind, kind)}"
    if signature is not None and kind != "saved_model":
        raise JitsimError(f"--signature names a SavedModel's signature: it applies to a SavedModel, not to {words}")
    if (fetch or feed) and kind not in ("graphdef", "metagraph"):
        raise JitsimError("--fetch/--feed name a session call: they apply to a GraphDef or MetaGraphDef file that a "
                          f"tf.compat.v1.Session runs, not to {words}")
    if captured and kind != "graphdef":
        raise JitsimError(f"--captured names the tensors an exported tf.function graph captured: it applies to such "
                          f"a GraphDef, not to {words}")
    if input_shapes and kind not in ("keras", "function"):
        hint = " (a SavedModel signature's shapes are the signature's)" if kind == "saved_model" else ""
        raise JitsimError(f"--input-shape states a Keras model's call (or the shape of a variable an exported "
                          f"tf.function graph captured): it applies to a .keras file, a Keras model or such a graph, "
                          f"not to {words}{hint}")


def _pass_inputs(target, *, flags: str, tf: str, signature: str | None, device: str | None,
                 input_stage: str | None, cache_dir, progress, fetch=(), feed=(), input_shapes=(),
                 captured=None, tf_version=None) -> PassInput:
    """TF's pass input for ``target`` (a path or a live TF object); see the module docstring.

    ``flags``: the TF_XLA_FLAGS the simulation will use (a capture runs TF with them, fuel 0);
    ``tf``: ``auto`` (capture with TF when it is importable), ``always`` or ``never``;
    ``device``: placement for the TF-free route (default CPU); ``input_stage``: what a graph file
    is, taken as it is without a capture or simulated rewrites (``graphdef``: approximate);
    ``fetch``/``feed``: a session graph's call (:func:`jitsim.frontend.session_call.session_call`);
    ``input_shapes``: a Keras model's call (normalized, :func:`jitsim.tfprocess.keras_call.
    normalize_input_shapes`)."""
    from jitsim.graph.io import load, load_dump_dir
    from jitsim.passes.pipeline import RAW, detect_input_stage

    if tf not in TF_MODES:
        raise JitsimError(f"--tf must be one of {', '.join(TF_MODES)}, not {tf!r}")
    kind = target_kind(target)
    what = None
    if kind == "function" and not _is_keras_model(target):
        what, kind_for_shapes = "a tf.function (its call is its input_signature)", "tf.function"
    else:
        kind_for_shapes = kind
    check_route_options(kind, signature=signature, fetch=fetch, feed=feed, captured=captured)
    if kind != "graphdef":  # a GraphDef's is checked once it is read (an exported function takes them)
        check_route_options(kind_for_shapes, input_shapes=input_shapes, what=what)
    if kind == "saved_model":  # one rule for both routes, before either starts (never TF's init entry)
        from jitsim.tfprocess.harvest import saved_model_signatures
        from jitsim.graph.io import check_signature_name

        root = Path(target).parent if Path(target).is_file() else Path(target)
        sigs = saved_model_signatures(root)
        if sigs or signature is not None:  # a TF1 SavedModel without signatures is its whole graph
            check_signature_name(sigs, signature, root)
    if kind == "dump-dir":
        from jitsim.crosscheck.fidelity import recorded_flags

        pairs = load_dump_dir(target, stage=input_stage, validate=False)
        graphs = [(f"graph {rec.id} ({Path(g.source).name})", g, input_stage or rec.input_stage) for rec, g in pairs]
        main = max(range(len(graphs)), key=lambda i: len(graphs[i][1]))
        return PassInput(Route(kind, "dump", True, f"TF's own dumps of the pass input, {len(graphs)} graphs in TF's "
                               "order, one simulated process"), graphs, main, recorded_flags=recorded_flags(Path(target)),
                         op_libraries=_recorded_libraries(target))
    graph = call = None
    if kind == "graphdef":
        from jitsim.frontend.exported_function import exported_function, is_function_export
        from jitsim.frontend.session_call import is_session_graph, session_call

        graph = load(target, validate=True, check_ops=True, pass_input=input_stage is not None)
        export = is_function_export(graph)
        if not export:  # only an exported function's call takes --input-shape (its variables' shapes), --captured
            check_route_options(kind, input_shapes=input_shapes)
            if captured:
                raise JitsimError("--captured names the tensors an exported tf.function graph captured, but this "
                                  "graph is not one (no placeholder carries _user_specified_name)")
        if input_stage is not None and (fetch or feed):
            raise JitsimError("--fetch/--feed make a session call of the graph; --input-stage takes the graph as "
                              "it is: give one or the other")
        if input_stage is not None:  # the user says what the graph is: take it as it is
            exact = input_stage != RAW
            detail = (f"taken as TF's pass input (--input-stage {input_stage})" if exact else
                      "taken as it is (--input-stage graphdef): not TF's pass input, so approximate")
            return PassInput(Route("graphdef", "as-given", exact, detail), [(Path(target).name, graph, input_stage)])
        stage = detect_input_stage(graph)
        if stage != RAW:
            words = "folded back TF's constant clones, " if stage != BEFORE_CLONE_DUMP else ""
            if fetch or feed:
                raise JitsimError("--fetch/--feed name a session call, but this is TF's dump of a call's graph "
                                  "(its feeds and fetches are already _Arg/_Retval nodes)")
            return PassInput(Route("dump-file", "dump", True, f"TF's own graph ({stage}; {words}TF's node and edge ids "
                                   "reconstructed)"), [(Path(target).name, graph, stage)])
        if tf == "never" or (tf == "auto" and not have_tensorflow()):
            from jitsim.memory import check_inlining_room

            # the TF-free route, which inlines every call: an input that cannot fit is refused
            # now, before the session call is worked out (prepare_without_tf checks again)
            check_inlining_room(graph)
        if export:
            if fetch or feed:
                raise JitsimError("--fetch/--feed name a session call, but this graph is a tf.function's graph "
                                  "(cf.graph.as_graph_def()): its call is the function's")
            call = exported_function(graph, input_shapes, captured)
        elif is_session_graph(graph):
            call = session_call(graph, fetch, feed)
        elif fetch or feed:
            raise JitsimError("--fetch/--feed name a session call, but this graph is a function body (it has "
                              "_Arg/_Retval nodes): its call is the function's")
        if graph.collections:
            kind = "metagraph"
    use_tf = tf == "always" or (tf == "auto" and have_tensorflow())
    fallback = None
    if use_tf:
        if not have_tensorflow():
            raise JitsimError("--tf always: TensorFlow is not importable here (pip install 'jitsim[tf]')")
        try:
            return _captured(target, kind, flags, signature, cache_dir, progress, call, input_shapes)
        except HarvestError as e:
            # TF cannot run the call (an op library it lacks, inputs it cannot generate...): in
            # auto mode a SavedModel or GraphDef is still predicted, without TF, and says why
            if tf == "always" or kind not in ("saved_model", "graphdef", "metagraph"):
                raise
            fallback = f"TensorFlow could not run the call: {why_tf_failed(e.message)}; predicted without TensorFlow"
    if kind == "function":  # a live object with tf="never": its function body, predicted without running TF
        from jitsim.frontend.capture import keras_model_inputs

        inputs = keras_model_inputs(target, input_shapes)
        pin = _prepared(_function_graph(target, input_shapes), kind, device, flags=flags, tf_version=tf_version)
        pin.route.inputs = inputs
        return pin
    if kind in ("program", "keras"):
        what = {"program": "a Python program runs only under TensorFlow",
                "keras": "a .keras file holds a model's configuration and weights, not a graph: tracing it needs "
                         "TensorFlow and Keras"}[kind]
        raise JitsimError(f"{what} (pip install 'jitsim[tf]'), or give a SavedModel or GraphDef to predict without "
                          "TensorFlow", target)
    if graph is None:
        graph = load(target, signature=signature, validate=True, check_ops=True)
    if graph.signature_io is not None:  # no one call computes the signature: prune the MetaGraph to it
        from jitsim.frontend.session_call import signature_call

        call = signature_call(graph, *graph.signature_io)
    pin = _prepared(graph, kind, device, call, flags=flags, tf_version=tf_version)
    if fallback:
        pin.notes.insert(0, fallback)
        pin.route.detail = fallback + "; " + pin.route.detail
    return pin


def _target_words(target) -> str:
    """What the user gave, as messages name it: the path as given, or a live object's kind."""
    if isinstance(target, (str, Path)):
        return str(target)
    name = getattr(target, "name", None) or getattr(target, "__name__", None) or type(target).__name__
    return f"<{type(target).__name__} {name}>"


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


# what a failed TF run's last error line means for the user, and what to do (first match wins)
_TF_FAILURES = (
    ("You must feed a value for placeholder", "the call needs a placeholder fed that it was not given (name it with "
     "--feed)"),
    ("Op type not registered", "TensorFlow here does not register an op the graph uses (install or import its op "
     "library; --op-defs describes it to jitsim)"),
    ("timed out", "the run took too long (the TensorFlow route's time limit)"),
    ("uninitialized", "the call reads a variable nothing initialised"),
    ("KeyError: 20", "a resource input (a captured variable) cannot be fed from Python"),
    ("Graph execution error", "the call failed while running in TensorFlow"),
)


def what_ran(kind: str, run: dict, sig: str = "") -> str:
    """The route line's words for what a capture ran (``run``: the capture index's ``run``)."""
    if run.get("dry_run"):
        return (f"TensorFlow built the call's graph{sig} and its pass input, and ran none of it (a dry run: no op of "
                "the model executed, nothing compiled)")
    network = "no network" if run.get("network") == "isolated" else "network not isolated (the system refused it)"
    if kind == "program":
        return (f"TensorFlow ran the program in a sandbox ({network}, its own home and temporary directory, no "
                "credentials in its environment), compiling nothing (--tf_xla_clustering_fuel=0)")
    return f"TensorFlow built the pass input{sig} in one run of the call that compiled nothing (--tf_xla_clustering_fuel=0)"


def why_tf_failed(message: str) -> str:
    """A failed TF run's error in words (no raw exception text), with what to do where known."""
    if "jitsim does not run" in message:  # the dry run refused to run a function of the model
        return _short(message, 200)
    for needle, words in _TF_FAILURES:
        if needle in message:
            return words
    tail = message.rsplit(": ", 1)[-1] if ": " in message else message
    tail = tail.replace("tensorflow.python.framework.errors_impl.", "")
    return f"TensorFlow reported: {_short(tail, 120)}"


def _captured(target, kind: str, flags: str, signature, cache_dir, progress, call=None, input_shapes=()) -> PassInput:
    from jitsim.frontend.capture import capture
    from jitsim.graph.io import load_dump_dir

    cap = capture(target, flags=flags, signature=signature, cache_dir=cache_dir, progress=progress, call=call,
                  input_shapes=input_shapes if kind in ("keras", "function") else ())  # an export's are in its call
    pairs = load_dump_dir(cap.dump_dir, validate=False)
    # the graphs are files of jitsim's cache: messages, tables and pictures name the user's target
    where = _target_words(target)
    for _, g in pairs:
        g.source = where
    graphs = [(f"graph {rec.id} of {Path(where).name}", g, rec.input_stage) for rec, g in pairs]
    if not graphs:
        raise JitsimError("TensorFlow's run of the call wrote no pass input (auto-clustering never ran)", target)
    ids = [rec.id for rec, _ in pairs]
    main = ids.index(cap.main_graph) if cap.main_graph in ids else max(range(len(graphs)), key=lambda i: len(graphs[i][1]))
    sig = f" (signature {signature or 'serving_default'})" if cap.kind == "saved_model" else ""
    detail = what_ran(cap.kind, (cap.index.get("run") or {}), sig)
    exact = call is None or call.exact
    rkind = kind if kind in ("metagraph", "function") else cap.kind
    route = Route(rkind, "tf-capture", exact, detail, call, getattr(cap, "inputs", None),
                  capture_seconds=0.0 if cap.cached else float(cap.seconds))
    return PassInput(route, graphs, main,
                     notes=list(cap.notes), op_libraries=_recorded_libraries(cap.dump_dir),
                     session_jit=getattr(cap, "session_jit", None))


def _recorded_libraries(root) -> tuple:
    from jitsim.graph.custom_ops import harvest_op_library

    lib = harvest_op_library(root)
    return (lib,) if lib is not None else ()


def _prepared(graph, kind: str, device: str | None, call=None, *, flags: str = "", tf_version=None) -> PassInput:
    """The TF-free route: TF's rewrites before clustering simulated; for a session ``call``
    (not an exported function's own, which is simulated as the function it is), on the whole
    graph with the call's fetches given to Grappler, then the session's feed/fetch rewrite. The
    rewrites that differ by release (the remapper's reading of ``flags``,
    :mod:`jitsim.registry.releases`) follow the release simulated (``tf_version``, else the
    graph's producer); where the releases the graph may be from differ, a caveat says so."""
    from jitsim.flags import remapper_cpu_fusions_off
    from jitsim.registry.versions import producer_of, release_candidates
    from jitsim.frontend.exported_function import EXPORTED_FUNCTION
    from jitsim.frontend.prepare import prepare_without_tf
    from jitsim.frontend.session_call import FUNCTION_OUTPUTS, bound_to_variables, grappler_fetch_nodes
    from jitsim.passes.pipeline import RAW
    from jitsim.rewrites.subgraph_rewrite import rewrite_for_execution

    releases = release_candidates(tf_version, producer_of(graph))
    fusions_off = {r: remapper_cpu_fusions_off(flags, r) for r in releases}
    session = call is not None and call.chosen_by not in (FUNCTION_OUTPUTS, EXPORTED_FUNCTION)
    if session:
        prep = prepare_without_tf(bound_to_variables(graph, call.variables), device=device or "cpu",
                                  fetch=grappler_fetch_nodes(call), fetchable=True,
                                  cpu_fusions_off=fusions_off[releases[0]], feeds=call.feeds)
        prep.graph = rewrite_for_execution(prep.graph, feeds=call.feeds, fetches=call.fetches, targets=call.targets)
    else:
        prep = prepare_without_tf(graph, device=device or "cpu", cpu_fusions_off=fusions_off[releases[0]])
    if len(set(fusions_off.values())) > 1:
        with_off = [r for r, off in fusions_off.items() if off]
        prep.caveats.insert(0, f"the graph may be from TF {' or '.join(releases)}, whose Grappler remappers read these "
                               f"TF_XLA_FLAGS differently: TF {', '.join(with_off)} leaves the CPU fusions "
                               f"(_FusedMatMul, _FusedConv2D...) out, the others fuse; simulating TF {releases[0]} "
                               "(--tf-version chooses)")
    done = ", ".join(f"{name} {count}" for name, count, _ in prep.steps if count) or "nothing to rewrite"
    if session:
        done += f", the session's feed/fetch rewrite ({len(prep.graph)} nodes kept)"
    detail = (f"TensorFlow's rewrites before clustering simulated without TensorFlow ({done}); the notes say how "
              "this may differ from TF")
    return PassInput(Route(kind, "no-tf", False, detail, call, uncertain=list(prep.uncertain),
                           provenance=dict(prep.provenance)),
                     [(Path(graph.source or "graph").name, prep.graph, RAW)], notes=list(prep.caveats))


def _is_keras_model(obj) -> bool:
    from jitsim.frontend.capture import _is_keras_model as is_keras

    return is_keras(obj)


def _function_graph(obj, input_shapes=()):
    """The body of a live tf.function / ConcreteFunction / Keras model's call (with
    ``input_shapes``) as TF's function runtime instantiates it (``_Arg``/``_Retval``, library
    attached), before any rewrite."""
    from jitsim.frontend.capture import concrete_function
    from jitsim.registry import protos
    from jitsim.graph.functions import function_to_graphdef
    from jitsim.graph.model import Graph

    cf = concrete_function(obj, input_shapes)
    lib = protos.FunctionDefLibrary()
    lib.ParseFromString(cf.graph.as_graph_def().library.SerializeToString())
    fdef = protos.FunctionDef()
    fdef.ParseFromString(cf.function_def.SerializeToString())
    if fdef.signature.name not in {f.signature.name for f in lib.function}:
        lib.function.add().CopyFrom(fdef)
    gd = function_to_graphdef(lib, fdef.signature.name, source=f"tf.function {fdef.signature.name}")
    gd.library.CopyFrom(lib)
    return Graph(gd, source=f"<tf.function {fdef.signature.name}>")
