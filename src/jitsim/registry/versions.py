"""The TensorFlow releases jitsim simulates, and which one a graph came from.

Each supported release ships its own registry snapshots (``data/tf-<release>-*``, made by
``python -m jitsim.registry.regen`` inside that release) and its rule differences are
switched by :func:`jitsim.registry.current_tf_version`. A GraphDef says which TF wrote it in
``versions.producer``: TF's ``TF_GRAPH_DEF_VERSION``, a counter bumped daily on TF's main
branch and frozen in each release when its branch is cut. So a producer number maps to the
release whose branch was cut at or after it: the release itself, or a nightly build made
on the way to it (those are named ``<release>.dev<date>``).

>>> version_for_producer(1766)
('2.16', None)
>>> version_for_producer(1900)[0]
'2.18'
>>> version_for_producer(3000)[0]
'2.21'
"""

from __future__ import annotations

import json
import re
import warnings

from jitsim.errors import JitsimError, JitsimWarning
from jitsim.registry import RELEASE_DATA, SUPPORTED_TF_VERSIONS, check_tf_version, read_data

__all__ = ["PRODUCERS", "SUPPORTED", "check_tf_version", "choose_tf_version", "producer_of", "recorded_tf_version",
           "version_for_producer"]

# release -> its GraphDef producer (tf.version.GRAPH_DEF_VERSION of the release wheel, written by
# `python -m jitsim.registry.regen` run in that release, data/tf-<release>-release.json)
PRODUCERS: dict[str, int] = {
    r: json.loads(read_data(RELEASE_DATA, r))["graph_def_version"] for r in SUPPORTED_TF_VERSIONS
}
# the producer of the release before the oldest supported one (TF 2.14: TF_GRAPH_DEF_VERSION in
# its wheel's include/tensorflow/core/public/version.h): it bounds the oldest release's range from below
BEFORE_OLDEST, OLDEST_UNSUPPORTED_PRODUCER = "2.14", 1575
SUPPORTED: tuple[str, ...] = tuple(PRODUCERS)  # oldest first
NEWEST = SUPPORTED[-1]
OLDEST = SUPPORTED[0]

_RELEASE = re.compile(r"^\s*(\d+)\.(\d+)")
assert SUPPORTED == SUPPORTED_TF_VERSIONS


def version_for_producer(producer: int | None) -> tuple[str | None, str | None]:
    """``(release, note)`` for a GraphDef's ``versions.producer``.

    A producer inside a release's range (after the previous release's producer, up to and
    including its own) gives that release and no note. One older than 2.16's range or newer
    than 2.21's gives the nearest supported release and a warning note. 0 or None (TF writes
    no producer, e.g. a hand-written GraphDef) gives ``(None, "unknown")``."""
    if not producer:
        return None, "unknown"
    if producer > PRODUCERS[NEWEST]:
        return NEWEST, (f"GraphDef producer {producer} is newer than TF {NEWEST}'s ({PRODUCERS[NEWEST]}): "
                        f"simulating TF {NEWEST}, the newest release jitsim has data for")
    if producer <= OLDEST_UNSUPPORTED_PRODUCER:
        return OLDEST, (f"GraphDef producer {producer} is from TF {BEFORE_OLDEST} or older ({BEFORE_OLDEST}'s is "
                        f"{OLDEST_UNSUPPORTED_PRODUCER}): simulating TF {OLDEST}, the oldest release jitsim has "
                        "data for")
    for release, own in PRODUCERS.items():
        if producer <= own:
            return release, None
    raise AssertionError("unreachable")  # pragma: no cover


def describe_producer(producer: int, release: str) -> str:
    own = PRODUCERS[release]
    if producer == own:
        return f"GraphDef producer {producer} = TF {release}"
    return f"GraphDef producer {producer}: a TF {release} development build (the release's is {own})"


def choose_tf_version(explicit: str | None = None, graph_producer: int | None = None,
                      captured_tf_version: str | None = None) -> tuple[str, str]:
    """``(release, reason)``: which TF release to simulate, by one rule: ``explicit``
    (``--tf-version`` / ``tf_version=``) if given, else the graph's ``versions.producer``,
    else the TF a capture actually ran (a harvest's ``index.json`` ``tf_version``), else
    jitsim's default, the newest release. A producer or captured version outside the
    supported releases gives the nearest one, with a :class:`JitsimWarning`."""
    if explicit:
        return check_tf_version(explicit), "--tf-version"
    release, note = version_for_producer(graph_producer)
    if release is not None:
        if note:
            warnings.warn(JitsimWarning(note))
        return release, note or describe_producer(graph_producer, release)
    if captured_tf_version:
        try:
            return check_tf_version(captured_tf_version), f"captured with TF {captured_tf_version}"
        except JitsimError:
            m = _RELEASE.match(str(captured_tf_version))
            newer = m is not None and (int(m.group(1)), int(m.group(2))) > tuple(map(int, NEWEST.split(".")))
            release = NEWEST if newer else OLDEST
            note = (f"captured with TF {captured_tf_version}, which jitsim has no data for: simulating TF "
                    f"{release}, the {'newest' if newer else 'oldest'} release it supports")
            warnings.warn(JitsimWarning(note))
            return release, note
    return NEWEST, "jitsim default (no --tf-version, the graph names no producer)"


def producer_of(graph) -> int | None:
    """``versions.producer`` of a jitsim ``Graph`` or a ``GraphDef`` (None when it names none)."""
    gd = getattr(graph, "graphdef", graph)
    versions = getattr(gd, "versions", None)
    return (versions.producer or None) if versions is not None else None


def recorded_tf_version(path) -> str | None:
    """The TF version a harvest or capture ran (its ``index.json``'s ``tf_version``) for a
    harvest directory, its ``dumps/`` directory or one of its dump files; else None."""
    from pathlib import Path

    from jitsim.files.input import is_regular_file, read_json

    p = Path(path)
    for d in ([p] if p.is_dir() else []) + [p.parent, p.parent.parent]:
        idx = d / "index.json"
        if is_regular_file(idx):
            try:
                v = read_json(idx).get("tf_version")
            except (JitsimError, AttributeError):
                return None
            return v if isinstance(v, str) and v else None
    return None
