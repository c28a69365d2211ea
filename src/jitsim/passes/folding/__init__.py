"""Constant folding with numpy, for the passes that fold (EncapsulateSubgraphs' optimizer,
Grappler's constant folding): :mod:`~jitsim.passes.folding.kernels` (the TF kernels, one
table), :mod:`~jitsim.passes.folding.tensors` (TensorProto <-> numpy) and
:mod:`~jitsim.passes.folding.evaluator` (evaluating a graph's constant tensors)."""
