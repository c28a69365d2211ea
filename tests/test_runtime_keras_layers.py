"""Every op a tf.keras layer reaches in training mode has a run-time shape rule (issue 38): the
layers' graphs, built by real TF with an unknown batch, are propagated with a concrete one, and
an op whose inputs' shapes are all known but whose output's is not is an op without a rule.
The random layers (Dropout and its kin, the random image layers) reach the random family,
Keras 3's seeded key/counter and the projective transform; only RandomCrop's slice stays
unknown: its bounds are random values (the crop's size is not modelled), said here."""

import pytest

pytestmark = pytest.mark.tf

# the ops without a rule this test accepts, and why
ACCEPTED = {"RandomCrop": {"StridedSlice"}}  # begin and end are random values; end - begin is not modelled


def _layers():
    import keras

    L = keras.layers
    flat = {"Dense": L.Dense(8), "Dropout": L.Dropout(0.5), "GaussianNoise": L.GaussianNoise(0.1),
            "GaussianDropout": L.GaussianDropout(0.2), "AlphaDropout": L.AlphaDropout(0.2),
            "BatchNormalization": L.BatchNormalization(), "LayerNormalization": L.LayerNormalization(),
            "ActivityRegularization": L.ActivityRegularization(0.01)}
    images = {"SpatialDropout2D": L.SpatialDropout2D(0.3), "RandomFlip": L.RandomFlip(),
              "RandomRotation": L.RandomRotation(0.1), "RandomZoom": L.RandomZoom(0.1),
              "RandomTranslation": L.RandomTranslation(0.1, 0.1), "RandomContrast": L.RandomContrast(0.2),
              "RandomBrightness": L.RandomBrightness(0.2), "RandomCrop": L.RandomCrop(6, 6),
              "Conv2D": L.Conv2D(4, 3)}
    return [(n, layer, (4, 8)) for n, layer in flat.items()] + [(n, layer, (2, 8, 8, 3)) for n, layer in images.items()]


def _ops_without_rule(layer, shape) -> set:
    import tensorflow as tf

    from jitsim.graph.model import parse_input
    from jitsim.runtime.propagate import Propagator, Seed

    @tf.function(input_signature=[tf.TensorSpec([None, *shape[1:]], tf.float32, name="x")])
    def f(x):
        return layer(x, training=True)

    cf = f.get_concrete_function()
    gd = cf.graph.as_graph_def()
    seeds = {("x", 0): Seed(tuple(shape))}
    # the variables the function captured (weights, Keras 3's seed state): their handles' shapes
    shapes = {}
    for v in layer.variables:
        shapes[id(v.value.handle if hasattr(v, "value") and hasattr(v.value, "handle") else v.handle)] = tuple(v.shape)
    for t, captured in zip(cf.graph.inputs[1:], cf.captured_inputs):
        if id(captured) in shapes:
            seeds[(t.op.name, 0)] = Seed((), handle_shape=shapes[id(captured)])
    prop = Propagator(list(gd.node), gd.library)
    st = prop.run(seeds)

    def known(s):
        return s is not None and all(d >= 0 for d in s)

    out = set()
    for name in prop.order:
        nd = prop.nodes[name]
        if nd.op in ("Placeholder", "NoOp"):
            continue
        ins = [parse_input(r)[:2] for r in nd.input if not r.startswith("^")]
        outs = [v for (n, _), v in st.shapes.items() if n == name]
        if all(known(st.shapes.get(r)) for r in ins) and any(not known(v) for v in outs):
            out.add(nd.op)
    return out


@pytest.mark.parametrize("name,layer,shape", _layers(), ids=lambda x: x if isinstance(x, str) else "")
def test_every_op_a_keras_layer_reaches_in_training_has_a_shape_rule(name, layer, shape):
    assert _ops_without_rule(layer, shape) == ACCEPTED.get(name, set())
