"""The fixtures corpus: real TF 2.21 dumps of the programs in ``fixtures/manifest.toml``.

Layout (all committed)::

    fixtures/manifest.toml          one [[run]] per (program, TF_XLA_FLAGS) pair
    fixtures/programs/*.py          the TF programs
    fixtures/corpus/<run>.tar.xz    <run>/index.json, <run>/log.txt, <run>/dumps/*.pbtxt
    fixtures/index.json             per run: flags, TF version, and per graph its node
                                    count, TF's clusters and TF's pass time

``build`` regenerates archives by harvesting each run with real TF (``fixtures/generate.py``
is the script); archives are byte-for-byte deterministic given the same dumps. Only the
stages jitsim compares against are kept (see ``KEEP_STAGES``) and the log is reduced to
the lines jitsim reads, with dump paths made relative.
"""

from __future__ import annotations

import io
import json
import lzma
import re
import shutil
import tarfile
import tempfile
import threading
import tomllib
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from jitsim.graph.dumps import INDEX_SCHEMA, index_dump_dir, parse_stage
from jitsim.tfprocess.harvest import DEFAULT_FLAGS, harvest, totals
from jitsim.errors import JitsimError
from jitsim.defs import (
    BEFORE_CLONE_DUMP, BEFORE_MARK_DUMP, BUILD_XLA_OPS_DUMP, ENCAPSULATE_AFTER_DUMP, ENCAPSULATE_BEFORE_DUMP,
    MARK_DUMP,
)

KEEP_STAGES = frozenset({
    BEFORE_CLONE_DUMP,
    BEFORE_MARK_DUMP,
    MARK_DUMP,
    ENCAPSULATE_BEFORE_DUMP,
    ENCAPSULATE_AFTER_DUMP,
    BUILD_XLA_OPS_DUMP,
})
# Log lines jitsim reads: dump order, pass times, and TF's own clustering messages.
_LOG_KEEP = re.compile(
    r"Dumped (Graph|FunctionDef) to|MarkForCompilationPassImpl::Run time|mark_for_compilation_pass\.cc|"
    r"encapsulate_subgraphs_pass\.cc|build_xla_ops_pass\.cc|JITSIM_TF_VERSION=|Error"
)
_DUMP_PATH = re.compile(r"(Dumped (?:Graph|FunctionDef) to )(\S+)")
_LOG_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ ")


def default_root() -> Path:
    """``fixtures/`` of the source checkout this package is installed from."""
    return Path(__file__).resolve().parents[3] / "fixtures"


@dataclass(frozen=True)
class Run:
    name: str
    program: str
    flags: str
    description: str = ""
    session_global_jit_level: int = 0  # what the program puts in its ConfigProto (0 = DEFAULT)
    session_cpu_global_jit: bool = False

    def session(self):
        from jitsim.options import SessionConfig

        return SessionConfig(self.session_global_jit_level, self.session_cpu_global_jit)


class _Extractions:
    """Unpacked runs, shared by every :class:`Corpus` of this process.

    One archive is unpacked once however many Corpus objects read it (a test session holds
    several). Each unpacked copy is counted by the corpora using it: the last one's
    :meth:`Corpus.close` removes it, and whatever is left goes when the object is collected or
    the process exits, so nothing is left behind in the temporary directory."""

    def __init__(self):
        self._lock = threading.Lock()
        self._root: Path | None = None
        self._dirs: dict[tuple, Path] = {}
        self._users: dict[tuple, int] = {}

    @staticmethod
    def key(archive: Path) -> tuple:
        st = archive.stat()  # a rebuilt archive is a new key
        return (str(archive.resolve()), st.st_mtime_ns, st.st_size)

    def acquire(self, archive: Path, name: str) -> tuple[tuple, Path]:
        key = self.key(archive)
        with self._lock:
            if key not in self._dirs:
                if self._root is None:
                    self._root = Path(tempfile.mkdtemp(prefix="jitsim-fixtures-"))
                    weakref.finalize(self, shutil.rmtree, self._root, True)  # at exit at the latest
                d = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=self._root))
                try:
                    with tarfile.open(archive, "r:xz") as tar:
                        tar.extractall(d, filter="data")
                except BaseException:
                    shutil.rmtree(d, ignore_errors=True)
                    raise
                self._dirs[key] = d
                self._users[key] = 0
            self._users[key] += 1
            return key, self._dirs[key] / name

    def release(self, keys) -> None:
        with self._lock:
            for key in keys:
                self._users[key] -= 1
                if self._users[key] == 0:
                    del self._users[key]
                    shutil.rmtree(self._dirs.pop(key), ignore_errors=True)


_EXTRACTIONS = _Extractions()


def _let_go(extracted: dict) -> None:
    """Release the unpacked runs a corpus holds (``extracted``: run -> (key, directory))."""
    _EXTRACTIONS.release([key for key, _ in extracted.values()])
    extracted.clear()


class Corpus:
    def __init__(self, root: Path | str | None = None):
        self.root = Path(root) if root else default_root()
        self._extracted: dict[str, tuple[tuple, Path]] = {}  # what it holds, let go when it goes
        weakref.finalize(self, _let_go, self._extracted)

    # -- manifest ------------------------------------------------------------------------
    def runs(self) -> list[Run]:
        path = self.root / "manifest.toml"
        try:
            data = tomllib.loads(path.read_text())
        except FileNotFoundError:
            raise JitsimError("no fixtures manifest", path) from None
        except tomllib.TOMLDecodeError as e:
            raise JitsimError(f"bad manifest: {e}", path) from None
        runs = []
        for r in data.get("run", []):
            runs.append(Run(r["name"], r["program"], r.get("flags", DEFAULT_FLAGS), r.get("description", ""),
                            int(r.get("session_global_jit_level", 0)), bool(r.get("session_cpu_global_jit", False))))
        names = [r.name for r in runs]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise JitsimError(f"duplicate run names: {', '.join(sorted(dup))}", path)
        return runs

    def run(self, name: str) -> Run:
        for r in self.runs():
            if r.name == name:
                return r
        raise JitsimError(f"no run named {name!r} in the manifest", self.root / "manifest.toml")

    def archive(self, name: str) -> Path:
        return self.root / "corpus" / f"{name}.tar.xz"

    def built(self) -> list[str]:
        return [r.name for r in self.runs() if self.archive(r.name).exists()]

    # -- reading -------------------------------------------------------------------------
    def extract(self, name: str) -> Path:
        """Unpack run ``name`` and return its directory.

        Unpacked once per process and archive version, shared with the other Corpus objects
        reading it; it stays until :meth:`close` (or this object's collection) and no other
        Corpus uses it."""
        archive = self.archive(name)
        have = self._extracted.get(name)
        if have is not None and have[0] == _Extractions.key(archive):
            return have[1]
        key, out = _EXTRACTIONS.acquire(archive, name)
        self._extracted[name] = (key, out)
        if have is not None:  # the archive was rebuilt since
            _EXTRACTIONS.release([have[0]])
        return out

    def index(self, name: str) -> dict:
        return json.loads((self.extract(name) / "index.json").read_text())

    def close(self) -> None:
        """Let go of the unpacked runs (removed once no other Corpus of this process uses them)."""
        _let_go(self._extracted)

    # -- building ------------------------------------------------------------------------
    def build(self, names: list[str] | None = None, *, jobs: int = 2, progress=None, python: str | None = None) -> dict:
        """Harvest the given runs (default: all) with real TF and (re)write their archives."""
        runs = self.runs()
        if names:
            unknown = set(names) - {r.name for r in runs}
            if unknown:
                raise JitsimError(f"unknown runs: {', '.join(sorted(unknown))}", self.root / "manifest.toml")
            runs = [r for r in runs if r.name in names]
        (self.root / "corpus").mkdir(exist_ok=True)
        results: dict[str, dict] = {}
        done = 0

        def one(run: Run) -> tuple[str, dict]:
            with tempfile.TemporaryDirectory(prefix=f"jitsim-build-{run.name}-") as tmp:
                out = Path(tmp) / run.name
                harvest(self.root / run.program, out, flags=run.flags, python=python, timeout=900)
                return run.name, pack_run(out, run, self.archive(run.name))

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
            for name, idx in ex.map(one, runs):
                results[name] = idx
                done += 1
                if progress:
                    progress(done, len(runs), name)
        self.write_index()
        return results

    def verify(self, names: list[str] | None = None, *, jobs: int = 2, progress=None, python: str | None = None):
        """Re-harvest runs with real TF and compare TF's clusters with the committed ones.

        Returns ``[(run name, CompareResult)]``; a run reproduces when every graph has the
        same partition and the same cluster names (``result.all_same_names``).
        """
        from jitsim.crosscheck.scoring import compare_paths

        names = names or self.built()

        def one(name: str):
            run = self.run(name)
            with tempfile.TemporaryDirectory(prefix=f"jitsim-verify-{name}-") as tmp:
                out = Path(tmp) / name
                harvest(self.root / run.program, out, flags=run.flags, python=python, timeout=900)
                return name, compare_paths(out, self.extract(name))

        results = []
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as ex:
            for i, item in enumerate(ex.map(one, names), 1):
                results.append(item)
                if progress:
                    progress(i, len(names), item[0])
        return results

    def write_index(self) -> Path:
        """Rewrite ``fixtures/index.json`` from the archives present."""
        entries = {}
        for run in self.runs():
            if not self.archive(run.name).exists():
                continue
            with tarfile.open(self.archive(run.name), "r:xz") as tar:
                idx = json.load(tar.extractfile(f"{run.name}/index.json"))
            entries[run.name] = {
                "program": run.program,
                "flags": run.flags,
                "description": run.description,
                "tf_version": idx.get("tf_version"),
                "totals": idx["totals"],
                "graphs": [
                    {k: g.get(k) for k in ("id", "nodes", "input_stage", "clusters", "mark_pass_us")}
                    for g in idx["graphs"]
                ],
            }
        path = self.root / "index.json"
        path.write_text(json.dumps({"schema": "jitsim.corpus-index/1", "runs": entries}, indent=1) + "\n")
        return path


def filter_log(text: str) -> str:
    out = []
    for line in text.splitlines():
        if not _LOG_KEEP.search(line):
            continue
        line = _LOG_PREFIX.sub("", line)
        line = _DUMP_PATH.sub(lambda m: m.group(1) + "dumps/" + Path(m.group(2)).name, line)
        out.append(line)
    return "\n".join(out) + "\n"


def pack_run(harvest_dir: Path, run: Run, archive: Path) -> dict:
    """Reduce a harvest directory to the kept stages and write a deterministic .tar.xz."""
    src_dumps = harvest_dir / "dumps"
    log = filter_log((harvest_dir / "log.txt").read_text(errors="replace"))
    keep = sorted(
        p.name for p in src_dumps.iterdir()
        if (st := parse_stage(p.name)) is not None and st[0] in KEEP_STAGES
    )
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / "dumps"
        d.mkdir()
        for n in keep:
            shutil.copyfile(src_dumps / n, d / n)
        graphs = index_dump_dir(d, log)
    old = json.loads((harvest_dir / "index.json").read_text())
    index = {
        "schema": INDEX_SCHEMA,
        "target": run.program,
        "kind": old.get("kind"),
        "signature": old.get("signature"),
        "tf_version": old.get("tf_version"),
        "tf_xla_flags": run.flags,
        "tf_cpp_vmodule": old.get("tf_cpp_vmodule"),
        "graphs": graphs,
        "totals": totals(graphs),
    }
    members = [(f"{run.name}/index.json", (json.dumps(index, indent=1) + "\n").encode()),
               (f"{run.name}/log.txt", log.encode())]
    members += [(f"{run.name}/dumps/{n}", (src_dumps / n).read_bytes()) for n in keep]
    pack_tar_xz(archive, members, dirs=(run.name, f"{run.name}/dumps"))
    return index


def pack_tar_xz(archive: Path, members: list[tuple[str, bytes]], dirs=()) -> None:
    """Write a deterministic ``.tar.xz`` (fixed modes, mtime 0; the same bytes for the same
    members) of ``dirs`` then ``members`` (``(name, data)``), replacing ``archive`` atomically."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for dname in dirs:
            ti = tarfile.TarInfo(dname)
            ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, 0
            tar.addfile(ti)
        for name, data in members:
            ti = tarfile.TarInfo(name)
            ti.size, ti.mode, ti.mtime = len(data), 0o644, 0
            tar.addfile(ti, io.BytesIO(data))
    tmp = archive.with_name(archive.name + ".tmp")
    tmp.write_bytes(lzma.compress(buf.getvalue(), preset=9))
    tmp.replace(archive)
