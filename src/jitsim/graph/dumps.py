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

import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from jitsim.errors import JitsimError, JitsimWarning
from jitsim.files.input import kind_of_mode, read_file, read_text
from jitsim.files.paths import missing_reason
from jitsim.defs import (
    AFTER_CLONE_DUMP, BEFORE_CLONE_DUMP, BEFORE_MARK_DUMP, CLUSTER_ATTR, DUMP_STAGES, MARK_ANNOTATED_DUMP, MARK_DUMP,
)

# Pipeline order of the per-graph dumps.
STAGES = DUMP_STAGES
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
        """The best input for re-running clustering (see tf-passes §3.1)."""
        for s in (BEFORE_CLONE_DUMP, BEFORE_MARK_DUMP):
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


def _dump_file(p: Path) -> bool:
    """Whether ``p`` (named ``*.pbtxt`` in a dump directory) is a file to read: a regular file
    yes, a directory no; a FIFO, a device or a socket is refused (reading it would never end)."""
    try:
        mode = os.stat(p).st_mode
    except OSError:
        return False  # a dangling link
    if stat.S_ISREG(mode):
        return True
    if stat.S_ISDIR(mode):
        return False
    raise JitsimError(f"is {kind_of_mode(mode)}, not a regular file; a dump directory holds TF's dump files", p)


def group_dumps(root: Path | str, log_text: str | None = None) -> list[DumpGraph]:
    """Pair the dump files of ``root`` into per-graph records (see the module docstring).

    Without a log, the order is the files' modification times; when several files share one
    (after ``cp``, ``git checkout`` or unpacking an archive) that order says nothing, and the
    pairing is decided from content instead (:func:`_group_by_content`), with a
    :class:`~jitsim.errors.JitsimWarning` saying so."""
    root = Path(root)
    if not root.is_dir():
        if root.exists():
            raise JitsimError("is a file, not a dump directory", root)
        reason = missing_reason(root)
        raise JitsimError("no such dump directory" if reason == "no such file or directory" else reason, root)
    files = {p.name: p for p in root.iterdir() if p.suffix == ".pbtxt" and _dump_file(p)}
    order = None
    if log_text:
        order = _order_from_log(log_text, set(files))
        if not order and any(parse_stage(n) for n in files):
            _note("the log has no 'Dumped Graph to' line naming a file of this directory (not TF's stderr of the "
                  "run that wrote it?): ignored; files ordered by modification time", root)
            log_text = None
            order = None
        elif order:
            missing = sorted(set(files) - set(order), key=lambda n: files[n].stat().st_mtime_ns)
            order += missing
    if order is None:
        staged = [n for n in files if parse_stage(n)]
        mtimes = [files[n].stat().st_mtime_ns for n in staged]
        if len(set(mtimes)) < len(mtimes):
            return _group_by_content(root, files)

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
    elif not _content_agrees(root, graphs):
        # the modification times pair dumps whose nodes say they are not one graph: they were
        # not written in TF's order (copied one by one, touched...); content decides
        try:
            return _group_by_content(root, files, why="their modification times pair dumps whose nodes differ")
        except JitsimError as e:
            _note(f"the pairing by modification time looks wrong ({e.message}); kept it: give TF's log with --log",
                  root)
    return graphs


def _content_agrees(root: Path, graphs: list[DumpGraph]) -> bool:
    """Whether every graph's ``before_mark`` dump holds its ``before_clone`` dump's nodes
    (TF's constant clones aside): what TF's pipeline guarantees for one graph."""
    any_clone = any(BEFORE_CLONE_DUMP in g.files for g in graphs)
    for g in graphs:
        a = g.files.get(BEFORE_CLONE_DUMP)
        b = g.files.get(BEFORE_MARK_DUMP)
        m = g.files.get(MARK_DUMP)
        if b and any_clone and not a:  # with auto-jit on, TF dumps before_clone for every graph
            return False
        names_b = set(scan_node_names(root / b)) if b else None
        if a and b and not set(scan_node_names(root / a)) <= names_b:
            return False
        if b and m and set(scan_node_names(root / m)) != names_b:
            return False
    return True


def _note(message: str, path) -> None:
    import warnings

    warnings.warn(JitsimWarning(message, path), stacklevel=3)


# the stages whose k-th file belongs to the graph of the k-th file of another stage: TF writes
# them together (same counter progression), so pairing by suffix order is exact
_SAME_GRAPHS = {AFTER_CLONE_DUMP: BEFORE_CLONE_DUMP,
                MARK_DUMP: BEFORE_MARK_DUMP,
                MARK_ANNOTATED_DUMP: BEFORE_MARK_DUMP}


def _group_by_content(root: Path, files: dict, why: str = "several dump files share one modification time "
                      "(copied or unpacked?)") -> list[DumpGraph]:
    """Pairing when modification times cannot order the files: each stage's files in suffix
    order are in TF's order; a ``before_mark`` graph is the ``before_clone`` graph whose node
    names it holds (plus TF's constant clones ``X/clone_k``), matched in order; ``after_clone``
    and ``mark_for_compilation`` files follow their stage's partner one for one. Later stages
    (encapsulate, build_xla_ops) cannot be told apart by content and are left out, said in a
    note. A pairing the content contradicts is refused."""
    by_stage: dict[str, list[str]] = {}
    for n in files:
        st = parse_stage(n)
        if st:
            by_stage.setdefault(st[0], []).append(n)
    for lst in by_stage.values():
        lst.sort(key=lambda n: parse_stage(n)[1])
    clones = by_stage.get(BEFORE_CLONE_DUMP, [])
    marks = by_stage.get(BEFORE_MARK_DUMP, [])
    for stage, partner in _SAME_GRAPHS.items():
        if stage in by_stage and len(by_stage[stage]) != len(by_stage.get(partner, [])):
            raise JitsimError(f"modification times cannot order these dumps ({why}) and their "
                              f"content does not pair them: {len(by_stage[stage])} {stage} files but "
                              f"{len(by_stage.get(partner, []))} {partner} files; give TF's log with --log", root)
    graphs = [DumpGraph(id=i, files={BEFORE_CLONE_DUMP: n}) for i, n in enumerate(clones)]
    if clones and marks:
        names = [set(scan_node_names(root / n)) for n in clones]
        j = 0
        for m in marks:
            mnames = scan_node_names(root / m)
            base = {n for n in mnames if not _CLONE_RE.match(n)}
            while j < len(clones) and not (base <= names[j] and len(names[j] - set(mnames)) == 0):
                j += 1
            if j == len(clones):
                raise JitsimError(f"modification times cannot order these dumps ({why}) and no "
                                  f"before_clone dump has the nodes of {m}; give TF's log with --log", root)
            graphs[j].files[BEFORE_MARK_DUMP] = m
            j += 1
    elif marks:
        graphs = [DumpGraph(id=i, files={BEFORE_MARK_DUMP: n}) for i, n in enumerate(marks)]
    for stage, partner in _SAME_GRAPHS.items():
        for k, n in enumerate(by_stage.get(stage, [])):
            owner = next(g for g in graphs if g.files.get(partner) == by_stage[partner][k])
            owner.files[stage] = n
    later = sorted(n for st, lst in by_stage.items() if st not in _SAME_GRAPHS and st not in (
        BEFORE_CLONE_DUMP, BEFORE_MARK_DUMP) for n in lst)
    _note(f"{why}: graphs paired by content "
          f"({len(graphs)} graphs)" + (f"; {len(later)} later-stage files (encapsulate, build_xla_ops) left out: only "
                                       "TF's log (--log) orders them" if later else ""), root)
    return graphs


_CLONE_RE = re.compile(r"^.*/clone_\d+$")


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
_CLUSTER_RE = re.compile(rb'key: "' + CLUSTER_ATTR.encode() + rb'"\n\s+value \{\n\s+s: "([^"]*)"')


def scan_dump(path: Path) -> dict:
    """Node count and ``_XlaCluster`` sizes of a dump, by scanning TF's text format.

    Much faster than a full protobuf text parse on large dumps; only valid for files
    written by TF's ``DumpGraphToFile`` (canonical text format).
    """
    data = read_file(path, what="a TF dump file")
    top = data.split(b"\nlibrary {", 1)[0]
    sizes: dict[str, int] = {}
    for m in _CLUSTER_RE.finditer(top):
        c = m.group(1).decode()
        sizes[c] = sizes.get(c, 0) + 1
    return {"nodes": len(_NODE_RE.findall(top)), "clusters": dict(sorted(sizes.items()))}


_TOP_NAME_RE = re.compile(rb'^node \{\n  name: "((?:[^"\\]|\\.)*)"$', re.M)


def scan_node_names(path: Path) -> list[str]:
    """Node names of a TF dump, in file order, by scanning TF's canonical text format."""
    top = read_file(path, what="a TF dump file").split(b"\nlibrary {", 1)[0]
    return [m.group(1).decode() for m in _TOP_NAME_RE.finditer(top)]


# What TF needs to write the dumps jitsim reads: the harvest's environment (tfprocess.harvest)
DUMP_ENV_HINT = ("TF_DUMP_GRAPH_PREFIX=DIR TF_CPP_VMODULE=mark_for_compilation_pass=1,encapsulate_subgraphs_pass=1,"
                 "build_xla_ops_pass=1,clone_constants_for_better_clustering=1 "
                 "TF_XLA_FLAGS=\"--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_clustering_debug\"")


@dataclass(frozen=True)
class DumpDir:
    """Where a directory's pieces are, whichever form the user named: ``root`` (a harvest's
    ``index.json``, ``log.txt``, ``op_defs.pb``) and ``dumps`` (the dump files)."""

    root: Path
    dumps: Path

    @property
    def log(self) -> Path | None:
        """TF's log of the run (``log.txt``), if the directory has one."""
        for d in dict.fromkeys((self.root, self.dumps)):
            f = d / "log.txt"
            if os.path.lexists(f):  # whatever it is: reading it refuses what is not a regular file
                return f
        return None

    def log_text(self) -> str | None:
        """The log's text, read like every input (:func:`jitsim.files.input.read_text`: a FIFO or a
        link to /dev/zero is one error line, never a hang; the size is bounded)."""
        f = self.log
        return None if f is None else read_text(f, what="TF's log (a text file)", error=JitsimError)

    def records(self) -> list["DumpGraph"]:
        """The dump files grouped per graph, in TF's order (:func:`group_dumps`)."""
        return group_dumps(self.dumps, self.log_text())


def dump_dir(path: Path | str) -> DumpDir:
    """The one resolver of a dump or harvest directory, for every command: a harvest (``h``,
    holding ``dumps/``), a harvest's ``h/dumps`` (its ``index.json``/``log.txt`` are one level
    up), or a plain ``TF_DUMP_GRAPH_PREFIX`` directory."""
    path = Path(path)
    if (path / "dumps").is_dir():
        return DumpDir(path, path / "dumps")
    if path.name == "dumps" and any((path.parent / f).is_file() for f in ("index.json", "log.txt")):
        return DumpDir(path.parent, path)
    return DumpDir(path, path)


def index_dump_dir(root: Path | str, log_text: str | None = None) -> list[dict]:
    """One JSON-ready record per graph: its files, sizes, TF's clusters and pass time."""
    root = Path(root)
    out = []
    graphs = group_dumps(root, log_text)
    if not graphs:
        raise JitsimError("holds no TF dump files (files named like before_clone_constants_for_better_clustering_N"
                          ".pbtxt, written with TF_DUMP_GRAPH_PREFIX)", root)
    for g in graphs:
        first = next(iter(g.files.values()))
        info = scan_dump(root / first)
        rec = {"id": g.id, "files": g.files, "nodes": info["nodes"], "input_stage": g.input_stage}
        mark = g.files.get(MARK_DUMP)
        rec["clusters"] = scan_dump(root / mark)["clusters"] if mark else {}
        rec["mark_pass_us"] = g.mark_pass_us
        if g.aux:
            rec["aux"] = g.aux
        out.append(rec)
    return out


INDEX_SCHEMA = "jitsim.dump-index/1"
