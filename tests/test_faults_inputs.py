"""Faults in what jitsim reads (issue 22, items A3, A4, B14, B15): damaged caches, gzip
streams of several members, TF_XLA_FLAGS values TF aborts on, graphs TF's importer refuses,
inputs that are not what their name says. Single-file cases live in tests/bad_inputs (the
manifest); here are those that need more than one input file, a second run, or real TF."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import pytest

from jitsim.cli import main
from jitsim.errors import GraphError, JitsimWarning
from jitsim.graph import io, parse_cache
from jitsim.registry import protos
from jitsim.graph.io import read_graphdef
from jitsim.flags import FlagError, parse_tf_xla_flags

HERE = Path(__file__).resolve().parent


def _run(argv, capsys):
    try:
        rc = main(argv)
    except SystemExit as e:
        rc = e.code
    out = capsys.readouterr()
    assert "Traceback" not in out.err
    return rc, out.out, out.err


def _graph(n: int):
    """A chain of ``n`` NoOp-free nodes: Placeholder then Identity after Identity."""
    gd = protos.GraphDef()
    x = gd.node.add(name="n0", op="Placeholder")
    x.attr["dtype"].type = 1
    for i in range(1, n):
        nd = gd.node.add(name=f"n{i}", op="Identity", input=[f"n{i - 1}"])
        nd.attr["T"].type = 1
    return gd


# -- A3: the parsed-text cache -----------------------------------------------------------------

def _big_text(n: int = 6000) -> bytes:
    data = io.to_text(_graph(n)).encode()
    assert len(data) >= parse_cache.MIN_BYTES
    return data


def test_a_changed_byte_in_a_cache_entry_is_detected_and_the_entry_rewritten(tmp_path, monkeypatch):
    """One byte of the payload changed (here: a node name, so the damaged graph would still
    parse and be wrong): the read gives the file's own graph, and the entry is written anew."""
    monkeypatch.setenv("JITSIM_PARSE_CACHE", str(tmp_path / "cache"))
    f = tmp_path / "g.pbtxt"
    f.write_bytes(_big_text())
    first = read_graphdef(f)
    (entry,) = (tmp_path / "cache").rglob("*.binpb")
    blob = bytearray(entry.read_bytes())
    at = blob.index(b"n4321")
    blob[at + 1] = ord("X")  # 'nX321': still a valid GraphDef, with a node name the file lacks
    entry.write_bytes(bytes(blob))
    second = read_graphdef(f)
    assert second == first
    assert b"nX321" not in entry.read_bytes()  # rewritten from the text
    assert parse_cache.verified_payload(entry.read_bytes(), entry.stem) is not None


def test_an_entry_copied_under_another_key_is_not_used(tmp_path, monkeypatch):
    """The checksum covers the key: a valid entry of graph A placed under graph B's key is
    refused, and B's own graph is read."""
    monkeypatch.setenv("JITSIM_PARSE_CACHE", str(tmp_path / "cache"))
    a, b = tmp_path / "a.pbtxt", tmp_path / "b.pbtxt"
    a.write_bytes(_big_text(6000))
    b.write_bytes(_big_text(6001))
    read_graphdef(a)
    (entry_a,) = (tmp_path / "cache").rglob("*.binpb")
    key_b = parse_cache.ParseCache(tmp_path / "cache").key(b.read_bytes(), protos.GraphDef())
    path_b = tmp_path / "cache" / key_b[:2] / f"{key_b}.binpb"
    path_b.parent.mkdir(parents=True, exist_ok=True)
    path_b.write_bytes(entry_a.read_bytes())
    assert len(read_graphdef(b).node) == 6001


def test_a_cache_entry_that_is_a_link_to_dev_zero_is_never_read(tmp_path, monkeypatch):
    """An entry replaced by a link to /dev/zero (or a pipe) would never end: it is not
    followed, it is removed, and a real entry is written in its place."""
    monkeypatch.setenv("JITSIM_PARSE_CACHE", str(tmp_path / "cache"))
    f = tmp_path / "g.pbtxt"
    f.write_bytes(_big_text())
    first = read_graphdef(f)
    (entry,) = (tmp_path / "cache").rglob("*.binpb")
    entry.unlink()
    entry.symlink_to("/dev/zero")
    assert read_graphdef(f) == first
    assert entry.is_file() and not entry.is_symlink()
    entry.unlink()
    os.mkfifo(entry)
    assert read_graphdef(f) == first
    assert entry.is_file()


# -- A3: the capture cache -----------------------------------------------------------------------

def _fake_entry(root: Path, key: str) -> Path:
    """A capture cache entry as harvest leaves it: dumps, index.json (holding the key), and
    checksums.sha256 written last, over all of them."""
    from jitsim.tfprocess.harvest import write_checksums

    out = root / key
    (out / "dumps").mkdir(parents=True)
    (out / "dumps" / "before_mark_for_compilation.pbtxt").write_text(io.to_text(_graph(5)))
    (out / "log.txt").write_text("log\n")
    (out / "index.json").write_text(json.dumps({"capture": {"key": key}, "main_graph": 1}))
    write_checksums(out)
    return out


def test_a_capture_entry_is_used_only_when_whole_and_unchanged(tmp_path):
    from jitsim.frontend.capture import _verified_entry

    out = _fake_entry(tmp_path, "k1")
    assert _verified_entry(out, "k1") == {"capture": {"key": "k1"}, "main_graph": 1}
    assert _verified_entry(out, "k2") is None  # an entry copied to another key
    dump = out / "dumps" / "before_mark_for_compilation.pbtxt"
    good = dump.read_bytes()
    dump.write_bytes(good.replace(b"n3", b"n9", 1))  # one changed byte
    assert _verified_entry(out, "k1") is None
    dump.write_bytes(good)
    assert _verified_entry(out, "k1") is not None
    (out / "dumps" / "extra.pbtxt").write_text("node { name: 'a' op: 'NoOp' }\n")  # a file added
    assert _verified_entry(out, "k1") is None
    (out / "dumps" / "extra.pbtxt").unlink()
    (out / "log.txt").unlink()  # a file gone
    assert _verified_entry(out, "k1") is None


def test_a_capture_entry_holding_a_pipe_or_link_is_not_used(tmp_path):
    """Files that are not regular (a FIFO would block a reader forever, a link may point
    anywhere) never match the checksums and are never opened."""
    from jitsim.frontend.capture import _verified_entry

    out = _fake_entry(tmp_path, "k1")
    log = out / "log.txt"
    log.unlink()
    os.mkfifo(log)
    assert _verified_entry(out, "k1") is None
    log.unlink()
    log.symlink_to("/dev/zero")
    assert _verified_entry(out, "k1") is None


def test_a_damaged_capture_entry_is_removed(tmp_path):
    from jitsim.frontend.capture import _remove_entry, _verified_entry

    out = _fake_entry(tmp_path, "k1")
    (out / "index.json").write_text("{}")
    assert _verified_entry(out, "k1") is None
    _remove_entry(out)
    assert not out.exists() and list(tmp_path.iterdir()) == []


# -- A4: gzip ----------------------------------------------------------------------------------------

def test_every_gzip_member_is_read(tmp_path):
    """``cat a.gz b.gz`` of a 72-node graph split at a node boundary: all 72 nodes (the first
    member alone holds 31)."""
    text = io.to_text(_graph(72)).encode()
    cut = text.index(b"node {\n  name: \"n31\"")
    f = tmp_path / "g.pbtxt.gz"
    f.write_bytes(gzip.compress(text[:cut]) + gzip.compress(b"") + gzip.compress(text[cut:]))
    assert len(read_graphdef(f).node) == 72


def test_gzip_members_across_read_pieces_and_in_thousands():
    """Members larger than the 1 MiB pieces zlib is fed (incompressible data), and 3,000
    small members as bgzip writes them: every byte comes back, in order."""
    import random

    rnd = random.Random(22)
    big = [rnd.randbytes(1_500_000) for _ in range(3)]
    small = [bytes([65 + i % 26]) * 600 for i in range(3000)]
    parts = big + small
    data = b"".join(gzip.compress(p, compresslevel=1, mtime=0) for p in parts)
    assert io._gunzip(data, Path("x.gz")) == b"".join(parts)


def test_a_gzip_bomb_stops_at_the_limit():
    """Decompression stops at the limit, whatever the compressed size (50 MiB of zeros in
    about 50 kB), and the message says so."""
    bomb = gzip.compress(b"\0" * (50 * 2**20))
    assert len(bomb) < 100_000
    with pytest.raises(GraphError, match="decompresses to more than 1048576 bytes"):
        io._gunzip(bomb, Path("bomb.gz"), limit=2**20)
    # the limit counts every member together
    two = gzip.compress(b"\0" * 600_000) * 2
    with pytest.raises(GraphError, match="more than 1048576"):
        io._gunzip(two, Path("two.gz"), limit=2**20)


# -- B14: TF_XLA_FLAGS as TF 2.21 reads them ---------------------------------------------------------

# What TF 2.21 does with each value, seen by running it (TF_XLA_FLAGS=... python -c 'a tf.function'),
# and why, in tsl/util/command_line_flags.cc and xla/parse_flags_from_env.cc: a bool flag takes
# '=true'/'=false' (any case) or '=1'/'=0' or nothing; an int flag takes what sscanf's %d reads
# whole, within range; there is no '--no' prefix; a string flag needs '='.
REFUSED = [
    ("--tf_xla_auto_jit=yes", "not a jit level"),
    ("--tf_xla_cpu_global_jit=yes", "not a boolean"),
    ("--tf_xla_cpu_global_jit=", "not a boolean"),
    ("--notf_xla_cpu_global_jit", "no --no form"),
    ("--notf_xla_min_cluster_size=2", "no --no form"),
    ("--tf_xla_min_cluster_size=99999999999", "32-bit"),
    ("--tf_xla_min_cluster_size=4x", "not an integer"),
    ("--tf_xla_min_cluster_size=4.0", "not an integer"),
    ("--tf_xla_min_cluster_size", "needs '=value'"),
    ("--tf_xla_auto_jit", "needs '=value'"),
    ("--tf_xla_auto_jit=single-gpu(x)", "not a jit level"),
    ("tf_xla_auto_jit=2", "does not start with '-'"),
    ("-x", "unknown flag"),
]


@pytest.mark.parametrize("text,fragment", REFUSED)
def test_flags_tf_aborts_on_are_refused(text, fragment):
    with pytest.raises(FlagError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        parse_tf_xla_flags(text)


def test_flags_tf_takes_are_read_as_tf_reads_them():
    f = parse_tf_xla_flags("--tf_xla_cpu_global_jit=TRUE --tf_xla_auto_jit=+2 --tf_xla_min_cluster_size=+3 "
                           "--tf_xla_clustering_fuel=99999999999 --tf_xla_ops_to_cluster=\"Add, Mul\"")
    assert (f.cpu_global_jit, f.auto_jit_general, f.min_cluster_size, f.clustering_fuel, f.ops_to_cluster) == \
        (True, 2, 3, 99999999999, "Add, Mul")
    f = parse_tf_xla_flags("--tf_xla_auto_jit=single-gpu(2) --tf_xla_enable_lazy_compilation=0")
    assert (f.auto_jit_single_gpu, f.auto_jit_general, f.enable_lazy_compilation) == (2, 0, False)
    # an unclosed quote runs to the end of the value, as TF's tokenizer reads it
    assert parse_tf_xla_flags("--tf_xla_ops_to_cluster='FUSIBLE").ops_to_cluster == "FUSIBLE"


def test_a_token_without_dash_ends_the_flags_with_a_note():
    """TF's tokenizer stops at the first token not starting with '-' and ignores the rest."""
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        f = parse_tf_xla_flags("--tf_xla_auto_jit=2 junk --tf_xla_min_cluster_size=1 --notaflag")
    assert (f.auto_jit_general, f.min_cluster_size) == (2, 4)
    assert any("ignores the rest" in str(x.message) for x in w)


def test_a_refused_flag_on_the_command_line_is_one_line(tmp_path, capsys):
    g = tmp_path / "g.pbtxt"
    g.write_text(io.to_text(_graph(3)))
    rc, _, err = _run(["cluster", str(g), "--tf", "never", "--tf-xla-flags", "--tf_xla_auto_jit=yes"], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1 and "not a jit level" in err


# -- B14: the importer's refusals, checked against TF 2.21 itself -------------------------------------

_TF_PROBE = r"""
import json, os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np
import tensorflow as tf
from google.protobuf import text_format
tf.compat.v1.disable_eager_execution()
root, ids = sys.argv[1], sys.argv[2:]
for c in json.load(open(os.path.join(root, "manifest.json"))):
    if c["id"] not in ids:
        continue
    data = open(os.path.join(root, "cases", c["input"]), "rb").read()
    gd = tf.compat.v1.GraphDef()
    try:
        gd.ParseFromString(data)
    except Exception:
        gd = tf.compat.v1.GraphDef()
        text_format.Parse(data.decode(), gd)
    g = tf.Graph()
    try:
        with g.as_default():
            tf.graph_util.import_graph_def(gd, name="")
        with tf.compat.v1.Session(graph=g) as s:
            fetch = [n.name for n in gd.node if n.name in ("c", "idn", "mp", "a0")] or ["out"]  # the odd node
            s.run([f + ":0" for f in fetch], {"x:0": np.ones((2, 2), np.float32)})
        ok = True
    except Exception:
        ok = False
    print("RESULT " + json.dumps({"id": c["id"], "tf_ok": ok}))
"""

_IMPORTER_CASES = (
    "fn_placeholder_called", "fn_placeholder_uncalled", "fn_dangling_ret_uncalled", "fn_enum_in_body",
    "fn_output_shapes_in_body", "fn_shape_attr_in_body", "fn_type_list_in_body", "fn_enum_uncalled", "call_arity",
    "spc_tin_arity", "control_before_data", "type_not_allowed", "string_not_allowed", "below_minimum",
    "min_consumer_future", "bad_consumer_listed", "bad_consumer_other", "undeclared_attr", "if_branch_arity", "fn_argtype_999", "fn_attr_default_999", "const_tensor_dtype_999", "while_body_arity", "dup_fn_different", "dup_fn_identical", "grad_names_no_function", "grad_of_no_function",
    "grad_two", "dtype_999", "dtype_invalid", "dtype_ref", "list_mixed", "list_wrong_kind", "attr_wrong_kind",
    "graph_placeholder", "shape_dim_m3", "shape_dim_m1", "output_shapes_m2", "const_negdim", "const_unknown_dim",
    "class_missing", "class_present", "name_space", "name_underscore", "name_slash_first", "name_angle_end",
    "name_caret", "name_dot_first", "name_angle", "name_dash", "name_double_slash",
)


def _bad_inputs_generator():
    """tests/bad_inputs/generate.py under its own module name (benchmarks/ has a generate.py too,
    which another test may have imported as ``generate``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bad_inputs_generate", HERE / "bad_inputs" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.mark.tf
def test_jitsim_refuses_exactly_what_tf_refuses(tmp_path):
    """Each importer case of tests/bad_inputs, given to real TF (import_graph_def, then a
    session run of the call or the output): TF fails exactly where the manifest says jitsim
    refuses (exit 2), and runs exactly where jitsim accepts."""
    generate = _bad_inputs_generator()
    manifest = {c["id"]: c for c in generate.write(tmp_path)}
    assert set(_IMPORTER_CASES) <= set(manifest)
    probe = tmp_path / "probe.py"
    probe.write_text(_TF_PROBE)
    r = subprocess.run([sys.executable, str(probe), str(tmp_path), *_IMPORTER_CASES], capture_output=True, text=True,
                       timeout=600, env={**os.environ, "CUDA_VISIBLE_DEVICES": ""})
    seen = {}
    for line in r.stdout.splitlines():
        if line.startswith("RESULT "):
            d = json.loads(line[len("RESULT "):])
            seen[d["id"]] = d["tf_ok"]
    assert set(seen) == set(_IMPORTER_CASES), r.stderr[-2000:]
    differ = {i: (seen[i], manifest[i]["exit"]) for i in _IMPORTER_CASES if seen[i] != (manifest[i]["exit"] == 0)}
    assert not differ, f"TF accepts (True) / jitsim's exit differ: {differ}"


def test_uncalled_function_bodies_are_not_checked_and_called_ones_are(tmp_path, capsys):
    """The same broken body (attr $T with no attr T) accepted while nobody calls the
    function, refused, naming function, node, op and attr, once a PartitionedCall calls it."""
    gd = _graph(3)
    f = gd.library.function.add()
    f.signature.name = "f"
    f.signature.input_arg.add(name="a", type=1)
    f.signature.output_arg.add(name="o", type=1)
    n = f.node_def.add(name="n", op="Neg", input=["a"])
    n.attr["T"].placeholder = "T"
    f.ret["o"] = "n:y:0"
    p = tmp_path / "g.pbtxt"
    p.write_text(io.to_text(gd))
    assert _run(["cluster", str(p), "--tf", "never"], capsys)[0] == 0
    c = gd.node.add(name="c", op="PartitionedCall", input=["n2"])
    c.attr["f"].func.name = "f"
    c.attr["Tin"].list.type.append(1)
    c.attr["Tout"].list.type.append(1)
    p.write_text(io.to_text(gd))
    rc, _, err = _run(["cluster", str(p), "--tf", "never", "--fetch", "n2"], capsys)
    assert rc == 2 and len(err.strip().splitlines()) == 1
    assert "function 'f': node 'n' (Neg): attr 'T' is $T" in err


def test_tf_dumps_may_use_internal_names_and_stale_colocations(tmp_path, capsys):
    """A graph TF built itself (internal ops such as _Arg present: a dump, an instantiated
    function) may name nodes with a leading '_' and keep a _class naming a node its passes
    removed; TF's importer allows both there."""
    gd = protos.GraphDef()
    a = gd.node.add(name="_arg_x_0_0", op="_Arg")
    a.attr["T"].type = 1
    a.attr["index"].i = 0
    r = gd.node.add(name="r", op="Relu", input=["_arg_x_0_0"])
    r.attr["T"].type = 1
    r.attr["_class"].list.s.append(b"loc:@x")  # x was a Placeholder the session replaced by _arg_x_0_0
    o = gd.node.add(name="_retval_r_0_0", op="_Retval", input=["r"])
    o.attr["T"].type = 1
    o.attr["index"].i = 0
    p = tmp_path / "dump.pbtxt"
    p.write_text(io.to_text(gd))
    rc, _, err = _run(["cluster", str(p), "--tf", "never"], capsys)
    assert rc == 0, err


# -- B15: say what the input is ----------------------------------------------------------------------

def test_symlink_loops_and_dangling_links_are_named(tmp_path, capsys):
    loop = tmp_path / "loop.pbtxt"
    loop.symlink_to(loop.name)
    a, b = tmp_path / "a", tmp_path / "b"
    a.symlink_to("b")
    b.symlink_to("a")
    dangling = tmp_path / "d.pbtxt"
    dangling.symlink_to("gone.pbtxt")
    for p, fragment in ((loop, "symbolic link loop"), (a, "symbolic link loop"),
                        (dangling, "symbolic link to 'gone.pbtxt', which does not exist")):
        for argv in (["cluster", str(p), "--tf", "never"], ["cluster", str(p)]):
            rc, _, err = _run(argv, capsys)
            assert rc == 2 and len(err.strip().splitlines()) == 1 and fragment in err, (argv, err)
        with pytest.raises(GraphError, match=fragment):
            read_graphdef(p)
    rc, _, err = _run(["crosscheck", "index", str(a)], capsys)
    assert rc == 2 and "symbolic link loop" in err, err


def _keras_zip(path: Path) -> None:
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("config.json", "{}")
        z.writestr("metadata.json", "{}")
        z.writestr("model.weights.h5", b"")


def test_a_keras_archive_is_known_by_content(tmp_path):
    from jitsim.tfprocess.targets import target_kind

    renamed = tmp_path / "model.bin"
    _keras_zip(renamed)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert target_kind(renamed) == "keras"
    assert any(isinstance(x.message, JitsimWarning) and "Keras archive" in str(x.message) for x in w)
    graph = tmp_path / "g.pb"
    graph.write_bytes(_graph(3).SerializeToString())
    assert target_kind(graph) == "graphdef"


def test_the_keras_runner_gets_a_keras_name(tmp_path):
    """Keras loads an archive by its .keras name only: a renamed archive reaches the runner
    through a model.keras link in the run's work directory."""
    from jitsim.tfprocess.harvest import _command

    renamed = tmp_path / "model.bin"
    _keras_zip(renamed)
    work = tmp_path / "work"
    work.mkdir()
    args = _command(renamed, "keras", None, sys.executable, work)
    link = Path(args[3])
    assert link.name == "model.keras" and link.resolve() == renamed.resolve()


def test_saved_model_pb_holding_a_graphdef(tmp_path, capsys):
    d = tmp_path / "sm"
    d.mkdir()
    (d / "saved_model.pb").write_bytes(_graph(4).SerializeToString())
    for argv in (["cluster", str(d), "--tf", "never"], ["cluster", str(d)]):
        rc, _, err = _run(argv, capsys)
        assert rc == 2 and "holds a GraphDef, not a SavedModel" in err and "saved_model.pb" in err, err
    rc, out, err = _run(["cluster", str(d / "saved_model.pb"), "--tf", "never"], capsys)
    assert rc == 0 and "read as a GraphDef" in err, err


@pytest.mark.tf
def test_a_damaged_capture_is_taken_again_by_real_tf(tmp_path):
    """End to end with TF: capture a GraphDef (a MatMul chain TF clusters), change one byte of
    the cached pass input, capture again: TF runs again (not cached, with a note) and the
    entry is whole once more (the third capture is a cache hit on the same bytes)."""
    generate = _bad_inputs_generator()
    from jitsim.frontend.capture import capture

    g = tmp_path / "g.pbtxt"
    g.write_bytes(io.to_text(generate.valid_graph()).encode())
    cache = tmp_path / "cache"
    first = capture(g, flags="", cache_dir=cache)
    assert not first.cached
    dump = first.main_dump()
    good = dump.read_bytes()
    dump.write_bytes(good.replace(b'"MatMul"', b'"MatMuL"', 1))
    second = capture(g, flags="", cache_dir=cache)
    assert not second.cached and any("damaged" in n for n in second.notes)
    assert second.main_dump().read_bytes() == good
    third = capture(g, flags="", cache_dir=cache)
    assert third.cached and third.main_dump().read_bytes() == good
