"""Issue 22 (A1, A2, A13, B9, B10, B11, B15): files, streams and signals under faults.

Every output goes through one choke point (jitsim.files.output), every read through one bounded,
regular-file-only reader (jitsim.files.input), and the CLI turns signals, stdout errors and
unencodable characters into documented exit codes and one line (docs/cli.md "Exit codes",
"Inputs and outputs"). Faults that need a real process (signals, closed descriptors, /dev/full,
pipes, FIFOs that could hang) run the CLI in a subprocess with a timeout; the others run in-process.
"""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jitsim.errors import JitsimError

ROOT = Path(__file__).resolve().parents[1]
EX = ROOT / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt"
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path):
    monkeypatch.setenv("JITSIM_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)


def _cli(*argv, timeout=120, **kw):
    """The real process: ``python -m jitsim.cli ARGV`` (a hang fails by the timeout)."""
    if "stdout" not in kw and "stderr" not in kw:
        kw.setdefault("capture_output", True)
    return subprocess.run([sys.executable, "-m", "jitsim.cli", *map(str, argv)], env=kw.pop("env", ENV),
                          timeout=timeout, **kw)


def _main(capsys, *argv):
    from jitsim.cli import main

    rc = main([str(a) for a in argv])
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def _one_line(err: str | bytes, *parts: str) -> str:
    if isinstance(err, bytes):
        err = err.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for p in parts:
        assert p in lines[0], (p, lines[0])
    return lines[0]


def _is_graph_text(data: bytes) -> bool:
    from jitsim.registry import protos
    from jitsim.graph.textproto import parse

    gd = protos.GraphDef()
    parse(data.decode(), gd)
    return len(gd.node) > 50 and any("_XlaCluster" in n.attr for n in gd.node)


def _no_temp_files(d: Path) -> list[str]:
    """What jitsim's temporary names left in ``d`` (hidden ``.NAME.XXXXXXXX`` files, probes)."""
    return [p.name for p in d.iterdir() if p.name.startswith(".")]


# -- A1: -o never replaces a symlink, a device or a FIFO ---------------------------------------


def test_output_through_a_symlink_keeps_the_link_and_the_target_mode(tmp_path, capsys):
    target = tmp_path / "real" / "target.pbtxt"
    target.parent.mkdir()
    target.write_text("old")
    target.chmod(0o640)
    link = tmp_path / "link.pbtxt"
    link.symlink_to(os.path.relpath(target, tmp_path))
    rc, _, err = _main(capsys, "cluster", EX, "-o", link)
    assert rc == 0, err
    assert link.is_symlink() and os.readlink(link) == os.path.relpath(target, tmp_path)
    assert _is_graph_text(target.read_bytes())
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
    assert _no_temp_files(tmp_path) == [] and _no_temp_files(target.parent) == []


def test_a_dangling_symlink_creates_its_target(tmp_path, capsys):
    link = tmp_path / "link.pbtxt"
    link.symlink_to("made.pbtxt")
    rc, _, err = _main(capsys, "rewrite", EX, "--until", "mark", "-o", link)
    assert rc == 0, err
    assert link.is_symlink() and (tmp_path / "made.pbtxt").is_file()


def test_an_existing_file_keeps_its_permission_bits(tmp_path, capsys):
    """A read-only file (0444) the user may write (root may, as a shell's > may) stays 0444;
    a group-writable 0664 stays 0664 whatever the umask."""
    for mode in (0o444, 0o664):
        out = tmp_path / f"m{mode:o}.pbtxt"
        out.write_text("old")
        out.chmod(mode)
        if mode == 0o444 and not IS_ROOT:
            continue  # refused for a normal user: next test
        rc, _, err = _main(capsys, "cluster", EX, "-o", out)
        assert rc == 0, err
        assert stat.S_IMODE(out.stat().st_mode) == mode and _is_graph_text(out.read_bytes())


def test_a_file_the_user_cannot_write_is_refused(tmp_path, capsys, monkeypatch):
    """What a shell's > does for a normal user: a read-only file is refused, not replaced
    (access(W_OK) decides; it is forced to fail here so that the test also runs as root)."""
    out = tmp_path / "ro.pbtxt"
    out.write_text("keep")
    out.chmod(0o444)
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, m, **k: False if Path(p) == out else real_access(p, m, **k))
    rc, _, err = _main(capsys, "cluster", EX, "-o", out)
    assert rc == 2
    _one_line(err, str(out), "read-only (mode 444)")
    assert out.read_text() == "keep"


@pytest.mark.parametrize("name", ["-", "/dev/stdout", "/dev/fd/1"])
def test_stdout_names_write_the_graph_to_stdout_and_the_report_to_stderr(name):
    r = _cli("cluster", EX, "-o", name)
    assert r.returncode == 0, r.stderr
    assert _is_graph_text(r.stdout)  # text: TF's dump format
    assert b"clusters" in r.stderr and b"Traceback" not in r.stderr


def test_dev_stdout_redirected_to_a_file_writes_into_it(tmp_path):
    """/dev/stdout is a symlink (to /proc/self/fd/1, then to the file): written as stdout, the
    file stays a regular file, and nothing replaces /dev/stdout."""
    out = tmp_path / "redirected.pbtxt"
    before = os.lstat("/dev/stdout")
    with open(out, "wb") as f:
        r = _cli("rewrite", EX, "--until", "mark", "-o", "/dev/stdout", stdout=f, stderr=subprocess.PIPE)
    assert r.returncode == 0, r.stderr
    assert _is_graph_text(out.read_bytes())
    after = os.lstat("/dev/stdout")
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
    assert _no_temp_files(tmp_path) == []


def test_dev_null_as_output_discards(capsys):
    before = os.stat("/dev/null")
    rc, _, err = _main(capsys, "cluster", EX, "-o", "/dev/null")
    assert rc == 0, err
    after = os.stat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


@pytest.mark.parametrize("special", ["fifo", "socket", "stderr", "chardev"])
def test_special_files_as_output_are_refused_without_a_hang(tmp_path, special):
    if special == "fifo":
        out = tmp_path / "out.pbtxt"
        os.mkfifo(out)
        want = "FIFO"
    elif special == "socket":
        out = tmp_path / "s.pbtxt"
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(out))
        want = "socket"
    elif special == "stderr":
        out, want = "/dev/stderr", "file descriptor"
    else:
        out, want = "/dev/zero", "character device"
    r = _cli("cluster", EX, "-o", out, timeout=60)
    assert r.returncode == 2
    _one_line(r.stderr, str(out), want)
    if special in ("fifo", "socket"):
        assert not stat.S_ISREG(os.lstat(out).st_mode)  # untouched


def test_empty_output_name_is_a_usage_error(capsys, tmp_path):
    for argv in (["cluster", EX], ["rewrite", EX], ["render", EX], ["report", EX],
                 ["crosscheck", "index", EX.parent]):
        rc, out, err = _main(capsys, *argv, "-o", "")
        assert rc == 2, (argv, err)
        _one_line(err, "empty output name")


def test_a_directory_named_like_the_output(tmp_path, capsys):
    d = tmp_path / "out.pbtxt"
    d.mkdir()
    rc, _, err = _main(capsys, "rewrite", EX, "-o", d)
    assert rc == 2
    _one_line(err, "is a directory")
    f = tmp_path / "report-here"
    f.write_text("a file")
    rc, _, err = _main(capsys, "report", EX, "-o", f)
    assert rc == 2
    _one_line(err, "not a directory")
    rc, _, err = _main(capsys, "report", EX, "-o", "-")
    assert rc == 2
    _one_line(err, "directory")


def test_symlink_loops_as_output_and_input(tmp_path, capsys):
    a, b = tmp_path / "a.pbtxt", tmp_path / "b.pbtxt"
    a.symlink_to(b)
    b.symlink_to(a)
    rc, _, err = _main(capsys, "cluster", EX, "-o", a)
    assert rc == 2
    _one_line(err, "symbolic link loop")
    for argv in (["cluster", a], ["show", a], ["crosscheck", "index", a], ["render", a, "-o", tmp_path / "x.svg"]):
        rc, _, err = _main(capsys, *argv)
        assert rc == 2, argv
        _one_line(err, "symbolic link loop")
    assert a.is_symlink() and b.is_symlink()


def test_output_directory_removed_mid_run(tmp_path, capsys, monkeypatch):
    """The directory checked before the work is gone when the file is written: one line."""
    from jitsim.files import output

    d = tmp_path / "gone"
    d.mkdir()
    real = output.destination
    calls = []

    def vanishing(path):
        calls.append(path)
        if len(calls) == 2:  # write_atomic's own look, after the work
            d.rmdir()
        return real(path)

    monkeypatch.setattr(output, "destination", vanishing)
    rc, _, err = _main(capsys, "rewrite", EX, "-o", d / "out.pbtxt")
    assert rc == 2
    _one_line(err, "output directory does not exist")
    assert not d.exists()


def test_output_in_a_read_only_directory(tmp_path, capsys, monkeypatch):
    """A directory that takes no file (mode 555 for a normal user, a read-only mount for root):
    refused before any work. mkstemp refusing stands in for it when the test runs as root."""
    import tempfile

    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    try:
        if IS_ROOT:
            real = tempfile.mkstemp

            def refuse(*a, dir=None, **k):
                if dir is not None and Path(dir) == d:
                    raise PermissionError(errno.EACCES, "Permission denied")
                return real(*a, dir=dir, **k)

            monkeypatch.setattr(tempfile, "mkstemp", refuse)
        rc, _, err = _main(capsys, "cluster", EX, "-o", d / "x.pbtxt")
        assert rc == 2
        _one_line(err, "not writable", "Permission denied")
        assert list(d.iterdir()) == []
    finally:
        d.chmod(0o755)


# -- B10: names over 255 bytes, paths over 4,095 --------------------------------------------


@pytest.mark.parametrize("argv", [
    ["cluster", EX, "-o", "{long}.pbtxt"], ["render", EX, "-o", "{long}.svg"], ["report", EX, "-o", "{long}"],
    ["crosscheck", "index", EX.parent, "-o", "{long}.json"], ["cluster", "{long}.pbtxt"],
    ["cluster", EX, "-o", "{deep}/x.pbtxt"], ["report", EX, "-o", "{deep}"], ["show", "{deep}.pbtxt"],
    ["explain", "{long}.pbtxt", "Softmax"], ["crosscheck", "index", "{long}"],
    ["crosscheck", "index", EX.parent, "--log", "{long}.txt"],
])
def test_names_too_long_are_one_line(tmp_path, capsys, argv, monkeypatch):
    monkeypatch.chdir(tmp_path)
    long = "n" * 300
    deep = "/".join(["d" * 200] * 25)  # 5,024 bytes
    args = [a.format(long=long, deep=deep) if isinstance(a, str) else a for a in argv]
    rc, _, err = _main(capsys, *args)
    assert rc == 2
    line = _one_line(err, "file name too long")
    assert len(line) < 600  # the path's middle is left out
    assert list(tmp_path.iterdir()) == []


def test_a_name_of_250_bytes_is_written(tmp_path, capsys):
    """The temporary name beside it (``.NAME.XXXXXXXX``) must still fit in 255 bytes."""
    out = tmp_path / ("c" * 244 + ".pbtxt")
    rc, _, err = _main(capsys, "cluster", EX, "-o", out)
    assert rc == 0, err
    assert out.is_file() and _no_temp_files(tmp_path) == []


# -- A2: only regular files are read, every read is bounded ----------------------------------


def _dump_dir(tmp_path: Path, name: str = "dumps") -> Path:
    d = tmp_path / name
    d.mkdir()
    (d / "before_clone_constants_for_better_clustering_0.pbtxt").write_bytes(EX.read_bytes())
    return d


@pytest.mark.parametrize("log", ["/dev/zero", "fifo", "socket", "dir"])
def test_special_logs_are_refused_without_a_hang(tmp_path, log):
    d = _dump_dir(tmp_path)
    if log == "fifo":
        log = tmp_path / "log.fifo"
        os.mkfifo(log)
    elif log == "socket":
        log = tmp_path / "log.sock"
        socket.socket(socket.AF_UNIX).bind(str(log))
    elif log == "dir":
        log = tmp_path
    r = _cli("crosscheck", "index", d, "--log", log, timeout=60)
    assert r.returncode == 2
    _one_line(r.stderr, str(log))


@pytest.mark.parametrize("what", ["zero-link", "fifo"])
@pytest.mark.parametrize("command", [["cluster"], ["crosscheck", "verify"], ["crosscheck", "compare", "{d}"]])
def test_a_dump_dirs_log_txt_that_is_no_regular_file_is_refused(tmp_path, what, command):
    d = _dump_dir(tmp_path)
    if what == "zero-link":
        (d / "log.txt").symlink_to("/dev/zero")
    else:
        os.mkfifo(d / "log.txt")
    argv = [c.format(d=d) for c in command] + [d]
    r = _cli(*argv, timeout=60)
    assert r.returncode == 2, r.stderr
    _one_line(r.stderr, "log.txt", "not a regular file")


@pytest.mark.parametrize("what", ["zero-link", "fifo"])
def test_a_dump_file_that_is_no_regular_file_is_refused(tmp_path, what):
    d = tmp_path / "d"
    d.mkdir()
    f = d / "before_clone_constants_for_better_clustering_0.pbtxt"
    if what == "zero-link":
        f.symlink_to("/dev/zero")
    else:
        os.mkfifo(f)
    for argv in (["crosscheck", "index", d], ["cluster", d]):
        r = _cli(*argv, timeout=60)
        assert r.returncode == 2
        _one_line(r.stderr, f.name, "not a regular file")


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/stdin", "socket", "fifo"])
def test_special_inputs_are_refused(tmp_path, special):
    if special == "socket":
        special = tmp_path / "g.pbtxt"
        socket.socket(socket.AF_UNIX).bind(str(special))
    elif special == "fifo":
        special = tmp_path / "g.pb"
        os.mkfifo(special)
    graph_args = [] if special == "/dev/stdin" else [["cluster", special], ["show", special]]  # a graph: read from stdin
    for argv in graph_args + [["cluster", EX, "--op-defs", special]]:
        # stdin a pipe that nobody writes to: reading it would never end
        r = _cli(*argv, timeout=60, stdin=subprocess.PIPE)
        assert r.returncode == 2, (argv, r.stderr)
        _one_line(r.stderr, "not a regular file")


def test_reads_are_bounded(tmp_path):
    from jitsim.files.input import read_file, read_json

    f = tmp_path / "big.json"
    f.write_bytes(b"[" + b"0," * 1000 + b"0]")
    with pytest.raises(JitsimError, match="more than jitsim reads"):
        read_file(f, limit=100)
    assert len(read_json(f)) == 1001
    g = tmp_path / "bad.json"
    g.write_text("{not json")
    with pytest.raises(JitsimError, match="not valid JSON"):
        read_json(g)


def test_hashing_a_directory_target_refuses_a_fifo_inside(tmp_path):
    """A SavedModel directory is hashed file by file for the capture cache: a FIFO or device
    there is refused, never read forever."""
    from jitsim.files.input import hash_file

    f = tmp_path / "variables.data"
    os.mkfifo(f)
    with pytest.raises(JitsimError, match="FIFO"):
        hash_file(hashlib.sha256(), f)
    r = tmp_path / "r"
    r.write_bytes(b"x" * 3_000_000)
    h = hashlib.sha256()
    hash_file(h, r)
    assert h.digest() == hashlib.sha256(r.read_bytes()).digest()


# -- A13: temporary files and directories never stay -----------------------------------------

_SIGNAL_WRAPPER = textwrap.dedent("""
    import os, signal, sys
    real = os.replace
    def replace(src, dst, *a, **k):
        # the signal lands exactly between the write of the temporary file and its rename
        if os.path.basename(str(dst)) == "out.pbtxt":
            assert os.path.basename(str(src)).startswith(".out.pbtxt.") and os.path.getsize(src) > 0
            os.kill(os.getpid(), getattr(signal, sys.argv[1]))
        return real(src, dst, *a, **k)
    os.replace = replace
    from jitsim.cli import main
    sys.exit(main(sys.argv[2:]))
""")


@pytest.mark.parametrize("sig,code", [("SIGTERM", 128 + 15), ("SIGHUP", 128 + 1), ("SIGINT", 130)])
def test_a_signal_between_write_and_rename_leaves_nothing(tmp_path, sig, code):
    r = subprocess.run([sys.executable, "-c", _SIGNAL_WRAPPER, sig, "cluster", str(EX), "-o",
                        str(tmp_path / "out.pbtxt")], env=ENV, capture_output=True, timeout=120)
    assert r.returncode == code, r.stderr
    _one_line(r.stderr, "terminated by " + sig if sig != "SIGINT" else "interrupted")
    assert list(tmp_path.iterdir()) == []


def test_a_signal_keeps_an_existing_output_intact(tmp_path):
    out = tmp_path / "out.pbtxt"
    out.write_text("the old result")
    r = subprocess.run([sys.executable, "-c", _SIGNAL_WRAPPER, "SIGTERM", "rewrite", str(EX), "-o", str(out)],
                       env=ENV, capture_output=True, timeout=120)
    assert r.returncode == 143
    assert out.read_text() == "the old result" and _no_temp_files(tmp_path) == []


def test_report_on_a_full_disk_removes_the_directories_it_created(tmp_path, capsys, monkeypatch):
    """ENOSPC when index.html is written: DIR (and its parent, both made by this command) are
    removed; a directory that was there before stays."""
    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    rc, _, err = _main(capsys, "report", EX, "-o", tmp_path / "new" / "report")
    assert rc == 2
    _one_line(err, "No space left on device")
    assert list(tmp_path.iterdir()) == []
    kept = tmp_path / "kept"
    kept.mkdir()
    rc, _, err = _main(capsys, "report", EX, "-o", kept)
    assert rc == 2
    assert kept.is_dir() and list(kept.iterdir()) == []
    monkeypatch.setattr(os, "fsync", real_fsync)
    rc, _, err = _main(capsys, "report", EX, "-o", tmp_path / "new" / "report")
    assert rc == 0 and (tmp_path / "new" / "report" / "index.html").is_file()


def _tmpfs(path: Path, size: str = "16k") -> bool:
    path.mkdir()
    if not IS_ROOT:
        return False
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True)
    return r.returncode == 0


def test_a_really_full_disk(tmp_path):
    """A 16 kB tmpfs (where the test may mount one): -o, report -o DIR and stdout into a file
    there fail with one line and leave nothing of jitsim's."""
    disk = tmp_path / "disk"
    if not _tmpfs(disk):
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        r = _cli("report", EX, "-o", disk / "rep" / "sub")
        assert r.returncode == 2
        _one_line(r.stderr, "No space left on device")
        r = _cli("cluster", EX, "-o", disk / "out.pbtxt")
        assert r.returncode == 2
        _one_line(r.stderr, "No space left on device")
        with open(disk / "stdout.json", "wb") as f:
            r = _cli("cluster", EX, "--format", "json", stdout=f, stderr=subprocess.PIPE)
        assert r.returncode == 2
        _one_line(r.stderr, "<stdout>: cannot write: No space left on device")
        assert sorted(p.name for p in disk.iterdir()) == ["stdout.json"]  # the shell's file, not ours
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


def test_cleanup_removes_registered_temporaries(tmp_path):
    from jitsim.files import output

    d = output.temporary_directory(prefix="t-", dir=tmp_path)
    (d / "f").write_text("x")
    kept = output.temporary_directory(prefix="k-", dir=tmp_path)
    output.release(kept)
    output.cleanup()
    assert not d.exists() and kept.exists()


@pytest.mark.tf
def test_a_failed_tf_run_leaves_no_temporary_directory(tmp_path):
    """The TF child's own temporary files (Keras unpacking a .keras file's weights, say) go
    under jitsim's run directory (TMPDIR), which is removed when the run fails."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    prog = tmp_path / "prog.py"
    prog.write_text("import tempfile\nd = tempfile.mkdtemp()\nopen(d + '/big', 'w').write('x')\n"
                    "raise SystemExit('refused: member too big')\n")
    r = _cli("crosscheck", "harvest", prog, "-o", tmp_path / "h", env={**ENV, "TMPDIR": str(tmp)}, timeout=300)
    assert r.returncode == 2
    _one_line(r.stderr, "TensorFlow run failed")
    assert list(tmp.iterdir()) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["prog.py", "tmp"]


# -- B9: stdout full, closed, or gone ---------------------------------------------------------


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_stdout_full_is_one_line(fmt):
    with open("/dev/full", "wb") as full:
        r = _cli("cluster", EX, "--format", fmt, stdout=full, stderr=subprocess.PIPE)
    assert r.returncode == 2
    _one_line(r.stderr, "jitsim: <stdout>: cannot write: No space left on device")


def test_stdout_output_file_to_full_is_one_line():
    with open("/dev/full", "wb") as full:
        r = _cli("cluster", EX, "-o", "-", stdout=full, stderr=subprocess.PIPE)
    assert r.returncode == 2
    assert "No space left on device" in r.stderr.decode().splitlines()[-1]
    assert b"Traceback" not in r.stderr


@pytest.mark.parametrize("argv", [["cluster", EX, "--format", "json"], ["cluster", EX], ["show", EX],
                                  ["--help"]])
def test_stdout_closed_is_one_line(argv):
    r = subprocess.run([sys.executable, "-m", "jitsim.cli", *map(str, argv)], env=ENV, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, timeout=120, preexec_fn=lambda: os.close(1))
    assert r.returncode == 2
    _one_line(r.stderr, "<stdout>: cannot write: standard output is closed")


def test_stdout_closed_does_not_fail_a_command_that_prints_nothing(tmp_path):
    r = subprocess.run([sys.executable, "-m", "jitsim.cli", "render", str(EX), "-o", str(tmp_path / "g.dot")],
                       env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=120,
                       preexec_fn=lambda: os.close(1))
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "g.dot").is_file()


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_reader_gone_is_a_quiet_exit_141(fmt):
    """`jitsim ... | head -1`: the reader closes the pipe; exit 141 (128 + SIGPIPE, as a shell
    reports a tool ended by a closed pipe), nothing on stderr; never 1 ("differences found").
    The reader is gone before the first write (its end closed at once), so the write fails
    whatever the pipe's buffer size."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", "jitsim.cli", "cluster", str(EX), "--format", fmt],
                           env=ENV, stdout=w, stderr=subprocess.PIPE, timeout=120)
    finally:
        os.close(w)
    assert p.returncode == 141
    assert p.stderr == b""


def test_stderr_closed_keeps_the_exit_code():
    r = subprocess.run([sys.executable, "-m", "jitsim.cli", "cluster", "/no/such.pbtxt"], env=ENV,
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=120, preexec_fn=lambda: os.close(2))
    assert r.returncode == 2 and r.stdout == b""


# -- B11: caches that cannot be used, streams that cannot show every character -----------------


def test_an_unusable_capture_cache_falls_back_to_a_temporary_directory(tmp_path):
    from jitsim.frontend.capture import usable_cache_dir
    from jitsim.files import output

    f = tmp_path / "a-file"
    f.write_text("x")
    for bad in (f, f / "sub"):
        where, note = usable_cache_dir(bad)
        assert where.is_dir() and where != bad and "cannot be used" in note and "nothing cached" in note
        output.cleanup()
        assert not where.exists()
    where, note = usable_cache_dir(tmp_path / "fine")
    assert where == tmp_path / "fine" and note is None


def test_a_read_only_home_gives_the_same_fallback(tmp_path, monkeypatch):
    """A read-only HOME: ~/.cache/jitsim/capture cannot be made (PermissionError; forced here,
    as root may write anywhere)."""
    from jitsim.frontend import capture
    from jitsim.files import output

    monkeypatch.delenv("JITSIM_CACHE")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    real_mkdir = Path.mkdir

    def refuse(self, *a, **k):
        if str(self).startswith(str(tmp_path / "home")):
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real_mkdir(self, *a, **k)

    monkeypatch.setattr(Path, "mkdir", refuse)
    where, note = capture.usable_cache_dir(capture.default_cache_dir())
    assert where.is_dir() and "Permission denied" in note and str(tmp_path / "home") in note
    output.cleanup()
    assert not where.exists()


@pytest.mark.tf
def test_tf_capture_with_jitsim_cache_a_file_runs_uncached(tmp_path):
    g = tmp_path / "g.pbtxt"
    g.write_text('node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } '
                 'attr { key: "shape" value { shape { dim { size: 2 } dim { size: 3 } } } } }\n'
                 'node { name: "r" op: "Relu" input: "x" attr { key: "T" value { type: DT_FLOAT } } }\n'
                 'versions { producer: 2474 }\n')
    cache = tmp_path / "cachefile"
    cache.write_text("not a directory")
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    r = _cli("cluster", g, "--tf", "always", env={**ENV, "JITSIM_CACHE": str(cache), "TMPDIR": str(tmp)},
             timeout=300)
    assert r.returncode == 0, r.stderr
    assert b"capture cache" in r.stdout and b"nothing cached" in r.stdout and b"Traceback" not in r.stderr
    assert list(tmp.iterdir()) == [] and cache.read_text() == "not a directory"


def test_an_unusable_parse_cache_says_so_once(tmp_path, monkeypatch, capsys):
    from jitsim.graph import parse_cache

    big = tmp_path / "big.pbtxt"
    big.write_bytes(EX.read_bytes() * 1 + b"\n" * (parse_cache.MIN_BYTES))
    f = tmp_path / "file"
    f.write_text("x")
    monkeypatch.setenv("JITSIM_PARSE_CACHE", str(f))
    monkeypatch.setattr(parse_cache, "_SAID", set())
    rc, out, err = _main(capsys, "cluster", big)
    assert rc == 0
    assert err.count("parse cache cannot be written") == 1 and "Traceback" not in err


SOFTMAX = "SparseSoftmaxCrossEntropyWithLogits/SparseSoftmaxCrossEntropyWithLogits"


@pytest.mark.parametrize("env", [{"PYTHONIOENCODING": "ascii"}, {"LANG": "C", "LC_ALL": "C"},
                                 {"PYTHONIOENCODING": "latin-1"}])
@pytest.mark.parametrize("argv", [["cluster", EX], ["show", EX], ["explain", EX, SOFTMAX],
                                  ["crosscheck", "index", EX.parent]])
def test_tables_degrade_to_what_the_stream_can_encode(env, argv):
    r = _cli(*argv, env={**ENV, **env})
    assert r.returncode == 0, r.stderr
    assert b"Traceback" not in r.stderr
    if env.get("PYTHONIOENCODING") == "ascii":
        assert r.stdout.isascii()
        assert b"Const" in r.stdout or b"Softmax" in r.stdout or b"graph" in r.stdout


def test_undecodable_file_names_are_printed(tmp_path):
    """A file name with bytes that are not UTF-8 (os.fsdecode gives lone surrogates): printed
    with \\xNN escapes, never a UnicodeEncodeError."""
    name = os.fsdecode(b"g\xff.pbtxt")
    (tmp_path / name).write_bytes(EX.read_bytes())
    r = subprocess.run([sys.executable, "-m", "jitsim.cli", "cluster", name], env=ENV, cwd=tmp_path,
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert b"g\\xff.pbtxt" in r.stdout


# -- inputs checked before any work -----------------------------------------------------------


def test_input_problem_names_the_problem(tmp_path):
    from jitsim.files.input import input_problem

    assert input_problem(tmp_path / "missing") is None  # the command says what it wanted
    assert "too long" in input_problem("x" * 300)
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    assert "loop" in input_problem(loop)


def test_temp_prefix_fits_any_name():
    from jitsim.files.output import _temp_prefix

    for name in ("a", "x" * 255, "é" * 127 + ".pbtxt"):
        p = _temp_prefix(name)
        assert len(os.fsencode(p)) + 8 <= 255
        assert p.startswith(".") and p.endswith(".")


def test_signal_handlers_are_put_back(capsys):
    before = (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP))
    _main(capsys, "show", EX)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGHUP)) == before


def test_a_missing_directory_written_with_a_slash_is_not_taken_for_a_file(tmp_path, capsys):
    rc, _, err = _main(capsys, "rewrite", EX, "-o", f"{tmp_path}/newdir/")
    assert rc == 2
    _one_line(err, "ends with /")
    assert list(tmp_path.iterdir()) == []


def test_stdin_closed_and_caches_on_dev_null(tmp_path):
    """stdin closed (<&-) changes nothing; caches pointed at /dev/null are no directories: the
    command runs uncached, with a note at most."""
    big = tmp_path / "big.pbtxt"
    big.write_bytes(EX.read_bytes() + b"\n" * (600 << 10))
    r = subprocess.run([sys.executable, "-m", "jitsim.cli", "cluster", str(big)],
                       env={**ENV, "JITSIM_PARSE_CACHE": "/dev/null", "JITSIM_CACHE": "/dev/null"},
                       capture_output=True, timeout=120, preexec_fn=lambda: os.close(0))
    assert r.returncode == 0, r.stderr
    assert b"Traceback" not in r.stderr and b"parse cache cannot be written" in r.stderr
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


@pytest.mark.skipif(not IS_ROOT, reason="only root can give a file to another user")
def test_root_replacing_another_users_file_keeps_its_owner(tmp_path, capsys):
    out = tmp_path / "theirs.pbtxt"
    out.write_text("old")
    os.chown(out, 65534, 65534)
    rc, _, err = _main(capsys, "cluster", EX, "-o", out)
    assert rc == 0, err
    st = out.stat()
    assert (st.st_uid, st.st_gid) == (65534, 65534) and _is_graph_text(out.read_bytes())


def test_an_ignored_hup_stays_ignored(tmp_path):
    """nohup ignores HUP for the command it starts: jitsim must not turn it into an exit."""
    wrapper = _SIGNAL_WRAPPER.replace("from jitsim.cli import main", "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
                                      "from jitsim.cli import main")
    r = subprocess.run([sys.executable, "-c", wrapper, "SIGHUP", "cluster", str(EX), "-o", str(tmp_path / "out.pbtxt")],
                       env=ENV, capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert _is_graph_text((tmp_path / "out.pbtxt").read_bytes()) and _no_temp_files(tmp_path) == []


def test_graph_from_stdin(tmp_path):
    """``-`` as the graph reads it from standard input, bounded and by content (text, binary or
    gzip), named <stdin> in messages and JSON; its temporary copy is removed at the end. An
    empty stdin, or ``-`` twice, is one error line."""
    import gzip
    import json

    graph = Path(__file__).resolve().parents[1] / "examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt"
    env = {**os.environ, "TMPDIR": str(tmp_path)}

    def run(*argv, data=b""):
        return subprocess.run([sys.executable, "-m", "jitsim", *argv], input=data, capture_output=True, env=env,
                              timeout=300)

    text = run("cluster", graph, "--format", "json").stdout
    for data in (graph.read_bytes(), gzip.compress(graph.read_bytes())):
        r = run("cluster", "-", "--format", "json", data=data)
        assert r.returncode == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["input"] == "<stdin>"
        strip = [{k: v for k, v in g.items() if k not in ("name", "source")} for g in doc["graphs"]]
        assert strip == [{k: v for k, v in g.items() if k not in ("name", "source")} for g in json.loads(text)["graphs"]]
        assert doc["graphs"][0]["source"] == "<stdin>"
    r = run("cluster", "-")
    assert r.returncode == 2 and r.stderr.decode().strip() == "jitsim: <stdin>: is empty: a graph needs at least one node"
    r = run("diff", "-", "-", data=graph.read_bytes())
    assert r.returncode == 2 and r.stderr.decode().strip().endswith("only one input can come from stdin (-)")
    r = run("explain", "-", "nope", data=graph.read_bytes())
    assert r.returncode == 2 and r.stderr.decode().startswith("jitsim: <stdin>: no node named")
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("jitsim-stdin")]
