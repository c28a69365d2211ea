"""TensorFlow op and XLA-kernel registries, shipped as data (no TensorFlow needed).

Snapshots live in ``data/`` per TensorFlow version and are regenerated from an
installed TensorFlow by ``python -m jitsim.registry.regen``. Loading is lazy so
that commands which do not need them keep jitsim's start-up fast.

>>> op_def("AddV2").output_arg[0].name
'z'
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).with_name("data")
DEFAULT_TF_VERSION = "2.21"
# JIT devices used by auto-clustering, plus the deprecated XLA_CPU/XLA_GPU devices.
XLA_DEVICE_TYPES = ("XLA_CPU_JIT", "XLA_GPU_JIT", "XLA_CPU", "XLA_GPU")


def data_file(name: str, tf_version: str = DEFAULT_TF_VERSION) -> Path:
    return DATA / f"tf-{tf_version}-{name}"


def op_defs(tf_version: str = DEFAULT_TF_VERSION) -> dict:
    """Op name -> ``OpDef`` for every op registered in that TensorFlow build (plus the ops
    of op libraries registered with :func:`add_op_defs`)."""
    return _op_defs(tf_version)


@lru_cache(maxsize=None)
def _op_defs(tf_version: str) -> dict:
    from jitsim.graph import protos

    ol = protos.OpList()
    ol.ParseFromString(data_file("ops.binpb", tf_version).read_bytes())
    return {o.name: o for o in ol.op}


OP_LIBRARY_FILE = "op_defs.pb"  # in a harvest directory: ops a loaded op library added


def add_op_defs(data: bytes, tf_version: str = DEFAULT_TF_VERSION) -> list[str]:
    """Register the ``OpDef``s of a serialized ``OpList`` that TF core does not register
    (a loaded op library's, e.g. tensorflow_text's), as loading the library does in TF.
    TF has no XLA kernel for them: they are never compilation candidates. Returns the
    names added."""
    from jitsim.graph import protos

    ol = protos.OpList()
    ol.ParseFromString(data)
    known = op_defs(tf_version)
    added = [o.name for o in ol.op if o.name not in known]
    for o in ol.op:
        known.setdefault(o.name, o)
    return added


def load_op_library_defs(root: Path | str, tf_version: str = DEFAULT_TF_VERSION) -> list[str]:
    """:func:`add_op_defs` from a harvest directory's ``op_defs.pb``, if it has one."""
    f = Path(root) / OP_LIBRARY_FILE
    return add_op_defs(f.read_bytes(), tf_version) if f.is_file() else []


def op_def(name: str, tf_version: str = DEFAULT_TF_VERSION):
    """The ``OpDef`` of op ``name``, or None for an op TensorFlow does not register."""
    return op_defs(tf_version).get(name)


@lru_cache(maxsize=None)
def xla_kernels(device_type: str = "XLA_CPU_JIT", tf_version: str = DEFAULT_TF_VERSION) -> dict:
    """Op name -> list of ``KernelDef`` registered for the XLA device ``device_type``."""
    from jitsim.graph import protos

    kl = protos.KernelList()
    kl.ParseFromString(data_file("xla-kernels.binpb", tf_version).read_bytes())
    out: dict[str, list] = {}
    for k in kl.kernel:
        if k.device_type == device_type:
            out.setdefault(k.op, []).append(k)
    if not out:
        raise ValueError(f"no kernels for device type {device_type!r} in the TF {tf_version} snapshot")
    return out


def _attr_types(nodedef, name: str, opdef) -> list[int] | None:
    """The DataType values of attr ``name`` (a type or list(type)), defaulted from the OpDef."""
    av = nodedef.attr[name] if name in nodedef.attr else None
    if av is None and opdef is not None:
        for a in opdef.attr:
            if a.name == name and a.HasField("default_value"):
                av = a.default_value
    if av is None:
        return None
    kind = av.WhichOneof("value")
    if kind == "type":
        return [av.type]
    if kind == "list":
        return list(av.list.type)
    return None


def find_xla_kernel(nodedef, device_type: str = "XLA_CPU_JIT", tf_version: str = DEFAULT_TF_VERSION):
    """``(kernel, None)`` if ``nodedef`` has a kernel on ``device_type``, else ``(None, why)``.

    Mirrors TF's kernel lookup: the node's ``_kernel`` label must equal the kernel's label
    and every constrained type attr (or each element of a list(type) attr) must be allowed.
    ``why`` says what failed: no kernel for the op, a label mismatch, or the offending attr.
    """
    kernels = xla_kernels(device_type, tf_version).get(nodedef.op)
    if not kernels:
        return None, f"no {device_type} kernel for op {nodedef.op}"
    label = nodedef.attr["_kernel"].s.decode() if "_kernel" in nodedef.attr else ""
    opdef = op_def(nodedef.op, tf_version)
    from jitsim.graph.protos import dtype_name

    why = None
    for k in kernels:
        if k.label != label:
            why = why or f"kernel label {label!r} does not match"
            continue
        bad = None
        for c in k.constraint:
            allowed = set(c.allowed_values.list.type)
            types = _attr_types(nodedef, c.name, opdef)
            if types is None:
                bad = f"attr {c.name} is not set"
                break
            off = [t for t in types if t not in allowed]
            if off:
                bad = f"{c.name}={dtype_name(off[0])} is not supported by {device_type}"
                break
        if bad is None:
            return k, None
        why = bad
    return None, why


def kernel_mismatch(nodedef, device_type: str = "XLA_CPU_JIT", tf_version: str = DEFAULT_TF_VERSION) -> dict:
    """Why ``nodedef`` has no kernel on ``device_type``, as data: ``{"op", "kernel": False}`` when
    XLA has no kernel for the op at all, else the first offending type attr, its value and the
    types the kernel accepts (``{"op", "attr", "type", "allowed"}``); ``{}`` when a kernel matches."""
    from jitsim.graph.protos import dtype_name

    kernels = xla_kernels(device_type, tf_version).get(nodedef.op)
    if not kernels:
        out = {"op": nodedef.op, "kernel": False}
        if nodedef.op.startswith("_Fused"):
            out["origin"] = ("Grappler's remapper made it by fusing ops (e.g. MatMul+BiasAdd+Relu) before "
                             "clustering; to keep the original, clusterable ops: "
                             "tf.config.optimizer.set_experimental_options({'remapping': False})")
        return out
    label = nodedef.attr["_kernel"].s.decode() if "_kernel" in nodedef.attr else ""
    opdef = op_def(nodedef.op, tf_version)
    first: dict | None = None
    for k in kernels:
        if k.label != label:
            first = first or {"op": nodedef.op, "kernel_label": label}
            continue
        for c in k.constraint:
            allowed = list(c.allowed_values.list.type)
            types = _attr_types(nodedef, c.name, opdef)
            if types is None:
                return {"op": nodedef.op, "attr": c.name, "type": None}
            off = [t for t in types if t not in allowed]
            if off:
                return {"op": nodedef.op, "attr": c.name, "type": dtype_name(off[0]),
                        "allowed": [dtype_name(t) for t in allowed]}
        return {}
    return first or {}
