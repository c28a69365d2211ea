"""A :class:`~jitsim.testing.program.model.Program` rendered as a GraphDef shaped like TF's
``before_clone_constants_for_better_clustering`` dump of its function (what the TF-free
invariant tests feed jitsim): ``_Arg``/``_Retval``, devices, attrs from the op registry,
cond/while lowered as TF's LowerFunctionalOpsPass does."""

from __future__ import annotations

from dataclasses import dataclass

from jitsim.testing.program.model import (
    CATALOG,
    CPU,
    DT_RESOURCE,
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
    E,
    Function,
    Group,
    Op,
    Print,
    Program,
    Read,
    While,
    Write,
    const_values,
)
from jitsim.defs import COMPILE_ATTR, MUST_COMPILE_ATTR, SCOPE_ATTR, SEPARATE_COMPILED_GRADIENTS_ATTR

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
        from jitsim.registry import protos

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
                    nd.attr[COMPILE_ATTR].b = s.xla
                    nd.attr[SEPARATE_COMPILED_GRADIENTS_ATTR].b = False
                    nd.attr[SCOPE_ATTR].s = f"jit_scope_{ctx.jit_scopes}".encode()
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
                nd = self.node(s.out, VAR_OPS[s.how], [h, val], {"dtype": DType(v.dtype)}, s.device, ctx, ctrl)
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
                 MUST_COMPILE_ATTR: bool(fn.jit)}
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
            fd.attr[MUST_COMPILE_ATTR].b = bool(fn.jit)
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
