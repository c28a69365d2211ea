"""The command line stays thin (docs/architecture.md): a package of command modules that parse,
call the library's front door and format; none imports the passes, and no command function
grows past 60 lines."""

import ast
from pathlib import Path

import jitsim.cli.parser as parser

CLI = Path(parser.__file__).parent
MAX_COMMAND_LINES = 60


def _modules():
    return {f.stem: ast.parse(f.read_text()) for f in sorted(CLI.glob("*.py"))}


def test_the_cli_imports_nothing_from_the_passes():
    wrong = []
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("jitsim.passes"):
                wrong.append(f"{name}.py:{node.lineno}: from {node.module}")
            if isinstance(node, ast.Import):
                wrong += [f"{name}.py:{node.lineno}: import {a.name}" for a in node.names
                          if a.name.startswith("jitsim.passes")]
    assert not wrong, "\n".join(wrong)


def test_no_command_function_is_long():
    long = []
    for name, tree in _modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.startswith("cmd_"):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_COMMAND_LINES:
                    long.append(f"{name}.py: {node.name} has {n} lines")
    assert not long, "\n".join(long)


def test_each_command_has_a_module_that_adds_its_parser():
    """build_parser(command) imports only the command's module; each module's add_parser adds
    the command (and nothing builds a parser the line does not name)."""
    mods = _modules()
    for command in parser.COMMANDS:
        module = parser.MODULE_OF[command]
        assert any(isinstance(n, ast.FunctionDef) and n.name == "add_parser" for n in mods[module].body), module
        p = parser.build_parser(command)
        sub = next(a for a in p._actions if a.dest == "command")
        assert list(sub.choices) == [command]
