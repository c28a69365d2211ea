"""What a harvest target is (a program, a GraphDef, a SavedModel, a .keras file, a function
bundle), decided from the file system alone: what every command that takes a target asks first,
without importing the harvest machinery (:mod:`jitsim.tfprocess.harvest` runs TF)."""

from __future__ import annotations

import os
from pathlib import Path

from jitsim.errors import HarvestError
from jitsim.files.input import is_regular_file, kind_of_mode
from jitsim.graph.io import assume_once, is_saved_model_dir, keras_archive_problem, missing_reason

__all__ = ["FUNCTION_BUNDLE", "target_kind"]

# the file a function bundle directory (a live TF function, saved for a harvest) is known by
FUNCTION_BUNDLE = "function.json"


def target_kind(target: Path) -> str:
    """``saved_model``, ``function`` (a bundle directory), ``program`` (.py), ``keras`` (by name
    or by content) or ``graphdef``; :class:`~jitsim.errors.HarvestError` for what is none of
    them (a directory of another kind, a missing path, a FIFO)."""
    if target.is_dir():
        if is_saved_model_dir(target):
            return "saved_model"
        if (target / FUNCTION_BUNDLE).exists():
            return "function"
        raise HarvestError("is a directory but not a SavedModel", target)
    if not target.exists():
        raise HarvestError(missing_reason(target), target)
    if not is_regular_file(target):  # TF would read a FIFO or /dev/zero forever
        raise HarvestError(f"is {kind_of_mode(os.stat(target).st_mode)}, not a regular file; give a program, "
                           "GraphDef, .keras file or SavedModel directory", target)
    if target.suffix == ".py":
        return "program"
    if target.suffix == ".keras":
        problem = keras_archive_problem(target)
        if problem is not None:
            raise HarvestError(problem, target)
        return "keras"
    if target.is_file() and keras_archive_problem(target) is None:
        assume_once("read as a .keras file: its content is a Keras archive (a zip with config.json and "
                    "metadata.json)", target)
        return "keras"
    return "graphdef"
