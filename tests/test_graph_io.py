"""Graph model and readers/writers: round trips, and one clear error per kind of bad input."""

from pathlib import Path

import pytest
from google.protobuf import text_format

from jitsim.errors import GraphError, JitsimError
from jitsim.graph import CONTROL, Graph, load, save
from jitsim.registry import protos
from jitsim.graph.io import read_graphdef


def _graphdef():
    gd = protos.GraphDef()
    text_format.Parse(
        """
        node { name: "x" op: "Placeholder" device: "/device:CPU:0" attr { key: "dtype" value { type: DT_FLOAT } } }
        node { name: "c" op: "Const" attr { key: "value" value { tensor { dtype: DT_FLOAT float_val: 2 } } } }
        node { name: "u" op: "Unique" input: "x" attr { key: "T" value { type: DT_FLOAT } } }
        node { name: "m" op: "Mul" input: "u:1" input: "c" input: "^x" attr { key: "_XlaCluster" value { s: "cluster_0" } } }
        versions { producer: 1234 }
        library { function { signature { name: "f" } } }
        """,
        gd,
    )
    return gd


def test_edges_follow_nodedef_inputs():
    g = Graph(_graphdef())
    # data inputs keep their slot and source output; the control input is slot -1
    assert [(e.src, e.src_output, e.dst_input) for e in g.in_edges("m")] == [("u", 1, 0), ("c", 0, 1), ("x", CONTROL, CONTROL)]
    assert [n.index for n in g] == [0, 1, 2, 3]
    assert g.clusters() == {"x": None, "c": None, "u": None, "m": "cluster_0"}


@pytest.mark.parametrize("suffix", [".pbtxt", ".pb"])
def test_round_trip_preserves_every_field(tmp_path, suffix):
    gd = _graphdef()
    path = tmp_path / f"g{suffix}"
    save(Graph(gd), path)
    back = read_graphdef(path)
    assert back.SerializeToString(deterministic=True) == gd.SerializeToString(deterministic=True)
    # binary is binary, text is text
    assert path.read_bytes().startswith(b"node") == (suffix == ".pbtxt")


def test_set_attr_is_written_back(tmp_path):
    g = Graph(_graphdef())
    g["u"].set_attr("_XlaCluster", "cluster_7")
    save(g, tmp_path / "g.pbtxt")
    assert load(tmp_path / "g.pbtxt").clusters()["u"] == "cluster_7"


def test_missing_file():
    with pytest.raises(GraphError, match="nope.pbtxt: no such file"):
        load("nope.pbtxt")


def test_truncated_binary(tmp_path):
    data = _graphdef().SerializeToString()
    p = tmp_path / "t.pb"
    p.write_bytes(data[: len(data) - 7])
    with pytest.raises(GraphError, match="t.pb: not a valid binary GraphDef"):
        load(p)


def test_malformed_text(tmp_path):
    p = tmp_path / "bad.pbtxt"
    p.write_text('node { name: "a" op: "Const" \n  inptu: "b" }\n')
    with pytest.raises(GraphError, match=r"bad.pbtxt: malformed text GraphDef: 2:\d+ .*inptu"):
        load(p)


def test_dangling_input_names_the_node_and_input(tmp_path):
    p = tmp_path / "d.pbtxt"
    p.write_text('node { name: "a" op: "Neg" input: "ghost:1" }\n')
    with pytest.raises(GraphError, match="node 'a' has input 'ghost:1', which names no node"):
        load(p)


def test_cycle_is_rejected_with_its_path(tmp_path):
    p = tmp_path / "c.pbtxt"
    p.write_text('node { name: "a" op: "Neg" input: "b" }\nnode { name: "b" op: "Neg" input: "a" }\n')
    with pytest.raises(GraphError, match="cycle not closed by a NextIteration: (a -> b -> a|b -> a -> b)"):
        load(p)


def test_loop_back_edge_is_not_a_cycle():
    # Enter -> Merge -> NextIteration -> Merge is how TF v1 loops are built: valid.
    g = Graph.from_nodes([
        ("x", "Placeholder", []), ("enter", "Enter", ["x"]), ("merge", "Merge", ["enter", "next"]),
        ("next", "NextIteration", ["merge"]),
    ])
    assert len(g) == 4


def test_duplicate_node_name(tmp_path):
    p = tmp_path / "dup.pbtxt"
    p.write_text('node { name: "a" op: "Const" }\nnode { name: "a" op: "Const" }\n')
    with pytest.raises(GraphError, match="duplicate node name 'a'"):
        load(p)


def test_failed_save_leaves_no_file(tmp_path):
    g = Graph(_graphdef())
    with pytest.raises(JitsimError, match="output directory does not exist"):
        save(g, tmp_path / "missing" / "out.pb")
    assert list(tmp_path.iterdir()) == []


def test_written_files_get_the_usual_permissions(tmp_path):
    """Atomic writes go through a private temporary file; the result must not stay 0600."""
    import os

    from jitsim.graph.io import write_atomic

    old = os.umask(0o022)
    try:
        write_atomic(tmp_path / "out.pbtxt", b"x")
    finally:
        os.umask(old)
    assert (tmp_path / "out.pbtxt").stat().st_mode & 0o777 == 0o644


def test_pieces_written_whole_or_not_at_all(tmp_path):
    """A graph's text is written piece by piece (issue 25); a failure while the pieces are
    made leaves neither the output nor a temporary file, and an existing output untouched."""
    from jitsim.graph.io import write_atomic

    write_atomic(tmp_path / "out.pbtxt", iter([b"node {\n", b"}\n"]))
    assert (tmp_path / "out.pbtxt").read_bytes() == b"node {\n}\n"

    def broken():
        yield b"node {\n"
        raise RuntimeError("printer failed")

    with pytest.raises(RuntimeError):
        write_atomic(tmp_path / "out.pbtxt", broken())
    assert (tmp_path / "out.pbtxt").read_bytes() == b"node {\n}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.pbtxt"]


def test_big_graph_text_written_in_pieces_is_the_same_text(tmp_path, monkeypatch):
    """save() streams text in pieces; with tiny pieces the file is print_message's text."""
    from jitsim.graph import textproto

    gd = _graphdef()
    for i in range(50):
        n = gd.node.add()
        n.name, n.op = f"c{i}", "Const"
    save(Graph(gd), tmp_path / "whole.pbtxt")
    monkeypatch.setattr(textproto.print_message_pieces, "__defaults__", (64,))
    save(Graph(gd), tmp_path / "pieces.pbtxt")
    assert (tmp_path / "pieces.pbtxt").read_bytes() == (tmp_path / "whole.pbtxt").read_bytes()
    assert (tmp_path / "whole.pbtxt").read_text() == textproto.print_message(Graph(gd).to_graphdef())


def _tfgraph_of_consts():
    """_graphdef() and 23 constants, each with a control input, as a TfGraph."""
    from jitsim.graph.tfgraph import TfGraph

    gd = _graphdef()
    for i in range(23):
        n = gd.node.add()
        n.name, n.op = f"c{i}", "Const"
        n.input.append(f"^{gd.node[0].name}")
    gd.versions.producer = 1882
    return TfGraph.from_graph(Graph(gd))


def test_tfgraph_pieces_are_the_whole_graphdef(tmp_path):
    """TfGraph.graphdef_pieces (the marked graph written without a second copy of it): with
    any piece size, the pieces' text and binary files are to_graphdef()'s, byte for byte."""
    tg = _tfgraph_of_consts()
    save(tg.to_graphdef(), tmp_path / "whole.pbtxt")
    save(tg.to_graphdef(), tmp_path / "whole.pb")
    for size in (1, 2, 7, 10_000):
        pieces = list(tg.graphdef_pieces(size))
        assert len(pieces) == max(1, -(-sum(1 for _ in tg.op_nodes()) // size))
        save(iter(pieces), tmp_path / "pieces.pbtxt")
        save(iter(pieces), tmp_path / "pieces.pb")
        assert (tmp_path / "pieces.pbtxt").read_bytes() == (tmp_path / "whole.pbtxt").read_bytes(), size
        assert (tmp_path / "pieces.pb").read_bytes() == (tmp_path / "whole.pb").read_bytes(), size


@pytest.mark.parametrize("with_clones", [False, True])
def test_tfgraph_serialized_pieces_are_the_whole_graphdef(tmp_path, with_clones, monkeypatch):
    """TfGraph.serialized_pieces (what `jitsim cluster -o` writes: each node serialized as it
    is unless TF would write other inputs for it): with any piece size, joined they are
    to_graphdef()'s deterministic serialization, and the text and binary files are byte for
    byte the whole graph's. With clones, TF's cloning pass rewrote inputs of some nodes, and
    control inputs come out sorted by name."""
    from jitsim.graph import textproto
    from jitsim.graph.tfgraph import TfGraph
    from jitsim.passes.clone_constants import clone_constants_for_better_clustering

    tg = _tfgraph_of_consts()
    if with_clones:
        from pathlib import Path

        from jitsim.graph.io import read_graphdef

        path = Path(__file__).resolve().parents[1] / "fixtures" / "versions"
        for dump in sorted(path.glob("*/tf2.21/dumps/before_clone_constants_for_better_clustering*.pbtxt")):
            tg = TfGraph.from_graph(Graph(read_graphdef(dump), validate=False))
            if clone_constants_for_better_clustering(tg):
                break
        else:
            raise AssertionError("no fixture dump has constants TF clones")
    whole = tg.to_graphdef()
    save(whole, tmp_path / "whole.pbtxt")
    save(whole, tmp_path / "whole.pb")
    n_nodes = sum(1 for _ in tg.op_nodes())
    for size in (1, 2, 7, 10_000):
        pieces = list(tg.serialized_pieces(size))
        assert len(pieces) == max(1, -(-n_nodes // size))
        assert b"".join(pieces) == whole.SerializeToString(deterministic=True), size
        save(iter(pieces), tmp_path / "pieces.pbtxt")
        save(iter(pieces), tmp_path / "pieces.pb")
        assert (tmp_path / "pieces.pbtxt").read_bytes() == (tmp_path / "whole.pbtxt").read_bytes(), size
        assert (tmp_path / "pieces.pb").read_bytes() == (tmp_path / "whole.pb").read_bytes(), size
    # a piece the printer cuts further, and the pure-Python printer, give the same text
    monkeypatch.setattr(textproto.print_serialized_pieces, "__defaults__", (64,))
    save(tg.serialized_pieces(), tmp_path / "cut.pbtxt")
    assert (tmp_path / "cut.pbtxt").read_bytes() == (tmp_path / "whole.pbtxt").read_bytes()
    monkeypatch.setattr(textproto, "_c", None)
    save(tg.serialized_pieces(), tmp_path / "py.pbtxt")
    assert (tmp_path / "py.pbtxt").read_bytes() == (tmp_path / "whole.pbtxt").read_bytes()


def test_tfgraph_node_inputs_from_edges_in_any_order():
    """The inputs TF writes for a node from its in-edges (TfGraph._inputs, what -o writes):
    data inputs by slot whatever order their edges were added in (a pass rewiring a node adds
    them out of order), output 0 as the bare name, then control inputs sorted by name, edges
    from _SOURCE left out; a slot with two edges keeps the one added last, a slot past the
    number of data edges is left out."""
    from jitsim.graph.tfgraph import CONTROL, SOURCE_ID, TfGraph

    tg = TfGraph.from_graph(Graph.from_nodes([("a", "Placeholder", []), ("b", "Placeholder", []),
                                              ("z", "NoOp", []), ("y", "NoOp", []), ("n", "AddV2", [])]))
    a, b, z, y, n = (tg.by_name[k] for k in "abzyn")
    node = tg.nodes[n]
    assert tg._inputs(node) == []
    tg.add_edge(b, 0, n, 1)
    tg.add_edge(z, CONTROL, n, CONTROL)
    tg.add_edge(a, 2, n, 0)
    tg.add_edge(y, CONTROL, n, CONTROL)
    assert any(e.src == SOURCE_ID for e in node.in_edges.values())  # (the fixup's edge, not written)
    assert tg._inputs(node) == ["a:2", "b", "^y", "^z"]
    tg.add_edge(a, 0, n, 1)  # a second edge into slot 1: the last one counts
    assert tg._inputs(node) == ["a:2", "a", "^y", "^z"]
    m = tg.nodes[tg.by_name["a"]]
    tg.add_edge(b, 1, m.id, 0)
    assert tg._inputs(m) == ["b:1"]
    tg.add_edge(b, 0, m.id, 5)  # two data edges, slots 0 and 5: slot 5 is past them, left out
    assert tg._inputs(m) == ["b:1"]


# -- writing beside the report (issue 25) -----------------------------------------------------

def _in_background(monkeypatch):
    """start_write's thread, also where this process may use only one CPU."""
    from jitsim.files import output

    monkeypatch.setattr(output, "several_cpus", lambda: True)


def test_started_write_goes_in_place_at_finish(tmp_path, monkeypatch):
    from jitsim.files.output import start_write

    _in_background(monkeypatch)
    out = tmp_path / "out.pbtxt"
    out.write_bytes(b"old\n")
    w = start_write(out, iter([b"node {\n", b"}\n"]), background=True)
    assert w._writing.in_thread  # (the path under test)
    w._writing.wait()
    assert out.read_bytes() == b"old\n"  # written, not in place yet
    w.finish()
    assert out.read_bytes() == b"node {\n}\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.pbtxt"]


def test_started_write_discarded_or_failed_leaves_the_old_file(tmp_path, monkeypatch):
    from jitsim.errors import JitsimError
    from jitsim.files.output import start_write

    _in_background(monkeypatch)
    out = tmp_path / "out.pbtxt"
    out.write_bytes(b"old\n")
    w = start_write(out, iter([b"new\n"]), background=True)
    w.discard()
    w.finish()  # (nothing after discard)
    assert out.read_bytes() == b"old\n"

    def broken():
        yield b"node {\n"
        raise RuntimeError("printer failed")

    w = start_write(out, broken(), background=True)
    with pytest.raises(RuntimeError, match="printer failed"):
        w.finish()
    assert out.read_bytes() == b"old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.pbtxt"]
    # a path that cannot be written is refused at the start, before any work
    with pytest.raises(JitsimError, match="missing"):
        start_write(tmp_path / "missing" / "out.pbtxt", iter([b"x"]), background=True)


def test_cluster_that_fails_after_its_write_began_writes_nothing(tmp_path, monkeypatch):
    # `cluster -o` starts writing the marked graph before it builds its report; when the
    # report fails, the output is not put in place and no temporary file stays behind.
    from jitsim import cli
    from jitsim.cli.cluster import cmd_cluster
    from jitsim.explain import clustering
    from jitsim.graph import io

    _in_background(monkeypatch)
    begun = []
    real_start = io.save_started
    monkeypatch.setattr(io, "save_started", lambda *a: begun.append(real_start(*a)) or begun[-1])
    graph = Path(__file__).resolve().parents[1] / "examples" / "mnist_softmax" / \
        "before_clone_constants_for_better_clustering.pbtxt"

    def broken(res):
        raise RuntimeError("report failed")

    monkeypatch.setattr(clustering, "node_records", broken)
    with pytest.raises(RuntimeError, match="report failed"):
        cmd_cluster(cli.build_parser("cluster").parse_args(["cluster", str(graph), "-o", str(tmp_path / "o.pbtxt")]))
    assert list(tmp_path.iterdir()) == []
    assert len(begun) == 1 and begun[0]._done  # it had begun (and was discarded)
    monkeypatch.undo()
    _in_background(monkeypatch)
    cmd_cluster(cli.build_parser("cluster").parse_args(["cluster", str(graph), "-o", str(tmp_path / "o.pbtxt")]))
    assert [p.name for p in tmp_path.iterdir()] == ["o.pbtxt"]
