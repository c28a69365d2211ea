"""Test support: generated TensorFlow programs and the invariants jitsim must satisfy.

* :mod:`jitsim.testing.program` -- a small program description (:class:`~jitsim.testing.program.Program`)
  rendered both as Python TensorFlow source (run under real TF for differential testing) and
  directly as a GraphDef shaped like TF's ``before_clone_constants_for_better_clustering`` dump
  (for TF-free tests);
* :mod:`jitsim.testing.strategies` -- Hypothesis strategies drawing such programs and the
  ``TF_XLA_FLAGS`` that matter (needs ``hypothesis``);
* :mod:`jitsim.testing.invariants` -- structural checks of a clustering result.
"""
