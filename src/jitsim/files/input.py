"""Reading files: one bounded, regular-file-only reader for every file jitsim reads.

Graphs, SavedModels, TF logs (``--log``, a dump directory's ``log.txt``), ``index.json`` files,
op libraries, profiler traces: each is read by :func:`read_file` (or :func:`read_text`,
:func:`read_json`, :func:`hash_file`), which

* opens the file without blocking (``O_NONBLOCK``) and checks the *opened* file, so a FIFO, a
  device (``/dev/zero``, ``/dev/stdin``), a socket or a directory is refused, never a hang or an
  endless read, even when a symlink points there or the name is swapped between check and read;
* reads at most ``limit`` bytes (a bigger file is refused with its size, never half read);
* turns every ``OSError`` (a missing file, a symlink loop, a name over 255 bytes, a path over
  4,095 bytes, no permission) into one :class:`~jitsim.errors.JitsimError` line naming the file.

:func:`input_problem` says the same for a path a command was given, before any work.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from jitsim.errors import JitsimError

__all__ = ["MAX_INPUT_BYTES", "MAX_LOG_BYTES", "MAX_JSON_BYTES", "read_file", "read_text", "read_json", "hash_file",
           "read_problem", "is_regular_file", "os_problem", "strerror", "input_problem", "kind_of_mode"]

# protobuf refuses messages of 2 GiB and more; nothing bigger can be a graph
MAX_INPUT_BYTES = 2**31 - 1
# TF's stderr of one run (with TF_CPP_VMODULE logging): far below this even for 100k-node graphs
MAX_LOG_BYTES = 1 << 30
# index.json, summary files, traces jitsim or TF's profiler wrote
MAX_JSON_BYTES = 1 << 30

_CHUNK = 1 << 20


def kind_of_mode(mode: int) -> str:
    """What a file of this ``st_mode`` is, in words."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISREG(mode):
        return "a regular file"
    return "a special file"


def strerror(e: OSError) -> str:
    """The system's words for ``e``, clearer where they are terse (a loop, a name too long)."""
    if e.errno == errno.ELOOP:
        return "a symbolic link loop (too many levels of symbolic links)"
    if e.errno == errno.ENAMETOOLONG:
        return "file name too long (at most 255 bytes a name, 4,095 a path)"
    return e.strerror or str(e)


def os_problem(e: OSError, action: str = "cannot read") -> str:
    """One phrase for an ``OSError`` about a path (without the path)."""
    if e.errno == errno.ENOENT:
        return "no such file or directory"
    if e.errno == errno.ENOTDIR:
        return "no such file (a part of the path is a file, not a directory)"
    return f"{action}: {strerror(e)}"


def _open_regular(path: Path, what: str, error) -> tuple[int, os.stat_result]:
    """A read-only descriptor of the regular file ``path`` and its stat (anything else refused)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        st = os.stat(path)
    except OSError as e:
        if e.errno in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):  # a dangling link, a loop: said as such
            from jitsim.files.paths import missing_reason

            raise error(missing_reason(path), path) from None
        raise error(os_problem(e), path) from None
    if stat.S_ISDIR(st.st_mode):
        raise error(f"is a directory, not {what}", path)
    if not stat.S_ISREG(st.st_mode):
        raise error(f"is {kind_of_mode(st.st_mode)}, not a regular file; give {what}", path)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise error(os_problem(e), path) from None
    st = os.fstat(fd)  # the file opened, not the name checked above
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        raise error(f"is {kind_of_mode(st.st_mode)}, not a regular file; give {what}", path)
    return fd, st


def _size(n: int) -> str:
    for unit, k in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k:
            return f"{n / k:.1f} {unit}"
    return f"{n} bytes"


def read_file(path: Path | str, *, limit: int = MAX_INPUT_BYTES, what: str = "a file", error=JitsimError,
              too_big: str | None = None) -> bytes:
    """The bytes of the regular file ``path``, at most ``limit`` of them; anything else is one
    ``error`` line naming ``path`` (``what``: what the command wanted, for the message;
    ``too_big``: why ``limit`` is the limit)."""
    path = Path(path)
    fd, st = _open_regular(path, what, error)
    why = f", {too_big}" if too_big else ""
    try:
        if st.st_size > limit:
            raise error(f"is {_size(st.st_size)}, more than jitsim reads ({_size(limit)}{why})", path)
        parts = []
        n = 0
        while n <= limit:
            try:
                b = os.read(fd, min(_CHUNK, limit + 1 - n))
            except OSError as e:
                raise error(os_problem(e), path) from None
            if not b:
                break
            parts.append(b)
            n += len(b)
        if n > limit:  # the file grew while it was read
            raise error(f"is more than {_size(limit)}, more than jitsim reads{why}", path)
        return b"".join(parts)
    finally:
        os.close(fd)


def read_text(path: Path | str, *, limit: int = MAX_LOG_BYTES, what: str = "a text file", error=JitsimError) -> str:
    """The text of ``path`` (UTF-8, undecodable bytes replaced), read as :func:`read_file` reads."""
    return read_file(path, limit=limit, what=what, error=error).decode("utf-8", errors="replace")


def read_json(path: Path | str, *, limit: int = MAX_JSON_BYTES, what: str = "a JSON file", error=JitsimError):
    """The JSON document in ``path``; a file that is not JSON is one ``error`` line too."""
    data = read_file(path, limit=limit, what=what, error=error)
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as e:
        raise error(f"not valid JSON: {e}", path) from None


def hash_file(h, path: Path | str, *, what: str = "a file", error=JitsimError, sample_over: int | None = None) -> None:
    """Feed the bytes of the regular file ``path`` to ``h`` in chunks (no size limit: a
    SavedModel's variables may be big; a device or FIFO is refused as by :func:`read_file`).
    ``sample_over``: a file bigger than that is fed as its size, modification time and first
    and last MiB instead (a 16 GiB sparse file costs two reads)."""
    path = Path(path)
    fd, st = _open_regular(path, what, error)
    try:
        if sample_over is not None and st.st_size > sample_over:
            h.update(b"sampled %d %d" % (st.st_size, st.st_mtime_ns))
            try:
                h.update(os.pread(fd, _CHUNK, 0))
                h.update(os.pread(fd, _CHUNK, st.st_size - _CHUNK))
            except OSError as e:
                raise error(os_problem(e), path) from None
            return
        while True:
            try:
                b = os.read(fd, _CHUNK)
            except OSError as e:
                raise error(os_problem(e), path) from None
            if not b:
                return
            h.update(b)
    finally:
        os.close(fd)


def is_regular_file(path: Path | str) -> bool:
    """Whether ``path`` is (or links to) a regular file; False for anything else, or on any error
    (a name too long, a symlink loop...)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def read_problem(path: Path | str, what: str = "a file") -> str:
    """Why :func:`read_file` would refuse ``path`` (one phrase, without the path), or ``""``."""
    try:
        os.close(_open_regular(Path(path), what, JitsimError)[0])
    except JitsimError as e:
        return e.message
    return ""


def input_problem(path: Path | str) -> str | None:
    """What makes ``path`` unusable as a command's input whatever it should hold (a name too
    long, a symbolic link loop, no permission to look), or None. A missing file is left to
    the command, which says what it wanted."""
    try:
        os.stat(path)
    except FileNotFoundError:
        return None
    except ValueError:  # a NUL byte in the name
        return "not a usable file name (it holds a NUL byte)"
    except OSError as e:
        if e.errno == errno.ENOTDIR:
            return None
        return os_problem(e, "cannot use")
    return None
