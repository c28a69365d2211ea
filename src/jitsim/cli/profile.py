"""``jitsim profile``: a workload under real TF, XLA off and on.
"""

from __future__ import annotations

import os

from jitsim.errors import JitsimError

from jitsim.cli.arguments import _input_shape_arg, _no_defaults_arg
from jitsim.cli.output import _emit_json, _progress_done, _progress_line, _wrote


def cmd_profile(args) -> int:
    import importlib.util

    from jitsim.tfprocess.harvest import DEFAULT_FLAGS
    from jitsim.profile.command import profile

    missing = [m for m in ("tensorflow", "xprof") if importlib.util.find_spec(m) is None]
    if missing:  # before any run: profile runs TF, then converts its profile with xprof
        raise JitsimError(f"profile needs {' and '.join(missing)}, not installed here: pip install 'jitsim[profile]' "
                          "(from a clone: pip install -e '.[profile]')")

    base = "" if args.no_default_flags else os.environ.get("TF_XLA_FLAGS", DEFAULT_FLAGS)
    flags = f"{base} {args.tf_xla_flags or ''}".strip()  # the XLA-on run's flags (one rule, as harvest)
    try:
        s = profile(args.target, args.output, steps=args.steps, warmup=args.warmup, flags=flags, device=args.device,
                    signature=args.signature, timeout=args.timeout, overwrite=args.overwrite,
                    progress=_progress_line, input_shapes=args.input_shape)
    finally:
        _progress_done()
    _wrote(args.output, "summary.json, index.html, traces, timelines, hlo/")
    if args.format == "json":
        _emit_json(s, args)
        return 0
    st = s["step_time"]

    def ms(x):
        return "-" if x is None else f"{x * 1000:.3f} ms"

    ratio = "-" if s["step_time_ratio"] is None else f"{s['step_time_ratio']:.2f}"
    print(f"{args.output}: {s['steps']} steps after {s['warmup']} warm-up, device {s['device']}")
    print(f"step time  XLA off: median {ms(st['off']['median_s'])} (IQR {ms(st['off']['iqr_s'])}), "
          f"{s['tf_ops_per_step']['off']} TF ops/step")
    print(f"step time  XLA on:  median {ms(st['on']['median_s'])} (IQR {ms(st['on']['iqr_s'])}), "
          f"{s['xla_launches_per_step']['on']} XLA launches + {s['tf_ops_per_step']['on']} TF ops/step")
    print(f"step_time_ratio (off/on) {ratio}; XLA compile {ms(s['compile_s'])} once "
          f"({s['compilations']} HLO module{'' if s['compilations'] == 1 else 's'} compiled)")
    for c in s["clusters"]:
        print(f"  {c['cluster']}: {c['nodes']} TF nodes, predicted {c['predicted_cluster'] or '-'} ({c['prediction']}), "
              f"HLO {c['hlo_module'] or '-'}, {c['fusions'] if c['fusions'] is not None else '-'} fusions, "
              f"{c['time_per_step_us']:.1f} us/step")
    for n in s["notes"]:
        print(f"  note: {n}")
    return 0


def add_parser(sub) -> None:
    """The ``profile`` command's parser."""
    pf = sub.add_parser("profile", help="run a workload under real TF with XLA auto-clustering off and on: traces, "
                                        "step times, XLA's HLO, linked to jitsim's predicted clusters")
    pf.add_argument("target", help="a .py program defining jitsim_step(), a .pb/.pbtxt GraphDef, or a SavedModel "
                                   "directory (as for crosscheck harvest)")
    pf.add_argument("-o", "--output", required=True, help="output directory (summary.json, index.html, traces, hlo/)")
    pf.add_argument("--steps", type=int, default=20, help="timed steps after the warm-up (default 20)")
    pf.add_argument("--warmup", type=int, default=5, help="warm-up steps, XLA compiles there (default 5)")
    pf.add_argument("--tf-xla-flags", help="TF_XLA_FLAGS of the XLA-on run, added on top of the base ($TF_XLA_FLAGS, "
                                           "else jitsim's default); the XLA-off run adds --tf_xla_auto_jit=-1")
    _no_defaults_arg(pf)
    pf.add_argument("--device", choices=("cpu", "gpu"), default="cpu",
                    help="run the steps on /CPU:0 (default) or /GPU:0 (fails when TF sees no GPU)")
    pf.add_argument("--signature", help="SavedModel signature to call (default: serving_default)")
    _input_shape_arg(pf)
    pf.add_argument("--timeout", type=float, default=600.0, help="seconds before each TF run is killed (default 600)")
    pf.add_argument("--overwrite", action="store_true", help="replace a non-empty output directory")
    pf.set_defaults(func=cmd_profile)
