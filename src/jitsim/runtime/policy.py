"""TF 2.21's decision, at each execution of a compiled cluster, to compile, reuse or fall back.

Re-implemented from ``tensorflow/compiler/jit``:

* ``DeviceCompiler::CompileImpl`` (``device_compiler.h``): every execution first registers
  itself with the cluster's profiler (``DeviceCompilationProfiler::RegisterExecution``), then
  looks its signature up in the compilation cache (``LookupOrCreate`` counts one more request
  for that signature). A signature already compiled runs compiled, whatever else holds. An
  uncompiled one asks ``ShouldCompileCluster``; if the answer is no, ``_XlaCompile`` reports
  ``compilation_successful = false`` and the cluster runs as ordinary TF ops (the fallback
  ``PartitionedCall`` that ``BuildXlaOps`` put beside it).
* ``DeviceCompilationProfiler::RegisterExecution`` (``device_compilation_profiler.cc``): the
  per-cluster execution count grows by one; a cluster not yet megamorphic becomes megamorphic
  (for good) when it has more than 10 compiles and fewer than 50 executions per compile
  (``ShouldBeMegamorphic``). Each compile adds one (``RegisterCompilation``).
* ``DeviceCompilationProfiler::ShouldCompileCluster``: strict mode (lazy compilation off, a
  must-compile call, a device that always compiles) always compiles; otherwise a megamorphic
  cluster never compiles again, the cluster's very first execution compiles, and lazy mode
  compiles a signature at its second request (the threshold is 2; async mode's 0 is not
  simulated here).
* ``XlaCompileOp::Compute`` (``kernels/xla_ops.cc``) picks the mode: strict for must-compile,
  else lazy (or async with ``--tf_xla_async_compilation``).

Stats are kept per cluster *function name* for the life of the process: one
:class:`ClusterPolicy` per cluster, fed one signature per execution.
"""

from __future__ import annotations

from dataclasses import dataclass, field

COMPILE_THRESHOLD = 10  # ShouldBeMegamorphic: more than this many compiles ...
MIN_EXECUTIONS_PER_COMPILE = 50  # ... and fewer than this many executions per compile
LAZY_REQUESTS = 2  # kDefaultCompilationThreshold: a new signature compiles at this request

LAZY, STRICT = "lazy", "strict"
# --tf_xla_async_compilation: a new signature's compile is queued on a thread pool and the
# execution falls back; jitsim assumes it is done by the signature's next request (TF's
# timing decides). --tf_xla_always_defer_compilation: _XlaCompile never compiles.
ASYNC, DEFERRED = "async", "deferred"

# what one execution did
COMPILED = "compiled"  # compiled now, then ran compiled
CACHED = "cached"  # ran an executable compiled earlier
FALLBACK = "fallback"  # ran as TF ops (lazy: first request; or megamorphic)

# why, as a stable code (Execution.code; docs/runtime.md "Reason codes")
FIRST_EXECUTION = "FIRST_EXECUTION"  # compiled: the cluster's very first execution
SECOND_REQUEST = "SECOND_REQUEST"  # compiled: lazy mode, this signature's second (or later) request
STRICT_NEW_SIGNATURE = "STRICT_NEW_SIGNATURE"  # compiled: strict mode compiles every new signature at once
ASYNC_QUEUED = "ASYNC_QUEUED"  # compile queued (async mode); this execution falls back
COMPILED_EARLIER = "COMPILED_EARLIER"  # ran the executable of an earlier compile
FIRST_REQUEST = "FIRST_REQUEST"  # fell back: lazy mode, a new signature's first request
MEGAMORPHIC = "MEGAMORPHIC"  # fell back: the cluster is megamorphic, new signatures never compile
ALWAYS_DEFER = "ALWAYS_DEFER"  # fell back: --tf_xla_always_defer_compilation


@dataclass
class Execution:
    step: int
    signature: object
    outcome: str  # COMPILED | CACHED | FALLBACK
    reason: str  # why, for people: "first execution of the cluster", "megamorphic", ...
    request: int  # this signature's request count, this one included
    became_megamorphic: bool = False
    code: str = ""  # why, as a stable code: FIRST_EXECUTION, SECOND_REQUEST, FIRST_REQUEST, ...
    ran_compiled: bool | None = None  # None: as the outcome says (async compiles run the fallback)

    @property
    def compiled_run(self) -> bool:
        return self.outcome != FALLBACK if self.ran_compiled is None else self.ran_compiled


@dataclass
class ClusterPolicy:
    """One cluster's compile stats and compilation cache, as TF keeps them."""

    mode: str = LAZY
    execution_count: int = 0
    compile_count: int = 0
    megamorphic: bool = False
    requests: dict = field(default_factory=dict)  # signature -> request count
    compiled: set = field(default_factory=set)  # signatures with an executable
    history: list = field(default_factory=list)  # Execution per call, in order

    def execute(self, step: int, signature) -> Execution:
        """One execution of the cluster with ``signature`` (any hashable value)."""
        if self.mode == DEFERRED:  # XlaCompileOp skips the compiler: no execution is registered
            ex = Execution(step, signature, FALLBACK, "--tf_xla_always_defer_compilation", 0, code=ALWAYS_DEFER)
            self.history.append(ex)
            return ex
        self.execution_count += 1
        became = False
        if (not self.megamorphic and self.compile_count > COMPILE_THRESHOLD
                and self.execution_count < MIN_EXECUTIONS_PER_COMPILE * self.compile_count):
            self.megamorphic = became = True
        request = self.requests.get(signature, 0) + 1
        self.requests[signature] = request
        if signature in self.compiled:
            outcome, code, reason = CACHED, COMPILED_EARLIER, "compiled earlier"
        elif self.mode == STRICT:
            outcome, code, reason = COMPILED, STRICT_NEW_SIGNATURE, "strict mode compiles every new signature"
        elif self.megamorphic:
            outcome, code, reason = FALLBACK, MEGAMORPHIC, "megamorphic"
        elif self.mode == ASYNC:
            outcome, code, reason = COMPILED, ASYNC_QUEUED, "async compilation queued (this execution falls back)"
        elif self.execution_count == 1:
            outcome, code, reason = COMPILED, FIRST_EXECUTION, "first execution of the cluster"
        elif request >= LAZY_REQUESTS:
            outcome, code, reason = COMPILED, SECOND_REQUEST, f"request {request} of this signature"
        else:
            outcome, code, reason = FALLBACK, FIRST_REQUEST, "first request of a new signature (lazy compilation)"
        if outcome == COMPILED:
            self.compile_count += 1
            self.compiled.add(signature)
        ex = Execution(step, signature, outcome, reason, request, became, code)
        if self.mode == ASYNC and outcome == COMPILED:
            ex.ran_compiled = False
        self.history.append(ex)
        return ex

    # summaries ---------------------------------------------------------------------------
    def steps(self, outcome: str) -> list[int]:
        return [e.step for e in self.history if e.outcome == outcome]

    @property
    def megamorphic_at_step(self) -> int | None:
        return next((e.step for e in self.history if e.became_megamorphic), None)


def simulate(signatures, mode: str = LAZY) -> ClusterPolicy:
    """Feed one signature per step (step = position) to a fresh cluster."""
    p = ClusterPolicy(mode=mode)
    for step, sig in enumerate(signatures):
        p.execute(step, sig)
    return p
