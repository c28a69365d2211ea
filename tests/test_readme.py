"""The README's shown command outputs are what the commands print today.

Every fenced block starting with ``$ jitsim ...`` is run (in-process, 100 columns) and its
lines must appear in the output in order; a line ``...`` in the README stands for any number
of lines.
"""

import re
import shlex
from pathlib import Path

import pytest

from jitsim.cli import main

ROOT = Path(__file__).resolve().parents[1]
BLOCKS = re.findall(r"```\n\$ (jitsim [^\n]*)\n(.*?)```", (ROOT / "README.md").read_text(), re.S)


def matches(expected: list[str], actual: list[str]) -> bool:
    i = 0
    for k, line in enumerate(expected):
        if line == "...":
            rest = expected[k + 1:]
            if not rest:
                return True
            return any(matches(rest, actual[j:]) for j in range(i, len(actual)))
        if i >= len(actual) or actual[i].rstrip() != line.rstrip():
            return False
        i += 1
    return i == len(actual)


def test_readme_shows_the_commands():
    cmds = [c.split()[1] for c, _ in BLOCKS]
    assert {"cluster", "explain", "whatif"} <= set(cmds) and cmds.count("explain") >= 2


@pytest.mark.parametrize("cmd,shown", BLOCKS, ids=[c[:60] for c, _ in BLOCKS])
def test_readme_output_is_current(cmd, shown, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("COLUMNS", "100")
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    assert main(shlex.split(cmd)[1:]) == 0
    out = capsys.readouterr().out.splitlines()
    assert matches(shown.rstrip("\n").splitlines(), out), "\n".join(out)


def test_matcher_is_strict():
    assert matches(["a", "...", "d"], ["a", "b", "c", "d"])
    assert not matches(["a", "d"], ["a", "b", "d"])
    assert not matches(["a", "...", "e"], ["a", "b", "d"])
    assert matches(["a", "..."], ["a", "b"])


def test_first_command_is_the_light_install():
    """Issue 22 item 16: the newcomer's first command installs jitsim without extras (no
    TensorFlow: a few hundred MB, not 3 GB) and still runs the main job on a shipped graph."""
    import tomllib

    first = re.search(r"```sh\n([^\n]*)\n([^\n]*)\n```", (ROOT / "README.md").read_text()).group(1)
    install, run = first.split(" && ")
    assert install == "python3 -m pip install -e ."
    assert run.startswith("jitsim cluster examples/") and (ROOT / run.split()[2]).is_file()
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert not [d for d in deps if re.match(r"(tensorflow|tf-|keras|xprof|torch|jax)", d)], deps
