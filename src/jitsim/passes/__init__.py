"""TF's XLA auto-clustering ("JIT") passes, one module per pass, in TF's order
(``tensorflow/compiler/jit/``), plus the pipeline that runs them and the records they return.

==========================================  ==============================  ===============================
TF pass (its source file)                   module                          what it decides
==========================================  ==============================  ===============================
CloneConstantsForBetterClusteringPass       :mod:`.clone_constants`         small host constants copied
  (clone_constants_for_better_clustering)                                    per consumer
ClusterScopingPass (cluster_scoping_pass)   :mod:`.cluster_scoping`         ``_XlaInternalScope`` per stage
MarkForCompilationPass                      :mod:`.mark_for_compilation`    which nodes, which clusters
  (mark_for_compilation_pass)
ForceXlaConstantsOnHostPass                 :mod:`.force_constants_on_host` compile-time constants on host
IncreaseDynamismForAutoJitPass              :mod:`.increase_dynamism`       Slice sizes made dynamic
PartiallyDeclusterPass                      :mod:`.partially_decluster`     nodes taken back out
EncapsulateSubgraphsPass                    :mod:`.encapsulate`             each cluster -> function + call
  (encapsulate_subgraphs_pass)
BuildXlaOpsPass (build_xla_ops_pass)        :mod:`.build_xla_ops`           ``_XlaCompile``/``_XlaRun``
==========================================  ==============================  ===============================

:mod:`.pipeline` runs them in that order; :mod:`.records` holds the decision records they
return. The analyses the passes consult (compilability, deadness, constant analysis, resource
safety, cycle detection, device choice) are in :mod:`jitsim.analyses`; the rewrites TF makes
before these passes see a graph (function lowering and inlining, placement, Grappler) are in
:mod:`jitsim.rewrites`.
"""
