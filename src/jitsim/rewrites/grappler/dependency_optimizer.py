"""Grappler's dependency optimizer: Identity and NoOp nodes bypassed or removed.

``DependencyOptimizer::OptimizeNode`` (``grappler/optimizers/dependency_optimizer.cc``) removes
a NoOp, Identity or IdentityN node that is not to be preserved when doing so does not add
edges: with ``i`` inputs and ``o`` consumers it requires ``i * o <= i + o`` (an IdentityN of
several data inputs counts the edges it would really make: TF's dumps show every Keras
custom-gradient ``IdentityN`` gone, whatever its number of inputs), nor device crossings.
A constant without inputs runs early anyway: the control edges out of it go, and it goes when
nothing reads it. The candidates are taken as TF takes them, from the top of a stack of unique
entries filled in graph order, each rewrite pushing the nodes it touched: which of a
``tf.group`` NoOp and its tuple Identities survives depends on that order.
Each consumer then reads the Identity's input directly (control consumers depend on the
removed node's inputs), and the removed node's control inputs become control inputs of its
consumers. An Identity is kept when it is not safe to remove (``SafeToRemoveIdentity``):

* it is preserved (a fetch or control output), or the fetches are unknown;
* it reads a variable (``VariableV2``...) or a ``_Recv``;
* it has control inputs and a consumer is a ``_Retval`` or a ``Merge``;
* it reads a ``Switch`` and a consumer depends on it by a control edge (a cond pivot).

Before that, a node whose outputs only control edges read, and that is free of side effects,
becomes a NoOp (``SafeToConvertToNoOp``). It runs to a fixed point, twice, each time after
``TransitiveReduction`` (:func:`transitive_reduction`): a control edge is dropped where another
path already orders the two nodes (the control edges a bypassed NoOp handed to an output
``Identity`` are dropped this way, so TF then removes that Identity too). The effect on clustering: the inliner's ``Func/.../input`` /
``output`` Identities and the NoOps of inlining and lowering disappear, so the control edges
they carried go straight between the real nodes (as in TF's dumps).
"""

from __future__ import annotations

from jitsim.graph.model import CONTROL, parse_input
from jitsim.codes import Code
from jitsim.records import RewriteRecord
from jitsim.rewrites.grappler import control_dependency, preserved
from jitsim.graph.graphedit import EditGraph, dedup_control_inputs, tf_topological_order
from jitsim.registry import op_def
from jitsim.opsets import CONSTANT_OPS, ENTER_OPS, EXIT_OPS, IDENTITY_N_OPS, IDENTITY_OPS, MERGE_OPS, NEXT_ITERATION_OPS, SWITCH_OPS

FRAME_OPS = ENTER_OPS | EXIT_OPS | NEXT_ITERATION_OPS  # TF's ModifiesFrameInfo

VARIABLE_OPS = frozenset({"Variable", "VariableV2", "AutoReloadVariable", "VarHandleOp", "_Recv", "_HostRecv"})


def _safe_identity(eg: EditGraph, name: str, keep: set[str], fetch_known: bool) -> bool:
    nd = eg[name]
    if name in keep or not fetch_known or not nd.input:
        return False
    src = parse_input(nd.input[0])[0]
    if src not in eg:
        return False
    inp = eg[src]
    if inp.op in VARIABLE_OPS:
        return False
    for c in eg.consumers(name):
        cnd = eg[c]
        if len(nd.input) > 1 and (cnd.op == "_Retval" or cnd.op in MERGE_OPS):
            return False
        if inp.op in SWITCH_OPS and ("^" + name) in cnd.input:
            return False
    return True


def _bypass(eg: EditGraph, name: str) -> None:
    """TF's rerouting around a bypassed node, input lists as TF leaves them: an Identity's data
    input (an IdentityN's data inputs) replaces the consumer's use of it in place (a control use
    becomes a control input from that input's node); each of its other inputs (all of a NoOp's)
    is appended to the consumer as a control input unless the consumer already reads that
    node; then the consumer's ``^name`` is swapped with its last input and dropped
    (``RemoveControlInput``)."""
    nd = eg[name]
    refs = list(nd.input)
    is_identity = nd.op in IDENTITY_OPS or (nd.op == "IdentityN" and
                                                          sum(1 for r in refs if not r.startswith("^")) == 1)
    multi_identity_n = nd.op == "IdentityN" and not is_identity
    data = [r for r in refs if not r.startswith("^")]
    ctrl = [r for r in refs if r.startswith("^")]
    for c in eg.consumers(name):
        # the common case in place (a wide consumer is not rewritten once per bypassed input)
        if not ctrl and eg.redirect_data_uses(c, name, lambda p, r: data[p] if nd.op == "IdentityN" else data[0]):
            continue
        inputs = list(eg[c].input)
        readers = {parse_input(r)[0] for r in inputs}
        for i, ref in enumerate(refs):
            if (is_identity and i == 0) or (multi_identity_n and not ref.startswith("^")):
                for j, r in enumerate(inputs):
                    src, port = parse_input(r)
                    if src == name:
                        if port == i:
                            inputs[j] = ref
                        elif port == CONTROL:
                            inputs[j] = "^" + parse_input(ref)[0]
            else:
                src = parse_input(ref)[0]
                if src not in readers and src != c:
                    inputs.append("^" + src)
                    readers.add(src)
        # RemoveControlInput: from the end, among the control inputs
        for pos in range(len(inputs) - 1, -1, -1):
            if not inputs[pos].startswith("^"):
                break
            if inputs[pos] == "^" + name:
                inputs[pos], inputs[-1] = inputs[-1], inputs[pos]
                inputs.pop()
                break
        inputs = [r for r in inputs if parse_input(r)[0] != name]
        eg.set_inputs(c, inputs)
    eg.remove(name)


# never turned into NoOps (DependencyOptimizer::SafeToConvertToNoOp)
DO_NOT_CONVERT = frozenset({"Assert", "CheckNumerics", "_Retval", "_Arg", "_ParallelConcatUpdate", "TPUExecute",
                            "TPUCompile", "ControlTrigger", "Placeholder", "PlaceholderWithDefault", "Merge",
                            "RefMerge", "Switch", "RefSwitch", "Enter", "RefEnter", "Exit", "RefExit",
                            "NextIteration", "RefNextIteration", "LoopCond", "NoOp"})


def _free_of_side_effects(nd) -> bool:
    """Grappler's ``IsFreeOfSideEffect``, with TF 2.21's observed treatment of
    ``ReadVariableOp``: a variable read that only control edges use is removed (a Keras LSTM's
    reads of its weights before the loop, control outputs of the layer's function, are gone
    from TF's dumps)."""

    if nd.op == "ReadVariableOp":
        return True
    od = op_def(nd.op)
    if od is None or od.is_stateful or not od.output_arg:
        return False
    if any(a.is_ref for a in od.input_arg):
        return False
    return "Queue" not in nd.op and not nd.op.startswith("_Send")


def _safe_to_convert(eg: EditGraph, name: str, keep_set: set[str], fetch_known: bool) -> bool:
    """TF's ``SafeToConvertToNoOp``: no data consumer, the fetches known, not preserved, free of
    side effects, an op with outputs that is neither control flow nor in TF's list of ops never
    rewritten, and (an Identity) safe to remove."""
    nd = eg[name]
    if not fetch_known or name in keep_set or nd.op in DO_NOT_CONVERT:
        return False
    if any(p != CONTROL for _, _, p in eg.out_refs(name)):
        return False
    if not _free_of_side_effects(nd):
        return False
    if nd.op in IDENTITY_OPS or nd.op in IDENTITY_N_OPS:
        return _safe_identity(eg, name, keep_set, fetch_known)
    return True


def optimize_dependencies(eg: EditGraph, keep=frozenset(), *, fetch_known: bool | None = None) -> RewriteRecord:
    rec = RewriteRecord(Code.DEPENDENCY_OPTIMIZER)
    keep_set = preserved(eg, keep)
    if fetch_known is None:
        fetch_known = any(nd.op == "_Retval" for nd in eg.nodes.values()) or bool(keep)
    for name in list(eg.nodes):  # CleanControlInputs
        dedup_control_inputs(eg, name)
    for _ in range(2):  # TF's two iterations: transitive reduction, then the fixed point
        cut = transitive_reduction(eg)
        if cut:
            rec.detail = (rec.detail + "; " if rec.detail else "") + f"{cut} redundant control edge(s) removed"
        _optimize_nodes(eg, keep_set, fetch_known, rec)
        for name in list(eg.nodes):  # CleanControlInputs
            dedup_control_inputs(eg, name)
    return rec




def _optimize_nodes(eg: EditGraph, keep_set: set[str], fetch_known: bool, rec: RewriteRecord) -> None:
    """TF's ``OptimizeDependencies``: the candidates (NoOps, Identities, constants, nodes only
    control edges read) pushed in graph order on a stack of unique entries, taken from its top;
    each rewrite pushes the nodes it touched (TF's ``SetVector``), so the order in which nodes
    are bypassed, hence which survive, is TF's."""
    stack: list[str] = []
    queued: set[str] = set()

    def push(n: str) -> None:
        if n in eg.nodes and n not in queued:
            stack.append(n)
            queued.add(n)

    for name in list(eg.nodes):
        nd = eg[name]
        if nd.op == "NoOp" or nd.op in IDENTITY_OPS or nd.op in IDENTITY_N_OPS or nd.op in CONSTANT_OPS or \
                _safe_to_convert(eg, name, keep_set, fetch_known):
            push(name)
    while stack:
        name = stack.pop()
        queued.discard(name)
        if name in eg.nodes:
            _optimize_node(eg, name, keep_set, fetch_known, rec, push)


def _optimize_node(eg: EditGraph, name: str, keep_set: set[str], fetch_known: bool, rec: RewriteRecord, push) -> None:
    nd = eg[name]
    if nd.op in CONSTANT_OPS and not nd.input:
        # a constant without inputs runs early anyway: its control edges out go
        for c in sorted(eg.consumers(name)):
            refs = list(eg[c].input)
            hit = False
            for i in range(len(refs) - 1, -1, -1):
                if refs[i] == "^" + name:
                    refs[i], refs[-1] = refs[-1], refs[i]
                    refs.pop()
                    hit = True
            if hit:
                eg.set_inputs(c, refs)
                push(c)
        if not eg.consumers(name) and fetch_known and name not in keep_set:
            eg.remove(name)
            rec.add(name, "Const without consumers removed")
        return
    if nd.op != "NoOp" and _safe_to_convert(eg, name, keep_set, fetch_known):
        ins: list[str] = []
        for r in nd.input:
            if r.startswith("^"):
                if r not in ins:
                    ins.append(r)
                continue
            ref = control_dependency(eg, r, nd)
            if ref not in ins:
                ins.append(ref)
            push(parse_input(r)[0])
        nd.op = "NoOp"
        for k in list(nd.attr):
            del nd.attr[k]
        eg.set_inputs(name, ins)
        rec.add(name, "converted to NoOp (only control consumers)")
        push(name)
        return
    if name in keep_set:
        return
    if nd.op != "NoOp":
        if nd.op not in IDENTITY_OPS and nd.op not in IDENTITY_N_OPS:
            return
        if not _safe_identity(eg, name, keep_set, fetch_known):
            return
        if nd.op == "IdentityN" and not eg.consumers(name):
            return
    if not _beneficial(eg, name):
        return
    ins = [parse_input(r)[0] for r in nd.input]
    outs = sorted(eg.consumers(name))
    _bypass(eg, name)
    rec.add(name, f"{nd.op} removed")
    for n in ins:
        push(n)
    for c in outs:
        push(c)


def _beneficial(eg: EditGraph, name: str) -> bool:
    """TF's ``BypassingNodeIsBeneficial``: bypassing adds no edge (inputs x consumers, or for an
    IdentityN of several data inputs the edges it would really make, against inputs +
    consumers) and no device crossing."""
    nd = eg[name]
    outs = [eg[c] for c in eg.consumers(name)]
    n_in, n_out = len(nd.input), len(outs)
    data = [r for r in nd.input if not r.startswith("^")]
    if nd.op == "IdentityN" and len(data) > 1:
        edges = sum(n_out if r.startswith("^") else 1 for r in nd.input)
        for c in outs:
            for r in c.input:
                src, port = parse_input(r)
                if src == name:
                    edges += n_in if port == CONTROL else 1
    else:
        edges = n_in * n_out
    if edges > n_in + n_out:
        return False
    ins = [eg.nodes.get(parse_input(r)[0]) for r in nd.input]
    if any(i is None for i in ins):
        return False
    if (n_in == 1 and n_out > 1 and ins[0].device != nd.device) or \
            (n_in > 1 and n_out == 1 and outs[0].device != nd.device):
        return False
    cross_in = sum(1 for i in ins if i.device != nd.device)
    cross_out = sum(1 for o in outs if o.device != nd.device)
    cross_after = sum(1 for i in ins for o in outs if i.device != o.device)
    if cross_after > cross_in + cross_out:
        return False
    identity_like = nd.op in IDENTITY_OPS or nd.op in IDENTITY_N_OPS
    return not (identity_like and cross_in > 0 and cross_out > 0 and cross_after > 0)


def transitive_reduction(eg: EditGraph) -> int:
    """TF's ``DependencyOptimizer::TransitiveReduction``: a control edge ``src -> dst`` is
    removed when ``dst`` is reached from ``src`` along more than one path (a longer one, or a
    data edge beside it). Edges into or out of frame ops (``Enter``/``Exit``/``NextIteration``),
    out of a ``Merge`` and into an op without an OpDef are left out, as TF leaves them; the
    removed input is swapped with the node's last input, as TF removes it. Returns how many.

    >>> from jitsim.graph.model import Graph
    >>> g = Graph.from_nodes([("a", "Const", []), ("b", "Neg", ["a"]), ("c", "Neg", ["b", "^a"])])
    >>> eg = EditGraph(g.graphdef)
    >>> transitive_reduction(eg), list(eg["c"].input)
    (1, ['b'])
    """
    from collections import deque

    order = tf_topological_order(eg)
    idx = {n: i for i, n in enumerate(order)}
    n_nodes = len(order)
    outputs: list[list[int]] = [[] for _ in order]
    control_outputs: list[list[tuple[int, int]]] = [[] for _ in order]
    lo = [n_nodes] * n_nodes
    hi = [-1] * n_nodes
    for i, name in enumerate(order):
        nd = eg.nodes[name]
        if nd.op in FRAME_OPS or op_def(nd.op) is None:
            continue
        for slot, ref in enumerate(nd.input):
            src = parse_input(ref)[0]
            if src not in idx:
                continue
            snd = eg.nodes[src]
            if snd.op in FRAME_OPS or snd.op in MERGE_OPS:
                continue
            s = idx[src]
            outputs[s].append(i)
            lo[s] = min(lo[s], i)
            if ref.startswith("^"):
                control_outputs[s].append((i, slot))
                hi[s] = max(hi[s], i)
    to_remove: dict[int, set[tuple[int, int]]] = {}
    for source in range(n_nodes):
        if lo[source] >= hi[source] or hi[source] <= source:
            continue
        dist: dict[int, int] = {}  # 1: reached once, 2: twice or more (TF's longest-path bound)
        queue = deque([source])
        while queue:
            node = queue.popleft()
            for f in outputs[node]:
                if lo[source] <= f <= hi[source] and dist.get(f, 0) != 2:
                    dist[f] = 1 if dist.get(f, 0) == 0 else 2
                    queue.appendleft(f)
        for target, slot in control_outputs[source]:
            if dist.get(target) == 2:
                to_remove.setdefault(target, set()).add((slot, source))
    removed = 0
    for target, slots in to_remove.items():
        name = order[target]
        refs = list(eg.nodes[name].input)
        for slot, _ in sorted(slots, reverse=True):
            refs[slot], refs[-1] = refs[-1], refs[slot]
            refs.pop()
            removed += 1
        eg.set_inputs(name, refs)
    return removed
