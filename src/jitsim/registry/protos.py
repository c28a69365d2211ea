"""TensorFlow protobuf message classes, without importing TensorFlow.

``import tensorflow`` costs seconds; jitsim only needs the message definitions
(``GraphDef``, ``FunctionDefLibrary``, ``SavedModel`` ...). We ship TensorFlow's
own ``FileDescriptorProto`` set (``tf_protos.binpb``, extracted from the installed
wheel by ``python -m jitsim.registry.regen_protos``) and build the classes in a private descriptor pool,
so they never clash with TensorFlow's generated modules when both are loaded.

>>> gd = GraphDef()
>>> gd.node.add(name="x", op="Const").name
'x'
"""

from __future__ import annotations

from pathlib import Path

from google.protobuf import message as _message_base
from google.protobuf.internal import api_implementation

# protobuf's upb runtime (every wheel since 4.21): the pool and the classes are made with it
# directly; protobuf's descriptor_pool and message_factory modules import its pure-Python
# message implementation and text_format (about 8 ms, on the path of every command)
_upb = None  # (PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python: protobuf's own modules make them)
if api_implementation.Type() == "upb":
    from google._upb import _message as _upb

    if not (hasattr(_upb, "MessageMeta") and hasattr(_upb, "DescriptorPool") and hasattr(_upb, "Descriptor")):
        _upb = None

DESCRIPTOR_FILE = Path(__file__).with_name("tf_protos.binpb")


# -- the wire format's varints, for the modules that read or write protobuf bytes themselves (the
# descriptor set below, TensorBoard event files, the text reader's encoder, a graph written node by
# node, a wire-format scan of a refused file)


def encode_varint(value: int) -> bytes:
    """The varint of ``value`` (a negative one as its 64-bit two's complement, as protobuf
    writes int32/int64).

    >>> encode_varint(300), len(encode_varint(-1)), decode_varint(b"\\xac\\x02", 0, 2)
    (b'\\xac\\x02', 10, (300, 2))
    """
    value &= (1 << 64) - 1
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(data: bytes, pos: int, end: int) -> tuple[int | None, int]:
    """``(value, position after it)`` of the varint at ``pos``; value None where it runs past
    ``end`` or over 64 bits."""
    value = shift = 0
    while pos < end and shift < 64:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, pos
    return None, pos


def _serialized_files(data: bytes):
    """The serialized ``FileDescriptorProto`` s of a serialized ``FileDescriptorSet``: its
    ``file`` fields (number 1, length-delimited: tag byte 0x0A), read off the wire without
    ``descriptor_pb2`` (6 ms to import, on the path of every command).

    >>> list(_serialized_files(b"\\x0a\\x02ab\\x0a\\x00"))
    [b'ab', b'']
    """
    pos, end = 0, len(data)
    while pos < end:
        if data[pos] != 0x0A:
            raise ValueError(f"{DESCRIPTOR_FILE.name}: not a FileDescriptorSet (byte {pos})")
        size, pos = decode_varint(data, pos + 1, end)
        if size is None or pos + size > end:
            raise ValueError(f"{DESCRIPTOR_FILE.name}: truncated")
        yield data[pos:pos + size]
        pos += size


def _load_pool():
    if _upb is not None:
        pool = _upb.DescriptorPool()
    else:
        from google.protobuf import descriptor_pool

        pool = descriptor_pool.DescriptorPool()
    for f in _serialized_files(DESCRIPTOR_FILE.read_bytes()):
        pool.AddSerializedFile(f)
    return pool


POOL = _load_pool()


def class_of(descriptor):
    """The message class of a message ``descriptor``: ``message_factory.GetMessageClass``'s
    (the same class object), made on upb as that function makes it there (a class per
    descriptor, then one for each message-typed field's descriptor) without importing it."""
    if _upb is None or not isinstance(descriptor, _upb.Descriptor):
        from google.protobuf import message_factory

        return message_factory.GetMessageClass(descriptor)
    made = _made_class(descriptor)
    if made is not None:
        return made
    cls = _upb.MessageMeta(descriptor.name, (_message_base.Message,), {"DESCRIPTOR": descriptor, "__module__": None})
    for field in descriptor.fields:
        if field.message_type is not None:
            class_of(field.message_type)
    return cls


def _made_class(descriptor):
    """The class upb holds for ``descriptor`` (None: none made yet; upb's ``_concrete_class``
    then fails with a SystemError)."""
    try:
        return descriptor._concrete_class
    except (SystemError, AttributeError):
        return None


def message_class(full_name: str):
    """The message class for a fully qualified proto name, e.g. ``tensorflow.GraphDef``."""
    return class_of(POOL.FindMessageTypeByName(full_name))


GraphDef = message_class("tensorflow.GraphDef")
NodeDef = message_class("tensorflow.NodeDef")
AttrValue = message_class("tensorflow.AttrValue")
FunctionDef = message_class("tensorflow.FunctionDef")
FunctionDefLibrary = message_class("tensorflow.FunctionDefLibrary")
SavedModel = message_class("tensorflow.SavedModel")
MetaGraphDef = message_class("tensorflow.MetaGraphDef")
OpList = message_class("tensorflow.OpList")
OpDef = message_class("tensorflow.OpDef")
KernelList = message_class("tensorflow.KernelList")


def __getattr__(name: str):
    # Looked up lazily so that a descriptor set lacking them (mid-regeneration) still imports.
    if name in ("ConfigProto",):
        return message_class(f"tensorflow.{name}")
    raise AttributeError(name)
DataType = POOL.FindEnumTypeByName("tensorflow.DataType")


def dtype_name(value: int) -> str:
    """``1`` -> ``'DT_FLOAT'``; unknown numbers are returned as ``'DT_<n>'``."""
    v = DataType.values_by_number.get(value)
    return v.name if v is not None else f"DT_{value}"
