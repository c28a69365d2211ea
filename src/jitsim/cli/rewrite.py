"""``jitsim rewrite``: the graph after a stage, as TF dumps it.
"""

from __future__ import annotations

import sys
from pathlib import Path

from jitsim.defs import STAGES

from jitsim.cli.arguments import _sim_args, _tensorboard_arg
from jitsim.cli.common import BUILD_XLA_OPS, _flags_choice, _options, _simulate, _single_graph
from jitsim.cli.output import _emit_json, _write_tensorboard, _wrote
from jitsim.words import count


def cmd_rewrite(args) -> int:
    """The graph after ``--until``, taken by the same route and options as every simulating
    command (:func:`_simulate`: a raw GraphDef or SavedModel gets TF's pass input first)."""
    from jitsim.graph.io import save

    _single_graph(args.graph)
    choice = _flags_choice(args, args.tf_xla_flags)
    c = _simulate(args, _options(args, choice, device=args.device, until=args.until, explain_cycles=False))
    save(c.pipeline.serialized_pieces(), args.output)
    o = c.options
    n_clusters = len(c.pipeline.cluster.clusters)
    if c.route is not None:
        print(c.route.line, file=sys.stderr)
    _wrote(args.output, f"TF's {c.pipeline.stage_dump} dump of the graph, {count(n_clusters, 'cluster')}")
    _write_tensorboard(args, lambda: [(Path(args.graph).name, c.to_graphdef())])
    if args.format == "json":
        _emit_json({"schema": "jitsim.rewrite/1", "input": str(args.graph), "output": str(args.output),
                    "until": args.until, "stage_dump": c.pipeline.stage_dump,
                    "tf_version": {"version": o.tf_version, "reason": o.tf_version_reason},
                    "tf_xla_flags": choice.flags.text, "flags_origin": choice.origin,
                    "clusters": {k: list(m) for k, m in c.pipeline.cluster.clusters.items()}}, args)
    else:
        print(f"{Path(args.graph).name}: simulated TensorFlow {o.tf_version} ({o.tf_version_reason}) up to "
              f"{args.until} with {choice.describe()}; {count(n_clusters, 'cluster')}")
    return 0


def add_parser(sub) -> None:
    """The ``rewrite`` command's parser."""
    rw = sub.add_parser("rewrite", help="simulate TF's JIT pipeline up to a stage and write the graph as TF dumps it")
    rw.add_argument("graph", help="one graph (as for explain): TF dump file (best: "
                    "before_clone_constants_for_better_clustering_N.pbtxt), .pbtxt/.pb GraphDef, SavedModel "
                    "directory, .keras file or .py program; taken by the same route as cluster")
    rw.add_argument("--until", default=BUILD_XLA_OPS, choices=STAGES,
                    help="last stage to simulate (default build-xla-ops); the output matches TF's dump of that "
                         "stage: mark_for_compilation, encapsulate_subgraphs_before, encapsulate_subgraphs_after, "
                         "build_xla_ops")
    rw.add_argument("-o", "--output", required=True, help="output GraphDef (.pbtxt text, else binary)")
    _sim_args(rw)
    _tensorboard_arg(rw)
    rw.set_defaults(func=cmd_rewrite)
