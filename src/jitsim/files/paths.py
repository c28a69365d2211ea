"""Why a path cannot be opened, in words: one wording for every input jitsim reads.

``os.stat`` says ``ENOENT`` for a dangling symbolic link and ``ELOOP`` for a link that leads
back to itself; users see "no such file" for a link they can list, or a loop taken for an
empty directory. :func:`missing_reason` names each case (graph files, SavedModel and dump
directories, capture targets all use it).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path


def missing_reason(path: Path | str) -> str:
    """Why ``path`` cannot be opened, in words: a symbolic link loop, a link to nothing, a
    part of the path that is a file, or plainly nothing there."""
    path = Path(path)
    try:
        path.stat()
    except FileNotFoundError:
        if path.is_symlink():
            try:
                return f"is a symbolic link to {os.readlink(path)!r}, which does not exist"
            except OSError:
                return "is a symbolic link to nothing"
        return "no such file or directory"
    except NotADirectoryError:
        return "no such file (a part of the path is a file, not a directory)"
    except OSError as e:
        if e.errno == errno.ELOOP:
            return "is a symbolic link loop (following its links leads back to it)"
        return f"cannot read: {e.strerror}"
    return "cannot read it"
