"""Memory (issue 39): the TF-free route on calls nested deep within a bounded address space, an
input that cannot fit refused before the work, and a command that reaches a memory limit ends
with the documented out-of-memory line and exit 2 (docs/cli.md, exit codes), never a crash
(exit 139, SIGSEGV: protobuf's C code does not check every allocation) or an internal error.

Each command runs in a fresh process under an address-space limit (``RLIMIT_AS``, what
``ulimit -v`` sets); the graphs come from ``benchmarks/generate.py``, which
``benchmarks/memory_scale.py`` measures."""

import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jitsim.graph import load, save

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import generate  # noqa: E402

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_AS and /proc: Linux")

MB = 1 << 20


def _jitsim(args, *, limit_mb=None, env=None, code=None, timeout=120):
    """``jitsim ARGS`` (or ``python -c CODE ARGS``) in a fresh process under an address-space
    limit of ``limit_mb``: (the finished process, its wall time)."""
    def limited():
        if limit_mb is not None:
            resource.setrlimit(resource.RLIMIT_AS, (limit_mb * MB, limit_mb * MB))

    e = dict(os.environ, PYTHONPATH=str(ROOT / "src"), **(env or {}))
    e.pop("JITSIM_DEBUG", None)
    cmd = [sys.executable] + (["-c", code] if code else ["-m", "jitsim"]) + [str(a) for a in args]
    t0 = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=limited, env=e, timeout=timeout)
    return p, time.monotonic() - t0


def _out_of_memory(p, path, words="out of memory on this input"):
    """Exit 2 and the one out-of-memory line naming the input: no crash, no traceback."""
    assert p.returncode == 2, f"exit {p.returncode}: {p.stderr[-3000:]}"
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr[-3000:]
    assert lines[0].startswith(f"jitsim: {path}: ") and words in lines[0], lines[0]
    assert "try a machine with more memory" in lines[0]


# -- calls nested deep: the inlined graph's node names, held once -----------------------------

def test_calls_nested_deep_fit_where_each_name_was_held_many_times(tmp_path):
    """Calls nested 1,500 deep, inlined (TF's names: ``call/inner/inner/.../m``, up to 9 KB
    each): within 800 MB of address space (0.52 GB at its peak, 0.34 GB resident). Before issue
    39 every index of the graph held its own copy of each name, two or three forms of the graph
    were alive at once, and each GraphDef made by copying and emptying another kept a dead copy
    of its nodes: 1.3 GB of address space (1.0 GB resident), out of memory here."""
    g = save(generate.nested_calls(1_500, kind="PartitionedCall"), tmp_path / "nested.pb")
    p, _ = _jitsim(["cluster", g, "--tf", "never", "--format", "json"], limit_mb=800)
    assert p.returncode == 0, p.stderr[-3000:]
    assert '"clusters"' in p.stdout


# -- refused before the work ------------------------------------------------------------------

def test_an_input_that_cannot_fit_is_refused_before_the_work(tmp_path):
    """Functions nested 40 deep, each calling the next twice: a 15 KB file whose inlined graph
    has 5 * 10^12 nodes. Refused at once, from the library alone, with the out-of-memory line
    saying what it would need (before issue 39: inlining ran until the memory ran out)."""
    g = save(generate.fanned_calls(40), tmp_path / "fanned.pb")
    p, seconds = _jitsim(["cluster", g, "--tf", "never"], limit_mb=4096, timeout=60)
    _out_of_memory(p, g, "would run out of memory on this input")
    count = re.search(r"the graph \(([\d,]+) nodes", p.stderr)
    assert count and int(count.group(1).replace(",", "")) > 2 ** 40, p.stderr
    assert seconds < 20


def test_millions_of_nodes_refused_under_a_limit_before_the_work(tmp_path):
    """300,000 NoOps (a 5 MB file; a lower bound of 1.5 KB a node on the TF-free route) under a
    400 MB address-space limit: refused after reading, not minutes later (before issue 39:
    a crash, exit 139, or the out-of-memory line after the work)."""
    g = save(generate.noops(300_000), tmp_path / "noops.pb")
    p, seconds = _jitsim(["cluster", g, "--tf", "never"], limit_mb=400)
    _out_of_memory(p, g, "would run out of memory on this input")
    assert seconds < 20


def test_inlined_size_counts_every_nested_call():
    """The bound's count: every body once per call, named after its caller."""
    from jitsim.memory import inlined_size

    d = 50
    gd = generate.nested_calls(d, kind="PartitionedCall")
    nodes, names = inlined_size(_graph(gd))
    # x, call, result; f0..f48: inner, c, m, r; f49: c, m, r
    assert nodes == 3 + 4 * (d - 1) + 3
    # the nodes of f{i} are named call/inner/.../inner/<node> (i times "/inner" after "call")
    expected = len("x") + len("call") + len("result") + sum(
        len("call") + len("/inner") * i + len("/") + len(b)
        for i in range(d) for b in (("inner", "c", "m", "r") if i < d - 1 else ("c", "m", "r")))
    assert names == expected
    assert inlined_size(_graph(generate.fanned_calls(40)))[0] > 2 ** 40


def _graph(gd):
    from jitsim.graph.model import Graph

    return Graph(gd, source="<test>")


# -- a limit reached: the out-of-memory line, never a crash ------------------------------------

# protobuf's C code (upb) allocating while the address space is all but used up: the limit is
# lowered just before the TF-free route copies the input graph (a GraphDef of 200,000 nodes)
_UPB_FAILS = """
import resource, sys
from jitsim.cli.app import main
from jitsim.graph import model

copy = model.Graph.to_graphdef

def to_graphdef(self):
    with open("/proc/self/statm") as f:
        vm = int(f.read().split()[0]) * resource.getpagesize()
    resource.setrlimit(resource.RLIMIT_AS, (vm + (2 << 20), resource.getrlimit(resource.RLIMIT_AS)[1]))
    return copy(self)

model.Graph.to_graphdef = to_graphdef
sys.exit(main(sys.argv[1:]))
"""


def test_protobuf_running_out_of_memory_is_the_out_of_memory_line(tmp_path):
    """An allocation that fails inside protobuf's C code: the out-of-memory line and exit 2,
    the output not written (before issue 39: SIGSEGV, exit 139)."""
    g = save(generate.noops(200_000), tmp_path / "noops.pb")
    out = tmp_path / "out.pbtxt"
    p, _ = _jitsim(["rewrite", g, "--tf", "never", "-o", out], code=_UPB_FAILS,
                   env={"JITSIM_NO_MEMORY_CHECK": "1"})
    _out_of_memory(p, g)
    assert not out.exists()
    assert not [f for f in tmp_path.iterdir() if f.name not in ("noops.pb",)], list(tmp_path.iterdir())


@pytest.mark.parametrize("limit_mb", [300])
def test_a_memory_limit_reached_is_the_out_of_memory_line(tmp_path, limit_mb):
    """100,000 NoOps under address-space limits that the TF-free route reaches part-way (where
    it fails depends on the limit: in Python, in protobuf's C code, loading numpy's OpenBLAS):
    the out-of-memory line and exit 2 (before issue 39: exit 139, SIGSEGV in protobuf's code)."""
    g = save(generate.noops(100_000), tmp_path / "noops.pb")
    p, _ = _jitsim(["cluster", g, "--tf", "never"], limit_mb=limit_mb, env={"JITSIM_NO_MEMORY_CHECK": "1"})
    if p.returncode != 0:  # (a machine whose baseline is smaller may fit it)
        _out_of_memory(p, g)


@pytest.mark.parametrize("exc", [
    ImportError("libscipy_openblas64_.so: failed to map segment from shared object"),
    OSError(12, "Cannot allocate memory"),
])
def test_a_library_that_cannot_load_for_want_of_memory_is_the_out_of_memory_line(monkeypatch, tmp_path, capsys,
                                                                                    exc):
    """numpy imported under ``ulimit -v`` (its OpenBLAS cannot be mapped), an ENOMEM from the
    system, each the cause of the error raised: the out-of-memory line and exit 2 (before issue
    39: an internal error, exit 3)."""
    from jitsim import cli
    from jitsim.passes import pipeline

    g = save(generate.nested_calls(3), tmp_path / "g.pbtxt")

    def boom(*a, **k):
        try:
            raise exc
        except type(exc) as e:
            raise ImportError("Importing the numpy C-extensions failed.") from e

    monkeypatch.setattr(pipeline, "run_pipeline", boom)
    rc = cli.main(["rewrite", str(g), "--tf", "never", "-o", str(tmp_path / "out.pbtxt")])
    err = capsys.readouterr().err
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"jitsim: {g}: ") and "out of memory on this input" in lines[0], err
