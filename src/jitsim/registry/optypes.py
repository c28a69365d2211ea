"""Input and output dtypes of a node, from its OpDef (or library FunctionDef) and attrs.

Like TF's ``InOutTypesForNode``: ``number_attr`` args repeat their type N times,
``type_list_attr`` args expand to the list, ``is_ref`` args get the ``*_REF`` type
(value + 100). Missing attrs fall back to the OpDef default; unknown ops give ``None``.
"""

from __future__ import annotations

from jitsim.registry import op_def

REF_OFFSET = 100
DT_RESOURCE = 20
DT_VARIANT = 21
DT_STRING = 7
DT_INT32 = 3
DT_INT64 = 9
DT_BOOL = 10


def attr_or_default(nodedef, opdef, name):
    """The node's attr ``name``, else the OpDef's default for it; None if neither exists."""
    if name in nodedef.attr:
        return nodedef.attr[name]
    if opdef is not None:
        for a in opdef.attr:
            if a.name == name and a.HasField("default_value"):
                return a.default_value
    return None


def _arg_entries(args) -> tuple:
    """An OpDef's (or signature's) args as ``(type_list_attr, type_attr, type, number_attr,
    is_ref)`` tuples: what :func:`_expand_entries` reads of them."""
    return tuple((a.type_list_attr, a.type_attr, a.type, a.number_attr, a.is_ref) for a in args)


def _defaults(opdef) -> dict:
    """Attr name -> default value of ``opdef`` (None: no OpDef, no defaults)."""
    if opdef is None:
        return {}
    return {a.name: a.default_value for a in opdef.attr if a.HasField("default_value")}


def _expand_entries(entries, nodedef, defaults: dict) -> list[int]:
    """The dtypes the args expand to for ``nodedef``: a ``number_attr`` arg repeats its type N
    times, a ``type_list_attr`` arg is the list, a ref arg gets the ``*_REF`` type; a missing
    attr falls back to ``defaults`` (then 0, or an empty list)."""
    attrs = nodedef.attr
    out: list[int] = []
    for tl, ta, t, na, ref in entries:
        if tl:
            av = attrs[tl] if tl in attrs else defaults.get(tl)
            types = list(av.list.type) if av is not None else []
        else:
            if ta:
                av = attrs[ta] if ta in attrs else defaults.get(ta)
                t = av.type if av is not None else 0
            n = 1
            if na:
                av = attrs[na] if na in attrs else defaults.get(na)
                n = av.i if av is not None else 0
            types = [t] * n
        if ref:
            types = [x + REF_OFFSET for x in types]
        out.extend(types)
    return out


def _expand(args, nodedef, opdef) -> list[int]:
    """The dtypes ``args`` (of ``opdef``, or of a function signature when ``opdef`` is None)
    expand to for ``nodedef``, read from the protos."""
    return _expand_entries(_arg_entries(args), nodedef, _defaults(opdef))


def _signature(nodedef, library_fns):
    if library_fns and nodedef.op in library_fns:
        return library_fns[nodedef.op].signature, None
    od = op_def(nodedef.op)
    return od, od


# For TF's registered ops (OpDefs that live as long as the process), each arg list read from
# the proto once: per (id(OpDef), outputs?) the OpDef itself (which keeps its id unique), the
# args as (type_list_attr, type_attr, type, number_attr, is_ref) tuples, the attr defaults, and
# the types outright when no attr decides them. _expand reads them from the protos each call.
_ARG_PLANS: dict[tuple[int, bool], tuple] = {}


def _arg_plan(od, outputs: bool) -> tuple:
    key = (id(od), outputs)
    got = _ARG_PLANS.get(key)
    if got is None or got[0] is not od:
        entries = _arg_entries(od.output_arg if outputs else od.input_arg)
        fixed = None
        if not any(tl or ta or na for tl, ta, _, na, _ in entries):
            fixed = [t + REF_OFFSET if ref else t for _, _, t, _, ref in entries]
        got = _ARG_PLANS[key] = (od, entries, _defaults(od), fixed)
    return got


def _expand_planned(od, outputs: bool, nodedef) -> list[int]:
    """:func:`_expand` of ``od``'s input or output args, from their plan."""
    _, entries, defaults, fixed = _arg_plan(od, outputs)
    if fixed is not None:
        return list(fixed)
    return _expand_entries(entries, nodedef, defaults)


def input_types(nodedef, library_fns=None) -> list[int] | None:
    sig, od = _signature(nodedef, library_fns)
    if sig is None:
        return None
    if od is not None:
        return _expand_planned(od, False, nodedef)
    return _expand(sig.input_arg, nodedef, od)


def output_types(nodedef, library_fns=None) -> list[int] | None:
    sig, od = _signature(nodedef, library_fns)
    if sig is None:
        return None
    if od is not None:
        return _expand_planned(od, True, nodedef)
    return _expand(sig.output_arg, nodedef, od)


def is_ref_type(t: int) -> bool:
    return t > REF_OFFSET


class NodeTypes:
    """Cached input/output dtypes (``*_REF`` = base + 100), statefulness and op defs of the nodes
    of graphs whose functions come from ``library`` (EncapsulateSubgraphs and its optimizer)."""

    def __init__(self, library):
        self.fns = {f.signature.name: f for f in library.function}
        # id(NodeDef) -> (NodeDef, types); the NodeDef is kept so that its id stays unique
        self._in: dict[int, tuple] = {}
        self._out: dict[int, tuple] = {}

    def inputs(self, nd) -> list[int]:
        key = id(nd)
        if key not in self._in:
            self._in[key] = (nd, input_types(nd, self.fns) or [])
        return self._in[key][1]

    def outputs(self, nd) -> list[int]:
        if nd.op == "_Arg":
            return [nd.attr["T"].type]
        key = id(nd)
        if key not in self._out:
            self._out[key] = (nd, output_types(nd, self.fns) or [])
        return self._out[key][1]

    def output_type(self, nd, slot: int) -> int:
        outs = self.outputs(nd)
        return outs[slot] if 0 <= slot < len(outs) else 0

    def input_type(self, nd, slot: int) -> int:
        ins = self.inputs(nd)
        return ins[slot] if 0 <= slot < len(ins) else 0

    def signature(self, op: str):
        if op in self.fns:
            return self.fns[op].signature
        return op_def(op)

    def is_stateful(self, op: str) -> bool:
        sig = self.signature(op)
        return bool(sig is not None and sig.is_stateful)

    def is_commutative(self, op: str) -> bool:
        od = op_def(op)
        return bool(od is not None and od.is_commutative)
