"""Ops that TF 2.21 core does not register: custom-op libraries (tensorflow-text, ...).

TF runs a graph with such an op once the library that registers it is loaded; the op has
no XLA kernel (unless the library registers one), so auto-clustering leaves it out exactly
like a core op XLA does not implement. jitsim needs the op's ``OpDef`` for what comes
after: input and output dtypes (cluster function signatures, host-memory checks), output
argument names inside function bodies. Two sources, as :class:`~jitsim.registry.OpLibrary`:

* a file written by ``jitsim registry export`` in the user's TF process with the library
  loaded (:func:`read_op_library`; a plain ``OpList`` ``.pbtxt``/``.pb`` works too);
* inference from the graph itself (:func:`infer_op_library`): the number of outputs from the
  highest output slot any consumer reads (or the node's ``_output_shapes``), output dtypes
  from what consumers expect at that input (or ``_output_types``), input dtypes from what
  producers give. What it cannot tell stays ``DT_INVALID`` and is listed in
  :attr:`InferredOps.undetermined`.

>>> from jitsim.graph.model import Graph
>>> from jitsim.registry.protos import AttrValue
>>> g = Graph.from_nodes([("s", "Placeholder", [], {"dtype": AttrValue(type=7)}),
...                       ("tok", "MyTokenize", ["s"]),
...                       ("n", "Cast", ["tok:1"], {"SrcT": AttrValue(type=9), "DstT": AttrValue(type=1)})])
>>> inf = infer_op_library(g)
>>> od = inf.library.op_defs["MyTokenize"]
>>> [a.type for a in od.input_arg], [a.type for a in od.output_arg]   # DT_STRING in; ?, DT_INT64 out
([7], [0, 9])
>>> inf.undetermined
{'MyTokenize': ['output 0']}
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path

from jitsim.errors import GraphError
from jitsim.registry import protos
from jitsim.graph.functions import body_references
from jitsim.graph.model import CONTROL, parse_input
from jitsim.registry import optypes
from jitsim.registry import OP_LIBRARY_FILE, OpLibrary, current_tf_version, op_def, op_defs, simulating

EXPORT_SCHEMA = "jitsim.op-library/1"
DT_INVALID = 0


@dataclass
class InferredOps:
    """OpDefs jitsim inferred for a graph's unknown ops, and what it could not determine."""

    library: OpLibrary
    nodes: dict[str, list[str]] = field(default_factory=dict)  # op -> node names using it
    undetermined: dict[str, list[str]] = field(default_factory=dict)  # op -> ["output 0", "input 1"...]

    def note(self) -> str:
        ops = ", ".join(f"{op} ({len(ns)} node{'s' if len(ns) > 1 else ''})" for op, ns in sorted(self.nodes.items()))
        s = (f"ops TensorFlow {current_tf_version()} core does not register (a custom-op library's): {ops}; treated "
             "as ops with no XLA kernel, their signatures inferred from the graph")
        if self.undetermined:
            s += "; could not determine " + "; ".join(f"{op}: {', '.join(v)}" for op, v in sorted(self.undetermined.items()))
            s += " (give their OpDefs with --op-defs FILE, from `jitsim registry export`)"
        return s


def _nodes_and_library(graph):
    """NodeDefs and function library of a jitsim ``Graph``, a ``TfGraph`` or a ``GraphDef``."""
    if hasattr(graph, "op_nodes"):  # passes.tfgraph.TfGraph
        return [n.nodedef for n in graph.op_nodes()], graph.library
    gd = getattr(graph, "graphdef", graph)
    return list(gd.node), gd.library


def unknown_ops(graph) -> dict[str, list[str]]:
    """Op -> node names, for the graph's nodes whose op neither TF core, an active op library
    nor the graph's function library defines (function bodies included, as ``fn/node``)."""
    if hasattr(graph, "op_nodes"):  # a TfGraph: its nodes' ops are read already
        top_ops = {n.op for n in graph.op_nodes()}
        library = graph.library
    else:
        gd = getattr(graph, "graphdef", graph)
        top_ops = {nd.op for nd in gd.node}
        library = gd.library
    fns = {f.signature.name for f in library.function}
    known: dict[str, bool] = {}  # each op looked up once

    def unknown(op: str) -> bool:
        k = known.get(op)
        if k is None:
            k = known[op] = op in fns or op_def(op) is not None
        return not k

    out: dict[str, list[str]] = {}
    if any(unknown(op) for op in top_ops):  # the nodes' names only where some op is unknown (rare)
        nodedefs, _ = _nodes_and_library(graph)
        for nd in nodedefs:
            op = nd.op
            if unknown(op):
                out.setdefault(op, []).append(nd.name)
    for f in library.function:
        for nd in f.node_def:
            op = nd.op
            if unknown(op):
                out.setdefault(op, []).append(f"{f.signature.name}/{nd.name}")
    return out


def _types_of(nodedef, which: str, fns, inferred: dict) -> list[int] | None:
    od = inferred.get(nodedef.op)
    if od is not None:
        return [a.type for a in (od.input_arg if which == "in" else od.output_arg)]
    f = optypes.input_types if which == "in" else optypes.output_types
    return f(nodedef, fns)


def infer_op_library(graph, source: str | None = None) -> InferredOps | None:
    """OpDefs for the unknown ops of ``graph`` (a jitsim ``Graph``, a ``TfGraph`` or a
    ``GraphDef``), from how the graph uses them (None: no unknown op).

    Top-level nodes give arity and dtypes; inside function bodies only the output argument
    names a body refers to are known (their order, when there are several, is not)."""
    unknown = unknown_ops(graph)
    if not unknown:
        return None
    nodedefs, library = _nodes_and_library(graph)
    fns = {f.signature.name: f for f in library.function}
    by_name = {nd.name: nd for nd in nodedefs}
    ins: dict[str, list[tuple[str, int, int]]] = {}  # node -> [(src, src_output, dst_input)] data inputs
    outs: dict[str, list[tuple[str, int, int]]] = {}  # node -> [(dst, src_output, dst_input)]
    for nd in nodedefs:
        slot = 0
        for ref in nd.input:
            src, out = parse_input(ref)
            if out == CONTROL or src not in by_name:
                continue
            if nd.op in unknown:
                ins.setdefault(nd.name, []).append((src, out, slot))
            if by_name[src].op in unknown:
                outs.setdefault(src, []).append((nd.name, out, slot))
            slot += 1
    n_in: dict[str, int] = {}
    n_out: dict[str, int] = {}
    in_t: dict[str, dict[int, int]] = {op: {} for op in unknown}
    out_t: dict[str, dict[int, int]] = {op: {} for op in unknown}
    conflicts: dict[str, set[str]] = {}
    tops = [nd for nd in nodedefs if nd.op in unknown]
    for nd in tops:
        n_in[nd.op] = max(n_in.get(nd.op, 0), len(ins.get(nd.name, ())))
        k = max((o for _, o, _ in outs.get(nd.name, ())), default=-1) + 1
        if "_output_shapes" in nd.attr:
            k = max(k, len(nd.attr["_output_shapes"].list.shape))
        if "_output_types" in nd.attr:
            k = max(k, len(nd.attr["_output_types"].list.type))
        n_out[nd.op] = max(n_out.get(nd.op, 0), k)

    def learn(table: dict[int, int], op: str, slot: int, t: int | None, what: str) -> bool:
        if not t:
            return False
        have = table.get(slot)
        if have is None:
            table[slot] = t
            return True
        if have != t:
            conflicts.setdefault(op, set()).add(f"{what} {slot}")
        return False

    # output dtypes from _output_types, then from consumers and producers, to a fixpoint
    # (an unknown op may feed another)
    for nd in tops:
        if "_output_types" in nd.attr:
            for i, t in enumerate(nd.attr["_output_types"].list.type):
                learn(out_t[nd.op], nd.op, i, t, "output")
    inferred: dict = {}
    for _ in range(len(unknown) + 1):
        changed = False
        for nd in tops:
            for src, out, slot in ins.get(nd.name, ()):
                types = _types_of(by_name[src], "out", fns, inferred)
                if types is not None and out < len(types):
                    changed |= learn(in_t[nd.op], nd.op, slot, types[out], "input")
            for dst, out, slot in outs.get(nd.name, ()):
                types = _types_of(by_name[dst], "in", fns, inferred)
                if types is not None and slot < len(types):
                    changed |= learn(out_t[nd.op], nd.op, out, types[slot], "output")
        inferred = {op: _make_op_def(op, n_in.get(op, 0), n_out.get(op, 0), in_t[op], out_t[op], None)
                    for op in unknown}
        if not changed:
            break
    # inside function bodies: the output argument names the bodies read
    body_outputs: dict[str, list[str]] = {}
    for f in library.function:
        ops_in_body = {b.name: b.op for b in f.node_def}
        for ref in body_references(f):
            parts = ref.split(":")
            if not ref.startswith("^") and len(parts) == 3 and ops_in_body.get(parts[0]) in unknown:
                names = body_outputs.setdefault(ops_in_body[parts[0]], [])
                if parts[1] not in names:
                    names.append(parts[1])
    undetermined: dict[str, list[str]] = {}
    defs = {}
    for op in unknown:
        arg_names = body_outputs.get(op)
        od = _make_op_def(op, n_in.get(op, 0), n_out.get(op, 0), in_t[op], out_t[op], arg_names)
        defs[op] = od
        missing = [f"output {i}" for i, a in enumerate(od.output_arg) if a.type == DT_INVALID]
        missing += [f"input {i}" for i, a in enumerate(od.input_arg) if a.type == DT_INVALID]
        if arg_names and len(arg_names) > 1:
            missing.append(f"the order of output arguments {', '.join(arg_names)} (a function body names them)")
        missing += [f"{c} (nodes disagree on its dtype)" for c in sorted(conflicts.get(op, ()))]
        if missing:
            undetermined[op] = missing
    src = source or getattr(graph, "source", None)
    lib = OpLibrary(defs, source=f"inferred from {'the graph ' + Path(src).name if src else 'the graph'}",
                    inferred=True)
    return InferredOps(lib, unknown, undetermined)


def with_custom_op_signatures(pass_fn):
    """Decorator for a pass ``f(g, ...)``: ops of ``g`` nobody registers get OpDefs inferred
    from ``g`` for the duration of the pass (a no-op when every op is known, e.g. inside
    :func:`jitsim.passes.pipeline.run_pipeline`, which already made them known)."""
    @functools.wraps(pass_fn)
    def run(g, *args, **kwargs):
        inferred = infer_op_library(g)
        if inferred is None:
            return pass_fn(g, *args, **kwargs)
        with simulating(None, (inferred.library,)):
            return pass_fn(g, *args, **kwargs)

    return run


def _make_op_def(op: str, n_in: int, n_out: int, in_t: dict, out_t: dict, out_names: list[str] | None):
    od = protos.OpDef(name=op, is_stateful=True)  # stateful: never folded or merged by jitsim's optimizers
    for i in range(max(n_in, max(in_t, default=-1) + 1)):
        od.input_arg.add(name=f"input_{i}", type=in_t.get(i, DT_INVALID))
    if out_names and len(out_names) >= n_out:
        for i, name in enumerate(out_names):
            od.output_arg.add(name=name, type=out_t.get(i, DT_INVALID))
    else:
        for i in range(max(n_out, max(out_t, default=-1) + 1, 1 if out_names else 0)):
            od.output_arg.add(name=f"output_{i}", type=out_t.get(i, DT_INVALID))
    return od


# -- op-library files ------------------------------------------------------------------------


def read_op_library(path: Path | str) -> OpLibrary:
    """An :class:`OpLibrary` from ``jitsim registry export``'s JSON, or from a plain ``OpList``
    (``.pbtxt`` text or ``.pb`` binary). Core ops in it are ignored (TF core's definitions win)."""
    from google.protobuf import text_format

    from jitsim.graph.io import parse_message, read_bytes

    path = Path(path)
    data = read_bytes(path)
    xla, kernels = (), ()
    if data.lstrip()[:1] == b"{":
        try:
            doc = json.loads(data)
        except ValueError as e:
            raise GraphError(f"not a jitsim op library (bad JSON: {e})", path) from None
        if not isinstance(doc, dict) or doc.get("schema") != EXPORT_SCHEMA:
            raise GraphError(f"not a jitsim op library (expected \"schema\": \"{EXPORT_SCHEMA}\")", path)
        try:
            ol = text_format.Parse(doc.get("op_list", ""), protos.OpList())
            xla = tuple(text_format.Parse(doc.get("xla_kernels", ""), protos.KernelList()).kernel)
            kernels = tuple(text_format.Parse(doc.get("kernels", ""), protos.KernelList()).kernel)
        except text_format.ParseError as e:
            raise GraphError(f"malformed op library: {e}", path) from None
    else:
        from jitsim.graph.io import is_text_path

        ol = parse_message(protos.OpList(), data, path, text=is_text_path(path), what="OpList")
    core = op_defs()
    defs = {o.name: o for o in ol.op if o.name not in core}
    if not defs and not ol.op:
        raise GraphError("defines no ops", path)
    return OpLibrary(defs, xla, kernels, source=str(path))


def harvest_op_library(root: Path | str) -> OpLibrary | None:
    """The op library a harvest or capture recorded (``op_defs.pb``: the ops of the TF run
    that TF core does not register, e.g. tensorflow_text's), or None."""
    f = Path(root) / OP_LIBRARY_FILE
    return read_op_library(f) if f.is_file() else None
