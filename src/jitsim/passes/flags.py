"""``TF_XLA_FLAGS`` parsing, exactly as TensorFlow 2.21 accepts it, and jitsim's run options.

TF parses the variable once per process; an unknown flag aborts the process. jitsim
reports the same conditions as a :class:`FlagError` (one line, non-zero exit).

>>> f = parse_tf_xla_flags("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_min_cluster_size=1")
>>> f.auto_jit_general, f.cpu_global_jit, f.min_cluster_size
(2, True, 1)
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field, fields
from functools import lru_cache

from jitsim.errors import JitsimError

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1

# jit levels (OptimizerOptions.GlobalJitLevel)
DEFAULT, OFF, ON_1, ON_2 = 0, -1, 1, 2

DEFAULT_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"


class FlagError(JitsimError):
    """A TF_XLA_FLAGS string TF itself would reject."""


@dataclass
class XlaFlags:
    """The TF_XLA_FLAGS that influence the simulated passes (defaults = TF 2.21's)."""

    auto_jit_single_gpu: int = 0
    auto_jit_general: int = 0
    min_cluster_size: int = 4
    max_cluster_size: int = INT32_MAX
    ops_to_cluster: str = ""
    cluster_exclude_ops: str = ""
    clustering_debug: bool = False
    cpu_global_jit: bool = False
    clustering_fuel: int = INT64_MAX
    disable_deadness_safety_checks_for_debugging: bool = False
    disable_resource_variable_safety_checks_for_debugging: bool = False
    deterministic_cluster_names: bool = False
    # build-xla-ops
    enable_lazy_compilation: bool = True
    print_cluster_outputs: bool = False
    check_cluster_input_numerics: bool = False
    check_cluster_output_numerics: bool = False
    disable_constant_folding: bool = False
    # devices / runtime (accepted, no effect on clustering)
    enable_xla_devices: bool = False
    compile_on_demand: bool = False
    always_defer_compilation: bool = False
    async_compilation: bool = False
    text: str = field(default="", compare=False)

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in fields(self)}


# flag name -> (field, kind); kind in {"bool", "int", "str", "autojit"}
_FLAGS: dict[str, tuple[str | None, str]] = {
    "tf_xla_auto_jit": ("auto_jit", "autojit"),
    "tf_xla_min_cluster_size": ("min_cluster_size", "int"),
    "tf_xla_max_cluster_size": ("max_cluster_size", "int"),
    "tf_xla_ops_to_cluster": ("ops_to_cluster", "str"),
    "tf_xla_cluster_exclude_ops": ("cluster_exclude_ops", "str"),
    "tf_xla_clustering_debug": ("clustering_debug", "bool"),
    "tf_xla_cpu_global_jit": ("cpu_global_jit", "bool"),
    "tf_xla_clustering_fuel": ("clustering_fuel", "int"),
    "tf_xla_disable_deadness_safety_checks_for_debugging": ("disable_deadness_safety_checks_for_debugging", "bool"),
    "tf_xla_disable_resource_variable_safety_checks_for_debugging": (
        "disable_resource_variable_safety_checks_for_debugging", "bool"),
    "tf_xla_deterministic_cluster_names": ("deterministic_cluster_names", "bool"),
    "tf_xla_enable_lazy_compilation": ("enable_lazy_compilation", "bool"),
    "tf_xla_print_cluster_outputs": ("print_cluster_outputs", "bool"),
    "tf_xla_check_cluster_input_numerics": ("check_cluster_input_numerics", "bool"),
    "tf_xla_check_cluster_output_numerics": ("check_cluster_output_numerics", "bool"),
    "tf_xla_disable_constant_folding": ("disable_constant_folding", "bool"),
    "tf_xla_enable_xla_devices": ("enable_xla_devices", "bool"),
    "tf_xla_compile_on_demand": ("compile_on_demand", "bool"),
    "tf_xla_always_defer_compilation": ("always_defer_compilation", "bool"),
    "tf_xla_async_compilation": ("async_compilation", "bool"),
    # accepted by TF 2.21, no influence on what jitsim simulates
    "tf_xla_persistent_cache_directory": (None, "str"),
    "tf_xla_persistent_cache_device_types": (None, "str"),
    "tf_xla_persistent_cache_read_only": (None, "bool"),
    "tf_xla_persistent_cache_prefix": (None, "str"),
    "tf_xla_disable_strict_signature_checks": (None, "bool"),
    "tf_xla_use_device_api": (None, "bool"),
    "tf_xla_use_device_api_for_xla_launch": (None, "bool"),
    "tf_xla_use_device_api_for_compile_on_demand": (None, "bool"),
    "tf_xla_use_device_api_for_auto_jit": (None, "bool"),
    "tf_xla_enable_device_api_for_gpu": (None, "bool"),
    "tf_xla_disable_full_embedding_pipelining": (None, "bool"),
    "tf_xla_disable_full_embedding_pipelining_with_summaries": (None, "bool"),
    "tf_xla_embedding_parallel_iterations": (None, "int"),
    "tf_mlir_enable_mlir_bridge": (None, "bool"),
    "tf_mlir_enable_merge_control_flow_pass": (None, "bool"),
    "tf_mlir_enable_convert_control_to_data_outputs_pass": (None, "bool"),
    "tf_mlir_enable_strict_clusters": (None, "bool"),
    "tf_mlir_enable_generic_outside_compilation": (None, "bool"),
    "tf_mlir_enable_tpu_variable_runtime_reformatting_pass": (None, "bool"),
    "tf_mlir_enable_multiple_local_cpu_devices": (None, "bool"),
    "tf_dump_graphs_in_tfg": (None, "bool"),
    "tf_mlir_enable_debug_info_serialization": (None, "bool"),
}

_TRUE = {"true", "1", "t", "yes", "y"}
_FALSE = {"false", "0", "f", "no", "n"}


def _parse_bool(name: str, value: str | None) -> bool:
    if value is None:
        return True
    v = value.lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise FlagError(f"--{name}: {value!r} is not a boolean")


def _parse_int(name: str, value: str | None) -> int:
    try:
        return int(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise FlagError(f"--{name}: {value!r} is not an integer") from None


def _parse_auto_jit(flags: XlaFlags, value: str | None) -> None:
    v = (value or "").strip()
    if v.startswith("single-gpu(") and v.endswith(")"):
        flags.auto_jit_single_gpu = _parse_int("tf_xla_auto_jit", v[len("single-gpu("):-1])
        return
    if v == "fusible":
        flags.auto_jit_single_gpu = flags.auto_jit_general = ON_1
        flags.ops_to_cluster = "FUSIBLE"
        return
    n = _parse_int("tf_xla_auto_jit", v)
    flags.auto_jit_single_gpu = flags.auto_jit_general = n


def parse_tf_xla_flags(text: str | None) -> XlaFlags:
    """Parse a ``TF_XLA_FLAGS`` value (``--name=value`` / ``--bool`` tokens).

    >>> parse_tf_xla_flags("--tf_xla_auto_jit=fusible").ops_to_cluster
    'FUSIBLE'
    >>> parse_tf_xla_flags("--tf_xla_bogus=1")
    Traceback (most recent call last):
    ...
    jitsim.passes.flags.FlagError: unknown flag in TF_XLA_FLAGS: --tf_xla_bogus (TensorFlow aborts on it)
    """
    flags = XlaFlags(text=text or "")
    try:
        tokens = shlex.split(text or "")
    except ValueError as e:
        raise FlagError(f"cannot split TF_XLA_FLAGS: {e}") from None
    for tok in tokens:
        if not tok.startswith("--"):
            raise FlagError(f"TF_XLA_FLAGS token {tok!r} does not start with --")
        name, eq, value = tok[2:].partition("=")
        if not eq:
            value = None
        spec = _FLAGS.get(name)
        if spec is None and name.startswith("no") and _FLAGS.get(name[2:], (None, ""))[1] == "bool" and not eq:
            spec, value, name = _FLAGS[name[2:]], "false", name[2:]
        if spec is None:
            raise FlagError(f"unknown flag in TF_XLA_FLAGS: --{name} (TensorFlow aborts on it)")
        fname, kind = spec
        if kind == "autojit":
            _parse_auto_jit(flags, value)
            continue
        if kind == "bool":
            parsed = _parse_bool(name, value)
        elif kind == "int":
            parsed = _parse_int(name, value)
        else:
            parsed = value or ""
        if fname is not None:
            setattr(flags, fname, parsed)
    return flags


def ops_to_cluster_categories(tf_version: str | None = None) -> dict[str, list[str]]:
    """``--tf_xla_ops_to_cluster``'s categories (mark_for_compilation_pass.cc's allowlist
    table) of a release (default: the simulated one)."""
    from jitsim.registry import current_tf_version

    return _ops_to_cluster_categories(tf_version or current_tf_version())


@lru_cache(maxsize=None)
def _ops_to_cluster_categories(tf_version: str) -> dict[str, list[str]]:
    from jitsim.registry import read_data

    return json.loads(read_data("ops-to-cluster.json", tf_version))["categories"]


def ops_allowlist(flags: XlaFlags, tf_version: str | None = None) -> frozenset[str]:
    """The ``--tf_xla_ops_to_cluster`` allowlist (empty = no restriction); validated like TF."""
    from jitsim.registry import xla_kernels

    cats = ops_to_cluster_categories(tf_version)
    out: set[str] = set()
    for tok in flags.ops_to_cluster.split(","):
        tok = tok.strip()
        if not tok:
            continue
        if tok == "FUSIBLE":
            for ops in cats.values():
                out.update(ops)
        elif tok in cats:
            out.update(cats[tok])
        else:
            out.add(tok)
    known = set(xla_kernels("XLA_CPU_JIT", tf_version))
    for op in sorted(out):
        if op not in known:
            raise FlagError(f"The operation '{op}' passed to --tf_xla_ops_to_cluster is not supported by XLA.")
    return frozenset(out)


def allow_where_op(flags: XlaFlags) -> bool:
    """``--tf_xla_cluster_exclude_ops``: only ``Where`` is accepted (TF 2.21)."""
    allow = True
    for tok in flags.cluster_exclude_ops.split(","):
        tok = tok.strip()
        if not tok:
            continue
        if tok == "Where":
            allow = False
        else:
            raise FlagError(f"The operation '{tok}' passed to --tf_xla_cluster_exclude_ops is not supported by XLA.")
    return allow


def effective_flags(text: str | None) -> str:
    """The flags a ``TF_XLA_FLAGS`` value leaves in force, each once: later flags win, as in TF,
    so ``--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_auto_jit=-1`` is
    ``--tf_xla_cpu_global_jit --tf_xla_auto_jit=-1`` (a flag keeps its last position; ``--noX``
    is written ``--X=false``). The value is parsed first: a flag TF refuses is a :class:`FlagError`.

    >>> effective_flags("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_auto_jit=-1")
    '--tf_xla_cpu_global_jit --tf_xla_auto_jit=-1'
    """
    parse_tf_xla_flags(text)
    last: dict[str, str] = {}
    for tok in shlex.split(text or ""):
        name, eq, value = tok[2:].partition("=")
        if not eq and name not in _FLAGS and name.startswith("no") and name[2:] in _FLAGS:
            name, tok = name[2:], f"--{name[2:]}=false"
        last.pop(name, None)
        last[name] = tok
    return " ".join(last.values())
