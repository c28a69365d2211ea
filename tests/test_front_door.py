"""One front door (jitsim.simulation.simulate): TF's pass input, the release and the registries'
context are each entered from one place, so "what happens when I run jitsim?" has one answer."""

import ast
from pathlib import Path

import jitsim

SRC = Path(jitsim.__file__).parent


def _calls(name: str) -> list[str]:
    """``file:line`` of every call of a function named ``name`` in jitsim's source."""
    out = []
    for f in sorted(SRC.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Call):
                fn = node.func
                called = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) else None
                if called == name:
                    out.append(f"{f.relative_to(SRC)}:{node.lineno}")
    return out


def _files(calls: list[str]) -> set[str]:
    return {c.split(":")[0] for c in calls}


def test_pass_inputs_are_taken_by_the_front_door_only():
    assert _files(_calls("pass_inputs")) == {"simulation.py"}


def test_the_release_is_chosen_in_one_function():
    """registry.versions.choose_tf_version decides; the front door uses it for every simulation,
    crosscheck's verify for a harvest's graphs (scored against TF's dumps, not simulated
    through the front door)."""
    assert _files(_calls("choose_tf_version")) == {"simulation.py", "crosscheck/fidelity.py"}
    assert _files(_calls("check_releases")) == {"simulation.py"}


def test_the_registries_context_is_entered_by_one_function():
    """registry.simulating is the only way into the release's and op libraries' context (it
    enters nothing that is already active: once per simulation)."""
    assert _files(_calls("using_tf_version")) | _files(_calls("using_op_libraries")) <= {"registry/__init__.py"}


def test_entering_what_is_active_changes_nothing():
    from jitsim.registry import OpLibrary, current_tf_version, op_def, simulating

    lib = OpLibrary(op_defs={}, source="test")
    with simulating("2.16", (lib,)):
        assert current_tf_version() == "2.16"
        with simulating("2.16", (lib,)), simulating(None):
            assert current_tf_version() == "2.16"
        with simulating("2.21"):
            assert current_tf_version() == "2.21"
        assert current_tf_version() == "2.16" and op_def("AddV2") is not None
