"""The TensorFlow releases jitsim simulates, and which one a graph came from.

Each supported release ships its own registry snapshots (``data/tf-<release>-*``, made by
``python -m jitsim.registry.regen`` inside that release) and its rule differences are
switched by :func:`jitsim.registry.releases.rule_on`. A GraphDef says which TF wrote it in
``versions.producer``: TF's ``TF_GRAPH_DEF_VERSION``, a counter bumped daily on TF's main
branch and frozen in each release when its branch is cut. So a producer number maps to the
release whose branch was cut at or after it: the release itself, or a nightly build made
on the way to it (those are named ``<release>.dev<date>``). Two releases can write the same
producer (TF 2.21 and 2.22 both write 2474): such a graph could be from either, and
:func:`release_candidates` names them all (the simulation checks that they agree).

>>> releases_for_producer(1766)
(('2.16',), None)
>>> releases_for_producer(1900)[0]
('2.18',)
>>> releases_for_producer(2474)[0]
('2.21', '2.22')
"""

from __future__ import annotations

import json
import re
import warnings

from jitsim.errors import JitsimError, JitsimWarning
from jitsim.registry import (DEFAULT_TF_VERSION, RELEASE_DATA, SUPPORTED_TF_VERSIONS, _final_release,
                             check_tf_version, read_data)

__all__ = ["PRODUCERS", "SUPPORTED", "check_tf_version", "choose_tf_version", "producer_of", "recorded_tf_version",
           "release_candidates", "releases_for_producer", "version_for_producer"]

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
DEFAULT = DEFAULT_TF_VERSION  # the newest final release

_RELEASE = re.compile(r"^\s*(\d+)\.(\d+)")
assert SUPPORTED == SUPPORTED_TF_VERSIONS


def releases_for_producer(producer: int | None) -> tuple[tuple[str, ...], str | None]:
    """``(releases, note)`` a GraphDef's ``versions.producer`` can come from, oldest first.

    A producer inside a release's range (after the previous release's producer, up to and
    including its own) gives that release and no note; releases that write the same producer
    (2.21 and 2.22: 2474) share a range and all come back. One older than the oldest supported
    release's range or newer than the newest's gives the nearest supported release and a warning
    note. 0 or None (TF writes no producer, e.g. a hand-written GraphDef) gives ``((), "unknown")``."""
    if not producer:
        return (), "unknown"
    newest = PRODUCERS[NEWEST]
    if producer > newest:
        releases = tuple(r for r in SUPPORTED if PRODUCERS[r] == newest)
        return releases, (f"GraphDef producer {producer} is newer than TF {NEWEST}'s ({newest}): simulating TF "
                          f"{_preferred(releases)}, {'one of ' if len(releases) > 1 else ''}the newest jitsim has "
                          "data for")
    if producer <= OLDEST_UNSUPPORTED_PRODUCER:
        return (OLDEST,), (f"GraphDef producer {producer} is from TF {BEFORE_OLDEST} or older ({BEFORE_OLDEST}'s is "
                           f"{OLDEST_UNSUPPORTED_PRODUCER}): simulating TF {OLDEST}, the oldest release jitsim has "
                           "data for")
    own = min(p for p in PRODUCERS.values() if producer <= p)
    return tuple(r for r in SUPPORTED if PRODUCERS[r] == own), None


def version_for_producer(producer: int | None) -> tuple[str | None, str | None]:
    """``(release, note)``: :func:`releases_for_producer`'s preferred release (:func:`_preferred`)."""
    releases, note = releases_for_producer(producer)
    return (_preferred(releases) if releases else None), note


def _preferred(releases) -> str:
    """Of releases a graph can be from, the one simulated by default: the default release if it
    is one of them, else the newest final one, else the newest."""
    if DEFAULT in releases:
        return DEFAULT
    finals = [r for r in releases if _final(r)]
    return (finals or list(releases))[-1]


def _final(release: str) -> bool:
    return _final_release(release)


def describe_producer(producer: int, release: str) -> str:
    own = PRODUCERS[release]
    others = [r for r in SUPPORTED if PRODUCERS[r] == own]
    names = " or ".join(f"TF {r}" for r in others)
    if producer == own:
        return f"GraphDef producer {producer} = {names}"
    return f"GraphDef producer {producer}: a {names} development build (the release's is {own})"


def choose_tf_version(explicit: str | None = None, graph_producer: int | None = None,
                      captured_tf_version: str | None = None) -> tuple[str, str]:
    """``(release, reason)``: which TF release to simulate, by one rule: ``explicit``
    (``--tf-version`` / ``tf_version=``) if given, else the TF a capture or harvest actually ran
    (its ``index.json`` ``tf_version``: the exact release), else the graph's ``versions.producer``
    (of releases that write the same producer, the default or the newest final one: see
    :func:`release_candidates`), else jitsim's default, the newest final release. A producer or
    captured version outside the supported releases gives the nearest one, with a
    :class:`JitsimWarning`."""
    return _choice(explicit, graph_producer, captured_tf_version)[:2]


def release_candidates(explicit: str | None = None, graph_producer: int | None = None,
                       captured_tf_version: str | None = None) -> tuple[str, ...]:
    """The releases the simulated graph may be from, the chosen one first: one, unless nothing
    but a producer that several releases write decides (then all of them)."""
    release, _, others = _choice(explicit, graph_producer, captured_tf_version)
    return (release, *others)


def _choice(explicit, graph_producer, captured_tf_version) -> tuple[str, str, tuple[str, ...]]:
    if explicit:
        return check_tf_version(explicit), "--tf-version", ()
    if captured_tf_version:
        try:
            return check_tf_version(captured_tf_version), f"captured with TF {captured_tf_version}", ()
        except JitsimError:
            m = _RELEASE.match(str(captured_tf_version))
            newer = m is not None and (int(m.group(1)), int(m.group(2))) > tuple(map(int, NEWEST.split(".")))
            if graph_producer is None:
                release = NEWEST if newer else OLDEST
                note = (f"captured with TF {captured_tf_version}, which jitsim has no data for: simulating TF "
                        f"{release}, the {'newest' if newer else 'oldest'} release it supports")
                warnings.warn(JitsimWarning(note))
                return release, note, ()
    releases, note = releases_for_producer(graph_producer)
    if releases:
        release = _preferred(releases)
        if note:
            warnings.warn(JitsimWarning(note))
        return release, note or describe_producer(graph_producer, release), tuple(r for r in releases if r != release)
    return DEFAULT, "jitsim default (no --tf-version, the graph names no producer)", ()


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
