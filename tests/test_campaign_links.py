"""A campaign's targets travel packed (docs/campaigns.md, "Items"): symbolic links in the user's
own target are packed as what they point to, so a SavedModel whose ``variables/`` is a link to
another disk harvests in a campaign as it does serially (issue 39, item 7). Archives a worker
sends back keep being unpacked with tarfile's ``data`` filter: a link out of them is refused.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from graphs import make_saved_model

from jitsim.crosscheck import campaigns
from jitsim.errors import JitsimError

ROOT = Path(__file__).resolve().parents[1]


def _saved_model_like(tmp_path: Path) -> Path:
    """A directory shaped as a SavedModel, its variables/ a link to a directory elsewhere (an
    absolute link) and its fingerprint a relative link to a file beside it."""
    elsewhere = tmp_path / "other-disk" / "variables"
    elsewhere.mkdir(parents=True)
    (elsewhere / "variables.index").write_bytes(b"index")
    (elsewhere / "variables.data-00000-of-00001").write_bytes(b"\x00weights")
    sm = tmp_path / "sm"
    sm.mkdir()
    (sm / "saved_model.pb").write_bytes(b"graph")
    (sm / "real_fingerprint.pb").write_bytes(b"fp")
    os.symlink(elsewhere, sm / "variables")
    os.symlink("real_fingerprint.pb", sm / "fingerprint.pb")
    return sm


def test_a_target_with_links_is_packed_as_what_they_point_to(tmp_path):
    sm = _saved_model_like(tmp_path)
    got = campaigns.unpack(campaigns.pack(sm, follow_links=True), tmp_path / "worker")
    assert (got / "variables").is_dir() and not (got / "variables").is_symlink()
    assert (got / "variables" / "variables.data-00000-of-00001").read_bytes() == b"\x00weights"
    assert (got / "fingerprint.pb").read_bytes() == b"fp" and not (got / "fingerprint.pb").is_symlink()
    assert sorted(p.relative_to(got).as_posix() for p in got.rglob("*")) == [
        "fingerprint.pb", "real_fingerprint.pb", "saved_model.pb", "variables",
        "variables/variables.data-00000-of-00001", "variables/variables.index"]
    # a target that is itself a link (a program linked into the corpus)
    (tmp_path / "prog_real.py").write_text("print(1)\n")
    os.symlink(tmp_path / "prog_real.py", tmp_path / "prog.py")
    one = campaigns.unpack(campaigns.pack(tmp_path / "prog.py", follow_links=True), tmp_path / "w2")
    assert one.is_file() and not one.is_symlink() and one.read_text() == "print(1)\n"


def test_what_a_link_points_to_is_part_of_the_targets_identity(tmp_path):
    """The record's input sha256 covers the files behind the links: weights changed on the other
    disk are another input (the campaign harvests again), not a resumed record."""
    sm = _saved_model_like(tmp_path)
    before = campaigns._tree_sha256(sm)
    (tmp_path / "other-disk" / "variables" / "variables.index").write_bytes(b"changed")
    assert campaigns._tree_sha256(sm) != before
    # a copy with no links is the same input
    shutil.copytree(sm, tmp_path / "copy", symlinks=False)
    assert campaigns._tree_sha256(tmp_path / "copy") == campaigns._tree_sha256(sm)


def test_a_dangling_link_or_a_loop_in_a_target_is_one_line(tmp_path):
    sm = _saved_model_like(tmp_path)
    os.symlink(tmp_path / "gone", sm / "assets")
    with pytest.raises(JitsimError, match="symbolic link to .*gone.*which does not exist") as e:
        campaigns.pack(sm, follow_links=True)
    assert e.value.path == str(sm / "assets")
    (sm / "assets").unlink()
    os.symlink(sm, sm / "assets")  # sm/assets/assets/... forever
    with pytest.raises(JitsimError, match="symbolic link loop") as e:
        campaigns.pack(sm, follow_links=True)
    assert e.value.path == str(sm / "assets")


def test_links_in_an_archive_a_worker_sent_back_are_still_refused(tmp_path):
    """Without follow_links (what a worker returns), a link is packed as a link, and unpacking an
    archive with a link out of it is refused (tarfile's data filter)."""
    d = tmp_path / "out"
    d.mkdir()
    os.symlink("/etc/passwd", d / "index.json")
    data = campaigns.pack(d)
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        assert tar.getmember("item/index.json").issym()
    with pytest.raises(tarfile.AbsoluteLinkError):
        campaigns.unpack(data, tmp_path / "driver")


_HARVEST_CLI = r"""
import json, sys
from pathlib import Path
import jitsim.crosscheck.campaigns as c

def harvest(t, out, *, flags, signature, python, timeout):
    # a stand-in for TF's run: it reads the SavedModel's variables, as TF does
    out = Path(out)
    (out / "dumps").mkdir(parents=True)
    weights = (Path(t) / "variables" / "variables.data-00000-of-00001").read_bytes()
    idx = {"graphs": [{"id": 0, "files": {}}], "tf_version": "2.21.0", "weights": weights.hex()}
    (out / "index.json").write_text(json.dumps(idx))
    return idx

c.harvest = harvest
from jitsim.cli import main
sys.exit(main(sys.argv[1:]))
"""


def test_a_campaign_harvests_a_saved_model_with_linked_variables(tmp_path):
    """Two targets make a campaign (run here, without Ray); the SavedModel's variables/ is a link
    to another directory. Before: 'not harvested: AbsoluteLinkError: 'item/variables' is a link
    to an absolute path'. (The harvest is a stand-in: no TF; the test below runs TF.)"""
    sm = _saved_model_like(tmp_path)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "variables").mkdir()
    (tmp_path / "b" / "variables" / "variables.data-00000-of-00001").write_bytes(b"b")
    p = subprocess.run([sys.executable, "-c", _HARVEST_CLI, "crosscheck", "harvest", str(sm), str(tmp_path / "b"),
                        "-o", str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "2/2 targets harvested" in p.stdout, p.stdout + p.stderr
    assert json.loads((tmp_path / "out" / "sm" / "index.json").read_text())["weights"] == b"\x00weights".hex()




def _graphs(index: dict) -> list:
    return [{k: v for k, v in g.items() if k != "mark_pass_us"} for g in index["graphs"]]


@pytest.mark.tf
def _dump_bytes(path):
    """A TF dump as bytes to compare, byte for byte but for what TF writes in no fixed order: the
    serialized ConfigProto of a call (its device_count map's entries come in either order)."""
    import re

    return re.sub(rb'(key: "config_proto"\s*value \{\s*s: )"[^\n]*"', rb'\1"..."', path.read_bytes())


@pytest.mark.slow  # two real TF harvests (16 s): .ci/run's slow stage
def test_a_linked_variables_directory_harvests_in_a_campaign_as_serially(tmp_path):
    """Real TF: the campaign's harvest of the SavedModel equals the serial command's (the same
    dumps, byte for byte but for the order of a ConfigProto map TF serializes, and the same
    graphs in index.json but for TF's timings)."""
    sm = tmp_path / "sm"
    make_saved_model(sm)
    (tmp_path / "disk2").mkdir()
    (sm / "variables").rename(tmp_path / "disk2" / "variables")
    os.symlink(tmp_path / "disk2" / "variables", sm / "variables")
    g = tmp_path / "g.pbtxt"
    g.write_text('node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } } '
                 'attr { key: "shape" value { shape { dim { size: 2 } } } } }\n'
                 'node { name: "r" op: "Relu" input: "x" attr { key: "T" value { type: DT_FLOAT } } }\n'
                 'versions { producer: 2474 }\n')
    cli = [sys.executable, "-m", "jitsim.cli", "crosscheck", "harvest"]
    serial = subprocess.run(cli + [str(sm), "-o", str(tmp_path / "serial")], capture_output=True, text=True,
                            timeout=600)
    assert serial.returncode == 0, serial.stderr
    camp = subprocess.run(cli + [str(sm), str(g), "-o", str(tmp_path / "camp")], capture_output=True, text=True,
                          timeout=600)
    assert camp.returncode == 0, camp.stderr
    assert "2/2 targets harvested" in camp.stdout, camp.stdout + camp.stderr
    a, b = tmp_path / "serial", tmp_path / "camp" / "sm"
    names = sorted(p.name for p in (a / "dumps").iterdir())
    assert names and names == sorted(p.name for p in (b / "dumps").iterdir())
    for n in names:
        assert _dump_bytes(a / "dumps" / n) == _dump_bytes(b / "dumps" / n), n
    ia, ib = (json.loads((d / "index.json").read_text()) for d in (a, b))
    assert _graphs(ia) == _graphs(ib) and ia["main_graph"] == ib["main_graph"] and ia["target"] == ib["target"]
