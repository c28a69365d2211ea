"""One entry for whatever a user holds (jitsim.frontend.resolve): the route is picked from what
the target is (its content, never its file name) and stated on one line."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from jitsim.errors import JitsimError
from jitsim.frontend import resolve
from jitsim.graph.io import load, read_graphdef
from jitsim.graph.tfgraph import CLONE_NAME_RE

ROOT = Path(__file__).resolve().parents[1]
MNIST = ROOT / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt"


def jitsim(*args, cwd=ROOT, env=None):
    return subprocess.run([sys.executable, "-m", "jitsim.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env=env)


def _clusters(doc) -> list:
    g = doc["graphs"][doc.get("main_graph", 0)]
    return sorted((c["name"], tuple(c["nodes"])) for c in g["clusters"])


def test_a_renamed_dump_is_still_exact(tmp_path):
    """Users rename dumps: a placed graph without Placeholders is TF's pass input whatever its name."""
    renamed = tmp_path / "my_graph.pbtxt"
    shutil.copy(MNIST, renamed)
    a, b = jitsim("cluster", MNIST, "--format", "json"), jitsim("cluster", renamed, "--format", "json")
    assert a.returncode == b.returncode == 0, a.stderr + b.stderr
    da, db = json.loads(a.stdout), json.loads(b.stdout)
    assert db["route"] == {**da["route"]} and db["route"]["method"] == "dump" and db["route"]["exact"]
    assert db["graphs"][0]["input_stage"] == "before_clone_constants_for_better_clustering"
    assert _clusters(da) == _clusters(db)
    assert not any("approximate" in n for n in db["graphs"][0]["notes"])


def test_a_renamed_before_mark_dump_is_not_cloned_twice(corpus, tmp_path):
    """A before_mark dump carries TF's constant clones; under another name jitsim must still
    fold them back (content detection), not clone the clones again."""
    for run in corpus.built():
        dumps = corpus.extract(run) / "dumps"
        for f in sorted(dumps.glob("before_mark_for_compilation*.pbtxt")):
            names = [n.name for n in read_graphdef(f).node]
            if any(CLONE_NAME_RE.match(n) for n in names):
                break
        else:
            continue
        break
    else:
        pytest.skip("no corpus dump with constant clones")
    renamed = tmp_path / "renamed.pbtxt"
    shutil.copy(f, renamed)
    r = jitsim("cluster", renamed, "--format", "json", "--tf-xla-flags",
               corpus.run(run).flags.replace("--tf_xla_clustering_debug", "").strip())
    assert r.returncode == 0, r.stderr
    g = json.loads(r.stdout)["graphs"][0]
    assert g["input_stage"] == "before_mark_for_compilation"
    assert g["nodes_total"] == len(names)  # clones folded back and re-made: none added
    assert any("folded" in n for n in g["notes"])


def _keras_archive(path):
    """The members a Keras archive is recognised by (content is not read further here)."""
    import zipfile

    with zipfile.ZipFile(path, "w") as z:
        z.writestr("config.json", "{}")
        z.writestr("metadata.json", "{}")


def test_target_kinds(tmp_path):
    (tmp_path / "sm").mkdir()
    (tmp_path / "sm" / "saved_model.pb").write_bytes(b"")
    _keras_archive(tmp_path / "m.keras")
    (tmp_path / "p.py").write_text("")
    assert resolve.target_kind(tmp_path / "sm") == "saved_model"
    assert resolve.target_kind(tmp_path / "sm" / "saved_model.pb") == "saved_model"
    assert resolve.target_kind(tmp_path / "m.keras") == "keras"
    assert resolve.target_kind(tmp_path / "p.py") == "program"
    assert resolve.target_kind(MNIST) == "graphdef"
    assert resolve.target_kind(tmp_path) == "dump-dir"
    with pytest.raises(JitsimError, match="no such file"):
        resolve.target_kind(tmp_path / "missing.pb")


@pytest.mark.parametrize("name, words", [("p.py", "runs only under TensorFlow"),
                                         ("m.keras", "not a graph")])
def test_what_needs_tensorflow_says_so_without_it(tmp_path, monkeypatch, name, words):
    if name.endswith(".keras"):
        _keras_archive(tmp_path / name)
    else:
        (tmp_path / name).write_text("")
    monkeypatch.setattr(resolve, "have_tensorflow", lambda: False)
    with pytest.raises(JitsimError, match=words):
        resolve.pass_inputs(tmp_path / name, flags="--tf_xla_auto_jit=2")
    with pytest.raises(JitsimError, match="not importable"):
        resolve.pass_inputs(tmp_path / name, flags="--tf_xla_auto_jit=2", tf="always")


def test_bad_tf_mode():
    with pytest.raises(JitsimError, match="--tf must be one of"):
        resolve.pass_inputs(MNIST, flags="", tf="sometimes")


@pytest.mark.tf
def test_saved_model_both_routes(tmp_path):
    """A SavedModel: with TF, TF's own pass input (exact; the second call is served from the
    cache); without, jitsim's simulation of TF's rewrites. On this small model (a dense layer
    with tanh, a string op in the middle, more math) TF makes two clusters around the string
    op; the TF-free route finds the same two with the same ops, give or take an Identity that
    Grappler's dependency optimizer removes and jitsim's simulation may keep (issue 11's bar:
    cluster and clustered-node counts within 20%)."""
    prog = tmp_path / "make.py"
    prog.write_text(
        "import tensorflow as tf\n"
        "class M(tf.Module):\n"
        "    def __init__(self):\n"
        "        self.w = tf.Variable(tf.ones([4, 4]))\n"
        "    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])\n"
        "    def __call__(self, x):\n"
        "        y = tf.tanh(tf.matmul(x, self.w) * 2.0 + 1.0)\n"
        "        s = tf.strings.to_number(tf.strings.as_string(y))\n"
        "        return tf.reduce_sum(tf.sin(s) * tf.cos(s) + tf.exp(s))\n"
        "m = M()\n"
        f"tf.saved_model.save(m, {str(tmp_path / 'sm')!r}, signatures=m.__call__)\n")
    subprocess.run([sys.executable, str(prog)], check=True, capture_output=True)
    env = {**os.environ, "JITSIM_CACHE": str(tmp_path / "cache")}
    exact = jitsim("cluster", tmp_path / "sm", "--format", "json", env=env)
    assert exact.returncode == 0, exact.stderr
    de = json.loads(exact.stdout)
    assert de["route"]["method"] == "tf-capture" and de["route"]["exact"]
    # the capture's cost is a timing: on the text line, and in JSON only with --timings
    assert "capture_seconds" not in de["route"]
    again = json.loads(jitsim("cluster", tmp_path / "sm", "--format", "json", "--timings", env=env).stdout)
    assert again["route"]["capture_seconds"] == 0.0
    assert "served from jitsim's cache" in jitsim("cluster", tmp_path / "sm", env=env).stdout
    approx = jitsim("cluster", tmp_path / "sm", "--tf", "never", "--format", "json", env=env)
    assert approx.returncode == 0, approx.stderr
    da = json.loads(approx.stdout)
    assert da["route"]["method"] == "no-tf" and not da["route"]["exact"]
    main = de["graphs"][de["main_graph"]]

    def ops_of(doc_graph):
        return sorted(sorted(op for m in c["nodes"] if (op := doc_graph["nodes"][m]["op"]) != "Identity")
                      for c in doc_graph["clusters"])

    pred = da["graphs"][0]
    assert len(main["clusters"]) == 2 and len(pred["clusters"]) == 2
    assert ops_of(pred) == ops_of(main)
    size = sum(c["size"] for c in main["clusters"])
    assert abs(sum(c["size"] for c in pred["clusters"]) - size) <= 0.2 * size
