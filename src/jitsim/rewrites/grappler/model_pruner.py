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
from jitsim.graph.graphedit import EditGraph, reorder
from jitsim.opsets import PLAIN_MERGE_OPS, SWITCH_OPS

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
    stack = sorted({*terminals, *(n for n in keep_set if n in eg and eg[n].op not in ARG_OPS)})
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
    # the function's arguments stay whether read or not (its signature), first
    args = [n for n in eg.nodes if eg[n].op in ARG_OPS and n not in visited]
    for n in list(eg.nodes):
        if n not in visited and eg[n].op not in ARG_OPS:
            eg.remove(n)
            rec.add(n, "unreachable from the fetches")
    reorder(eg, args + list(reversed(visited)))
    return rec


TRIVIAL_OPS = frozenset({"StopGradient", "Snapshot"})


def remove_trivial_ops(eg: EditGraph, keep=frozenset()) -> RewriteRecord:
    """``ModelPruner``'s trivial ops: ``StopGradient`` and ``Snapshot`` nodes (identities at
    inference time) are bypassed unless preserved, driven by a control edge or a ``Switch``,
    read by a control edge or feeding a ``Merge``."""
    rec = RewriteRecord(Code.MODEL_PRUNER)
    keep_set = preserved(eg, keep)
    for name in list(eg.nodes):
        nd = eg.nodes.get(name)
        if nd is None or nd.op not in TRIVIAL_OPS or name in keep_set:
            continue
        if any(r.startswith("^") for r in nd.input) or len(nd.input) != 1:
            continue
        src, port = parse_input(nd.input[0])
        if src not in eg or eg[src].op in SWITCH_OPS:
            continue
        outs = eg.out_refs(name)
        if any(p < 0 or eg[c].op in PLAIN_MERGE_OPS for c, _, p in outs):
            continue
        eg.replace_uses(name, 0, nd.input[0])
        eg.remove(name)
        rec.add(name, f"{nd.op} bypassed")
    return rec
