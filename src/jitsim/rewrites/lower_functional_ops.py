"""TF 2.21's ``LowerFunctionalOpsPass`` (PRE_PLACEMENT): lowering If/Case/While to
Switch/Merge control flow and inlining function calls, in one walk by node id.

TF walks node ids from 2 upward while the graph grows (``common_runtime/lower_functional_ops.cc``),
skipping nodes marked for TPU (``_tpu_replicate``) or XLA (``_xla_compile_id``) compilation:

* a function call (:mod:`jitsim.rewrites.function_inlining`) is inlined when function-call
  lowering is on (the function runtime) or the call carries ``_lower_as_multi_device_function``
  (the branch/cond/body calls lowering makes);
* an ``If``/``StatelessIf``/``Case``/``StatelessCase``/``While``/``StatelessWhile`` is lowered
  only when it carries ``_lower_using_switch_merge = true`` (``tf.cond`` / ``tf.while_loop`` v2
  set it when the graph is not built for XLA/TPU); otherwise it stays a functional op (no
  XLA kernel on the CPU path: it is not clustered).

Lowered nodes are named by the graph's ``NewName`` counter, as in TF's dumps:

* **If** ``I`` (``lower_if_op.cc``): call nodes ``I/then/_a`` and ``I/else/_b`` (named first),
  ``I/switch_pred/_c`` (Switch of the predicate with itself), ``I/pivot_f/_d`` and
  ``I/pivot_t/_e`` (Identity of its outputs 0 and 1), one ``I/<input node name>/_k`` Switch per
  data input (colocated with it), one ``I/output/_m`` Merge per result, ``I/branch_executed/_n``
  (Merge of the pivots with control edges from both calls), then ``I`` itself as a NoOp (an
  IdentityN of the Merges when kept fetchable) depending on ``branch_executed``. Control
  inputs go to ``switch_pred``; control consumers to ``branch_executed``.
* **Case** ``C`` (``lower_case_op.cc``): ``C/branch<i>/_k`` calls (named first), a
  ``C/branch_index/_k`` ``_SwitchN`` of the branch index with itself, one ``C/pivot_<i>/_k``
  Identity per branch, one ``C/<input node name>/_k`` ``_SwitchN`` per input, one
  ``C/merge/_k`` Merge per result and ``C/branch_executed/_k``, as for If (names from TF's
  source; no Case was harvested).
* **While** ``W`` (``lower_while_op.cc``): ``W/cond/_a``, ``W/body/_b`` calls, one
  ``W/enter/_k`` Enter per input (``frame_name`` = ``W``); inputs that the body passes through
  unchanged and that are resources get only a constant Enter (``is_constant``) and no
  Merge/Switch/Exit/NextIteration (what TF 2.21's dumps show for a Keras LSTM's weights);
  for the others ``W/merge/_k`` Merge, the cond call on the Merges, ``W/LoopCond/_k``, one
  ``W/<input node name>_switch/_k`` Switch per loop variable, the body call on the Switches'
  true outputs (with a control edge from ``W/loop_body_control/_k``, an Identity of the first
  Switch), ``W/exit/_k`` Exits, ``W/next_iteration/_k`` back to the Merges; ``W`` becomes a NoOp
  (IdentityN when fetchable) of the Exits, waiting on ``W/LoopExecuted/_k``, a NoOp on the Exits
  (TF 2.21's node between the Exits and the NextIterations) on which the While's control
  consumers wait; each NextIteration also waits on the body call; control inputs go
  through a ``W/LoopControlInputs`` NoOp to the Enters.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jitsim.registry import protos
from jitsim.graph.model import CONTROL, Graph, parse_input
from jitsim.rewrites.function_inlining import LOWER_AS_MULTI_DEVICE, InlineRecord, bool_attr, str_attr, type_attr, type_list_attr, called_function, inline_call, is_function_graph
from jitsim.graph.graphedit import DT_BOOL, DT_FLOAT, DT_INT32, DT_RESOURCE, EditGraph, ref
from jitsim.defs import LOWER_USING_SWITCH_MERGE_ATTR, XLA_COMPILE_ID_ATTR
from jitsim.codes import Code
from jitsim.records import NodeDecision
from jitsim.opsets import CASE_OPS, IF_OPS, WHILE_OPS

LOWER_USING_SWITCH_MERGE = LOWER_USING_SWITCH_MERGE_ATTR


@dataclass(kw_only=True)
class LowerRecord(NodeDecision):
    """The lowering's decision for one functional control-flow node: a :class:`NodeDecision`
    (code: ``inline_and_lower`` when lowered, else ``functional_op_kept``, detail saying why)."""

    node: str
    op: str
    lowered: bool
    created: int = 0

    @property
    def reason(self) -> str:
        return self.detail


@dataclass
class LowerResult:
    graph: Graph
    inline_records: list[InlineRecord] = field(default_factory=list)
    lower_records: list[LowerRecord] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        return {
            "inlined_calls": sum(r.inlined for r in self.inline_records),
            "calls_not_inlined": sum(not r.inlined for r in self.inline_records),
            "lowered": sum(r.lowered for r in self.lower_records),
            "functional_ops_kept": sum(not r.lowered for r in self.lower_records),
        }


def _call_node(eg: EditGraph, name: str, fname: str, inputs: list[str], device: str, func_attr) -> str:
    nd = protos.NodeDef(name=name, op=fname, device=device)
    nd.input.extend(inputs)
    nd.attr[LOWER_AS_MULTI_DEVICE].b = True
    for k, v in func_attr.attr.items():
        nd.attr[k].CopyFrom(v)
    eg.add_nodedef(nd)
    return name


def _out_types(nd) -> list[int]:
    if "Tout" in nd.attr:
        return list(nd.attr["Tout"].list.type)
    return list(nd.attr["T"].list.type)


def _finish(eg: EditGraph, name: str, outputs: list[str], control_src: str, device: str, fetchable: bool,
            types: list[int]) -> None:
    """Rewire the lowered op's consumers (data to ``outputs``, control to ``control_src``) and
    put a NoOp (IdentityN when fetchable) with its name in its place."""
    for port in sorted({p for _, _, p in eg.out_refs(name) if p != CONTROL}):
        eg.replace_uses(name, port, ref(outputs[port]))
    eg.replace_uses(name, CONTROL, None, control_to=control_src)
    eg.remove(name)
    if fetchable and outputs:
        eg.add(name, "IdentityN", [ref(o) for o in outputs] + [f"^{control_src}"], device=device,
               attrs={"T": type_list_attr(types)})
    else:
        eg.add(name, "NoOp", [f"^{control_src}"], device=device)


def lower_if(eg: EditGraph, name: str, *, fetchable: bool) -> int:
    nd = eg[name]
    before = len(eg)
    dev = nd.device
    data = [r for r in nd.input if not r.startswith("^")]
    ctrl = [r for r in nd.input if r.startswith("^")]
    pred = data[0]
    types = _out_types(nd)
    then_name = eg.new_name(f"{name}/then")
    else_name = eg.new_name(f"{name}/else")
    switch_pred = eg.new_name(f"{name}/switch_pred")
    eg.add(switch_pred, "Switch", [pred, pred] + ctrl, device=dev, attrs={"T": type_attr(DT_BOOL)})
    pivot_f = eg.new_name(f"{name}/pivot_f")
    eg.add(pivot_f, "Identity", [switch_pred], device=dev, attrs={"T": type_attr(DT_BOOL)})
    pivot_t = eg.new_name(f"{name}/pivot_t")
    eg.add(pivot_t, "Identity", [ref(switch_pred, 1)], device=dev, attrs={"T": type_attr(DT_BOOL)})
    tin = list(nd.attr["Tin"].list.type) if "Tin" in nd.attr else []
    then_in, else_in = [], []
    for i, r in enumerate(data[1:]):
        src = parse_input(r)[0]
        sw = eg.new_name(f"{name}/{src}")
        src_dev = eg[src].device if src in eg else ""
        eg.add(sw, "Switch", [r, pred], device=src_dev,
               attrs={"T": type_attr(tin[i] if i < len(tin) else DT_FLOAT),
                      "_class": _class_attr(src)})
        else_in.append(ref(sw, 0))
        then_in.append(ref(sw, 1))
    _call_node(eg, then_name, nd.attr["then_branch"].func.name, then_in + [f"^{pivot_t}"], dev,
               nd.attr["then_branch"].func)
    _call_node(eg, else_name, nd.attr["else_branch"].func.name, else_in + [f"^{pivot_f}"], dev,
               nd.attr["else_branch"].func)
    merges = []
    for i, t in enumerate(types):
        m = eg.new_name(f"{name}/output")
        eg.add(m, "Merge", [ref(then_name, i), ref(else_name, i)], device=dev,
               attrs={"T": type_attr(t), "N": 2})
        merges.append(m)
    executed = eg.new_name(f"{name}/branch_executed")
    eg.add(executed, "Merge", [pivot_t, pivot_f, f"^{then_name}", f"^{else_name}"], device=dev,
           attrs={"T": type_attr(DT_BOOL), "N": 2})
    _finish(eg, name, merges, executed, dev, fetchable, types)
    return len(eg) - before + 1


def lower_case(eg: EditGraph, name: str, *, fetchable: bool) -> int:
    nd = eg[name]
    before = len(eg)
    dev = nd.device
    data = [r for r in nd.input if not r.startswith("^")]
    ctrl = [r for r in nd.input if r.startswith("^")]
    index = data[0]
    types = _out_types(nd)
    branches = list(nd.attr["branches"].list.func)
    k = len(branches)
    calls = [eg.new_name(f"{name}/branch{i}") for i in range(k)]
    sw_index = eg.new_name(f"{name}/branch_index")
    eg.add(sw_index, "_SwitchN", [index, index] + ctrl, device=dev,
           attrs={"T": type_attr(DT_INT32), "num_outs": k})
    pivots = []
    for i in range(k):
        p = eg.new_name(f"{name}/pivot_{i}")
        eg.add(p, "Identity", [ref(sw_index, i)], device=dev, attrs={"T": type_attr(DT_INT32)})
        pivots.append(p)
    tin = list(nd.attr["Tin"].list.type) if "Tin" in nd.attr else []
    branch_in: list[list[str]] = [[] for _ in range(k)]
    for j, r in enumerate(data[1:]):
        src = parse_input(r)[0]
        sw = eg.new_name(f"{name}/{src}")
        eg.add(sw, "_SwitchN", [r, index], device=eg[src].device if src in eg else "",
               attrs={"T": type_attr(tin[j] if j < len(tin) else DT_FLOAT), "num_outs": k,
                      "_class": _class_attr(src)})
        for i in range(k):
            branch_in[i].append(ref(sw, i))
    for i in range(k):
        _call_node(eg, calls[i], branches[i].name, branch_in[i] + [f"^{pivots[i]}"], dev, branches[i])
    merges = []
    for j, t in enumerate(types):
        m = eg.new_name(f"{name}/merge")
        eg.add(m, "Merge", [ref(c, j) for c in calls], device=dev, attrs={"T": type_attr(t), "N": k})
        merges.append(m)
    executed = eg.new_name(f"{name}/branch_executed")
    eg.add(executed, "Merge", pivots + [f"^{c}" for c in calls], device=dev,
           attrs={"T": type_attr(DT_INT32), "N": k})
    _finish(eg, name, merges, executed, dev, fetchable, types)
    return len(eg) - before + 1


def _class_attr(src: str):
    av = protos.AttrValue()
    av.list.s.append(f"loc:@{src}".encode())
    return av


def _pass_through_resources(eg: EditGraph, body_name: str, types: list[int]) -> set[int]:
    """Loop variables the body returns unchanged (``ret[i]`` is argument ``i``) and that are
    resources: TF 2.21 gives them a constant Enter only."""
    fns = {f.signature.name: f for f in eg.library.function}
    f = fns.get(body_name)
    if f is None:
        return set()
    args = [a.name for a in f.signature.input_arg]
    out = set()
    for i, oa in enumerate(f.signature.output_arg):
        r = f.ret.get(oa.name, "")
        if i < len(args) and i < len(types) and r == args[i] and types[i] == DT_RESOURCE:
            out.add(i)
    return out


def lower_while(eg: EditGraph, name: str, *, fetchable: bool) -> int:
    nd = eg[name]
    before = len(eg)
    dev = nd.device
    data = [r for r in nd.input if not r.startswith("^")]
    ctrl = [r for r in nd.input if r.startswith("^")]
    types = list(nd.attr["T"].list.type)
    par = nd.attr["parallel_iterations"].i if "parallel_iterations" in nd.attr else 10
    cond_f, body_f = nd.attr["cond"].func, nd.attr["body"].func
    invariant = _pass_through_resources(eg, body_f.name, types)
    cond_name = eg.new_name(f"{name}/cond")
    body_name = eg.new_name(f"{name}/body")
    enters = []
    for i, r in enumerate(data):
        e = eg.new_name(f"{name}/enter")
        eg.add(e, "Enter", [r], device=dev,
               attrs={"T": type_attr(types[i]), "frame_name": name, "is_constant": i in invariant,
                      "parallel_iterations": par})
        enters.append(e)
    if ctrl:
        lci = eg.new_name(f"{name}/LoopControlInputs")
        eg.add(lci, "NoOp", ctrl, device=dev)
        for e in enters:
            eg.add_control_input(e, lci)
    variant = [i for i in range(len(data)) if i not in invariant]
    merges = {}
    for i in variant:
        m = eg.new_name(f"{name}/merge")
        eg.add(m, "Merge", [enters[i], enters[i]], device=dev, attrs={"T": type_attr(types[i]), "N": 2})
        merges[i] = m
    cond_in = [ref(merges[i]) if i in merges else ref(enters[i]) for i in range(len(data))]
    first_merge = merges[variant[0]] if variant else enters[0]
    _call_node(eg, cond_name, cond_f.name, cond_in + [f"^{first_merge}"], dev, cond_f)
    loop_cond = eg.new_name(f"{name}/LoopCond")
    eg.add(loop_cond, "LoopCond", [cond_name], device=dev)
    switches = {}
    for i in variant:
        src = parse_input(data[i])[0]
        s = eg.new_name(f"{name}/{src}_switch")
        eg.add(s, "Switch", [merges[i], loop_cond], device=dev, attrs={"T": type_attr(types[i])})
        switches[i] = s
    body_in = [ref(switches[i], 1) if i in switches else ref(enters[i]) for i in range(len(data))]
    control = None
    if variant:
        control = eg.new_name(f"{name}/loop_body_control")
        eg.add(control, "Identity", [ref(switches[variant[0]], 1)], device=dev,
               attrs={"T": type_attr(types[variant[0]])})
    _call_node(eg, body_name, body_f.name, body_in + ([f"^{control}"] if control else []), dev, body_f)
    exits = {}
    for i in variant:
        x = eg.new_name(f"{name}/exit")
        eg.add(x, "Exit", [switches[i]], device=dev, attrs={"T": type_attr(types[i])})
        exits[i] = x
    # TF 2.21's LoopExecuted NoOp on the Exits (numbered between the Exits and the
    # NextIterations in its dumps), through which the lowered While's control consumers wait;
    # Grappler removes it unless the While is preserved (a function's control output)
    executed = eg.new_name(f"{name}/LoopExecuted")
    eg.add(executed, "NoOp", [f"^{exits[i]}" for i in variant], device=dev)
    for i in variant:
        ni = eg.new_name(f"{name}/next_iteration")
        # TF's NextIteration waits on the body call too (its control outputs, once inlined)
        eg.add(ni, "NextIteration", [ref(body_name, i), f"^{body_name}"], device=dev, attrs={"T": type_attr(types[i])})
        eg.set_inputs(merges[i], [enters[i], ni])
    # an invariant resource's consumers read the loop's input itself
    out_refs = [ref(exits[i]) if i in exits else data[i] for i in range(len(data))]
    for port in sorted({p for _, _, p in eg.out_refs(name) if p != CONTROL}):
        eg.replace_uses(name, port, out_refs[port])
    exit_list = [exits[i] for i in variant]
    # the lowered While's substitute keeps its name: control consumers keep depending on it
    ctl_consumers = [c for c, _, p in eg.out_refs(name) if p == CONTROL]
    eg.remove(name)
    if fetchable and exit_list:
        eg.add(name, "IdentityN", [ref(x) for x in exit_list], device=dev,
               attrs={"T": type_list_attr([types[i] for i in variant])})
    else:
        eg.add(name, "NoOp", [f"^{executed}"], device=dev)
    for c in ctl_consumers:  # TF's UpdateConsumers: control consumers wait on LoopExecuted
        eg.add_control_input(c, executed)
    # the cond and body calls carry _lower_as_multi_device_function: the walk inlines them when
    # it reaches their ids, after every node that existed before them (TF 2.21's numbering: a
    # second While lowered before the first one's body is inlined)
    return len(eg) - before + 1


def lower_functional_ops(graph: Graph, *, lower_control_flow: bool = True, inline_calls: bool = True,
                         fetchable: bool | None = None) -> LowerResult:
    """TF's LowerFunctionalOpsPass on ``graph`` as the function runtime runs it (function-call
    inlining on). ``fetchable``: keep lowered ops and inlined callers fetchable (IdentityN)
    rather than targetable (NoOp); default as TF: fetchable unless the graph has
    ``_Arg``/``_Retval`` nodes."""
    eg = EditGraph.from_graph(graph)
    res = lower_and_inline(eg, lower_control_flow=lower_control_flow, inline_calls=inline_calls, fetchable=fetchable)
    res.graph = eg.to_graph(graph.source)
    return res


def lower_and_inline(eg: EditGraph, *, lower_control_flow: bool = True, inline_calls: bool = True,
         fetchable: bool | None = None) -> LowerResult:
    if fetchable is None:
        fetchable = not is_function_graph(eg)
    res = LowerResult(graph=None)  # type: ignore[arg-type]
    fns = {f.signature.name: f for f in eg.library.function}
    # TF walks node ids while the graph grows; new nodes get the next ids. The NodeDefs seen are
    # kept alive so that their id()s are never reused by new nodes.
    seen: list = []
    visited: set[int] = set()
    order = list(eg.nodes)
    mark = len(eg.added)
    i = 0
    while True:
        if i == len(order):
            # the nodes not visited yet, in node order: every one was added since the last
            # round began (a node that existed then was visited or replaced), so only those are
            # looked at, not the whole graph again: nesting N calls deep takes N rounds
            new = eg.added[mark:]
            mark = len(eg.added)
            last = {id(nd): k for k, nd in enumerate(new)}
            order = [nd.name for k, nd in enumerate(new)
                     if last[id(nd)] == k and eg.nodes.get(nd.name) is nd and id(nd) not in visited]
            i = 0
            if not order:
                break
        name = order[i]
        i += 1
        nd = eg.nodes.get(name)
        if nd is None or id(nd) in visited:
            continue
        visited.add(id(nd))
        seen.append(nd)
        if str_attr(nd, "_tpu_replicate") or str_attr(nd, XLA_COMPILE_ID_ATTR):
            continue
        fname = called_function(nd, fns)
        if fname is not None:
            if inline_calls or bool_attr(nd, LOWER_AS_MULTI_DEVICE):
                res.inline_records.append(inline_call(eg, name, fetchable=fetchable, fns=fns))
        elif nd.op in IF_OPS | CASE_OPS | WHILE_OPS and lower_control_flow:
            if bool_attr(nd, LOWER_USING_SWITCH_MERGE):
                fn = lower_if if nd.op in IF_OPS else lower_case if nd.op in CASE_OPS else lower_while
                n = fn(eg, name, fetchable=fetchable)
                res.lower_records.append(LowerRecord(Code.INLINE_AND_LOWER, node=name, op=nd.op, lowered=True, created=n))
            else:
                res.lower_records.append(LowerRecord(
                    Code.FUNCTIONAL_OP_KEPT, f"{LOWER_USING_SWITCH_MERGE} is not set: TF keeps the functional op",
                    node=name, op=nd.op, lowered=False))
    return res
