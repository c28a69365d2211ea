"""The parsed-text cache (jitsim.graph.parse_cache): a second read of a big text GraphDef is
served in binary form, gives the same graph, and a damaged, foreign or unwritable cache is
never worse than no cache."""

import os
import tempfile

import pytest
from google.protobuf import text_format

from jitsim.graph import parse_cache, textproto
from jitsim.registry import protos
from jitsim.graph.io import read_graphdef
from jitsim.graph.parse_cache import ParseCache


def _big_graph_text(n: int = 6000) -> str:
    """A text GraphDef above the cache's size threshold (TF's dump layout)."""
    gd = protos.GraphDef()
    for i in range(n):
        nd = gd.node.add(name=f"layer_{i}/MatMul", op="MatMul", device="/job:localhost/replica:0/task:0/device:CPU:0")
        if i:
            nd.input.append(f"layer_{i - 1}/MatMul")
        nd.attr["T"].type = 1
        nd.attr["transpose_a"].b = False
        nd.attr["transpose_b"].b = bool(i % 2)
    text = text_format.MessageToString(gd)
    assert len(text.encode()) >= parse_cache.MIN_BYTES
    return text


@pytest.fixture
def big_file(tmp_path):
    p = tmp_path / "big.pbtxt"
    p.write_text(_big_graph_text())
    return p


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    d = tmp_path / "cache"
    monkeypatch.setenv("JITSIM_PARSE_CACHE", str(d))
    return d


def _entries(d):
    return sorted(d.rglob("*.binpb")) if d.exists() else []


def test_second_read_is_served_from_the_cache_and_equal(big_file, cache_dir, monkeypatch):
    first = read_graphdef(big_file)
    assert len(_entries(cache_dir)) == 1
    # the text parser is not consulted again: the graph comes from the binary entry
    monkeypatch.setattr(textproto, "parse", lambda *a, **k: pytest.fail("text parsed despite a cache entry"))
    second = read_graphdef(big_file)
    assert second == first
    assert second.SerializeToString(deterministic=True) == first.SerializeToString(deterministic=True)
    assert len(second.node) == 6000


def test_a_changed_file_is_parsed_again(big_file, cache_dir):
    read_graphdef(big_file)
    big_file.write_text(big_file.read_text().replace('"layer_5/MatMul"', '"renamed/MatMul"', 1))
    gd = read_graphdef(big_file)
    assert gd.node[5].name == "renamed/MatMul"
    assert len(_entries(cache_dir)) == 2


def test_small_files_are_not_cached(tmp_path, cache_dir):
    p = tmp_path / "small.pbtxt"
    p.write_text('node { name: "a" op: "NoOp" }\n')
    assert read_graphdef(p).node[0].name == "a"
    assert _entries(cache_dir) == []


def test_off_writes_nothing(big_file, tmp_path, monkeypatch):
    monkeypatch.setenv("JITSIM_PARSE_CACHE", "off")
    assert parse_cache.default_dir() is None
    read_graphdef(big_file)
    assert not any(p.suffix == ".binpb" for p in tmp_path.rglob("*"))


def test_no_home_directory_means_no_cache(monkeypatch):
    import pathlib

    def no_home():
        raise RuntimeError("Could not determine home directory.")

    monkeypatch.delenv("JITSIM_PARSE_CACHE", raising=False)
    monkeypatch.setattr(pathlib.Path, "home", staticmethod(no_home))
    assert parse_cache.default_dir() is None


def test_a_truncated_entry_is_not_taken_for_a_smaller_graph(big_file, cache_dir):
    want = read_graphdef(big_file)
    (entry,) = _entries(cache_dir)
    blob = entry.read_bytes()
    entry.write_bytes(blob[: len(blob) // 2])  # still a valid-looking protobuf prefix
    got = read_graphdef(big_file)
    assert got == want and len(got.node) == 6000


def test_a_garbled_entry_is_ignored(big_file, cache_dir):
    want = read_graphdef(big_file)
    (entry,) = _entries(cache_dir)
    blob = bytearray(entry.read_bytes())
    blob[len(parse_cache.FORMAT) + 8:] = b"\xff" * (len(blob) - len(parse_cache.FORMAT) - 8)
    entry.write_bytes(bytes(blob))
    assert read_graphdef(big_file) == want


def test_the_key_depends_on_the_message_type():
    data = b"x" * 10
    c = ParseCache(None)
    assert c.key(data, protos.GraphDef()) != c.key(data, protos.NodeDef())
    assert c.key(data, protos.GraphDef()) == c.key(data, protos.GraphDef())
    assert c.key(data, protos.GraphDef()) != c.key(data + b"y", protos.GraphDef())


def test_malformed_text_is_an_error_every_time_and_never_cached(tmp_path, cache_dir):
    from jitsim.errors import GraphError

    p = tmp_path / "bad.pbtxt"
    p.write_text(_big_graph_text() + "node { name: \n")
    for _ in range(2):
        with pytest.raises(GraphError, match="malformed text GraphDef"):
            read_graphdef(p)
    assert _entries(cache_dir) == []


def test_an_unwritable_cache_is_ignored(big_file, cache_dir, monkeypatch):
    def refuse(*a, **k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", refuse)  # what the atomic write makes its file with
    assert len(read_graphdef(big_file).node) == 6000
    assert _entries(cache_dir) == []


def test_a_cache_path_that_is_a_file_is_ignored(big_file, tmp_path, monkeypatch):
    f = tmp_path / "not-a-dir"
    f.write_text("x")
    monkeypatch.setenv("JITSIM_PARSE_CACHE", str(f))
    assert len(read_graphdef(big_file).node) == 6000
    assert len(read_graphdef(big_file).node) == 6000


def test_trim_removes_the_least_recently_used_first(tmp_path):
    c = ParseCache(tmp_path / "c")
    puts = []
    for i in range(3):
        gd = protos.GraphDef()
        gd.node.add(name=f"n{i}" * 2000, op="NoOp")
        data = f"text {i}".encode()
        c.put(data, gd)
        path = c._path(c.key(data, gd))
        os.utime(path, (1000 * (i + 1), 1000 * (i + 1)))  # put in this order, long ago
        puts.append((data, path))
    assert c.get(puts[0][0], protos.GraphDef()) is not None  # the oldest, used again now
    c.max_total_bytes = 2 * max(size for _, size, _ in c.entries())
    c.trim()
    assert {p for _, _, p in c.entries()} == {puts[0][1], puts[2][1]}  # the least recently used went
