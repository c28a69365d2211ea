#!/usr/bin/env python3
"""Point old references to the out-of-repo spec notes at docs/tf-passes.md.

    python docs/tools/rewrite_spec_refs.py            # rewrite in place, list changed files
    python docs/tools/rewrite_spec_refs.py --check    # exit 1 if anything would change

Old forms ("spec 7.5", "spec section 12", "spec §4", "spec trap 16", "spec Appendix B",
"experiment V23", a bare "(V12)", "(trap 34)", "§8" in docs) become the one short form
docs/tf-passes.md defines: ``tf-passes §7.5``, ``tf-passes trap 16``, ``tf-passes V23``,
``tf-passes Appendix B``. A list after one prefix stays a list ("tf-passes §9, §7.5 rule 6,
V11"). In Markdown files each reference also becomes a link to its anchor. The rewrite is a
pure text transformation and idempotent: running it twice changes nothing the second time, so
it can be re-run after merging other branches. tests/test_doc_refs.py uses the same grammar.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "tf-passes.md"
SCAN_DIRS = ("src", "tests", "docs", "benchmarks", "fixtures")
SUFFIXES = (".py", ".md", ".txt")
# files that hold the grammar or the account itself (their examples are not references)
SKIP = {DOC, Path(__file__).resolve(), ROOT / "tests" / "test_doc_refs.py"}

# -- the reference grammar ------------------------------------------------------------------------
SECTION = r"§\d+(?:\.\d+)*(?:\s+(?:rules?|filters?|steps?|phases?|table)(?:\s+\d+(?:,\s*\d+(?![.\d]))*)?)?"
ITEM = rf"(?:{SECTION}|traps?\s+\d+|V\d+\b|Appendix\s+[A-D]\b)"
SEP = r"(?:\s*[,;/]\s*|\s+and\s+)"
GROUP_RE = re.compile(rf"tf-passes\s+{ITEM}(?:{SEP}{ITEM})*")
ITEM_RE = re.compile(ITEM)
# anything that looks like a reference; outside a GROUP it is stale
TOKEN_RE = re.compile(r"§\d+(?:\.\d+)*|\btraps?\s+\d+|(?<![\w/`.\-])V\d+\b|\bAppendix\s+[A-D]\b")
ANCHOR_RE = re.compile(r'<a id="([^"]+)"></a>')
LINK_RE = re.compile(r"\]\(tf-passes\.md#([^)\s]+)\)")


def anchor_of(item: str) -> str:
    """The anchor id in docs/tf-passes.md that one reference item points to."""
    item = " ".join(item.split())
    if item.startswith("§"):
        return "s" + re.match(r"§(\d+(?:\.\d+)*)", item).group(1)
    m = re.match(r"traps?\s+(\d+)", item)
    if m:
        return f"trap-{m.group(1)}"
    if item.startswith("V"):
        return "v" + item[1:]
    return "appendix-" + item.split()[-1].lower()


def doc_anchors(doc_text: str | None = None) -> set[str]:
    return set(ANCHOR_RE.findall(doc_text if doc_text is not None else DOC.read_text()))


# -- old forms -> new ---------------------------------------------------------------------------
LITERAL = [
    ("``spec`` refers to ``shared/spec/tf_jit_passes.md``", "``tf-passes`` refers to ``docs/tf-passes.md``"),
    ("``spec`` is ``shared/spec/tf_jit_passes.md``", "``tf-passes`` is ``docs/tf-passes.md``"),
    ("## Where TF 2.21 differs from our spec (`../shared/spec/tf_jit_passes.md`)",
     "## Where TF 2.21 differs from newer TF sources (see tf-passes §17)"),
    ("are not in the spec;", "are not a table in TF's source;"),
    ("the spec (7.6) lists", "tf-passes §7.6 lists"),
]
REGEX = [
    (re.compile(r"\bspec(\s+)(?:section\s+)?§?(\d+(?:\.\d+)*)\b"), r"tf-passes\1§\2"),
    (re.compile(r"\bspec(\s+)(traps?|Appendix)\b"), r"tf-passes\1\2"),
    (re.compile(r"\bexperiment (V\d+)\b"), r"\1"),
]
# "§9, 7.5 rule 6" / "§2.1/2.3": a decimal section number continuing a list gets its §
CONTINUATION = re.compile(rf"({SECTION})(/|,\s+)(\d+\.\d+(?:\.\d+)*)\b")


def _in_spans(pos: int, spans) -> bool:
    return any(a <= pos < b for a, b in spans)


def _prefix_stray_tokens(text: str, v_numbers: set[str]) -> str:
    """Give every reference token outside a tf-passes group its own ``tf-passes`` prefix."""
    while True:
        spans = [m.span() for m in GROUP_RE.finditer(text)]
        for m in TOKEN_RE.finditer(text):
            tok = m.group(0)
            if _in_spans(m.start(), spans):
                continue
            if tok.startswith("V") and tok not in v_numbers:
                continue  # not an experiment number (and not ours to judge)
            text = text[:m.start()] + "tf-passes " + text[m.start():]
            break
        else:
            return text


def _link_markdown(text: str) -> str:
    """In Markdown, every reference item becomes ``[tf-passes X](tf-passes.md#anchor)``."""
    out, last = [], 0
    for g in GROUP_RE.finditer(text):
        if g.start() > 0 and text[g.start() - 1] == "[":
            continue  # already a link
        body = g.group(0)[len("tf-passes"):].lstrip()
        pieces, pos = [], 0
        for it in ITEM_RE.finditer(body):
            pieces.append(body[pos:it.start()])
            pieces.append(f"[tf-passes {it.group(0)}](tf-passes.md#{anchor_of(it.group(0))})")
            pos = it.end()
        pieces.append(body[pos:])
        out.append(text[last:g.start()])
        out.append("".join(pieces))
        last = g.end()
    out.append(text[last:])
    return "".join(out)


def rewrite(text: str, markdown: bool = False, v_numbers: set[str] | None = None) -> str:
    if v_numbers is None:
        v_numbers = {"V" + a[1:] for a in doc_anchors() if re.fullmatch(r"v\d+", a)}
    for old, new in LITERAL:
        text = text.replace(old, new)
    for pat, rep in REGEX:
        text = pat.sub(rep, text)
    while True:
        new = CONTINUATION.sub(r"\1\2§\3", text)
        if new == text:
            break
        text = new
    text = _prefix_stray_tokens(text, v_numbers)
    if markdown:
        text = _link_markdown(text)
    return text


def files(root: Path = ROOT):
    for d in SCAN_DIRS:
        for p in sorted((root / d).rglob("*")):
            if p.is_file() and p.suffix in SUFFIXES and p.resolve() not in SKIP:
                yield p


def main(argv: list[str]) -> int:
    check = "--check" in argv
    v_numbers = {"V" + a[1:] for a in doc_anchors() if re.fullmatch(r"v\d+", a)}
    changed = []
    for p in files():
        try:
            text = p.read_text()
        except UnicodeDecodeError:
            continue
        new = rewrite(text, p.suffix == ".md", v_numbers)
        if new != text:
            changed.append(p.relative_to(ROOT))
            if not check:
                p.write_text(new)
    for c in changed:
        print(c)
    return 1 if check and changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
