"""``reproducers.load_example`` (docs/fuzzing.md: read a reproducer's program back, e.g. to shrink
it further): every committed fuzz fixture loads back as the example its files describe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from jitsim.crosscheck.fuzz.reproducers import load_example
from jitsim.testing.program import program_to_json, to_python

FIXTURES = sorted(p for p in (Path(__file__).resolve().parents[1] / "fixtures" / "fuzz").iterdir()
                  if (p / "program.json").exists())


@pytest.mark.parametrize("fx", FIXTURES, ids=lambda p: p.name)
def test_fixture_loads_back_as_its_example(fx):
    """The loaded example has config.json's id, flags, devices and Grappler setting and
    ``statements`` statements; its program is program.json's (round trip) and renders to the
    program of program.py (its first line is the title, which names the seed, not kept)."""
    config = json.loads((fx / "config.json").read_text())
    ex = load_example(fx)
    assert (ex.id, ex.flags, ex.devices, ex.grappler) == (config["example"], config["flags"],
                                                          config.get("devices", 1), config.get("grappler", True))
    assert ex.program.size() == config["statements"]
    assert program_to_json(ex.program) == json.loads((fx / "program.json").read_text())
    src = to_python(ex.program, flags=ex.flags, devices=ex.devices, grappler=ex.grappler, title="t")
    assert src.splitlines()[1:] == (fx / "program.py").read_text().splitlines()[1:]
