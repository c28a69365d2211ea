"""`jitsim render`: DOT structure of the full and collapsed views, images through graphviz's
dot, the missing-dot fallback, and the committed README picture."""

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from jitsim.cli import main
from jitsim.errors import JitsimError
from jitsim.explain import render
from jitsim.explain.clustering import cluster
from jitsim.explain.render import FAMILIES, code_family, render_to_file, to_dot

ROOT = Path(__file__).resolve().parents[1]
MNIST = ROOT / "examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt"
FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
HAVE_DOT = shutil.which("dot") is not None
needs_dot = pytest.mark.skipif(not HAVE_DOT, reason="graphviz's dot is not installed (apt-get install graphviz)")


@pytest.fixture(scope="module")
def mnist():
    return cluster(MNIST, flags=FLAGS)


def _blocks(src: str) -> dict[str, str]:
    """subgraph name -> its body (the graphviz package writes one statement per line)."""
    out = {}
    for m in re.finditer(r"^\tsubgraph (\w+) \{\n(.*?)^\t\}$", src, re.M | re.S):
        out[m[1]] = m[2]
    return out


def _node_stmts(src: str) -> dict[str, str]:
    """node id -> its attribute list, for every node statement."""
    return {m[1]: m[2] for m in re.finditer(r"^\t+(\w+) \[(.*)\]$", src, re.M) if m[1] not in ("node", "edge")}


def _edge_stmts(src: str) -> list[tuple[str, str, str]]:
    return [(m[1], m[2], m[3] or "") for m in re.finditer(r"^\t+(\w+) -> (\w+)(?: \[(.*)\])?$", src, re.M)]


def test_full_view_clusters_are_subgraphs_with_their_members(mnist):
    src = to_dot(mnist, view="full")
    ids = render.node_ids(mnist)
    blocks = _blocks(src)
    assert len(blocks) == len(mnist.clusters) == 5
    for i, (name, members) in enumerate(mnist.clusters.items()):
        body = blocks[f"cluster_{i}"]
        assert f'label="{name} ({len(members)} nodes)"' in body
        inside = set(re.findall(r"^\t\t(\w+) \[", body, re.M))
        assert inside == {ids[m] for m in members}
    # every node is drawn exactly once
    stmts = _node_stmts(src)
    assert set(stmts) - {"legend"} == set(ids.values())


def test_full_view_badges_unclustered_nodes_with_their_code(mnist):
    stmts = _node_stmts(to_dot(mnist, view="full"))
    ids = render.node_ids(mnist)
    unclustered = {n: r for n, r in mnist.nodes.items() if r.cluster is None}
    assert {r.code for r in unclustered.values()} == {"UNSUPPORTED_OP", "CLUSTER_TOO_SMALL", "TOP_LEVEL_ARG_RETVAL"}
    for name, rec in mnist.nodes.items():
        attrs = stmts[ids[name]]
        if rec.cluster is None:
            assert f"[{rec.code}]" in attrs
            assert f'fillcolor="{FAMILIES[code_family(rec.code)][0]}"' in attrs
        else:
            assert "[" not in attrs.split("label=")[1].split('" ')[0]  # no badge on clustered nodes
    assert code_family("UNSUPPORTED_OP") != code_family("CLUSTER_TOO_SMALL") != code_family("TOP_LEVEL_ARG_RETVAL")
    # the legend counts the codes
    legend = stmts["legend"]
    assert ">UNSUPPORTED_OP</TD><TD ALIGN=\"RIGHT\">4<" in legend


def test_full_view_edges_control_dashed(mnist):
    src = to_dot(mnist, view="full")
    ids = render.node_ids(mnist)
    g = mnist.graph
    data, control = set(), set()
    for e in g.edges():
        s, d = g.nodes[e.src].name, g.nodes[e.dst].name
        if s in ids and d in ids:
            (control if e.is_control else data).add((ids[s], ids[d]))
    control -= data
    assert control, "MNIST has control edges (AssignSubVariableOp -> ReadVariableOp)"
    edges = {(s, d): attrs for s, d, attrs in _edge_stmts(src)}
    assert set(edges) == data | control
    for pair in control:
        assert "style=dashed" in edges[pair]
    for pair in data:
        assert "dashed" not in edges[pair]


def test_collapsed_view_one_box_per_cluster(mnist):
    src = to_dot(mnist, view="collapsed")
    stmts = _node_stmts(src)
    cids = render.cluster_ids(mnist)
    assert not _blocks(src)
    for name, members in mnist.clusters.items():
        assert f'label="{name}\\n{len(members)} nodes\\n' in stmts[cids[name]]
    ids = render.node_ids(mnist)
    clustered = {ids[m] for ms in mnist.clusters.values() for m in ms}
    assert not clustered & set(stmts)
    # edges between two clusters are aggregated: the label counts the node pairs
    pairs: dict[tuple[str, str], set] = {}
    g = mnist.graph
    for e in g.edges():
        s, d = g.nodes[e.src].name, g.nodes[e.dst].name
        if s not in mnist.nodes or d not in mnist.nodes:
            continue
        cs, cd = mnist.nodes[s].cluster, mnist.nodes[d].cluster
        if cs and cd and cs != cd:
            pairs.setdefault((cids[cs], cids[cd]), set()).add((s, d))
    assert pairs
    edges = {(s, d): attrs for s, d, attrs in _edge_stmts(src)}
    for key, ps in pairs.items():
        if len(ps) > 1:
            assert f'label="{len(ps)}"' in edges[key] or f"label={len(ps)}" in edges[key]
        else:
            assert "label" not in edges[key]
    # unclustered nodes next to a cluster are kept (add: _FusedMatMul between clusters)
    assert "[UNSUPPORTED_OP]" in src and "collapsed view" in src


def test_auto_view_switches_at_max_nodes(mnist):
    assert "full view" in to_dot(mnist)
    assert "scopes view" in to_dot(mnist, max_nodes=len(mnist.nodes) - 1)  # the big-graph default (issue 40)
    assert "full view" in to_dot(mnist, max_nodes=len(mnist.nodes))
    with pytest.raises(JitsimError, match="unknown view"):
        to_dot(mnist, view="sideways")


def test_collapsed_view_bridges_hidden_paths():
    """A chain cluster -> many unclustered nodes -> cluster stays connected when the
    unclustered boxes are over budget: a dotted bridge edge stands for the hidden path."""
    from graphs import AUTO, arg, graph, op, ret

    g = graph(arg("in"), op("a1", "Neg", "in"), op("a2", "Neg", "a1"), op("u1", "Unique", "a2"),
              op("u2", "Unique", "u1"), op("b1", "Neg", "u2"), op("b2", "Neg", "b1"), ret("out", "b2"))
    c = cluster(g, flags=AUTO + " --tf_xla_min_cluster_size=1")
    assert len(c.clusters) == 2 and c.nodes["u2"].cluster is None
    old = render.COLLAPSED_MAX_BOXES
    render.COLLAPSED_MAX_BOXES = 0
    try:
        src = to_dot(c, view="collapsed")
    finally:
        render.COLLAPSED_MAX_BOXES = old
    edges = _edge_stmts(src)
    assert [(s, d) for s, d, a in edges if "dotted" in a] == [("c0", "c1")]
    assert "not shown: 4 unclustered nodes (TOP_LEVEL_ARG_RETVAL 2, UNIQUE_OP 2)" in src


@needs_dot
def test_svg_is_valid_xml_with_every_cluster(tmp_path, mnist):
    out = tmp_path / "g.svg"
    msg = render_to_file(mnist, out)
    assert msg == f"wrote {out} (5 clusters, 72 nodes, full view)"
    root = ET.parse(out).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    texts = " ".join(t.text or "" for t in root.iter("{http://www.w3.org/2000/svg}text"))
    for name, members in mnist.clusters.items():
        assert f"{name} ({len(members)} nodes)" in texts
    ids = {g.get("id") for g in root.iter("{http://www.w3.org/2000/svg}g")}
    assert set(render.node_ids(mnist).values()) <= ids
    assert not list(tmp_path.glob(".g.svg.*")), "no temporary file left behind"


@needs_dot
def test_png(tmp_path, mnist):
    out = tmp_path / "g.png"
    render_to_file(mnist, out, view="collapsed")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_missing_dot_writes_dot_and_says_how_to_install(tmp_path, mnist, monkeypatch):
    monkeypatch.setattr(render.shutil, "which", lambda name, *a, **k: None)
    out = tmp_path / "pic.svg"
    with pytest.raises(JitsimError) as ei:
        render_to_file(mnist, out)
    msg = str(ei.value)
    assert "\n" not in msg
    assert str(tmp_path / "pic.dot") in msg and "apt-get install graphviz" in msg
    assert not out.exists()
    assert (tmp_path / "pic.dot").read_text() == to_dot(mnist)
    # .dot itself needs no graphviz
    assert render_to_file(mnist, tmp_path / "x.dot").startswith("wrote ")


def test_missing_dot_via_path_in_cli(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    assert main(["render", str(MNIST), "-o", str(tmp_path / "pic.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("jitsim: ") and len(err.splitlines()) == 1 and "apt-get install graphviz" in err
    assert (tmp_path / "pic.dot").exists() and not (tmp_path / "pic.png").exists()


def test_unknown_extension(tmp_path, mnist):
    with pytest.raises(JitsimError, match=r"unknown picture format '\.jpg'"):
        render_to_file(mnist, tmp_path / "pic.jpg")
    assert not list(tmp_path.iterdir())


def test_cli_render_end_to_end(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    out = tmp_path / "g.dot"
    assert main(["render", str(MNIST), "-o", str(out)]) == 0
    assert capsys.readouterr().err.strip() == f"wrote {out} (5 clusters, 72 nodes, full view)"
    assert out.read_text() == to_dot(cluster(MNIST, flags=FLAGS))
    assert main(["render", str(MNIST), "-o", str(out), "--collapsed"]) == 0
    assert "collapsed view" in capsys.readouterr().err and len(_blocks(out.read_text())) == 0
    assert main(["render", str(MNIST), "-o", str(out), "--max-nodes", "10"]) == 0
    assert "scopes view" in capsys.readouterr().err
    assert main(["render", str(MNIST), "-o", str(out), "--scopes"]) == 0
    assert "scopes view" in capsys.readouterr().err
    assert main(["render", str(MNIST), "-o", str(out), "--exclude-op", "Mul"]) == 0
    assert "[WHATIF_EXCLUDED]" in out.read_text()
    assert main(["render", str(MNIST), "-o", str(tmp_path / "no/such/dir/g.dot")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_names_are_escaped(tmp_path):
    """Quotes, backslashes, '<...>' and non-ASCII in node names stay literal labels."""
    from test_report import weird_mnist

    c, ren = weird_mnist()
    src = to_dot(c, view="full")
    ids = render.node_ids(c)
    stmts = _node_stmts(src)
    assert 'label="a\\"b\\\\c <b>&amp;amp;ü→\\nMul"' in stmts[ids['a"b\\c <b>&amp;ü→']]
    if HAVE_DOT:
        out = tmp_path / "w.svg"
        render_to_file(c, out)
        root = ET.parse(out).getroot()
        tips = {a.get("{http://www.w3.org/1999/xlink}title") for a in root.iter("{http://www.w3.org/2000/svg}a")}
        for name in ren.values():
            assert any(t and t.startswith(name + " (") for t in tips), name


def test_readme_picture_is_current(mnist):
    """docs/img/mnist_softmax.{dot,svg} are what `jitsim render` draws now. Regenerate with
    ``env -u TF_XLA_FLAGS jitsim render examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt -o docs/img/mnist_softmax.dot``
    and the same with ``-o docs/img/mnist_softmax.svg``. The DOT must match byte for byte;
    dot's SVG depends on the graphviz version and fonts, so the SVG must have the same
    nodes and clusters."""
    dot = (ROOT / "docs/img/mnist_softmax.dot").read_text()
    assert dot == to_dot(mnist), "docs/img/mnist_softmax.dot is stale: regenerate it (see docstring)"
    root = ET.parse(ROOT / "docs/img/mnist_softmax.svg").getroot()
    ns = "{http://www.w3.org/2000/svg}"
    ids = {g.get("id") for g in root.iter(ns + "g") if g.get("class") in ("node", "cluster")}
    assert ids == set(_node_stmts(dot)) | {f"c{i}" for i in range(len(mnist.clusters))}
    texts = " ".join(t.text or "" for t in root.iter(ns + "text"))
    for name, members in mnist.clusters.items():
        assert f"{name} ({len(members)} nodes)" in texts


def test_big_pictures_get_a_bounded_layout(mnist, monkeypatch):
    # The MNIST full view has ~150 DOT statements: below the bound, dot's default layout.
    src = to_dot(mnist, view="full")
    assert "nslimit" not in src
    # With the bound lowered under its size the same picture carries the bounded settings,
    # which is what a collapsed ResNet-50 training step (~900 statements) gets.
    monkeypatch.setattr(render, "BOUNDED_LAYOUT_STATEMENTS", 10)
    src = to_dot(mnist, view="full")
    for k, v in render.BOUNDED_LAYOUT.items():
        assert f"{k}={v}" in src


@needs_dot
def test_dot_past_its_time_limit_leaves_the_dot_source(mnist, tmp_path, monkeypatch):
    monkeypatch.setattr(render, "DOT_TIMEOUT_S", 0.001)
    heard = []
    with pytest.raises(JitsimError) as e:
        render_to_file(mnist, tmp_path / "g.svg", view="full", progress=heard.append)
    assert "did not finish within" in e.value.message and "g.dot" in e.value.message
    assert not (tmp_path / "g.svg").exists()
    assert (tmp_path / "g.dot").read_text().startswith("// jitsim render")
    assert heard and "graphviz dot drawing" in heard[0]


def test_scope_view_is_the_top_level_with_cluster_bars():
    """The scope view of MNIST (hand-checked against the graph's names): its top-level scopes
    are boxes (gradient_tape among them, with its node count), the nodes at the top level are drawn as in the
    full view, every box carries one bar cell per cluster of its nodes plus grey for the
    unclustered, and an edge joins two top-level items once, labelled with how many edges it
    stands for."""
    from jitsim.explain.hierarchy import scope_tree

    c = cluster(MNIST, flags=FLAGS)
    src = to_dot(c, view="scopes")
    names = [n for n in c.nodes]
    h = scope_tree(names)
    tops = [g for g, p in enumerate(h.parents) if p == 0]
    for g in tops:
        assert f"s{g} [label=<<TABLE" in src
    members = {}
    for n, g in zip(names, h.node_group):
        while g and h.parents[g]:
            g = h.parents[g]
        members.setdefault(g, []).append(n)
    gt = h.labels.index("gradient_tape")
    assert f"<B>gradient_tape</B>" in src and f"{len(members[gt])} nodes" in src
    cells = re.search(rf"s{gt} \[label=<<TABLE.*?</TABLE></TD></TR></TABLE>>", src, re.S).group(0)
    want = {c.nodes[n].cluster for n in members[gt]}
    assert cells.count("<TD WIDTH=") == len(want)
    assert ("#d0d0d0" in cells) == (None in want)
    # the top-level nodes (no scope) are drawn as nodes of the full view
    assert all(f'"{render.node_ids(c)[n]}" [label=' in src or f"{render.node_ids(c)[n]} [label=" in src
               for n in members.get(0, []))
    edges = re.findall(r"^\s*(\S+) -> (\S+)", src, re.M)
    assert len(edges) == len(set(edges))
