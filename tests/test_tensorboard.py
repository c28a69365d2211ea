"""TensorBoard event files: ``--tensorboard DIR`` writes the clustered graph; event files are
read as graph input (by content), with notes saying which graph was taken and whose it is."""

import gzip
import os
import re
import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jitsim.graph import events
from jitsim.registry import protos
from jitsim.graph.io import read_graphdef

ROOT = Path(__file__).resolve().parents[1]
MNIST = ROOT / "examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt"
NAME = re.compile(r"^events\.out\.tfevents\.\d{10}\.[A-Za-z0-9_-]+\.jitsim$")


def jitsim(*args, env=None):
    return subprocess.run([sys.executable, "-m", "jitsim.cli", *map(str, args)], capture_output=True, text=True,
                          env=None if env is None else {**os.environ, **env})


def _one_error_line(r, *fragments):
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for f in fragments:
        assert f in lines[0], lines[0]


def _clusters(gd) -> dict:
    return {n.name: n.attr["_XlaCluster"].s.decode() for n in gd.node if "_XlaCluster" in n.attr}


def _only_event_file(d: Path) -> Path:
    files = sorted(d.iterdir())
    assert len(files) == 1, files
    assert NAME.match(files[0].name), files[0].name
    return files[0]


# -- the checksums -------------------------------------------------------------------------


def test_crc32c_check_value_and_both_implementations():
    # CRC-32C's published check value (the CRC of the ASCII digits 1..9) is 0xE3069283; the
    # pure-Python table and the C library must agree on it and on arbitrary data
    assert events.crc32c(b"123456789") == 0xE3069283
    assert events._crc32c_table(b"123456789") == 0xE3069283
    data = bytes(range(256)) * 37 + b"tail"
    assert events.crc32c(data) == events._crc32c_table(data)


def test_record_framing_by_hand():
    # a record is: uint64 LE length, masked crc of those 8 bytes, the data, masked crc of the data
    rec = events.record(b"abc")
    assert rec[:8] == struct.pack("<Q", 3)
    assert struct.unpack("<I", rec[8:12])[0] == events.masked_crc(rec[:8])
    assert rec[12:15] == b"abc" and len(rec) == 19
    assert events.records(rec + events.record(b"")) == [b"abc", b""]
    # masking: rotate right by 15, add 0xa282ead8 (mod 2**32)
    c = events.crc32c(b"abc")
    assert events.masked_crc(b"abc") == ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + 0xA282EAD8) % 2**32


# -- writing -------------------------------------------------------------------------------


def test_cluster_tensorboard_writes_the_marked_graph(tmp_path):
    out, logdir = tmp_path / "marked.pb", tmp_path / "tb"
    env = {"SOURCE_DATE_EPOCH": "1700000000"}
    r = jitsim("cluster", MNIST, "--tf", "never", "-o", out, "--tensorboard", logdir, env=env)
    assert r.returncode == 0, r.stderr
    f = _only_event_file(logdir)
    assert f.name.startswith("events.out.tfevents.1700000000.")
    assert f"wrote {f}" in r.stderr
    ef = events.read_event_file(f.read_bytes(), f)
    assert ef.events == 2 and ef.file_version == "brain.Event:2" and len(ef.graph_defs) == 1
    gd = protos.GraphDef()
    gd.ParseFromString(ef.graph_defs[0][1])
    marked = read_graphdef(out)
    assert gd == marked  # the same graph -o writes: _XlaCluster attrs and devices kept
    assert len(set(_clusters(gd).values())) >= 2
    assert all(n.device for n in gd.node)
    # the same input and time give the same bytes
    r2 = jitsim("cluster", MNIST, "--tf", "never", "--tensorboard", tmp_path / "tb2", env=env)
    assert r2.returncode == 0, r2.stderr
    assert _only_event_file(tmp_path / "tb2").read_bytes() == f.read_bytes()


def test_several_graphs_one_run_each(tmp_path):
    # a dump directory with two graphs: each goes into its own run directory (TensorBoard shows
    # one graph per run)
    dumps = tmp_path / "dumps"
    dumps.mkdir()
    for name in ("before_clone_constants_for_better_clustering.pbtxt",
                 "before_clone_constants_for_better_clustering_1.pbtxt"):
        (dumps / name).write_bytes(MNIST.read_bytes())
    r = jitsim("cluster", dumps, "--tensorboard", tmp_path / "tb")
    assert r.returncode == 0, r.stderr
    runs = sorted(p for p in (tmp_path / "tb").iterdir())
    assert [p.name[:3] for p in runs] == ["00_", "01_"] and all(p.is_dir() for p in runs)
    assert "the_call" in runs[0].name or "the_call" in runs[1].name
    for run in runs:
        ef = events.read_event_file(_only_event_file(run).read_bytes())
        gd = protos.GraphDef()
        gd.ParseFromString(ef.graph_defs[0][1])
        assert len(set(_clusters(gd).values())) == 5
    assert f"2 event files under {tmp_path / 'tb'}" in r.stderr


def test_rewrite_and_report_share_the_option(tmp_path):
    env = {"SOURCE_DATE_EPOCH": "1700000000"}
    r = jitsim("rewrite", MNIST, "--until", "mark", "-o", tmp_path / "m.pbtxt", "--tensorboard", tmp_path / "tb",
               env=env)
    assert r.returncode == 0, r.stderr
    ef = events.read_event_file(_only_event_file(tmp_path / "tb").read_bytes())
    gd = protos.GraphDef()
    gd.ParseFromString(ef.graph_defs[-1][1])
    assert _clusters(gd) == _clusters(read_graphdef(tmp_path / "m.pbtxt"))
    assert "--tensorboard" in jitsim("report", "--help").stdout
    assert "--tensorboard" in jitsim("render", "--help").stdout


def test_a_tensorboard_log_directory_names_its_event_file(tmp_path):
    r = jitsim("cluster", MNIST, "--tf", "never", "--tensorboard", tmp_path / "tb")
    assert r.returncode == 0, r.stderr
    _one_error_line(jitsim("cluster", tmp_path / "tb", "--tf", "never"), "TensorBoard log directory",
                    str(_only_event_file(tmp_path / "tb")))


def test_tensorboard_dir_checked_before_any_work(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = jitsim("cluster", MNIST, "--tf", "never", "--tensorboard", f)
    _one_error_line(r, "--tensorboard", "not a directory")


# -- reading -------------------------------------------------------------------------------


def _event_file(tmp_path, gd, name="run.bin", extra=b""):
    p = tmp_path / name
    p.write_bytes(events.event_file_bytes(gd.SerializeToString(), 1700000000) + extra)
    return p


def test_event_file_is_a_graph_input_by_content(tmp_path):
    # an event file named like nothing jitsim knows is read by its framing; the clusters are
    # those of the GraphDef it holds, and a note says what was read
    p = _event_file(tmp_path, read_graphdef(MNIST))
    a = jitsim("cluster", MNIST, "--tf", "never", "--format", "json")
    b = jitsim("cluster", p, "--tf", "never", "--format", "json")
    assert a.returncode == b.returncode == 0, b.stderr
    import json

    ca = {k: v["cluster"] for k, v in json.loads(a.stdout)["graphs"][0]["nodes"].items()}
    cb = {k: v["cluster"] for k, v in json.loads(b.stdout)["graphs"][0]["nodes"].items()}
    assert ca == cb
    assert "note: read as a TensorBoard event file; the graph is its graph_def event" in b.stderr
    gz = tmp_path / "run.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    with pytest.warns(UserWarning, match="read as a TensorBoard event file"):
        assert len(read_graphdef(gz).node) == len(read_graphdef(MNIST).node)


def test_last_graph_def_event_is_taken(tmp_path):
    first = read_graphdef(MNIST)
    second = protos.GraphDef()
    second.node.add(name="x", op="Const")
    data = (events.event_file_bytes(first.SerializeToString(), 1)
            + events.record(events.encode_event(wall_time=2.0, step=7, graph_def=second.SerializeToString())))
    p = tmp_path / "two"
    p.write_bytes(data)
    r = jitsim("show", p, "--format", "json")
    assert r.returncode == 0, r.stderr
    assert '"nodes": 1,' in r.stdout
    assert "the last of its 2 graph_def events (step 7" in r.stderr


def test_meta_graph_def_event(tmp_path):
    # TF1's FileWriter.add_meta_graph writes a meta_graph_def event (field 9): its graph is taken
    # when the file has no graph_def event, and its collections come with it
    mg = protos.MetaGraphDef()
    mg.graph_def.CopyFrom(read_graphdef(MNIST))
    mg.meta_info_def.tags.append("train")
    mg.collection_def["train_op"].node_list.value.append(mg.graph_def.node[-1].name)
    p = tmp_path / "meta"
    p.write_bytes(events.record(events.encode_event(wall_time=1.0, file_version=events.FILE_VERSION))
                  + events.record(events.encode_event(wall_time=1.0) + events._bytes_field(9, mg.SerializeToString())))
    from jitsim.graph.io import load

    with pytest.warns(UserWarning, match="its meta_graph_def event"):
        g = load(p)
    assert len(g.nodes) == len(mg.graph_def.node)
    assert g.collections == {"train_op": [mg.graph_def.node[-1].name]}


def test_corrupt_graph_in_an_event_file(tmp_path):
    p = tmp_path / "badgraph"
    p.write_bytes(events.event_file_bytes(b"\x0a\x05ab", 1))  # a node field cut short
    _one_error_line(jitsim("show", p), "not a valid binary GraphDef in the event file")


@pytest.mark.parametrize("damage,fragment", [
    (lambda d: d[:-3], "event file is truncated"),
    (lambda d: d[:30] + bytes([d[30] ^ 1]) + d[31:], "bad data checksum"),
    (lambda d: d[:-1] + bytes([d[-1] ^ 0x40]), "bad data checksum"),
])
def test_damaged_event_files_are_one_line(tmp_path, damage, fragment):
    p = tmp_path / "bad"
    p.write_bytes(damage(events.event_file_bytes(read_graphdef(MNIST).SerializeToString(), 1)))
    _one_error_line(jitsim("cluster", p, "--tf", "never"), str(p), fragment)


def test_event_file_without_graph(tmp_path):
    p = tmp_path / "nograph"
    p.write_bytes(events.record(events.encode_event(wall_time=1.0, file_version=events.FILE_VERSION)))
    _one_error_line(jitsim("cluster", p, "--tf", "never"), "an event file with no graph (1 event)")


def test_event_that_is_not_an_event(tmp_path):
    p = tmp_path / "junk"
    p.write_bytes(events.record(b"\x0f\xff"))  # framing holds, the record is no protobuf
    _one_error_line(jitsim("show", p), "record 0 is not a valid Event")


# -- with real TensorFlow ------------------------------------------------------------------

_TF_READ = textwrap.dedent("""
    import json, sys
    import tensorflow as tf
    out = []
    for e in tf.compat.v1.train.summary_iterator(sys.argv[1]):
        kind = e.WhichOneof("what")
        rec = {"what": kind}
        if kind == "graph_def":
            gd = tf.compat.v1.GraphDef()
            gd.ParseFromString(e.graph_def)
            rec["clusters"] = {n.name: n.attr["_XlaCluster"].s.decode() for n in gd.node if "_XlaCluster" in n.attr}
            rec["devices"] = sorted({n.device for n in gd.node})
        out.append(rec)
    print(json.dumps(out))
""")


def _run_tf(code: str, *args, cwd=None):
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "CUDA_VISIBLE_DEVICES": "-1"}
    r = subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True, text=True, env=env,
                       cwd=cwd, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return r.stdout


@pytest.mark.tf
def test_tensorflow_reads_our_event_file(tmp_path):
    import json

    r = jitsim("cluster", MNIST, "--tf", "never", "-o", tmp_path / "m.pbtxt", "--tensorboard", tmp_path / "tb")
    assert r.returncode == 0, r.stderr
    recs = json.loads(_run_tf(_TF_READ, _only_event_file(tmp_path / "tb")).splitlines()[-1])
    assert [x["what"] for x in recs] == ["file_version", "graph_def"]
    assert recs[1]["clusters"] == _clusters(read_graphdef(tmp_path / "m.pbtxt"))
    assert recs[1]["devices"] == ["/job:localhost/replica:0/task:0/device:CPU:0"]


def test_tensorboard_event_loader_reads_our_event_file(tmp_path):
    """TensorBoard's own loader (its pure-Python record reader when TF is absent) finds the graph."""
    try:
        from tensorboard.backend.event_processing import event_accumulator
    except ImportError:
        pytest.skip("the tensorboard package is absent here (an optional cross-check)")
    r = jitsim("cluster", MNIST, "--tf", "never", "--tensorboard", tmp_path / "tb")
    assert r.returncode == 0, r.stderr
    acc = event_accumulator.EventAccumulator(str(tmp_path / "tb"))
    acc.Reload()
    assert acc.Tags()["graph"]
    assert {n.attr["_XlaCluster"].s for n in acc.Graph().node if "_XlaCluster" in n.attr}


_KERAS = textwrap.dedent("""
    import sys
    import numpy as np, keras
    m = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="relu"), keras.layers.Dense(1)])
    m.compile(optimizer="sgd", loss="mse")
    class GraphOnly(keras.callbacks.TensorBoard):
        # the scalars need the tensorboard package (TF 2.21 does not install it); the graph does not
        def on_epoch_end(self, epoch, logs=None):
            pass
        def on_train_batch_end(self, batch, logs=None):
            if self._should_write_train_graph:
                self._write_keras_model_train_graph()
                self._should_write_train_graph = False
    m.fit(np.zeros((8, 4), "float32"), np.zeros((8, 1), "float32"), epochs=1, batch_size=4, verbose=0,
          callbacks=[GraphOnly(log_dir=sys.argv[1], write_graph=True, profile_batch=0)])
    import tensorflow as tf
    @tf.function
    def f(x):
        return tf.nn.relu(tf.matmul(x, x) + 1.0)
    w = tf.summary.create_file_writer(sys.argv[2])
    with w.as_default():
        tf.summary.graph(f.get_concrete_function(tf.TensorSpec([2, 2])).graph)
        tf.summary.trace_on(graph=True)
        f(tf.ones([2, 2]))
        tf.summary.trace_export("traced", step=3)
    w.close()
""")


@pytest.mark.tf
def test_keras_callback_and_tf_summary_event_files(tmp_path):
    _run_tf(_KERAS, tmp_path / "keras", tmp_path / "summary")
    keras_file = next((tmp_path / "keras").rglob("*tfevents*"))
    # Keras 3's callback writes the model's configuration, not an op graph: said in one line
    _one_error_line(jitsim("cluster", keras_file, "--tf", "never"), str(keras_file), "an event file with no graph",
                    "Keras")
    # tf.summary.graph's event file (what TensorBoard's graph dashboard shows) is a graph input
    tf_file = next((tmp_path / "summary").rglob("*tfevents*"))
    r = jitsim("cluster", tf_file, "--tf", "never", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert "read as a TensorBoard event file" in r.stderr
    # without the graph_def event, the function graph tf.summary.trace_export recorded is taken
    recs = events.records(tf_file.read_bytes())
    trace_only = tmp_path / "trace_only"
    trace_only.write_bytes(b"".join(events.record(x) for x in recs if b"graph_run_metadata_graph" in x or
                                    b"brain.Event" in x))
    r = jitsim("show", trace_only, "--format", "json")
    assert r.returncode == 0, r.stderr
    assert "tf.summary.trace_export 'traced' recorded (step 3" in r.stderr
    assert '"MatMul": 1' in r.stdout
    # an event file holding Keras' summary and a graph (as Keras 2's callback wrote them): the note
    # says whose graph it is
    graph_records = [x for x in recs[1:] if b"graph_run_metadata_graph" not in x]
    both = tmp_path / "both"
    both.write_bytes(keras_file.read_bytes() + b"".join(events.record(x) for x in graph_records))
    r = jitsim("show", both)
    assert r.returncode == 0, r.stderr
    assert "Keras' TensorBoard callback" in r.stderr and "training step" in r.stderr
    # with TensorFlow, the capture route runs the event file's graph (TF's runner gets a GraphDef)
    r = jitsim("cluster", tf_file, "--tf", "always", "--format", "json")
    assert r.returncode == 0, r.stderr
    import json

    assert json.loads(r.stdout)["route"]["method"] == "tf-capture"
