"""A TensorFlow process that sees no secret and no network, ends by a deadline and with jitsim,
and leaves nothing behind (docs/capture.md, "What the TF route runs").

* :func:`environment`: the variables a TF process gets. Only those TF, Python and the math
  libraries read are kept (:data:`KEPT`, :data:`KEPT_PREFIXES`); cloud credentials, tokens and
  everything else are dropped. ``HOME``, ``TMPDIR`` and the XDG directories point into the
  run's own scratch directory; the user's ``~/.keras/keras.json`` is copied there (Keras reads
  its float type and backend from it, as it would in the user's process) and their user
  site-packages stay importable (``PYTHONUSERBASE``).
* :data:`PREAMBLE`: the first lines every runner executes, before TensorFlow is imported. It
  asks the kernel to kill the process when its parent (jitsim) dies (``PR_SET_PDEATHSIG``),
  sets an alarm for the deadline (``SIGALRM``'s default action ends the process even while
  TF blocks in C++), and, with ``JITSIM_NO_NETWORK=1``, moves into a new, empty network
  namespace (``unshare``; as an unprivileged user with a user namespace around it), so that
  nothing the process runs reaches the network. Where the system refuses a namespace, the run
  goes on and says so (:data:`NETWORK_MARK`).
* :class:`Reaper`: a small process (no TensorFlow) started before TF and told its process
  group. When jitsim ends without saying ``done`` (``kill -9``, a crash), it kills the TF
  process group and removes the run's directories; at the deadline it kills the group too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

# variables a TF process keeps: what TF, XLA, Python, Keras and the math libraries read
KEPT = frozenset({
    "PATH", "LANG", "LANGUAGE", "TZ", "PYTHONPATH", "PYTHONHASHSEED", "PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE",
    "PYTHONIOENCODING", "PYTHONWARNINGS", "LD_LIBRARY_PATH", "LD_PRELOAD", "XLA_FLAGS", "KERAS_BACKEND", "KERAS_HOME",
    "SYSTEMROOT", "VIRTUAL_ENV", "CONDA_PREFIX", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_NUM_THREADS",
    "JITSIM_CACHE",
})
KEPT_PREFIXES = ("LC_", "TF_", "OMP_", "KMP_", "MKL_", "ONEDNN_", "DNNL_", "CUDA_", "NVIDIA_", "JITSIM_RUNNER_",
                 "JITSIM_OP_DEFS_OUT")
# TF_ variables that are credentials or reach other machines, not settings of this process
DROPPED = frozenset({"TF_CONFIG", "TF_GCS_TOKEN", "TF_GCS_CREDENTIALS"})

NETWORK_MARK = "JITSIM_NETWORK: "

# Executed first by every runner (the bootstrap), before TensorFlow is imported: see the module
# docstring. Exits 137 when jitsim is already gone.
PREAMBLE = textwrap.dedent(
    """
    import os as _os
    if _os.environ.get("JITSIM_SANDBOX") == "1":
        import ctypes as _ct, signal as _sig, sys as _sys
        _libc = _ct.CDLL(None, use_errno=True)
        _net = None
        if _os.environ.get("JITSIM_NO_NETWORK") == "1":  # first: entering a user namespace clears the death signal
            _flags = 0x40000000 if _os.geteuid() == 0 else 0x50000000  # CLONE_NEWNET (| CLONE_NEWUSER)
            if _libc.unshare(_flags) != 0 and _flags == 0x40000000:
                _libc.unshare(0x50000000)
            try:
                _net = all(l.split()[0] == "lo:" for l in open("/proc/net/dev").read().splitlines()[2:])
            except OSError:
                _net = False
        _libc.prctl(1, int(_sig.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG: die with jitsim
        if str(_os.getppid()) != _os.environ.get("JITSIM_PARENT", ""):
            _os._exit(137)
        _deadline = int(float(_os.environ.get("JITSIM_DEADLINE", "0") or 0))
        if _deadline > 0:
            _sig.signal(_sig.SIGALRM, _sig.SIG_DFL)
            _sig.alarm(_deadline)
        if _net is not None:
            print("%s" + ("isolated" if _net else "not isolated"), file=_sys.stderr, flush=True)
    """
    % NETWORK_MARK
)


def environment(base: dict, scratch: Path) -> dict:
    """The variables a sandboxed TF process gets, from ``base`` (jitsim's own): the kept ones,
    with ``HOME``, ``TMPDIR`` and the XDG directories under ``scratch`` (created here)."""
    env = {k: v for k, v in base.items()
           if (k in KEPT or k.startswith(KEPT_PREFIXES)) and k not in DROPPED}
    home = scratch / "home"
    tmp = scratch / "tmp"
    for d in (home, tmp, home / ".cache", home / ".config", home / ".local" / "share"):
        d.mkdir(parents=True, exist_ok=True)
    env.update(HOME=str(home), TMPDIR=str(tmp), XDG_CACHE_HOME=str(home / ".cache"),
               XDG_CONFIG_HOME=str(home / ".config"), XDG_DATA_HOME=str(home / ".local" / "share"))
    user_base = _user_base(base)
    if user_base is not None:
        env.setdefault("PYTHONUSERBASE", user_base)
    if "KERAS_HOME" not in base:
        src = Path(base.get("HOME") or "~").expanduser() / ".keras" / "keras.json"
        try:
            if src.is_file() and src.stat().st_size < 65536:
                (home / ".keras").mkdir(exist_ok=True)
                shutil.copyfile(src, home / ".keras" / "keras.json")
        except OSError:
            pass
    return env


def _user_base(base: dict) -> str | None:
    """The user's Python user base (``~/.local``), so that packages installed with ``pip
    install --user`` stay importable under another ``HOME``."""
    if base.get("PYTHONUSERBASE"):
        return base["PYTHONUSERBASE"]
    home = base.get("HOME")
    return str(Path(home) / ".local") if home else None


def sandbox_variables(parent_pid: int, deadline_s: float, network: bool = False) -> dict:
    """The variables that switch the :data:`PREAMBLE` on for a process started by ``parent_pid``."""
    out = {"JITSIM_SANDBOX": "1", "JITSIM_PARENT": str(parent_pid), "JITSIM_DEADLINE": str(max(1, int(deadline_s) + 1))}
    if network:
        out["JITSIM_NO_NETWORK"] = "1"
    return out


def network_note(log_text: str) -> str | None:
    """What the preamble said of the network (``isolated``, ``not isolated``), or None."""
    for line in log_text.splitlines():
        if line.startswith(NETWORK_MARK):
            return line[len(NETWORK_MARK):].strip()
    return None


# The reaper: a Python process without TensorFlow, in a session of its own (a terminal's Ctrl-C
# or hang-up does not reach it; it ignores the usual signals). jitsim writes "group N" once TF
# runs and "done" when it has cleaned up itself; end of input without "done" means jitsim is gone.
_REAPER = textwrap.dedent(
    """
    import os, select, shutil, signal, sys, time
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE, signal.SIGQUIT):
        signal.signal(s, signal.SIG_IGN)
    limit = float(sys.argv[1]); paths = sys.argv[2:]
    end = time.monotonic() + limit
    group, buf, done, expired = None, b"", False, False
    def kill():
        if group is None:
            return
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            return
        for _ in range(200):
            try:
                os.killpg(group, 0)
            except OSError:
                return
            time.sleep(0.05)
    while True:
        wait = 1.0 if expired else max(0.0, min(1.0, end - time.monotonic()))
        ready, _, _ = select.select([0], [], [], wait)
        if ready:
            data = os.read(0, 4096)
            if not data:
                break
            buf += data
            for line in buf.split(b"\\n"):
                if line.startswith(b"group "):
                    group = int(line.split()[1])
                elif line == b"done":
                    done = True
            if done:
                sys.exit(0)
        elif not expired and time.monotonic() >= end:
            expired = True
            kill()
    kill()
    for p in paths:
        shutil.rmtree(p, ignore_errors=True)
    """
)


class Reaper:
    """Started before the TF process (:meth:`watch` tells it the process group), ended with
    :meth:`done` once jitsim has cleaned up itself. If jitsim dies first, the reaper kills the
    group and removes ``paths``; after ``limit`` seconds it kills the group (the deadline)."""

    def __init__(self, paths, limit: float) -> None:
        self._proc = None
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-S", "-c", _REAPER, str(float(limit) + 2.0), *map(str, paths)],
                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, env={"PATH": os.environ.get("PATH", "")})
        except OSError:  # no second process here: the run goes on without one
            self._proc = None

    def _say(self, text: str) -> None:
        if self._proc is None or self._proc.stdin is None:
            return
        try:
            self._proc.stdin.write(text.encode() + b"\n")
            self._proc.stdin.flush()
        except OSError:
            pass

    def watch(self, group: int) -> None:
        self._say(f"group {group}")

    def done(self) -> None:
        """jitsim has ended the TF process and removed its files: the reaper exits."""
        if self._proc is None:
            return
        self._say("done")
        try:
            self._proc.stdin.close()
            self._proc.wait(timeout=5)
        except (OSError, subprocess.TimeoutExpired):
            self._proc.kill()
        self._proc = None
