"""Building small graphs by hand in tests: one copy of the helpers the test files share.

A node is a tuple ``(name, op, [inputs], {attr: value})``; inputs are ``"x"``, ``"x:1"`` or
``"^x"``. An attr value is written as what it means (:func:`set_attr`): a Python bool, int,
float, str or bytes; a ``"DT_*"`` name (or a list of them) for a type; an ``AttrValue``; or one of
the markers :class:`Type`, :class:`Types`, :class:`Shape`, :class:`Shapes`, :class:`Tensor`.

* :func:`graph_of`: a jitsim ``Graph`` of such tuples (plus library functions), as given;
* :func:`graph`, :func:`node`, :func:`arg`, :func:`ret`, :func:`const`, :func:`op`,
  :func:`var_handle`: the style of TF's ``mark_for_compilation_pass_test.cc``: every node on the
  local CPU, the graph in node-id order (TF's node ids 2, 3, ...);
* :func:`parse_graphdef`: a ``GraphDef`` from protobuf text.
"""

from __future__ import annotations

from dataclasses import dataclass

from google.protobuf import text_format

from jitsim.graph import Graph
from jitsim.graph.model import set_attr_value
from jitsim.registry import protos

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
AUTO = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"

_DT = protos.DataType.values_by_name
F32, I32, I64, STR, BOOL = (_DT[n].number for n in ("DT_FLOAT", "DT_INT32", "DT_INT64", "DT_STRING", "DT_BOOL"))


# -- attr values ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Type:  # attr of kind `type`
    dtype: int


@dataclass(frozen=True)
class Types:  # attr of kind `list(type)`
    dtypes: tuple


@dataclass(frozen=True)
class Shape:  # attr of kind `shape`
    dims: tuple


@dataclass(frozen=True)
class Shapes:  # attr of kind `list(shape)`
    shapes: tuple


@dataclass(frozen=True)
class Tensor:  # attr of kind `tensor` (a Const value; only dtype and shape matter here)
    dtype: int
    dims: tuple


def set_attr(av, v) -> None:
    """Set ``AttrValue`` ``av`` to ``v`` (module docstring); TypeError for anything else."""
    if isinstance(v, Type):
        av.type = v.dtype
    elif isinstance(v, Types):
        av.list.type.extend(v.dtypes)
    elif isinstance(v, Shape):
        av.shape.SetInParent()
        for d in v.dims:
            av.shape.dim.add(size=d)
    elif isinstance(v, Shapes):
        for dims in v.shapes:
            s = av.list.shape.add()
            for d in dims:
                s.dim.add(size=d)
    elif isinstance(v, Tensor):
        av.tensor.dtype = v.dtype
        av.tensor.tensor_shape.SetInParent()
        for d in v.dims:
            av.tensor.tensor_shape.dim.add(size=d)
    elif isinstance(v, str) and v.startswith("DT_"):
        av.type = _DT[v].number
    elif isinstance(v, list) and v and isinstance(v[0], str) and v[0].startswith("DT_"):
        av.list.type.extend(_DT[x].number for x in v)
    else:
        set_attr_value(av, v)  # AttrValue, bool, int, float, str, bytes


# -- graphs ---------------------------------------------------------------------------------


def graph_of(nodes, library=()) -> Graph:
    """A ``Graph`` of ``(name, op, [inputs][, {attr: value}])`` tuples in this order, with the
    ``FunctionDef``s of ``library``; no device, nothing checked."""
    gd = protos.GraphDef()
    for item in nodes:
        nd = gd.node.add(name=item[0], op=item[1])
        nd.input.extend(item[2])
        for k, v in (item[3] if len(item) > 3 else {}).items():
            set_attr(nd.attr[k], v)
    for f in library:
        gd.library.function.add().CopyFrom(f)
    return Graph(gd, validate=False)


def parse_graphdef(text: str):
    """The ``GraphDef`` that protobuf text ``text`` writes."""
    gd = protos.GraphDef()
    text_format.Parse(text, gd)
    return gd


def node(name, op, inputs=(), **attrs):
    return (name, op, list(inputs), attrs)


def arg(name, index=0, dtype=F32):
    return node(name, "_Arg", T=Type(dtype), index=index)


def ret(name, x, index=0, dtype=F32):
    return node(name, "_Retval", [x], T=Type(dtype), index=index)


def const(name, dtype=F32, dims=(), inputs=()):
    return node(name, "Const", inputs, dtype=Type(dtype), value=Tensor(dtype, tuple(dims)))


def op(name, op_type, *inputs, dtype=F32, **attrs):
    """An op whose type attr is ``T`` (unary/binary math, Identity, Switch, Merge...)."""
    return node(name, op_type, inputs, T=Type(dtype), **attrs)


def var_handle(name, dtype=F32, dims=()):
    return node(name, "VarHandleOp", dtype=Type(dtype), shape=Shape(tuple(dims)), container="", shared_name=name)


def graph(*nodes, producer: int | None = None) -> Graph:
    """A graph of ``nodes`` in this order (= TF node ids 2, 3, ...), all placed on the CPU."""
    g = Graph.from_nodes([(n, o, ins) for n, o, ins, _ in nodes], device=CPU)
    for name, _, _, attrs in nodes:
        for k, v in attrs.items():
            set_attr(g[name].attr[k], v)
    if producer is not None:
        g.graphdef.versions.producer = producer
    return g


_SAVED_MODEL_PROGRAM = """
import sys, tensorflow as tf
m = tf.Module()
m.w = tf.Variable(tf.ones([4, 3]), name="w")
@tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32, name="x")])
def f(x):
    return tf.reduce_sum(tf.tanh(tf.nn.relu(tf.matmul(x, m.w) * 2.0 + 1.0)), axis=1)
m.f = f
tf.saved_model.save(m, sys.argv[1], signatures={"serving_default": f})
"""


def make_saved_model(path) -> None:
    """A tiny SavedModel at ``path`` (one variable, a MatMul call as ``serving_default``), saved
    by TF in a process of its own."""
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", _SAVED_MODEL_PROGRAM, str(path)], check=True, capture_output=True,
                   timeout=300)
