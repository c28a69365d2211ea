"""What TF itself says it did at run time, read from its log (no TF needed to read one).

With ``TF_CPP_VMODULE=device_compiler=3,device_compilation_profiler=2`` TF 2.21 logs, for
every execution of a compiled unit (``DeviceCompiler::CompileImpl`` in ``device_compiler.h``):

* ``Compilation cache entry hit: <state> signature: <signature> with request count <n>``;
* then one of ``Instantly compiling for signature: ...`` (a compile now),
  ``Not compiling for signature: ...`` (the lazy fallback, or a megamorphic cluster),
  ``Already Compiled for signature: ...`` (a cached executable), or with async compilation
  ``Queueing asynchronous compilation ...`` (a compile queued; this execution falls back) and
  ``Ongoing asynchronous compilation ...`` (still compiling: falls back);

and ``DeviceCompilationProfiler`` (``device_compilation_profiler.cc``) logs ``Compiled <f> <n>
times`` after each compile and ``Marking <f> as megamorphic, compile_count=.. execution_count=..``
once. At verbosity 3 the signature is ``DeviceCompilationClusterSignature::HumanString``:
``<function>[<attrs>]; <arg>,<arg>...`` (a constant argument as its tensor, others as
``<dtype> [<dims>]``).

The runner (:mod:`jitsim.runtime.tfrun`) writes ``=== jitsim step <k> ===`` on stderr before
each step, so every line belongs to a step. :func:`parse_log` returns, per function name,
the same fields jitsim predicts.
"""

from __future__ import annotations

import re

VMODULE = "device_compiler=3,device_compilation_profiler=2"
STEP_MARK = "=== jitsim step "

_STEP = re.compile(r"=== jitsim step (\d+) ===")
_DECISION = re.compile(r"(Instantly compiling|Not compiling|Already Compiled|Queueing asynchronous compilation|"
                       r"Ongoing asynchronous compilation) for signature: (.*?)\s*$")
_MEGA = re.compile(r"Marking (\S+) as megamorphic, compile_count=(\d+) execution_count=(\d+)")

OUTCOME = {"Instantly compiling": "compiled", "Not compiling": "fallback", "Already Compiled": "cached",
           "Queueing asynchronous compilation": "queued", "Ongoing asynchronous compilation": "fallback"}


def function_of(signature: str) -> str:
    """The function name at the head of a logged signature."""
    m = re.match(r"[^\[;\s]+", signature)
    return m.group(0) if m else signature


def parse_log(text: str) -> dict:
    """``{function: {"executions": [(step, outcome, signature)], "compiles", "compile_steps",
    "fallback_steps", "compiled_steps", "megamorphic_at_step", "signatures"}}`` from TF's log."""
    step = None
    out: dict = {}

    def unit(fn):
        return out.setdefault(fn, {"executions": [], "megamorphic_at_step": None})

    for line in text.splitlines():
        m = _STEP.search(line)
        if m:
            step = int(m.group(1))
            continue
        if step is None:
            continue
        m = _DECISION.search(line)
        if m:
            sig = m.group(2)
            unit(function_of(sig))["executions"].append((step, OUTCOME[m.group(1)], sig))
            continue
        m = _MEGA.search(line)
        if m:
            u = unit(m.group(1))
            if u["megamorphic_at_step"] is None:
                u["megamorphic_at_step"] = step
    for u in out.values():
        ex = u["executions"]
        u["compile_steps"] = [s for s, o, _ in ex if o in ("compiled", "queued")]
        u["fallback_steps"] = [s for s, o, _ in ex if o in ("fallback", "queued")]
        u["compiled_steps"] = [s for s, o, _ in ex if o in ("compiled", "cached")]
        u["compiles"] = len(u["compile_steps"])
        sigs = []
        for _, _, s in ex:
            if s not in sigs:
                sigs.append(s)
        u["signatures"] = sigs
    return out
