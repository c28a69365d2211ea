"""The fast text-format reader and printer give exactly what protobuf's text_format gives.

``jitsim.graph.textproto`` exists for speed (issue 14); its contract is identity with the
slow path: the same message from the same text (or the same ParseError), and the same bytes
when printing (``_print_slow`` is text_format's printer plus TF's float digits and zero map
keys, what ``io.to_text`` printed before). Checked on real dumps of the fixture corpus and on
generated messages that reach the escapes, float digits, enum numbers and zero map keys.
"""

from __future__ import annotations

import contextlib
import math

import pytest
from google.protobuf import text_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from jitsim.graph import textproto
from jitsim.registry import protos

from conftest import corpus_graphs, need_c_extension

CI = settings(derandomize=True, database=None, deadline=None, max_examples=150,
              suppress_health_check=[HealthCheck.too_slow])


def _slow_parse(text):
    return text_format.Parse(text, protos.GraphDef(), allow_unknown_field=False)


# Both implementations: the C extension (built by setup.py; CI requires it) and the pure
# Python it was written from, which stays the fallback where no compiler is found.
IMPLS = ("c", "python")


@contextlib.contextmanager
def _impl(name: str):
    saved = textproto._c
    if name == "python":
        textproto._c = None
    elif saved is None:
        need_c_extension("jitsim.graph._fasttext")
    try:
        yield
    finally:
        textproto._c = saved


def _wire(gd) -> bytes:
    # messages compared by their bytes: protobuf 4.25's upb has NaN != NaN in message equality
    return gd.SerializeToString(deterministic=True)


def _same_both_ways(text: str, impls=IMPLS) -> None:
    try:
        want = _slow_parse(text)
    except text_format.ParseError as e:
        for impl in impls:
            with _impl(impl), pytest.raises(text_format.ParseError) as got:
                textproto.parse(text, protos.GraphDef())
            assert str(got.value) == str(e), impl
        return
    for impl in impls:
        with _impl(impl):
            got = textproto.parse(text, protos.GraphDef())
            assert _wire(got) == _wire(want), impl
            assert textproto.print_message(got) == textproto._print_slow(want), impl


def test_c_extension_built_in_ci():
    # setup.py builds the extension optionally (a missing compiler is not an install error);
    # CI has one, so a build that silently failed must show here.
    need_c_extension("jitsim.graph._fasttext")
    assert textproto.accelerated()
    assert "_fasttext" in textproto._c.__name__


def _sample_files(corpus, per_run: int, max_bytes: int = 100_000):
    """The smallest graphs of every run and its largest one below ``max_bytes`` (text_format,
    the reference, needs ~0.3 s per 100 kB)."""
    for run in corpus.built():
        d = corpus.extract(run)
        files = sorted((p for p in (d / "dumps").glob("*.pbtxt") if p.stat().st_size <= max_bytes),
                       key=lambda p: p.stat().st_size)
        yield from files[:per_run]
        if files[per_run:]:
            yield files[-1]


def test_corpus_sample_identical(corpus):
    seen = 0
    for path in _sample_files(corpus, per_run=2):
        _same_both_ways(path.read_text())
        seen += 1
    assert seen > 150


def test_c_paths_taken_on_real_dumps(corpus):
    # The C reader and printer must do the work on TF's own dumps, not hand every file back to
    # Python (which would pass the identity tests above while being as slow as before).
    with _impl("c"):
        seen = 0
        for path in _sample_files(corpus, per_run=1, max_bytes=2_000_000):
            text = path.read_text()
            gd = protos.GraphDef()
            assert textproto._parse_c(text, gd), path
            assert textproto._print_c(gd) == text, path  # TF's own dumps print back unchanged
            seen += 1
        assert seen > 80


# Repeated fields of every shape TF writes: repeated messages (node), repeated strings (input),
# packed repeated numbers (list.f, list.i, shape.dim), maps (attr), a repeated enum (list.type).
_REPEATED = """node {
  name: "a"
  op: "Const"
  attr {
    key: "l"
    value {
      list {
        s: "x\\037\\303\\251"
        s: "y"
        i: 1
        i: -2
        f: 0.1
        f: 0.333333343
        type: DT_FLOAT
        type: DT_INT32
      }
    }
  }
  attr {
    key: "shape"
    value {
      shape {
        dim {
          size: 2
        }
        dim {
          size: -1
        }
      }
    }
  }
}
node {
  name: "b"
  op: "Add"
  input: "a"
  input: "a:1"
  input: "^c"
}
"""


@pytest.mark.parametrize("impl", IMPLS)
def test_repeated_fields_read_and_written_without_text_format(impl, monkeypatch):
    # Every protobuf of pyproject.toml's range (.ci/run tests the lowest): the fast reader and
    # printer handle repeated fields themselves. A descriptor API missing in the installed
    # protobuf must fail here, not send the graph to text_format (which reads it too, slowly).
    def refused(*a, **k):
        raise AssertionError("text_format was used")

    with _impl(impl):
        monkeypatch.setattr(text_format, "Parse", refused)  # (textproto imports it where it needs it)
        monkeypatch.setattr(textproto, "_print_slow", refused)
        gd = textproto.parse(_REPEATED, protos.GraphDef())
        assert [n.name for n in gd.node] == ["a", "b"]
        assert list(gd.node[1].input) == ["a", "a:1", "^c"]
        lst = gd.node[0].attr["l"].list
        assert list(lst.s) == [b"x\037\303\251", b"y"] and list(lst.i) == [1, -2]
        assert list(lst.type) == [1, 3] and len(lst.f) == 2
        assert [d.size for d in gd.node[0].attr["shape"].shape.dim] == [2, -1]
        assert textproto.print_message(gd) == _REPEATED


def test_is_repeated_on_old_and_new_descriptors():
    # protobuf 4.25/5.x descriptors have only ``label``; 7.x only ``is_repeated``
    class Old:
        label = textproto._FD.LABEL_REPEATED

    class OldSingular:
        label = textproto._FD.LABEL_OPTIONAL

    class New:
        is_repeated = True

    assert textproto._is_repeated(Old()) and not textproto._is_repeated(OldSingular())
    assert textproto._is_repeated(New())
    node = protos.GraphDef.DESCRIPTOR.fields_by_name["node"]
    assert textproto._is_repeated(node)
    assert not textproto._is_repeated(protos.NodeDef.DESCRIPTOR.fields_by_name["op"])


@pytest.mark.slow
def test_whole_corpus_identical(corpus):
    for run, g, d in corpus_graphs(corpus):
        for f in g["files"].values():
            if f.endswith(".pbtxt"):
                _same_both_ways((d / "dumps" / f).read_text())


@pytest.mark.parametrize("text", [
    'node { name: "a" op: "Const" }',
    'node: { name: "a", op: "Const"; }',                          # optional colon and separators
    'node < name: "a" op: "Const" >',                               # pointy brackets
    'node { name: "a" "b" op: "X" }',                              # adjacent strings join
    "node { name: 'single' op: \"X\" }",
    'node { name: "esc\\n\\t\\"\\\\\\001\\x41\\u00e9" op: "X" }',  # C escapes, octal, hex, \\u
    'node { name: "é ünï" op: "X" }',                              # raw UTF-8
    '# a comment\nnode { name: "a" op: "X" }',
    'node { name: "a" op: "X" attr { key: "v" value { i: -9223372036854775808 } } }',
    'node { name: "a" op: "X" attr { key: "v" value { i: 9223372036854775808 } } }',   # out of range
    'node { name: "a" op: "X" attr { key: "v" value { i: 0x10 } } }',                  # hex
    'node { name: "a" op: "X" attr { key: "v" value { i: 010 } } }',                   # octal
    'node { name: "a" op: "X" attr { key: "v" value { f: 1.5f } } }',
    'node { name: "a" op: "X" attr { key: "v" value { f: -inf } } }',
    'node { name: "a" op: "X" attr { key: "v" value { f: nan } } }',
    'node { name: "a" op: "X" attr { key: "v" value { f: 1e39 } } }',                  # float overflow
    'node { name: "a" op: "X" attr { key: "v" value { f: 1_0 } } }',
    'node { name: "a" op: "X" attr { key: "v" value { b: t } } }',
    'node { name: "a" op: "X" attr { key: "v" value { type: 1 } } }',                  # enum by number
    'node { name: "a" op: "X" attr { key: "v" value { type: DT_NOPE } } }',
    'node { name: "a" op: "X" attr { key: "v" value { list { i: [1, 2, 3] } } } }',   # list syntax
    'node { name: "a" op: "X" attr { key: "v" value { i: 1 f: 2 } } }',               # two oneof members
    'node { name: "a" name: "b" op: "X" }',                        # proto3 scalar given twice
    'node { name: "a" op: "X" attr { key: "v" value { tensor { dtype: DT_FLOAT } tensor { dtype: DT_INT32 } } } }',
    'node { nme: "a" }',                                           # unknown field
    'node { name: "a" op: "X" ',                                   # unclosed
    'node { name: "a" op: "X" } }',                                # extra brace
    'node { name: a }',                                            # unquoted string
    'node { name: "bad \\377 utf8" }',                             # invalid UTF-8 in a string field
    'node { name\n: "a" }',
    # one item a line (the fast line reader) and what must leave it
    'node {\n  name: "a: b {"\n  op: "X"\n}\n',
    'node {\n  name: "a" op: "X"\n}\n',
    'node {\n  name: "a\\"b"\n  op: "X"\n}\n',
    'node {\n  name: "a"b"\n}\n',
    'node {\n  name: "a\\\\"\n  op: "X"\n}\n',
    'node {\n  name: "a" }\n',
    'node {\n  attr {\n    key: "k"\n    value {\n      i: 3 }}\n  }\n}\n',
    'node {\r\n  name: "crlf"\r\n}\r\n',
    'versions { producer: 1 min_consumer: -1 } library { function { signature { name: "f" } '
    'arg_attr { key: 0 value { } } resource_arg_unique_id { key: 0 value: 0 } } }',
    "",
    # the C reader's own edges (one item a line)
    'node {\n  name: "a"\n  attr {\n    key: "v"\n    value {\n      i: -0\n    }\n  }\n}\n',
    'node {\n  name: "a"\n  attr {\n    key: "v"\n    value {\n      i: 123456789012345678\n    }\n  }\n}\n',
    'node {\n  name: "a"\n  attr {\n    key: "v"\n    value {\n      i: -1234567890123456789\n    }\n  }\n}\n',
    'node {\n  name: "a"\n  attr {\n    key: "v"\n    value {\n      i: 9223372036854775808\n    }\n  }\n}\n',
    'node {\n  name: "a"\n  attr {\n    key: "v"\n    value {\n      i: 007\n    }\n  }\n}\n',
    'node {\n  name: "a"\n  attr {\n    key: "v"\n    value {\n      b: True\n    }\n  }\n}\n',
    'node {\n  name: "a"\n  attr {\n    key: "v"\n    value {\n      b: 2\n    }\n  }\n}\n',
    'node {\n  name: "a"\n  attr {\n    key: "v"\n    value {\n      type: 3\n    }\n  }\n}\n',
    'node {\n  name: "a"\n  attr {\n    key: "v"\n    value {\n      f: 1.5\n    }\n  }\n}\n',
    'node {\n  name: "a"\n  attr {\n    key: "v"\n    value {\n      i: 1\n      f: 2\n    }\n  }\n}\n',
    'node {\n  name: "a"\n  attr {\n    key: "v"\n    value {\n      s: "\\000\\377x"\n    }\n  }\n}\n',
    'node {\n  name: "a"\n  attr {\n    key: "v"\n    value {\n      list {\n        type: DT_FLOAT\n        type: DT_INT32\n      }\n    }\n  }\n}\n',
    'node {\n  name: "a"\n  attr {\n    key: "v"\n    value {\n      tensor {\n        dtype: DT_FLOAT\n        float_val: 1\n      }\n    }\n  }\n}\n',
    'node {\n  name: "é"\n  op: "ü"\n}\n',
    "node {\n  name: 'q'\n}\n",
    'node {\n  name: "a"\x1c\n\x0b}\x0c\n',
    'node {\n  name: "a"\u00a0\n}\n',
    '\u00a0node {\n  name: "a"\n}\n',
    'node {\n  name: "a"\n  name: "b"\n}\n',
    'node {\n  name:  "a"\n}\n',
    'node {\n  name: "a"  \t\n}\n',
    'node  \t{\n}\n',
    'node:{\n}\n',
    'node {\n  device: "a\\\\"\n}\n',
    'node {\n  device: "a\\"\n}\n',
    'node {\n  input: "x"\n  input: "y\\"z"\n}\n',
    'node {\n}\n}\n',
    'node {\n',
    'versions {\n  producer: 4294967296\n}\n',
    'versions {\n  bad_consumers: 1\n  bad_consumers: -2147483649\n}\n',
])
def test_odd_texts(text):
    _same_both_ways(text)


_floats = st.floats(width=32) | st.sampled_from([0.1, 1e-45, 3.4028234663852886e38, -0.0, 1 / 3])
_doubles = st.floats() | st.sampled_from([0.1, 5e-324, 1.7976931348623157e308, 1 / 3])
_text = st.text(max_size=12)


@st.composite
def graphdefs(draw):
    gd = protos.GraphDef()
    for i in range(draw(st.integers(1, 4))):
        n = gd.node.add(name=draw(_text) or f"n{i}", op=draw(st.sampled_from(["Const", "X", "Add"])))
        n.input.extend(draw(st.lists(_text, max_size=2)))
        for k in draw(st.lists(_text, max_size=3, unique=True)):
            v = n.attr[k]
            kind = draw(st.sampled_from(["s", "i", "f", "b", "type", "list", "tensor", "shape"]))
            if kind == "s":
                v.s = draw(st.binary(max_size=8))
            elif kind == "i":
                v.i = draw(st.integers(-(2**63), 2**63 - 1))
            elif kind == "f":
                v.f = draw(_floats)
            elif kind == "b":
                v.b = draw(st.booleans())
            elif kind == "type":
                v.type = draw(st.integers(0, 30))
            elif kind == "list":
                v.list.f.extend(draw(st.lists(_floats, max_size=3)))
                v.list.s.extend(draw(st.lists(st.binary(max_size=4), max_size=2)))
            elif kind == "shape":
                for d in draw(st.lists(st.integers(-1, 2**40), max_size=3)):
                    v.shape.dim.add(size=d)
            else:
                v.tensor.dtype = 1
                v.tensor.float_val.extend(draw(st.lists(_floats, max_size=3)))
                v.tensor.double_val.extend(draw(st.lists(_doubles, max_size=2)))
                v.tensor.scomplex_val.extend(draw(st.lists(_floats, max_size=2)))
                v.tensor.half_val.extend(draw(st.lists(st.integers(0, 65535), max_size=2)))
    if draw(st.booleans()):
        f = gd.library.function.add()
        f.signature.name = draw(_text)
        for k in draw(st.lists(st.integers(0, 3), max_size=3, unique=True)):
            f.arg_attr[k].attr["x"].i = draw(st.integers(0, 2))
        for k in draw(st.lists(st.integers(0, 3), max_size=3, unique=True)):
            f.resource_arg_unique_id[k] = draw(st.integers(0, 2))
        for k in draw(st.lists(_text, max_size=2, unique=True)):
            f.ret[k] = draw(_text)
    return gd


@CI
@given(graphdefs())
def test_generated_messages_print_and_read_back(gd):
    slow = textproto._print_slow(gd)
    want = _slow_parse(slow)
    for impl in IMPLS if textproto.accelerated() else ("python",):
        with _impl(impl):
            text = textproto.print_message(gd)
            assert text == slow, impl
            back = textproto.parse(text, protos.GraphDef())
            assert _wire(back) == _wire(want), impl


def test_c_float_digits():
    # TF's C++ prints floats with %.6g when that round-trips (0.1f -> "0.1"), else %.9g;
    # Python's shortest repr would print 0.1f as "0.1" too, but 1/3 as "0.33333334".
    gd = protos.GraphDef()
    gd.node.add(name="n").attr["v"].f = 1 / 3
    assert "f: 0.333333343\n" in textproto.print_message(gd)
    gd.node[0].attr["v"].f = 0.1
    assert "f: 0.1\n" in textproto.print_message(gd)
    gd.node[0].attr["v"].f = math.inf
    assert "f: inf\n" in textproto.print_message(gd)


# -- printing in pieces (a big graph's text is written piece by piece, issue 25) -------------

@CI
@given(graphdefs(), st.integers(1, 400))
def test_pieces_join_to_the_whole_text(gd, piece_bytes):
    # Any cut size, down to one record a piece, and every message shape the generator makes
    # (nodes, library, versions): the pieces, joined, are print_message's text.
    whole = textproto.print_message(gd)
    for impl in IMPLS if textproto.accelerated() else ("python",):
        with _impl(impl):
            pieces = list(textproto.print_message_pieces(gd, piece_bytes))
            assert "".join(pieces) == whole, impl


def test_pieces_on_real_dumps_are_cut_and_identical(corpus):
    need_c_extension("jitsim.graph._fasttext")
    seen = 0
    for path in _sample_files(corpus, per_run=1, max_bytes=2_000_000):
        gd = protos.GraphDef()
        text = path.read_text()
        textproto.parse(text, gd)
        pieces = list(textproto.print_message_pieces(gd, 4096))
        assert "".join(pieces) == text, path
        if len(gd.SerializeToString()) > 3 * 4096:
            assert len(pieces) > 1, path  # really cut, not one piece
            seen += 1
    assert seen > 20


def test_record_cuts_refuse_out_of_order_and_broken_wire():
    need_c_extension("jitsim.graph._fasttext")
    c = textproto._c
    node = b"\n\x03abc"        # field 1 (node), 3 bytes
    versions = b'"\x02\x08\x01'  # field 4 (versions)
    assert c.record_cuts(node + node + versions, 1) == [0, 5, 10, 14]
    assert c.record_cuts(node + versions + node, 1) is None  # printer would reorder: no cuts
    assert c.record_cuts(b"\n\x09ab", 1) is None             # length past the end


def test_map_fields_known_without_descriptor_options():
    """The C printer's plan tells map fields from repeated messages without reading options
    (which imports descriptor_pb2): on every message-typed field of TF's protos, the same
    answer as ``map_entry`` in the field type's options."""
    seen: set[str] = set()
    maps = fields = 0

    def walk(desc):
        nonlocal maps, fields
        if desc.full_name in seen:
            return
        seen.add(desc.full_name)
        for fd in desc.fields:
            if fd.message_type is not None:
                fields += 1
                want = fd.message_type.GetOptions().map_entry
                assert textproto._is_map(fd) == want, fd.full_name
                maps += want
                walk(fd.message_type)

    for name in ("GraphDef", "SavedModel", "MetaGraphDef", "OpList", "KernelList"):
        walk(getattr(protos, name).DESCRIPTOR)
    assert maps >= 20 and fields > maps  # NodeDef.attr, FunctionDef.ret, ... and plain repeated messages


def test_descriptor_pb2_and_hashlib_not_imported_by_cluster(tmp_path):
    """`jitsim cluster G -o OUT` (parse cache off) imports neither descriptor_pb2 nor hashlib
    (nor the harvest machinery, nor, on protobuf's upb runtime, its pure-Python message
    implementation and text_format): each was milliseconds of every run's start."""
    from google.protobuf.internal import api_implementation

    import os
    import subprocess
    import sys
    from pathlib import Path

    g = Path(__file__).parents[1] / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt"
    code = ("import sys; from jitsim.cli import main; rc = main(['cluster', sys.argv[1], '-o', sys.argv[2]]); "
            "print(sorted(m for m in ('google.protobuf.descriptor_pb2', 'hashlib', 'jitsim.tfprocess.harvest', "
            "'google.protobuf.internal.python_message', 'google.protobuf.text_format') if m in sys.modules))")
    env = {**os.environ, "JITSIM_PARSE_CACHE": "off"}
    r = subprocess.run([sys.executable, "-c", code, str(g), str(tmp_path / "out.pbtxt")], capture_output=True,
                       text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    got = r.stdout.strip().splitlines()[-1]
    if api_implementation.Type() == "upb":
        assert got == "[]"
    else:
        assert "hashlib" not in got and "descriptor_pb2" not in got


@pytest.mark.parametrize("text", ["ascii", "caf\u00e9 \u2192 \u00fc"])
def test_serialized_pieces_as_bytes_are_the_texts_utf8(text):
    # what jitsim.graph.io.save writes: the printer's bytes, without a str in between where the
    # text is ASCII (issue 25); the same bytes as encoding the text, non-ASCII strings included
    from jitsim.graph.textproto import print_serialized_pieces

    gd = protos.GraphDef()
    nd = gd.node.add(name="a", op="Const", device=text)  # (a string field: printed as UTF-8)
    nd.attr["b"].s = b"\xff\x00raw"  # a bytes value that is no UTF-8: escaped
    data = gd.SerializeToString(deterministic=True)
    texts = list(print_serialized_pieces(data, protos.GraphDef))
    raw = list(print_serialized_pieces(data, protos.GraphDef, as_bytes=True))
    assert all(isinstance(t, bytes) for t in raw) and [t.encode() for t in texts] == raw
    assert text in "".join(texts)


@pytest.mark.parametrize("text", [
    'node {\n  name: "a"\n  op: "Const"\n}\n',  # the plain subset: the C reader
    'node { name: "a" op: "Const" }  # one line, a comment: the Python readers',
    'node {\n  name: "a"\n  op: Const\n}\n',  # not text format: text_format's error
])
def test_ascii_bytes_read_as_their_text(text):
    # load() hands an ASCII file's bytes to the reader without decoding them (issue 25): the
    # same message, or the same error, as its text
    def outcome(t):
        msg = protos.GraphDef()
        try:
            textproto.parse(t, msg)
        except Exception as e:  # noqa: BLE001
            return type(e).__name__, str(e)
        return msg.SerializeToString(deterministic=True)

    assert outcome(text.encode()) == outcome(text)


def test_big_pieces_printed_without_the_gil_are_the_same_text():
    # print_wire gives up the GIL for read-only data of 64 KiB or more (a graph's text is then
    # printed beside the report, issue 25): floats go in afterwards (their digits come from
    # Python), enum names and maps from the compiled plan. The text is the same as the one
    # printed holding the GIL (a bytearray: writable, so never released) and as Python's.
    need_c_extension("jitsim.graph._fasttext")
    gd = protos.GraphDef()
    for i in range(600):
        nd = gd.node.add(name=f"n{i}", op="Const", device="/device:CPU:0")
        nd.input.extend([f"n{i - 1}", f"^n{i // 2}"] if i else [])
        nd.attr["dtype"].type = 1 + i % 9
        nd.attr["alpha"].f = i / 7
        nd.attr["xs"].list.f.extend([0.1 * i, 1e-7 * i, float("inf")])
        nd.attr["name"].s = f"caf\xe9 {i}".encode()
        t = nd.attr["value"].tensor
        t.dtype = 2
        t.double_val.extend([i / 3, -0.0])
        t.tensor_shape.dim.add(size=i)
    data = gd.SerializeToString(deterministic=True)
    assert len(data) >= 64 * 1024
    plan = textproto._c_plan(protos.GraphDef.DESCRIPTOR)
    released = textproto._c.print_wire(data, plan)
    held = textproto._c.print_wire(bytearray(data), plan)
    assert released == held == textproto._print_slow(gd)
    assert textproto._c.print_wire(data, plan, True) == released.encode()
    # what the printer leaves to Python (fields out of order) is left alike both ways
    bad = data + bytes([0x0A, 0x00]) + data[:2]
    assert textproto._c.print_wire(bytes(bad), plan) is None
    assert textproto._c.print_wire(bytearray(bad), plan) is None
