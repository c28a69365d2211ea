"""Constant folding with numpy, for the passes that fold (EncapsulateSubgraphs' optimizer,
Grappler's constant folding): :mod:`~jitsim.rewrites.folding.kernels` (the TF kernels, one
table), :mod:`~jitsim.rewrites.folding.tensors` (TensorProto <-> numpy) and
:mod:`~jitsim.rewrites.folding.evaluator` (evaluating a graph's constant tensors)."""
