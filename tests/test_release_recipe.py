"""docs/recipes.md, "Adding a TensorFlow release", walked without TensorFlow: step 2 (the
regenerator writes ``registry/data/tf-X.Y-*``) is played by copying the newest release's data
under a new name, in a copy of the package; then everything the recipe says follows the data
is checked, with no other file touched: the supported releases, the default (the newest final
release, never a release candidate), ``--tf-version``'s choices and help, the producer table
and the choice of a release from a graph's producer, the one-command report of what changed,
and a simulation under the new release."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import jitsim
from jitsim.registry import SUPPORTED_TF_VERSIONS

SRC = Path(jitsim.__file__).parent
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "mnist_softmax" / \
    "before_clone_constants_for_better_clustering.pbtxt"
NEWEST = SUPPORTED_TF_VERSIONS[-1]
major, minor = NEWEST.split(".")
NEW = f"{major}.{int(minor) + 1}"
NEW_PRODUCER = 9999  # a producer no shipped release writes


def _package_with_release(tmp_path, wheel_version: str) -> Path:
    """A copy of the jitsim package whose data holds one more release, NEW, made of NEWEST's
    files (what step 2 writes), ``release.json`` saying ``wheel_version`` and NEW_PRODUCER."""
    root = tmp_path / "src"
    shutil.copytree(SRC, root / "jitsim", ignore=shutil.ignore_patterns("__pycache__"))
    data = root / "jitsim" / "registry" / "data"
    for f in sorted(data.glob(f"tf-{NEWEST}-*")):
        if "changes-from" in f.name:
            continue
        target = data / f.name.replace(f"tf-{NEWEST}-", f"tf-{NEW}-")
        if f.name.endswith("release.json"):
            target.write_text(json.dumps({"graph_def_version": NEW_PRODUCER, "tf_version": wheel_version,
                                          "source": "tests/test_release_recipe.py"}, indent=1) + "\n")
        else:
            shutil.copyfile(f, target)
    return root


def _run(root: Path, code: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root), "JITSIM_PARSE_CACHE": "off"}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


_CHECKS = f"""
import json
from jitsim import registry
from jitsim.registry import versions
from jitsim.registry.releases import release_report
from jitsim.cli.parser import build_parser
parser = build_parser("cluster")
help_text = next(a for a in parser._actions if a.dest == "command").choices["cluster"].format_help()
import jitsim
c = jitsim.cluster({str(EXAMPLE)!r}, tf_version={NEW!r}, tf="never")
report = release_report({NEWEST!r}, {NEW!r})
print(json.dumps({{
    "supported": list(registry.SUPPORTED_TF_VERSIONS),
    "default": registry.DEFAULT_TF_VERSION,
    "producer": versions.PRODUCERS[{NEW!r}],
    "chosen": versions.choose_tf_version(None, {NEW_PRODUCER})[0],
    "help_names_it": "{NEW}" in help_text,
    "ops_changed": sorted(report["ops_changed"]),
    "clusters": len(c.clusters),
    "simulated": c.options.tf_version,
}}))
"""


@pytest.mark.parametrize("wheel_version", [f"{NEW}.0", f"{NEW}.0rc0"])
def test_a_new_release_is_its_data(tmp_path, wheel_version):
    r = _run(_package_with_release(tmp_path, wheel_version), _CHECKS)
    assert r["supported"] == list(SUPPORTED_TF_VERSIONS) + [NEW]
    final = not wheel_version.endswith("rc0")
    # the default: the newest final release; a release candidate only when asked for
    assert r["default"] == (NEW if final else jitsim.registry.DEFAULT_TF_VERSION)
    assert r["producer"] == NEW_PRODUCER and r["chosen"] == NEW
    assert r["help_names_it"]
    assert r["ops_changed"] == []  # the same data as NEWEST: the report says nothing changed
    assert r["simulated"] == NEW and r["clusters"] == 5  # the example's five clusters, as under NEWEST
