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


@dataclass
class Execution:
    step: int
    signature: object
    outcome: str  # COMPILED | CACHED | FALLBACK
    reason: str  # why: "first execution", "second request", "megamorphic", "first request", ...
    request: int  # this signature's request count, this one included
    became_megamorphic: bool = False
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
            ex = Execution(step, signature, FALLBACK, "--tf_xla_always_defer_compilation", 0)
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
            outcome, reason = CACHED, "compiled earlier"
        elif self.mode == STRICT:
            outcome, reason = COMPILED, "strict mode compiles every new signature"
        elif self.megamorphic:
            outcome, reason = FALLBACK, "megamorphic"
        elif self.mode == ASYNC:
            outcome, reason = COMPILED, "async compilation queued (this execution falls back)"
        elif self.execution_count == 1:
            outcome, reason = COMPILED, "first execution of the cluster"
        elif request >= LAZY_REQUESTS:
            outcome, reason = COMPILED, f"request {request} of this signature"
        else:
            outcome, reason = FALLBACK, "first request of a new signature (lazy compilation)"
        if outcome == COMPILED:
            self.compile_count += 1
            self.compiled.add(signature)
        ex = Execution(step, signature, outcome, reason, request, became)
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
