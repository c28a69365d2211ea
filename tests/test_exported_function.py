"""A tf.function's graph written as a GraphDef (``cf.graph.as_graph_def()``) is called as the function.

Unit tests read the function out of small exports built here by hand, each the shape TF's tracing
gives (placeholders with ``_user_specified_name``, ``Identity`` outputs tied to one ``NoOp``).
The ``tf`` tests take real exports of real functions and check them against TF's own dump of the
live call (a program calling the ConcreteFunction, harvested with the normal flags): with the
variables' shapes in the file (``add_shapes=True``) or given (``--input-shape``) the pass input
is byte for byte the live call's and the clusters are TF's; without them the result is never
labelled exact.
"""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jitsim.cli import main
from jitsim.errors import JitsimError
from jitsim.frontend.exported_function import exported_function, is_function_export
from jitsim.frontend.resolve import pass_inputs
from jitsim.graph.io import save

from graphs import F32, Shape, Shapes, Tensor, Type, graph_of

RESOURCE = 20
F = {"dtype": Type(F32)}
T = {"T": Type(F32)}


def _export(shapes: bool = False):
    """A FuncGraph's export: x (an argument), v (a captured variable) read and written, outputs
    Identity and Identity_1 tied to the NoOp of the ops that must run (the write and the read)."""
    read_shape = {"_output_shapes": Shapes(((4, 4),))} if shapes else {}
    return graph_of([
        ("x", "Placeholder", [], {**F, "_user_specified_name": b"x", "shape": Shape((2, 4))}),
        ("ReadVariableOp/resource", "Placeholder", [], {"dtype": Type(RESOURCE), "_user_specified_name": b"resource"}),
        ("ReadVariableOp", "ReadVariableOp", ["ReadVariableOp/resource"], {**F, **read_shape}),
        ("MatMul", "MatMul", ["x", "ReadVariableOp"], T),
        ("ones", "Const", [], {**F, "value": Tensor(F32, ())}),
        ("AssignAddVariableOp", "AssignAddVariableOp", ["ReadVariableOp/resource", "ones", "^ReadVariableOp"], F),
        ("Sum", "Sum", ["MatMul", "ones"], T),
        ("Identity", "Identity", ["MatMul", "^NoOp"], T),
        ("Identity_1", "Identity", ["Sum", "^NoOp"], T),
        ("NoOp", "NoOp", ["^AssignAddVariableOp", "^ReadVariableOp"], {}),
    ])


def test_an_export_is_read_as_the_function_it_was_traced_as():
    g = _export()
    assert is_function_export(g)
    f = exported_function(g)
    # arguments: the placeholders in file order; outputs: the sink identities; control outputs:
    # what the NoOp both outputs depend on waits for
    assert f.inputs == ("x", "ReadVariableOp/resource")
    assert f.outputs == ("Identity:0", "Identity_1:0")
    assert f.control_outputs == ("AssignAddVariableOp", "ReadVariableOp")
    assert [v.name for v in f.variables] == ["ReadVariableOp/resource"] and f.variables[0].dtype == F32
    assert f.missing_shapes == ["ReadVariableOp/resource"] and not f.exact
    assert "--input-shape ReadVariableOp/resource=DIMS" in f.hint and "add_shapes=True" in f.hint


def test_the_variable_shape_comes_from_the_file_or_from_the_user():
    f = exported_function(_export(shapes=True), captured=["none"])
    assert f.exact and f.variables[0].shape == (4, 4) and f.variables[0].source == "_output_shapes"
    f = exported_function(_export(), shapes=[("ReadVariableOp/resource", (4, 4))], captured=["none"])
    assert f.exact and f.variables[0].source == "given"
    # the shapes alone are not enough: an eager tensor the function captured is a Const in the file
    f = exported_function(_export(shapes=True))
    assert not f.exact and "--captured NAME" in f.hint and "--input-shape" not in f.hint
    with pytest.raises(JitsimError, match="an argument's shape is the placeholder's"):
        exported_function(_export(), shapes=[("x", (2, 4))])
    with pytest.raises(JitsimError, match="has no input 'y'"):
        exported_function(_export(), shapes=[("y", (2, 4))])


def test_a_captured_tensor_is_an_input_of_the_call():
    """``--captured ones``: the Const becomes an input, after the placeholders before it in the
    file (TF's by-value capture puts it among the FuncGraph's inputs in capture order)."""
    f = exported_function(_export(shapes=True), captured=["ones"])
    assert f.inputs == ("x", "ReadVariableOp/resource", "ones") and f.captured == ("ones",) and f.exact
    assert f.to_dict()["function"]["captured"] == ["ones"]
    with pytest.raises(JitsimError, match="'MatMul' is a MatMul, not a Const"):
        exported_function(_export(), captured=["MatMul"])
    with pytest.raises(JitsimError, match="give it alone"):
        exported_function(_export(), captured=["none", "ones"])


def test_a_tf1_graph_is_not_an_export_and_a_function_without_outputs_leaves_its_control_outputs_to_tf():
    tf1 = graph_of([("x", "Placeholder", [], F), ("r", "Relu", ["x"], T), ("out", "Identity", ["r"], T)])
    assert not is_function_export(tf1)
    no_outputs = graph_of([
        ("v", "Placeholder", [], {"dtype": Type(RESOURCE), "_user_specified_name": b"v"}),
        ("c", "Const", [], {**F, "value": Tensor(F32, ())}),
        ("assign", "AssignVariableOp", ["v", "c"], F),
    ])
    f = exported_function(no_outputs)
    assert f.outputs == () and f.control_outputs is None  # TF's rule, applied by the TF runner
    no_args = graph_of([("c", "Const", [], {**F, "value": Tensor(F32, ())}), ("r", "Relu", ["c"], T),
                        ("Identity", "Identity", ["r"], T)])
    assert is_function_export(no_args) and exported_function(no_args).inputs == ()


def test_the_tf_free_route_and_the_cli_say_what_the_call_is(tmp_path, capsys):
    path = tmp_path / "f.pbtxt"
    save(_export(), path)
    pin = pass_inputs(path, flags="--tf_xla_auto_jit=2", tf="never")
    assert not pin.route.exact and "the exported function called as TF calls it" in pin.route.line
    assert main(["cluster", str(path), "--tf", "never", "--fetch", "MatMul:0"]) == 2
    assert "its call is the function's" in capsys.readouterr().err
    assert main(["cluster", str(path), "--tf", "never", "--input-shape", "x=2,4"]) == 2
    assert "an argument's shape is the placeholder's" in capsys.readouterr().err
    assert main(["cluster", str(path), "--tf", "never", "--format", "json",
                 "--input-shape", "ReadVariableOp/resource=4,4", "--captured", "none"]) == 0
    call = json.loads(capsys.readouterr().out)["route"]["call"]
    assert call["function"]["variables"] == {"ReadVariableOp/resource": {"dtype": F32, "shape": [4, 4]}}
    assert call["missing_shapes"] == [] and call["captured_stated"] and call["exact"]
    assert main(["cluster", str(path), "--tf", "never", "--captured", "nothere"]) == 2
    assert "no node 'nothere'" in capsys.readouterr().err


# -- real TensorFlow: the export against the live call -------------------------------------------

FUNCTIONS = {
    # a stateful while loop (its control output ties the loop's LoopExecuted to a NoOp) and a
    # variable written in the loop
    "while_assign": """
        v = tf.Variable(tf.ones([4, 4]), name="v")
        @tf.function
        def f(x, n):
            def body(i, y):
                v.assign_add(tf.ones([4, 4]) * 0.01)
                return i + 1, tf.nn.relu(tf.matmul(y, v)) * 1.5
            _, y = tf.while_loop(lambda i, y: i < n, body, [tf.constant(0), x])
            return y * tf.cast(tf.shape(y)[0], tf.float32), tf.reduce_sum(y)
        SPEC = (tf.TensorSpec([2, 4], tf.float32, name="x"), tf.TensorSpec([], tf.int32, name="n"))
    """,
    # Keras 3's bias: AddV2(MatMul, Reshape(bias)); the remapper fuses it only with the bias's shape
    "dense_bias": """
        w = tf.Variable(tf.ones([8, 16]), name="kernel")
        b = tf.Variable(tf.zeros([16]), name="bias")
        @tf.function
        def f(x):
            h = tf.matmul(x, w) + tf.reshape(b, [1, 16])
            return tf.reduce_mean(tf.nn.gelu(h) * h, axis=1)
        SPEC = (tf.TensorSpec([3, 8], tf.float32, name="x"),)
    """,
    # an eager tensor captured by value (a Keras Normalization's mean): an argument of the live call
    "captured_tensor": """
        mean = tf.constant([0.5, 1.5, -1.0])
        scale = tf.constant(4.0)
        w = tf.Variable(tf.ones([3, 3]), name="w")
        @tf.function
        def f(x):
            return tf.reduce_sum(tf.nn.relu(tf.matmul((x - mean) * scale, w) + 1.0), axis=1)
        SPEC = (tf.TensorSpec([2, 3], tf.float32, name="x"),)
    """,
    # returns nothing: the control outputs are what TF's automatic control dependencies keep
    "no_outputs": """
        v = tf.Variable(tf.ones([4]), name="v")
        @tf.function
        def f(x):
            v.assign(tf.nn.relu(x * 2.0 + 1.0) - tf.tanh(x))
        SPEC = (tf.TensorSpec([4], tf.float32, name="x"),)
    """,
}

EXPORT = """
import sys, tensorflow as tf
from google.protobuf import text_format
{body}
cf = f.get_concrete_function(*SPEC)
import json
json.dump([t.op.name for t in cf.graph.inputs if t.op.type == "Const"], open(sys.argv[1] + "/captured.json", "w"))
open(sys.argv[1] + "/plain.pbtxt", "w").write(text_format.MessageToString(cf.graph.as_graph_def()))
open(sys.argv[1] + "/shapes.pbtxt", "w").write(text_format.MessageToString(cf.graph.as_graph_def(add_shapes=True)))
"""

CALL = """
import tensorflow as tf
{body}
cf = f.get_concrete_function(*SPEC)
cf(*[tf.ones(s.shape, s.dtype) for s in SPEC])
"""


@pytest.mark.tf
@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_an_export_with_its_shapes_is_the_live_call(tmp_path, monkeypatch, name):
    from jitsim.crosscheck.compare import compare_partitions
    from jitsim.tfprocess.harvest import DEFAULT_FLAGS, harvest
    from jitsim.crosscheck.scoring import labels_of_file
    from jitsim.explain.clustering import cluster
    from jitsim.graph.dumps import group_dumps
    from jitsim.graph.io import load

    body = textwrap.dedent(FUNCTIONS[name])
    subprocess.run([sys.executable, "-c", EXPORT.format(body=body), str(tmp_path)], check=True, capture_output=True)
    (tmp_path / "call.py").write_text(CALL.format(body=body))
    idx = harvest(tmp_path / "call.py", tmp_path / "truth", flags=DEFAULT_FLAGS)
    dumps = tmp_path / "truth" / "dumps"
    rec = {r.id: r for r in group_dumps(dumps, (tmp_path / "truth" / "log.txt").read_text())}[idx["main_graph"]]
    truth_input = load(dumps / rec.files["before_clone_constants_for_better_clustering"], validate=False)
    mark = rec.files.get("mark_for_compilation")
    flags = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
    cache = tmp_path / "cache"
    monkeypatch.setenv("JITSIM_CACHE", str(cache))

    # the shapes in the file and the captured tensors stated (what the user's process knows): TF's own
    # pass input of the live call, byte for byte, and its clusters
    captured = json.loads((tmp_path / "captured.json").read_text()) or ["none"]
    assert (captured != ["none"]) is (name == "captured_tensor")
    pin = pass_inputs(tmp_path / "shapes.pbtxt", flags=flags, tf="always", cache_dir=cache, captured=captured)
    assert pin.route.method == "tf-capture" and pin.route.exact, pin.route.line
    assert "ran none of it" in pin.route.line
    assert (pin.main_graph.graphdef.SerializeToString(deterministic=True)
            == truth_input.graphdef.SerializeToString(deterministic=True))
    c = cluster(tmp_path / "shapes.pbtxt", flags=flags, until="mark", tf="always", captured=captured)
    unstated = pass_inputs(tmp_path / "shapes.pbtxt", flags=flags, tf="always", cache_dir=cache)
    assert not unstated.route.exact and "--captured" in unstated.route.line
    truth = labels_of_file(dumps / mark) if mark else {n: None for n in c.labels()}
    d = compare_partitions(c.labels(), truth)
    assert d.identical and d.same_names, d.format_text()

    # no shapes in the file: never exact while a variable's shape is missing; given, exact again
    variables = exported_function(load(tmp_path / "shapes.pbtxt")).variables
    plain = pass_inputs(tmp_path / "plain.pbtxt", flags=flags, tf="always", cache_dir=cache)
    assert plain.route.exact is not bool(variables) and (not variables or "--input-shape" in plain.route.line)
    given = cluster(tmp_path / "plain.pbtxt", flags=flags, until="mark", tf="always", captured=captured,
                    input_shapes={v.name: v.shape for v in variables})
    assert given.route.exact, given.route.line
    d = compare_partitions(given.labels(), truth)
    assert d.identical and d.same_names, d.format_text()
