"""Which op inputs tf2xla needs as compile-time constants, and which ops are metadata ops.

TensorFlow registers these per XLA kernel (``REGISTER_XLA_OP(Name("Reshape")
.CompileTimeConstantInput("shape"), ...)``, ``.IsMetadataOp()``) and reads them in
``BackwardsConstAnalysis`` through ``XlaOpRegistry::CompileTimeConstantInputs``. The table is
shipped as ``data/tf-<version>-const-inputs.json`` (made by ``python -m jitsim.registry.regen``)
and loaded lazily; TensorFlow is never imported.

Only the per-op registrations are covered here: const analysis treats function-calling ops
(While, If, Case, PartitionedCall, ...) by analysing their bodies, which is not this module's job.

>>> compile_time_const_inputs("Slice")
('begin', 'size')
>>> is_metadata_op("Shape")
True
"""

from __future__ import annotations

import json
from functools import lru_cache

from jitsim.registry import _TF_VERSION, op_def, read_data
from jitsim.defs import COMPILE_TIME_CONSTANT_INPUTS_ATTR

# Node attr (list of input arg names) that replaces the registered set for one node,
# kXlaCompileTimeConstantInputsAttr in tensorflow/compiler/tf2xla/tf2xla_util.h.
COMPILE_TIME_CONST_INPUTS_ATTR = COMPILE_TIME_CONSTANT_INPUTS_ATTR


def _table(tf_version: str | None = None) -> dict:
    return _load_table(tf_version or _TF_VERSION.get())


@lru_cache(maxsize=None)
def _load_table(tf_version: str) -> dict:
    doc = json.loads(read_data("const-inputs.json", tf_version))
    return {
        "const_inputs": {op: tuple(args) for op, args in doc["const_inputs"].items()},
        "metadata_ops": frozenset(doc["metadata_ops"]),
    }


def const_input_table(tf_version: str | None = None) -> dict[str, tuple[str, ...]]:
    """Op name -> its compile-time-constant input arg names (OpDef order), for every such op."""
    return dict(_table(tf_version)["const_inputs"])


def const_input_ops(tf_version: str | None = None) -> frozenset[str]:
    """The ops with registered compile-time-constant inputs."""
    return _const_input_ops(tf_version or _TF_VERSION.get())


@lru_cache(maxsize=None)
def _const_input_ops(tf_version: str) -> frozenset[str]:
    return frozenset(op for op, args in _table(tf_version)["const_inputs"].items() if args)


def metadata_ops(tf_version: str | None = None) -> frozenset[str]:
    """Ops registered with ``.IsMetadataOp()``: they read only their inputs' shapes."""
    return _table(tf_version)["metadata_ops"]


def compile_time_const_inputs(op: str, tf_version: str | None = None) -> tuple[str, ...]:
    """Input arg names of ``op`` that must be compile-time constants (OpDef order; () if none)."""
    return _table(tf_version)["const_inputs"].get(op, ())


def is_metadata_op(op: str, tf_version: str | None = None) -> bool:
    """True if ``op`` is an XLA metadata op, which const analysis does not propagate through."""
    return op in _table(tf_version)["metadata_ops"]


def _attr_value(nodedef, name: str, opdef):
    if name in nodedef.attr:
        return nodedef.attr[name]
    for a in opdef.attr:
        if a.name == name and a.HasField("default_value"):
            return a.default_value
    return None


def input_ranges(nodedef, opdef=None) -> dict[str, tuple[int, int]]:
    """Input arg name -> ``[start, stop)`` flat input indices of ``nodedef`` (TF's NameRangesForNode).

    A list arg spans ``N`` inputs (``number_attr``) or one per type of its ``type_list_attr``;
    attrs missing from the NodeDef fall back to the OpDef default. Raises ValueError when the
    length of a list arg cannot be determined.
    """
    opdef = opdef if opdef is not None else op_def(nodedef.op)
    if opdef is None:
        raise ValueError(f"unknown op {nodedef.op}")
    ranges, start = {}, 0
    for arg in opdef.input_arg:
        if arg.number_attr:
            av = _attr_value(nodedef, arg.number_attr, opdef)
            if av is None or av.WhichOneof("value") != "i":
                raise ValueError(f"{nodedef.name} ({nodedef.op}): attr {arg.number_attr} is not set")
            n = av.i
        elif arg.type_list_attr:
            av = _attr_value(nodedef, arg.type_list_attr, opdef)
            if av is None or av.WhichOneof("value") != "list":
                raise ValueError(f"{nodedef.name} ({nodedef.op}): attr {arg.type_list_attr} is not set")
            n = len(av.list.type)
        else:
            n = 1
        ranges[arg.name] = (start, start + n)
        start += n
    return ranges


def compile_time_const_input_indices(nodedef, tf_version: str | None = None) -> list[int]:
    """Sorted flat input indices of ``nodedef`` that must be compile-time constants.

    Mirrors ``XlaOpRegistry::CompileTimeConstantInputs``: the node attr
    ``_XlaCompileTimeConstantInputs`` (a list of input arg names), when present, replaces the
    registered names (even when empty); names that are not inputs of the op are ignored; list
    args contribute all their flat inputs. Ops with no registered constant inputs give [].
    """
    if COMPILE_TIME_CONST_INPUTS_ATTR in nodedef.attr:
        names = [s.decode() for s in nodedef.attr[COMPILE_TIME_CONST_INPUTS_ATTR].list.s]
    else:
        names = compile_time_const_inputs(nodedef.op, tf_version)
    if not names:
        return []
    opdef = op_def(nodedef.op, tf_version)
    if opdef is None:
        return []
    ranges = input_ranges(nodedef, opdef)
    out = set()
    for name in names:
        if name in ranges:
            out.update(range(*ranges[name]))
    return sorted(out)
