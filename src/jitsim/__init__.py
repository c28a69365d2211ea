"""jitsim: predict and explain TensorFlow's XLA auto-clustering without running the model.

The Python API mirrors the CLI::

    import jitsim
    c = jitsim.cluster("graph.pbtxt", flags="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
    c.clusters, c.explain("some/node"), c.explain("a", "b")   # jitsim cluster / explain
    c.diff(c.whatif(flags="--tf_xla_min_cluster_size=1"))    # jitsim whatif
    jitsim.upgrade_report(jitsim.cluster(g, tf_version="2.21"),
                          jitsim.cluster(g, tf_version="2.22"))  # jitsim diff --tf-version A --tf-version B
    c.render("out.svg"); c.report("report/")               # jitsim render / report
    jitsim.cluster(my_tf_function.get_concrete_function(x))  # straight from TensorFlow
    g = jitsim.load("graph.pbtxt")                      # jitsim.graph.Graph
    diff = jitsim.compare(predicted_labels, truth_labels)   # partition comparison
    jitsim.harvest("prog.py", "out/")                   # ground truth from real TF

Imports are lazy so ``import jitsim`` stays cheap.
"""

from __future__ import annotations

__version__ = "0.1.0"

_LAZY = {
    "cluster": ("jitsim.explain.clustering", "cluster"),
    "Clustering": ("jitsim.explain.clustering", "Clustering"),
    "Options": ("jitsim.options", "Options"),
    "diff": ("jitsim.explain.diff", "diff_clusterings"),
    "upgrade_report": ("jitsim.explain.diff", "upgrade_report"),
    "load": ("jitsim.graph.io", "load"),
    "save": ("jitsim.graph.io", "save"),
    "Graph": ("jitsim.graph.model", "Graph"),
    "compare": ("jitsim.crosscheck.compare", "compare_partitions"),
    "compare_paths": ("jitsim.crosscheck.scoring", "compare_paths"),
    "harvest": ("jitsim.tfprocess.harvest", "harvest"),
    "JitsimError": ("jitsim.errors", "JitsimError"),
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        mod, attr = _LAZY[name]
        return getattr(importlib.import_module(mod), attr)
    raise AttributeError(f"module 'jitsim' has no attribute {name!r}")
