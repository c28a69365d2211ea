"""jitsim runtime: TF's per-signature compile / lazy fallback / megamorphic rules, signatures
per step from a shape stream, the static answer, the command, and (marked tf) real TF.

Hand-derived expectations state their reasoning. The rules (device_compilation_profiler.cc,
device_compiler.h): each execution counts first; a cluster with more than 10 compiles and
fewer than 50 executions per compile becomes megamorphic (sticky); a signature compiled
before runs compiled; else strict mode compiles, a megamorphic cluster falls back, the
cluster's very first execution compiles, and lazy mode compiles a signature at its second
request (falls back at its first).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from jitsim.errors import JitsimError
from jitsim.runtime import policy as pol
from jitsim.runtime.compare import compare
from jitsim.runtime.stream import read_stream
from jitsim.runtime.table import ranges
from jitsim.runtime.tflog import parse_log

ROOT = Path(__file__).resolve().parents[1]
RT = ROOT / "fixtures" / "runtime"


# -- the policy --------------------------------------------------------------------------

def test_forty_lengths_two_passes_go_megamorphic():
    """Lengths L0..L39 then L0..L39 again (80 steps). Step 0 compiles (first execution);
    steps 1-39 are first requests: fallback. Step 40 (L0) is compiled already: cached. Steps
    41-50 are second requests of L1..L10: compiles 2..11. At step 51 the execution count is
    52, compiles 11 > 10 and 52 < 50*11: megamorphic, so L11..L39 (steps 51-79) fall back
    although they are second requests. Measured identically under TF 2.21 (results.json)."""
    p = pol.simulate([i % 40 for i in range(80)])
    assert p.steps(pol.COMPILED) == [0] + list(range(41, 51))
    assert p.megamorphic_at_step == 51
    assert p.steps(pol.FALLBACK) == list(range(1, 40)) + list(range(51, 80))
    assert p.steps(pol.CACHED) == [40]
    assert p.compile_count == 11


def test_lazy_second_request_compiles_however_far_apart():
    """A then B (fallback: first request) ... B again 10 steps later compiles; A is cached."""
    p = pol.simulate(["A", "B"] + ["A"] * 9 + ["B", "B"])
    assert p.steps(pol.COMPILED) == [0, 11]
    assert p.steps(pol.FALLBACK) == [1]
    assert p.steps(pol.CACHED) == list(range(2, 11)) + [12]


def test_strict_compiles_every_new_signature_and_megamorphic_changes_nothing():
    """14 distinct batches, then repeats (the jit_compile call of jit_inner): strict compiles
    each at its first request (steps 0-13). The 12th execution (step 11) finds 11 compiles
    > 10 and 12 < 550: TF marks the unit megamorphic, which strict mode ignores."""
    p = pol.simulate([i % 14 for i in range(30)], mode=pol.STRICT)
    assert p.steps(pol.COMPILED) == list(range(14))
    assert p.steps(pol.FALLBACK) == []
    assert p.megamorphic_at_step == 11


def test_megamorphic_cached_signatures_still_run_compiled():
    """s_0 twice, then s_1..s_11 twice each, then s_0 (25 steps). Step 0 compiles (first
    execution), step 1 is cached; s_k (k >= 1) falls back at step 2k (first request) and
    compiles at 2k+1 (second), the (k+1)-th compile. s_10's compile at step 21 is the 11th.
    Step 22 is execution 23: 11 > 10 compiles and 23 < 550, megamorphic: s_11 falls back at
    both its requests (22, 23), but s_0, compiled at step 0, still runs compiled at step 24."""
    sigs = [0, 0] + [k for k in range(1, 12) for _ in (0, 1)] + [0]
    p = pol.simulate(sigs)
    assert p.steps(pol.COMPILED) == [0] + [2 * k + 1 for k in range(1, 11)]
    assert p.megamorphic_at_step == 22
    assert p.steps(pol.FALLBACK) == [2 * k for k in range(1, 11)] + [22, 23]
    assert p.steps(pol.CACHED) == [1, 24]


def test_megamorphic_threshold_counts_executions():
    """More than 10 compiles is not enough with many executions per compile: 11 signatures,
    each repeated 60 times in strict mode: at each compile the executions (60k+1) are at least
    50 * compiles, so the unit never becomes megamorphic."""
    p = pol.simulate([k for k in range(11) for _ in range(60)], mode=pol.STRICT)
    assert p.compile_count == 11
    assert p.megamorphic_at_step is None


def test_deferred_never_compiles_and_registers_nothing():
    """--tf_xla_always_defer_compilation: XlaCompileOp skips the compiler, so every execution
    falls back and the profiler never counts one (no megamorphic marking either)."""
    p = pol.simulate([i % 20 for i in range(60)], mode=pol.DEFERRED)
    assert p.compile_count == 0 and p.execution_count == 0 and len(p.steps(pol.FALLBACK)) == 60


def test_async_compile_queues_and_falls_back():
    """Async (threshold 0): each new signature's compile is queued at its first request and
    that execution falls back; jitsim assumes it is done by the next request."""
    p = pol.simulate(["A", "B", "A", "B"], mode=pol.ASYNC)
    assert p.steps(pol.COMPILED) == [0, 1]
    assert [e.compiled_run for e in p.history] == [False, False, True, True]


def test_ranges():
    assert ranges([0, 41, 42, 43, 50]) == "0, 41-43, 50"
    assert ranges([]) == "-"


# -- the shape stream --------------------------------------------------------------------

@pytest.mark.parametrize("text, problem", [
    ("not json\n", "line 1: not JSON"),
    ("[1, 2]\n", "line 1: a step is a JSON object"),
    ('{"x": [2, -1]}\n', "dimensions must be 0 or more"),
    ('{"x": "2,3"}\n', "a shape is a list of integers"),
    ('{"x": [2]}\n{"n": {"shape": [], "val": 3}}\n', "line 2: 'n': unknown key(s) val"),
    ('{"n": {"shape": [2], "value": 3}}\n', "value must be integers (or booleans) of shape [2]"),
    ("# only a comment\n\n", "no steps"),
    ('{"while": {"iterations": -1}}\n', "a loop's entry is {\"iterations\": N} with N 0 or more"),
])
def test_stream_errors(tmp_path, text, problem):
    p = tmp_path / "s.jsonl"
    p.write_text(text)
    with pytest.raises(JitsimError) as e:
        read_stream(p)
    assert problem in str(e.value)


def test_stream_reads_shapes_values_and_skips_comments(tmp_path):
    p = tmp_path / "s.jsonl"
    p.write_text('# two steps\n{"x": [2, 3]}\n\n{"x": [4, 3], "n": {"value": [1, 2]}}\n')
    steps = read_stream(p)
    assert [s.step for s in steps] == [0, 1] and [s.line for s in steps] == [2, 4]
    assert steps[1].entries["n"][0] == (2,) and steps[1].entries["n"][1].tolist() == [1, 2]


# -- TF's log ----------------------------------------------------------------------------

LOG = """\
=== jitsim step 0 ===
I0000 device_compiler.h:551] Instantly compiling for signature: cluster_0[_XlaNumConstantArgs=1]; Tensor<type: int32 shape: [3] values: 2 5 16>,float [2,5,16]
I0000 device_compilation_profiler.cc:113] Compiled cluster_0 1 times, compile time: 1 us
=== jitsim step 1 ===
I0000 device_compiler.h:541] Not compiling for signature: cluster_0[_XlaNumConstantArgs=1]; Tensor<type: int32 shape: [3] values: 2 6 16>,float [2,6,16]
I0000 device_compiler.h:551] Instantly compiling for signature: __inference_inner_24[],float [1,8]
=== jitsim step 2 ===
I0000 device_compilation_profiler.cc:54] Marking cluster_0 as megamorphic, compile_count=11 execution_count=52
I0000 device_compiler.h:557] Already Compiled for signature: cluster_0[_XlaNumConstantArgs=1]; Tensor<type: int32 shape: [3] values: 2 5 16>,float [2,5,16]
"""


def test_parse_log_async_lines():
    log = ("=== jitsim step 0 ===\nI0000 device_compiler.h:544] Queueing asynchronous compilation for signature: "
           "cluster_0[]; float [2]\n=== jitsim step 1 ===\nI0000 device_compiler.h:558] Ongoing asynchronous "
           "compilation for signature: cluster_0[]; float [2]\n")
    c = parse_log(log)["cluster_0"]
    assert c["compile_steps"] == [0] and c["fallback_steps"] == [0, 1] and c["compiled_steps"] == []


def test_parse_log():
    d = parse_log(LOG)
    c = d["cluster_0"]
    assert c["compile_steps"] == [0] and c["fallback_steps"] == [1] and c["compiled_steps"] == [0, 2]
    assert c["megamorphic_at_step"] == 2 and len(c["signatures"]) == 2
    assert d["__inference_inner_24"]["compile_steps"] == [1]


# -- the simulation on TF's own pass input (no TF needed) --------------------------------

def _runtime(graph: str, stream: str | None, *extra):
    cmd = [sys.executable, "-m", "jitsim", "runtime", str(RT / "graphs" / graph), "--format", "json", "--tf", "never",
           *extra]
    if stream:
        cmd += ["--shapes", str(stream)]
    p = subprocess.run(cmd, capture_output=True, text=True, env={"PYTHONPATH": str(ROOT / "src"),
                                                                    "PATH": "/usr/bin:/bin"})
    return p


def test_cli_attention_many_lengths_matches_the_policy():
    """attention_seqlen: PartiallyDecluster leaves Shape(x) outside cluster_0, whose value
    (Reshape's shape) is a constant argument: the signature is (x.shape as a value, x's
    shape, W). 40 lengths in two passes: the first test's numbers."""
    p = _runtime("attention_seqlen.pbtxt", RT / "streams" / "seqlen_many.jsonl")
    assert p.returncode == 0, p.stderr
    d = json.loads(p.stdout)
    assert d["schema"] == "jitsim.runtime/1" and d["steps"] == 80
    (c,) = d["clusters"]
    assert c["name"] == "cluster_0" and c["kind"] == "auto" and c["mode"] == "lazy"
    assert c["compile_steps"] == [0] + list(range(41, 51)) and c["megamorphic_at_step"] == 51
    assert len(c["signatures"]) == 40
    assert c["signatures"][0]["args"] == ["int32[3] = [2, 5, 16]", "float [2, 5, 16]", "resource (variable [16, 16])"]
    assert [a["kind"] for a in c["args"]] == ["constant", "parameter", "resource"]


def test_cli_lazy_off_is_strict():
    p = _runtime("attention_seqlen.pbtxt", RT / "streams" / "seqlen_many.jsonl",
                 "--tf-xla-flags", "--tf_xla_enable_lazy_compilation=false")
    assert p.returncode == 0, p.stderr
    (c,) = json.loads(p.stdout)["clusters"]
    assert c["mode"] == "strict" and c["compile_steps"] == list(range(40)) and c["fallback_steps"] == []


def test_cli_static_answer_names_the_input_dims():
    """Without a stream: the constant argument (x's shape) follows x.shape[0] and x.shape[1];
    x's own shape its dims 0 and 1 (dim 2 is 16 in the signature)."""
    p = _runtime("attention_seqlen.pbtxt", None)
    assert p.returncode == 0, p.stderr
    (c,) = json.loads(p.stdout)["clusters"]
    assert c["compiles"] is None
    varies = {(v["arg"], v["what"]): v["follows"] for v in c["varies"]}
    assert varies == {("shape_0_arg", "value"): ["x.shape[0]", "x.shape[1]"],
                      ("x_0_arg", "shape[0]"): ["x.shape[0]"], ("x_0_arg", "shape[1]"): ["x.shape[1]"]}


def test_cli_integer_input_value_is_a_constant_argument():
    """reshape_value: rows feeds Reshape's shape, so its value is cluster_0's constant
    argument. rows = 2,2,3,3,4,4,6,6 repeated at one x shape: four signatures; lazy:
    compile at 0 (first), fallback at 2, 4, 6 (first requests of 3, 4, 6), compile at 3, 5, 7."""
    p = _runtime("reshape_value.pbtxt", RT / "streams" / "rows_values.jsonl")
    assert p.returncode == 0, p.stderr
    (c,) = json.loads(p.stdout)["clusters"]
    assert c["compile_steps"] == [0, 3, 5, 7] and c["fallback_steps"] == [2, 4, 6]
    assert len(c["signatures"]) == 4
    q = _runtime("reshape_value.pbtxt", None)
    (s,) = json.loads(q.stdout)["clusters"]
    assert {"arg": "rows_0_arg", "position": 0, "what": "value", "follows": ["value of rows"],
            "data_dependent": False, "why": "value depends on _Arg 'rows'"} in s["varies"]


def test_cli_jit_compile_call_is_a_strict_unit():
    """jit_inner: the jit_compile=True call stays out of the auto-clusters (two clusters
    around it) and is simulated as a strict unit whose output shape (through its body) feeds
    cluster_0."""
    p = _runtime("jit_inner.pbtxt", RT / "streams" / "batch_many.jsonl")
    assert p.returncode == 0, p.stderr
    units = {c["name"]: c for c in json.loads(p.stdout)["clusters"]}
    call = units["StatefulPartitionedCall"]
    assert call["kind"] == "must-compile" and call["mode"] == "strict"
    assert call["compile_steps"] == list(range(14)) and call["fallback_steps"] == []
    assert units["cluster_0"]["signatures"][0]["args"] == ["float [1, 8]", "float [1, 8]"]


@pytest.mark.parametrize("line, problem", [
    ('{"y": [2, 8]}', "'y' is neither an input of the call (inputs: x) nor a node of the graph"),
    ('{}', "input 'x' ([?, 8]) has unknown dimensions: give its shape on every line"),
    ('{"x": [2, 9]}', "input 'x' has shape [2, 9], but the call's signature says [?, 8]"),
])
def test_cli_bad_stream_is_one_line(tmp_path, line, problem):
    s = tmp_path / "s.jsonl"
    s.write_text(line + "\n")
    p = _runtime("mlp_batch.pbtxt", s)
    assert p.returncode == 2 and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"jitsim: {s}: line 1 (step 0): ") and problem in lines[0]


def test_cli_unique_sizes_from_stated_ids():
    """unique_segments: tf.unique (outside the cluster) gives the segment count, a constant
    argument (UnsortedSegmentSum's num_segments). With the ids' values in the stream jitsim
    evaluates Unique, so the count is exact; the static answer traces it to ids' value."""
    p = _runtime("unique_segments.pbtxt", RT / "streams" / "unique_ids.jsonl")
    assert p.returncode == 0, p.stderr
    (c,) = json.loads(p.stdout)["clusters"]
    assert not c["data_dependent_args"]
    stream = read_stream(RT / "streams" / "unique_ids.jsonl")
    # the signature is (number of distinct ids, x's length, Unique's idx length = x's length)
    keys = [(len(set(s.entries["ids"][1].tolist())), s.entries["x"][0][0]) for s in stream]
    assert len(c["signatures"]) == len(set(keys))
    assert c["compile_steps"] == pol.simulate(keys).steps(pol.COMPILED)
    q = _runtime("unique_segments.pbtxt", None)
    (s,) = json.loads(q.stdout)["clusters"]
    size = next(v for v in s["varies"] if v["what"] == "value")
    assert size["follows"] == ["value of ids"] and not size["data_dependent"]


def test_cli_unique_without_values_is_data_dependent(tmp_path):
    """The same program, the ids' values not given: the count depends on tensor contents,
    so every step is a new signature (and a note says so)."""
    s = tmp_path / "s.jsonl"
    s.write_text('{"x": [8], "ids": [8]}\n' * 3)
    p = _runtime("unique_segments.pbtxt", s)
    d = json.loads(p.stdout)
    (c,) = d["clusters"]
    assert len(c["signatures"]) == 3 and c["compile_steps"] == [0] and c["fallback_steps"] == [1, 2]
    assert any("taken to change every step" in n for n in d["notes"])


def test_cli_while_loop_runs_per_iteration():
    """while_loop: cluster_0 is the loop body, run once per iteration. Step 2 (batch 6, two
    iterations): the first iteration falls back, the second compiles (its second request);
    step 5 (batch 8, one iteration) falls back, step 6 (batch 8 again) compiles."""
    p = _runtime("while_loop.pbtxt", RT / "streams" / "loop_batches.jsonl")
    assert p.returncode == 0, p.stderr
    (c,) = json.loads(p.stdout)["clusters"]
    assert c["loop_frame"] == "while"
    assert c["compile_steps"] == [0, 2, 6, 8] and c["fallback_steps"] == [2, 5, 8]
    assert c["compiled_steps"][:6] == [0, 0, 0, 1, 1, 1]


def test_cli_suggestions_are_simulated():
    """attention_seqlen, 40 lengths 5..44 twice. Recompiles with x.shape[1] (40 values; the
    batch is always 2, so not x.shape[0]). bucket: lengths rounded up to 8, 16, 32, 64: four
    signatures, each compiled at its second request except the first (step 0): 4 compiles,
    3 fallbacks, 77 of 80 compiled (TF measured the bucketed stream too:
    attention_seqlen_bucketed). pad-to-max (44): one signature. lazy-off: 40 compiles, no
    fallback."""
    p = _runtime("attention_seqlen.pbtxt", RT / "streams" / "seqlen_many.jsonl")
    d = json.loads(p.stdout)
    (c,) = d["clusters"]
    assert [x["input"] for x in c["recompiles_with"]] == ["x.shape[1]"]
    assert c["recompiles_with"][0]["distinct_values"] == 40
    sg = {x["name"]: x["totals"] for x in d["suggestions"]}
    assert sg["bucket"] == {"compiles": 4, "fallbacks": 3, "executions": 80, "ran_compiled": 77}
    assert sg["pad-to-max"]["compiles"] == 1 and sg["pad-to-max"]["fallbacks"] == 0
    assert sg["lazy-off"]["compiles"] == 40 and sg["lazy-off"]["fallbacks"] == 0
    q = _runtime("attention_seqlen.pbtxt", RT / "streams" / "seqlen_many_bucketed.jsonl")
    (b,) = json.loads(q.stdout)["clusters"]
    assert b["compiles"] == 4 and len(b["fallback_steps"]) == 3


def test_cli_timeline_svg(tmp_path):
    """-o draws one cell per execution (80 steps, one unit: 80 cells) and one megamorphic line;
    without --shapes it is refused before any work, with nothing written."""
    out = tmp_path / "t.svg"
    p = _runtime("attention_seqlen.pbtxt", RT / "streams" / "seqlen_many.jsonl", "-o", str(out))
    assert p.returncode == 0, p.stderr
    text = out.read_text()
    assert text.count("<rect") == 80 + 3 and text.count("megamorphic from step 51") == 1
    bad = tmp_path / "u.svg"
    q = _runtime("attention_seqlen.pbtxt", None, "-o", str(bad))
    assert q.returncode == 2 and "give --shapes" in q.stderr and not bad.exists()


def test_cli_cond_branches_run_only_when_taken():
    """cond_branches: one cluster per tf.cond branch. With the predicate (train) in the stream,
    a branch's cluster runs only on the steps that take it: its executions are those steps,
    and its compiles follow its own signatures (x's batch) on them."""
    p = _runtime("cond_branches.pbtxt", RT / "streams" / "cond_train.jsonl")
    assert p.returncode == 0, p.stderr
    units = json.loads(p.stdout)["clusters"]
    stream = read_stream(RT / "streams" / "cond_train.jsonl")
    taken = {True: [s.step for s in stream if bool(s.entries["train"][1])],
             False: [s.step for s in stream if not bool(s.entries["train"][1])]}
    ran = sorted((sorted(set(u["compiled_steps"] + u["fallback_steps"])) for u in units))
    assert ran == sorted([taken[True], taken[False]])
    for u in units:
        steps = sorted(set(u["compiled_steps"] + u["fallback_steps"]))
        batches = [stream[k].entries["x"][0][0] for k in steps]
        # the policy fed this branch's own executions: step numbers are the stream's
        p2 = pol.ClusterPolicy()
        for k, b in zip(steps, batches):
            p2.execute(k, b)
        assert u["compile_steps"] == p2.steps(pol.COMPILED) and u["fallback_steps"] == p2.steps(pol.FALLBACK)


def test_cli_jit_call_sites_share_one_unit():
    """jit_two_sites: inner (jit_compile=True) called on x and on y: one unit (TF keys stats
    and cache by function), two executions per step. Batches (x, y): (2,2) (2,3) (3,2) (4,4)
    (2,3) (5,2): strict compiles each new batch at its first request: 2 and 3 at steps 0, 1,
    4 at step 3, 5 at step 5 (measured so under TF: jit_two_sites in results.json)."""
    p = _runtime("jit_two_sites.pbtxt", RT / "streams" / "two_site_batches.jsonl")
    assert p.returncode == 0, p.stderr
    (c,) = json.loads(p.stdout)["clusters"]
    assert c["kind"] == "must-compile" and len(c["nodes"]) == 2
    assert c["compile_steps"] == [0, 1, 3, 5] and len(c["compiled_steps"]) == 12


def test_runtime_takes_every_simulation_option_of_cluster():
    """One definition of the simulation options (cli._sim_args): runtime has all of cluster's."""
    import argparse

    from jitsim import cli

    subs = next(a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    opts = {name: {s for a in subs[name]._actions for s in a.option_strings} for name in ("cluster", "runtime")}
    own_cluster = {"-o", "--output", "--tensorboard", "--explain-cycles", "--all", "--top"}
    assert opts["cluster"] - own_cluster <= opts["runtime"]


def test_cli_while_loop_iterations_counted_from_the_condition():
    """The same stream without "iterations": the loop's condition is i < n with i from 0 by
    1, so jitsim runs it and finds n iterations, giving the same executions as when the
    stream states them."""
    a = json.loads(_runtime("while_loop.pbtxt", RT / "streams" / "loop_batches.jsonl").stdout)["clusters"][0]
    b = json.loads(_runtime("while_loop.pbtxt", RT / "streams" / "loop_batches_counted.jsonl").stdout)["clusters"][0]
    for k in ("compile_steps", "fallback_steps", "compiled_steps"):
        assert a[k] == b[k]
    stream = read_stream(RT / "streams" / "loop_batches_counted.jsonl")
    assert len(b["compiled_steps"]) + len(b["fallback_steps"]) == sum(int(s.entries["n"][1]) for s in stream)


def test_cli_keras_gru_loop_clusters():
    """keras_gru: the GRU's time loop holds cluster_2 (per time step: the cell's math on [B, 8]
    and [B, 16]) and cluster_3; both run T times per step (T = x.shape[1], counted from the
    loop condition), and cluster_2's signature follows the batch only (TensorList element
    shapes [B, 8]), not the length."""
    p = _runtime("keras_gru.pbtxt", RT / "streams" / "gru_batches_lengths.jsonl")
    assert p.returncode == 0, p.stderr
    units = {c["name"]: c for c in json.loads(p.stdout)["clusters"]}
    stream = read_stream(RT / "streams" / "gru_batches_lengths.jsonl")
    lengths = sum(s.entries["x"][0][1] for s in stream)
    batches = len({s.entries["x"][0][0] for s in stream})
    loop = [c for c in units.values() if c["loop_frame"]]
    assert len(loop) == 2
    for c in loop:
        assert len(c["compiled_steps"]) + len(c["fallback_steps"]) == lengths
    assert max(len(c["signatures"]) for c in loop) == batches
    assert not any(c["data_dependent_args"] for c in units.values())


DOC_BLOCKS = __import__("re").findall(r"```\n\$ (jitsim runtime [^\n]*)\n(.*?)```",
                                      (ROOT / "docs" / "runtime.md").read_text(), __import__("re").S)


@pytest.mark.parametrize("cmd, shown", DOC_BLOCKS, ids=[c[:70] for c, _ in DOC_BLOCKS])
def test_docs_runtime_examples_are_current(cmd, shown):
    """docs/runtime.md's shown outputs, run on TF's dump of the same program (no TF needed):
    every shown line is printed, in order (the file name in the title aside)."""
    import shlex

    argv = shlex.split(cmd)[2:]
    prog = Path(argv[0])
    graph = RT / "graphs" / (prog.stem + ".pbtxt")
    p = subprocess.run([sys.executable, "-m", "jitsim", "runtime", str(graph), "--tf", "never", *argv[1:]],
                       capture_output=True, text=True, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "COLUMNS": "100"})
    assert p.returncode == 0, p.stderr
    out = [ln.rstrip().replace(graph.name, prog.name) for ln in p.stdout.splitlines()]
    i = 0
    for line in shown.rstrip("\n").splitlines():
        if line.strip() == "...":
            continue
        while i < len(out) and out[i] != line.rstrip() and not (line.rstrip().endswith("...")
                                                               and out[i].startswith(line.rstrip()[:-3])):
            i += 1
        assert i < len(out), f"not printed (in order): {line!r}"
        i += 1


def test_compare_reports_differences():
    pred = {"clusters": [{"name": "cluster_0", "kind": "auto", "function": "cluster_0", "compiles": 1,
                          "compile_steps": [0], "fallback_steps": [], "compiled_steps": [0, 1],
                          "megamorphic_at_step": None, "signatures": [{}]}]}
    tf = parse_log(LOG)
    r = compare(pred, tf)
    assert not r["identical"] and r["unmatched_tf"] == ["__inference_inner_24"]
    inner = r["unmatched_tf_units"]["__inference_inner_24"]  # TF's numbers of the unit, not only its name
    assert set(inner) == {"compiles", "compile_steps", "fallback_steps", "megamorphic_at_step", "distinct_signatures"}
    assert inner["compiles"] == tf["__inference_inner_24"]["compiles"]
    assert r["units"][0]["fields"]["fallback_steps"] == {"jitsim": [], "tf": [1]}


def test_committed_measurements_are_identical():
    """results.json (fixtures/runtime/measure.py, real TF 2.21): every case identical."""
    doc = json.loads((RT / "results.json").read_text())
    assert doc["total"] >= 22 and doc["identical"] == doc["total"]


# -- against real TF ---------------------------------------------------------------------

@pytest.mark.tf
def test_tf_reshape_value_matches():
    """A 20-step run under TF 2.21 (a few seconds): jitsim's prediction from the program is
    identical to TF's log, unit by unit."""
    sys.path.insert(0, str(RT))
    try:
        import measure
    finally:
        sys.path.pop(0)
    case = next(c for c in json.loads((RT / "manifest.json").read_text())["cases"] if c["name"] == "reshape_value")
    r = measure.run_case(case)
    assert r["identical"], json.dumps(r["comparison"])[:2000]


@pytest.mark.tf
def test_tf_check_option(tmp_path):
    """`jitsim runtime PROGRAM --shapes S --check-with-tf` runs the stream under TF and
    compares (mlp_batch, 24 steps: a few seconds); a stream TF and jitsim disagree on cannot be
    made from a correct simulation, so the exit code is 0 and every unit identical."""
    p = subprocess.run([sys.executable, "-m", "jitsim", "runtime", str(RT / "programs" / "mlp_batch.py"),
                        "--shapes", str(RT / "streams" / "batch_cycle.jsonl"), "--check-with-tf", "--format", "json"],
                       capture_output=True, text=True, env={**__import__("os").environ, "PYTHONPATH": str(ROOT / "src")})
    assert p.returncode == 0, p.stderr[-2000:]
    check = json.loads(p.stdout)["tf_check"]
    assert check["identical"] and [u["tf_function"] for u in check["units"]] == ["cluster_0"]
    assert check["units"][0]["fields"]["compiles"] == {"jitsim": 4, "tf": 4}
