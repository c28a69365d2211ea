"""What every simulating command shares: the flags rule (:func:`_flags_choice`), the options
built once from the arguments (:func:`_options`), the call the arguments state (:func:`_call`),
and the simulation through the front door (:func:`_simulate`, :mod:`jitsim.simulation`).
"""

from __future__ import annotations

import argparse
import os
import warnings
from pathlib import Path

from jitsim.defs import BEFORE_CLONE_DUMP, BEFORE_MARK_DUMP, DEVICES, STAGES
from jitsim.errors import JitsimError, JitsimWarning
from jitsim.options import Call, Options, SessionConfig, auto_clustering_off, resolve_flags

from jitsim.cli.output import _progress_done, _progress_line


MARK, DECLUSTER, _, BUILD_XLA_OPS = STAGES  # the stages a command stops after (--until names them all)



FLAGS_RULE = ("added on top of the base flags (a harvest's recorded flags, else $TF_XLA_FLAGS, else jitsim's "
              "default --tf_xla_auto_jit=2 --tf_xla_cpu_global_jit); later flags win, as in TF. "
              "--no-default-flags: start from nothing (TF's own defaults: auto-clustering off)")



def _flags_choice(args, *parts, recorded=None, warn: bool = True):
    """The one rule for every command's flag options: ``parts`` (the command's --*-tf-xla-flags,
    in order) on top of the base flags, later flags winning, as in TF; ``--no-default-flags``
    starts from nothing. Warns when the result leaves auto-clustering off."""
    given = " ".join(x for x in parts if x)
    choice = resolve_flags(given or None, recorded, additive=True,
                           no_defaults=getattr(args, "no_default_flags", False))
    if warn:
        _warn_if_off(choice, args)
    return choice



def _warn_if_off(choice, args) -> None:
    level = _JIT_LEVELS.get(getattr(args, "session_jit_level", "default"), 0)
    if auto_clustering_off(choice.flags, level):
        warnings.warn(JitsimWarning(f'TF_XLA_FLAGS="{choice.flags.text}" ({choice.origin}) leave auto-clustering off '
                                    "(no --tf_xla_auto_jit=1|2|fusible): only nodes that ask for XLA themselves are "
                                    "compiled"))



def _check_device(value, option: str = "--device") -> None:
    if value is None or value in DEVICES or value.startswith("/"):
        if value is not None and value.startswith("/"):
            from jitsim.graph.device_names import parse_device_name

            if parse_device_name(value) is None:
                raise JitsimError(f"{option} {value!r}: not a device name (cpu, gpu, or a full name such as "
                                  "/job:localhost/replica:0/task:0/device:CPU:0)")
        return
    raise JitsimError(f"{option} {value!r}: use cpu or gpu (or a full device name such as "
                      "/job:localhost/replica:0/task:0/device:GPU:0)")



def _check_common(args) -> None:
    """Option values argparse cannot check by itself, refused before any work."""
    for opt in ("tf_version", "a_tf_version", "b_tf_version"):
        value = getattr(args, opt, None)
        for v in (value if isinstance(value, list) else [value] if value is not None else []):
            from jitsim.registry.versions import check_tf_version

            try:
                check_tf_version(v)
            except JitsimError as e:
                raise JitsimError(f"--{opt.replace('_', '-')}: {e}") from None
    for opt in ("device", "baseline_device", "a_device", "b_device"):
        _check_device(getattr(args, opt, None), "--" + opt.replace("_", "-"))
    n = getattr(args, "cluster_number_start", None)
    if n is not None and n < 0:
        raise JitsimError(f"--cluster-number-start {n}: TF's cluster counter starts at 0 and only grows; give 0 or more")
    for opt in ("top", "limit", "max_nodes"):
        v = getattr(args, opt, None)
        if v is not None and v < 0:
            raise JitsimError(f"--{opt.replace('_', '-')} {v}: give 0 or more")



_INPUT_STAGES = (BEFORE_CLONE_DUMP, BEFORE_MARK_DUMP, "graphdef")


_INPUT_STAGES = (BEFORE_CLONE_DUMP, BEFORE_MARK_DUMP, "graphdef")
_JIT_LEVELS = {"default": 0, "off": -1, "on": 1, "1": 1, "2": 2}



def _session(args) -> SessionConfig:
    return SessionConfig(_JIT_LEVELS[args.session_jit_level], args.session_cpu_global_jit)



def _options(args, choice, *, device=None, exclude=(), force=(), until=DECLUSTER, explain_cycles=None) -> Options:
    """The one place a command's arguments become the :class:`~jitsim.options.Options` of a
    simulation (built once, then handed unchanged to every pass): ``choice`` (the flags, from
    :func:`_flags_choice`), the session's ConfigProto, the input stage, the cluster counter's
    start and the requested TF release from ``args``; the device, what-if knobs, last stage and
    cycle explanations as the command asks."""
    return Options(choice.flags, choice.origin, device, tuple(exclude), tuple(force), _session(args),
                   getattr(args, "input_stage", None), getattr(args, "cluster_number_start", 0) or 0, until,
                   getattr(args, "tf_version", None), explain_cycles=explain_cycles)



def _simulate(args, options: Options, graph=None, *, move_devices=False):
    """``graph`` (default: ``args.graph``) simulated with ``options`` (:func:`_options`), by the
    route the command's arguments state (signature, TF capture, session call, Keras call)."""
    from jitsim.explain.clustering import cluster

    shapes, signature = args.input_shape, args.signature
    if getattr(args, "other", None):  # diff of two targets: a Keras call or a signature applies to its own kind
        from jitsim.frontend.resolve import target_kind

        kind = target_kind(graph or args.graph)
        shapes = shapes if kind == "keras" else None
        signature = signature if kind == "saved_model" else None
    _progress_line(f"simulating {Path(str(graph or args.graph)).name}")
    try:
        return cluster(graph or args.graph, options=options, signature=signature, move_devices=move_devices,
                       tf=args.tf, fetch=args.fetch, feed=args.feed, input_shapes=shapes, captured=args.captured)
    finally:
        _progress_done()



def _call(args):
    """The call of the target the command's arguments state (:class:`~jitsim.options.Call`)."""
    captured = getattr(args, "captured", None)
    return Call(getattr(args, "signature", None), tuple(getattr(args, "fetch", ()) or ()),
                tuple(getattr(args, "feed", ()) or ()), getattr(args, "input_shape", None), None,
                tuple(captured) if captured else None)



def _simulation_progress(kind, *values) -> None:
    """:func:`jitsim.simulation.simulate`'s progress, as the command's progress line."""
    if kind == "capture":
        elapsed, ndumps = values
        _progress_line(f"TensorFlow running the call (fuel 0): {elapsed:.0f} s, {ndumps} dump files")
    elif kind == "graph":
        i, n = values
        _progress_line(f"simulating graph {i + 1}/{n}")



def _single_graph(path: str) -> None:
    p = Path(path)
    from jitsim.graph.io import is_saved_model_dir

    if p.is_dir() and not is_saved_model_dir(p):
        raise JitsimError("takes one graph file; for a harvest, name one of its dumps "
                          "(best: dumps/before_clone_constants_for_better_clustering_N.pbtxt; "
                          "`jitsim crosscheck index` lists them)", p)



def _simulate_given(args):
    """One graph simulated with the command's options and what-if knobs (explain, render, report)."""
    _single_graph(args.graph)
    choice = _flags_choice(args, args.tf_xla_flags)
    c = _simulate(args, _options(args, choice, device=args.device, exclude=args.exclude_op,
                                 force=args.force_compilable))
    _check_ops_exist(c, args.exclude_op, "--exclude-op")
    _check_ops_exist(c, args.force_compilable, "--force-compilable")
    return c



def _check_ops_exist(c, ops, option: str) -> None:
    """A what-if op no node has changes nothing: say so, with the op names it may have meant."""
    import difflib

    have = {rec.op for rec in c.nodes.values()}
    if all(op in have for op in ops):
        return
    given = c.input_graph()
    if given is not None:  # ops inside library functions count too (what-if knobs apply inside calls)
        have |= {nd.op for f in given.graphdef.library.function for nd in f.node_def}
    have = sorted(have)
    for op in ops:
        if op in have:
            continue
        close = [h for h in have if h.lower() == op.lower()] or difflib.get_close_matches(op, have, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(close)}?" if close else ""
        raise JitsimError(f"{option} {op}: no node of this graph has op {op!r}, so it would change nothing{hint}",
                          c.source if getattr(c, "source", None) else None)



def _simulation_json(c, args) -> dict:
    """What every JSON of one simulated graph starts with (render, report): the input as given,
    the release, the flags, the route."""
    o = c.options
    return {"input": str(args.graph), "tf_version": {"version": o.tf_version, "reason": o.tf_version_reason},
            "tf_xla_flags": o.flags_text, "flags_origin": o.flags_origin,
            "route": None if c.route is None else c.route.to_dict()}



def _campaign_progress(what: str, unit: str):
    """The progress line of a campaign (jitsim.crosscheck.campaigns): counts and ETA."""

    def progress(done, total, failed, eta, resumed):
        left = "" if eta is None else f", ETA {int(eta) // 60}m{int(eta) % 60:02d}s"
        _progress_line(f"{what}: {done}/{total} {unit} done ({resumed} from an earlier run), {failed} failed{left}")

    return progress



def _check_ray_args(args) -> None:
    if args.workers is not None and args.ray is None:
        raise JitsimError("--workers N applies to a campaign on Ray: add --ray [ADDRESS]")



def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return v



def _op_libraries(paths) -> list:
    if not paths:
        return []
    from jitsim.graph.custom_ops import read_op_library

    return [read_op_library(p) for p in paths]



def _is_dir(path) -> bool:
    """``Path.is_dir`` without its exceptions (a name too long is no directory)."""
    import stat

    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False
