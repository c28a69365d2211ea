"""The command line's parser: one ``add_parser`` per command module, in :data:`COMMANDS` order;
usage errors as one line (:class:`_Parser`); only the named command's parser is built.
"""

from __future__ import annotations

import argparse
import importlib

from jitsim import __version__

from jitsim.cli.arguments import _output_args
from jitsim.cli.output import _one_line


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line too (``jitsim: jitsim cluster: ...``), exit 2, like bad input.
    Options are never matched by a prefix (``--tf`` is not ``--tf-xla-flags``): every parser,
    subcommands' included, is made with ``allow_abbrev=False``."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("allow_abbrev", False)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        self.exit(2, f"jitsim: {_one_line(message)} (see {self.prog} --help)\n")



class _Skipped:
    """What :class:`_OneCommand` gives for a command not being run: takes every call (add_argument,
    set_defaults, nested add_subparsers...) and builds nothing."""

    def __getattr__(self, name):
        return self._take

    def __setattr__(self, name, value) -> None:
        pass

    def _take(self, *args, **kwargs):
        return self



class _OneCommand:
    """The top-level ``add_subparsers`` action, building only ``command``'s parser: a command
    line that names its command needs no other (19 parsers: 5 ms of every run)."""

    def __init__(self, sub, command: str) -> None:
        self._sub = sub
        self._command = command

    def add_parser(self, name: str, **kwargs):
        return self._sub.add_parser(name, **kwargs) if name == self._command else _Skipped()



# the top-level commands, in build_parser's order (a test checks them against it), and the
# module of each: its add_parser(sub) adds the command's parser (and its subcommands')
COMMANDS = ("show", "cluster", "rewrite", "explain", "whatif", "diff", "render", "report", "registry", "crosscheck",
            "profile", "runtime")



MODULE_OF = {command: command for command in COMMANDS} | {"report": "render"}


def _modules(command: str | None) -> list[str]:
    """The modules whose parsers ``build_parser(command)`` needs, in :data:`COMMANDS` order."""
    names = [command] if command is not None else COMMANDS
    return list(dict.fromkeys(MODULE_OF[c] for c in names))


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ``command`` (one of :data:`COMMANDS`), only that
    command's parser under it (what parsing a line that starts with it needs)."""
    p = _Parser(
        prog="jitsim",
        description="Predict and explain TensorFlow's XLA auto-clustering without running the model.",
    )
    p.add_argument("--version", action="version", version=f"jitsim {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    if command is not None:
        sub = _OneCommand(sub, command)

    for module in _modules(command):
        importlib.import_module(f"jitsim.cli.{module}").add_parser(sub)
    for leaf in _leaf_parsers(p):  # options that mean the same in every command: one definition each
        _output_args(leaf)
    return p



def _leaf_parsers(parser):
    """Every parser that runs a command (subcommands of subcommands included), in order."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield parser
        return
    for action in subs:
        for child in dict.fromkeys(action.choices.values()):
            yield from _leaf_parsers(child)
