"""jitsim's clusters as a Model Explorer graph.

Google's Model Explorer (the PyPI package ``ai-edge-model-explorer``) lays out graphs of 100k
nodes on WebGL, grouped by layers (namespaces) that open on click. It reads a graph JSON file
with its built-in JSON adapter. :func:`graph_json` writes the simulated pass input in that
format, with every XLA cluster as a layer of its own:

- a node's id is its TF name (what ``jitsim explain`` takes), its label its op;
- a clustered node sits in the layer ``cluster_N``, under its own name scope inside it; an
  unclustered node sits in its name scope, as TF names it;
- each cluster's layer is coloured as in ``jitsim render`` and the HTML report
  (``groupNodeConfigs``), and selecting it shows its size and ops (``groupNodeAttributes``);
- each node's side panel shows its cluster, its reason code and TF's words for the decision;
- data edges carry their output and input indices; control edges are an edge overlay
  ("control edges") shown for the selected node.

Open it with ``model-explorer FILE.json`` (docs/reports.md). The format is Model Explorer's own
(``model_explorer.graph_builder``: ``GraphCollection``, ``Graph``, ``GraphNode``); jitsim writes
the JSON itself, so Model Explorer is needed only to look at it.

>>> from jitsim.explain.model_explorer import layer_names
>>> layer_names(["cluster_0", "cluster_1"], {"cluster_1", "dense"})
{'cluster_0': 'cluster_0', 'cluster_1': 'cluster_1 (XLA)'}
"""

from __future__ import annotations

import re
from collections import Counter

from jitsim.codes import Code
from jitsim.explain.summary import cluster_colours
from jitsim.words import count

CONTROL_EDGE_COLOUR = "#999999"
# Model Explorer hides Const and ReadVariableOp nodes unless the graph names its own list. A
# variable's read is often the node a cluster left out (CLUSTER_TOO_SMALL), so jitsim's graph
# hides Consts only (Model Explorer's settings show them again).
HIDDEN_LABELS = ("Const",)


def layer_names(clusters, scopes) -> dict[str, str]:
    """Cluster name -> the name of its layer: the cluster's own name, unless a top-level name
    scope of the graph already has it (then `` (XLA)`` is added, so the two stay apart)."""
    return {name: (f"{name} (XLA)" if name in scopes else name) for name in clusters}


def _scope(name: str) -> str:
    return name.rpartition("/")[0]


def _node_attrs(rec) -> list[dict]:
    final = rec.final
    attrs = [{"key": "op", "value": rec.op}, {"key": "device", "value": rec.device or "(unplaced)"},
             {"key": "cluster", "value": rec.cluster or "(none)"}]
    code = str(rec.code)
    try:
        title = Code(code).title
    except ValueError:
        title = "no decision recorded"
    attrs.append({"key": "reason", "value": f"{code}: {title}"})
    if final is not None and final.detail:
        attrs.append({"key": "TF says", "value": final.detail})
    if rec.mark_cluster and rec.mark_cluster != rec.cluster:
        attrs.append({"key": "mark-for-compilation cluster", "value": rec.mark_cluster})
    return attrs


def graph_json(c, graph_id: str | None = None) -> dict:
    """One Model Explorer ``Graph`` (as a dict) of the simulated graph ``c`` (a
    :class:`~jitsim.explain.clustering.Clustering`). Nodes a later pass deleted are left out,
    as ``jitsim render`` leaves them out; ``jitsim explain`` still knows them."""
    recs = {n: r for n, r in c.nodes.items() if not getattr(r, "removed", False)}
    scopes = {n.split("/", 1)[0] for n in recs if "/" in n}
    layers = layer_names(list(c.clusters), scopes)
    incoming: dict[str, list[dict]] = {n: [] for n in recs}
    control: list[dict] = []
    nodes = c.graph.nodes
    seen_control = set()
    for e in c.graph.edges():
        s, d = nodes[e.src], nodes[e.dst]
        if s is None or d is None or s.name not in recs or d.name not in recs:
            continue
        if e.is_control:
            if (s.name, d.name) not in seen_control:
                seen_control.add((s.name, d.name))
                control.append({"sourceNodeId": s.name, "targetNodeId": d.name})
            continue
        incoming[d.name].append({"sourceNodeId": s.name, "sourceNodeOutputId": str(e.src_output),
                                 "targetNodeInputId": str(e.dst_input)})
    out_nodes = []
    for name, rec in recs.items():
        scope = _scope(name)
        if rec.cluster in layers:
            namespace = layers[rec.cluster] + (f"/{scope}" if scope else "")
        else:
            namespace = scope
        ins = sorted(incoming[name], key=lambda x: int(x["targetNodeInputId"]))
        out_nodes.append({"id": name, "label": rec.op, "namespace": namespace, "attrs": _node_attrs(rec),
                          "incomingEdges": ins})
    colours = cluster_colours(c)
    group_configs, group_attrs = [], {}
    for cname, members in c.clusters.items():
        fill, border = colours[cname]
        layer = layers[cname]
        group_configs.append({"namespaceRegex": f"^{re.escape(layer)}$", "backgroundColor": fill,
                              "borderColor": border})
        ops = Counter(recs[m].op for m in members if m in recs)
        group_attrs[layer] = {
            "XLA cluster": cname, "nodes": str(len(members)),
            "effective size": str(c.mark.effective_size(cname)) if cname in c.mark.clusters else "",
            "ops": ", ".join(f"{op}×{k}" if k > 1 else op for op, k in ops.most_common()),
        }
    group_attrs[""] = {"jitsim": f"{count(len(c.clusters), 'cluster')}, {count(len(recs), 'node')}; "
                                 f"each XLA cluster is a layer (cluster_N)",
                       "source": str(c.source or "")}
    graph = {"id": graph_id or "main", "nodes": out_nodes, "groupNodeConfigs": group_configs,
             "groupNodeAttributes": group_attrs, "nodeLabelsToHide": list(HIDDEN_LABELS)}
    if control:
        graph["tasksData"] = {"edgeOverlaysDataListLeftPane": [{
            "name": "control edges", "type": "edge_overlays",
            "overlays": [{"name": "control edges", "edgeColor": CONTROL_EDGE_COLOUR, "edges": control,
                          "showEdgesConnectedToSelectedNodeOnly": True}]}]}
    return graph


def collection_json(c, label: str) -> dict:
    """The file Model Explorer opens: one ``GraphCollection`` holding :func:`graph_json`."""
    return {"label": label, "graphs": [graph_json(c)]}
