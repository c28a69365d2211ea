"""Every reason code, on a small graph where TensorFlow 2.21 makes that decision.

The cases live in fixtures/reasons/ (cases.toml, programs/, truth/ written by
fixtures/reasons/generate.py from real TF runs, hand/ for the few decisions TF cannot make
on a CPU build). For each example this checks that

(a) TF's own dumps show the decision (the node is in no TF cluster, the two nodes are in
    different TF clusters, a later pass took the node out, the graph was left alone...),
(b) ``jitsim explain`` reports the example's code for that node (or pair),
(c) with the evidence cases.toml expects, and
(d) TF's log for that graph has the catalogue's ``tf_log`` words for it.

Hand-built examples skip (a) and (d); cases.toml states TF's reasoning for each. Two codes
no graph can make TF 2.21 produce have dedicated tests below.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path

import pytest

from jitsim.explain.reasons import REASONS

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("jitsim_reason_examples", ROOT / "fixtures" / "reasons" / "examples.py")
X = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = X
_spec.loader.exec_module(X)

_STORE = X.Examples()
CASES = _STORE.cases
EXAMPLES = [e for e in _STORE.examples if CASES[e.case].kind != "unreachable"]
TF_EXAMPLES = [e for e in EXAMPLES if CASES[e.case].kind == "tf"]

MARK, AFTER = "mark_for_compilation", "encapsulate_subgraphs_before"
GRAPH_CODES = {"GRAPH_ALREADY_CLUSTERED", "GRAPH_NO_CANDIDATES", "GRAPH_CYCLE_GRAPH_FAILED"}
# decided by the passes after mark-for-compilation, on a node TF had clustered
LATER_CODES = {"INPUT_HOSTMEM", "SLICE_MADE_STATIC", "DECLUSTERED_DEVICE_TO_HOST_COPY", "DECLUSTERED_RECOMPILATION",
               "DECLUSTERED_CONST_CROSS_DEVICE", "DECLUSTERED_ROOT_SHAPE_CONSUMER"}
# decided after the candidate filter: TF made the node a candidate (no rejection logged for it)
CANDIDATE_CODES = {"CLUSTERED", "CLUSTER_TOO_SMALL", "FILL_DECLUSTERED"} | LATER_CODES - {"INPUT_HOSTMEM"}
# TF's log line for these does not name the node
UNNAMED_LOG_CODES = GRAPH_CODES | {"FUEL_EXHAUSTED", "INPUT_HOSTMEM"}


@pytest.fixture(scope="module")
def store():
    yield _STORE
    _STORE.close()


def _ids(items):
    return [e.id for e in items]


def _graphs():
    """Each kept TF graph once, with an example that names it."""
    seen, out = set(), []
    for ex in TF_EXAMPLES:
        if ex.exclude_ops:
            continue
        key = (ex.case, _STORE.graph(ex).id)
        if key not in seen:
            seen.add(key)
            out.append(ex)
    return out


TF_GRAPHS = _graphs()


# -- the catalogue is covered ----------------------------------------------------------------


def test_every_code_has_an_example():
    """A new node or merge code in jitsim/codes.py needs a case in fixtures/reasons/cases.toml."""
    codes = {e.code for e in _STORE.examples}
    assert set(REASONS) - codes == set(), "codes without an example"
    assert codes - set(REASONS) == set(), "examples of unknown codes"


def test_cases_are_complete():
    for case in CASES.values():
        if case.kind == "tf":
            assert case.program_path().exists(), case.name
            assert case.truth_path().exists(), f"{case.name}: run fixtures/reasons/generate.py --only {case.name}"
        elif case.kind == "hand":
            assert (X.ROOT / case.hand).exists() and case.why, case.name
        else:
            assert case.why and callable(globals().get(case.test)), case.name
    used = {e.case for e in _STORE.examples}
    assert used == set(CASES), f"cases without examples: {set(CASES) - used}"


def test_truth_is_small():
    total = sum(p.stat().st_size for p in (X.ROOT / "truth").glob("*.tar.xz"))
    assert total < 200_000, total


# -- TF and jitsim agree on every example graph --------------------------------------------------


def _partition(labels: dict) -> set[frozenset]:
    groups: dict[str, set] = {}
    for n, c in labels.items():
        if c is not None:
            groups.setdefault(c, set()).add(n)
    return {frozenset(g) for g in groups.values()}


@pytest.mark.parametrize("ex", TF_GRAPHS, ids=lambda e: f"{e.case}-{e.node}")
def test_jitsim_reproduces_tf_on_the_example_graph(store, ex):
    """The whole graph, not just the example's node: same clusters as TF after mark-for-compilation
    and after partially-decluster (TF's encapsulate_subgraphs_before dump)."""
    g = store.graph(ex)
    c = store.clustering(ex)
    mark = g.labels(MARK)
    if mark is not None:
        assert {frozenset(m) for m in c.mark.clusters.values()} == _partition(mark)
    after = g.labels(AFTER)
    assert after is not None
    assert _partition(c.labels()) == _partition(after)


# TF logs "unsupported function" for the call and the cause ("Rejecting <fn>: function depth limit
# exceeded.", "... could not instantiate call") on a separate line; jitsim reports the cause as the
# call's own code.
_CALL_CAUSES = {"FUNCTION_DEPTH_LIMIT", "FUNCTION_NOT_FOUND"}


@pytest.mark.parametrize("ex", TF_GRAPHS, ids=lambda e: f"{e.case}-{e.node}")
def test_every_decision_tf_logs_is_jitsims(store, ex):
    """Beyond the example's own node: every "Found uncompilable node N (op O): <why>" TF logs for
    a node of the graph matches the tf_log words of jitsim's code for N, and the refused merges
    TF logs ("Could not contract <A ...> -> <B ...> because <why>") are exactly jitsim's."""
    g = store.graph(ex)
    c = store.clustering(ex)
    decisions = c.mark.decisions
    tf_refusals = set()
    for line in g.log:
        m = re.search(r"Found uncompilable node (\S+) \(op \S+\): (.*)", line)
        if m and m.group(1) in decisions:  # (else a node inside a called function)
            code = decisions[m.group(1)].code
            if code in _CALL_CAUSES:
                code = "UNSUPPORTED_FUNCTION"
            assert REASONS[code].tf_log and _words(REASONS[code].tf_log).search(m.group(2)), (line, code)
        m = re.search(r"Could not contract <(\S+)[^>]*> -> <(\S+)[^>]*> because (.*)", line)
        if m:
            a, b, why = m.groups()
            codes = [r.code for r in c.refusals if (r.from_node, r.to_node) == (a, b)]
            assert any(_words(REASONS[k].tf_log).search(why) for k in codes), (line, codes)
            tf_refusals.add((a, b))
    assert {(r.from_node, r.to_node) for r in c.refusals} == tf_refusals


# -- (a) (b) (c) (d) per example ----------------------------------------------------------------


def _check_tf_decided(ex, g):
    """(a): TF's dumps show the decision."""
    mark, after = g.labels(MARK), g.labels(AFTER)
    node, code = ex.node, ex.code
    if code == "CLUSTERED":
        assert mark[node] is not None and after[node] is not None
    elif code == "WHATIF_EXCLUDED":
        assert mark[node] is not None, "TF clusters the op the what-if excludes"
    elif code in GRAPH_CODES:
        assert mark is None, "TF's pass stopped before clustering: it wrote no mark_for_compilation dump"
        assert not any(after.values())
        if code == "GRAPH_ALREADY_CLUSTERED":
            assert g.nodedef(X.INPUT_STAGES[0], ex.evidence["node"]).attr["_XlaAlreadyClustered"].b
    elif REASONS[code].kind == "merge":
        a, b = mark[node], mark[ex.other]
        assert a is None or a != b, f"TF put {node} and {ex.other} in one cluster"
    elif code == "SLICE_MADE_STATIC":
        assert mark[node] is not None and node not in after
        assert after[ex.evidence["replacement"]] == mark[node]
    elif code == "INPUT_HOSTMEM":
        assert list(g.nodedef(AFTER, node).attr["_input_hostmem"].list.i) == ex.evidence["input_hostmem"]
    elif code == "DECLUSTERED_DEVICE_TO_HOST_COPY":
        assert mark[node] is not None and after[node] == mark[node]
        clone = ex.evidence["clone"]
        assert clone not in mark and after[clone] is None
        assert any(i.split(":")[0] == clone for i in g.nodedef(AFTER, ex.evidence["consumer"]).input)
    elif code in LATER_CODES:
        assert mark[node] is not None and after[node] is None, "TF clustered it, then a later pass took it out"
    else:
        assert (mark is None or mark[node] is None) and after[node] is None


def _decision(c, ex):
    """(b): jitsim's explanation of the example (node, pair or graph); returns its evidence."""
    code = ex.code
    if REASONS[code].kind == "merge":
        pair = c.explain(ex.node, ex.other)
        assert not pair.together and code in pair.codes, str(pair)
        r = next((r for r in c.refusals if (r.code, r.from_node, r.to_node) == (code, ex.node, ex.other)), None)
        assert r is not None, f"no {code} refusal {ex.node} -> {ex.other}: {[x.to_dict() for x in c.refusals]}"
        return dict(r.evidence, detail=r.detail)
    if code == "GRAPH_NO_CANDIDATES":
        # every node has its own, more specific reason; the graph-level decision says why TF stopped
        assert c.graph_decision is not None and c.graph_decision.code == code
        assert c.to_dict()["graph_decision"]["code"] == code
        assert c.explain(ex.node).code not in ("CLUSTERED", "CLUSTER_TOO_SMALL")
        return dict(c.graph_decision.evidence, detail=c.graph_decision.detail)
    e = c.explain(ex.node)
    if c.nodes[ex.node].removed:  # deleted by a later pass (SLICE_MADE_STATIC): its record says why
        assert e.removed and e.code == code and "no longer in the graph" in str(e), str(e)
    if ex.field == "inner_code":
        assert e.evidence.get("inner_code") == code, str(e)
    elif ex.field == "history":  # an annotation by a later pass, not the node's final reason
        h = next((h for h in e.history if h["code"] == code), None)
        assert h is not None and code in str(e), str(e)
        return dict(h["evidence"], detail=h["detail"])
    elif code == "CLUSTERED":
        assert e.code == code and e.cluster is not None and f"is in {e.cluster}" in str(e), str(e)
    else:
        assert e.code == code, str(e)
        assert f"{code}:" in str(e) and REASONS[code].anchor in str(e)
    return dict(e.evidence, detail=e.detail)


def _check_evidence(ev: dict, ex):
    """(c)"""
    for k, v in ex.evidence.items():
        assert k in ev and ev[k] == v, f"evidence {k}: expected {v!r}, jitsim says {ev.get(k)!r}"
    for k, v in ex.evidence_like.items():
        assert k in ev and v in str(ev[k]), f"evidence {k}: expected to contain {v!r}, jitsim says {ev.get(k)!r}"


def _words(tf_log: str) -> re.Pattern:
    """The catalogue's TF words as a pattern: ``<...>`` stands for a name TF fills in."""
    return re.compile(".*?".join(re.escape(p) for p in re.split(r"<[^<>]*>", tf_log)))


def _check_tf_log(ex, g, c):
    """(d): TF logged the reason's words for this node (or merge)."""
    log = g.log
    r = REASONS[ex.code]
    if r.tf_log:
        words = _words(r.tf_log)
        lines = [line for line in log if words.search(line)]
        assert lines, f"TF's log has no line with {r.tf_log!r}:\n" + "\n".join(log)
        if r.kind == "merge":
            want = f"Could not contract <{ex.node} "
            assert any(want in line and f"-> <{ex.other} " in line for line in lines), lines
        elif ex.field == "inner_code":
            inner = c.explain(ex.node).evidence["inside"][-1].split("/", 1)[1]
            assert any(f"node {inner} " in line for line in lines), lines
        elif ex.code not in UNNAMED_LOG_CODES:
            named = re.compile(rf"(?<![\w/]){re.escape(ex.node)}(?![\w/])")
            assert any(named.search(line) for line in lines), lines
    if ex.log:
        assert any(ex.log in line for line in log), f"TF's log has no {ex.log!r}:\n" + "\n".join(log)
    if ex.code in CANDIDATE_CODES:
        rejected = [line for line in log if f"uncompilable node {ex.node} (" in line or f"Rejecting {ex.node}:" in line]
        assert not rejected, f"TF rejected {ex.node} as a candidate: {rejected}"


@pytest.mark.parametrize("ex", EXAMPLES, ids=_ids(EXAMPLES))
def test_example(store, ex):
    case = CASES[ex.case]
    c = store.clustering(ex)
    if case.kind == "tf":
        g = store.graph(ex)
        _check_tf_decided(ex, g)
    ev = _decision(c, ex)
    assert ev is not None, f"jitsim explain cannot name {ex.node}"
    _check_evidence(ev, ex)
    if case.kind == "tf":
        _check_tf_log(ex, g, c)


@pytest.mark.parametrize("ex", [e for e in EXAMPLES if e.code in ("MERGE_CYCLE", "UNSUPPORTED_OP", "INPUT_HOSTMEM",
                                                                  "NO_JIT_DEVICE", "WHATIF_EXCLUDED")],
                         ids=lambda e: e.id)
def test_cli_explain_reports_the_code(store, ex, capsys):
    from jitsim.cli import main

    argv = ["explain", str(store.input_path(ex)), ex.node] + ([ex.other] if ex.other else [])
    argv += ["--no-default-flags", "--tf-xla-flags", CASES[ex.case].flags, "--format", "json"]
    if CASES[ex.case].hand:  # a hand-built graph stands for TF's pass input: taken as it is
        argv += ["--input-stage", X.HAND_INPUT_STAGE]
    for op in ex.exclude_ops:
        argv += ["--exclude-op", op]
    assert main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    if ex.other:
        assert ex.code in [m["code"] for m in out["refused_merges"]]
    elif ex.field == "history":
        assert ex.code in [h["code"] for h in out["history"]]
    else:
        assert out["code"] == ex.code and out["reason"]["docs"] == REASONS[ex.code].anchor


# -- codes no graph makes TF 2.21 produce ----------------------------------------------------------


def test_source_and_sink_are_never_candidates(store):
    """SOURCE_OR_SINK: TF's RecursiveCompilabilityChecker::IsCompilableNode rejects
    ``node.IsSource() || node.IsSink()``, but MarkForCompilationPassImpl::FindCompilationCandidates
    only walks op nodes. TF's log shows it: "sorted_nodes.size() = N" where N is the number of op
    nodes of the graph the pass saw, and jitsim's candidate filter records exactly those N
    decisions, none for _SOURCE/_SINK. So the code is catalogued but never reported."""
    from jitsim.registry import protos
    from jitsim.analyses.compilability import CompilabilityChecker

    checked = 0
    for ex in TF_EXAMPLES:
        g = store.graph(ex)
        sizes = [int(m.group(1)) for line in g.log for m in [re.search(r"sorted_nodes.size\(\) = (\d+)", line)] if m]
        c = store.clustering(ex)
        if not sizes or not c.mark.decisions or ex.exclude_ops:
            continue
        assert "_SOURCE" not in c.mark.decisions and "_SINK" not in c.mark.decisions
        assert len(c.mark.decisions) == sizes[0], ex.id
        checked += 1
    assert checked >= 20
    nd = protos.NodeDef(name="_SOURCE", op="_SOURCE")
    assert CompilabilityChecker(protos.FunctionDefLibrary()).check_node(nd).code == "SOURCE_OR_SINK"


def test_cluster_not_compiled_is_recorded_when_the_cluster_policy_says_no(monkeypatch):
    """CLUSTER_NOT_COMPILED: MarkForCompilationPassImpl::ShouldCompileCluster re-applies the
    autoclustering policy of the device a cluster compiles for. In TF 2.21 every member already
    passed the same policy as a candidate (else POLICY_NOT_ENABLED) and clusters only span
    compatible devices, so TF never refuses a cluster here; this forces the cluster-level check
    to say no (as TF's would log "Not compiling cluster with device ...") on hand/no_device.pbtxt
    placed on the CPU, and checks that jitsim records and explains it."""
    from jitsim.explain.clustering import cluster
    from jitsim.passes.mark_for_compilation import MarkForCompilation

    path = X.ROOT / "hand" / "no_device.pbtxt"
    flags = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
    assert cluster(path, flags=flags, device="cpu").explain("Tanh").code == "CLUSTERED"
    monkeypatch.setattr(MarkForCompilation, "should_compile_cluster", lambda self, c: False)
    c = cluster(path, flags=flags, device="cpu")
    e = c.explain("Tanh")
    assert e.code == "CLUSTER_NOT_COMPILED" and e.cluster is None
    assert e.evidence["cluster_size"] >= 4 and REASONS["CLUSTER_NOT_COMPILED"].anchor in str(e)
    assert not c.clusters
