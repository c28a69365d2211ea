"""The decision records, defined once for every pass, analysis and rewrite and every reader.

* :class:`NodeDecision`: why one node ended where it did: a :class:`~jitsim.codes.Code`, a
  human detail (TF's words where TF logs some), machine-readable evidence.
  ``MarkForCompilationPass`` records one per op node; the post-mark passes one per node they
  touched or considered; the compilability checker (:mod:`jitsim.analyses.compilability`)
  returns one (with the path into a called function) for a node it refuses.
* :class:`MergeRefusal`: a contraction ``MarkForCompilationPass`` attempted and refused.
* :class:`PassResult`: what one post-mark pass (ForceXlaConstantsOnHost, IncreaseDynamism,
  PartiallyDecluster) did: whether the graph changed, and per node name why.
* :class:`RewriteRecord`: what one rewrite TF makes before its JIT passes did (a Grappler
  optimizer): its code, and one :class:`NodeDecision` per node touched.
* :class:`Step`: one line of the TF-free route's account of its rewrites (``Prepared.steps``):
  the rewrite's code, how many rewrites, a summary.

Typed views of :class:`NodeDecision` stay with the pass whose data they carry:
EncapsulateSubgraphs' ``ArgDecision`` (code: ``constant``/``normal``/``resource``) and
BuildXlaOps' cluster decisions (``reasons``: ``lazy_compilation_default``...), the function
runtime's ``InlineRecord`` and ``LowerRecord``. Pass results that
carry a graph (``MarkResult``, ``EncapsulateResult``, ``BuildResult``...) stay with their pass;
they hold these records.

A record's code is always a :class:`~jitsim.codes.Code`: a record built with a code the
catalogue does not have raises ``ValueError``, so every code a pass can emit is catalogued by
construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from jitsim.codes import Code



def as_code(code) -> Code:
    """``code`` as the catalogue's member (a string: its member, or ValueError if uncatalogued)."""
    return code if type(code) is Code else Code(code)


@dataclass
class NodeDecision:
    code: Code
    detail: str = ""
    evidence: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.code = as_code(self.code)

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
    code: Code
    detail: str = ""
    evidence: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.code = as_code(self.code)

    def to_dict(self) -> dict:
        return {"phase": self.phase, "from": self.from_node, "to": self.to_node, "from_size": self.from_size,
                "to_size": self.to_size, "code": self.code, "detail": self.detail, "evidence": self.evidence}


@dataclass
class PassResult:
    """What one post-mark pass did: whether the graph changed, and per node name why."""

    changed: bool = False
    decisions: dict[str, NodeDecision] = field(default_factory=dict)

    def decide(self, name: str, code: Code, detail: str = "", **evidence) -> None:
        self.decisions[name] = NodeDecision(code, detail, evidence)

    def to_dict(self) -> dict:
        return {"changed": self.changed, "decisions": {k: v.to_dict() for k, v in self.decisions.items()}}


@dataclass
class RewriteRecord:
    """What one rewrite did: ``code`` (the rewrite, a ``rewrite``-kind :class:`Code`),
    ``decisions`` (one per rewrite, in order: the node touched, the code, ``detail`` what was
    done to it), ``detail`` (why nothing was done, when that needs saying)."""

    code: Code
    decisions: list[tuple[str, NodeDecision]] = field(default_factory=list)
    detail: str = ""

    def __post_init__(self) -> None:
        self.code = as_code(self.code)

    @property
    def name(self) -> str:
        return self.code.value

    @property
    def count(self) -> int:
        return len(self.decisions)

    @property
    def nodes(self) -> list[str]:
        return [n for n, _ in self.decisions]

    @property
    def by_kind(self) -> dict[str, int]:
        """How many rewrites of each kind (the decisions' details), in first-seen order."""
        out: dict[str, int] = {}
        for _, d in self.decisions:
            if d.detail:
                out[d.detail] = out.get(d.detail, 0) + 1
        return out

    def add(self, node: str, kind: str = "") -> None:
        self.decisions.append((node, NodeDecision(self.code, kind)))

    def extend(self, other: RewriteRecord) -> None:
        """Add ``other``'s rewrites (a second stage or round of the same optimizer)."""
        self.decisions.extend(other.decisions)

    def summary(self) -> str:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.by_kind.items(), key=lambda kv: -kv[1]))
        return kinds or self.detail


class Step(NamedTuple):
    """One rewrite of the TF-free route, summed up: ``(code, count, detail)``; ``code`` is a
    ``rewrite``-kind :class:`Code` (its value the step's name)."""

    code: Code
    count: int
    detail: str
