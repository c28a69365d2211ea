"""XLA's HLO dumps of the compiled clusters: collected, counted, drawn.

XLA (``XLA_FLAGS=--xla_dump_to=D --xla_dump_hlo_as_text --xla_dump_hlo_as_dot``) names each
module's files ``module_<NNNN>.<module>.<stage>.<ext>``: stage ``before_optimizations``
(the HLO TF's bridge built from the cluster) and ``<platform>_after_optimizations`` (what
XLA runs, after fusion), ext ``txt`` (HLO text) or ``dot`` (graphviz). An auto-clustered
module is named after its cluster: ``cluster_0__XlaCompiledKernel_true__...``. Only these
files are kept (XLA also writes LLVM IR, MLIR and object files).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from jitsim.files.input import read_text

_FILE = re.compile(r"^module_(?P<num>\d+)\.(?P<module>.+)\.(?P<stage>before_optimizations|[a-z]+_after_optimizations)"
                   r"\.(?P<ext>txt|dot)$")
_CLUSTER = re.compile(r"^(?P<cluster>.+?)__XlaCompiledKernel_")
_FUSION = re.compile(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s*.*?\bfusion\(", re.M)
_DOT_NODE = re.compile(r"^\s*\d+\s*\[", re.M)
_STYLESHEET_IMPORT = re.compile(r"^\s*@import url\([^)]*\);\s*$", re.M)  # a web font: no network in a picture

MAX_DRAWN_NODES = 600  # bigger HLO graphs are not drawn (the HLO text is kept)
DOT_TIMEOUT_S = 60.0


@dataclass
class HloModule:
    """One compiled module: its name (as the trace's ``args.hlo_module`` says it), the
    auto-clustered cluster it came from (None for other compilations, e.g. ``jit_compile``
    functions) and its files (``before``/``after`` -> ``txt``/``dot`` -> path)."""

    number: str
    name: str
    files: dict[str, dict[str, Path]] = field(default_factory=dict)

    @property
    def cluster(self) -> str | None:
        m = _CLUSTER.match(self.name)
        return m.group("cluster") if m else None

    @property
    def stem(self) -> str:
        """A short file stem: ``module_0000.cluster_0``."""
        return f"module_{self.number}.{self.cluster or _short(self.name)}"

    def text(self, stage: str) -> str | None:
        p = self.files.get(stage, {}).get("txt")
        return read_text(p, what="XLA's HLO dump (text)") if p else None


def _short(name: str, width: int = 48) -> str:
    s = re.sub(r"[^\w.\-]", "_", name)
    return s if len(s) <= width else s[:width]


def collect_modules(dump_dir: Path) -> list[HloModule]:
    """The modules of an XLA dump directory, in compilation order."""
    mods: dict[str, HloModule] = {}
    if not Path(dump_dir).is_dir():
        return []
    for p in sorted(Path(dump_dir).iterdir()):
        m = _FILE.match(p.name)
        if not m:
            continue
        stage = "before" if m.group("stage") == "before_optimizations" else "after"
        mod = mods.setdefault(m.group("num") + m.group("module"), HloModule(m.group("num"), m.group("module")))
        mod.files.setdefault(stage, {})[m.group("ext")] = p
    return sorted(mods.values(), key=lambda x: x.number)


def count_fusions(hlo_text: str | None) -> int | None:
    """Fusion instructions in an HLO module's text (None without text)."""
    if hlo_text is None:
        return None
    return len(_FUSION.findall(hlo_text))


def count_instructions(hlo_text: str | None) -> int | None:
    if hlo_text is None:
        return None
    return len(re.findall(r"^\s*(?:ROOT\s+)?%?[\w.\-]+\s*=\s", hlo_text, re.M))


def render_dot(dot_source: str, out: Path, *, max_nodes: int = MAX_DRAWN_NODES) -> str | None:
    """Draw XLA's graph as SVG at ``out``; returns why not (too big, no dot, dot failed)."""
    nodes = len(_DOT_NODE.findall(dot_source))
    if nodes > max_nodes:
        return f"not drawn: {nodes} nodes (more than {max_nodes}); see the HLO text"
    dot = shutil.which("dot")
    if dot is None:
        return "not drawn: graphviz's dot is not installed"
    try:
        p = subprocess.run([dot, "-Tsvg"], input=_STYLESHEET_IMPORT.sub("", dot_source).encode(),
                           capture_output=True, timeout=DOT_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        return f"not drawn: dot took more than {DOT_TIMEOUT_S:.0f} s"
    except OSError as e:
        return f"not drawn: cannot run dot ({e})"
    if p.returncode != 0 or not p.stdout:
        return f"not drawn: dot failed (exit {p.returncode})"
    out.write_bytes(p.stdout)
    return None


def export_modules(modules: list[HloModule], out_dir: Path) -> list[dict]:
    """Copy each module's HLO text into ``out_dir`` and draw its graphs there; one record per
    module: name, cluster, files (relative to ``out_dir``'s parent), fusion and instruction
    counts, notes."""
    out_dir.mkdir(parents=True, exist_ok=True)
    records = []
    for mod in modules:
        rec = {"module": mod.name, "cluster": mod.cluster, "files": {}, "notes": []}
        for stage in ("before", "after"):
            f = mod.files.get(stage, {})
            label = "before_optimizations" if stage == "before" else "after_optimizations"
            if "txt" in f:
                dst = out_dir / f"{mod.stem}.{label}.txt"
                shutil.copyfile(f["txt"], dst)
                rec["files"][f"{stage}_txt"] = f"{out_dir.name}/{dst.name}"
            if "dot" in f:
                svg = out_dir / f"{mod.stem}.{label}.svg"
                why = render_dot(read_text(f["dot"]), svg)
                if why is None:
                    rec["files"][f"{stage}_svg"] = f"{out_dir.name}/{svg.name}"
                else:
                    rec["notes"].append(f"{label}: {why}")
        rec["fusions"] = count_fusions(mod.text("after"))
        rec["instructions_before"] = count_instructions(mod.text("before"))
        rec["instructions_after"] = count_instructions(mod.text("after"))
        records.append(rec)
    return records
