"""Writing files: every command's ``-o`` checked before any work, and written atomically.

One choke point for every file jitsim writes for a user (``cluster``, ``rewrite``, ``render``,
``report``, ``registry export``, ``crosscheck harvest|index|fuzz``, ``profile``) and for its
caches:

* :func:`check_output` says in one line why a path cannot be written (a directory, a missing or
  read-only parent, a read-only file, a device, a name too long...), before a command spends time
  on the graph;
* :func:`write_atomic` writes through a temporary file in the destination's directory and a
  rename, so a failure (a full disk, a signal) never leaves a half-written or a temporary file.

What ``-o PATH`` does, by what ``PATH`` is (:func:`destination`):

* ``-``, ``/dev/stdout``, ``/dev/fd/1``, ``/proc/self/fd/1``: the bytes go to standard output
  (the command's own report then goes to stderr, see :mod:`jitsim.cli`);
* ``/dev/null``: written there (discarded), as by a shell redirection;
* a symbolic link: written *through* it, atomically at the real path of its target, which keeps
  its permission bits; the link itself is never replaced (a dangling link creates its target);
* an existing regular file: replaced, keeping its permission bits (a 0444 file stays 0444);
  a file the user may not write (``access(W_OK)`` fails: a read-only file for a normal user) is
  refused, as a shell's ``>`` refuses it;
* any other file that is not a regular file (a device, a FIFO, a socket): refused;
* a new file: created with the usual permissions (0666 minus the umask).

Temporary files and directories jitsim creates (:func:`write_atomic`'s, :func:`output_directory`'s,
:func:`temporary_directory`'s) are registered until they are renamed or removed; :func:`cleanup`
removes what is left, and the CLI calls it when a signal (TERM, HUP, INT) ends a command.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import sys
import tempfile
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from jitsim.beside import Started, several_cpus
from jitsim.errors import JitsimError

__all__ = ["check_output", "write_atomic", "start_write", "StartedWrite", "destination", "output_directory",
           "temporary_directory", "cleanup", "STDOUT_NAMES", "Destination", "wrote_line"]

# names that mean "standard output" to jitsim (not a file to replace)
STDOUT_NAMES = ("-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")
_DEV_NULL = "/dev/null"

# names of open file descriptors other than stdout: writing "through" one would replace the file
# the descriptor happens to be open on (a log a shell redirected stderr to)
_FD_NAMES = ("/dev/stderr", "/dev/stdin", "/dev/fd/", "/proc/self/fd/", "/proc/thread-self/fd/")

# the stream behind ``-o -`` (the CLI sends its reports to stderr then; None: sys.stdout)
stdout_stream = None

# what is left to remove when a command ends early: temporary files and directories jitsim made
_PENDING: dict[str, bool] = {}  # path -> is a directory
_LOCK = threading.Lock()


def _register(path: str | Path, directory: bool) -> None:
    with _LOCK:
        _PENDING[str(path)] = directory


def _forget(path: str | Path) -> None:
    with _LOCK:
        _PENDING.pop(str(path), None)


@contextlib.contextmanager
def _signals_deferred():
    """INT, TERM and HUP held back for the block (a temporary name is made and registered as
    one step: a signal between the two would leave it behind); delivered right after."""
    import signal

    sigs = {getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)}
    try:
        old = signal.pthread_sigmask(signal.SIG_BLOCK, sigs)
    except (AttributeError, ValueError, OSError):  # no such call here, or not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def cleanup() -> None:
    """Remove every temporary file and directory jitsim created and has not renamed or removed
    yet (the CLI calls this when a signal ends a command, and at exit)."""
    with _LOCK:
        items = list(_PENDING.items())
        _PENDING.clear()
    for path, directory in reversed(items):
        try:
            if directory:
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.unlink(path)
        except OSError:
            pass


def _problem(e: OSError) -> str:
    from jitsim.files.input import strerror

    return strerror(e)


def _kind(mode: int) -> str:
    from jitsim.files.input import kind_of_mode

    return kind_of_mode(mode)


@dataclass(frozen=True)
class Destination:
    """Where the bytes for ``-o PATH`` go: ``kind`` is ``stdout``, ``null`` (``/dev/null``) or
    ``file``; for a file, ``real`` is the path to replace (a symbolic link's target) and
    ``mode`` the permission bits to keep (None: a new file)."""

    kind: str
    real: Path | None = None
    mode: int | None = None
    owner: tuple[int, int] | None = None  # an existing file's (uid, gid), kept where allowed


def is_stdout(path: Path | str) -> bool:
    """Whether ``-o path`` means standard output."""
    return str(path) in STDOUT_NAMES


def destination(path: Path | str) -> Destination:
    """Where ``-o path`` writes (see the module doc), or one :class:`JitsimError` line saying why
    it cannot be written. Nothing is created."""
    text = str(path)
    if text == "":
        raise JitsimError("an empty output name: give a file name (or - for stdout)")
    if "\0" in text:
        raise JitsimError("cannot write: the file name holds a NUL byte", text.replace("\0", "\\0"))
    if is_stdout(text):
        return Destination("stdout")
    if text.startswith(_FD_NAMES) or text in ("/dev/stderr", "/dev/stdin"):
        raise JitsimError("cannot write: names an open file descriptor, not a file (- writes to stdout)", text)
    path = Path(text)
    try:
        lst = os.lstat(path)
    except FileNotFoundError:
        lst = None
    except NotADirectoryError:
        anc = _existing_ancestor(path.parent)
        raise JitsimError(f"cannot write: {anc} is a file, not a directory", path) from None
    except OSError as e:
        raise JitsimError(f"cannot write: {_problem(e)}", path) from None
    real = path
    if lst is not None and stat.S_ISLNK(lst.st_mode):
        try:
            real = Path(os.path.realpath(path, strict=True))
        except FileNotFoundError:  # a dangling link: create its target, as a shell's > does
            real = Path(os.path.realpath(path))
        except OSError as e:
            raise JitsimError(f"cannot write: {_problem(e)}", path) from None
        if str(real) == _DEV_NULL:
            return Destination("null")
        if str(real) in STDOUT_NAMES:
            return Destination("stdout")
        try:
            lst = os.stat(real)
        except FileNotFoundError:
            lst = None
        except OSError as e:
            raise JitsimError(f"cannot write: {_problem(e)}", path) from None
    if str(real) == _DEV_NULL:
        return Destination("null")
    if lst is None and text.endswith(os.sep):
        raise JitsimError("cannot write: names a directory (it ends with /) that does not exist; name an output "
                          "file", path)
    if lst is None:  # a new file: its directory must take it
        parent = real.parent
        try:
            pst = os.stat(parent)
        except FileNotFoundError:
            anc = _existing_ancestor(parent)
            if anc.exists() and not anc.is_dir():
                raise JitsimError(f"cannot write: {anc} is a file, not a directory", path) from None
            raise JitsimError("cannot write: the output directory does not exist", path) from None
        except NotADirectoryError:
            raise JitsimError(f"cannot write: {_existing_ancestor(parent)} is a file, not a directory", path) from None
        except OSError as e:
            raise JitsimError(f"cannot write: {_problem(e)}", path) from None
        if not stat.S_ISDIR(pst.st_mode):
            raise JitsimError(f"cannot write: {parent} is not a directory", path)
        _probe(parent, path, "cannot write: the output directory is not writable")
        return Destination("file", real, None)
    if stat.S_ISDIR(lst.st_mode):
        raise JitsimError("is a directory; name an output file", path)
    if not stat.S_ISREG(lst.st_mode):
        raise JitsimError(f"cannot write: it is {_kind(lst.st_mode)}, not a regular file; jitsim replaces regular "
                          "files only (- writes to stdout)", path)
    if not os.access(real, os.W_OK):
        raise JitsimError(f"cannot write: the file is read-only (mode {stat.S_IMODE(lst.st_mode):o}); "
                          "make it writable or remove it first", path)
    _probe(real.parent, path, "cannot write: the output directory is not writable")
    return Destination("file", real, stat.S_IMODE(lst.st_mode), (lst.st_uid, lst.st_gid))


def check_output(path: Path | str, *, directory: bool = False) -> Path:
    """Check, before any work, that ``path`` can be written: a file (:func:`destination`), or
    with ``directory``, a directory that exists or can be created. Every command that writes
    calls this first, so a bad ``-o`` is one clear line, never a traceback or a half-written
    file."""
    text = str(path)
    if text == "":
        raise JitsimError("an empty output name: give a " + ("directory" if directory else "file") + " name")
    if not directory:
        destination(text)
        return Path(text)
    if is_stdout(text) or text == _DEV_NULL:
        raise JitsimError("this command writes a directory of files: name a directory, not standard output or "
                          "/dev/null", text)
    path = Path(text)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise JitsimError(f"cannot create the directory: {_existing_ancestor(path)} is a file", path) from None
    except OSError as e:
        raise JitsimError(f"cannot create the directory: {_problem(e)}", path) from None
    if st is not None:
        if not stat.S_ISDIR(st.st_mode):
            raise JitsimError("exists and is not a directory", path)
        _probe(path, path, "directory is not writable")
        return path
    parent = _existing_ancestor(path)
    if not parent.is_dir():
        raise JitsimError(f"cannot create the directory: {parent} is a file", path)
    _probe(parent, path, f"cannot create the directory: {parent} is not writable")
    return path


def _probe(directory: Path, path: Path, problem: str) -> None:
    """Create and remove a temporary file in ``directory`` (permissions alone do not tell:
    root may write anywhere but /proc, a read-only mount refuses everyone)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".jitsim-probe.", dir=directory)
    except OSError as e:
        raise JitsimError(f"{problem} ({_problem(e)})", path) from None
    os.close(fd)
    os.unlink(tmp)


def _existing_ancestor(path: Path) -> Path:
    p = path.absolute()
    while p != p.parent:
        try:
            os.stat(p)
            return p
        except OSError:
            p = p.parent
    return p


def _temp_prefix(name: str) -> str:
    """``.NAME.`` for a temporary file beside NAME, short enough that the temporary name
    (prefix and 8 random characters) fits in 255 bytes whatever NAME's length."""
    raw = os.fsencode(name)[:200]
    return "." + os.fsdecode(raw).rstrip("\udc80\udcff") + "."


def write_stdout(data: bytes, name: str = "<stdout>") -> None:
    """``data`` to standard output (``-o -``); a write error is one line."""
    out = sys.stdout if stdout_stream is None else stdout_stream
    if out is None or not hasattr(out, "buffer"):
        raise JitsimError("cannot write: standard output is closed", name)
    try:
        out.flush()
        out.buffer.write(data)
        out.buffer.flush()
    except BrokenPipeError:
        raise
    except OSError as e:
        raise JitsimError(f"cannot write: {_problem(e)}", name) from None


def write_atomic(path: Path | str, data: bytes | Iterable[bytes], *, durable: bool = True) -> None:
    """Write ``data`` for ``-o path`` (:func:`destination`): to a file via a temporary file and a
    rename, never a half-written file, the kept (or usual: 0666 minus the umask) permission
    bits; through a symbolic link to its target. ``durable``: the data reaches the disk before
    the rename (fsync; a cache entry, which is only a speed-up, may skip it). Any failure is one
    :class:`JitsimError` naming ``path``. ``data`` may come in pieces (an iterable of bytes,
    e.g. a big graph's text made piece by piece): a file gets them one at a time, standard
    output once all are made."""
    start_write(path, data, durable=durable).finish()


def start_write(path: Path | str, data: bytes | Iterable[bytes], *, durable: bool = True,
                background: bool = False) -> "StartedWrite":
    """:func:`write_atomic` in two steps: the data goes to the temporary file now, and into
    place at :meth:`StartedWrite.finish` (standard output and ``/dev/null`` get it then).

    ``background``: a file's data is written by another thread, where this process may run on
    more than one CPU, while the caller goes on (what pays where making the data gives up the
    GIL: the C text printer does). ``data``'s pieces are then made in that thread: they must
    not depend on what the caller changes meanwhile. A bad ``path`` is refused here, at once;
    the writing's own failure comes from ``finish()``. A caller that fails before ``finish()``
    calls :meth:`StartedWrite.discard` (``path`` stays as it was)."""
    return StartedWrite(path, data, durable, background)


class StartedWrite:
    """A write begun by :func:`start_write`: :meth:`finish` puts it in place (or raises what
    writing it raised), :meth:`discard` drops it; each waits for the writing thread, if any."""

    def __init__(self, path: Path | str, data, durable: bool, background: bool) -> None:
        self.path = path
        self._dest = dest = destination(path)
        self._data = data
        self._tmp: str | None = None
        self._writing: Started | None = None
        self._done = False
        if dest.kind in ("stdout", "null"):
            return  # written at finish()
        real = dest.real
        try:
            with _signals_deferred():
                fd, tmp = tempfile.mkstemp(prefix=_temp_prefix(real.name), dir=real.parent)
                _register(tmp, False)
        except OSError as e:
            raise JitsimError(f"cannot write: {_problem(e)}", path) from None
        self._tmp = tmp
        self._data = None
        # (read here: reading the umask sets it for a moment, which another thread must not see)
        mode = dest.mode if dest.mode is not None else 0o666 & ~_umask()
        try:
            self._writing = Started(lambda: self._write(fd, data, durable, mode), thread=background and several_cpus())
        except BaseException:  # (no thread to be had: nothing written, nothing left behind)
            os.close(fd)
            self._remove_temp()
            raise

    def _write(self, fd: int, data, durable: bool, mode: int) -> None:
        """The temporary file's contents."""
        dest = self._dest
        with os.fdopen(fd, "wb") as f:
            if isinstance(data, (bytes, bytearray, memoryview)):
                f.write(data)
            else:
                for piece in data:
                    f.write(piece)
            f.flush()
            if dest.owner is not None and dest.owner != (os.geteuid(), os.getegid()):
                try:  # root replacing another user's file: it stays theirs
                    os.fchown(f.fileno(), *dest.owner)
                except OSError:
                    pass
            os.fchmod(f.fileno(), mode)
            if durable:
                os.fsync(f.fileno())

    def finish(self) -> None:
        """Put the data in place: the rename of the temporary file (or standard output's or
        /dev/null's write); one :class:`JitsimError` naming the path when that or the writing
        failed (the temporary file is then removed)."""
        if self._done:
            return
        self._done = True
        dest, path = self._dest, self.path
        if dest.kind == "stdout":
            data = self._data
            self._data = None
            write_stdout(data if isinstance(data, (bytes, bytearray, memoryview)) else b"".join(data))
            return
        if dest.kind == "null":
            data = self._data
            self._data = None
            try:
                with open(_DEV_NULL, "wb") as f:
                    if isinstance(data, (bytes, bytearray, memoryview)):
                        f.write(data)
                    else:
                        f.write(b"".join(data))
            except OSError as e:
                raise JitsimError(f"cannot write: {_problem(e)}", path) from None
            return
        tmp = self._tmp
        try:
            self._writing.result()
            os.replace(tmp, dest.real)
            _forget(tmp)
        except BaseException as e:
            self._remove_temp()
            if isinstance(e, OSError):
                raise JitsimError(f"cannot write: {_problem(e)}", path) from None
            raise

    def discard(self) -> None:
        """Drop the write (after a failure elsewhere): the temporary file is removed once the
        writing thread, if any, has ended; nothing happens after :meth:`finish`."""
        if self._done:
            return
        self._done = True
        self._data = None
        if self._writing is not None:
            self._writing.wait()
        self._remove_temp()

    def _remove_temp(self) -> None:
        tmp = self._tmp
        if tmp is None:
            return
        self._tmp = None
        try:
            os.unlink(tmp)
        except OSError:
            pass
        _forget(tmp)


@contextlib.contextmanager
def output_directory(path: Path | str):
    """The directory ``path`` for a command's output files, created (with its missing parents)
    if needed; when the block fails (an error, a full disk, a signal), the directories created
    here are removed again with whatever was written into them. Yields ``Path(path)``."""
    path = Path(path)
    created = []
    p = path.absolute()
    missing = []
    while True:
        try:
            os.stat(p)
            break
        except FileNotFoundError:
            missing.append(p)
            if p == p.parent:
                break
            p = p.parent
        except OSError as e:
            raise JitsimError(f"cannot create the directory: {_problem(e)}", path) from None
    try:
        for d in reversed(missing):
            with _signals_deferred():
                os.mkdir(d)
                created.append(d)
                _register(d, True)
        if not path.is_dir():
            raise JitsimError("exists and is not a directory", path)
        yield path
    except BaseException as e:
        for d in reversed(created):  # the innermost first: it holds what was written
            shutil.rmtree(d, ignore_errors=True)
            _forget(d)
        if isinstance(e, OSError):
            raise JitsimError(f"cannot write: {_problem(e)}", path) from None
        raise
    for d in created:
        _forget(d)


def private_directory(path: Path | str) -> Path:
    """``path`` as a directory only its owner can read or write (a cache): every directory
    created on the way gets mode 0700 whatever the umask, and the last one, if it is ours and
    others may write or read it, is made 0700 (another local user must not plant or read
    entries). Raises OSError where it cannot be made."""
    path = Path(path)
    missing = []
    p = path
    while not p.exists() and p != p.parent:
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(0o700)
        except FileExistsError:
            pass
        else:
            os.chmod(d, 0o700)  # mkdir's mode passes through the umask; 0700 has nothing more to lose
    st = os.stat(path)
    if not stat.S_ISDIR(st.st_mode):
        raise NotADirectoryError(20, "Not a directory", str(path))
    if st.st_uid == os.getuid() and st.st_mode & 0o077:
        os.chmod(path, 0o700)
    return path


# what a write gives when the directory cannot take the file, whatever the file holds: a full
# disk, a quota, a file size limit (``ulimit -f``), a read-only file system, no permission
STORAGE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM})
_STORAGE_WORDS = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded",
                  errno.EFBIG: "file too large (a file size limit: ulimit -f)", errno.EROFS: "read-only file system",
                  errno.EACCES: "permission denied", errno.EPERM: "operation not permitted"}


def storage_words(e: OSError) -> str:
    """The problem of an error in :data:`STORAGE_ERRNOS`, in words (``no space left on device``)."""
    return _STORAGE_WORDS.get(e.errno) or (e.strerror or str(e)).lower()


def write_probe(directory: Path | str, size: int) -> None:
    """Write a file of ``size`` bytes in ``directory`` and remove it: raises the ``OSError`` a
    write there gives now (:data:`STORAGE_ERRNOS`: full, over quota, read-only...). The bytes
    are written and the file closed (a network file system may say so only then)."""
    fd, probe = tempfile.mkstemp(prefix=".jitsim-probe.", dir=directory)
    try:
        chunk = b"\0" * min(size, 1 << 16)
        left = size
        try:
            while left > 0:
                left -= os.write(fd, chunk[:left])
        finally:
            os.close(fd)
    finally:
        try:
            os.unlink(probe)
        except OSError:
            pass


def temporary_directory(prefix: str = "jitsim-", dir: Path | str | None = None) -> Path:
    """A new temporary directory, removed by :func:`cleanup` (at the end of the command, or when a
    signal ends it) unless :func:`release` hands it on first."""
    with _signals_deferred():
        d = tempfile.mkdtemp(prefix=prefix, dir=dir)
        _register(d, True)
    return Path(d)


def release(path: Path | str) -> None:
    """``path`` (a temporary file or directory) was renamed or removed: no more cleanup."""
    _forget(path)


def remove_tree(path: Path | str) -> None:
    """Remove a temporary directory now (and forget it)."""
    shutil.rmtree(path, ignore_errors=True)
    _forget(path)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def wrote_line(path, what: str = "") -> str:
    """The line every command that writes a file or directory says it with (on stderr):
    ``wrote PATH`` and, in parentheses, what it holds."""
    return f"wrote {path}" + (f" ({what})" if what else "")
