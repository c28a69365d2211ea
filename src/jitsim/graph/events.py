"""TensorBoard event files: written for ``--tensorboard DIR``, read as a graph input.

An event file is a TFRecord file (TF's ``tensorflow/core/lib/io/record_writer.cc``): each
record is its length (uint64, little-endian), the masked CRC-32C of those 8 bytes, the data,
and the masked CRC-32C of the data. Each record's data is one ``tensorflow.Event``
(``tensorflow/core/util/event.proto``): ``wall_time`` (1, double), ``step`` (2), and one of
``file_version`` (3, the first event: ``brain.Event:2``), ``graph_def`` (4, a serialized
GraphDef), ``summary`` (5), ``meta_graph_def`` (9, a serialized MetaGraphDef)... jitsim's
shipped descriptor set has no ``Event``, and only these few fields matter, so they are
encoded and decoded here by hand with protobuf's wire format.

TensorBoard's graph dashboard shows a run's (last) ``graph_def`` event and colours its nodes
by XLA cluster from each node's ``_XlaCluster`` attr (tensorboard/plugins/graph/
tf_graph_common/graph.ts reads that key), which jitsim's clustered graphs carry, as TF's own
mark_for_compilation dumps do; devices stay in each node's ``device`` field (colour by device).

The file name follows TF's writer (``events.out.tfevents.<seconds>.<host>``, TensorBoard reads
every file whose name holds ``tfevents``) with ``.jitsim`` at the end: ``<seconds>`` is the
time of writing, or ``$SOURCE_DATE_EPOCH`` when set (byte-identical files for the same graph).
"""

from __future__ import annotations

import os
import struct
import time
from dataclasses import dataclass, field
from pathlib import Path

from jitsim.errors import GraphError
from jitsim.registry.protos import decode_varint, encode_varint

FILE_VERSION = b"brain.Event:2"
_HEADER = 12  # length (8) + its masked crc (4)
_MASK_DELTA = 0xA282EAD8
KERAS_PLUGIN = "graph_keras_model"  # the Keras model-config summary of Keras' TensorBoard callback
RUN_METADATA_PLUGIN = "graph_run_metadata_graph"  # tf.summary.trace_export's graphs

# -- CRC-32C (Castagnoli) ---------------------------------------------------------------------


def crc32c(data: bytes) -> int:
    """CRC-32C of ``data``: google-crc32c's C code (0.2 ms per MB; imported on first use, by
    the commands that read or write event files), else (and for a few bytes, such as the
    header :func:`looks_like_event_file` checks on every graph file) the table below (~120 ms
    per MB)."""
    if len(data) < 64:
        return _crc32c_table(data)
    try:
        import google_crc32c
    except ImportError:  # pragma: no cover - google-crc32c is a dependency
        return _crc32c_table(data)
    return google_crc32c.value(bytes(data))


def _make_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _make_table()


def _crc32c_table(data: bytes) -> int:
    """CRC-32C bit-reflected, polynomial 0x1EDC6F41 (reversed 0x82F63B78), one table byte at a time."""
    c, t = 0xFFFFFFFF, _TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    """TFRecord's masked CRC: the CRC-32C rotated right by 15 bits plus a constant (mod 2**32)."""
    c = crc32c(data)
    return ((((c >> 15) | (c << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


# -- protobuf wire format ------------------------------------------------------------------


def _bytes_field(number: int, data: bytes) -> bytes:
    return encode_varint(number << 3 | 2) + encode_varint(len(data)) + data


def encode_event(*, wall_time: float, step: int = 0, file_version: bytes | None = None,
                 graph_def: bytes | None = None) -> bytes:
    out = encode_varint(1 << 3 | 1) + struct.pack("<d", wall_time)
    if step:
        out += encode_varint(2 << 3 | 0) + encode_varint(step)
    if file_version is not None:
        out += _bytes_field(3, file_version)
    if graph_def is not None:
        out += _bytes_field(4, graph_def)
    return out


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    value, pos = decode_varint(data, pos, len(data))
    if value is None:
        raise ValueError("truncated varint")
    return value, pos


def _fields(data: bytes):
    """``(number, wire type, value)`` of each top-level field (value: int for varints and
    fixed fields, bytes for length-delimited ones); ValueError on malformed data."""
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
        elif wire == 1:
            if pos + 8 > len(data):
                raise ValueError("truncated fixed64")
            value, pos = data[pos:pos + 8], pos + 8
        elif wire == 5:
            if pos + 4 > len(data):
                raise ValueError("truncated fixed32")
            value, pos = data[pos:pos + 4], pos + 4
        elif wire == 2:
            n, pos = _read_varint(data, pos)
            if pos + n > len(data):
                raise ValueError("truncated field")
            value, pos = data[pos:pos + n], pos + n
        else:
            raise ValueError(f"wire type {wire}")
        if number == 0:
            raise ValueError("field number 0")
        yield number, wire, value


# -- TFRecord framing ----------------------------------------------------------------------


def record(data: bytes) -> bytes:
    length = struct.pack("<Q", len(data))
    return length + struct.pack("<I", masked_crc(length)) + data + struct.pack("<I", masked_crc(data))


def looks_like_event_file(data: bytes) -> bool:
    """Whether ``data`` starts with a TFRecord record header whose length checksum holds (a
    32-bit check: other files pass it by chance once in four billion)."""
    if len(data) < _HEADER + 4:
        return False
    return struct.unpack("<I", data[8:12])[0] == masked_crc(data[:8])


def is_event_file(path: Path | str) -> bool:
    """Whether the file at ``path`` (gzip-compressed or not) starts like an event file."""
    import zlib

    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    if head[:2] == b"\x1f\x8b":
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(head, 64)
        except zlib.error:
            return False
    return looks_like_event_file(head)


def records(data: bytes, path=None) -> list[bytes]:
    """The records of a TFRecord file; a damaged or cut record is one :class:`GraphError`."""
    out, pos, k = [], 0, 0
    while pos < len(data):
        if pos + _HEADER > len(data):
            raise GraphError(f"event file is truncated: record {k} has a partial header ({len(data) - pos} bytes)", path)
        length = data[pos:pos + 8]
        if struct.unpack("<I", data[pos + 8:pos + 12])[0] != masked_crc(length):
            raise GraphError(f"event file is corrupt: record {k} (byte {pos}) has a bad length checksum", path)
        n = struct.unpack("<Q", length)[0]
        start = pos + _HEADER
        if start + n + 4 > len(data):
            raise GraphError(f"event file is truncated: record {k} (byte {pos}) needs {n + 4} bytes, "
                             f"{len(data) - start} are left", path)
        body = data[start:start + n]
        if struct.unpack("<I", data[start + n:start + n + 4])[0] != masked_crc(body):
            raise GraphError(f"event file is corrupt: record {k} (byte {pos}) has a bad data checksum", path)
        out.append(body)
        pos = start + n + 4
        k += 1
    return out


# -- reading -------------------------------------------------------------------------------


@dataclass
class EventFile:
    """What an event file holds, for loading its graph: every ``graph_def`` and
    ``meta_graph_def`` event's bytes (in file order, with their steps), the graphs of
    ``tf.summary.trace_export`` (serialized RunMetadata), and the summary tags and plugins."""

    events: int = 0
    file_version: str | None = None
    graph_defs: list[tuple[int, bytes]] = field(default_factory=list)
    meta_graph_defs: list[tuple[int, bytes]] = field(default_factory=list)
    run_metadata: list[tuple[int, str, bytes]] = field(default_factory=list)
    summary_plugins: dict[str, str] = field(default_factory=dict)  # tag -> plugin name

    @property
    def keras(self) -> bool:
        """Whether Keras' TensorBoard callback wrote it (its model-config summary is there)."""
        return KERAS_PLUGIN in self.summary_plugins.values()

    def holds(self) -> str:
        """What the file holds besides graphs, in words (for the no-graph message)."""
        parts = [f"{self.events} event{'' if self.events == 1 else 's'}"]
        if self.keras:
            parts.append("Keras' model-config summary 'keras' (Keras 3's TensorBoard callback writes no op graph "
                         "with write_graph=True: give the model as a SavedModel or .keras file)")
        other = sorted(t for t, p in self.summary_plugins.items() if p != KERAS_PLUGIN)
        if other:
            shown = ", ".join(other[:5]) + (f", ... {len(other) - 5} more" if len(other) > 5 else "")
            parts.append(f"summaries {shown}")
        return "; ".join(parts)


def _summary_values(data: bytes):
    """``(tag, plugin name, tensor string values)`` of each value of a Summary."""
    for number, wire, value in _fields(data):
        if number != 1 or wire != 2:
            continue
        tag, plugin, strings = "", "", []
        for n2, w2, v2 in _fields(value):
            if n2 == 1 and w2 == 2:
                tag = v2.decode("utf-8", "replace")
            elif n2 == 9 and w2 == 2:  # SummaryMetadata.plugin_data.plugin_name
                for n3, w3, v3 in _fields(v2):
                    if n3 == 1 and w3 == 2:
                        for n4, w4, v4 in _fields(v3):
                            if n4 == 1 and w4 == 2:
                                plugin = v4.decode("utf-8", "replace")
            elif n2 == 8 and w2 == 2:  # TensorProto.string_val
                strings = [v3 for n3, w3, v3 in _fields(v2) if n3 == 8 and w3 == 2]
        yield tag, plugin, strings


def read_event_file(data: bytes, path=None) -> EventFile:
    """Parse the records of an event file (see the module doc); a record that is not an
    Event is one :class:`GraphError` naming it."""
    ef = EventFile()
    for k, body in enumerate(records(data, path)):
        step = 0
        try:
            for number, wire, value in _fields(body):
                if number == 2 and wire == 0:
                    step = value - (1 << 64) if value >= 1 << 63 else value
                elif number == 3 and wire == 2:
                    ef.file_version = value.decode("utf-8", "replace")
                elif number == 4 and wire == 2:
                    ef.graph_defs.append((step, value))
                elif number == 9 and wire == 2:
                    ef.meta_graph_defs.append((step, value))
                elif number == 5 and wire == 2:
                    for tag, plugin, strings in _summary_values(value):
                        ef.summary_plugins.setdefault(tag, plugin)
                        if plugin == RUN_METADATA_PLUGIN and strings:
                            ef.run_metadata.append((step, tag, strings[0]))
        except ValueError as e:
            raise GraphError(f"event file record {k} is not a valid Event ({e})", path) from None
        ef.events += 1
    return ef


# -- writing -------------------------------------------------------------------------------


def event_file_name(when: int | None = None, host: str | None = None) -> str:
    """``events.out.tfevents.<seconds>.<host>.jitsim`` (see the module doc)."""
    if when is None:
        when = _now()
    if host is None:
        import socket  # only to write a file (reading events is on the path of every load)

        host = socket.gethostname() or "localhost"
    host = "".join(c if c.isalnum() or c in "-_" else "_" for c in host.split(".")[0]) or "localhost"
    return f"events.out.tfevents.{when:010d}.{host}.jitsim"


def _now() -> int:
    epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
    if epoch.isdigit():
        return int(epoch)
    return int(time.time())


def event_file_bytes(graph_def_bytes: bytes, when: int) -> bytes:
    """The file: a ``file_version`` event, then one ``graph_def`` event (step 0)."""
    return (record(encode_event(wall_time=float(when), file_version=FILE_VERSION))
            + record(encode_event(wall_time=float(when), graph_def=graph_def_bytes)))


def write_graph_event_file(logdir: Path | str, graph_def, *, when: int | None = None) -> Path:
    """Write ``graph_def`` (a GraphDef message) as a new event file in ``logdir`` (created if
    needed) and return its path. Written atomically: never a half-written file."""
    from jitsim.files.output import write_atomic

    logdir = Path(logdir)
    when = _now() if when is None else when
    try:
        logdir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise GraphError(f"cannot create the TensorBoard log directory: {e.strerror}", logdir) from None
    path = logdir / event_file_name(when)
    write_atomic(path, event_file_bytes(graph_def.SerializeToString(deterministic=True), when))
    return path
