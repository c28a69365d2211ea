"""The program model: value types, the op catalogue, statements, :class:`Program` and
:func:`validate` (see :mod:`jitsim.testing.program` for what a program is)."""

from __future__ import annotations

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
        called = {s.fn for s in walk(self.body) if isinstance(s, Call)}
        return _block_size(self.body) + sum(_block_size(f.body) for f in self.functions if f.name in called)

    def shrink_key(self) -> tuple:
        """A strict order for shrinking: smaller is simpler (constants count least)."""
        called = {st.fn for st in walk(self.body) if isinstance(st, Call)}
        blocks = [self.body] + [f.body for f in self.functions if f.name in called]
        consts = sum(1 for b in blocks for st in walk(b) if isinstance(st, Const))
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
        for s in walk(self.body):
            used.update(reads(s))
        cands = [v.name for v in self.inputs] + [s.out for s in self.body.stmts if is_value(s)]
        outs = [n for n in cands if n not in used and not n.startswith("x")]
        return outs[::-1] if outs else ([self.body.stmts[-1].out] if self.body.stmts and is_value(self.body.stmts[-1])
                                        else [v.name for v in self.inputs[:1]])


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


def is_value(s) -> bool:
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


def walk(b: Block) -> Iterator:
    for s in b.stmts:
        yield s
        if isinstance(s, Cond):
            yield from walk(s.then)
            yield from walk(s.else_)
        elif isinstance(s, While):
            yield from walk(s.body)


def reads(s) -> list[str]:
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


VAR_OPS = {"assign": "AssignVariableOp", "add": "AssignAddVariableOp", "sub": "AssignSubVariableOp"}


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
