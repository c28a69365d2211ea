"""`jitsim report`: the self-contained HTML page (content, escaping, the embedded
explanations), and the page in a real headless browser (Debian chromium + chromedriver)."""

import html
import json
import re
import shutil
import time
from pathlib import Path

import pytest

from jitsim.cli import main
from jitsim.explain import render
from jitsim.explain.clustering import cluster
from jitsim.explain.reasons import REASONS
from jitsim.explain.report import explanations, write_report

from conftest import severe_browser_errors as _severe, wait_until as _wait

ROOT = Path(__file__).resolve().parents[1]
MNIST = ROOT / "examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt"
FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"

SCRIPT_NAME = "</script><script>window.pwned=1</script>"
RENAMED = {"add": SCRIPT_NAME, "mul": 'a"b\\c <b>&amp;ü→', "x": "it's"}


def weird_mnist():
    """MNIST with nodes renamed to names that break naive HTML/DOT/JS quoting: an
    unclustered one (add), a clustered one (mul), an _Arg (x). Returns (clustering, renames)."""
    from jitsim.registry import protos
    from jitsim.graph.io import load
    from jitsim.graph.model import Graph

    gd = protos.GraphDef()
    gd.CopyFrom(load(MNIST).graphdef)
    for nd in gd.node:
        nd.name = RENAMED.get(nd.name, nd.name)
        inputs = []
        for i in nd.input:
            m = re.fullmatch(r"(\^?)([^:]*)(:\d+)?", i)
            inputs.append(m[1] + RENAMED.get(m[2], m[2]) + (m[3] or ""))
        del nd.input[:]
        nd.input.extend(inputs)
    return cluster(Graph(gd, source="weird.pbtxt"), flags=FLAGS), RENAMED


@pytest.fixture(scope="module")
def mnist():
    return cluster(MNIST, flags=FLAGS)


@pytest.fixture(scope="module")
def mnist_page(tmp_path_factory, mnist):
    d = tmp_path_factory.mktemp("report")
    msg = write_report(mnist, d)
    return d / "index.html", msg


def _data(page: str) -> dict:
    m = re.search(r'<script type="application/json" id="jitsim-data">(.*?)</script>', page, re.S)
    return json.loads(m[1])


def _texts(data: dict) -> dict[str, str]:
    """Each node's explanation as the page's script assembles it."""
    out = {}
    for n in data["nodes"]:
        t = (n[0] if n[6] else "") + data["chunks"][n[4]]
        out[n[0]] = t + ("\n" + data["chunks"][n[5]] if n[5] >= 0 else "")
    return out


def test_writes_index_html(mnist_page, mnist):
    path, msg = mnist_page
    assert path.name == "index.html" and path.exists()
    assert msg.startswith(f"wrote {path} (5 clusters, 72 nodes, ")
    page = path.read_text()
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert len(page) < 400_000


def test_self_contained(mnist_page):
    page = mnist_page[0].read_text()
    assert not re.search(r"<(script|img|iframe|link)[^>]*\b(src|href)=\"(https?:)?//", page)
    assert not re.search(r"<link[^>]*stylesheet", page)
    assert "@import" not in page and "url(http" not in page
    assert "default-src 'none'" in page  # the page may not fetch anything


def test_summary_and_tables(mnist_page, mnist):
    page = mnist_page[0].read_text()
    summary = page[page.index('<section id="summary">'):page.index('<section id="search-section">')]
    assert html.escape(mnist.options.describe()) in summary
    assert "<dt>nodes</dt><dd>72</dd>" in summary and "56 nodes in 5 clusters" in summary
    table = page[page.index('id="cluster-table"'):page.index('<section id="reasons">')]
    for name, members in mnist.clusters.items():
        assert re.search(rf'<tr id="cluster-{name}">.*?>{name}</a></td><td class="num">{len(members)}</td>', table)
    reasons = page[page.index('id="reason-table"'):page.index('<section id="merges">')]
    counts = {}
    for rec in mnist.nodes.values():
        if rec.cluster is None:
            counts[rec.code] = counts.get(rec.code, 0) + 1
    rows = re.findall(r'<tr id="reason-(\w+)"><td><code class="rc">\w+</code></td><td class="num">(\d+)</td>', reasons)
    assert {code: int(k) for code, k in rows} == counts
    assert [code for code, _ in rows] == sorted(counts, key=lambda k: (-counts[k], k))
    for code in counts:  # the catalogue's text for every code
        assert html.escape(REASONS[code].title) in reasons and REASONS[code].anchor in reasons
    assert "_FusedMatMul×4" in reasons
    merges = page[page.index('id="merge-table"'):]
    assert '<tr id="merge-MERGE_RESOURCE">' in merges and '<tr id="merge-MERGE_CYCLE">' in merges


def test_embedded_explanations_are_jitsim_explain(mnist_page, mnist):
    data = _data(mnist_page[0].read_text())
    texts = _texts(data)
    assert list(texts) == list(mnist.nodes)
    for name, text in texts.items():
        assert text == str(mnist.explain(name)), name
    # shared parts are stored once: fewer chunks than nodes
    assert len(data["chunks"]) < len(data["nodes"])


def test_search_and_explanation_elements(mnist_page):
    page = mnist_page[0].read_text()
    for el in ('<input id="search"', '<ul id="results">', '<pre id="explanation">'):
        assert el in page


def test_escaping(tmp_path):
    c, ren = weird_mnist()
    write_report(c, tmp_path)
    page = (tmp_path / "index.html").read_text()
    assert page.count("<script") == 2 and page.count("</script>") == 2
    assert SCRIPT_NAME not in page
    assert html.escape(SCRIPT_NAME) in page  # in the unclustered table
    texts = _texts(_data(page))
    for name in ren.values():
        assert texts[name] == str(c.explain(name))


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is not installed")
def test_inline_svg(mnist_page, mnist):
    page = mnist_page[0].read_text()
    graph = page[page.index('<section id="graph">'):]
    assert '<div id="graph-box"><svg' in graph and "<?xml" not in graph and "<!DOCTYPE svg" not in graph
    for name in mnist.clusters:
        assert f"{name} (" in graph
    assert 'id="n0"' in graph  # SVG ids are node indexes: the script links them to explanations


def test_without_dot(tmp_path, mnist, monkeypatch):
    monkeypatch.setattr(render.shutil, "which", lambda name, *a, **k: None)
    msg = write_report(mnist, tmp_path / "new" / "dir")
    assert "no picture" in msg and "apt-get install graphviz" in msg
    page = (tmp_path / "new/dir/index.html").read_text()
    assert '<p id="graph-missing">' in page and "apt-get install graphviz" in page and "<svg" not in page


def test_cli_report(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)
    assert main(["report", str(MNIST), "-o", str(tmp_path / "r")]) == 0
    assert capsys.readouterr().err.startswith(f"wrote {tmp_path / 'r' / 'index.html'} (5 clusters, 72 nodes")
    (tmp_path / "file").write_text("x")
    assert main(["report", str(MNIST), "-o", str(tmp_path / "file")]) == 2
    assert "not a directory" in capsys.readouterr().err


def test_linear_time_on_big_clusters(monkeypatch):
    """What a cluster's members share (its op summary) is computed once per cluster, not once
    per member: explaining every node stays linear on 14k-node clusters."""
    from jitsim.explain import summary

    c = cluster(MNIST, flags=FLAGS)
    calls = []
    real = summary.op_summary
    monkeypatch.setattr(summary, "op_summary", lambda *a, **k: calls.append(1) or real(*a, **k))
    texts = dict(explanations(c))
    assert len(calls) == len(c.clusters)
    calls.clear()
    assert str(c.explain("mul")) == texts["mul"] and calls == []


# -- in a real browser ----------------------------------------------------------------------


def test_in_browser_search_finds_a_node(browser, mnist_page):
    from selenium.webdriver.common.by import By

    browser.get(mnist_page[0].as_uri())
    assert browser.title.startswith("jitsim report")
    assert _severe(browser) == []
    search = browser.find_element(By.ID, "search")
    search.send_keys("add")
    expl = browser.find_element(By.ID, "explanation")
    assert _wait(lambda: "UNSUPPORTED_OP" in expl.text)
    assert expl.text.startswith("add (_FusedMatMul")
    assert expl.get_attribute("data-code") == "UNSUPPORTED_OP"
    # a regex lists several nodes; one match shows it
    search.clear()
    search.send_keys(r"^add_\d$")
    results = browser.find_element(By.ID, "results")
    assert _wait(lambda: len(results.find_elements(By.TAG_NAME, "li")) == 3)
    assert sorted(li.text.split()[0] for li in results.find_elements(By.TAG_NAME, "li")) == ["add_1", "add_2", "add_3"]
    # a filter, then a result link opens the node
    search.clear()
    search.send_keys("code:CLUSTER_TOO_SMALL")
    assert _wait(lambda: len(results.find_elements(By.TAG_NAME, "li")) == 6)
    results.find_element(By.LINK_TEXT, "add/ReadVariableOp").click()
    assert _wait(lambda: expl.get_attribute("data-node") == "add/ReadVariableOp")
    assert "CLUSTER_TOO_SMALL" in expl.text
    assert _severe(browser) == []


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is not installed")
def test_in_browser_graph_click_and_escaped_names(browser, tmp_path):
    from selenium.webdriver.common.by import By

    c, ren = weird_mnist()
    write_report(c, tmp_path)
    browser.get((tmp_path / "index.html").as_uri())
    assert _severe(browser) == []
    assert browser.execute_script("return window.pwned === undefined")
    idx = list(c.nodes).index(SCRIPT_NAME)
    node = browser.find_element(By.CSS_SELECTOR, f"#graph-box g#n{idx}")
    browser.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", node)
    expl = browser.find_element(By.ID, "explanation")
    assert _wait(lambda: expl.get_attribute("data-node") == SCRIPT_NAME)
    assert expl.text == str(c.explain(SCRIPT_NAME))
    assert "hl" in node.get_attribute("class")
    search = browser.find_element(By.ID, "search")
    search.clear()
    search.send_keys(ren["mul"])
    assert _wait(lambda: expl.get_attribute("data-node") == ren["mul"])
    assert expl.text.startswith(ren["mul"] + " (Mul") and "is in cluster_1" in expl.text
    assert _severe(browser) == []


# every run of non-space text inside the page's tables and summary, as the browser laid it out:
# a run drawn on more than one line was broken inside a word (<wbr> splits names into runs at
# their separators, and a run ends after a hyphen, so breaking there is allowed)
_MID_WORD_BREAKS = r"""
var out = [];
document.querySelectorAll("main dd, main td").forEach(function (cell) {
  var walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT), t;
  while ((t = walk.nextNode())) {
    var re = /[^\s-]+-*|-+/g, m;
    while ((m = re.exec(t.data))) {
      var r = document.createRange();
      r.setStart(t, m.index);
      r.setEnd(t, m.index + m[0].length);
      var tops = new Set(Array.from(r.getClientRects()).filter(function (q) { return q.width > 0; })
                         .map(function (q) { return Math.round(q.top); }));
      if (tops.size > 1) out.push(m[0]);
    }
  }
});
return out;
"""


@pytest.mark.parametrize("width", [1280, 640])
def test_in_browser_no_word_broken_inside(browser, mnist_page, width):
    """Codes, op names and node names wrap only between words or at their separators, also in
    a narrow window (the old CSS, overflow-wrap:anywhere, broke them mid-word there)."""
    browser.set_window_size(width, 1600)
    try:
        browser.get(mnist_page[0].as_uri())
        broken = browser.execute_script(_MID_WORD_BREAKS)
        assert broken == []
        # the check itself sees a break where there is one: force one into a code cell
        browser.execute_script("var c = document.querySelector('td code.rc'); c.style.whiteSpace = 'normal';"
                               "c.style.wordBreak = 'break-all'; c.style.display = 'inline-block';"
                               "c.style.width = '3ch';")
        assert browser.execute_script(_MID_WORD_BREAKS)
    finally:
        browser.set_window_size(1280, 1600)


def test_in_browser_docs_references_name_the_code(browser, mnist_page):
    """The report never links into a source checkout (it is the same page wherever jitsim is
    installed): each reason names its docs/reasons.md anchor as text, and that anchor is the
    heading docs/reasons.md has for the code."""
    from selenium.webdriver.common.by import By

    browser.get(mnist_page[0].as_uri())
    refs = browser.find_elements(By.CSS_SELECTOR, "#reason-table .docs")
    assert refs and not browser.find_elements(By.CSS_SELECTOR, "#reason-table a.docs")
    docs = (Path(__file__).resolve().parents[1] / "docs" / "reasons.md").read_text()
    for ref in refs:
        page, _, anchor = ref.text.partition("#")
        assert page == "docs/reasons.md" and f"`{anchor.upper()}`" in docs


@pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz's dot is not installed")
def test_in_browser_graph_default_size_and_zoom(browser, mnist_page):
    """The picture opens readable: at graphviz's size when it fits, else fitted to the width but not
    below 60%; the zoom buttons change it and the box pans."""
    from selenium.webdriver.common.by import By

    browser.get(mnist_page[0].as_uri())
    svg = browser.find_element(By.CSS_SELECTOR, "#graph-box svg")
    box = browser.find_element(By.ID, "graph-box")
    natural = browser.execute_script("return parseFloat(arguments[0].getAttribute('width')) * 4 / 3", svg)
    zoom = int(browser.find_element(By.ID, "zoom").text.rstrip("%"))
    expected = max(min(1, (box.size["width"] - 2) / natural), 0.6)
    assert abs(zoom - round(expected * 100)) <= 1
    assert abs(svg.size["width"] - natural * zoom / 100) <= natural * 0.01 + 2
    w0 = svg.size["width"]
    browser.find_element(By.ID, "zoom-in").click()
    assert svg.size["width"] > w0 * 1.2
    browser.find_element(By.ID, "zoom-fit").click()
    # the box's width, less a vertical scroll bar the taller picture had when the button was pressed
    assert 0 <= browser.execute_script("return arguments[0].clientWidth", box) - 2 - svg.size["width"] <= 20
    assert _severe(browser) == []
