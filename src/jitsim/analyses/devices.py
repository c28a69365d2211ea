"""Device names, XLA compilation-device registrations and ``PickDeviceForXla``.

TF 2.21 registers a JIT device for ``CPU`` (``XLA_CPU_JIT``; policy fixed when the
registry is first queried: "if enabled globally" with ``--tf_xla_cpu_global_jit``,
else "if explicitly requested") and ``GPU`` (``XLA_GPU_JIT``, "if enabled globally"),
plus the deprecated ``XLA_CPU``/``XLA_GPU`` devices ("always").

Device names are parsed by :mod:`jitsim.graph.device_names`; TF's regular kernel registry is
:mod:`jitsim.registry.kernels`.
"""

from __future__ import annotations

from dataclasses import dataclass

from jitsim.graph.device_names import ParsedName, parse_device_name

ALWAYS, IF_ENABLED_GLOBALLY, IF_EXPLICITLY_REQUESTED = "always", "if_enabled_globally", "if_explicitly_requested"


@dataclass(frozen=True)
class Registration:
    device_type: str
    jit_device: str
    policy: str
    cluster_resource_variable_ops_unsafely: bool = False
    cluster_stack_ops: bool = False
    cluster_tensor_array_ops: bool = False
    cluster_stateful_rng_ops: bool = False
    cluster_control_trigger: bool = False
    elide_assert_and_checknumerics: bool = False
    cluster_variant_ops: bool = False
    cluster_slow_ops: bool = False
    cluster_inaccurate_ops: bool = False


def registrations(cpu_global_jit_at_startup: bool, enable_xla_devices: bool = False) -> dict[str, Registration]:
    regs = {
        "CPU": Registration("CPU", "XLA_CPU_JIT",
                            IF_ENABLED_GLOBALLY if cpu_global_jit_at_startup else IF_EXPLICITLY_REQUESTED),
        "GPU": Registration("GPU", "XLA_GPU_JIT", IF_ENABLED_GLOBALLY),
    }
    if enable_xla_devices:
        for t, jit in (("XLA_CPU", "XLA_CPU_JIT"), ("XLA_GPU", "XLA_GPU_JIT")):
            regs[t] = Registration(t, jit, ALWAYS, *([True] * 9))
    return regs


def _compatible(a: ParsedName, b: ParsedName) -> bool:
    for f in ("job", "replica", "task", "type", "id"):
        x, y = getattr(a, f), getattr(b, f)
        if x is not None and y is not None and x != y:
            return False
    return True


def _is_specification(a: ParsedName, b: ParsedName) -> bool:
    """Every field set in ``a`` is set to the same value in ``b`` (b is at least as specific)."""
    for f in ("job", "replica", "task", "type", "id"):
        x = getattr(a, f)
        if x is not None and getattr(b, f) != x:
            return False
    return True


def pick_device_for_xla(devices: list[str], allow_mixing_unknown_and_cpu: bool) -> str | None:
    """The device a cluster over ``devices`` (in DeviceInfoCache id order) compiles for,
    or None when they conflict (TF's ``MaybePickDeviceForXla``)."""
    picked = {"GPU": None, "CPU": None, "unknown": None}
    for name in devices:
        p = parse_device_name(name)
        if p is None:
            return None
        cls = p.type if p.type in ("GPU", "CPU") else "unknown"
        cur = picked[cls]
        if cur is None:
            picked[cls] = name
            continue
        if cls == "unknown":
            return None
        cp = parse_device_name(cur)
        if not _compatible(cp, p):
            return None
        if _is_specification(cp, p):
            picked[cls] = name
        elif not _is_specification(p, cp):
            return None
    gpu, cpu, unk = picked["GPU"], picked["CPU"], picked["unknown"]
    if unk is not None and gpu is not None:
        return None
    if not allow_mixing_unknown_and_cpu and unk is not None and cpu is not None:
        return None
    return gpu or unk or cpu


def should_compile(explicit: bool, dev_type: str, policy: str, jit_level: int, session_cpu_global_jit: bool) -> bool:
    from jitsim.flags import OFF

    return (explicit or policy == ALWAYS or (policy == IF_ENABLED_GLOBALLY and jit_level != OFF)
            or (dev_type == "CPU" and policy == IF_EXPLICITLY_REQUESTED and session_cpu_global_jit))


