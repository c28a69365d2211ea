"""Robust, round 3 (issue 39). Names from a graph reach the terminal as text: an op type, a cluster mark or a file
name with rich markup is printed as it is (not parsed, not an internal error), and control
characters (an OSC title sequence in a graph's _XlaCluster value) are written as escapes, never
sent to the terminal. (TF refuses such node names: jitsim says so in its one error line, which
was already escaped.)"""

import subprocess
import sys
from pathlib import Path

import pytest

from graphs import F32, Shape, Tensor, Type, graph_of
from jitsim.graph.io import save

ROOT = Path(__file__).resolve().parents[1]

ESC_TITLE = "\x1b]0;pwned\x07"


def _graph(tmp_path, name="g.pbtxt") -> Path:
    t = {"T": Type(F32)}
    nodes = [("x", "Placeholder", [], {"dtype": Type(F32)}),
             ("a", "Relu", ["x"], t), ("b", "Sigmoid", ["a"], t),
             ("m", "Mk[/x]", ["b"], {}), ("c", "Tanh", ["m"], t), ("d", "Exp", ["c"], t),
             ("marked", "Neg", ["d"], {**t, "_XlaCluster": "c[bold]" + ESC_TITLE})]
    path = tmp_path / name
    save(graph_of(nodes), path)
    return path


def _run(*args):
    return subprocess.run([sys.executable, "-m", "jitsim.cli", *map(str, args)], capture_output=True, text=True)


@pytest.mark.parametrize("command", [["show"], ["cluster", "--tf", "never"], ["explain", "--tf", "never", "Mk"]])
def test_hostile_names_are_printed_as_text(tmp_path, command):
    path = _graph(tmp_path)
    args = [command[0], path, *command[1:]] if command[0] != "explain" else ["explain", path, "m", "--tf", "never"]
    p = _run(*args)
    assert p.returncode == 0, p.stderr
    assert "\x1b" not in p.stdout and "\x07" not in p.stdout and "\x1b" not in p.stderr
    if command[0] == "show":
        assert "Mk[/x]" in p.stdout and "c[bold]\\x1b]0;pwned\\x07" in p.stdout
    if command[0] == "explain":
        assert "Mk[/x]" in p.stdout


def test_a_file_name_with_markup_is_shown_as_it_is(tmp_path):
    path = _graph(tmp_path, "g[bold]B[reverse]R.pbtxt")
    p = _run("show", path)
    assert p.returncode == 0 and "g[bold]B[reverse]R.pbtxt" in p.stdout, p.stdout + p.stderr


def test_registry_export_without_tensorflow_is_one_line(tmp_path):
    """`jitsim registry export --import tensorflow_text` where TensorFlow is not importable (a
    `tensorflow` that cannot be found: an empty package directory shadows nothing, so the test
    hides it with a meta-path finder): one `jitsim:` line naming the extra to install, exit 2,
    not an internal error (issue 39, item 10)."""
    code = ("import sys, importlib.abc\n"
            "class Hide(importlib.abc.MetaPathFinder):\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'tensorflow' or name.startswith('tensorflow.'):\n"
            "            raise ModuleNotFoundError(name)\n"
            "sys.meta_path.insert(0, Hide())\n"
            "import importlib.util\n"
            "_find = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda n, *a: None if n.split('.')[0] == 'tensorflow' else _find(n, *a)\n"
            "from jitsim.cli import main\n"
            f"sys.exit(main(['registry', 'export', '--import', 'tensorflow_text', '-o', {str(tmp_path / 'o.json')!r}]))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jitsim: ") and "jitsim[tf]" in lines[0]
    assert not (tmp_path / "o.json").exists()


def test_cache_directories_are_private_whatever_the_umask(tmp_path):
    """Under umask 000, the parse cache and the capture cache jitsim creates are 0700 at every
    level it creates (another local user cannot plant or read entries; issue 39, item 6)."""
    big = ROOT / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt"
    code = ("import os, sys\n"
            "os.umask(0)\n"
            "from jitsim.graph import parse_cache\n"
            "from jitsim.frontend.capture import usable_cache_dir\n"
            "parse_cache.MIN_BYTES = 0\n"
            f"usable_cache_dir(__import__('pathlib').Path({str(tmp_path / 'cap' / 'a' / 'b')!r}))\n"
            "from jitsim.cli import main\n"
            f"sys.exit(main(['show', {str(big)!r}]))\n")
    env = {**__import__("os").environ, "JITSIM_PARSE_CACHE": str(tmp_path / "parsed" / "x")}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert p.returncode == 0, p.stderr
    made = [d for d in tmp_path.rglob("*") if d.is_dir()]
    assert any("parsed" in str(d) for d in made[1:]) and (tmp_path / "cap" / "a" / "b").is_dir()
    assert {oct(d.stat().st_mode & 0o777) for d in made} == {"0o700"}, [(str(d), oct(d.stat().st_mode)) for d in made]


def test_one_cluster_is_one_cluster(tmp_path):
    """'1 clusters' read as a bug to a newcomer (issue 39, item 11): counts are in words, one
    rule for every message (jitsim.words.count)."""
    t = {"T": Type(F32)}
    path = tmp_path / "one.pbtxt"
    g = graph_of([("x", "Placeholder", [], {"dtype": Type(F32)}), ("a", "Relu", ["x"], t),
                   ("b", "Sigmoid", ["a"], t), ("c", "Tanh", ["b"], t), ("d", "Exp", ["c"], t)])
    for nd in g.graphdef.node:
        nd.device = "/job:localhost/replica:0/task:0/device:CPU:0"
    save(g, path)
    stage = ("--input-stage", "before_clone_constants_for_better_clustering")
    p = _run("cluster", path, "--tf", "never", *stage)
    assert p.returncode == 0 and "1 cluster (" in p.stdout and "1 clusters" not in p.stdout, p.stdout
    p = _run("render", path, "--tf", "never", *stage, "-o", tmp_path / "g.dot")
    assert p.returncode == 0 and "(1 cluster," in p.stderr and "1 clusters" not in p.stderr, p.stderr


def test_explain_a_cluster_by_its_name():
    """`jitsim explain GRAPH cluster_0` (no --shapes) said "no node named or matching
    'cluster_0'" (issue 39, item 11): it explains the cluster (its nodes, where to go next)."""
    g = ROOT / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt"
    p = _run("explain", g, "cluster_0")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("cluster_0 is a cluster of 6 nodes") and "--shapes" in p.stdout
    import json

    doc = json.loads(_run("explain", g, "cluster_0", "--format", "json").stdout)
    assert doc["kind"] == "cluster" and doc["size"] == len(doc["members"]) == 6


def test_the_docs_index_lists_every_page():
    """docs/ had no index (issue 39, item 12): docs/README.md lists every page, and the README
    points to it."""
    import re

    index = (ROOT / "docs" / "README.md").read_text()
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"README.md"}
    assert pages <= set(re.findall(r"\]\(([\w.-]+\.md)\)", index)), pages - set(re.findall(r"\(([\w.-]+\.md)\)", index))
    assert "docs/README.md" in (ROOT / "README.md").read_text()


def test_a_tar_gz_of_a_saved_model_is_named_for_what_it_is(tmp_path):
    """A .tar.gz of a SavedModel was reported as a corrupt GraphDef (a .tar was recognised;
    issue 39, item 7): the archive inside the gzip is named, with what to do."""
    import io
    import tarfile

    sm = tmp_path / "sm"
    sm.mkdir()
    (sm / "saved_model.pb").write_bytes(b"\x0a\x00")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        tar.add(sm, arcname="sm")
    (tmp_path / "model.tar.gz").write_bytes(buf.getvalue())
    p = _run("show", tmp_path / "model.tar.gz")
    assert p.returncode == 2 and "gzip-compressed tar archive" in p.stderr and "tar -xzf" in p.stderr, p.stderr


def test_a_fetch_named_after_a_python_variable_lists_the_likely_fetches(tmp_path):
    """`--fetch train_step` where `train_step` is the program's Python variable (the op is
    `GradientDescent`) said only "no node 'train_step'" (issue 39, item 7): the message lists
    the graph's training ops and its sinks."""
    t = {"T": Type(F32)}
    g = graph_of([("x", "Placeholder", [], {"dtype": Type(F32)}),
                  ("w", "VariableV2", [], {"dtype": Type(F32), "shape": Shape(())}),
                  ("y", "Mul", ["x", "w"], t), ("loss", "Neg", ["y"], t),
                  ("lr", "Const", [], {"dtype": Type(F32), "value": Tensor(F32, ())}),
                  ("GradientDescent/update_w/ApplyGradientDescent", "ApplyGradientDescent", ["w", "lr", "loss"], t),
                  ("GradientDescent", "NoOp", ["^GradientDescent/update_w/ApplyGradientDescent"], {})])
    path = tmp_path / "g.pbtxt"
    save(g, path)
    p = _run("cluster", path, "--fetch", "train_step", "--tf", "never")
    assert p.returncode == 2, p.stderr
    line = p.stderr.strip()
    assert "no node 'train_step'" in line and "training ops: GradientDescent" in line, line


def test_a_const_whose_value_is_not_its_dtype_is_a_pass_input_with_a_note(tmp_path):
    """TF's WhereUnsupported mark test builds a Const whose dtype (int32) is not its value's
    (a float tensor): TF's passes take it (issue 39, item 8). Taken as TF's pass input
    (--input-stage), jitsim accepts it with a note; as a GraphDef TF would import, it is still
    refused (TF 2.21's importer aborts on it)."""
    t = {"T": Type(F32)}
    g = graph_of([("c", "Const", [], {"dtype": Type(3), "value": Tensor(F32, (2,))}),
                  ("x", "Placeholder", [], {"dtype": Type(F32)}), ("a", "Relu", ["x"], t)])
    path = tmp_path / "g.pbtxt"
    save(g, path)
    p = _run("cluster", path, "--tf", "never", "--input-stage", "graphdef")
    assert p.returncode == 0, p.stderr
    assert "note: node 'c' (Const): attr 'value' holds a DT_FLOAT tensor, but attr 'dtype' is DT_INT32" in p.stderr
    p = _run("cluster", path, "--tf", "never")
    assert p.returncode == 2 and "attr 'dtype' is DT_INT32" in p.stderr


def test_a_saved_model_pb_that_is_not_one_says_so(tmp_path):
    """A GraphDef saved as saved_model.pb gave "the graph has no nodes" and a saved_model.pb
    symlink loop "holds no TF dump files" (issue 39, item 7): each names the real problem."""
    from jitsim.graph.io import read_graphdef

    a = tmp_path / "a"
    a.mkdir()
    gd = read_graphdef(ROOT / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt")
    (a / "saved_model.pb").write_bytes(gd.SerializeToString())
    p = _run("cluster", a, "--tf", "never")
    assert p.returncode == 2 and "holds a GraphDef, not a SavedModel" in p.stderr, p.stderr
    b = tmp_path / "b"
    b.mkdir()
    (b / "saved_model.pb").symlink_to(b / "saved_model.pb")
    p = _run("cluster", b, "--tf", "never")
    assert p.returncode == 2 and "saved_model.pb" in p.stderr and "dump" not in p.stderr, p.stderr


def test_diff_against_tf_marked_output_points_to_compare(tmp_path):
    """`diff GRAPH TF_MARKED_DUMP` marked every node GRAPH_ALREADY_CLUSTERED without a word (issue
    39, item 11): a note says why and points to `crosscheck compare`."""
    from jitsim.crosscheck.corpus import Corpus
    from jitsim.graph.dumps import dump_dir

    corpus = Corpus()  # (held: its extracted runs go with it)
    where = dump_dir(corpus.extract("mnist_softmax"))
    rec = [r for r in where.records() if "mark_for_compilation" in r.files][-1]
    p = _run("diff", where.dumps / rec.files["before_clone_constants_for_better_clustering"],
             where.dumps / rec.files["mark_for_compilation"], "--tf", "never", "--format", "json")
    import json

    notes = json.loads(p.stdout)["notes"]
    corpus.close()
    assert any("already carries TF's clustering" in n and "crosscheck compare" in n for n in notes), notes


def test_profile_without_its_extra_names_the_profile_extra(tmp_path):
    """profile's "not installed" hint named jitsim[tf] (issue 39, item 11): it needs the profile
    extra (TF and xprof), checked before any run."""
    code = ("import sys, importlib.util\n"
            "_find = importlib.util.find_spec\n"
            "importlib.util.find_spec = lambda n, *a: None if n.split('.')[0] == 'xprof' else _find(n, *a)\n"
            "from jitsim.cli import main\n"
            f"sys.exit(main(['profile', {str(ROOT / 'fixtures' / 'runtime' / 'programs' / 'mlp_batch.py')!r}, "
            f"'-o', {str(tmp_path / 'p')!r}]))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert p.returncode == 2 and "jitsim[profile]" in p.stderr and "xprof" in p.stderr, p.stderr
    assert not (tmp_path / "p").exists()


def test_a_fed_placeholder_is_found_by_its_own_name(tmp_path):
    """explain x, where the session rewrite renamed the fed placeholder x to _arg_x_0_0, said
    "'x' matches 4 nodes" (issue 39, item 9): x resolves to what became of it, with a note."""
    from jitsim.explain.clustering import find_node

    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert find_node(["axis", "as_text", "_arg_x_0_0", "x_1", "_retval_y_0_0"], "x") == "_arg_x_0_0"
        assert find_node(["axis", "_arg_x_0_0", "_retval_y_0_0", "y_grad"], "y") == "_retval_y_0_0"
    assert [str(w.message) for w in seen][0].startswith("'x' is the call's feed: TF's session rewrite replaced it")


@pytest.mark.tf
def test_a_keras_lambda_refusal_is_said_whole(tmp_path):
    """The Keras Lambda refusal was cut mid-sentence (issue 39, item 7): TF's last error is
    kept whole up to 800 characters, else cut after a whole sentence."""
    make = ("import sys, keras\n"
            "inp = keras.Input((4,)); out = keras.layers.Lambda(lambda t: t * 2.0)(inp)\n"
            "keras.Model(inp, out).save(sys.argv[1])\n")
    subprocess.run([sys.executable, "-c", make, str(tmp_path / "lam.keras")], check=True, capture_output=True)
    p = _run("cluster", tmp_path / "lam.keras", "--tf", "always")
    assert p.returncode != 0 and "Lambda" in p.stderr
    assert p.stderr.strip().endswith("enable_unsafe_deserialization()."), p.stderr


def test_a_full_disk_names_the_output_and_leaves_no_empty_directory(tmp_path, monkeypatch, capsys):
    """A write that fails with ENOSPC and names no file said only "cannot use: No space left on
    device", and --tensorboard left an empty directory (issue 39, item 5): the line names the
    command's output, and the TensorBoard directory jitsim made is removed."""
    import errno

    from jitsim.cli import main
    from jitsim.graph import events

    def full(*a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(events, "write_graph_event_file", full)
    g = ROOT / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt"
    tb = tmp_path / "tb"
    rc = main(["cluster", str(g), "--tf", "never", "--tensorboard", str(tb)])
    err = capsys.readouterr().err
    assert rc == 2 and "No space left on device" in err and str(g) in err, err
    assert not tb.exists()


def test_the_cluster_tables_words_are_defined_where_the_report_points():
    """A newcomer met "candidates" and "effective" undefined. The report's last line points to
    the section that defines them, and that section defines every word the tables use; the
    effective size it states matches the table (MNIST's cluster_0: Const x2 plus 4 other ops,
    so 6 nodes, effective 4)."""
    g = ROOT / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt"
    p = _run("cluster", g)
    assert p.returncode == 0, p.stderr
    last = p.stdout.strip().splitlines()[-1]
    assert "docs/reasons.md#words" in last and "jitsim explain" in last
    row = next(line for line in p.stdout.splitlines() if "cluster_0" in line)
    assert [c.strip() for c in row.split("│")[2:4]] == ["6", "4"]
    doc = (ROOT / "docs" / "reasons.md").read_text()
    assert '<a id="words"></a>' in doc
    words = doc.split('<a id="words"></a>', 1)[1].split("\n## ", 2)[1]
    for word in ("**candidate**", "**nodes**", "**effective**", "**reason**", "CLUSTER_TOO_SMALL",
                 "--tf_xla_min_cluster_size` (4 by"):
        assert word in words, word
    # the stated default is the pass's
    from jitsim.flags import parse_tf_xla_flags
    assert parse_tf_xla_flags("").min_cluster_size == 4


def test_harvest_of_a_function_export_says_why_it_cannot_feed_it(tmp_path):
    """A tf.function's GraphDef (cf.graph.as_graph_def()) holds its captured variables as
    resource placeholders; `crosscheck harvest` runs a GraphDef as a TF1 session, which cannot
    feed them. It used to end with "TensorFlow run failed (exit 1): KeyError: 20"; now the line
    names the placeholder and the routes that do call the function."""
    tf = pytest.importorskip("tensorflow")
    v = tf.Variable(tf.ones([3]))

    @tf.function(input_signature=[tf.TensorSpec([3], tf.float32)])
    def f(x):
        return x * v

    g = tmp_path / "export.pbtxt"
    g.write_text(str(f.get_concrete_function().graph.as_graph_def()))
    p = _run("crosscheck", "harvest", g, "-o", tmp_path / "out")
    assert p.returncode != 0
    line = [l for l in p.stderr.splitlines() if l.startswith("jitsim:")][-1]
    assert "KeyError" not in line and "resource handle" in line and "--tf always" in line


def test_a_node_the_remapper_fused_resolves_to_what_it_became(tmp_path):
    """Item 9: `explain G dense1/MatMul`, where Grappler's remapper fuses MatMul + BiasAdd + Relu
    into one _FusedMatMul under the Relu's name `out` (a different scope), explains `out` and
    says so, where it used to answer "did you mean dense1/BiasAdd?"."""
    from graphs import Tensor

    t = {"T": Type(F32)}
    nodes = [("x", "_Arg", [], {"T": Type(F32), "index": 0}),
             ("w", "Const", [], {"dtype": Type(F32), "value": Tensor(F32, (4, 4))}),
             ("b", "Const", [], {"dtype": Type(F32), "value": Tensor(F32, (4,))}),
             ("dense1/MatMul", "MatMul", ["x", "w"], t), ("dense1/BiasAdd", "BiasAdd", ["dense1/MatMul", "b"], t),
             ("out", "Relu", ["dense1/BiasAdd"], t), ("r", "_Retval", ["out"], {"T": Type(F32), "index": 0})]
    path = tmp_path / "fused.pbtxt"
    save(graph_of(nodes), path)
    for name in ("dense1/MatMul", "dense1/BiasAdd"):
        p = _run("explain", path, name, "--tf", "never")
        assert p.returncode == 0, p.stderr
        assert p.stdout.startswith("out (_FusedMatMul")
        assert f"'{name}' is not in the graph TF clusters: fused by Grappler's remapper into 'out' (_FusedMatMul)" \
            in p.stderr
