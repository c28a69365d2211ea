"""Scoring a prediction against TF's truth, file by file or dump directory by directory.

Each side of a comparison is either one annotated graph file (nodes carry
``_XlaCluster``) or a directory of dumps (a harvest output with ``index.json``, or a raw
``TF_DUMP_GRAPH_PREFIX`` directory). Directories are compared graph by graph, paired by
their position in the run (see :mod:`jitsim.graph.dumps`); a graph that has no
dump of the requested stage (TF found no candidate in it) counts as "nothing clustered".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from jitsim.crosscheck.compare import CorpusRow, PartitionDiff, compare_partitions, corpus_summary, corpus_table
from jitsim.graph.dumps import dump_dir
from jitsim.errors import JitsimError
from jitsim.graph.io import read_graphdef
from jitsim.defs import CLUSTER_ATTR, MARK_DUMP



def labels_of_graphdef(gd, attr: str = CLUSTER_ATTR) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    for n in gd.node:
        out[n.name] = n.attr[attr].s.decode() if attr in n.attr else None
    return out


def labels_of_file(path: Path | str) -> dict[str, str | None]:
    """Node name -> ``_XlaCluster`` (or None) of a graph file."""
    return labels_of_graphdef(read_graphdef(path))


def _dir_graphs(root: Path, stage: str) -> list[tuple[str, dict[str, str | None]]]:
    """[(label, labelling)] for every graph of a harvest or dump directory."""
    where = dump_dir(root)
    dumps = where.dumps
    graphs = where.records()
    if not graphs:
        raise JitsimError("no TF dump files found", dumps)
    out = []
    for g in graphs:
        f = g.files.get(stage)
        if f is not None:
            out.append((f"graph {g.id} ({f})", labels_of_file(dumps / f)))
        else:
            first = next(iter(g.files.values()))
            labels = {n: None for n in labels_of_file(dumps / first)}
            out.append((f"graph {g.id} ({first}, no {stage} dump)", labels))
    return out


def _side(path: Path | str, stage: str) -> list[tuple[str, dict[str, str | None]]]:
    path = Path(path)
    if path.is_dir():
        return _dir_graphs(path, stage)
    return [(path.name, labels_of_file(path))]


@dataclass
class CompareResult:
    rows: list[CorpusRow]
    tf_version: str = "2.21"  # the simulated TensorFlow release (verify_dir)
    tf_version_reason: str = "jitsim default"
    truth_stage: str = MARK_DUMP  # TF's dump the clusters were compared with
    notes: list[str] = field(default_factory=list)  # what was not checked, and why

    @property
    def all_identical(self) -> bool:
        return all(r.diff is not None and r.diff.identical for r in self.rows)

    @property
    def all_same_names(self) -> bool:
        return all(r.diff is not None and r.diff.same_names for r in self.rows)

    def to_dict(self) -> dict:
        return {
            "schema": "jitsim.compare/1",
            "truth_stage": self.truth_stage,
            "notes": list(self.notes),
            "summary": corpus_summary(self.rows),
            "graphs": [
                {"name": r.name, "error": r.error, "diff": None if r.diff is None else r.diff.to_dict()}
                for r in self.rows
            ],
        }

    def format_text(self, limit: int = 50) -> str:
        if len(self.rows) == 1 and self.rows[0].diff is not None:
            return self.rows[0].diff.format_text(limit=limit)
        parts = [corpus_table(self.rows)] + [f"note: {n}" for n in self.notes]
        for r in self.rows:
            if r.diff is not None and not r.diff.identical:
                parts.append(f"\n== {r.name}\n{r.diff.format_text(limit=limit)}")
        return "\n".join(parts)


def compare_labellings(pairs: list[tuple[str, dict, dict]]) -> CompareResult:
    return CompareResult([CorpusRow(name=n, diff=compare_partitions(p, t)) for n, p, t in pairs])


def compare_paths(predicted: Path | str, truth: Path | str, *, stage: str = MARK_DUMP) -> CompareResult:
    """Compare two files or two directories (graph by graph)."""
    pred = _side(predicted, stage)
    true = _side(truth, stage)
    if len(pred) != len(true):
        raise JitsimError(
            f"cannot pair graphs: {predicted} has {len(pred)} graph(s), {truth} has {len(true)}", predicted
        )
    rows = []
    for (pname, plab), (tname, tlab) in zip(pred, true):
        name = tname if pname == tname else f"{pname} vs {tname}"
        rows.append(CorpusRow(name=name, diff=compare_partitions(plab, tlab)))
    return CompareResult(rows)


__all__ = ["CompareResult", "PartitionDiff", "compare_labellings", "compare_paths", "labels_of_file",
           "labels_of_graphdef"]
