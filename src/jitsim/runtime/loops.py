"""How many times a while loop's body runs in a step, by running the loop's counter logic.

A ``tf.while_loop`` in a function graph is lowered to ``Enter``/``Merge``/``Switch``/
``NextIteration``/``Exit`` around a ``LoopCond``. Where the condition depends only on integer
(or boolean) loop variables and on values known before the loop (``i < n``, Keras RNNs'
``time < T and counter < max_iterations``), :func:`trip_count` iterates exactly those nodes
with the numpy kernels: the loop variables start from their ``Enter`` values, the condition is
evaluated, and each variable it needs takes its ``NextIteration`` value, until the condition
is false. A loop whose condition reads anything else (a float, a tensor's contents computed
in the body) has no count here (None).

Nested loops: an inner loop's ``Enter`` nodes read values of its outer loop's frame (``j <
i + 1``), which change from one outer iteration to the next. Its count is the sum, over every
iteration of the outer loop (itself counted the same way, at any depth), of the inner loop's
trip count with the ``Enter`` values of that outer iteration. An inner loop whose bound is
known only per outer iteration is so counted exactly; one whose outer loop has no count has
none either.
"""

from __future__ import annotations

from jitsim.graph.model import parse_input
from jitsim.rewrites.folding import kernels
from jitsim.rewrites.folding.tensors import NP_DTYPES, numpy
from jitsim.opsets import BINARY_SWITCH_OPS, CONSTANT_OPS, ENTER_OPS, EXIT_OPS, NEXT_ITERATION_OPS, PLAIN_MERGE_OPS

MAX_ITERATIONS = 1_000_000
IDENTITY = frozenset({"Identity", "Snapshot", "StopGradient"})


class _Unknown(Exception):
    pass


def frames(nodes: dict) -> dict:
    """``{frame name: LoopCond node name}`` for every loop, nested ones included."""
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
        if nd.op in ENTER_OPS:
            return nd.attr["frame_name"].s.decode(errors="replace") if "frame_name" in nd.attr else None
        if nd.op in NEXT_ITERATION_OPS:
            continue
        stack.extend(r[0] for r in _data(nd))
    return None


def parents(nodes: dict) -> dict:
    """``{frame: the frame its Enter nodes read from, or None for the root}``."""
    out: dict = {}
    for nd in nodes.values():
        if nd.op not in ENTER_OPS or "frame_name" not in nd.attr:
            continue
        frame = nd.attr["frame_name"].s.decode(errors="replace")
        if out.get(frame) is not None:
            continue
        d = _data(nd)
        out[frame] = _frame_of(nodes, d[0][0]) if d else None
    return out


def _frame_of(nodes, name) -> str | None:
    """The frame of node ``name``: the first Enter behind it (past no Exit or back edge)."""
    stack, seen = [name], set()
    while stack:
        n = stack.pop()
        if n in seen or n not in nodes:
            continue
        seen.add(n)
        nd = nodes[n]
        if nd.op in ENTER_OPS:
            return nd.attr["frame_name"].s.decode(errors="replace") if "frame_name" in nd.attr else None
        if nd.op in NEXT_ITERATION_OPS or nd.op in EXIT_OPS:
            continue
        stack.extend(r[0] for r in _data(nd))
    return None


def trip_count(nodes: dict, types, cond: str, st, conds: dict | None = None) -> int | None:
    """Iterations of the loop whose ``LoopCond`` is ``cond`` in one step, given the step's
    values ``st`` (:class:`jitsim.runtime.propagate.StepState`): for a nested loop, summed
    over its outer loops' iterations (``conds``: :func:`frames`, to find them). None when a
    condition needs a value this cannot compute."""
    conds = conds if conds is not None else frames(nodes)
    cond_frame = {c: f for f, c in conds.items()}
    up = parents(nodes)
    chain = []  # the loop's frame, then its outer frames, innermost first
    frame = cond_frame.get(cond)
    while frame is not None:
        if frame in chain or frame not in conds:
            return None
        chain.append(frame)
        frame = up.get(frame)
    if not chain:
        return None
    root = _root_values(st)
    contexts = [root]  # one value function per iteration of the current (outer) loop
    try:
        for frame in reversed(chain):
            nxt = []
            for outer in contexts:
                nxt.extend(_iterations(nodes, types, conds[frame], frame, outer))
                if len(nxt) > MAX_ITERATIONS:
                    return None
            contexts = nxt
    except (_Unknown, IndexError, KeyError, ValueError, TypeError, ArithmeticError):
        return None
    return len(contexts)


def _root_values(st):
    def outer(ref):
        v = st.values.get(ref)
        if v is None:
            raise _Unknown
        return v
    return outer


def _iterations(nodes: dict, types, cond: str, frame: str, outer) -> list:
    """One value function per iteration of the loop ``frame`` (condition ``cond``), its
    ``Enter`` values read by ``outer`` (the enclosing context's value function)."""
    np = numpy()
    env: dict = {}  # Merge name -> current value

    def evaluator():
        memo: dict = {}
        cur = dict(env)

        def value(ref):
            if ref in memo:
                return memo[ref]
            name, port = ref
            nd = nodes.get(name)
            if nd is None:
                raise _Unknown
            op = nd.op
            if op in PLAIN_MERGE_OPS:
                if name not in cur:
                    raise _Unknown
                v = cur[name]
            elif op in ENTER_OPS:
                v = outer(_data(nd)[0])
            elif op in BINARY_SWITCH_OPS or op in IDENTITY:
                v = value(_data(nd)[0])
            elif op in CONSTANT_OPS:
                v = outer((name, 0))
            else:
                fn = kernels.KERNELS.get(op)
                if fn is None or types.is_stateful(op):
                    raise _Unknown
                ins = [value(r) for r in _data(nd)]
                outs_t = types.outputs(nd)
                if not outs_t or any(t not in NP_DTYPES for t in outs_t):
                    raise _Unknown
                outs = fn(np, ins, nd)
                v = np.asarray(outs[port]).astype(NP_DTYPES[outs_t[port]])
            if v.size > 64:
                raise _Unknown  # the counter logic is scalars; anything big is the loop's data
            memo[ref] = v
            return v
        return value

    # the loop variables: each Merge of this frame, its Enter value and its back edge
    merges = {}
    for name, nd in nodes.items():
        if nd.op in PLAIN_MERGE_OPS:
            d = _data(nd)
            fwd = [r for r in d if nodes.get(r[0]) is not None and nodes[r[0]].op in ENTER_OPS]
            back = [r for r in d if nodes.get(r[0]) is not None and nodes[r[0]].op in NEXT_ITERATION_OPS]
            if len(fwd) == 1 and len(back) == 1 and _enter_frame(nodes[fwd[0][0]]) == frame:
                merges[name] = (fwd[0], _data(nodes[back[0][0]])[0])
    start = evaluator()
    for name, (fwd, _) in merges.items():
        try:
            env[name] = start(fwd)
        except _Unknown:
            pass
    pred_ref = _data(nodes[cond])[0]
    out = []
    for _ in range(MAX_ITERATIONS + 1):
        value = evaluator()
        if not bool(value(pred_ref).reshape(-1)[0]):
            return out
        out.append(value)
        nxt = {}
        for name in list(env):
            try:
                nxt[name] = value(merges[name][1])
            except _Unknown:
                nxt[name] = None
        env = {n: v for n, v in nxt.items() if v is not None}
    raise _Unknown


def _enter_frame(nd) -> str | None:
    return nd.attr["frame_name"].s.decode(errors="replace") if "frame_name" in nd.attr else None
