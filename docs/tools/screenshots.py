#!/usr/bin/env python3
"""Regenerate the screenshots in docs/img/ from a real browser.

    python docs/tools/screenshots.py                 # every shot
    python docs/tools/screenshots.py --only model_explorer_mnist

A source-checkout tool. Needs jitsim's dev extras (selenium, ai-edge-model-explorer) and
Debian's chromium + chromium-driver (``.ci/run`` installs them). Each shot runs jitsim on a
shipped graph, opens the result in headless Chromium (Model Explorer started on loopback for
its shots) and saves the PNG under docs/img/. Nothing here reaches the network.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import quote

ROOT = Path(__file__).resolve().parents[2]
IMG = ROOT / "docs" / "img"
MNIST = ROOT / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt"
CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


def browser(width: int = 1400, height: int = 900):
    """A headless Chromium driven by selenium."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = str(CHROMIUM)
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              f"--window-size={width},{height}"):
        opts.add_argument(a)
    return webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def model_explorer(graph_json: Path, home: Path):
    """Model Explorer serving ``graph_json`` on a free loopback port; yields the page's URL."""
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-m", "model_explorer", str(graph_json), "--no_open_in_browser", "--host", "127.0.0.1",
                             "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            env={**os.environ, "HOME": str(home)}, cwd=home)
    try:
        end = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > end:
                    raise SystemExit(f"model-explorer did not start on port {port}")
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/?data={quote(json.dumps({'models': [{'url': str(graph_json)}]}))}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def wait_for_text(driver, text: str, timeout: float = 30) -> None:
    from selenium.webdriver.common.by import By

    end = time.monotonic() + timeout
    while text not in driver.find_element(By.TAG_NAME, "body").text:
        if time.monotonic() > end:
            raise SystemExit(f"the page never showed {text!r}")
        time.sleep(0.1)


def shot_model_explorer_mnist(tmp: Path) -> list[Path]:
    """MNIST's training step in Model Explorer: the five clusters as coloured layers (first
    paint), then every layer expanded."""
    from selenium.webdriver.common.by import By

    g = tmp / "mnist.json"
    subprocess.run([sys.executable, "-m", "jitsim", "render", str(MNIST.relative_to(ROOT)), "-o", str(g)],
                   check=True, stderr=subprocess.DEVNULL, cwd=ROOT)  # the picture names the repo's path
    out = [IMG / "model_explorer_mnist.png", IMG / "model_explorer_mnist_expanded.png"]
    with model_explorer(g, tmp) as url:
        d = browser()
        try:
            d.get(url)
            wait_for_text(d, "layer count")
            time.sleep(1.0)  # the WebGL canvas paints after the side panel
            d.save_screenshot(str(out[0]))
            d.find_element(By.CSS_SELECTOR, "div.mat-icon-container.expand-all").click()  # "expand all layers"
            time.sleep(1.5)
            d.save_screenshot(str(out[1]))
        finally:
            d.quit()
    return out


def _bench_graph(name: str) -> Path:
    """A graph of benchmarks/report_view.py (ResNet-50's training step, or 8 copies of it)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import report_view

    return report_view.case_path(name)


def _report(graph: Path, tmp: Path) -> Path:
    subprocess.run([sys.executable, "-m", "jitsim", "report", str(graph), "-o", str(tmp / "report"), "--tf", "never"],
                   check=True, stderr=subprocess.DEVNULL, cwd=ROOT)
    return tmp / "report" / "index.html"


def _graph_section(d, path: Path) -> None:
    """Crop the window to the report's graph section."""
    from selenium.webdriver.common.by import By

    d.execute_script("document.getElementById('graph').scrollIntoView()")
    time.sleep(0.3)
    d.find_element(By.ID, "graph").screenshot(str(path))


def shot_report_resnet50(tmp: Path) -> list[Path]:
    """ResNet-50's training step (12.6k nodes) in the HTML report: the explorer's first paint,
    then grouped by cluster with cluster_3 opened by one click."""
    from selenium.webdriver.common.by import By

    page = _report(_bench_graph("resnet50"), tmp)
    out = [IMG / "report_resnet50.png", IMG / "report_resnet50_cluster.png"]
    d = browser(1300, 1100)
    try:
        d.get(page.as_uri())
        wait_for_text(d, "boxes drawn")
        _graph_section(d, out[0])
        d.find_element(By.ID, "by-cluster").click()
        box = next(b for b in d.find_elements(By.CSS_SELECTOR, "#explorer g.box")
                   if b.text.split("\n")[0].strip().endswith("cluster_3"))
        d.execute_script("arguments[0].dispatchEvent(new MouseEvent('click', {bubbles: true}))", box)
        time.sleep(0.5)
        _graph_section(d, out[1])
    finally:
        d.quit()
    return out


def shot_report_100k(tmp: Path) -> list[Path]:
    """Eight copies of the ResNet-50 step (101k nodes, 408 clusters): the first paint."""
    page = _report(_bench_graph("resnet50_x8"), tmp)
    out = [IMG / "report_100k.png"]
    d = browser(1300, 1100)
    try:
        d.get(page.as_uri())
        wait_for_text(d, "boxes drawn", timeout=120)
        _graph_section(d, out[0])
    finally:
        d.quit()
    return out


def shot_render_scopes_resnet50(tmp: Path) -> list[Path]:
    """``jitsim render`` of the ResNet-50 step: the scope view (graphviz, no browser)."""
    out = IMG / "render_scopes_resnet50.png"
    subprocess.run([sys.executable, "-m", "jitsim", "render", str(_bench_graph("resnet50")), "-o", str(out),
                    "--tf", "never"], check=True, stderr=subprocess.DEVNULL, cwd=ROOT)
    return [out]


SHOTS = {"model_explorer_mnist": shot_model_explorer_mnist, "report_resnet50": shot_report_resnet50,
         "report_100k": shot_report_100k, "render_scopes_resnet50": shot_render_scopes_resnet50}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", choices=sorted(SHOTS), help="make only these shots")
    args = ap.parse_args(argv)
    for name in args.only or sorted(SHOTS):
        with tempfile.TemporaryDirectory(prefix="jitsim-shots-") as tmp:
            for p in SHOTS[name](Path(tmp)):
                print(f"wrote {p.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
