#!/bin/sh
# Regenerates the dumps in this directory with real TF 2.21 (run from anywhere).
# For each flag set: harvest prog.py, keep the user function's dumps around BuildXlaOps.
set -e
here=$(cd "$(dirname "$0")" && pwd)
base="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_clustering_debug"
run() {  # name, extra flags
    tmp=$(mktemp -d)
    jitsim crosscheck harvest "$here/prog.py" -o "$tmp/h" --tf-xla-flags "$base $2" > /dev/null
    python - "$tmp/h" "$here" "$1" "$base $2" <<'PY'
import json, shutil, sys
h, here, name, flags = sys.argv[1:]
graphs = [g for g in json.load(open(f"{h}/index.json"))["graphs"] if g.get("clusters")]
assert len(graphs) == 1, graphs
for stage in ("encapsulate_subgraphs_after", "build_xla_ops"):
    shutil.copy(f"{h}/dumps/{graphs[0]['files'][stage]}", f"{here}/{name}.{stage}.pbtxt")
open(f"{here}/{name}.flags", "w").write(flags + "\n")
PY
    rm -rf "$tmp"
}
run strict "--tf_xla_enable_lazy_compilation=false"
run lazy_debug "--tf_xla_print_cluster_outputs --tf_xla_check_cluster_input_numerics --tf_xla_check_cluster_output_numerics"
run strict_debug "--tf_xla_enable_lazy_compilation=false --tf_xla_print_cluster_outputs --tf_xla_check_cluster_input_numerics --tf_xla_check_cluster_output_numerics"
run lazy ""
