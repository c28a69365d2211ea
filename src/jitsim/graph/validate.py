"""Checks TensorFlow's importer and placer make on a user's graph, as one-line errors.

TF refuses a GraphDef whose nodes it cannot build: a node without a name, an attr the op
requires (no default) missing, an input naming an output slot the op does not have, a device
string it cannot parse, a data-input count the op does not take, a function that calls itself
or is named like an op. jitsim refuses the
same graphs when it loads a user's file (:func:`jitsim.graph.io.load`), naming the node, its
op and the field, instead of failing later deep inside a pass. Ops nobody registers are
custom ops (their signature is inferred later) and are not checked here; a call of a function
the library lacks is imported by TF too (mark-for-compilation then gives it a reason code).
"""

from __future__ import annotations

from jitsim.errors import GraphError
from jitsim.graph.model import CONTROL, parse_input

_DEVICE_EXAMPLE = "e.g. /job:localhost/replica:0/task:0/device:CPU:0, /device:GPU:0 or /cpu:0"


def _where(nd) -> str:
    return f"node {nd.name!r} ({nd.op or 'no op'})"


def check_nodes(graph, source=None) -> None:
    """Raise :class:`GraphError` (naming node, op and field) on the first node TF would refuse."""
    from jitsim.passes.devices import parse_device_name
    from jitsim.registry import op_def, op_defs

    source = source if source is not None else graph.source
    gd = graph.graphdef
    fns = {f.signature.name: f for f in gd.library.function}
    for name in fns:
        if name in op_defs():
            raise GraphError(f"library function {name!r} has the name of a TensorFlow op (TF refuses to add it to "
                             "the library)", source)
    n_out: dict[str, int | None] = {}
    ops: dict[str, tuple] = {}  # op -> (OpDef, signature, required attrs, fixed input/output counts)
    for i, nd in enumerate(gd.node):
        name, op = nd.name, nd.op
        if not name:
            raise GraphError(f"node #{i} ({op or 'no op'}) has an empty name", source)
        if not op:
            raise GraphError(f"node {name!r} has no op", source)
        if nd.device and parse_device_name(nd.device) is None:
            raise GraphError(f"{_where(nd)}: malformed device {nd.device!r} ({_DEVICE_EXAMPLE})", source)
        facts = ops.get(op)
        if facts is None:
            facts = ops[op] = _op_facts(op, fns, op_def)
        od, sig, required, fixed_in, fixed_out = facts
        if required:
            attrs = nd.attr
            for a in required:
                if a not in attrs:
                    raise GraphError(f"{_where(nd)}: missing attr {a!r}, which the op requires (no default)",
                                     source)
        if sig is not None:
            n_in = fixed_in if fixed_in is not None else _arg_count(nd, sig.input_arg, od, "input", source)
            have = 0
            for ref in nd.input:
                if ref[:1] != "^":
                    have += 1
            if n_in is not None and have != n_in:
                raise GraphError(f"{_where(nd)}: {have} data input{'s' if have != 1 else ''} given, but the op takes "
                                 f"{n_in} with these attrs", source)
            n_out[name] = fixed_out if fixed_out is not None else _arg_count(nd, sig.output_arg, od, "output",
                                                                              source)
    _check_recursion(fns, source)
    no_outputs = 0 in n_out.values()
    for nd in gd.node:
        for ref in nd.input:
            if ":" not in ref:  # output 0 or a control input: only an op without outputs refuses it
                if not no_outputs or ref.startswith("^"):
                    continue
            src, slot = parse_input(ref)
            if slot == CONTROL:
                continue
            count = n_out.get(src)
            if count is not None and slot >= count:
                op = graph.nodes[src].op if src in graph.nodes else "?"
                has = "no outputs" if count == 0 else f"{count} output{'s' if count != 1 else ''} (0..{count - 1})"
                raise GraphError(f"{_where(nd)}: input {ref!r} names output {slot} of {src!r}, but {op} has "
                                 f"{has}", source)


def _op_facts(op: str, fns: dict, op_def) -> tuple:
    """What :func:`check_nodes` needs of an op, once per op: its OpDef (None for a library
    function or an op nobody registers), the signature its nodes are counted against, the
    attrs it requires (no default), and its input and output counts when no attr sets them."""
    od = None if op in fns else op_def(op)
    sig = fns[op].signature if op in fns else od
    required = tuple(a.name for a in od.attr if not a.HasField("default_value")) if od is not None else ()

    def fixed(args) -> int | None:
        return None if any(a.type_list_attr or a.number_attr for a in args) else len(args)

    if sig is None:
        return od, sig, required, None, None
    return od, sig, required, fixed(sig.input_arg), fixed(sig.output_arg)


def _arg_count(nd, args, od, what: str, source=None) -> int | None:
    """How many tensors ``args`` (an OpDef's input or output args) expand to for ``nd``,
    counted without building them (a mutated ``N`` may be huge); None when an attr is missing
    or of the wrong kind (the attr check above names the missing ones)."""
    from jitsim.passes.optypes import attr_or_default as _attr_of

    total = 0
    for arg in args:
        if arg.type_list_attr:
            av = _attr_of(nd, od, arg.type_list_attr)
            if av is None or av.WhichOneof("value") not in ("list", None):
                return None
            total += len(av.list.type)
        elif arg.number_attr:
            av = _attr_of(nd, od, arg.number_attr)
            if av is None or av.WhichOneof("value") != "i":
                return None
            if av.i < 0:
                raise GraphError(f"{_where(nd)}: attr {arg.number_attr!r} = {av.i}, but it counts {what}s (0 or more)", source)
            total += av.i
        else:
            total += 1
    return total


def _calls(fdef, fns) -> list[str]:
    out = []
    for nd in fdef.node_def:
        if nd.op in fns:
            out.append(nd.op)
        for av in nd.attr.values():
            kind = av.WhichOneof("value")
            if kind == "func" and av.func.name in fns:
                out.append(av.func.name)
            elif kind == "list":
                out += [f.name for f in av.list.func if f.name in fns]
    return out


def _check_recursion(fns: dict, source) -> None:
    """TF cannot instantiate a function that calls itself, directly or through others."""
    calls = {name: _calls(f, fns) for name, f in fns.items()}
    state: dict[str, int] = {}
    for root in sorted(calls):
        if state.get(root):
            continue
        stack = [(root, iter(calls[root]))]
        path = [root]
        state[root] = 1
        while stack:
            name, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[name] = 2
                stack.pop()
                path.pop()
                continue
            if state.get(nxt) == 1:
                loop = path[path.index(nxt):] + [nxt]
                raise GraphError(f"function {nxt!r} calls itself ({' -> '.join(loop)}): TensorFlow cannot "
                                 "instantiate recursive functions", source)
            if not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(calls[nxt])))
                path.append(nxt)
