"""The ``jitsim`` command line. Thin: parsing and printing; the work is in the library.

Exit codes (docs/cli.md): 0 success (``compare``/``verify``/``diff``: identical), 1 differences
found, 2 bad input or usage (exactly one ``jitsim: ...`` line on stderr, no traceback, no output
file; also stdout that cannot be written), 129/130/143 ended by HUP/INT/TERM (temporary files
removed), 141 the reader of stdout went away, 3 an internal error (a bug: one line, JITSIM_DEBUG=1 for
the traceback). Notes on what jitsim assumed to accept an odd input go to stderr after a
successful run. Every ``-o`` is checked before any work (:func:`_check_outputs`) and said in one
``wrote PATH (...)`` line (:func:`_wrote`); every ``--*tf-xla-flags`` option follows one rule
(:func:`_flags_choice`); ``--format``/``--timings`` have one definition for every command
(:func:`_output_args`) and JSON is written by one function (:func:`_emit_json`, docs/json.md).

The package: :mod:`~jitsim.cli.app` (``main``: parse, check, run, exit codes),
:mod:`~jitsim.cli.parser` (every command's parser), :mod:`~jitsim.cli.arguments` (the options
shared by commands, each defined once), :mod:`~jitsim.cli.common` (flags, options, the call,
the simulation through :mod:`jitsim.simulation`), :mod:`~jitsim.cli.output` (progress,
console, JSON, ``wrote`` lines), and one module per command (``cluster``, ``explain``, ...),
each parsing nothing itself: it calls the library and formats.
"""

# what ``from jitsim.cli import X`` gives, loaded on first use (the package's __init__ imports
# nothing: its modules import each other, never the package)
_LAZY = {
    "main": "app", "entry": "app", "EXIT_INTERNAL": "app", "GC_OFF_COMMANDS": "app",
    "build_parser": "parser", "COMMANDS": "parser", "_leaf_parsers": "parser",
    "TIMING_KEYS": "output", "without_timings": "output", "_emit_json": "output",
    "_output_args": "arguments", "_ray_args": "arguments", "_sim_args": "arguments",
    "_options": "common",
}
__all__ = ["COMMANDS", "EXIT_INTERNAL", "GC_OFF_COMMANDS", "TIMING_KEYS", "build_parser", "entry", "main",
           "without_timings"]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(f"jitsim.cli.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'jitsim.cli' has no attribute {name!r}")
