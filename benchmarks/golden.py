"""Byte-for-byte check for speed work (issue 25): a digest of everything `jitsim cluster`
decides, on every graph of the fixtures corpus, to compare two versions of the code.

    python benchmarks/golden.py OUT.json [--quick] [--extra DIR]   # digest with the code on PYTHONPATH
    python benchmarks/golden.py cmp A.json B.json                  # "N differ"; exit 1 if any

Per graph (every corpus run's ``before_clone…`` and ``before_mark…`` dumps, each run with its
own flags and session, one TF process per run and stage, as ``verify`` simulates them; each
also as the command line reads it: ``load()`` with its checks, the graph handed over): the
marked graph's text, every decision (code, detail, evidence), the refusals, clusters, groups,
the graph decision and the notes, each as a short hash. ``--extra DIR``: also every ``*.pbtxt``
of DIR with the benchmark's flags, and its ``rewrite --until build-xla-ops`` graph. ``--quick``:
every fourth run, extra graphs under 20 MB.

Make the digest with the code before a change (``PYTHONPATH=/old/checkout/src``) and after,
then ``cmp``: a speed change must say ``0 differ``.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import replace
from pathlib import Path

FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"


def _h(x) -> str:
    return hashlib.sha1(x if isinstance(x, bytes) else x.encode()).hexdigest()[:16]


def digest(cr) -> dict:
    from jitsim.graph.io import to_text

    m = cr.mark
    dec = {k: [str(v.code), v.detail, json.dumps(v.evidence, sort_keys=True, default=str)]
           for k, v in m.decisions.items()}
    ref = [json.dumps([r.phase, r.from_node, r.to_node, r.from_size, r.to_size, str(r.code), r.detail, r.evidence],
                      sort_keys=True, default=str) for r in m.refusals]
    return {"graph": _h(to_text(cr.to_graphdef())), "dec": _h(json.dumps(dec, sort_keys=True)),
            "ref": _h(json.dumps(ref)), "clusters": _h(json.dumps(m.clusters)),
            "groups": _h(json.dumps(m.groups, sort_keys=True)), "gd": repr(m.graph_decision),
            "notes": _h(json.dumps(cr.notes))}


def _cluster_own(graph, options, state):
    """``cluster_graph`` as the CLI calls it: the graph handed over (``own``, where the code has it)."""
    import inspect

    from jitsim.passes.pipeline import cluster_graph

    if "own" in inspect.signature(cluster_graph).parameters:
        return cluster_graph(graph, options, state, own=True)
    return cluster_graph(graph, options, state)


def compare(a_path: str, b_path: str) -> int:
    a, b = json.loads(Path(a_path).read_text()), json.loads(Path(b_path).read_text())
    bad = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
    print(f"{len(a)} vs {len(b)} entries; {len(bad)} differ")
    for k in bad[:30]:
        print("  differs:", k)
    return 1 if bad else 0


def make(out: str, quick: bool, extra: Path | None) -> None:
    from jitsim.crosscheck.corpus import Corpus
    from jitsim.crosscheck.fidelity import dump_dir
    from jitsim.defs import BEFORE_CLONE_DUMP, BEFORE_MARK_DUMP
    from jitsim.graph.io import load, read_graphdef, to_text
    from jitsim.graph.model import Graph
    from jitsim.options import options_for
    from jitsim.passes.mark_for_compilation import ProcessState
    from jitsim.passes.pipeline import BUILD_XLA_OPS, cluster_graph, run_pipeline

    got: dict[str, dict] = {}
    corpus = Corpus()
    runs = [r.name for r in corpus.runs()]
    for run in runs[::4] if quick else runs:
        spec = corpus.run(run)
        where = dump_dir(corpus.extract(run))
        for stage in (BEFORE_CLONE_DUMP, BEFORE_MARK_DUMP):
            options = options_for(spec.flags, input_stage=stage, session=spec.session())
            state = ProcessState.starting(options)
            cli_state = ProcessState.starting(options)
            for rec in where.records():
                if stage not in rec.files:
                    continue
                f = where.dumps / rec.files[stage]
                key = f"{run}/{rec.files[stage]}"
                try:
                    got[key] = digest(cluster_graph(Graph(read_graphdef(f), source=str(f), validate=False), options,
                                                     state))
                except Exception as e:  # noqa: BLE001 (a refusal is part of the behaviour compared)
                    got[key] = {"error": f"{type(e).__name__}: {e}"}
                # the command line's route: the file load()ed and checked, the graph handed over
                try:
                    got[f"{key}/cli"] = digest(_cluster_own(load(f, validate=True, check_ops=True), options, cli_state))
                except Exception as e:  # noqa: BLE001
                    got[f"{key}/cli"] = {"error": f"{type(e).__name__}: {e}"}
    for f in sorted(extra.glob("*.pbtxt")) if extra else ():
        if quick and f.stat().st_size > 20_000_000:
            continue
        options = options_for(FLAGS)
        got[f"extra/{f.name}"] = digest(cluster_graph(Graph(read_graphdef(f), source=str(f), validate=False), options))
        pr = run_pipeline(Graph(read_graphdef(f), source=str(f), validate=False), replace(options, until=BUILD_XLA_OPS))
        got[f"extra/{f.name}/build_xla_ops"] = {"graph": _h(to_text(pr.to_graphdef()))}
    Path(out).write_text(json.dumps(got, indent=0, sort_keys=True))
    print(f"{len(got)} graphs; {sum('error' in v for v in got.values())} refused; wrote {out}")


def main(argv: list[str]) -> int:
    if argv[:1] == ["cmp"] and len(argv) == 3:
        return compare(argv[1], argv[2])
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    extra = Path(argv[argv.index("--extra") + 1]) if "--extra" in argv else None
    make(argv[0], "--quick" in argv, extra)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
