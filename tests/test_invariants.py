"""Property-based tests of jitsim alone (no TensorFlow): generated programs, rendered as graphs
shaped like TF's ``before_clone_constants_for_better_clustering`` dumps, must satisfy the
structural invariants of :mod:`jitsim.testing.invariants` under any of the TF_XLA_FLAGS that
matter, and jitsim's output must be byte-identical run to run.

Hypothesis runs derandomized here (fixed examples, CI-stable); a failure prints the shrunk
program as Python source. ``checker has teeth`` tests break jitsim on purpose and check that the
invariants notice.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings

from graphs import BOOL, arg, graph, op, ret
from jitsim.graph import Graph
from jitsim.flags import parse_tf_xla_flags
from jitsim.passes.mark_for_compilation import MarkForCompilation
from jitsim.options import Options, options_for
from jitsim.passes.pipeline import run_pipeline
from jitsim.testing.invariants import _mark_invariants, check_invariants
from jitsim.testing.program import (
    Block, Cond, Const, Op, Program, Val, While, body_source, reductions, to_graph, to_graphdef, validate,
)
from jitsim.testing.strategies import Features, programs, xla_flags

CI = settings(derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                                     HealthCheck.data_too_large])
AUTO = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"


@settings(CI, max_examples=150)
@given(programs())
def test_generated_programs_are_valid_and_render(p):
    validate(p)
    compile(body_source(p), "<program>", "exec")  # the Python rendering parses
    g = to_graph(p)  # the graph loads (no dangling inputs, loops closed by NextIteration)
    assert g.check_acyclic() is None
    names = {n.name for n in to_graphdef(p).node}
    assert {x.name for x in p.inputs} <= names


@settings(CI, max_examples=200)
@given(programs(), xla_flags())
def test_invariants_hold_on_generated_programs(p, flags):
    assert check_invariants(to_graph(p), flags, determinism=False) == []


@settings(CI, max_examples=60)
@given(programs(Features(max_statements=20, block_statements=4)), xla_flags())
def test_invariants_hold_on_larger_programs(p, flags):
    assert check_invariants(to_graph(p), flags, determinism=False) == []


@settings(CI, max_examples=25)
@given(programs(), xla_flags())
def test_output_is_identical_run_to_run(p, flags):
    bad = check_invariants(to_graph(p), flags, determinism=True)
    assert not [b for b in bad if b.startswith("deterministic")]


@settings(CI, max_examples=60)
@given(programs())
def test_reductions_are_valid_and_greedy_shrinking_ends_at_the_trivial_program(p):
    cur = p
    for _ in range(500):
        cands = [q for q in reductions(cur) if q.shrink_key() < cur.shrink_key()]
        for q in cands:
            validate(q)
        if not cands:
            break
        cur = min(cands, key=lambda q: q.shrink_key())
    assert cur.size() == 0 and not cur.functions and not cur.variables and len(cur.inputs) == 1


_DETERMINISM_SCRIPT = textwrap.dedent("""
    import hashlib, json, sys
    from hypothesis import HealthCheck, given, settings, seed
    from jitsim.testing.program import to_graph
    from jitsim.testing.strategies import programs, xla_flags
    from jitsim.options import options_for
    from jitsim.passes.mark_for_compilation import ProcessState
    from jitsim.passes.pipeline import run_pipeline
    digests = []
    state = ProcessState()
    @seed(11)
    @settings(max_examples=25, database=None, deadline=None, derandomize=True,
              suppress_health_check=list(HealthCheck))
    @given(programs(), xla_flags())
    def run(p, flags):
        r = run_pipeline(to_graph(p), options_for(flags, until="build-xla-ops"), state)
        digests.append(hashlib.sha256(r.to_graphdef().SerializeToString(deterministic=True)).hexdigest())
    run()
    print(json.dumps(digests))
""")


def test_output_is_identical_across_processes_and_hash_seeds():
    outs = []
    for hash_seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=hash_seed)
        r = subprocess.run([sys.executable, "-c", _DETERMINISM_SCRIPT], env=env, capture_output=True, text=True,
                           timeout=300)
        assert r.returncode == 0, r.stderr[-2000:]
        outs.append(json.loads(r.stdout.strip().splitlines()[-1]))
    assert len(outs[0]) >= 20
    assert outs[0] == outs[1]


def test_program_repr_is_python_source():
    p = Program((Val("x0", "f", "v"),), Block((Op("v1", "Sin", ("x0",)), Op("v2", "Exp", ("v1",)))))
    text = repr(p)
    assert "v1 = tf.raw_ops.Sin(x=x0, name='v1')" in text
    assert "return v2" in text


def test_strategy_covers_the_features():
    """Over a fixed sample, every feature the issue lists shows up."""
    seen = set()

    @settings(CI, max_examples=300)
    @given(programs())
    def collect(p):
        src = body_source(p)
        for key, marker in (("cond", "tf.cond("), ("while", "tf.while_loop("), ("string", "AsString"),
                            ("int16", "tf.int16"), ("control", "control_dependencies"), ("variable", "tf.Variable"),
                            ("write", "AssignAddVariableOp"), ("rng", "RandomUniform"), ("device", "/CPU:1"),
                            ("jit", "jit_compile=True"), ("nested", "def g0"), ("print", "tf.print"),
                            ("where", "Where"), ("pyfunc", "py_function")):
            if marker in src:
                seen.add(key)

    collect()
    assert seen == {"cond", "while", "string", "int16", "control", "variable", "write", "rng", "device", "jit",
                    "nested", "print", "where", "pyfunc"}


# -- the checker has teeth -----------------------------------------------------------------------

CHAIN = Program((Val("x0", "f", "v"),), Block(tuple(
    Op(f"v{i}", op, (f"v{i - 1}" if i > 1 else "x0",)) for i, op in enumerate(["Sin", "Exp", "Cos", "Tanh", "Neg"], 1))))
COND = Program((Val("x0", "f", "v"),), Block((
    Op("v1", "Sin", ("x0",)),
    Cond("v2", "f", "v", "v1", Block((Op("v3", "Exp", ("v1",)), Op("v4", "AddV2", ("v3", "v1"))), "v4"),
         Block((Op("v5", "Neg", ("v1",)),), "v5")),
    Op("v6", "Cos", ("v2",)),
)))


def _mark(p, flags=AUTO + " --tf_xla_min_cluster_size=1"):
    fl = parse_tf_xla_flags(flags)
    return run_pipeline(to_graph(p), Options(fl, until="mark")).cluster.mark, fl


def test_clean_examples_pass():
    for p in (CHAIN, COND):
        assert check_invariants(to_graph(p), AUTO + " --tf_xla_min_cluster_size=1") == []


def test_teeth_candidates_and_devices():
    m, fl = _mark(CHAIN)
    assert _mark_invariants(m, fl) == []
    g = m.graph
    arg = g.nodes[g.by_name["x0"]]
    arg.attr["_XlaCluster"].s = b"cluster_0"
    assert any(v.startswith("candidates: x0") for v in _mark_invariants(m, fl))
    del arg.attr["_XlaCluster"]
    g.nodes[g.by_name["v2"]].nodedef.device = "/job:localhost/replica:0/task:0/device:CPU:1"
    assert any(v.startswith("homogeneous") and "mixes devices" in v for v in _mark_invariants(m, fl))


def test_teeth_acyclic():
    p = Program((Val("x0", "f", "v"),), Block((
        Op("v1", "Sin", ("x0",)), Op("v2", "AsString", ("v1",)), Op("v3", "StringToNumber", ("v2",)),
        Op("v4", "AddV2", ("v3", "v1")))))
    m, fl = _mark(p)
    assert _mark_invariants(m, fl) == []
    assert m.groups["v1"] != m.groups["v4"]
    m.groups["v4"] = m.groups["v1"]  # put v1 and v4 together around the string round trip
    assert any(v.startswith("acyclic") for v in _mark_invariants(m, fl))


def test_teeth_fixpoint(monkeypatch):
    monkeypatch.setattr(MarkForCompilation, "contract", lambda self: None)  # no contraction at all
    bad = check_invariants(to_graph(CHAIN), AUTO + " --tf_xla_min_cluster_size=1", determinism=False)
    assert any(v.startswith("fixpoint: v1 -> v2") for v in bad), bad


def test_teeth_max_size(monkeypatch):
    orig = MarkForCompilation.try_contract

    def no_max(self, phase, a, b):
        self.max_cluster_size = 2**31 - 1  # the pass's copy of --tf_xla_max_cluster_size
        return orig(self, phase, a, b)

    monkeypatch.setattr(MarkForCompilation, "try_contract", no_max)
    bad = check_invariants(to_graph(CHAIN), AUTO + " --tf_xla_min_cluster_size=1 --tf_xla_max_cluster_size=2",
                           determinism=False)
    assert any(v.startswith("sizes:") and "> max 2" in v for v in bad), bad


def test_teeth_min_size(monkeypatch):
    orig = MarkForCompilation.create_clusters

    def small(self, cands):
        self.flags = copy.copy(self.flags)
        self.flags.min_cluster_size = 1
        return orig(self, cands)

    monkeypatch.setattr(MarkForCompilation, "create_clusters", small)
    p = Program((Val("x0", "f", "v"),), Block((Op("v1", "Sin", ("x0",)), Op("v2", "AsString", ("v1",)))))
    bad = check_invariants(to_graph(p), AUTO, determinism=False)
    assert any(v.startswith("sizes:") and "< min 4" in v for v in bad), bad


def _switch_graph() -> Graph:
    """x -> Neg -> AddV2 <- Switch(x, p):1: a direct edge between nodes of different deadness."""
    g = graph(arg("x"), arg("p", 1, BOOL), op("sw", "Switch", "x", "p"), op("neg", "Neg", "x"),
              op("add", "AddV2", "sw:1", "neg"), op("exp", "Exp", "add"), ret("out", "exp"), producer=2474)
    g.source = "before_clone_constants_for_better_clustering.pbtxt"
    return g


def test_teeth_deadness(monkeypatch):
    flags = AUTO + " --tf_xla_min_cluster_size=1"
    assert check_invariants(_switch_graph(), flags, determinism=False) == []
    orig = MarkForCompilation.try_contract

    def blind(self, phase, a, b):
        b.deadness = a.deadness
        return orig(self, phase, a, b)

    monkeypatch.setattr(MarkForCompilation, "try_contract", blind)
    bad = check_invariants(_switch_graph(), flags, determinism=False)
    assert any("mixes deadness predicates" in v for v in bad), bad


def test_teeth_determinism(monkeypatch):
    import itertools

    counter = itertools.count()
    orig = MarkForCompilation.create_clusters

    def unstable(self, cands):
        orig(self, cands)
        self.g.nodes[cands[0].id].attr["_jitsim_run"].i = next(counter)

    monkeypatch.setattr(MarkForCompilation, "create_clusters", unstable)
    bad = check_invariants(to_graph(CHAIN), AUTO, determinism=True)
    assert any(v.startswith("deterministic") for v in bad)


def test_hypothesis_shrinks_to_a_small_readable_program():
    """A property that fails as soon as a cluster holds an Exp: Hypothesis must shrink the
    counterexample to a couple of statements, printed as Python source."""
    from hypothesis import find

    def has_exp_cluster(p):
        r = run_pipeline(to_graph(p), options_for(AUTO + " --tf_xla_min_cluster_size=1", until="mark")).cluster
        return any(r.graph.nodes[r.graph.by_name[n]].op == "Exp" for ns in r.clusters.values() for n in ns)

    small = find(programs(), has_exp_cluster, settings=settings(database=None, derandomize=True, max_examples=500,
                                                                  suppress_health_check=list(HealthCheck)))
    assert small.size() <= 2, repr(small)
    assert "tf.raw_ops.Exp(" in repr(small)


def test_example_program_of_every_statement_kind_clusters_like_expected():
    p = Program((Val("x0", "f", "v"),), Block((
        Const("v1", "f", "v", 3),
        Op("v2", "AddV2", ("x0", "v1")),
        While("v3", "f", "v", "v2", 2, "w3", Block((Op("v4", "Sin", ("w3",)),), "v4")),
        Op("v5", "Exp", ("v3",)),
    )))
    r = run_pipeline(to_graph(p), options_for(AUTO + " --tf_xla_min_cluster_size=1", until="mark")).cluster
    clustered = {n for ns in r.clusters.values() for n in ns}
    assert {"v2", "v4", "v5"} <= clustered
    # the loop body op never shares a cluster with ops outside the loop
    assert not any({"v4", "v2"} <= set(ns) for ns in r.clusters.values())


@pytest.mark.parametrize("seed", range(3))
def test_sampled_flags_parse(seed):
    @settings(CI, max_examples=40)
    @given(xla_flags())
    def check(flags):
        parse_tf_xla_flags(flags)

    check()


def test_every_catalog_kind_renders_to_registered_ops():
    from jitsim.registry import op_def
    from jitsim.testing.program import CATALOG

    for k in CATALOG.values():
        ins = tuple(Val(f"x{i}", d, k.first_shapes()[0] if k.first_shapes() else "v") for i, d in enumerate(k.ins))
        if k.rule == "matmul":
            ins = tuple(Val(f"x{i}", "f", "m") for i in range(2))
        p = Program(ins or (Val("x0", "f", "v"),), Block((Op("v1", k.name, tuple(v.name for v in ins)),)))
        validate(p)
        gd = to_graphdef(p)
        for n in gd.node:
            assert op_def(n.op) is not None, (k.name, n.op)


@settings(CI, max_examples=50)
@given(programs())
def test_programs_round_trip_through_json(p):
    import json as _json

    from jitsim.testing.program import program_from_json, program_to_json

    assert program_from_json(_json.loads(_json.dumps(program_to_json(p)))) == p
