"""jitsim's clusters in Google's Model Explorer (``render -o FILE.json``): the graph JSON itself,
and the real Model Explorer (``ai-edge-model-explorer``, started on loopback) showing it in a
headless Chromium."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import quote

import pytest

from jitsim.cli import main
from jitsim.explain.clustering import cluster
from jitsim.explain.model_explorer import collection_json, graph_json

from conftest import wait_until as _wait

ROOT = Path(__file__).resolve().parents[1]
MNIST = ROOT / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt"
FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


@pytest.fixture(scope="module")
def mnist():
    return cluster(MNIST, flags=FLAGS)


def _attrs(node) -> dict:
    return {a["key"]: a["value"] for a in node["attrs"]}


def test_every_node_once_in_its_cluster_layer_or_its_scope(mnist):
    g = graph_json(mnist)
    nodes = {n["id"]: n for n in g["nodes"]}
    assert len(nodes) == len(g["nodes"]) == len(mnist.nodes)  # no node deleted by a later pass here
    for name, rec in mnist.nodes.items():
        n = nodes[name]
        scope = name.rpartition("/")[0]
        assert n["label"] == rec.op
        a = _attrs(n)
        assert a["reason"].split(":")[0] == rec.code
        if rec.cluster:
            # the cluster is the outer layer, the node's own scope inside it
            assert n["namespace"] == rec.cluster + (f"/{scope}" if scope else ""), name
            assert a["cluster"] == rec.cluster
        else:
            assert n["namespace"] == scope and a["cluster"] == "(none)"
    # every cluster has a coloured layer and its size in the side panel, as `jitsim cluster` says
    assert [cfg["namespaceRegex"] for cfg in g["groupNodeConfigs"]] == [f"^{c}$" for c in mnist.clusters]
    assert len({cfg["backgroundColor"] for cfg in g["groupNodeConfigs"]}) == len(mnist.clusters)
    for cname, members in mnist.clusters.items():
        assert g["groupNodeAttributes"][cname]["nodes"] == str(len(members))
        assert g["groupNodeAttributes"][cname]["effective size"] == str(mnist.mark.effective_size(cname))


def test_edges_are_the_graphs(mnist):
    """Data edges become incoming edges with their output and input index; control edges an
    overlay; together they are the graph's edges between the drawn nodes."""
    g = graph_json(mnist)
    data = {(e["sourceNodeId"], int(e["sourceNodeOutputId"]), n["id"], int(e["targetNodeInputId"]))
            for n in g["nodes"] for e in n["incomingEdges"]}
    control = {(e["sourceNodeId"], e["targetNodeId"])
               for e in g["tasksData"]["edgeOverlaysDataListLeftPane"][0]["overlays"][0]["edges"]}
    nodes = mnist.graph.nodes
    want_data, want_control = set(), set()
    for e in mnist.graph.edges():
        s, d = nodes[e.src], nodes[e.dst]
        if s is None or d is None or {s.name, d.name} & {"_SOURCE", "_SINK"}:  # TF's own, not ops
            continue
        if e.is_control:
            want_control.add((s.name, d.name))
        else:
            want_data.add((s.name, e.src_output, d.name, e.dst_input))
    assert data == want_data and data
    assert control == want_control and control


def test_a_scope_named_like_a_cluster_keeps_apart():
    """A graph whose own top-level name scope is called ``cluster_0`` (hand-derived: two MatMuls
    in scope ``cluster_0`` that the pass clusters as ``cluster_0``, and an unclustered _Retval):
    the cluster's layer is ``cluster_0 (XLA)``, so Model Explorer does not merge the two."""
    from graphs import F32, Type, graph_of

    g = graph_of([
        ("x", "_Arg", [], {"T": Type(F32), "index": 0}),
        ("cluster_0/a", "MatMul", ["x", "x"], {"T": Type(F32)}),
        ("cluster_0/b", "MatMul", ["cluster_0/a", "x"], {"T": Type(F32)}),
        ("y", "_Retval", ["cluster_0/b"], {"T": Type(F32), "index": 0}),
    ])
    for nd in g.graphdef.node:
        nd.device = CPU
    c = cluster(g, flags=FLAGS + " --tf_xla_min_cluster_size=2", input_stage="graphdef", tf="never")
    assert list(c.clusters) == ["cluster_0"]
    doc = graph_json(c)
    ns = {n["id"]: n["namespace"] for n in doc["nodes"]}
    assert ns["cluster_0/a"] == "cluster_0 (XLA)/cluster_0"
    assert doc["groupNodeConfigs"][0]["namespaceRegex"] == f"^{re.escape('cluster_0 (XLA)')}$"


def test_render_json_writes_a_model_explorer_file(tmp_path, capsys):
    out = tmp_path / "mnist.json"
    assert main(["render", str(MNIST), "-o", str(out)]) == 0
    err = capsys.readouterr().err
    assert "Model Explorer graph" in err and f"model-explorer {out}" in err
    doc = json.loads(out.read_text())
    assert doc["label"] == f"jitsim: {MNIST.name}" and doc["graphs"][0]["id"] == "main"
    # an unknown suffix is refused before any work, naming .json among the choices
    assert main(["render", str(MNIST), "-o", str(tmp_path / "x.svgz")]) == 2
    assert ".json (a Model Explorer graph)" in capsys.readouterr().err
    assert not (tmp_path / "x.svgz").exists()


# -- the real Model Explorer, in a headless browser ------------------------------------------


def _model_explorer_command() -> list[str]:
    """Model Explorer run by this Python (``python -m model_explorer``: found however pip
    installed its console script)."""
    import importlib.util

    if importlib.util.find_spec("model_explorer") is None:
        pytest.skip("ai-edge-model-explorer is not installed (pip install -e '.[dev]')")
    return [sys.executable, "-m", "model_explorer"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def model_explorer(tmp_path_factory, mnist):
    """Model Explorer serving jitsim's MNIST graph on loopback: (url, the graph JSON)."""
    exe = _model_explorer_command()
    d = tmp_path_factory.mktemp("me")
    path = d / "mnist.json"
    doc = collection_json(mnist, "jitsim: mnist")
    path.write_text(json.dumps(doc))
    port = _free_port()
    env = {**os.environ, "HOME": str(d)}  # Model Explorer keeps its settings under HOME
    proc = subprocess.Popen([*exe, str(path), "--no_open_in_browser", "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, env=env, cwd=d)
    try:
        def up():
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                return True
            except OSError:
                return proc.poll() is not None
        assert _wait(up, timeout=60) and proc.poll() is None, proc.stdout.read()
        data = quote(json.dumps({"models": [{"url": str(path)}]}))
        yield f"http://127.0.0.1:{port}/?data={data}", doc
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def _body(browser) -> str:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.TAG_NAME, "body").text


def test_model_explorer_shows_the_clusters_as_layers(browser, model_explorer, mnist):
    """Model Explorer loads jitsim's file and counts its nodes and top-level layers (the five
    clusters and the scopes of the unclustered nodes) as jitsim laid them out; its search finds cluster_3 as a layer holding exactly the cluster's ops (Consts are
    hidden in Model Explorer's view)."""
    from selenium.webdriver.common.by import By

    url, doc = model_explorer
    browser.get(url)
    assert _wait(lambda: "layer count" in _body(browser), timeout=30), _body(browser)[:500]
    info = _body(browser)
    shown = [n for n in doc["graphs"][0]["nodes"] if n["label"] != "Const"]
    # Model Explorer's "layer count" is of the top level, the layers it draws first
    layers = {n["namespace"].split("/")[0] for n in shown if n["namespace"]}
    assert re.search(rf"op node count\n{len(shown)}\n", info), info[-400:]
    assert re.search(rf"layer count\n{len(layers)}\n", info), info[-400:]
    search = next(e for e in browser.find_elements(By.CSS_SELECTOR, "input")
                  if e.is_displayed() and "Search" in (e.get_attribute("placeholder") or ""))
    search.click()
    search.send_keys("cluster_3")  # a regex; MNIST has no cluster_30
    assert _wait(lambda: "<root> / cluster_3" in _body(browser), timeout=10), _body(browser)[:800]
    text = _body(browser)
    block = text.split("<root> / cluster_3", 1)[1].split("tips_and_updates", 1)[0]
    listed = Counter(line for line in block.splitlines() if line not in ("", "title", "list"))
    want = Counter(mnist.nodes[m].op for m in mnist.clusters["cluster_3"] if mnist.nodes[m].op != "Const")
    assert listed == want

    # the search also reads jitsim's attributes: a reason code lists the nodes it kept out
    search.clear()
    search.send_keys("CLUSTER_TOO_SMALL")
    small = sum(1 for r in mnist.nodes.values() if r.code == "CLUSTER_TOO_SMALL" and r.op != "Const")
    assert small
    assert _wait(lambda: f"\n{small} results\n" in _body(browser), timeout=10), _body(browser)[:600]
