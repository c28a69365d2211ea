"""Regenerate deadness.json: what TF 2.21's deadness analysis says about the loop graphs of
deadness_analysis_test.cc's TESTs (tests/test_tf_pass_tests_other.py builds them).

Each graph runs once in a TF1 session (Grappler off, auto-jit on for the CPU) with
``TF_CPP_VMODULE=deadness_analysis=2``; mark-for-compilation runs TF's DeadnessAnalysis (optimistic
mode) and logs ``<tensor> -> <predicate>`` for every tensor. The session fails afterwards (the
hand-made loops are not meant to run); the log lines are what we keep, for the control outputs
``^<node>`` the TESTs check.

Usage: ``python tests/data/tf_pass_tests/make_deadness.py`` (needs TensorFlow 2.21).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from google.protobuf import text_format

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

RUNNER = """
import sys, tensorflow as tf
from google.protobuf import text_format
gd = text_format.Parse(open(sys.argv[1]).read(), tf.compat.v1.GraphDef())
g = tf.Graph()
with g.as_default():
    tf.import_graph_def(gd, name="")
cfg = tf.compat.v1.ConfigProto()
cfg.graph_options.rewrite_options.disable_meta_optimizer = True
with tf.compat.v1.Session(graph=g, config=cfg) as s:
    try:
        s.run([f + ":0" for f in sys.argv[2:]])
    except Exception:
        pass
"""

LINE = re.compile(r"deadness_analysis\.cc:\d+\] (\^\S+) -> (.*)$")


def tf_control_predicates(gd, fetches: list[str]) -> dict[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "g.pbtxt"
        path.write_text(text_format.MessageToString(gd))
        env = dict(os.environ, TF_XLA_FLAGS="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit",
                   TF_CPP_VMODULE="deadness_analysis=2", TF_CPP_MIN_LOG_LEVEL="0")
        out = subprocess.run([sys.executable, "-c", RUNNER, str(path), *fetches], env=env, capture_output=True,
                             text=True, timeout=600)
    preds = {}
    for line in out.stderr.splitlines():
        m = LINE.search(line)
        if m:
            preds[m.group(1)] = m.group(2)
    if not preds:
        raise SystemExit(f"TF printed no deadness lines:\n{out.stderr[-2000:]}")
    return preds


def main() -> None:
    import test_tf_pass_tests_other as t

    truth = {}
    for name, (builder, fetches, keep) in t.DEADNESS_LOOP_GRAPHS.items():
        preds = tf_control_predicates(builder().gd, fetches)
        truth[name] = {k: preds[k] for k in keep}
        print(name, truth[name])
    (HERE / "deadness.json").write_text(json.dumps(truth, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
