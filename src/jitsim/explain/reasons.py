"""Stable reason codes for every clustering decision jitsim records.

Each code says why a node is (or is not) in a cluster, or why two clusters were not
merged. Codes are part of jitsim's output contract (``--format json``): never rename one;
add new ones. ``tf_log`` quotes the words TF itself logs for that decision, when it logs
one, so users can match jitsim's answer with TF's VLOG output.
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


_REASONS = [
    # -- clustered -----------------------------------------------------------------------
    Reason("CLUSTERED", "node", "in an XLA cluster"),
    # -- graph-level: the pass did nothing ---------------------------------------------------
    Reason("GRAPH_ALREADY_CLUSTERED", "node", "graph skipped: a node carries _XlaAlreadyClustered",
           "this graph is a cluster body or its fallback; TF never re-clusters it"),
    Reason("GRAPH_NO_CANDIDATES", "node", "graph has no compilation candidate",
           "no node passed the candidate filters", "No compilable candidates"),
    Reason("GRAPH_CYCLE_GRAPH_FAILED", "node", "loop frames form a cycle; graph not clustered",
           "", "Could not form cycle detection graph"),
    # -- candidate filters, in TF's order ---------------------------------------------------
    Reason("FUEL_EXHAUSTED", "node", "clustering fuel exhausted",
           "raise --tf_xla_clustering_fuel", "Hit fuel limit; not marking any remaining ops as clusterable."),
    Reason("NO_DEVICE", "node", "node has no assigned device",
           "pass --device cpu|gpu for a GraphDef exported from Python"),
    Reason("XLA_COMPILE_FALSE", "node", "_XlaCompile=false on the node or its function",
           "remove the attribute / jit scope that forbids compilation",
           "disallowed by _XlaCompile attribute"),
    Reason("NO_JIT_DEVICE", "node", "the node's device type has no XLA JIT device",
           "", "could not find JIT device for"),
    Reason("POLICY_NOT_ENABLED", "node", "auto-clustering is not enabled for this device",
           "CPU needs --tf_xla_cpu_global_jit (at process start) and a jit level; GPU needs a jit level "
           "(--tf_xla_auto_jit=2 or tf.config.optimizer.set_jit)"),
    Reason("SOURCE_OR_SINK", "node", "source or sink node", "", "source or sink node"),
    Reason("TOP_LEVEL_ARG_RETVAL", "node", "function argument or return value (never clustered)",
           "", "top level _Arg or _Retval"),
    Reason("SCOPED_ALLOCATOR", "node", "has _scoped_allocator or _forward_from", "",
           "_scoped_allocator or _forward_from attribute"),
    Reason("UNSUPPORTED_OP", "node", "no XLA kernel for this op with these types",
           "the op (or this dtype) is not implemented by XLA's tf2xla bridge", "unsupported op"),
    Reason("STRING_CONST", "node", "string constant", "", "Const op with type DT_STRING is not supported by XLA."),
    Reason("IDENTITY_UNSAFE_CAST", "node", "Identity forwarding a reference input", "", "Identity with unsafe cast."),
    Reason("UNSUPPORTED_FUNCTION", "node", "called function contains a node XLA cannot compile",
           "see the evidence for the offending node inside the function", "unsupported function"),
    Reason("UNSUPPORTED_WHILE", "node", "While whose cond or body is not compilable", "", "unsupported while"),
    Reason("UNSUPPORTED_IF", "node", "If whose branch is not compilable", "", "unsupported if"),
    Reason("UNSUPPORTED_CASE", "node", "Case whose branch is not compilable", "", "unsupported case"),
    Reason("STATEFUL_RNG", "node", "stateful random op",
           "use stateless RNG ops or tf.random.Generator (resource-based RNG is clusterable)", "stateful random op"),
    Reason("CONTROL_TRIGGER", "node", "ControlTrigger", "", "not allowed control trigger"),
    Reason("ASSERT_OR_CHECKNUMERICS", "node", "Assert or CheckNumerics",
           "asserts and check_numerics are never auto-clustered", "Assert or CheckNumerics"),
    Reason("COLLECTIVE_OP", "node", "CollectiveReduceV2", "", "Collective op"),
    Reason("WHERE_EXCLUDED", "node", "Where excluded by --tf_xla_cluster_exclude_ops=Where", "", "Where op"),
    Reason("UNIQUE_OP", "node", "Unique op (dynamic output shape)", "", "Unique op"),
    Reason("VARIANT_OP", "node", "produces or consumes DT_VARIANT (TensorList, dataset...)", "",
           "DT_VARIANT producer/consumer"),
    Reason("STACK_OP", "node", "Stack op", "", "Stack op"),
    Reason("TENSOR_ARRAY_OP", "node", "TensorArray op", "", "TensorArray op"),
    Reason("RESOURCE_OP_IN_FUNCTION", "node", "resource input inside a called function", "",
           "resource variable op in called function"),
    Reason("INACCURATE_OP", "node", "op with numerical accuracy issues", "", "operation with numerical accuracy issues"),
    Reason("SLOW_OP", "node", "op that is slow under XLA", "", "slow operation"),
    Reason("FUNCTION_DEPTH_LIMIT", "node", "function nesting deeper than 50", "", "function depth limit exceeded"),
    Reason("FUNCTION_NOT_FOUND", "node", "called function cannot be instantiated", "", "could not instantiate call"),
    Reason("NOT_IN_OPS_TO_CLUSTER", "node", "op not in --tf_xla_ops_to_cluster", "add the op or its category",
           "as it is not listed in --tf_xla_ops_to_cluster."),
    Reason("MUST_BE_CONSTANT_STATEFUL", "node", "stateful op whose value must be a compile-time constant",
           "its value feeds a shape-like input (e.g. a Reshape shape)", "must-be-constant stateful op"),
    Reason("IDENTITY_DRIVING_CONSTS_IN_LOOP", "node", "loop pivot Identity that control-drives constants", "",
           "including it can create dependencies between while loop condition and body computations"),
    Reason("WHATIF_EXCLUDED", "node", "excluded by the what-if option --exclude-op",
           "not a TF decision: jitsim treated the op as uncompilable because you asked"),
    # -- after contraction ------------------------------------------------------------------
    Reason("CLUSTER_TOO_SMALL", "node", "its cluster is below --tf_xla_min_cluster_size",
           "effective size counts all nodes but Const/Identity; lower --tf_xla_min_cluster_size"),
    Reason("CLUSTER_NOT_COMPILED", "node", "its cluster's device policy says not to compile", ""),
    Reason("FILL_DECLUSTERED", "node", "Fill with no consumer in its cluster (removed after clustering)", ""),
    # -- passes after mark-for-compilation ----------------------------------------------------
    Reason("INPUT_HOSTMEM", "node", "must-compile call: its compile-time-constant arguments are kept in host memory",
           "ForceXlaConstantsOnHost writes _input_hostmem (even when empty)"),
    Reason("SLICE_MADE_STATIC", "node", "clustered Slice with a run-time begin replaced by a static-shaped Slice",
           "the compiled shape now depends only on the constant size (IncreaseDynamismForAutoJit)"),
    Reason("DECLUSTERED_DEVICE_TO_HOST_COPY", "node",
           "copied out of its cluster to feed a host-memory consumer outside it",
           "PartiallyDecluster phase A: avoids a device-to-host copy (mostly int32 shape math)"),
    Reason("DECLUSTERED_RECOMPILATION", "node",
           "must-be-constant node fed only from outside its cluster: computed outside",
           "PartiallyDecluster phase B: fewer distinct compile-time constants reach the compiler"),
    Reason("DECLUSTERED_CONST_CROSS_DEVICE", "node",
           "must-be-constant Const with an input from another device left its cluster", ""),
    Reason("DECLUSTERED_ROOT_SHAPE_CONSUMER", "node",
           "Shape/Rank/Size with no input from its own cluster left the cluster",
           "PartiallyDecluster phase C: only metadata of an outside tensor is needed"),
    # -- refused merges, in TF's check order -------------------------------------------------
    Reason("MERGE_DEADNESS", "merge", "the two clusters have different deadness predicates",
           "ops under different tf.cond branches (or control deps on them) cannot share a cluster",
           "the two nodes have mismatching deadness"),
    Reason("MERGE_DEVICES", "merge", "incompatible devices", "", "the two nodes have incompatible devices"),
    Reason("MERGE_SCOPE", "merge", "different XLA scopes", "", "the two nodes have mismatching XLA scopes"),
    Reason("MERGE_MAX_SIZE", "merge", "merged cluster would exceed --tf_xla_max_cluster_size", "",
           "the new cluster will be larger than the max cluster size"),
    Reason("MERGE_CROSS_DEVICE", "merge", "merging would introduce a cross-device dependency", "",
           "the new cluster will introduce a cross device dependency"),
    Reason("MERGE_RESOURCE", "merge", "merging would break resource variable ordering",
           "a write/modify of a resource precedes a read/modify of a resource (any variable) downstream",
           "the new cluster would break resource variable semantics"),
    Reason("MERGE_CYCLE", "merge", "merging would create a cycle", "another path leaves and re-enters the pair",
           "contracting the edge would create a cycle"),
]

REASONS: dict[str, Reason] = {r.code: r for r in _REASONS}


def reason(code: str) -> Reason:
    return REASONS[code]


def catalogue_markdown() -> str:
    """docs/reasons.md, generated from the catalogue (``python -m jitsim.explain.reasons``)."""
    lines = [
        "# Reason codes",
        "",
        "Every decision jitsim records carries one of these stable codes (`--format json`: `nodes.<name>.code`",
        "and `refused_merges[].code`). Generated from `jitsim/explain/reasons.py` by",
        "`python -m jitsim.explain.reasons > docs/reasons.md`; a test keeps the two in sync.",
        "",
    ]
    for kind, title in (("node", "Node decisions (candidate filters, cluster outcome)"),
                        ("merge", "Refused merges (in TF's check order)")):
        lines += [f"## {title}", "", "| code | meaning | what you can change | TF's log words |", "|---|---|---|---|"]
        for r in _REASONS:
            if r.kind == kind:
                lines.append(f"| <a id=\"{r.code.lower()}\"></a>`{r.code}` | {r.title} | {r.hint} | "
                             f"{('`' + r.tf_log + '`') if r.tf_log else ''} |")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    print(catalogue_markdown(), end="")
