"""How many times a while loop's body runs in a step, by running the loop's counter logic.

A ``tf.while_loop`` in a function graph is lowered to ``Enter``/``Merge``/``Switch``/
``NextIteration``/``Exit`` around a ``LoopCond``. Where the condition depends only on integer
(or boolean) loop variables and on values known before the loop (``i < n``, Keras RNNs'
``time < T and counter < max_iterations``), :func:`trip_count` iterates exactly those nodes
with the numpy kernels: the loop variables start from their ``Enter`` values, the condition is
evaluated, and each variable it needs takes its ``NextIteration`` value, until the condition
is false. A loop whose condition reads anything else (a float, a tensor's contents computed
in the body) has no count here (None). Nested loops are not counted.
"""

from __future__ import annotations

from jitsim.graph.model import parse_input
from jitsim.rewrites.folding import kernels
from jitsim.rewrites.folding.tensors import NP_DTYPES, numpy

MAX_ITERATIONS = 1_000_000
ENTER = frozenset({"Enter", "RefEnter"})
MERGE = frozenset({"Merge", "RefMerge"})
SWITCH = frozenset({"Switch", "RefSwitch"})
NEXT = frozenset({"NextIteration", "RefNextIteration"})
IDENTITY = frozenset({"Identity", "Snapshot", "StopGradient"})


class _Unknown(Exception):
    pass


def frames(nodes: dict) -> dict:
    """``{frame name: LoopCond node name}`` for the loops whose Enter nodes read the root frame."""
    out = {}
    for name, nd in nodes.items():
        if nd.op != "LoopCond":
            continue
        frame = _frame_of_cond(nodes, nd)
        if frame is not None:
            out.setdefault(frame, name)
    return out


def _data(nd):
    return [parse_input(r) for r in nd.input if not r.startswith("^")]


def _frame_of_cond(nodes, cond_nd) -> str | None:
    """The frame name of the Enter nodes behind a LoopCond's Merges (through its condition)."""
    stack, seen = [r[0] for r in _data(cond_nd)], set()
    while stack:
        name = stack.pop()
        if name in seen or name not in nodes:
            continue
        seen.add(name)
        nd = nodes[name]
        if nd.op in ENTER:
            return nd.attr["frame_name"].s.decode(errors="replace") if "frame_name" in nd.attr else None
        if nd.op in NEXT:
            continue
        stack.extend(r[0] for r in _data(nd))
    return None


def trip_count(nodes: dict, types, cond: str, st) -> int | None:
    """Iterations of the loop whose ``LoopCond`` is ``cond``, given the step's values ``st``
    (:class:`jitsim.runtime.propagate.StepState`); None when its condition needs a value
    this cannot compute."""
    np = numpy()
    env: dict = {}  # Merge name -> current value

    def value(ref, memo):
        if ref in memo:
            return memo[ref]
        name, port = ref
        nd = nodes.get(name)
        if nd is None:
            raise _Unknown
        op = nd.op
        if op in MERGE:
            if name not in env:
                raise _Unknown
            v = env[name]
        elif op in ENTER:
            outer = _data(nd)[0]
            v = st.values.get(outer)
            if v is None:
                raise _Unknown
        elif op in SWITCH:
            v = value(_data(nd)[0], memo)
        elif op in IDENTITY:
            v = value(_data(nd)[0], memo)
        elif op in ("Const", "HostConst"):
            v = st.values.get((name, 0))
            if v is None:
                raise _Unknown
        else:
            fn = kernels.KERNELS.get(op)
            if fn is None or types.is_stateful(op):
                raise _Unknown
            ins = [value(r, memo) for r in _data(nd)]
            outs_t = types.outputs(nd)
            if not outs_t or any(t not in NP_DTYPES for t in outs_t):
                raise _Unknown
            outs = fn(np, ins, nd)
            v = np.asarray(outs[port]).astype(NP_DTYPES[outs_t[port]])
        if v.size > 64:
            raise _Unknown  # the counter logic is scalars; anything big is the loop's data
        memo[ref] = v
        return v

    cond_nd = nodes[cond]
    pred_ref = _data(cond_nd)[0]
    # the loop variables: each Merge whose value the condition (transitively) needs
    merges = {}
    for name, nd in nodes.items():
        if nd.op in MERGE:
            d = _data(nd)
            fwd = [r for r in d if nodes.get(r[0]) is not None and nodes[r[0]].op in ENTER]
            back = [r for r in d if nodes.get(r[0]) is not None and nodes[r[0]].op in NEXT]
            if len(fwd) == 1 and len(back) == 1:
                merges[name] = (fwd[0], _data(nodes[back[0][0]])[0])
    try:
        for name, (fwd, _) in merges.items():
            try:
                env[name] = value(fwd, {})
            except _Unknown:
                pass
        for k in range(MAX_ITERATIONS + 1):
            memo: dict = {}
            pred = value(pred_ref, memo)
            if not bool(pred.reshape(-1)[0]):
                return k
            nxt = {}
            for name in list(env):
                try:
                    nxt[name] = value(merges[name][1], memo)
                except _Unknown:
                    nxt[name] = None
            env = {n: v for n, v in nxt.items() if v is not None}
    except (_Unknown, IndexError, KeyError, ValueError, TypeError, ArithmeticError):
        return None
    return None
