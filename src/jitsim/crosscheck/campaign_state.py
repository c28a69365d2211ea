"""Campaign state as data (docs/campaigns.md, "The campaign directory"): JSON read back field
by field, never unpickled.

* :class:`StateError` -- a campaign file that is not what its schema says (unknown or missing
  field, a field of the wrong type, a name that is no plain file name, a digest that differs):
  the item it belongs to is not done and runs again.
* A small schema checker (:func:`fields` and the type specs :data:`INT`, :data:`STR`...):
  every object read back is checked against an explicit list of fields.
* The fuzz batch file ``jitsim.fuzz-batch/1`` (:func:`encode_fuzz_batch`,
  :func:`decode_fuzz_batch`): every example's :class:`~jitsim.crosscheck.fuzz.evaluate.Outcome`
  and the checks of the graphs no example owns, each object written and read field by field.

Nothing here executes what it reads: the worst a forged file can do is hold other data, and
the readers check that the data agrees with itself (see :mod:`jitsim.crosscheck.campaigns`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path, PurePosixPath

FUZZ_BATCH_SCHEMA = "jitsim.fuzz-batch/1"


class StateError(ValueError):
    """A campaign file that is not what its schema says."""


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def canonical_json(value) -> bytes:
    """The one serialization of a JSON value (its digest names the value)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True).encode()


def parse_json(data: bytes, where: str):
    """JSON bytes, or :class:`StateError` (not UTF-8, not JSON, nested too deep)."""
    try:
        return json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as e:
        raise StateError(f"{where}: not JSON ({type(e).__name__}: {str(e)[:120]})") from None


# -- type specs: (value, where) -> None, or StateError -------------------------------------


def _type_spec(name: str, test):
    def check(v, where):
        if not test(v):
            raise StateError(f"{where}: not {name}")
    return check


INT = _type_spec("an integer", lambda v: type(v) is int)
NONNEG = _type_spec("an integer >= 0", lambda v: type(v) is int and v >= 0)
NUM = _type_spec("a number", lambda v: type(v) in (int, float))
STR = _type_spec("a string", lambda v: type(v) is str)
BOOL = _type_spec("true or false", lambda v: type(v) is bool)
DICT = _type_spec("an object", lambda v: type(v) is dict)
SHA256 = _type_spec("a sha256 digest", lambda v: type(v) is str and re.fullmatch(r"[0-9a-f]{64}", v) is not None)


def _plain(v) -> bool:
    return (type(v) is str and 0 < len(v) <= 255 and "/" not in v and "\\" not in v and "\0" not in v
            and v not in (".", ".."))


FILE_NAME = _type_spec("a plain file name", _plain)


def opt(spec):
    def check(v, where):
        if v is not None:
            spec(v, where)
    return check


def list_of(spec):
    def check(v, where):
        if type(v) is not list:
            raise StateError(f"{where}: not a list")
        for i, x in enumerate(v):
            spec(x, f"{where}[{i}]")
    return check


def dict_of(spec, key=STR):
    def check(v, where):
        if type(v) is not dict:
            raise StateError(f"{where}: not an object")
        for k, x in v.items():
            key(k, f"{where} key {k!r}")
            spec(x, f"{where}[{k!r}]")
    return check


def fields(d, where: str, required: dict, optional: dict | None = None) -> dict:
    """``d`` is an object with every ``required`` field, perhaps ``optional`` ones, no other,
    each of its spec's type; returns it."""
    optional = optional or {}
    if type(d) is not dict:
        raise StateError(f"{where}: not an object")
    unknown = sorted(set(d) - set(required) - set(optional))
    if unknown:
        raise StateError(f"{where}: unknown field {unknown[0]!r}")
    for k, spec in required.items():
        if k not in d:
            raise StateError(f"{where}: no field {k!r}")
        spec(d[k], f"{where}.{k}")
    for k, spec in optional.items():
        if k in d:
            spec(d[k], f"{where}.{k}")
    return d


def _relative_dir(v, where):
    STR(v, where)
    p = PurePosixPath(v)
    if p.is_absolute() or ".." in p.parts or "\0" in v or "\\" in v:
        raise StateError(f"{where}: not a path inside the batch's directory")


# -- the fuzz batch file: jitsim.fuzz-batch/1 ---------------------------------------------
#
# {"schema": "jitsim.fuzz-batch/1",
#  "outcomes": [OUTCOME, ...],          one per example of the batch, in the batch's order
#  "orphans": [CHECK, ...],             the checks of graphs no example of the batch owns
#  "logs": [str, ...]}                  what the batch logged (TF reruns that failed)
# OUTCOME: {"example": int, "problems": [{"graph": int, "problem": PROBLEM}], "tf_unstable":
#   [INSTABILITY with an inline PROBLEM], "tf_stable": [str], "not_rebuilt": [int], "error":
#   str|null, "crashed": bool, "graphs": int, "tf_nondeterminism": [str]}
# PROBLEM: {"stage", "summary", "detail": str, "predicted": base64 of a binary GraphDef|null,
#   "truth_file": file name|null, "labels": {node: cluster|null}|null}
# INSTABILITY: {"graph": int, "problem": PROBLEM (in an outcome) or the index of the check's
#   problem (in a CHECK), "stage": str, "runs": [str, str], "tf": [TFGRAPH, TFGRAPH], "only":
#   [[str], [str]], "jitsim_matches": [str], "runs_compared": [str], "evidence": str}
# TFGRAPH: {"run": str, "dumps": the dump directory relative to the batch's directory,
#   "record": DUMPGRAPH}
# DUMPGRAPH: {"id": int, "files": {stage: file name}, "aux": [file name], "mark_pass_us": number|null}
# CHECK: {"record": DUMPGRAPH, "owner": int, "problems": [PROBLEM], "tf_nondeterminism": [str],
#   "stages": [str], "rebuilt": bool, "tf_unstable": [INSTABILITY with a problem index],
#   "tf_stable": [str]}


def _graphdef_to_json(gd) -> str | None:
    if gd is None:
        return None
    if hasattr(gd, "to_graphdef"):
        gd = gd.to_graphdef()
    return base64.b64encode(gd.SerializeToString(deterministic=True)).decode("ascii")


def _graphdef_from_json(v, where: str):
    if v is None:
        return None
    from google.protobuf.message import DecodeError

    from jitsim.registry import protos

    try:
        raw = base64.b64decode(v.encode("ascii"), validate=True)
        gd = protos.GraphDef()
        gd.ParseFromString(raw)
    except (ValueError, DecodeError, UnicodeEncodeError) as e:
        raise StateError(f"{where}: not a GraphDef ({type(e).__name__})") from None
    return gd


def problem_to_json(p) -> dict:
    return {"stage": p.stage, "summary": p.summary, "detail": p.detail, "predicted": _graphdef_to_json(p.predicted),
            "truth_file": p.truth_file, "labels": None if p.labels is None else dict(p.labels)}


def problem_from_json(d, where: str):
    from jitsim.crosscheck.fuzz.check import Problem

    fields(d, where, {"stage": STR, "summary": STR, "detail": STR, "predicted": opt(STR),
                      "truth_file": opt(FILE_NAME), "labels": opt(dict_of(opt(STR)))})
    return Problem(d["stage"], d["summary"], d["detail"], _graphdef_from_json(d["predicted"], f"{where}.predicted"),
                   d["truth_file"], d["labels"])


def dumpgraph_to_json(r) -> dict:
    return {"id": r.id, "files": dict(r.files), "aux": list(r.aux), "mark_pass_us": r.mark_pass_us}


def dumpgraph_from_json(d, where: str):
    from jitsim.graph.dumps import DumpGraph

    fields(d, where, {"id": INT, "files": dict_of(FILE_NAME), "aux": list_of(FILE_NAME), "mark_pass_us": opt(NUM)})
    return DumpGraph(d["id"], dict(d["files"]), list(d["aux"]), d["mark_pass_us"])


def _tfgraph_to_json(g, root: Path) -> dict:
    try:
        rel = Path(g.dumps).relative_to(root)
    except ValueError:
        raise ValueError(f"TF run {g.run!r}: its dumps {g.dumps} are not under the batch's directory {root}") from None
    return {"run": g.run, "dumps": rel.as_posix(), "record": dumpgraph_to_json(g.record)}


def _tfgraph_from_json(d, where: str):
    from jitsim.crosscheck.fuzz.stability import _TFGraph

    fields(d, where, {"run": STR, "dumps": _relative_dir, "record": DICT})
    # relative to the batch's directory until the campaign places its unpacked copy
    return _TFGraph(d["run"], Path(d["dumps"]), dumpgraph_from_json(d["record"], f"{where}.record"))


def instability_to_json(u, root: Path, problems: list | None = None) -> dict:
    """``problems``: the check's problems (the instability's problem is one of them, written
    as its index); None: the problem is written out."""
    if problems is None:
        prob = problem_to_json(u.problem)
    else:
        prob = next((i for i, p in enumerate(problems) if p is u.problem), None)
        if prob is None:
            raise ValueError(f"graph {u.graph}: an instability whose problem is not among its check's")
    return {"graph": u.graph, "problem": prob, "stage": u.stage, "runs": list(u.runs),
            "tf": [_tfgraph_to_json(g, root) for g in u.tf], "only": [list(u.only[0]), list(u.only[1])],
            "jitsim_matches": list(u.jitsim_matches), "runs_compared": list(u.runs_compared), "evidence": u.evidence}


def _pair(spec):
    def check(v, where):
        list_of(spec)(v, where)
        if len(v) != 2:
            raise StateError(f"{where}: not a pair")
    return check


def instability_from_json(d, where: str, problems: list | None = None):
    from jitsim.crosscheck.fuzz.stability import Instability

    fields(d, where, {"graph": INT, "problem": (DICT if problems is None else NONNEG), "stage": STR,
                      "runs": _pair(STR), "tf": _pair(DICT), "only": _pair(list_of(STR)),
                      "jitsim_matches": list_of(STR), "runs_compared": list_of(STR), "evidence": STR})
    if problems is None:
        prob = problem_from_json(d["problem"], f"{where}.problem")
    else:
        if d["problem"] >= len(problems):
            raise StateError(f"{where}.problem: no problem {d['problem']} in the check")
        prob = problems[d["problem"]]
    tf = tuple(_tfgraph_from_json(g, f"{where}.tf[{i}]") for i, g in enumerate(d["tf"]))
    return Instability(d["graph"], prob, d["stage"], tuple(d["runs"]), tf, (list(d["only"][0]), list(d["only"][1])),
                       list(d["jitsim_matches"]), list(d["runs_compared"]), d["evidence"])


def outcome_to_json(o, root: Path) -> dict:
    return {"example": o.example.id, "problems": [{"graph": g, "problem": problem_to_json(p)} for g, p in o.problems],
            "tf_unstable": [instability_to_json(u, root) for u in o.tf_unstable], "tf_stable": list(o.tf_stable),
            "not_rebuilt": list(o.not_rebuilt), "error": o.error, "crashed": o.crashed, "graphs": o.graphs,
            "tf_nondeterminism": list(o.tf_nondeterminism)}


def outcome_from_json(d, where: str, example):
    from jitsim.crosscheck.fuzz.evaluate import Outcome

    fields(d, where, {"example": INT, "problems": list_of(DICT), "tf_unstable": list_of(DICT),
                      "tf_stable": list_of(STR), "not_rebuilt": list_of(INT), "error": opt(STR), "crashed": BOOL,
                      "graphs": NONNEG, "tf_nondeterminism": list_of(STR)})
    if d["example"] != example.id:
        raise StateError(f"{where}: example {d['example']}, not the batch's example {example.id}")
    problems = []
    for i, x in enumerate(d["problems"]):
        w = f"{where}.problems[{i}]"
        fields(x, w, {"graph": INT, "problem": DICT})
        problems.append((x["graph"], problem_from_json(x["problem"], f"{w}.problem")))
    return Outcome(example, problems,
                   [instability_from_json(u, f"{where}.tf_unstable[{i}]") for i, u in enumerate(d["tf_unstable"])],
                   list(d["tf_stable"]), list(d["not_rebuilt"]), d["error"], d["crashed"], d["graphs"],
                   list(d["tf_nondeterminism"]))


def check_to_json(c, root: Path) -> dict:
    return {"record": dumpgraph_to_json(c.record), "owner": c.owner,
            "problems": [problem_to_json(p) for p in c.problems],
            "tf_nondeterminism": list(c.tf_nondeterminism), "stages": list(c.stages), "rebuilt": c.rebuilt,
            "tf_unstable": [instability_to_json(u, root, c.problems) for u in c.tf_unstable],
            "tf_stable": list(c.tf_stable)}


def check_from_json(d, where: str):
    from jitsim.crosscheck.fuzz.check import GraphCheck

    fields(d, where, {"record": DICT, "owner": INT, "problems": list_of(DICT), "tf_nondeterminism": list_of(STR),
                      "stages": list_of(STR), "rebuilt": BOOL, "tf_unstable": list_of(DICT), "tf_stable": list_of(STR)})
    problems = [problem_from_json(p, f"{where}.problems[{i}]") for i, p in enumerate(d["problems"])]
    return GraphCheck(dumpgraph_from_json(d["record"], f"{where}.record"), d["owner"], problems,
                      list(d["tf_nondeterminism"]), list(d["stages"]), d["rebuilt"],
                      [instability_from_json(u, f"{where}.tf_unstable[{i}]", problems)
                       for i, u in enumerate(d["tf_unstable"])], list(d["tf_stable"]))


def encode_fuzz_batch(outcomes: dict, orphans: list, logs: list[str], root: Path) -> bytes:
    """One batch's outcomes (``{example id: Outcome}``, in the batch's order), the checks no
    example owns and its log lines; the TF runs' directories relative to ``root``."""
    data = {"schema": FUZZ_BATCH_SCHEMA, "outcomes": [outcome_to_json(o, root) for o in outcomes.values()],
            "orphans": [check_to_json(c, root) for c in orphans], "logs": list(logs)}
    return (json.dumps(data, indent=None, separators=(",", ":")) + "\n").encode()


def decode_fuzz_batch(data: bytes, examples: list, where: str = "outcomes") -> tuple[dict, list, list[str]]:
    """:func:`encode_fuzz_batch`'s bytes read back for the batch ``examples`` (the driver's own:
    the file names each by id, in order, or it is not this batch's): ``(outcomes, orphans,
    logs)``, the TF runs' directories relative to the batch's directory. :class:`StateError`
    for anything else."""
    d = parse_json(data, where)
    fields(d, where, {"schema": STR, "outcomes": list_of(DICT), "orphans": list_of(DICT), "logs": list_of(STR)})
    if d["schema"] != FUZZ_BATCH_SCHEMA:
        raise StateError(f"{where}: schema {d['schema']!r}, not {FUZZ_BATCH_SCHEMA!r}")
    ids = [o.get("example") for o in d["outcomes"]]
    want = [ex.id for ex in examples]
    if ids != want:
        raise StateError(f"{where}: the outcomes of examples {ids[:8]}, not of the batch's {want[:8]}")
    outcomes = {ex.id: outcome_from_json(o, f"{where}.outcomes[{i}]", ex)
                for i, (o, ex) in enumerate(zip(d["outcomes"], examples))}
    orphans = [check_from_json(c, f"{where}.orphans[{i}]") for i, c in enumerate(d["orphans"])]
    mine = set(want)
    for i, c in enumerate(orphans):
        if c.owner in mine:
            raise StateError(f"{where}.orphans[{i}]: owned by example {c.owner}, one of the batch's")
    return outcomes, orphans, list(d["logs"])
