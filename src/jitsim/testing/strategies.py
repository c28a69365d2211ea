"""Hypothesis strategies for generated TensorFlow programs and the TF_XLA_FLAGS that matter.

>>> from hypothesis import given, settings
>>> @settings(max_examples=5, database=None, derandomize=True)
... @given(programs(max_statements=4))
... def check(p):
...     assert p.size() >= 1
>>> check()

Every draw is a valid program by construction (arguments are chosen among the values in
scope with the right dtype and shape), so Hypothesis shrinks counterexamples towards short
chains of ``Sin`` over one float vector input: the first choice of every list below is the
simplest one.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass
from typing import Iterator

from hypothesis import strategies as st

from jitsim.testing.program import (
    CATALOG, Block, Call, Cond, Const, Function, Group, Op, Print, Program, Read, Val, Variable, While, Write,
)

BASE_FLAGS = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_clustering_debug"


@contextmanager
def same_draws_everywhere() -> Iterator[None]:
    """Make seeded draws depend on the seed alone.

    Hypothesis (6.13x and later) mixes into its draws the literals it finds in the "local"
    modules already imported (any module outside site-packages: jitsim itself in an editable
    install, the caller's script...), so the same ``@seed`` gave different programs depending on
    what the process had imported first. Inside this block Hypothesis sees no local literals.
    Uses a Hypothesis internal; if it moves, draws are merely less reproducible.
    """
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover - other Hypothesis layouts
        yield
        return
    get = getattr(providers, "_get_local_constants", None)
    empty = getattr(providers, "Constants", None)
    if get is None or empty is None:  # pragma: no cover
        yield
        return
    cache = getattr(getattr(providers, "CONSTANTS_CACHE", None), "cache", None)

    def clear() -> None:  # the permitted-constants cache may hold local literals already
        if cache is not None:
            cache.clear()

    providers._get_local_constants = lambda: empty()
    clear()
    try:
        yield
    finally:
        providers._get_local_constants = get
        clear()

# op kinds by feature (the rest is plain compilable math)
STRING_KINDS = frozenset({"AsString", "IntAsString", "StringToNumber", "StringLength", "StringJoin"})
DYNAMIC_KINDS = frozenset({"WhereCount", "UniqueIdx", "DynSlice"})
STATEFUL_KINDS = frozenset({"PyFunc", "RandomUniform", "RandomNormal", "CheckNumerics"})


@dataclass(frozen=True)
class Features:
    """What generated programs may contain (all on by default)."""

    max_statements: int = 12
    max_depth: int = 2
    block_statements: int = 3
    control_flow: bool = True
    variables: bool = True
    functions: bool = True
    devices: int = 2
    strings: bool = True
    dynamic: bool = True
    stateful: bool = True
    control_deps: bool = True
    prints: bool = True
    groups: bool = True
    jit_scopes: bool = True
    dynamic_shapes: bool = True
    gradients: bool = True


class _Gen:
    def __init__(self, draw, ft: Features):
        self.draw = draw
        self.ft = ft
        self.n = 0
        self.variables: list[Variable] = []
        self.functions: list[Function] = []
        self.multi_device = False
        kinds = []
        for k in CATALOG.values():
            if not ft.strings and k.name in STRING_KINDS:
                continue
            if not ft.dynamic and k.name in DYNAMIC_KINDS:
                continue
            if not ft.stateful and k.name in STATEFUL_KINDS:
                continue
            kinds.append(k)
        self.kinds = kinds

    def name(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}{self.n}"

    # -- choices ---------------------------------------------------------------------------
    def pick(self, cands: list):
        """One of ``cands``; shrinks towards the first (the most recent value)."""
        return cands[self.draw(st.integers(0, len(cands) - 1))]

    def device(self) -> int:
        if not self.multi_device:
            return 0
        return self.draw(st.sampled_from([0, 0, 1]))

    def ctrl(self, local: list[str]) -> tuple:
        if not self.ft.control_deps or not local or not self.draw(st.integers(0, 3)) == 3:
            return ()
        return (self.pick(local[::-1]),)

    def op(self, env: list[Val], local: list[str], pure: bool = False) -> Op | None:
        options = []
        for k in self.kinds:
            if pure and k.stateful:
                continue
            if not k.ins:
                options.append((k, None))
                continue
            for first in k.first_shapes():
                if not any(v.dtype == k.ins[0] and v.shape == first for v in env):
                    continue
                ok = all(any(v.dtype == d and v.shape in k.other_shapes(first) for v in env) for d in k.ins[1:])
                if ok:
                    options.append((k, first))
        if not options:
            return None
        k, first = self.pick(options)
        args = []
        if k.ins:
            firsts = [v for v in reversed(env) if v.dtype == k.ins[0] and v.shape == first]
            a0 = self.pick(firsts)
            args.append(a0.name)
            for d in k.ins[1:]:
                allowed = k.other_shapes(first)
                args.append(self.pick([v for v in reversed(env) if v.dtype == d and v.shape in allowed]).name)
        xla = None
        if not pure and self.ft.jit_scopes and self.draw(st.integers(0, 9)) == 9:
            xla = self.draw(st.booleans())
        return Op(self.name("v"), k.name, tuple(args), self.ctrl(local) if not pure else (),
                  self.device() if not pure else 0, xla)

    def const(self, local: list[str]) -> Const:
        dtype = self.draw(st.sampled_from(["f", "f", "i", "b", "s"] if self.ft.strings else ["f", "f", "i", "b"]))
        shape = self.draw(st.sampled_from(["v", "s", "m"]))
        return Const(self.name("v"), dtype, shape, self.draw(st.integers(0, 9)), self.ctrl(local), self.device())

    # -- blocks ----------------------------------------------------------------------------
    def statement_kinds(self, depth: int) -> list[str]:
        out = ["op", "op", "op", "op", "op", "const"]
        if self.variables:
            out += ["read", "write"]
        if self.ft.prints:
            out.append("print")
        if self.ft.groups:
            out.append("group")
        if self.ft.control_flow and depth < self.ft.max_depth:
            out += ["cond", "while"]
        if self.functions:
            out.append("call")
        return out

    def block(self, env: list[Val], n: int, depth: int) -> tuple[list, list[Val]]:
        """``n`` statements over ``env``; returns them and the values they define."""
        env = list(env)
        stmts: list = []
        local: list[str] = []
        new: list[Val] = []
        kinds = self.statement_kinds(depth)
        for _ in range(n):
            kind = self.draw(st.sampled_from(kinds))
            s = self.statement(kind, env, local, depth)
            if s is None:
                s = self.const(local)
            stmts.append(s)
            local.append(s.out)
            v = self.value_of(s, env)
            if v is not None:
                env.append(v)
                new.append(v)
        return stmts, new

    def value_of(self, s, env: list[Val]) -> Val | None:
        if isinstance(s, Op):
            k = CATALOG[s.kind]
            shapes = {v.name: v.shape for v in env}
            return Val(s.out, k.out, k.out_shape(tuple(shapes[a] for a in s.args)))
        if isinstance(s, Const):
            return Val(s.out, s.dtype, s.shape)
        if isinstance(s, Read):
            var = next(v for v in self.variables if v.name == s.var)
            return Val(s.out, var.dtype, var.shape)
        if isinstance(s, (Cond, While, Call)):
            return Val(s.out, s.dtype, s.shape)
        return None

    def statement(self, kind: str, env: list[Val], local: list[str], depth: int):
        draw = self.draw
        if kind == "op":
            return self.op(env, local)
        if kind == "const":
            return self.const(local)
        if kind == "read":
            var = self.pick(self.variables)
            gather = var.shape != "s" and var.dtype == "f" and draw(st.booleans())
            return Read(self.name("v"), var.name, gather, self.ctrl(local), self.device())
        if kind == "write":
            var = self.pick(self.variables)
            hows = ["assign", "add", "sub"] + (["scatter_add"] if var.shape != "s" else [])
            how = draw(st.sampled_from(hows))
            vals = [v.name for v in reversed(env) if v.dtype == var.dtype and v.shape == var.shape]
            value = None
            if vals and (how != "add" or draw(st.booleans())):
                value = self.pick(vals)
            if value is None and how in ("assign", "scatter_add", "sub"):
                how = "add"
            return Write(self.name("a"), var.name, how, value, self.ctrl(local), self.device())
        if kind == "print":
            return Print(self.name("a"), self.pick(env[::-1]).name, self.ctrl(local), self.device())
        if kind == "group":
            if not local:
                return None
            deps = [self.pick(local[::-1])]
            if len(local) > 1 and draw(st.booleans()):
                deps.append(self.pick(local[::-1]))
            return Group(self.name("a"), tuple(dict.fromkeys(deps)), self.device())
        if kind == "cond":
            floats = [v for v in reversed(env) if v.dtype == "f"]
            if not floats:
                return None
            pred = self.pick(floats)
            target = self.pick(env[::-1])
            out = self.name("v")
            blocks = []
            for _ in range(2):
                n = draw(st.integers(0, self.ft.block_statements))
                stmts, new = self.block(env, n, depth + 1)
                cands = [v.name for v in reversed(env + new) if (v.dtype, v.shape) == (target.dtype, target.shape)]
                blocks.append(Block(tuple(stmts), self.pick(cands)))
            return Cond(out, target.dtype, target.shape, pred.name, blocks[0], blocks[1])
        if kind == "while":
            init = self.pick(env[::-1])
            out = self.name("v")
            var = Val(f"w{out[1:]}", init.dtype, init.shape)
            n = draw(st.integers(0, self.ft.block_statements))
            stmts, new = self.block(env + [var], n, depth + 1)
            cands = [v.name for v in reversed([var] + new) if (v.dtype, v.shape) == (var.dtype, var.shape)]
            return While(out, init.dtype, init.shape, init.name, draw(st.integers(1, 3)), var.name,
                         Block(tuple(stmts), self.pick(cands)))
        if kind == "call":
            fn = self.pick(self.functions)
            args = []
            for q in fn.params:
                cands = [v.name for v in reversed(env) if (v.dtype, v.shape) == (q.dtype, q.shape)]
                if not cands:
                    return None
                args.append(self.pick(cands))
            res = next(v for v in self.fn_values[fn.name] if v.name == fn.body.result)
            return Call(self.name("v"), res.dtype, res.shape, fn.name, tuple(args), self.device())
        raise ValueError(kind)

    def function(self, index: int) -> Function:
        draw = self.draw
        params = [Val(self.name("p"), "f", draw(st.sampled_from(["v", "s", "m"])))
                  for _ in range(draw(st.integers(1, 2)))]
        env = list(params)
        stmts = []
        for _ in range(draw(st.integers(1, 4))):
            s = self.op(env, [], pure=True) or Const(self.name("v"), "f", "v", draw(st.integers(0, 9)))
            stmts.append(s)
            env.append(self.value_of(s, env))
        result = self.pick(env[::-1])
        fn = Function(f"g{index}", tuple(params), Block(tuple(stmts), result.name),
                      draw(st.sampled_from([None, True, False])))
        self.fn_values[fn.name] = env
        return fn

    def program(self) -> Program:
        draw, ft = self.draw, self.ft
        self.multi_device = ft.devices > 1 and draw(st.integers(0, 2)) == 2
        inputs = [Val("x0", "f", "v")]
        for i in range(1, 1 + draw(st.integers(0, 2))):
            dtypes = ["f", "i", "b"] + (["s"] if ft.strings else [])
            inputs.append(Val(f"x{i}", draw(st.sampled_from(dtypes)), draw(st.sampled_from(["v", "m", "s"]))))
        if ft.variables:
            for j in range(draw(st.integers(0, 2))):
                dtype, shape = draw(st.sampled_from([("f", "v"), ("f", "m"), ("i", "s"), ("f", "s")]))
                self.variables.append(Variable(f"var{j}", dtype, shape, draw(st.integers(0, 9))))
        self.fn_values: dict[str, list[Val]] = {}
        if ft.functions:
            for j in range(draw(st.integers(0, 2))):
                self.functions.append(self.function(j))
        n = draw(st.integers(1, ft.max_statements))
        stmts, _ = self.block(inputs, n, 0)
        dynamic = ft.dynamic_shapes and draw(st.integers(0, 3)) == 3
        grad = ft.gradients and draw(st.integers(0, 3)) == 3
        return Program(tuple(inputs), Block(tuple(stmts)), tuple(self.variables), tuple(self.functions), dynamic,
                       grad)


@st.composite
def programs(draw, features: Features | None = None, **kw) -> Program:
    """A generated program; ``features`` (or its fields as keywords) bound what it may contain."""
    ft = features or Features(**kw)
    return _Gen(draw, ft).program()


# -- flags and process configuration ------------------------------------------------------------

OPS_TO_CLUSTER = ("FUSIBLE", "PW,RED", "MISC", "Sin,Exp,AddV2,Mul,Cast,Sum,Identity,Const",
                  "AddV2,Mul,Sub,MatMul,Reshape,Const")


@st.composite
def xla_flags(draw, *, auto_jit_levels=(2, 1)) -> str:
    """A ``TF_XLA_FLAGS`` value: auto-jit on the CPU plus the flags that change clustering.
    Shrinks towards the plain default (``--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit``)."""
    level = draw(st.sampled_from(auto_jit_levels))
    parts = [f"--tf_xla_auto_jit={level}", "--tf_xla_cpu_global_jit", "--tf_xla_clustering_debug"]
    if draw(st.integers(0, 9)) == 9:  # auto-jit off: only jit_scope(compile_ops=True) ops are clustered
        parts = ["--tf_xla_cpu_global_jit", "--tf_xla_clustering_debug"]
    min_size = draw(st.sampled_from([None, 1, 2, 3, 6]))
    if min_size is not None:
        parts.append(f"--tf_xla_min_cluster_size={min_size}")
    max_size = draw(st.sampled_from([None, None, 2, 3, 5]))
    if max_size is not None:
        parts.append(f"--tf_xla_max_cluster_size={max_size}")
    if draw(st.integers(0, 4)) == 4:
        parts.append(f"--tf_xla_ops_to_cluster={draw(st.sampled_from(OPS_TO_CLUSTER))}")
    if draw(st.integers(0, 3)) == 3:
        parts.append("--tf_xla_cluster_exclude_ops=Where")
    if draw(st.integers(0, 5)) == 5:
        parts.append("--tf_xla_disable_resource_variable_safety_checks_for_debugging")
    if draw(st.integers(0, 5)) == 5:
        parts.append("--tf_xla_disable_deadness_safety_checks_for_debugging")
    if draw(st.integers(0, 4)) == 4:
        parts.append("--tf_xla_enable_lazy_compilation=false")
    if draw(st.integers(0, 7)) == 7:
        parts.append(f"--tf_xla_clustering_fuel={draw(st.sampled_from([5, 20, 60]))}")
    return " ".join(parts)


@dataclass(frozen=True)
class ProcessConfig:
    """What one TF process is started with: its TF_XLA_FLAGS, logical CPU devices, Grappler."""

    flags: str = BASE_FLAGS
    devices: int = 1
    grappler: bool = True


@st.composite
def process_configs(draw, grappler: str = "on") -> ProcessConfig:
    """``grappler``: ``on`` (TF's default), ``off`` (``disable_meta_optimizer``) or ``mixed``."""
    on = {"on": True, "off": False}.get(grappler)
    if on is None:
        on = draw(st.integers(0, 3)) != 3
    return ProcessConfig(draw(xla_flags()), draw(st.sampled_from([1, 2])), on)
