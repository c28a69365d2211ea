"""Documentation generated from code must not drift from it."""

from pathlib import Path

from jitsim.explain.reasons import REASONS, catalogue_markdown

ROOT = Path(__file__).resolve().parents[1]


def test_reason_catalogue_doc_is_current():
    assert (ROOT / "docs" / "reasons.md").read_text() == catalogue_markdown()


def test_every_code_recorded_by_the_passes_is_catalogued():
    """Scan the places that record decisions: decide(...), _refuse(...), NodeDecision(...)
    and the (code, detail, path) failures returned by the compilability checker."""
    import re

    src = "".join(p.read_text() for d in ("passes", "analyses", "rewrites")
                  for p in (ROOT / "src" / "jitsim" / d).rglob("*.py"))
    patterns = [r'decide\(\w+, "([A-Z_]+)"', r'_refuse\(phase, a, b, "([A-Z_]+)"',
                r'NodeDecision\("([A-Z_]+)"', r'return "([A-Z_]+)", ']
    used = {c for pat in patterns for c in re.findall(pat, src)}
    assert len(used) > 30
    assert used <= set(REASONS), used - set(REASONS)


def test_readme_python_example_runs(monkeypatch):
    """The README's Python API example runs as written and says what it claims."""
    import re

    code = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)[0]
    monkeypatch.chdir(ROOT)
    ns: dict = {}
    exec(compile(code, "README.md", "exec"), ns)
    assert ns["res"].decisions["add"].code == "UNSUPPORTED_OP"
    assert set(ns["res"].clusters) == {f"cluster_{i}" for i in range(5)}
