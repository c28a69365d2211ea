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
from pathlib import Path

from jitsim.crosscheck.compare import CorpusRow, compare_partitions
from jitsim.crosscheck.dumps import group_dumps
from jitsim.crosscheck.scoring import CompareResult, labels_of_file
from jitsim.errors import JitsimError
from jitsim.graph.input import read_json
from jitsim.graph.io import dump_log_text, read_graphdef
from jitsim.graph.model import Graph
from jitsim.passes.flags import XlaFlags
from jitsim.passes.mark_for_compilation import ProcessState, SessionConfig
from jitsim.passes.pipeline import BEFORE_CLONE, BEFORE_MARK, STAGE_DUMPS, cluster_graph, run_pipeline
from jitsim.registry.custom_ops import harvest_op_library
from jitsim.registry.versions import choose_tf_version, producer_of, recorded_tf_version


def recorded_flags(root: Path) -> str | None:
    idx = root / "index.json"
    if os.path.lexists(idx):
        doc = read_json(idx, what="a harvest's index.json")
        return doc.get("tf_xla_flags") if isinstance(doc, dict) else None
    return None


_DETERMINISTIC = re.compile(r"^(.*_)\d+_(\d+)$")


def _without_fingerprint(labels: dict) -> dict:
    """``cluster_<fp>_<n>`` -> ``cluster_#_<n>``: TF's fingerprint covers the graph's own
    function library, which no dump records, so only the per-graph counter is comparable."""
    return {k: (None if v is None else _DETERMINISTIC.sub(r"\1#_\2", v)) for k, v in labels.items()}


def verify_dir(root: Path | str, flags: XlaFlags, *, input_stage: str = BEFORE_CLONE, progress=None,
               session: SessionConfig | None = None, tf_version: str | None = None) -> CompareResult:
    """Score jitsim against TF on every graph of a harvest directory (see module doc).
    ``tf_version``: the TF release to simulate; default: the one that wrote the dumps (the
    first graph's GraphDef producer), else the harvest's recorded TF, else 2.21."""
    root = Path(root)
    lib = harvest_op_library(root)  # ops of libraries the run loaded (tensorflow_text...)
    libraries = (lib,) if lib is not None else ()
    dumps = root / "dumps" if (root / "dumps").is_dir() else root
    records = group_dumps(dumps, dump_log_text(root))
    if not records:
        raise JitsimError("no TF dump files found", dumps)
    if input_stage not in (BEFORE_CLONE, BEFORE_MARK):
        raise JitsimError(f"input stage must be {BEFORE_CLONE} or {BEFORE_MARK}", root)
    state = ProcessState()
    rows = []
    usable = [r for r in records if input_stage in r.files]
    if not usable:
        raise JitsimError(f"no {input_stage} dumps here (harvest with jitsim, or set TF_CPP_VMODULE)", dumps)
    version = reason = None
    for i, rec in enumerate(usable):
        if progress:
            progress(i, len(usable))
        f = dumps / rec.files[input_stage]
        name = f"graph {rec.id} ({rec.files[input_stage]})"
        try:
            g = Graph(read_graphdef(f), source=str(f), validate=False)
            if version is None:  # one TF process: one release for the whole run
                version, reason = choose_tf_version(tf_version, producer_of(g), recorded_tf_version(root))
            res = cluster_graph(g, flags, state=state, input_stage=input_stage, session=session,
                                op_libraries=libraries, tf_version=version)
        except JitsimError as e:
            rows.append(CorpusRow(name=name, diff=None, error=str(e)))
            continue
        mark = rec.files.get("mark_for_compilation")
        predicted = res.labels()
        if mark is not None:
            truth = labels_of_file(dumps / mark)
        else:
            truth = {n: None for n in predicted}
        if flags.deterministic_cluster_names:
            predicted, truth = _without_fingerprint(predicted), _without_fingerprint(truth)
        rows.append(CorpusRow(name=name, diff=compare_partitions(predicted, truth)))
    if version is None:
        version, reason = choose_tf_version(tf_version, None, recorded_tf_version(root))
    return CompareResult(rows, version, reason)


def pass_input_graphdef(dumps: Path, rec):
    """TF's before_clone dump with the pass's function library (the dump carries the graph's own
    pruned library; TF's later dumps of the same graph carry the full one)."""
    gd = read_graphdef(dumps / rec.files[BEFORE_CLONE])
    later = rec.files.get("encapsulate_subgraphs_before")
    if later is not None:
        have = {fn.signature.name for fn in gd.library.function}
        for fn in read_graphdef(dumps / later).library.function:
            if fn.signature.name not in have:
                gd.library.function.add().CopyFrom(fn)
    return gd


def verify_pipeline_dir(root: Path | str, flags: XlaFlags, *, until: str, session: SessionConfig | None = None,
                        ignore_attrs=(), progress=None, tf_version: str | None = None) -> list[tuple[str, object]]:
    """Run jitsim's whole pipeline up to ``until`` on every graph of a harvest, starting
    from TF's ``before_clone...`` dump with one simulated process, and diff the result with
    TF's dump of that stage. Returns ``[(graph label, GraphDiff)]``. ``tf_version``: as for
    :func:`verify_dir`."""
    from jitsim.crosscheck.graphdiff import diff_graphdefs

    root = Path(root)
    lib = harvest_op_library(root)  # ops of libraries the run loaded (tensorflow_text...)
    libraries = (lib,) if lib is not None else ()
    dumps = root / "dumps" if (root / "dumps").is_dir() else root
    records = [r for r in group_dumps(dumps, dump_log_text(root))
               if BEFORE_CLONE in r.files]
    state = ProcessState()
    out = []
    truth_stage = STAGE_DUMPS[until]
    for i, rec in enumerate(records):
        if progress:
            progress(i, len(records))
        f = dumps / rec.files[BEFORE_CLONE]
        gd = pass_input_graphdef(dumps, rec)
        g = Graph(gd, source=str(f), validate=False)
        if i == 0:  # one TF process: one release for the whole run
            tf_version, _ = choose_tf_version(tf_version, producer_of(g), recorded_tf_version(root))
        res = run_pipeline(g, flags, until=until, state=state, session=session, input_stage=BEFORE_CLONE,
                           op_libraries=libraries, tf_version=tf_version)
        if truth_stage not in rec.files:
            continue
        truth = read_graphdef(dumps / rec.files[truth_stage])
        out.append((f"graph {rec.id} ({rec.files[truth_stage]})",
                    diff_graphdefs(res.to_graphdef(), truth, ignore_attrs=ignore_attrs)))
    return out
