"""A capture cache that cannot take TF's dumps (issue 39, item 5; docs/cli.md, "Exit codes"): a
full disk, a quota, a file size limit is one line naming the cache and the problem, exit 2
(``jitsim: CACHE: no space left on device: the capture cache could not take ...``), never a
silently approximate result whose reason is a line TF logs on every start (``TensorFlow could not
run the call: TensorFlow reported: UNKNOWN ERROR (303)``, the CUDA driver's).

Disks are filled without root by a file size limit (``ulimit -f``: writes past it fail with
EFBIG, as a full disk's with ENOSPC), and, where this user may (root, ``unshare -m``), by a real
64 KiB tmpfs. "While TF runs": the room checked before TF runs made small, so that the cache
fills up during TF's run (what a larger model's dumps do to a cache with some room left).
"""

from __future__ import annotations

import errno
import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from graphs import make_saved_model

from jitsim.tfprocess.harvest import last_error_line

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}

CUINIT = ("E0000 00:00:1796476670.956778   31890 cuda_platform.cc:52] failed call to cuInit: INTERNAL: CUDA error: "
          "Failed call to cuInit: UNKNOWN ERROR (303)")
START = ("JITSIM_NETWORK: isolated\n"
         "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
         "I0000 00:00:1.1 31890 port.cc:153] oneDNN custom operations are on. You may see slightly different "
         "numerical results due to floating-point round-off errors from different computation orders.\n"
         "I0000 00:00:1.2 31890 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.\n"
         f"{CUINIT}\n")


def test_tf_start_up_lines_are_never_the_reason_a_run_failed():
    """The cuInit line (logged as an error on every machine without a GPU) and oneDNN's round-off
    'errors' are not why TF's run failed: the Python exception is; with nothing else in the log,
    the reason says there is no error in it (before: 'UNKNOWN ERROR (303)')."""
    from jitsim.frontend.resolve import why_tf_failed

    tb = ('Traceback (most recent call last):\n  File "runner.py", line 3, in <module>\n'
          "OSError: [Errno 28] No space left on device\n")
    assert last_error_line(START + tb) == "OSError: [Errno 28] No space left on device"
    assert last_error_line(START) == "no error in its log"
    assert last_error_line("") == "no output"
    assert "303" not in why_tf_failed(f"TensorFlow run failed (exit 120): {last_error_line(START)}")
    # a Python exception that speaks of CUDA is a real error, kept
    oom = "tensorflow.python.framework.errors_impl.InternalError: CUDA_ERROR_OUT_OF_MEMORY"
    assert last_error_line(START + oom + "\n") == oom
    # a program's own last words (sys.exit("why")) when no line speaks of an error
    assert last_error_line(START + "the data set is missing\n") == "the data set is missing"


GRAPH = ('node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } '
         'attr { key: "shape" value { shape { dim { size: 2 } dim { size: 3 } } } } }\n'
         'node { name: "r" op: "Relu" input: "x" attr { key: "T" value { type: DT_FLOAT } } }\n'
         'node { name: "e" op: "Exp" input: "r" attr { key: "T" value { type: DT_FLOAT } } }\n'
         'versions { producer: 2474 }\n')

# the CLI with the room a capture checks for before TF runs made small: TF runs, and the cache
# fills up while it does
SMALL_ROOM = ("import sys\nimport jitsim.frontend.capture as c\nc.CAPTURE_ROOM = 512\n"
              "from jitsim.cli import main\nsys.exit(main(sys.argv[1:]))\n")


def _size_limit(n: int):
    return lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))


def _one_line(stderr: str, cache: Path, problem: str) -> None:
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith(f"jitsim: {cache}: {problem}: the capture cache could not take TensorFlow's dumps"), \
        stderr
    assert "JITSIM_CACHE" in lines[0] and "303" not in lines[0] and "Traceback" not in stderr




@pytest.fixture(scope="module")
def saved_model(tmp_path_factory):
    """A SavedModel whose capture logs about 15 KiB (its runner script is 8 KiB, a GraphDef's 17)."""
    sm = tmp_path_factory.mktemp("full") / "sm"
    make_saved_model(sm)
    return sm


@pytest.mark.tf
@pytest.mark.parametrize("when", ["before TF runs", "while TF runs"])
def test_a_file_size_limit_on_the_cache_is_one_line_exit_2(tmp_path, saved_model, when):
    """``ulimit -f 12``: TF's log cannot be written whole. Before: exit 0, with the note 'the call
    failed after TensorFlow built its graph: E0000 ... failed call to cuInit: ... UNKNOWN ERROR
    (303)' (the runner's exit cut short, the reason a line of TF's start-up). Now one line naming
    the cache, exit 2, nothing left in it."""
    cache = tmp_path / "cache"
    cmd = ["-m", "jitsim.cli"] if when == "before TF runs" else ["-c", SMALL_ROOM]
    r = subprocess.run([sys.executable, *cmd, "cluster", str(saved_model)], env={**ENV, "JITSIM_CACHE": str(cache)},
                       capture_output=True, text=True, timeout=600, preexec_fn=_size_limit(12 << 10))
    assert r.returncode == 2, r.stdout + r.stderr
    _one_line(r.stderr, cache, "file too large (a file size limit: ulimit -f)")
    assert r.stdout == "" and list(cache.iterdir()) == []


def _can_mount_tmpfs() -> bool:
    if os.geteuid() != 0 or not shutil.which("unshare"):
        return False
    r = subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o size=16k tmpfs /mnt"], capture_output=True,
                       timeout=60)
    return r.returncode == 0


def _on_a_full_disk(tmp_path: Path, cmd: str, env: dict, target: Path) -> subprocess.CompletedProcess:
    """``python CMD cluster TARGET`` with a 64 KiB tmpfs at tmp_path/disk, 24 KiB of it free, in a
    mount namespace of the test's own; stderr ends with what is left in disk/cache and disk/tmp."""
    disk = tmp_path / "disk"
    disk.mkdir()
    script = (f'mount -t tmpfs -o size=64k tmpfs "{disk}" && mkdir "{disk}/tmp" "{disk}/cache" && '
              f'dd if=/dev/zero of="{disk}/filler" bs=1k count=40 2>/dev/null; '
              f'"{sys.executable}" {cmd} cluster "{target}"; rc=$?; ls -A "{disk}/cache" "{disk}/tmp" >&2; exit $rc')
    return subprocess.run(["unshare", "-m", "sh", "-c", script], env={**ENV, "SMALL_ROOM": SMALL_ROOM, **env},
                          capture_output=True, text=True, timeout=600)


@pytest.mark.tf
@pytest.mark.skipif(not _can_mount_tmpfs(), reason="needs root and unshare -m to mount a small tmpfs")
@pytest.mark.parametrize("when", ["before TF runs", "while TF runs"])
def test_a_full_disk_under_the_cache_is_one_line_exit_2(tmp_path, when):
    """A real full disk under the cache. Before: exit 2 and 'jitsim: g.pbtxt: cannot use: No space
    left on device' (the input named, not the cache), or exit 0 and a prediction made without TF,
    its reason a line of TF's log ('TensorFlow reported: no output')."""
    g = tmp_path / "g.pbtxt"
    g.write_text(GRAPH)
    disk = tmp_path / "disk"
    cmd = "-m jitsim.cli" if when == "before TF runs" else '-c "$SMALL_ROOM"'
    r = _on_a_full_disk(tmp_path, cmd, {"JITSIM_CACHE": str(disk / "cache")}, g)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.splitlines()
    assert lines[1:] == [f"{disk}/cache:", "", f"{disk}/tmp:"], r.stderr  # nothing left on the disk
    _one_line(lines[0], disk / "cache", "no space left on device")
    assert r.stdout == ""


@pytest.mark.tf
@pytest.mark.skipif(not _can_mount_tmpfs(), reason="needs root and unshare -m to mount a small tmpfs")
def test_a_full_temporary_directory_is_named_as_such(tmp_path):
    """$TMPDIR full (TF's run works there: its runner script, a GraphDef's binary copy): one line
    naming it and TMPDIR, exit 2; the cache, elsewhere, is fine."""
    g = tmp_path / "g.pbtxt"
    g.write_text(GRAPH)
    disk = tmp_path / "disk"
    env = {"JITSIM_CACHE": str(tmp_path / "cache"), "TMPDIR": str(disk / "tmp")}
    r = _on_a_full_disk(tmp_path, "-m jitsim.cli", env, g)
    assert r.returncode == 2, r.stdout + r.stderr
    lines = r.stderr.splitlines()
    assert lines[1:] == [f"{disk}/cache:", "", f"{disk}/tmp:"], r.stderr
    assert lines[0].startswith(f"jitsim: {disk}/tmp: no space left on device: the temporary directory TensorFlow's "
                               "run works in could not be written") and "TMPDIR" in lines[0], r.stderr
    assert r.stdout == "" and list((tmp_path / "cache").iterdir()) == []


@pytest.mark.tf
def test_a_write_of_jitsims_own_failing_names_the_cache_not_the_input(tmp_path, monkeypatch, capsys):
    """ENOSPC from a write of jitsim's (the entry's checksums: an OSError that names no file)
    while the disk fills: said of the cache, not 'jitsim: g.pbtxt: cannot use: No space left on
    device' (the input, which is fine)."""
    from jitsim.cli import main
    from jitsim.tfprocess import harvest

    def full(root):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(harvest, "write_checksums", full)
    g = tmp_path / "g.pbtxt"
    g.write_text(GRAPH)
    cache = tmp_path / "cache"
    monkeypatch.setenv("JITSIM_CACHE", str(cache))
    rc = main(["cluster", str(g)])
    out, err = capsys.readouterr()
    assert rc == 2, out + err
    _one_line(err, cache, "no space left on device")
    assert list(cache.iterdir()) == []
