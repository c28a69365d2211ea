"""TF's op categories are spelled once (jitsim.opsets): no other module of jitsim writes a set
(or tuple) of op names that equals one of them, or another module's."""

import ast
from pathlib import Path

import jitsim.opsets as opsets

SRC = Path(opsets.__file__).parent


def _op_name_literals(tree):
    """(line, frozenset of names) for every set/tuple/list literal of two or more strings that
    look like op names: CamelCase, or an underscore and CamelCase (``_Arg``), letters and digits
    only (not ``CPU``, ``SIGINT``, ``_class``)."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.Set, ast.Tuple, ast.List)) and len(node.elts) >= 2:
            vals = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
            if len(vals) == len(node.elts) and all(_op_like(v) for v in vals):
                yield node.lineno, frozenset(vals)


def _op_like(name: str) -> bool:
    core = name[1:] if name.startswith("_") else name
    return core[:1].isupper() and not core.isupper() and core.isalnum()


def test_no_op_category_is_spelled_twice():
    catalogue = {v: k for k, v in vars(opsets).items() if isinstance(v, frozenset)}
    seen: dict[frozenset, str] = {}
    repeats = []
    for f in sorted(SRC.rglob("*.py")):
        if f == Path(opsets.__file__):
            continue
        for line, names in _op_name_literals(ast.parse(f.read_text())):
            where = f"{f.relative_to(SRC)}:{line}"
            if names in catalogue:
                repeats.append(f"{where} spells jitsim.opsets.{catalogue[names]}")
            elif names in seen:
                repeats.append(f"{where} spells the set of {seen[names]}")
            seen.setdefault(names, where)
    assert not repeats, "\n".join(repeats)


def test_the_scan_finds_a_respelled_category():
    """The check above is not vacuous: a module that wrote TF's switch ops again is found."""
    tree = ast.parse('X = frozenset({"Switch", "RefSwitch", "_SwitchN"})\nY = ("a", "b")\n')
    assert [names for _, names in _op_name_literals(tree)] == [opsets.SWITCH_OPS]
