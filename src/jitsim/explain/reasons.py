"""Stable reason codes for every clustering decision jitsim records.

Each code says why a node is (or is not) in a cluster, or why two clusters were not
merged. Codes are part of jitsim's output contract (``--format json``): never rename one;
add new ones. ``tf_log`` quotes the words TF itself logs for that decision, when it logs
one (``<...>`` stands for a name TF fills in), so users can match jitsim's answer with TF's
VLOG output (``TF_CPP_VMODULE=mark_for_compilation_pass=3,compilability_check_util=3,
partially_decluster_pass=3``). ``explanation`` says what TF checks, why, and where.

Every code has a minimal example in ``fixtures/reasons/`` (a TF program and TF's own dumps
of it, or a hand-built graph for the few decisions TF on a CPU build cannot make), checked
against jitsim by ``tests/test_reason_examples.py`` and shown in docs/reasons.md.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Reason:
    code: str
    kind: str  # "node" (candidate filter / cluster decision) or "merge" (refused contraction)
    title: str
    hint: str = ""
    tf_log: str = ""
    explanation: str = ""  # a paragraph: what TF checks and why the rule exists

    @property
    def anchor(self) -> str:
        """Where docs/reasons.md documents this code."""
        return f"docs/reasons.md#{self.code.lower()}"


_MFC = "mark_for_compilation_pass.cc"
_CCU = "compilability_check_util.cc"
_PDP = "partially_decluster_pass.cc"

_REASONS = [
    # -- clustered -----------------------------------------------------------------------
    Reason("CLUSTERED", "node", "in an XLA cluster", "", "",
           "The node passed every candidate filter of MarkForCompilationPassImpl::FindCompilationCandidates, "
           "edge contraction put it in a cluster that passed the size and device-policy checks "
           f"(MarkForCompilationPassImpl::CreateClusters, {_MFC}), so it got an `_XlaCluster` attribute, and "
           "the later passes left it there. EncapsulateSubgraphsPass turns each cluster into a function that "
           "BuildXlaOpsPass replaces with _XlaCompile/_XlaRun: the cluster runs as one XLA executable."),
    # -- graph-level: the pass did nothing ---------------------------------------------------
    Reason("GRAPH_ALREADY_CLUSTERED", "node", "graph skipped: a node carries _XlaAlreadyClustered",
           "this graph is a cluster body or its fallback; TF never re-clusters it", "",
           f"MarkForCompilationPass::Run ({_MFC}) returns at once when a node of the graph already carries "
           "`_XlaAlreadyClustered` (or is a TPUExecute op): the graph is the body of a cluster TF built before, "
           "typically run uncompiled as the lazy-compilation fallback (a cluster seen with a new input shape "
           "first runs its function with TF's kernels). Clustering it again would nest clusters."),
    Reason("GRAPH_NO_CANDIDATES", "node", "graph has no compilation candidate",
           "see each node's own code for why it was rejected", "No compilable candidates",
           "No node of the graph passed the candidate filters, so MarkForCompilationPassImpl::Run logs "
           f"\"No compilable candidates\" and returns without clustering (and without writing a "
           f"mark_for_compilation dump; {_MFC}). It is a decision about the whole graph: each node's own code "
           "says why that node was rejected."),
    Reason("GRAPH_CYCLE_GRAPH_FAILED", "node", "loop frames form a cycle; graph not clustered",
           "restructure the loops so that no loop frame is entered again after a frame it feeds",
           "Could not form cycle detection graph",
           "Clustering keeps the graph acyclic with a cycle-detection graph in which every while-loop frame is "
           "collapsed into one node (CreateCycleDetectionGraph, xla_cluster_util.cc): edges into an Enter go "
           "to the frame's node and edges out of an Exit leave from it. If that collapsed graph has a cycle "
           "(frame A feeds frame B, which feeds frame A again) TF cannot reason about cycles at all and "
           "clusters nothing in the graph."),
    # -- candidate filters, in TF's order ---------------------------------------------------
    Reason("FUEL_EXHAUSTED", "node", "clustering fuel exhausted",
           "raise --tf_xla_clustering_fuel", "Hit fuel limit; not marking any remaining ops as clusterable.",
           "--tf_xla_clustering_fuel is a debugging budget (to bisect clustering bugs): each node accepted as "
           "a candidate costs one unit, across all graphs of the process. When it is spent, "
           f"FindCompilationCandidates ({_MFC}) stops and every remaining node, in TF's node order, stays out."),
    Reason("NO_DEVICE", "node", "node has no assigned device",
           "pass --device cpu|gpu for a GraphDef exported from Python", "",
           "TF runs MarkForCompilationPass after placement (POST_REWRITE_FOR_EXEC), so every node it sees has "
           "an assigned device; the pass maps each device to its XLA registration "
           f"(DeviceInfoCache, {_MFC}) and cannot handle a node without one. Only graphs given to jitsim "
           "without placement (e.g. exported from Python) have such nodes: jitsim does not guess a device."),
    Reason("XLA_COMPILE_FALSE", "node", "_XlaCompile=false on the node or its function",
           "remove the attribute / jit scope that forbids compilation",
           "disallowed by _XlaCompile attribute",
           "A node whose `_XlaCompile` attribute (or that of the function it calls) is false is never a "
           f"candidate (FindCompilationCandidates, {_MFC}): the user asked for it to run outside XLA, e.g. "
           "with `tf.xla.experimental.jit_scope(compile_ops=False)`."),
    Reason("NO_JIT_DEVICE", "node", "the node's device type has no XLA JIT device",
           "place the node on CPU or GPU", "could not find JIT device for",
           "FindCompilationCandidates asks XlaOpRegistry::GetCompilationDevice for the registration of the "
           "node's device type. TF registers JIT devices for CPU (XLA_CPU_JIT) and GPU (XLA_GPU_JIT), and for "
           "the deprecated XLA_CPU/XLA_GPU devices with --tf_xla_enable_xla_devices; a node on any other "
           "device type (e.g. TPU, or a pluggable device) cannot be auto-clustered."),
    Reason("POLICY_NOT_ENABLED", "node", "auto-clustering is not enabled for this device",
           "CPU needs --tf_xla_cpu_global_jit (at process start) and a jit level; GPU needs a jit level "
           "(--tf_xla_auto_jit=2 or tf.config.optimizer.set_jit)", "",
           "Each JIT device has an autoclustering policy: GPU clusters \"if enabled globally\" (a jit level from "
           "--tf_xla_auto_jit or the session's global_jit_level); CPU only \"if explicitly requested\" unless "
           "--tf_xla_cpu_global_jit was set when TF first read the flags (or the session sets cpu_global_jit). "
           "A node that is not explicitly marked (`_XlaCompile`, a jit scope) on a device whose policy does not "
           f"allow auto-clustering is no candidate ({_MFC}); TF logs nothing per node, only \"No compilable "
           "candidates\" when no node is left."),
    Reason("SOURCE_OR_SINK", "node", "source or sink node",
           "nothing: TF never clusters a graph's _SOURCE and _SINK", "source or sink node",
           "RecursiveCompilabilityChecker::IsCompilableNode refuses the graph's implicit _SOURCE and _SINK "
           f"nodes ({_CCU}). FindCompilationCandidates only walks op nodes, so the check never fires in "
           "auto-clustering; jitsim catalogues the code for completeness and never reports it."),
    Reason("TOP_LEVEL_ARG_RETVAL", "node", "function argument or return value (never clustered)",
           "nothing: a cluster can read a function's arguments and produce its results, not contain them",
           "top level _Arg or _Retval",
           "In the graph of a function, `_Arg` and `_Retval` nodes are its inputs and outputs (feeds and "
           f"fetches): IsCompilableNode ({_CCU}) refuses them at the top level. Inside a called function they "
           "are part of the call and do not count."),
    Reason("SCOPED_ALLOCATOR", "node", "has _scoped_allocator or _forward_from",
           "disable Grappler's scoped_allocator_optimization for this graph",
           "_scoped_allocator or _forward_from attribute",
           "`_scoped_allocator` and `_forward_from` (written by Grappler's scoped-allocator optimizer) ask the "
           "executor to place outputs in shared or forwarded buffers, which XLA does not implement "
           f"(IsCompilableNode, {_CCU}; b/128858118)."),
    Reason("UNSUPPORTED_OP", "node", "no XLA kernel for this op with these types",
           "the op (or this dtype) is not implemented by XLA's tf2xla bridge",
           "No registered '<op>' OpKernel for <jit device> devices compatible with node",
           "XLA compiles a node with the tf2xla kernel registered for the op on the device's JIT device "
           "(XLA_CPU_JIT, XLA_GPU_JIT). RecursiveCompilabilityChecker::HasXLAKernel looks it up with "
           f"FindKernelDef ({_CCU}); if no kernel exists, or none whose type constraints accept the node's "
           "attributes, the node stays out. TF 2.21 logs the lookup error; the evidence names the type "
           "attribute XLA does not accept and the types it does."),
    Reason("CUSTOM_OP", "node", "op of a custom-op library, with no XLA kernel",
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
           "`op_def` says which."),
    Reason("STRING_CONST", "node", "string constant",
           "keep string handling (formatting, printing, messages) apart from the math",
           "Const op with type DT_STRING is not supported by XLA.",
           "XLA has no string type. The Const kernel registered for XLA nevertheless claims DT_STRING (so that "
           f"tfcompile can keep Assert messages), so HasXLAKernel ({_CCU}) rejects string constants by hand."),
    Reason("IDENTITY_UNSAFE_CAST", "node", "Identity forwarding a reference input",
           "use resource variables (the TF2 default; tf.compat.v1.enable_resource_variables())",
           "Identity with unsafe cast.",
           "An Identity whose input is a reference (a TF1 `VariableV2`'s `float_ref`, read through `w/read`) "
           "forwards the reference itself. XLA cannot guarantee aliasing between a cluster's inputs and "
           f"outputs, so HasXLAKernel ({_CCU}, HasForwardedRefInput) leaves such nodes out."),
    Reason("UNSUPPORTED_FUNCTION", "node", "called function contains a node XLA cannot compile",
           "see the evidence for the offending node inside the function", "unsupported function",
           "A function call (PartitionedCall, StatefulPartitionedCall, or a call of a library function) is "
           "compilable only if every node of the called function is, recursively "
           f"(RecursiveCompilabilityChecker::IsCompilableCall, {_CCU}). TF 2 inlines most calls before "
           "clustering; calls that stay (`_noinline` functions, jit_compile=True functions) are checked here. "
           "Evidence `inside` is the chain of function/node down to the first offending node, `inner_code` "
           "that node's own reason."),
    Reason("UNSUPPORTED_WHILE", "node", "While whose cond or body is not compilable",
           "make the loop body and condition compilable (see the evidence) or move the offending op out",
           "unsupported while",
           "A functional While is compilable only if its cond and body functions are (IsCompilableWhile, "
           f"{_CCU}). tf.function and control flow v2 mark While ops to be lowered to Switch/Merge/Enter/Exit "
           "before clustering (LowerFunctionalOpsPass, `_lower_using_switch_merge`); the rule applies to While "
           "ops that stay functional."),
    Reason("UNSUPPORTED_IF", "node", "If whose branch is not compilable",
           "make both branches compilable (see the evidence) or move the offending op out of the cond",
           "unsupported if",
           "A functional If (or StatelessIf) is compilable only if both its then and else functions are "
           f"(IsCompilableIf, {_CCU}). Like While, If ops marked `_lower_using_switch_merge` are lowered to "
           "Switch/Merge before clustering; the rule applies to If ops that stay functional."),
    Reason("UNSUPPORTED_CASE", "node", "Case whose branch is not compilable",
           "make every branch compilable (see the evidence) or move the offending op out",
           "unsupported case",
           "A functional Case (tf.switch_case) is compilable only if every branch function is "
           f"(IsCompilableCase, {_CCU}; auto-clustering requires every branch to be compilable). Case ops marked "
           "`_lower_using_switch_merge` are lowered before clustering; the rule applies to those that stay."),
    Reason("STATEFUL_RNG", "node", "stateful random op",
           "use stateless RNG ops or tf.random.Generator (resource-based RNG is clusterable)", "stateful random op",
           "XLA's random number generators do not reproduce the sequences and seeding of TF's stateful RNG "
           "kernels (b/34749654), so auto-clustering leaves RandomUniform, RandomStandardNormal, "
           "TruncatedNormal, RandomUniformInt, RandomShuffle and Multinomial to TF (IsStatefulRandomOp, "
           f"{_CCU}): results would change just by turning auto-jit on."),
    Reason("CONTROL_TRIGGER", "node", "ControlTrigger",
           "nothing: ControlTrigger is TF1 control-flow plumbing", "not allowed control trigger",
           "ControlTrigger runs even when its inputs are dead. Clustering it is unsound with the way "
           f"clustering uses deadness analysis (b/118970344), so it is never a candidate ({_CCU})."),
    Reason("ASSERT_OR_CHECKNUMERICS", "node", "Assert or CheckNumerics",
           "asserts and check_numerics are never auto-clustered", "Assert or CheckNumerics",
           "XLA implements Assert and CheckNumerics as no-ops. Auto-clustering them would silently drop the "
           f"checks, so the auto-clustering filter refuses them ({_CCU}); explicit compilation may elide them."),
    Reason("COLLECTIVE_OP", "node", "CollectiveReduceV2",
           "compile it explicitly (tf.function(jit_compile=True)) if it must be in XLA", "Collective op",
           "FindCompilationCandidates builds its checker with allow_collective_reduce_v2 = false: a collective "
           "all-reduce coordinates with the other members of its group at run time, which auto-clustering "
           f"does not set up ({_MFC}); it is compiled only on explicit request."),
    Reason("WHERE_EXCLUDED", "node", "Where excluded by --tf_xla_cluster_exclude_ops=Where",
           "drop Where from --tf_xla_cluster_exclude_ops", "Where op",
           "--tf_xla_cluster_exclude_ops=Where (the only op the flag accepts in TF 2.21) keeps Where, whose "
           f"output shape depends on the data, out of clusters (allow_where_op = false, {_MFC})."),
    Reason("UNIQUE_OP", "node", "Unique op (dynamic output shape)",
           "compile it explicitly (jit_compile=True) or avoid data-dependent shapes", "Unique op",
           "Unique's output size depends on the data. FindCompilationCandidates builds its checker with "
           f"allow_unique_op = false ({_MFC}), so auto-clustering never picks it."),
    Reason("VARIANT_OP", "node", "produces or consumes DT_VARIANT (TensorList, dataset...)",
           "use plain tensors instead of TensorArray/TensorList, or compile explicitly",
           "DT_VARIANT producer/consumer",
           "Ops producing or consuming DT_VARIANT (the TensorList behind TF2's tf.TensorArray, datasets, "
           "optionals) are refused by the auto-clustering filter on CPU and GPU (the registrations' "
           f"cluster_variant_ops is false; {_CCU}): XLA handles TensorLists only when their shapes are "
           "known at compile time."),
    Reason("STACK_OP", "node", "Stack op",
           "use TF2 control flow and gradients (no Stack ops)", "Stack op",
           "TF1 Stack ops (StackV2, StackPushV2, StackPopV2, ...) are resources that are not variables: "
           "clusters can only snapshot resource variables (b/112837194), so the auto-clustering filter "
           f"refuses them (cluster_stack_ops is false on CPU/GPU; {_CCU})."),
    Reason("TENSOR_ARRAY_OP", "node", "TensorArray op",
           "use control flow v2 (TensorList) or plain tensors", "TensorArray op",
           "TF1 TensorArray ops (TensorArrayV3, TensorArrayWriteV3, ...) are non-variable resources, refused "
           f"like Stack ops (cluster_tensor_array_ops is false on CPU/GPU; {_CCU})."),
    Reason("RESOURCE_OP_IN_FUNCTION", "node", "resource input inside a called function",
           "read the variable outside the function and pass the value in, or let the call be inlined",
           "resource variable op in called function",
           "Inside a called function (or a While/If/Case body) an op with a resource input is refused: the "
           "resource-variable safety analysis that orders reads and writes within a cluster "
           "(resource_operation_safety_analysis.cc) does not look into functions "
           f"({_CCU}). The decision is about a node inside the function; jitsim reports the call as "
           "UNSUPPORTED_FUNCTION (or UNSUPPORTED_WHILE/IF/CASE) with `inner_code` RESOURCE_OP_IN_FUNCTION."),
    Reason("INACCURATE_OP", "node", "op with numerical accuracy issues",
           "compile it explicitly if XLA's precision is acceptable", "operation with numerical accuracy issues",
           "XLA's SelfAdjointEigV2 and Svd are less precise than TF's kernels (b/127344411); auto-clustering "
           f"leaves them to TF (OpIsInaccurate, {_CCU})."),
    Reason("SLOW_OP", "node", "op that is slow under XLA",
           "nothing needed: TF keeps the op on its own kernel on purpose", "slow operation",
           "Some ops are much slower under XLA than with TF's kernels (b/128001705, b/135640736). The list "
           "(OpIsSlow, read from each release's binary: registry data tf-<release>-slow-ops.json) is "
           "SelfAdjointEigV2, Svd, Qr, MatrixInverse, MatrixSolve and ResizeBilinearGrad in TF 2.16-2.19; "
           f"TF 2.20 and 2.21 add NonMaxSuppressionV3 and NonMaxSuppressionV4 ({_CCU})."),
    Reason("FUNCTION_DEPTH_LIMIT", "node", "function nesting deeper than 50",
           "flatten the nesting of non-inlined calls", "function depth limit exceeded",
           "RecursiveCompilabilityChecker::IsCompilableCall stops following calls more than kMaxRecursionDepth "
           f"(50) frames deep ({_CCU}), which bounds the check and stops recursive functions; the call is then "
           "treated as not compilable."),
    Reason("FUNCTION_NOT_FOUND", "node", "called function cannot be instantiated",
           "define the function in the graph's library (or fix its body)", "could not instantiate call",
           "IsCompilableCall instantiates the called function with the function library runtime "
           f"({_CCU}); when that fails (the function is not defined, its body names a tensor that does not exist, or "
           "its attributes do not resolve) the call is not compilable; the pass goes on."),
    Reason("NOT_IN_OPS_TO_CLUSTER", "node", "op not in --tf_xla_ops_to_cluster", "add the op or its category",
           "as it is not listed in --tf_xla_ops_to_cluster.",
           "--tf_xla_ops_to_cluster restricts auto-clustering to the listed ops (names, or categories such as "
           "FUSIBLE); an op outside the list is rejected after the compilability checks "
           f"(FindCompilationCandidates, {_MFC})."),
    Reason("MUST_BE_CONSTANT_STATEFUL", "node", "stateful op whose value must be a compile-time constant",
           "its value feeds a shape-like input (e.g. a Reshape shape)", "must-be-constant stateful op",
           "XLA needs some inputs as compile-time constants (a Reshape's shape, a reduction's axes...). TF's "
           "backwards constant analysis marks every node whose value flows into such an input; a stateful one "
           "(e.g. a variable read) cannot be evaluated at compile time inside the cluster, so "
           f"FindCompilationCandidates isolates it ({_MFC}) and its value enters the cluster as an argument."),
    Reason("IDENTITY_DRIVING_CONSTS_IN_LOOP", "node", "loop pivot Identity that control-drives constants",
           "nothing: it is TF1 while-loop plumbing (control flow v2 has none)",
           "including it can create dependencies between while loop condition and body computations",
           "In a TF1 (control flow v1) while loop, the body's pivot Identity (fed by the loop's Switch) has "
           "control edges to the body's constants. Clustering it would make those constants wait for the "
           "cluster and tie the loop condition to the body's computations, with run-time overhead "
           f"(IsIdentityDrivingConstsInLoop, {_MFC})."),
    Reason("WHATIF_EXCLUDED", "node", "excluded by the what-if option --exclude-op",
           "not a TF decision: jitsim treated the op as uncompilable because you asked", "",
           "Not a TF decision: the what-if option `--exclude-op OP` (Python `exclude_ops=`) makes jitsim treat "
           "the op as uncompilable, to show how the clusters would change without it."),
    # -- after contraction ------------------------------------------------------------------
    Reason("CLUSTER_TOO_SMALL", "node", "its cluster is below --tf_xla_min_cluster_size",
           "effective size counts all nodes but Const/Identity; lower --tf_xla_min_cluster_size", "",
           "After contraction, MarkForCompilationPassImpl::CreateClusters only marks a cluster whose effective "
           "size (its nodes, not counting Const and Identity ops) is at least --tf_xla_min_cluster_size "
           "(default 4 with auto-jit), unless it has functional control flow or was explicitly requested: "
           f"launching a tiny cluster costs more than XLA saves ({_MFC}). TF logs nothing for it."),
    Reason("CLUSTER_NOT_COMPILED", "node", "its cluster's device policy says not to compile",
           "enable auto-clustering for the cluster's device (see POLICY_NOT_ENABLED)",
           "Not compiling cluster with device",
           "MarkForCompilationPassImpl::ShouldCompileCluster re-applies the autoclustering policy of the "
           f"device a whole cluster compiles for ({_MFC}). In TF 2.21 every member already passed the same "
           "policy as a candidate and clusters only span compatible devices, so the check does not refuse a "
           "cluster in practice."),
    Reason("FILL_DECLUSTERED", "node", "Fill with no consumer in its cluster (removed after clustering)",
           "nothing: the Fill is cheap to compute outside the cluster", "",
           "After contraction TF takes a Fill out of its cluster again when it has consumers and none of them "
           f"is in that cluster (MarkForCompilationPassImpl::DeclusterNodes, {_MFC}): its inputs are a shape and "
           "a scalar, its output a whole tensor, so compiling it would only make the cluster output a large "
           "tensor that TF's own kernel produces as cheaply. The rest of the cluster is kept."),
    # -- passes after mark-for-compilation ----------------------------------------------------
    Reason("INPUT_HOSTMEM", "node", "must-compile call: its compile-time-constant arguments are kept in host memory",
           "ForceXlaConstantsOnHost writes _input_hostmem (even when empty)", "Found constant arg indices:",
           "ForceXlaConstantsOnHostPass: for every call that must be compiled (`_XlaMustCompile`, e.g. a "
           "tf.function(jit_compile=True) called from another function), it finds the arguments the function "
           "needs as compile-time constants and lists them in `_input_hostmem`, so the runtime keeps them in "
           "host memory where the compiler can read them (force_xla_constants_on_host_pass.cc). The node keeps "
           "its cluster state; the code only records the rewrite."),
    Reason("SLICE_MADE_STATIC", "node", "clustered Slice with a run-time begin replaced by a static-shaped Slice",
           "the compiled shape now depends only on the constant size (IncreaseDynamismForAutoJit)",
           "Rewriting slice <name> to a \"static shaped\" Slice",
           "IncreaseDynamismForAutoJitPass (increase_dynamism_for_auto_jit_pass.cc): a clustered Slice whose "
           "`begin` is computed at run time but whose `size` is constant is replaced by "
           "`<name>/static_shaped_slice/...` nodes whose output shape depends only on the size, so new begin "
           "values do not force a recompilation."),
    Reason("DECLUSTERED_DEVICE_TO_HOST_COPY", "node",
           "copied out of its cluster to feed a host-memory consumer outside it",
           "PartiallyDecluster phase A: avoids a device-to-host copy (mostly int32 shape math)", "",
           f"PartiallyDeclusterPass, first phase ({_PDP}, reduce_device_to_host_copies): a clustered node whose "
           "output lives in host memory and feeds, in host memory, a node outside the cluster is copied out as "
           "`<name>/declustered` (shape consumers and resource ops excepted: the latter must not run twice); the "
           "consumer reads the copy instead of waiting for a device-to-host transfer of the cluster's output. "
           "The original stays for its consumers inside the cluster (and is removed if it has none). TF logs "
           "only the node."),
    Reason("DECLUSTERED_RECOMPILATION", "node",
           "must-be-constant node fed only from outside its cluster: computed outside",
           "PartiallyDecluster phase B: fewer distinct compile-time constants reach the compiler",
           "Declustering must-be-constant node",
           f"PartiallyDeclusterPass, second phase ({_PDP}, reduce_recompilation): a node whose value its "
           "cluster needs as a compile-time constant, and whose inputs all come from outside the cluster, is "
           "taken out. Inside, each distinct input value would compile a new executable; computed by TF, only "
           "its result matters, and a many-to-one function (x - y, a Shape) then causes fewer compilations. "
           "Nodes that must be compiled (no TF kernel, or an always-compile device) stay."),
    Reason("DECLUSTERED_CONST_CROSS_DEVICE", "node",
           "must-be-constant Const with an input from another device left its cluster",
           "nothing: put the control dependency on the same device to keep the constant compiled in",
           "Declustering Const with cross-device control input",
           f"In the second phase of PartiallyDeclusterPass ({_PDP}, reduce_recompilation) a must-be-constant "
           "Const fed only from outside normally stays in its cluster (nothing to gain); one with a control "
           "input from a node on another device is taken out, because, in TF's words, it \"may be part of the "
           "co-ordination of while loops between devices\"."),
    Reason("DECLUSTERED_ROOT_SHAPE_CONSUMER", "node",
           "Shape/Rank/Size with no input from its own cluster left the cluster",
           "PartiallyDecluster phase C: only metadata of an outside tensor is needed",
           "Declustering <name> because it is a root shape consumer",
           f"PartiallyDeclusterPass, third phase ({_PDP}, decluster_root_shape_consumers): a Shape, Rank or "
           "Size none of whose inputs comes from its own cluster only reads metadata of a tensor produced "
           "outside; computed outside, that tensor need not be passed into the cluster just for its shape."),
    # -- refused merges, in TF's check order -------------------------------------------------
    Reason("MERGE_DEADNESS", "merge", "the two clusters have different deadness predicates",
           "ops under different tf.cond branches (or control deps on them) cannot share a cluster",
           "the two nodes have mismatching deadness",
           "Deadness analysis (deadness_analysis.cc) gives each node the predicate under which its output is "
           "live: after a Switch (tf.cond, tf.switch_case, TF1 control flow) only one branch is. A cluster runs "
           "all or nothing, so MarkForCompilationPassImpl::TryToContractEdge refuses to merge clusters whose "
           "predicates differ. The evidence shows both predicates as TF prints them."),
    Reason("MERGE_DEVICES", "merge", "incompatible devices", "place the ops on one device",
           "the two nodes have incompatible devices",
           "A cluster is compiled for one device (PickDeviceForXla). TryToContractEdge refuses to merge clusters "
           "whose devices cannot be combined (two CPU devices, CPU:0 and CPU:1; a GPU with a different GPU), "
           f"or where a resource op is bound to another device than the merged cluster's ({_MFC})."),
    Reason("MERGE_SCOPE", "merge", "different XLA scopes", "put the ops in one jit_scope",
           "the two nodes have mismatching XLA scopes",
           "Nodes in different XLA scopes are compiled separately by request: `_XlaScope` (from "
           "tf.xla.experimental.jit_scope) when auto-jit is off, `_XlaInternalScope` (from ClusterScopingPass, "
           f"which separates pipeline stages) when it is on ({_MFC})."),
    Reason("MERGE_MAX_SIZE", "merge", "merged cluster would exceed --tf_xla_max_cluster_size",
           "raise --tf_xla_max_cluster_size", "the new cluster will be larger than the max cluster size",
           "--tf_xla_max_cluster_size caps the number of nodes in a cluster (all nodes, Const and Identity "
           f"included); TryToContractEdge refuses a merge that would exceed it ({_MFC})."),
    Reason("MERGE_CROSS_DEVICE", "merge", "merging would introduce a cross device dependency",
           "place the connected ops on one device",
           "the new cluster will introduce a cross device dependency",
           "TryToContractEdge also checks the clusters that feed the target: if one of them is on a device "
           "incompatible with either cluster, the merged cluster would depend on a cluster of another device "
           f"({_MFC}), and the merge is refused. The evidence `via` names that predecessor."),
    Reason("MERGE_RESOURCE", "merge", "merging would break resource variable ordering",
           "a write/modify of a resource precedes a read/modify of a resource (any variable) downstream",
           "the new cluster would break resource variable semantics",
           "A cluster reads all the resource variables it uses when it starts and writes them when it ends. "
           "The resource-operation safety analysis (resource_operation_safety_analysis.cc) lists pairs (A, B) "
           "where A writes or modifies a resource and B, later, reads or modifies one; such a pair may not end "
           "up in one cluster, or B would not see A's effect. The evidence names the writer and the reader."),
    Reason("MERGE_CYCLE", "merge", "merging would create a cycle", "another path leaves and re-enters the pair",
           "contracting the edge would create a cycle",
           "Clusters must keep the graph acyclic: if another path leaves the first cluster and re-enters the "
           "second through nodes that stay outside (an op without an XLA kernel, another cluster), the merged "
           "cluster would both feed and depend on them. GraphCycles::ContractEdge refuses; TF logs the path "
           "(\"via [...]\") and jitsim's evidence `path` lists the same nodes."),
]

REASONS: dict[str, Reason] = {r.code: r for r in _REASONS}


def reason(code: str) -> Reason:
    return REASONS[code]


# -- docs/reasons.md ------------------------------------------------------------------------------


def _examples_module(root):
    """fixtures/reasons/examples.py of the source checkout, or None (an installed package)."""
    import importlib.util
    import sys

    path = root / "examples.py"
    if not path.exists():
        return None
    name = "jitsim_reason_examples"
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _example_section(store, ex) -> list[str]:
    """Markdown for one example: the case, its program (or TF's reasoning) and jitsim's answer."""
    case = store.cases[ex.case]
    rel = "../fixtures/reasons/"
    if case.kind == "unreachable":
        return [f"**Never produced by TF 2.21.** {case.why}", "",
                f"Checked by `tests/test_reason_examples.py::{case.test}`.", ""]
    out = []
    c = store.clustering(ex)
    if case.kind == "tf":
        g = store.graph(ex)
        graph_file = g.input.name
        out += [f"**Example** (real TF 2.21, case `{case.name}`, `TF_XLA_FLAGS=\"{case.flags}\"`): "
                f"[`programs/{case.program}`]({rel}programs/{case.program})", "",
                "```python", case.program_path(store.root).read_text().rstrip(), "```", ""]
    else:
        graph_file = f"fixtures/reasons/{case.hand}"
        out += [f"**Example** (hand-derived: TF on a CPU build does not make this decision; "
                f"graph [`{case.hand}`]({rel}{case.hand})). {case.why}", ""]
    cmd = f"jitsim explain {graph_file} {ex.node}" + (f" {ex.other}" if ex.other else "")
    cmd += f" --no-default-flags --tf-xla-flags \"{case.flags}\"" + "".join(f" --exclude-op {op}" for op in ex.exclude_ops)
    if case.hand:
        cmd += " --input-stage graphdef"
    if ex.other:
        text = str(c.explain(ex.node, ex.other))
    elif ex.node in c.nodes:
        text = str(c.explain(ex.node))
    else:  # removed by a later pass: only the pass's own record knows it
        stage, d = next((name, res.decisions[ex.node]) for name, res in c.pipeline.stage_results.items()
                        if ex.node in (getattr(res, "decisions", None) or {}))
        cmd = (f"jitsim.cluster(\"{graph_file}\", flags=\"{case.flags}\")"
               f".pipeline.stage_results[\"{stage}\"].decisions[\"{ex.node}\"]")
        text = (f"{ex.node}: {d.code} ({REASONS[d.code].title})\n  TF says:   {d.detail}\n"
                + "\n".join(f"  evidence:  {k}: {v}" for k, v in d.evidence.items()))
        out += [f"`{ex.node}` no longer exists after the rewrite, and `jitsim explain` only names nodes of the "
                "final graph; the pass's own record says:", ""]
    if ex.field == "inner_code":
        out += [f"The decision is about a node inside the called function, so the call's explanation "
                f"carries it as `inner_code: {ex.code}`:", ""]
    elif ex.field == "history":
        out += [f"`{ex.code}` annotates the node without changing its cluster state: it appears in the "
                "node's `history`, while its reason stays mark-for-compilation's:", ""]
    out += [f"`{cmd}`:", "", "```", text, "```", ""]
    if ex.code == "GRAPH_NO_CANDIDATES":
        gd = c.graph_decision
        out += [f"The graph-level decision (`jitsim cluster {graph_file} --format json`, `graph_decision`): "
                f"`{gd.code}` ({gd.detail}).", ""]
    return out


def catalogue_markdown() -> str:
    """docs/reasons.md, generated from the catalogue and the examples in fixtures/reasons/
    (``python -m jitsim.explain.reasons``)."""
    from jitsim.crosscheck.corpus import default_root

    lines = [
        "# Reason codes",
        "",
        "Every decision jitsim records carries one of these stable codes (`--format json`: `nodes.<name>.code`",
        "and `refused_merges[].code`). Generated from `jitsim/explain/reasons.py` and the examples in",
        "[`fixtures/reasons/`](../fixtures/reasons/) by `python -m jitsim.explain.reasons > docs/reasons.md`;",
        "a test keeps the two in sync.",
        "",
        "Each code has a minimal example: a small TensorFlow program whose clustering, run under real",
        "TF 2.21 (`fixtures/reasons/generate.py` stores TF's dumps and log), makes that decision, and",
        "what `jitsim explain` says about it on TF's own input graph. `tests/test_reason_examples.py`",
        "checks each one: TF's dumps show the decision, jitsim reports the code with the evidence shown,",
        "and TF's log has the words quoted under *TF's log words*. A few decisions TF on a CPU build",
        "cannot make are shown on hand-derived graphs, with TF's reasoning; two are never produced.",
        "",
    ]
    root = default_root() / "reasons"
    X = _examples_module(root)
    store = X.Examples(root) if X is not None else None
    try:
        firsts = store.by_code() if store is not None else {}
        kinds = {code: store.cases[exs[0].case].kind for code, exs in firsts.items()} if store else {}
        label = {"tf": "real TF", "hand": "hand-derived", "unreachable": "never produced"}
        groups = (("node", "Node decisions (candidate filters, cluster outcome, later passes)"),
                  ("merge", "Refused merges (in TF's check order)"))
        lines += ["## Summary", ""]
        for kind, title in groups:
            lines += [f"**{title}**", "", "| code | meaning | example |", "|---|---|---|"]
            for r in _REASONS:
                if r.kind == kind:
                    ex = firsts.get(r.code, [None])[0]
                    where = f"`{ex.case}` ({label[kinds[r.code]]})" if ex is not None else ""
                    lines.append(f"| [`{r.code}`](#{r.code.lower()}) | {r.title} | {where} |")
            lines.append("")
        for kind, title in groups:
            lines += [f"## {title}", ""]
            for r in _REASONS:
                if r.kind != kind:
                    continue
                lines += [f"<a id=\"{r.code.lower()}\"></a>", "", f"### `{r.code}`: {r.title}", ""]
                if r.explanation:
                    lines += [r.explanation, ""]
                facts = ([f"- **What you can change:** {r.hint}"] if r.hint else []) + (
                    [f"- **TF's log words:** `{r.tf_log}`"] if r.tf_log else [])
                lines += facts + ([""] if facts else [])
                if r.code in firsts:
                    lines += _example_section(store, firsts[r.code][0])
    finally:
        if store is not None:
            store.close()
    return "\n".join(lines).rstrip("\n") + "\n"


if __name__ == "__main__":
    print(catalogue_markdown(), end="")
