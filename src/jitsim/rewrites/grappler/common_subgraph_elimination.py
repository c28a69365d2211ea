"""Grappler's common-subgraph elimination: identical nodes computed twice become one.

``CommonSubgraphElimination`` (``grappler/optimizers/common_subgraph_elimination.cc``) visits
the graph in topological order and, for each node it may deduplicate, looks for an earlier
node with the same op, device, attributes, data inputs (in order; sorted for commutative ops)
and control inputs; the later node's consumers then read the earlier one and it is removed.
Of identical nodes the first in Grappler's own topological order
(:func:`~jitsim.graph.graphedit.tf_topological_order`, which CSE computes before it
deduplicates) survives. That order starts from the model pruner's
(:mod:`jitsim.rewrites.grappler.model_pruner`), so the survivors are TF's: checked against TF's
per-optimizer dumps (``TF_CPP_VMODULE=meta_optimizer=4``).
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
from jitsim.graph.graphedit import EditGraph, tf_topological_order
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
    for name in tf_topological_order(eg):
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
