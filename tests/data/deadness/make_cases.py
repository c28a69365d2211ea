"""Regenerate the deadness-analysis ground truth from a real TensorFlow 2.21.

Each case is a small tf.function whose If/While/Case get lowered to v1 control
flow (Switch/Merge/Enter/Exit/NextIteration/_SwitchN) before auto-clustering.
The program runs with auto-jit, graph dumps and ``deadness_analysis=2`` logging;
for the (largest) graph that contains control flow we keep

* ``<case>.pbtxt``    -- its ``before_mark_for_compilation`` dump (the analysis input;
                         heavy debug attrs stripped), and
* ``<case>.expected`` -- the deadness log lines TF printed for that graph (the
                         ``Done populating frame`` lines and ``<tensor> -> <pred>``
                         lines), log prefixes removed.

Usage: ``python tests/data/deadness/make_cases.py [case ...]`` (needs TensorFlow).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

HERE = Path(__file__).resolve().parent

PRELUDE = "import tensorflow as tf\n"

CASES: dict[str, str] = {
    # plain lowered tf.cond
    "cond": """
        @tf.function
        def f(p, x):
            return tf.cond(p, lambda: x * 2.0 + 1.0, lambda: x - 3.0) * 4.0
        f(tf.constant(True), tf.ones([3]))
    """,
    # cond nested in a branch of another cond
    "nested_cond": """
        @tf.function
        def f(p, q, x):
            def then():
                return tf.cond(q, lambda: x * 2.0, lambda: x + 1.0) * 3.0
            return tf.cond(p, then, lambda: x - 3.0) + 1.0
        f(tf.constant(True), tf.constant(False), tf.ones([3]))
    """,
    # two sibling conds on different predicates, results combined
    "two_conds": """
        @tf.function
        def f(p, q, x):
            a = tf.cond(p, lambda: x * 2.0, lambda: x + 1.0)
            b = tf.cond(q, lambda: a * 3.0, lambda: x - 1.0)
            return a * b
        f(tf.constant(True), tf.constant(False), tf.ones([3]))
    """,
    # control dependencies inside branches and on the cond result
    "cond_ctrl_deps": """
        v = tf.Variable(tf.ones([3]))
        @tf.function
        def f(p, x):
            def then():
                y = x * 2.0
                with tf.control_dependencies([y]):
                    return tf.identity(x + 1.0)
            def els():
                v.assign_add(x)
                return x - 3.0
            r = tf.cond(p, then, els)
            with tf.control_dependencies([r]):
                z = x * 5.0
            return r + z
        f(tf.constant(True), tf.ones([3]))
    """,
    # tf.switch_case -> Case -> _SwitchN
    "switch_case": """
        @tf.function
        def f(k, x):
            return tf.switch_case(k, [lambda: x * 2.0, lambda: x + 1.0, lambda: x - 3.0]) * 2.0
        f(tf.constant(1), tf.ones([3]))
    """,
    # simple while loop
    "while": """
        @tf.function
        def f(n, x):
            i, s = tf.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s * 2.0), (0, x))
            return s + 1.0
        f(tf.constant(3), tf.ones([3]))
    """,
    # while loop with maximum_iterations (extra counter loop var)
    "while_maxiter": """
        @tf.function
        def f(n, x):
            i, s = tf.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s * 2.0 + 1.0), (0, x),
                                 maximum_iterations=10)
            return s * 3.0
        f(tf.constant(3), tf.ones([3]))
    """,
    # nested while loops
    "nested_while": """
        @tf.function
        def f(n, x):
            def body(i, s):
                j, t = tf.while_loop(lambda j, t: j < i, lambda j, t: (j + 1, t + 1.0), (0, s))
                return i + 1, t * 2.0
            i, s = tf.while_loop(lambda i, s: i < n, body, (0, x))
            return s + 1.0
        f(tf.constant(3), tf.ones([3]))
    """,
    # while loop whose body contains a cond on a loop variable
    "while_cond": """
        @tf.function
        def f(n, x):
            def body(i, s):
                s2 = tf.cond(i % 2 == 0, lambda: s * 2.0, lambda: s + 1.0)
                return i + 1, s2
            i, s = tf.while_loop(lambda i, s: i < n, body, (0, x))
            return s + 1.0
        f(tf.constant(3), tf.ones([3]))
    """,
    # while loop with a loop-invariant cond (predicate from outside the loop)
    "while_invariant_cond": """
        @tf.function
        def f(p, n, x):
            def body(i, s):
                s2 = tf.cond(p, lambda: s * 2.0, lambda: s + 1.0)
                return i + 1, s2
            i, s = tf.while_loop(lambda i, s: i < n, body, (0, x))
            return s + 1.0
        f(tf.constant(True), tf.constant(3), tf.ones([3]))
    """,
    # two independent top-level loops and a loop after them
    "two_whiles": """
        @tf.function
        def f(n, x, y):
            _, a = tf.while_loop(lambda i, s: i < n, lambda i, s: (i + 1, s * 2.0), (0, x))
            _, b = tf.while_loop(lambda i, s: i < n + 1, lambda i, s: (i + 2, s + 1.0), (0, y))
            _, c = tf.while_loop(lambda i, s: i < 4, lambda i, s: (i + 1, s - 1.0), (0, a + b))
            return c
        f(tf.constant(3), tf.ones([3]), tf.ones([3]))
    """,
    # cond inside a while inside a cond
    "cond_while_cond": """
        @tf.function
        def f(p, n, x):
            def then():
                def body(i, s):
                    return i + 1, tf.cond(s[0] > 3.0, lambda: s - 1.0, lambda: s * 2.0)
                return tf.while_loop(lambda i, s: i < n, body, (0, x))[1]
            return tf.cond(p, then, lambda: x + 7.0) * 2.0
        f(tf.constant(True), tf.constant(3), tf.ones([3]))
    """,
    # a while loop with a switch_case in its body
    "while_switch_case": """
        @tf.function
        def f(n, x):
            def body(i, s):
                return i + 1, tf.switch_case(i % 3, [lambda: s * 2.0, lambda: s + 1.0, lambda: s - 3.0])
            return tf.while_loop(lambda i, s: i < n, body, (0, x))[1] + 1.0
        f(tf.constant(4), tf.ones([3]))
    """,
    # loop variable only updated under a cond (loop var that passes through a cond merge)
    "while_three_vars": """
        @tf.function
        def f(n, x, y):
            def body(i, a, b):
                a2 = tf.cond(i > 1, lambda: a + b, lambda: a)
                return i + 1, a2, b * 2.0
            return tf.while_loop(lambda i, a, b: i < n, body, (0, x, y))[1] * 2.0
        f(tf.constant(4), tf.ones([3]), tf.ones([3]))
    """,
    # TF1 graph mode with control flow v1 built directly (no lowering), run in a Session
    "v1_session": """
        tf.compat.v1.disable_eager_execution()
        tf.compat.v1.disable_control_flow_v2()
        p = tf.compat.v1.placeholder(tf.bool, [], name="p")
        x = tf.compat.v1.placeholder(tf.float32, [3], name="x")
        y = tf.cond(p, lambda: x * 2.0, lambda: x + 1.0)
        i, s = tf.while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, s * 2.0 + y), (0, y))
        with tf.compat.v1.Session() as sess:
            sess.run(s * 3.0, {p: True, x: [1.0, 2.0, 3.0]})
    """,
    # a loop nested in a cond branch, and a stateful op with control deps inside the loop
    "cond_while_ctrl": """
        v = tf.Variable(0.0)
        @tf.function
        def f(p, n, x):
            def then():
                def body(i, s):
                    v.assign_add(1.0)
                    return i + 1, s * 2.0
                return tf.while_loop(lambda i, s: i < n, body, (0, x))[1]
            return tf.cond(p, then, lambda: x + 7.0) * 2.0
        f(tf.constant(True), tf.constant(3), tf.ones([3]))
    """,
}


def run_case(name: str, code: str, outdir: Path) -> None:
    with tempfile.TemporaryDirectory() as td:
        td = Path(td)
        dumps = td / "dumps"
        dumps.mkdir()
        prog = td / "prog.py"
        prog.write_text(PRELUDE + textwrap.dedent(code))
        env = dict(
            os.environ,
            TF_XLA_FLAGS="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_clustering_debug",
            TF_DUMP_GRAPH_PREFIX=str(dumps),
            TF_CPP_VMODULE="deadness_analysis=2,mark_for_compilation_pass=1,"
            "clone_constants_for_better_clustering=1",
            TF_CPP_MIN_LOG_LEVEL="0",
            CUDA_VISIBLE_DEVICES="",
        )
        p = subprocess.run([sys.executable, str(prog)], env=env, capture_output=True, text=True)
        log = p.stdout + p.stderr
        if p.returncode != 0:
            raise SystemExit(f"{name}: program failed\n{log[-3000:]}")
        graphs = split_log(log)
        best = None
        for fname, lines in graphs:
            text = (dumps / fname).read_text()
            if not re.search(r'op: "(Switch|_SwitchN|Merge|Enter)"', text):
                continue
            if best is None or len(text) > len(best[1]):
                best = (fname, text, lines)
        if best is None:
            raise SystemExit(f"{name}: no control-flow graph was dumped")
        fname, text, lines = best
        (outdir / f"{name}.pbtxt").write_text(strip_graph(text))
        (outdir / f"{name}.expected").write_text("\n".join(lines) + "\n")
        print(f"{name}: {fname}, {len(lines)} lines")


_PREFIX = re.compile(r"^\S+ \S+\s+\d+ (\S+?):\d+\] (.*)$")


def split_log(log: str) -> list[tuple[str, list[str]]]:
    """[(before_mark_for_compilation dump file, deadness lines printed for it)]."""
    out = []
    cur: list[str] = []
    last_src = None
    for raw in log.splitlines():
        m = _PREFIX.match(raw)
        if not m:
            # continuation of a multi-line message (TF's "Seeing different Merge predicates")
            if last_src == "deadness_analysis.cc" and raw:
                cur.append(raw)
            continue
        src, msg = m.groups()
        last_src = src
        if src == "deadness_analysis.cc":
            cur.append(msg)
        elif src == "dump_graph.cc" and "/before_mark_for_compilation" in msg:
            out.append((Path(msg.split("Dumped Graph to ", 1)[1]).name, cur))
            cur = []
    return out


def strip_graph(text: str) -> str:
    """Drop attrs the analysis never reads (shapes, debug info) to keep the files small."""
    from google.protobuf import text_format
    from tensorflow.core.framework import graph_pb2

    gd = graph_pb2.GraphDef()
    text_format.Parse(text, gd)
    for nd in gd.node:
        for k in ("_output_shapes", "_read_only_resource_inputs", "_has_manual_control_dependencies"):
            if k in nd.attr:
                del nd.attr[k]
        nd.ClearField("experimental_debug_info")
    gd.ClearField("library")
    return text_format.MessageToString(gd)


def main(argv: list[str]) -> None:
    names = argv or list(CASES)
    for n in names:
        run_case(n, CASES[n], HERE)


if __name__ == "__main__":
    main(sys.argv[1:])
