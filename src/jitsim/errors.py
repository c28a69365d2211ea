"""Errors jitsim reports to users as one clear line (no traceback)."""

from __future__ import annotations


class _MessageAboutPath:
    """One line about one file: ``<path>: <message>`` (just the message without a path)."""

    def __init__(self, message: str, path: object | None = None):
        super().__init__(message)
        self.message = message
        self.path = None if path is None else str(path)

    def __str__(self) -> str:
        return f"{_short_path(self.path)}: {self.message}" if self.path else self.message


def _short_path(path: str, keep: int = 120) -> str:
    """A path of more than a few hundred characters (one that is too long for the system, say)
    with its middle left out, so that the message stays readable on one line."""
    if len(path) <= 3 * keep:
        return path
    return f"{path[:keep]}...({len(path) - 2 * keep} characters)...{path[-keep:]}"


class JitsimError(_MessageAboutPath, Exception):
    """A problem with the user's input or environment.

    The CLI prints ``jitsim: <path>: <message>`` on stderr and exits non-zero.
    ``path`` names the file or directory concerned, when there is one.
    """

    exit_code = 2


class GraphError(JitsimError):
    """The graph is unreadable or invalid (truncated, malformed, dangling input, cycle...)."""


class HarvestError(JitsimError):
    """Running real TensorFlow to collect ground truth failed."""


class StorageError(JitsimError):
    """A directory jitsim writes (the capture cache, a harvest's output, the temporary directory
    TF's run works in) could not take its files: no space left, a quota, a file size limit, a
    read-only file system, no permission. ``path`` is that directory. Not a
    :class:`HarvestError`: TF did not fail on the call, so the TF route never falls back to
    predicting without TF over it. ``problem``: the system's words (``no space left on
    device``); ``what``: what could not be written there and what to do."""

    def __init__(self, problem: str, what: str, path: object):
        super().__init__(f"{problem}: {what}", path)
        self.problem = problem


class JitsimWarning(_MessageAboutPath, UserWarning):
    """What jitsim assumed to accept an odd input (TF would accept it too). The CLI prints it
    as one ``jitsim: <path>: note: <message>`` line on stderr."""
