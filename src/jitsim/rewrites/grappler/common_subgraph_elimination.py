"""Grappler's common-subgraph elimination: identical nodes computed twice become one.

``CommonSubgraphElimination`` (``grappler/optimizers/common_subgraph_elimination.cc``) visits
the graph in topological order and, for each node it may deduplicate, looks for an earlier
node with the same op, device, attributes, data inputs (in order; sorted for commutative ops)
and control inputs; the later node's consumers then read the earlier one and it is removed.
(The order is :func:`_lifo_order`'s: it picks the survivors TF's dumps show more often.)
Deduplicable: nodes free of side effects that are not preserved (fetches, control outputs,
feeds), not ``Enter``/``Exit``/``Merge``/``Switch``/``NextIteration``, not placeholders.
Identical ``Const``s (same value) merge, so do the NoOps function inlining leaves with the
same control inputs, and Keras' duplicated shape computations (an LSTM's two ``zeros``).
"""

from __future__ import annotations

from jitsim.graph.model import CONTROL
from jitsim.codes import Code
from jitsim.records import RewriteRecord
from jitsim.rewrites.grappler import preserved
from jitsim.graph.graphedit import EditGraph, dependencies
from jitsim.registry import op_def

COMMUTATIVE = frozenset({"Add", "AddV2", "Mul", "Maximum", "Minimum", "LogicalAnd", "LogicalOr", "Equal",
                         "NotEqual", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "SquaredDifference"})
NEVER = frozenset({"Enter", "RefEnter", "Exit", "RefExit", "Merge", "RefMerge", "Switch", "RefSwitch",
                   "NextIteration", "RefNextIteration", "LoopCond", "_Arg", "_Retval", "Placeholder",
                   "PlaceholderWithDefault", "ControlTrigger", "Assert", "CheckNumerics"})


def _dedupable(nd) -> bool:
    if nd.op in NEVER:
        return False
    if nd.op == "NoOp":
        return True
    od = op_def(nd.op)
    if od is None or od.is_stateful:
        return False
    return not any(a.is_ref for a in od.input_arg)


def eliminate_common_subgraphs(eg: EditGraph, keep=frozenset()) -> RewriteRecord:
    rec = RewriteRecord(Code.COMMON_SUBGRAPH_ELIMINATION)
    keep_set = preserved(eg, keep)
    seen: dict[tuple, str] = {}
    for name in _lifo_order(eg):
        if name not in eg or name in keep_set:
            continue
        nd = eg[name]
        if not _dedupable(nd):
            continue
        data = [r for r in nd.input if not r.startswith("^")]
        if nd.op in COMMUTATIVE:
            data = sorted(data)
        ctrl = tuple(sorted(r for r in nd.input if r.startswith("^")))
        attrs = tuple(sorted((k, v.SerializeToString(deterministic=True)) for k, v in nd.attr.items()
                             if k not in ("_class", "_output_shapes")))
        key = (nd.op, nd.device, tuple(data), ctrl, attrs)
        rep = seen.get(key)
        if rep is None or rep not in eg:
            seen[key] = name
            continue
        for port in sorted({p for _, _, p in eg.out_refs(name) if p != CONTROL}):
            eg.replace_uses(name, port, rep if port == 0 else f"{rep}:{port}")
        eg.replace_uses(name, CONTROL, None, control_to=rep)
        eg.remove(name)
        rec.add(name, f"{nd.op} deduplicated")
    return rec


def _lifo_order(eg: EditGraph) -> list[str]:
    """A topological order taking the most recently readied node first. With it, the
    duplicates jitsim keeps are those TF's dumps show (of an LSTM's ``zeros`` and ``zeros_1``,
    ``zeros_1``; of equal Consts, mostly the later one; of the NoOps inlining leaves, the
    body's), better than with a first-in-first-out order; TF's own order is not reproduced."""
    indeg, succ = dependencies(eg)
    ready = [n for n in eg.nodes if indeg[n] == 0]
    out = []
    while ready:
        n = ready.pop()
        out.append(n)
        for s in succ[n]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    seen = set(out)
    return out + [n for n in eg.nodes if n not in seen]
