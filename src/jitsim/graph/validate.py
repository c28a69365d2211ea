"""Checks TensorFlow's importer and placer make on a user's graph, as one-line errors.

TF refuses a GraphDef whose nodes it cannot build: a node without a name, an attr the op
requires (no default) missing, an input naming an output slot the op does not have, a device
string it cannot parse, a call of a function the library does not hold. jitsim refuses the
same graphs when it loads a user's file (:func:`jitsim.graph.io.load`), naming the node, its
op and the field, instead of failing later deep inside a pass. Ops nobody registers are
custom ops (their signature is inferred later) and are not checked here.
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
    from jitsim.passes.optypes import output_types
    from jitsim.registry import op_def

    source = source if source is not None else graph.source
    gd = graph.graphdef
    fns = {f.signature.name: f for f in gd.library.function}
    n_out: dict[str, int | None] = {}
    for i, nd in enumerate(gd.node):
        if not nd.name:
            raise GraphError(f"node #{i} ({nd.op or 'no op'}) has an empty name", source)
        if not nd.op:
            raise GraphError(f"node {nd.name!r} has no op", source)
        if nd.device and parse_device_name(nd.device) is None:
            raise GraphError(f"{_where(nd)}: malformed device {nd.device!r} ({_DEVICE_EXAMPLE})", source)
        od = None if nd.op in fns else op_def(nd.op)
        if od is not None:
            for a in od.attr:
                if a.name not in nd.attr and not a.HasField("default_value"):
                    raise GraphError(f"{_where(nd)}: missing attr {a.name!r}, which the op requires (no default)",
                                     source)
        for key, av in nd.attr.items():
            names = [av.func.name] if av.WhichOneof("value") == "func" else (
                [f.name for f in av.list.func] if av.WhichOneof("value") == "list" else [])
            for fname in names:
                if fname and fname not in fns and op_def(fname) is None:
                    raise GraphError(f"{_where(nd)}: attr {key!r} calls function {fname!r}, which the graph's "
                                     "function library does not hold", source)
        if od is not None or nd.op in fns:
            try:
                types = output_types(nd, fns)
            except Exception:  # an attr of the wrong kind: leave it to the passes' own checks
                types = None
            n_out[nd.name] = None if types is None else len(types)
    for nd in gd.node:
        for ref in nd.input:
            src, slot = parse_input(ref)
            if slot == CONTROL:
                continue
            count = n_out.get(src)
            if count is not None and slot >= count:
                op = graph.nodes[src].op if src in graph.nodes else "?"
                has = "no outputs" if count == 0 else f"{count} output{'s' if count != 1 else ''} (0..{count - 1})"
                raise GraphError(f"{_where(nd)}: input {ref!r} names output {slot} of {src!r}, but {op} has "
                                 f"{has}", source)
