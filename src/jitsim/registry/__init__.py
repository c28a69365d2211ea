"""TensorFlow op and XLA-kernel registries, shipped as data (no TensorFlow needed).

Snapshots live in ``data/`` per TensorFlow version and are regenerated from an
installed TensorFlow by ``python -m jitsim.registry.regen``. Loading is lazy so
that commands which do not need them keep jitsim's start-up fast.

Ops beyond TF core's (a custom-op library's, e.g. tensorflow-text's) come from
:class:`OpLibrary` objects made active with :func:`using_op_libraries`, as loading an op
library registers its ops in TF's process-wide registry: ``jitsim registry export`` writes
one from a TF process with the library loaded (:mod:`jitsim.graph.custom_ops`), and
jitsim infers one from the graph itself for ops nobody described.

Which TensorFlow release is simulated is a scoped setting too: :func:`using_tf_version`
(default 2.21, the newest final release supported; :mod:`jitsim.registry.versions` lists the
releases and picks one for a graph). Every lookup here answers for the active release unless given one.

>>> op_def("AddV2").output_arg[0].name
'z'
>>> with using_tf_version("2.16"):
...     current_tf_version()
'2.16'
"""

from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

DATA = Path(__file__).with_name("data")
# JIT devices used by auto-clustering, plus the deprecated XLA_CPU/XLA_GPU devices.
XLA_DEVICE_TYPES = ("XLA_CPU_JIT", "XLA_GPU_JIT", "XLA_CPU", "XLA_GPU")
RELEASE_DATA = "release.json"  # data/tf-<release>-release.json: which wheel the data came from, its producer


def _shipped_releases() -> tuple[str, ...]:
    """The releases with data here, oldest first: a release is supported exactly when
    ``python -m jitsim.registry.regen`` has written its files (docs/recipes.md)."""
    found = (p.name[len("tf-"):-len("-" + RELEASE_DATA)] for p in DATA.glob("tf-*-" + RELEASE_DATA))
    return tuple(sorted(found, key=lambda r: tuple(int(x) for x in r.split("."))))


def _final_release(release: str) -> bool:
    """Whether a release's data came from a final wheel (not a release candidate or a nightly)."""
    import json
    import re

    version = json.loads((DATA / f"tf-{release}-{RELEASE_DATA}").read_text()).get("tf_version", "")
    return re.fullmatch(r"\d+\.\d+\.\d+", version) is not None


# the releases with data here (registry/versions.py: their GraphDef producers, which one a graph is from)
SUPPORTED_TF_VERSIONS = _shipped_releases()
# the default: the newest final release (a release candidate is simulated when asked for, or when a
# graph or a capture says it is from it, never by default)
DEFAULT_TF_VERSION = next((r for r in reversed(SUPPORTED_TF_VERSIONS) if _final_release(r)), SUPPORTED_TF_VERSIONS[-1])
_TF_VERSION: ContextVar[str] = ContextVar("jitsim_tf_version", default=DEFAULT_TF_VERSION)


def check_tf_version(version: str) -> str:
    """``"2.16"`` (``"2.16.2"``, ``"2.16.0rc1"``, ``"2.16.0.dev20240101"`` are cut to major.minor) when
    jitsim has data for that release; else a :class:`~jitsim.errors.JitsimError` naming those it has."""
    import re

    m = re.match(r"^\s*(\d+)\.(\d+)(?:[.\-+]?.*)?$", str(version))
    release = f"{m.group(1)}.{m.group(2)}" if m else None
    if release not in SUPPORTED_TF_VERSIONS:
        from jitsim.errors import JitsimError

        raise JitsimError(f"unsupported TensorFlow version {str(version)!r}: jitsim simulates "
                          f"{', '.join(SUPPORTED_TF_VERSIONS)}")
    return release


@contextmanager
def using_tf_version(version: str | None):
    """Simulate TensorFlow ``version`` (``"2.16"``; a full ``"2.16.2"`` is cut to major.minor)
    inside the block: every registry lookup without an explicit version answers for it.
    None keeps the active one. Raises :class:`~jitsim.errors.JitsimError` for a release
    jitsim has no data for."""
    if version is None:
        yield
        return
    token = _TF_VERSION.set(check_tf_version(version))
    try:
        yield
    finally:
        _TF_VERSION.reset(token)


def current_tf_version() -> str:
    """The simulated TensorFlow release (major.minor) in this context."""
    return _TF_VERSION.get()


def data_file(name: str, tf_version: str | None = None) -> Path:
    """The path of the shipped data file ``name`` for a release (default: the active one)."""
    return DATA / f"tf-{tf_version or _TF_VERSION.get()}-{name}"


def read_data(name: str, tf_version: str | None = None) -> bytes:
    """The bytes of data file ``name`` of a release (default: the active one)."""
    return data_file(name, tf_version).read_bytes()


def op_defs(tf_version: str | None = None) -> dict:
    """Op name -> ``OpDef`` for every op registered in that TensorFlow build (default: the
    simulated release, :func:`using_tf_version`)."""
    return _op_defs(tf_version or _TF_VERSION.get())


@lru_cache(maxsize=None)
def _op_defs(tf_version: str) -> dict:
    from jitsim.registry import protos

    ol = protos.OpList()
    ol.ParseFromString(read_data("ops.binpb", tf_version))
    return {o.name: o for o in ol.op}


def slow_ops(tf_version: str | None = None) -> frozenset[str]:
    """The ops TF's ``RecursiveCompilabilityChecker::OpIsSlow`` keeps out of auto-clustering in
    that release (default: the simulated one; ``data/tf-<release>-slow-ops.json``)."""
    return _slow_ops(tf_version or _TF_VERSION.get())


@lru_cache(maxsize=None)
def _slow_ops(tf_version: str) -> frozenset[str]:
    import json

    return frozenset(json.loads(read_data("slow-ops.json", tf_version))["slow_ops"])


@dataclass(frozen=True)
class OpLibrary:
    """Op definitions beyond TF core's, with the kernels registered for them.

    ``op_defs``: op name -> ``OpDef``; ``xla_kernels`` / ``kernels``: ``KernelDef``s on XLA JIT
    devices / on CPU and GPU (host-memory arguments); ``source``: where it came from (a file
    written by ``jitsim registry export``, or ``"inferred from <graph>"``); ``inferred``: the
    OpDefs were guessed from how the graph uses the ops (``jitsim.graph.custom_ops``)."""

    op_defs: dict = field(default_factory=dict)
    xla_kernels: tuple = ()
    kernels: tuple = ()
    source: str = ""
    inferred: bool = False


_LIBRARIES: ContextVar[tuple] = ContextVar("jitsim_op_libraries", default=())
OP_LIBRARY_FILE = "op_defs.pb"  # in a harvest directory: the OpList of ops TF core does not register


@contextmanager
def using_op_libraries(*libraries: OpLibrary):
    """Make ``libraries`` visible to :func:`op_def` and the kernel lookups inside the block
    (in addition to those already active; TF core's ops always win, as TF refuses to register
    an op name twice)."""
    token = _LIBRARIES.set(_LIBRARIES.get() + tuple(lib for lib in libraries if lib is not None))
    try:
        yield
    finally:
        _LIBRARIES.reset(token)


@contextmanager
def simulating(release: str | None = None, libraries=()):
    """The one way jitsim's code enters the registries' context: inside the block, lookups
    without an explicit release answer for ``release`` (None: the active one) and see the op
    ``libraries`` too (:func:`using_tf_version`, :func:`using_op_libraries`). Entering what is
    already active (the same release, libraries already visible) changes nothing: a simulation
    enters it once, however many of its steps ask."""
    wanted = check_tf_version(release) if release is not None else None
    new = tuple(lib for lib in libraries if lib is not None and lib not in _LIBRARIES.get())
    version_token = _TF_VERSION.set(wanted) if wanted is not None and wanted != _TF_VERSION.get() else None
    libraries_token = _LIBRARIES.set(_LIBRARIES.get() + new) if new else None
    try:
        yield
    finally:
        if libraries_token is not None:
            _LIBRARIES.reset(libraries_token)
        if version_token is not None:
            _TF_VERSION.reset(version_token)


def op_def(name: str, tf_version: str | None = None):
    """The ``OpDef`` of op ``name`` (TF core's, else an active :class:`OpLibrary`'s), or None
    for an op nobody registers."""
    od = _op_defs(tf_version or _TF_VERSION.get()).get(name)
    if od is None:
        for lib in _LIBRARIES.get():
            od = lib.op_defs.get(name)
            if od is not None:
                break
    return od


def op_library_of(name: str, tf_version: str | None = None) -> OpLibrary | None:
    """The active :class:`OpLibrary` that defines ``name``, None for TF core's ops and unknown ops."""
    if name in op_defs(tf_version):
        return None
    return next((lib for lib in _LIBRARIES.get() if name in lib.op_defs), None)


def _library_kernels(op: str, device_type: str, attr: str) -> list:
    return [k for lib in _LIBRARIES.get() for k in getattr(lib, attr) if k.op == op and k.device_type == device_type]


def xla_kernels_for(op: str, device_type: str = "XLA_CPU_JIT", tf_version: str | None = None) -> list:
    """The ``KernelDef``s registered for ``op`` on the XLA device ``device_type`` (TF's, then
    the active op libraries')."""
    found = xla_kernels(device_type, tf_version).get(op)
    if found:
        return found
    return _library_kernels(op, device_type, "xla_kernels") if _LIBRARIES.get() else []


def library_kernels_for(op: str, device_type: str) -> list:
    """CPU/GPU ``KernelDef``s the active op libraries register for ``op``."""
    return _library_kernels(op, device_type, "kernels") if _LIBRARIES.get() else []


def xla_kernels(device_type: str = "XLA_CPU_JIT", tf_version: str | None = None) -> dict:
    """Op name -> list of ``KernelDef`` registered for the XLA device ``device_type`` (in the
    simulated release unless ``tf_version`` is given)."""
    return _xla_kernels(device_type, tf_version or _TF_VERSION.get())


@lru_cache(maxsize=None)
def _xla_kernels(device_type: str, tf_version: str) -> dict:
    from jitsim.registry import protos

    kl = protos.KernelList()
    kl.ParseFromString(read_data("xla-kernels.binpb", tf_version))
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


_CONSTRAINTS: dict[int, tuple] = {}


def _constraints(kernel) -> tuple:
    """``(constraint, frozenset of allowed types)`` of a registry ``KernelDef`` (registry
    kernels live as long as the process: keyed by identity, the kernel kept alive)."""
    got = _CONSTRAINTS.get(id(kernel))
    if got is None or got[0] is not kernel:
        got = _CONSTRAINTS[id(kernel)] = (kernel, tuple((c, frozenset(c.allowed_values.list.type))
                                                        for c in kernel.constraint))
    return got[1]


def find_xla_kernel(nodedef, device_type: str = "XLA_CPU_JIT", tf_version: str | None = None):
    """``(kernel, None)`` if ``nodedef`` has a kernel on ``device_type``, else ``(None, why)``.

    Mirrors TF's kernel lookup: the node's ``_kernel`` label must equal the kernel's label
    and every constrained type attr (or each element of a list(type) attr) must be allowed.
    ``why`` says what failed: no kernel for the op, a label mismatch, or the offending attr.
    """
    kernels = xla_kernels_for(nodedef.op, device_type, tf_version)
    if not kernels:
        return None, f"no {device_type} kernel for op {nodedef.op}"
    label = nodedef.attr["_kernel"].s.decode() if "_kernel" in nodedef.attr else ""
    opdef = op_def(nodedef.op, tf_version)
    from jitsim.registry.protos import dtype_name

    why = None
    for k in kernels:
        if k.label != label:
            why = why or f"kernel label {label!r} does not match"
            continue
        bad = None
        for c, allowed in _constraints(k):
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


def kernel_mismatch(nodedef, device_type: str = "XLA_CPU_JIT", tf_version: str | None = None) -> dict:
    """Why ``nodedef`` has no kernel on ``device_type``, as data: ``{"op", "kernel": False}`` when
    XLA has no kernel for the op at all, else the first offending type attr, its value and the
    types the kernel accepts (``{"op", "attr", "type", "allowed"}``); ``{}`` when a kernel matches."""
    out = _kernel_mismatch(nodedef, device_type, tf_version)
    if out:
        origin = fused_op_origin(nodedef.op)
        if origin:
            out["origin"] = origin
    return out


# what Grappler's remapper fuses into each kind of op it makes (the rest: a generic sentence)
_FUSED_FROM = (("MatMul", "MatMul+BiasAdd+Relu"), ("Conv2D", "Conv2D+BiasAdd+Relu or Conv2D+FusedBatchNorm"),
               ("Conv3D", "Conv3D+BiasAdd+Relu"), ("DepthwiseConv2d", "DepthwiseConv2dNative+BiasAdd+Relu"),
               ("BatchNorm", "FusedBatchNorm+Add+Relu"), ("Mish", "Softplus+Tanh+Mul"))


def fused_op_origin(op: str) -> str | None:
    """For an op only Grappler's remapper creates (``_Fused*``, ``_MklFused*``,
    ``_MklNativeFused*``, ``_Mkl*WithFused*``): where it came from and how to keep the original,
    clusterable ops; else None."""
    if not op.startswith("_") or "Fused" not in op:
        return None
    what = next((f for key, f in _FUSED_FROM if key in op), "several ops")
    return (f"Grappler's remapper made it by fusing ops (e.g. {what}) before clustering; to keep the original, "
            "clusterable ops: tf.config.optimizer.set_experimental_options({'remapping': False})")


def _kernel_mismatch(nodedef, device_type: str, tf_version: str | None) -> dict:
    from jitsim.registry.protos import dtype_name

    kernels = xla_kernels_for(nodedef.op, device_type, tf_version)
    if not kernels:
        return {"op": nodedef.op, "kernel": False}
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
