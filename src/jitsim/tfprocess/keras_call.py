"""*The call* of a Keras model, shared by the ``.keras`` runner, the live-object capture and
the model zoo: ``tf.function(lambda *xs: model(xs, training=False))`` with one
``tf.TensorSpec`` per ``model.inputs`` entry, the flat inputs packed into the model's input
structure (a dict for most keras-hub backbones).

The shapes are the user's where given (``--input-shape NAME=2,128``, ``input_shapes=`` or
``input_signature=`` in :func:`jitsim.cluster`), else the model's with every unknown
dimension set to :data:`ASSUMED_DIM`; :func:`keras_inputs` says which dimensions were
assumed, and the route line (:class:`jitsim.frontend.resolve.Route`) states them, since
TF clusters the graph of one call, and a keras-hub model at sequence length 2 is not the one
a user runs.

:func:`parse_input_shape`, :func:`normalize_input_shapes`, :func:`plan_inputs` and
:func:`describe_inputs` need no TensorFlow; :func:`keras_specs`, :func:`keras_inputs` and :func:`keras_call` import
TensorFlow and Keras (only runners and capture of live objects use them).
"""

from __future__ import annotations

from jitsim.errors import JitsimError

ASSUMED_DIM = 2
OPTION = "--input-shape"
HOW_TO_SET = f"{OPTION} NAME=D1,D2 (Python: input_shapes={{'NAME': (D1, D2)}})"


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``"x=2,128"`` -> ``("x", (2, 128))``; ``"x="`` is a scalar. Every dimension must be a
    size: the call is concrete (``?``/``-1``/``None`` are refused)."""
    name, sep, shape = str(text).partition("=")
    name = name.strip()
    if not name or not sep:
        raise JitsimError(f"{OPTION} {text!r}: give a model input's name and its shape, e.g. {OPTION} x=2,128")
    dims = []
    for d in (x.strip() for x in shape.split(",")) if shape.strip() else ():
        if d.isdigit():
            dims.append(int(d))
        elif d in ("?", "-1", "None", ""):
            raise JitsimError(f"{OPTION} {text!r}: a shape must be concrete (the call TF runs has every size); "
                              f"give a number for each dimension, e.g. {name}=2,128")
        else:
            raise JitsimError(f"{OPTION} {text!r}: a shape is comma-separated sizes, e.g. {name}=2,128")
    return name, tuple(dims)


def _concrete(key, dims) -> tuple[int, ...]:
    try:
        out = tuple(int(d) if d is not None else -1 for d in dims)
    except (TypeError, ValueError):
        raise JitsimError(f"input shape {key}={dims!r}: a shape is a sequence of sizes, e.g. (2, 128)") from None
    if any(d < 0 for d in out):
        raise JitsimError(f"input shape {key}={list(dims)}: a shape must be concrete (the call TF runs has every "
                          "size); give a number for each dimension")
    return out


def normalize_input_shapes(input_shapes=None, input_signature=None) -> tuple:
    """The stated shapes as a sorted tuple of ``(key, dims)``: ``key`` a model input's name, or
    its position (``input_signature``, one ``tf.TensorSpec`` per model input, in order).
    ``input_shapes``: ``{"name": (2, 128)}`` or ``["name=2,128", ...]`` (the CLI's)."""
    if input_shapes and input_signature is not None:
        raise JitsimError("give input_shapes or input_signature, not both")
    out: dict = {}
    if input_signature is not None:
        for i, spec in enumerate(input_signature):
            shape = getattr(spec, "shape", None)
            if shape is None:
                raise JitsimError(f"input_signature[{i}]: a tf.TensorSpec, not a {type(spec).__name__}")
            if shape.rank is None:
                raise JitsimError(f"input_signature[{i}]: a shape must be concrete (rank unknown)")
            out[i] = _concrete(f"input_signature[{i}]", shape.as_list())
        return tuple(sorted(out.items()))
    if not input_shapes:
        return ()
    if isinstance(input_shapes, dict):
        items = [(str(k), _concrete(k, v if isinstance(v, (list, tuple)) else getattr(v, "as_list", lambda: v)()))
                 for k, v in input_shapes.items()]
    elif isinstance(input_shapes, str):
        items = [parse_input_shape(input_shapes)]
    else:
        items = [parse_input_shape(t) for t in input_shapes]
    for k, dims in items:
        if k in out and out[k] != dims:
            raise JitsimError(f"{OPTION} {k}: given twice, with different shapes")
        out[k] = dims
    return tuple(sorted(out.items()))


def shapes_key(shapes) -> str:
    """A stable text of normalized shapes (capture cache keys); ``""`` for none."""
    import json

    return json.dumps([[k, list(v)] for k, v in shapes]) if shapes else ""


def as_pairs(shapes) -> tuple:
    """Normalized ``(key, dims)`` pairs (as :func:`normalize_input_shapes` makes them, or read
    back from JSON) pass through; anything else is normalized."""
    if isinstance(shapes, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2 and
                                                 isinstance(p[0], (str, int)) and isinstance(p[1], (list, tuple))
                                                 for p in shapes):
        return tuple((k, tuple(int(d) for d in v)) for k, v in shapes)
    return normalize_input_shapes(shapes)


def _names(t, i) -> tuple[str, str]:
    raw = (getattr(t, "name", None) or f"input_{i}").split(":")[0]
    clean = "".join(c if c.isalnum() or c == "_" else "_" for c in raw) or f"input_{i}"
    return raw, clean


def keras_inputs(model, shapes=()) -> tuple[list, list[dict]]:
    """``(specs, inputs)``: one concrete ``tf.TensorSpec`` per model input, named after it,
    and the call's inputs as :func:`plan_inputs` says them."""
    import tensorflow as tf

    inputs = plan_inputs(model.inputs, shapes)
    specs = [tf.TensorSpec(d["shape"], tf.as_dtype(d["dtype"]), name=_names(t, i)[1])
             for i, (t, d) in enumerate(zip(model.inputs, inputs))]
    return specs, inputs


def plan_inputs(tensors, shapes=()) -> list[dict]:
    """The call's inputs (no TensorFlow needed): per model input (``tensors``: ``model.inputs``,
    anything with ``name``, ``shape`` and ``dtype``) a dict ``{"name", "dtype", "shape",
    "given", "assumed"}``: the stated shape (``shapes``, by input name or position), else the
    model's with unknown dims set to :data:`ASSUMED_DIM` (``assumed``: those dims). A stated
    name the model has no input of, a wrong rank or a size the model fixes otherwise is a
    :class:`~jitsim.errors.JitsimError`."""
    shapes = dict(as_pairs(shapes))
    tensors = list(tensors)
    names = [_names(t, i) for i, t in enumerate(tensors)]
    listed = ", ".join(raw for raw, _ in names) or "none"
    positional = [k for k in shapes if isinstance(k, int)]
    if positional and len(positional) != len(tensors):
        raise JitsimError(f"input_signature gives {len(positional)} TensorSpecs; the model has {len(tensors)} "
                          f"inputs ({listed})")
    by_name: dict[str, int] = {}
    for i, (raw, clean) in enumerate(names):
        by_name.setdefault(raw, i)
        by_name.setdefault(clean, i)
    given: dict[int, tuple] = {}
    for k, dims in shapes.items():
        i = k if isinstance(k, int) else by_name.get(k)
        if i is None:
            raise JitsimError(f"{OPTION} {k}=...: the model has no input named {k!r}; its inputs: {listed}")
        given[i] = (k, dims)
    inputs = []
    for i, t in enumerate(tensors):
        model_shape = None if t.shape is None else [None if d is None else int(d) for d in t.shape]
        raw = names[i][0]
        if i in given:
            k, dims = given[i]
            shown = (f"input_signature[{k}]" if isinstance(k, int) else
                     f"{OPTION} {k}={','.join(map(str, dims))}")
            if model_shape is not None and len(dims) != len(model_shape):
                raise JitsimError(f"{shown}: input {raw} has rank {len(model_shape)} (shape "
                                  f"{_fmt(model_shape)}), not {len(dims)}")
            for j, (want, have) in enumerate(zip(model_shape or (), dims)):
                if want is not None and want != have:
                    raise JitsimError(f"{shown}: dimension {j} of input {raw} is {want} in the model (shape "
                                      f"{_fmt(model_shape)})")
            shape, assumed = list(dims), []
        else:
            model_shape = [None] if model_shape is None else model_shape
            shape = [ASSUMED_DIM if d is None else d for d in model_shape]
            assumed = [j for j, d in enumerate(model_shape) if d is None]
        dtype = getattr(t.dtype, "name", None) or str(t.dtype)
        inputs.append({"name": raw, "dtype": dtype, "shape": shape, "given": i in given, "assumed": assumed})
    return inputs


def _fmt(shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def keras_specs(model, shapes=()) -> list:
    """One concrete ``tf.TensorSpec`` per model input, named after it (see :func:`keras_inputs`)."""
    return keras_inputs(model, shapes)[0]


def describe_inputs(inputs: list[dict]) -> str:
    """``model(x: float32[3, 7] (given), ids: int32[2, 2] (assumed: unknown dims set to 2))``."""
    parts = []
    for d in inputs:
        text = f"{d['name']}: {d['dtype']}[{', '.join(map(str, d['shape']))}]"
        if d.get("given"):
            text += f" (given, {OPTION})"
        elif d.get("assumed"):
            text += f" (assumed: unknown dims set to {ASSUMED_DIM})"
        parts.append(text)
    return f"model({', '.join(parts)})"


def any_assumed(inputs: list[dict]) -> bool:
    return any(d.get("assumed") for d in inputs or ())


def keras_call(model, specs=None, shapes=()):
    """``(tf.function, specs)``: the call of ``model`` (see the module docstring)."""
    import keras
    import tensorflow as tf

    specs = list(specs or keras_specs(model, shapes))
    struct = getattr(model, "_inputs_struct", None)

    def pack(xs):
        xs = list(xs)
        if struct is None or not isinstance(struct, (dict, list, tuple)):
            return xs[0] if len(xs) == 1 else xs
        return keras.tree.pack_sequence_as(struct, xs)

    return tf.function(lambda *xs: model(pack(xs), training=False), input_signature=specs), specs
