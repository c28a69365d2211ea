"""Grappler's model pruner, the part that matters for clustering: dropping what no fetch needs.

In a function graph the fetches are the ``_Retval`` nodes and the nodes to preserve are the
function's control outputs (and its ``_Arg`` feeds); ``ModelPruner``
(``grappler/optimizers/model_pruner.cc``) keeps only the transitive fan-in (data and
control) of those. A function body exported from Python often holds such dead nodes (a
Keras LSTM's unused initial-state branch, shape computations whose result is never read):
TF never clusters them.

A graph without ``_Retval`` nodes has no known fetches unless the caller names them (a
ConcreteFunction's GraphDef: see :func:`jitsim.frontend.prepare.fetches_of`); else nothing is
pruned.
"""

from __future__ import annotations

from jitsim.graph.model import parse_input
from jitsim.codes import Code
from jitsim.records import RewriteRecord
from jitsim.rewrites.grappler import preserved
from jitsim.graph.graphedit import EditGraph, dedup_control_inputs, reorder
from jitsim.registry import protos
from jitsim.opsets import IDENTITY_OPS, PLAIN_MERGE_OPS, SWITCH_OPS

ARG_OPS = frozenset({"_Arg", "Placeholder"})


def prune_unreachable(eg: EditGraph, keep=frozenset(), fetches=None) -> RewriteRecord:
    """Keep the transitive fan-in of the fetches (default: the ``_Retval`` nodes) and of ``keep``."""
    rec = RewriteRecord(Code.MODEL_PRUNER)
    terminals = list(fetches) if fetches is not None else [n for n, nd in eg.nodes.items() if nd.op == "_Retval"]
    terminals = [n for n in terminals if n in eg]
    if not terminals:
        rec.detail = "no _Retval nodes: fetches unknown, nothing pruned"
        return rec
    keep_set = preserved(eg, keep)
    # TF's SetTransitiveFaninGraph: a stack walk from the nodes to preserve (fetches and control
    # outputs, sorted by name; a node pushed once per input reference, visited when first
    # popped); the kept graph is the visit order reversed, which is the order the rest of
    # Grappler starts from (its survivors of common-subgraph elimination follow from it)
    start = sorted({*terminals, *(n for n in keep_set if n in eg and eg[n].op not in ARG_OPS)})

    def fanin_walk():
        stack = list(start)
        visited: dict[str, None] = {}
        while stack:
            n = stack.pop()
            if n in visited:
                continue
            visited[n] = None
            for r in eg[n].input:
                src = parse_input(r)[0]
                if src in eg:
                    stack.append(src)
        return visited

    def cut(visited):
        # the function's arguments stay whether read or not (its signature), first
        args = [n for n in eg.nodes if eg[n].op in ARG_OPS and n not in visited]
        for n in list(eg.nodes):
            if n not in visited and eg[n].op not in ARG_OPS:
                eg.remove(n)
                rec.add(n, "unreachable from the fetches")
        reorder(eg, args + list(reversed(visited)))

    cut(fanin_walk())
    if split_identity_n(eg, start, rec):
        cut(fanin_walk())  # TF walks the fan-in again after splitting
    return rec


def split_identity_n(eg: EditGraph, terminals, rec) -> bool:
    """TF's ``SplitIdentityNInputs``: an ``IdentityN`` (Keras' custom gradients) of which the
    fetches read only some outputs keeps those inputs; each other output becomes an
    ``Identity`` ``<name>-<port>-grappler-ModelPruner`` for whatever else read it (unreachable,
    so pruned by the next walk). An IdentityN left with one input is then a trivial op."""
    used: dict[str, set[int]] = {}
    seen: set[str] = set(terminals)
    todo = [r for t in terminals if t in eg for r in eg[t].input]
    while todo:
        ref = todo.pop()
        src, port = parse_input(ref)
        nd = eg.nodes.get(src)
        if nd is None or src in seen:
            continue
        if nd.op == "IdentityN":
            ports = used.setdefault(src, set())
            key = f"{src}:{port}"
            if key not in seen:
                seen.add(key)
                if port >= 0:
                    ports.add(port)
                    data = [r for r in nd.input if not r.startswith("^")]
                    if port < len(data):
                        todo.append(data[port])
                todo.extend(r for r in nd.input if r.startswith("^"))
            continue
        seen.add(src)
        todo.extend(nd.input)
    changed = False
    for name, ports in used.items():
        nd = eg[name]
        data = [r for r in nd.input if not r.startswith("^")]
        ctrl = [r for r in nd.input if r.startswith("^")]
        types = list(nd.attr["T"].list.type) if "T" in nd.attr else []
        if len(types) != len(data) or len(ports) >= len(data):
            continue
        keep_ports = sorted(ports)
        new_pos = {p: i for i, p in enumerate(keep_ports)}
        for c, _, p in list(eg.out_refs(name)):
            if p < 0 or c not in eg.nodes:
                continue
            refs = []
            for r in eg[c].input:
                s_, q = parse_input(r)
                if s_ == name and q >= 0:
                    if q in new_pos:
                        r = name if new_pos[q] == 0 else f"{name}:{new_pos[q]}"
                    else:
                        ident = f"{name}-{q}-grappler-ModelPruner"
                        if ident not in eg.nodes:
                            eg.add(ident, "Identity", [data[q]], device=nd.device,
                                   attrs={"T": protos.AttrValue(type=types[q])})
                        r = ident
                refs.append(r)
            eg.set_inputs(c, refs)
        eg.set_inputs(name, [data[p] for p in keep_ports] + ctrl)
        del nd.attr["T"].list.type[:]
        nd.attr["T"].list.type.extend(types[p] for p in keep_ports)
        rec.add(name, f"IdentityN cut to the {len(keep_ports)} of its {len(data)} outputs the fetches read")
        changed = True
    return changed


TRIVIAL_OPS = frozenset({"StopGradient", "Snapshot"})


def _trivial(eg: EditGraph, nd) -> bool:
    """TF's ``IsTrivialOp``: ``StopGradient`` (and ``Snapshot``, an identity at inference);
    an ``Identity`` (or one-input ``IdentityN``) not driven by a control edge or a ``Switch``,
    not driving a control edge or feeding a ``Merge``; a ``NoOp`` without inputs; a ``Const``
    without inputs nothing reads as data; an ``AddN`` of at most one input."""
    data = [r for r in nd.input if not r.startswith("^")]
    if nd.op in TRIVIAL_OPS:
        return True
    if nd.op in IDENTITY_OPS or (nd.op == "IdentityN" and len(data) == 1):
        if len(data) != len(nd.input):
            return False
        if any(parse_input(r)[0] in eg and eg[parse_input(r)[0]].op in SWITCH_OPS for r in data):
            return False
        return not any(p < 0 or eg[c].op in PLAIN_MERGE_OPS for c, _, p in eg.out_refs(nd.name))
    if nd.op == "NoOp":
        return not nd.input
    if nd.op == "Const":
        return not nd.input and not any(p >= 0 for _, _, p in eg.out_refs(nd.name))
    return nd.op == "AddN" and len(data) <= 1


def _can_remove(eg: EditGraph, nd, functions) -> bool:
    """TF's ``CanRemoveNode`` for a trivial node: not one that would add edges, every fan-in on
    its device, none a function call or a ref-typed output, no fan-out a function call."""
    if nd.op == "NoOp" and (not nd.input or not eg.consumers(nd.name)):
        return True
    if nd.op == "Const" and not nd.input and not any(p >= 0 for _, _, p in eg.out_refs(nd.name)):
        return True
    fanin = len(nd.input)
    fanout = len(eg.out_refs(nd.name))
    if fanin * fanout > fanin + fanout:
        return False
    for r in nd.input:
        src = eg.nodes.get(parse_input(r)[0])
        if src is None:
            continue
        if src.device != nd.device:
            return False
        if r.startswith("^"):
            continue
        if src.op in functions:
            return False
        if _ref_output(src, parse_input(r)[1]):
            return False  # a ref-typed value (a TF1 VariableV2's `w/read`) keeps its Identity
    return not any(eg[c].op in functions for c, _, p in eg.out_refs(nd.name) if p >= 0)


def _ref_output(nd, port: int) -> bool:
    """TF's ``IsOutputPortRefValue``: whether output ``port`` of ``nd`` is of a ref type."""
    from jitsim.registry.optypes import is_ref_type, output_types

    try:
        types = output_types(nd)
    except (KeyError, ValueError, IndexError):
        return False
    return types is not None and 0 <= port < len(types) and is_ref_type(types[port])


def remove_trivial_ops(eg: EditGraph, keep=frozenset(), fetch_known: bool = True) -> RewriteRecord:
    """``ModelPruner``'s trivial ops (:func:`_trivial`) removed, their consumers reading their
    inputs (a control use of a removed node becomes control uses of its inputs), unless
    preserved or not removable (:func:`_can_remove`); only when the fetches are known. Every
    node's control inputs are deduplicated first (``DedupControlInputs``), as the pruner does."""
    rec = RewriteRecord(Code.MODEL_PRUNER)
    for name in list(eg.nodes):
        dedup_control_inputs(eg, name)
    if not fetch_known:
        return rec
    keep_set = preserved(eg, keep)
    functions = {f.signature.name for f in eg.library.function}
    doomed = [n for n, nd in eg.nodes.items()
              if n not in keep_set and _trivial(eg, nd) and _can_remove(eg, nd, functions)]
    for name in doomed:
        nd = eg.nodes.get(name)
        if nd is None:
            continue
        data = [r for r in nd.input if not r.startswith("^")]
        ctrl = [parse_input(r)[0] for r in nd.input if r.startswith("^")]
        for c, _, p in list(eg.out_refs(name)):
            if c not in eg.nodes:
                continue
            new = []
            for r in eg[c].input:
                src, port = parse_input(r)
                if src != name:
                    new.append(r)
                elif port < 0:
                    new += [f"^{parse_input(d)[0]}" for d in data] + [f"^{x}" for x in ctrl]
                else:
                    new.append(data[0] if nd.op != "IdentityN" else data[0])
            eg.set_inputs(c, [r for r in new if r != f"^{c}"])
        eg.remove(name)
        rec.add(name, f"{nd.op} bypassed")
    return rec
