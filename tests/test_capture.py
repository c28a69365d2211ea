"""The TF route (jitsim.frontend.capture): one TF run with clustering fuel 0, then jitsim.

Ground truth: the same call harvested under real TF with the normal flags; every captured
graph must be the truth's graph (same ``before_clone...`` dump) and jitsim's clusters on it
must be TF's, names included. Needs TF: marked ``tf``.
"""

import hashlib
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jitsim.crosscheck.compare import compare_partitions
from jitsim.graph.dumps import group_dumps
from jitsim.tfprocess.harvest import DEFAULT_FLAGS, harvest
from jitsim.crosscheck.scoring import labels_of_file
from jitsim.errors import HarvestError
from jitsim.frontend.capture import cache_key, capture, capture_flags, simulate

pytestmark = pytest.mark.tf

USER_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
BEFORE_CLONE = "before_clone_constants_for_better_clustering"

BODY = """
import tensorflow as tf
W = tf.Variable(tf.random.stateless_normal([4, 3], seed=[1, 2]), name="w")
@tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name="x")])
def f(x):
    h = tf.nn.relu(tf.matmul(x, W) * 2.0 + 1.0) - 3.0
    return tf.reduce_sum(tf.tanh(h) * h, axis=1)
"""

MAKE = textwrap.dedent(
    """
    import sys, tensorflow as tf, keras
    from pathlib import Path
    from google.protobuf import text_format
    out = Path(sys.argv[1])
    """
) + BODY + textwrap.dedent(
    """
    m = tf.Module(); m.w = W; m.f = f
    tf.saved_model.save(m, str(out / "sm"), signatures={"serving_default": f.get_concrete_function()})
    tf.saved_model.save(m, str(out / "sm_other"), signatures={"predict": f.get_concrete_function(),
                                                               "embed": f.get_concrete_function()})
    x = keras.Input((6,), name="x")
    h = keras.layers.LayerNormalization()(keras.layers.Dense(8, activation="gelu")(x))
    keras.Model(x, keras.layers.Dense(3, activation="softmax")(h)).save(str(out / "m.keras"))
    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name="x")])
    def g(x):
        return tf.reduce_sum(tf.nn.relu(x * 2.0 + 1.0) - x, axis=1)
    (out / "g.pbtxt").write_text(text_format.MessageToString(g.get_concrete_function().graph.as_graph_def()))
    """
)


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    d = tmp_path_factory.mktemp("capture")
    subprocess.run([sys.executable, "-c", MAKE, str(d)], check=True, capture_output=True)
    (d / "prog.py").write_text(BODY + "f(tf.ones([2, 4]))\n")
    return d


_UID = re.compile(rb'_\d+"')


def _digest(p: Path, loose: bool) -> str:
    data = p.read_bytes()
    return hashlib.sha256(_UID.sub(b'_#"', data) if loose else data).hexdigest()


def assert_matches_truth(cap, truth: Path, *, loose: bool = False) -> None:
    """Each captured graph is a truth graph (same pass input), and jitsim's clusters on it are
    TF's (partition and names). ``loose``: function-name uid suffixes may differ (another
    process traced the function)."""
    t_recs = group_dumps(truth / "dumps", (truth / "log.txt").read_text())
    by_digest = {_digest(truth / "dumps" / r.files[BEFORE_CLONE], loose): r for r in t_recs if BEFORE_CLONE in r.files}
    results = simulate(cap)
    assert results
    paired = 0
    main_checked = False
    for rec, res in results:
        t = by_digest.get(_digest(cap.dump_dir / "dumps" / rec.files[BEFORE_CLONE], loose))
        if t is None:
            assert cap.kind == "function" and rec.id != cap.main_graph  # the runner's own eager ops
            continue
        paired += 1
        mark = t.files.get("mark_for_compilation")
        truth_labels = labels_of_file(truth / "dumps" / mark) if mark else {n: None for n in res.labels()}
        d = compare_partitions(res.labels(), truth_labels)
        assert d.identical and d.same_names, (rec.id, d.format_text())
        if rec.id == cap.main_graph:
            main_checked = True
            assert any(truth_labels.values()), "the call's graph has a cluster"
    assert main_checked and paired


def test_saved_model_capture_cache_and_truth(targets, tmp_path):
    cache = tmp_path / "cache"
    cap = capture(targets / "sm", flags=USER_FLAGS, cache_dir=cache)
    assert cap.kind == "saved_model" and not cap.cached and cap.seconds > 0 and cap.main_graph is not None
    assert "--tf_xla_clustering_fuel=0" in cap.tf_xla_flags and not cap.auto_jit_added
    idx = cap.index
    assert all(not g["clusters"] for g in idx["graphs"])  # fuel 0: TF clustered nothing
    again = capture(targets / "sm", flags=USER_FLAGS, cache_dir=cache)
    assert (again.cached, again.seconds, again.key, again.dump_dir) == (True, 0.0, cap.key, cap.dump_dir)
    truth = tmp_path / "truth"
    harvest(targets / "sm", truth, flags=DEFAULT_FLAGS)
    # the same call: the same sequence of graphs, each dumped byte-identical
    t_recs = group_dumps(truth / "dumps", (truth / "log.txt").read_text())
    c_recs = group_dumps(cap.dump_dir / "dumps", (cap.dump_dir / "log.txt").read_text())
    assert [(cap.dump_dir / "dumps" / r.files[BEFORE_CLONE]).read_bytes() for r in c_recs] == \
           [(truth / "dumps" / r.files[BEFORE_CLONE]).read_bytes() for r in t_recs]
    assert json.loads((truth / "index.json").read_text())["main_graph"] == cap.main_graph
    assert_matches_truth(cap, truth)


def test_cache_key_depends_on_flags_target_and_signature(targets):
    a, _ = capture_flags(USER_FLAGS)
    # a flag TF reads before its clustering passes (it adds XLA devices) changes the key; one
    # read only from mark_for_compilation on does not (the capture leaves it to the simulation)
    b, _ = capture_flags(USER_FLAGS + " --tf_xla_enable_xla_devices")
    assert capture_flags(USER_FLAGS + " --tf_xla_min_cluster_size=2")[0] == a
    sm = (targets / "sm").resolve()
    k = cache_key(sm, "saved_model", None, a)
    assert k == cache_key(sm, "saved_model", None, a)
    assert len({k, cache_key(sm, "saved_model", None, b), cache_key(sm, "saved_model", "serving_default", a),
                cache_key((targets / "sm_other").resolve(), "saved_model", None, a)}) == 4


def test_auto_jit_off_is_added_and_said():
    flags, added = capture_flags("--tf_xla_min_cluster_size=2")
    assert added and "--tf_xla_auto_jit=2" in flags
    assert capture_flags("", session_jit_on=True)[1] is False


def test_missing_serving_default_lists_signatures(targets, tmp_path):
    with pytest.raises(HarvestError, match=r"no 'serving_default' signature; its signatures: .*embed, predict"):
        capture(targets / "sm_other", flags=USER_FLAGS, cache_dir=tmp_path)
    assert not any(tmp_path.iterdir())  # checked before starting TF
    with pytest.raises(HarvestError, match="its signatures"):
        harvest(targets / "sm_other", tmp_path / "h")


@pytest.mark.parametrize("name", ["m.keras", "g.pbtxt", "prog.py"])
def test_file_targets_match_truth(targets, tmp_path, name):
    cap = capture(targets / name, flags=USER_FLAGS, cache_dir=tmp_path / "cache")
    truth = tmp_path / "truth"
    harvest(targets / name, truth, flags=DEFAULT_FLAGS)
    assert_matches_truth(cap, truth)


def test_live_tf_function_matches_the_program(targets, tmp_path):
    """A tf.function held in this process, captured through its serialized library, gives
    the graph the program calling it gives TF (up to function-name uids)."""
    ns: dict = {}
    exec(BODY, ns)
    cap = capture(ns["f"], flags=USER_FLAGS, cache_dir=tmp_path / "cache")
    assert cap.kind == "function" and cap.main_graph is not None
    truth = tmp_path / "truth"
    harvest(targets / "prog.py", truth, flags=DEFAULT_FLAGS)
    assert_matches_truth(cap, truth, loose=True)


def test_cache_key_follows_symlinks_and_is_cheap_on_big_files(tmp_path):
    """A SavedModel whose variables/ is a link to another directory: the linked files are in the
    key. A 16 GiB sparse asset is known by its size, time and edges, not read whole."""
    import os
    import time as _time

    sm = tmp_path / "sm"
    (sm / "assets").mkdir(parents=True)
    (sm / "saved_model.pb").write_bytes(b"graph")
    elsewhere = tmp_path / "disk2" / "variables"
    elsewhere.mkdir(parents=True)
    (elsewhere / "variables.index").write_bytes(b"index-1")
    (sm / "variables").symlink_to(elsewhere)
    k1 = cache_key(sm, "saved_model", None, "--tf_xla_auto_jit=2")
    (elsewhere / "variables.index").write_bytes(b"index-2")
    assert cache_key(sm, "saved_model", None, "--tf_xla_auto_jit=2") != k1
    with open(sm / "assets" / "big.bin", "wb") as f:
        f.truncate(16 * 2**30)
    t0 = _time.monotonic()
    k2 = cache_key(sm, "saved_model", None, "--tf_xla_auto_jit=2")
    assert _time.monotonic() - t0 < 5
    os.utime(sm / "assets" / "big.bin", ns=(1, 1))
    assert cache_key(sm, "saved_model", None, "--tf_xla_auto_jit=2") != k2
    (sm / "variables" / "loop").symlink_to(sm)
    with pytest.raises(HarvestError, match="symbolic link loop"):
        cache_key(sm, "saved_model", None, "--tf_xla_auto_jit=2")


def test_the_remapper_reads_the_users_raw_flags(tmp_path, tf_release):
    """Grappler's remapper reads TF_XLA_FLAGS itself, raw: it skips its CPU fusions when
    auto-clustering is on and the variable, split on commas (TF 2.21), holds the token
    --tf_xla_cpu_global_jit, i.e. when that flag is the whole variable (measured with the
    remapper's own log: no fusion then, a fusion with any other flag beside it). The capture
    runs with flags of its own (fuel 0, the dumps, auto-jit added here), parsed once; the
    remapper must still see the user's variable: MatMul + BiasAdd stay unfused with
    "--tf_xla_cpu_global_jit" and fuse with "--tf_xla_cpu_global_jit --tf_xla_auto_jit=2" under
    TF 2.21; TF 2.22 splits on spaces too, so it sees the flag in both and fuses in neither."""
    from jitsim.flags import remapper_sees_cpu_global_jit
    from jitsim.frontend.capture import remapper_view
    from jitsim.graph.io import load

    make = ("import sys, tensorflow as tf\n"
            "m = tf.Module(); m.w = tf.Variable(tf.ones([4, 4])); m.b = tf.Variable(tf.zeros([4]))\n"
            "@tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name='x')])\n"
            "def f(x):\n"
            "    return tf.nn.relu(tf.nn.bias_add(tf.matmul(x, m.w), m.b)) * 2.0\n"
            "m.f = f\n"
            "tf.saved_model.save(m, sys.argv[1], signatures={'serving_default': f})\n")
    subprocess.run([sys.executable, "-c", make, str(tmp_path / "sm")], check=True, capture_output=True)
    ops = {}
    for flags in ("--tf_xla_cpu_global_jit", "--tf_xla_cpu_global_jit --tf_xla_auto_jit=2"):
        cap = capture(tmp_path / "sm", flags=flags, cache_dir=tmp_path / "c")
        ops[flags] = {n.op for n in load(cap.main_dump(), validate=False)}
    assert "_FusedMatMul" not in ops["--tf_xla_cpu_global_jit"] and "BiasAdd" in ops["--tf_xla_cpu_global_jit"]
    fused = {f: not remapper_sees_cpu_global_jit(f, tf_release) for f in ops}  # auto-jit is on in a capture
    assert fused == {"--tf_xla_cpu_global_jit": False, "--tf_xla_cpu_global_jit --tf_xla_auto_jit=2":
                     tuple(map(int, tf_release.split("."))) < (2, 22)}
    for f, op_set in ops.items():
        assert ("_FusedMatMul" in op_set) == fused[f], (tf_release, f)
    assert remapper_view("--tf_xla_cpu_global_jit") == "remapper:11"
    assert remapper_view("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit") == "remapper:01"  # 2.22's split sees it
    assert remapper_view("--tf_xla_auto_jit=2") == "remapper:00"
