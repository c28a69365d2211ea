import importlib.util

import pytest

from jitsim.crosscheck.corpus import Corpus

HAVE_TF = importlib.util.find_spec("tensorflow") is not None


def pytest_collection_modifyitems(config, items):
    if HAVE_TF:
        return
    skip = pytest.mark.skip(reason="TensorFlow is not installed (pip install -e '.[tf]')")
    for item in items:
        if "tf" in item.keywords:
            item.add_marker(skip)


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
