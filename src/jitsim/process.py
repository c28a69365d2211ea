"""The command's process: its signals, its standard streams, its exit codes for both.

:func:`jitsim.cli.main` runs every command inside this: TERM and HUP become :class:`Signalled`
(every ``finally`` runs, temporary files are removed, exit 128 + N; an ignored signal stays
ignored), standard output is :class:`GuardedStdout` (a write error is one
``jitsim: <stdout>: cannot write: ...`` line, the reader going away a quiet exit
:data:`EXIT_BROKEN_PIPE`), a closed descriptor 0, 1 or 2 is filled with /dev/null, and a character
a stream cannot encode is written as its ASCII look-alike (:func:`setup_streams`). docs/cli.md,
"Exit codes".
"""

from __future__ import annotations

import os
import sys

from jitsim.errors import JitsimError


# what an ASCII-only (or Latin-1...) terminal gets for the few non-ASCII characters jitsim prints
TRANSLIT = {"×": "x", "→": "->", "←": "<-", "…": "...", "—": "--", "–": "-", "≤": "<=", "≥": ">=", "≠": "!=",
            "·": ".", "•": "*", "‘": "'", "’": "'", "“": '"', "”": '"', "✓": "ok", "✗": "x"}


def ascii_fallback(e: UnicodeEncodeError):
    """Codec error handler for stdout and stderr: a character the stream's encoding cannot
    show becomes its ASCII look-alike, else ``?``; a byte of an undecodable file name (a lone
    surrogate) becomes ``\\xNN``."""
    out = []
    for ch in e.object[e.start:e.end]:
        if 0xDC80 <= ord(ch) <= 0xDCFF:
            out.append(f"\\x{ord(ch) - 0xDC00:02x}")
        else:
            out.append(TRANSLIT.get(ch, "?"))
    return "".join(out), e.end


def setup_streams() -> None:
    """stdout and stderr never fail on a character they cannot encode (PYTHONIOENCODING=ascii,
    a Latin-1 terminal, a file name with undecodable bytes): :func:`ascii_fallback`. rich
    draws its tables with ASCII boxes where the encoding is not UTF-8."""
    import codecs

    try:
        codecs.lookup_error("jitsim-ascii")
    except LookupError:
        codecs.register_error("jitsim-ascii", ascii_fallback)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None:
            try:
                reconfigure(errors="jitsim-ascii")
            except (ValueError, OSError, AttributeError):
                pass


SIGNALS_MUTED: list = []  # non-empty while main() cleans up: TERM/HUP then change nothing


class Signalled(BaseException):
    """A TERM or HUP signal, turned into an exception so that every ``finally`` runs (temporary
    files are removed) and the command ends with exit code 128 + the signal's number."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


def install_signal_handlers():
    """TERM and HUP end a command as Ctrl-C does: cleanly (temporary files removed, no
    traceback), exit 128 + N. A second signal while the command cleans up is ignored. Returns
    a function that puts the previous handlers back."""
    import signal

    if not threading_main():  # signal handlers can only be set from the main thread
        return lambda: None
    fired = []

    def handler(signum, frame):
        if fired or SIGNALS_MUTED:
            return
        fired.append(signum)
        raise Signalled(signum)

    old = {}
    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        # an ignored signal stays ignored (nohup ignores HUP for the command it starts)
        if sig is not None and signal.getsignal(sig) is not signal.SIG_IGN:
            old[sig] = signal.signal(sig, handler)

    def restore():
        for sig, h in old.items():
            signal.signal(sig, h)

    return restore


def threading_main() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


class StdoutError(JitsimError):
    """Standard output cannot be written (a full disk, /dev/full, a closed descriptor)."""


STDOUT_NAME = "<stdout>"


_PIECE = 2048  # characters per write to the underlying stream (GuardedStdout.write)


class GuardedStdout:
    """``sys.stdout`` while a command runs: a write error is one :class:`StdoutError` line
    (the reader going away stays a :class:`BrokenPipeError`, a quiet exit)."""

    def __init__(self, stream):
        self._stream = stream

    def _call(self, fn, *args):
        try:
            return fn(*args)
        except BrokenPipeError:
            raise
        except OSError as e:
            from jitsim.files.input import strerror

            raise StdoutError(f"cannot write: {strerror(e)}", STDOUT_NAME) from None

    def write(self, text):
        # in pieces: a large write that the disk takes only in part (ENOSPC after a partial write)
        # is dropped silently by Python's buffered writer; small writes flush through its buffer,
        # where the error is raised
        if len(text) <= _PIECE:
            return self._call(self._stream.write, text)
        for i in range(0, len(text), _PIECE):
            self._call(self._stream.write, text[i:i + _PIECE])
        return len(text)

    def writelines(self, lines):
        return self._call(self._stream.writelines, lines)

    def flush(self):
        return self._call(self._stream.flush)

    def __getattr__(self, name):
        return getattr(self._stream, name)


class ClosedStdout:
    """``sys.stdout`` when the command was started with standard output closed (``>&-``)."""

    encoding = "utf-8"
    errors = "strict"

    def write(self, text):
        if text:
            raise StdoutError("cannot write: standard output is closed", STDOUT_NAME)
        return 0

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def flush(self):
        pass

    def isatty(self):
        return False

    def fileno(self):
        raise OSError(9, "standard output is closed")


def occupy_closed_fds() -> None:
    """Descriptors 0, 1 or 2 closed at start (``>&-``): put /dev/null there, so that no file
    jitsim opens later becomes 'stdout' (and TF or dot, started by jitsim, never write into it)."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                got = os.open(os.devnull, os.O_RDONLY if fd == 0 else os.O_WRONLY)
            except OSError:
                continue
            if got != fd:
                os.dup2(got, fd)
                os.close(got)


def silence_stdout(stream) -> None:
    """After a failed or broken stdout: /dev/null on descriptor 1, so that what is still
    buffered goes nowhere at exit instead of raising again at the interpreter's last flush
    (only where ``stream``, the process's stdout, is descriptor 1: not a test's capture)."""
    try:
        if stream is None or stream.fileno() != 1:
            return
    except (OSError, ValueError, AttributeError):
        return
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.close(null)
    except OSError:
        pass


def print_error(text: str) -> None:
    try:
        print(text, file=sys.stderr)
        sys.stderr.flush()
    except (OSError, ValueError, AttributeError):  # stderr full or closed too: nothing more to say
        pass


EXIT_BROKEN_PIPE = 141  # 128 + SIGPIPE: what a shell reports for a tool a closed pipe ended


def exit_process(rc: int):
    """End the ``jitsim`` process with exit code ``rc``, as ``sys.exit(rc)`` would, without
    the interpreter's teardown of its modules and objects (20–30 ms after a 12k-node graph,
    nothing anyone waits for): standard streams flushed, ``atexit`` functions run (Ray's
    shutdown, temporary directories' finalizers, coverage), then ``os._exit``.

    The ordinary ``sys.exit`` is kept where the short cut could lose something: another
    thread still running (the interpreter would join it), a stream that cannot be flushed
    (the interpreter reports it as it always does), or a Python without the ``atexit`` hook."""
    import atexit
    import threading

    run_exitfuncs = getattr(atexit, "_run_exitfuncs", None)
    if run_exitfuncs is None or threading.active_count() > 1 or not isinstance(rc, int) or not 0 <= rc <= 255:
        sys.exit(rc)
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        sys.exit(rc)
    run_exitfuncs()
    try:
        for stream in (sys.stdout, sys.stderr):  # what an exit function printed
            if stream is not None:
                stream.flush()
    except (OSError, ValueError):
        pass
    if threading.active_count() > 1:  # an exit function started a thread (unusual): let Python join it
        sys.exit(rc)
    os._exit(rc)
