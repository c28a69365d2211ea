"""Byte-for-byte check for structure work (issue 37): the output of the command line (stdout,
stderr, exit code) on a sample of the fixtures corpus and the shipped example, to compare two
versions of the code.

    python benchmarks/golden_cli.py OUT.json [--every N]   # digest with the code on PYTHONPATH
    python benchmarks/golden_cli.py cmp A.json B.json      # "N differ"; exit 1 if any

For the example and every N-th corpus run (default 3): the run's largest pass-input dump of at
most 3,000 nodes and the run's dump directory, each through the commands users run without
TensorFlow (``--tf never``): ``show``, ``cluster`` (text, JSON, the dump taken as the mark pass's
input, the run directory), ``explain`` (a clustered node, an unclustered one, the pair),
``whatif --exclude-op`` (the clustered node's op), ``diff`` of two
releases, ``rewrite``, ``runtime``, ``render`` (DOT) and ``report`` (HTML). Each command runs in
this process (``jitsim.cli.main``), its output's paths made relative to the corpus root, and is
kept as a short hash (and the first 300 characters, to see what differs).

Make the digest with the code before a change (``PYTHONPATH=/old/checkout/src``) and after,
then ``cmp``: a structure change must say ``0 differ``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _h(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _run(argv: list[str], roots: dict[str, str]) -> dict:
    from jitsim.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = main(argv)
        except SystemExit as e:
            rc = e.code
    texts = []
    for t in (out.getvalue(), err.getvalue()):
        for real, alias in roots.items():
            t = t.replace(real, alias)
        texts.append(t)
    return {"rc": rc, "out": _h(texts[0]), "err": _h(texts[1]), "head": (texts[0] + texts[1])[:300]}


def _files(out_dir: Path, roots: dict[str, str]) -> str:
    """One hash of every file a command wrote (paths replaced as in its output)."""
    parts = []
    for f in sorted(out_dir.rglob("*")):
        if f.is_file():
            t = f.read_bytes().decode("utf-8", "replace")
            for real, alias in roots.items():
                t = t.replace(real, alias)
            parts.append(f"{f.relative_to(out_dir)}\n{t}")
    return _h("\n".join(parts))


def _nodes(path: Path, flags: str | None) -> tuple[str | None, str | None, str | None]:
    """A clustered and an unclustered op node of a graph (jitsim's answer), for ``explain``, and
    the op of the clustered one (for ``whatif --exclude-op``)."""
    from jitsim.explain.clustering import cluster

    c = cluster(path, flags, tf="never")
    inside = next((n for m in c.clusters.values() for n in m if c.nodes[n].op != "Const"), None)
    outside = next((n for n, r in c.nodes.items() if r.cluster is None and r.op not in ("_Arg", "_Retval", "Const")),
                   None)
    return inside, outside, c.nodes[inside].op if inside else None


def targets(every: int, base: Path):
    """(name, graph file, run dir or None, flags) for the sample; each run copied to ``base``
    (a fixed path: reports embed paths in escaped forms no replacement sees)."""
    from jitsim.crosscheck.corpus import Corpus
    from jitsim.graph.dumps import dump_dir
    from jitsim.graph.io import read_graphdef

    ex = ROOT / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt"
    yield "example", ex, None, None
    corpus = Corpus(ROOT / "fixtures")
    for i, run in enumerate(corpus.runs()):
        if i % every:
            continue
        root = base / run.name
        shutil.copytree(corpus.extract(run.name), root)
        corpus.close()
        where = dump_dir(root)
        best = None
        for rec in where.records():
            if rec.input_stage is None:
                continue
            f = where.dumps / rec.files[rec.input_stage]
            n = len(read_graphdef(f).node)
            if n <= 3000 and (best is None or n > best[0]):
                best = (n, f)
        if best is not None:
            yield run.name, best[1], root, run.flags


def digest(every: int) -> dict:
    os.environ.setdefault("COLUMNS", "120")
    os.environ.pop("TF_XLA_FLAGS", None)
    out = {}
    fixed = Path(tempfile.gettempdir()) / "jitsim-golden-cli"
    shutil.rmtree(fixed, ignore_errors=True)
    tmp = fixed / "out"
    try:
        for name, graph, run_dir, flags in targets(every, fixed / "runs"):
            roots = {str(graph.parent): "<dumps>", str(tmp): "<tmp>"}
            if run_dir is not None:
                roots = {str(run_dir): "<run>", **roots}
            g = str(graph)
            fl = ["--tf-xla-flags", flags] if flags else []
            inside, outside, op = _nodes(graph, flags)
            cmds = {
                "show": ["show", g],
                "cluster": ["cluster", g, "--tf", "never", *fl],
                "cluster_json": ["cluster", g, "--tf", "never", "--format", "json", *fl],
                "show_marked": ["cluster", g, "--tf", "never", "--format", "json", "--input-stage",
                                "before_mark_for_compilation", *fl],
                "diff_releases": ["diff", g, "--tf", "never", "--tf-version", "2.21", "--tf-version", "2.22", *fl],
                "runtime": ["runtime", g, "--tf", "never", *fl],
            }
            if op:
                cmds["whatif"] = ["whatif", g, "--tf", "never", "--exclude-op", op, *fl]
            if inside:
                cmds["explain_in"] = ["explain", g, inside, "--tf", "never", *fl]
            if outside:
                cmds["explain_out"] = ["explain", g, outside, "--tf", "never", *fl]
            if inside and outside:
                cmds["explain_pair"] = ["explain", g, inside, outside, "--tf", "never", *fl]
            if run_dir is not None:
                cmds["cluster_dir"] = ["cluster", str(run_dir), "--tf", "never", "--format", "json"]
            rows = {k: _run(v, roots) for k, v in cmds.items()}
            for k, argv in (("rewrite", ["rewrite", g, "--tf", "never", "--until", "build-xla-ops", *fl, "-o"]),
                            ("render", ["render", g, "--tf", "never", *fl, "-o"]),
                            ("report", ["report", g, "--tf", "never", *fl, "-o"])):
                d = tmp / name / k
                d.mkdir(parents=True)
                target = d / {"rewrite": "g.pbtxt", "render": "g.dot", "report": "r.html"}[k]
                rows[k] = _run(argv + [str(target)], roots)
                rows[k]["files"] = _files(d, roots)
            out[name] = rows
            print(name, file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(fixed, ignore_errors=True)
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["cmp"]:
        a, b = (json.loads(Path(p).read_text()) for p in argv[1:3])
        n = 0
        for name in sorted(set(a) | set(b)):
            ra, rb = a.get(name, {}), b.get(name, {})
            for k in sorted(set(ra) | set(rb)):
                x, y = ra.get(k), rb.get(k)
                if x is None or y is None or any(x.get(f) != y.get(f) for f in ("rc", "out", "err", "files")):
                    n += 1
                    print(f"{name} {k}:\n  A {x and x.get('head')!r}\n  B {y and y.get('head')!r}")
        print(f"{n} differ ({sum(len(r) for r in a.values())} outputs)")
        return 1 if n else 0
    every = 3
    if "--every" in argv:
        every = int(argv[argv.index("--every") + 1])
    Path(argv[0]).write_text(json.dumps(digest(every), indent=1, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
