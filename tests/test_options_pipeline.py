"""One Options object for a simulation, the pipeline and Grappler's steps as data, and the
debug check between passes (issue 23 items 3-4).

Hand-derived expectations: TF's POST_REWRITE_FOR_EXEC JIT passes run in the order their
registrations give them (jit_compilation_pass_registration.cc: CloneConstantsForBetterClustering
phase 9, ClusterScoping 9 (after), MarkForCompilation 20, ForceXlaConstantsOnHost 30,
IncreaseDynamismForAutoJit 40, PartiallyDecluster 50, EncapsulateSubgraphs 50 (after), BuildXlaOps
60); the stage a user stops after (``--until``) is named by jitsim.defs.STAGES and TF's dump of it
is the dump of the stage's last pass.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import jitsim
from jitsim import defs
from jitsim.cli import build_parser, main
from jitsim.frontend import prepare
from jitsim.graph.io import load
from jitsim.options import Options, options_for
from jitsim.passes import pipeline
from jitsim.passes.mark_for_compilation import ProcessState
from jitsim.passes.pipeline import PIPELINE, PassCheckError, PassEntry, check_graph, run_pipeline

ROOT = Path(__file__).resolve().parents[1]
MNIST = ROOT / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt"
WHILE = ROOT / "tests" / "data" / "deadness" / "cond_while_cond.pbtxt"  # a before_mark dump with a loop
AUTO = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"


def test_pipeline_lists_tfs_eight_passes_in_order():
    assert [e.tf_name for e in PIPELINE] == [
        "CloneConstantsForBetterClusteringPass", "ClusterScopingPass", "MarkForCompilationPass",
        "ForceXlaConstantsOnHostPass", "IncreaseDynamismForAutoJitPass", "PartiallyDeclusterPass",
        "EncapsulateSubgraphsPass", "BuildXlaOpsPass"]
    # stages come from jitsim.defs, in order; each stage's dump is its last pass's
    assert tuple(dict.fromkeys(e.stage for e in PIPELINE)) == defs.STAGES
    assert pipeline.STAGE_DUMPS == {"mark": defs.MARK_DUMP, "decluster": defs.ENCAPSULATE_BEFORE_DUMP,
                                    "encapsulate": defs.ENCAPSULATE_AFTER_DUMP, "build-xla-ops": defs.BUILD_XLA_OPS_DUMP}
    assert all(e.dump is None or e.dump in defs.DUMP_STAGES for e in PIPELINE)


def test_cli_until_choices_are_the_stages():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    until = next(a for a in sub.choices["rewrite"]._actions if a.dest == "until")
    assert tuple(until.choices) == defs.STAGES and until.default == defs.STAGES[-1]


def _recording(seen: list) -> tuple[PassEntry, ...]:
    """PIPELINE with every entry also noting the options object it was handed."""
    def wrap(e):
        def run(g, options, state):
            seen.append((e.tf_name, options))
            return e.run(g, options, state)
        return replace(e, run=run)
    return tuple(wrap(e) for e in PIPELINE)


def test_every_pass_gets_the_one_options_object(monkeypatch):
    """The API builds one Options (filled in once with what depends on the graph) and every pass
    receives that very object, which is also what the Clustering reports."""
    seen: list = []
    monkeypatch.setattr(pipeline, "PIPELINE", _recording(seen))
    c = jitsim.cluster(str(MNIST), flags=AUTO, until="build-xla-ops", tf="never", cluster_number_start=3)
    assert [name for name, _ in seen] == [e.tf_name for e in PIPELINE]
    assert all(o is c.options for _, o in seen)
    assert c.options.tf_version == "2.21" and c.options.flags.text == AUTO
    # --cluster-number-start is applied where the process state is made: numbering starts at 3
    assert sorted(c.mark.clusters)[0] == "cluster_3"


def test_until_stops_the_loop(monkeypatch):
    seen: list = []
    monkeypatch.setattr(pipeline, "PIPELINE", _recording(seen))
    run_pipeline(load(MNIST), options_for(AUTO, until="decluster"))
    assert [name for name, _ in seen][-1] == "PartiallyDeclusterPass" and len(seen) == 6


def test_options_json_is_the_documented_record():
    """Options.to_dict is the ``options`` object of jitsim.clustering/1 (docs/json.md): the same
    keys in the same order as before the options became one object."""
    c = jitsim.cluster(str(MNIST), flags=AUTO, tf="never", exclude_ops=["MatMul"])
    d = c.to_dict()["options"]
    assert list(d) == ["tf_xla_flags", "flags_origin", "device", "exclude_ops", "force_compilable",
                       "session_jit_level", "session_cpu_global_jit", "input_stage", "until", "tf_version"]
    assert d["tf_xla_flags"] == AUTO and d["exclude_ops"] == ["MatMul"] and d["until"] == "decluster"


def test_whatif_reuses_the_parsed_flags():
    base = jitsim.cluster(str(MNIST), flags=AUTO, tf="never")
    var = base.whatif(exclude_ops=["MatMul"])
    assert var.options.flags is base.options.flags  # not parsed again
    assert var.options.exclude_ops == ("MatMul",)
    assert base.whatif(flags="--tf_xla_min_cluster_size=2").options.flags_text == AUTO + " --tf_xla_min_cluster_size=2"


def test_options_are_frozen():
    o = options_for(AUTO)
    with pytest.raises(AttributeError):
        o.device = "gpu"  # type: ignore[misc]


def test_process_state_starts_at_the_option():
    assert ProcessState.starting(options_for(AUTO, cluster_number_start=5)).next_cluster_number() == 5
    assert ProcessState.starting(options_for(AUTO)).next_cluster_number() == 0


def test_jitsim_debug_turns_the_checks_on(monkeypatch):
    monkeypatch.setenv("JITSIM_DEBUG", "1")
    assert options_for(AUTO).debug_checks
    monkeypatch.delenv("JITSIM_DEBUG")
    assert not options_for(AUTO).debug_checks


@pytest.mark.parametrize("path,stage", [(MNIST, defs.BEFORE_CLONE_DUMP), (WHILE, defs.BEFORE_MARK_DUMP)])
def test_debug_checks_pass_on_real_graphs_and_change_nothing(path, stage):
    """Every pass leaves a well-formed graph (the loop's NextIteration back edge is allowed),
    and checking changes no output."""
    plain = run_pipeline(load(path), options_for(AUTO, until="build-xla-ops", input_stage=stage))
    checked = run_pipeline(load(path), options_for(AUTO, until="build-xla-ops", input_stage=stage,
                                                   debug_checks=True))
    assert checked.to_graphdef() == plain.to_graphdef()
    assert check_graph(checked.graph) is None


def _break_with(monkeypatch, after: str, breaker):
    """Insert a pass named ``BrokenPass`` that runs ``breaker(graph)`` after the entry ``after``."""
    i = next(k for k, e in enumerate(PIPELINE) if e.tf_name == after) + 1
    bad = PassEntry("BrokenPass", "broken", PIPELINE[i - 1].stage, None, lambda g, o, s: breaker(g))
    monkeypatch.setattr(pipeline, "PIPELINE", PIPELINE[:i] + (bad,) + PIPELINE[i:])


def _cycle(g):
    # an edge from a node's consumer back to the node: a cycle not through NextIteration
    e = next(e for e in g.edges() if g.nodes[e.src].is_op and g.nodes[e.dst].is_op)
    g.add_control_edge(e.dst, e.src)


def _dangling(g):
    # drop a node from the node table but leave its edges
    n = next(n for n in g.op_nodes() if n.in_edges and n.out_edges)
    g.nodes[n.id] = None


def _bad_cluster(g):
    n = next(n for n in g.op_nodes() if defs.CLUSTER_ATTR in n.attr)
    n.attr[defs.CLUSTER_ATTR].i = 3  # an int where the cluster name belongs


def _slot_gap(g):
    n = next(n for n in g.op_nodes() if len(n.data_inputs()) >= 2)
    g.remove_edge(n.data_inputs()[0])  # inputs now start at slot 1


@pytest.mark.parametrize("after,breaker,problem", [
    ("MarkForCompilationPass", _cycle, "a cycle not through NextIteration"),
    ("PartiallyDeclusterPass", _dangling, "joins a removed node"),
    ("MarkForCompilationPass", _bad_cluster, "is not a cluster name"),
    ("ClusterScopingPass", _slot_gap, "data inputs are slots"),
])
def test_debug_check_names_the_pass_that_broke_the_graph(monkeypatch, after, breaker, problem):
    _break_with(monkeypatch, after, breaker)
    with pytest.raises(PassCheckError) as e:
        run_pipeline(load(MNIST), options_for(AUTO, until="build-xla-ops", debug_checks=True))
    assert "after BrokenPass" in str(e.value) and problem in str(e.value)


def test_broken_pass_goes_unnoticed_without_debug(monkeypatch):
    _break_with(monkeypatch, "MarkForCompilationPass", _bad_cluster)
    run_pipeline(load(MNIST), options_for(AUTO, until="mark", debug_checks=False))


def test_cli_debug_mode_checks_and_shows_the_broken_pass(monkeypatch, tmp_path):
    """JITSIM_DEBUG=1: the checks run and the bug surfaces with its traceback (a broken pass is
    jitsim's bug, not the input's); no output is written."""
    monkeypatch.setenv("JITSIM_DEBUG", "1")
    _break_with(monkeypatch, "MarkForCompilationPass", _cycle)
    with pytest.raises(PassCheckError, match="after BrokenPass"):
        main(["rewrite", str(MNIST), "--tf", "never", "-o", str(tmp_path / "out.pbtxt")])
    assert not (tmp_path / "out.pbtxt").exists()


def test_grappler_steps_are_declared_once():
    assert prepare.STEPS[2:] == tuple(s.name for s in prepare.GRAPPLER_STEPS)
    # TF 2.21's order (its meta optimizer's per-optimizer dumps): constant folding before the
    # arithmetic optimizer
    assert [s.name for s in prepare.GRAPPLER_STEPS if s.needs_shapes] == [
        "constant_folding", "arithmetic_optimizer", "remapper"]


def test_grappler_steps_run_from_the_list(monkeypatch):
    """prepare_without_tf dispatches from GRAPPLER_STEPS: an entry's function is what runs, twice
    (Grappler's two rounds), with the shapes only for a step that reads them."""
    from jitsim.graph.model import Graph

    calls = []

    def spy(step):
        def run(eg, cx):
            calls.append((step.name, cx.shapes is not None))
            return step.run(eg, cx)
        return replace(step, run=run)

    monkeypatch.setattr(prepare, "GRAPPLER_STEPS", tuple(spy(s) for s in prepare.GRAPPLER_STEPS))
    g = Graph.from_nodes([("x", "Placeholder", [], {"dtype": "DT_FLOAT"}), ("y", "Relu", ["x"])])
    p = prepare.prepare_without_tf(g, skip=("common_subgraph_elimination",))
    ran = [s.name for s in prepare.GRAPPLER_STEPS if s.name != "common_subgraph_elimination"]
    assert calls == [(s.name, s.needs_shapes) for s in prepare.GRAPPLER_STEPS
                     if s.name != "common_subgraph_elimination"] * 2
    assert [name for name, _, _ in p.steps if name in ran] == ran
    with pytest.raises(ValueError):
        prepare.prepare_without_tf(g, skip=("no_such_step",))


def test_rewrite_json_names_the_stage_dump(tmp_path, capsys):
    rc = main(["rewrite", str(MNIST), "--tf", "never", "--until", "decluster", "-o", str(tmp_path / "o.pbtxt"),
               "--format", "json"])
    assert rc == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["stage_dump"] == pipeline.STAGE_DUMPS["decluster"] == defs.ENCAPSULATE_BEFORE_DUMP


def test_options_is_in_the_api():
    assert jitsim.Options is Options
