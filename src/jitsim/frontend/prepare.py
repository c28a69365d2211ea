"""What TF does to a function graph before clustering it, simulated without TensorFlow.

Users hold SavedModels and GraphDefs exported from Python, not TF's post-Grappler dump of the
clustering pass's input. When TF 2.21 runs such a function (``OptimizeFunctionGraph`` in
``common_runtime/optimize_function_graph_utils.cc``) it

1. inlines function calls and lowers If/Case/While (``LowerFunctionalOpsPass``, PRE_PLACEMENT;
   :mod:`jitsim.rewrites.lower_functional_ops`, :mod:`jitsim.rewrites.function_inlining`);
2. places every node (:mod:`jitsim.rewrites.placement`);
3. optimizes it with Grappler (:mod:`jitsim.rewrites.grappler`: pruning, remapper fusions,
   dependency optimizer, constant folding);
4. runs the clustering passes (``jitsim.passes.pipeline.cluster_graph``).

:func:`prepare_without_tf` does 1-3 and says what it did (:attr:`Prepared.steps`) and how the
result may differ from TF's (:attr:`Prepared.caveats`).

>>> from jitsim.graph import Graph
>>> g = Graph.from_nodes([("x", "Placeholder", [], {"dtype": "DT_FLOAT"}), ("y", "Relu", ["x"])])
>>> p = prepare_without_tf(g)
>>> p.graph["y"].device
'/job:localhost/replica:0/task:0/device:CPU:0'
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from jitsim.graph.model import Graph, parse_input
from jitsim.frontend.exported_function import OUTPUT_NAME
from jitsim.graph.graphedit import EditGraph, dfs_topological_order, reorder, sort_topologically
from jitsim.defs import LOWER_USING_SWITCH_MERGE_ATTR
from jitsim.registry import op_def, protos
from jitsim.codes import Code
from jitsim.records import RewriteRecord, Step
from jitsim.opsets import ADD_OPS, FUSED_BATCH_NORM_OPS, PARTITIONED_CALL_OPS, SHAPE_OPS



# -- Grappler's optimizers, as data ----------------------------------------------------------


@dataclass
class GrapplerContext:
    """What every simulated Grappler optimizer is given besides the graph: the fetches and the
    nodes to preserve (Grappler's ``GrapplerItem``), the shapes as they stand before it (for a
    step that reads them: Grappler recomputes ``GraphProperties`` per optimizer), and the
    run's settings."""

    keep: set[str]
    fetches: list[str] | None
    fetch_known: bool = True
    onednn: bool = True
    cpu_fusions_off: bool = False  # the remapper skips its CPU fusions (jitsim.flags.remapper_cpu_fusions_off)
    shapes: object = None  # jitsim.analyses.shape_inference.ShapeView, for steps with needs_shapes
    assumed: list[str] = field(default_factory=list)  # bias adds the remapper assumed (a caveat)
    uncertain: list = field(default_factory=list)  # (rewrite, node, why): what a rewrite could not be sure of


def _merge(rec, more):
    """``more`` (a RewriteRecord) added into ``rec``: one record per step."""
    rec.extend(more)
    return rec


def _model_pruner(eg: EditGraph, cx: GrapplerContext):
    from jitsim.rewrites.grappler.model_pruner import prune_unreachable, remove_trivial_ops

    rec = prune_unreachable(eg, cx.keep, cx.fetches)
    return _merge(rec, remove_trivial_ops(eg, cx.keep, cx.fetch_known))


def _common_subgraph_elimination(eg: EditGraph, cx: GrapplerContext):
    from jitsim.rewrites.grappler.common_subgraph_elimination import eliminate_common_subgraphs

    return eliminate_common_subgraphs(eg, cx.keep)


def _arithmetic_optimizer(eg: EditGraph, cx: GrapplerContext):
    from jitsim.rewrites.grappler.arithmetic_optimizer import (
        add_ops_rewrite, compose_unary_chains, convert_pow, hoist_unary_out_of_concat, minimize_broadcasts,
        remove_redundant_reshapes, reorder_cast_like, replace_mul_with_square, simplify_aggregation,
    )

    # TF's stages in its pipeline's order (each a sweep here; TF passes each node through all),
    # after the TopologicalSort the optimizer starts with
    sort_topologically(eg)
    found: list = []
    rec = add_ops_rewrite(eg, cx.keep, cx.shapes, uncertain=found)
    cx.uncertain.extend(("arithmetic_optimizer/AddOpsRewrite", n, why) for n, why in found)
    _merge(rec, minimize_broadcasts(eg, cx.keep, cx.shapes))
    _merge(rec, remove_redundant_reshapes(eg, cx.keep, cx.shapes))
    _merge(rec, replace_mul_with_square(eg, cx.keep))
    _merge(rec, reorder_cast_like(eg, cx.keep))
    _merge(rec, simplify_aggregation(eg, cx.keep))
    _merge(rec, hoist_unary_out_of_concat(eg, cx.keep))
    _merge(rec, convert_pow(eg, cx.keep, cx.shapes))  # before the composition: a Square joins a unary chain
    _merge(rec, compose_unary_chains(eg, cx.keep))
    return rec


def _constant_folding(eg: EditGraph, cx: GrapplerContext):
    from jitsim.rewrites.grappler.constant_folding import fold_constants

    return fold_constants(eg, cx.keep, cx.shapes)


def _remapper(eg: EditGraph, cx: GrapplerContext):
    from jitsim.rewrites.grappler.remapper import remap

    if cx.cpu_fusions_off:  # auto-clustering on and the remapper sees --tf_xla_cpu_global_jit
        return RewriteRecord(Code.REMAPPER, detail="CPU fusions off: XLA auto-clustering is on and the remapper finds "
                                                   "--tf_xla_cpu_global_jit in TF_XLA_FLAGS")

    # the remapper walks the graph in its MutableGraphView's sort (reversed post-order DFS)
    reorder(eg, dfs_topological_order(eg))
    rec = remap(eg, cx.keep, onednn=cx.onednn, shapes=cx.shapes)
    cx.assumed.extend(cx.shapes.assumed)
    return rec


def _dependency_optimizer(eg: EditGraph, cx: GrapplerContext):
    from jitsim.rewrites.grappler.dependency_optimizer import optimize_dependencies

    sort_topologically(eg)  # TF's dependency optimizer sorts the graph first
    return optimize_dependencies(eg, cx.keep, fetch_known=cx.fetch_known)


@dataclass(frozen=True)
class GrapplerStep:
    """One of Grappler's optimizers as jitsim simulates it."""

    name: str  # Grappler's optimizer name (meta_optimizer.cc)
    needs_shapes: bool  # reads GraphProperties: given cx.shapes
    run: Callable  # (EditGraph, GrapplerContext) -> RewriteRecord; rewrites the graph in place


# Grappler's optimizers jitsim simulates, in the meta optimizer's order for a function graph, as
# TF 2.21 dumps them (TF_CPP_VMODULE=meta_optimizer=4 with TF_DUMP_GRAPH_PREFIX: model_pruner,
# tfg_optimizer, implementation_selector, function_optimizer, common_subgraph_elimination,
# constant_folding, shape_optimizer, arithmetic_optimizer, layout, remapper, loop_optimizer,
# dependency_optimizer; twice over)
GRAPPLER_STEPS: tuple[GrapplerStep, ...] = (
    GrapplerStep("model_pruner", False, _model_pruner),
    GrapplerStep("common_subgraph_elimination", False, _common_subgraph_elimination),
    GrapplerStep("constant_folding", True, _constant_folding),
    GrapplerStep("arithmetic_optimizer", True, _arithmetic_optimizer),
    GrapplerStep("remapper", True, _remapper),
    GrapplerStep("dependency_optimizer", False, _dependency_optimizer),
)
# every step of prepare_without_tf, in the order run (what skip= names)
STEPS = ("inline_and_lower", "placement") + tuple(s.name for s in GRAPPLER_STEPS)
# the optimizers whose GraphProperties do not assume valid feeds (a fed tensor's shape unknown):
# constant folding (its opt level is not AGGRESSIVE); TF's dumps of the TF 1 programs show the
# arithmetic optimizer and the remapper reading the feeds' shapes
FEEDS_UNKNOWN = frozenset({"constant_folding"})


@dataclass
class Prepared:
    """``graph``: ready for ``cluster_graph(graph, options)`` with ``options.input_stage="graphdef"``.
    ``steps``: :class:`~jitsim.records.Step` tuples ``(code, count, detail)`` in the order run.
    ``caveats``: sentences on how the prediction may differ from TF's for this graph."""

    graph: Graph
    steps: list[Step] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    records: dict = field(default_factory=dict)  # step name -> its record object
    # the rewrites the simulation could not be sure of, per rewrite and reason:
    # {"rewrite", "why", "nodes"} (nodes as named in the prepared graph, where they remain)
    uncertain: list[dict] = field(default_factory=list)
    # a node of the input a simulated rewrite took into another: name -> (that node, in words)
    provenance: dict = field(default_factory=dict)


def fetches_of(graph: Graph) -> tuple[list[str] | None, set[str]]:
    """The fetches Grappler would be given for ``graph``, and the nodes it must keep.

    A function graph (``_Arg``/``_Retval``, e.g. a SavedModel signature) fetches its
    ``_Retval``s and keeps its control outputs: the calls it makes (a signature's
    ``StatefulPartitionedCall``) become NoOps named like them. A GraphDef exported from a
    ConcreteFunction (``cf.graph.as_graph_def()``) has no ``_Retval``: TF names a function's
    outputs ``Identity``, ``Identity_1``... and its control outputs are its stateful nodes and the
    ``NoOp`` automatic control dependencies make; those without consumers are the fetches and
    the ``Placeholder``s the arguments. With none of these, every node without consumers is a
    fetch."""
    keep = {n.name for n in graph if n.op in PARTITIONED_CALL_OPS}
    if any(n.op == "_Retval" for n in graph):
        return None, keep
    consumed = {e.src for e in graph.edges()}
    sinks = [n for n in graph if n.name not in consumed]
    outs = [n.name for n in sinks if OUTPUT_NAME.fullmatch(n.name)]
    if outs:
        def stateful(n):
            od = op_def(n.op)
            return n.op == "NoOp" or (od is not None and od.is_stateful)
        fetches = outs + [n.name for n in sinks if n.name not in outs and stateful(n)]
        # the function's control outputs (its FunctionDef's control_ret, which TF preserves): the
        # control inputs of the NoOp automatic control dependencies make the outputs wait on
        for o in outs:
            for r in graph[o].nodedef.input:
                src = r[1:] if r.startswith("^") else None
                if src and src in graph and graph[src].op == "NoOp":
                    keep |= {x[1:] for x in graph[src].nodedef.input if x.startswith("^") and x[1:] in graph}
    else:
        fetches = [n.name for n in sinks]
    keep |= set(fetches) | {n.name for n in graph if n.op == "Placeholder"}
    return fetches, keep


def _function_returns(eg: EditGraph, graph: Graph, fetches) -> list[str]:
    """A ConcreteFunction's GraphDef called as the function it is: TF instantiates it with a
    ``_Retval`` node reading each output ``Identity``, and Grappler preserves the ``_Retval``s, not
    the Identities (its dependency optimizer may then bypass an output Identity, which decides
    whether the function's control-output ``NoOp`` is bypassed too). One ``<output>_RetVal``
    stand-in per output is added for the Grappler steps and removed after them."""
    if not fetches or any(n.op == "_Retval" for n in graph):
        return []
    made = []
    for i, f in enumerate(o for o in fetches if OUTPUT_NAME.fullmatch(o)):
        nd = eg.nodes.get(f)
        if nd is None or nd.op != "Identity" or "T" not in nd.attr or f"{f}_RetVal" in eg.nodes:
            continue
        eg.add(f"{f}_RetVal", "_Retval", [f], device=nd.device,
               attrs={"T": protos.AttrValue(type=nd.attr["T"].type), "index": protos.AttrValue(i=i)})
        made.append(f"{f}_RetVal")
    return made


def prepare_without_tf(graph: Graph, *, device: str = "cpu", skip: tuple[str, ...] = (),
                       onednn: bool = True, infer_shapes: bool = True, fetch=None,
                       fetchable: bool = False, cpu_fusions_off: bool = False, feeds=()) -> Prepared:
    """Simulate what TF 2.21 does to ``graph`` between instantiating it as a function and
    clustering it (module docstring). ``graph`` is not modified. ``skip`` names steps of
    :data:`STEPS` to leave out (to measure what each is worth). ``onednn``: TF's default on
    x86 Linux (``TF_ENABLE_ONEDNN_OPTS``), which enables the oneDNN-only fusions.
    ``infer_shapes``: where the graph records no ``_output_shapes`` (a GraphDef exported with
    ``cf.graph.as_graph_def()``), the shape-dependent rewrites read the shapes
    :mod:`jitsim.analyses.shape_inference` infers, as Grappler's read ``GraphProperties``; a graph
    that records shapes is read as recorded either way. ``fetch``: ``(fetch node names, nodes
    to preserve)`` Grappler is given (a session call's, :func:`jitsim.frontend.session_call.
    grappler_fetch_nodes`); default: :func:`fetches_of` the graph. ``fetchable``: a session
    graph's (TF lowers and inlines the whole graph before the call's feed/fetch rewrite, so an
    inlined call or a lowered op keeps its name as an ``IdentityN`` of its outputs, which a
    fetch of ``call:0`` reads); a function's are kept as a ``NoOp`` (targetable). ``cpu_fusions_off``: the
    remapper leaves its CPU fusions out, as TF's does when auto-clustering is on and it finds
    ``--tf_xla_cpu_global_jit`` in the raw ``TF_XLA_FLAGS`` (:func:`jitsim.flags.
    remapper_cpu_fusions_off`: by release). ``feeds``: a session call's fed tensors (``node:i``):
    Grappler's constant folding takes their shapes as unknown (it does not assume valid feeds),
    the arithmetic optimizer and the remapper the graph's."""
    from jitsim.rewrites.lower_functional_ops import lower_and_inline
    from jitsim.rewrites.placement import place
    from jitsim.analyses.shape_inference import ShapeView, records_shapes
    from jitsim.memory import check_inlining_room

    unknown = set(skip) - set(STEPS)
    if unknown:
        raise ValueError(f"unknown step(s) {sorted(unknown)}; steps are {', '.join(STEPS)}")
    out = Prepared(graph)
    fetches, keep = fetches_of(graph) if fetch is None else (list(fetch[0]), set(fetch[1]))
    # an input that cannot fit is refused before the work, not after minutes of it (issue 39)
    check_inlining_room(graph, "inline_and_lower" not in skip)
    eg = EditGraph.from_graph(graph)

    if "inline_and_lower" not in skip:
        lr = lower_and_inline(eg, fetchable=fetchable)
        c = lr.counts()
        out.records["inline_and_lower"] = lr
        out.steps.append(Step(Code.INLINE_AND_LOWER, c["inlined_calls"] + c["lowered"],
                          f"{c['inlined_calls']} function calls inlined, {c['lowered']} If/Case/While lowered"))
        for r in lr.inline_records:
            if not r.inlined:
                out.caveats.append(f"call {r.caller!r} of {r.function!r} is not inlined ({r.reason}); TF does the same, "
                                   "and it stays one unclusterable node")
        kept = [r for r in lr.lower_records if not r.lowered]
        if kept:
            out.caveats.append(f"{len(kept)} functional control-flow op(s) carry no {LOWER_USING_SWITCH_MERGE_ATTR} attribute "
                               f"and stay as they are (e.g. {kept[0].node!r}); TF clusters them only under "
                               "tf.function(jit_compile=True)")

    if "placement" not in skip:
        # one form of the graph alive at a time (issue 39): each conversion drops the form it
        # was made from before the next is built
        g = eg.to_graph(graph.source, release=True)
        eg = None
        pr = place(g, device)
        out.records["placement"] = pr
        n = sum(pr.placed.values())
        detail = ", ".join(f"{v} on {k}" for k, v in pr.placed.items()) or "every node had a device"
        out.steps.append(Step(Code.PLACEMENT, n, detail))
        if pr.cpu_fallback:
            out.caveats.append(f"{len(pr.cpu_fallback)} node(s) have no GPU kernel and were placed on the CPU "
                               f"(e.g. {pr.cpu_fallback[0]!r}); TF's placer may colocate some of them differently")
        # g's GraphDef, taken as it is (g was made from it, nodes in its order, and placement
        # only sets devices): what EditGraph.from_graph(g) would copy
        eg = EditGraph(g.graphdef, copy=False)
        pr.graph = g = None  # (the record keeps its counts, not the graph: eg has it now)

    retvals = _function_returns(eg, graph, fetches) if fetch is None else []
    if retvals:  # called as a function: its outputs feed _Retval nodes, which Grappler preserves
        outs = {parse_input(eg[r].input[0])[0] for r in retvals}
        fetches = retvals + [f for f in fetches if f not in outs]
        keep = (set(keep) - outs) | set(retvals)
    grappler = [step for step in GRAPPLER_STEPS if step.name not in skip]
    fed = frozenset(parse_input(t) for t in feeds)
    from_use: dict = {}  # variables' shapes read back from their uses, carried from step to step
    # Grappler's meta optimizer runs its optimizers twice over; the second round matters when
    # a removal exposes a new pattern.
    inferring = infer_shapes and not records_shapes(eg)
    cx = GrapplerContext(keep, fetches, onednn=onednn, cpu_fusions_off=cpu_fusions_off)
    if inferring and any(step.needs_shapes for step in grappler):
        out.steps.append(Step(Code.SHAPE_INFERENCE, 0, "the graph records no _output_shapes: shapes inferred "
                          "(jitsim.analyses.shape_inference) for the shape-dependent rewrites"))
    # Grappler is handed the function graph as TF's Graph::ToGraphDef writes it: each node's
    # control inputs sorted by the name of their source (the order the model pruner's walk takes)
    for name, nd in list(eg.nodes.items()):
        refs = list(nd.input)
        k = next((i for i, r in enumerate(refs) if r.startswith("^")), len(refs))
        ctrl = sorted(refs[k:], key=lambda r: r[1:])
        if ctrl != refs[k:]:
            eg.set_inputs(name, refs[:k] + ctrl)
    for round_ in range(2):
        for step in grappler:
            # shapes as they stand before each shape-dependent rewrite (Grappler recomputes
            # GraphProperties per optimizer)
            cx.shapes = ShapeView(eg, infer=inferring, unknown=fed if step.name in FEEDS_UNKNOWN else (),
                                  seed=from_use) if step.needs_shapes else None
            if cx.shapes is not None:
                cx.shapes.symbolic = bool(feeds)  # a session's unknown dimensions are TF's too
            if cx.shapes is not None and cx.shapes.from_use:
                from_use.update(cx.shapes.from_use)
                cx.uncertain.extend(("shape_inference", v, VARIABLES_FROM_USE) for v in cx.shapes.from_use)
            rec = step.run(eg, cx)
            if round_ == 0:
                out.records[step.name] = rec
                out.steps.append(Step(rec.code, rec.count, rec.summary()))
            else:
                prev = out.records[step.name]
                prev.extend(rec)
                i = next(j for j, s in enumerate(out.steps) if s[0] == step.name)
                out.steps[i] = Step(prev.code, prev.count, prev.summary())
    # where each node a rewrite took went, followed to a node of the final graph
    for old, (new, words) in eg.provenance.items():
        seen = {old}
        while new not in eg.nodes and new in eg.provenance and new not in seen:
            seen.add(new)
            new, words = eg.provenance[new]
        if old not in eg.nodes and new in eg.nodes:
            out.provenance[old] = (new, words)
    for r in retvals:  # jitsim's stand-ins go again: the graph keeps the user's nodes only
        if r in eg.nodes:
            eg.remove(r)
    sort_topologically(eg)
    cx.shapes = None
    out.graph = eg.to_graph(graph.source, release=True)
    eg = None
    out.caveats.extend(_caveats(out.graph, skip, inferring))
    assumed = cx.assumed
    if assumed:
        out.caveats.append(f"{len(assumed)} Add(s) of a contraction and a tensor whose shape depends on a variable the graph "
                           f"does not give the shape of (e.g. {assumed[0]!r}) were taken for bias adds and fused, as TF does "
                           "when the bias is 1-D and as long as the contraction output's last dimension (Keras' GRU cell, "
                           "MatMul + bias of a shapeless weight)")
    out.uncertain = _uncertain(out.graph, cx, skip)
    if device.lower() != "cpu" and "remapper" not in skip:
        out.caveats.append("the remapper's GPU fusions (cuDNN Conv2D+BiasAdd+Relu, cuBLASLt MatMul+BiasAdd...) are "
                           "not simulated: GPU nodes are left unfused, so TF may split GPU clusters where jitsim "
                           "does not")
    return out


VARIABLES_FROM_USE = ("the graph does not give this variable's shape: it was read back from its uses (a "
                      "contraction's operand, a bias's length, an embedding's width), as TF's run would know it")
UNCERTAIN_LIMIT = 50  # nodes listed per rewrite and reason (the count is always whole)
# ops of the remapper fusions jitsim does not simulate (LayerNorm, InstanceNorm, other GELU forms)
UNSIMULATED_FUSION_OPS = frozenset({"Erf", "Pow", "SquaredDifference"})


def _uncertain(g: Graph, cx, skip) -> list[dict]:
    """Where this prediction may differ from TF's, node by node: the rewrites jitsim made on an
    assumption, or left undone for want of what TF knows (shapes), and the patterns of rewrites
    it does not simulate, found in the prepared graph."""
    groups: dict[tuple[str, str], list[str]] = {}
    for rewrite, node, why in cx.uncertain:
        groups.setdefault((rewrite, why), []).append(node)
    if cx.assumed:
        groups.setdefault(("remapper", "an Add of a contraction and a tensor whose shape depends on a variable the "
                           "graph does not give the shape of, taken for a bias add and fused"), []).extend(cx.assumed)
    if "remapper" not in skip:
        pattern = [n.name for n in g if n.op in UNSIMULATED_FUSION_OPS]
        if pattern:
            groups[("remapper", "may belong to a fusion jitsim does not simulate (LayerNorm, InstanceNorm, GELU "
                    "forms other than Keras' erfc one); a fused op has no XLA kernel and splits the cluster")] = pattern
        bn = [n.name for n in g if n.op in FUSED_BATCH_NORM_OPS]
        if bn:
            groups[("remapper", "FusedBatchNorm not fused: TF may make _FusedBatchNormEx of it and an activation")] = bn
    out = []
    for (rewrite, why), nodes in groups.items():
        nodes = list(dict.fromkeys(nodes))
        out.append({"rewrite": rewrite, "why": why, "count": len(nodes), "nodes": nodes[:UNCERTAIN_LIMIT]})
    return out


def _caveats(g: Graph, skip, inferred: bool = False) -> list[str]:
    """What the simulated Grappler leaves out, counted on the prepared graph."""
    from jitsim.rewrites.grappler.constant_folding import foldable_candidates

    out = []
    hist = g.op_histogram()
    adds = sum(hist.get(o, 0) for o in ADD_OPS)
    if adds:
        out.append(f"arithmetic optimizer simulated for Add trees (AddN), Reshapes, Concat-hoisting, cast reordering, "
                   f"equal-input aggregations, unary-op compositions and Pow by constants only: TF may rewrite other "
                   f"arithmetic among the {adds} Add/AddV2 nodes left (MinimizeBroadcasts, HoistCommonFactor)")
    fused_add = sum(1 for n in g if n.op in ("_FusedConv2D", "_FusedMatMul")
                    and any(g[e.dst].op in ADD_OPS for e in g.out_edges(n.name)))
    if fused_add:
        out.append(f"{fused_add} fused contraction(s) feed an Add that the remapper's residual-Add fusion left alone "
                   "(operand shapes not known to be equal, or the Add is read elsewhere); TF, with its symbolic "
                   "shapes, may fold some of them into the contraction (oneDNN)")
    gelu_ln = sum(hist.get(o, 0) for o in UNSIMULATED_FUSION_OPS)
    if gelu_ln:
        out.append(f"remapper fusions other than jitsim's (LayerNorm, InstanceNorm, GELU forms other than Keras' "
                   f"erfc one) are not simulated: {gelu_ln} Erf/Pow/SquaredDifference node(s) could belong to such "
                   "a pattern; where TF fuses one, the fused op has no XLA kernel and splits the cluster")
    if inferred:
        out.append("the graph records no shapes (_output_shapes): the remapper, arithmetic optimizer and constant "
                   "folding read inferred shapes (Placeholder shapes, constants, variable writes); a variable never "
                   "written in the graph has an unknown shape, so a bias-like Add of it is not fused as TF may")
    elif not any("_output_shapes" in n.attr for n in g):
        add_after = sum(1 for n in g if n.op in ADD_OPS
                        and any(g[e.src].op in ("MatMul", "Conv2D", "DepthwiseConv2dNative")
                                for e in g.in_edges(n.name) if not e.is_control))
        if add_after:
            out.append(f"the graph records no shapes (_output_shapes): {add_after} Add node(s) after a MatMul/Conv "
                       "may be bias adds TF fuses into it (oneDNN), which jitsim cannot tell; export with "
                       "as_graph_def(add_shapes=True) or use the SavedModel")
    bn = sum(hist.get(o, 0) for o in FUSED_BATCH_NORM_OPS)
    if bn:
        out.append(f"{bn} FusedBatchNorm node(s) not fused: TF may make _FusedBatchNormEx of those followed by an activation")
    if "constant_folding" in skip:
        cands = foldable_candidates(g)
        if cands:
            out.append(f"constant folding not simulated: {cands} node(s) have only constant inputs or a static shape "
                       "query and TF would fold them")
    else:
        cands = foldable_candidates(g)
        if cands:
            out.append(f"{cands} node(s) look foldable but jitsim's folding does not evaluate them (ops or shapes it "
                       "does not know); TF may fold them")
    if any(n.op in SHAPE_OPS for n in g):
        if inferred:
            out.append("shapes are inferred for the ops jitsim has shape functions for (jitsim.analyses.shape_inference): "
                       "TF's constant folding, with every op's shape function, may fold more Shape/Size/Rank nodes")
        else:
            out.append("shapes are known only where the graph records them (_output_shapes, Placeholder shapes): TF's "
                       "constant folding sees inferred shapes, so it may fold more Shape/Size/Rank nodes")
    out.append("layout, loop, memory, shape and implementation-selector optimizers are not simulated; node ids "
               "follow jitsim's topological order, not Grappler's, so cluster numbering may differ")
    return out
