"""A Keras model's call, stated (issue 21, item 6): ``--input-shape NAME=D1,D2`` /
``input_shapes=`` give a ``.keras`` file or live Keras model the shapes it is called with;
unknown dims not given are 2 and the route says so; a SavedModel's route notes TF's signature
wrapper. The first tests need no TensorFlow (parsing, validation against stub inputs, route
wording); the ``tf`` ones run one small model with a variable-length input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from jitsim.errors import JitsimError
from jitsim.frontend import resolve
from jitsim.tfprocess.keras_call import describe_inputs, normalize_input_shapes, parse_input_shape, plan_inputs, shapes_key

ROOT = Path(__file__).resolve().parents[1]
MNIST = ROOT / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt"
FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "jitsim.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=ROOT, env=env)


# -- no TensorFlow ---------------------------------------------------------------------------

def test_parse_input_shape():
    assert parse_input_shape("input_ids=2,128") == ("input_ids", (2, 128))
    assert parse_input_shape("x=") == ("x", ())  # a scalar
    for bad, words in (("x=2,?", "must be concrete"), ("x=2,-1", "must be concrete"), ("x=2,", "must be concrete"),
                       ("x", "name and its shape"), ("=2", "name and its shape"), ("x=a", "comma-separated")):
        with pytest.raises(JitsimError, match=words):
            parse_input_shape(bad)


def test_normalize_input_shapes():
    assert normalize_input_shapes() == ()
    assert normalize_input_shapes({"b": [1, 2], "a": (3,)}) == (("a", (3,)), ("b", (1, 2)))
    assert normalize_input_shapes(["x=1,2", "x=1,2"]) == (("x", (1, 2)),)
    with pytest.raises(JitsimError, match="given twice"):
        normalize_input_shapes(["x=1,2", "x=1,3"])
    with pytest.raises(JitsimError, match="must be concrete"):
        normalize_input_shapes({"x": (None, 2)})
    spec = SimpleNamespace(shape=SimpleNamespace(rank=2, as_list=lambda: [3, 7]))
    assert normalize_input_shapes(input_signature=[spec]) == ((0, (3, 7)),)
    with pytest.raises(JitsimError, match="not both"):
        normalize_input_shapes({"x": (1,)}, [spec])
    assert shapes_key(()) == "" and shapes_key((("x", (3, 7)),)) != shapes_key((("x", (2, 7)),))


STUB = [SimpleNamespace(name="x", shape=(None, None), dtype="float32"),
        SimpleNamespace(name="mask", shape=(None, 5), dtype="int32")]


def test_plan_inputs_states_given_and_assumed_dims():
    default = plan_inputs(STUB)
    assert default == [{"name": "x", "dtype": "float32", "shape": [2, 2], "given": False, "assumed": [0, 1]},
                       {"name": "mask", "dtype": "int32", "shape": [2, 5], "given": False, "assumed": [0]}]
    given = plan_inputs(STUB, {"x": (3, 7), "mask": (3, 5)})
    assert [(d["shape"], d["given"], d["assumed"]) for d in given] == [([3, 7], True, []), ([3, 5], True, [])]
    assert plan_inputs(STUB, ((0, (4, 4)), (1, (4, 5))))[0]["shape"] == [4, 4]  # an input_signature, by position


@pytest.mark.parametrize("shapes, words", [({"y": (3, 7)}, "no input named 'y'; its inputs: x, mask"),
                                           ({"x": (3,)}, "input x has rank 2"),
                                           ({"mask": (3, 6)}, "dimension 1 of input mask is 5"),
                                           (((0, (3, 7)),), "gives 1 TensorSpecs; the model has 2 inputs")])
def test_plan_inputs_refuses_what_the_model_cannot_take(shapes, words):
    with pytest.raises(JitsimError, match=words):
        plan_inputs(STUB, shapes)


def test_route_line_says_the_call_and_what_was_assumed():
    assumed = resolve.Route("keras", "tf-capture", True, "TF ran", inputs=plan_inputs(STUB[:1]))
    assert "the call: model(x: float32[2, 2] (assumed: unknown dims set to 2))" in assumed.line
    assert assumed.exact and "exact for that call only" in assumed.line and "--input-shape NAME=" in assumed.line
    d = assumed.to_dict()
    assert d["exact"] and d["shapes_assumed"] and d["inputs"][0]["assumed"] == [0, 1]
    given = resolve.Route("keras", "tf-capture", True, "TF ran", inputs=plan_inputs(STUB[:1], {"x": (3, 7)}))
    assert "model(x: float32[3, 7] (given, --input-shape))" in given.line and "assumed" not in given.line
    assert given.to_dict()["shapes_assumed"] is False
    assert describe_inputs(plan_inputs(STUB)).startswith("model(x: float32[2, 2]")
    plain = resolve.Route("graphdef", "no-tf", False, "simulated")
    assert "the call: model" not in plain.line and "notes" not in plain.to_dict()


def test_saved_model_route_notes_the_signature_wrapper():
    r = resolve.Route("saved_model", "no-tf", False, "simulated")
    assert "StatefulPartitionedCall/" in r.line and "may cluster differently" in r.line
    assert r.to_dict()["notes"] == [resolve.SAVED_MODEL_NOTE]


def test_input_shape_errors_are_one_line(tmp_path):
    import zipfile

    stub = tmp_path / "m.keras"
    with zipfile.ZipFile(stub, "w") as z:  # what a Keras archive is recognised by; its model is never loaded:
        z.writestr("config.json", "{}")     # the option is refused first
        z.writestr("metadata.json", "{}")
    r = run_cli("cluster", stub, "--input-shape", "x=2,?")
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0, r.stderr
    assert r.stderr.startswith(f"jitsim: {stub}: --input-shape 'x=2,?': a shape must be concrete")
    r = run_cli("explain", MNIST, "MatMul", "--input-shape", "x=2,3")
    assert r.returncode == 2 and "applies to a .keras file, a Keras model or such a graph, not to a" in r.stderr, \
        r.stderr
    r = run_cli("crosscheck", "harvest", MNIST, "-o", tmp_path / "h", "--input-shape", "x=2,3")
    assert r.returncode == 2 and "applies to a .keras file" in r.stderr, r.stderr
    with pytest.raises(JitsimError, match="give the .keras path or the Keras model"):
        from jitsim.graph.io import load
        from jitsim.explain.clustering import cluster

        cluster(load(MNIST), input_shapes={"x": (2, 3)})


# -- with TensorFlow: one small model with a variable-length input ---------------------------

MAKE = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import keras
    out = Path(sys.argv[1])
    x = keras.Input((None,), name="x")
    h = keras.ops.tanh(x * 2.0 + 1.0) * x
    m = keras.Model(x, keras.ops.sum(keras.ops.exp(h) - h, axis=1))
    m.save(str(out / "m.keras"))
    m.export(str(out / "sm"), verbose=False)
    """
)


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("keras_shapes")
    subprocess.run([sys.executable, "-c", MAKE, str(d)], check=True, capture_output=True)
    return d


def _arg_shapes(dump: Path) -> list[list[int]]:
    from jitsim.graph.io import read_graphdef

    gd = read_graphdef(dump)
    return [[d.size for d in n.attr["_output_shapes"].list.shape[0].dim] for n in gd.node if n.op == "_Arg"]


@pytest.mark.tf
def test_keras_file_called_with_the_stated_shape(model_dir, tmp_path):
    from jitsim.frontend.capture import capture

    cache = tmp_path / "cache"
    given = capture(model_dir / "m.keras", flags=FLAGS, cache_dir=cache, input_shapes={"x": (3, 7)})
    assert _arg_shapes(given.main_dump()) == [[3, 7]]
    assert given.inputs == [{"name": "x", "dtype": "float32", "shape": [3, 7], "given": True, "assumed": []}]
    default = capture(model_dir / "m.keras", flags=FLAGS, cache_dir=cache)
    assert default.key != given.key and default.dump_dir != given.dump_dir
    assert _arg_shapes(default.main_dump()) == [[2, 2]] and default.inputs[0]["assumed"] == [0, 1]
    again = capture(model_dir / "m.keras", flags=FLAGS, cache_dir=cache, input_shapes=["x=3,7"])
    assert again.cached and again.key == given.key and again.inputs == given.inputs  # read back from the index

    env = {**os.environ, "JITSIM_CACHE": str(cache)}
    r = run_cli("cluster", model_dir / "m.keras", "--input-shape", "x=3,7", "--format", "json", env=env)
    assert r.returncode == 0, r.stderr
    route = json.loads(r.stdout)["route"]
    assert route["exact"] and route["inputs"][0]["shape"] == [3, 7] and route["shapes_assumed"] is False
    r = run_cli("cluster", model_dir / "m.keras", env=env)
    assert r.returncode == 0 and "model(x: float32[2, 2] (assumed: unknown dims set to 2))" in r.stdout, r.stderr
    r = run_cli("cluster", model_dir / "m.keras", "--input-shape", "y=3,7", env=env)  # TF loads the model to know
    assert r.returncode == 2 and r.stderr.strip() == (f"jitsim: {model_dir / 'm.keras'}: --input-shape y=...: the "
                                                      "model has no input named 'y'; its inputs: x"), r.stderr


@pytest.mark.tf
def test_live_keras_model_input_shapes(model_dir):
    import keras

    import jitsim

    model = keras.models.load_model(model_dir / "m.keras", compile=False)
    c = jitsim.cluster(model, FLAGS, tf="never", input_shapes={"x": (3, 7)})
    assert "model(x: float32[3, 7] (given" in c.route.line
    from jitsim.frontend.capture import concrete_function

    assert concrete_function(model, {"x": (3, 7)}).inputs[0].shape.as_list() == [3, 7]
    assert concrete_function(model).inputs[0].shape.as_list() == [2, 2]
    with pytest.raises(JitsimError, match="input x has rank 2"):
        jitsim.cluster(model, FLAGS, tf="never", input_shapes={"x": (3,)})
    import tensorflow as tf

    c2 = jitsim.cluster(model, FLAGS, tf="never", input_signature=[tf.TensorSpec([5, 7], tf.float32)])
    assert "model(x: float32[5, 7] (given" in c2.route.line


@pytest.mark.tf
def test_explain_on_a_saved_model_prints_the_wrapper_note(model_dir):
    import jitsim

    c = jitsim.cluster(model_dir / "sm", FLAGS, tf="never")
    node = next(n for n, r in c.nodes.items() if r.op == "Tanh")
    r = run_cli("explain", model_dir / "sm", node, "--tf", "never")
    assert r.returncode == 0, r.stderr
    assert "signature wrapper" in r.stdout and "StatefulPartitionedCall/" in r.stdout
