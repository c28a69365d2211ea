#!/usr/bin/env python3
"""Benchmark graphs of any size, shaped like the input of TF's clustering passes.

    python benchmarks/generate.py tile GRAPH K -o OUT.pb        # K copies of a real graph
    python benchmarks/generate.py layered N -o OUT.pb [--width W] [--seed S]
    python benchmarks/generate.py functions N -o OUT.pb [--consumer AddN|Pack|IdentityN] [--nested]
    python benchmarks/generate.py nested D -o OUT.pb [--kind direct|PartitionedCall|...|If|While]
    python benchmarks/generate.py noops N -o OUT.pb [--chain]
    python benchmarks/generate.py fanned D -o OUT.pb [--fan F]

``tile(graphdef, k)``: ``k`` disjoint copies of a graph (a real model's dump), node names
prefixed ``tile{i}/``, data inputs (``x``, ``x:1``) and control inputs (``^x``) renamed with
them, ``_Arg``/``_Retval`` indices shifted so that the copies' arguments and results do not
collide (a function with k times the arguments), the function library kept once. The copies
are concatenated in order, so a topologically ordered input stays topologically ordered (TF's
dump of a rebuilt graph is).

``layered(n_nodes, width, seed)``: a generated function graph of ``width`` parallel lanes of
dense layers: per lane and layer a weight and a bias (``_Arg`` resource handles read by
``ReadVariableOp``), ``MatMul``, ``AddV2``, ``Relu``; lanes mix with their neighbour through
``AddV2``, some layers scale by a ``Const`` through ``Mul``; every few layers one lane is
printed (``StringFormat`` + ``PrintV2``, ops without an XLA kernel) and the next layer waits
on the print through control edges, which splits the clusters there. All nodes are placed on
``/job:localhost/replica:0/task:0/device:CPU:0``, inputs are ``_Arg`` and outputs ``_Retval``,
and the node order is topological: jitsim takes it as a
``before_clone_constants_for_better_clustering`` dump.

``functions(n)`` and ``nested_calls(depth)``: graphs as a tf.function's graph is exported (calls
not inlined yet), with a library of ``n`` functions each called once, or ``depth`` functions
each calling the next (by call op, ``If`` branch or ``While`` body); see their docstrings.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "src") not in sys.path:
    sys.path.insert(0, str(ROOT / "src"))

from jitsim.registry import protos  # noqa: E402

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
DT_FLOAT = protos.DataType.values_by_name["DT_FLOAT"].number
DT_RESOURCE = protos.DataType.values_by_name["DT_RESOURCE"].number
DT_STRING = protos.DataType.values_by_name["DT_STRING"].number


# -- tiling ---------------------------------------------------------------------------------

def _rename_input(inp: str, prefix: str) -> str:
    return "^" + prefix + inp[1:] if inp.startswith("^") else prefix + inp


def tile(graphdef, k: int):
    """``k`` disjoint copies of ``graphdef`` in one GraphDef (see the module docstring)."""
    if k < 1:
        raise ValueError("k must be at least 1")
    out = protos.GraphDef()
    out.versions.CopyFrom(graphdef.versions)
    out.library.CopyFrom(graphdef.library)
    n_args = 1 + max((n.attr["index"].i for n in graphdef.node if n.op == "_Arg"), default=-1)
    n_rets = 1 + max((n.attr["index"].i for n in graphdef.node if n.op == "_Retval"), default=-1)
    for i in range(k):
        prefix = f"tile{i}/"
        for n in graphdef.node:
            m = out.node.add()
            m.CopyFrom(n)
            m.name = prefix + n.name
            m.input[:] = [_rename_input(x, prefix) for x in n.input]
            if n.op == "_Arg":
                m.attr["index"].i = n.attr["index"].i + i * n_args
            elif n.op == "_Retval":
                m.attr["index"].i = n.attr["index"].i + i * n_rets
    return out


# -- layered graphs -------------------------------------------------------------------------

class _Builder:
    def __init__(self, gd, batch: int, dim: int):
        self.gd = gd
        self.batch = batch
        self.dim = dim
        self.n_args = 0
        self.n_rets = 0

    def node(self, name, op, inputs=(), **attrs):
        n = self.gd.node.add(name=name, op=op, device=CPU)
        n.input.extend(inputs)
        for key, fn in attrs.items():
            fn(n.attr[key])
        return name

    @staticmethod
    def _type(t):
        return lambda a: setattr(a, "type", t)

    def _shape(self, a, dims):
        for d in dims:
            a.dim.add(size=d)

    def arg(self, name, dtype, dims, handle_dims=None):
        def shapes(a):
            self._shape(a.list.shape.add(), dims)

        attrs = {"T": self._type(dtype), "index": self._int(self.n_args)}
        if handle_dims is not None:
            attrs["_handle_dtypes"] = lambda a: a.list.type.append(DT_FLOAT)
            attrs["_handle_shapes"] = lambda a: self._shape(a.list.shape.add(), handle_dims)
        else:
            attrs["_output_shapes"] = shapes
        self.n_args += 1
        return self.node(name, "_Arg", **attrs)

    @staticmethod
    def _int(i):
        return lambda a: setattr(a, "i", i)

    @staticmethod
    def _str(s):
        return lambda a: setattr(a, "s", s.encode())

    @staticmethod
    def _bool(b):
        return lambda a: setattr(a, "b", b)

    def variable(self, name, dims):
        h = self.arg(name.replace("/", "_").lower() + "_readvariableop_resource", DT_RESOURCE, [], handle_dims=dims)
        return self.node(name + "/ReadVariableOp", "ReadVariableOp", [h], dtype=self._type(DT_FLOAT))

    def const(self, name, value: float):
        def val(a):
            a.tensor.dtype = DT_FLOAT
            a.tensor.tensor_shape.SetInParent()
            a.tensor.float_val.append(value)

        return self.node(name, "Const", dtype=self._type(DT_FLOAT), value=val)

    def binary(self, name, op, a, b, extra=()):
        return self.node(name, op, [a, b, *extra], T=self._type(DT_FLOAT))

    def matmul(self, name, a, b, extra=()):
        return self.node(name, "MatMul", [a, b, *extra], T=self._type(DT_FLOAT), transpose_a=self._bool(False),
                         transpose_b=self._bool(False))

    def relu(self, name, a):
        return self.node(name, "Relu", [a], T=self._type(DT_FLOAT))

    def print_(self, name, a):
        def types(at):
            at.list.type.append(DT_FLOAT)

        fmt = self.node(name + "/StringFormat", "StringFormat", [a], T=types, template=self._str("{}"),
                        placeholder=self._str("{}"), summarize=self._int(3))
        return self.node(name + "/PrintV2", "PrintV2", [fmt], output_stream=self._str("stderr"),
                         end=self._str("\n"))

    def retval(self, name, a):
        self.node(name, "_Retval", [a], T=self._type(DT_FLOAT), index=self._int(self.n_rets))
        self.n_rets += 1


def _layer_nodes(width: int, layer: int, print_every: int, scale_every: int) -> int:
    n = 7 * width  # 2 _Arg + 2 ReadVariableOp + MatMul + AddV2 + Relu per lane
    if layer % 2 == 1:
        n += width  # lane mixing AddV2
    if layer % scale_every == scale_every - 1:
        n += 1 + width  # a Const and a Mul per lane
    if layer % print_every == print_every - 1:
        n += 2
    return n


def layered(n_nodes: int, width: int = 8, seed: int = 0, *, print_every: int = 6, scale_every: int = 5,
            batch: int = 4, dim: int = 32):
    """A generated layered function graph of about ``n_nodes`` nodes (never fewer than one layer);
    see the module docstring. ``seed`` picks which lane each print reads."""
    rng = random.Random(seed)
    gd = protos.GraphDef()
    gd.versions.producer = 2096
    b = _Builder(gd, batch, dim)
    x = b.arg("x", DT_FLOAT, [batch, dim])
    budget = n_nodes - 1 - width  # the input and the results
    layers = 0
    total = 0
    while True:
        nxt = _layer_nodes(width, layers, print_every, scale_every)
        if layers and total + nxt > budget:
            break
        total += nxt
        layers += 1
    prev = [x] * width
    gate = None  # the print the next layer waits for
    for layer in range(layers):
        p = f"layer{layer}"
        ins = prev
        if layer % 2 == 1:
            ins = [b.binary(f"{p}/mix{j}", "AddV2", prev[j], prev[(j + 1) % width]) for j in range(width)]
        ctrl = [f"^{gate}"] if gate else []
        out = []
        for j in range(width):
            lane = f"{p}/dense{j}"
            w = b.variable(f"{lane}/MatMul", [dim, dim])
            mm = b.matmul(f"{lane}/MatMul", ins[j], w, ctrl)
            bias = b.variable(f"{lane}/BiasAdd", [dim])
            out.append(b.relu(f"{lane}/Relu", b.binary(f"{lane}/add", "AddV2", mm, bias)))
        if layer % scale_every == scale_every - 1:
            c = b.const(f"{p}/scale", 0.5)
            out = [b.binary(f"{p}/mul{j}", "Mul", out[j], c) for j in range(width)]
        gate = None
        if layer % print_every == print_every - 1:
            gate = b.print_(f"{p}/print", out[rng.randrange(width)])
        prev = out
    for j in range(width):
        b.retval(f"output_{j}_RetVal", prev[j])
    return gd


# -- function libraries ---------------------------------------------------------------------

CALL_KINDS = ("PartitionedCall", "StatefulPartitionedCall", "direct")


def _float_attr(value: float):
    def val(a):
        a.tensor.dtype = DT_FLOAT
        a.tensor.tensor_shape.SetInParent()
        a.tensor.float_val.append(value)
    return val


def _call(container, name: str, fn: str, kind: str, inputs: list[str]):
    """One call of library function ``fn`` (one float in, one float out) added to ``container``
    (a GraphDef or a FunctionDef's node_def list): by PartitionedCall, StatefulPartitionedCall
    or a node whose op is the function's name."""
    n = container.add(name=name, op=fn if kind == "direct" else kind)
    n.input.extend(inputs)
    if kind != "direct":
        n.attr["Tin"].list.type.append(DT_FLOAT)
        n.attr["Tout"].list.type.append(DT_FLOAT)
        n.attr["f"].func.name = fn
    return n


def _function(lib, name: str, value: float, callee: str | None = None, kind: str = "direct"):
    """``name(x) = Relu(x * value)``; with ``callee``: ``Relu(callee(x) * value)``, the call made
    the ``kind`` way (``direct``: a node whose op is the callee's name)."""
    f = lib.function.add()
    f.signature.name = name
    f.signature.input_arg.add(name="x", type=DT_FLOAT)
    f.signature.output_arg.add(name="y", type=DT_FLOAT)
    src = "x"
    if callee is not None:
        _call(f.node_def, "inner", callee, kind, ["x"])
        src = "inner:output:0" if kind != "direct" else "inner:y:0"
    c = f.node_def.add(name="c", op="Const")
    c.attr["dtype"].type = DT_FLOAT
    _float_attr(value)(c.attr["value"])
    m = f.node_def.add(name="m", op="Mul", input=[src, "c:output:0"])
    m.attr["T"].type = DT_FLOAT
    r = f.node_def.add(name="r", op="Relu", input=["m:z:0"])
    r.attr["T"].type = DT_FLOAT
    f.ret["y"] = "r:activations:0"
    return f


def _graph_input(gd, dims=(4, 8)):
    x = gd.node.add(name="x", op="Placeholder", device=CPU)
    x.attr["dtype"].type = DT_FLOAT
    for d in dims:
        x.attr["shape"].shape.dim.add(size=d)
    return "x"


def _consumer(gd, name: str, op: str, inputs: list[str]):
    n = gd.node.add(name=name, op=op, device=CPU, input=inputs)
    if op == "AddN":
        n.attr["N"].i = len(inputs)
        n.attr["T"].type = DT_FLOAT
    elif op == "Pack":
        n.attr["N"].i = len(inputs)
        n.attr["T"].type = DT_FLOAT
        n.attr["axis"].i = 0
    elif op == "IdentityN":
        n.attr["T"].list.type.extend([DT_FLOAT] * len(inputs))
    else:
        raise ValueError(f"unknown consumer {op!r}")
    out = gd.node.add(name="result", op="Identity", device=CPU, input=[name])
    out.attr["T"].type = DT_FLOAT
    return n


def functions(n: int, *, consumer: str = "AddN", nested: bool = False):
    """A graph calling each of ``n`` library functions once (issue 22): ``x`` (Placeholder) feeds
    ``call{i}``, a call of ``f{i}(x) = Relu(x * (i + 1))`` made in turn by PartitionedCall,
    StatefulPartitionedCall and a node whose op is ``f{i}`` (``CALL_KINDS``); every call's result
    feeds one wide ``consumer`` (AddN, Pack or IdentityN), read by ``result`` (Identity).
    ``nested``: each ``f{i}`` calls its own ``g{i}(x) = Relu(x * -(i + 1))`` first (the call made
    the way after ``call{i}``'s), so functions call functions. The shape of a tf.function's graph
    as TF exports it (calls not yet inlined): jitsim's default route inlines and lowers it."""
    gd = protos.GraphDef()
    gd.versions.producer = 2474  # TF 2.21's
    x = _graph_input(gd)
    outs = []
    for i in range(n):
        kind = CALL_KINDS[i % 3]
        callee = None
        if nested:
            callee = f"g{i}"
            _function(gd.library, callee, -float(i + 1))
        _function(gd.library, f"f{i}", float(i + 1), callee, CALL_KINDS[(i + 1) % 3])
        c = _call(gd.node, f"call{i}", f"f{i}", kind, [x])
        c.device = CPU
        outs.append(f"call{i}")
    _consumer(gd, "sum", consumer, outs)
    return gd


NESTING_KINDS = ("direct", "PartitionedCall", "StatefulPartitionedCall", "If", "While")
DT_BOOL = protos.DataType.values_by_name["DT_BOOL"].number
DT_INT32 = protos.DataType.values_by_name["DT_INT32"].number


def _const_node(f, name: str, dtype: int, values: list, dims: list[int] | None = None):
    c = f.node_def.add(name=name, op="Const")
    c.attr["dtype"].type = dtype
    t = c.attr["value"].tensor
    t.dtype = dtype
    t.tensor_shape.SetInParent()
    for d in dims or []:
        t.tensor_shape.dim.add(size=d)
    {DT_FLOAT: t.float_val, DT_BOOL: t.bool_val, DT_INT32: t.int_val}[dtype].extend(values)
    return c


def _loop_cond(lib, name: str = "loop_cond"):
    """``loop_cond(x) = Sum(x) < 100``: a While's condition."""
    f = lib.function.add()
    f.signature.name = name
    f.signature.input_arg.add(name="x", type=DT_FLOAT)
    f.signature.output_arg.add(name="pred", type=DT_BOOL)
    _const_node(f, "axes", DT_INT32, [0, 1], [2])
    _const_node(f, "limit", DT_FLOAT, [100.0])
    s = f.node_def.add(name="sum", op="Sum", input=["x", "axes:output:0"])
    s.attr["T"].type = DT_FLOAT
    s.attr["Tidx"].type = DT_INT32
    s.attr["keep_dims"].b = False
    lt = f.node_def.add(name="less", op="Less", input=["sum:output:0", "limit:output:0"])
    lt.attr["T"].type = DT_FLOAT
    f.ret["pred"] = "less:z:0"


def nested_calls(depth: int, *, kind: str = "direct"):
    """Function nesting ``depth`` deep (issue 22): the graph calls ``f0``, ``f{i}`` calls
    ``f{i+1}``, each ``Relu(<inner>(x) * 2)``, the last ``Relu(x * 2)``. ``kind`` (``NESTING_KINDS``)
    is how each level calls the next: a node whose op is the function's name, PartitionedCall,
    StatefulPartitionedCall, an ``If`` (constant true predicate; then: ``f{i+1}``, else: ``leaf``)
    or a ``While`` whose body is ``f{i+1}`` (condition ``Sum(x) < 100``): loops nested ``depth``
    frames deep once lowered."""
    if kind not in NESTING_KINDS:
        raise ValueError(f"unknown nesting kind {kind!r}")
    gd = protos.GraphDef()
    gd.versions.producer = 2474  # TF 2.21's
    x = _graph_input(gd)
    lib = gd.library
    if kind == "If":
        _function(lib, "leaf", 3.0)
    if kind == "While":
        _loop_cond(lib)
    for i in range(depth):
        inner = f"f{i + 1}" if i + 1 < depth else None
        if inner is None or kind not in ("If", "While"):
            _function(lib, f"f{i}", 2.0, inner, kind if kind in CALL_KINDS else "direct")
            continue
        f = _function(lib, f"f{i}", 2.0)
        n = f.node_def
        if kind == "If":
            _const_node(f, "pred", DT_BOOL, [True])
            cf = n.add(name="inner", op="If", input=["pred:output:0", "x"])
            cf.attr["Tcond"].type = DT_BOOL
            cf.attr["then_branch"].func.name = inner
            cf.attr["else_branch"].func.name = "leaf"
        else:
            cf = n.add(name="inner", op="While", input=["x"])
            cf.attr["T"].list.type.append(DT_FLOAT)
            cf.attr["cond"].func.name = "loop_cond"
            cf.attr["body"].func.name = inner
            cf.attr["parallel_iterations"].i = 10
        cf.attr["_lower_using_switch_merge"].b = True  # as tf.function marks them: lowered
        if kind == "If":
            cf.attr["Tin"].list.type.append(DT_FLOAT)
            cf.attr["Tout"].list.type.append(DT_FLOAT)
        n[[nd.name for nd in n].index("m")].input[0] = "inner:output:0"
    top = "f0"
    c = _call(gd.node, "call", top, kind if kind in CALL_KINDS else "PartitionedCall", [x])
    c.device = CPU
    out = gd.node.add(name="result", op="Identity", device=CPU, input=["call"])
    out.attr["T"].type = DT_FLOAT
    return gd


def noops(n: int, *, chain: bool = False):
    """``n`` NoOps named ``n0``, ``n1``... (issue 39: the smallest nodes there are, 18 bytes each
    in a .pb): unconnected, or with ``chain`` each waiting on the one before (a control input).
    The graph's size is all node count: what jitsim needs per node."""
    gd = protos.GraphDef()
    gd.versions.producer = 2474  # TF 2.21's
    add = gd.node.add
    for i in range(n):
        if chain and i:
            add(name=f"n{i}", op="NoOp", input=[f"^n{i - 1}"])
        else:
            add(name=f"n{i}", op="NoOp")
    return gd


def fanned_calls(depth: int, fan: int = 2):
    """Calls nested ``depth`` deep where each function calls the next ``fan`` times (issue 39):
    ``depth`` small functions that, inlined, are ``fan ** depth`` copies of the last one: a
    file of a few kilobytes whose inlined graph no machine holds (fan 2, depth 40: 15 KB, 5 * 10^12 nodes)."""
    gd = protos.GraphDef()
    gd.versions.producer = 2474
    x = _graph_input(gd)
    lib = gd.library
    for i in range(depth):
        f = _function(lib, f"f{i}", 2.0)
        if i + 1 < depth:
            names = [f"inner{k}" for k in range(fan)]
            for k, name in enumerate(names):
                _call(f.node_def, name, f"f{i + 1}", "PartitionedCall", ["x"])
            s = f.node_def.add(name="sum", op="AddN", input=[f"{n}:output:0" for n in names])
            s.attr["N"].i = fan
            s.attr["T"].type = DT_FLOAT
            f.node_def[[nd.name for nd in f.node_def].index("m")].input[0] = "sum:sum:0"
    c = _call(gd.node, "call", "f0", "PartitionedCall", [x])
    c.device = CPU
    out = gd.node.add(name="result", op="Identity", device=CPU, input=["call"])
    out.attr["T"].type = DT_FLOAT
    return gd


# -- CLI ------------------------------------------------------------------------------------

def main(argv=None) -> int:
    from jitsim.graph.io import read_graphdef, save

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tile", help="k copies of a graph")
    t.add_argument("graph")
    t.add_argument("k", type=int)
    t.add_argument("-o", "--output", required=True)
    la = sub.add_parser("layered", help="a generated layered graph")
    la.add_argument("nodes", type=int)
    la.add_argument("--width", type=int, default=8)
    la.add_argument("--seed", type=int, default=0)
    la.add_argument("-o", "--output", required=True)
    fu = sub.add_parser("functions", help="a library of N functions, each called once")
    fu.add_argument("n", type=int)
    fu.add_argument("--consumer", default="AddN", choices=["AddN", "Pack", "IdentityN"])
    fu.add_argument("--nested", action="store_true", help="each function calls one of its own")
    fu.add_argument("-o", "--output", required=True)
    ne = sub.add_parser("nested", help="function calls nested D deep")
    ne.add_argument("depth", type=int)
    ne.add_argument("--kind", default="direct", choices=NESTING_KINDS)
    ne.add_argument("-o", "--output", required=True)
    no = sub.add_parser("noops", help="N NoOps (unconnected, or a chain of control edges)")
    no.add_argument("n", type=int)
    no.add_argument("--chain", action="store_true")
    no.add_argument("-o", "--output", required=True)
    fa = sub.add_parser("fanned", help="calls nested D deep, each function calling the next F times")
    fa.add_argument("depth", type=int)
    fa.add_argument("--fan", type=int, default=2)
    fa.add_argument("-o", "--output", required=True)
    a = ap.parse_args(argv)
    if a.cmd == "tile":
        gd = tile(read_graphdef(a.graph), a.k)
    elif a.cmd == "layered":
        gd = layered(a.nodes, a.width, a.seed)
    elif a.cmd == "functions":
        gd = functions(a.n, consumer=a.consumer, nested=a.nested)
    elif a.cmd == "noops":
        gd = noops(a.n, chain=a.chain)
    elif a.cmd == "fanned":
        gd = fanned_calls(a.depth, a.fan)
    else:
        gd = nested_calls(a.depth, kind=a.kind)
    save(gd, a.output)
    print(f"{a.output}: {len(gd.node)} nodes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
