"""The HTML report's graph explorer on a real model: ResNet-50's training step (TF's own
before_mark_for_compilation dump of the committed fixture run resnet50_train_adam, 12,620
nodes after jitsim's pipeline, 51 clusters), in headless Chromium."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from jitsim.explain import explorer
from jitsim.explain.clustering import cluster
from jitsim.explain.report import write_report

from conftest import severe_browser_errors as _severe, wait_until as _wait

ROOT = Path(__file__).resolve().parents[1]
FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
MNIST = ROOT / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt"


@pytest.fixture(scope="module")
def resnet(corpus):
    root = corpus.extract("resnet50_train_adam")
    idx = corpus.index("resnet50_train_adam")
    g = max((g for g in idx["graphs"] if "before_mark_for_compilation" in g["files"]), key=lambda g: g["nodes"])
    return cluster(root / "dumps" / g["files"]["before_mark_for_compilation"], flags=FLAGS)


@pytest.fixture(scope="module")
def page(tmp_path_factory, resnet):
    d = tmp_path_factory.mktemp("explorer")
    write_report(resnet, d)
    return d / "index.html"


def _data(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    m = re.search(r'<script type="application/json" id="jitsim-data">(.*?)</script>', text, re.S)
    return json.loads(m.group(1))


def test_vendored_dagre_is_the_released_file():
    """The inlined layout library is byte for byte the file of the npm release the vendor
    README names (its checksum), minus the source-map comment."""
    readme = (explorer.VENDOR / "README.md").read_text()
    want = re.search(r"`dagre\.min\.js`\s*`([0-9a-f]{64})`", readme).group(1)
    assert hashlib.sha256((explorer.VENDOR / "dagre.min.js").read_bytes()).hexdigest() == want
    assert "sourceMappingURL" not in explorer.dagre_js()


def test_big_graphs_get_the_explorer_small_ones_the_picture(page, tmp_path):
    html = page.read_text()
    assert 'id="explorer"' in html and "<svg" not in html.split('id="explorer"')[1][:200]
    assert 'id="graph-box"' not in html
    small = tmp_path / "mnist"
    write_report(cluster(MNIST, flags=FLAGS), small)
    s = (small / "index.html").read_text()
    assert 'id="graph-box"' in s and 'id="explorer"' not in s and "dagre" not in s


def _top_level(data):
    """Python's own reading of the page's data: each node's top-level item (its outermost
    group, or the node itself at the top), and the distinct pairs of them an edge joins."""
    t = data["explorer"]["trees"]["scope"]
    par, ng = t["parents"], t["node_group"]
    top = []
    for i, g in enumerate(ng):
        if g == 0:
            top.append(("n", i))
            continue
        while par[g] != 0:
            g = par[g]
        top.append(("g", g))
    ex = data["explorer"]
    pairs = set()
    for flat in (ex["edges"], ex["ctrl"]):
        for a, b in zip(flat[::2], flat[1::2]):
            if top[a] != top[b]:
                pairs.add((top[a], top[b]))
    return set(top), pairs


def _open(browser, page):
    browser.get(page.as_uri())
    assert _wait(lambda: browser.execute_script(
        "return document.getElementById('explorer').getAttribute('data-drawn')"), timeout=20)
    assert _severe(browser) == []


def _drawn(browser) -> dict:
    return browser.execute_script("""
      var host = document.getElementById('explorer'), out = {boxes: [], leaves: [], edges: 0, open: [],
          fonts: [], rects: []};
      host.querySelectorAll('g.box').forEach(function (g) { out.boxes.push(+g.getAttribute('data-g'));
        var b = g.querySelector('rect.body').getBBox(); out.rects.push([b.x, b.y, b.width, b.height]); });
      host.querySelectorAll('g.node').forEach(function (g) { out.leaves.push(+g.id.slice(1));
        var b = g.querySelector('rect.body').getBBox(); out.rects.push([b.x, b.y, b.width, b.height]); });
      host.querySelectorAll('g.grp').forEach(function (g) { out.open.push(+g.getAttribute('data-g')); });
      out.edges = host.querySelectorAll('path.edge').length;
      host.querySelectorAll('text').forEach(function (t) {
        out.fonts.push(parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a); });
      return out;""")


def _overlaps(rects) -> list:
    bad = []
    for k, (x, y, w, h) in enumerate(rects):
        for (x2, y2, w2, h2) in rects[k + 1:]:
            if x < x2 + w2 and x2 < x + w and y < y2 + h2 and y2 < y + h:
                bad.append(((x, y, w, h), (x2, y2, w2, h2)))
    return bad


def test_first_paint_is_a_readable_top_level(browser, page):
    """At first paint: the top level of the name-scope tree (tens of boxes, not hundreds), no
    two boxes on top of each other, every label at least 10 px on screen, and one arrow per
    pair of top-level items an edge joins (bundled)."""
    data = _data(page)
    _open(browser, page)
    d = _drawn(browser)
    top, pairs = _top_level(data)
    drawn = {("g", g) for g in d["boxes"]} | {("n", i) for i in d["leaves"]}
    assert drawn == top and 5 <= len(drawn) <= 30
    assert d["open"] == []
    assert _overlaps(d["rects"]) == []
    assert min(d["fonts"]) >= 10
    assert d["edges"] == len(pairs)


def test_one_click_opens_a_cluster(browser, page, resnet):
    """Grouped by XLA cluster, the top level is the 51 clusters and the unclustered group;
    one click on cluster_3 opens it in place: its members (under their scopes) are drawn inside
    it, everything else stays as it was."""
    from selenium.webdriver.common.by import By

    data = _data(page)
    t = data["explorer"]["trees"]["cluster"]
    _open(browser, page)
    browser.find_element(By.ID, "by-cluster").click()
    before = _drawn(browser)
    assert len(before["boxes"]) == len(resnet.clusters) + 1
    g3 = t["labels"].index("cluster_3")
    browser.execute_script("document.querySelector('#explorer g.box[data-g=\"%d\"]')"
                           ".dispatchEvent(new MouseEvent('click', {bubbles: true}))" % g3)
    after = _drawn(browser)
    assert after["open"] == [g3]
    inside = {g for g, p in enumerate(t["parents"]) if p == g3}
    direct = {i for i, g in enumerate(t["node_group"]) if g == g3}
    assert set(after["boxes"]) == (set(before["boxes"]) - {g3}) | inside
    assert set(after["leaves"]) == set(before["leaves"]) | direct
    members = set(resnet.clusters["cluster_3"])
    names = [n[0] for n in data["nodes"]]
    # every node under the opened group is a member of cluster_3, and every member is there
    under = set()
    for i, g in enumerate(t["node_group"]):
        while g > 0 and g != g3:
            g = t["parents"][g]
        if g == g3:
            under.add(names[i])
    assert under == members
    assert _overlaps(after["rects"]) == []


def test_click_a_node_shows_its_explanation(browser, page, resnet):
    _open(browser, page)
    leaf = browser.execute_script("return +document.querySelector('#explorer g.node').id.slice(1)")
    name = _data(page)["nodes"][leaf][0]
    browser.execute_script("document.getElementById('n%d').dispatchEvent(new MouseEvent('click', {bubbles: true}))"
                           % leaf)
    from selenium.webdriver.common.by import By

    assert browser.find_element(By.ID, "ex-explanation").get_attribute("data-node") == name
    assert browser.find_element(By.ID, "ex-explanation").text == str(resnet.explain(name)).strip()


def test_search_opens_the_path_to_a_deep_node(browser, page):
    """The report's search (or a #node= link) on a node three groups deep: the explorer opens
    its path, draws it highlighted and scrolls it into view."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    data = _data(page)
    t = data["explorer"]["trees"]["scope"]
    deep = next(i for i, g in enumerate(t["node_group"])
                if g and t["parents"][g] and t["parents"][t["parents"][g]])
    name = data["nodes"][deep][0]
    _open(browser, page)
    search = browser.find_element(By.ID, "search")
    search.send_keys(name, Keys.ENTER)
    assert _wait(lambda: browser.execute_script(
        "var e = document.getElementById('n%d'); return !!e && e.classList.contains('hl')" % deep), timeout=5)
    visible = browser.execute_script("""
      var host = document.getElementById('explorer'), r = document.getElementById('n%d').getBoundingClientRect(),
          h = host.getBoundingClientRect();
      return r.left >= h.left && r.right <= h.right && r.top >= h.top && r.bottom <= h.bottom;""" % deep)
    assert visible
    g, opened = t["node_group"][deep], set(_drawn(browser)["open"])
    while g:
        assert g in opened
        g = t["parents"][g]


def test_too_much_to_draw_is_refused_with_a_message(browser, tmp_path, monkeypatch, resnet):
    """Opening a group that would draw more than the limit (20 here) leaves the drawing as it
    was and says why."""
    from selenium.webdriver.common.by import By

    monkeypatch.setattr(explorer, "LIMIT", 20)
    write_report(resnet, tmp_path)
    page = tmp_path / "index.html"
    _open(browser, page)
    before = _drawn(browser)
    browser.find_element(By.ID, "by-cluster").click()  # 52 outer groups: already over 20, drawn anyway
    browser.find_element(By.ID, "by-scope").click()
    big = max(before["boxes"], key=lambda g: sum(1 for p in _data(page)["explorer"]["trees"]["scope"]["parents"]
                                                   if p == g))
    browser.execute_script("document.querySelector('#explorer g.box[data-g=\"%d\"]')"
                           ".dispatchEvent(new MouseEvent('click', {bubbles: true}))" % big)
    assert _drawn(browser)["boxes"] == before["boxes"]
    assert "more than 20" in browser.find_element(By.ID, "ex-status").text


def test_a_node_a_later_pass_deleted_is_grouped_apart():
    """A record whose node a later pass deleted (``removed``: it has an explanation but no
    place in the graph) sits under one group, ``(deleted by later passes)``, in both trees,
    instead of among the live nodes of its scope (hand-made: MNIST with its first node marked
    deleted)."""
    c = cluster(MNIST, flags=FLAGS)
    name = next(iter(c.nodes))
    c.nodes[name].removed = True
    d = explorer.explorer_data(c)
    i = list(c.nodes).index(name)
    for t in d["trees"].values():
        g, path = t["node_group"][i], []
        while g > 0:
            path.append(t["labels"][g])
            g = t["parents"][g]
        assert path[-1] == explorer.DELETED
        others = [j for j, g in enumerate(t["node_group"]) if j != i]
        for j in others:  # no live node is under it
            g = t["node_group"][j]
            while g > 0 and t["labels"][g] != explorer.DELETED:
                g = t["parents"][g]
            assert g == 0
