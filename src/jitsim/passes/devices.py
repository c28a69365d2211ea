"""Device names, XLA compilation-device registrations and ``PickDeviceForXla``.

TF 2.21 registers a JIT device for ``CPU`` (``XLA_CPU_JIT``; policy fixed when the
registry is first queried: "if enabled globally" with ``--tf_xla_cpu_global_jit``,
else "if explicitly requested") and ``GPU`` (``XLA_GPU_JIT``, "if enabled globally"),
plus the deprecated ``XLA_CPU``/``XLA_GPU`` devices ("always").

Also TF's regular kernel registry for CPU, GPU and ``DEFAULT`` (``FindKernelDef``:
:func:`find_kernel`), shipped as ``registry/data/tf-2.21-kernels-cpu-gpu.binpb`` (regenerate
it with ``python -m jitsim.registry.regen``, which needs TensorFlow): placement, the
memory types of PartiallyDecluster, BuildXlaOps and constant folding consult it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from jitsim.registry import _TF_VERSION, library_kernels_for, op_def, read_data

KERNELS_DATA = "kernels-cpu-gpu.binpb"
KERNEL_DEVICE_TYPES = ("CPU", "GPU", "DEFAULT")
ALWAYS, IF_ENABLED_GLOBALLY, IF_EXPLICITLY_REQUESTED = "always", "if_enabled_globally", "if_explicitly_requested"


@dataclass(frozen=True)
class ParsedName:
    job: str | None = None
    replica: int | None = None
    task: int | None = None
    type: str | None = None
    id: int | None = None


_PART = re.compile(r"/(job|replica|task|device|cpu|gpu|CPU|GPU):?([^/]*)")


@lru_cache(maxsize=4096)
def parse_device_name(name: str) -> ParsedName | None:
    """``/job:localhost/replica:0/task:0/device:CPU:0`` -> fields; None if unparsable
    (memoized: a graph names a handful of devices on thousands of nodes).

    >>> parse_device_name("/job:localhost/replica:0/task:0/device:GPU:1").type
    'GPU'
    >>> parse_device_name("/cpu:0").type
    'CPU'
    """
    if not name:
        return None
    if not name.startswith("/"):
        name = "/device:" + name if ":" in name else name
    job = replica = task = dtype = did = None
    pos = 0
    for m in _PART.finditer(name):
        if m.start() != pos:
            return None
        pos = m.end()
        key, val = m.group(1), m.group(2)
        if key == "job":
            job = val
        elif key == "replica":
            replica = int(val) if val.isdigit() else None
        elif key == "task":
            task = int(val) if val.isdigit() else None
        elif key == "device":
            t, _, i = val.partition(":")
            dtype = t
            did = int(i) if i.isdigit() else None
        else:  # legacy /cpu:0, /gpu:0
            dtype = key.upper()
            did = int(val) if val.isdigit() else None
    if pos != len(name):
        return None
    return ParsedName(job, replica, task, dtype, did)


def device_type(name: str) -> str | None:
    p = parse_device_name(name)
    return p.type if p else None


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
    from jitsim.passes.flags import OFF

    return (explicit or policy == ALWAYS or (policy == IF_ENABLED_GLOBALLY and jit_level != OFF)
            or (dev_type == "CPU" and policy == IF_EXPLICITLY_REQUESTED and session_cpu_global_jit))


def replace_devices(graph, target: str):
    """A copy of ``graph`` re-placed for a what-if on another device type (``cpu``/``gpu``):
    every node whose op has a kernel of that type for its attrs moves to device 0 of that
    type; the others keep their device (or get the CPU). Approximates TF's placer (which
    also colocates resource ops with their variables and honours soft placement)."""
    from jitsim.graph import protos
    from jitsim.graph.model import Graph

    kind = {"cpu": "CPU", "gpu": "GPU"}.get(target.lower())
    if kind is None:
        from jitsim.errors import JitsimError

        raise JitsimError(f"cannot re-place a graph on {target!r}: give cpu or gpu")
    gd = protos.GraphDef()
    gd.ParseFromString(graph.graphdef.SerializeToString())
    name = f"/job:localhost/replica:0/task:0/device:{kind}:0"
    cpu = "/job:localhost/replica:0/task:0/device:CPU:0"
    for n in gd.node:
        if n.op in ("_Arg", "_Retval", "Placeholder", "NoOp") or find_kernel(n, kind) is not None:
            n.device = name
        elif not n.device or device_type(n.device) not in ("CPU", kind):
            n.device = cpu
    return Graph(gd, source=graph.source, validate=False)


# -- TF's CPU/GPU kernel registry (FindKernelDef) -----------------------------------------------------------


def tf_kernels(tf_version: str | None = None) -> dict[tuple[str, str], list]:
    """``(op, device type) -> [KernelDef]`` for TF's regular CPU, GPU and DEFAULT kernels
    (of the simulated release unless ``tf_version`` is given)."""
    return _tf_kernels(tf_version or _TF_VERSION.get())


@lru_cache(maxsize=None)
def _tf_kernels(tf_version: str) -> dict[tuple[str, str], list]:
    from jitsim.graph import protos

    kl = protos.KernelList()
    kl.ParseFromString(read_data(KERNELS_DATA, tf_version))
    out: dict[tuple[str, str], list] = {}
    for k in kl.kernel:
        out.setdefault((k.op, k.device_type), []).append(k)
    return out


def _attr_value(nodedef, name: str):
    """The node's attr ``name``, or its OpDef default; None if neither exists."""
    if name in nodedef.attr:
        return nodedef.attr[name]

    od = op_def(nodedef.op)
    if od is not None:
        for a in od.attr:
            if a.name == name and a.HasField("default_value"):
                return a.default_value
    return None


def _matches(k, nodedef, label: str) -> bool | None:
    """TF's ``KernelAttrsMatch`` (None: TF reports an error, e.g. the kernel constrains an
    attr the node lacks or has with another kind of value)."""
    if k.label != label:
        return False
    for c in k.constraint:
        allowed = c.allowed_values.list
        kinds = [kind for kind, vals in (("type", allowed.type), ("s", allowed.s), ("i", allowed.i),
                                         ("b", allowed.b)) if len(vals)]
        if len(kinds) != 1:
            return None
        av = _attr_value(nodedef, c.name)
        if av is None:
            return None
        have = av.WhichOneof("value")
        kind = kinds[0]
        if kind == "type":
            if have == "type":
                types = (av.type,)
            elif have == "list":
                types = tuple(av.list.type)
            else:
                return None
            if any(t not in allowed.type for t in types):
                return False
        else:
            if have != kind:
                return None
            if getattr(av, kind) not in getattr(allowed, kind):
                return False
    return True


def find_kernel(nodedef, device_type: str):
    """TF's ``FindKernelDef`` on a regular device type: the matching kernel of that type with
    the highest priority (two at the same priority: an error, None), else the single matching
    ``DEFAULT`` kernel; None when there is none."""
    kernels = tf_kernels()
    label = nodedef.attr["_kernel"].s.decode() if "_kernel" in nodedef.attr else ""
    best = None
    tie = False
    for k in kernels.get((nodedef.op, device_type), ()) or library_kernels_for(nodedef.op, device_type):
        m = _matches(k, nodedef, label)
        if m is None:
            return None
        if not m:
            continue
        if best is None or k.priority > best.priority:
            best, tie = k, False
        elif k.priority == best.priority:
            tie = True
    if best is not None:
        return None if tie else best
    found = []
    for k in kernels.get((nodedef.op, "DEFAULT"), ()) or library_kernels_for(nodedef.op, "DEFAULT"):
        m = _matches(k, nodedef, label)
        if m is None:
            return None
        if m:
            found.append(k)
    return found[0] if len(found) == 1 else None
