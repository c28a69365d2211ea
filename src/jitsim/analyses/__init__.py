"""The analyses TF's JIT passes consult, each named after TF's:

=====================================================  ================================
TF (its source file)                                   module
=====================================================  ================================
``IsCompilable``, ``RecursiveCompilabilityChecker``    :mod:`.compilability`
  (compilability_check_util)
``BackwardsConstAnalysis`` (tf2xla/const_analysis)     :mod:`.const_analysis`
``DeadnessAnalysis`` (deadness_analysis)               :mod:`.deadness`
``ComputeIncompatibleResourceOperationPairs``          :mod:`.resource_safety`
  (resource_operation_safety_analysis)
``GraphCycles`` (graphcycles/graphcycles)              :mod:`.graphcycles` (+ ``_fastcycles.c``)
XLA device registrations, ``PickDeviceForXla``         :mod:`.devices`
  (xla_cluster_util, device_util)
``Hash64`` for deterministic cluster names             :mod:`.fingerprint`
  (tsl/platform/hash)
shape inference (``ShapeRefiner``, Grappler's          :mod:`.shape_inference`
  ``GraphProperties``)
=====================================================  ================================

Each reads a graph and returns facts; none changes a graph.
"""
