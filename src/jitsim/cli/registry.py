"""``jitsim registry export``: OpDefs of ops TF core does not register.
"""

from __future__ import annotations

import json
from pathlib import Path

from jitsim.errors import JitsimError

from jitsim.cli.output import _emit_json, _wrote


def cmd_registry_export(args) -> int:
    from jitsim.graph.io import write_atomic
    from jitsim.registry.regen import export_op_library

    doc = export_op_library(args.modules, args.load_library, all_ops=args.all)
    if not doc["ops"]:  # an empty library is of no use to --op-defs (which refuses it): say so now
        what = (f"{', '.join(args.modules or [])} {', '.join(args.load_library or [])}".strip()
                or "no --import or --load-library given")
        raise JitsimError(f"nothing to export: no op beyond TF core's is registered ({what}); name the Python "
                          "module or .so that registers the custom ops (--import MODULE, --load-library LIB.so), or "
                          "--all for every op", args.output)
    write_atomic(Path(args.output), (json.dumps(doc, indent=1) + "\n").encode())
    names = f" ({', '.join(doc['op_names'][:8])}{', ...' if doc['ops'] > 8 else ''})" if doc["op_names"] else ""
    _wrote(args.output, f"{doc['ops']} ops{names}, "
                        f"{doc['xla_kernel_count']} XLA kernels, {doc['kernel_count']} CPU/GPU kernels from "
                        f"TensorFlow {doc['tf_version']}")
    if args.format == "json":
        _emit_json({"schema": "jitsim.registry-export/1", "output": str(args.output), "file_schema": doc["schema"],
                    "tf_version": doc["tf_version"], "modules": doc["modules"], "libraries": doc["libraries"],
                    "ops": doc["ops"], "op_names": doc["op_names"], "xla_kernel_count": doc["xla_kernel_count"],
                    "kernel_count": doc["kernel_count"]}, args)
    return 0


def add_parser(sub) -> None:
    """The ``registry`` command's parser."""
    rg = sub.add_parser("registry", help="jitsim's copy of TF's op and kernel registries")
    rgs = rg.add_subparsers(dest="registry_command", metavar="SUBCOMMAND")
    rgs.required = True
    rx = rgs.add_parser("export", help="write the OpDefs (and kernels) of ops TF core does not register, from a TF "
                        "process with your op libraries loaded (needs TensorFlow); use the file with --op-defs")
    rx.add_argument("--import", dest="modules", action="append", default=[], metavar="MODULE",
                    help="Python module that registers ops when imported, e.g. tensorflow_text (repeatable)")
    rx.add_argument("--load-library", action="append", default=[], metavar="SO",
                    help="custom-op shared library to load with tf.load_op_library (repeatable)")
    rx.add_argument("--all", action="store_true", help="export every registered op, TF core's included")
    rx.add_argument("-o", "--output", required=True, help="output file (JSON, schema jitsim.op-library/1)")
    rx.set_defaults(func=cmd_registry_export)
