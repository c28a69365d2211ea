"""Turning a library ``FunctionDef`` into a ``GraphDef`` the passes can run on.

A function body names tensors as ``node:output_arg:index``; a graph names them
``node:flat_index``. The flat index needs the producing op's ``OpDef`` (how many
tensors each output arg expands to), which comes from jitsim's shipped op registry,
or from the library when the producer is itself a function call by name.

The result mirrors TF's function instantiation: one ``_Arg`` node per input
(``T``, ``index``), the body's nodes, one ``_Retval`` per output
(``<output>_RetVal``), with the library kept so nested calls can be followed.
"""

from __future__ import annotations

from jitsim.errors import GraphError
from jitsim.registry import op_def, protos


def _output_sizes(node, op_def, library_fns) -> list[tuple[str, int]]:
    """[(output arg name, number of tensors)] for a body node."""
    if node.op in library_fns:
        return [(a.name, 1) for a in library_fns[node.op].signature.output_arg]
    if op_def is None:
        return []
    sizes = []
    for arg in op_def.output_arg:
        if arg.number_attr:
            n = node.attr[arg.number_attr].i if arg.number_attr in node.attr else 1
        elif arg.type_list_attr:
            n = len(node.attr[arg.type_list_attr].list.type) if arg.type_list_attr in node.attr else 1
        else:
            n = 1
        sizes.append((arg.name, n))
    return sizes


def body_references(fdef) -> list[str]:
    """Every tensor reference of a function body in a fixed order: the nodes' inputs in node
    order, then the returned tensors in the signature's output order."""
    refs = [r for nd in fdef.node_def for r in nd.input]
    return refs + [fdef.ret[a.name] for a in fdef.signature.output_arg if a.name in fdef.ret]


class _BodyRefs:
    """How the references of one function body resolve: its ``_Arg`` names and, per body
    node, where each output argument starts among the node's flat outputs."""

    def __init__(self, fdef, fns: dict, name: str, source=None):
        self.name, self.source = name, source
        self.args = {arg.name for arg in fdef.signature.input_arg}
        offsets: dict[str, dict[str, int]] = {}
        unknown: dict[str, str] = {}  # node -> op, for ops nobody registers (a custom-op library's)
        for node in fdef.node_def:
            table, pos = {}, 0
            od = op_def(node.op)
            if od is None and node.op not in fns:
                unknown[node.name] = node.op
            for out_name, n in _output_sizes(node, od, fns):
                table[out_name] = pos
                pos += n
            offsets[node.name] = table
        if unknown:
            # without an OpDef, the output arguments a body reads are numbered in the order the body
            # first reads them: exact for one argument; for several, a guess that
            # jitsim.graph.custom_ops reports ("could not determine the order of output arguments")
            read: dict[str, list[str]] = {}
            for ref in body_references(fdef):
                parts = ref.split(":")
                if len(parts) == 3 and parts[0] in unknown and parts[1] not in read.setdefault(parts[0], []):
                    read[parts[0]].append(parts[1])
            for node_name, names in read.items():
                offsets[node_name] = {arg: i for i, arg in enumerate(names)}
        self.offsets = offsets

    def convert(self, ref: str) -> str:
        """``ref`` as a graph names it (``node:flat_index``); GraphError when it names nothing."""
        if ref.startswith("^"):
            return ref
        offsets, name = self.offsets, self.name
        parts = ref.split(":")
        if len(parts) == 1:
            if ref in self.args or ref in offsets:
                return ref
        elif len(parts) == 3 and parts[0] in offsets:
            src, out, idx = parts
            if out not in offsets[src]:
                raise GraphError(f"function {name!r}: input {ref!r} names an unknown output {out!r} of {src!r}",
                                 self.source)
            flat = offsets[src][out] + int(idx)
            return src if flat == 0 else f"{src}:{flat}"
        elif len(parts) == 2 and parts[0] in offsets:  # already flat
            return ref
        raise GraphError(f"function {name!r}: input {ref!r} names no node or argument", self.source)


def body_problem(fns: dict, name: str) -> str | None:
    """Why TF's instantiation of function ``name`` would refuse its body (the first
    reference that names nothing), or None. ``fns``: the library by function name.

    TF checks a body only where it instantiates the function (inlining, lowering, a pass that
    reads the body); a body no pass instantiates may be broken without any error. Callers use
    this to say so in a note instead of refusing the whole input."""
    fdef = fns[name]
    refs = _BodyRefs(fdef, fns, name)
    try:
        for ref in body_references(fdef):
            refs.convert(ref)
    except GraphError as e:
        return e.message
    missing = [a.name for a in fdef.signature.output_arg if a.name not in fdef.ret]
    if missing:
        return f"function {name!r}: output {missing[0]!r} is not returned by the body"
    return None


def function_to_graphdef(library, name: str, *, source=None, fns: dict | None = None, with_library: bool = True):
    """A ``GraphDef`` for function ``name`` of ``library`` (a ``FunctionDefLibrary``): TF's
    instantiation of it, which is where a body is checked (GraphError when a reference
    names nothing).

    ``fns``: the library's functions by name, when the caller has them (built here otherwise).
    ``with_library=False``: the body alone, without a copy of the library: for callers that
    convert many bodies of one library (inlining, the analyses), where copying the whole
    library into each would make the work quadratic in the library's size (issue 22)."""
    if fns is None:
        fns = {f.signature.name: f for f in library.function}
    if name not in fns:
        raise GraphError(f"function {name!r} is not in the graph's library", source)
    fdef = fns[name]
    refs = _BodyRefs(fdef, fns, name, source)
    gd = protos.GraphDef()
    if with_library:
        gd.library.CopyFrom(library)
    for i, arg in enumerate(fdef.signature.input_arg):
        nd = gd.node.add(name=arg.name, op="_Arg")
        nd.attr["T"].type = arg.type
        nd.attr["index"].i = i
        # TF's function instantiation gives each _Arg its arg_attr (a signature's
        # `_output_shapes`: the shapes Grappler's GraphProperties starts from)
        if i in fdef.arg_attr and "_output_shapes" in fdef.arg_attr[i].attr:
            nd.attr["_output_shapes"].CopyFrom(fdef.arg_attr[i].attr["_output_shapes"])
    convert = refs.convert
    for node in fdef.node_def:
        nd = gd.node.add()
        nd.CopyFrom(node)
        del nd.input[:]
        nd.input.extend(convert(r) for r in node.input)
    for i, arg in enumerate(fdef.signature.output_arg):
        if arg.name not in fdef.ret:
            raise GraphError(f"function {name!r}: output {arg.name!r} is not returned by the body", source)
        nd = gd.node.add(name=f"{arg.name}_RetVal", op="_Retval")
        nd.input.append(convert(fdef.ret[arg.name]))
        nd.attr["T"].type = arg.type
        nd.attr["index"].i = i
    return gd


def called_functions(nd, fns) -> list[str]:
    """The library functions (``fns``: by name) node ``nd`` calls: by op name, or through
    func-valued attrs (``f``, ``then_branch``, ``branches``...)."""
    out = [nd.op] if nd.op in fns else []
    for av in nd.attr.values():
        kind = av.WhichOneof("value")
        if kind == "func" and av.func.name in fns:
            out.append(av.func.name)
        elif kind == "list":
            out += [f.name for f in av.list.func if f.name in fns]
    return out
