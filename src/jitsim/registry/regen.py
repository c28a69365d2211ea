"""Regenerate the registry snapshots from the installed TensorFlow.

    python -m jitsim.registry.regen            # writes data/tf-<major.minor>-*.binpb

Needs TensorFlow importable; jitsim itself never does at run time.
"""

from __future__ import annotations

import sys

from jitsim.registry import DATA, XLA_DEVICE_TYPES, data_file


def regenerate_op_defs() -> tuple[str, int]:
    import tensorflow as tf
    from tensorflow.python.client import pywrap_tf_session as c

    version = ".".join(tf.__version__.split(".")[:2])
    buf = c.TF_GetAllOpList()
    data = c.TF_GetBuffer(buf)
    from jitsim.graph import protos

    ol = protos.OpList()
    ol.ParseFromString(data)
    ops = sorted(ol.op, key=lambda o: o.name)
    out = protos.OpList()
    out.op.extend(ops)
    DATA.mkdir(exist_ok=True)
    data_file("ops.binpb", version).write_bytes(out.SerializeToString(deterministic=True))
    return version, len(ops)


def regenerate_xla_kernels() -> tuple[str, dict]:
    """Snapshot the kernels of the XLA JIT devices, with their type constraints and labels.

    TF registers XLA_CPU_JIT / XLA_GPU_JIT kernels lazily, on the first XLA compilation, so
    one tiny jit_compile function is run first. The CPU-only wheel registers both devices.
    """
    import tensorflow as tf
    from tensorflow.python.framework import kernels

    @tf.function(jit_compile=True)
    def _trigger(x):
        return x + 1.0

    _trigger(tf.ones([1]))
    version = ".".join(tf.__version__.split(".")[:2])
    from jitsim.graph import protos

    out = protos.KernelList()
    counts: dict[str, int] = {}
    found = [k for k in kernels.get_all_registered_kernels().kernel if k.device_type in XLA_DEVICE_TYPES]
    for k in sorted(found, key=lambda k: (k.device_type, k.op, k.label, k.SerializeToString(deterministic=True))):
        out.kernel.add().ParseFromString(k.SerializeToString())
        counts[k.device_type] = counts.get(k.device_type, 0) + 1
    data_file("xla-kernels.binpb", version).write_bytes(out.SerializeToString(deterministic=True))
    return version, counts


def main() -> int:
    version, n = regenerate_op_defs()
    print(f"TensorFlow {version}: {n} op definitions -> {data_file('ops.binpb', version)}")
    version, counts = regenerate_xla_kernels()
    print(f"TensorFlow {version}: XLA kernels {counts} -> {data_file('xla-kernels.binpb', version)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
