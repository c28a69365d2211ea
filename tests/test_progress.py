"""Progress lines: rich's status line on stderr, only when stderr is a terminal, cleared before
the results or the one error line."""

import os
import pty
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MNIST = ROOT / "examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt"


def _run_on_a_terminal(*args) -> tuple[int, bytes]:
    """Run jitsim with stderr on a pseudo-terminal; returns (exit code, what the terminal got)."""
    master, slave = pty.openpty()
    p = subprocess.Popen([sys.executable, "-m", "jitsim.cli", *map(str, args)], stdout=subprocess.DEVNULL,
                         stderr=slave, env={**os.environ, "TERM": "xterm", "COLUMNS": "100"})
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    return p.wait(), out


def test_status_line_on_a_terminal_then_cleared():
    rc, out = _run_on_a_terminal("explain", MNIST, "NoSuchNodeAnywhere", "--tf", "never")
    assert rc == 2
    text = out.decode("utf-8", "replace")
    assert "simulating before_clone_constants_for_better_clustering.pbtxt" in text  # the status line
    assert "\x1b[?25l" in text and "\x1b[?25h" in text  # rich hid the cursor and gave it back
    # the error line comes after the status line was erased, on a line of its own
    tail = text[text.rindex("\x1b[2K") + len("\x1b[2K"):]
    assert tail.startswith("jitsim: ") and "NoSuchNodeAnywhere" in tail


def test_no_progress_output_when_stderr_is_not_a_terminal():
    r = subprocess.run([sys.executable, "-m", "jitsim.cli", "explain", str(MNIST), "NoSuchNodeAnywhere", "--tf",
                        "never"], capture_output=True, text=True)
    assert r.returncode == 2
    assert "\x1b" not in r.stderr and "simulating" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1
