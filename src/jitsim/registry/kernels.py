"""TF's regular kernel registry for CPU, GPU and ``DEFAULT`` (``FindKernelDef``: :func:`find_kernel`),
shipped as ``registry/data/tf-<release>-kernels-cpu-gpu.binpb`` (regenerate it with
``python -m jitsim.registry.regen``, which needs TensorFlow): placement, the memory types of
PartiallyDecluster, BuildXlaOps and constant folding consult it."""

from __future__ import annotations

from functools import lru_cache

from jitsim.registry import _TF_VERSION, library_kernels_for, op_def, read_data

KERNELS_DATA = "kernels-cpu-gpu.binpb"
KERNEL_DEVICE_TYPES = ("CPU", "GPU", "DEFAULT")


def tf_kernels(tf_version: str | None = None) -> dict[tuple[str, str], list]:
    """``(op, device type) -> [KernelDef]`` for TF's regular CPU, GPU and DEFAULT kernels
    (of the simulated release unless ``tf_version`` is given)."""
    return _tf_kernels(tf_version or _TF_VERSION.get())


@lru_cache(maxsize=None)
def _tf_kernels(tf_version: str) -> dict[tuple[str, str], list]:
    from jitsim.registry import protos

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
