"""Work run beside the caller's Python, in another thread, where that makes a command faster.

Python runs one thread's bytecode at a time, but C code that gives up the GIL runs on another
CPU meanwhile. jitsim has two such pieces of work (issue 25): the cycle graph's edge insertion
(``analyses/_fastcycles.c``), which runs while the mark pass looks for its candidates, and the
text printer (``graph/_fasttext.c``), which prints and writes ``cluster -o``'s graph while the
command builds its report. Each result is the one the same call gives in the caller's thread:
the work reads only what the caller leaves alone until it takes the result.

>>> job = Started(lambda: 6 * 7, thread=True)
>>> job.result()
42
>>> Started(lambda: 1 / 0, thread=True).result()
Traceback (most recent call last):
...
ZeroDivisionError: division by zero
"""

from __future__ import annotations

import os
from typing import Any, Callable

__all__ = ["Started", "several_cpus"]


def several_cpus() -> bool:
    """Whether this process may run on more than one CPU (a second thread's C work can then
    run beside the first thread's Python; on one CPU a thread would only add its start)."""
    try:
        return len(os.sched_getaffinity(0)) > 1
    except (AttributeError, OSError):  # (no sched_getaffinity: macOS, Windows)
        return (os.cpu_count() or 1) > 1


class Started:
    """``work()`` begun: in another thread with ``thread`` (a daemon: a process that ends early
    does not wait for it), else at once. :meth:`result` gives what it returned or raises what it
    raised, waiting for the thread; :meth:`wait` only waits."""

    __slots__ = ("_value", "_error", "_thread")

    def __init__(self, work: Callable[[], Any], *, thread: bool) -> None:
        self._value: Any = None
        self._error: BaseException | None = None
        self._thread = None
        if not thread:
            self._run(work)
            return
        import threading

        self._thread = threading.Thread(target=self._run, args=(work,), name="jitsim-beside", daemon=True)
        self._thread.start()

    def _run(self, work: Callable[[], Any]) -> None:
        try:
            self._value = work()
        except BaseException as e:  # handed on by result()
            self._error = e

    @property
    def in_thread(self) -> bool:
        """Whether another thread does the work (and has not been waited for yet)."""
        return self._thread is not None

    def wait(self) -> None:
        """Wait for the work to end, without taking its result (a caller that has no more use
        for it leaves nothing running)."""
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def result(self) -> Any:
        self.wait()
        if self._error is not None:
            error, self._error = self._error, None
            raise error
        return self._value
