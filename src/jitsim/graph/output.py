"""Writing files: every command's ``-o`` checked before any work, and written atomically.

:func:`check_output` says in one line why a path cannot be written (a directory, a missing or
read-only parent...), before a command spends time on the graph; :func:`write_atomic` writes
through a temporary file and a rename, so a failure never leaves a half-written file.
(:mod:`jitsim.graph.io` re-exports both; the parsed-text cache writes its entries with them.)
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from jitsim.errors import JitsimError

__all__ = ["check_output", "write_atomic", "wrote_line"]


def check_output(path: Path | str, *, directory: bool = False) -> Path:
    """Check, before any work, that ``path`` can be written: a file whose directory exists and
    is writable (``directory``: a directory that exists or can be created). Every command that
    writes calls this first, so a bad ``-o`` is one clear line, never a traceback or a
    half-written file."""
    path = Path(path)
    if str(path) in ("", "."):
        if directory:
            return path
        raise JitsimError("an output file needs a name", path)
    if directory:
        if path.exists():
            if not path.is_dir():
                raise JitsimError("exists and is not a directory", path)
            _probe(path, path, "directory is not writable")
            return path
        parent = _existing_ancestor(path)
        if not parent.is_dir():
            raise JitsimError(f"cannot create the directory: {parent} is a file", path)
        _probe(parent, path, f"cannot create the directory: {parent} is not writable")
        return path
    if path.is_dir():
        raise JitsimError("is a directory; name an output file", path)
    if path.exists() and not path.is_file():
        raise JitsimError("exists and is not a regular file", path)
    parent = path.parent
    if not parent.exists():
        anc = _existing_ancestor(parent)
        if anc.exists() and not anc.is_dir():
            raise JitsimError(f"cannot write: {anc} is a file, not a directory", path)
        raise JitsimError("cannot write: the output directory does not exist", path)
    if not parent.is_dir():
        raise JitsimError(f"cannot write: {parent} is not a directory", path)
    _probe(parent, path, "cannot write: the output directory is not writable")
    return path


def _probe(directory: Path, path: Path, problem: str) -> None:
    """Create and remove a temporary file in ``directory`` (permissions alone do not tell:
    root may write anywhere but /proc, a read-only mount refuses everyone)."""
    try:
        fd, tmp = tempfile.mkstemp(prefix=".jitsim-probe.", dir=directory)
    except OSError as e:
        raise JitsimError(f"{problem} ({e.strerror})", path) from None
    os.close(fd)
    os.unlink(tmp)


def _existing_ancestor(path: Path) -> Path:
    p = path.absolute()
    while not p.exists() and p != p.parent:
        p = p.parent
    return p


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and a rename: never a half-written
    file. The file gets the usual permissions (0666 minus the umask), not mkstemp's 0600.
    Any failure is one :class:`JitsimError` naming ``path``."""
    path = Path(path)
    check_output(path)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    except OSError as e:
        raise JitsimError(f"cannot write: {e.strerror}", path) from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise JitsimError(f"cannot write: {e.strerror or e}", path) from None
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def wrote_line(path, what: str = "") -> str:
    """The line every command that writes a file or directory says it with (on stderr):
    ``wrote PATH`` and, in parentheses, what it holds."""
    return f"wrote {path}" + (f" ({what})" if what else "")
