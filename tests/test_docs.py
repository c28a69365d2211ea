"""Documentation generated from code must not drift from it."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _tool(name: str):
    spec = importlib.util.spec_from_file_location(f"docs_tools_{name}", ROOT / "docs" / "tools" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_reason_catalogue_doc_is_current():
    """docs/reasons.md is what docs/tools/reasons_md.py makes of the catalogue and the examples."""
    assert (ROOT / "docs" / "reasons.md").read_text() == _tool("reasons_md").reasons_markdown()


def test_readme_python_example_runs(monkeypatch):
    """The README's Python API example runs as written and says what it claims."""
    import re

    code = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)[0]
    monkeypatch.chdir(ROOT)
    ns: dict = {}
    exec(compile(code, "README.md", "exec"), ns)
    assert ns["res"].decisions["add"].code == "UNSUPPORTED_OP"
    assert set(ns["res"].clusters) == {f"cluster_{i}" for i in range(5)}
