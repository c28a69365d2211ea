"""Fast protobuf text format for graph files: read into and write from upb's C messages.

protobuf's own ``text_format`` tokenizes and prints in pure Python, which made it ~70% of
``jitsim cluster``'s time on a 10k-node training graph (issue 14). This module does the
same two jobs for the text TensorFlow writes, at a fraction of the cost:

* :func:`parse` matches whole ``name: value`` / ``name {`` / ``}`` items with one regular
  expression, encodes them straight into protobuf's binary wire format, guided by the
  message descriptors, and lets the C parser build the message. Anything outside that plain
  subset (comments, ``<...>`` or ``[...]`` syntax, adjacent strings, extensions, an unknown
  field, a repeated singular field, out-of-range numbers...) makes it hand the whole text
  to ``text_format``, so odd inputs are accepted or refused exactly as before, with
  ``text_format``'s own error messages.
* :func:`print_message` prints what ``text_format.MessageToString`` prints, byte for byte
  (the tests compare both on every graph of the fixture corpus and on generated messages),
  walking ``ListFields`` with per-field printers chosen once per descriptor.

Examples
--------
>>> from jitsim.registry import protos
>>> gd = parse('node { name: "a" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } } }',
...            protos.GraphDef())
>>> gd.node[0].attr["dtype"].type
1
>>> print(print_message(gd), end="")
node {
  name: "a"
  op: "Const"
  attr {
    key: "dtype"
    value {
      type: DT_FLOAT
    }
  }
}
"""

from __future__ import annotations

import io
import math
import re
import struct
from typing import Iterator

from google.protobuf import descriptor as _d
from google.protobuf import text_encoding

from jitsim.accel import load
from jitsim.registry import protos
from jitsim.registry.protos import encode_varint

__all__ = ["parse", "print_message", "accelerated", "is_parse_error"]

# The optional C extension (setup.py builds it where a compiler is found): the same two jobs,
# each the C form of the Python code below, which stays the reference and the fallback.
# JITSIM_PURE_PYTHON=1 turns it off.
_c = load("jitsim.graph._fasttext")


class _LazyPattern:
    """A regular expression compiled on first use: the ones here serve the pure-Python reader
    and the slow printer, which most runs never call (ten compilations, 3 ms at import)."""

    __slots__ = ("_args", "_re")

    def __init__(self, *args) -> None:
        self._args = args
        self._re = None

    def __getattr__(self, name: str):
        if self._re is None:
            self._re = re.compile(*self._args)
        return getattr(self._re, name)


def accelerated() -> bool:
    """Whether the C extension reads and writes text here (False: pure Python)."""
    return _c is not None

# One item per match: a scalar field, a message opening, a closing brace, or anything else
# (a single non-space character, which sends the text to text_format).
_ITEM = _LazyPattern(r"""
    ([A-Za-z_]\w*)[ \t]*:[ \t]*("(?:[^"\\\n]|\\.)*"|'(?:[^'\\\n]|\\.)*'|[^\s{}<>:\[\],;"'\#]+)[ \t]*[,;]?
  | ([A-Za-z_]\w*)[ \t]*:?[ \t]*\{
  | (\})[ \t]*[,;]?
  | (\S)
""", re.X)
_INT = _LazyPattern(r"-?(?:0|[1-9][0-9]*)\Z")
_FLOAT = _LazyPattern(r"-?(?:inf(?:inity)?|nan|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)\Z", re.I)
_BOOLS = {"true": 1, "t": 1, "1": 1, "True": 1, "false": 0, "f": 0, "0": 0, "False": 0}


class _Fallback(Exception):
    """The text leaves the plain subset: let text_format read (or refuse) it."""


_FD = _d.FieldDescriptor


def _is_repeated(fd) -> bool:
    """Whether field ``fd`` is repeated, on every supported protobuf (pyproject.toml):
    ``FieldDescriptor.is_repeated`` exists from 6.x on (``label`` is deprecated there and gone
    in 7.x), ``label`` is all that 4.25 and 5.x have."""
    try:
        return fd.is_repeated
    except AttributeError:
        return fd.label == _FD.LABEL_REPEATED
# kind -> (wire type, value encoder taking the token)
_K_STRING, _K_BYTES, _K_INT, _K_ENUM, _K_BOOL, _K_FLOAT, _K_DOUBLE, _K_MSG, _K_SINT, _K_F32, _K_F64 = range(11)
_INT_RANGES = {
    _FD.TYPE_INT32: (-(1 << 31), 1 << 31), _FD.TYPE_INT64: (-(1 << 63), 1 << 63),
    _FD.TYPE_UINT32: (0, 1 << 32), _FD.TYPE_UINT64: (0, 1 << 64),
    _FD.TYPE_SINT32: (-(1 << 31), 1 << 31), _FD.TYPE_SINT64: (-(1 << 63), 1 << 63),
    _FD.TYPE_FIXED32: (0, 1 << 32), _FD.TYPE_FIXED64: (0, 1 << 64),
    _FD.TYPE_SFIXED32: (-(1 << 31), 1 << 31), _FD.TYPE_SFIXED64: (-(1 << 63), 1 << 63),
}


# field type -> (how its text value is encoded, wire type)
_KIND_WIRE = {
    _FD.TYPE_MESSAGE: (_K_MSG, 2), _FD.TYPE_STRING: (_K_STRING, 2), _FD.TYPE_BYTES: (_K_BYTES, 2),
    _FD.TYPE_ENUM: (_K_ENUM, 0), _FD.TYPE_BOOL: (_K_BOOL, 0),
    _FD.TYPE_FLOAT: (_K_FLOAT, 5), _FD.TYPE_DOUBLE: (_K_DOUBLE, 1),
    _FD.TYPE_SINT32: (_K_SINT, 0), _FD.TYPE_SINT64: (_K_SINT, 0),
    _FD.TYPE_FIXED32: (_K_F32, 5), _FD.TYPE_SFIXED32: (_K_F32, 5),
    _FD.TYPE_FIXED64: (_K_F64, 1), _FD.TYPE_SFIXED64: (_K_F64, 1),
    _FD.TYPE_INT32: (_K_INT, 0), _FD.TYPE_INT64: (_K_INT, 0),
    _FD.TYPE_UINT32: (_K_INT, 0), _FD.TYPE_UINT64: (_K_INT, 0),
}


class _Field:
    __slots__ = ("tag", "kind", "message", "enum", "lo", "hi", "once", "oneof", "fmt")

    def __init__(self, fd) -> None:
        t = fd.type
        if t not in _KIND_WIRE:  # groups: not in TF's protos
            raise _Fallback
        kind, wire = _KIND_WIRE[t]
        self.tag = encode_varint((fd.number << 3) | wire)
        self.kind = kind
        self.message = fd.message_type
        self.enum = {v.name: v.number for v in fd.enum_type.values} if fd.enum_type else None
        self.lo, self.hi = _INT_RANGES.get(t, (0, 0))
        self.once = None if _is_repeated(fd) else fd.number
        self.oneof = fd.containing_oneof.name if fd.containing_oneof else None
        self.fmt = "<i" if t == _FD.TYPE_SFIXED32 else "<I" if t == _FD.TYPE_FIXED32 else \
            "<q" if t == _FD.TYPE_SFIXED64 else "<Q"


_FIELDS: dict[str, dict[str, _Field]] = {}


def _fields(desc) -> dict[str, _Field]:
    table = _FIELDS.get(desc.full_name)
    if table is None:
        if desc.full_name == "google.protobuf.Any":
            raise _Fallback
        table = {fd.name: _Field(fd) for fd in desc.fields}
        _FIELDS[desc.full_name] = table
    return table


def _scalar(f: _Field, tok: str) -> bytes:
    kind = f.kind
    if kind == _K_STRING or kind == _K_BYTES:
        q = tok[0]
        if q != '"' and q != "'":
            raise _Fallback
        raw = tok[1:-1]
        if "\\" in raw:
            data = text_encoding.CUnescape(raw)
            if kind == _K_STRING:
                data.decode("utf-8")  # invalid UTF-8: text_format refuses it
        else:
            data = raw.encode("utf-8")
        return encode_varint(len(data)) + data
    if kind == _K_ENUM:
        v = f.enum.get(tok)
        if v is None:
            raise _Fallback
        return encode_varint(v)
    if kind == _K_BOOL:
        v = _BOOLS.get(tok)
        if v is None:
            raise _Fallback
        return b"\x01" if v else b"\x00"
    if kind == _K_FLOAT or kind == _K_DOUBLE:
        if not _FLOAT.match(tok):
            raise _Fallback
        return struct.pack("<f" if kind == _K_FLOAT else "<d", float(tok))
    if not _INT.match(tok):
        raise _Fallback
    v = int(tok)
    if not f.lo <= v < f.hi:
        raise _Fallback
    if kind == _K_INT:
        return encode_varint(v)
    if kind == _K_SINT:
        return encode_varint((v << 1) ^ (v >> 63))
    return struct.pack(f.fmt, v)


def _encode(items, desc) -> bytes:
    """Wire format of a message from its text items: ``(name, value, opening, closing,
    other)`` tuples, one of the first four set (``other``: anything else, which falls back)."""
    fields = _fields(desc)
    buf = bytearray()
    seen: set = set()
    stack: list = []
    for name, value, opening, closing, other in items:
        if closing:
            if not stack:
                raise _Fallback
            parent, fields, seen, tag = stack.pop()
            parent += tag
            parent += encode_varint(len(buf))
            parent += buf
            buf = parent
            continue
        f = fields.get(name or opening)
        if f is None or other or (f.kind == _K_MSG) != bool(opening):
            raise _Fallback
        if f.once is not None:  # a singular field given twice, or two members of a oneof
            if f.once in seen or (f.oneof and f.oneof in seen):
                raise _Fallback
            seen.add(f.once)
            if f.oneof:
                seen.add(f.oneof)
        if opening:
            stack.append((buf, fields, seen, f.tag))
            buf = bytearray()
            fields = _fields(f.message)
            seen = set()
        else:
            buf += f.tag
            buf += _scalar(f, value)
    if stack:
        raise _Fallback
    return bytes(buf)


_QUOTED = {'"': _LazyPattern(r'"(?:[^"\\\n]|\\.)*"\Z'), "'": _LazyPattern(r"'(?:[^'\\\n]|\\.)*'\Z")}
_CLOSE = ("", "", "", "}", "")


def _line_items(text: str) -> list[tuple]:
    """The items of text laid out one a line, as protobuf's printers (C++ and Python) write
    it: a string split instead of :data:`_ITEM`'s scan, about twice as fast. Any other layout
    raises :class:`_Fallback`."""
    items = []
    add = items.append
    for line in text.split("\n"):
        item = line.strip()
        if not item:
            continue
        if item[-1] == "{":
            add(("", "", item[:-1].rstrip(), "", ""))
        elif item == "}":
            add(_CLOSE)
        else:
            name, sep, value = item.partition(": ")
            if not sep or not value:
                raise _Fallback
            q = value[0]
            if q == '"' or q == "'":  # exactly one complete string token
                inner = value[1:-1]
                if len(value) < 2 or value[-1] != q or (
                        q in inner if "\\" not in inner else _QUOTED[q].match(value) is None):
                    raise _Fallback
            add((name, value, "", "", ""))
    return items


# The C reader's tables: per message type, field name -> (tag, kind, sub-table or None, enum
# names, lo, hi, field number if singular else -1, oneof index or -1, the _Field). A type the
# Python reader refuses (groups, Any) has None for a table, which makes the C reader hand back.
_C_FIELDS: dict[str, dict | None] = {}
_I64 = (-(1 << 63), (1 << 63) - 1)


def _c_fields(desc) -> dict | None:
    name = desc.full_name
    if name in _C_FIELDS:
        return _C_FIELDS[name]
    try:
        py = _fields(desc)
    except _Fallback:
        _C_FIELDS[name] = None
        return None
    table: dict = {}
    _C_FIELDS[name] = table  # before the sub-tables: message types nest themselves
    oneofs = {o.name: i for i, o in enumerate(desc.oneofs)}
    for fname, f in py.items():
        sub = _c_fields(f.message) if f.kind == _K_MSG else None
        table[fname] = (f.tag, f.kind, sub, f.enum, max(f.lo, _I64[0]), min(f.hi, _I64[1]),
                        -1 if f.once is None else f.once, oneofs.get(f.oneof, -1), f)
    return table


def _parse_c(text: str | bytes, message) -> bool:
    """The C reader; False when it hands the text back (nothing is left in ``message``)."""
    table = _c_fields(message.DESCRIPTOR)
    if table is None:
        return False
    wire = _c.encode_lines(text, table, _scalar)
    if wire is None:
        return False
    try:
        message.MergeFromString(wire)
    except Exception:  # what upb refuses (depth): the Python readers and text_format decide
        message.Clear()
        return False
    return True


def parse(text: str | bytes, message):
    """Fill ``message`` (a fresh message) from its text format; returns it. ``text`` may be
    ASCII bytes (a file's content, read by the C reader without decoding it first).

    Text outside the plain subset TF writes is read by ``text_format.Parse`` instead, so the
    result (or the ``text_format.ParseError``) is always what ``text_format`` gives.
    """
    if _c is not None and _parse_c(text, message):
        return message
    if isinstance(text, bytes):
        text = text.decode("ascii")
    for items in (_line_items, _ITEM.findall):
        try:
            message.MergeFromString(_encode(items(text), message.DESCRIPTOR))
            return message
        except Exception:  # outside the subset, or upb refused the wire (depth, bad UTF-8)
            message.Clear()
    from google.protobuf import text_format  # only for text outside the plain subset (8 ms to import)

    text_format.Parse(text, message, allow_unknown_field=False)
    return message


def is_parse_error(e: BaseException) -> bool:
    """Whether ``e`` is ``text_format``'s ParseError (what :func:`parse` raises for a text it
    refuses), without importing ``text_format`` where nothing did: then it cannot be one."""
    import sys

    tf = sys.modules.get("google.protobuf.text_format")
    return tf is not None and isinstance(e, tf.ParseError)


# ------------------------------------------------------------------------------------ printing

_DOUBLE_FIELDS = ("double_val", "dcomplex_val")
_FLOAT_FIELDS = ("f", "float_val", "scomplex_val")
# Map fields whose zero key (and, for the second, zero value) C++ prints and Python omits.
_ZERO_KEY_MAPS = ("arg_attr", "resource_arg_unique_id")
_ZERO_VALUE_MAPS = ("resource_arg_unique_id",)


def _c_float(v: float, digits: tuple[int, int], single: bool) -> str:
    """``v`` as C++ ``SimpleFtoa``/``SimpleDtoa`` prints it: ``%.6g`` (``%.15g`` for
    doubles) when that round-trips, else ``%.9g`` (``%.17g``)."""
    if v != v or v in (math.inf, -math.inf):
        return str(v)
    if single:
        v = struct.unpack("f", struct.pack("f", v))[0]
    short = "%.*g" % (digits[0], v)
    back = float(short)
    if single:
        back = struct.unpack("f", struct.pack("f", back))[0]
    return short if back == v else "%.*g" % (digits[1], v)


def c_float_text(text: str, digits: tuple[int, int], single: bool) -> str:
    """:func:`_c_float` of a number printed by Python (text that is not a number is kept)."""
    try:
        v = float(text)
    except ValueError:
        return text
    if v != v or v in (math.inf, -math.inf):
        return text
    return _c_float(v, digits, single)


# protobuf's text_encoding.CEscape as 5.x and later have it (``as_utf8`` for strings, non-ASCII
# kept; all non-printable bytes of bytes fields octal), here so that the output does not depend
# on the protobuf installed: 4.25's CEscape leaves control characters raw in strings.
_STR_ESCAPES = {i: "\\%03o" % i for i in (*range(32), 127)}
_STR_ESCAPES.update({9: r"\t", 10: r"\n", 13: r"\r", 34: r'\"', 39: r"\'", 92: r"\\"})
_BYTE_ESCAPES = [_STR_ESCAPES.get(i, chr(i)) if i < 128 else "\\%03o" % i for i in range(256)]


def _escape_str(v: str) -> str:
    return '"' + v.translate(_STR_ESCAPES) + '"'


def _escape_bytes(v: bytes) -> str:
    return '"' + "".join([_BYTE_ESCAPES[c] for c in v]) + '"'


def _value_printer(fd):
    """A function value -> text for a scalar field, as text_format (plus TF's float digits)."""
    cpp = fd.cpp_type
    if cpp == _FD.CPPTYPE_ENUM:
        names = {v.number: v.name for v in fd.enum_type.values}
        return lambda v: names.get(v) or str(v)
    if cpp == _FD.CPPTYPE_STRING:
        return _escape_bytes if fd.type == _FD.TYPE_BYTES else _escape_str
    if cpp == _FD.CPPTYPE_BOOL:
        return lambda v: "true" if v else "false"
    if cpp == _FD.CPPTYPE_FLOAT:
        if fd.name in _FLOAT_FIELDS:
            # TF's digits depend only on the float32 value, which ``v`` already is (protobuf's
            # shortest-repr step of text_format changes nothing here)
            return lambda v: _c_float(v, (6, 9), True)
        return lambda v: str(v) if v != v else str(_shortest_float(v))
    if cpp == _FD.CPPTYPE_DOUBLE and fd.name in _DOUBLE_FIELDS:
        return lambda v: _c_float(v, (15, 17), False)
    return str


class _Printer:
    def __init__(self) -> None:
        self.out = io.StringIO()
        self._plans: dict = {}

    def plan(self, fd):
        """(kind, printer) for a field: 0 scalar, 1 repeated scalar, 2 message, 3 repeated
        message, 4 map."""
        p = self._plans.get(fd)
        if p is None:
            if fd.message_type is not None and _is_map(fd):
                p = (4, None)
            elif fd.cpp_type == _FD.CPPTYPE_MESSAGE:
                if fd.message_type.full_name == "google.protobuf.Any":
                    raise _Fallback
                p = (3 if _is_repeated(fd) else 2, None)
            else:
                p = (1 if _is_repeated(fd) else 0, _value_printer(fd))
            self._plans[fd] = p
        return p

    def message(self, msg, indent: str) -> None:
        write = self.out.write
        for fd, value in msg.ListFields():
            kind, show = self.plan(fd)
            name = fd.name
            if kind == 0:
                write(f"{indent}{name}: {show(value)}\n")
            elif kind == 1:
                for v in value:
                    write(f"{indent}{name}: {show(v)}\n")
            elif kind == 2:
                write(f"{indent}{name} {{\n")
                self.message(value, indent + "  ")
                write(f"{indent}}}\n")
            elif kind == 3:
                inner = indent + "  "
                for v in value:
                    write(f"{indent}{name} {{\n")
                    self.message(v, inner)
                    write(f"{indent}}}\n")
            else:
                self.map(fd, value, indent)

    def map(self, fd, value, indent: str) -> None:
        write = self.out.write
        entry = fd.message_type
        key_show = self.plan(entry.fields_by_name["key"])[1]
        vfd = entry.fields_by_name["value"]
        vkind, vshow = self.plan(vfd)
        inner = indent + "  "
        zero_key = fd.name in _ZERO_KEY_MAPS
        zero_value = fd.name in _ZERO_VALUE_MAPS
        for key in sorted(value):
            write(f"{indent}{fd.name} {{\n")
            if key or zero_key:
                write(f"{inner}key: {key_show(key)}\n")
            v = value[key]
            if vkind == 2:
                write(f"{inner}value {{\n")
                self.message(v, inner + "  ")
                write(f"{inner}}}\n")
            elif v or zero_value:
                write(f"{inner}value: {vshow(v)}\n")
            write(f"{indent}}}\n")


# The C printer's plans: per message type a list indexed by field number of
# (name, kind, sub-plan, enum names, float printer, map spec) or None (no such field).
_C_PLANS: dict[str, list | None] = {}
_C_TYPE_KIND = {
    _FD.TYPE_STRING: "string", _FD.TYPE_BYTES: "bytes", _FD.TYPE_ENUM: "enum", _FD.TYPE_BOOL: "bool",
    _FD.TYPE_INT32: "int32", _FD.TYPE_INT64: "int64", _FD.TYPE_UINT32: "uint32",
    _FD.TYPE_UINT64: "uint64", _FD.TYPE_SINT32: "sint32", _FD.TYPE_SINT64: "sint64",
    _FD.TYPE_FIXED32: "fixed32", _FD.TYPE_FIXED64: "fixed64", _FD.TYPE_SFIXED32: "sfixed32",
    _FD.TYPE_SFIXED64: "sfixed64", _FD.TYPE_FLOAT: "float", _FD.TYPE_DOUBLE: "double",
    _FD.TYPE_MESSAGE: "message",
}


def _shortest_float(v: float) -> float:
    """protobuf's shortest float32 digits for ``v`` (its type_checkers module, 3 ms to import, is
    loaded only for the rare float field that TF prints this way)."""
    from google.protobuf.internal import type_checkers

    return type_checkers.ToShortestFloat(v)


def _is_map(fd) -> bool:
    """Whether message-typed field ``fd`` is a map: its container in a message is a mapping.
    (``fd.message_type.GetOptions().map_entry`` says the same, but reading options imports
    ``descriptor_pb2``, 6 ms, on the path of every command that writes text.)"""
    if not fd.message_type.has_options:  # a map entry has options (map_entry)
        return False
    holder = protos.class_of(fd.containing_type)()
    return hasattr(getattr(holder, fd.name), "keys")


def _c_spec(fd) -> tuple:
    kinds = _c.PRINT_KINDS
    kind = _C_TYPE_KIND.get(fd.type)
    if kind is None:  # groups: the C printer hands back when it meets one
        return (fd.name.encode(), kinds.index("message"), None, None, None, None)
    sub = names = show = mapping = None
    if kind == "message":
        entry = fd.message_type
        if _is_map(fd):
            kind = "map"
            mapping = (_c_spec(entry.fields_by_name["key"]), _c_spec(entry.fields_by_name["value"]),
                       fd.name in _ZERO_KEY_MAPS, fd.name in _ZERO_VALUE_MAPS)
        else:
            sub = _c_plan(entry)
    elif kind == "enum":
        names = {v.number: v.name for v in fd.enum_type.values}
    elif kind in ("float", "double"):
        show = _value_printer(fd)
    return (fd.name.encode(), kinds.index(kind), sub, names, show, mapping)


def _c_plan(desc) -> list | None:
    name = desc.full_name
    if name in _C_PLANS:
        return _C_PLANS[name]
    if name == "google.protobuf.Any" or any(fd.number > 4096 for fd in desc.fields):
        _C_PLANS[name] = None
        return None
    plan: list = []
    _C_PLANS[name] = plan  # before the fields: message types nest themselves
    specs = {fd.number: _c_spec(fd) for fd in desc.fields}
    plan.extend(specs.get(i) for i in range(max(specs, default=0) + 1))
    return plan


def _print_c(msg) -> str | None:
    plan = _c_plan(msg.DESCRIPTOR)
    if plan is None:
        return None
    try:
        data = msg.SerializeToString()
    except Exception:  # over protobuf's 2 GiB: the Python printer walks the message instead
        return None
    return _c.print_wire(data, plan)


def print_message(msg) -> str:
    """Text format of ``msg`` as TensorFlow's C++ writes it (what ``io.to_text`` promises)."""
    if _c is not None:
        text = _print_c(msg)
        if text is not None:
            return text
    printer = _Printer()
    try:
        printer.message(msg, "")
    except _Fallback:
        return _print_slow(msg)
    return printer.out.getvalue()


def print_message_pieces(msg, piece_bytes: int = 1 << 24) -> Iterator[str]:
    """:func:`print_message` in pieces, for writing a big graph without holding its whole text
    (about 7 times its binary size) in memory: the pieces, joined, are the same text. Each
    piece is a run of whole top-level records (``node`` entries of a GraphDef) of about
    ``piece_bytes`` wire bytes, printed as a message of its own; a message that cannot be cut
    (no C extension, a map field at the top level, fields out of order) comes in one piece."""
    data = None
    if _cuttable(type(msg)):
        try:
            data = msg.SerializeToString()
        except Exception:  # over protobuf's 2 GiB
            data = None
    if data is None:
        yield print_message(msg)
        return
    yield from print_serialized_pieces(data, type(msg), piece_bytes)


def _cuttable(msg_type) -> bool:
    return _c is not None and hasattr(_c, "record_cuts") and not any(
        f.message_type is not None and _is_map(f) for f in msg_type.DESCRIPTOR.fields)


def print_serialized_pieces(data: bytes, msg_type, piece_bytes: int = 1 << 24, *,
                            as_bytes: bool = False) -> Iterator[str] | Iterator[bytes]:
    """:func:`print_message_pieces` of the ``msg_type`` message serialized as ``data``: the
    text of ``msg_type.FromString(data)``, in pieces, printed from the bytes where the C
    printer can (without parsing them into a message first). ``as_bytes``: each piece as its
    UTF-8 bytes (what a file gets)."""
    cuts = _c.record_cuts(data, piece_bytes) if len(data) > piece_bytes and _cuttable(msg_type) else None
    plan = _c_plan(msg_type.DESCRIPTOR) if _c is not None else None
    if cuts is None:
        cuts = [0, len(data)]
    view = memoryview(data)
    for lo, hi in zip(cuts, cuts[1:]):
        text = _c.print_wire(view[lo:hi], plan, as_bytes) if plan is not None else None
        if text is None:  # a piece the C printer leaves to Python
            part = msg_type()
            part.ParseFromString(view[lo:hi])
            text = print_message(part)
            if as_bytes:
                text = text.encode()
        yield text


_INT_KEY_MAP = _LazyPattern(r"^(\s*)(arg_attr|resource_arg_unique_id) \{\n(?!\1  key:)", re.M)
_UNIQUE_ID_NO_VALUE = _LazyPattern(r"^(\s*)resource_arg_unique_id \{\n(\1  key: \d+\n)(?=\1\})", re.M)
_FLOAT_LINE = _LazyPattern(r"^(\s*(?:f|float_val|scomplex_val): )(\S+)$", re.M)
_DOUBLE_LINE = _LazyPattern(r"^(\s*(?:double_val|dcomplex_val): )(\S+)$", re.M)


# Raw control characters in text_format's output: 4.25's leaves them in strings
_RAW_CONTROL = _LazyPattern(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def _print_slow(msg) -> str:
    """text_format's printer with TF's float digits and zero map keys patched in (and strings
    escaped as by protobuf 5.x and later, whichever protobuf is installed)."""
    from google.protobuf import text_format

    text = text_format.MessageToString(msg, as_utf8=True)
    text = _RAW_CONTROL.sub(lambda m: "\\%03o" % ord(m.group()), text)
    text = _FLOAT_LINE.sub(lambda m: m.group(1) + c_float_text(m.group(2), (6, 9), True), text)
    text = _DOUBLE_LINE.sub(lambda m: m.group(1) + c_float_text(m.group(2), (15, 17), False), text)
    text = _INT_KEY_MAP.sub(lambda m: m.group(0) + f"{m.group(1)}  key: 0\n", text)
    text = _UNIQUE_ID_NO_VALUE.sub(lambda m: m.group(0) + f"{m.group(1)}  value: 0\n", text)
    return text
