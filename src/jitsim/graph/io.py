"""Loading graphs from files and writing them back.

Accepted inputs:

* a GraphDef file, text or binary: by name (``.pbtxt``/``.pbtext``/``.txt``/``.prototxt`` text,
  ``.pb``/``.binpb``/``.graphdef`` binary) and, where the name is missing, ambiguous or wrong,
  by content (a note says what was assumed); gzip-compressed files (``.pbtxt.gz``, ``.pb.gz``,
  any gzip content) and a UTF-8 byte-order mark are read transparently, UTF-16 text with a
  byte-order mark with a note. Only regular files are read, at most 2 GiB;
* a TensorBoard event file (TFRecord framing, by content): its last ``graph_def`` event's graph
  (else a ``meta_graph_def``'s, else a ``tf.summary.trace_export`` graph), with a note saying
  which (see :mod:`jitsim.graph.events`);
* a SavedModel directory (``saved_model.pb`` or ``saved_model.pbtxt`` inside): the graph of
  one signature's function, with the library attached (see :func:`load_saved_model`);
* a TF dump directory (``TF_DUMP_GRAPH_PREFIX``): one graph per instantiated function,
  see :mod:`jitsim.graph.dumps`.

Writing picks text or binary from the extension (gzip for ``.gz``), checks the path first
(:func:`check_output`, which every command calls for its ``-o`` before any work) and never
leaves a half-written file.
"""

from __future__ import annotations

import os
import warnings
import zlib
from pathlib import Path

from google.protobuf import message as _message

from jitsim.errors import GraphError, JitsimWarning
from jitsim.graph import events, textproto
from jitsim.registry import protos
from jitsim.registry.protos import decode_varint
from jitsim.files.input import MAX_INPUT_BYTES, read_file
from jitsim.graph.model import Graph, read_node_facts
from jitsim.files.output import check_output as check_output  # re-exported: every -o is checked here
from jitsim.files.output import StartedWrite, is_stdout, start_write, write_atomic
from jitsim.graph.parse_cache import parse_cached
from jitsim.files.paths import missing_reason as missing_reason  # re-exported: the inputs' one wording
from jitsim.opsets import PARTITIONED_CALL_OPS, PASS_THROUGH_OPS

TEXT_SUFFIXES = (".pbtxt", ".pbtext", ".txt", ".prototxt")
BINARY_SUFFIXES = (".pb", ".binpb", ".graphdef")
_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"


def _strip_gz(path: Path | str) -> str:
    name = str(path).lower()
    return name[:-3] if name.endswith(".gz") else name


def is_text_path(path: Path | str) -> bool:
    return _strip_gz(path).endswith(TEXT_SUFFIXES)


def is_binary_path(path: Path | str) -> bool:
    return _strip_gz(path).endswith(BINARY_SUFFIXES)


def read_bytes(path: Path, *, limit: int = MAX_INPUT_BYTES) -> bytes:
    """The bytes of a regular file, at most ``limit`` of them (a device such as /dev/zero, a
    pipe or a socket is refused: reading one may never end); :func:`jitsim.files.input.read_file`."""
    return read_file(path, limit=limit, what="a graph file", error=GraphError,
                     too_big="more than any protobuf message can hold")


_ZIP_MAGIC = b"PK\x03\x04"
# what `model.save("m.keras")` writes (Keras 3's saving_lib): a zip with these members
KERAS_MEMBERS = ("config.json", "metadata.json")


def keras_archive_problem(path: Path | str) -> str | None:
    """None if ``path`` is a Keras archive (a zip holding ``config.json`` and
    ``metadata.json``), else what it is instead, in words."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError:
        return missing_reason(path)
    if head != _ZIP_MAGIC:
        return "not a Keras archive (not a zip file, which a .keras file is)"
    import zipfile  # (only here: 2.6 ms to import)

    try:
        with zipfile.ZipFile(path) as z:
            names = set(z.namelist())
    except (zipfile.BadZipFile, OSError, ValueError) as e:
        return f"not a Keras archive (a damaged zip file: {e})"
    missing = [m for m in KERAS_MEMBERS if m not in names]
    if missing:
        return f"a zip file but not a Keras archive (no {' or '.join(missing)} in it)"
    return None


_noted: set[tuple[str, str]] = set()


def assume_once(message: str, path=None) -> None:
    """:func:`assume`, once per process for one message and path (for facts found by routes
    that look at the same input more than once)."""
    key = (message, os.path.realpath(str(path)) if path is not None else "")
    if key not in _noted:
        _noted.add(key)
        warnings.warn(JitsimWarning(message, path), stacklevel=2)


def assume(message: str, path=None) -> None:
    """Say what jitsim assumed to accept an odd input (the CLI prints it as one
    ``jitsim: FILE: note: ...`` line on stderr; Python callers get a :class:`JitsimWarning`)."""
    warnings.warn(JitsimWarning(message, path), stacklevel=2)


def _gunzip(data: bytes, path: Path, limit: int = MAX_INPUT_BYTES, *, quiet: bool = False,
            inner: bool = False) -> bytes:
    """The decompressed bytes of gzip ``data``, every member of it, as gzip(1) reads them
    (``cat a.gz b.gz``, bgzip and pigz write several), at most ``limit`` bytes in all (a
    gzip bomb is refused once it passes the limit, before more memory is used).

    Trailing zero bytes (padding) are ignored with a note; other bytes after the last member
    are refused: they are no gzip member, and a file cut or glued wrongly must not be taken
    for a smaller graph. A gzip file inside the gzip data is decompressed too, with a note."""
    out = bytearray()
    view = memoryview(data)
    n = len(data)
    pos = members = 0
    chunk = 1 << 20  # input fed in pieces: what zlib copies after a member's end stays small
    while True:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        start = pos
        while not d.eof:
            if pos >= n:
                where = f" (member {members + 1}, at byte {start})" if members else ""
                raise GraphError(f"gzip data is truncated{where}", path)
            piece = view[pos:pos + chunk]
            try:
                out += d.decompress(piece, limit + 1 - len(out))
            except zlib.error as e:
                where = f" (member {members + 1}, at byte {start})" if members else ""
                raise GraphError(f"gzip data is corrupt{where}: {e}", path) from None
            if len(out) > limit:
                raise GraphError(f"decompresses to more than {limit} bytes, more than any protobuf message can hold",
                                 path)
            pos += len(piece) - len(d.unused_data)
        members += 1
        if pos >= n:
            break
        if view[pos:pos + 2] == _GZIP_MAGIC:
            continue
        if any(view[off:off + chunk].tobytes().strip(b"\0") for off in range(pos, n, chunk)):
            raise GraphError(f"{n - pos} bytes after the gzip data (at byte {pos}) are not gzip: the file is "
                             "damaged or glued together wrongly", path)
        if not quiet:
            assume(f"{n - pos} zero bytes after the gzip data ignored (padding, as gzip does)", path)
        break
    if out[:2] == _GZIP_MAGIC:
        if inner:
            raise GraphError("gzip data nested more than twice: not a graph file", path)
        if not quiet:
            assume("gzip data inside gzip data: decompressed twice", path)
        return _gunzip(bytes(out), path, limit, quiet=True, inner=True)
    return bytes(out)


def _decode_text(data: bytes, path: Path, what: str) -> str:
    """Text of a text-format file: UTF-8 (a byte-order mark is dropped); UTF-16 with its
    byte-order mark is decoded too, and said."""
    if data.startswith(_UTF8_BOM):
        data = data[len(_UTF8_BOM):]
    elif data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            raise GraphError(f"not a text {what}: UTF-16 byte-order mark but invalid UTF-16 data", path) from None
        assume("read as UTF-16 text (byte-order mark); TensorFlow reads text protos as UTF-8 only", path)
        return text
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise GraphError(f"not a text {what}: byte {e.start} is not UTF-8 (binary data in a text file?)", path) from None
    if "\0" in text:
        raise GraphError(f"not a text {what}: NUL characters (UTF-16 text without a byte-order mark? save it as "
                         "UTF-8)", path)
    return text


def looks_like_text(data: bytes) -> bool:
    """Whether ``data`` is plausibly a text-format proto (by content, for ambiguous names)."""
    if data.startswith((_UTF8_BOM, b"\xff\xfe", b"\xfe\xff")):
        return True
    head = data[:4096]
    if b"\0" in head:
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:  # not just a character cut at the 4 kB boundary
            return False
        text = head[:e.start].decode("utf-8")
    stripped = text.lstrip()
    return not stripped or stripped[0].isalpha() or stripped[0] == "#"


# upb's decoding depth limit (protobuf's default, as in TF's C++), and how many fields
# :func:`_too_deep` looks at before it gives up (it only runs on data protobuf refused)
_MAX_DEPTH = 100
_DEPTH_WALK_FIELDS = 300_000  # about 0.5 s


def _too_deep(data: bytes, desc) -> bool:
    """Whether binary ``data`` nests messages of type ``desc`` ``_MAX_DEPTH`` levels deep.

    protobuf 7 says so in its DecodeError ("Exceeded upb_DecodeOptions_MaxDepth"); 4.25 to 6.x
    only say "Error parsing message", so the wire is walked here, leniently (what does not
    decode ends that message's walk), descending into message-typed fields only."""
    stack = [(0, len(data), desc, 1)]
    budget = _DEPTH_WALK_FIELDS
    while stack:
        pos, end, d, depth = stack.pop()
        by_number = d.fields_by_number
        while pos < end and budget > 0:
            budget -= 1
            tag, pos = decode_varint(data, pos, end)  # the field's key
            if tag is None:
                break
            wire = tag & 7
            if wire == 0:
                pos = decode_varint(data, pos, end)[1]
            elif wire == 1:
                pos += 8
            elif wire == 5:
                pos += 4
            elif wire == 2:
                n, pos = decode_varint(data, pos, end)
                if n is None or pos + n > end:
                    break
                fd = by_number.get(tag >> 3)
                if fd is not None and fd.message_type is not None:
                    if depth + 1 > _MAX_DEPTH:
                        return True
                    stack.append((pos, pos + n, fd.message_type, depth + 1))
                pos += n
            else:  # groups: not in TF's protos
                break
    return False


def _parse(msg, data: bytes, path: Path, text: bool, what: str):
    try:
        if text:
            # plain ASCII without NULs (most dumps) is its own text: read without decoding it
            decoded = data if data.isascii() and b"\0" not in data else _decode_text(data, path, what)
            parse_cached(data, msg, lambda: textproto.parse(decoded, msg))
        else:
            msg.ParseFromString(data)
    except _message.DecodeError as e:
        if ("recursion" in str(e).lower() or "depth" in str(e).lower() or "Exceeded" in str(e)
                or _too_deep(data, msg.DESCRIPTOR)):
            raise GraphError(f"binary {what} is nested too deeply (more than protobuf's 100 levels, which TF "
                             "refuses too)", path) from None
        raise GraphError(f"not a valid binary {what} (truncated or corrupt: {e})", path) from None
    except RecursionError:
        raise GraphError(f"{what} is nested too deeply to parse", path) from None
    except Exception as e:
        if textproto.is_parse_error(e):  # text_format's, for a text outside the plain subset
            raise GraphError(f"malformed text {what}: {e}", path) from None
        raise
    return msg


def parse_message(msg, data: bytes, path: Path, *, text: bool | None, what: str):
    """Fill ``msg`` from ``data``; any parse failure becomes one :class:`GraphError` line.

    gzip data is decompressed. ``text``: the format the file name says (None: unknown); the
    content decides when the name is ambiguous or wrong: a file named as text that holds
    binary data (or the other way round) is read as what it holds, and that is said."""
    path = Path(path)
    if data.startswith(_GZIP_MAGIC):
        data = _gunzip(data, path)
    elif path.name.lower().endswith(".gz") and data:
        assume("named .gz but not gzip-compressed: read as it is", path)
    sniff = looks_like_text(data)
    if text is None:
        text = sniff
    if text == sniff or not data:
        return _parse(msg, data, path, text, what)
    try:
        return _parse(msg, data, path, text, what)
    except GraphError as first:
        try:
            other = type(msg)()
            _parse(other, data, path, sniff, what)
        except GraphError:
            raise first from None
        msg.CopyFrom(other)
        assume(f"read as {'text' if sniff else 'binary'} {what}: the file name says "
               f"{'text' if text else 'binary'} but the content is {'text' if sniff else 'binary'}", path)
        return msg


def _format_of(path: Path) -> bool | None:
    """True: text by name, False: binary by name, None: decide by content."""
    if is_text_path(path):
        return True
    if is_binary_path(path):
        return False
    return None


def read_graphdef(path: Path | str, *, allow_empty: bool = False):
    """The ``GraphDef`` proto in ``path`` (text or binary: by name, else by content;
    gzip-compressed files are read transparently), or the graph of a MetaGraphDef file
    (:func:`read_graph_file`). A graph without nodes is refused unless ``allow_empty``."""
    return read_graph_file(path, allow_empty=allow_empty)[0]


def _as_meta_graph(data: bytes, path: Path):
    """``data`` as a MetaGraphDef (``tf.compat.v1.train.export_meta_graph``'s ``.meta``, binary
    or text) holding a graph, else None."""
    if data.startswith(_GZIP_MAGIC):
        data = _gunzip(data, path, quiet=True)
    mg = protos.MetaGraphDef()
    try:
        _parse(mg, data, path, looks_like_text(data), "MetaGraphDef")
    except GraphError:
        return None
    if not mg.graph_def.node or not (mg.HasField("meta_info_def") or mg.collection_def or mg.HasField("saver_def")
                                     or mg.signature_def):
        return None
    return mg


def read_graph_file(path: Path | str, *, allow_empty: bool = False):
    """``(GraphDef, MetaGraphDef or None)`` of a graph file: a GraphDef, or a MetaGraphDef
    (its ``graph_def``; the MetaGraphDef also gives the collections, e.g. ``train_op``),
    decided from the content."""
    path = Path(path)
    data = read_bytes(path)
    event = _event_file_graph(data, path)
    if event is not None:
        return event
    try:
        gd = parse_message(protos.GraphDef(), data, path, text=_format_of(path), what="GraphDef")
    except GraphError:
        mg = _as_meta_graph(data, path)
        if mg is None:
            _say_what_it_is(data, path)
            raise
        return mg.graph_def, mg
    if not gd.node and data.strip():
        mg = _as_meta_graph(data, path)
        if mg is not None:
            return mg.graph_def, mg
    if not gd.node and not allow_empty:
        if not data.strip():
            raise GraphError("is empty: a graph needs at least one node", path)
        _say_what_it_is(data, path)
        if gd.library.function:
            raise GraphError("holds a function library but no graph nodes: nothing to cluster", path)
        raise GraphError("contains no graph nodes (is it a GraphDef?)", path)
    return gd, None


def _event_file_graph(data: bytes, path: Path):
    """``(GraphDef, MetaGraphDef or None)`` of a TensorBoard event file (recognised by its
    TFRecord framing, whatever its name; see :mod:`jitsim.graph.events`), else None. The
    graph is the last ``graph_def`` event's (the one TensorBoard shows), else the last
    ``meta_graph_def`` event's, else the last ``tf.summary.trace_export`` graph; notes say which
    and, for Keras' TensorBoard callback, whose graph it is."""
    head = data
    if data.startswith(_GZIP_MAGIC):  # look at the start only: most gzip inputs are GraphDefs
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data[:4096], 64)
        except zlib.error:
            return None
    if not events.looks_like_event_file(head):
        return None
    if data.startswith(_GZIP_MAGIC):
        data = _gunzip(data, path)
    ef = events.read_event_file(data, path)
    whose = ("an event file of Keras' TensorBoard callback (write_graph=True): the graph of Keras' training step, "
             "not of the model's call" if ef.keras else "a TensorBoard event file")
    mg = None
    if ef.graph_defs:
        step, raw = ef.graph_defs[-1]
        gd = parse_message(protos.GraphDef(), raw, path, text=False, what="GraphDef in the event file")
        which = (f"the last of its {len(ef.graph_defs)} graph_def events (step {step}; TensorBoard shows that one "
                 "too)" if len(ef.graph_defs) > 1 else "its graph_def event")
    elif ef.meta_graph_defs:
        step, raw = ef.meta_graph_defs[-1]
        mg = parse_message(protos.MetaGraphDef(), raw, path, text=False, what="MetaGraphDef in the event file")
        gd = mg.graph_def
        which = (f"the last of its {len(ef.meta_graph_defs)} meta_graph_def events" if len(ef.meta_graph_defs) > 1
                 else "its meta_graph_def event") + " (it has no graph_def event)"
    elif ef.run_metadata:
        step, tag, raw = ef.run_metadata[-1]
        rm = parse_message(protos.message_class("tensorflow.RunMetadata")(), raw, path, text=False,
                           what="RunMetadata in the event file")
        graphs = [fg.pre_optimization_graph for fg in rm.function_graphs if fg.pre_optimization_graph.node]
        if not graphs:
            raise GraphError(f"an event file with no graph (trace {tag!r} holds no function graph; {ef.holds()})", path)
        gd = max(reversed(graphs), key=lambda g: len(g.node))  # the traced function, not an eager op's graph
        which = (f"the function graph tf.summary.trace_export {tag!r} recorded (step {step}; before TF's "
                 "optimizations)" + (f", the largest of {len(graphs)}" if len(graphs) > 1 else ""))
    else:
        raise GraphError(f"an event file with no graph ({ef.holds()})", path)
    if not gd.node:
        raise GraphError(f"an event file whose graph has no nodes ({which})", path)
    assume(f"read as {whose}; the graph is {which}", path)
    return gd, mg


# what a file that is no graph may be instead, by its first bytes: (magic, offset, what, advice)
_READS = "jitsim reads GraphDef and MetaGraphDef files (text or binary, gzip too), SavedModel directories, .keras files"
_MAGIC = (
    (b"\xfd7zXZ\x00", 0, "xz-compressed", "decompress it first (xz -d); jitsim reads gzip only"),
    (b"BZh", 0, "bzip2-compressed", "decompress it first (bunzip2); jitsim reads gzip only"),
    (b"\x28\xb5\x2f\xfd", 0, "zstd-compressed", "decompress it first (zstd -d); jitsim reads gzip only"),
    (b"\x04\x22\x4d\x18", 0, "lz4-compressed", "decompress it first (lz4 -d); jitsim reads gzip only"),
    (b"7z\xbc\xaf\x27\x1c", 0, "a 7-Zip archive", "extract the graph file from it"),
    (b"PK\x03\x04", 0, "a zip archive", "extract the graph file from it"),
    (b"ustar", 257, "a tar archive", "extract the graph file from it"),
    (b"\x89HDF\r\n\x1a\n", 0, "an HDF5 file (a Keras .h5 model?)", "save the model as a SavedModel or .keras file"),
)


def _say_what_it_is(data: bytes, path: Path) -> None:
    """Raise a :class:`GraphError` saying what ``data`` is where it is recognisably something
    else than a graph (a compressed file, an archive, a SavedModel's ``saved_model.pb``)."""
    for magic, at, what, advice in _MAGIC:
        if data[at:at + len(magic)] == magic:
            tail = "" if "jitsim reads" in advice else f" ({_READS})"
            raise GraphError(f"is {what}, not a graph file: {advice}{tail}", path)
    if data.startswith(_GZIP_MAGIC):  # what the gzip holds (a .tar.gz of a SavedModel, a zipped archive)
        try:
            head = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(data[:65536], 1024)
        except zlib.error:
            return
        for magic, at, what, advice in _MAGIC:
            if head[at:at + len(magic)] == magic:
                if magic == b"ustar":
                    advice = "extract it (tar -xzf) and give the graph file, or a SavedModel's directory"
                raise GraphError(f"is a gzip-compressed {what.removeprefix('a ')}, not a graph file: {advice} "
                                 f"({_READS})", path)
        return
    sm = protos.SavedModel()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _parse(sm, data, path, looks_like_text(data), "SavedModel")
    except GraphError:
        return
    if any(m.graph_def.node or m.meta_info_def.tags for m in sm.meta_graphs):
        raise GraphError("holds a SavedModel (the content of a saved_model.pb), not a GraphDef: give the SavedModel's "
                         "directory, where the file is named saved_model.pb", path)


def is_saved_model_dir(path: Path | str) -> bool:
    """A directory holding a SavedModel (``saved_model.pb`` or ``saved_model.pbtxt``; a link
    that leads nowhere counts: reading it then says what is wrong with it)."""
    path = Path(path)
    return path.is_dir() and (os.path.lexists(path / "saved_model.pb") or os.path.lexists(path / "saved_model.pbtxt"))


def load(path: Path | str, *, signature: str | None = None, validate: bool = True, check_ops: bool = False,
         pass_input: bool = False) -> Graph:
    """Load one graph from a GraphDef file, a dump file or a SavedModel directory.

    ``validate``: refuse a cycle and an empty graph; ``check_ops`` (the CLI's and
    :func:`jitsim.cluster`'s route to a user's file): also nodes TF cannot build
    (:func:`jitsim.graph.validate.check_nodes`; ``pass_input``: the graph is taken as TF's pass
    input, so what only TF's importer refuses is accepted with a note).

    >>> load("missing.pbtxt")
    Traceback (most recent call last):
    ...
    jitsim.errors.GraphError: missing.pbtxt: no such file or directory
    """
    path = Path(path)
    if path.is_dir():
        if is_saved_model_dir(path):
            return load_saved_model(path, signature=signature, validate=validate, check_ops=check_ops)
        graphs = load_dump_dir(path, validate=validate)
        if len(graphs) == 1:
            return graphs[0][1]
        raise GraphError(
            f"is a TF dump directory with {len(graphs)} graphs; name one dump file "
            "(`jitsim crosscheck index` lists them)",
            path,
        )
    if path.name in ("saved_model.pb", "saved_model.pbtxt"):
        if not (path.is_file() and holds_graph(path)):
            return load_saved_model(path.parent, signature=signature, validate=validate, check_ops=check_ops)
        assume_once("named like a SavedModel's file but holds a graph: read as a GraphDef", path)
    gd, meta = read_graph_file(path)
    # each node's name, inputs and op-and-attrs key, read at once for the model and its checks
    facts = read_node_facts(gd) if validate and check_ops else None
    graph = Graph(gd, source=str(path), validate=validate, facts=facts)
    if meta is not None:
        graph.collections = collections_of(meta)
    return _checked(graph, validate, check_ops, facts, pass_input)


def collections_of(meta) -> dict[str, list[str]]:
    """A MetaGraphDef's collections that name graph elements (``node_list``: ops and tensors,
    e.g. ``train_op``), each in order without repeats; other collections (protos, bytes,
    numbers) are left out."""
    out = {}
    for key in sorted(meta.collection_def):
        cd = meta.collection_def[key]
        if cd.WhichOneof("kind") == "node_list":
            out[key] = list(dict.fromkeys(cd.node_list.value))
    return out


def load_dump_dir(path: Path | str, *, stage: str | None = None, validate: bool = True) -> list[tuple[object, Graph]]:
    """Every graph of a TF dump directory (or harvest output) as ``[(DumpGraph, Graph)]``.

    Each graph is read from ``stage`` if given, else from its best clustering input
    (``before_clone_constants_for_better_clustering``, else ``before_mark_for_compilation``);
    graphs that have neither (no compilation candidate) are skipped unless ``stage`` names a
    stage they have.
    """
    from jitsim.graph.dumps import dump_dir

    path = Path(path)
    where = dump_dir(path)
    dumps = where.dumps
    records = where.records()
    if not records:
        tb = sorted(p for pattern in ("*tfevents*", "*/*tfevents*") for p in path.glob(pattern) if p.is_file())
        if tb:
            raise GraphError(f"is a TensorBoard log directory, not a TF dump directory; name one event file "
                             f"(e.g. {tb[-1]})", path)
        raise GraphError("directory holds no TF dump files (and is not a SavedModel)", path)
    out = []
    for rec in records:
        st = stage or rec.input_stage
        if st is None or st not in rec.files:
            continue
        f = dumps / rec.files[st]
        out.append((rec, Graph(read_graphdef(f), source=str(f), validate=validate)))
    if not out:
        from jitsim.graph.dumps import DUMP_ENV_HINT

        what = stage or "clustering input (before_clone_constants_for_better_clustering or before_mark_for_compilation)"
        raise GraphError(f"no graph in this dump directory has a {what} dump; TF writes them with {DUMP_ENV_HINT}",
                         path)
    return out


def save(graph: Graph | object, path: Path | str) -> Path:
    """Write a Graph (or any GraphDef proto, or an iterable of GraphDef pieces whose texts
    joined are the graph's, as :meth:`TfGraph.graphdef_pieces` makes them, or their
    deterministic serializations, as :meth:`TfGraph.serialized_pieces` makes them) to ``path``: text
    for .pbtxt, else binary (gzip-compressed when the name ends in ``.gz``).

    The file is written to a temporary name in the same directory and renamed, so a
    failure never leaves a half-written output.
    """
    start_write(path, _file_data(graph, path)).finish()
    return Path(path)


def save_started(graph: Graph | object, path: Path | str) -> StartedWrite:
    """:func:`save` begun: the text is printed and written by another thread (where this process
    may use another CPU: the C printer gives up the GIL while it prints) while the caller goes
    on; the file is put in place by the returned object's ``finish()`` (``discard()``: not at
    all). ``graph`` must not change until then: pieces given as an iterable are read in that
    thread."""
    return start_write(path, _file_data(graph, path), background=True)


def _file_data(graph: Graph | object, path: Path | str):
    """What :func:`save` writes to ``path`` for ``graph``: its bytes, or an iterable of pieces of
    them (made as they are read)."""
    path = Path(path)
    gd = graph.to_graphdef() if isinstance(graph, Graph) else graph
    pieces = [gd] if hasattr(gd, "SerializeToString") else gd
    gz = path.name.lower().endswith(".gz")
    if is_text_path(path) or is_stdout(path):  # standard output: text, TF's dump format
        # piece by piece: a big graph's text is several times its size in memory
        data = (text for piece in pieces
                for text in (textproto.print_serialized_pieces(piece, protos.GraphDef, as_bytes=True)
                             if isinstance(piece, bytes)
                             else (t.encode() for t in textproto.print_message_pieces(piece))))
    else:
        data = (piece if isinstance(piece, bytes) else piece.SerializeToString(deterministic=True)
                for piece in pieces)
    if gz:
        import gzip

        data = gzip.compress(b"".join(data), mtime=0)
    return data


def to_text(msg) -> str:
    """Text format exactly as TensorFlow's C++ writes it (float digits, integer map keys),
    so a graph written by jitsim diffs cleanly against TF's own dumps."""
    return textproto.print_message(msg)


# -- SavedModel -------------------------------------------------------------------------


def _saved_model_file(path: Path) -> Path:
    pb = path / "saved_model.pb"
    return pb if os.path.lexists(pb) or not os.path.lexists(path / "saved_model.pbtxt") else path / "saved_model.pbtxt"


def read_saved_model(path: Path):
    """The ``SavedModel`` proto of directory ``path``. A ``saved_model.pb`` that holds a
    GraphDef or MetaGraphDef instead (TF's loader refuses it) is refused with a line that
    says so and how to read it as what it is."""
    f = _saved_model_file(path)
    data = read_bytes(f)
    try:
        sm = parse_message(protos.SavedModel(), data, f, text=f.suffix == ".pbtxt", what="SavedModel")
    except GraphError:
        if holds_graph(f, data):
            raise GraphError(f"holds a GraphDef, not a SavedModel (TF's loader refuses it); to read it as a graph, "
                             f"give the file itself: {f}", path) from None
        raise
    if not _real_meta_graphs(sm) and holds_graph(f, data):
        raise GraphError(f"holds a GraphDef, not a SavedModel (TF's loader refuses it); to read it as a graph, give "
                         f"the file itself: {f}", path)
    return sm


def _real_meta_graphs(sm) -> bool:
    """Whether a parsed ``SavedModel`` holds a MetaGraph with a graph or tags: a GraphDef's
    bytes parse as a SavedModel whose "MetaGraphs" are its function library (field 2), empty."""
    return any(m.graph_def.node or m.meta_info_def.tags for m in sm.meta_graphs)


def holds_graph(f: Path, data: bytes | None = None) -> bool:
    """Whether file ``f`` (named like a SavedModel's) holds a GraphDef or MetaGraphDef with
    nodes rather than a SavedModel."""
    data = read_bytes(f) if data is None else data
    sm = protos.SavedModel()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            parse_message(sm, data, f, text=None, what="SavedModel")
        if _real_meta_graphs(sm):
            return False
    except GraphError:
        pass
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            read_graph_file(f)
        return True
    except GraphError:
        return False


def load_saved_model(path: Path | str, *, signature: str | None = None, tag: str = "serve", validate: bool = True,
                     check_ops: bool = False) -> Graph:
    """The function graph behind one signature of a TF2 SavedModel.

    The signature's outputs name a ``(Stateful)PartitionedCall`` in the MetaGraph; the
    function it calls is converted to a graph (``_Arg``/``_Retval`` nodes, library kept)
    exactly as TF instantiates a function body, *before* any of TF's optimizations.
    A TF1 SavedModel (no function call behind the signature) yields its MetaGraph's graph.
    """
    path = Path(path)
    sm = read_saved_model(path)
    metas = [m for m in sm.meta_graphs if tag in m.meta_info_def.tags] or list(sm.meta_graphs)
    if not metas:
        raise GraphError("SavedModel has no MetaGraph", path)
    meta = metas[0]
    if len(sm.meta_graphs) > 1:
        def tags(m):
            return "[" + ", ".join(m.meta_info_def.tags) + "]"

        which = (f"the first tagged {tag!r}" if tag in meta.meta_info_def.tags else f"the first (none is tagged {tag!r})")
        assume_once(f"the SavedModel holds {len(sm.meta_graphs)} MetaGraphs (tags {', '.join(map(tags, sm.meta_graphs))}); "
                    f"used {which}: {tags(meta)}", path)
    if signature is None and not meta.signature_def:  # a TF1 SavedModel without signatures: its whole graph
        return _checked(Graph.from_graphdef(meta.graph_def, source=str(path), validate=validate), validate, check_ops)
    signature = check_signature_name(sorted(meta.signature_def), signature, path)
    sig = meta.signature_def[signature]
    gd = meta.graph_def
    call = signature_call_node(gd, sig)
    if call is None:
        # no one call computes the signature (a TF1 SavedModel, or outputs computed after the call):
        # the MetaGraph, which the TF-free route prunes to what the signature's outputs need, as
        # TF's signature function (a pruned wrap of the MetaGraph) does
        graph = _checked(Graph.from_graphdef(gd, source=f"{path}[{signature}]", validate=validate), validate,
                         check_ops)
        graph.signature_io = ([t.name for _, t in sorted(sig.inputs.items())],
                              [t.name for _, t in sorted(sig.outputs.items())])
        return graph
    fname = call.attr["f"].func.name
    from jitsim.graph.functions import function_to_graphdef

    if fname not in {f.signature.name for f in gd.library.function}:
        raise GraphError(f"signature {signature!r} calls function {fname!r}, which the SavedModel's library does not "
                         "hold", path)
    fgd = function_to_graphdef(gd.library, fname, source=path)
    fgd.versions.CopyFrom(gd.versions)
    return _checked(Graph(fgd, source=f"{path}[{signature}]", validate=validate), validate, check_ops)


# TF's own entries of a SavedModel's signature map: run by the loader (initialisation) or by
# training code, never a model's call (tensorflow/python/saved_model/signature_constants.py)
INTERNAL_SIGNATURE_PREFIX = "__saved_model_"


def check_signature_name(sigs, signature: str | None, path) -> str:
    """The signature to call among ``sigs`` (a SavedModel's signature names): ``signature``,
    else ``serving_default``. One rule for both routes: a missing one, or one of TF's internal
    entries (``__saved_model_init_op``: what TF's loader runs to initialise tables, not a
    call), is a :class:`GraphError` listing the signatures there are."""
    usable = [s for s in sorted(sigs) if not s.startswith(INTERNAL_SIGNATURE_PREFIX)]
    listed = ", ".join(usable) or "none"
    if signature is None:
        if "serving_default" in usable:
            return "serving_default"
        if not usable:
            raise GraphError(f"the SavedModel has no usable signature (only TF's internal "
                             f"{', '.join(sorted(sigs))})", path)
        raise GraphError(f"the SavedModel has no 'serving_default' signature; its signatures: {listed} "
                         "(pass one with --signature NAME)", path)
    if signature.startswith(INTERNAL_SIGNATURE_PREFIX) and signature in sigs:
        raise GraphError(f"--signature {signature}: TF's internal entry (what its loader runs to initialise the "
                         f"model), not a signature to call; the SavedModel's signatures: {listed}", path)
    if signature not in sigs:
        raise GraphError(f"the SavedModel has no signature {signature!r}; its signatures: {listed}", path)
    return signature




def signature_call_node(gd, sig):
    """The ``(Stateful)PartitionedCall`` node that computes every output of signature ``sig``
    (each output followed back through Identity-like nodes, which TF's Grappler removes), or
    None if there is no such single call."""
    by_name = {n.name: n for n in gd.node}
    found = None
    for _, t in sorted(sig.outputs.items()):
        name, _, port = t.name.lstrip("^").partition(":")
        port = int(port) if port.isdigit() else 0
        node = by_name.get(name)
        seen = set()
        while node is not None and node.op in PASS_THROUGH_OPS and node.name not in seen:
            seen.add(node.name)
            data = [i for i in node.input if not i.startswith("^")]
            i = port if node.op == "IdentityN" else 0
            if i >= len(data):
                node = None
                break
            name, _, p = data[i].partition(":")
            port = int(p) if p.isdigit() else 0
            node = by_name.get(name)
        if node is None or node.op not in PARTITIONED_CALL_OPS:
            return None
        if found is not None and found.name != node.name:
            return None
        found = node
    return found


def _checked(graph: Graph, validate: bool, check_ops: bool, facts=None, pass_input: bool = False) -> Graph:
    if validate and not graph.nodes:
        raise GraphError("the graph has no nodes: nothing to cluster", graph.source)
    if validate and check_ops:
        from jitsim.graph.validate import check_nodes

        check_nodes(graph, facts=facts, pass_input=pass_input)
    return graph
