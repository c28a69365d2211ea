"""A fuzz campaign's programs depend on its seed alone.

Hypothesis mixes literals from already-imported "local" modules into its draws; without
``same_draws_everywhere`` the same ``--seed`` drew other programs once the caller had imported
a module full of literals (found when a reproducer script drew a different example 69 than the
campaign). Here fresh processes draw the same seed: one importing only the fuzz module, one
importing jitsim's passes first (local modules in an editable install, as in CI), one importing a
module of literals from the working directory.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

DRAW = textwrap.dedent("""
    import hashlib, sys
    sys.path.insert(0, sys.argv[1])
    if sys.argv[2] == "literals":
        import lots_of_literals  # noqa: F401
    if sys.argv[2] == "passes":
        import jitsim.passes.encapsulate, jitsim.passes.mark_for_compilation  # noqa: F401,E401
    from jitsim.crosscheck.fuzz.examples import draw_examples
    exs = draw_examples(60, 11, profile="no-grappler")
    print(hashlib.sha256("".join(e.source() + e.flags for e in exs).encode()).hexdigest())
""")


def test_seeded_draws_ignore_what_the_process_imported(tmp_path):
    lines = [f"A{i} = {i * 7919 % 100003}" for i in range(400)]
    lines += [f"S{i} = {('s' + str(i * 31)) * 2!r}" for i in range(200)]
    lines += [f"F{i} = {i / 7.0!r}" for i in range(200)]
    (tmp_path / "lots_of_literals.py").write_text("\n".join(lines) + "\n")

    def draw(first: str) -> str:
        out = subprocess.run([sys.executable, "-c", DRAW, str(tmp_path), first],
                             capture_output=True, text=True, check=True, cwd=tmp_path)
        return out.stdout.strip()

    plain = draw("nothing")
    assert len(plain) == 64
    assert draw("passes") == plain
    assert draw("literals") == plain
