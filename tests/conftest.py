import importlib.util
import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from jitsim.crosscheck.corpus import Corpus

HAVE_TF = importlib.util.find_spec("tensorflow") is not None

# The parsed-text cache (jitsim.graph.parse_cache) of this test run: its own directory, removed
# at the end, unless the caller chose one (JITSIM_PARSE_CACHE=off runs every parse from text).
_PARSE_CACHE = None
if "JITSIM_PARSE_CACHE" not in os.environ:
    _PARSE_CACHE = tempfile.mkdtemp(prefix="jitsim-test-parse-cache-")
    os.environ["JITSIM_PARSE_CACHE"] = _PARSE_CACHE


def pytest_unconfigure(config):
    if _PARSE_CACHE is not None:
        shutil.rmtree(_PARSE_CACHE, ignore_errors=True)


def pytest_collection_modifyitems(config, items):
    if HAVE_TF:
        return
    skip = pytest.mark.skip(reason="TensorFlow is not installed (pip install -e '.[tf]')")
    for item in items:
        if "tf" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tf_release() -> str:
    """The installed TensorFlow's release (``"2.21"``, ``"2.22"``): a tf-marked test that checks a
    behaviour that changed between releases expects the installed one's (.ci/run also runs the TF
    route's tests under the newest release jitsim supports)."""
    from jitsim.frontend.capture import tf_version

    return ".".join(tf_version().split(".")[:2])


@pytest.fixture(scope="session")
def corpus():
    c = Corpus()
    yield c
    c.close()


def corpus_graphs(c: Corpus):
    """(run, graph record, run dir) for every graph of every committed fixture run."""
    for run in c.built():
        d = c.extract(run)
        idx = c.index(run)
        for g in idx["graphs"]:
            yield run, g, d


def clustering_inputs(c: Corpus, every: int = 1):
    """(run, graph record, dump path) of every ``every``-th graph of the committed fixture runs
    that has a clustering input dump (``before_clone…``, else ``before_mark…``)."""
    k = 0
    for run, g, d in corpus_graphs(c):
        stage = next((s for s in ("before_clone_constants_for_better_clustering", "before_mark_for_compilation")
                      if s in g["files"]), None)
        if stage is None:
            continue
        k += 1
        if k % every:
            continue
        yield run, g, d / "dumps" / g["files"][stage]


def before_mark_tfgraphs(c: Corpus):
    """(run name, dump file name, TfGraph) for every ``before_mark_for_compilation`` dump of
    every committed fixture run (the pass's input as TF had it; not validated)."""
    from jitsim.crosscheck.fidelity import dump_dir
    from jitsim.defs import BEFORE_MARK_DUMP
    from jitsim.graph.io import read_graphdef
    from jitsim.graph.model import Graph
    from jitsim.graph.tfgraph import TfGraph

    for run in c.runs():
        where = dump_dir(c.extract(run.name))
        for rec in where.records():
            if BEFORE_MARK_DUMP in rec.files:
                f = rec.files[BEFORE_MARK_DUMP]
                yield run.name, f, TfGraph.from_graph(Graph(read_graphdef(where.dumps / f), validate=False))


def need_c_extension(*modules: str) -> None:
    """Skip unless the optional C extensions ``modules`` are built here (setup.py builds them
    where a C compiler is found; ``JITSIM_PURE_PYTHON=1`` hides them). In CI, which has a
    compiler, the skip counts as a failure (the rule below), so a build that failed shows."""
    from jitsim import accel

    missing = [m for m in modules if accel.load(m) is None]
    if missing:
        pytest.skip(f"the optional C extension {', '.join(missing)} is not installed "
                    "(pip install -e . builds it where a C compiler is found)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """In CI (``.ci/run`` sets JITSIM_CI=1) a test skipped because a tool is missing
    (TensorFlow, graphviz's dot, chromium...) is a failure: CI installs them all, so the
    browser and picture tests must really run there."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and os.environ.get("JITSIM_CI") == "1":
        reason = str(rep.longrepr[2] if isinstance(rep.longrepr, tuple) else rep.longrepr)
        if "not installed" in reason:
            rep.outcome = "failed"
            rep.longrepr = f"JITSIM_CI=1 but {reason}"


# -- a headless browser (Debian chromium + chromedriver, driven by selenium) for the HTML tests

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def browser():
    """A headless Chromium; skips when selenium or chromium is not installed."""
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[dev]')")
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        pytest.skip("Debian chromium + chromium-driver are not installed (.ci/run installs them: "
                    "apt-get install chromium chromium-driver)")
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    opts = Options()
    opts.binary_location = str(CHROMIUM)
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1280,1600"):
        opts.add_argument(a)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    yield driver
    driver.quit()


def wait_until(predicate, timeout=5.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def severe_browser_errors(driver):
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


