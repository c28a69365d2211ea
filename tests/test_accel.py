"""The optional C extensions change nothing but speed (issue 14).

``jitsim.accel`` loads ``graph._fasttext`` (text in and out) and ``analyses._fastcycles`` (the
cycle graph's edge insertion); ``JITSIM_PURE_PYTHON=1`` turns both off. The unit tests of each
(tests/test_textproto.py, tests/test_graphcycles.py) compare the C and Python forms function by
function; here the whole command is compared: the same bytes written and printed with and
without them, on a real TF dump whose cloned constants make the cycle graph's rank windows wide.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import need_c_extension

from jitsim import accel


def _run(args, env_extra, cwd):
    env = dict(os.environ, **env_extra)
    return subprocess.run([sys.executable, "-m", "jitsim.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


def _without_timings(doc):
    """The JSON report less its wall-clock fields (``seconds``), which differ run to run."""
    if isinstance(doc, dict):
        return {k: _without_timings(v) for k, v in doc.items() if k != "seconds"}
    if isinstance(doc, list):
        return [_without_timings(v) for v in doc]
    return doc


EXTENSIONS = ("jitsim.graph._fasttext", "jitsim.analyses._fastcycles")


def test_pure_python_switch(monkeypatch):
    need_c_extension(*EXTENSIONS)
    monkeypatch.setenv("JITSIM_PURE_PYTHON", "1")
    assert accel.disabled()
    assert accel.load("jitsim.graph._fasttext") is None
    monkeypatch.setenv("JITSIM_PURE_PYTHON", "0")
    assert not accel.disabled()
    assert accel.load("jitsim.graph._fasttext") is not None


def test_cluster_identical_with_and_without_c(corpus, tmp_path):
    need_c_extension(*EXTENSIONS)
    d = corpus.extract("mobilenetv2_inference")
    dump = sorted((d / "dumps").glob("before_mark_for_compilation_*.pbtxt"),
                  key=lambda p: p.stat().st_size)[-1]
    outs = {}
    for mode in ("0", "1"):
        out = tmp_path / f"out{mode}.pbtxt"
        r = _run(["cluster", str(dump), "-o", str(out), "--format", "json"],
                 {"JITSIM_PURE_PYTHON": mode, "JITSIM_PARSE_CACHE": "off"}, tmp_path)
        assert r.returncode == 0, r.stderr
        doc = _without_timings(json.loads(r.stdout))
        assert doc.pop("outputs") == [str(out)]  # the -o names differ by mode
        outs[mode] = (out.read_bytes(), doc)
    assert outs["0"][0] == outs["1"][0]
    assert outs["0"][1] == outs["1"][1]
    assert b"_XlaCluster" in outs["0"][0]
