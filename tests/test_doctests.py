"""The examples in jitsim's docstrings run as written (doctest), so the module documentation
cannot drift from the code. Paths in the examples are relative to the repository root."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from pathlib import Path

import pytest

import jitsim

ROOT = Path(__file__).resolve().parents[1]


def _modules_with_examples() -> list[str]:
    out = []
    for info in pkgutil.walk_packages(jitsim.__path__, "jitsim."):
        path = Path(jitsim.__path__[0]).joinpath(*info.name.split(".")[1:])
        src = path / "__init__.py" if info.ispkg else path.with_suffix(".py")
        if src.is_file() and ">>> " in src.read_text():
            out.append(info.name)
    return out


MODULES = _modules_with_examples()


def test_the_scan_finds_the_examples():
    assert {"jitsim.explain.clustering", "jitsim.graph.textproto", "jitsim.registry.versions"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE, verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name} (run: python -m pytest --doctest-modules {module.__file__})"
