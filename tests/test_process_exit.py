"""The ``jitsim`` process ends without the interpreter's teardown (``process.exit_process``),
losing nothing ``sys.exit`` would keep: buffered output, ``atexit`` functions, running threads,
the exit code (issue 25: 20-30 ms of every command after a 12k-node graph)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _run(code: str, tmp_path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path,
                          timeout=120)


def test_output_exit_functions_and_code_kept(tmp_path):
    r = _run("import atexit, sys\n"
             "atexit.register(lambda: print('exit function ran'))\n"
             "from jitsim.process import exit_process\n"
             "print('buffered', end='')\n"
             "sys.stderr.write('to stderr')\n"
             "exit_process(3)\n", tmp_path)
    assert r.returncode == 3
    assert r.stdout == "bufferedexit function ran\n"
    assert r.stderr == "to stderr"


def test_a_running_thread_is_joined_as_by_sys_exit(tmp_path):
    r = _run("import threading, time\n"
             "from jitsim.process import exit_process\n"
             "def late():\n"
             "    time.sleep(0.3)\n"
             "    open('done', 'w').write('yes')\n"
             "threading.Thread(target=late).start()\n"
             "exit_process(0)\n", tmp_path)
    assert r.returncode == 0
    assert (tmp_path / "done").read_text() == "yes"


def test_the_command_line_entry_points(tmp_path):
    example = ROOT / "examples" / "mnist_softmax"
    graph = next(p for p in sorted(example.rglob("*.pbtxt")))
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    for module in ("jitsim", "jitsim.cli"):
        out = tmp_path / f"{module}.pbtxt"
        r = subprocess.run([sys.executable, "-m", module, "cluster", str(graph), "-o", str(out)], capture_output=True,
                           text=True, env=env, timeout=300)
        assert r.returncode == 0, r.stderr
        assert "clusters" in r.stdout and out.stat().st_size > 0
        r = subprocess.run([sys.executable, "-m", module, "cluster", str(tmp_path / "missing.pbtxt")],
                           capture_output=True, text=True, env=env, timeout=300)
        assert r.returncode == 2
        assert r.stderr.startswith("jitsim: ") and "missing.pbtxt" in r.stderr
