"""TF's attribute, op and dump-stage names are spelled once, in jitsim.defs (issue 23: like TF's defs.h).

Every string literal in src/jitsim equal to one of those names, and every literal that quotes
one (``'key: "_XlaCluster"'``, a pattern over TF's text format), must use the constant instead;
text that mentions a name (messages, docstrings) is fine.
"""

import ast
from pathlib import Path

from jitsim import defs

SRC = Path(__file__).resolve().parents[1] / "src" / "jitsim"
NAMES = {v for k, v in vars(defs).items() if k.isupper() and isinstance(v, str)}


def test_defs_names_are_tf_names():
    assert defs.CLUSTER_ATTR == "_XlaCluster" and defs.MUST_COMPILE_ATTR == "_XlaMustCompile"
    assert "_XlaCompile" in NAMES and len(NAMES) >= 18


def test_dump_stages_are_tf_names_in_pipeline_order():
    """The names TF's passes give their dumps, in the order one graph's trip writes them
    (graph/dumps.py groups a dump directory by this order)."""
    assert defs.DUMP_STAGES == (
        "before_clone_constants_for_better_clustering", "after_clone_constants_for_better_clustering",
        "before_mark_for_compilation", "mark_for_compilation", "mark_for_compilation_annotated",
        "before_increase_dynamism_for_auto_jit_pass", "encapsulate_subgraphs_before",
        "encapsulate_subgraphs_after", "build_xla_ops")
    assert set(defs.DUMP_STAGES) <= NAMES
    assert {v for k, v in vars(defs).items() if k.endswith("_DUMP")} == set(defs.DUMP_STAGES)


def test_each_name_is_spelled_only_in_defs():
    spelled = []
    for p in sorted(SRC.rglob("*.py")):
        if p.name == "defs.py":
            continue
        for n in ast.walk(ast.parse(p.read_text())):
            if not isinstance(n, ast.Constant) or not isinstance(n.value, (str, bytes)):
                continue
            text = n.value.decode("latin-1") if isinstance(n.value, bytes) else n.value
            if text in NAMES or any(f'"{name}"' in text for name in NAMES):
                spelled.append(f"{p.relative_to(SRC)}:{n.lineno}: {n.value!r}")
    assert not spelled, "use jitsim.defs' constant instead of:\n" + "\n".join(spelled)


def test_defs_imports_nothing():
    """Every package may import jitsim.defs: it must depend on nothing."""
    tree = ast.parse((SRC / "defs.py").read_text())
    assert not [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
