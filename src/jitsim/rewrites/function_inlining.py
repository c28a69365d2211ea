"""Function inlining as TF 2.21's function runtime does it before placement.

When TF instantiates a multi-device function (every ``tf.function`` call, every SavedModel
signature call), ``LowerFunctionalOpsPass`` (PRE_PLACEMENT) walks the graph by node id and
inlines each function call: ``PartitionedCall`` / ``StatefulPartitionedCall``, and direct
calls of a library function by name (the then/else/cond/body calls that lowering creates,
marked ``_lower_as_multi_device_function``). Nodes added by an inlining get later ids, so
nested calls are inlined by the same walk. ``InlineFunctionBody``
(``common_runtime/inline_function_utils.cc``) does, for a caller ``C``:

* ``Func/C/input_control_node/_N`` (NoOp) if ``C`` has control inputs; they move to it;
* one ``Func/C/input/_N`` Identity per argument, fed by ``C``'s data inputs (control edge
  from the input-control node);
* every body node copied as ``C/<name>`` (inputs renamed alike; ``_class`` colocation
  entries naming body nodes prefixed too); body nodes without inputs, and nested calls
  without control inputs, get a control edge from the input-control node; uses of an
  ``_Arg`` read the matching input Identity;
* one ``Func/C/output/_N`` Identity per result (reading what the ``_Retval`` read);
  ``C``'s data consumers read them;
* ``Func/C/output_control_node/_N`` (NoOp), fed by the body's *control returns* (the
  multi-device policy, ``OutputControlSrc::kControlOutputs``), created when ``C`` has
  control consumers or the caller is kept; ``C``'s control consumers move to it; with no
  control return it depends on the input-control node;
* ``C`` is removed and, as LowerFunctionalOps keeps it *targetable* in a function graph
  (one with ``_Arg``/``_Retval``), replaced by a NoOp named ``C`` depending on the
  output-control node (an ``IdentityN`` of the outputs when kept *fetchable*, in graphs
  without ``_Arg``/``_Retval``).

Names ``.../_N`` use the graph's one ``NewName`` counter (:class:`~jitsim.graph.graphedit.EditGraph`).
Calls TF does not inline are skipped and recorded: functions marked ``_noinline``, calls
marked for XLA (``_xla_compile_id``) or TPU (``_tpu_replicate``), and calls of functions not
in the library.
"""

from __future__ import annotations

from dataclasses import dataclass

from jitsim.registry import protos
from jitsim.graph.model import CONTROL, parse_input
from jitsim.graph.graphedit import DT_FLOAT, EditGraph, ref
from jitsim.defs import XLA_COMPILE_ID_ATTR
from jitsim.codes import Code
from jitsim.records import NodeDecision
from jitsim.opsets import ENTER_OPS, FUNCTION_IO_OPS, PARTITIONED_CALL_OPS

LOWER_AS_MULTI_DEVICE = "_lower_as_multi_device_function"


@dataclass(kw_only=True)
class InlineRecord(NodeDecision):
    """The inliner's decision for one call: a :class:`NodeDecision` (code: the rewrite's,
    ``inline_and_lower``; detail: why the call is not inlined) about ``caller``."""

    caller: str
    function: str
    inlined: bool
    body_nodes: int = 0

    @property
    def reason(self) -> str:
        return self.detail


def called_function(nd, library_names) -> str | None:
    """The library function a node calls (``f`` of a (Stateful)PartitionedCall, or its op
    when the op names a library function), else None."""
    if nd.op in PARTITIONED_CALL_OPS:
        return nd.attr["f"].func.name if "f" in nd.attr else None
    if nd.op in library_names:
        return nd.op
    return None


def bool_attr(nd, key: str) -> bool:
    return key in nd.attr and nd.attr[key].WhichOneof("value") == "b" and nd.attr[key].b


def str_attr(nd, key: str) -> str:
    return nd.attr[key].s.decode() if key in nd.attr and nd.attr[key].WhichOneof("value") == "s" else ""


def not_inlined_reason(nd, fdef) -> str | None:
    """Why TF leaves this call alone, or None when it inlines it."""
    if str_attr(nd, "_tpu_replicate"):
        return "marked for TPU compilation (_tpu_replicate)"
    if str_attr(nd, XLA_COMPILE_ID_ATTR):
        return "marked for XLA compilation (_xla_compile_id)"
    if fdef is None:
        return "calls a function that is not in the library"
    a = fdef.attr.get("_noinline") if hasattr(fdef.attr, "get") else None
    if a is not None and a.WhichOneof("value") == "b" and a.b:
        return "the function is marked _noinline"
    return None


def is_function_graph(eg: EditGraph) -> bool:
    """TF keeps inlined callers and lowered ops *targetable* (a NoOp) in a function graph,
    one with ``_Arg``/``_Retval`` nodes, and *fetchable* (an IdentityN) otherwise."""
    return any(nd.op in FUNCTION_IO_OPS for nd in eg.nodes.values())


def _functions(eg: EditGraph) -> dict:
    return {f.signature.name: f for f in eg.library.function}


def _prefixed(prefix: str, r: str, body_names, arg_map) -> str:
    src, port = parse_input(r)
    if src in arg_map:  # uses of an _Arg read the matching input Identity
        return ref(arg_map[src], CONTROL if port == CONTROL else 0)
    if src in body_names:
        return ref(prefix + src, port)
    return r


def inline_call(eg: EditGraph, caller: str, *, fetchable: bool = False, fns=None) -> InlineRecord:
    """Inline the function call node ``caller`` of ``eg`` in place (see the module docstring)."""
    from jitsim.graph.functions import function_to_graphdef

    fns = fns if fns is not None else _functions(eg)
    cnd = eg[caller]
    fname = called_function(cnd, fns)
    fdef = fns.get(fname) if fname else None
    why = not_inlined_reason(cnd, fdef)
    if why is not None:
        return InlineRecord(Code.INLINE_AND_LOWER, why, caller=caller, function=fname or cnd.op, inlined=False)
    body = function_to_graphdef(eg.library, fname, fns=fns, with_library=False)
    args = sorted((nd for nd in body.node if nd.op == "_Arg"), key=lambda nd: nd.attr["index"].i)
    rets = sorted((nd for nd in body.node if nd.op == "_Retval"), key=lambda nd: nd.attr["index"].i)
    control_rets = [fdef.control_ret[k] for k in sorted(fdef.control_ret)]
    device = cnd.device
    data_in = [r for r in cnd.input if not r.startswith("^")]
    ctrl_in = [r for r in cnd.input if r.startswith("^")]
    if len(data_in) != len(args):
        return InlineRecord(Code.INLINE_AND_LOWER, f"caller has {len(data_in)} inputs, the function {len(args)} arguments",
                            caller=caller, function=fname, inlined=False)

    input_control = None
    if ctrl_in:
        input_control = eg.new_name(f"Func/{caller}/input_control_node")
        eg.add(input_control, "NoOp", ctrl_in, device=device)
    in_types = list(cnd.attr["Tin"].list.type) if "Tin" in cnd.attr else []
    arg_map: dict[str, str] = {}
    input_nodes = []
    for i, a in enumerate(args):
        name = eg.new_name(f"Func/{caller}/input")
        t = a.attr["T"].type if "T" in a.attr else (in_types[i] if i < len(in_types) else DT_FLOAT)
        eg.add(name, "Identity", [data_in[i]] + ([f"^{input_control}"] if input_control else []),
               attrs={"T": type_attr(t)})
        arg_map[a.name] = name
        input_nodes.append(name)

    prefix = caller + "/"
    body_nodes = [nd for nd in body.node if nd.op not in FUNCTION_IO_OPS]
    body_names = {nd.name for nd in body_nodes}
    for nd in body_nodes:
        new = protos.NodeDef()
        new.CopyFrom(nd)
        new.name = prefix + nd.name
        del new.input[:]
        inputs = [_prefixed(prefix, r, body_names, arg_map) for r in nd.input]
        if input_control is not None:
            has_input = bool(nd.input)
            is_call = called_function(nd, fns) is not None
            has_ctrl = any(r.startswith("^") for r in nd.input)
            if not has_input or (is_call and not has_ctrl):
                inputs.append("^" + input_control)
        new.input.extend(_ordered(inputs))
        if "_class" in new.attr:
            vals = [v.decode() for v in new.attr["_class"].list.s]
            fixed = ["loc:@" + prefix + v[5:] if v.startswith("loc:@") and v[5:] in body_names
                     else ("loc:@" + arg_map[v[5:]] if v.startswith("loc:@") and v[5:] in arg_map else v)
                     for v in vals]
            del new.attr["_class"].list.s[:]
            new.attr["_class"].list.s.extend(f.encode() for f in fixed)
        if new.op in ENTER_OPS and "frame_name" in new.attr:
            new.attr["frame_name"].s = (prefix + new.attr["frame_name"].s.decode()).encode()
        eg.add_nodedef(new)

    outputs = []
    out_types = list(cnd.attr["Tout"].list.type) if "Tout" in cnd.attr else []
    for i, r in enumerate(rets):
        data = [x for x in r.input if not x.startswith("^")][0]
        ctrl = [x for x in r.input if x.startswith("^")]
        name = eg.new_name(f"Func/{caller}/output")
        t = r.attr["T"].type if "T" in r.attr else (out_types[i] if i < len(out_types) else DT_FLOAT)
        eg.add(name, "Identity", [_prefixed(prefix, data, body_names, arg_map)]
               + [_prefixed(prefix, c, body_names, arg_map) for c in ctrl], attrs={"T": type_attr(t)})
        outputs.append(name)

    # LowerFunctionalOps always keeps the caller (targetable or fetchable), so the
    # output-control node is always made
    output_control = eg.new_name(f"Func/{caller}/output_control_node")
    ctl = ["^" + prefix + c for c in control_rets if c in body_names]
    if not ctl and input_control is not None:
        ctl = ["^" + input_control]
    eg.add(output_control, "NoOp", ctl, device=device)

    # rewire the caller's consumers, then replace the caller by its substitute
    for port in sorted({p for _, _, p in eg.out_refs(caller) if p != CONTROL}):
        eg.replace_uses(caller, port, ref(outputs[port]) if port < len(outputs) else None)
    eg.replace_uses(caller, CONTROL, None, control_to=output_control)
    eg.remove(caller)
    if fetchable and outputs:
        eg.add(caller, "IdentityN", [ref(o) for o in outputs] + [f"^{output_control}"], device=device,
               attrs={"T": type_list_attr([eg[o].attr["T"].type for o in outputs])})
    else:
        eg.add(caller, "NoOp", [f"^{output_control}"], device=device)
    return InlineRecord(Code.INLINE_AND_LOWER, caller=caller, function=fname, inlined=True, body_nodes=len(body_nodes))


def _ordered(inputs: list[str]) -> list[str]:
    data = [r for r in inputs if not r.startswith("^")]
    ctrl = []
    for r in inputs:
        if r.startswith("^") and r not in ctrl:
            ctrl.append(r)
    return data + ctrl


def type_attr(t: int):
    av = protos.AttrValue()
    av.type = t
    return av


def type_list_attr(ts):
    av = protos.AttrValue()
    av.list.type.extend(ts)
    return av
