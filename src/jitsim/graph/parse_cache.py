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
as if there were none, and a note says so once.

An entry is verified before it is used: its header holds the payload's length and a SHA-256
over the entry's key (the hash of the text it stands for) and the payload. A truncated or
damaged entry (one changed byte), or one copied under another key, fails the check; it is
removed, the text is parsed as if there were no entry, and the entry is written anew. So a
damaged cache can cost time, never a different graph or an error blamed on the user's file.

>>> from jitsim.registry import protos
>>> cache = ParseCache(None)            # off: nothing is stored, nothing found
>>> cache.get(b"node { name: 'a' }", protos.GraphDef()) is None
True
"""

from __future__ import annotations

import functools
import os
import stat
import struct
import warnings
from pathlib import Path

from jitsim.errors import JitsimError, JitsimWarning
from jitsim.files.output import private_directory, write_atomic

MIN_BYTES = 512 * 1024  # smaller files parse in well under 30 ms: not worth a file
MAX_TOTAL_BYTES = 2 * 2**30
FORMAT = b"jitsim-parsed/2\n"
_HEADER = struct.Struct("<Q32s")  # the payload's length, sha256(key + payload)
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
    import hashlib  # imported here: a run with the cache off does not need it

    import google.protobuf

    h = hashlib.blake2b(digest_size=16)
    h.update(FORMAT)
    h.update(google.protobuf.__version__.encode() + b"\0")
    h.update(descriptor.full_name.encode() + b"\0")
    h.update(descriptor.file.serialized_pb)
    return h.digest()


def _digest(key: str, payload) -> bytes:
    import hashlib

    h = hashlib.sha256(key.encode() + b"\0")
    h.update(payload)
    return h.digest()


def entry_bytes(key: str, payload: bytes) -> bytes:
    """An entry's bytes: the format line, the payload's length and checksum, the payload."""
    return FORMAT + _HEADER.pack(len(payload), _digest(key, payload)) + payload


def verified_payload(blob: bytes, key: str):
    """The payload of entry ``blob`` stored under ``key``, or None where the entry is not
    whole and unchanged (wrong format line, length or checksum)."""
    n = len(FORMAT) + _HEADER.size
    if len(blob) < n or not blob.startswith(FORMAT):
        return None
    length, digest = _HEADER.unpack_from(blob, len(FORMAT))
    payload = memoryview(blob)[n:]
    if length != len(payload) or _digest(key, payload) != digest:
        return None
    return payload


_MAX_ENTRY = 2**31 + 64  # protobuf's limit, and the header


def _read_entry(path: Path) -> bytes | None:
    """An entry's bytes, or None: no entry, or something that is no entry jitsim wrote (a
    link, a device, a pipe: never followed or read, so a planted /dev/zero cannot hang or
    exhaust memory; more bytes than any entry can hold)."""
    try:
        st = path.lstat()
        if not stat.S_ISREG(st.st_mode):
            if not stat.S_ISDIR(st.st_mode):
                path.unlink()  # removed, so that put() writes a real entry
            return None
        if st.st_size > _MAX_ENTRY:
            return None
        with open(path, "rb") as f:
            blob = f.read(_MAX_ENTRY + 1)
    except OSError:
        return None
    return blob if len(blob) <= _MAX_ENTRY else None


class ParseCache:
    """The parsed-text cache in ``root`` (None: a cache that is always empty)."""

    def __init__(self, root: Path | None, *, max_total_bytes: int = MAX_TOTAL_BYTES) -> None:
        self.root = root
        self.max_total_bytes = max_total_bytes

    def key(self, data: bytes, message) -> str:
        import hashlib

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
        key = self.key(data, message)
        path = self._path(key)
        blob = _read_entry(path)
        if blob is None:
            return None
        payload = verified_payload(blob, key)
        if payload is not None:
            try:
                message.ParseFromString(payload)
            except Exception:  # a checksum that matches bytes protobuf refuses: written by a broken writer
                message.Clear()
                payload = None
        if payload is None:  # a damaged entry: gone, so that put() writes it anew
            try:
                path.unlink()
            except OSError:
                pass
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
        key = self.key(data, message)
        path = self._path(key)
        try:
            private_directory(self.root)
            private_directory(path.parent)
            write_atomic(path, entry_bytes(key, payload), durable=False)
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
