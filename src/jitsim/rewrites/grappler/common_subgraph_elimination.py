"""Grappler's common-subgraph elimination: identical nodes computed twice become one.

``CommonSubgraphElimination`` (``grappler/optimizers/common_subgraph_elimination.cc``) visits
the graph in topological order and, for each node it may deduplicate, looks for an earlier
node with the same op, device, attributes (all of them, ``_class`` too; not ``_output_shapes``),
data inputs (in order; sorted for commutative ops) and control inputs; the later node's consumers then read the earlier one and it is removed.
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
from jitsim.rewrites.grappler import is_add, preserved
from jitsim.graph.graphedit import EditGraph, reorder, tf_topological_order
from jitsim.registry import op_def

def is_commutative(nd) -> bool:
    """TF's ``IsCommutative``: the op's OpDef says so (``AddV2``, ``Mul``, ``AddN``, ``Equal``...);
    ``Add`` too, but not of strings (its OpDef does not say so: it concatenates strings).

    >>> from jitsim.registry import protos
    >>> is_commutative(protos.NodeDef(op="Mul")), is_commutative(protos.NodeDef(op="Maximum"))
    (True, False)
    """
    if nd.op == "Add":
        return is_add(nd)
    od = op_def(nd.op)
    return od is not None and od.is_commutative


def canonicalize_node(eg: EditGraph, name: str) -> bool:
    """TF's ``CanonicalizeNode``: in a node of two inputs or more, a commutative op's data inputs
    sorted by name, and the control inputs sorted with duplicates dropped."""
    nd = eg.nodes[name]
    if len(nd.input) < 2:
        return False
    refs = list(nd.input)
    k = next((i for i, r in enumerate(refs) if r.startswith("^")), len(refs))
    data, ctrl = refs[:k], refs[k:]
    if k and is_commutative(nd):
        data = sorted(data)
    ctrl = sorted(set(ctrl))
    if data + ctrl == refs:
        return False
    eg.set_inputs(name, data + ctrl)
    return True


def canonicalize(eg: EditGraph) -> int:
    """TF's ``CanonicalizeGraph``, which CSE runs first: every node canonicalized. Returns how
    many nodes changed."""
    return sum(canonicalize_node(eg, name) for name in list(eg.nodes))


def erase_in_place(order: list[str], doomed: set[str]) -> list[str]:
    """TF's ``EraseNodesFromGraph``: each node to delete, from the last, swapped with the last
    node still kept, then the tail cut: the order Grappler leaves behind.

    >>> erase_in_place(["a", "b", "c", "d", "e"], {"b"})
    ['a', 'e', 'c', 'd']
    """
    arr = list(order)
    last = len(arr) - 1
    for i in sorted((i for i, n in enumerate(arr) if n in doomed), reverse=True):
        arr[i], arr[last] = arr[last], arr[i]
        last -= 1
    return arr[:last + 1]
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
    # TF's Optimize: TopologicalSort first (the graph renumbered), then DedupComputations,
    # which canonicalizes every node, merges, and erases the duplicates in place at the end
    order = tf_topological_order(eg)
    reorder(eg, order)
    canonicalize(eg)
    removed: set[str] = set()
    for name in order:
        if name not in eg or name in keep_set:
            continue
        nd = eg[name]
        if not _dedupable(nd):
            continue
        data = [r for r in nd.input if not r.startswith("^")]
        if is_commutative(nd):
            data = sorted(data)
        ctrl = tuple(sorted(r for r in nd.input if r.startswith("^")))
        attrs = tuple(sorted((k, v.SerializeToString(deterministic=True)) for k, v in nd.attr.items()
                             if k != "_output_shapes"))  # TF's SameNode compares `_class` too
        key = (nd.op, nd.device, tuple(data), ctrl, attrs)
        rep = seen.get(key)
        if rep is None or rep not in eg:
            seen[key] = name
            continue
        fanouts = eg.consumers(name)
        for port in sorted({p for _, _, p in eg.out_refs(name) if p != CONTROL}):
            eg.replace_uses(name, port, rep if port == 0 else f"{rep}:{port}")
        eg.replace_uses(name, CONTROL, None, control_to=rep)
        for c in fanouts:
            if c in eg.nodes:
                canonicalize_node(eg, c)
        eg.remove(name)
        removed.add(name)
        rec.add(name, f"{nd.op} deduplicated")
    if removed:
        reorder(eg, [n for n in erase_in_place(order, removed) if n in eg.nodes])
    return rec
