"""One record type for decisions, one catalogue of codes (issue 23 item 5).

Every code a pass, analysis or rewrite records is a :class:`jitsim.codes.Code`, because every
record coerces its code through the enum (an unknown code raises where it is recorded, not
in a regex over the sources); every code carries its catalogue entry, kind and colour family;
the explainers, the pictures and docs/reasons.md read the same enum.
"""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from jitsim.analyses.compilability import CompilabilityChecker, Failure
from jitsim.codes import FAMILIES, KINDS, Code
from jitsim.explain.reasons import REASONS
from jitsim.explain.render import FAMILIES as DRAWN, code_family
from jitsim.passes.encapsulate import ArgDecision
from jitsim.records import MergeRefusal, NodeDecision, PassResult, RewriteRecord
from jitsim.registry import protos

ROOT = Path(__file__).resolve().parents[1]


# -- codes exist by construction ---------------------------------------------------------------


@pytest.mark.parametrize("make", [
    lambda code: NodeDecision(code),
    lambda code: MergeRefusal(1, "a", "b", 1, 1, code),
    lambda code: PassResult().decide("n", code),
    lambda code: RewriteRecord(code),
    lambda code: Failure(code=code),
    lambda code: ArgDecision(code, "", index=0, position=0, name="a", source="x:0", dtype=1),
], ids=["NodeDecision", "MergeRefusal", "PassResult.decide", "RewriteRecord", "compilability.Failure",
        "encapsulate.ArgDecision"])
def test_every_record_accepts_only_catalogued_codes(make):
    """Each record type of every pass (mark, the post-mark passes, the compilability checker,
    Encapsulate's arguments, the Grappler rewrites) turns its code into a Code: a code spelled
    as a string becomes the enum member, a code the catalogue lacks fails where it is recorded."""
    with pytest.raises(ValueError):
        make("NOT_A_CATALOGUED_CODE")
    assert NodeDecision("UNSUPPORTED_OP").code is Code.UNSUPPORTED_OP
    assert RewriteRecord("remapper").code is Code.REMAPPER
    assert ArgDecision("constant", "", index=0, position=0, name="a", source="x:0", dtype=1).kind is Code.ARG_CONSTANT


def test_codes_print_and_serialize_as_their_strings():
    """JSON, f-strings and comparisons see the code's string: outputs are the same bytes as
    when codes were bare strings (lower-case codes included)."""
    d = NodeDecision(Code.MERGE_CYCLE, "x", {"path": ["a"]})
    assert json.dumps(d.to_dict()) == '{"code": "MERGE_CYCLE", "detail": "x", "evidence": {"path": ["a"]}}'
    assert json.dumps({Code.ARG_NORMAL: [Code.LAZY_COMPILATION_DEFAULT]}) == '{"normal": ["lazy_compilation_default"]}'
    assert f"{Code.CLUSTERED}" == str(Code.CLUSTERED) == "CLUSTERED" == Code.CLUSTERED
    assert {"CLUSTERED": 1}[Code.CLUSTERED] == 1


def test_every_code_has_a_catalogue_entry_kind_and_drawn_family():
    values = [c.value for c in Code]
    assert len(values) == len(set(values)) and len(values) > 60
    for c in Code:
        assert c.kind in KINDS and c.family in FAMILIES, c
        assert c.title and c.explanation, f"{c}: no catalogue text"
        assert DRAWN[c.family][1] == FAMILIES[c.family], c  # the picture's legend reads the catalogue
        assert code_family(c) == c.family
    # the explainers' view is every node and merge code, in the catalogue's order
    assert list(REASONS) == [c.value for c in Code if c.kind in ("node", "merge")]
    assert code_family("UNKNOWN") == "unknown"


def test_families_are_the_ones_the_pictures_drew():
    """The families moved from render.py's hand-kept sets into the catalogue unchanged: the
    rules render.py used (configuration/declustered/structural sets and prefixes, else
    unsupported) give the same family for every node and merge code except CLUSTERED, which
    is never drawn with a family colour (clustered nodes take their cluster's colour)."""
    configuration = {"NO_DEVICE", "XLA_COMPILE_FALSE", "NO_JIT_DEVICE", "POLICY_NOT_ENABLED",
                     "NOT_IN_OPS_TO_CLUSTER", "WHATIF_EXCLUDED", "FUEL_EXHAUSTED", "WHERE_EXCLUDED",
                     "SCOPED_ALLOCATOR"}
    declustered = {"CLUSTER_TOO_SMALL", "CLUSTER_NOT_COMPILED", "FILL_DECLUSTERED", "INPUT_HOSTMEM",
                   "SLICE_MADE_STATIC"}
    structural = {"TOP_LEVEL_ARG_RETVAL", "SOURCE_OR_SINK"}

    def old_rule(code):
        if code in configuration:
            return "configuration"
        if code in declustered or code.startswith("DECLUSTERED_"):
            return "declustered"
        if code in structural or code.startswith("GRAPH_"):
            return "structural"
        return "unsupported"

    for code in REASONS:
        if code != "CLUSTERED":
            assert Code(code).family == old_rule(code), code
    assert Code.CLUSTERED.family == "clustered"


def test_every_node_and_merge_code_has_an_example():
    """fixtures/reasons/cases.toml names an example for every code the explainers show."""
    data = tomllib.loads((ROOT / "fixtures" / "reasons" / "cases.toml").read_text())
    examples = {e["code"] for e in data["example"]}
    assert examples == set(REASONS)


# -- the records of each pass are the record type ------------------------------------------------


def test_compilability_failure_is_a_node_decision_with_its_path():
    """A node inside a called function: the checker's answer is a NodeDecision whose path
    runs from the call down to the node (hand-built: a function whose only node is an op
    without an XLA kernel, called once)."""
    lib = protos.FunctionDefLibrary()
    f = lib.function.add()
    f.signature.name = "f"
    nd = f.node_def.add(name="s", op="StringJoin")
    nd.attr["N"].i = 0
    call = protos.NodeDef(name="c", op="PartitionedCall")
    call.attr["f"].func.name = "f"
    fail = CompilabilityChecker(lib).check_node(call)
    assert isinstance(fail, NodeDecision) and fail.code is Code.UNSUPPORTED_FUNCTION
    assert fail.path == ("f/s",) and fail.detail.startswith("unsupported function: ")


def test_rewrite_record_merges_keep_counts_and_order():
    """Two stages of one optimizer merged (prepare's model_pruner = pruning + trivial ops):
    counts add up, nodes keep their order, kinds are counted in first-seen order."""
    a, b = RewriteRecord(Code.MODEL_PRUNER), RewriteRecord(Code.MODEL_PRUNER)
    a.add("x", "unreachable from the fetches")
    b.add("y", "Identity bypassed")
    b.add("z", "unreachable from the fetches")
    b.add("w")
    a.extend(b)
    assert a.count == 4 and a.nodes == ["x", "y", "z", "w"] and a.name == "model_pruner"
    assert a.by_kind == {"unreachable from the fetches": 2, "Identity bypassed": 1}
    assert a.summary() == "unreachable from the fetches 2, Identity bypassed 1"
    assert all(d.code is Code.MODEL_PRUNER for _, d in a.decisions)


def test_encapsulate_argument_is_a_node_decision():
    a = ArgDecision(Code.ARG_RESOURCE, "DT_RESOURCE argument: resource args go last", index=1, position=2,
                    name="v", source="v:0", dtype=20)
    assert isinstance(a, NodeDecision) and a.kind is Code.ARG_RESOURCE and a.reason == a.detail
    assert a.to_json()["kind"] == "resource" and json.dumps(a.to_json())


def test_catalogue_lives_below_the_passes():
    """codes and records import nothing from jitsim but each other, so analyses and rewrites
    (below the passes) record decisions with them."""
    for name, allowed in (("codes", set()), ("records", {"jitsim.codes"})):
        src = (ROOT / "src" / "jitsim" / f"{name}.py").read_text()
        assert set(re.findall(r"^from (jitsim[\w.]*) import", src, re.M)) == allowed, name


def test_report_does_not_point_into_a_checkout(tmp_path):
    """The report names docs/reasons.md anchors as text (the catalogue's text is embedded),
    so the page is the same wherever jitsim is installed."""
    from jitsim.explain.clustering import cluster
    from jitsim.explain.report import report_html

    c = cluster(ROOT / "fixtures" / "reasons" / "hand" / "no_device.pbtxt", "--tf_xla_auto_jit=2",
                input_stage="graphdef")
    page, _ = report_html(c)
    assert "file://" not in page and 'href="docs/' not in page
    assert f'<span class="docs">{Code.NO_DEVICE.anchor}</span>' in page


def test_inlining_and_lowering_records_are_node_decisions():
    """The function runtime's rewrites record their decisions as NodeDecisions too: an If
    with TF's lowering attribute is lowered (hand-built: test_prepare's _if_graph), a call of
    a ``_noinline`` function stays a call with the reason as detail."""
    from test_prepare import ELEMENTWISE, _if_graph, fdef, signature_graph

    from jitsim.graph.graphedit import DT_FLOAT, EditGraph
    from jitsim.rewrites.function_inlining import inline_call
    from jitsim.rewrites.lower_functional_ops import lower_functional_ops

    (rec,) = lower_functional_ops(_if_graph(True), fetchable=False).lower_records
    assert isinstance(rec, NodeDecision) and rec.lowered and rec.code is Code.INLINE_AND_LOWER
    assert rec.node == "cond" and rec.created > 0
    inlined = inline_call(EditGraph.from_graph(signature_graph(ELEMENTWISE)), "StatefulPartitionedCall")
    assert inlined.inlined and inlined.code is Code.INLINE_AND_LOWER and inlined.reason == ""
    body = fdef("body", [("x", DT_FLOAT)], [("y", DT_FLOAT, "relu:activations:0")],
                [("relu", "Relu", ["x"], {"T": "DT_FLOAT"})], attrs={"_noinline": True})
    kept = inline_call(EditGraph.from_graph(signature_graph(body)), "StatefulPartitionedCall")
    assert not kept.inlined and "_noinline" in kept.reason and kept.reason == kept.detail


def test_a_functional_op_without_the_lowering_attribute_is_kept_with_its_own_code():
    """LowerFunctionalOpsPass lowers only ops with _lower_using_switch_merge=true (hand-built:
    the same If as above without the attribute): the record says the op was kept, under
    its own code, and why."""
    from test_prepare import _if_graph

    from jitsim.rewrites.lower_functional_ops import lower_functional_ops

    (rec,) = lower_functional_ops(_if_graph(False), fetchable=False).lower_records
    assert rec.code is Code.FUNCTIONAL_OP_KEPT and not rec.lowered and rec.node == "cond"
    assert rec.reason == "_lower_using_switch_merge is not set: TF keeps the functional op"


def test_prepare_steps_are_typed_by_their_rewrite_codes():
    """The TF-free route's account of its rewrites: each step is a Step whose code is the
    rewrite's (hand-built: test_prepare's signature graph, one call inlined, every node
    placed), and each Grappler step's record carries the same code."""
    from test_prepare import ELEMENTWISE, signature_graph

    from jitsim.frontend.prepare import STEPS, prepare_without_tf
    from jitsim.records import Step

    p = prepare_without_tf(signature_graph(ELEMENTWISE))
    # the graph records no _output_shapes, so shapes are inferred before Grappler runs
    expected = [Code(s) for s in STEPS]
    expected.insert(2, Code.SHAPE_INFERENCE)
    assert [s.code for s in p.steps] == expected
    assert all(isinstance(s, Step) and s.code.kind == "rewrite" for s in p.steps)
    assert p.steps[0][:2] == ("inline_and_lower", 1)
    for s in p.steps[3:]:
        assert p.records[s.code].code is s.code and p.records[s.code].count == s.count
