"""The TF route runs nothing of the model: no side effect, no hang, nothing left behind.

Targets built here by real TF (one process for all of them) each do something a capture must not
do: write a file (``WriteFile``, ``PrintV2`` to ``file://``, also inside the ``init`` op, a
``.meta``'s ``train_op``, an event file's graph, a SavedModel's serving function), read one
(``ReadFile`` of a FIFO: reading it would block forever), or block (``Unstage`` on an empty
staging area, a TF1 ``FIFOQueue`` dequeue). Each goes through the default route of the commands
users run; nothing may be written or read, every run ends in seconds, and the route line says
that nothing of the model ran. A program (which is code, and runs) runs in the sandbox: no
secret in its environment, another home, no network where the system allows a namespace; and
``kill -9`` of jitsim leaves neither its TF process nor a file.
"""

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.tf

MAKE = textwrap.dedent(
    """
    import os, sys, tensorflow as tf
    from google.protobuf import text_format
    out, mark = sys.argv[1], sys.argv[2]
    def w(name):  # a file the graph would write if it ran
        return os.path.join(mark, name)
    # a TF1 graph whose call writes, whose init writes too, that reads a FIFO and prints to a file
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 4], name="x")
        v = tf.compat.v1.get_variable("v", [4, 4])
        y = tf.nn.relu(tf.matmul(x, v) + 1.0) * 2.0
        data = tf.io.read_file(os.path.join(mark, "fifo"))
        loss = tf.identity(tf.reduce_sum(y) + tf.cast(tf.strings.length(data), tf.float32), name="loss")
        wr = tf.io.write_file(w("graphdef_call"), tf.strings.as_string(loss), name="writer")
        pr = tf.print(loss, output_stream="file://" + w("graphdef_print"), name="printer")
        with tf.control_dependencies([v.initializer, tf.io.write_file(w("graphdef_init"), "x")]):
            tf.no_op(name="init")
        train = tf.group(tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(loss), wr, pr, name="train")
        tf.compat.v1.add_to_collection("train_op", train)
        tf.compat.v1.train.export_meta_graph(os.path.join(out, "writes.meta"), graph=g)
    open(os.path.join(out, "writes.pbtxt"), "w").write(text_format.MessageToString(g.as_graph_def()))
    writer = tf.summary.create_file_writer(os.path.join(out, "events"))
    with writer.as_default():
        tf.summary.graph(g)
    writer.flush()
    # blocking: a staging area nobody filled, a queue nobody enqueued into
    g = tf.Graph()
    with g.as_default():
        st = tf.raw_ops.Unstage(dtypes=[tf.float32], name="unstage")
        tf.identity(tf.nn.relu(st[0] * 2.0 + 1.0) * 3.0, name="out")
    open(os.path.join(out, "unstage.pbtxt"), "w").write(text_format.MessageToString(g.as_graph_def()))
    g = tf.Graph()
    with g.as_default():
        q = tf.compat.v1.FIFOQueue(4, [tf.float32], shapes=[[2, 4]], name="q")
        batch = q.dequeue(name="batch")
        tf.identity(tf.reduce_sum(tf.nn.relu(batch * 2.0 + 1.0)), name="loss")
    open(os.path.join(out, "queue.pbtxt"), "w").write(text_format.MessageToString(g.as_graph_def()))
    # a SavedModel whose serving function writes, prints to a file, and fails on generated inputs
    class M(tf.Module):
        def __init__(self):
            self.v = tf.Variable(tf.ones([4, 4]))
        @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name="x"),
                                      tf.TensorSpec([2], tf.int64, name="ids")])
        def serve(self, x, ids):
            tf.debugging.assert_equal(ids, tf.constant([7, 9], tf.int64), message="ids must be 7, 9")
            y = tf.nn.relu(tf.matmul(x, self.v) + 1.0) * 2.0
            tf.io.write_file(w("saved_model_call"), tf.strings.as_string(tf.reduce_sum(y)))
            tf.print(y, output_stream="file://" + w("saved_model_print"))
            return {"y": y * tf.cast(tf.reduce_sum(ids), tf.float32)}
    m = M()
    tf.saved_model.save(m, os.path.join(out, "sm"), signatures={"serving_default": m.serve})
    # a TF1 SavedModel whose main op (run by the loader) writes and initializes a table
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 4], name="x")
        ids = tf.compat.v1.placeholder(tf.string, [2], name="ids")
        v = tf.compat.v1.get_variable("v", [4, 4])
        table = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(["a", "b"], [1, 2], tf.string,
                                                                              tf.int64), -1)
        z = tf.nn.relu(tf.matmul(x, v) + 1.0) * tf.cast(tf.reduce_sum(table.lookup(ids)), tf.float32)
        init = tf.group(tf.compat.v1.tables_initializer(), tf.io.write_file(w("tf1_saved_model_init"), "x"),
                        name="init_all")
        with tf.compat.v1.Session(graph=g) as sess:
            sess.run(v.initializer)
            b = tf.compat.v1.saved_model.Builder(os.path.join(out, "sm_tf1"))
            sig = tf.compat.v1.saved_model.predict_signature_def({"x": x, "ids": ids}, {"z": z})
            b.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={"serving_default": sig}, main_op=init)
            b.save()
    """
)


@pytest.fixture(scope="module")
def targets(tmp_path_factory):
    d = tmp_path_factory.mktemp("safety")
    mark = d / "marks"
    mark.mkdir()
    os.mkfifo(mark / "fifo")
    r = subprocess.run([sys.executable, "-c", MAKE, str(d), str(mark)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-2000:]
    events = next((d / "events").iterdir())
    return d, mark, events


def _jitsim(*args, env=None, timeout=120):
    return subprocess.run([sys.executable, "-m", "jitsim.cli", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, **(env or {})})


def _written(mark: Path) -> list[str]:
    return sorted(p.name for p in mark.iterdir() if p.name != "fifo")


@pytest.mark.parametrize("name,extra", [
    ("writes.pbtxt", ()),
    ("writes.pbtxt", ("--fetch", "train", "--fetch", "loss:0", "--feed", "x")),
    ("writes.meta", ()),
    ("events", ()),
    ("sm", ()),
    ("sm_tf1", ()),
])
def test_a_graph_that_writes_writes_nothing_and_reads_no_fifo(targets, tmp_path, name, extra):
    d, mark, events = targets
    target = events if name == "events" else d / name
    cache = tmp_path / "cache"
    t0 = time.monotonic()
    for command in (["cluster"], ["explain", "loss" if name != "sm" else "Relu"], ["report", "-o", tmp_path / "r.html"],
                    ["render", "-o", tmp_path / "r.dot"], ["whatif", "--tf-xla-flags=--tf_xla_min_cluster_size=1"], ["runtime"]):
        if command[0] == "explain" and name == "events":
            continue
        r = _jitsim(*command[:1], target, *command[1:], *extra, env={"JITSIM_CACHE": str(cache)})
        # explain may find several MatMuls (exit 2, a one-line message); the others succeed
        assert r.returncode == 0 or (command[0] == "explain" and r.returncode == 2), (command, r.stderr)
        assert _written(mark) == [], (command, _written(mark))
    assert time.monotonic() - t0 < 100  # the FIFO was never opened: a read would block until the timeout
    r = _jitsim("cluster", target, *extra, "--format", "json", env={"JITSIM_CACHE": str(cache)})
    route = json.loads(r.stdout)["route"]
    assert route["method"] == "tf-capture" and "ran none of it" in route["detail"], route


def test_a_saved_model_that_fails_on_generated_inputs_is_exact(targets, tmp_path):
    """Nothing runs, so the model's own checks (assert_equal on an id feature) never fire: TF's
    graph is the pass input and the result is exact, not a fallback."""
    d, _, _ = targets
    r = _jitsim("cluster", d / "sm", "--format", "json", env={"JITSIM_CACHE": str(tmp_path / "c")})
    route = json.loads(r.stdout)["route"]
    assert r.returncode == 0 and route["exact"] and route["method"] == "tf-capture", route


@pytest.mark.parametrize("name", ["unstage.pbtxt", "queue.pbtxt"])
def test_a_blocking_graph_finishes_in_seconds(targets, tmp_path, name):
    d, _, _ = targets
    t0 = time.monotonic()
    r = _jitsim("cluster", d / name, env={"JITSIM_CACHE": str(tmp_path / "c")}, timeout=100)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - t0 < 60 and "ran none of it" in r.stdout


PROGRAM = textwrap.dedent(
    """
    import os, socket, sys, tensorflow as tf
    assert "JITSIM_TEST_SECRET" not in os.environ, "a secret reached the TF process"
    assert os.environ["HOME"] != REAL_HOME, "the TF process got the user's home"
    try:
        socket.create_connection(("127.0.0.1", PORT), timeout=2).close()
        reached = True
    except OSError:
        reached = False
    open(os.path.join(os.environ["TMPDIR"], "net"), "w").write(str(reached))
    print("JITSIM_TEST_NET=" + str(reached))
    @tf.function
    def f(x):
        return tf.nn.relu(x * 2.0 + 1.0) - x
    f(tf.ones([2]))
    """
)


def test_a_program_runs_in_the_sandbox(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    port = server.getsockname()[1]
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM.replace("REAL_HOME", repr(os.path.expanduser("~"))).replace("PORT", str(port)))
    try:
        r = _jitsim("cluster", prog, "--format", "json",
                    env={"JITSIM_CACHE": str(tmp_path / "c"), "JITSIM_TEST_SECRET": "hunter2"})
    finally:
        server.close()
    assert r.returncode == 0, r.stderr
    route = json.loads(r.stdout)["route"]
    assert "sandbox" in route["detail"] and "credentials" in route["detail"], route
    entry = next(p for p in (tmp_path / "c").iterdir() if not p.name.startswith("."))
    index = json.loads((entry / "index.json").read_text())
    log = (entry / "log.txt").read_text()
    assert index["run"]["isolated"] and "hunter2" not in log
    if index["run"]["network"] == "isolated":  # where the system allows a network namespace
        assert "JITSIM_TEST_NET=False" in log
        assert "no network" in route["detail"]


def test_kill_9_of_jitsim_leaves_no_process_and_no_file(tmp_path):
    prog = tmp_path / "sleeper.py"
    prog.write_text("import time, tensorflow as tf\n"
                    "tf.function(lambda x: tf.nn.relu(x * 2.0) + 1.0)(tf.ones([2]))\n"
                    "print('SLEEPING', flush=True)\ntime.sleep(300)\n")
    tmp, cache = tmp_path / "tmp", tmp_path / "cache"
    tmp.mkdir()
    env = {**os.environ, "TMPDIR": str(tmp), "JITSIM_CACHE": str(cache)}
    p = subprocess.Popen([sys.executable, "-m", "jitsim.cli", "cluster", str(prog)], env=env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    log = None
    while time.monotonic() < deadline:  # until TF runs the program's sleep
        logs = list(cache.glob(".*/log.txt"))
        if logs and "SLEEPING" in logs[0].read_text(errors="replace"):
            log = logs[0]
            break
        time.sleep(0.5)
    assert log is not None, "the TF run never started"
    tf_pids = [pid for pid in _pids_running(str(prog)) if pid != p.pid]
    assert tf_pids
    p.send_signal(signal.SIGKILL)
    p.wait()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        alive = [pid for pid in tf_pids if _alive(pid)]
        left = list(tmp.iterdir()) + [x for x in cache.iterdir()] if cache.exists() else list(tmp.iterdir())
        if not alive and not left:
            break
        time.sleep(0.5)
    assert not alive, alive
    assert not left, left


def _pids_running(text: str) -> list[int]:
    """The processes whose command line mentions ``text`` (read from /proc: no pgrep needed)."""
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if text in (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                    out.append(int(d.name))
            except OSError:
                pass
    return out


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie is gone for our purpose
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except OSError:
        return False


# -- what a cached capture depends on -----------------------------------------------------------


def test_a_program_capture_is_run_again_when_a_module_it_imports_changes(tmp_path):
    from jitsim.frontend.capture import capture

    (tmp_path / "helper.py").write_text("SCALE = 2.0\n")
    prog = tmp_path / "prog.py"
    prog.write_text("import tensorflow as tf\nfrom helper import SCALE\n"
                    "tf.function(lambda x: tf.nn.relu(x * SCALE) + 1.0)(tf.ones([2]))\n")
    flags = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
    first = capture(prog, flags=flags, cache_dir=tmp_path / "c")
    assert not first.cached
    assert any(e["path"] == str((tmp_path / "helper.py").resolve()) for e in first.index["program_files"])
    assert capture(prog, flags=flags, cache_dir=tmp_path / "c").cached
    (tmp_path / "helper.py").write_text("SCALE = 3.0\n")
    third = capture(prog, flags=flags, cache_dir=tmp_path / "c")
    assert not third.cached and any("helper.py changed since the cached capture" in n for n in third.notes), third.notes


def test_a_program_that_fails_after_tf_built_its_graph_keeps_it(tmp_path):
    """The program's call fails at run time (its own check) after TF dumped the call's graph: the
    capture keeps what TF built, and a note names the node that failed."""
    from jitsim.frontend.capture import capture

    prog = tmp_path / "prog.py"
    prog.write_text("import tensorflow as tf\n"
                    "@tf.function\n"
                    "def f(x):\n"
                    "    tf.debugging.assert_equal(tf.reduce_sum(x), 99.0, message='sum must be 99', name='sum_check')\n"
                    "    return tf.nn.relu(x * 2.0 + 1.0) - x\n"
                    "f(tf.ones([2]))\n")
    cap = capture(prog, flags="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit", cache_dir=tmp_path / "c")
    assert cap.main_graph is not None
    note = next(n for n in cap.notes if n.startswith("the call failed after TensorFlow built its graph"))
    assert "sum_check" in note, note


def test_kernel_files_a_program_read_are_not_cache_inputs(tmp_path):
    """A program whose libraries read /proc/stat (psutil does, when installed): the file is
    the machine's state and changes on every read, so it is no input of the capture (else the
    capture would never be reused; found when psutil came into the test venv)."""
    import json as _json

    from jitsim.tfprocess.harvest import program_files

    helper = tmp_path / "helper.py"
    helper.write_text("X = 1\n")
    deps = tmp_path / "deps.json"
    deps.write_text(_json.dumps(["/proc/stat", "/proc/self/status", str(helper)]))
    assert [e["path"] for e in program_files(deps, tmp_path / "prog.py")] == [str(helper)]
