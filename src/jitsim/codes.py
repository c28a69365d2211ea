"""jitsim's decision codes, each defined once, here: the catalogue.

Every decision a pass, an analysis or a rewrite records carries one :class:`Code`
(:mod:`jitsim.records` holds the records). A code is a ``str`` (its value is what JSON
prints: never rename one, add new ones) and carries what every reader needs:

* ``kind``: what the code is about. ``node`` (a candidate filter, a cluster decision or a
  later pass's rewrite of one node), ``merge`` (a contraction MarkForCompilationPass refused),
  ``arg`` (where EncapsulateSubgraphsPass puts a cluster argument), ``cluster`` (why
  BuildXlaOpsPass compiles a cluster lazily or strictly), ``rewrite`` (a rewrite TF makes
  before its JIT passes: function inlining and lowering, placement, each Grappler optimizer).
* ``family``: the colour family the pictures draw a node of this code with
  (:data:`FAMILIES`; :mod:`jitsim.explain.render` gives each a colour).
* ``title``, ``hint`` (what the user can change), ``tf_log`` (the words TF itself logs for the
  decision, ``<...>`` standing for a name TF fills in, so users can match jitsim's answer with
  TF's VLOG output: ``TF_CPP_VMODULE=mark_for_compilation_pass=3,compilability_check_util=3,
  partially_decluster_pass=3``) and ``explanation`` (what TF checks, why, and where).

Every ``node`` and ``merge`` code has a minimal example in ``fixtures/reasons/`` (a TF program
and TF's own dumps of it, or a hand-built graph for the few decisions TF on a CPU build cannot
make), checked against jitsim by ``tests/test_reason_examples.py`` and shown in
docs/reasons.md, which ``docs/tools/reasons_md.py`` generates from this catalogue. Adding a
code: docs/recipes.md. This module imports nothing from jitsim, so every package may use it.

>>> Code.UNSUPPORTED_OP == "UNSUPPORTED_OP", Code.UNSUPPORTED_OP.kind, Code.UNSUPPORTED_OP.family
(True, 'node', 'unsupported')
>>> f"{Code.MERGE_CYCLE}", Code("MERGE_CYCLE").anchor
('MERGE_CYCLE', 'docs/reasons.md#merge_cycle')
"""

from __future__ import annotations

from enum import StrEnum

KINDS = ("node", "merge", "arg", "cluster", "rewrite")

# the colour families of the pictures: family -> what it means (render.py gives the colours)
FAMILIES = {
    "unsupported": "XLA cannot compile the op",
    "declustered": "cluster too small or taken apart after clustering",
    "configuration": "flags, device or attributes rule it out",
    "structural": "never clustered (arguments, return values, graph-level)",
    "clustered": "in a cluster",
    "record": "a record about a cluster, an argument or a rewrite, not a node's state",
}

_MFC = "mark_for_compilation_pass.cc"
_CCU = "compilability_check_util.cc"
_PDP = "partially_decluster_pass.cc"
_ESP = "encapsulate_subgraphs_pass.cc"
_BXO = "build_xla_ops_pass.cc"


class Code(StrEnum):
    """A decision code: ``NAME = (value, kind, family, title, hint, tf_log, explanation)``."""

    kind: str
    family: str
    title: str
    hint: str
    tf_log: str
    explanation: str

    def __new__(cls, value: str, kind: str, family: str, title: str, hint: str = "", tf_log: str = "",
                explanation: str = ""):
        if kind not in KINDS or family not in FAMILIES:
            raise ValueError(f"code {value}: kind {kind!r} / family {family!r} unknown")
        obj = str.__new__(cls, value)
        obj._value_ = value
        obj.kind, obj.family, obj.title = kind, family, title
        obj.hint, obj.tf_log, obj.explanation = hint, tf_log, explanation
        return obj

    def __repr__(self) -> str:  # a code reads as the stable string it is in JSON (``'UNSUPPORTED_OP'``)
        return repr(self.value)

    @property
    def code(self) -> str:
        return self.value

    @property
    def anchor(self) -> str:
        """Where docs/reasons.md documents this code."""
        return f"docs/reasons.md#{self.value.lower()}"

    # -- clustered -----------------------------------------------------------------------
    CLUSTERED = ("CLUSTERED", "node", "clustered", "in an XLA cluster", "", "",
           "The node passed every candidate filter of MarkForCompilationPassImpl::FindCompilationCandidates, "
           "edge contraction put it in a cluster that passed the size and device-policy checks "
           f"(MarkForCompilationPassImpl::CreateClusters, {_MFC}), so it got an `_XlaCluster` attribute, and "
           "the later passes left it there. EncapsulateSubgraphsPass turns each cluster into a function that "
           "BuildXlaOpsPass replaces with _XlaCompile/_XlaRun: the cluster runs as one XLA executable.")
    # -- graph-level: the pass did nothing ---------------------------------------------------
    GRAPH_ALREADY_CLUSTERED = ("GRAPH_ALREADY_CLUSTERED", "node", "structural", "graph skipped: a node carries _XlaAlreadyClustered",
           "this graph is a cluster body or its fallback; TF never re-clusters it", "",
           f"MarkForCompilationPass::Run ({_MFC}) returns at once when a node of the graph already carries "
           "`_XlaAlreadyClustered` (or is a TPUExecute op): the graph is the body of a cluster TF built before, "
           "typically run uncompiled as the lazy-compilation fallback (a cluster seen with a new input shape "
           "first runs its function with TF's kernels). Clustering it again would nest clusters.")
    GRAPH_NO_CANDIDATES = ("GRAPH_NO_CANDIDATES", "node", "structural", "graph has no compilation candidate",
           "see each node's own code for why it was rejected", "No compilable candidates",
           "No node of the graph passed the candidate filters, so MarkForCompilationPassImpl::Run logs "
           f"\"No compilable candidates\" and returns without clustering (and without writing a "
           f"mark_for_compilation dump; {_MFC}). It is a decision about the whole graph: each node's own code "
           "says why that node was rejected.")
    GRAPH_CYCLE_GRAPH_FAILED = ("GRAPH_CYCLE_GRAPH_FAILED", "node", "structural", "loop frames form a cycle; graph not clustered",
           "restructure the loops so that no loop frame is entered again after a frame it feeds",
           "Could not form cycle detection graph",
           "Clustering keeps the graph acyclic with a cycle-detection graph in which every while-loop frame is "
           "collapsed into one node (CreateCycleDetectionGraph, xla_cluster_util.cc): edges into an Enter go "
           "to the frame's node and edges out of an Exit leave from it. If that collapsed graph has a cycle "
           "(frame A feeds frame B, which feeds frame A again) TF cannot reason about cycles at all and "
           "clusters nothing in the graph.")
    # -- candidate filters, in TF's order ---------------------------------------------------
    FUEL_EXHAUSTED = ("FUEL_EXHAUSTED", "node", "configuration", "clustering fuel exhausted",
           "raise --tf_xla_clustering_fuel", "Hit fuel limit; not marking any remaining ops as clusterable.",
           "--tf_xla_clustering_fuel is a debugging budget (to bisect clustering bugs): each node accepted as "
           "a candidate costs one unit, across all graphs of the process. When it is spent, "
           f"FindCompilationCandidates ({_MFC}) stops and every remaining node, in TF's node order, stays out.")
    NO_DEVICE = ("NO_DEVICE", "node", "configuration", "node has no assigned device",
           "pass --device cpu|gpu for a GraphDef exported from Python", "",
           "TF runs MarkForCompilationPass after placement (POST_REWRITE_FOR_EXEC), so every node it sees has "
           "an assigned device; the pass maps each device to its XLA registration "
           f"(DeviceInfoCache, {_MFC}) and cannot handle a node without one. Only graphs given to jitsim "
           "without placement (e.g. exported from Python) have such nodes: jitsim does not guess a device.")
    XLA_COMPILE_FALSE = ("XLA_COMPILE_FALSE", "node", "configuration", "_XlaCompile=false on the node or its function",
           "remove the attribute / jit scope that forbids compilation",
           "disallowed by _XlaCompile attribute",
           "A node whose `_XlaCompile` attribute (or that of the function it calls) is false is never a "
           f"candidate (FindCompilationCandidates, {_MFC}): the user asked for it to run outside XLA, e.g. "
           "with `tf.xla.experimental.jit_scope(compile_ops=False)`.")
    NO_JIT_DEVICE = ("NO_JIT_DEVICE", "node", "configuration", "the node's device type has no XLA JIT device",
           "place the node on CPU or GPU", "could not find JIT device for",
           "FindCompilationCandidates asks XlaOpRegistry::GetCompilationDevice for the registration of the "
           "node's device type. TF registers JIT devices for CPU (XLA_CPU_JIT) and GPU (XLA_GPU_JIT), and for "
           "the deprecated XLA_CPU/XLA_GPU devices with --tf_xla_enable_xla_devices; a node on any other "
           "device type (e.g. TPU, or a pluggable device) cannot be auto-clustered.")
    POLICY_NOT_ENABLED = ("POLICY_NOT_ENABLED", "node", "configuration", "auto-clustering is not enabled for this device",
           "CPU needs --tf_xla_cpu_global_jit (at process start) and a jit level; GPU needs a jit level "
           "(--tf_xla_auto_jit=2 or tf.config.optimizer.set_jit)", "",
           "Each JIT device has an autoclustering policy: GPU clusters \"if enabled globally\" (a jit level from "
           "--tf_xla_auto_jit or the session's global_jit_level); CPU only \"if explicitly requested\" unless "
           "--tf_xla_cpu_global_jit was set when TF first read the flags (or the session sets cpu_global_jit). "
           "A node that is not explicitly marked (`_XlaCompile`, a jit scope) on a device whose policy does not "
           f"allow auto-clustering is no candidate ({_MFC}); TF logs nothing per node, only \"No compilable "
           "candidates\" when no node is left.")
    SOURCE_OR_SINK = ("SOURCE_OR_SINK", "node", "structural", "source or sink node",
           "nothing: TF never clusters a graph's _SOURCE and _SINK", "source or sink node",
           "RecursiveCompilabilityChecker::IsCompilableNode refuses the graph's implicit _SOURCE and _SINK "
           f"nodes ({_CCU}). FindCompilationCandidates only walks op nodes, so the check never fires in "
           "auto-clustering; jitsim catalogues the code for completeness and never reports it.")
    TOP_LEVEL_ARG_RETVAL = ("TOP_LEVEL_ARG_RETVAL", "node", "structural", "function argument or return value (never clustered)",
           "nothing: a cluster can read a function's arguments and produce its results, not contain them",
           "top level _Arg or _Retval",
           "In the graph of a function, `_Arg` and `_Retval` nodes are its inputs and outputs (feeds and "
           f"fetches): IsCompilableNode ({_CCU}) refuses them at the top level. Inside a called function they "
           "are part of the call and do not count.")
    SCOPED_ALLOCATOR = ("SCOPED_ALLOCATOR", "node", "configuration", "has _scoped_allocator or _forward_from",
           "disable Grappler's scoped_allocator_optimization for this graph",
           "_scoped_allocator or _forward_from attribute",
           "`_scoped_allocator` and `_forward_from` (written by Grappler's scoped-allocator optimizer) ask the "
           "executor to place outputs in shared or forwarded buffers, which XLA does not implement "
           f"(IsCompilableNode, {_CCU}; b/128858118).")
    UNSUPPORTED_OP = ("UNSUPPORTED_OP", "node", "unsupported", "no XLA kernel for this op with these types",
           "the op (or this dtype) is not implemented by XLA's tf2xla bridge",
           "No registered '<op>' OpKernel for <jit device> devices compatible with node",
           "XLA compiles a node with the tf2xla kernel registered for the op on the device's JIT device "
           "(XLA_CPU_JIT, XLA_GPU_JIT). RecursiveCompilabilityChecker::HasXLAKernel looks it up with "
           f"FindKernelDef ({_CCU}); if no kernel exists, or none whose type constraints accept the node's "
           "attributes, the node stays out. TF 2.21 logs the lookup error; the evidence names the type "
           "attribute XLA does not accept and the types it does.")
    CUSTOM_OP = ("CUSTOM_OP", "node", "unsupported", "op of a custom-op library, with no XLA kernel",
           "keep the library's ops (tokenizers, string processing...) at the edges of the computation, or "
           "register an XLA kernel for the op in the library",
           "No registered '<op>' OpKernel for <jit device> devices compatible with node",
           "The op is not one of TensorFlow 2.21 core's: a library loaded into the process (tensorflow-text's "
           "`tf.load_op_library` ops, `TFText>...`; any custom-op .so) registered it, with CPU/GPU kernels and, "
           "almost always, no tf2xla kernel. TF treats it exactly like a core op XLA does not implement: "
           f"RecursiveCompilabilityChecker::HasXLAKernel ({_CCU}) finds no kernel on the JIT device and the node "
           "stays out. jitsim takes the op's signature from `--op-defs FILE` (written by `jitsim registry "
           "export` in a TF process with the library loaded) or infers it from the graph (arity from the "
           "output slots consumers read, dtypes from what producers give and consumers expect); evidence "
           "`op_def` says which.")
    STRING_CONST = ("STRING_CONST", "node", "unsupported", "string constant",
           "keep string handling (formatting, printing, messages) apart from the math",
           "Const op with type DT_STRING is not supported by XLA.",
           "XLA has no string type. The Const kernel registered for XLA nevertheless claims DT_STRING (so that "
           f"tfcompile can keep Assert messages), so HasXLAKernel ({_CCU}) rejects string constants by hand.")
    IDENTITY_UNSAFE_CAST = ("IDENTITY_UNSAFE_CAST", "node", "unsupported", "Identity forwarding a reference input",
           "use resource variables (the TF2 default; tf.compat.v1.enable_resource_variables())",
           "Identity with unsafe cast.",
           "An Identity whose input is a reference (a TF1 `VariableV2`'s `float_ref`, read through `w/read`) "
           "forwards the reference itself. XLA cannot guarantee aliasing between a cluster's inputs and "
           f"outputs, so HasXLAKernel ({_CCU}, HasForwardedRefInput) leaves such nodes out.")
    UNSUPPORTED_FUNCTION = ("UNSUPPORTED_FUNCTION", "node", "unsupported", "called function contains a node XLA cannot compile",
           "see the evidence for the offending node inside the function", "unsupported function",
           "A function call (PartitionedCall, StatefulPartitionedCall, or a call of a library function) is "
           "compilable only if every node of the called function is, recursively "
           f"(RecursiveCompilabilityChecker::IsCompilableCall, {_CCU}). TF 2 inlines most calls before "
           "clustering; calls that stay (`_noinline` functions, jit_compile=True functions) are checked here. "
           "Evidence `inside` is the chain of function/node down to the first offending node, `inner_code` "
           "that node's own reason.")
    UNSUPPORTED_WHILE = ("UNSUPPORTED_WHILE", "node", "unsupported", "While whose cond or body is not compilable",
           "make the loop body and condition compilable (see the evidence) or move the offending op out",
           "unsupported while",
           "A functional While is compilable only if its cond and body functions are (IsCompilableWhile, "
           f"{_CCU}). tf.function and control flow v2 mark While ops to be lowered to Switch/Merge/Enter/Exit "
           "before clustering (LowerFunctionalOpsPass, `_lower_using_switch_merge`); the rule applies to While "
           "ops that stay functional.")
    UNSUPPORTED_IF = ("UNSUPPORTED_IF", "node", "unsupported", "If whose branch is not compilable",
           "make both branches compilable (see the evidence) or move the offending op out of the cond",
           "unsupported if",
           "A functional If (or StatelessIf) is compilable only if both its then and else functions are "
           f"(IsCompilableIf, {_CCU}). Like While, If ops marked `_lower_using_switch_merge` are lowered to "
           "Switch/Merge before clustering; the rule applies to If ops that stay functional.")
    UNSUPPORTED_CASE = ("UNSUPPORTED_CASE", "node", "unsupported", "Case whose branch is not compilable",
           "make every branch compilable (see the evidence) or move the offending op out",
           "unsupported case",
           "A functional Case (tf.switch_case) is compilable only if every branch function is "
           f"(IsCompilableCase, {_CCU}; auto-clustering requires every branch to be compilable). Case ops marked "
           "`_lower_using_switch_merge` are lowered before clustering; the rule applies to those that stay.")
    STATEFUL_RNG = ("STATEFUL_RNG", "node", "unsupported", "stateful random op",
           "use stateless RNG ops or tf.random.Generator (resource-based RNG is clusterable)", "stateful random op",
           "XLA's random number generators do not reproduce the sequences and seeding of TF's stateful RNG "
           "kernels (b/34749654), so auto-clustering leaves RandomUniform, RandomStandardNormal, "
           "TruncatedNormal, RandomUniformInt, RandomShuffle and Multinomial to TF (IsStatefulRandomOp, "
           f"{_CCU}): results would change just by turning auto-jit on.")
    CONTROL_TRIGGER = ("CONTROL_TRIGGER", "node", "unsupported", "ControlTrigger",
           "nothing: ControlTrigger is TF1 control-flow plumbing", "not allowed control trigger",
           "ControlTrigger runs even when its inputs are dead. Clustering it is unsound with the way "
           f"clustering uses deadness analysis (b/118970344), so it is never a candidate ({_CCU}).")
    ASSERT_OR_CHECKNUMERICS = ("ASSERT_OR_CHECKNUMERICS", "node", "unsupported", "Assert or CheckNumerics",
           "asserts and check_numerics are never auto-clustered", "Assert or CheckNumerics",
           "XLA implements Assert and CheckNumerics as no-ops. Auto-clustering them would silently drop the "
           f"checks, so the auto-clustering filter refuses them ({_CCU}); explicit compilation may elide them.")
    COLLECTIVE_OP = ("COLLECTIVE_OP", "node", "unsupported", "CollectiveReduceV2",
           "compile it explicitly (tf.function(jit_compile=True)) if it must be in XLA", "Collective op",
           "FindCompilationCandidates builds its checker with allow_collective_reduce_v2 = false: a collective "
           "all-reduce coordinates with the other members of its group at run time, which auto-clustering "
           f"does not set up ({_MFC}); it is compiled only on explicit request.")
    WHERE_EXCLUDED = ("WHERE_EXCLUDED", "node", "configuration", "Where excluded by --tf_xla_cluster_exclude_ops=Where",
           "drop Where from --tf_xla_cluster_exclude_ops", "Where op",
           "--tf_xla_cluster_exclude_ops=Where (the only op the flag accepts in TF 2.21) keeps Where, whose "
           f"output shape depends on the data, out of clusters (allow_where_op = false, {_MFC}).")
    UNIQUE_OP = ("UNIQUE_OP", "node", "unsupported", "Unique op (dynamic output shape)",
           "compile it explicitly (jit_compile=True) or avoid data-dependent shapes", "Unique op",
           "Unique's output size depends on the data. FindCompilationCandidates builds its checker with "
           f"allow_unique_op = false ({_MFC}), so auto-clustering never picks it.")
    VARIANT_OP = ("VARIANT_OP", "node", "unsupported", "produces or consumes DT_VARIANT (TensorList, dataset...)",
           "use plain tensors instead of TensorArray/TensorList, or compile explicitly",
           "DT_VARIANT producer/consumer",
           "Ops producing or consuming DT_VARIANT (the TensorList behind TF2's tf.TensorArray, datasets, "
           "optionals) are refused by the auto-clustering filter on CPU and GPU (the registrations' "
           f"cluster_variant_ops is false; {_CCU}): XLA handles TensorLists only when their shapes are "
           "known at compile time.")
    STACK_OP = ("STACK_OP", "node", "unsupported", "Stack op",
           "use TF2 control flow and gradients (no Stack ops)", "Stack op",
           "TF1 Stack ops (StackV2, StackPushV2, StackPopV2, ...) are resources that are not variables: "
           "clusters can only snapshot resource variables (b/112837194), so the auto-clustering filter "
           f"refuses them (cluster_stack_ops is false on CPU/GPU; {_CCU}).")
    TENSOR_ARRAY_OP = ("TENSOR_ARRAY_OP", "node", "unsupported", "TensorArray op",
           "use control flow v2 (TensorList) or plain tensors", "TensorArray op",
           "TF1 TensorArray ops (TensorArrayV3, TensorArrayWriteV3, ...) are non-variable resources, refused "
           f"like Stack ops (cluster_tensor_array_ops is false on CPU/GPU; {_CCU}).")
    RESOURCE_OP_IN_FUNCTION = ("RESOURCE_OP_IN_FUNCTION", "node", "unsupported", "resource input inside a called function",
           "read the variable outside the function and pass the value in, or let the call be inlined",
           "resource variable op in called function",
           "Inside a called function (or a While/If/Case body) an op with a resource input is refused: the "
           "resource-variable safety analysis that orders reads and writes within a cluster "
           "(resource_operation_safety_analysis.cc) does not look into functions "
           f"({_CCU}). The decision is about a node inside the function; jitsim reports the call as "
           "UNSUPPORTED_FUNCTION (or UNSUPPORTED_WHILE/IF/CASE) with `inner_code` RESOURCE_OP_IN_FUNCTION.")
    INACCURATE_OP = ("INACCURATE_OP", "node", "unsupported", "op with numerical accuracy issues",
           "compile it explicitly if XLA's precision is acceptable", "operation with numerical accuracy issues",
           "XLA's SelfAdjointEigV2 and Svd are less precise than TF's kernels (b/127344411); auto-clustering "
           f"leaves them to TF (OpIsInaccurate, {_CCU}).")
    SLOW_OP = ("SLOW_OP", "node", "unsupported", "op that is slow under XLA",
           "nothing needed: TF keeps the op on its own kernel on purpose", "slow operation",
           "Some ops are much slower under XLA than with TF's kernels (b/128001705, b/135640736). The list "
           "(OpIsSlow, read from each release's binary: registry data tf-<release>-slow-ops.json) is "
           "SelfAdjointEigV2, Svd, Qr, MatrixInverse, MatrixSolve and ResizeBilinearGrad in TF 2.16-2.19; "
           f"TF 2.20 and 2.21 add NonMaxSuppressionV3 and NonMaxSuppressionV4 ({_CCU}).")
    FUNCTION_DEPTH_LIMIT = ("FUNCTION_DEPTH_LIMIT", "node", "unsupported", "function nesting deeper than 50",
           "flatten the nesting of non-inlined calls", "function depth limit exceeded",
           "RecursiveCompilabilityChecker::IsCompilableCall stops following calls more than kMaxRecursionDepth "
           f"(50) frames deep ({_CCU}), which bounds the check and stops recursive functions; the call is then "
           "treated as not compilable.")
    FUNCTION_NOT_FOUND = ("FUNCTION_NOT_FOUND", "node", "unsupported", "called function cannot be instantiated",
           "define the function in the graph's library (or fix its body)", "could not instantiate call",
           "IsCompilableCall instantiates the called function with the function library runtime "
           f"({_CCU}); when that fails (the function is not defined, its body names a tensor that does not exist, or "
           "its attributes do not resolve) the call is not compilable; the pass goes on.")
    NOT_IN_OPS_TO_CLUSTER = ("NOT_IN_OPS_TO_CLUSTER", "node", "configuration", "op not in --tf_xla_ops_to_cluster", "add the op or its category",
           "as it is not listed in --tf_xla_ops_to_cluster.",
           "--tf_xla_ops_to_cluster restricts auto-clustering to the listed ops (names, or categories such as "
           "FUSIBLE); an op outside the list is rejected after the compilability checks "
           f"(FindCompilationCandidates, {_MFC}).")
    MUST_BE_CONSTANT_STATEFUL = ("MUST_BE_CONSTANT_STATEFUL", "node", "unsupported", "stateful op whose value must be a compile-time constant",
           "its value feeds a shape-like input (e.g. a Reshape shape)", "must-be-constant stateful op",
           "XLA needs some inputs as compile-time constants (a Reshape's shape, a reduction's axes...). TF's "
           "backwards constant analysis marks every node whose value flows into such an input; a stateful one "
           "(e.g. a variable read) cannot be evaluated at compile time inside the cluster, so "
           f"FindCompilationCandidates isolates it ({_MFC}) and its value enters the cluster as an argument.")
    IDENTITY_DRIVING_CONSTS_IN_LOOP = ("IDENTITY_DRIVING_CONSTS_IN_LOOP", "node", "unsupported", "loop pivot Identity that control-drives constants",
           "nothing: it is TF1 while-loop plumbing (control flow v2 has none)",
           "including it can create dependencies between while loop condition and body computations",
           "In a TF1 (control flow v1) while loop, the body's pivot Identity (fed by the loop's Switch) has "
           "control edges to the body's constants. Clustering it would make those constants wait for the "
           "cluster and tie the loop condition to the body's computations, with run-time overhead "
           f"(IsIdentityDrivingConstsInLoop, {_MFC}).")
    WHATIF_EXCLUDED = ("WHATIF_EXCLUDED", "node", "configuration", "excluded by the what-if option --exclude-op",
           "not a TF decision: jitsim treated the op as uncompilable because you asked", "",
           "Not a TF decision: the what-if option `--exclude-op OP` (Python `exclude_ops=`) makes jitsim treat "
           "the op as uncompilable, to show how the clusters would change without it.")
    # -- after contraction ------------------------------------------------------------------
    CLUSTER_TOO_SMALL = ("CLUSTER_TOO_SMALL", "node", "declustered", "its cluster is below --tf_xla_min_cluster_size",
           "effective size counts all nodes but Const/Identity; lower --tf_xla_min_cluster_size", "",
           "After contraction, MarkForCompilationPassImpl::CreateClusters only marks a cluster whose effective "
           "size (its nodes, not counting Const and Identity ops) is at least --tf_xla_min_cluster_size "
           "(default 4 with auto-jit), unless it has functional control flow or was explicitly requested: "
           f"launching a tiny cluster costs more than XLA saves ({_MFC}). TF logs nothing for it.")
    CLUSTER_NOT_COMPILED = ("CLUSTER_NOT_COMPILED", "node", "declustered", "its cluster's device policy says not to compile",
           "enable auto-clustering for the cluster's device (see POLICY_NOT_ENABLED)",
           "Not compiling cluster with device",
           "MarkForCompilationPassImpl::ShouldCompileCluster re-applies the autoclustering policy of the "
           f"device a whole cluster compiles for ({_MFC}). In TF 2.21 every member already passed the same "
           "policy as a candidate and clusters only span compatible devices, so the check does not refuse a "
           "cluster in practice.")
    FILL_DECLUSTERED = ("FILL_DECLUSTERED", "node", "declustered", "Fill with no consumer in its cluster (removed after clustering)",
           "nothing: the Fill is cheap to compute outside the cluster", "",
           "After contraction TF takes a Fill out of its cluster again when it has consumers and none of them "
           f"is in that cluster (MarkForCompilationPassImpl::DeclusterNodes, {_MFC}): its inputs are a shape and "
           "a scalar, its output a whole tensor, so compiling it would only make the cluster output a large "
           "tensor that TF's own kernel produces as cheaply. The rest of the cluster is kept.")
    # -- passes after mark-for-compilation ----------------------------------------------------
    INPUT_HOSTMEM = ("INPUT_HOSTMEM", "node", "declustered", "must-compile call: its compile-time-constant arguments are kept in host memory",
           "ForceXlaConstantsOnHost writes _input_hostmem (even when empty)", "Found constant arg indices:",
           "ForceXlaConstantsOnHostPass: for every call that must be compiled (`_XlaMustCompile`, e.g. a "
           "tf.function(jit_compile=True) called from another function), it finds the arguments the function "
           "needs as compile-time constants and lists them in `_input_hostmem`, so the runtime keeps them in "
           "host memory where the compiler can read them (force_xla_constants_on_host_pass.cc). The node keeps "
           "its cluster state; the code only records the rewrite.")
    SLICE_MADE_STATIC = ("SLICE_MADE_STATIC", "node", "declustered", "clustered Slice with a run-time begin replaced by a static-shaped Slice",
           "the compiled shape now depends only on the constant size (IncreaseDynamismForAutoJit)",
           "Rewriting slice <name> to a \"static shaped\" Slice",
           "IncreaseDynamismForAutoJitPass (increase_dynamism_for_auto_jit_pass.cc): a clustered Slice whose "
           "`begin` is computed at run time but whose `size` is constant is replaced by "
           "`<name>/static_shaped_slice/...` nodes whose output shape depends only on the size, so new begin "
           "values do not force a recompilation.")
    DECLUSTERED_DEVICE_TO_HOST_COPY = ("DECLUSTERED_DEVICE_TO_HOST_COPY", "node", "declustered",
           "copied out of its cluster to feed a host-memory consumer outside it",
           "PartiallyDecluster phase A: avoids a device-to-host copy (mostly int32 shape math)", "",
           f"PartiallyDeclusterPass, first phase ({_PDP}, reduce_device_to_host_copies): a clustered node whose "
           "output lives in host memory and feeds, in host memory, a node outside the cluster is copied out as "
           "`<name>/declustered` (shape consumers and resource ops excepted: the latter must not run twice); the "
           "consumer reads the copy instead of waiting for a device-to-host transfer of the cluster's output. "
           "The original stays for its consumers inside the cluster (and is removed if it has none). TF logs "
           "only the node.")
    DECLUSTERED_RECOMPILATION = ("DECLUSTERED_RECOMPILATION", "node", "declustered",
           "must-be-constant node fed only from outside its cluster: computed outside",
           "PartiallyDecluster phase B: fewer distinct compile-time constants reach the compiler",
           "Declustering must-be-constant node",
           f"PartiallyDeclusterPass, second phase ({_PDP}, reduce_recompilation): a node whose value its "
           "cluster needs as a compile-time constant, and whose inputs all come from outside the cluster, is "
           "taken out. Inside, each distinct input value would compile a new executable; computed by TF, only "
           "its result matters, and a many-to-one function (x - y, a Shape) then causes fewer compilations. "
           "Nodes that must be compiled (no TF kernel, or an always-compile device) stay.")
    DECLUSTERED_CONST_CROSS_DEVICE = ("DECLUSTERED_CONST_CROSS_DEVICE", "node", "declustered",
           "must-be-constant Const with an input from another device left its cluster",
           "nothing: put the control dependency on the same device to keep the constant compiled in",
           "Declustering Const with cross-device control input",
           f"In the second phase of PartiallyDeclusterPass ({_PDP}, reduce_recompilation) a must-be-constant "
           "Const fed only from outside normally stays in its cluster (nothing to gain); one with a control "
           "input from a node on another device is taken out, because, in TF's words, it \"may be part of the "
           "co-ordination of while loops between devices\".")
    DECLUSTERED_ROOT_SHAPE_CONSUMER = ("DECLUSTERED_ROOT_SHAPE_CONSUMER", "node", "declustered",
           "Shape/Rank/Size with no input from its own cluster left the cluster",
           "PartiallyDecluster phase C: only metadata of an outside tensor is needed",
           "Declustering <name> because it is a root shape consumer",
           f"PartiallyDeclusterPass, third phase ({_PDP}, decluster_root_shape_consumers): a Shape, Rank or "
           "Size none of whose inputs comes from its own cluster only reads metadata of a tensor produced "
           "outside; computed outside, that tensor need not be passed into the cluster just for its shape.")
    # -- refused merges, in TF's check order -------------------------------------------------
    MERGE_DEADNESS = ("MERGE_DEADNESS", "merge", "unsupported", "the two clusters have different deadness predicates",
           "ops under different tf.cond branches (or control deps on them) cannot share a cluster",
           "the two nodes have mismatching deadness",
           "Deadness analysis (deadness_analysis.cc) gives each node the predicate under which its output is "
           "live: after a Switch (tf.cond, tf.switch_case, TF1 control flow) only one branch is. A cluster runs "
           "all or nothing, so MarkForCompilationPassImpl::TryToContractEdge refuses to merge clusters whose "
           "predicates differ. The evidence shows both predicates as TF prints them.")
    MERGE_DEVICES = ("MERGE_DEVICES", "merge", "unsupported", "incompatible devices", "place the ops on one device",
           "the two nodes have incompatible devices",
           "A cluster is compiled for one device (PickDeviceForXla). TryToContractEdge refuses to merge clusters "
           "whose devices cannot be combined (two CPU devices, CPU:0 and CPU:1; a GPU with a different GPU), "
           f"or where a resource op is bound to another device than the merged cluster's ({_MFC}).")
    MERGE_SCOPE = ("MERGE_SCOPE", "merge", "unsupported", "different XLA scopes", "put the ops in one jit_scope",
           "the two nodes have mismatching XLA scopes",
           "Nodes in different XLA scopes are compiled separately by request: `_XlaScope` (from "
           "tf.xla.experimental.jit_scope) when auto-jit is off, `_XlaInternalScope` (from ClusterScopingPass, "
           f"which separates pipeline stages) when it is on ({_MFC}).")
    MERGE_MAX_SIZE = ("MERGE_MAX_SIZE", "merge", "unsupported", "merged cluster would exceed --tf_xla_max_cluster_size",
           "raise --tf_xla_max_cluster_size", "the new cluster will be larger than the max cluster size",
           "--tf_xla_max_cluster_size caps the number of nodes in a cluster (all nodes, Const and Identity "
           f"included); TryToContractEdge refuses a merge that would exceed it ({_MFC}).")
    MERGE_CROSS_DEVICE = ("MERGE_CROSS_DEVICE", "merge", "unsupported", "merging would introduce a cross device dependency",
           "place the connected ops on one device",
           "the new cluster will introduce a cross device dependency",
           "TryToContractEdge also checks the clusters that feed the target: if one of them is on a device "
           "incompatible with either cluster, the merged cluster would depend on a cluster of another device "
           f"({_MFC}), and the merge is refused. The evidence `via` names that predecessor.")
    MERGE_RESOURCE = ("MERGE_RESOURCE", "merge", "unsupported", "merging would break resource variable ordering",
           "a write/modify of a resource precedes a read/modify of a resource (any variable) downstream",
           "the new cluster would break resource variable semantics",
           "A cluster reads all the resource variables it uses when it starts and writes them when it ends. "
           "The resource-operation safety analysis (resource_operation_safety_analysis.cc) lists pairs (A, B) "
           "where A writes or modifies a resource and B, later, reads or modifies one; such a pair may not end "
           "up in one cluster, or B would not see A's effect. The evidence names the writer and the reader.")
    MERGE_CYCLE = ("MERGE_CYCLE", "merge", "unsupported", "merging would create a cycle", "another path leaves and re-enters the pair",
           "contracting the edge would create a cycle",
           "Clusters must keep the graph acyclic: if another path leaves the first cluster and re-enters the "
           "second through nodes that stay outside (an op without an XLA kernel, another cluster), the merged "
           "cluster would both feed and depend on them. GraphCycles::ContractEdge refuses; TF logs the path "
           "(\"via [...]\") and jitsim's evidence `path` lists the same nodes.")

    # -- EncapsulateSubgraphsPass: where a cluster argument goes (ArgDecision.kind) ---------------
    ARG_CONSTANT = ("constant", "arg", "record", "argument that must be a compile-time constant",
                    "", "",
                    f"EncapsulateSubgraphsPass's rewrite callback ({_ESP}, RewriteSubgraph) runs "
                    "BackwardsConstAnalysis on the optimized cluster body: an argument some consumer needs at "
                    "compile time (a shape, an axis, a size) goes first in the signature; the call node's "
                    "`_XlaNumConstantArgs` counts them. The record's detail is the consumer chain.")
    ARG_NORMAL = ("normal", "arg", "record", "argument passed at run time", "", "",
                  f"An argument neither needed at compile time nor a resource ({_ESP}): it sits between the "
                  "constants and the resources, in the order the edges first reached the cluster.")
    ARG_RESOURCE = ("resource", "arg", "record", "DT_RESOURCE argument (a variable handle)", "", "",
                    f"Resource arguments go last in the signature ({_ESP}); `_XlaNumResourceArgs` on the call "
                    "node counts them, and the compiled cluster reads and writes the variables they point to.")
    # -- BuildXlaOpsPass: why a cluster is compiled lazily or strictly ----------------------------
    LAZY_COMPILATION_DEFAULT = ("lazy_compilation_default", "cluster", "record",
                                "lazy: the device does not require compilation", "", "",
                                f"BuildXlaOpsPass ({_BXO}) builds an _XlaCompile whose `must_compile` is false, a "
                                "Switch on its compilation key and a PartitionedCall of the cluster's function as "
                                "the fallback: the cluster may run with TF's kernels until it is worth compiling.")
    LAZY_COMPILATION_DISABLED = ("lazy_compilation_disabled", "cluster", "record",
                                 "strict: --tf_xla_enable_lazy_compilation=false",
                                 "", "",
                                 f"With lazy compilation off, BuildXlaOpsPass ({_BXO}) builds _XlaCompile with "
                                 "`must_compile` true and no fallback: every call compiles.")
    DEVICE_REQUIRES_COMPILATION = ("device_requires_compilation", "cluster", "record",
                                   "strict: the device's XLA registration always compiles", "", "",
                                   f"A device whose XLA registration's policy is kAlways (the XLA_CPU/XLA_GPU "
                                   f"devices) cannot run the cluster's ops otherwise ({_BXO}): no fallback.")
    # -- the rewrites TF makes before its JIT passes (the TF-free route, frontend/prepare) ----------
    INLINE_AND_LOWER = ("inline_and_lower", "rewrite", "record", "function calls inlined, If/Case/While lowered",
                        "", "",
                        "LowerFunctionalOpsPass (lower_functional_ops.cc) inlines function calls and lowers "
                        "functional control flow to Switch/Merge/Enter/Exit before placement.")
    FUNCTIONAL_OP_KEPT = ("functional_op_kept", "rewrite", "record",
                          "If/Case/While without _lower_using_switch_merge kept as it is", "", "",
                          "LowerFunctionalOpsPass (lower_functional_ops.cc) lowers only the functional control-flow "
                          "ops that carry `_lower_using_switch_merge` = true (tf.function's control flow v2 sets it); "
                          "any other stays one node, which auto-clustering compiles only when the whole op is "
                          "compilable (UNSUPPORTED_IF, UNSUPPORTED_WHILE...).")
    PLACEMENT = ("placement", "rewrite", "record", "unplaced nodes given a device", "", "",
                 "TF's placer (placer.cc) assigns every node a device before the JIT passes run.")
    SHAPE_INFERENCE = ("shape_inference", "rewrite", "record", "shapes inferred for the shape-dependent rewrites",
                       "", "",
                       "Grappler's optimizers read GraphProperties (graph_properties.cc); where a graph records "
                       "no `_output_shapes`, jitsim infers static shapes for them.")
    MODEL_PRUNER = ("model_pruner", "rewrite", "record", "nodes unreachable from the fetches dropped, "
                    "trivial ops bypassed", "", "",
                    "Grappler's ModelPruner (model_pruner.cc).")
    COMMON_SUBGRAPH_ELIMINATION = ("common_subgraph_elimination", "rewrite", "record", "identical nodes merged",
                                   "", "", "Grappler's CommonSubgraphElimination (common_subgraph_elimination.cc).")
    ARITHMETIC_OPTIMIZER = ("arithmetic_optimizer", "rewrite", "record",
                            "redundant Reshapes removed, unary ops hoisted or composed", "", "",
                            "Grappler's ArithmeticOptimizer (arithmetic_optimizer.cc), the stages that change "
                            "clusters.")
    CONSTANT_FOLDING = ("constant_folding", "rewrite", "record", "constant subgraphs folded, neutral operands "
                        "simplified", "", "", "Grappler's ConstantFolding (constant_folding.cc).")
    REMAPPER = ("remapper", "rewrite", "record", "CPU/oneDNN fusions (_FusedMatMul, _FusedConv2D...)", "", "",
                "Grappler's Remapper (remapper.cc): the fused ops mostly have no XLA kernel and split clusters.")
    DEPENDENCY_OPTIMIZER = ("dependency_optimizer", "rewrite", "record", "NoOps bypassed or removed", "", "",
                            "Grappler's DependencyOptimizer (dependency_optimizer.cc).")
