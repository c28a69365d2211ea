"""TF's op categories, each spelled once, here: the op-type sets TF's code tests a node against.

TensorFlow classifies nodes in a few places (``graph/graph.cc``'s node classes behind
``Node::IsSwitch()`` and friends, Grappler's ``op_types.cc``, ``memory_types.cc``...), and the
places do not always agree: a set here is named for the TF predicate it mirrors, and two of TF's
sets that differ get two names (:data:`FUNCTION_CALL_OPS` is the graph's node class,
:data:`MEMORY_TYPES_CALL_OPS` what ``MemoryTypesForNode`` treats as a call). Like
:mod:`jitsim.defs`, this module imports nothing but :mod:`jitsim.defs`: every package may use it.

>>> "RefSwitch" in SWITCH_OPS and "_SwitchN" in SWITCH_OPS
True
>>> sorted(MEMORY_TYPES_CALL_OPS - FUNCTION_CALL_OPS)
['While']
"""

from jitsim.defs import XLA_MERGE_OP

# -- the graph's node classes (graph/graph.cc) ------------------------------------------------------
IDENTITY_OPS = frozenset({"Identity", "RefIdentity"})
CONSTANT_OPS = frozenset({"Const", "HostConst"})
SWITCH_OPS = frozenset({"Switch", "RefSwitch", "_SwitchN"})
MERGE_OPS = frozenset({"Merge", "RefMerge", XLA_MERGE_OP})
ENTER_OPS = frozenset({"Enter", "RefEnter"})
EXIT_OPS = frozenset({"Exit", "RefExit"})
NEXT_ITERATION_OPS = frozenset({"NextIteration", "RefNextIteration"})
CONTROL_FLOW_OPS = SWITCH_OPS | MERGE_OPS | ENTER_OPS | EXIT_OPS | NEXT_ITERATION_OPS  # IsControlFlow
# Grappler's IsSwitch and IsMerge (op_types.cc): no _SwitchN (N outputs), no _XlaMerge (which
# only BuildXlaOps writes, after Grappler); the shape refiner's Switch and Merge the same
BINARY_SWITCH_OPS = frozenset({"Switch", "RefSwitch"})
PLAIN_MERGE_OPS = frozenset({"Merge", "RefMerge"})
SEND_RECV_OPS = frozenset({"_Send", "_Recv", "_HostSend", "_HostRecv"})
RECV_OPS = frozenset({"_Recv", "_HostRecv"})
# a call of a library function by a call op (the node class of PartitionedCall and of
# SymbolicGradient); a node whose op is a function's own name is a call too (graph-dependent)
FUNCTION_CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall", "SymbolicGradient"})
FUNCTION_IO_OPS = frozenset({"_Arg", "_Retval"})  # a function body's arguments and results (IsArg, IsRetval)

# -- functional ops -----------------------------------------------------------------------------------
PARTITIONED_CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})  # their function is attr "f"
IF_OPS = frozenset({"If", "StatelessIf"})
WHILE_OPS = frozenset({"While", "StatelessWhile"})
CASE_OPS = frozenset({"Case", "StatelessCase"})
# memory_types.cc IsFunctionCallOp: MemoryTypesForNode consults no kernel def for these
MEMORY_TYPES_CALL_OPS = frozenset({"SymbolicGradient", "PartitionedCall", "StatefulPartitionedCall", "While"})

# -- forwarding ops ----------------------------------------------------------------------------------
IDENTITY_N_OPS = frozenset({"Identity", "IdentityN"})  # Grappler's IsIdentity / IsIdentityN
PASS_THROUGH_OPS = frozenset({"Identity", "IdentityN", "Snapshot", "StopGradient", "PreventGradient"})  # value as is

# -- op families ---------------------------------------------------------------------------------------
ADD_OPS = frozenset({"Add", "AddV2"})
ADD_OR_ADD_N_OPS = ADD_OPS | {"AddN"}
CONCAT_OPS = frozenset({"Concat", "ConcatV2"})
FUSED_BATCH_NORM_OPS = frozenset({"FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"})

# -- shape ops ----------------------------------------------------------------------------------------
SHAPE_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank"})  # Grappler's IsShape/IsShapeN/IsSize/IsRank
SHAPE_SIZE_RANK_OPS = frozenset({"Shape", "Size", "Rank"})  # one output, read from the input's shape

# -- inputs -------------------------------------------------------------------------------------------
PLACEHOLDER_OPS = frozenset({"Placeholder", "PlaceholderV2"})
FEEDABLE_PLACEHOLDER_OPS = PLACEHOLDER_OPS | {"PlaceholderWithDefault"}
SHAPED_PLACEHOLDER_OPS = frozenset({"Placeholder", "PlaceholderWithDefault"})  # a "shape" attr the refiner reads

# -- TPU ----------------------------------------------------------------------------------------------
TPU_EXECUTE_OPS = frozenset({"TPUExecute", "TPUExecuteAndUpdateVariables"})
