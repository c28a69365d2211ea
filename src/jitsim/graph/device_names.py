"""TF's device names (``DeviceNameUtils``): ``/job:J/replica:R/task:T/device:TYPE:ID`` and the
legacy ``/cpu:0`` forms, parsed into their fields."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class ParsedName:
    job: str | None = None
    replica: int | None = None
    task: int | None = None
    type: str | None = None
    id: int | None = None


_PART = re.compile(r"/(job|replica|task|device|cpu|gpu|CPU|GPU):?([^/]*)")


@lru_cache(maxsize=4096)
def parse_device_name(name: str) -> ParsedName | None:
    """``/job:localhost/replica:0/task:0/device:CPU:0`` -> fields; None if unparsable
    (memoized: a graph names a handful of devices on thousands of nodes).

    >>> parse_device_name("/job:localhost/replica:0/task:0/device:GPU:1").type
    'GPU'
    >>> parse_device_name("/cpu:0").type
    'CPU'
    """
    if not name:
        return None
    if not name.startswith("/"):
        name = "/device:" + name if ":" in name else name
    job = replica = task = dtype = did = None
    pos = 0
    for m in _PART.finditer(name):
        if m.start() != pos:
            return None
        pos = m.end()
        key, val = m.group(1), m.group(2)
        if key == "job":
            job = val
        elif key == "replica":
            replica = int(val) if val.isdigit() else None
        elif key == "task":
            task = int(val) if val.isdigit() else None
        elif key == "device":
            t, _, i = val.partition(":")
            dtype = t
            did = int(i) if i.isdigit() else None
        else:  # legacy /cpu:0, /gpu:0
            dtype = key.upper()
            did = int(val) if val.isdigit() else None
    if pos != len(name):
        return None
    return ParsedName(job, replica, task, dtype, did)


def device_type(name: str) -> str | None:
    p = parse_device_name(name)
    return p.type if p else None
