"""One graph under every TensorFlow release that may have written it.

A GraphDef's ``versions.producer`` names the release that wrote it, except where two releases
write the same producer (TF 2.21 and 2.22: 2474, :func:`jitsim.registry.versions.
release_candidates`). Such a graph is simulated under the release jitsim prefers, and checked
against the others: the releases can only cluster it differently through an op of the graph
whose data differ (:func:`jitsim.registry.releases.graph_differences`: a new XLA kernel, a
slow-op entry, compile-time-constant inputs...). Without such an op the answer is the same under
each, by construction, and nothing is run twice; with one, the mark stage runs under each release
and the labels are compared node by node. :class:`ReleaseCheck` says which: where they agree the
result holds for every candidate release (exact, and the reason names them all); where they
differ it holds for the simulated release only, and the note names the releases, the nodes and
the data behind them, and ``--tf-version`` settles it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from jitsim.registry.releases import graph_differences


@dataclass
class ReleaseCheck:
    """``releases``: the candidates, the simulated one first; ``differing``: op -> what its data
    say differently (against the simulated release); ``nodes``: node -> its cluster under each
    release (where they differ)."""

    releases: tuple[str, ...]
    differing: dict[str, list[str]] = field(default_factory=dict)
    nodes: dict[str, dict[str, str | None]] = field(default_factory=dict)

    @property
    def agree(self) -> bool:
        return not self.nodes

    @property
    def names(self) -> str:
        return " and ".join(f"TF {r}" for r in self.releases)

    def reason(self, base: str) -> str:
        """The release choice's reason, ``base``, with what the check found."""
        if len(self.releases) < 2:
            return base
        if not self.differing:
            return f"{base}: the same data for every op of the graph, so the same clusters under {self.names}"
        if self.agree:
            return (f"{base}: the ops whose data differ ({', '.join(sorted(self.differing))}) cluster the same under "
                    f"{self.names}")
        return f"{base}: {self.names} cluster this graph differently (see the note); simulating TF {self.releases[0]}"

    def note(self) -> str | None:
        """For a result that holds for the simulated release only: which nodes, and why."""
        if self.agree:
            return None
        shown = []
        for node, by in list(sorted(self.nodes.items()))[:5]:
            shown.append(node + " (" + ", ".join(f"{c or 'unclustered'} under {r}" for r, c in by.items()) + ")")
        more = f" and {len(self.nodes) - 5} more" if len(self.nodes) > 5 else ""
        why = "; ".join(f"{op}: {', '.join(d)}" for op, d in sorted(self.differing.items()))
        return (f"the graph's producer is written by {self.names}, which cluster it differently at {len(self.nodes)} "
                f"node{'s' if len(self.nodes) != 1 else ''}: {', '.join(shown)}{more} (the data that differ: {why}); "
                f"this result is TF {self.releases[0]}'s: say --tf-version to choose the release")


def check_releases(graph, options, releases) -> ReleaseCheck:
    """Check ``graph`` (not changed) under each of ``releases`` (the simulated one first), as the
    module docstring says; ``options`` is the simulation's (its stage and flags)."""
    from jitsim.passes.mark_for_compilation import ProcessState
    from jitsim.passes.pipeline import cluster_graph

    releases = tuple(releases)
    check = ReleaseCheck(releases)
    if len(releases) < 2:
        return check
    chosen = releases[0]
    for other in releases[1:]:
        for op, d in graph_differences(graph.graphdef, chosen, other).items():
            check.differing.setdefault(op, []).extend(x for x in d if x not in check.differing.get(op, ()))
    if not check.differing:
        return check
    from jitsim.graph.model import Graph
    from jitsim.registry import protos

    labels = {}
    for r in releases:  # each on its own copy: the passes write their marks into the NodeDefs they read
        o = replace(options, tf_version=r, until="mark", explain_cycles=False)
        gd = protos.GraphDef()
        gd.CopyFrom(graph.graphdef)
        labels[r] = cluster_graph(Graph(gd, source=graph.source, validate=False), o, ProcessState.starting(o),
                                  own=True).labels()
    for node, c in labels[chosen].items():
        by = {r: labels[r].get(node) for r in releases}
        if len(set(by.values())) > 1:
            check.nodes[node] = by
    return check
