"""A tf.function's graph written out as a GraphDef (``cf.graph.as_graph_def()``): called as the
function it is, not as a session.

A ``tf.function``'s ``FuncGraph`` exported with ``as_graph_def()`` keeps its nodes but not the
function around them: which placeholders are its arguments (and in which order), which tensors
it returns, which ops must run (its control outputs), and what its captured variables hold. TF
calls the live function by instantiating its FunctionDef (``_Arg``/``_Retval`` nodes, the
arguments' shapes known to Grappler, each resource argument's dtype and shape taken from the
variable passed); a session call of the same nodes differs (fed tensors have unknown shapes,
the fetched ``Identity`` is kept, the control outputs are lost). :func:`exported_function`
recovers the function from the export, as TF's tracing made it:

* **arguments**: every ``Placeholder``, in the file's order (a ``FuncGraph`` makes its
  arguments' placeholders first, in signature order, then one per capture as the body captures
  it; its inputs are exactly those, in that order), and the captured tensors stated (below);
* **outputs**: the ``Identity``/``Identity_N`` nodes nothing reads, in the file's order (the
  identities ``tf.function`` wraps each returned tensor in);
* **control outputs**: TF's automatic control dependencies tie every op that must run to one
  ``NoOp`` that each output depends on: its control inputs are the function's control outputs.
  A function that returns nothing has no such ``NoOp``; the TF runner then applies TF's own rule
  (``auto_control_deps``, the installed release's) to the imported graph;
* **captured variables** (``DT_RESOURCE`` placeholders): the variable's dtype from the ops that
  read it, its shape from ``_handle_shapes`` or from the ``_output_shapes`` that
  ``as_graph_def(add_shapes=True)`` writes on the ops reading it, else from the user
  (``--input-shape NAME=4,4`` for the placeholder ``NAME``). A variable shape the file does not
  hold makes the result approximate: Grappler's rewrites (the remapper's fusions, constant
  folding of shapes) read it in the live call.

* **captured tensors**: a small eager tensor the function captured (a ``tf.constant`` made outside
  it, a Keras ``Normalization`` layer's mean) is written as a ``Const`` node like any other, but
  the live call passes it as an argument (TF's by-value capture puts it among the FuncGraph's
  inputs, after the arguments, in capture order). No attribute, name or encoding tells the two
  apart (measured: EfficientNet's normalization, a Gemma backbone's scale), so the user states
  them: ``--captured NAME`` (repeatable) makes that ``Const`` an input, in file order among the
  captures, ``--captured none`` says there is none. Until stated the result is approximate.

>>> from jitsim.graph.model import Graph
>>> from jitsim.registry import protos
>>> gd = protos.GraphDef()
>>> x = gd.node.add(name="x", op="Placeholder"); x.attr["dtype"].type = 1
>>> x.attr["_user_specified_name"].s = b"x"
>>> y = gd.node.add(name="Relu", op="Relu", input=["x"]); y.attr["T"].type = 1
>>> i = gd.node.add(name="Identity", op="Identity", input=["Relu"]); i.attr["T"].type = 1
>>> f = exported_function(Graph(gd), captured=["none"])
>>> f.inputs, f.outputs, f.control_outputs, f.exact
(('x',), ('Identity:0',), (), True)
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from jitsim.errors import JitsimError
from jitsim.graph.model import Graph
from jitsim.opsets import FUNCTION_IO_OPS, PLACEHOLDER_OPS

EXPORTED_FUNCTION = "the exported function's own call"
DT_RESOURCE = 20
OUTPUT_NAME = re.compile(r"Identity(_\d+)?")
_NOOP_NAME = re.compile(r"NoOp(_\d+)?")
# ops that read a variable and say its dtype in their "dtype" attribute, and whether their
# first output has the variable's shape
_READERS = {"ReadVariableOp": True, "AssignVariableOp": False, "AssignAddVariableOp": False,
            "AssignSubVariableOp": False, "ResourceGather": False, "ResourceGatherNd": False,
            "VariableShape": False, "ResourceScatterUpdate": False}


@dataclass(frozen=True)
class Variable:
    """A captured resource (a ``DT_RESOURCE`` placeholder): a variable, with its ``dtype`` (TF's
    enum), ``shape`` (a tuple of dims, -1 unknown; None: not known) and where the shape came from;
    or a lookup table (``kind`` ``table``: read by ``LookupTable*`` ops), whose handle carries no
    dtype or shape for TF to read (``dtype``/``value_dtype``: its key and value types)."""

    name: str
    dtype: int
    shape: tuple | None
    source: str  # "_handle_shapes", "_output_shapes", "given", "table", "" (unknown)
    kind: str = "variable"
    value_dtype: int = 0

    def to_dict(self) -> dict:
        if self.kind == "table":
            return {"kind": "table", "key_dtype": self.dtype, "value_dtype": self.value_dtype}
        return {"dtype": self.dtype, "shape": None if self.shape is None else [None if d < 0 else d for d in self.shape]}


@dataclass(frozen=True)
class ExportedFunction:
    """The function an export was traced as (see the module docstring); it stands where a
    session graph's :class:`~jitsim.frontend.session_call.SessionCall` does: ``to_dict()`` is
    what the TF runner calls, ``exact`` whether the file holds all the call depends on."""

    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    control_outputs: tuple[str, ...] | None  # None: the runner applies TF's rule (no outputs)
    variables: tuple[Variable, ...] = ()
    captured: tuple[str, ...] = ()  # Consts the user named as captured eager tensors (inputs of the call)
    captured_stated: bool = False  # --captured given (names, or "none")
    chosen_by: str = EXPORTED_FUNCTION
    shapes: tuple = field(default=(), compare=False)  # the user's --input-shape pairs

    @property
    def missing_shapes(self) -> list[str]:
        """The captured variables whose shape the file does not hold (and the user did not give)."""
        return [v.name for v in self.variables if v.shape is None]

    @property
    def exact(self) -> bool:
        return not self.missing_shapes and self.captured_stated

    @property
    def hint(self) -> str:
        """What to do for an exact answer."""
        parts = []
        names = self.missing_shapes
        if names:
            shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
            parts.append(f"the shapes of the captured variables {shown} are not in the file: give them with "
                         f"--input-shape {names[0]}=DIMS, or export with as_graph_def(add_shapes=True)")
        if not self.captured_stated:
            parts.append("an eager tensor the function captured is a Const in the file but an argument of the live "
                         "call: name such Consts with --captured NAME, or say --captured none")
        return "; ".join(parts) + " (or give the SavedModel)"

    def describe(self, limit: int = 6) -> str:
        def names(xs):
            xs = list(xs)
            return ", ".join(xs[:limit]) + (f" and {len(xs) - limit} more" if len(xs) > limit else "")

        args = [n for n in self.inputs if n not in {v.name for v in self.variables}]
        parts = [f"arguments {names(args)}" if args else "no arguments"]
        if self.variables:
            known = len(self.variables) - len(self.missing_shapes)
            parts.append(f"{len(self.variables)} captured variables ({known} with their shapes)")
        if self.captured:
            parts.append(f"captured tensors {names(self.captured)}")
        elif self.captured_stated:
            parts.append("no captured tensor")
        parts.append(f"returns {names(self.outputs)}" if self.outputs else "returns nothing")
        if self.control_outputs:
            parts.append(f"control outputs {names(self.control_outputs)}")
        return f"the exported function called as TF calls it ({'; '.join(parts)})"

    def to_dict(self) -> dict:
        return {"function": {"name": self.name, "inputs": list(self.inputs), "outputs": list(self.outputs),
                             "control_outputs": None if self.control_outputs is None else list(self.control_outputs),
                             "variables": {v.name: v.to_dict() for v in self.variables},
                             "captured": list(self.captured)},
                "chosen_by": self.chosen_by, "exact": self.exact, "captured_stated": self.captured_stated,
                "missing_shapes": self.missing_shapes}

    def key(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)


def is_function_export(graph: Graph) -> bool:
    """Whether ``graph`` is a tf.function's graph written as a GraphDef: no ``_Arg``/``_Retval``
    and a placeholder as a ``FuncGraph`` makes them (with ``_user_specified_name``, or a
    ``DT_RESOURCE`` one: a captured variable), or, with no placeholder at all, only
    ``Identity``/``Identity_N`` outputs (a function without arguments)."""
    placeholders = []
    for n in graph:
        if n.op in FUNCTION_IO_OPS:
            return False
        if n.op in PLACEHOLDER_OPS:
            placeholders.append(n)
    if placeholders:
        return any("_user_specified_name" in n.nodedef.attr or _dtype(n.nodedef) == DT_RESOURCE for n in placeholders)
    consumed = {e.src for e in graph.edges()}
    sinks = [n.name for n in graph if n.name not in consumed]
    return bool(sinks) and all(OUTPUT_NAME.fullmatch(s) for s in sinks) and not graph.collections


def exported_function(graph: Graph, shapes=(), captured=None) -> ExportedFunction:
    """The function ``graph`` was exported from (the module docstring). ``shapes``: the user's
    ``(placeholder, dims)`` pairs for captured variables (``--input-shape``); ``captured``: the
    ``Const`` nodes that were eager tensors the function captured (``--captured``; ``["none"]``:
    none; None: not stated). Naming anything else is a one-line error."""
    consumed = {e.src for e in graph.edges()}
    stated = captured is not None and len(captured) > 0
    named = [c for c in (captured or ()) if c != "none"]
    if "none" in (captured or ()) and named:
        raise JitsimError("--captured none says the function captured no tensor: give it alone, or name the Consts")
    for c in named:
        if c not in graph or graph[c].op != "Const":
            raise JitsimError(f"--captured {c}: " + (f"{c!r} is a {graph[c].op}, not a Const" if c in graph else
                                                    f"no node {c!r} in the graph"))
    inputs = tuple(n.name for n in graph if n.op in PLACEHOLDER_OPS or n.name in named)
    out_nodes = [n.name for n in graph if n.op == "Identity" and n.name not in consumed
                 and OUTPUT_NAME.fullmatch(n.name)]
    noop = _control_noop(graph, out_nodes)
    if noop is not None:
        control = tuple(sorted({e.src for e in graph.in_edges(noop) if e.is_control}))
    else:
        control = () if out_nodes else None
    given = {str(k): tuple(v) for k, v in shapes}
    for name in given:
        if name not in inputs:
            raise JitsimError(f"--input-shape {name}: the exported function has no input {name!r} (its inputs: "
                              f"{', '.join(inputs) or 'none'})")
    variables = []
    for name in inputs:
        nd = graph[name].nodedef
        if name in named or _dtype(nd) != DT_RESOURCE:
            if name in given:
                raise JitsimError(f"--input-shape {name}: an argument's shape is the placeholder's; --input-shape "
                                  "states the shape of a captured variable (a DT_RESOURCE placeholder)")
            continue
        variables.append(_variable(graph, name, given.get(name)))
    stem = re.sub(r"\W", "_", (graph.source or "graph").rsplit("/", 1)[-1].split(".")[0]) or "graph"
    return ExportedFunction(f"__inference_exported_{stem}", inputs, tuple(f"{n}:0" for n in out_nodes), control,
                            tuple(variables), tuple(n for n in inputs if n in named), stated,
                            shapes=tuple(sorted(given.items())))


def _control_noop(graph: Graph, outputs: list[str]) -> str | None:
    """The ``NoOp`` every output depends on by a control edge (TF's automatic control
    dependencies make one when some op must run), or None."""
    if not outputs:
        return None
    common = None
    for o in outputs:
        srcs = {e.src for e in graph.in_edges(o) if e.is_control and graph[e.src].op == "NoOp"
                and _NOOP_NAME.fullmatch(e.src)}
        common = srcs if common is None else common & srcs
    return min(common) if common else None


def _dtype(nd) -> int:
    return nd.attr["dtype"].type if "dtype" in nd.attr else 0


def _variable(graph: Graph, name: str, given) -> Variable:
    nd = graph[name].nodedef
    dtype, shape, source = 0, None, ""
    if "_handle_dtypes" in nd.attr and nd.attr["_handle_dtypes"].list.type:
        dtype = nd.attr["_handle_dtypes"].list.type[0]
    if "_handle_shapes" in nd.attr and nd.attr["_handle_shapes"].list.shape:
        shape, source = _dims(nd.attr["_handle_shapes"].list.shape[0]), "_handle_shapes"
    functions = {f.signature.name: f for f in graph.library.function}
    for e in graph.out_edges(name):
        if e.is_control:
            continue
        reader = graph[e.dst].nodedef
        if reader.op.startswith("LookupTable") and e.dst_input == 0 and "Tin" in reader.attr:  # a table, not a variable
            return Variable(name, reader.attr["Tin"].type, (), "table", "table", reader.attr["Tout"].type)
        if reader.op in _READERS:
            if not dtype and "dtype" in reader.attr:
                dtype = reader.attr["dtype"].type
            if shape is None:
                shape = _read_shape(graph, reader)
                source = "_output_shapes" if shape is not None else ""
        elif reader.op in _CALLS and (not dtype or shape is None):  # the handle goes into a loop or a call
            for fname, index in _CALLS[reader.op](reader, e.dst_input):
                d, sh = _in_function(functions, fname, index, 2)
                dtype = dtype or d
                if shape is None and sh is not None:
                    shape, source = sh, "_output_shapes"
    if given is not None:
        shape, source = tuple(given), "given"
    return Variable(name, dtype or 1, shape, source)


def _func_attr(nd, key) -> str:
    return nd.attr[key].func.name if key in nd.attr else ""


# ops that pass their inputs on to functions: (function, argument index) per input index
_CALLS = {
    "While": lambda nd, i: [(_func_attr(nd, "body"), i), (_func_attr(nd, "cond"), i)],
    "StatelessWhile": lambda nd, i: [(_func_attr(nd, "body"), i), (_func_attr(nd, "cond"), i)],
    "If": lambda nd, i: [(_func_attr(nd, "then_branch"), i - 1), (_func_attr(nd, "else_branch"), i - 1)] if i else [],
    "StatelessIf": lambda nd, i: [(_func_attr(nd, "then_branch"), i - 1), (_func_attr(nd, "else_branch"), i - 1)]
    if i else [],
    "PartitionedCall": lambda nd, i: [(_func_attr(nd, "f"), i)],
    "StatefulPartitionedCall": lambda nd, i: [(_func_attr(nd, "f"), i)],
}


def _in_function(functions: dict, fname: str, index: int, depth: int) -> tuple[int, tuple | None]:
    """``(dtype, shape)`` of the variable behind argument ``index`` of library function ``fname``,
    from the ops that read it in the body (``_output_shapes`` as ``add_shapes=True`` writes them
    on library functions too); ``(0, None)`` when the body does not say."""
    f = functions.get(fname)
    if f is None or not 0 <= index < len(f.signature.input_arg):
        return 0, None
    arg = f.signature.input_arg[index].name
    nodes = {nd.name: nd for nd in f.node_def}
    dtype, shape = 0, None
    for nd in f.node_def:
        for pos, inp in enumerate(nd.input):
            if inp != arg:
                continue
            if nd.op in _READERS:
                dtype = dtype or (nd.attr["dtype"].type if "dtype" in nd.attr else 0)
                if shape is None and _READERS[nd.op] and "_output_shapes" in nd.attr and nd.attr["_output_shapes"].list.shape:
                    shape = _dims(nd.attr["_output_shapes"].list.shape[0])
                elif shape is None and nd.op.startswith("Assign") and len(nd.input) > 1:
                    src = nodes.get(nd.input[1].split(":")[0])
                    if src is not None and "_output_shapes" in src.attr and len(src.attr["_output_shapes"].list.shape) == 1:
                        shape = _dims(src.attr["_output_shapes"].list.shape[0])
            elif nd.op in _CALLS and depth > 0:
                for sub, i in _CALLS[nd.op](nd, pos):
                    d, sh = _in_function(functions, sub, i, depth - 1)
                    dtype = dtype or d
                    shape = shape if shape is not None else sh
    return dtype, shape


def _read_shape(graph: Graph, reader) -> tuple | None:
    """The variable's shape as ``as_graph_def(add_shapes=True)`` writes it at one of its readers:
    a read's output, or the value an assignment writes."""
    if _READERS[reader.op]:
        outs = reader.attr["_output_shapes"].list.shape if "_output_shapes" in reader.attr else ()
        return _dims(outs[0]) if outs else None
    if reader.op.startswith("Assign") and len(reader.input) > 1 and not reader.input[1].startswith("^"):
        src, _, port = reader.input[1].partition(":")
        if src in graph and "_output_shapes" in graph[src].nodedef.attr:
            outs = graph[src].nodedef.attr["_output_shapes"].list.shape
            if int(port or 0) < len(outs):
                return _dims(outs[int(port or 0)])
    return None


def _dims(shape_proto) -> tuple | None:
    if shape_proto.unknown_rank:
        return None
    return tuple(d.size for d in shape_proto.dim)
