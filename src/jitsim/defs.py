"""TF's names for what its XLA JIT passes read and write, each spelled once, here.

TensorFlow keeps the attribute names of its JIT passes in one header
(``tensorflow/compiler/jit/defs.h``); jitsim keeps them, and the op names ``BuildXlaOps``
writes, in this module, which imports nothing (every package may use it). What each attribute
does: tf-passes §0.3.

>>> CLUSTER_ATTR
'_XlaCluster'
"""

# -- node attributes (tf-passes §0.3) ---------------------------------------------------
CLUSTER_ATTR = "_XlaCluster"                      # the cluster MarkForCompilation put the node in
ALREADY_CLUSTERED_ATTR = "_XlaAlreadyClustered"   # with _XlaCluster: a later run leaves the graph alone
COMPILE_ATTR = "_XlaCompile"                      # true: compile this node (jit scopes); false: never
MUST_COMPILE_ATTR = "_XlaMustCompile"             # jit_compile=True calls
SCOPE_ATTR = "_XlaScope"                          # TF1 jit scope (honoured with auto-jit off)
INTERNAL_SCOPE_ATTR = "_XlaInternalScope"         # ClusterScoping's Stage/Unstage tags
SEPARATE_COMPILED_GRADIENTS_ATTR = "_XlaSeparateCompiledGradients"
COMPILED_KERNEL_ATTR = "_XlaCompiledKernel"       # on an encapsulated call: BuildXlaOps rewrites it
NUM_CONSTANT_ARGS_ATTR = "_XlaNumConstantArgs"    # the call's leading compile-time-constant inputs
NUM_RESOURCE_ARGS_ATTR = "_XlaNumResourceArgs"    # the call's trailing resource inputs
HAS_REFERENCE_VARS_ATTR = "_XlaHasReferenceVars"
COMPILE_TIME_CONSTANT_INPUTS_ATTR = "_XlaCompileTimeConstantInputs"  # overrides the op's constant inputs
INPUT_HOSTMEM_ATTR = "_input_hostmem"             # ForceXlaConstantsOnHost
XLA_COMPILE_ID_ATTR = "_xla_compile_id"           # xla.compile(): never inlined or lowered
IS_GUARANTEED_CONSTANT_ATTR = "_is_guaranteed_constant"
LOWER_USING_SWITCH_MERGE_ATTR = "_lower_using_switch_merge"

# -- the ops BuildXlaOps writes -------------------------------------------------------------------
XLA_COMPILE_OP = "_XlaCompile"
XLA_RUN_OP = "_XlaRun"
XLA_MERGE_OP = "_XlaMerge"
