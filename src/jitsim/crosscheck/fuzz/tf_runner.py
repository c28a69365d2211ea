"""Running generated programs under real TensorFlow, a batch per process.

Every program is a file ``ex<id>.py`` run in turn by one runner script, a marker line on
stderr before each, so the dumps TF writes can be attributed to the program that caused
them; a program that hangs past :data:`PROGRAM_TIMEOUT` ends the process and
:func:`run_programs` restarts the rest of the batch without it.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from jitsim.tfprocess.harvest import last_error_line, harvest_env
from jitsim.errors import JitsimError
from jitsim.files.input import read_text

_BEGIN = "JITSIM_FUZZ_BEGIN "
_ERROR = "JITSIM_FUZZ_ERROR "
_END = "JITSIM_FUZZ_END"

# Each program gets PROGRAM_TIMEOUT seconds: a hung TF call (py_function in some nests does
# hang) ends the process, and run_programs restarts the rest of the batch without it.
PROGRAM_TIMEOUT = 120
_RUNNER = '''\
import faulthandler, json, os, runpy, sys, traceback
{header}
_progs = json.load(open(sys.argv[1]))
for _id, _path in _progs:
    print("{begin}%d" % _id, file=sys.stderr, flush=True)
    faulthandler.dump_traceback_later({timeout}, exit=True)
    try:
        runpy.run_path(_path, run_name="__main__")
    except Exception as _e:
        _lines = [l.strip() for l in str(_e).strip().splitlines() if l.strip()]
        _msg = (_lines[0] + (" | " + _lines[-1] if len(_lines) > 1 else ""))[:400] if _lines else ""
        print("{error}%d %s: %s" % (_id, type(_e).__name__, _msg), file=sys.stderr, flush=True)
    faulthandler.cancel_dump_traceback_later()
print("{end}", file=sys.stderr, flush=True)
'''


@dataclass
class BatchRun:
    """One TF process over several programs."""

    root: Path  # holds dumps/, log.txt, ex<id>.py
    ids: list[int]
    ran: list[int]  # ids whose BEGIN marker TF printed
    errors: dict[int, str]  # id -> exception TF raised
    crashed: int | None  # id running when the process died, if it did
    owners: dict[str, int]  # dump file -> id
    wall_s: float
    log_text: str

    @property
    def dumps(self) -> Path:
        return self.root / "dumps"


def _parse_log(text: str) -> tuple[list[int], dict[int, str], dict[str, int], bool]:
    dumped = re.compile(r"Dumped (?:Graph|FunctionDef) to (\S+)")
    ran, errors, owners, ended = [], {}, {}, False
    current = -1
    for line in text.splitlines():
        if line.startswith(_BEGIN):
            current = int(line[len(_BEGIN):].split()[0])
            ran.append(current)
            continue
        if line.startswith(_ERROR):
            pid, _, msg = line[len(_ERROR):].partition(" ")
            errors[int(pid)] = msg
            continue
        if line.startswith(_END):
            ended = True
            continue
        m = dumped.search(line)
        if m:
            owners.setdefault(Path(m.group(1)).name, current)
    return ran, errors, owners, ended


def run_batch(programs: list[tuple[int, str]], flags: str, devices: int, root: Path, *, grappler: bool = True,
              timeout: float = 600.0, python: str | None = None) -> BatchRun:
    """Run ``(id, body source)`` programs in one TF process with the dump flags; ``root`` receives
    ``ex<id>.py``, ``dumps/`` and ``log.txt``."""
    from jitsim.testing.program import header_source

    # absolute: the runner runs with cwd=root, so a relative root would be joined twice
    root = Path(root).absolute()
    root.mkdir(parents=True, exist_ok=True)
    dumps = root / "dumps"
    if dumps.exists():
        shutil.rmtree(dumps)
    dumps.mkdir()
    paths = []
    for pid, src in programs:
        p = root / f"ex{pid}.py"
        p.write_text(header_source(1) + "\n" + src)
        paths.append([pid, str(p)])
    (root / "programs.json").write_text(json.dumps(paths))
    (root / "config.json").write_text(json.dumps({"flags": flags, "devices": devices, "grappler": grappler}) + "\n")
    runner = root / "runner.py"
    runner.write_text(_RUNNER.format(header=header_source(devices, grappler), begin=_BEGIN, error=_ERROR, end=_END,
                                      timeout=PROGRAM_TIMEOUT))
    env = harvest_env(dumps, flags)
    env["TF_CPP_MIN_LOG_LEVEL"] = "0"
    t0 = time.monotonic()
    log_path = root / "log.txt"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([python or sys.executable, str(runner), str(root / "programs.json")], cwd=root,
                                env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        except BaseException:  # Ctrl-C, a signal (jitsim.cli): TF's process ends with jitsim
            proc.kill()
            proc.wait()
            raise
    wall = time.monotonic() - t0
    text = read_text(log_path, what="TF's log")
    ran, errors, owners, ended = _parse_log(text)
    crashed = None
    if not ended:
        crashed = ran[-1] if ran else (programs[0][0] if programs else None)
    return BatchRun(root, [p for p, _ in programs], ran, errors, crashed, owners, wall, text)


def run_programs(programs: list[tuple[int, str]], flags: str, devices: int, root: Path, *, grappler: bool = True,
                 timeout: float = 600.0) -> list[BatchRun]:
    """:func:`run_batch`, restarting after a TF crash with the programs not yet run (the crashing
    program is reported, not retried)."""
    runs = []
    todo = list(programs)
    k = 0
    while todo:
        r = run_batch(todo, flags, devices, root / f"run{k}", grappler=grappler, timeout=timeout)
        if not r.ran:
            raise JitsimError(f"TensorFlow did not start: {last_error_line(r.log_text)}", r.root)
        runs.append(r)
        if r.crashed is None:
            break
        done = set(r.ran)
        todo = [(p, s) for p, s in todo if p not in done]
        k += 1
    return runs
