"""TF's ``ClusterScopingPass`` (tf-passes §6): scope tags around Stage/Unstage pipelines.

Every node reachable from an ``Unstage`` (successors) or reaching a ``Stage``
(predecessors) gets ``_XlaInternalScope`` ``_<k>`` (appended with ``&`` if already
set), one fresh ``k`` per Stage/Unstage node; mark-for-compilation then refuses to
merge clusters with different scopes.
"""

from __future__ import annotations

from jitsim.graph.tfgraph import TfGraph, dfs
from jitsim.defs import INTERNAL_SCOPE_ATTR

SCOPE_ATTR = INTERNAL_SCOPE_ATTR


def cluster_scoping(g: TfGraph) -> int:
    """Tag nodes in place; return how many scopes were created."""
    k = 0
    for n in list(g.all_nodes()):
        if n.op not in ("Unstage", "Stage"):
            continue
        suffix = f"_{k}"
        k += 1

        def tag(m, suffix=suffix):
            if not m.is_op:
                return
            a = m.attr
            if SCOPE_ATTR in a:
                a[SCOPE_ATTR].s = a[SCOPE_ATTR].s + b"&" + suffix.encode()
            else:
                a[SCOPE_ATTR].s = suffix.encode()

        dfs(g, tag, None, by_name=True, start=[n.id], reverse=(n.op == "Stage"))
    if k:
        g.read_attr_keys = None  # (attrs changed: no longer as read)
    return k
