"""The optional C extensions, in one place.

``setup.py`` builds small C modules where a C compiler is found: ``graph._fasttext``
(reading and writing text GraphDefs) and ``analyses._fastcycles`` (GraphCycles' bulk edge
insertion). Each is the C form of Python code that stays the reference (the tests run both and
compare), so jitsim gives the same answers without them, only slower on big graphs. The third,
``_memguard``, has no Python form: the command line uses it to end with its out-of-memory line
where protobuf's C code fails to allocate (without it: SIGSEGV, issue 39).

``JITSIM_PURE_PYTHON=1`` turns them off (to compare, or to rule them out).

>>> load("jitsim.no_such_extension") is None
True
"""

from __future__ import annotations

import importlib
import os

__all__ = ["load", "disabled"]


def disabled() -> bool:
    """Whether ``$JITSIM_PURE_PYTHON`` asks for the pure-Python code."""
    return os.environ.get("JITSIM_PURE_PYTHON", "") not in ("", "0")


def load(name: str):
    """The extension module ``name``, or None when it is not built here or turned off."""
    if disabled():
        return None
    try:
        return importlib.import_module(name)
    except ImportError:
        return None
