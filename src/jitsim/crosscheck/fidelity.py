"""jitsim's fidelity on a harvest: simulate every graph, compare with TF's own marks.

For a harvest (or raw dump) directory, each graph's input dump (``before_clone...`` or
``before_mark...``) is run through jitsim with the flags TF ran with, all graphs in TF's
order sharing one simulated process (fuel, cluster counter), and the resulting
``_XlaCluster`` labels are compared with TF's ``mark_for_compilation`` dump. A graph
for which TF wrote no mark dump had no candidate: TF clustered nothing in it.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from pathlib import Path

from jitsim.crosscheck.compare import CorpusRow, compare_partitions
from jitsim.graph.dumps import DUMP_ENV_HINT, dump_dir
from jitsim.crosscheck.scoring import CompareResult, labels_of_file, labels_of_graphdef
from jitsim.errors import JitsimError
from jitsim.files.input import read_json
from jitsim.graph.io import read_graphdef
from jitsim.graph.model import Graph
from jitsim.flags import parse_tf_xla_flags
from jitsim.options import Options
from jitsim.passes.mark_for_compilation import ProcessState
from jitsim.passes.pipeline import BEFORE_CLONE, BEFORE_MARK, DECLUSTER, STAGE_DUMPS, cluster_graph, run_pipeline
from jitsim.graph.custom_ops import harvest_op_library
from jitsim.registry.versions import choose_tf_version, producer_of, recorded_tf_version
from jitsim.defs import ENCAPSULATE_BEFORE_DUMP, MARK_DUMP


def recorded_flags(root: Path) -> str | None:
    """The TF_XLA_FLAGS a harvest or capture ran with (its ``index.json``), for any form of
    its directory (:func:`jitsim.graph.dumps.dump_dir`); None for a plain dump directory."""
    idx = dump_dir(root).root / "index.json"
    if os.path.lexists(idx):
        doc = read_json(idx, what="a harvest's index.json")
        v = doc.get("tf_xla_flags") if isinstance(doc, dict) else None
        return v if isinstance(v, str) else None
    return None


_DETERMINISTIC = re.compile(r"^(.*_)\d+_(\d+)$")


def _without_fingerprint(labels: dict) -> dict:
    """``cluster_<fp>_<n>`` -> ``cluster_#_<n>``: TF's fingerprint covers the graph's own
    function library, which no dump records, so only the per-graph counter is comparable."""
    return {k: (None if v is None else _DETERMINISTIC.sub(r"\1#_\2", v)) for k, v in labels.items()}


MARK = MARK_DUMP
AFTER_DECLUSTER = ENCAPSULATE_BEFORE_DUMP


def truth_stage(records, root: Path) -> tuple[str, list[str]]:
    """Which of TF's dumps holds TF's clusters for :func:`verify_dir`, and a note when it is not
    ``mark_for_compilation``. TF writes that dump only with ``--tf_xla_clustering_debug`` and
    only for a graph with a compilation candidate: a harvest (which records that flag) or a
    directory holding one mark dump is compared as usual, a graph without one clustered
    nothing. A directory with none was most likely written without the flag: the clusters TF
    kept at ``encapsulate_subgraphs_before`` (after partial declustering) are compared instead
    where TF wrote them, else there is nothing to verify against (one-line error)."""
    if any(MARK in r.files for r in records):
        return MARK, []
    recorded = recorded_flags(root)
    try:
        debug = recorded is not None and parse_tf_xla_flags(recorded).clustering_debug
    except JitsimError:
        debug = False
    if debug:  # TF ran with the flag: no mark dump means no graph had a candidate
        return MARK, []
    missing = ("TF wrote no mark_for_compilation dump (TF_XLA_FLAGS lacked --tf_xla_clustering_debug, or no graph "
               "had a compilation candidate)")
    if any(AFTER_DECLUSTER in r.files for r in records):
        return AFTER_DECLUSTER, [f"{missing}: mark_for_compilation was not checked; compared the clusters TF kept at "
                                 f"{AFTER_DECLUSTER} (after partial declustering) instead"]
    raise JitsimError(f"{missing}, nor any {AFTER_DECLUSTER} dump: nothing to verify against; rerun TF with "
                      "--tf_xla_clustering_debug added to TF_XLA_FLAGS (or use `jitsim crosscheck harvest`)", root)


def verify_dir(root: Path | str, options: Options, *, progress=None) -> CompareResult:
    """Score jitsim against TF on every graph of a harvest directory (see module doc) with
    ``options`` (:class:`~jitsim.options.Options`). ``options.input_stage``: TF's dump jitsim
    starts from (default: each graph's best, ``before_clone...`` else ``before_mark...``, as
    ``jitsim cluster`` takes a dump directory). ``options.tf_version``: the TF release to
    simulate; default (None): the one that wrote the dumps (the first graph's GraphDef
    producer), else the harvest's recorded TF, else 2.21. The truth is
    TF's ``mark_for_compilation`` dump, else (:func:`truth_stage`) what TF wrote after partial
    declustering, said in :attr:`CompareResult.notes`."""
    where = dump_dir(root)
    root, dumps = where.root, where.dumps
    lib = harvest_op_library(root)  # ops of libraries the run loaded (tensorflow_text...)
    libraries = (lib,) if lib is not None else ()
    input_stage, tf_version, flags = options.input_stage, options.tf_version, options.flags
    records = where.records()
    if not records:
        raise JitsimError(f"holds no TF dump files; TF writes them with {DUMP_ENV_HINT}", dumps)
    if input_stage not in (None, BEFORE_CLONE, BEFORE_MARK):
        raise JitsimError(f"--input-stage {input_stage}: verify starts from TF's dumps, {BEFORE_CLONE} or "
                          f"{BEFORE_MARK}", root)
    state = ProcessState.starting(options)
    rows = []
    usable = [(r, input_stage or r.input_stage) for r in records if (input_stage or r.input_stage) in r.files]
    if not usable:
        what = input_stage or f"clustering input ({BEFORE_CLONE} or {BEFORE_MARK})"
        raise JitsimError(f"no {what} dumps here; TF writes them with {DUMP_ENV_HINT} (or use `jitsim crosscheck "
                          "harvest`)", dumps)
    truth_at, notes = truth_stage(records, root)
    version = reason = None
    for i, (rec, stage) in enumerate(usable):
        if progress:
            progress(i, len(usable))
        f = dumps / rec.files[stage]
        name = f"graph {rec.id} ({rec.files[stage]})"
        try:
            g = Graph(read_graphdef(f), source=str(f), validate=False)
            if version is None:  # one TF process: one release for the whole run
                version, reason = choose_tf_version(tf_version, producer_of(g), recorded_tf_version(root))
            opts = replace(options, input_stage=stage, op_libraries=libraries, tf_version=version)
            if truth_at == MARK:
                predicted = cluster_graph(g, opts, state).labels()
            else:
                predicted = labels_of_graphdef(run_pipeline(g, replace(opts, until=DECLUSTER), state).to_graphdef())
        except JitsimError as e:
            rows.append(CorpusRow(name=name, diff=None, error=str(e)))
            continue
        truth_file = rec.files.get(truth_at)
        if truth_file is not None:
            truth = labels_of_file(dumps / truth_file)
        else:  # TF wrote no mark dump for this graph: it had no candidate, nothing clustered
            truth = {n: None for n in predicted}
        if flags.deterministic_cluster_names:
            predicted, truth = _without_fingerprint(predicted), _without_fingerprint(truth)
        rows.append(CorpusRow(name=name, diff=compare_partitions(predicted, truth)))
    if version is None:
        version, reason = choose_tf_version(tf_version, None, recorded_tf_version(root))
    return CompareResult(rows, version, reason, truth_stage=truth_at, notes=notes)


def pass_input_graphdef(dumps: Path, rec):
    """TF's before_clone dump with the pass's function library (the dump carries the graph's own
    pruned library; TF's later dumps of the same graph carry the full one)."""
    gd = read_graphdef(dumps / rec.files[BEFORE_CLONE])
    later = rec.files.get(ENCAPSULATE_BEFORE_DUMP)
    if later is not None:
        have = {fn.signature.name for fn in gd.library.function}
        for fn in read_graphdef(dumps / later).library.function:
            if fn.signature.name not in have:
                gd.library.function.add().CopyFrom(fn)
    return gd


def verify_pipeline_dir(root: Path | str, options: Options, *, ignore_attrs=(),
                        progress=None) -> list[tuple[str, object]]:
    """Run jitsim's whole pipeline up to ``options.until`` on every graph of a harvest, starting
    from TF's ``before_clone...`` dump with one simulated process, and diff the result with
    TF's dump of that stage. Returns ``[(graph label, GraphDiff)]``. ``options.tf_version``: as
    for :func:`verify_dir`."""
    from jitsim.crosscheck.graphdiff import diff_graphdefs

    where = dump_dir(root)
    root, dumps = where.root, where.dumps
    lib = harvest_op_library(root)  # ops of libraries the run loaded (tensorflow_text...)
    libraries = (lib,) if lib is not None else ()
    records = [r for r in where.records() if BEFORE_CLONE in r.files]
    state = ProcessState.starting(options)
    tf_version = options.tf_version
    out = []
    truth_stage = STAGE_DUMPS[options.until]
    for i, rec in enumerate(records):
        if progress:
            progress(i, len(records))
        f = dumps / rec.files[BEFORE_CLONE]
        gd = pass_input_graphdef(dumps, rec)
        g = Graph(gd, source=str(f), validate=False)
        if i == 0:  # one TF process: one release for the whole run
            tf_version, _ = choose_tf_version(tf_version, producer_of(g), recorded_tf_version(root))
        res = run_pipeline(g, replace(options, input_stage=BEFORE_CLONE, op_libraries=libraries,
                                      tf_version=tf_version), state)
        if truth_stage not in rec.files:
            continue
        truth = read_graphdef(dumps / rec.files[truth_stage])
        out.append((f"graph {rec.id} ({rec.files[truth_stage]})",
                    diff_graphdefs(res.to_graphdef(), truth, ignore_attrs=ignore_attrs)))
    return out
