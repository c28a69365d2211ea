"""Structural invariants of jitsim's clustering, checked on any input graph.

:func:`check_invariants` runs jitsim's pipeline on a graph and returns one line per violated
invariant (an empty list means all hold):

1. **acyclic**: contracting every contraction group (and so every cluster) to one node leaves
   the graph acyclic (NextIteration back edges excluded, as in TF's cycle detection);
2. **candidates**: every clustered node is a compilation candidate for its device;
3. **homogeneous**: no cluster mixes devices, deadness predicates or XLA scopes;
4. **sizes**: every group stays within ``--tf_xla_max_cluster_size``, and every cluster that
   got a name reaches ``--tf_xla_min_cluster_size`` (counted as TF does: no Identity or
   constants) unless it holds functional control flow or a node that asks for compilation;
5. **fixpoint**: for every edge joining two different groups, merging them breaks one of TF's
   rules (different deadness or scope, incompatible devices, too large, a cycle in TF's cycle
   graph with loop frames collapsed, a possibly unsafe resource pair, a cross-device input);
6. **dependencies kept**: after encapsulate-subgraphs every data edge between different
   clusters (or a cluster and a node outside) is still a path between what they became;
7. **deterministic** (``determinism=True``): two runs give byte-identical GraphDefs after
   every stage.

The rule checks are deliberately coarser than jitsim's own code (e.g. any two groups that both
touch resources may be kept apart), so a violation is a real contradiction, not a restatement.
"""

from __future__ import annotations

import copy
from dataclasses import replace

import networkx as nx

from jitsim.defs import (
    BEFORE_CLONE_DUMP, CLUSTER_ATTR, COMPILE_ATTR, INTERNAL_SCOPE_ATTR, MUST_COMPILE_ATTR, SCOPE_ATTR,
)
from jitsim.graph.model import Graph
from jitsim.registry import op_def
from jitsim.opsets import ENTER_OPS, EXIT_OPS, IF_OPS, NEXT_ITERATION_OPS, WHILE_OPS


def _fresh(graph: Graph) -> Graph:
    return Graph(copy.deepcopy(graph.graphdef), source=graph.source, validate=False)


def check_invariants(graph: Graph, flags_text: str, *, state=None, determinism: bool = True,
                     input_stage: str = BEFORE_CLONE_DUMP) -> list[str]:
    """Violated invariants of jitsim's result on ``graph`` (see the module docstring)."""
    from jitsim.options import options_for
    from jitsim.passes.mark_for_compilation import ProcessState
    from jitsim.passes.pipeline import DECLUSTER, ENCAPSULATE, MARK, STAGES, run_pipeline

    options = options_for(flags_text, input_stage=input_stage)
    flags = options.flags
    state = state or ProcessState()

    def run(until):
        return run_pipeline(_fresh(graph), replace(options, until=until), copy.deepcopy(state))

    out: list[str] = []
    mark = run(MARK)
    out += _mark_invariants(mark.cluster.mark, flags)
    if mark.cluster.mark.ran:
        out += _dependencies_kept(run(DECLUSTER), run(ENCAPSULATE))
    if determinism:
        for until in STAGES:
            a = run(until).to_graphdef().SerializeToString(deterministic=True)
            b = run(until).to_graphdef().SerializeToString(deterministic=True)
            if a != b:
                out.append(f"deterministic: two runs up to {until} give different graphs")
    return out


def _mark_invariants(m, flags) -> list[str]:
    from jitsim.analyses.deadness import deadness_analysis
    from jitsim.analyses.devices import pick_device_for_xla
    from jitsim.flags import OFF
    from jitsim.graph.tfgraph import control_flow_info
    from jitsim.passes.mark_for_compilation import effective_size

    g = m.graph
    out: list[str] = []
    labels = m.labels()
    cands = set(m.candidates)
    clusters: dict[str, list[str]] = {}
    for n, c in labels.items():
        if c is not None:
            clusters.setdefault(c, []).append(n)
            if n not in cands:
                out.append(f"candidates: {n} is in {c} but is not a compilation candidate")
    if not m.ran:
        if clusters:
            out.append("candidates: nodes are clustered although the pass did not run")
        return out
    node = {n.name: n for n in g.op_nodes()}
    groups: dict[str, list[str]] = {}
    for n, rep in m.groups.items():
        groups.setdefault(rep, []).append(n)
    group_of = {n: rep for rep, ms in groups.items() for n in ms}

    # 3. homogeneous clusters
    dead = None
    if not flags.disable_deadness_safety_checks_for_debugging:
        dead = deadness_analysis(g)
    scope_key = INTERNAL_SCOPE_ATTR if m.jit_level != OFF else SCOPE_ATTR

    def scope(n):
        a = node[n].attr
        return a[scope_key].s.decode() if scope_key in a else ""

    def pred(n):
        return str(dead.control_predicate(node[n].id)) if dead is not None else ""

    for c, members in clusters.items():
        devs = {node[n].device for n in members}
        if len(devs) > 1:
            out.append(f"homogeneous: {c} mixes devices {sorted(devs)}")
        if dead is not None and len({pred(n) for n in members}) > 1:
            out.append(f"homogeneous: {c} mixes deadness predicates {sorted({pred(n) for n in members})}")
        scopes = {scope(n) for n in members} - {""}
        if len(scopes) > 1:
            out.append(f"homogeneous: {c} mixes XLA scopes {sorted(scopes)}")

    # 4. sizes
    def explicit(n):
        a = node[n].attr
        return any(k in a and a[k].WhichOneof("value") == "b" and a[k].b for k in (COMPILE_ATTR, MUST_COMPILE_ATTR)) \
            or _function_asks(node[n], g)

    for rep, members in groups.items():
        if len(members) > flags.max_cluster_size:
            out.append(f"sizes: group of {rep} has {len(members)} nodes > max {flags.max_cluster_size}")
        named = [n for n in members if labels.get(n)]
        if not named:
            continue
        eff = effective_size(node[n].op for n in members)
        special = any(node[n].op in WHILE_OPS or node[n].op in IF_OPS or explicit(n) for n in members)
        if eff < flags.min_cluster_size and not special:
            out.append(f"sizes: {labels[named[0]]} has effective size {eff} < min {flags.min_cluster_size}")

    # TF's cycle-detection graph: Enter in-edges go to the frame, Exit out-edges leave from it,
    # NextIteration out-edges dropped
    info, _ = control_flow_info(g)
    cyc = nx.DiGraph()

    def vertex(name):
        return ("g", group_of[name]) if name in group_of else ("n", name)

    for e in g.edges():
        src, dst = g.nodes[e.src], g.nodes[e.dst]
        if not (src.is_op and dst.is_op) or src.op in NEXT_ITERATION_OPS:
            continue
        s = ("f", info[e.src].frame_name) if src.op in EXIT_OPS else vertex(src.name)
        d = ("f", info[e.dst].frame_name) if dst.op in ENTER_OPS else vertex(dst.name)
        if s != d:
            cyc.add_edge(s, d)

    # 1. acyclic after contraction
    if not nx.is_directed_acyclic_graph(cyc):
        loop = nx.find_cycle(cyc)
        out.append("acyclic: contracting the groups makes a cycle: "
                   + " -> ".join(str(v[1]) for v, _ in loop))
        return out

    # 5. fixpoint: every inter-group edge is blocked by some rule
    devices_in_graph = {n.device for n in g.op_nodes()}
    touches = {rep: any(_touches_resource(node[n], g) for n in ms) for rep, ms in groups.items()}
    checked = set()
    for e in g.edges():
        src, dst = g.nodes[e.src], g.nodes[e.dst]
        if not (src.is_op and dst.is_op) or src.op in NEXT_ITERATION_OPS:
            continue
        a, b = group_of.get(src.name), group_of.get(dst.name)
        if a is None or b is None or a == b or (a, b) in checked:
            continue
        checked.add((a, b))
        ga, gb = groups[a], groups[b]
        if dead is not None and pred(ga[0]) != pred(gb[0]):
            continue
        if pick_device_for_xla(sorted({node[n].device for n in ga + gb}), False) is None:
            continue
        sa, sb = {scope(n) for n in ga} - {""}, {scope(n) for n in gb} - {""}
        if sa and sb and sa != sb:
            continue
        if len(ga) + len(gb) > flags.max_cluster_size:
            continue
        if touches[a] and touches[b] and not flags.disable_resource_variable_safety_checks_for_debugging:
            continue
        if len(devices_in_graph) > 1:
            continue  # cross-device dependency rule: not re-derived here
        va, vb = ("g", a), ("g", b)
        cyc.remove_edge(va, vb)
        reachable = nx.has_path(cyc, va, vb)
        cyc.add_edge(va, vb)
        if reachable:
            continue
        out.append(f"fixpoint: {src.name} -> {dst.name} joins groups {a} ({len(ga)}) and {b} ({len(gb)}), "
                   "and no TF rule forbids merging them")
    return out


def _function_asks(n, g) -> bool:
    fns = {f.signature.name: f for f in g.library.function}
    f = fns.get(n.op)
    if f is None:
        return False
    return any(k in f.attr and f.attr[k].WhichOneof("value") == "b" and f.attr[k].b
               for k in (COMPILE_ATTR, MUST_COMPILE_ATTR))


def _touches_resource(n, g) -> bool:
    """A resource op, a stateful op or a function call (coarse: TF's unsafe pairs are a subset)."""
    from jitsim.registry import optypes

    fns = {f.signature.name: f for f in g.library.function}
    if n.op in fns or "f" in n.attr or "then_branch" in n.attr or "body" in n.attr:
        return True
    types = (optypes.input_types(n.nodedef, fns) or []) + (optypes.output_types(n.nodedef, fns) or [])
    if optypes.DT_RESOURCE in types:
        return True
    od = op_def(n.op)
    return bool(od and od.is_stateful)


def _dependencies_kept(declustered, encapsulated) -> list[str]:
    """Every data edge of the graph before encapsulation between different clusters (or a
    cluster and a node outside) is a path between what they became afterwards."""
    before = declustered.to_graphdef()
    after = encapsulated.to_graphdef()
    label = {}
    for n in before.node:
        if CLUSTER_ATTR in n.attr:
            label[n.name] = n.attr[CLUSTER_ATTR].s.decode()
    g2 = nx.DiGraph()
    names = set()
    for n in after.node:
        names.add(n.name)
        g2.add_node(n.name)
        for i in n.input:
            if not i.startswith("^"):
                g2.add_edge(i.split(":")[0], n.name)
    out = []
    for n in before.node:
        for i in n.input:
            if i.startswith("^"):
                continue
            src = i.split(":")[0]
            a, b = label.get(src, src), label.get(n.name, n.name)
            if a == b:
                continue
            if a not in names or b not in names:
                out.append(f"dependencies: {src} -> {n.name}: {a if a not in names else b} is gone after encapsulation")
            elif not nx.has_path(g2, a, b):
                out.append(f"dependencies: {src} -> {n.name} ({a} -> {b}) has no data path after encapsulation")
    return out
