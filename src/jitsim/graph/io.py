"""Loading graphs from files and writing them back.

Accepted inputs (detected from the path):

* ``*.pbtxt`` / ``*.pbtext`` / ``*.txt``: text ``GraphDef`` (TF's graph dumps are these);
* ``*.pb`` (any other extension): binary ``GraphDef``;
* a SavedModel directory (``saved_model.pb`` or ``saved_model.pbtxt`` inside): the graph of
  one signature's function, with the library attached (see :func:`load_saved_model`);
* a TF dump directory (``TF_DUMP_GRAPH_PREFIX``): one graph per instantiated function,
  see :mod:`jitsim.crosscheck.dumps`.

Writing picks text or binary from the extension and never leaves a half-written file.
"""

from __future__ import annotations

import os
import re
import struct
import tempfile
from pathlib import Path

from google.protobuf import message as _message
from google.protobuf import text_format

from jitsim.errors import GraphError
from jitsim.graph import protos
from jitsim.graph.model import Graph

TEXT_SUFFIXES = (".pbtxt", ".pbtext", ".txt", ".prototxt")


def is_text_path(path: Path | str) -> bool:
    return str(path).lower().endswith(TEXT_SUFFIXES)


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise GraphError("no such file or directory", path) from None
    except IsADirectoryError:
        raise GraphError("is a directory, not a graph file", path) from None
    except OSError as e:
        raise GraphError(f"cannot read: {e.strerror}", path) from None


def parse_message(msg, data: bytes, path: Path, *, text: bool, what: str):
    """Fill ``msg`` from ``data``; any parse failure becomes one :class:`GraphError` line."""
    try:
        if text:
            text_format.Parse(data.decode("utf-8"), msg, allow_unknown_field=False)
        else:
            msg.ParseFromString(data)
    except UnicodeDecodeError:
        raise GraphError(f"not a text {what} (binary data in a text file; use a .pb extension?)", path) from None
    except text_format.ParseError as e:
        raise GraphError(f"malformed text {what}: {e}", path) from None
    except _message.DecodeError as e:
        raise GraphError(f"not a valid binary {what} (truncated or corrupt: {e})", path) from None
    return msg


def read_graphdef(path: Path | str):
    """The ``GraphDef`` proto in ``path`` (text or binary by extension)."""
    path = Path(path)
    data = read_bytes(path)
    gd = parse_message(protos.GraphDef(), data, path, text=is_text_path(path), what="GraphDef")
    if data and not gd.node and not gd.library.function:
        raise GraphError("contains no graph nodes (is it a GraphDef?)", path)
    return gd


def is_saved_model_dir(path: Path | str) -> bool:
    """A directory holding a SavedModel (``saved_model.pb`` or ``saved_model.pbtxt``)."""
    path = Path(path)
    return path.is_dir() and ((path / "saved_model.pb").exists() or (path / "saved_model.pbtxt").exists())


def load(path: Path | str, *, signature: str | None = None, validate: bool = True) -> Graph:
    """Load one graph from a GraphDef file, a dump file or a SavedModel directory.

    >>> load("missing.pbtxt")
    Traceback (most recent call last):
    ...
    jitsim.errors.GraphError: missing.pbtxt: no such file or directory
    """
    path = Path(path)
    if path.is_dir():
        if is_saved_model_dir(path):
            return load_saved_model(path, signature=signature, validate=validate)
        graphs = load_dump_dir(path, validate=validate)
        if len(graphs) == 1:
            return graphs[0][1]
        raise GraphError(
            f"is a TF dump directory with {len(graphs)} graphs; name one dump file "
            "(`jitsim crosscheck index` lists them)",
            path,
        )
    if path.name in ("saved_model.pb", "saved_model.pbtxt"):
        return load_saved_model(path.parent, signature=signature, validate=validate)
    return Graph(read_graphdef(path), source=str(path), validate=validate)


def load_dump_dir(path: Path | str, *, stage: str | None = None, validate: bool = True) -> list[tuple[object, Graph]]:
    """Every graph of a TF dump directory (or harvest output) as ``[(DumpGraph, Graph)]``.

    Each graph is read from ``stage`` if given, else from its best clustering input
    (``before_clone_constants_for_better_clustering``, else ``before_mark_for_compilation``);
    graphs that have neither (no compilation candidate) are skipped unless ``stage`` names a
    stage they have.
    """
    from jitsim.crosscheck.dumps import group_dumps

    path = Path(path)
    dumps = path / "dumps" if (path / "dumps").is_dir() else path
    log = path / "log.txt"
    records = group_dumps(dumps, log.read_text(errors="replace") if log.exists() else None)
    if not records:
        raise GraphError("directory holds no TF dump files (and is not a SavedModel)", path)
    out = []
    for rec in records:
        st = stage or rec.input_stage
        if st is None or st not in rec.files:
            continue
        f = dumps / rec.files[st]
        out.append((rec, Graph(read_graphdef(f), source=str(f), validate=validate)))
    if not out:
        raise GraphError(f"no graph in this dump directory has a {stage or 'clustering input'} dump", path)
    return out


def save(graph: Graph | object, path: Path | str) -> Path:
    """Write a Graph (or any GraphDef proto) to ``path``: text for .pbtxt, else binary.

    The file is written to a temporary name in the same directory and renamed, so a
    failure never leaves a half-written output.
    """
    path = Path(path)
    gd = graph.to_graphdef() if isinstance(graph, Graph) else graph
    if is_text_path(path):
        data = to_text(gd).encode()
    else:
        data = gd.SerializeToString(deterministic=True)
    write_atomic(path, data)
    return path


_FLOAT_LINE = re.compile(r"^(\s*(?:f|float_val|scomplex_val): )(\S+)$", re.M)
_DOUBLE_LINE = re.compile(r"^(\s*(?:double_val|dcomplex_val): )(\S+)$", re.M)
_INT_KEY_MAP = re.compile(r"^(\s*)(arg_attr|resource_arg_unique_id) \{\n(?!\1  key:)", re.M)
_UNIQUE_ID_NO_VALUE = re.compile(r"^(\s*)resource_arg_unique_id \{\n(\1  key: \d+\n)(?=\1\})", re.M)


def _c_float(text: str, digits: tuple[int, int], single: bool) -> str:
    """A number as C++ ``SimpleFtoa``/``SimpleDtoa`` prints it: ``%.6g`` (``%.15g`` for
    doubles) when that round-trips, else ``%.9g`` (``%.17g``)."""
    try:
        v = float(text)
    except ValueError:
        return text
    if v != v or v in (float("inf"), float("-inf")):
        return text
    if single:
        v = struct.unpack("f", struct.pack("f", v))[0]
    short = "%.*g" % (digits[0], v)
    back = float(short)
    if single:
        back = struct.unpack("f", struct.pack("f", back))[0]
    return short if back == v else "%.*g" % (digits[1], v)


def to_text(msg) -> str:
    """Text format exactly as TensorFlow's C++ writes it (float digits, integer map keys),
    so a graph written by jitsim diffs cleanly against TF's own dumps."""
    text = text_format.MessageToString(msg)
    text = _FLOAT_LINE.sub(lambda m: m.group(1) + _c_float(m.group(2), (6, 9), True), text)
    text = _DOUBLE_LINE.sub(lambda m: m.group(1) + _c_float(m.group(2), (15, 17), False), text)
    text = _INT_KEY_MAP.sub(lambda m: m.group(0) + f"{m.group(1)}  key: 0\n", text)
    text = _UNIQUE_ID_NO_VALUE.sub(lambda m: m.group(0) + f"{m.group(1)}  value: 0\n", text)
    return text


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temporary file and a rename: never a half-written
    file. The file gets the usual permissions (0666 minus the umask), not mkstemp's 0600."""
    path = Path(path)
    if path.parent and not path.parent.exists():
        raise GraphError("output directory does not exist", path.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent or ".")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            os.fchmod(f.fileno(), 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# -- SavedModel -------------------------------------------------------------------------


def read_saved_model(path: Path):
    pb, pbtxt = path / "saved_model.pb", path / "saved_model.pbtxt"
    if pb.exists():
        return parse_message(protos.SavedModel(), read_bytes(pb), pb, text=False, what="SavedModel")
    return parse_message(protos.SavedModel(), read_bytes(pbtxt), pbtxt, text=True, what="SavedModel")


def load_saved_model(path: Path | str, *, signature: str | None = None, tag: str = "serve", validate: bool = True) -> Graph:
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
    sigs = sorted(meta.signature_def)
    if signature is None:
        signature = "serving_default" if "serving_default" in sigs else (sigs[0] if sigs else None)
    if signature is None:
        return Graph.from_graphdef(meta.graph_def, source=str(path), validate=validate)
    if signature not in meta.signature_def:
        raise GraphError(f"no signature {signature!r}; available: {', '.join(sigs) or 'none'}", path)
    sig = meta.signature_def[signature]
    gd = meta.graph_def
    by_name = {n.name: n for n in gd.node}
    fname = None
    for t in sig.outputs.values():
        node = by_name.get(t.name.split(":")[0])
        if node is not None and node.op in ("StatefulPartitionedCall", "PartitionedCall"):
            fname = node.attr["f"].func.name
            break
    if fname is None:
        return Graph.from_graphdef(gd, source=f"{path}[{signature}]", validate=validate)
    from jitsim.graph.functions import function_to_graphdef

    fgd = function_to_graphdef(gd.library, fname, source=path)
    fgd.versions.CopyFrom(gd.versions)
    return Graph(fgd, source=f"{path}[{signature}]", validate=validate)
