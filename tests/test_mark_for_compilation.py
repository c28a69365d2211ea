"""Behaviour tests for the simulated ``MarkForCompilationPass`` (and the clone-constants pass
that runs before it), in the style of TensorFlow's ``mark_for_compilation_pass_test.cc``.

Each test builds a tiny graph by hand, runs the simulated pipeline on it as if it were TF's
``before_clone_constants_for_better_clustering`` dump (so node ids are the list order), and
checks the exact clusters *and* the recorded reason codes. Docstrings derive the expected
result from TF's rules; ``tf-passes`` refers to ``docs/tf-passes.md``.

Conventions of the graphs below (what TF's pass sees for a ``tf.function`` body):

* every node is placed on the local CPU; ``--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit``
  (:data:`AUTO`) is the default configuration;
* function inputs/outputs are ``_Arg``/``_Retval`` (never clustered at top level);
* nodes carry the dtype attrs XLA's kernel lookup checks (``T``, ``dtype``...).
"""

from __future__ import annotations

import pytest

from graphs import AUTO, BOOL, F32, I32, I64, STR, Shapes, Type, Types, arg, const, graph, node, op, ret, var_handle
from jitsim.graph import Graph
from jitsim.registry import protos
from jitsim.analyses.fingerprint import hash64
from jitsim.flags import FlagError
from jitsim.options import SessionConfig, options_for
from jitsim.passes.mark_for_compilation import ProcessState
from jitsim.records import NodeDecision
from jitsim.passes.pipeline import BEFORE_CLONE, cluster_graph

# -- running the pass ------------------------------------------------------------------------


def cluster(g: Graph, flags: str = "", *, base: str = AUTO, state=None, **kw):
    """Run clone-constants + cluster-scoping + mark-for-compilation on ``g`` as TF would
    (``kw``: other fields of the run's Options; ``state``: the TF process)."""
    return cluster_graph(g, options_for(f"{base} {flags}", input_stage=BEFORE_CLONE, **kw), state)


def codes(res, *names) -> dict:
    return {n: res.decisions[n].code for n in names}


def refusals(res) -> list[tuple]:
    return [(r.phase, r.from_node, r.to_node, r.code) for r in res.mark.refusals]


def chain2():
    """_Arg -> Neg -> Exp -> _Retval."""
    return graph(arg("x"), op("a", "Neg", "x"), op("b", "Exp", "a"), ret("y", "b"))


def chain4():
    """_Arg -> Neg -> Relu -> Exp -> Abs -> _Retval (four float ops)."""
    return graph(arg("x"), op("a", "Neg", "x"), op("b", "Relu", "a"), op("c", "Exp", "b"), op("d", "Abs", "c"),
                 ret("y", "d"))


# -- 1. the basic case ----------------------------------------------------------------------


def test_chain_of_four_ops_is_one_cluster():
    """Four compilable float ops form one cluster: every edge between them contracts (tf-passes
    §7.5 phase 1) and the effective size 4 reaches the default minimum of 4 (tf-passes §2.1). The
    function's ``_Arg``/``_Retval`` fail ``IsCompilableNode`` rule 3 (tf-passes §7.3.1): "top level
    _Arg or _Retval". The only kept cluster gets the first number of a fresh process."""
    res = cluster(chain4())
    assert res.clusters == {"cluster_0": ["a", "b", "c", "d"]}
    assert res.labels() == {"x": None, "a": "cluster_0", "b": "cluster_0", "c": "cluster_0", "d": "cluster_0",
                            "y": None}
    assert codes(res, "x", "y") == {"x": "TOP_LEVEL_ARG_RETVAL", "y": "TOP_LEVEL_ARG_RETVAL"}
    assert res.decisions["x"].detail == "top level _Arg or _Retval"
    for n in "abcd":
        d = res.decisions[n]
        assert (d.code, d.detail) == ("CLUSTERED", "cluster_0")
        assert d.evidence == {"cluster": "cluster_0", "cluster_size": 4, "effective_size": 4}
    assert res.mark.refusals == []
    assert res.mark.graph_decision is None
    # the pass writes both attributes on every clustered node (tf-passes §7.6)
    assert res.graph.nodes[res.graph.by_name["a"]].attr["_XlaAlreadyClustered"].b is True


# -- 2./3. cluster size limits -----------------------------------------------------------------


def _three_real_ops():
    """_Arg -> Mul(., c1) -> Identity -> AddV2(., c2) -> Relu -> _Retval: 3 real ops, 2 Consts
    and an Identity, all in one connected chain (each Const has one consumer: no cloning)."""
    return graph(arg("x"), const("c1"), op("mul", "Mul", "x", "c1"), op("id", "Identity", "mul"), const("c2"),
                 op("add", "AddV2", "id", "c2"), op("relu", "Relu", "add"), ret("y", "relu"))


def test_min_cluster_size_counts_effective_size_only():
    """Const and Identity count 0 towards the effective size (tf-passes §7.4, trap 12; V3): the
    six-node cluster {c1, mul, id, c2, add, relu} has effective size 3 < 4, so TF builds it
    but does not mark it; every member gets CLUSTER_TOO_SMALL with the sizes as evidence."""
    res = cluster(_three_real_ops())
    assert res.clusters == {}
    members = ["c1", "mul", "id", "c2", "add", "relu"]
    for n in members:
        d = res.decisions[n]
        assert d.code == "CLUSTER_TOO_SMALL"
        assert d.evidence["effective_size"] == 3
        assert d.evidence["cluster_size"] == 6
        assert d.evidence["min_cluster_size"] == 4
        assert d.evidence["would_be_members"] == members
    assert "effective size 3" in res.decisions["mul"].detail


def test_min_cluster_size_flag_lowers_the_bar():
    """With ``--tf_xla_min_cluster_size=3`` the same cluster (effective size 3) is kept,
    Consts and Identity included."""
    res = cluster(_three_real_ops(), "--tf_xla_min_cluster_size=3")
    assert res.clusters == {"cluster_0": ["c1", "mul", "id", "c2", "add", "relu"]}
    assert res.decisions["c1"].evidence == {"cluster": "cluster_0", "cluster_size": 6, "effective_size": 3}


def test_max_cluster_size_counts_consts():
    """``--tf_xla_max_cluster_size`` compares the sum of *all* nodes, Consts included (tf-passes §7.5
    rule 4, V14). Contraction walks consumers before producers (post order): c2 joins add,
    then mul joins them (size 3); adding c1 would make 4 > 3 -> MERGE_MAX_SIZE in phase 1 and
    again in phase 2. c1 alone has effective size 0 < 1, so it stays unclustered."""
    g = graph(arg("x"), const("c1"), op("mul", "Mul", "x", "c1"), const("c2"), op("add", "AddV2", "mul", "c2"),
              ret("y", "add"))
    res = cluster(g, "--tf_xla_max_cluster_size=3 --tf_xla_min_cluster_size=1")
    assert res.clusters == {"cluster_0": ["mul", "c2", "add"]}
    assert refusals(res) == [(1, "c1", "mul", "MERGE_MAX_SIZE"), (2, "c1", "mul", "MERGE_MAX_SIZE")]
    r = res.mark.refusals[0]
    assert (r.from_size, r.to_size) == (1, 3)
    assert r.evidence == {"size": 4, "max_cluster_size": 3}
    assert r.detail == "the new cluster will be larger than the max cluster size"
    assert res.decisions["c1"].code == "CLUSTER_TOO_SMALL"
    assert res.decisions["c1"].evidence["effective_size"] == 0


# -- 4. ops XLA cannot compile -------------------------------------------------------------------


def _split_by_strings():
    """Two float pairs joined through AsString -> StringToNumber (no XLA kernels)."""
    return graph(arg("x"), op("a", "Neg", "x"), op("b", "Relu", "a"), op("s", "AsString", "b"),
                 node("n", "StringToNumber", ["s"], out_type=Type(F32)), op("c", "Exp", "n"), op("d", "Abs", "c"),
                 ret("y", "d"))


def test_op_without_xla_kernel_splits_a_chain():
    """AsString and StringToNumber have no XLA_CPU_JIT kernel (tf-passes §3.5, V23), so they fail
    ``IsCompilableNode`` rule 5 ("unsupported op") and cut the chain into two clusters,
    numbered in node-id order of their first members (tf-passes §7.6)."""
    res = cluster(_split_by_strings(), "--tf_xla_min_cluster_size=2")
    assert res.clusters == {"cluster_0": ["a", "b"], "cluster_1": ["c", "d"]}
    assert codes(res, "s", "n") == {"s": "UNSUPPORTED_OP", "n": "UNSUPPORTED_OP"}
    assert "AsString" in res.decisions["s"].detail
    assert res.decisions["s"].evidence == {"jit_device": "XLA_CPU_JIT", "op": "AsString", "kernel": False}


def test_unsupported_op_detail_is_tfs_text():
    """TF 2.21 logs (compilability_check_util.cc:62, observed with TF_CPP_VMODULE):
    ``Found uncompilable node s (op AsString): No registered 'AsString' OpKernel for
    XLA_CPU_JIT devices compatible with node {{node s}}`` (tf-passes §7.3.1 rule 5, V16). jitsim's
    detail is ``no XLA_CPU_JIT kernel for op AsString``."""
    res = cluster(_split_by_strings(), "--tf_xla_min_cluster_size=2")
    assert res.decisions["s"].detail == (
        "No registered 'AsString' OpKernel for XLA_CPU_JIT devices compatible with node {{node s}}")


def test_identity_on_string_has_no_kernel():
    """XLA's Identity kernel is registered for numeric types only: the kernel lookup checks
    the ``T`` type constraint (tf-passes trap 16, V16), so an Identity of a DT_STRING is rejected
    while the same Identity on DT_FLOAT would be a candidate."""
    g = graph(arg("x", dtype=STR), op("i", "Identity", "x", dtype=STR), ret("y", "i", dtype=STR))
    res = cluster(g, "--tf_xla_min_cluster_size=1")
    assert res.decisions["i"].code == "UNSUPPORTED_OP"
    assert "DT_STRING" in res.decisions["i"].detail
    ev = res.decisions["i"].evidence
    assert (ev["op"], ev["attr"], ev["type"]) == ("Identity", "T", "DT_STRING")
    assert "DT_FLOAT" in ev["allowed"] and "DT_STRING" not in ev["allowed"]
    assert res.mark.graph_decision.code == "GRAPH_NO_CANDIDATES"
    assert res.clusters == {}

    g = graph(arg("x"), op("i", "Identity", "x"), ret("y", "i"))
    assert cluster(g, "--tf_xla_min_cluster_size=0").decisions["i"].code == "CLUSTERED"


# -- 5. cycles ---------------------------------------------------------------------------------


def _diamond():
    """A -> X -> B and A -> B, X uncompilable (BesselJ0 has no XLA kernel)."""
    return graph(arg("x"), op("A", "Neg", "x"), op("X", "BesselJ0", "A"), op("B", "AddV2", "A", "X"), ret("y", "B"))


def test_merging_across_an_uncompilable_path_would_create_a_cycle():
    """Contracting A -> B would make the cluster both feed and consume X: GraphCycles refuses
    the contraction (tf-passes §7.5 rule 7), in phase 1 and again in phase 2. A and B end up in
    separate single-node clusters (like upstream's UncompilableCycles test)."""
    res = cluster(_diamond(), "--tf_xla_min_cluster_size=1")
    assert res.clusters == {"cluster_0": ["A"], "cluster_1": ["B"]}
    assert res.decisions["X"].code == "UNSUPPORTED_OP"
    assert refusals(res) == [(1, "A", "B", "MERGE_CYCLE"), (2, "A", "B", "MERGE_CYCLE")]
    assert res.mark.refusals[0].detail == "contracting the edge would create a cycle"
    assert res.mark.refusals[0].evidence == {}  # no path search unless asked for


def test_explain_cycles_names_the_alternative_path():
    """With ``explain_cycles`` jitsim runs TF's debug path search
    (``FindAlternatePathForDebugging``, tf-passes §7.5): the other path A ~> B goes through X."""
    res = cluster(_diamond(), "--tf_xla_min_cluster_size=1", explain_cycles=True)
    assert [r.evidence for r in res.mark.refusals] == [{"path": ["X"]}, {"path": ["X"]}]


# -- 6./19. deadness ---------------------------------------------------------------------------


def _cond():
    """A lowered tf.cond: ``a`` before the cond feeds both branches; ``f`` runs on Switch
    output 0 (pred false), ``t`` on output 1 (pred true); ``r`` after the Merge."""
    return graph(arg("x"), arg("pred", 1, BOOL), op("a", "Neg", "x"), op("sw", "Switch", "x", "pred"),
                 op("f", "Mul", "sw", "a"), op("t", "Sub", "sw:1", "a"), op("m", "Merge", "f", "t", N=2),
                 op("r", "Relu", "m"), ret("y", "r"))


def test_deadness_keeps_cond_branches_apart():
    """Deadness predicates (tf-passes §8): ``a`` and ``r`` (after the Merge) are ``#true``, ``f`` is
    ``~*pred:0`` and ``t`` is ``*pred:0`` (tf-passes V12). Clusters with different predicates never
    merge (tf-passes §7.5 rule 1), so the edges a -> f and a -> t are refused with TF's message
    naming both predicates; Switch/Merge have no XLA kernel. With min size 1: four clusters
    (a and r are not adjacent: their only path runs through the Merge)."""
    res = cluster(_cond(), "--tf_xla_min_cluster_size=1")
    assert res.clusters == {"cluster_0": ["a"], "cluster_1": ["f"], "cluster_2": ["t"], "cluster_3": ["r"]}
    assert codes(res, "sw", "m") == {"sw": "UNSUPPORTED_OP", "m": "UNSUPPORTED_OP"}
    assert refusals(res) == [(1, "a", "f", "MERGE_DEADNESS"), (1, "a", "t", "MERGE_DEADNESS"),
                             (2, "a", "f", "MERGE_DEADNESS"), (2, "a", "t", "MERGE_DEADNESS")]
    to_f, to_t = res.mark.refusals[:2]
    assert to_f.detail == "the two nodes have mismatching deadness: #true and ~*pred:0"
    assert to_f.evidence == {"from_predicate": "#true", "to_predicate": "~*pred:0"}
    assert to_t.detail == "the two nodes have mismatching deadness: #true and *pred:0"
    assert to_t.evidence == {"from_predicate": "#true", "to_predicate": "*pred:0"}


def test_disabling_deadness_checks_merges_the_branches():
    """``--tf_xla_disable_deadness_safety_checks_for_debugging`` makes every predicate
    "absent" (tf-passes §2.1, trap 26): a, f and t merge; r stays apart because the only path
    from them to r goes through the uncompilable Merge (not adjacent, no edge to contract)."""
    res = cluster(_cond(), "--tf_xla_min_cluster_size=1 --tf_xla_disable_deadness_safety_checks_for_debugging")
    assert res.clusters == {"cluster_0": ["a", "f", "t"], "cluster_1": ["r"]}
    assert res.mark.refusals == []


# -- 7. resource variables -------------------------------------------------------------------


def test_write_then_read_of_a_resource_is_not_merged():
    """A compiled cluster reads its resources before running and writes them after, so a
    Write (AssignVariableOp) ordered before a Read (ReadVariableOp, via the control edge) may
    not share a cluster (tf-passes §9, §7.5 rule 6, V11). VarHandleOp has no XLA kernel. The read
    still clusters with its consumer."""
    g = graph(var_handle("v"), arg("x"), node("w", "AssignVariableOp", ["v", "x"], dtype=Type(F32)),
              node("rd", "ReadVariableOp", ["v", "^w"], dtype=Type(F32)), op("r", "Relu", "rd"), ret("y", "r"))
    res = cluster(g, "--tf_xla_min_cluster_size=1")
    assert res.clusters == {"cluster_0": ["w"], "cluster_1": ["rd", "r"]}
    assert res.decisions["v"].code == "UNSUPPORTED_OP"
    assert refusals(res) == [(1, "w", "rd", "MERGE_RESOURCE"), (2, "w", "rd", "MERGE_RESOURCE")]
    r = res.mark.refusals[0]
    assert r.detail == "the new cluster would break resource variable semantics"
    assert r.evidence == {"writer": "w", "writer_op": "AssignVariableOp", "reader": "rd",
                          "reader_op": "ReadVariableOp"}


def test_read_then_write_of_a_resource_is_merged():
    """The opposite order is safe (Read -> anything, anything -> Write; tf-passes trap 25): the
    read, the computation and the write form one cluster."""
    g = graph(var_handle("v"), node("rd", "ReadVariableOp", ["v"], dtype=Type(F32)), op("n", "Neg", "rd"),
              node("w", "AssignVariableOp", ["v", "n"], dtype=Type(F32)))
    res = cluster(g, "--tf_xla_min_cluster_size=1")
    assert res.clusters == {"cluster_0": ["rd", "n", "w"]}
    assert res.mark.refusals == []


# -- 8. control edges --------------------------------------------------------------------------


def test_control_only_edge_is_contracted():
    """The cycle-detection graph has every edge, data and control (tf-passes §3.7, trap 19): two
    ops linked only by ``^a`` are merged into one cluster."""
    g = graph(arg("x"), arg("z", 1), op("a", "Neg", "x"), op("b", "Exp", "z", "^a"), ret("ya", "a"),
              ret("yb", "b", 1))
    res = cluster(g, "--tf_xla_min_cluster_size=2")
    assert res.clusters == {"cluster_0": ["a", "b"]}
    assert res.decisions["a"].evidence == {"cluster": "cluster_0", "cluster_size": 2, "effective_size": 2}


# -- 9./10./11. policy and attributes ------------------------------------------------------------


def test_cpu_needs_cpu_global_jit():
    """On CPU the registration policy is "if explicitly requested" unless
    ``--tf_xla_cpu_global_jit`` was set at process start, so ``--tf_xla_auto_jit=2`` alone
    yields no candidate (tf-passes §2.3 table, trap 1, V4): ShouldCompile fails (filter 4, tf-passes §7.3)
    for every node -- including the _Arg/_Retval, which never reach the compilability check."""
    res = cluster(chain4(), base="--tf_xla_auto_jit=2")
    assert res.clusters == {}
    assert set(d.code for d in res.decisions.values()) == {"POLICY_NOT_ENABLED"}
    assert len(res.decisions) == 6
    assert res.decisions["a"].evidence == {"device_type": "CPU", "policy": "if_explicitly_requested",
                                           "jit_level": 2}
    assert res.mark.graph_decision.code == "GRAPH_NO_CANDIDATES"


def test_cpu_policy_is_frozen_at_first_use():
    """The CPU policy is fixed when the XLA device registry is first queried (tf-passes §2.1/§2.3,
    V4): a later graph in the same process gets nothing even with the flag now present."""
    state = ProcessState()
    cluster(chain4(), base="--tf_xla_auto_jit=2", state=state)
    res = cluster(chain4(), state=state)
    assert res.clusters == {}
    assert res.decisions["a"].code == "POLICY_NOT_ENABLED"


def test_session_cpu_global_jit_clusters_with_jit_off():
    """TF1 session ``cpu_global_jit=True`` clusters CPU ops at jit level OFF, but only while
    the *flag* is absent: the flag switches the policy to one that needs a jit level
    (tf-passes §2.3 table, trap 2, V5)."""
    session = SessionConfig(cpu_global_jit=True)
    assert cluster(chain4(), base="", session=session).clusters == {"cluster_0": ["a", "b", "c", "d"]}
    res = cluster(chain4(), base="--tf_xla_cpu_global_jit", session=session)
    assert res.clusters == {}
    assert res.decisions["a"].evidence["policy"] == "if_enabled_globally"


def test_xla_compile_true_is_clustered_with_jit_off_and_below_min_size():
    """``_XlaCompile=true`` (a jit scope) makes the node explicit: ShouldCompile holds with
    jit OFF and no CPU flag (tf-passes §2.3), and an explicit cluster ignores the minimum size
    (tf-passes §7.6, trap 3, V17). Its neighbour without the attr is not a candidate."""
    g = graph(arg("x"), op("a", "Neg", "x", _XlaCompile=True), op("b", "Relu", "a"), ret("y", "b"))
    res = cluster(g, base="")
    assert res.clusters == {"cluster_0": ["a"]}
    assert res.decisions["a"].evidence == {"cluster": "cluster_0", "cluster_size": 1, "effective_size": 1}
    assert res.decisions["b"].code == "POLICY_NOT_ENABLED"
    assert res.decisions["b"].evidence["jit_level"] == -1
    assert res.clones == []  # clone-constants only runs when the jit level is not OFF (tf-passes §5)


def test_xla_compile_false_rejects_the_node():
    """``_XlaCompile=false`` rejects the node before any other check (tf-passes §7.3 filter 2)."""
    g = graph(arg("x"), op("a", "Neg", "x", _XlaCompile=False), op("b", "Relu", "a"), ret("y", "b"))
    res = cluster(g, "--tf_xla_min_cluster_size=1")
    assert res.decisions["a"] == NodeDecision("XLA_COMPILE_FALSE", "disallowed by _XlaCompile attribute")
    assert res.clusters == {"cluster_0": ["b"]}


def test_already_clustered_graph_is_left_alone():
    """``_XlaAlreadyClustered`` on any node -- its value does not matter, TF tests presence --
    makes the pass return at once (tf-passes §7.1, trap 31): no decisions, no clusters."""
    g = graph(arg("x"), op("a", "Neg", "x"), op("b", "Relu", "a"), op("c", "Exp", "b"),
              op("d", "Abs", "c", _XlaAlreadyClustered=False), ret("y", "d"))
    res = cluster(g)
    assert res.mark.graph_decision.code == "GRAPH_ALREADY_CLUSTERED"
    assert res.mark.graph_decision.evidence == {"node": "d"}
    assert res.clusters == {}
    assert res.decisions == {}
    assert not res.mark.ran


# -- 12./13. operation filter and flags -----------------------------------------------------------


@pytest.mark.parametrize("nodes, name, code, detail", [
    ([const("shape", I32, (1,)), node("rng", "RandomUniform", ["shape"], dtype=Type(F32), T=Type(I32))],
     "rng", "STATEFUL_RNG", "stateful random op"),
    ([arg("c", 0, BOOL), arg("x", 1), node("as", "Assert", ["c", "x"], T=Types((F32,)))],
     "as", "ASSERT_OR_CHECKNUMERICS", "Assert or CheckNumerics"),
    ([arg("x"), op("u", "Unique", "x", out_idx=Type(I32))], "u", "UNIQUE_OP", "Unique op"),
], ids=["RandomUniform", "Assert", "Unique"])
def test_operation_filter_rejects(nodes, name, code, detail):
    """These ops *have* XLA kernels (tf-passes V23) but the auto-clustering operation filter rejects
    them (tf-passes §7.3.1 rules 9, 11, 13; V16) with TF's reason string."""
    res = cluster(graph(*nodes), "--tf_xla_min_cluster_size=1")
    d = res.decisions[name]
    assert (d.code, d.detail) == (code, detail)
    assert res.labels()[name] is None


def _where():
    return graph(arg("c", 0, BOOL), op("w", "Where", "c", dtype=BOOL), ret("y", "w", dtype=I64))


def test_where_is_clustered_by_default_and_can_be_excluded():
    """``Where`` is clusterable in TF 2.21 (tf-passes trap 13, V15) unless
    ``--tf_xla_cluster_exclude_ops=Where`` (rule 14: "Where op")."""
    assert cluster(_where(), "--tf_xla_min_cluster_size=1").clusters == {"cluster_0": ["w"]}
    res = cluster(_where(), "--tf_xla_min_cluster_size=1 --tf_xla_cluster_exclude_ops=Where")
    assert (res.decisions["w"].code, res.decisions["w"].detail) == ("WHERE_EXCLUDED", "Where op")
    assert res.clusters == {}


def test_exclude_list_accepts_only_where():
    """Any other exclude-list entry makes TF's pass fail (tf-passes §2.1, §7.3 step 6, V15)."""
    with pytest.raises(FlagError) as e:
        cluster(_where(), "--tf_xla_cluster_exclude_ops=Unique")
    assert str(e.value) == "The operation 'Unique' passed to --tf_xla_cluster_exclude_ops is not supported by XLA."


def test_ops_to_cluster_allowlist():
    """``--tf_xla_ops_to_cluster=PW`` keeps only pointwise ops (tf-passes Appendix A): MatMul is
    rejected after passing the compilability check (tf-passes §7.3 filter 7), Relu is kept."""
    g = graph(arg("x"), op("m", "MatMul", "x", "x"), op("r", "Relu", "m"), ret("y", "r"))
    res = cluster(g, "--tf_xla_min_cluster_size=1 --tf_xla_ops_to_cluster=PW")
    assert res.decisions["m"].code == "NOT_IN_OPS_TO_CLUSTER"
    assert "not listed in --tf_xla_ops_to_cluster" in res.decisions["m"].detail
    assert res.clusters == {"cluster_0": ["r"]}


def test_ops_to_cluster_rejects_ops_without_xla_kernel():
    """Every allowlist entry must be an op XLA registers, else the pass fails with TF's
    message (tf-passes §2.1, trap 7); AsString is a real TF op without an XLA kernel."""
    with pytest.raises(FlagError) as e:
        cluster(chain4(), "--tf_xla_ops_to_cluster=PW,AsString")
    assert str(e.value) == "The operation 'AsString' passed to --tf_xla_ops_to_cluster is not supported by XLA."


# -- 14. must-be-constant stateful ops -----------------------------------------------------------


def test_stateful_op_feeding_a_shape_is_isolated():
    """A ReadVariableOp is stateful and has an XLA kernel; its value feeds Reshape's ``shape``
    (a compile-time-constant input, tf-passes §3.4), so BackwardsConstAnalysis marks it and it is
    rejected as a "must-be-constant stateful op" (tf-passes §7.3 filter 8, trap 14). The Reshape
    itself is fine."""
    g = graph(var_handle("v", I32, (1,)), arg("x"), node("rd", "ReadVariableOp", ["v"], dtype=Type(I32)),
              node("rs", "Reshape", ["x", "rd"], T=Type(F32), Tshape=Type(I32)), op("r", "Relu", "rs"),
              ret("y", "r"))
    res = cluster(g, "--tf_xla_min_cluster_size=1")
    d = res.decisions["rd"]
    assert (d.code, d.detail, d.evidence) == ("MUST_BE_CONSTANT_STATEFUL", "must-be-constant stateful op",
                                              {"consumers": ["rs"]})
    assert res.clusters == {"cluster_0": ["rs", "r"]}


def test_const_analysis_is_transitive_but_only_stateful_ops_are_isolated():
    """Constness propagates backwards through ``n = Neg(rd)``: rd is still isolated; the
    stateless ``n`` (also must-be-constant) remains a candidate."""
    g = graph(var_handle("v", I32, (1,)), arg("x"), node("rd", "ReadVariableOp", ["v"], dtype=Type(I32)),
              op("n", "Neg", "rd", dtype=I32), node("rs", "Reshape", ["x", "n"], T=Type(F32), Tshape=Type(I32)),
              ret("y", "rs"))
    res = cluster(g, "--tf_xla_min_cluster_size=1")
    assert res.decisions["rd"].code == "MUST_BE_CONSTANT_STATEFUL"
    assert res.clusters == {"cluster_0": ["n", "rs"]}


# -- 15. CloneConstantsForBetterClustering -----------------------------------------------------


def _shared_const(dims=(), *extra):
    return graph(arg("x"), const("mul/y", F32, dims), op("mul", "Mul", "x", "mul/y"),
                 op("mul_1", "Mul", "mul", "mul/y"), ret("out", "mul_1"), *extra)


def _inputs(res, name):
    tg = res.graph
    n = tg.nodes[tg.by_name[name]]
    return sorted((tg.nodes[e.src].name, e.dst_input) for e in n.in_edges.values())


def test_small_shared_const_is_cloned_for_all_but_the_last_consumer():
    """tf-passes V8 (tf-passes §5): ``mul/y`` feeds ``mul`` and ``mul_1``; consumers are visited in node-id
    order, ``mul`` gets ``mul/y/clone_0`` and the last consumer keeps the original. The clone
    gets the next node id and joins the cluster like any Const."""
    res = cluster(_shared_const(), "--tf_xla_min_cluster_size=1")
    assert res.clones == ["mul/y/clone_0"]
    assert _inputs(res, "mul") == [("mul/y/clone_0", 1), ("x", 0)]
    assert _inputs(res, "mul_1") == [("mul", 0), ("mul/y", 1)]
    assert res.graph.by_name["mul/y/clone_0"] == 7  # after x=2 ... out=6
    assert res.clusters == {"cluster_0": ["mul/y", "mul", "mul_1", "mul/y/clone_0"]}


def test_only_constants_below_16_elements_are_cloned():
    """"Small" means fewer than 16 elements (tf-passes §5): 3x5 is cloned, 4x4 is not."""
    assert cluster(_shared_const((3, 5)), "--tf_xla_min_cluster_size=1").clones == ["mul/y/clone_0"]
    assert cluster(_shared_const((4, 4)), "--tf_xla_min_cluster_size=1").clones == []


def test_const_with_one_consumer_is_not_cloned():
    res = cluster(graph(arg("x"), const("c"), op("m", "Mul", "x", "c"), ret("y", "m")), "--tf_xla_min_cluster_size=1")
    assert res.clones == []


def test_inplace_op_disables_cloning():
    """Any InplaceUpdate/InplaceAdd/InplaceSub in the graph skips the whole pass (tf-passes §5)."""
    res = cluster(_shared_const((), const("i", I32, (1,)), op("ia", "InplaceAdd", "x", "i", "x")),
                  "--tf_xla_min_cluster_size=1")
    assert res.clones == []


def test_control_consumer_gets_a_clone_and_keeps_the_original_edge():
    """For a control edge TF adds ``clone -> ^consumer`` but does not remove the original
    edge (tf-passes §5; clone_constants_for_better_clustering.cc), so the Const still has two
    out-edges when its data consumer is visited and that one gets a clone too."""
    g = graph(arg("x"), const("c"), op("b", "Neg", "x", "^c"), op("a", "Mul", "b", "c"), ret("out", "a"))
    res = cluster(g, "--tf_xla_min_cluster_size=1")
    assert res.clones == ["c/clone_0", "c/clone_1"]
    assert _inputs(res, "b") == [("c", -1), ("c/clone_0", -1), ("x", 0)]
    assert _inputs(res, "a") == [("b", 0), ("c/clone_1", 1)]


# -- 16. numbering and process-wide state ---------------------------------------------------------


def test_cluster_numbers_follow_the_smallest_node_id():
    """Names are handed out while visiting candidates in node-id order (tf-passes §7.6, trap 6, V6):
    the cluster holding the lowest id -- here the Const ``k`` (id 2) consumed by the *second*
    chain -- gets ``cluster_0``. Const ``k`` counts 0, so that cluster has effective size 2."""
    g = graph(const("k"), arg("x"), arg("z", 1), op("a1", "Neg", "x"), op("a2", "Exp", "a1"),
              op("b1", "Mul", "z", "k"), op("b2", "Relu", "b1"), ret("ya", "a2"), ret("yb", "b2", 1))
    res = cluster(g, "--tf_xla_min_cluster_size=2")
    assert res.clusters == {"cluster_0": ["k", "b1", "b2"], "cluster_1": ["a1", "a2"]}


def test_cluster_numbers_continue_across_graphs_of_one_process():
    """The counter is process-wide (tf-passes §7.6, V6): a second graph clustered with the same
    ProcessState continues at ``cluster_2``; a fresh process starts again at 0."""
    state = ProcessState()
    assert list(cluster(chain4(), "--tf_xla_min_cluster_size=2", state=state).clusters) == ["cluster_0"]
    assert list(cluster(_split_by_strings(), "--tf_xla_min_cluster_size=2", state=state).clusters) == \
        ["cluster_1", "cluster_2"]
    assert list(cluster(chain4(), state=state).clusters) == ["cluster_3"]
    assert list(cluster(chain4()).clusters) == ["cluster_0"]


def test_fuel_is_consumed_across_graphs():
    """Fuel is one process-wide counter initialised from the flag at first use and decremented
    per accepted candidate (tf-passes §2.1, trap 5, V13). Fuel 3: the first graph takes 2 (a, b),
    the second gets ``a`` (fuel 1 -> 0); from then on the loop stops (tf-passes §7.3 filter 0) and
    every later node -- even a _Retval -- is FUEL_EXHAUSTED. The flag value of later graphs
    does not reset it."""
    state = ProcessState()
    assert cluster(chain2(), "--tf_xla_min_cluster_size=1 --tf_xla_clustering_fuel=3", state=state).clusters == \
        {"cluster_0": ["a", "b"]}
    assert state.fuel == 1
    res = cluster(chain2(), "--tf_xla_min_cluster_size=1 --tf_xla_clustering_fuel=100", state=state)
    assert res.clusters == {"cluster_1": ["a"]}
    assert codes(res, "x", "a", "b", "y") == {"x": "TOP_LEVEL_ARG_RETVAL", "a": "CLUSTERED", "b": "FUEL_EXHAUSTED",
                                              "y": "FUEL_EXHAUSTED"}
    assert res.decisions["b"].detail == "Hit fuel limit; not marking any remaining ops as clusterable."
    res = cluster(chain2(), "--tf_xla_min_cluster_size=1", state=state)
    assert set(d.code for d in res.decisions.values()) == {"FUEL_EXHAUSTED"}
    assert res.mark.graph_decision.code == "GRAPH_NO_CANDIDATES"


# -- 17. DeclusterNodes ----------------------------------------------------------------------------


def _fill(value_node, value_name):
    return graph(arg("x"), const("dims", I32, (1,)), value_node,
                 node("fill", "Fill", ["dims", value_name], T=Type(F32), index_type=Type(I32)),
                 op("s", "AsString", "fill"), ret("y", "s", dtype=STR))


def test_fill_with_all_consumers_outside_its_cluster_is_declustered():
    """tf-passes V20 (tf-passes §7.6, trap 29): the Fill's only consumer (AsString) is not compilable, so
    after contraction the Fill is dropped from its cluster; its inputs -- including the value
    Const -- stay clustered."""
    res = cluster(_fill(const("value"), "value"), "--tf_xla_min_cluster_size=1")
    assert res.clusters == {"cluster_0": ["dims", "value"]}
    d = res.decisions["fill"]
    assert (d.code, d.evidence) == ("FILL_DECLUSTERED", {"consumers": ["s"]})


def test_cluster_kept_after_fill_removal_even_below_min_size():
    """Sizes are not recomputed after declustering: {dims, neg, fill} has effective size 2 and
    passes ``min_cluster_size=2``; it is kept with one effective member left."""
    res = cluster(_fill(op("neg", "Neg", "x"), "neg"), "--tf_xla_min_cluster_size=2")
    assert res.clusters == {"cluster_0": ["dims", "neg"]}
    assert res.decisions["neg"].evidence == {"cluster": "cluster_0", "cluster_size": 3, "effective_size": 2}


def test_splitv_is_not_declustered_in_tf_2_21():
    """Newer TF sources also decluster ``SplitV`` like Fill; TF 2.21 does not (checked with
    TF 2.21: ``tf.split(y, [1, 3])`` consumed only by AsString stayed in the cluster), and
    tf-passes §7.6 lists only Fill."""
    g = graph(arg("x"), const("sizes", I32, (2,)), const("axis", I32), op("n", "Neg", "x"),
              node("sp", "SplitV", ["n", "sizes", "axis"], T=Type(F32), Tlen=Type(I32), num_split=2),
              op("s0", "AsString", "sp"), op("s1", "AsString", "sp:1"), ret("y0", "s0", dtype=STR),
              ret("y1", "s1", 1, dtype=STR))
    res = cluster(g, "--tf_xla_min_cluster_size=1")
    assert res.clusters == {"cluster_0": ["sizes", "axis", "n", "sp"]}


# -- 18. phase 0 ----------------------------------------------------------------------------------


def _shape_consumer(consumer_op, **attrs):
    """X -> Y -> S -> Z with an uncompilable path Y -> Q ~> Z (control edge): Y and Z may not
    share a cluster, so S can join either {X, Y} or {Z} but not both."""
    return graph(arg("a"), op("X", "Neg", "a"), op("Y", "Relu", "X"), node("S", consumer_op, ["Y"], **attrs),
                 op("Q", "BesselJ0", "Y"),
                 node("Z", "Cast", ["S", "^Q"], SrcT=attrs.get("out_type", Type(F32)), DstT=Type(F32)),
                 ret("out", "Z"), ret("out2", "Q", 1))


def test_phase0_pulls_shape_consumer_into_its_producer():
    """Phase 0 contracts only edges into a lone Shape/Rank/Size (tf-passes §7.5), before the general
    post-order phases that would first glue ``Size`` to its consumer ``Z`` (the upstream
    comment's X -> Y -> Size -> Z example). So Size ends with its producers; {X, Y, Size} ->
    Z is then refused as a cycle through Q. (Same outcome observed with TF 2.21 on
    ``tf.size``/``tf.cast`` with a control dependency.)"""
    res = cluster(_shape_consumer("Size", T=Type(F32), out_type=Type(I32)), "--tf_xla_min_cluster_size=1",
                  explain_cycles=True)
    assert res.clusters == {"cluster_0": ["X", "Y", "S"], "cluster_1": ["Z"]}
    assert refusals(res) == [(1, "Y", "Z", "MERGE_CYCLE"), (2, "Y", "Z", "MERGE_CYCLE")]
    assert res.mark.refusals[0].evidence == {"path": ["Q"]}
    assert (res.mark.refusals[0].from_size, res.mark.refusals[1].from_size) == (2, 3)


def test_without_phase0_the_op_joins_its_consumer():
    """Control experiment: the same graph with a non-shape op (Sign) in S's place; phase 1
    visits S before Y and merges S -> Z first."""
    res = cluster(_shape_consumer("Sign", T=Type(F32)), "--tf_xla_min_cluster_size=1")
    assert res.clusters == {"cluster_0": ["X", "Y"], "cluster_1": ["S", "Z"]}


# -- 20. deterministic cluster names ---------------------------------------------------------------


def _fingerprint(g: Graph) -> int:
    """tf-passes Appendix D computed independently: Hash64 of the deterministic serialization of the
    GraphDef as ``Graph::ToGraphDef`` writes it (nodes in id order, ``library {}`` and
    ``versions`` always present)."""
    gd = protos.GraphDef()
    gd.CopyFrom(g.graphdef)
    gd.library.SetInParent()
    gd.versions.SetInParent()
    return hash64(gd.SerializeToString(deterministic=True))


def test_deterministic_names_use_the_graph_fingerprint_and_per_fingerprint_counters():
    """``--tf_xla_deterministic_cluster_names``: ``cluster_<fp>_<n>`` with one counter per
    fingerprint (tf-passes §7.6, V7). The same graph twice in one process: ``_0`` then ``_1``; a
    different graph starts its own counter at ``_0``."""
    flags = "--tf_xla_min_cluster_size=1 --tf_xla_deterministic_cluster_names"
    fp = _fingerprint(chain2())
    state = ProcessState()
    assert cluster(chain2(), flags, state=state).clusters == {f"cluster_{fp}_0": ["a", "b"]}
    assert cluster(chain2(), flags, state=state).clusters == {f"cluster_{fp}_1": ["a", "b"]}
    other = _split_by_strings()
    fp2 = _fingerprint(other)
    assert fp2 != fp
    assert cluster(other, flags, state=state).clusters == {f"cluster_{fp2}_0": ["a", "b"],
                                                           f"cluster_{fp2}_1": ["c", "d"]}
    # the plain counter (fingerprint 0) was not touched
    assert list(cluster(chain2(), "--tf_xla_min_cluster_size=1", state=state).clusters) == ["cluster_0"]


def _tf_relu_graph(*extra_nodes, retval_input="Relu"):
    """The post-Grappler body of ``tf.function(lambda x: tf.nn.relu(tf.sin(x) * tf.cos(x) +
    tf.exp(x)))`` called on a float32[2] tensor, as TF 2.21 dumped it (node order = ids)."""
    return graph(
        node("x", "_Arg", T=Type(F32), _output_shapes=Shapes(((2,),)), _user_specified_name="x", index=0),
        *extra_nodes[:1],
        op("Exp", "Exp", "x"), op("Cos", "Cos", "x"), op("Sin", "Sin", "x"), op("mul", "Mul", "Cos", "Sin"),
        op("add", "AddV2", "Exp", "mul"), op("Relu", "Relu", "add"), *extra_nodes[1:],
        ret("identity_RetVal", retval_input),
        producer=2474)


def test_deterministic_name_matches_tf():
    """TF 2.21 named this graph's cluster ``cluster_2624902802596942913_0`` (harvested with
    ``--tf_xla_deterministic_cluster_names``); jitsim's fingerprint reproduces the number."""
    res = cluster(_tf_relu_graph(), "--tf_xla_deterministic_cluster_names")
    assert res.clusters == {"cluster_2624902802596942913_0": ["Exp", "Cos", "Sin", "mul", "add", "Relu"]}


@pytest.mark.xfail(strict=True, reason="TF's fingerprint differs from Hash64(dump) when an op has a "
                                       "compile-time-constant input (here Reshape's shape)")
def test_deterministic_name_matches_tf_with_a_compile_time_constant_input():
    """The same function ending in ``tf.reshape(..., [-1])`` on a float32[2, 2] input: TF 2.21
    named the cluster ``cluster_13888780527608017651_0``, but the Hash64 of its
    ``before_mark_for_compilation`` dump -- which this graph reproduces exactly -- is
    14266933061454283394 (what jitsim prints). Every TF run tried with a Sum axis, Reshape
    shape or Transpose perm showed such a mismatch, every run without one matched."""
    g = _tf_relu_graph(const("Reshape/shape", I32, (1,)),
                       node("Reshape", "Reshape", ["Relu", "Reshape/shape"], T=Type(F32), Tshape=Type(I32)),
                       retval_input="Reshape")
    g["x"].attr["_output_shapes"].list.shape[0].dim.add(size=2)
    g["Reshape/shape"].attr["value"].tensor.int_val.append(-1)
    assert _fingerprint(g) == 14266933061454283394  # the graph is exactly TF's dump
    res = cluster(g, "--tf_xla_deterministic_cluster_names")
    assert list(res.clusters) == ["cluster_13888780527608017651_0"]
