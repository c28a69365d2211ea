"""*The call* of a Keras model, shared by the ``.keras`` runner, the live-object capture and
the model zoo: ``tf.function(lambda *xs: model(xs, training=False))`` with one
``tf.TensorSpec`` per ``model.inputs`` entry, unknown dimensions set to 2, the flat inputs
packed into the model's input structure (a dict for most keras-hub backbones).

Imports TensorFlow and Keras: only runners and capture of live objects use it.
"""

from __future__ import annotations


def keras_specs(model) -> list:
    """One concrete ``tf.TensorSpec`` per model input (None dims -> 2), named after the input."""
    import tensorflow as tf

    specs = []
    for i, t in enumerate(model.inputs):
        shape = [2 if d is None else int(d) for d in t.shape]
        name = (getattr(t, "name", None) or f"input_{i}").split(":")[0]
        name = "".join(c if c.isalnum() or c == "_" else "_" for c in name) or f"input_{i}"
        specs.append(tf.TensorSpec(shape, tf.as_dtype(t.dtype), name=name))
    return specs


def keras_call(model, specs=None):
    """``(tf.function, specs)``: the call of ``model`` (see the module docstring)."""
    import keras
    import tensorflow as tf

    specs = list(specs or keras_specs(model))
    struct = getattr(model, "_inputs_struct", None)

    def pack(xs):
        xs = list(xs)
        if struct is None or not isinstance(struct, (dict, list, tuple)):
            return xs[0] if len(xs) == 1 else xs
        return keras.tree.pack_sequence_as(struct, xs)

    return tf.function(lambda *xs: model(pack(xs), training=False), input_signature=specs), specs
