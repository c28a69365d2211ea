"""References to docs/tf-passes.md resolve inside the repository.

Code, tests and docs cite jitsim's account of TF's passes as ``tf-passes §7.5``,
``tf-passes trap 12``, ``tf-passes V14`` or ``tf-passes Appendix B`` (a list may follow one
prefix: ``tf-passes §9, §7.5 rule 6, V11``). These tests check that every such reference names
an anchor that exists in docs/tf-passes.md, that no reference is left in an older form (a bare
"§8", "spec 7.5", "trap 34" without the prefix), and that nothing points at the spec notes that
used to live outside the repository.
"""

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "tf-passes.md"


def _tool():
    spec = importlib.util.spec_from_file_location("rewrite_spec_refs", ROOT / "docs" / "tools" / "rewrite_spec_refs.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


TOOL = _tool()
ANCHORS = TOOL.doc_anchors()
FILES = [p for p in TOOL.files() if p.parent.name != "tools" or p.parent.parent.name != "docs"]
SCOPE = ("src", "tests", "docs")


def _text(p: Path) -> str | None:
    try:
        return p.read_text()
    except UnicodeDecodeError:
        return None


def _where(p: Path, text: str, pos: int) -> str:
    return f"{p.relative_to(ROOT)}:{text.count(chr(10), 0, pos) + 1}"


def test_the_account_has_the_sections_traps_and_experiments_the_code_cites():
    """The anchors are explicit and complete: sections of every pass, traps 1-38, V1-V26 (V25
    included), appendices A-D."""
    for sec in ("s1.2", "s2.1", "s2.2", "s2.3", "s3.1", "s3.4", "s3.5", "s3.7", "s4", "s5", "s6",
                "s7.1", "s7.3", "s7.3.1", "s7.4", "s7.5", "s7.6", "s8", "s9", "s10", "s11", "s12.1",
                "s12.2", "s12.3", "s14.4", "s15"):
        assert sec in ANCHORS, sec
    assert {f"trap-{i}" for i in range(1, 39)} <= ANCHORS
    assert {f"v{i}" for i in range(1, 27)} <= ANCHORS
    assert {f"appendix-{c}" for c in "abcd"} <= ANCHORS
    # every anchor is declared once
    ids = TOOL.ANCHOR_RE.findall(DOC.read_text())
    assert len(ids) == len(set(ids))


def test_every_reference_resolves_to_an_anchor():
    refs, missing = 0, []
    for p in FILES:
        text = _text(p)
        if text is None:
            continue
        for g in TOOL.GROUP_RE.finditer(text):
            for it in TOOL.ITEM_RE.finditer(g.group(0)[len("tf-passes"):]):
                refs += 1
                if TOOL.anchor_of(it.group(0)) not in ANCHORS:
                    missing.append(f"{_where(p, text, g.start())}: {it.group(0)!r}")
        for m in TOOL.LINK_RE.finditer(text):
            refs += 1
            if m.group(1) not in ANCHORS:
                missing.append(f"{_where(p, text, m.start())}: link #{m.group(1)}")
    assert not missing, "\n".join(missing)
    assert refs > 90  # the code and tests cite the account throughout


def test_internal_links_of_the_account_resolve():
    text = DOC.read_text()
    bad = [a for a in re.findall(r"\]\(#([^)]+)\)", text) if a not in ANCHORS]
    assert not bad


def test_no_reference_in_an_old_or_unprefixed_form():
    """Every §N, trap N, VN (an experiment number) and Appendix X sits in a ``tf-passes`` group,
    and no "spec 7.5"-style reference is left; the rewrite tool has nothing left to do."""
    v_numbers = {"V" + a[1:] for a in ANCHORS if re.fullmatch(r"v\d+", a)}
    stray = []
    for p in FILES:
        if p.relative_to(ROOT).parts[0] not in SCOPE:
            continue
        text = _text(p)
        if text is None:
            continue
        spans = [m.span() for m in TOOL.GROUP_RE.finditer(text)]
        for m in TOOL.TOKEN_RE.finditer(text):
            if m.group(0).startswith("V") and m.group(0) not in v_numbers:
                continue
            if not any(a <= m.start() < b for a, b in spans):
                stray.append(f"{_where(p, text, m.start())}: {m.group(0)!r}")
        for m in re.finditer(r"\bspec\s+(?:section\s+|§|trap|Appendix|\d)", text):
            stray.append(f"{_where(p, text, m.start())}: {m.group(0)!r}")
        if TOOL.rewrite(text, p.suffix == ".md", v_numbers) != text:
            stray.append(f"{p.relative_to(ROOT)}: docs/tools/rewrite_spec_refs.py would change it")
    assert not stray, "\n".join(stray)


@pytest.mark.parametrize("needle", ["shared/" + "spec", "../" + "shared", "tf_jit_" + "passes"])
def test_nothing_points_outside_the_repository(needle):
    hits = []
    for p in FILES:
        if p.relative_to(ROOT).parts[0] not in SCOPE:
            continue
        text = _text(p)
        if text is not None and needle in text:
            hits.append(f"{_where(p, text, text.index(needle))}")
    assert not hits, hits


def test_the_account_is_linked_from_the_architecture_page_and_the_readme():
    assert "](tf-passes.md)" in (ROOT / "docs" / "architecture.md").read_text()
    assert "](docs/tf-passes.md)" in (ROOT / "README.md").read_text()


def test_rewrite_tool_converts_the_old_forms_and_is_idempotent():
    """Hand-written old-style references (the forms found in the code before the account moved
    into the repository) and what they must become."""
    v = {f"V{i}" for i in range(1, 27)}
    cases = [
        ("(spec 9, 7.5 rule 6, V11)", "(tf-passes §9, §7.5 rule 6, V11)"),
        ("(spec\n    7.5 phase 1)", "(tf-passes\n    §7.5 phase 1)"),
        ("(spec 2.1/2.3,\n    V4)", "(tf-passes §2.1/§2.3,\n    V4)"),
        ("spec section 3.1.", "tf-passes §3.1."),
        ("(spec trap 16, V16)", "(tf-passes trap 16, V16)"),
        ("# spec Appendix B / experiment V23: 489", "# tf-passes Appendix B / V23: 489"),
        ("no part here (trap 34)", "no part here (tf-passes trap 34)"),
        ("is ``*pred:0`` (V12).", "is ``*pred:0`` (tf-passes V12)."),
        ("(spec 7.3.1 rules 9, 11, 13; V16)", "(tf-passes §7.3.1 rules 9, 11, 13; V16)"),
        ("NonMaxSuppressionV3/V4 and ``V2``", "NonMaxSuppressionV3/V4 and ``V2``"),
        ("version V99 of", "version V99 of"),
    ]
    for old, new in cases:
        assert TOOL.rewrite(old, False, v) == new, old
        assert TOOL.rewrite(new, False, v) == new, new
    md = TOOL.rewrite("details (§8) and (Appendix D, V7)", True, v)
    assert md == ("details ([tf-passes §8](tf-passes.md#s8)) and "
                  "([tf-passes Appendix D](tf-passes.md#appendix-d), [tf-passes V7](tf-passes.md#v7))")
    assert TOOL.rewrite(md, True, v) == md


def _corpus_runs() -> list[str]:
    return re.findall(r'^name = "([^"]+)"', (ROOT / "fixtures" / "manifest.toml").read_text(), re.M)


def test_what_the_account_names_in_jitsim_exists():
    """The account points at jitsim's modules, tests, registry data and corpus fixtures; every
    one of them must exist, so the pointers cannot rot silently."""
    import fnmatch

    text = DOC.read_text()
    src = ROOT / "src" / "jitsim"
    missing = []
    for rel in set(re.findall(r"`((?:passes|registry|crosscheck|explain|graph|frontend|profile|testing)/[\w/<>.-]+)`", text)):
        path = rel.replace("<release>", "2.21")
        if not (src / path).exists():
            missing.append(rel)
    for rel in set(re.findall(r"`((?:tests|fixtures)/[\w/.-]+)`", text)):
        if not (ROOT / rel).exists():
            missing.append(rel)
    tests_src = "".join(p.read_text() for p in (ROOT / "tests").glob("test_*.py"))
    for name in set(re.findall(r"`(?:tests/\w+\.py::)?(test_\w+?)\*?`", text)):
        if f"def {name}" not in tests_src:
            missing.append(name)
    runs = _corpus_runs()
    for chunk in re.findall(r"[Ff]ixtures?:?\s+((?:`[\w*]+`(?:,?\s*(?:and\s+)?|\s*\(against\s+))+)", text):
        for pat in re.findall(r"`([\w*]+)`", chunk):
            if not fnmatch.filter(runs, pat):
                missing.append(f"fixture {pat}")
    assert not missing, missing
