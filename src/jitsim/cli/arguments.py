"""Argument definitions shared by the commands: each option that means the same thing in every
command is defined once here (``--tf-xla-flags`` and the simulation's options, ``--tf``, the
call's options, ``--format``/``--timings``...).
"""

from __future__ import annotations

from jitsim.cli.common import FLAGS_RULE, _INPUT_STAGES, _JIT_LEVELS, _positive_int


def _tensorboard_arg(p) -> None:
    """``--tensorboard DIR``: the one definition every command that makes a clustered graph uses."""
    p.add_argument("--tensorboard", metavar="DIR",
                   help="also write the clustered graph as a TensorBoard event file in DIR "
                        "(events.out.tfevents.<seconds>.<host>.jitsim; `tensorboard --logdir DIR`, Graphs, "
                        "color by XLA cluster); several graphs: one run (subdirectory) each")



def _add_session_args(p) -> None:
    p.add_argument("--session-jit-level", choices=sorted(_JIT_LEVELS), default="default",
                   help="the ConfigProto's global_jit_level (tf.config.optimizer.set_jit / TF1 session config); "
                        "TF_XLA_FLAGS' --tf_xla_auto_jit overrides it, as in TF")
    p.add_argument("--session-cpu-global-jit", action="store_true",
                   help="the ConfigProto's optimizer_options.cpu_global_jit (TF1 sessions)")



def _sim_args(p, *, flags: bool = True, device: bool = True, releases: bool = False) -> None:
    """The options of one simulation and its input route, defined once for every command that
    simulates (cluster, rewrite, explain, whatif, diff, render, report, crosscheck verify), so
    that each takes the same inputs by the same routes with options meaning the same thing.
    ``flags``/``device``: whatif's --tf-xla-flags and --device state its variant, so it adds
    its own (and --baseline-... for these). ``releases``: --tf-version may be given twice (diff)."""
    if flags:
        p.add_argument("--tf-xla-flags", help="TF_XLA_FLAGS " + FLAGS_RULE)
    if device:
        p.add_argument("--device", help="place nodes without a device on cpu or gpu (raw GraphDefs)")
    p.add_argument("--input-stage", choices=_INPUT_STAGES,
                   help="what a graph file is, taken as it is: no TF capture, no simulated rewrites (default: decided from its content)")
    p.add_argument("--signature", help="SavedModel signature (default: serving_default)")
    _tf_arg(p)
    _call_args(p)
    _tf_version_arg(p, repeat=releases)
    _input_shape_arg(p)
    _no_defaults_arg(p)
    p.add_argument("--cluster-number-start", type=int, default=0,
                   help="first cluster number: TF's process-wide counter when this graph ran (0 or more)")
    _add_session_args(p)
    _op_defs_arg(p)



def _no_defaults_arg(p) -> None:
    p.add_argument("--no-default-flags", action="store_true",
                   help="start the TF_XLA_FLAGS from nothing (TF's own defaults) instead of the base flags; the "
                        "--*tf-xla-flags options then give all of them")



def _tf_arg(p) -> None:
    p.add_argument("--tf", choices=("auto", "always", "never"), default="auto",
                   help="for a SavedModel, .keras file, raw GraphDef or program: get TF's exact pass input from a "
                        "dry TensorFlow run (TF builds the call's graph and runs none of the model; a .py program "
                        "runs, sandboxed; cached), or predict without TensorFlow, running nothing (approximate); "
                        "auto: with TensorFlow when it is importable (default auto)")



def _call_args(p) -> None:
    p.add_argument("--fetch", action="append", default=[], metavar="NAME",
                   help="a TF1 graph's (GraphDef/MetaGraphDef) call, as sess.run takes names: NODE:N fetches a "
                        "tensor, NODE runs an op (repeatable). Without it jitsim assumes the call by a documented "
                        "rule (the train_op collection, else the sinks) and labels the result approximate")
    p.add_argument("--feed", action="append", default=[], metavar="NAME[=SHAPE]",
                   help="a tensor the call feeds (repeatable; NAME means NAME:0), e.g. --feed x=100,784; every "
                        "placeholder the call needs is fed anyway, the shape only lets TensorFlow run it")
    p.add_argument("--captured", action="append", default=[], metavar="CONST",
                   help="a tf.function's exported graph (cf.graph.as_graph_def()): a Const that was an eager tensor "
                        "the function captured, an argument of the live call (repeatable); --captured none: it "
                        "captured none. Until stated the result is approximate")



def _tf_version_arg(p, repeat: bool = False) -> None:
    from jitsim.registry import DEFAULT_TF_VERSION, SUPPORTED_TF_VERSIONS

    p.add_argument("--tf-version", metavar="X.Y", action="append" if repeat else "store",
                   help=f"TensorFlow release to simulate ({SUPPORTED_TF_VERSIONS[0]} to {SUPPORTED_TF_VERSIONS[-1]}); "
                        "default: the TF a capture or harvest ran, else the release that wrote the graph (its GraphDef "
                        f"producer; one two releases write is checked under both), else {DEFAULT_TF_VERSION}"
                        + ("; given twice, the two releases to compare" if repeat else ""))



def _input_shape_arg(p) -> None:
    p.add_argument("--input-shape", action="append", default=[], metavar="NAME=SHAPE",
                   help="a .keras model's call: the concrete shape of its input NAME (repeatable), e.g. "
                        "--input-shape input_ids=2,128. Unknown dims not given are set to 2, and the route line "
                        "says so: TF clusters the graph of that call")



def _op_defs_arg(p) -> None:
    p.add_argument("--op-defs", action="append", default=[], metavar="FILE",
                   help="OpDefs of ops TF core does not register (a custom-op library's), as written by `jitsim "
                        "registry export` (or an OpList .pbtxt/.pb); repeatable. Without it, jitsim infers them "
                        "from the graph")



def _whatif_args(p, prefix: str = "") -> None:
    p.add_argument(f"--{prefix}exclude-op", action="append", default=[], metavar="OP",
                   help="what-if: treat OP as uncompilable (repeatable; code WHATIF_EXCLUDED)")
    p.add_argument(f"--{prefix}force-compilable", action="append", default=[], metavar="OP",
                   help="what-if: treat OP as compilable, skipping every compilability check (repeatable)")



def _ray_args(p, what: str) -> None:
    """``--ray [ADDRESS]`` and ``--workers N``: the same options, with the same meaning, on every
    command that runs a campaign (crosscheck fuzz, harvest, verify, matrix)."""
    p.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS",
                   help=f"run {what} as Ray tasks, a record per item in OUT/campaign/ (re-running resumes): "
                        "'local' (the default value) starts Ray on this machine, an address ('auto', "
                        "'ray://HOST:10001', 'HOST:PORT') joins a running cluster; needs pip install "
                        "'jitsim[ray]' (docs/campaigns.md)")
    p.add_argument("--workers", type=_positive_int, metavar="N",
                   help="with --ray: items running at once (default: the cluster's CPUs)")



def _output_args(p) -> None:
    """``--format`` and ``--timings``: the same options, with the same meaning, in every command
    (docs/json.md)."""
    p.add_argument("--format", choices=("text", "json"), default="text",
                   help="output format: text for people, or JSON on stdout with a versioned \"schema\" "
                        "(docs/json.md; byte-identical from run to run) (default: text)")
    p.add_argument("--timings", action="store_true",
                   help="with --format json: also give how long jitsim's own steps took (\"seconds\" fields; they "
                        "differ from run to run, so JSON leaves them out by default)")



_FLAG_VALUE_OPTIONS = ("--tf-xla-flags", "--baseline-tf-xla-flags", "--a-tf-xla-flags", "--b-tf-xla-flags")



def _join_flag_values(argv: list[str]) -> list[str]:
    """``--tf-xla-flags "--tf_xla_..."``: argparse would take the value for an option."""
    out, i = [], 0
    while i < len(argv):
        a = argv[i]
        if a in _FLAG_VALUE_OPTIONS and i + 1 < len(argv):
            out.append(f"{a}={argv[i + 1]}")
            i += 2
            continue
        out.append(a)
        i += 1
    return out
