"""Why a compiled unit recompiles (``jitsim explain GRAPH UNIT --shapes S``), the run-time
timeline in the HTML report (``jitsim report --shapes``), nested loop counts, and every case of
the run-time corpus predicted from TF's dumped pass input (no TF needed).

Expected numbers come from TF 2.21's measured log of the same program and stream
(``fixtures/runtime/results.json``, written by ``fixtures/runtime/measure.py``), or from the
stream itself where the test checks a trace (which input changed between two steps).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jitsim.runtime import policy as pol
from jitsim.runtime.stream import read_stream

ROOT = Path(__file__).resolve().parents[1]
RT = ROOT / "fixtures" / "runtime"
RESULTS = json.loads((RT / "results.json").read_text())
CASES = {c["name"]: c for c in RESULTS["cases"]}
ENV = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "COLUMNS": "200"}


def _graph(case: dict) -> Path:
    return RT / "graphs" / (Path(case["program"]).stem + ".pbtxt")


def _jitsim(*argv):
    return subprocess.run([sys.executable, "-m", "jitsim", *map(str, argv), "--tf", "never"], capture_output=True,
                          text=True, env=ENV, cwd=ROOT)


def _explain(case_name: str, unit: str, *extra):
    case = CASES[case_name]
    p = _jitsim("explain", _graph(case), unit, "--shapes", RT / case["stream"], "--tf-xla-flags", case["flags"],
                "--no-default-flags", *extra)
    assert p.returncode == 0, p.stderr
    return p


def _tf_unit(case_name: str, prefix: str) -> dict:
    """TF's measured unit whose function is ``prefix`` (a cluster) or starts with it."""
    tf = CASES[case_name]["tf"]
    return tf[prefix] if prefix in tf else next(v for k, v in tf.items() if k.startswith(prefix))


def _stream_inputs(case_name: str) -> dict:
    return {s.step: s.entries for s in read_stream(RT / CASES[case_name]["stream"])}


# -- explain --shapes ----------------------------------------------------------------------

def test_explain_attention_recompiles_traced_to_the_length():
    """attention_seqlen over 40 lengths: TF compiled cluster_0 at its logged steps. Each compile
    after the first is a signature the cache lacked: against the compile before it, the
    declustered Shape(x) constant changed value and x's shape changed in dim 1, both traced to
    x.shape[1], whose before/after are the stream's lengths at the two steps."""
    doc = json.loads(_explain("attention_seqlen_many", "cluster_0", "--format", "json").stdout)
    tf = _tf_unit("attention_seqlen_many", "cluster_0")
    assert doc["schema"] == "jitsim.recompile/1"
    assert doc["unit"]["compile_steps"] == tf["compile_steps"]
    assert doc["unit"]["megamorphic_at_step"] == tf["megamorphic_at_step"]
    recs = doc["recompiles"]
    assert [r["step"] for r in recs] == tf["compile_steps"]
    assert recs[0]["code"] == pol.FIRST_EXECUTION and "changes" not in recs[0]
    ins = _stream_inputs("attention_seqlen_many")
    for prev, rec in zip(recs, recs[1:]):
        assert rec["code"] == pol.SECOND_REQUEST and rec["previous_step"] == prev["step"]
        codes = {c["argument"]: c["code"] for c in rec["changes"]}
        assert codes == {"shape_0_arg": "CONSTANT_VALUE", "x_0_arg": "ARG_SHAPE"}
        before, after = ins[prev["step"]]["x"][0][1], ins[rec["step"]]["x"][0][1]
        for c in rec["changes"]:
            assert c["traced"]
            assert c["inputs"] == [{"code": "INPUT_DIM", "input": "x", "dim": 1, "before": before, "after": after}]
    assert [c["input"] for c in doc["follows"]] == ["x.shape[1]"]


def test_explain_integer_input_value():
    """reshape_value: rows feeds Reshape's shape, a constant argument: each recompile is a
    CONSTANT_VALUE change traced to the stated value of rows (INPUT_VALUE)."""
    doc = json.loads(_explain("reshape_value", "cluster_0", "--format", "json").stdout)
    tf = _tf_unit("reshape_value", "cluster_0")
    assert [r["step"] for r in doc["recompiles"]] == tf["compile_steps"]
    ins = _stream_inputs("reshape_value")
    for rec in doc["recompiles"][1:]:
        (ch,) = rec["changes"]
        assert ch["code"] == "CONSTANT_VALUE" and ch["traced"]
        (src,) = ch["inputs"]
        assert src["code"] == "INPUT_VALUE" and src["input"] == "rows"
        assert src["before"] == [int(ins[rec["previous_step"]]["rows"][1])]
        assert src["after"] == [int(ins[rec["step"]]["rows"][1])]


def test_explain_must_compile_call_by_function_name():
    """jit_inner: the jit_compile=True function 'inner' (found by its function's name) compiles
    every new batch at once (STRICT_NEW_SIGNATURE) at TF's logged steps."""
    doc = json.loads(_explain("jit_inner", "inner", "--format", "json").stdout)
    tf = _tf_unit("jit_inner", "__inference_inner")
    assert doc["unit"]["kind"] == "must-compile"
    assert [r["step"] for r in doc["recompiles"]] == tf["compile_steps"]
    assert {r["code"] for r in doc["recompiles"]} == {pol.STRICT_NEW_SIGNATURE}


def test_explain_suggestions_agree_with_tf_runs_of_them():
    """The suggestions are simulated; two of them were also run under TF: the bucketed stream
    (case attention_seqlen_bucketed) and lazy compilation off (attention_seqlen_many_strict).
    Their simulated 'after' numbers equal TF's measured ones; 'before' equals TF's own run."""
    doc = json.loads(_explain("attention_seqlen_many", "cluster_0", "--format", "json").stdout)
    sg = {s["name"]: s for s in doc["suggestions"]}
    base = _tf_unit("attention_seqlen_many", "cluster_0")
    bucket = _tf_unit("attention_seqlen_bucketed", "cluster_0")
    strict = _tf_unit("attention_seqlen_many_strict", "cluster_0")
    assert sg["bucket"]["before"]["compiles"] == base["compiles"]
    assert sg["bucket"]["before"]["fallbacks"] == len(base["fallback_steps"])
    assert sg["bucket"]["after"]["compiles"] == bucket["compiles"]
    assert sg["bucket"]["after"]["fallbacks"] == len(bucket["fallback_steps"])
    assert sg["lazy-off"]["after"]["compiles"] == strict["compiles"]
    assert sg["lazy-off"]["after"]["fallbacks"] == len(strict["fallback_steps"]) == 0
    assert sg["pad-to-max"]["after"]["compiles"] == 1  # one shape for the whole stream
    assert "input_signature" in sg["pad-to-max"]["caveat"]


def test_explain_text_answer_first_and_all():
    """The text starts with the answer (compiles, steps, what the signature follows); 8
    compiles are listed, then a count; --all lists every one."""
    tf = _tf_unit("attention_seqlen_many", "cluster_0")
    out = _explain("attention_seqlen_many", "cluster_0").stdout.splitlines()
    head = next(ln for ln in out if ln.startswith("cluster_0 "))
    assert f"compiles {tf['compiles']} times over 80 steps" in head and "follows x.shape[1]" in head
    assert sum(ln.startswith("  compile ") for ln in out) == 8
    assert any(f"{tf['compiles'] - 8} more compiles (--all" in ln for ln in out)
    every = _explain("attention_seqlen_many", "cluster_0", "--all").stdout.splitlines()
    assert sum(ln.startswith("  compile ") for ln in every) == tf["compiles"]


def test_explain_shapes_bad_usage_is_one_line():
    case = CASES["attention_seqlen_many"]
    for argv, problem in (((_graph(case), "cluster_9"), "names no compiled unit"),
                          ((_graph(case), "cluster_0", "MatMul"), "give one cluster")):
        p = _jitsim("explain", *argv, "--shapes", RT / case["stream"])
        assert p.returncode == 2 and problem in p.stderr
        assert len(p.stderr.strip().splitlines()) == 1 and "Traceback" not in p.stderr


# -- report --shapes -----------------------------------------------------------------------

def test_report_shows_the_runtime_timeline(tmp_path):
    """jit_inner's report with its stream: a run-time section with the timeline inline (one
    cell per execution of each of TF's three units) and a row per unit with TF's compiles."""
    case = CASES["jit_inner"]
    p = _jitsim("report", _graph(case), "--shapes", RT / case["stream"], "-o", tmp_path / "r")
    assert p.returncode == 0, p.stderr
    page = (tmp_path / "r" / "index.html").read_text()
    sec = page[page.index('<section id="runtime">'):]
    sec = sec[:sec.index("</section>")]
    executions = sum(len(u["compiled_steps"]) + len(u["fallback_steps"]) for u in case["tf"].values())
    assert sec.count("<rect") - 3 == executions  # 3: the legend's swatches
    rows = sec[sec.index("<tbody>"):].split("<tr>")[1:]
    assert len(rows) == len(case["tf"])
    assert sorted(int(r.split("<td>")[4].split("<")[0]) for r in rows) == sorted(u["compiles"]
                                                                                  for u in case["tf"].values())
    assert "href" not in sec and "http" not in sec.replace('xmlns="http://www.w3.org/2000/svg"', "")  # self-contained


# -- the corpus, predicted from TF's dumped pass input --------------------------------------

@pytest.mark.parametrize("name", sorted(CASES))
def test_corpus_case_predicted_from_the_dump_equals_tf(name):
    """Every measured case: jitsim's prediction from graphs/<program>.pbtxt (TF's pass input,
    no TF run) equals TF's logged compiles, compile steps, fallback steps, megamorphic step
    and distinct signatures, unit by unit (jitsim.runtime.compare)."""
    from jitsim.explain.clustering import cluster
    from jitsim.runtime.compare import compare
    from jitsim.runtime.simulate import runtime

    case = CASES[name]
    c = cluster(str(_graph(case)), flags=case["flags"], until="build-xla-ops", tf="never")
    pred = runtime(c.pipeline, c.options, read_stream(RT / case["stream"])).to_dict()
    cmp = compare(pred, case["tf"])
    assert cmp["identical"], [u for u in cmp["units"] if not u["identical"]]


def test_nested_loop_counted_per_outer_iteration():
    """nested_loops: the inner loop runs j < i + 1 for i < n, so the inner body's cluster runs
    n(n+1)/2 times per step; TF logged exactly that many executions."""
    from jitsim.explain.clustering import cluster
    from jitsim.runtime.simulate import runtime

    case = CASES["nested_loops"]
    stream = read_stream(RT / case["stream"])
    c = cluster(str(_graph(case)), flags=case["flags"], until="build-xla-ops", tf="never")
    res = runtime(c.pipeline, c.options, stream)
    (r,) = res.units
    tf = case["tf"]["cluster_0"]
    n = [int(s.entries["n"][1]) for s in stream]
    assert len(r.policy.history) == sum(k * (k + 1) // 2 for k in n)
    assert len(r.policy.history) == len(tf["compiled_steps"]) + len(tf["fallback_steps"])
    assert not any("could not count" in note for note in res.notes)


EXPLAIN_BLOCKS = __import__("re").findall(r"```\n\$ (jitsim explain [^\n]*--shapes[^\n]*)\n(.*?)```",
                                          (ROOT / "docs" / "runtime.md").read_text(), __import__("re").S)


@pytest.mark.parametrize("cmd, shown", EXPLAIN_BLOCKS, ids=[c[:70] for c, _ in EXPLAIN_BLOCKS])
def test_docs_explain_examples_are_current(cmd, shown):
    """docs/runtime.md's `explain --shapes` output, run on TF's dump of the same program: every
    shown line is printed, in order (a line ending in '...' is a prefix; '...' alone skips)."""
    import shlex

    assert EXPLAIN_BLOCKS
    argv = shlex.split(cmd)[2:]
    graph = RT / "graphs" / (Path(argv[0]).stem + ".pbtxt")
    p = _jitsim("explain", graph, *argv[1:])
    assert p.returncode == 0, p.stderr
    out = [ln.rstrip() for ln in p.stdout.splitlines()]
    i = 0
    for line in shown.rstrip("\n").splitlines():
        if line.strip() == "...":
            continue
        want = line.rstrip()
        while i < len(out) and out[i] != want and not (want.endswith("...") and (
                out[i].startswith(want[:-3]) or all(part in out[i] for part in want[:-3].split("...")))):
            i += 1
        assert i < len(out), f"not printed (in order): {line!r}"
        i += 1


def test_explain_shapes_json_is_byte_identical_and_documented():
    """Two runs (other hash seeds) give the same bytes, and docs/json.md's jitsim.recompile/1
    section names every top-level field."""
    import re

    case = CASES["jit_inner"]
    argv = [sys.executable, "-m", "jitsim", "explain", str(_graph(case)), "cluster_1", "--shapes",
            str(RT / case["stream"]), "--tf", "never", "--format", "json"]
    outs = [subprocess.run(argv, capture_output=True, env={**ENV, "PYTHONHASHSEED": seed}, cwd=ROOT).stdout
            for seed in ("1", "2")]
    assert outs[0] == outs[1]
    doc = json.loads(outs[0])
    section = re.search(r"^## `jitsim.recompile/1`\n(.*?)(?=^## |\Z)", (ROOT / "docs" / "json.md").read_text(),
                        re.S | re.M).group(1)
    assert [k for k in doc if f"`{k}`" not in section] == []


def test_report_bad_stream_is_one_line_and_writes_nothing(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"x": [2, 8]}\nnot json\n')
    case = CASES["mlp_batch"]
    p = _jitsim("report", _graph(case), "--shapes", bad, "-o", tmp_path / "r")
    assert p.returncode == 2 and "line 2: not JSON" in p.stderr
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


@pytest.mark.parametrize("case_name, suggestion, measured", [
    ("attention_seqlen_many_strict", "lazy-on", "attention_seqlen_many"),
    ("attention_seqlen_always_defer", "defer-off", "attention_seqlen_few"),
])
def test_policy_suggestions_equal_tf_runs_with_that_policy(case_name, suggestion, measured):
    """A policy suggestion re-simulates the same stream under another policy; TF ran that
    stream under that policy too (the other case): the re-run's numbers are TF's."""
    doc = json.loads(_explain(case_name, "cluster_0", "--format", "json").stdout)
    after = next(s for s in doc["suggestions"] if s["name"] == suggestion)["after"]
    tf = _tf_unit(measured, "cluster_0")
    assert CASES[case_name]["stream"] == CASES[measured]["stream"]
    assert after["compiles"] == tf["compiles"]
    assert after["fallbacks"] == len(tf["fallback_steps"])
    assert after["megamorphic_at_step"] == tf["megamorphic_at_step"]


# -- the static answer, for every unit TF recompiled -----------------------------------------

def _changes(steps: dict, follows: str) -> bool:
    """Whether the stream changes what ``follows`` names: ``NAME.shape[i]`` (that dim of input
    NAME) or ``value of NAME`` (its value), between any two steps that give it."""
    import re

    m = re.fullmatch(r"(.+)\.shape\[(\d+)\]", follows)
    seen = set()
    for entries in steps.values():
        if m:
            shape, _ = entries.get(m.group(1), (None, None))
            if shape is not None and int(m.group(2)) < len(shape):
                seen.add(shape[int(m.group(2))])
        elif follows.startswith("value of "):
            _, value = entries.get(follows[len("value of "):], (None, None))
            if value is not None:
                seen.add(repr(getattr(value, "tolist", lambda: value)()))
    return len(seen) > 1


@pytest.mark.parametrize("name", sorted(CASES))
def test_static_answer_names_a_varying_input_for_every_recompiling_unit(name):
    """Issue 24's promise for the static answer (no stream): every unit TF compiled more than
    once in the measured run has an argument the static answer says varies, and at least one
    input dimension or value it names really changes over the case's stream."""
    from jitsim.explain.clustering import cluster
    from jitsim.runtime.compare import compare
    from jitsim.runtime.simulate import runtime

    case = CASES[name]
    c = cluster(str(_graph(case)), flags=case["flags"], until="build-xla-ops", tf="never")
    pred = runtime(c.pipeline, c.options, read_stream(RT / case["stream"])).to_dict()
    static = {u["name"]: u for u in runtime(c.pipeline, c.options, None).to_dict()["clusters"]}
    steps = _stream_inputs(name)
    matched = compare(pred, case["tf"])["units"]
    recompiling = [u["name"] for u in matched if u["fields"]["compiles"]["tf"] > 1]
    for unit in recompiling:
        follows = [f for v in static[unit]["varies"] for f in v["follows"]]
        assert follows, (unit, static[unit])
        assert any(_changes(steps, f) for f in follows), (unit, follows)
