"""Regenerate ``tf_protos.binpb`` from the installed TensorFlow.

Run ``python -m jitsim.registry.regen_protos`` after upgrading TensorFlow. Kept apart
from :mod:`jitsim.registry.protos` so it works even when the shipped file is missing.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from google.protobuf import descriptor_pb2

OUT = Path(__file__).with_name("tf_protos.binpb")

# Top-level files whose transitive closure we ship.
ROOTS = (
    "tensorflow.core.framework.graph_pb2",
    "tensorflow.core.framework.op_def_pb2",
    "tensorflow.core.framework.kernel_def_pb2",
    "tensorflow.core.protobuf.saved_model_pb2",
    "tensorflow.core.protobuf.config_pb2",
)


def regenerate(out: Path = OUT) -> int:
    """Write the descriptor set of ROOTS and their dependencies; return the file count."""
    seen: dict[str, descriptor_pb2.FileDescriptorProto] = {}

    def walk(fd) -> None:
        if fd.name in seen:
            return
        for dep in fd.dependencies:
            walk(dep)
        proto = descriptor_pb2.FileDescriptorProto()
        fd.CopyToProto(proto)
        seen[fd.name] = proto

    for mod in ROOTS:
        walk(importlib.import_module(mod).DESCRIPTOR)
    fds = descriptor_pb2.FileDescriptorSet(file=list(seen.values()))
    out.write_bytes(fds.SerializeToString(deterministic=True))
    return len(seen)


if __name__ == "__main__":
    print(f"wrote {regenerate()} proto files to {OUT}")
