"""The decision records the passes return, defined once for every pass and every reader.

* :class:`NodeDecision`: why one node ended where it did (a stable code from
  :mod:`jitsim.explain.reasons`, a human detail, machine-readable evidence).
  ``MarkForCompilationPass`` records one per op node; the post-mark passes one per node they
  touched or considered.
* :class:`MergeRefusal`: a contraction ``MarkForCompilationPass`` attempted and refused.
* :class:`PassResult`: what one post-mark pass (ForceXlaConstantsOnHost, IncreaseDynamism,
  PartiallyDecluster) did: whether the graph changed, and per node name why.

Pass-specific results that carry a graph (``MarkResult``, ``EncapsulateResult``,
``BuildResult``...) stay with their pass; they hold these records.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class NodeDecision:
    code: str
    detail: str = ""
    evidence: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"code": self.code, "detail": self.detail, "evidence": self.evidence}


@dataclass
class MergeRefusal:
    """A contraction TF attempted and refused: ``from_nodes`` -> ``to_nodes`` (representatives)."""

    phase: int
    from_node: str
    to_node: str
    from_size: int
    to_size: int
    code: str
    detail: str = ""
    evidence: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"phase": self.phase, "from": self.from_node, "to": self.to_node, "from_size": self.from_size,
                "to_size": self.to_size, "code": self.code, "detail": self.detail, "evidence": self.evidence}


@dataclass
class PassResult:
    """What one post-mark pass did: whether the graph changed, and per node name why."""

    changed: bool = False
    decisions: dict[str, NodeDecision] = field(default_factory=dict)

    def decide(self, name: str, code: str, detail: str = "", **evidence) -> None:
        self.decisions[name] = NodeDecision(code, detail, evidence)

    def to_dict(self) -> dict:
        return {"changed": self.changed, "decisions": {k: v.to_dict() for k, v in self.decisions.items()}}
