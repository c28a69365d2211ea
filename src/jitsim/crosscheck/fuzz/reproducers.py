"""Reproducers and fixtures: what a disagreement (or a TF-unstable difference) leaves on disk
(``program.py``, ``config.json``, TF's input graph, TF's and jitsim's graphs at the stage,
the diff, a standalone harvest) and the ``fixtures/fuzz/`` entries made from them
(:func:`make_fixture`, checked by :func:`check_fixture`).
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path

from jitsim.graph.dumps import parse_stage
from jitsim.crosscheck.fuzz.check import BEFORE_CLONE, check_dumps
from jitsim.crosscheck.fuzz.evaluate import Outcome
from jitsim.crosscheck.fuzz.examples import Example
from jitsim.crosscheck.fuzz.stability import Instability
from jitsim.crosscheck.fuzz.tf_runner import run_batch
from jitsim.graph.io import save


def write_reproducer(example: Example, outcome: Outcome, dest: Path, *, seed: int | None = None,
                     timeout: float = 600.0) -> Path:
    """Write a reproducer directory for a disagreeing example (see the module docstring). The
    program is run once more alone in a fresh TF process: that run's dumps are ``harvest/``
    (reduced like the corpus) and the graph files come from it when it reproduces."""
    from jitsim.crosscheck.corpus import KEEP_STAGES, filter_log
    from jitsim.testing.program import program_to_json, to_python

    dest.mkdir(parents=True, exist_ok=True)
    title = f"jitsim fuzz example {example.id}" + (f" (seed {seed})" if seed is not None else "")
    (dest / "program.py").write_text(to_python(example.program, flags=example.flags, devices=example.devices,
                                               grappler=example.grappler, title=title))
    (dest / "program.json").write_text(json.dumps(program_to_json(example.program), indent=1) + "\n")
    h = dest / "harvest"
    if h.exists():
        shutil.rmtree(h)
    (h / "dumps").mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="jitsim-repro-") as tmp:
        r = run_batch([(example.id, example.source())], example.flags, example.devices, Path(tmp),
                      grappler=example.grappler, timeout=timeout)
        for f in r.dumps.iterdir():
            st = parse_stage(f.name)
            if st is not None and st[0] in KEEP_STAGES:
                shutil.copyfile(f, h / "dumps" / f.name)
        (h / "log.txt").write_text(filter_log(r.log_text))
    checks = check_dumps(h / "dumps", (h / "log.txt").read_text(), example.flags)
    found = [(c, p) for c in checks for p in c.problems]
    reproduced = bool(found)
    problems = [(c.record.id, p) for c, p in found] if found else outcome.problems
    gid, prob = problems[0]
    if found:
        chk = found[0][0]
        if BEFORE_CLONE in chk.record.files:
            shutil.copyfile(h / "dumps" / chk.record.files[BEFORE_CLONE], dest / "input.pbtxt")
        if prob.truth_file:
            shutil.copyfile(h / "dumps" / prob.truth_file, dest / "tf.pbtxt")
    if prob.predicted is not None:
        save(prob.predicted, dest / "jitsim.pbtxt")
    (dest / "diff.txt").write_text("\n\n".join(f"graph {g}, stage {p.stage}: {p.summary}\n{p.detail}"
                                             for g, p in problems) + "\n")
    config = {"schema": "jitsim.fuzz-reproducer/1", "example": example.id, "seed": seed, "flags": example.flags,
              "devices": example.devices, "grappler": example.grappler, "stage": prob.stage, "graph": gid, "summary": prob.summary,
              "statements": example.program.size(), "standalone_reproduces": reproduced,
              "problems": [dict(p.to_dict(), graph=g) for g, p in problems]}
    (dest / "config.json").write_text(json.dumps(config, indent=1) + "\n")
    note = ("Run alone, the program reproduces it (harvest/ holds that run's dumps).\n" if reproduced else
            "Run alone, the program does NOT reproduce it: the batch's earlier graphs matter (process state).\n")
    (dest / "README.md").write_text(
        f"# {title}: {prob.stage} differs\n\n{prob.summary}\n\n"
        f"* `program.py`: the program (TF_XLA_FLAGS={example.flags!r}, {example.devices} CPU device(s)"
        f"{'' if example.grappler else ', Grappler off'})\n"
        "* `input.pbtxt`: TF's `before_clone_constants_for_better_clustering` dump of the graph\n"
        "* `tf.pbtxt` / `jitsim.pbtxt`: TF's and jitsim's graph after the stage; `diff.txt`: the comparison\n"
        "* `harvest/`: the program run alone under TF (`dumps/`, `log.txt`)\n\n" + note +
        "\nReplay jitsim on the dumps: `python -c \"from jitsim.crosscheck.fuzz.reproducers import check_fixture; "
        "print(check_fixture('.'))\"`.\n"
        "Once fixed, make it a regression fixture: copy this directory to `fixtures/fuzz/<name>/`\n"
        "(tests/test_fuzz_fixtures.py replays every one).\n")
    return dest


FIXTURE_FILES = ("program.py", "program.json", "config.json", "README.md", "diff.txt", "evidence.txt")


def load_example(repro: Path | str) -> Example:
    """The example of a reproducer or fixture directory (its ``program.json`` and ``config.json``),
    e.g. to shrink it further: ``shrink(ex, evaluate([ex], work)[0][0], work)``."""
    from jitsim.testing.program import program_from_json

    repro = Path(repro)
    config = json.loads((repro / "config.json").read_text())
    program = program_from_json(json.loads((repro / "program.json").read_text()))
    return Example(config.get("example", 0), program, config["flags"], config.get("devices", 1),
                   config.get("grappler", True))


def make_fixture(repro: Path | str, dest: Path | str) -> Path:
    """Turn a reproducer directory into a regression fixture: the program, its configuration,
    the notes, and TF's dumps packed as a deterministic ``harvest.tar.xz``."""
    repro, dest = Path(repro), Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for f in FIXTURE_FILES:
        if (repro / f).exists():
            shutil.copyfile(repro / f, dest / f)
    from jitsim.crosscheck.corpus import pack_tar_xz

    files = sorted(p for p in (repro / "harvest").rglob("*") if p.is_file())
    pack_tar_xz(dest / "harvest.tar.xz", [(str(p.relative_to(repro)), p.read_bytes()) for p in files])
    return dest


def check_fixture(path: Path | str) -> list[str]:
    """Replay a reproducer or fixture directory: jitsim vs the TF dumps in ``harvest/`` (or
    ``harvest.tar.xz``). Returns one line per problem (empty: jitsim agrees with TF on every
    graph; TF's known nondeterminism does not count)."""
    import tarfile

    path = Path(path)
    config = json.loads((path / "config.json").read_text())
    with tempfile.TemporaryDirectory(prefix="jitsim-fixture-") as tmp:
        h = path / "harvest"
        if not h.is_dir():
            with tarfile.open(path / "harvest.tar.xz", "r:xz") as tar:
                tar.extractall(tmp, filter="data")
            h = Path(tmp) / "harvest"
        out = []
        for chk in check_dumps(h / "dumps", (h / "log.txt").read_text(errors="replace"), config["flags"]):
            out += [f"graph {chk.record.id} {p.stage}: {p.summary}" for p in chk.problems]
    return out


def write_tf_unstable(example: Example, unstable: list[Instability], dest: Path, *, seed: int | None = None) -> Path:
    """Write the evidence that TF differed from itself where jitsim differed from TF:
    ``program.py``, for each graph TF's two outputs at the stage (``g<graph>-<stage>-<run>.pbtxt``,
    and at the earlier stage where TF first differed, if any), jitsim's prediction
    (``g<graph>-<stage>-jitsim.pbtxt``) and ``evidence.txt``."""
    from jitsim.testing.program import to_python

    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    title = f"jitsim fuzz example {example.id}" + (f" (seed {seed})" if seed is not None else "")
    (dest / "program.py").write_text(to_python(example.program, flags=example.flags, devices=example.devices,
                                               grappler=example.grappler, title=title))
    texts = []
    for u in unstable:
        files = []
        for st in dict.fromkeys((u.problem.stage, u.stage)):
            for g in u.tf:
                src = g.path(st)
                if src is not None and src.exists():
                    name = f"g{u.graph}-{st}-" + re.sub(r"[^A-Za-z0-9]+", "-", g.run).strip("-") + ".pbtxt"
                    shutil.copyfile(src, dest / name)
                    files.append(name)
        if u.problem.predicted is not None:
            name = f"g{u.graph}-{u.problem.stage}-jitsim.pbtxt"
            save(u.problem.predicted, dest / name)
            files.append(name)
        texts.append(u.evidence + "\nFiles: " + ", ".join(files))
    run = f"TF_XLA_FLAGS='{example.flags}' python program.py"
    (dest / "evidence.txt").write_text(
        f"{title}: jitsim differs from TF only where TF differs from itself\n"
        f"(TF_XLA_FLAGS={example.flags!r}, {example.devices} CPU device(s)"
        f"{'' if example.grappler else ', Grappler off'}; `{run}` with TF_DUMP_GRAPH_PREFIX set reruns it)\n\n"
        + "\n\n".join(texts) + "\n")
    return dest
