"""``jitsim crosscheck``: ground truth from real TensorFlow (harvest, index, verify, matrix, compare, fuzz).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

from jitsim.defs import MARK_DUMP
from jitsim.errors import JitsimError
from jitsim.flags import parse_tf_xla_flags

from jitsim.cli.arguments import _call_args, _input_shape_arg, _no_defaults_arg, _ray_args, _sim_args
from jitsim.cli.common import _campaign_progress, _check_ray_args, _flags_choice, _options, _positive_int
from jitsim.cli.output import (_console, _emit_json, _middle_cut, _progress_done, _progress_line, _write_out, _wrote,
                               terminal_safe)


def _print_safe(*parts, **kwargs) -> None:
    """print, control characters escaped: what a campaign prints comes from its records and the
    worker's results, data that can hold anything (docs/campaigns.md)."""
    print(*(terminal_safe(str(x)) for x in parts), **kwargs)


def cmd_verify(args) -> int:
    from jitsim.crosscheck.fidelity import recorded_flags, verify_dir
    from jitsim.frontend.resolve import check_route_options, target_kind

    _check_ray_args(args)
    if len(args.dir) > 1 or args.ray is not None or args.output is not None:
        return _verify_campaign(args)
    path = Path(args.dir[0])
    if target_kind(path) != "dump-dir":
        raise JitsimError("verify compares jitsim with TF's own dumps: give a harvest or TF dump directory "
                          "(`jitsim crosscheck harvest` makes one from a model)", path)
    # the shared options mean what they mean for `jitsim cluster DIR`; those stating another
    # target's call are refused the same way
    check_route_options("dump-dir", signature=args.signature, fetch=args.fetch, feed=args.feed,
                        input_shapes=args.input_shape, captured=getattr(args, "captured", None))
    choice = _flags_choice(args, args.tf_xla_flags, recorded=recorded_flags(path))

    def progress(i, n):
        _progress_line(f"simulating graph {i + 1}/{n}")

    try:
        result = verify_dir(path, _options(args, choice, device=args.device, explain_cycles=False), progress=progress)
    finally:
        _progress_done()
    version = {"version": result.tf_version, "reason": result.tf_version_reason}
    if args.format == "json":
        _emit_json({**result.to_dict(), "schema": "jitsim.verify/1", "tf_xla_flags": choice.flags.text,
                    "flags_origin": choice.origin, "tf_version": version}, args)
    else:
        con = _console()
        con.print(f"jitsim simulating TensorFlow {result.tf_version} ({result.tf_version_reason}) with "
                  f"{choice.describe()}", markup=False)
        _print_compare(con, result, args.limit)
    return 0 if result.all_same_names else 1



def _verify_campaign(args) -> int:
    """``crosscheck verify DIR...`` with several directories, ``--ray`` or ``-o``: a harvest per
    item (jitsim.crosscheck.campaigns), one line per directory and the totals."""
    from jitsim.crosscheck.campaigns import verify_campaign
    from jitsim.crosscheck.fidelity import recorded_flags
    from jitsim.frontend.resolve import check_route_options, target_kind

    dirs = [Path(d) for d in args.dir]
    for d in dirs:
        if target_kind(d) != "dump-dir":
            raise JitsimError("verify compares jitsim with TF's own dumps: give a harvest or TF dump directory "
                              "(`jitsim crosscheck harvest` makes one from a model)", d)
    check_route_options("dump-dir", signature=args.signature, fetch=args.fetch, feed=args.feed,
                        input_shapes=args.input_shape, captured=getattr(args, "captured", None))
    choices = [_flags_choice(args, args.tf_xla_flags, recorded=recorded_flags(d)) for d in dirs]
    options = [_options(args, c, device=args.device, explain_cycles=False) for c in choices]
    identity = {"command": "verify", "dirs": [str(d.absolute()) for d in dirs],
                "tf_xla_flags": [c.flags.text for c in choices], "device": args.device,
                "tf_version": getattr(args, "tf_version", None)}

    def log(msg):
        _progress_done()
        _print_safe(f"jitsim: {msg}", file=sys.stderr, flush=True)

    try:
        rows, failed = verify_campaign(dirs, options, Path(args.output) if args.output else None, ray=args.ray,
                                       workers=args.workers, identity=identity,
                                       progress=_campaign_progress("verify", "harvests"), log=log)
    finally:
        _progress_done()
    if args.output:
        _wrote(args.output, f"campaign/ (a record per harvest, {len(rows)} verified)")
    graphs = sum(v["graphs"] for _, _, v in rows)
    same = sum(v["identical"] for _, _, v in rows)
    names = sum(v["same_names"] for _, _, v in rows)
    if args.format == "json":
        _emit_json({"schema": "jitsim.verify-campaign/1",
                    "harvests": [{"dir": str(d), "graphs": v["graphs"], "identical": v["identical"],
                                  "same_names": v["same_names"], "tf_version": v["simulated_tf_version"],
                                  "result": v["result"]} for d, _, v in rows],
                    "failed": [{"dir": str(d), "reason": r} for d, r in failed],
                    "graphs": graphs, "identical": same, "same_names": names}, args)
    else:
        for d, _, v in rows:
            _print_safe(f"{d}: TF {v['simulated_tf_version']}: {v['identical']}/{v['graphs']} graphs identical, "
                  f"{v['same_names']}/{v['graphs']} same names")
        for d, r in failed:
            _print_safe(f"{d}: not verified: {r}")
        _print_safe(f"{same}/{graphs} graphs identical, {names}/{graphs} same names; {len(rows)}/{len(dirs)} harvests "
              "verified")
    return 0 if names == graphs and not failed else 1



def _print_compare(con, result, limit: int) -> None:
    """A clustering comparison (verify, compare) as a rich table, one row per graph, then the
    differences of each graph that differs."""
    from rich.table import Table

    from jitsim.crosscheck.compare import corpus_summary

    if len(result.rows) == 1 and result.rows[0].diff is not None:
        con.print(result.rows[0].diff.format_text(limit=limit), markup=False, highlight=False)
    else:
        summ = corpus_summary(result.rows)
        t = Table(title=None if result.truth_stage == MARK_DUMP else
                  f"TF's clusters read from {result.truth_stage}", title_justify="left")
        for col, just in (("graph", "left"), ("nodes", "right"), ("TF cl", "right"), ("jitsim cl", "right"),
                          ("agree", "right"), ("partition", "left"), ("names", "left"), ("first difference", "left")):
            t.add_column(col, justify=just, overflow="fold")
        t.columns[0].no_wrap = True
        for d in summ["rows"]:
            # "graph 3 (before_clone_..._3.pbtxt)" -> "graph 3": the file is in the details and the JSON
            m = re.fullmatch(r"(graph \S+) \(.*\)", d["name"])
            d["name"] = m.group(1) if m else _middle_cut(d["name"])
            if d["error"] is not None:
                t.add_row(d["name"], "-", "-", "-", "-", "ERROR", "-", "error: " + d["error"].splitlines()[0])
                continue
            t.add_row(d["name"], str(d["n_nodes"]), str(d["n_truth_clusters"]), str(d["n_predicted_clusters"]),
                      f"{100 * d['agreement']:.1f}%", "yes" if d["identical"] else "no",
                      "yes" if d["same_names"] else "no", d["first_difference"] or "")
        con.print(t)
        con.print(f"{summ['identical']}/{summ['graphs']} graphs identical, {100 * summ['agreement']:.1f}% nodes "
                  f"agree; {summ['same_names']}/{summ['graphs']} same names"
                  + (f"; {summ['errors']} error{'s' if summ['errors'] != 1 else ''}" if summ["errors"] else ""),
                  markup=False)
        for r in result.rows:
            if r.diff is not None and not r.diff.identical:
                con.print(f"\n== {r.name}\n{r.diff.format_text(limit=limit)}", markup=False, highlight=False)
    for n in result.notes:
        con.print(f"note: {n}", markup=False)



def cmd_harvest(args) -> int:
    from jitsim.tfprocess.harvest import DEFAULT_FLAGS, harvest

    base = "" if args.no_default_flags else os.environ.get("TF_XLA_FLAGS", DEFAULT_FLAGS)
    flags = f"{base} {args.tf_xla_flags or ''}".strip()  # on top of the base, later flags win (one rule)
    parse_tf_xla_flags(flags)  # TF would abort on a bad flag: say so now, not after starting TF
    _check_ray_args(args)
    if len(args.target) > 1 or args.ray is not None:
        return _harvest_campaign(args, flags)
    args.target = args.target[0]

    def progress(elapsed, ndumps):
        _progress_line(f"running TensorFlow on {args.target}: {elapsed:5.1f} s, {ndumps} dump files")

    call = None
    if getattr(args, "captured", None):
        raise JitsimError("--captured states an exported function's call for jitsim's TF route; crosscheck harvest runs "
                          "a GraphDef as a session call", args.target)
    if args.fetch or args.feed:  # a TF1 graph's sess.run, as jitsim cluster --fetch makes it
        from jitsim.tfprocess.targets import target_kind
        from jitsim.frontend.session_call import is_session_graph, session_call
        from jitsim.graph.io import load

        if target_kind(Path(args.target)) != "graphdef":
            raise JitsimError("--fetch/--feed apply to a GraphDef or MetaGraphDef file", args.target)
        graph = load(args.target, validate=True, check_ops=True)
        if not is_session_graph(graph):
            raise JitsimError("--fetch/--feed name a session call, but this graph has _Arg/_Retval nodes",
                              args.target)
        call = session_call(graph, args.fetch, args.feed).to_dict()
    shapes = ()
    if args.input_shape:  # a .keras model's call, as jitsim cluster --input-shape makes it
        from jitsim.tfprocess.targets import target_kind
        from jitsim.tfprocess.keras_call import normalize_input_shapes

        try:
            shapes = normalize_input_shapes(args.input_shape)
        except JitsimError as e:
            e.path = args.target
            raise
        if target_kind(Path(args.target)) != "keras":
            raise JitsimError("--input-shape states a Keras model's call: it applies to a .keras file", args.target)
    try:
        index = harvest(args.target, args.output, flags=flags, signature=args.signature,
                        python=args.python, timeout=args.timeout, progress=progress,
                        overwrite=args.overwrite, call=call, input_shapes=shapes)
    finally:
        _progress_done()
    _wrote(args.output, f"TF's dumps of {len(index['graphs'])} graphs, log.txt, index.json")
    if args.format == "json":
        _emit_json(index, args)
        return 0
    _print_index(index, args.output)
    return 0



def _harvest_campaign(args, flags: str) -> int:
    """``crosscheck harvest TARGET...`` with several targets or ``--ray``: a target per item
    (jitsim.crosscheck.campaigns), each harvest in ``OUT/<name>/``."""
    from jitsim.crosscheck.campaigns import harvest_campaign

    if args.fetch or args.feed or args.input_shape:
        raise JitsimError("--fetch/--feed/--input-shape state one target's call: harvest that target alone, "
                          "without --ray", args.target[0])

    def log(msg):
        _progress_done()
        _print_safe(f"jitsim: {msg}", file=sys.stderr, flush=True)

    targets = [Path(t) for t in args.target]
    try:
        rows, failed = harvest_campaign(targets, Path(args.output), flags=flags, signature=args.signature,
                                        python=args.python, timeout=args.timeout, ray=args.ray,
                                        workers=args.workers, progress=_campaign_progress("harvest", "targets"),
                                        log=log)
    finally:
        _progress_done()
    _wrote(args.output, f"{len(rows)} harvests (a directory per target), campaign/")
    if args.format == "json":
        _emit_json({"schema": "jitsim.harvest-campaign/1",
                    "harvests": [{"target": str(t), "dir": str(d), "graphs": v["graphs"],
                                  "tf_version": v["tf_version"]} for t, d, v in rows],
                    "failed": [{"target": str(t), "reason": r} for t, r in failed]}, args)
    else:
        for t, d, v in rows:
            _print_safe(f"{t}: {v['graphs']} graphs under TF {v['tf_version']} -> {d}")
        for t, r in failed:
            _print_safe(f"{t}: not harvested: {r}")
        _print_safe(f"{len(rows)}/{len(targets)} targets harvested")
    return 1 if failed else 0



def cmd_matrix(args) -> int:
    """``crosscheck matrix``: a corpus under several TF releases, jitsim verified on each."""
    from jitsim.crosscheck.campaigns import matrix_campaign
    from jitsim.crosscheck.corpus import Corpus

    _check_ray_args(args)
    corpus = Corpus(args.corpus)
    runs = corpus.runs()
    if args.only:
        unknown = sorted(set(args.only) - {r.name for r in runs})
        if unknown:
            raise JitsimError(f"no run named {unknown[0]!r} in the manifest", corpus.root / "manifest.toml")
        runs = [r for r in runs if r.name in args.only]
    if args.limit is not None:
        runs = runs[:args.limit]
    for py in args.python:
        if not (Path(py).exists() or shutil.which(py)):
            raise JitsimError("no such Python", py)

    def log(msg):
        _progress_done()
        _print_safe(f"jitsim: {msg}", file=sys.stderr, flush=True)

    try:
        table = matrix_campaign(runs, corpus.root, args.python, Path(args.output), timeout=args.timeout,
                                ray=args.ray, workers=args.workers, progress=_campaign_progress("matrix", "runs"),
                                log=log)
    finally:
        _progress_done()
    _wrote(args.output, f"campaign/ (a record per run and release, {len(runs) * len(args.python)} in all)")
    out, ok = [], True
    for py, (release, rows) in table.items():
        done = [(r, v) for r, v, _ in rows if v is not None]
        graphs = sum(v["graphs"] for _, v in done)
        same = sum(v["identical"] for _, v in done)
        names = sum(v["same_names"] for _, v in done)
        ok = ok and same == graphs and len(done) == len(rows)
        out.append({"python": py, "tf_version": release, "runs": len(rows), "harvested": len(done),
                    "graphs": graphs, "identical": same, "same_names": names,
                    "simulated": sorted({v["simulated_tf_version"] for _, v in done}),
                    "differing": [{"run": r.name, "graphs": v["graphs"], "identical": v["identical"]}
                                  for r, v in done if v["identical"] != v["graphs"]],
                    "failed": [{"run": r.name, "reason": why} for r, v, why in rows if v is None]})
    if args.format == "json":
        _emit_json({"schema": "jitsim.version-matrix/1", "corpus": str(corpus.root), "releases": out}, args)
    else:
        for rel in out:
            _print_safe(f"TF {rel['tf_version']}: {rel['identical']}/{rel['graphs']} graphs identical, "
                  f"{rel['same_names']}/{rel['graphs']} same names, {rel['harvested']}/{rel['runs']} runs harvested "
                  f"(jitsim simulated {', '.join(rel['simulated']) or '-'}; {rel['python']})")
            for d in rel["differing"]:
                _print_safe(f"  {d['run']}: {d['identical']}/{d['graphs']} graphs identical")
            for f in rel["failed"]:
                _print_safe(f"  {f['run']}: not harvested/verified: {f['reason']}")
    return 0 if ok else 1



def _print_index(index: dict, where) -> None:
    from rich.table import Table

    con = _console()
    tot = index["totals"]
    flags = index.get("tf_xla_flags")
    con.print(f"{where}: TF {index.get('tf_version') or 'version not recorded'}, "
              + (f'TF_XLA_FLAGS="{flags}"' if flags is not None else "TF_XLA_FLAGS not recorded"), markup=False)
    con.print(f"{tot['graphs']} graphs, {tot['graphs_with_candidates']} with candidates, "
              f"{tot['graphs_with_clusters']} with clusters, {tot['clusters']} clusters")
    t = Table()
    for col, just in (("graph", "right"), ("input dump", "left"), ("nodes", "right"),
                      ("clusters", "left"), ("TF pass time", "right")):
        t.add_column(col, justify=just, no_wrap=col != "clusters")
    for g in index["graphs"]:
        clusters = ", ".join(f"{c}({n})" for c, n in g["clusters"].items()) or "-"
        us = g.get("mark_pass_us")
        t.add_row(str(g["id"]), _middle_cut(g["files"].get(g.get("input_stage") or "", "-")), str(g["nodes"]),
                  clusters, "-" if us is None else f"{us / 1000:.2f} ms")
    con.print(t)



def cmd_index(args) -> int:
    from jitsim.graph.dumps import INDEX_SCHEMA, dump_dir, index_dump_dir
    from jitsim.tfprocess.harvest import totals

    from jitsim.files.input import read_json, read_text

    where = dump_dir(args.dumps)
    if args.log:  # a regular file only, bounded: /dev/zero or a FIFO is refused, never a hang
        log_text = read_text(args.log, what="TF's log (a text file)")
    else:  # a harvest's own log, as verify and cluster read it
        log_text = where.log_text()
    graphs = index_dump_dir(where.dumps, log_text)
    recorded = {}
    if os.path.lexists(where.root / "index.json"):  # a harvest: what it recorded about its run
        recorded = read_json(where.root / "index.json", what="a harvest's index.json")
        recorded = recorded if isinstance(recorded, dict) else {}
    index = {"schema": INDEX_SCHEMA, "target": recorded.get("target"), "kind": recorded.get("kind", "dump_dir"),
             "tf_version": recorded.get("tf_version"), "tf_xla_flags": recorded.get("tf_xla_flags"),
             "graphs": graphs, "totals": totals(graphs)}
    if args.output:
        from jitsim.graph.io import write_atomic

        write_atomic(Path(args.output), (json.dumps(index, indent=1) + "\n").encode())
        _wrote(args.output, f"the index of {len(graphs)} graph{'' if len(graphs) == 1 else 's'}, "
                            f"schema {INDEX_SCHEMA}")
    if args.format == "json":
        _emit_json(index, args)
    else:
        _print_index(index, args.dumps)
    return 0



def _graph_pairs(predicted: Path, truth: Path, stage: str):
    """(label, predicted file, truth file) for files, or per graph for two dump directories."""
    from jitsim.graph.dumps import dump_dir

    if not predicted.is_dir() and not truth.is_dir():
        return [(truth.name, predicted, truth)]

    def files(root: Path):
        where = dump_dir(root)
        return [(r.id, where.dumps / r.files[stage]) for r in where.records() if stage in r.files]

    if not (predicted.is_dir() and truth.is_dir()):
        raise JitsimError("compare a file with a file, or a directory with a directory", predicted)
    a, b = files(predicted), files(truth)
    if len(a) != len(b):
        raise JitsimError(f"cannot pair graphs: {len(a)} {stage} dumps vs {len(b)}", predicted)
    return [(f"graph {ib} ({tb.name})", pa, tb) for (_, pa), (ib, tb) in zip(a, b)]



def cmd_compare_graphs(args) -> int:
    from jitsim.crosscheck.graphdiff import diff_graphdefs
    from jitsim.graph.io import read_graphdef

    results = []
    for label, p, t in _graph_pairs(Path(args.predicted), Path(args.truth), args.stage):
        results.append((label, diff_graphdefs(read_graphdef(p), read_graphdef(t), ignore_attrs=args.ignore_attr or ())))
    if args.format == "json":
        _emit_json({"schema": "jitsim.graphdiff/1", "graphs": [{"name": n, **d.to_dict()} for n, d in results]}, args)
    else:
        for n, d in results:
            _write_out(f"== {n}: " + d.format_text(limit=args.limit) + "\n")
        same = sum(d.identical for _, d in results)
        _write_out(f"{same}/{len(results)} graphs identical\n")
    return 0 if all(d.identical for _, d in results) else 1



def cmd_compare(args) -> int:
    from jitsim.crosscheck.scoring import compare_paths

    if args.graph:
        return cmd_compare_graphs(args)

    result = compare_paths(args.predicted, args.truth, stage=args.stage)
    if args.format == "json":
        _emit_json(result.to_dict(), args)
    else:
        _print_compare(_console(), result, args.limit)
    ok = result.all_same_names if args.names else result.all_identical
    return 0 if ok else 1



def cmd_fuzz(args) -> int:
    from jitsim.crosscheck.fuzz.campaign import campaign, write_summary

    def progress(done, total, bad):
        _progress_line(f"fuzz: {done}/{total} examples compared with TF, {bad} disagreeing")

    def log(msg):
        _progress_done()
        _print_safe(msg, file=sys.stderr, flush=True)

    evaluator = None
    _check_ray_args(args)
    if args.ray is not None:  # one batch per Ray task, OUT/campaign/ the record (resumes)
        from jitsim.crosscheck.campaigns import FuzzCampaign

        if args.examples < 1:
            raise JitsimError("--examples must be at least 1")
        identity = {"command": "fuzz", "examples": args.examples, "seed": args.seed, "profile": args.profile,
                    "batch_size": args.batch_size, "tf_reruns": args.tf_reruns}
        evaluator = FuzzCampaign(Path(args.output).absolute(), identity, args.batch_size, args.timeout,
                                 args.tf_reruns, ray=args.ray, workers=args.workers,
                                 progress=_campaign_progress("fuzz", "batches"), log=log)
    try:
        res = campaign(args.examples, args.seed, out=args.output, batch_size=args.batch_size, profile=args.profile,
                       shrink_budget_s=args.shrink_seconds, do_shrink=not args.no_shrink, max_shrink=args.max_shrink,
                       keep_work=args.keep_work, tf_reruns=args.tf_reruns,
                       timeout=args.timeout, progress=progress, log=log, evaluator=evaluator)
    finally:
        _progress_done()
    cmd = (f"jitsim crosscheck fuzz --examples {args.examples} --seed {args.seed} --profile {args.profile} "
           f"--tf-reruns {args.tf_reruns}")
    summary = write_summary(res, Path(args.output) / "summary.json", seed=args.seed, command=cmd)
    if evaluator is not None:
        _wrote(args.output, f"summary.json, {len(res.reproducers)} reproducers, campaign/ (a record per batch, "
                            f"{evaluator.resumed} from an earlier run)")
        for label, reason in evaluator.failed:
            _print_safe(f"jitsim: {label}: failed twice: {reason}", file=sys.stderr)
    else:
        _wrote(args.output, f"summary.json, {len(res.reproducers)} reproducers")
    if args.format == "json":
        _emit_json(summary, args)
        return 1 if res.disagreements else 0
    unstable = (f"{res.tf_unstable} examples differ only where TF differed from itself when rerun"
                + (f" (evidence: {Path(args.output) / 'tf-unstable'})" if res.tf_unstable_dirs else "")
                if args.tf_reruns > 0 else "TF reruns off")
    print(f"{res.graphs} graphs compared in {res.wall_s:.0f} s; TF raised in {res.tf_errors} examples, "
          f"crashed in {res.crashes}; {res.tf_nondeterminism} known TF nondeterminism; {unstable} "
          "(docs/fuzzing.md)")
    for path in res.reproducers:
        print(f"reproducer: {path}")
    print(res.final_line())
    return 1 if res.disagreements or (evaluator is not None and evaluator.failed) else 0


def add_parser(sub) -> None:
    """The ``crosscheck`` command's parser and its subcommands'."""
    cc = sub.add_parser("crosscheck", help="ground truth from real TensorFlow: harvest, index, compare")
    ccs = cc.add_subparsers(dest="crosscheck_command", metavar="SUBCOMMAND")
    ccs.required = True
    for add in (_add_harvest, _add_index, _add_verify, _add_matrix, _add_compare, _add_fuzz):
        add(ccs)


def _add_harvest(ccs) -> None:
    h = ccs.add_parser("harvest", help="run a TF program / GraphDef / SavedModel under real TF and collect its JIT dumps")
    h.add_argument("target", nargs="+", help="a .py program, a .pb/.pbtxt GraphDef, or a SavedModel directory; "
                   "several: a campaign (OUT/<name>/ per target, docs/campaigns.md)")
    h.add_argument("-o", "--output", required=True, help="output directory (dumps/, log.txt, index.json; with "
                   "several targets or --ray, a harvest directory per target and campaign/)")
    h.add_argument("--tf-xla-flags", help="TF_XLA_FLAGS for the run, added on top of the base ($TF_XLA_FLAGS, else "
                   "'--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_clustering_debug'); later flags win, as "
                   "in TF; --no-default-flags starts from nothing")
    _no_defaults_arg(h)
    h.add_argument("--signature", help="SavedModel signature to call (default: serving_default)")
    _call_args(h)
    _input_shape_arg(h)
    h.add_argument("--python", help="Python interpreter with TensorFlow (default: this one)")
    h.add_argument("--timeout", type=float, default=600.0, help="seconds before the run is killed (default 600)")
    h.add_argument("--overwrite", action="store_true", help="replace a non-empty output directory")
    _ray_args(h, "one target per task")
    h.set_defaults(func=cmd_harvest)


def _add_index(ccs) -> None:
    i = ccs.add_parser("index", help="pair the dump files of a TF_DUMP_GRAPH_PREFIX directory graph by graph")
    i.add_argument("dumps", help="a harvest directory, its dumps/, or a TF_DUMP_GRAPH_PREFIX directory")
    i.add_argument("--log", help="TF's stderr from the same run (gives exact write order and pass times; default: "
                   "the directory's log.txt)")
    i.add_argument("-o", "--output", help="also write the index as JSON to this file")
    i.set_defaults(func=cmd_index)


def _add_verify(ccs) -> None:
    v = ccs.add_parser("verify", help="run jitsim on every graph of a harvest and compare with TF's own clusters")
    v.add_argument("dir", nargs="+", help="harvest or dump directory; several: one line each and the totals "
                   "(docs/campaigns.md)")
    _sim_args(v)
    v.add_argument("--limit", type=int, default=30, help="differing nodes listed per graph")
    v.add_argument("-o", "--output", help="campaign directory: a record per harvest verified (re-running resumes)")
    _ray_args(v, "one harvest directory per task")
    v.set_defaults(func=cmd_verify)


def _add_matrix(ccs) -> None:
    mx = ccs.add_parser("matrix", help="the version matrix: a corpus's programs harvested under several TF releases "
                                       "and jitsim verified on each (exit 1 unless every graph is identical)")
    mx.add_argument("--python", action="append", required=True, metavar="PYTHON",
                    help="a Python with the TF release to run (repeat: one per release, e.g. "
                         "/tmp/tfvenvs/2.16/bin/python)")
    mx.add_argument("--corpus", help="fixtures directory with manifest.toml (default: this checkout's fixtures/)")
    mx.add_argument("--only", nargs="+", metavar="RUN", help="these manifest runs only")
    mx.add_argument("--limit", type=_positive_int, metavar="N", help="the first N runs of the manifest")
    mx.add_argument("-o", "--output", required=True, help="campaign directory: a record per run and release")
    mx.add_argument("--timeout", type=float, default=900.0, help="seconds per TF run (default 900)")
    _ray_args(mx, "one run and release per task")
    mx.set_defaults(func=cmd_matrix)


def _add_compare(ccs) -> None:
    c = ccs.add_parser("compare", help="compare two clusterings as partitions (exit 0 identical, 1 different)")
    c.add_argument("predicted", help="annotated graph file, or a harvest/dump directory")
    c.add_argument("truth", help="annotated graph file (e.g. mark_for_compilation_N.pbtxt), or a harvest/dump directory")
    c.add_argument("--stage", default=MARK_DUMP,
                   help="for directories: which dump stage's _XlaCluster marks to compare (default mark_for_compilation)")
    c.add_argument("--names", action="store_true", help="also require identical cluster names for exit 0")
    c.add_argument("--graph", action="store_true",
                   help="compare whole graphs node by node and function by function (rewritten stages), "
                        "not just the clustering")
    c.add_argument("--ignore-attr", action="append", metavar="ATTR", help="with --graph: an attr to ignore (repeatable)")
    c.add_argument("--limit", type=int, default=50, help="differing nodes listed per graph (default 50)")
    c.set_defaults(func=cmd_compare)


def _add_fuzz(ccs) -> None:
    fz = ccs.add_parser("fuzz", help="differential fuzzing: generated programs under real TF vs jitsim, stage by "
                                     "stage (exit 1 on any disagreement)")
    fz.add_argument("--examples", type=int, default=100, help="programs to generate (default 100)")
    fz.add_argument("--seed", type=int, default=0, help="Hypothesis seed (default 0)")
    fz.add_argument("-o", "--output", default="fuzz-out", help="reproducers and summary.json (default fuzz-out/)")
    fz.add_argument("--profile", choices=("full", "large", "ci", "no-grappler"), default="full",
                    help="full: any flags per batch; large: full with bigger programs; ci: two fixed "
                         "configurations; no-grappler: any flags, Grappler off (TF clusters graphs it never "
                         "rebuilt; use --tf-reruns 2) (default full)")
    fz.add_argument("--batch-size", type=int, default=40, help="programs per TF process (default 40)")
    fz.add_argument("--shrink-seconds", type=float, default=180.0, help="time to shrink each disagreement (default 180)")
    fz.add_argument("--no-shrink", action="store_true", help="write reproducers without shrinking them")
    fz.add_argument("--max-shrink", type=int, default=10, help="disagreements to shrink at most, one of each "
                                                              "kind first (default 10)")
    fz.add_argument("--tf-reruns", type=int, default=1, metavar="K",
                    help="rounds of TF reruns of the programs that differ (reversed batch, then each alone) to "
                         "tell TF's own nondeterminism from disagreements; 0: off (default 1)")
    fz.add_argument("--keep-work", action="store_true", help="keep the TF runs (output/jitsim-fuzz-*)")
    fz.add_argument("--timeout", type=float, default=600.0, help="seconds per TF process (default 600)")
    _ray_args(fz, "one batch per task")
    fz.set_defaults(func=cmd_fuzz)
