"""A cache of parsed text protos, keyed by content: the second read of a big text dump is a
binary parse.

Parsing a text GraphDef is jitsim's largest fixed cost on a big graph (about 0.3 s for the
12.6k-node ResNet-50 training step, 2.6 s at 100k nodes), and users read the same dump many
times: ``cluster``, then ``explain`` of several nodes, ``whatif`` sweeps, ``report``. The
binary form parses in C in a few milliseconds, so each text file of at least
:data:`MIN_BYTES` is stored once in binary form under the hash of its bytes and of the
message's schema, and read back from there while the file is unchanged.

Where: ``$JITSIM_PARSE_CACHE`` (a directory; ``off`` or ``0`` turns the cache off), else
``~/.cache/jitsim/parsed``. The directory is kept under :data:`MAX_TOTAL_BYTES` (least recently
used entries go first). A cache that cannot be read or written is not used: the file is parsed
as if there were none, and a note says so once. An entry records its payload's length, so a truncated entry is never
taken for a smaller graph.

>>> from jitsim.graph import protos
>>> cache = ParseCache(None)            # off: nothing is stored, nothing found
>>> cache.get(b"node { name: 'a' }", protos.GraphDef()) is None
True
"""

from __future__ import annotations

import functools
import hashlib
import os
import struct
import warnings
from pathlib import Path

from jitsim.errors import JitsimError, JitsimWarning
from jitsim.graph.input import MAX_INPUT_BYTES, read_file
from jitsim.graph.output import write_atomic

MIN_BYTES = 512 * 1024  # smaller files parse in well under 30 ms: not worth a file
MAX_TOTAL_BYTES = 2 * 2**30
FORMAT = b"jitsim-parsed/1\n"
_HEADER = struct.Struct("<Q")  # the payload's length
_OFF = ("off", "0", "no", "false", "none")


def default_dir() -> Path | None:
    """The cache directory the environment asks for (None: off)."""
    env = os.environ.get("JITSIM_PARSE_CACHE")
    if env is not None:
        return None if env.strip().lower() in _OFF or not env.strip() else Path(env)
    try:
        home = Path.home()
    except (RuntimeError, KeyError):  # no HOME and no password entry: no cache
        return None
    return home / ".cache" / "jitsim" / "parsed"


@functools.lru_cache(maxsize=None)
def _schema_digest(descriptor) -> bytes:
    """What the key depends on besides the text: the message type and its .proto file."""
    import google.protobuf

    h = hashlib.blake2b(digest_size=16)
    h.update(FORMAT)
    h.update(google.protobuf.__version__.encode() + b"\0")
    h.update(descriptor.full_name.encode() + b"\0")
    h.update(descriptor.file.serialized_pb)
    return h.digest()


class ParseCache:
    """The parsed-text cache in ``root`` (None: a cache that is always empty)."""

    def __init__(self, root: Path | None, *, max_total_bytes: int = MAX_TOTAL_BYTES) -> None:
        self.root = root
        self.max_total_bytes = max_total_bytes

    def key(self, data: bytes, message) -> str:
        h = hashlib.blake2b(data, digest_size=20)
        h.update(_schema_digest(message.DESCRIPTOR))
        return h.hexdigest()

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.binpb"

    def get(self, data: bytes, message):
        """Fill the fresh ``message`` from the entry for text ``data`` and return it, or None
        (no entry, or an unreadable one)."""
        if self.root is None:
            return None
        path = self._path(self.key(data, message))
        try:  # a regular file only, bounded (an entry replaced by a FIFO never hangs a read)
            blob = read_file(path, limit=MAX_INPUT_BYTES + 64)
        except (OSError, JitsimError):
            return None
        n = len(FORMAT) + _HEADER.size
        if len(blob) < n or not blob.startswith(FORMAT) or _HEADER.unpack_from(blob, len(FORMAT))[0] != len(blob) - n:
            return None
        try:
            message.ParseFromString(memoryview(blob)[n:])
        except Exception:  # a damaged entry: parse the text instead
            message.Clear()
            return None
        try:
            os.utime(path)  # recently used
        except OSError:
            pass
        return message

    def put(self, data: bytes, message) -> None:
        """Store ``message``, parsed from text ``data`` (silently nothing where the cache
        directory cannot be written)."""
        if self.root is None:
            return
        payload = message.SerializeToString(deterministic=True)  # maps in key order, as text has them
        path = self._path(self.key(data, message))
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(path, FORMAT + _HEADER.pack(len(payload)) + payload, durable=False)
            self.trim()
        except (OSError, JitsimError) as e:
            _say_unusable(self.root, e)

    def entries(self) -> list[tuple[float, int, Path]]:
        """``(last use, size, path)`` of every entry."""
        out = []
        if self.root is None or not self.root.is_dir():
            return out
        for sub in self.root.iterdir():
            if not sub.is_dir():
                continue
            for p in sub.glob("*.binpb"):
                try:
                    st = p.stat()
                except OSError:
                    continue
                out.append((st.st_mtime, st.st_size, p))
        return out

    def trim(self) -> None:
        """Remove the least recently used entries until the cache fits its limit."""
        entries = self.entries()
        total = sum(size for _, size, _ in entries)
        for _, size, p in sorted(entries, key=lambda e: e[0]):
            if total <= self.max_total_bytes:
                break
            try:
                p.unlink()
                total -= size
            except OSError:
                pass


_SAID: set[str] = set()


def _say_unusable(root: Path, e: Exception) -> None:
    """A note, once per process and directory, that the cache cannot be written (the file is
    parsed from text every time then; as the capture cache says it, see
    :func:`jitsim.frontend.capture.usable_cache_dir`)."""
    if str(root) in _SAID:
        return
    _SAID.add(str(root))
    if isinstance(e, JitsimError):
        why = e.message
    elif os.path.lexists(root) and not os.path.isdir(root):
        why = "it is not a directory"
    else:
        why = e.strerror or str(e)
    warnings.warn(JitsimWarning(f"the parse cache cannot be written ({why}; set JITSIM_PARSE_CACHE to a writable "
                                "directory, or off): parsed from text, nothing cached", root), stacklevel=3)


def parse_cached(data: bytes, message, parse_text) -> object:
    """``parse_text()`` (which fills ``message`` from text ``data``), served from the cache for
    a text of at least :data:`MIN_BYTES`. Errors of ``parse_text`` propagate, nothing is stored
    then."""
    cache = ParseCache(default_dir()) if len(data) >= MIN_BYTES else ParseCache(None)
    if cache.get(data, message) is not None:
        return message
    parse_text()
    cache.put(data, message)
    return message
