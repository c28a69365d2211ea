"""Reading a TensorFlow dump directory (``TF_DUMP_GRAPH_PREFIX``) as one record per graph.

How TF 2.21 names and writes the files (measured, see docs/ground-truth.md):

* Every dump name has its own process-wide counter: the first ``mark_for_compilation``
  file is ``mark_for_compilation.pbtxt``, then ``mark_for_compilation_1.pbtxt`` ...
* Each instantiated function graph (eager single-op functions included) walks the
  POST_REWRITE_FOR_EXEC passes in order and dumps, in that order:
  ``before_clone_constants_for_better_clustering`` / ``after_clone_...`` (only when
  auto-jit is on and ``clone_constants_for_better_clustering`` VLOG is 1),
  ``before_mark_for_compilation`` / ``mark_for_compilation`` / ``..._annotated`` (only when
  the graph has at least one compilation candidate), ``before_increase_dynamism_for_auto_jit_pass``,
  ``encapsulate_subgraphs_before``, per-cluster ``encapsulate_subgraphs_subgraph_*`` /
  ``encapsulate_fdef_*``, ``encapsulate_subgraphs_after`` and ``build_xla_ops``.
* So the suffix numbers are **not aligned across stages**: a graph without candidates
  writes no ``mark_for_compilation`` file but still writes ``encapsulate_*`` and
  ``build_xla_ops`` files, after which the counters differ.

The rule jitsim uses: take the files in the order TF wrote them (the ``Dumped Graph to``
lines of TF's log when we have it, else file modification time, then stage order and
suffix) and start a new graph whenever a stage comes that is not later in the pipeline
than the previous one. The ``MarkForCompilationPassImpl::Run time`` log line is
attached to the graph being processed when it is printed.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from jitsim.errors import JitsimError

# Pipeline order of the per-graph dumps.
STAGES = (
    "before_clone_constants_for_better_clustering",
    "after_clone_constants_for_better_clustering",
    "before_mark_for_compilation",
    "mark_for_compilation",
    "mark_for_compilation_annotated",
    "before_increase_dynamism_for_auto_jit_pass",
    "encapsulate_subgraphs_before",
    "encapsulate_subgraphs_after",
    "build_xla_ops",
)
RANK = {s: i for i, s in enumerate(STAGES)}
# Files written between encapsulate_subgraphs_before and _after, one per cluster.
AUX_PREFIXES = ("encapsulate_subgraphs_subgraph_", "encapsulate_fdef_graph_", "encapsulate_fdef_")

_STAGE_RE = re.compile(r"^(" + "|".join(sorted(STAGES, key=len, reverse=True)) + r")(?:_(\d+))?\.pbtxt$")
_DUMPED_RE = re.compile(r"Dumped (?:Graph|FunctionDef) to (\S+)")
_RUNTIME_RE = re.compile(r"MarkForCompilationPassImpl::Run time: ([0-9.]+) ?(ns|us|ms|s|min)\b")
_UNITS_US = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6, "min": 60e6}


def parse_stage(filename: str) -> tuple[str, int] | None:
    """``'mark_for_compilation_3.pbtxt'`` -> ``('mark_for_compilation', 3)``; no suffix is 0.

    >>> parse_stage("mark_for_compilation_annotated.pbtxt")
    ('mark_for_compilation_annotated', 0)
    >>> parse_stage("encapsulate_fdef_cluster_0.pbtxt") is None
    True
    """
    m = _STAGE_RE.match(filename)
    if not m:
        return None
    return m.group(1), int(m.group(2) or 0)


@dataclass
class DumpGraph:
    """All dumps of one function graph's trip through the JIT passes."""

    id: int
    files: dict[str, str] = field(default_factory=dict)  # stage -> file name
    aux: list[str] = field(default_factory=list)
    mark_pass_us: float | None = None

    def path(self, root: Path, stage: str) -> Path | None:
        f = self.files.get(stage)
        return None if f is None else Path(root) / f

    @property
    def input_stage(self) -> str | None:
        """The best input for re-running clustering (see spec section 3.1)."""
        for s in ("before_clone_constants_for_better_clustering", "before_mark_for_compilation"):
            if s in self.files:
                return s
        return None


def _order_from_log(log_text: str, names: set[str]) -> list[str]:
    order, seen = [], set()
    for m in _DUMPED_RE.finditer(log_text):
        n = Path(m.group(1)).name
        if n in names and n not in seen:
            order.append(n)
            seen.add(n)
    return order


def group_dumps(root: Path | str, log_text: str | None = None) -> list[DumpGraph]:
    """Pair the dump files of ``root`` into per-graph records (see the module docstring)."""
    root = Path(root)
    if not root.is_dir():
        raise JitsimError("no such dump directory", root)
    files = {p.name: p for p in root.iterdir() if p.suffix == ".pbtxt"}
    if log_text:
        order = _order_from_log(log_text, set(files))
        missing = sorted(set(files) - set(order), key=lambda n: files[n].stat().st_mtime_ns)
        order += missing
    else:
        def key(n):
            st = parse_stage(n)
            return (files[n].stat().st_mtime_ns, RANK[st[0]] if st else 99, st[1] if st else 0)

        order = sorted(files, key=key)

    graphs: list[DumpGraph] = []
    last_rank = None
    for name in order:
        st = parse_stage(name)
        if st is None:
            if name.startswith(AUX_PREFIXES) and graphs:
                graphs[-1].aux.append(name)
            continue
        stage, _ = st
        if last_rank is None or RANK[stage] <= last_rank:
            graphs.append(DumpGraph(id=len(graphs)))
        graphs[-1].files[stage] = name
        last_rank = RANK[stage]

    if log_text:
        _attach_run_times(graphs, log_text, files)
    return graphs


def _attach_run_times(graphs: list[DumpGraph], log_text: str, files) -> None:
    """Give each graph the C++ pass time printed while it was being processed."""
    owner = {}
    for g in graphs:
        for f in g.files.values():
            owner[f] = g.id
    current = None
    for line in log_text.splitlines():
        m = _DUMPED_RE.search(line)
        if m:
            current = owner.get(Path(m.group(1)).name, current)
            continue
        m = _RUNTIME_RE.search(line)
        if m and current is not None:
            graphs[current].mark_pass_us = float(m.group(1)) * _UNITS_US[m.group(2)]


# -- light-weight scanning of TF's canonical dump text ------------------------------------

_NODE_RE = re.compile(rb"^node \{", re.M)
_CLUSTER_RE = re.compile(rb'key: "_XlaCluster"\n\s+value \{\n\s+s: "([^"]*)"')


def scan_dump(path: Path) -> dict:
    """Node count and ``_XlaCluster`` sizes of a dump, by scanning TF's text format.

    Much faster than a full protobuf text parse on large dumps; only valid for files
    written by TF's ``DumpGraphToFile`` (canonical text format).
    """
    data = Path(path).read_bytes()
    top = data.split(b"\nlibrary {", 1)[0]
    sizes: dict[str, int] = {}
    for m in _CLUSTER_RE.finditer(top):
        c = m.group(1).decode()
        sizes[c] = sizes.get(c, 0) + 1
    return {"nodes": len(_NODE_RE.findall(top)), "clusters": dict(sorted(sizes.items()))}


_TOP_NAME_RE = re.compile(rb'^node \{\n  name: "((?:[^"\\]|\\.)*)"$', re.M)


def scan_node_names(path: Path) -> list[str]:
    """Node names of a TF dump, in file order, by scanning TF's canonical text format."""
    top = Path(path).read_bytes().split(b"\nlibrary {", 1)[0]
    return [m.group(1).decode() for m in _TOP_NAME_RE.finditer(top)]


def index_dump_dir(root: Path | str, log_text: str | None = None) -> list[dict]:
    """One JSON-ready record per graph: its files, sizes, TF's clusters and pass time."""
    root = Path(root)
    out = []
    for g in group_dumps(root, log_text):
        first = next(iter(g.files.values()))
        info = scan_dump(root / first)
        rec = {"id": g.id, "files": g.files, "nodes": info["nodes"], "input_stage": g.input_stage}
        mark = g.files.get("mark_for_compilation")
        rec["clusters"] = scan_dump(root / mark)["clusters"] if mark else {}
        rec["mark_pass_us"] = g.mark_pass_us
        if g.aux:
            rec["aux"] = g.aux
        out.append(rec)
    return out


INDEX_SCHEMA = "jitsim.dump-index/1"


def read_index(path: Path | str) -> dict:
    path = Path(path)
    if path.is_dir():
        path = path / "index.json"
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise JitsimError("no index.json (run `jitsim crosscheck harvest` or `jitsim crosscheck index`)", path) from None
    except json.JSONDecodeError as e:
        raise JitsimError(f"index is not valid JSON: {e}", path) from None
    if data.get("schema") != INDEX_SCHEMA:
        raise JitsimError(f"unknown index schema {data.get('schema')!r}", path)
    return data
