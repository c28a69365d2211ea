"""The call a TF1 graph is run with: ``sess.run(fetches, feed_dict)``, stated or assumed.

A GraphDef or MetaGraphDef is not a call: TF clusters the graph its session builds for one
``sess.run`` (:mod:`jitsim.rewrites.subgraph_rewrite`: fed tensors become ``_Arg`` nodes,
fetched ones ``_Retval`` nodes, and what the fetches and targets do not need is gone). So
the fetches decide the result, and jitsim is exact only where it knows them.

Names are read as ``sess.run`` reads strings: ``--fetch loss:0`` fetches a tensor;
``--fetch train_step`` (no ``:N``) runs an op as a target. ``--feed x`` feeds ``x:0``
(``--feed x=100,784`` gives the fed value's shape; the shape never changes clusters, it only
lets the TensorFlow route run the call).

Feeds: every ``Placeholder`` the call needs is fed (``sess.run`` fails otherwise), whether
named with ``--feed`` or not; a ``DT_RESOURCE`` placeholder (a captured variable of an
exported function) is bound to a variable of its own.

Without ``--fetch`` the call is chosen by this rule, in order, and said to be assumed:

1. a MetaGraphDef's ``train_op`` collection: run those ops (``sess.run(train_op)``);
2. a graph exported from a ``tf.function`` (``cf.graph.as_graph_def()``: outputs named
   ``Identity``, ``Identity_1``...): the function's outputs and its stateful sinks (what
   calling the function computes);
3. otherwise every sink (a node nothing reads) except initialisation and bookkeeping: the
   ``init`` ops and everything only they need, the ``save/`` Saver scope, variable status ops
   (``VarIsInitializedOp``, ``IsVariableInitialized``) and shape queries nobody reads
   (``Shape``, ``ShapeN``, ``Size``, ``Rank``).

Rule 2 computes what the function computes (the route is exact for that session call); rules
1 and 3 are guesses, so the result is labelled approximate.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from jitsim.errors import JitsimError
from jitsim.registry import protos
from jitsim.graph.model import Graph
from jitsim.rewrites.subgraph_rewrite import output_type, split_tensor_name
from jitsim.opsets import FUNCTION_IO_OPS, PLACEHOLDER_OPS, SHAPE_OPS

GIVEN = "given"
TRAIN_OP = "the train_op collection"
FUNCTION_OUTPUTS = "the exported function's outputs"
SIGNATURE = "the SavedModel signature's inputs and outputs"
SINKS = "every sink but init, saver and bookkeeping ops"
DT_RESOURCE = 20
_INIT_NAME = re.compile(r"^(init|init_\d+)$")
_SAVER_SCOPE = re.compile(r"^save(_\d+)?/")
_STATUS_OPS = frozenset({"VarIsInitializedOp", "IsVariableInitialized"})


@dataclass(frozen=True)
class SessionCall:
    """One ``sess.run``: ``fetches`` (tensors), ``targets`` (ops), ``feeds`` (tensors), each
    sorted as DirectSession sorts them; ``shapes``: ``(feed, shape)`` the user gave;
    ``variables``: resource placeholders bound to a variable; ``chosen_by``: :data:`GIVEN` or
    the rule that chose the fetches; ``added_feeds``: placeholders fed because the call needs
    them, not named by the user."""

    fetches: tuple[str, ...] = ()
    targets: tuple[str, ...] = ()
    feeds: tuple[str, ...] = ()
    shapes: tuple = ()
    variables: tuple[str, ...] = ()
    chosen_by: str = GIVEN
    added_feeds: tuple[str, ...] = field(default=(), compare=False)

    @property
    def exact(self) -> bool:
        """Whether the call is known (given by the user, or an exported function's own)."""
        return self.chosen_by in (GIVEN, FUNCTION_OUTPUTS, SIGNATURE)

    def describe(self, limit: int = 6) -> str:
        def names(xs):
            xs = list(xs)
            return ", ".join(xs[:limit]) + (f" and {len(xs) - limit} more" if len(xs) > limit else "")

        parts = []
        if self.fetches:
            parts.append(f"fetches {names(self.fetches)}")
        if self.targets:
            parts.append(f"targets {names(self.targets)}")
        parts.append(f"feeds {names(self.feeds)}" if self.feeds else "no feeds")
        if self.variables:
            parts.append(f"variables for {names(self.variables)}")
        how = self.chosen_by if self.exact else f"assumed: {self.chosen_by}"
        return f"sess.run with {'; '.join(parts)} ({how})"

    def to_dict(self) -> dict:
        return {"fetches": list(self.fetches), "targets": list(self.targets), "feeds": list(self.feeds),
                "feed_shapes": {k: (list(v) if v is not None else None) for k, v in self.shapes},
                "variables": list(self.variables), "chosen_by": self.chosen_by, "exact": self.exact}

    def key(self) -> str:
        """A stable text of the call (cache keys)."""
        return json.dumps(self.to_dict(), sort_keys=True)


def parse_feed(text: str) -> tuple[str, tuple | None]:
    """``"x=100,784"`` -> ``("x:0", (100, 784))``; ``"x"`` -> ``("x:0", None)``; ``"x="`` is a
    scalar; ``?`` or ``-1`` is an unknown dimension."""
    name, sep, shape = text.partition("=")
    name = name.strip()
    if not name:
        raise JitsimError(f"--feed {text!r}: give a tensor name, e.g. --feed x:0 or --feed x=100,784")
    node, port = split_tensor_name(name)
    if not sep:
        return f"{node}:{port}", None
    dims = []
    for d in (x.strip() for x in shape.split(",")) if shape.strip() else ():
        if d in ("?", "-1", "None"):
            dims.append(-1)
        elif d.isdigit():
            dims.append(int(d))
        else:
            raise JitsimError(f"--feed {text!r}: a shape is comma-separated sizes (? for unknown), e.g. x=100,784")
    return f"{node}:{port}", tuple(dims)


def is_session_graph(graph: Graph) -> bool:
    """A graph a session runs (no ``_Arg``/``_Retval``: not a function body or a TF dump)."""
    return not any(n.op in FUNCTION_IO_OPS for n in graph)


def session_call(graph: Graph, fetch=(), feed=()) -> SessionCall:
    """The call for ``graph``: the user's ``fetch`` names (ops or ``node:N`` tensors, as
    ``sess.run`` takes strings) and ``feed`` texts (:func:`parse_feed`), else the rule of the
    module docstring. Unknown names are a one-line error."""
    parsed = [parse_feed(f) for f in feed]
    feeds = {n for n, _ in parsed}
    if len(feeds) != len(parsed):
        raise JitsimError("--feed: a tensor is fed twice")
    for n in sorted(feeds):
        node, port = split_tensor_name(n)
        output_type(graph, node, port, "--feed")
    fetches, targets = [], []
    if fetch:
        chosen = GIVEN
        for f in fetch:
            if re.search(r":\d+$", f):
                node, port = split_tensor_name(f)
                output_type(graph, node, port, "--fetch")
                fetches.append(f"{node}:{port}")
            elif f in graph:
                targets.append(f)
            else:
                raise JitsimError(f"--fetch {f}: no node {f!r} in the graph (a tensor is NODE:N); "
                                  + _likely_fetches(graph, f))
    else:
        chosen, fetches, targets = _assumed_call(graph)
    fetches = sorted(dict.fromkeys(fetches))
    targets = sorted(dict.fromkeys(targets))
    both = feeds & set(fetches)
    if both:
        raise JitsimError(f"{sorted(both)[0]} is both fed and fetched")
    added, variables = _needed_placeholders(graph, fetches, targets, feeds)
    return SessionCall(tuple(fetches), tuple(targets), tuple(sorted(feeds | set(added))),
                       tuple(sorted((n, s) for n, s in parsed if s is not None)), tuple(variables), chosen,
                       tuple(added))


def signature_call(graph: Graph, inputs, outputs) -> SessionCall:
    """The call of a SavedModel signature that no single function call computes (a TF1
    SavedModel's): its output tensors fetched, its input tensors fed, as TF's signature
    function (the MetaGraph wrapped and pruned to them) computes it."""
    import dataclasses

    call = session_call(graph, [o.lstrip("^") for o in outputs], [i.lstrip("^") for i in inputs])
    return dataclasses.replace(call, chosen_by=SIGNATURE)


def _likely_fetches(graph: Graph, wanted: str, limit: int = 6) -> str:
    """What the user may have meant by a fetch the graph does not hold: a Python variable's name
    is not the op's (``train_step = opt.minimize(loss)`` names a ``GradientDescent`` op): the
    graph's training ops (optimizers' updates and the ops grouping them), names like it, and the
    sinks jitsim would assume."""
    import difflib

    names = [n.name for n in graph]
    train = [n.name for n in graph if n.op.startswith(("Apply", "ResourceApply"))]
    groups = [n.name for n in graph if n.op == "NoOp" and any(e.src in set(train) for e in graph.in_edges(n.name))]
    parts = []
    if groups or train:
        parts.append("its training ops: " + ", ".join((groups or train)[:limit]))
    close = difflib.get_close_matches(wanted, names, n=3, cutoff=0.6)
    if close:
        parts.append("names like it: " + ", ".join(close))
    try:
        _, fetches, targets = _assumed_call(graph)
        sinks = [split_tensor_name(t)[0] for t in fetches] + targets
        parts.append("its sinks: " + ", ".join(list(dict.fromkeys(sinks))[:limit]))
    except JitsimError:
        pass
    return ("; ".join(parts) or "the graph names no likely fetch") + " (a Python variable's name is not its op's)"


def _assumed_call(graph: Graph) -> tuple[str, list[str], list[str]]:
    from jitsim.frontend.prepare import fetches_of

    train = [n for n in graph.collections.get("train_op", []) if split_tensor_name(n)[0] in graph]
    if train:
        tensors = [n for n in train if re.search(r":\d+$", n)]
        return TRAIN_OP, tensors, [n for n in train if n not in tensors]
    fetch_nodes, _ = fetches_of(graph)
    consumed = {e.src for e in graph.edges()}
    if fetch_nodes and any(re.fullmatch(r"Identity(_\d+)?", n) for n in fetch_nodes):
        outs = [n for n in fetch_nodes if re.fullmatch(r"Identity(_\d+)?", n)]
        return FUNCTION_OUTPUTS, [f"{n}:0" for n in outs], [n for n in fetch_nodes if n not in outs]
    init_only = _only_needed_by(graph, [n.name for n in graph if _INIT_NAME.match(n.name) and n.op == "NoOp"])
    fetches, targets = [], []
    for n in graph:
        if n.name in consumed or n.name in init_only or _SAVER_SCOPE.match(n.name) or n.op in _STATUS_OPS \
                or n.op in SHAPE_OPS or n.op in PLACEHOLDER_OPS:
            continue
        outs = _num_outputs(graph, n.name)
        if outs:
            fetches.extend(f"{n.name}:{i}" for i in range(outs))
        else:
            targets.append(n.name)
    if not fetches and not targets:
        raise JitsimError("no fetch could be assumed (every sink is an init, saver or bookkeeping op): name the "
                          "call's fetches with --fetch", graph.source)
    return SINKS, fetches, targets


def _num_outputs(graph: Graph, name: str) -> int:
    from jitsim.registry.optypes import output_types

    types = output_types(graph[name].nodedef, {f.signature.name: f for f in graph.library.function})
    return len(types) if types else 0


def _only_needed_by(graph: Graph, roots: list[str]) -> set[str]:
    """``roots`` and the nodes that only they (transitively) need: an init op's subgraph."""
    out = set(roots)
    work = list(roots)
    while work:
        for e in graph.in_edges(work.pop()):
            s = e.src
            if s not in out and all(o.dst in out for o in graph.out_edges(s)):
                out.add(s)
                work.append(s)
    return out


def _needed_placeholders(graph: Graph, fetches, targets, feeds) -> tuple[list[str], list[str]]:
    """Placeholders the call reaches without a feed: ``(tensors to feed, resource placeholders)``."""
    fed = {split_tensor_name(f) for f in feeds}
    fed_nodes = {n for n, _ in fed}
    roots = [split_tensor_name(f)[0] for f in fetches] + list(targets)
    seen = set(roots)
    stack = list(roots)
    while stack:
        for e in graph.in_edges(stack.pop()):
            if (e.src, e.src_output) in fed or (e.is_control and e.src in fed_nodes
                                                 and graph[e.src].op in PLACEHOLDER_OPS):
                continue
            if e.src not in seen:
                seen.add(e.src)
                stack.append(e.src)
    added, variables = [], []
    for n in graph:
        if n.name in seen and n.op in PLACEHOLDER_OPS and (n.name, 0) not in fed:
            dtype = n.nodedef.attr["dtype"].type if "dtype" in n.nodedef.attr else 0
            (variables if dtype == DT_RESOURCE else added).append(n.name if dtype == DT_RESOURCE else f"{n.name}:0")
    return added, variables


def bound_to_variables(graph: Graph, names) -> Graph:
    """``graph`` with each resource placeholder in ``names`` replaced by a ``VarHandleOp`` of
    the same name (the variable the call binds it to): dtype and shape from the placeholder's
    ``_handle_dtypes``/``_handle_shapes``, else the dtype its readers use and an unknown shape."""
    if not names:
        return graph
    gd = protos.GraphDef()
    gd.CopyFrom(graph.graphdef)
    wanted = set(names)
    for nd in gd.node:
        if nd.name not in wanted:
            continue
        dtype, shape = variable_spec(graph, nd.name)
        for k in list(nd.attr):
            del nd.attr[k]
        nd.op = "VarHandleOp"
        nd.attr["dtype"].type = dtype
        nd.attr["shape"].shape.CopyFrom(shape)
        nd.attr["shared_name"].s = nd.name.encode()
        nd.attr["container"].s = b""
        nd.attr["allowed_devices"].list.SetInParent()
    return Graph(gd, source=graph.source)


def variable_spec(graph: Graph, name: str):
    """``(dtype, TensorShapeProto)`` of the variable behind resource placeholder ``name``."""
    nd = graph[name].nodedef
    shape = protos.TensorShapeProto()
    if "_handle_shapes" in nd.attr and nd.attr["_handle_shapes"].list.shape:
        shape.CopyFrom(nd.attr["_handle_shapes"].list.shape[0])
    else:
        shape.unknown_rank = True
    if "_handle_dtypes" in nd.attr and nd.attr["_handle_dtypes"].list.type:
        return nd.attr["_handle_dtypes"].list.type[0], shape
    for e in graph.out_edges(name):
        reader = graph[e.dst].nodedef
        if not e.is_control and "dtype" in reader.attr and reader.attr["dtype"].type:
            return reader.attr["dtype"].type, shape
    return 1, shape  # DT_FLOAT: nothing says otherwise


def grappler_fetch_nodes(call: SessionCall) -> tuple[list[str], set[str]]:
    """What TF's Grappler is told for this call: ``(fetch node names, nodes to preserve)``
    (the fetches and targets, and the fed nodes)."""
    fetch_nodes = list(dict.fromkeys([split_tensor_name(f)[0] for f in call.fetches] + list(call.targets)))
    keep = set(fetch_nodes) | {split_tensor_name(f)[0] for f in call.feeds} | set(call.variables)
    return fetch_nodes, keep
