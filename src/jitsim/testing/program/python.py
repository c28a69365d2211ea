"""A :class:`~jitsim.testing.program.model.Program` rendered as Python source: a standalone TF
program, every op spelled ``tf.raw_ops.<Op>`` and named after its statement (what the
differential tests run under real TF). A program's ``repr`` is this source."""

from __future__ import annotations

from jitsim.testing.program.model import (
    CATALOG,
    DTYPES,
    SHAPES,
    VAR_OPS,
    Arg,
    Block,
    C,
    Call,
    Cond,
    Const,
    DType,
    Group,
    Op,
    Print,
    Program,
    Read,
    Variable,
    While,
    Write,
    const_values,
)


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
            return [f"{s.out} = tf.raw_ops.{VAR_OPS[s.how]}(resource={s.var}.handle, value={value}, name={s.out!r})"]
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


def _program_repr(program: Program) -> str:
    return "Program(\n" + body_source(program) + ")"


# Hypothesis prints failing examples with repr(): a program shows as its Python source.
Program.__repr__ = _program_repr
