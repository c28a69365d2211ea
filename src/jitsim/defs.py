"""TF's names for what its XLA JIT passes read and write, each spelled once, here.

TensorFlow keeps the attribute names of its JIT passes in one header
(``tensorflow/compiler/jit/defs.h``); jitsim keeps them, the op names ``BuildXlaOps``
writes and the names of the graphs TF dumps between the passes (``TF_DUMP_GRAPH_PREFIX``) in
this module, which imports nothing (every package may use it). What each attribute
does: tf-passes §0.3.

>>> CLUSTER_ATTR
'_XlaCluster'
>>> DUMP_STAGES.index(MARK_DUMP) < DUMP_STAGES.index(BUILD_XLA_OPS_DUMP)
True
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

# -- the stages TF dumps ----------------------------------------------------------------------
# Each POST_REWRITE_FOR_EXEC pass writes its graph with DumpGraphToFile under these names (a
# file NAME.pbtxt, then NAME_1.pbtxt ...; graph/dumps.py reads them). In pipeline order:
BEFORE_CLONE_DUMP = "before_clone_constants_for_better_clustering"  # the clustering input
AFTER_CLONE_DUMP = "after_clone_constants_for_better_clustering"
BEFORE_MARK_DUMP = "before_mark_for_compilation"                  # after TF's constant clones
MARK_DUMP = "mark_for_compilation"                                # the clusters marked
MARK_ANNOTATED_DUMP = "mark_for_compilation_annotated"
BEFORE_INCREASE_DYNAMISM_DUMP = "before_increase_dynamism_for_auto_jit_pass"
ENCAPSULATE_BEFORE_DUMP = "encapsulate_subgraphs_before"          # after partial declustering
ENCAPSULATE_AFTER_DUMP = "encapsulate_subgraphs_after"            # clusters as function calls
BUILD_XLA_OPS_DUMP = "build_xla_ops"                              # _XlaCompile/_XlaRun pairs
DUMP_STAGES = (BEFORE_CLONE_DUMP, AFTER_CLONE_DUMP, BEFORE_MARK_DUMP, MARK_DUMP, MARK_ANNOTATED_DUMP,
               BEFORE_INCREASE_DYNAMISM_DUMP, ENCAPSULATE_BEFORE_DUMP, ENCAPSULATE_AFTER_DUMP, BUILD_XLA_OPS_DUMP)
# The two passes whose dump carries the pass's own name; jitsim records their results and
# timings under it.
MARK_FOR_COMPILATION_PASS = MARK_DUMP
BUILD_XLA_OPS_PASS = BUILD_XLA_OPS_DUMP

# -- jitsim's stages ----------------------------------------------------------------------------
# Where a simulation can stop (``--until``), in pipeline order; each ends with a pass whose
# graph TF dumps (jitsim.passes.pipeline.PIPELINE says which pass and which dump).
STAGES = ("mark", "decluster", "encapsulate", "build-xla-ops")

# -- devices ------------------------------------------------------------------------------------
# ``--device cpu``/``gpu``: the full names TF's local process gives its first CPU and GPU
LOCAL_DEVICE_PREFIX = "/job:localhost/replica:0/task:0/device:"
DEVICES = {"cpu": LOCAL_DEVICE_PREFIX + "CPU:0", "gpu": LOCAL_DEVICE_PREFIX + "GPU:0"}
