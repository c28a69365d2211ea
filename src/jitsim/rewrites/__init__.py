"""The rewrites TF makes before its JIT passes see a graph, simulated without TensorFlow (the
TF-free route, :mod:`jitsim.frontend.prepare`), plus the graph optimizer EncapsulateSubgraphs
runs on each cluster:

=================================================  ==================================
TF (its source file)                               module
=================================================  ==================================
``LowerFunctionalOpsPass`` (lower_functional_ops)  :mod:`.lower_functional_ops`
``InlineFunctionBody`` (inline_function_utils)     :mod:`.function_inlining`
the placer (placer.cc), simplified                 :mod:`.placement`
``RewriteGraphForExecution`` (graph_execution_     :mod:`.subgraph_rewrite`
  state, subgraph.cc): a session call's feeds
  and fetches
``OptimizeGraph`` (graph_optimizer.cc)             :mod:`.function_optimizer`
constant folding kernels (numpy)                   :mod:`.folding`
Grappler's meta optimizer, the parts that          :mod:`.grappler` (one module per
  change clusters (grappler/optimizers/)             optimizer, by TF's name)
=================================================  ==================================
"""
