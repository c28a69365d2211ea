"""GraphDef -> FunctionDef: TF's ``GraphToFunctionDef`` over a graph in TF's own view
(:class:`~jitsim.graph.tfgraph.TfGraph`), the inverse of :mod:`jitsim.graph.functions`.

EncapsulateSubgraphs turns each optimized cluster subgraph into a library function with it:
signature names are the ``_Arg``/``_Retval`` names normalised (:func:`normalize_arg_name`) and
uniquified (:class:`NameMapping`, TF's ``NodeNameMapping``); body inputs are
``node:output_arg:index`` (:func:`output_ranges`); ``control_ret`` holds the control outputs.
"""

from __future__ import annotations

import re

from jitsim.errors import GraphError
from jitsim.registry import protos
from jitsim.registry.optypes import NodeTypes, attr_or_default
from jitsim.graph.tfgraph import SOURCE_ID, TfGraph, TfNode
from jitsim.registry import op_def


def merge_debug_info(src_nd, dst_nd) -> None:
    """TF's ``MergeDebugInfo(NodeDebugInfo(src), dst)``: sorted unions, only when the source
    has names."""
    if not src_nd.HasField("experimental_debug_info"):
        return
    s = src_nd.experimental_debug_info
    names, funcs = list(s.original_node_names), list(s.original_func_names)
    d = dst_nd.experimental_debug_info if dst_nd.HasField("experimental_debug_info") else None
    if names:
        merged = sorted(set(names) | set(d.original_node_names if d is not None else ()))
        info = dst_nd.experimental_debug_info
        del info.original_node_names[:]
        info.original_node_names.extend(merged)
    if funcs:
        merged = sorted(set(funcs) | set(d.original_func_names if d is not None else ()))
        info = dst_nd.experimental_debug_info
        del info.original_func_names[:]
        info.original_func_names.extend(merged)

def normalize_arg_name(name: str) -> str:
    """Lower-case ASCII letters, every other non-alphanumeric byte becomes ``_``, leading
    characters are dropped up to the first letter; ``unknown`` if nothing is left.

    >>> normalize_arg_name("Sum_0_retval"), normalize_arg_name("0/x:1"), normalize_arg_name("_1")
    ('sum_0_retval', 'x_1', 'unknown')
    """
    if not name:
        return "unknown"
    chars = name.encode().translate(_ARG_NAME_BYTES).decode("ascii")
    m = _FIRST_LETTER.search(chars)
    return chars[m.start():] if m is not None else "unknown"


# byte -> what normalize_arg_name makes of it: ASCII letters lower-cased, digits kept, "_" else
_ARG_NAME_BYTES = bytes(
    b if chr(b).isdigit() or chr(b).islower() else b + 32 if chr(b).isupper() else ord("_")
    for b in range(128)) + b"_" * 128
_FIRST_LETTER = re.compile("[a-z]")


class NameMapping:
    def __init__(self):
        self.used: dict[str, int] = {}
        self.mapping: dict[str, str] = {}

    def _uniquify(self, name: str) -> str:
        if name not in self.used:
            self.used[name] = 0
            return name
        while True:
            candidate = f"{name}_{self.used[name]}"
            self.used[name] += 1
            if candidate not in self.used:
                self.used[candidate] = 0
                return candidate

    def input_name(self, name: str) -> str:
        out = self._uniquify(normalize_arg_name(name))
        self.mapping[name] = out
        return out

    def output_name(self, name: str) -> str:
        return self._uniquify(normalize_arg_name(name))

    def uniquify(self, name: str) -> str:
        out = self._uniquify(name)
        self.mapping[name] = out
        return out

    def lookup(self, name: str) -> str:
        return self.mapping.get(name, "")


def output_ranges(nd, types: NodeTypes) -> list[tuple[str, int, int]]:
    """(output arg name, first flat index, end) for a body node (``NameRangesForNode``)."""
    if nd.op in types.fns:
        return [(a.name, i, i + 1) for i, a in enumerate(types.fns[nd.op].signature.output_arg)]
    od = op_def(nd.op)
    if od is None:
        return []
    out, pos = [], 0
    for arg in od.output_arg:
        n = arg_count(nd, od, arg)
        out.append((arg.name, pos, pos + n))
        pos += n
    return out


def arg_count(nd, od, arg) -> int:
    """How many flat tensors OpDef arg ``arg`` stands for on node ``nd``."""
    key = arg.number_attr or arg.type_list_attr
    if not key:
        return 1
    av = attr_or_default(nd, od, key)
    if av is None:
        return 0
    return av.i if arg.number_attr else len(av.list.type)

def _fixed_arity(nd, types: NodeTypes) -> tuple[int | None, list | None]:
    """For ``nd``'s op: (its number of inputs, :func:`output_ranges`), each None where the
    node's attrs decide it (a ``number_attr`` or ``type_list_attr`` arg). A function call's
    inputs are counted from its edges, so that count is None too."""
    if nd.op in types.fns:
        return None, output_ranges(nd, types)
    od = op_def(nd.op)
    if od is None:
        return 0, []
    n_in = None if any(a.number_attr or a.type_list_attr for a in od.input_arg) else len(od.input_arg)
    ranges = None if any(a.number_attr or a.type_list_attr for a in od.output_arg) else output_ranges(nd, types)
    return n_in, ranges


def graph_to_function_def(sg: TfGraph, fname: str, control_names: set[str], types: NodeTypes):
    """``GraphToFunctionDef(graph, name, control_ret)``; also returns arg/ret node -> signature name."""
    fdef = protos.FunctionDef()
    inputs: dict[int, TfNode] = {}
    outputs: dict[int, TfNode] = {}
    body: list[TfNode] = []
    control_outputs: list[TfNode] = []
    for n in sg.op_nodes():
        if n.op == "_Arg" or n.op == "_Retval":
            table = inputs if n.op == "_Arg" else outputs
            index = n.attr["index"].i
            if index in table:
                raise GraphError(f"function {fname}: multiple {n.op} nodes with index {index}")
            table[index] = n
            continue
        if n.name in control_names:
            control_outputs.append(n)
        body.append(n)
    for table, what in ((inputs, "_Arg"), (outputs, "_Retval")):
        for i in range(len(table)):
            if i not in table:
                raise GraphError(f"function {fname}: missing {what} node at index {i}")

    mapping = NameMapping()
    renaming: dict[tuple[int, int], str] = {}
    sig_names: dict[str, str] = {}
    sig = fdef.signature
    for i in range(len(outputs)):
        n = outputs[i]
        arg = sig.output_arg.add()
        arg.type = n.attr["T"].type
        arg.name = mapping.output_name(n.name)
        sig_names[n.name] = arg.name
    for i in range(len(inputs)):
        n = inputs[i]
        arg = sig.input_arg.add()
        arg.type = n.attr["T"].type
        arg.name = mapping.input_name(n.name)
        sig_names[n.name] = arg.name
        arg_attrs = [(k, v) for k, v in sorted(n.attr.items()) if k.startswith("_")]
        if arg_attrs:
            entry = fdef.arg_attr[i]
            for k, v in arg_attrs:
                entry.attr[k].CopyFrom(v)
        renaming[(n.id, 0)] = arg.name
    # per op, the input count and output ranges when no attr decides them (else None)
    fixed: dict[str, tuple] = {}
    for n in body:
        uname = mapping.uniquify(n.name)
        plan = fixed.get(n.op)
        if plan is None:
            plan = fixed[n.op] = _fixed_arity(n.nodedef, types)
        ranges = plan[1] if plan[1] is not None else output_ranges(n.nodedef, types)
        for out_name, start, end in ranges:
            for k in range(start, end):
                renaming.setdefault((n.id, k), f"{uname}:{out_name}:{k - start}")
    nodes = sg.nodes
    for n in body:
        nd = fdef.node_def.add()
        nd.CopyFrom(n.nodedef)
        merge_debug_info(n.nodedef, nd)
        del nd.input[:]
        nd.name = mapping.lookup(n.name)
        data: dict[int, str] = {}
        ctrl = []
        for e in n.in_edges.values():
            if e.src == SOURCE_ID:
                continue
            if e.is_control:
                ctrl.append(nodes[e.src].name)
            else:
                ref = renaming.get((e.src, e.src_output))
                if ref is None:
                    raise GraphError(f"input {e.dst_input} of node '{n.name}' in function "
                                     f"'{fname}' is not available")
                data[e.dst_input] = ref
        if n.op in types.fns:
            n_inputs = len(data)
        else:
            n_inputs = fixed[n.op][0]
            if n_inputs is None:
                n_inputs = len(types.inputs(n.nodedef))
        for i in range(max(n_inputs, len(data))):
            if i not in data:
                raise GraphError(f"node '{n.name}' in function '{fname}' is missing input {i}")
            nd.input.append(data[i])
        for c in sorted(ctrl):
            looked = mapping.lookup(c)
            if not looked:
                raise GraphError(f"the source of control edge {c} -> {n.name} is not in the "
                                 f"body of function '{fname}'")
            nd.input.append("^" + looked)
    for r in range(len(outputs)):
        ret = outputs[r]
        e_in = next((e for e in ret.in_edges.values() if not e.is_control and e.dst_input == 0), None)
        if e_in is None:
            raise GraphError(f"function {fname}: _Retval {ret.name} has no input")
        value = renaming.get((e_in.src, e_in.src_output))
        if value is None:
            raise GraphError(f"function {fname}: return value of {ret.name} is not available")
        fdef.ret[sig.output_arg[r].name] = value
    sig.name = fname
    control_set = set()
    for n in control_outputs:
        control_set.add(n.name)
        fdef.control_ret[n.name] = mapping.lookup(n.name)
    sig.control_output.extend(sorted(control_set))
    return fdef, sig_names
