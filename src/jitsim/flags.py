"""``TF_XLA_FLAGS`` parsing, exactly as TensorFlow 2.21 accepts it, and jitsim's run options.

TF parses the variable once per process; an unknown flag aborts the process. jitsim
reports the same conditions as a :class:`FlagError` (one line, non-zero exit).

>>> f = parse_tf_xla_flags("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_min_cluster_size=1")
>>> f.auto_jit_general, f.cpu_global_jit, f.min_cluster_size
(2, True, 1)
"""

from __future__ import annotations

import json
import re
import warnings
from dataclasses import dataclass, field, fields
from functools import lru_cache

from jitsim.errors import JitsimError, JitsimWarning

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

_INT_BITS = {"tf_xla_clustering_fuel": 64}  # the other int flags are int32
_SSCANF_INT = re.compile(r"[ \t\n\r\f\v]*[+-]?[0-9]+")  # what sscanf's %d takes, with nothing after it
_ATOI = re.compile(r"\s*[+-]?[0-9]+\s*")  # absl::SimpleAtoi: surrounding whitespace allowed
_WS = " \t\r\n"
_noted: set[str] = set()


def _parse_bool(name: str, value: str | None) -> bool:
    """tsl's bool flags: ``--name`` alone, or ``=true``/``=false`` (any case), ``=1``/``=0``."""
    if value is None:
        return True
    if value.lower() == "true" or value == "1":
        return True
    if value.lower() == "false" or value == "0":
        return False
    raise FlagError(f"--{name}={value}: not a boolean (TensorFlow takes true, false, 1 or 0 and aborts on "
                    "anything else)")


def _in_range(name: str, value: str, n: int, bits: int) -> int:
    lo, hi = -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    if not lo <= n <= hi:
        raise FlagError(f"--{name}={value}: out of the {bits}-bit integer range (TensorFlow aborts on it)")
    return n


def _parse_int(name: str, value: str | None, bits: int = 32) -> int:
    if value is None or not _SSCANF_INT.fullmatch(value):
        raise FlagError(f"--{name}={value or ''}: not an integer (TensorFlow aborts on it)")
    return _in_range(name, value, int(value), bits)


def _parse_auto_jit(flags: XlaFlags, value: str) -> None:
    """``--tf_xla_auto_jit``: an integer, ``fusible`` or ``single-gpu(N)`` (flags.cc's
    SetterForXlaAutoJitFlag; anything else makes TF abort)."""
    name = "tf_xla_auto_jit"
    if _ATOI.fullmatch(value):
        flags.auto_jit_single_gpu = flags.auto_jit_general = _in_range(name, value, int(value), 32)
        return
    if value == "fusible":
        flags.auto_jit_single_gpu = flags.auto_jit_general = ON_1
        flags.ops_to_cluster = "FUSIBLE"
        return
    if value.startswith("single-gpu(") and value.endswith(")") and _ATOI.fullmatch(value[len("single-gpu("):-1]):
        flags.auto_jit_single_gpu = _in_range(name, value, int(value[len("single-gpu("):-1]), 32)
        return
    raise FlagError(f"--{name}={value}: not a jit level (TensorFlow takes an integer such as -1, 0, 1, 2, "
                    "'fusible' or 'single-gpu(N)' and aborts on anything else)")


def split_flags(text: str) -> list[str]:
    """The tokens TF makes of a ``TF_XLA_FLAGS`` value (xla/parse_flags_from_env.cc): each
    starts with ``-`` and ends at whitespace, except a ``--name="..."`` or ``--name='...'``
    value, which is unquoted (backslash escapes in double quotes). TF stops at the first token
    that does not start with ``-`` and ignores the rest; that is said in a note here."""
    out: list[str] = []
    n, i = len(text), 0
    while i < n and text[i] in _WS:
        i += 1
    if i < n and text[i] != "-":
        raise FlagError(f"TF_XLA_FLAGS={text!r} does not start with '-': TensorFlow takes such a value for the name "
                        "of a file of flags and aborts if it cannot open it; give the flags themselves")
    while i < n and text[i] == "-":
        j = i
        while j < n and text[j].isascii() and (text[j] in "-_" or text[j].isalnum()):
            j += 1
        if j + 1 < n and text[j] == "=" and text[j + 1] in "'\"":
            quote, k, value = text[j + 1], j + 2, []
            while k < n and text[k] != quote:
                if quote == '"' and text[k] == "\\" and k + 1 < n:
                    k += 1
                value.append(text[k])
                k += 1
            out.append(text[i:j + 1] + "".join(value))
            j = k + 1 if k < n else k
        else:
            while j < n and text[j] not in _WS:
                j += 1
            out.append(text[i:j])
        i = j
        while i < n and text[i] in _WS:
            i += 1
    if i < n and text not in _noted:
        _noted.add(text)
        warnings.warn(JitsimWarning(f"TF_XLA_FLAGS: {text[i:][:60]!r} does not start with '-'; TensorFlow stops "
                                    "reading flags there and ignores the rest, and so does jitsim"), stacklevel=3)
    return out


def parse_tf_xla_flags(text: str | None) -> XlaFlags:
    """Parse a ``TF_XLA_FLAGS`` value as TF 2.21 does (tsl's command_line_flags.cc): a bool
    flag is ``--name`` or ``--name=true|false|1|0``, the others need ``=value``; there is no
    ``--noname`` form; a value TF cannot read makes it abort, and so is refused here.

    >>> parse_tf_xla_flags("--tf_xla_auto_jit=fusible").ops_to_cluster
    'FUSIBLE'
    >>> parse_tf_xla_flags("--tf_xla_bogus=1")
    Traceback (most recent call last):
    ...
    jitsim.flags.FlagError: unknown flag in TF_XLA_FLAGS: --tf_xla_bogus=1 (TensorFlow aborts on it)
    """
    flags = XlaFlags(text=text or "")
    for tok in split_flags(text or ""):
        name, eq, value = tok[2:].partition("=") if tok.startswith("--") else ("", "", "")
        spec = _FLAGS.get(name)
        if spec is not None and not eq and spec[1] != "bool":
            raise FlagError(f"unknown flag in TF_XLA_FLAGS: {tok} (a {spec[1] if spec[1] != 'autojit' else 'string'} "
                            f"flag needs '=value'; TensorFlow aborts on it)")
        if spec is None:
            hint = ""
            if name.startswith("no") and name[2:] in _FLAGS:
                hint = f"; TensorFlow has no --no form: write --{name[2:]}=false" if _FLAGS[name[2:]][1] == "bool" \
                    else f"; TensorFlow has no --no form"
            raise FlagError(f"unknown flag in TF_XLA_FLAGS: {tok} (TensorFlow aborts on it{hint})")
        fname, kind = spec
        if kind == "autojit":
            _parse_auto_jit(flags, value)
            continue
        if kind == "bool":
            parsed = _parse_bool(name, value if eq else None)
        elif kind == "int":
            parsed = _parse_int(name, value, _INT_BITS.get(name, 32))
        else:
            parsed = value
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
    ``--tf_xla_cpu_global_jit --tf_xla_auto_jit=-1`` (a flag keeps its last position). The value is parsed first: a flag TF refuses is a :class:`FlagError`.

    >>> effective_flags("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_auto_jit=-1")
    '--tf_xla_cpu_global_jit --tf_xla_auto_jit=-1'
    """
    parse_tf_xla_flags(text)
    last: dict[str, str] = {}
    for tok in split_flags(text or ""):
        name = tok.lstrip("-").partition("=")[0]
        last.pop(name, None)
        last[name] = tok
    return " ".join(last.values())


def remapper_sees_cpu_global_jit(raw: str | None, release: str) -> bool:
    """Whether Grappler's remapper of TF ``release`` finds ``--tf_xla_cpu_global_jit`` in the raw
    ``TF_XLA_FLAGS`` value ``raw`` (it reads the variable itself, not TF's parsed flags): as a token
    of the value split on commas (TF 2.21 and before: the flag must be the whole value), or on
    commas, spaces and tabs (TF 2.22: rule ``remapper_flag_split`` of
    :mod:`jitsim.registry.releases`; measured: a newline does not split).

    >>> remapper_sees_cpu_global_jit("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit", "2.21")
    False
    >>> remapper_sees_cpu_global_jit("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit", "2.22")
    True
    """
    import re

    from jitsim.registry.releases import rule_on

    tokens = re.split(r"[, \t]", raw or "") if rule_on("remapper_flag_split", release) else (raw or "").split(",")
    return "--tf_xla_cpu_global_jit" in tokens


def remapper_cpu_fusions_off(raw: str | None, release: str, session_jit_on: bool = False) -> bool:
    """Whether TF ``release``'s remapper leaves its CPU fusions out for a run with ``TF_XLA_FLAGS``
    = ``raw``: XLA auto-clustering on (the flags' general and single-GPU levels on, or the session's
    jit setting) and :func:`remapper_sees_cpu_global_jit`."""
    flags = parse_tf_xla_flags(raw)
    xla_on = (flags.auto_jit_general >= ON_1 and flags.auto_jit_single_gpu >= ON_1) or session_jit_on
    return xla_on and remapper_sees_cpu_global_jit(raw, release)
