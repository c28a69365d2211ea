"""What one simulation runs with: one frozen :class:`Options` object, built once, read by every pass.

TF hands each of its graph passes a ``GraphOptimizationPassOptions`` (the session's options,
the flags parsed once per process); jitsim does the same with :class:`Options`: the parsed
``TF_XLA_FLAGS`` (and where they came from), the simulated TF release (and why), the session's
``ConfigProto`` settings, the device for unplaced nodes, the what-if knobs, the input stage,
the last stage to run and the op libraries. The CLI builds it once from its arguments
(``cli._options``), the Python API once from :func:`jitsim.cluster`'s keywords
(:func:`make_options`); :func:`jitsim.passes.pipeline.run_pipeline` hands the same object to
every pass. What depends on the graph (its TF release, a session call's jit level, the op
libraries it needs, its input stage) is filled in once, before the passes run, with
:func:`dataclasses.replace`; a what-if is ``replace(options, ...)`` too.

What TF keeps per process (clustering fuel, the cluster-name counter) is not an option: it is
:class:`jitsim.passes.mark_for_compilation.ProcessState`, created from these options
(``ProcessState.starting(options)`` applies ``cluster_number_start``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from jitsim.flags import DEFAULT, DEFAULT_FLAGS, XlaFlags, parse_tf_xla_flags


@dataclass(frozen=True)
class SessionConfig:
    """What TF reads from the ConfigProto of the graph's session/eager context."""

    global_jit_level: int = DEFAULT  # tf.config.optimizer.set_jit -> ON_1; set_jit(False) -> OFF
    cpu_global_jit: bool = False  # OptimizerOptions.cpu_global_jit (TF1 sessions)
    cluster_name_prefix: str = ""  # experimental.session_metadata.name


def debug_mode() -> bool:
    """``$JITSIM_DEBUG`` set (non-empty): jitsim's debug mode. The passes' graphs are checked
    between passes (:attr:`Options.debug_checks`' default) and the CLI shows a bug's traceback."""
    return bool(os.environ.get("JITSIM_DEBUG"))


@dataclass(frozen=True)
class Options:
    """What a simulation was run with (also the baseline of a what-if)."""

    flags: XlaFlags  # TF_XLA_FLAGS, parsed once
    flags_origin: str = "given"  # where they came from ("TF_XLA_FLAGS environment variable", ...)
    device: str | None = None  # cpu/gpu/a full name, for nodes without a device
    exclude_ops: tuple[str, ...] = ()  # what-if: ops treated as uncompilable
    force_compilable: tuple[str, ...] = ()  # what-if: ops treated as compilable
    session: SessionConfig = SessionConfig()
    input_stage: str | None = None  # what the graph is (None: detected from its content)
    cluster_number_start: int = 0  # TF's cluster counter at the start of the process
    until: str = "decluster"  # the last simulated stage (jitsim.passes.pipeline.STAGES)
    tf_version: str | None = None  # the simulated TF release (None: the active one)
    tf_version_reason: str = "jitsim default"
    explain_cycles: bool = False  # record the path behind every cycle refusal
    op_libraries: tuple = ()  # OpLibrary objects for ops TF core does not register (--op-defs, inferred)
    debug_checks: bool = field(default_factory=debug_mode)  # check the graph between passes
    timings: dict | None = field(default=None, compare=False, repr=False)  # pass name -> seconds (benchmarks)

    @property
    def flags_text(self) -> str:
        return self.flags.text

    @property
    def session_jit_level(self) -> int:
        return self.session.global_jit_level

    @property
    def session_cpu_global_jit(self) -> bool:
        return self.session.cpu_global_jit

    def describe(self) -> str:
        parts = [f'TF_XLA_FLAGS="{self.flags_text}"']
        if self.device:
            parts.append(f"device {self.device}")
        if self.exclude_ops:
            parts.append("exclude " + ",".join(self.exclude_ops))
        if self.force_compilable:
            parts.append("force-compilable " + ",".join(self.force_compilable))
        return ", ".join(parts)

    def to_dict(self) -> dict:
        return {"tf_xla_flags": self.flags_text, "flags_origin": self.flags_origin, "device": self.device,
                "exclude_ops": list(self.exclude_ops), "force_compilable": list(self.force_compilable),
                "session_jit_level": self.session_jit_level, "session_cpu_global_jit": self.session_cpu_global_jit,
                "input_stage": self.input_stage, "until": self.until,
                "tf_version": {"version": self.tf_version, "reason": self.tf_version_reason}}


@dataclass(frozen=True)
class Call:
    """The call of a target, as its user states it (every field optional; where one is missing
    the route assumes a documented default and says so): a SavedModel's ``signature``; a TF1
    graph's session call (``fetch``, ``feed``); a Keras model's call (``input_shapes``: input
    name -> shape, or ``input_signature``: one ``tf.TensorSpec`` per input); the Consts of an
    exported tf.function graph that were captured eager tensors (``captured``, ``["none"]``:
    none). :func:`jitsim.simulation.simulate` hands it to the route that reads it."""

    signature: str | None = None
    fetch: tuple = ()
    feed: tuple = ()
    input_shapes: object = None
    input_signature: object = None
    captured: tuple | None = None


def options_for(flags: XlaFlags | str | None = None, **fields) -> Options:
    """Options for a pass run directly (tests, examples): ``flags`` parsed if given as text
    (None: TF's own defaults), the other fields as named."""
    if not isinstance(flags, XlaFlags):
        flags = parse_tf_xla_flags(flags or "")
    return Options(flags, **fields)


@dataclass(frozen=True)
class FlagsChoice:
    flags: XlaFlags
    origin: str  # "--tf-xla-flags", "TF_XLA_FLAGS", "harvest index", "default"

    def describe(self) -> str:
        return f'TF_XLA_FLAGS="{self.flags.text}" ({self.origin})'


def resolve_flags(cli_value: str | None = None, recorded: str | None = None, env=None, *, additive: bool = False,
                  no_defaults: bool = False) -> FlagsChoice:
    """The TF_XLA_FLAGS of a run, and where they came from.

    The base: flags recorded by a harvest (what TF ran with) > ``$TF_XLA_FLAGS`` > jitsim's
    default (``no_defaults``: nothing, TF's own defaults: auto-clustering off).
    ``additive`` (the CLI's one rule): ``cli_value`` goes on top of the base, later flags
    winning as in TF. Otherwise (the Python API's ``flags=``) ``cli_value`` replaces the base."""
    env = os.environ if env is None else env
    if no_defaults:
        base, origin = "", "no defaults (--no-default-flags)"
    elif cli_value is not None and not additive:
        return FlagsChoice(parse_tf_xla_flags(cli_value), "--tf-xla-flags")
    elif recorded is not None:
        base, origin = recorded, "recorded by the harvest"
    elif "TF_XLA_FLAGS" in env:
        base, origin = env["TF_XLA_FLAGS"], "TF_XLA_FLAGS environment variable"
    else:
        base, origin = DEFAULT_FLAGS, "jitsim default: auto-jit on, CPU global jit"
    if cli_value:
        parse_tf_xla_flags(cli_value)  # its own errors first, naming only what the user typed
        return FlagsChoice(parse_tf_xla_flags(f"{base} {cli_value}".strip()), f"{origin} + --tf-xla-flags")
    return FlagsChoice(parse_tf_xla_flags(base), origin)


def auto_clustering_off(flags: XlaFlags, session_jit_level: int = 0) -> bool:
    """Whether these flags (and the session's jit level) leave auto-clustering off for every
    device: TF's global jit level is then off and no node is marked unless it asks for XLA itself."""
    level = flags.auto_jit_general if flags.auto_jit_general != 0 else session_jit_level
    gpu = flags.auto_jit_single_gpu if flags.auto_jit_single_gpu != 0 else session_jit_level
    return level <= 0 and gpu <= 0
