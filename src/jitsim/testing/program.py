"""Generated TensorFlow programs: one small description, two renderings.

A :class:`Program` is a ``tf.function`` body written as typed statements (``v3 = Sin(v1)``,
``var0 += v2``, ``v5 = cond(sum(v1) > 0, then, else)``, ...). It renders as

* **Python source** (:func:`to_python`): a standalone TF program with deterministic inputs,
  one ``@tf.function f`` (plus nested ``tf.function``s), every op spelled as ``tf.raw_ops.<Op>``
  and named after its statement, so TF's dumps carry the program's own names
  (``v3``, ``a4``...). This is what the differential tests run under real TF;
* **a GraphDef** (:func:`to_graphdef` / :func:`to_graph`) shaped like TF's
  ``before_clone_constants_for_better_clustering`` dump of that function: ``_Arg``/``_Retval``,
  devices set, attrs filled from the op registry, ``tf.cond`` / ``tf.while_loop`` lowered to
  Switch/Merge/Enter/Exit/NextIteration as TF's LowerFunctionalOpsPass does, non-jit nested
  functions inlined and ``jit_compile`` ones kept as calls into the library. This is what the
  TF-free invariant tests feed jitsim. It is a faithful *kind* of graph, not TF's exact graph
  (no Grappler).

Values are tensors of three shapes (``v`` = ``[4]``, ``s`` = ``[]``, ``m`` = ``[2, 2]``) and
five dtypes (``f`` float32, ``i`` int32, ``h`` int16, ``s`` string, ``b`` bool); each op
kind of :data:`CATALOG` says which it takes and makes, so every program is valid by
construction and any statement can be replaced by a constant of its type, which is how
counterexamples shrink (:func:`reductions`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Callable, Iterator, Union

# -- types ----------------------------------------------------------------------------------

# dtype code -> (python tf name, numpy name, DataType enum value)
DTYPES = {
    "f": ("tf.float32", "np.float32", 1),
    "i": ("tf.int32", "np.int32", 3),
    "h": ("tf.int16", "np.int16", 5),
    "s": ("tf.string", "object", 7),
    "b": ("tf.bool", "np.bool_", 10),
    "l": ("tf.int64", "np.int64", 9),  # only inside expansions (Where's result)
    "r": ("tf.resource", "object", 20),  # variable handles
}
DT_RESOURCE = 20
SHAPES = {"v": (4,), "s": (), "m": (2, 2)}
CPU = "/job:localhost/replica:0/task:0/device:CPU:{}"


@dataclass(frozen=True)
class Val:
    """A named value: dtype code and shape code."""

    name: str
    dtype: str
    shape: str


# -- op kinds ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Arg:
    """The i-th argument of the statement, inside a kind's expansion."""

    i: int


@dataclass(frozen=True)
class C:
    """An inline constant inside a kind's expansion (TF makes a Const node of it)."""

    dtype: str
    dims: tuple
    values: tuple


@dataclass(frozen=True)
class E:
    """One raw op of a kind's expansion; ``out`` is the output used."""

    op: str
    inputs: tuple
    attrs: tuple = ()  # (name, value); value: DType | bool | int | float | str | list
    out: int = 0


@dataclass(frozen=True)
class DType:
    code: str


@dataclass(frozen=True)
class Kind:
    """An op kind: argument dtypes, result dtype, shape rule and its raw-op expansion."""

    name: str
    ins: tuple
    out: str
    rule: str  # ew | same | keep | reduce | to_m | to_v | fill | matmul | transpose | vec | new_v
    build: Callable[[tuple], E]
    stateful: bool = False

    def out_shape(self, shapes: tuple) -> str:
        r = self.rule
        if r == "ew":
            big = [s for s in shapes if s != "s"]
            return big[0] if big else "s"
        if r in ("keep", "same"):
            return shapes[0]
        return {"reduce": "s", "vec_to_s": "s", "to_m": "m", "to_v": "v", "fill": "v", "matmul": "m", "transpose": "m",
                "vec": "v", "new_v": "v"}[r]

    def first_shapes(self) -> tuple:
        """Shapes the first argument may have."""
        return {"ew": ("v", "s", "m"), "keep": ("v", "s", "m"), "same": ("v", "s", "m"), "reduce": ("v", "m"), "vec_to_s": ("v",), "to_m": ("v",),
                "to_v": ("m",), "fill": ("s",), "matmul": ("m",), "transpose": ("m",), "vec": ("v",),
                "new_v": ()}[self.rule]

    def other_shapes(self, first: str) -> tuple:
        """Shapes the other arguments may have once the first one's is chosen."""
        if self.rule == "ew":
            return (first,) if first == "s" else (first, "s")
        if self.rule == "matmul":
            return ("m",)
        if self.rule == "same":
            return (first,)
        return ()


def _i32(*v):
    return C("i", (len(v),), tuple(v))


def _f(x):
    return C("f", (), (x,))


def _axes(shape: str):
    return _i32(*range(len(SHAPES[shape])))


def _unary(op):
    return lambda shapes: E(op, (Arg(0),))


def _binary(op):
    return lambda shapes: E(op, (Arg(0), Arg(1)))


def _cast(dst):
    return lambda shapes: E("Cast", (Arg(0),), (("DstT", DType(dst)), ("Truncate", False)))


def _reduce(op):
    return lambda shapes: E(op, (Arg(0), _axes(shapes[0])), (("keep_dims", False),))


def _kinds() -> dict[str, Kind]:
    ks: list[Kind] = []
    # float math: compilable
    for op in ("Sin", "Neg", "Exp", "Cos", "Abs", "Tanh", "Sigmoid", "Square", "Relu", "Floor", "Sqrt", "Softplus",
               "Log1p", "Identity"):
        ks.append(Kind(op, ("f",), "f", "ew", _unary(op)))
    for op in ("AddV2", "Mul", "Sub", "Maximum", "Minimum", "RealDiv", "SquaredDifference"):
        ks.append(Kind(op, ("f", "f"), "f", "ew", _binary(op)))
    ks += [
        Kind("MulConst", ("f",), "f", "ew", lambda s: E("Mul", (Arg(0), _f(2.0)))),
        Kind("AddConst", ("f",), "f", "ew", lambda s: E("AddV2", (Arg(0), _f(1.0)))),
        Kind("CheckNumerics", ("f",), "f", "ew", lambda s: E("CheckNumerics", (Arg(0),), (("message", "fuzz"),)),
             stateful=True),
        Kind("Greater", ("f", "f"), "b", "ew", _binary("Greater")),
        Kind("Less", ("f", "f"), "b", "ew", _binary("Less")),
        Kind("LogicalAnd", ("b", "b"), "b", "ew", _binary("LogicalAnd")),
        Kind("LogicalNot", ("b",), "b", "ew", _unary("LogicalNot")),
        Kind("SelectV2", ("b", "f", "f"), "f", "ew", lambda s: E("SelectV2", (Arg(0), Arg(1), Arg(2)))),
        Kind("CastToInt", ("f",), "i", "ew", _cast("i")),
        Kind("CastFromInt", ("i",), "f", "ew", _cast("f")),
        Kind("CastToInt16", ("f",), "h", "ew", _cast("h")),
        Kind("CastFromInt16", ("h",), "f", "ew", _cast("f")),
        Kind("CastFromBool", ("b",), "f", "ew", _cast("f")),
        Kind("AddInt", ("i", "i"), "i", "ew", _binary("AddV2")),
        Kind("MulInt", ("i", "i"), "i", "ew", _binary("Mul")),
        Kind("MaximumInt", ("i", "i"), "i", "ew", _binary("Maximum")),
        # Cumsum: XLA has no int16 kernel (TF's CPU kernel has one): an unsupported dtype
        Kind("Cumsum", ("f",), "f", "keep", lambda s: E("Cumsum", (Arg(0), C("i", (), (0,))))),
        Kind("CumsumInt", ("i",), "i", "keep", lambda s: E("Cumsum", (Arg(0), C("i", (), (0,))))),
        Kind("CumsumInt16", ("h",), "h", "keep", lambda s: E("Cumsum", (Arg(0), C("i", (), (0,))))),
        Kind("CumprodInt16", ("h",), "h", "keep", lambda s: E("Cumprod", (Arg(0), C("i", (), (0,))))),
        Kind("Sum", ("f",), "f", "reduce", _reduce("Sum")),
        Kind("Max", ("f",), "f", "reduce", _reduce("Max")),
        Kind("Mean", ("f",), "f", "reduce", _reduce("Mean")),
        Kind("Prod", ("f",), "f", "reduce", _reduce("Prod")),
        Kind("SumInt", ("i",), "i", "reduce", _reduce("Sum")),
        Kind("ToMatrix", ("f",), "f", "to_m", lambda s: E("Reshape", (Arg(0), _i32(2, 2)))),
        Kind("ToVector", ("f",), "f", "to_v", lambda s: E("Reshape", (Arg(0), _i32(4)))),
        Kind("Fill", ("f",), "f", "fill", lambda s: E("Fill", (_i32(4), Arg(0)))),
        Kind("BroadcastTo", ("f",), "f", "fill", lambda s: E("BroadcastTo", (Arg(0), _i32(4)))),
        Kind("Transpose", ("f",), "f", "transpose", lambda s: E("Transpose", (Arg(0), _i32(1, 0)))),
        Kind("MatMul", ("f", "f"), "f", "matmul", _binary("MatMul")),
        # strings: no XLA kernel
        Kind("AsString", ("f",), "s", "ew", _unary("AsString")),
        Kind("IntAsString", ("i",), "s", "ew", _unary("AsString")),
        Kind("StringToNumber", ("s",), "f", "ew",
             lambda s: E("StringToNumber", (Arg(0),), (("out_type", DType("f")),))),
        Kind("StringLength", ("s",), "i", "ew", _unary("StringLength")),
        Kind("StringJoin", ("s", "s"), "s", "ew", _binary("StringJoin")),
        # dynamic shapes: Where (excluded by --tf_xla_cluster_exclude_ops=Where), Unique, a
        # Slice whose begin is computed (compile-time-constant input from data)
        Kind("WhereCount", ("f",), "f", "reduce", lambda s: E("Cast", (E("Size", (E("Where", (
            E("Greater", (Arg(0), _f(0.0))),)),), (("out_type", DType("i")),)),), (("DstT", DType("f")),
                                                                                  ("Truncate", False)))),
        Kind("UniqueIdx", ("f",), "f", "vec", lambda s: E("Cast", (E("Unique", (Arg(0),), (("out_idx", DType("i")),),
                                                                   out=1),), (("DstT", DType("f")), ("Truncate", False)))),
        Kind("DynSlice", ("f",), "f", "vec", lambda s: E("Slice", (Arg(0), E("Cast", (E("Floor", (E("Mul", (
            E("Sigmoid", (E("Sum", (Arg(0), _i32(0)), (("keep_dims", True),)),)), _f(0.5))),)),),
            (("DstT", DType("i")), ("Truncate", False))), _i32(4)))),
        # shapes computed at run time (constant-folded by Grappler when the shapes are static)
        Kind("ReshapeLike", ("f", "f"), "f", "same", lambda s: E("Reshape", (Arg(0), E("Shape", (Arg(1),))))),
        Kind("SizeOf", ("f",), "f", "reduce", lambda s: E("Cast", (E("Size", (Arg(0),)),),
                                                            (("DstT", DType("f")), ("Truncate", False)))),
        Kind("RangeLike", ("f",), "f", "vec", lambda s: E("Cast", (E("Range", (C("i", (), (0,)), E("Size", (Arg(0),)),
                                                                               C("i", (), (1,)))),),
                                                               (("DstT", DType("f")), ("Truncate", False)))),
        Kind("AddN", ("f", "f"), "f", "same", lambda s: E("AddN", (Arg(0), Arg(1)))),
        Kind("Gather", ("f",), "f", "vec", lambda s: E("GatherV2", (Arg(0), _i32(3, 2, 1, 0), C("i", (), (0,))))),
        Kind("StridedSlice", ("f",), "f", "vec", lambda s: E("StridedSlice", (Arg(0), _i32(0), _i32(4), _i32(1)))),
        Kind("ExpandSqueeze", ("f",), "f", "keep", lambda s: E("Squeeze", (E("ExpandDims", (Arg(0), C("i", (), (0,)))),),
                                                                 (("squeeze_dims", [0]),))),
        Kind("ArgMax", ("f",), "f", "vec_to_s", lambda s: E("Cast", (E("ArgMax", (Arg(0), C("i", (), (0,)))),),
                                                               (("DstT", DType("f")), ("Truncate", False)))),
        Kind("ZerosLike", ("f",), "f", "keep", _unary("ZerosLike")),
        Kind("OnesLike", ("f",), "f", "keep", _unary("OnesLike")),
        Kind("StopGradient", ("f",), "f", "keep", _unary("StopGradient")),
        # stateful, not compilable by default
        Kind("PyFunc", ("f",), "f", "keep", lambda s: E("EagerPyFunc", (Arg(0),), (("Tout", [DType("f")]),)),
             stateful=True),
        Kind("RandomUniform", (), "f", "new_v",
             lambda s: E("RandomUniform", (_i32(4),), (("dtype", DType("f")), ("seed", 1), ("seed2", 2))),
             stateful=True),
        Kind("RandomNormal", (), "f", "new_v",
             lambda s: E("RandomStandardNormal", (_i32(4),), (("dtype", DType("f")), ("seed", 1), ("seed2", 2))),
             stateful=True),
    ]
    return {k.name: k for k in ks}


CATALOG: dict[str, Kind] = _kinds()

# -- statements -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Op:
    """``out = kind(args...)``; ``xla`` puts it in a ``tf.xla.experimental.jit_scope(compile_ops=xla)``."""

    out: str
    kind: str
    args: tuple
    ctrl: tuple = ()
    device: int = 0
    xla: bool | None = None


@dataclass(frozen=True)
class Const:
    out: str
    dtype: str
    shape: str
    seed: int = 0
    ctrl: tuple = ()
    device: int = 0


@dataclass(frozen=True)
class Read:
    """``out = var`` (ReadVariableOp) or, with ``gather``, ``var[[3, 2, 1, 0]]`` (ResourceGather)."""

    out: str
    var: str
    gather: bool = False
    ctrl: tuple = ()
    device: int = 0


@dataclass(frozen=True)
class Write:
    """``var = / += / -= value`` or ``scatter_add``; ``value=None`` adds the constant 1."""

    out: str  # effect name a<n>
    var: str
    how: str  # assign | add | sub | scatter_add
    value: str | None
    ctrl: tuple = ()
    device: int = 0


@dataclass(frozen=True)
class Print:
    out: str
    arg: str
    ctrl: tuple = ()
    device: int = 0


@dataclass(frozen=True)
class Group:
    """``out = tf.group(deps...)``: a NoOp with control inputs."""

    out: str
    deps: tuple
    device: int = 0


@dataclass(frozen=True)
class Block:
    stmts: tuple
    result: str | None = None


@dataclass(frozen=True)
class Cond:
    """``out = tf.cond(reduce_sum(pred) > 0, then, else_)``."""

    out: str
    dtype: str
    shape: str
    pred: str
    then: Block
    else_: Block


@dataclass(frozen=True)
class While:
    """``out = while_loop(i < iters, var = body(var), init)``."""

    out: str
    dtype: str
    shape: str
    init: str
    iters: int
    var: str
    body: Block


@dataclass(frozen=True)
class Call:
    out: str
    dtype: str
    shape: str
    fn: str
    args: tuple
    device: int = 0


Stmt = Union[Op, Const, Read, Write, Print, Group, Cond, While, Call]


@dataclass(frozen=True)
class Variable:
    name: str
    dtype: str
    shape: str
    seed: int = 0


@dataclass(frozen=True)
class Function:
    """A nested ``tf.function`` (straight-line: Op and Const statements only).
    ``jit``: None (plain, TF inlines it), True/False (``jit_compile=``)."""

    name: str
    params: tuple  # of Val
    body: Block
    jit: bool | None = None


@dataclass(frozen=True)
class Program:
    inputs: tuple  # of Val
    body: Block
    variables: tuple = ()
    functions: tuple = ()
    dynamic: bool = False  # trace f with unknown dimensions (input_signature of None dims)
    # also return d(sum of the float results)/dx0 through a GradientTape (Python rendering only:
    # the GraphDef rendering is the forward function)
    grad: bool = False

    # -- queries ------------------------------------------------------------------------------
    def size(self) -> int:
        """Statements, counted recursively, with the bodies of the functions that are called
        (what shrinking minimises)."""
        called = {s.fn for s in _walk(self.body) if isinstance(s, Call)}
        return _block_size(self.body) + sum(_block_size(f.body) for f in self.functions if f.name in called)

    def shrink_key(self) -> tuple:
        """A strict order for shrinking: smaller is simpler (constants count least)."""
        called = {st.fn for st in _walk(self.body) if isinstance(st, Call)}
        blocks = [self.body] + [f.body for f in self.functions if f.name in called]
        consts = sum(1 for b in blocks for st in _walk(b) if isinstance(st, Const))
        return (self.size() - consts, consts, len(self.functions) + len(self.variables) + len(self.inputs),
                len(repr(self)))

    def types(self) -> dict[str, tuple[str, str]]:
        """Value name -> (dtype, shape), for every value of the program."""
        out = {v.name: (v.dtype, v.shape) for v in self.inputs}
        fns = {f.name: f for f in self.functions}
        for f in self.functions:
            out.update({p.name: (p.dtype, p.shape) for p in f.params})
            _collect_types(f.body, out, self, fns)
        _collect_types(self.body, out, self, fns)
        return out

    def outputs(self) -> list[str]:
        """The function's results: every value of the top block nobody consumes (the last one
        first), so that nothing pure is dead code Grappler would prune."""
        used: set[str] = set()
        for s in _walk(self.body):
            used.update(_refs(s))
        cands = [v.name for v in self.inputs] + [s.out for s in self.body.stmts if _is_value(s)]
        outs = [n for n in cands if n not in used and not n.startswith("x")]
        return outs[::-1] if outs else ([self.body.stmts[-1].out] if self.body.stmts and _is_value(self.body.stmts[-1])
                                        else [v.name for v in self.inputs[:1]])

    def __repr__(self) -> str:
        return "Program(\n" + body_source(self) + ")"

    def _repr_pretty_(self, printer, cycle) -> None:  # what Hypothesis prints for a falsifying example
        printer.text(repr(self))


def _block_size(b: Block) -> int:
    n = 0
    for s in b.stmts:
        n += 1
        if isinstance(s, Cond):
            n += _block_size(s.then) + _block_size(s.else_)
        elif isinstance(s, While):
            n += _block_size(s.body)
    return n


def _is_value(s) -> bool:
    return not isinstance(s, (Write, Print, Group))


def _collect_types(b: Block, out: dict, program: Program, fns: dict) -> None:
    vars_ = {v.name: v for v in program.variables}
    for s in b.stmts:
        if isinstance(s, Op):
            k = CATALOG[s.kind]
            out[s.out] = (k.out, k.out_shape(tuple(out[a][1] for a in s.args)))
        elif isinstance(s, Const):
            out[s.out] = (s.dtype, s.shape)
        elif isinstance(s, Read):
            v = vars_[s.var]
            out[s.out] = (v.dtype, v.shape)
        elif isinstance(s, (Cond, While, Call)):
            out[s.out] = (s.dtype, s.shape)
            if isinstance(s, Cond):
                _collect_types(s.then, out, program, fns)
                _collect_types(s.else_, out, program, fns)
            elif isinstance(s, While):
                out[s.var] = (s.dtype, s.shape)
                _collect_types(s.body, out, program, fns)


def _walk(b: Block) -> Iterator:
    for s in b.stmts:
        yield s
        if isinstance(s, Cond):
            yield from _walk(s.then)
            yield from _walk(s.else_)
        elif isinstance(s, While):
            yield from _walk(s.body)


def _refs(s) -> list[str]:
    """Value and effect names a statement reads (nested blocks' own statements excluded)."""
    if isinstance(s, Op):
        return list(s.args) + list(s.ctrl)
    if isinstance(s, (Const, Read)):
        return list(s.ctrl)
    if isinstance(s, Write):
        return ([s.value] if s.value else []) + list(s.ctrl)
    if isinstance(s, Print):
        return [s.arg] + list(s.ctrl)
    if isinstance(s, Group):
        return list(s.deps)
    if isinstance(s, Cond):
        return [s.pred] + [s.then.result, s.else_.result]
    if isinstance(s, While):
        return [s.init, s.body.result]
    if isinstance(s, Call):
        return list(s.args)
    return []


# -- constants ------------------------------------------------------------------------------------


def const_values(dtype: str, shape: str, seed: int) -> list:
    """Deterministic small values (flat) for a constant of this type."""
    n = 1
    for d in SHAPES[shape]:
        n *= d
    out = []
    for k in range(n):
        x = ((seed * 7 + k * 3) % 9 - 4) / 2
        if dtype == "f":
            out.append(x)
        elif dtype in ("i", "h"):
            out.append(int((seed + k) % 5 - 2))
        elif dtype == "b":
            out.append((seed + k) % 2 == 0)
        else:
            out.append(repr(x).encode())
    return out


def _py_literal(dtype: str, shape: str, seed: int) -> str:
    vals = const_values(dtype, shape, seed)
    if shape == "s":
        return repr(vals[0])
    if shape == "m":
        return repr([vals[0:2], vals[2:4]])
    return repr(vals)


# -- Python rendering -----------------------------------------------------------------------------


def _py_attr(v) -> str:
    if isinstance(v, DType):
        return DTYPES[v.code][0]
    if isinstance(v, list):
        return "[" + ", ".join(_py_attr(x) for x in v) + "]"
    return repr(v)


# tf.raw_ops spells a few inputs differently from the OpDef (TF's api_defs)
_PY_ARG_NAMES = {("Sum", "reduction_indices"): "axis", ("Max", "reduction_indices"): "axis",
                 ("Mean", "reduction_indices"): "axis", ("Prod", "reduction_indices"): "axis",
                 ("Where", "input"): "condition", ("ExpandDims", "dim"): "axis",
                 ("Squeeze", "squeeze_dims"): "axis"}


def _py_expr(e, args: list[str], name: str | None = None) -> str:
    from jitsim.registry import op_def

    if isinstance(e, Arg):
        return args[e.i]
    if isinstance(e, C):
        if e.dtype == "f" and not e.dims:
            return repr(float(e.values[0]))
        return repr(list(e.values)) if e.dims else repr(e.values[0])
    od = op_def(e.op)
    parts = []
    in_args = list(od.input_arg)
    if len(in_args) == 1 and (in_args[0].number_attr or in_args[0].type_list_attr):
        parts.append(f"{in_args[0].name}=[" + ", ".join(_py_expr(x, args) for x in e.inputs) + "]")
    else:
        for a, x in zip(in_args, e.inputs):
            parts.append(f"{_PY_ARG_NAMES.get((e.op, a.name), a.name)}={_py_expr(x, args)}")
    parts += [f"{_PY_ARG_NAMES.get((e.op, k), k)}={_py_attr(v)}" for k, v in e.attrs]
    if name:
        parts.append(f"name={name!r}")
    text = f"tf.raw_ops.{e.op}(" + ", ".join(parts) + ")"
    if len(od.output_arg) > 1:
        text += f"[{e.out}]"
    return text


_VAR_OPS = {"assign": "AssignVariableOp", "add": "AssignAddVariableOp", "sub": "AssignSubVariableOp"}


class _Py:
    def __init__(self, program: Program):
        self.p = program
        self.types = program.types()
        self.lines: list[str] = []

    def emit(self, indent: int, text: str) -> None:
        self.lines.append("    " * indent + text)

    def stmt_lines(self, s) -> list[str]:
        if isinstance(s, Op):
            k = CATALOG[s.kind]
            if s.kind == "PyFunc":
                return [f"{s.out} = tf.py_function(func=lambda t: t + 1.0, inp=[{s.args[0]}], Tout=tf.float32, "
                        f"name={s.out!r})",
                        f"{s.out}.set_shape({list(SHAPES[self.types[s.out][1]])})"]
            shapes = tuple(self.types[a][1] for a in s.args)
            return [f"{s.out} = {_py_expr(k.build(shapes), list(s.args), s.out)}"]
        if isinstance(s, Const):
            return [f"{s.out} = tf.constant({_py_literal(s.dtype, s.shape, s.seed)}, dtype={DTYPES[s.dtype][0]}, "
                    f"name={s.out!r})"]
        if isinstance(s, Read):
            v = self._var(s.var)
            if s.gather:
                idx = [3, 2, 1, 0] if v.shape == "v" else [1, 0]
                return [f"{s.out} = tf.raw_ops.ResourceGather(resource={s.var}.handle, indices={idx}, "
                        f"dtype={DTYPES[v.dtype][0]}, name={s.out!r})"]
            return [f"{s.out} = tf.raw_ops.ReadVariableOp(resource={s.var}.handle, dtype={DTYPES[v.dtype][0]}, "
                    f"name={s.out!r})"]
        if isinstance(s, Write):
            v = self._var(s.var)
            value = s.value
            if value is None:
                one = "1" if v.dtype in ("i", "h") else "1.0"
                value = one if v.shape == "s" else f"tf.ones({list(SHAPES[v.shape])}, {DTYPES[v.dtype][0]})"
            if s.how == "scatter_add":
                idx = [0, 1, 2, 3] if v.shape == "v" else [0, 1]
                return [f"{s.out} = tf.raw_ops.ResourceScatterAdd(resource={s.var}.handle, indices={idx}, "
                        f"updates={value}, name={s.out!r})"]
            return [f"{s.out} = tf.raw_ops.{_VAR_OPS[s.how]}(resource={s.var}.handle, value={value}, name={s.out!r})"]
        if isinstance(s, Print):
            return [f"{s.out} = tf.print({s.arg}, name={s.out!r})"]
        if isinstance(s, Group):
            return [f"{s.out} = tf.group({', '.join(s.deps)}, name={s.out!r})"]
        if isinstance(s, Call):
            return [f"{s.out} = {s.fn}({', '.join(s.args)})"]
        raise TypeError(s)

    def _var(self, name: str) -> Variable:
        return next(v for v in self.p.variables if v.name == name)

    def block(self, b: Block, indent: int) -> None:
        for s in b.stmts:
            if isinstance(s, Cond):
                for tag, blk in (("then", s.then), ("else", s.else_)):
                    self.emit(indent, f"def {tag}_{s.out}():")
                    self.block(blk, indent + 1)
                    self.emit(indent + 1, f"return {blk.result}")
                self.emit(indent, f"{s.out} = tf.cond(tf.reduce_sum({s.pred}) > 0, then_{s.out}, else_{s.out}, "
                                  f"name={s.out!r})")
                continue
            if isinstance(s, While):
                self.emit(indent, f"def body_{s.out}(i, {s.var}):")
                self.block(s.body, indent + 1)
                self.emit(indent + 1, f"return i + 1, {s.body.result}")
                self.emit(indent, f"_, {s.out} = tf.while_loop(lambda i, {s.var}: i < {s.iters}, body_{s.out}, "
                                  f"[0, {s.init}], shape_invariants=[tf.TensorShape([]), tf.TensorShape(None)], "
                                  f"name={s.out!r})")
                continue
            lines = self.stmt_lines(s)
            ind = indent
            dev = getattr(s, "device", 0)
            if dev:
                self.emit(ind, f'with tf.device("/CPU:{dev}"):')
                ind += 1
            ctrl = getattr(s, "ctrl", ())
            if ctrl:
                self.emit(ind, f"with tf.control_dependencies([{', '.join(ctrl)}]):")
                ind += 1
            xla = getattr(s, "xla", None)
            if xla is not None:
                self.emit(ind, f"with tf.xla.experimental.jit_scope(compile_ops={xla}):")
                ind += 1
            for line in lines:
                self.emit(ind, line)

    def render(self) -> str:
        p = self.p
        for x in p.inputs:
            self.emit(0, f"{x.name} = tf.constant({_py_literal(x.dtype, x.shape, _seed_of(x.name))}, "
                         f"dtype={DTYPES[x.dtype][0]})")
        for v in p.variables:
            self.emit(0, f"{v.name} = tf.Variable({_py_literal(v.dtype, v.shape, v.seed)}, "
                         f"dtype={DTYPES[v.dtype][0]}, name={v.name!r})")
        for fn in p.functions:
            self.emit(0, "")
            deco = "@tf.function" if fn.jit is None else f"@tf.function(jit_compile={fn.jit})"
            self.emit(0, deco)
            self.emit(0, f"def {fn.name}({', '.join(q.name for q in fn.params)}):")
            self.block(fn.body, 1)
            self.emit(1, f"return {fn.body.result}")
        self.emit(0, "")
        self.emit(0, "")
        if p.dynamic:
            dims = {"v": "[None]", "s": "[]", "m": "[None, None]"}
            specs = ", ".join(f"tf.TensorSpec({dims[x.shape]}, {DTYPES[x.dtype][0]})" for x in p.inputs)
            self.emit(0, f"@tf.function(input_signature=[{specs}])")
        else:
            self.emit(0, "@tf.function")
        self.emit(0, f"def f({', '.join(x.name for x in p.inputs)}):")
        outs = p.outputs()
        if p.grad:
            self.emit(1, "with tf.GradientTape() as tape:")
            self.emit(2, "tape.watch(x0)")
            self.block(p.body, 2)
            floats = [o for o in outs if self.types[o][0] == "f"] or ["x0"]
            self.emit(2, "loss = " + " + ".join(f"tf.reduce_sum({o})" for o in floats))
            self.emit(1, "dx0 = tape.gradient(loss, x0, unconnected_gradients=tf.UnconnectedGradients.ZERO)")
            outs = outs + ["dx0"]
        else:
            self.block(p.body, 1)
        self.emit(1, f"return {', '.join(outs)}")
        self.emit(0, "")
        self.emit(0, "")
        self.emit(0, f"f({', '.join(x.name for x in p.inputs)})")
        return "\n".join(self.lines) + "\n"


def _seed_of(name: str) -> int:
    return sum(ord(c) for c in name)


def body_source(program: Program) -> str:
    """The program without imports: inputs, variables, functions, ``f`` and one call of it."""
    return _Py(program).render()


DEVICE_SETUP = ("cpu = tf.config.list_physical_devices('CPU')[0]\n"
                "tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * {n})\n")


GRAPPLER_OFF = 'tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": True})\n'


def header_source(devices: int = 1, grappler: bool = True) -> str:
    """Imports plus the process configuration (logical CPU devices, Grappler off)."""
    text = "import numpy as np\nimport tensorflow as tf\n"
    if devices > 1:
        text += DEVICE_SETUP.format(n=devices)
    if not grappler:
        text += GRAPPLER_OFF
    return text


def to_python(program: Program, *, flags: str | None = None, devices: int = 1, grappler: bool = True,
              title: str = "") -> str:
    """A standalone TF program: ``TF_XLA_FLAGS=... python program.py``."""
    head = f'"""{title or "Generated by jitsim.testing"}'
    if flags is not None:
        head += f"\n\nRun with TF_XLA_FLAGS={flags!r}"
    head += '\n"""\n'
    return head + header_source(devices, grappler) + "\n" + body_source(program)


# -- GraphDef rendering -----------------------------------------------------------------------------


class _Ctx:
    """A block being rendered: its values, the node anchoring constants (pivot / loop body
    control), and how outer values enter it (Switch for cond branches, Enter for loops)."""

    def __init__(self, parent, kind="top", anchor=None, pred=None, branch=None, frame=None, cache=None):
        self.parent = parent
        self.kind = kind
        self.anchor = anchor
        self.pred = pred
        self.branch = branch  # 1 then, 0 else
        self.frame = frame
        self.cache = cache if cache is not None else {}
        self.values: dict[str, str] = {}
        self.effects: dict[str, str] = {}
        # automatic control dependencies, per function body (branches and loop bodies are
        # functions of their own in TF2): resource -> last node touching it
        self.last_touch: dict[str, str] = {}
        self.jit_scopes = 0  # tf.xla.experimental.jit_scope's per-graph counter


class _GraphBuilder:
    def __init__(self, program: Program, devices: int):
        from jitsim.graph import protos

        self.p = program
        self.protos = protos
        self.devices = max(1, devices)
        self.types = program.types()
        self.gd = protos.GraphDef()
        self.gd.versions.producer = 2474
        self.used: set[str] = set()
        self.fns = {f.name: f for f in program.functions}
        self.vars = {v.name: v for v in program.variables}
        self.made_functions: set[str] = set()

    # -- nodes ----------------------------------------------------------------------------------
    def dev(self, d: int) -> str:
        return CPU.format(min(d, self.devices - 1))

    def uniq(self, name: str) -> str:
        base, k = name, 0
        while name in self.used:
            k += 1
            name = f"{base}_{k}"
        self.used.add(name)
        return name

    def node(self, name: str, op: str, inputs: list[str], attrs: dict, device: int, ctx: _Ctx | None,
             ctrl: list[str] = (), in_types: list | None = None):
        from jitsim.registry import op_def

        nd = self.gd.node.add(name=self.uniq(name), op=op, device=self.dev(device))
        nd.input.extend(inputs)
        if not inputs and ctx is not None and ctx.anchor:
            nd.input.append("^" + ctx.anchor)
        nd.input.extend("^" + c for c in ctrl if c)
        od = op_def(op)
        if od is not None and in_types is not None:
            args = list(od.input_arg)
            if len(args) == 1 and (args[0].number_attr or args[0].type_list_attr):
                if args[0].number_attr:
                    attrs.setdefault(args[0].number_attr, len(in_types))
                if args[0].type_list_attr:
                    attrs.setdefault(args[0].type_list_attr, [DType(t) for t in in_types])
                elif args[0].type_attr:
                    attrs.setdefault(args[0].type_attr, DType(in_types[0]))
            else:
                for a, t in zip(args, in_types):
                    if a.type_attr and t is not None:
                        attrs.setdefault(a.type_attr, DType(t))
        for k, v in attrs.items():
            _set_attr(nd.attr[k], v)
        if od is not None:
            for a in od.attr:
                if a.name not in nd.attr and a.HasField("default_value"):
                    nd.attr[a.name].CopyFrom(a.default_value)
        return nd

    def const(self, name: str, dtype: str, dims: tuple, values: list, device: int, ctx, ctrl=()) -> str:
        nd = self.node(name, "Const", [], {"dtype": DType(dtype)}, device, ctx, list(ctrl))
        t = nd.attr["value"].tensor
        t.dtype = DTYPES[dtype][2]
        t.tensor_shape.SetInParent()
        for d in dims:
            t.tensor_shape.dim.add(size=d)
        if dtype == "f":
            t.float_val.extend(values)
        elif dtype in ("i", "h"):
            t.int_val.extend(int(v) for v in values)
        elif dtype == "b":
            t.bool_val.extend(values)
        else:
            t.string_val.extend(values)
        return nd.name

    # -- values across control-flow contexts ------------------------------------------------------
    def lookup(self, ctx: _Ctx, name: str) -> str:
        if name in ctx.values:
            return ctx.values[name]
        if ctx.parent is None:
            raise KeyError(name)
        outer = self.lookup(ctx.parent, name)
        key = (id(ctx.cache), outer)
        ref = ctx.cache.get(key)
        dtype = self.types[name][0] if name in self.types else "r"
        if ref is None:
            if ctx.kind == "branch":
                sw = self.node(f"{ctx.frame}/{name}_switch", "Switch", [outer, ctx.pred], {}, 0, None,
                               in_types=[dtype, "b"])
                ref = ctx.cache[key] = sw.name
            else:  # loop body: a loop-invariant Enter
                en = self.node(f"{ctx.frame}/{name}_enter", "Enter", [outer],
                               {"frame_name": ctx.frame, "is_constant": True}, 0, None, in_types=[dtype])
                ref = ctx.cache[key] = en.name
        if ctx.kind == "branch":
            return f"{ref}:1" if ctx.branch == 1 else ref
        return ref

    # -- statements ------------------------------------------------------------------------------
    def expr(self, e, args: list[str], arg_types: list[str], base: str, top: bool, device: int, ctx,
             ctrl=()) -> tuple[str, str]:
        """Render an expansion; returns (tensor ref, dtype code)."""
        if isinstance(e, Arg):
            return args[e.i], arg_types[e.i]
        if isinstance(e, C):
            return self.const(f"{base}/const", e.dtype, e.dims, list(e.values), device, ctx), e.dtype
        ins, types = [], []
        for x in e.inputs:
            r, t = self.expr(x, args, arg_types, base, False, device, ctx)
            ins.append(r)
            types.append(t)
        attrs = dict(e.attrs)
        if e.op == "EagerPyFunc":
            attrs.setdefault("token", f"pyfunc_{len(self.used)}")
        nd = self.node(base if top else f"{base}/{e.op}", e.op, ins, attrs, device, ctx, list(ctrl), in_types=types)
        ref = nd.name if e.out == 0 else f"{nd.name}:{e.out}"
        return ref, _result_dtype(e, types)

    def block(self, b: Block, ctx: _Ctx) -> None:
        for s in b.stmts:
            self.stmt(s, ctx)

    def ctrl_refs(self, s, ctx) -> list[str]:
        out = []
        for c in getattr(s, "ctrl", ()):
            if c in ctx.effects:
                out.append(ctx.effects[c])
            else:
                out.append(self.lookup(ctx, c).split(":")[0])
        return out

    def stmt(self, s, ctx: _Ctx) -> None:
        if isinstance(s, Op):
            k = CATALOG[s.kind]
            args = [self.lookup(ctx, a) for a in s.args]
            types = [self.types[a][0] for a in s.args]
            shapes = tuple(self.types[a][1] for a in s.args)
            ctrl = self.ctrl_refs(s, ctx)
            if k.stateful and s.kind != "CheckNumerics":
                ctrl += self.prev_effect(ctx, "<stateful>")
            first = len(self.gd.node)
            ref, _ = self.expr(k.build(shapes), args, types, s.out, True, s.device, ctx, ctrl)
            if s.xla is not None:
                for nd in self.gd.node[first:]:
                    nd.attr["_XlaCompile"].b = s.xla
                    nd.attr["_XlaSeparateCompiledGradients"].b = False
                    nd.attr["_XlaScope"].s = f"jit_scope_{ctx.jit_scopes}".encode()
                ctx.jit_scopes += 1
            if k.stateful and s.kind != "CheckNumerics":
                ctx.last_touch["<stateful>"] = ref.split(":")[0]
            ctx.values[s.out] = ref
        elif isinstance(s, Const):
            ctx.values[s.out] = self.const(s.out, s.dtype, SHAPES[s.shape], const_values(s.dtype, s.shape, s.seed),
                                           s.device, ctx, self.ctrl_refs(s, ctx))
        elif isinstance(s, Read):
            v = self.vars[s.var]
            h = self.lookup(ctx, s.var)
            ctrl = self.ctrl_refs(s, ctx) + self.prev_effect(ctx, s.var)
            if s.gather:
                idx = [3, 2, 1, 0] if v.shape == "v" else [1, 0]
                c = self.const(f"{s.out}/indices", "i", (len(idx),), idx, s.device, ctx)
                nd = self.node(s.out, "ResourceGather", [h, c], {"dtype": DType(v.dtype), "Tindices": DType("i")},
                               s.device, ctx, ctrl)
            else:
                nd = self.node(s.out, "ReadVariableOp", [h], {"dtype": DType(v.dtype)}, s.device, ctx, ctrl)
            ctx.last_touch[s.var] = nd.name
            ctx.values[s.out] = nd.name
        elif isinstance(s, Write):
            v = self.vars[s.var]
            h = self.lookup(ctx, s.var)
            if s.value is None:
                val = self.const(f"{s.out}/value", v.dtype, SHAPES[v.shape],
                                 [1.0 if v.dtype == "f" else 1] * len(const_values(v.dtype, v.shape, 0)), s.device, ctx)
            else:
                val = self.lookup(ctx, s.value)
            ctrl = self.ctrl_refs(s, ctx) + self.prev_effect(ctx, s.var)
            if s.how == "scatter_add":
                idx = [0, 1, 2, 3] if v.shape == "v" else [0, 1]
                c = self.const(f"{s.out}/indices", "i", (len(idx),), idx, s.device, ctx)
                nd = self.node(s.out, "ResourceScatterAdd", [h, c, val], {"dtype": DType(v.dtype),
                                                                          "Tindices": DType("i")}, s.device, ctx, ctrl)
            else:
                nd = self.node(s.out, _VAR_OPS[s.how], [h, val], {"dtype": DType(v.dtype)}, s.device, ctx, ctrl)
            ctx.last_touch[s.var] = nd.name
            ctx.effects[s.out] = nd.name
        elif isinstance(s, Print):
            x = self.lookup(ctx, s.arg)
            fmt = self.node(f"{s.out}/StringFormat", "StringFormat", [x], {"template": "{}", "placeholder": "{}"},
                            s.device, ctx, in_types=[self.types[s.arg][0]])
            nd = self.node(s.out, "PrintV2", [fmt.name], {}, s.device, ctx,
                           self.ctrl_refs(s, ctx) + self.prev_effect(ctx, "<stateful>"))
            ctx.last_touch["<stateful>"] = nd.name
            ctx.effects[s.out] = nd.name
        elif isinstance(s, Group):
            deps = [ctx.effects[d] if d in ctx.effects else self.lookup(ctx, d).split(":")[0] for d in s.deps]
            nd = self.node(s.out, "NoOp", [], {}, s.device, None, deps)
            ctx.effects[s.out] = nd.name
        elif isinstance(s, Cond):
            self.cond(s, ctx)
        elif isinstance(s, While):
            self.loop(s, ctx)
        elif isinstance(s, Call):
            self.call(s, ctx)
        else:
            raise TypeError(s)

    @staticmethod
    def prev_effect(ctx: _Ctx, resource: str) -> list[str]:
        prev = ctx.last_touch.get(resource)
        return [prev] if prev else []

    def cond(self, s: Cond, ctx: _Ctx) -> None:
        p = self.lookup(ctx, s.pred)
        pshape = self.types[s.pred][1]
        axes = list(range(len(SHAPES[pshape])))
        ax = self.const(f"{s.out}/axes", "i", (len(axes),), axes, 0, ctx)
        sm = self.node(f"{s.out}/Sum", "Sum", [p, ax], {}, 0, ctx, in_types=["f", "i"])
        zero = self.const(f"{s.out}/zero", "f", (), [0.0], 0, ctx)
        gt = self.node(f"{s.out}/Greater", "Greater", [sm.name, zero], {}, 0, ctx, in_types=["f", "f"])
        sp = self.node(f"{s.out}/switch_pred", "Switch", [gt.name, gt.name], {}, 0, ctx, in_types=["b", "b"])
        pf = self.node(f"{s.out}/pivot_f", "Identity", [sp.name], {}, 0, ctx, in_types=["b"])
        pt = self.node(f"{s.out}/pivot_t", "Identity", [f"{sp.name}:1"], {}, 0, ctx, in_types=["b"])
        cache: dict = {}
        res = []
        for branch, blk, piv in ((1, s.then, pt.name), (0, s.else_, pf.name)):
            c = _Ctx(ctx, "branch", anchor=piv, pred=gt.name, branch=branch, frame=s.out, cache=cache)
            self.block(blk, c)
            res.append(self.lookup(c, blk.result))
        m = self.node(f"{s.out}", "Merge", res, {}, 0, ctx, in_types=[s.dtype, s.dtype])
        ctx.values[s.out] = m.name

    def loop(self, s: While, ctx: _Ctx) -> None:
        frame = s.out
        zero = self.const(f"{s.out}/counter", "i", (), [0], 0, ctx)
        e_i = self.node(f"{s.out}/enter_i", "Enter", [zero], {"frame_name": frame}, 0, None, in_types=["i"])
        e_x = self.node(f"{s.out}/enter_x", "Enter", [self.lookup(ctx, s.init)], {"frame_name": frame}, 0, None,
                        in_types=[s.dtype])
        m_i = self.node(f"{s.out}/merge_i", "Merge", [e_i.name, e_i.name], {}, 0, None, in_types=["i", "i"])
        m_x = self.node(f"{s.out}/merge_x", "Merge", [e_x.name, e_x.name], {}, 0, None, in_types=[s.dtype, s.dtype])
        lim = self.const(f"{s.out}/limit", "i", (), [s.iters], 0, None, ctrl=[m_i.name])
        less = self.node(f"{s.out}/Less", "Less", [m_i.name, lim], {}, 0, None, in_types=["i", "i"])
        lc = self.node(f"{s.out}/LoopCond", "LoopCond", [less.name], {}, 0, None)
        sw_i = self.node(f"{s.out}/switch_i", "Switch", [m_i.name, lc.name], {}, 0, None, in_types=["i", "b"])
        sw_x = self.node(f"{s.out}/switch_x", "Switch", [m_x.name, lc.name], {}, 0, None, in_types=[s.dtype, "b"])
        bc = self.node(f"{s.out}/loop_body_control", "Identity", [f"{sw_i.name}:1"], {}, 0, None, in_types=["i"])
        body = _Ctx(ctx, "loop", anchor=bc.name, frame=frame)
        body.values[s.var] = f"{sw_x.name}:1"
        one = self.const(f"{s.out}/one", "i", (), [1], 0, body)
        inc = self.node(f"{s.out}/add", "AddV2", [f"{sw_i.name}:1", one], {}, 0, None, in_types=["i", "i"])
        self.block(s.body, body)
        res = self.lookup(body, s.body.result)
        n_i = self.node(f"{s.out}/next_i", "NextIteration", [inc.name], {}, 0, None, [bc.name], in_types=["i"])
        n_x = self.node(f"{s.out}/next_x", "NextIteration", [res], {}, 0, None, [bc.name], in_types=[s.dtype])
        m_i.input[1] = n_i.name
        m_x.input[1] = n_x.name
        self.node(f"{s.out}/exit_i", "Exit", [sw_i.name], {}, 0, None, in_types=["i"])
        ex = self.node(f"{s.out}", "Exit", [sw_x.name], {}, 0, None, in_types=[s.dtype])
        ctx.values[s.out] = ex.name

    def call(self, s: Call, ctx: _Ctx) -> None:
        fn = self.fns[s.fn]
        args = [self.lookup(ctx, a) for a in s.args]
        if fn.jit is None:  # TF inlines plain nested functions
            inner = _Ctx(None, "inline", anchor=ctx.anchor)
            inner.values = {q.name: a for q, a in zip(fn.params, args)}
            self.block(fn.body, inner)
            ctx.values[s.out] = inner.values[fn.body.result]
            return
        fname = self.function_def(fn)
        attrs = {"f": _Func(fname), "Tin": [DType(q.dtype) for q in fn.params], "Tout": [DType(s.dtype)],
                 "_XlaMustCompile": bool(fn.jit)}
        nd = self.node(s.out, "PartitionedCall", args, attrs, s.device, ctx)
        ctx.values[s.out] = nd.name

    def function_def(self, fn: Function) -> str:
        from jitsim.registry import op_def

        name = f"__inference_{fn.name}"
        if name in self.made_functions:
            return name
        self.made_functions.add(name)
        sub = _GraphBuilder(self.p, self.devices)
        sub.types = self.types
        ctx = _Ctx(None)
        ctx.values = {q.name: q.name for q in fn.params}
        sub.block(fn.body, ctx)
        fd = self.gd.library.function.add()
        fd.signature.name = name
        for q in fn.params:
            fd.signature.input_arg.add(name=q.name, type=DTYPES[q.dtype][2])
        rt = self.types[fn.body.result][0]
        fd.signature.output_arg.add(name="output", type=DTYPES[rt][2])
        if fn.jit is not None:
            fd.attr["_XlaMustCompile"].b = bool(fn.jit)
        params = {q.name for q in fn.params}
        ops = {n.name: n.op for n in sub.gd.node}

        def conv(ref: str) -> str:
            if ref.startswith("^"):
                return ref
            src, _, idx = ref.partition(":")
            if src in params:
                return src
            od = op_def(ops[src])
            k = int(idx or 0)
            return f"{src}:{od.output_arg[k].name if k < len(od.output_arg) else od.output_arg[0].name}:0"

        for n in sub.gd.node:
            nd = fd.node_def.add()
            nd.CopyFrom(n)
            nd.ClearField("device")
            del nd.input[:]
            nd.input.extend(conv(i) for i in n.input)
        fd.ret["output"] = conv(ctx.values[fn.body.result] if fn.body.result in ctx.values else fn.body.result)
        return name

    def build(self):
        p = self.p
        top = _Ctx(None)
        for i, x in enumerate(p.inputs):
            nd = self.node(x.name, "_Arg", [], {"T": DType(x.dtype), "index": i}, 0, None)
            top.values[x.name] = nd.name
        for j, v in enumerate(p.variables):
            nd = self.node(v.name, "_Arg", [], {"T": _Raw(DT_RESOURCE), "index": len(p.inputs) + j}, 0, None)
            nd.attr["_handle_dtypes"].list.type.append(DTYPES[v.dtype][2])
            sh = nd.attr["_handle_shapes"].list.shape.add()
            for d in SHAPES[v.shape]:
                sh.dim.add(size=d)
            top.values[v.name] = nd.name
        self.block(p.body, top)
        for i, o in enumerate(p.outputs()):
            self.node(f"{o}_RetVal", "_Retval", [top.values[o]], {"T": DType(self.types[o][0]), "index": i}, 0, None)
        return self.gd


@dataclass(frozen=True)
class _Func:
    name: str


@dataclass(frozen=True)
class _Raw:
    dtype: int


def _set_attr(av, v) -> None:
    from jitsim.graph.model import set_attr_value

    if isinstance(v, DType):
        av.type = DTYPES[v.code][2]
    elif isinstance(v, _Raw):
        av.type = v.dtype
    elif isinstance(v, _Func):
        av.func.name = v.name
    elif isinstance(v, list):
        av.list.SetInParent()
        for x in v:
            if isinstance(x, DType):
                av.list.type.append(DTYPES[x.code][2])
            elif isinstance(x, int):
                av.list.i.append(x)
            else:
                raise TypeError(x)
    else:
        set_attr_value(av, v)


def _result_dtype(e: E, types: list[str]) -> str:
    for k, v in e.attrs:
        if k in ("DstT", "out_type", "dtype", "out_idx") and isinstance(v, DType):
            if e.op == "Unique" and e.out == 0:
                break
            return v.code
    if e.op in ("Greater", "Less", "LogicalAnd", "LogicalNot"):
        return "b"
    if e.op == "Where":
        return "l"
    if e.op == "AsString" or e.op == "StringJoin":
        return "s"
    if e.op == "StringLength":
        return "i"
    if e.op == "SelectV2":
        return types[1]
    if e.op == "Slice" or not types:
        return types[0] if types else "f"
    return types[0]


def to_graphdef(program: Program, *, devices: int = 2):
    """The program as a GraphDef shaped like TF's ``before_clone_constants...`` dump."""
    return _GraphBuilder(program, devices).build()


def to_graph(program: Program, *, devices: int = 2):
    from jitsim.graph.model import Graph

    return Graph(to_graphdef(program, devices=devices), source="before_clone_constants_for_better_clustering.pbtxt")


# -- validation ---------------------------------------------------------------------------------


def validate(program: Program) -> None:
    """Raise ValueError unless every reference names a value in scope with the right type."""
    types = program.types()
    variables = {v.name: v for v in program.variables}
    fns = {f.name: f for f in program.functions}
    seen: set[str] = set()

    def need(name, scope, what):
        if name not in scope:
            raise ValueError(f"{what} refers to {name!r}, which is not in scope")

    def block(b: Block, scope: set[str]):
        scope = set(scope)
        local: set[str] = set()
        for s in b.stmts:
            if s.out in seen:
                raise ValueError(f"{s.out!r} is defined twice")
            seen.add(s.out)
            for c in getattr(s, "ctrl", ()):
                need(c, local, f"control dependency of {s.out}")
            if isinstance(s, Op):
                k = CATALOG[s.kind]
                if len(s.args) != len(k.ins):
                    raise ValueError(f"{s.out}: {s.kind} takes {len(k.ins)} arguments")
                for a, d in zip(s.args, k.ins):
                    need(a, scope, s.out)
                    if types[a][0] != d:
                        raise ValueError(f"{s.out}: argument {a} has dtype {types[a][0]}, {s.kind} wants {d}")
                shapes = [types[a][1] for a in s.args]
                if k.ins:
                    if shapes[0] not in k.first_shapes() or any(x not in k.other_shapes(shapes[0]) for x in shapes[1:]):
                        raise ValueError(f"{s.out}: {s.kind} cannot take shapes {shapes}")
            elif isinstance(s, (Read, Write)):
                if s.var not in variables:
                    raise ValueError(f"{s.out}: no variable {s.var}")
                if isinstance(s, Write) and s.value is not None:
                    need(s.value, scope, s.out)
                    v = variables[s.var]
                    if types[s.value] != (v.dtype, v.shape):
                        raise ValueError(f"{s.out}: {s.value} does not match {s.var}'s type")
            elif isinstance(s, Print):
                need(s.arg, scope, s.out)
            elif isinstance(s, Group):
                if not s.deps:
                    raise ValueError(f"{s.out}: an empty group")
                for d in s.deps:
                    need(d, local, s.out)
            elif isinstance(s, Cond):
                need(s.pred, scope, s.out)
                if types[s.pred][0] != "f":
                    raise ValueError(f"{s.out}: predicate {s.pred} is not a float")
                for blk in (s.then, s.else_):
                    inner = block(blk, scope)
                    need(blk.result, inner, f"result of {s.out}")
                    if types[blk.result] != (s.dtype, s.shape):
                        raise ValueError(f"{s.out}: branch result {blk.result} has the wrong type")
            elif isinstance(s, While):
                need(s.init, scope, s.out)
                if types[s.init] != (s.dtype, s.shape):
                    raise ValueError(f"{s.out}: init {s.init} has the wrong type")
                inner = block(s.body, scope | {s.var})
                need(s.body.result, inner, f"result of {s.out}")
                if types[s.body.result] != (s.dtype, s.shape):
                    raise ValueError(f"{s.out}: body result has the wrong type")
            elif isinstance(s, Call):
                fn = fns.get(s.fn)
                if fn is None or len(fn.params) != len(s.args):
                    raise ValueError(f"{s.out}: bad call of {s.fn}")
                for a, q in zip(s.args, fn.params):
                    need(a, scope, s.out)
                    if types[a] != (q.dtype, q.shape):
                        raise ValueError(f"{s.out}: argument {a} does not match {q.name}")
                if types[fn.body.result] != (s.dtype, s.shape):
                    raise ValueError(f"{s.out}: result type of {s.fn} differs")
            scope.add(s.out)
            local.add(s.out)
        return scope

    for fn in program.functions:
        for s in fn.body.stmts:
            if not isinstance(s, (Op, Const)) or getattr(s, "ctrl", ()):
                raise ValueError(f"function {fn.name} may only hold plain Op and Const statements")
        need(fn.body.result, block(fn.body, {q.name for q in fn.params}), f"result of {fn.name}")
    block(program.body, {x.name for x in program.inputs} | set(variables))


# -- reductions (shrinking without Hypothesis) ----------------------------------------------------


def _rename_refs(s, m: dict):
    """Statement ``s`` with the values it reads renamed by ``m`` (control deps on renamed
    values are dropped: they must name statements of the same block)."""
    r = lambda n: m.get(n, n)  # noqa: E731
    if hasattr(s, "ctrl") and s.ctrl:
        s = dataclasses.replace(s, ctrl=tuple(c for c in s.ctrl if c not in m))
    if isinstance(s, Op):
        return dataclasses.replace(s, args=tuple(r(a) for a in s.args))
    if isinstance(s, Write) and s.value is not None:
        return dataclasses.replace(s, value=r(s.value))
    if isinstance(s, Print):
        return dataclasses.replace(s, arg=r(s.arg))
    if isinstance(s, Group):
        return dataclasses.replace(s, deps=tuple(d for d in s.deps if d not in m))
    if isinstance(s, Cond):
        return dataclasses.replace(s, pred=r(s.pred), then=_rename_block(s.then, m), else_=_rename_block(s.else_, m))
    if isinstance(s, While):
        return dataclasses.replace(s, init=r(s.init), body=_rename_block(s.body, m))
    if isinstance(s, Call):
        return dataclasses.replace(s, args=tuple(r(a) for a in s.args))
    return s


def _rename_block(b: Block, m: dict) -> Block:
    return Block(tuple(_rename_refs(s, m) for s in b.stmts), m.get(b.result, b.result) if b.result else b.result)


def _rename_defs(b: Block, m: dict) -> Block:
    """Rename definitions *and* uses (for inlining a function body twice)."""
    out = []
    for s in _rename_block(b, m).stmts:
        s = dataclasses.replace(s, out=m.get(s.out, s.out))
        if isinstance(s, Op) and s.ctrl:
            s = dataclasses.replace(s, ctrl=tuple(m.get(c, c) for c in s.ctrl))
        out.append(s)
    return Block(tuple(out), m.get(b.result, b.result) if b.result else b.result)


def _blocks(p: Program):
    """(path, block) for every block; path = ("main"|"fn", i, then stmt index/branch pairs)."""
    def rec(path, b):
        yield path, b
        for k, s in enumerate(b.stmts):
            if isinstance(s, Cond):
                yield from rec(path + ((k, "then"),), s.then)
                yield from rec(path + ((k, "else_"),), s.else_)
            elif isinstance(s, While):
                yield from rec(path + ((k, "body"),), s.body)
    yield from rec(("main",), p.body)
    for i, fn in enumerate(p.functions):
        yield from rec(("fn", i), fn.body)


def _set_block(p: Program, path: tuple, new: Block) -> Program:
    def rec(b: Block, steps) -> Block:
        if not steps:
            return new
        (k, attr), rest = steps[0], steps[1:]
        s = b.stmts[k]
        s = dataclasses.replace(s, **{attr: rec(getattr(s, attr), rest)})
        return Block(b.stmts[:k] + (s,) + b.stmts[k + 1:], b.result)

    if path[0] == "main":
        return dataclasses.replace(p, body=rec(p.body, path[1:]))
    i = path[1]
    fn = p.functions[i]
    fns = list(p.functions)
    fns[i] = dataclasses.replace(fn, body=rec(fn.body, path[2:]))
    return dataclasses.replace(p, functions=tuple(fns))


def _without(b: Block, k: int, rename: dict | None = None, insert: tuple = ()) -> Block:
    """Block ``b`` with statement k replaced by ``insert`` and later uses renamed."""
    rename = rename or {}
    gone = b.stmts[k].out
    rest = tuple(_rename_refs(s, {**rename, gone: rename.get(gone, gone)}) if rename else s for s in b.stmts[k + 1:])
    rest = tuple(dataclasses.replace(s, ctrl=tuple(c for c in s.ctrl if c != gone)) if getattr(s, "ctrl", ()) else s
                 for s in rest)
    rest = tuple(dataclasses.replace(s, deps=tuple(d for d in s.deps if d != gone)) if isinstance(s, Group) else s
                 for s in rest)
    rest = tuple(s for s in rest if not (isinstance(s, Group) and not s.deps))
    res = rename.get(b.result, b.result) if b.result else b.result
    return Block(b.stmts[:k] + tuple(insert) + rest, res)


def chunk_reductions(p: Program) -> Iterator[Program]:
    """Big steps for shrinking large programs (delta debugging): drop a run of the top block's
    statements at once, halves first, then quarters...; a dropped value still used later
    becomes a constant of its type."""
    types = p.types()
    stmts = p.body.stmts
    n = len(stmts)
    k = n // 2
    while k >= 2:
        for start in range(0, n, k):
            gone = stmts[start:start + k]
            later = Block(stmts[start + k:], p.body.result)
            used: set[str] = set()
            for st in _walk(later):
                used.update(_refs(st))
            names = {st.out for st in gone}
            keep = tuple(Const(st.out, *types[st.out]) for st in gone if st.out in used and _is_value(st))
            rest = tuple(_strip_refs(st, names - {c.out for c in keep}) for st in later.stmts)
            q = dataclasses.replace(p, body=Block(stmts[:start] + keep + rest, p.body.result))
            try:
                validate(q)
            except (ValueError, KeyError, StopIteration):
                continue
            yield q
        k //= 2


def _strip_refs(s, names: set):
    """Statement ``s`` without control deps / group deps on ``names``."""
    if getattr(s, "ctrl", ()):
        s = dataclasses.replace(s, ctrl=tuple(c for c in s.ctrl if c not in names))
    if isinstance(s, Group):
        s = dataclasses.replace(s, deps=tuple(d for d in s.deps if d not in names))
    return s


def reductions(p: Program) -> Iterator[Program]:
    """Smaller variants of ``p`` (each one step simpler and still valid), biggest steps first:
    inline control flow and calls, replace statements by constants, delete effects and unused
    constants, forward an op's argument, drop control deps / devices / jit, drop unused
    inputs, variables and functions."""
    types = p.types()
    used: set[str] = set()
    for _, b in _blocks(p):
        for s in b.stmts:
            used.update(_refs(s))
    out: list[Program] = []
    fns = {f.name: f for f in p.functions}
    for path, b in _blocks(p):
        for k, s in enumerate(b.stmts):
            if isinstance(s, Cond):
                for blk in (s.then, s.else_):
                    out.append(_set_block(p, path, _without(b, k, {s.out: blk.result}, blk.stmts)))
            elif isinstance(s, While):
                body = _rename_block(s.body, {s.var: s.init})
                res = s.init if s.body.result == s.var else s.body.result
                out.append(_set_block(p, path, _without(b, k, {s.out: res}, body.stmts)))
            elif isinstance(s, Call):
                fn = fns[s.fn]
                m = {q.name: a for q, a in zip(fn.params, s.args)}
                m.update({t.out: f"{t.out}_{s.out}" for t in fn.body.stmts})
                body = _rename_defs(fn.body, m)
                out.append(_set_block(p, path, _without(b, k, {s.out: body.result}, body.stmts)))
    for path, b in _blocks(p):
        for k, s in enumerate(b.stmts):
            if s.out not in used and b.result != s.out and not (path[0] == "fn" and k == len(b.stmts) - 1):
                out.append(_set_block(p, path, _without(b, k)))
    for path, b in _blocks(p):
        for k, s in enumerate(b.stmts):
            if isinstance(s, (Write, Print, Group)):
                out.append(_set_block(p, path, _without(b, k)))
            elif isinstance(s, Const):
                if s.out not in used:
                    out.append(_set_block(p, path, _without(b, k)))
            else:
                dtype, shape = types[s.out]
                c = Const(s.out, dtype, shape)
                out.append(_set_block(p, path, Block(b.stmts[:k] + (c,) + b.stmts[k + 1:], b.result)))
                if isinstance(s, Op):
                    for a in dict.fromkeys(s.args):
                        if types[a] == (dtype, shape):
                            out.append(_set_block(p, path, _without(b, k, {s.out: a})))
    for path, b in _blocks(p):
        for k, s in enumerate(b.stmts):
            simpler = {}
            if getattr(s, "ctrl", ()):
                simpler["ctrl"] = ()
            if getattr(s, "device", 0):
                simpler["device"] = 0
            if isinstance(s, While) and s.iters > 1:
                simpler["iters"] = 1
            if isinstance(s, Const) and s.seed:
                simpler["seed"] = 0
            if isinstance(s, Op) and s.xla is not None:
                simpler["xla"] = None
            if isinstance(s, Group) and len(s.deps) > 1:
                simpler["deps"] = s.deps[:1]
            for key, val in simpler.items():
                t = dataclasses.replace(s, **{key: val})
                out.append(_set_block(p, path, Block(b.stmts[:k] + (t,) + b.stmts[k + 1:], b.result)))
    for i, fn in enumerate(p.functions):
        if fn.jit is not None:
            fs = list(p.functions)
            fs[i] = dataclasses.replace(fn, jit=None)
            out.append(dataclasses.replace(p, functions=tuple(fs)))
    called = {s.fn for _, b in _blocks(p) for s in b.stmts if isinstance(s, Call)}
    p_fns = tuple(f for f in p.functions if f.name in called)
    if len(p_fns) < len(p.functions):
        out.append(dataclasses.replace(p, functions=p_fns))
    read_vars = {s.var for _, b in _blocks(p) for s in b.stmts if isinstance(s, (Read, Write))}
    p_vars = tuple(v for v in p.variables if v.name in read_vars)
    if len(p_vars) < len(p.variables):
        out.append(dataclasses.replace(p, variables=p_vars))
    if p.grad:
        out.append(dataclasses.replace(p, grad=False))
    if p.dynamic:
        out.append(dataclasses.replace(p, dynamic=False))
    p_in = tuple(x for i, x in enumerate(p.inputs) if i == 0 or x.name in used)
    if len(p_in) < len(p.inputs):
        out.append(dataclasses.replace(p, inputs=p_in))
    seen = set()
    for q in out:
        key = repr(q)
        if key in seen or q == p:
            continue
        seen.add(key)
        try:
            validate(q)
        except (ValueError, KeyError, StopIteration):
            continue
        yield q


# -- serialization (reproducers keep the program, not only its source) ----------------------------

_CLASSES = {c.__name__: c for c in (Val, Op, Const, Read, Write, Print, Group, Block, Cond, While, Call, Variable,
                                     Function, Program)}


def program_to_json(p: Program) -> dict:
    """A JSON-ready form of ``p`` (``program_from_json`` reads it back)."""
    def enc(x):
        if dataclasses.is_dataclass(x):
            return {"_": type(x).__name__, **{f.name: enc(getattr(x, f.name)) for f in dataclasses.fields(x)}}
        if isinstance(x, tuple):
            return [enc(y) for y in x]
        return x

    return enc(p)


def program_from_json(d: dict) -> Program:
    def dec(x, tuple_ok=True):
        if isinstance(x, dict):
            cls = _CLASSES[x["_"]]
            return cls(**{k: dec(v) for k, v in x.items() if k != "_"})
        if isinstance(x, list):
            return tuple(dec(y) for y in x)
        return x

    p = dec(d)
    validate(p)
    return p
