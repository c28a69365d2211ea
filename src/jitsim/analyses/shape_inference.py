"""Static shapes of a GraphDef that records none, inferred without TF.

Grappler's optimizers see shapes through ``GraphProperties`` (``grappler/costs/
graph_properties.cc``): TF's per-op shape functions (``core/ops/*.cc``) run over the graph,
seeded from the feeds and the resource handles' shapes. Several rewrites depend on them: the
remapper's oneDNN bias-like ``Add`` (the other operand must be as long as the contraction's last
dimension), the arithmetic optimizer's no-op ``Reshape``, constant folding of ``Shape``/``Size``/
``Rank``. A SavedModel's function bodies and TF's dumps carry ``_output_shapes``; a GraphDef
exported with ``cf.graph.as_graph_def()`` does not. :func:`infer_shapes` recomputes them:

* seeds: ``Placeholder``/``PlaceholderWithDefault`` ``shape``, ``_Arg``'s ``_output_shapes`` or
  ``shape``, ``Const`` values, and any node's own ``_output_shapes``;
* resources: a variable's shape is its ``VarHandleOp``'s ``shape``, a handle's ``_handle_shapes``
  or, where neither is in the graph (a ConcreteFunction captures variables as shapeless resource
  ``Placeholder`` nodes), the shape of a fully known value written to it by ``AssignVariableOp``/
  ``AssignAddVariableOp``/``AssignSubVariableOp`` (TF's variable has that shape in the real run:
  a Keras/``tf.Variable`` write keeps the variable's shape). ``ReadVariableOp`` reads it through
  ``Identity``/``Enter``/``Switch``... of the handle;
* variables still without a shape (an inference-only export: nothing writes them): their shapes
  read back from their uses (:meth:`_Inference.guess_from_use`: a contraction's operand, a bias's
  length, an embedding's width, a layer's per-channel parameters), as TF's run knows them; a
  layer's parameter expression of unknown shape applied element-wise to a tensor is taken to
  broadcast into it. An assumption: ``infer_shapes(..., from_use=)`` says which variables;
* shape functions re-implemented for the ops that decide those rewrites (element-wise ops with
  broadcasting, ``MatMul``/``BatchMatMul*``, ``BiasAdd``, ``Reshape``/``Transpose``/``ExpandDims``/
  ``Squeeze``/``ConcatV2``/``Pack``/``Split``/``StridedSlice``/``GatherV2`` with constant operands,
  reductions, convolutions and pools, ``Fill``, control flow...); a small value analysis of
  integer vectors (``Const``, ``Shape`` of a known shape, ``Pack``, ``ConcatV2``) lets ``Reshape``/
  ``Fill`` take a computed shape, as TF's ``InferenceContext::MakeShapeFromShapeTensor`` does;
* loops: ``Merge`` starts from its forward inputs; a second round merges the back edge in, a
  dimension that differs becoming unknown (TF's shape refiner relaxes loop shapes alike).

A shape is a tuple of dims (``-1`` unknown) or ``None`` (unknown rank). The shape functions
are one table, :data:`SHAPE_FUNCTIONS` (op -> function); an op without one gives ``None``. :class:`ShapeView` is the accessor the Grappler simulation reads
shapes through: a node's recorded ``_output_shapes`` first (so SavedModels and dumps keep what
they record), inferred shapes only for a graph that records none.
"""

from __future__ import annotations

from jitsim.graph.model import parse_input
from jitsim.opsets import BINARY_SWITCH_OPS, CONCAT_OPS, CONSTANT_OPS, FUSED_BATCH_NORM_OPS, NEXT_ITERATION_OPS, PASS_THROUGH_OPS, PLAIN_MERGE_OPS, SHAPED_PLACEHOLDER_OPS

Shape = "tuple[int, ...] | None"

DT_RESOURCE = 20

UNARY = frozenset({
    "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "Ceil", "Cos", "Cosh", "Digamma", "Elu", "Erf",
    "Erfc", "Exp", "Expm1", "Floor", "Gelu", "Inv", "Invert", "IsFinite", "IsInf", "IsNan", "LeakyRelu", "Lgamma",
    "Log", "Log1p", "LogSoftmax", "LogicalNot", "Neg", "OnesLike", "Reciprocal", "Relu", "Relu6", "Rint", "Round",
    "Rsqrt", "Selu", "Sigmoid", "Sign", "Sin", "Sinh", "Softmax", "Softplus", "Softsign", "Sqrt", "Square", "Tan",
    "Tanh", "ZerosLike", "Cast", "Identity", "Snapshot", "StopGradient", "PreventGradient", "CheckNumerics",
    "Enter", "Exit", "NextIteration", "RefEnter", "RefExit", "LoopCond", "_MklSwish", "Bitcast_same",
    "ReluGrad", "Relu6Grad", "EluGrad", "SigmoidGrad", "TanhGrad", "SqrtGrad", "RsqrtGrad", "ReciprocalGrad",
    "LeakyReluGrad", "SoftplusGrad", "ClipByValue", "FakeQuantWithMinMaxArgs", "Conj", "Real", "Imag",
    "RandomUniform_like", "DebugIdentity", "FusedBatchNormGrad_x",
})
BINARY = frozenset({
    "Add", "AddV2", "Sub", "Mul", "Div", "RealDiv", "DivNoNan", "MulNoNan", "FloorDiv", "FloorMod", "TruncateDiv",
    "TruncateMod", "Mod", "Maximum", "Minimum", "Pow", "SquaredDifference", "Atan2", "Xlogy", "Xdivy", "Equal",
    "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual", "LogicalAnd", "LogicalOr", "BitwiseAnd",
    "BitwiseOr", "BitwiseXor", "LeftShift", "RightShift", "Igamma", "Igammac", "Zeta", "Polygamma",
    "ApproximateEqual", "BroadcastTo_none",
})
SELECT_OPS = frozenset({"Select", "SelectV2"})
ADD_N_LIKE = frozenset({"AddN", "AccumulateNV2"})
REDUCTIONS = frozenset({"Sum", "Mean", "Max", "Min", "Prod", "All", "Any", "EuclideanNorm"})
WRITES = frozenset({"AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"})
# element-wise ops a layer applies its parameters with (a bias, a scale, a batch norm's terms)
PARAMETER_OPS = frozenset({"Add", "AddV2", "Sub", "Mul", "RealDiv"})
# ops that take a part of a tensor without computing on it
SLICING = frozenset({"Identity", "Snapshot", "Cast", "Split", "SplitV", "Squeeze", "Unpack", "StridedSlice",
                     "Slice", "GatherV2", "Gather", "Reshape", "ExpandDims", "Transpose", "Enter", "Switch",
                     "Merge", "Exit"})
# ops that pass a resource handle (or any tensor) from input 0 to their output(s) unchanged
RESOURCE_PASS_THROUGH = frozenset({"Identity", "Enter", "RefEnter", "Exit", "RefExit", "NextIteration", "Switch",
                                   "RefSwitch", "Merge", "RefMerge", "Snapshot"})


# -- shape algebra ---------------------------------------------------------------------------

def _known(s) -> bool:
    return s is not None and all(d >= 0 for d in s)


def merge_dims(a: int, b: int) -> int:
    """Two facts about one dimension: the known one wins; two different known sizes contradict
    (a loop whose dimension changes): unknown."""
    if a < 0:
        return b
    if b < 0 or a == b:
        return a
    return -1


def relax(a, b):
    """The most specific shape both ``a`` and ``b`` are instances of (a Merge's output)."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else -1 for x, y in zip(a, b))


def broadcast(a, b):
    """NumPy broadcasting of two static shapes (TF's ``BroadcastBinaryOpOutputShapeFn``): a known
    dim of 1 takes the other; an unknown dim against a known dim > 1 gives the known one (the
    unknown must be 1 or equal); two unknown dims stay unknown."""
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1:
            out.append(x)
        elif x < 0 and y < 0:
            out.append(-1)
        elif x < 0:
            out.append(y)
        elif y < 0 or x == y:
            out.append(x)
        else:
            return None  # not broadcastable: TF's shape function fails, nothing is known
    return tuple(out)


def _axis(a: int, rank: int) -> int | None:
    a = a + rank if a < 0 else a
    return a if 0 <= a < rank else None


# -- reading node attributes -----------------------------------------------------------------

def _proto_shape(shp):
    if shp.unknown_rank:
        return None
    return tuple(d.size if d.size >= 0 else -1 for d in shp.dim)


def recorded(nd, port: int):
    """``(True, shape)`` from a node's own ``_output_shapes``, else ``(False, None)``."""
    if "_output_shapes" in nd.attr:
        shapes = nd.attr["_output_shapes"].list.shape
        if port < len(shapes):
            return True, _proto_shape(shapes[port])
    return False, None


def _const_value(nd, max_rank: int = 1):
    """The value of a small integer ``Const`` (of rank ``max_rank`` at most) as a flat list, or
    None."""
    if nd.op not in CONSTANT_OPS or "value" not in nd.attr:
        return None
    t = nd.attr["value"].tensor
    if t.dtype not in (3, 9):  # DT_INT32, DT_INT64
        return None
    shape = _proto_shape(t.tensor_shape)
    if shape is None or len(shape) > max_rank or any(x < 0 for x in shape):
        return None
    n = 1
    for x in shape:
        n *= x
    if n > 64:
        return None
    if t.tensor_content:
        import struct

        fmt = "<%di" % n if t.dtype == 3 else "<%dq" % n
        try:
            return list(struct.unpack(fmt, t.tensor_content))
        except struct.error:
            return None
    vals = list(t.int_val if t.dtype == 3 else t.int64_val)
    if not vals:
        vals = [0]
    if len(vals) < n:
        vals = vals + [vals[-1]] * (n - len(vals))
    return vals[:n] if shape else vals[:1]


def _ints(nd, key):
    return list(nd.attr[key].list.i) if key in nd.attr else []


def _i(nd, key, default=0):
    return nd.attr[key].i if key in nd.attr else default


def _b(nd, key, default=False):
    return nd.attr[key].b if key in nd.attr else default


def _s(nd, key, default=b""):
    return nd.attr[key].s if key in nd.attr else default


# -- the analysis ------------------------------------------------------------------------------

class _Inference:
    def __init__(self, nodes: dict, order: list[str], unknown=frozenset()):
        self.nodes = nodes
        self.order = order
        # tensors of unknown shape whatever the graph says (a session's feeds: Grappler's
        # constant folding and arithmetic optimizer do not assume valid feeds); with them, the
        # shapes the graph records are not read either (TF infers its own from the feeds)
        self.unknown = frozenset(unknown)
        self.shapes: dict[tuple[str, int], object] = {}
        self.values: dict[tuple[str, int], list[int]] = {}  # integer vectors, -1 unknown entries
        self.var_shapes: dict[str, object] = {}  # resource root -> variable shape
        self.from_use: dict[str, object] = {}  # the variables' shapes read back from their uses
        self._parameter: dict = {}  # tensor -> whether it is a shapeless parameter expression
        self._data: dict = {}  # node -> (its NodeDef, its parsed data inputs)
        # loops (a NextIteration's back edge) or variable writes need more than one forward pass
        self._needs_rounds = any(nd.op in NEXT_ITERATION_OPS or nd.op in WRITES for nd in nodes.values())
        self.back_edges = False

    def is_parameter(self, ref) -> bool:
        """Whether tensor ``ref`` is of unknown shape only because it is computed from variables
        whose shape the graph does not give (and constants): a layer's parameter expression."""
        memo = self._parameter
        if ref in memo:
            return memo[ref]
        memo[ref] = False  # a cycle (a loop) is not a parameter
        nd = self.nodes.get(ref[0])
        out = False
        if nd is not None and ref[1] == 0:
            if nd.op == "ReadVariableOp":
                d = self.data(nd)
                out = bool(d) and self.handle_shape(d[0]) is None
            elif nd.op in UNARY or nd.op in BINARY:
                d = self.data(nd)
                kinds = [self.is_parameter(r) or (self.nodes.get(r[0]) is not None and self.nodes[r[0]].op in CONSTANT_OPS)
                         for r in d]
                out = bool(d) and all(kinds) and any(self.is_parameter(r) for r in d)
        memo[ref] = out
        return out

    # inputs
    def data(self, nd) -> list[tuple[str, int]]:
        """``nd``'s data inputs as ``(node, port)`` (parsed once: the graph does not change while
        its shapes are inferred)."""
        d = self._data.get(nd.name)
        if d is None or d[0] is not nd:
            d = self._data[nd.name] = (nd, [parse_input(r) for r in nd.input if not r.startswith("^")])
        return d[1]

    def shape_of(self, ref):
        return self.shapes.get(ref)

    def value_of(self, ref):
        src = self.nodes.get(ref[0])
        if src is not None and ref[1] == 0:
            v = _const_value(src)
            if v is not None:
                return v
        return self.values.get(ref)

    # the ops a handle is followed back through (a subclass may follow more)
    handle_pass_through = RESOURCE_PASS_THROUGH

    def resource_root(self, ref) -> str | None:
        """The node a resource handle comes from, through pass-through ops."""
        seen = set()
        name, port = ref
        while name in self.nodes and name not in seen:
            seen.add(name)
            nd = self.nodes[name]
            if nd.op in self.handle_pass_through:
                d = self.data(nd)
                if not d:
                    return None
                name, port = d[0]
                continue
            return name if port == 0 else f"{name}:{port}"
        return None

    def handle_shape(self, ref):
        root = self.resource_root(ref)
        if root is None:
            return None
        if root in self.var_shapes:
            return self.var_shapes[root]
        nd = self.nodes.get(root)
        if nd is None:
            return None
        if nd.op in ("VarHandleOp", "_VarHandlesOp") and "shape" in nd.attr:
            return _proto_shape(nd.attr["shape"].shape)
        if "_handle_shapes" in nd.attr and nd.attr["_handle_shapes"].list.shape:
            return _proto_shape(nd.attr["_handle_shapes"].list.shape[0])
        return None

    def run(self) -> dict:
        self.settle()
        rejected: set = set()
        for _ in range(8):  # each round's guesses can make another variable's update known
            guesses = {v: g for v, g in self.guess_updated_variables().items() if (v, g) not in rejected}
            if not guesses:
                break
            trial = dict(self.var_shapes)
            self.var_shapes.update(guesses)
            self.settle()
            # keep a guess only where every write to the variable then agrees with it
            bad = [v for v, g in guesses.items() if any(not compatible(s, g) for s in self.writes_to(v))]
            if bad:
                rejected |= {(v, guesses[v]) for v in bad}
                self.var_shapes = {**trial, **{v: g for v, g in guesses.items() if v not in bad}}
                self.shapes = {}
                self.back_edges = False
                self.settle()
        for _ in range(6 if self._shapeless_reads() else 0):  # what the variables' uses need, until it settles
            try:
                guesses = self.guess_from_use()
            except (IndexError, KeyError, ValueError, ZeroDivisionError, TypeError, OverflowError):
                break  # an op's attributes not as its shape function reads them: no guess
            if not guesses:
                break
            self.var_shapes.update(guesses)
            self.from_use.update(guesses)
            self.settle()  # from the shapes so far: a guess only adds what was unknown
        return self.shapes

    def _shapeless_reads(self) -> bool:
        """Whether a ``ReadVariableOp`` or ``ResourceGather`` reads a variable of unknown shape."""
        return any(nd.op in ("ReadVariableOp", "ResourceGather") and self.data(nd) and
                   self.handle_shape(self.data(nd)[0]) is None for nd in self.nodes.values())

    def guess_from_use(self) -> dict:
        """Shapes for the variables still without one (a ConcreteFunction's captured variables
        are shapeless resource ``Placeholder`` nodes), read back from what their values' consumers
        require: TF's shape functions run backwards over the graph, from the last node to the
        first. A contraction names its operands' dims (``MatMul``: ``[k, n]`` with ``k`` from the
        other operand and ``n`` from the output as its consumers know it; a convolution its
        kernel's channels; ``Einsum`` each letter), ``BiasAdd`` its bias' length, an element-wise
        op its operands' dims (an unknown dimension broadcast against a known one taken for it,
        not for 1, as TF's shape function assumes of the output); a variable of unknown rank added
        to or multiplied with a tensor of known rank is taken for a bias: one dimension, the
        output's last. ``{variable root: shape}``; :attr:`from_use` keeps what was taken."""
        want: dict = {}  # (node, port) -> the shape its consumers require
        bias: dict = {}  # variable root -> the bias shape an element-wise op suggests
        conflict: set = set()

        def eff(ref):
            return _refine(self.shapes.get(ref), want.get(ref))

        def demand(ref, shape):
            if shape is None or ref in conflict:
                return
            have = eff(ref)
            if have is not None and (len(have) != len(shape) or not compatible(have, shape)):
                conflict.add(ref)
                want.pop(ref, None)
                return
            want[ref] = _refine(shape, have)

        def variable_of(ref):
            """The variable an operand reads whole (through Identity/Cast...), if its shape is unknown."""
            for _ in range(8):
                nd = self.nodes.get(ref[0])
                if nd is None:
                    return None
                if nd.op == "ReadVariableOp":
                    d = self.data(nd)
                    root = self.resource_root(d[0]) if d else None
                    return root if root is not None and self.handle_shape(d[0]) is None else None
                if nd.op not in ("Identity", "Cast", "Snapshot", "StopGradient"):
                    return None
                d = self.data(nd)
                if not d:
                    return None
                ref = d[0]
            return None

        def gathered(ref):
            """``(variable, indices' shape)`` where ``ref`` gathers rows of a variable of unknown shape."""
            nd = self.nodes.get(ref[0])
            if nd is None or ref[1] != 0 or nd.op not in ("GatherV2", "ResourceGather") or _i(nd, "batch_dims"):
                return None, None
            d = self.data(nd)
            if len(d) < 2 or (nd.op == "GatherV2" and (len(d) != 3 or self.value_of(d[2]) != [0])):
                return None, None
            idx = self.shapes.get(d[1])
            root = (self.resource_root(d[0]) if self.handle_shape(d[0]) is None else None) \
                if nd.op == "ResourceGather" else variable_of(d[0])
            return (root, idx) if root is not None and idx is not None else (None, None)

        for name in reversed(self.order):
            nd = self.nodes[name]
            op = nd.op
            d = self.data(nd)
            if not d:
                continue
            out = eff((name, 0))
            ins = [eff(r) for r in d]
            if op in UNARY and op not in ("Enter", "Exit", "NextIteration", "RefEnter", "RefExit", "LoopCond"):
                demand(d[0], out)
            elif op in BINARY and len(d) == 2 and (out is not None or (ins[0] is None) != (ins[1] is None)):
                if (ins[0] is None) != (ins[1] is None):  # one operand of unknown rank: taken to
                    other = ins[0] if ins[0] is not None else ins[1]  # broadcast into the other
                    out = other if out is None else _refine(out, other)
                for i, (r, x) in enumerate(zip(d, ins)):
                    if x is None and out and op in PARAMETER_OPS:
                        root = variable_of(r)
                        if root is not None:
                            bias.setdefault(root, (out[-1],))
                            continue
                        root, idx = gathered(r)
                        if root is not None:
                            if len(out) > len(idx):
                                bias.setdefault(root, (-1, out[-1]))  # an embedding table
                            continue
                    if x is None and out:
                        # an activation of unknown rank (an op with an operand of the output's
                        # rank: a Dense layer's MatMul + shapeless bias) is taken to be as large
                        # as what it is added to; a parameter expression is not
                        src = self.nodes.get(r[0])
                        if self.is_parameter(r):
                            if op in PARAMETER_OPS:
                                # a parameter expression (a batch norm's gamma * rsqrt(var + eps)):
                                # one value per channel, the output's last dimension
                                demand(r, (out[-1],))
                        elif src is not None and r[1] == 0 and (src.op in BINARY or src.op == "BiasAdd") and any(
                                t is not None and len(t) == len(out) for t in map(eff, self.data(src))):
                            demand(r, out)
                        continue
                    if x is None or len(x) > len(out):
                        continue
                    k = len(out) - len(x)
                    demand(r, tuple(out[k + j] if v < 0 and out[k + j] >= 0 else v for j, v in enumerate(x)))
            elif op in ADD_N_LIKE and out is not None:
                for r in d:
                    demand(r, out)
            elif op == "BiasAdd" and len(d) == 2 and out is not None and len(out) >= 2:
                demand(d[0], out)
                demand(d[1], (out[1 if _s(nd, "data_format") == b"NCHW" else -1],))
            elif op == "MatMul" and len(d) == 2:
                a, b = ins
                ta, tb = _b(nd, "transpose_a"), _b(nd, "transpose_b")
                m, n = (out if out is not None and len(out) == 2 else (-1, -1))
                ka = a[0 if ta else 1] if a is not None and len(a) == 2 else -1
                kb = b[1 if tb else 0] if b is not None and len(b) == 2 else -1
                demand(d[0], (kb, m) if ta else (m, kb))  # each operand's k is the other's
                demand(d[1], (n, ka) if tb else (ka, n))
            elif op in ("BatchMatMulV2", "BatchMatMulV3") and len(d) == 2 and out is not None and len(out) >= 2:
                a, b = ins
                if a is not None and len(a) >= 2 and b is None and variable_of(d[1]) is not None:
                    k = a[-2] if _b(nd, "adj_x") else a[-1]
                    demand(d[1], (out[-1], k) if _b(nd, "adj_y") else (k, out[-1]))
            elif op in ("Conv2D", "DepthwiseConv2dNative") and len(d) == 2 and out is not None and len(out) == 4:
                x, f = ins
                c = 1 if _s(nd, "data_format") == b"NCHW" else 3
                cin = x[c] if x is not None and len(x) == 4 else -1
                if op == "Conv2D":
                    demand(d[1], (-1, -1, cin, out[c]))
                else:
                    mult = out[c] // cin if cin > 0 and out[c] >= 0 and out[c] % cin == 0 else -1
                    demand(d[1], (-1, -1, cin, mult))
            elif op == "Einsum":
                parsed = einsum_subscripts(_s(nd, "equation").decode("utf-8", "replace"),
                                           [None if x is None else len(x) for x in ins])
                if parsed is None:
                    continue
                subs, osub = parsed
                size: dict = {}
                for sub, x in list(zip(subs, ins)) + ([(osub, out)] if out is not None else []):
                    if x is not None and len(x) == len(sub):
                        for c, v in zip(sub, x):
                            if v >= 0 and not (c.isdigit() and v == 1):
                                size.setdefault(c, v)
                for r, sub, x in zip(d, subs, ins):
                    if not any(ch.isdigit() for ch in sub):
                        demand(r, tuple(size.get(c, -1) for c in sub))
            elif op == "Transpose" and out is not None:
                perm = self.value_of(d[1])
                if perm is not None and len(perm) == len(out) and sorted(perm) == list(range(len(out))):
                    inv = [0] * len(perm)
                    for i, q in enumerate(perm):
                        inv[q] = i
                    demand(d[0], tuple(out[inv[j]] for j in range(len(out))))
            elif op == "ResourceGather" and out is not None and _i(nd, "batch_dims") == 0 and len(d) == 2:
                idx = ins[1]
                root = self.resource_root(d[0])
                if idx is not None and root is not None and self.handle_shape(d[0]) is None and len(out) >= len(idx):
                    want[("@var", root)] = _refine((-1,) + tuple(out[len(idx):]), want.get(("@var", root)))

        found: dict = {}
        bad: set = set()
        for name, nd in self.nodes.items():
            if nd.op != "ReadVariableOp":
                continue
            d = self.data(nd)
            if not d or self.handle_shape(d[0]) is not None:
                continue
            root = self.resource_root(d[0])
            w = want.get((name, 0))
            if root is None or w is None or (name, 0) in conflict:
                continue
            prev = found.get(root)
            if prev is not None and (len(prev) != len(w) or not compatible(prev, w)):
                bad.add(root)
            found[root] = _refine(w, prev)
        for (tag, root), w in list(want.items()):
            if tag == "@var" and root not in found:
                found[root] = w
        for root, b in bias.items():
            found.setdefault(root, b)
        return {r: v for r, v in found.items() if r not in bad and v is not None and v != self.var_shapes.get(r)}

    def writes_to(self, root):
        for nd in self.nodes.values():
            if nd.op in WRITES:
                d = self.data(nd)
                if len(d) == 2 and self.resource_root(d[0]) == root:
                    yield self.shape_of(d[1])

    def guess_updated_variables(self) -> dict:
        """Variables still without a shape that a write updates from their own value
        (``s.assign(0.9 * s + g)``): a variable update keeps the variable's shape, so the
        non-scalar operand of the element-wise expression written with the highest rank and the
        most known dims (``g``) is the guess; :meth:`run` keeps it where every write then agrees."""
        out = {}
        for root, handle, value in self.variable_writes():
            if root in self.var_shapes or self.handle_shape(handle) is not None:
                continue
            best = None
            stack, seen = [value], set()
            while stack and len(seen) < 64:
                ref = stack.pop()
                if ref in seen:
                    continue
                seen.add(ref)
                s = self.shape_of(ref)
                if s is not None and len(s) > 0:  # a scalar operand (0.9 * s) says nothing
                    if best is None or (len(s), _n_known(s)) > (len(best), _n_known(best)):
                        best = s
                    if _known(s):
                        continue
                src = self.nodes.get(ref[0])
                if src is not None and (src.op in BINARY or src.op in UNARY or src.op in ("AddN", "BiasAdd")):
                    stack.extend(self.data(src))
            if best is not None:
                out[root] = best
        return out

    def settle(self):
        for _ in range(4):  # forward, loops' back edges and variable writes, then settle
            before = (dict(self.shapes), dict(self.var_shapes)) if self._needs_rounds else None
            self._parameter = {}  # the variables known so far decide what is a parameter
            for name in self.order:
                nd = self.nodes[name]
                try:
                    outs = self.infer(nd)
                except (IndexError, KeyError, ValueError, ZeroDivisionError, TypeError, OverflowError):
                    outs = None
                if outs is None:
                    outs = []
                for p, s in enumerate(outs):
                    ok, rec = recorded(nd, p) if not self.unknown else (False, None)
                    self.shapes[(name, p)] = rec if ok else s
                if "_output_shapes" in nd.attr and not self.unknown:
                    for p, shp in enumerate(nd.attr["_output_shapes"].list.shape):
                        self.shapes[(name, p)] = _proto_shape(shp)
                for p in range(max(len(outs), 1)):
                    if (name, p) in self.unknown:
                        self.shapes[(name, p)] = None
            self.collect_writes()
            self.back_edges = True
            if not self._needs_rounds or (self.shapes, self.var_shapes) == before:
                break  # without loops or variable writes one pass in topological order is final

    def variable_writes(self):
        """``(variable, handle ref, value ref)`` of each write of a value to a variable whose
        resource root is known."""
        for nd in self.nodes.values():
            if nd.op not in WRITES:
                continue
            d = self.data(nd)
            if len(d) != 2:
                continue
            root = self.resource_root(d[0])
            if root is not None:
                yield root, d[0], d[1]

    def collect_writes(self):
        for root, _, value in self.variable_writes():
            s = self.shape_of(value)
            if s is None:
                continue
            prev = self.var_shapes.get(root)
            self.var_shapes[root] = s if prev is None else _merge_same(prev, s) if compatible(prev, s) else None

    def infer(self, nd) -> list | None:
        """``nd``'s output shapes by its op's shape function (:data:`SHAPE_FUNCTIONS`); None for
        an op without one."""
        d = self.data(nd)
        ins = [self.shape_of(r) for r in d]
        fn = SHAPE_FUNCTIONS.get(nd.op)
        return None if fn is None else fn(self, nd, d, ins)

    def reshape(self, s, shape_ref):
        target = self.value_of(shape_ref)
        if target is None:
            ts = self.shape_of(shape_ref)
            if ts is not None and len(ts) == 1 and ts[0] >= 0:
                return (-1,) * ts[0]
            return None
        target = list(target)
        if target.count(-1) == 1 and _known(s):
            total = 1
            for x in s:
                total *= x
            rest = 1
            for x in target:
                if x != -1:
                    rest *= x
            if rest > 0 and total % rest == 0:
                target[target.index(-1)] = total // rest
        return tuple(target)

    def concat(self, shapes, ax):
        base = next((s for s in shapes if s is not None), None)
        if base is None:
            return None
        rank = len(base)
        if ax is None:
            return (-1,) * rank
        a = _axis(ax[0], rank)
        if a is None:
            return None
        out = list(base)
        total = 0
        for s in shapes:
            if s is None or len(s) != rank:
                total = -1
                continue
            for i in range(rank):
                if i != a:
                    out[i] = merge_dims(out[i], s[i])
            total = -1 if total < 0 or s[a] < 0 else total + s[a]
        out[a] = total
        return tuple(out)

    def reduce(self, s, axes, keep, axes_shape):
        if s is None:
            return None
        if axes is None:
            if keep:
                return (-1,) * len(s)
            if axes_shape is not None and len(axes_shape) == 1 and axes_shape[0] >= 0:
                return (-1,) * (len(s) - axes_shape[0])
            return None
        ax = {_axis(a, len(s)) for a in axes}
        if None in ax:
            return None
        return tuple((1 if i in ax else x) for i, x in enumerate(s) if keep or i not in ax)

    def strided_slice(self, nd, s, d):
        """Constant begin/end/strides; ellipsis and new-axis masks as TF's ``ValidateStridedSliceOp``
        reads them (a dimension with an unknown size or bounds stays unknown)."""
        if s is None or len(d) != 4:
            return None
        begin, end, strides = (self.value_of(r) for r in d[1:])
        if begin is None or end is None or strides is None or not (len(begin) == len(end) == len(strides)):
            return None
        bm, em = _i(nd, "begin_mask"), _i(nd, "end_mask")
        ell, new, shrink = _i(nd, "ellipsis_mask"), _i(nd, "new_axis_mask"), _i(nd, "shrink_axis_mask")
        n = len(begin)
        # expand the sparse spec over the input's dims
        out = []
        dim = 0
        i = 0
        while i < n:
            if ell & (1 << i):
                real_after = sum(1 for j in range(i + 1, n) if not (new & (1 << j)))
                while dim < len(s) - real_after:
                    out.append(s[dim])
                    dim += 1
                i += 1
                continue
            if new & (1 << i):
                out.append(1)
                i += 1
                continue
            if dim >= len(s):
                return None
            size = s[dim]
            st = strides[i]
            if st == 0:
                return None
            if shrink & (1 << i):
                dim += 1
                i += 1
                continue
            if size < 0:
                out.append(-1)
            else:
                if bm & (1 << i):
                    b = 0 if st > 0 else size - 1
                else:
                    b = begin[i] + size if begin[i] < 0 else begin[i]
                    b = max(0, min(b, size)) if st > 0 else max(-1, min(b, size - 1))
                if em & (1 << i):
                    e = size if st > 0 else -1
                else:
                    e = end[i] + size if end[i] < 0 else end[i]
                    e = max(0, min(e, size)) if st > 0 else max(-1, min(e, size - 1))
                if st > 0:
                    out.append(max(0, (e - b + st - 1) // st))
                else:
                    out.append(max(0, (b - e - st - 1) // (-st)))
            dim += 1
            i += 1
        out.extend(s[dim:])
        return tuple(out)

    def conv(self, nd, x, f, depthwise=False):
        if x is None or len(x) != 4:
            return None
        nchw = _s(nd, "data_format") == b"NCHW"
        n, h, w, c = (x[0], x[2], x[3], x[1]) if nchw else x
        strides = _ints(nd, "strides") or [1, 1, 1, 1]
        dil = _ints(nd, "dilations") or [1, 1, 1, 1]
        sh, sw = (strides[2], strides[3]) if nchw else (strides[1], strides[2])
        dh, dw = (dil[2], dil[3]) if nchw else (dil[1], dil[2])
        kh = kw = oc = -1
        if f is not None and len(f) == 4:
            kh, kw = f[0], f[1]
            oc = (f[2] * f[3] if f[2] >= 0 and f[3] >= 0 else -1) if depthwise else f[3]
        pad = _s(nd, "padding")
        oh = _window(h, kh, sh, dh, pad)
        ow = _window(w, kw, sw, dw, pad)
        return (n, oc, oh, ow) if nchw else (n, oh, ow, oc)

    def pool(self, nd, x):
        if x is None or len(x) != 4 or _s(nd, "data_format") == b"NCHW":
            return None
        k = _ints(nd, "ksize") or [1, 1, 1, 1]
        st = _ints(nd, "strides") or [1, 1, 1, 1]
        pad = _s(nd, "padding")
        return (x[0], _window(x[1], k[1], st[1], 1, pad), _window(x[2], k[2], st[2], 1, pad), x[3])


# -- the shape functions: one per op (or family), looked up in SHAPE_FUNCTIONS ----------------
# Each is ``fn(inf, nd, d, ins) -> [shape per output] | None``: ``inf`` the running inference (a
# subclass's handle_shape/value_of apply), ``d`` the data inputs, ``ins`` their shapes. None: no
# shape known (the op's outputs stay unknown).

def _sf_const(inf, nd, d, ins):
    return [_proto_shape(nd.attr["value"].tensor.tensor_shape)]


def _sf_placeholder(inf, nd, d, ins):
    op = nd.op
    if "shape" in nd.attr and not (op == "Placeholder" and nd.attr["dtype"].type == DT_RESOURCE):
        return [_proto_shape(nd.attr["shape"].shape)]
    return [() if op == "Placeholder" and nd.attr["dtype"].type == DT_RESOURCE else None]


def _sf_arg(inf, nd, d, ins):
    if "shape" in nd.attr:
        return [_proto_shape(nd.attr["shape"].shape)]
    return [None]


def _sf_scalar(inf, nd, d, ins):  # a resource handle (VarHandleOp), Size, Rank
    return [()]


def _sf_read_variable(inf, nd, d, ins):
    return [inf.handle_shape(d[0])] if d else None


def _sf_resource_gather(inf, nd, d, ins):
    if len(d) != 2:
        return None
    p, idx = inf.handle_shape(d[0]), ins[1]
    if p is None or idx is None:
        return [None]
    bd = _i(nd, "batch_dims")
    return [tuple(idx) + tuple(p[1 + bd:])] if bd == 0 else [None]


def _sf_unary(inf, nd, d, ins):
    return [ins[0] if ins else None]


def _sf_binary(inf, nd, d, ins):
    if len(ins) != 2:
        return None
    if (ins[0] is None) != (ins[1] is None) and nd.op in PARAMETER_OPS:
        p, t = (d[0], d[1]) if ins[0] is None else (d[1], d[0])
        src = inf.nodes.get(t[0])
        if inf.is_parameter(p) and src is not None and src.op not in CONSTANT_OPS:
            # a layer's parameters (shapeless variables) applied to a tensor: taken to broadcast into it
            return [ins[1] if ins[0] is None else ins[0]]
    return [broadcast(ins[0], ins[1])]


def _sf_select(inf, nd, d, ins):
    if len(ins) != 3:
        return None
    if nd.op == "Select":
        return [ins[1] if ins[1] is not None else ins[2]]
    return [broadcast(broadcast(ins[0], ins[1]), ins[2])]


def _sf_add_n(inf, nd, d, ins):
    out = ins[0] if ins else None
    for s in ins[1:]:
        out = _merge_same(out, s)
    return [out]


def _sf_bias_add(inf, nd, d, ins):
    """The value's shape, its channel dimension merged with the bias' length (TF's ``BiasAddShape``:
    a convolution of a shapeless kernel still gets its channels from the bias)."""
    s = ins[0]
    if s is None or len(ins) < 2 or ins[1] is None or len(ins[1]) != 1 or len(s) < 2:
        return [s]
    c = 1 if _s(nd, "data_format") == b"NCHW" else len(s) - 1
    return [tuple(merge_dims(x, ins[1][0]) if i == c else x for i, x in enumerate(s))]


def _sf_shaped_by_operand(inf, nd, d, ins):
    """``RandomUniform``/``RandomStandardNormal``/``TruncatedNormal``...: the shape input 0 holds."""
    return [inf.reshape(None, d[0])] if d else None


def _sf_candidate_sampler(inf, nd, d, ins):
    """The candidate samplers: ``[num_sampled]`` candidates, the true classes' expected counts
    (their shape), ``[num_sampled]`` sampled expected counts."""
    n = _i(nd, "num_sampled", -1)
    return [(n,), ins[0] if ins else None, (n,)]


def _sf_dynamic_partition(inf, nd, d, ins):
    """``DynamicPartition``: each of ``num_partitions`` outputs is ``[?] + data.shape[rank(partitions):]``."""
    n = _i(nd, "num_partitions", 1)
    data, parts = (ins + [None, None])[:2]
    if data is None or parts is None or len(parts) > len(data):
        return [None] * n
    return [(-1,) + tuple(data[len(parts):])] * n


def _sf_pad(inf, nd, d, ins):
    """``Pad``/``PadV2``/``MirrorPad``: each dimension grown by its constant paddings."""
    src = inf.nodes.get(d[1][0]) if len(d) > 1 and d[1][1] == 0 else None
    s, pads = ins[0], _const_value(src, max_rank=2) if src is not None else None
    if s is None:
        ps = ins[1] if len(ins) > 1 else None
        return [None if ps is None or len(ps) != 2 or ps[0] < 0 else (-1,) * ps[0]]
    if pads is None or len(pads) != 2 * len(s):
        return [(-1,) * len(s)]
    return [tuple(-1 if x < 0 or pads[2 * i] < 0 or pads[2 * i + 1] < 0 else x + pads[2 * i] + pads[2 * i + 1]
                  for i, x in enumerate(s))]


def _sf_slice(inf, nd, d, ins):
    """``Slice`` with a constant size (``-1``: to the end, known where the dimension and begin are)."""
    s = ins[0]
    size = inf.value_of(d[2]) if len(d) == 3 else None
    if size is None:
        return [None if s is None else (-1,) * len(s)]
    begin = inf.value_of(d[1])
    out = []
    for i, x in enumerate(size):
        if x >= 0:
            out.append(x)
        elif s is not None and i < len(s) and s[i] >= 0 and begin is not None and i < len(begin) and begin[i] >= 0:
            out.append(s[i] - begin[i])
        else:
            out.append(-1)
    return [tuple(out)]


def einsum_subscripts(equation: str, ranks: list) -> tuple[list, str] | None:
    """An ``Einsum`` equation's operand subscripts and output subscript, each ``...`` spelled as
    that many digits ``..8``, ``9`` (aligned right, as numpy broadcasts), or None where a rank
    is needed and unknown or the equation is not one jitsim reads.

    >>> einsum_subscripts("abc,cd->abd", [3, 2])
    (['abc', 'cd'], 'abd')
    >>> einsum_subscripts("...ij,jk->...ik", [4, 2])
    (['89ij', 'jk'], '89ik')
    """
    if "->" not in equation:
        return None
    lhs, out = equation.replace(" ", "").split("->")
    ins = lhs.split(",")
    if len(ins) != len(ranks):
        return None
    width = 0
    expanded = []
    for sub, r in zip(ins, ranks):
        if "..." in sub:
            if r is None:
                return None
            n = r - (len(sub) - 3)
            if n < 0:
                return None
            width = max(width, n)
            expanded.append(sub.replace("...", "".join(str(i) for i in range(10 - n, 10)) if n else ""))
        else:
            expanded.append(sub)
    if "..." in out:
        out = out.replace("...", "".join(str(i) for i in range(10 - width, 10)))
    letters = "".join(expanded) + out
    if any(not (c.isalpha() or c.isdigit()) for c in letters):
        return None
    return expanded, out


def _sf_einsum(inf, nd, d, ins):
    """``Einsum``: each output letter's size from the operands that hold it (``...`` broadcast)."""
    eq = _s(nd, "equation").decode("utf-8", "replace")
    parsed = einsum_subscripts(eq, [None if x is None else len(x) for x in ins])
    if parsed is None:
        return [None]
    subs, out = parsed
    size: dict = {}
    for sub, x in zip(subs, ins):
        if x is None or len(x) != len(sub):
            continue
        for c, v in zip(sub, x):
            prev = size.get(c, -1)
            size[c] = v if prev < 0 or (c.isdigit() and prev == 1) else prev
    return [tuple(size.get(c, -1) for c in out)]


def _sf_bias_add_grad(inf, nd, d, ins):
    s = ins[0]
    if s is None:
        return [(-1,)]
    return [(s[1] if _s(nd, "data_format") == b"NCHW" else s[-1],)]


def _sf_mat_mul(inf, nd, d, ins):
    a, b = ins[0], ins[1]
    m = -1 if a is None or len(a) != 2 else a[1 if _b(nd, "transpose_a") else 0]
    n = -1 if b is None or len(b) != 2 else b[0 if _b(nd, "transpose_b") else 1]
    return [(m, n)]


def _sf_batch_mat_mul(inf, nd, d, ins):
    a, b = ins[0], ins[1]
    if a is None or b is None or len(a) < 2 or len(b) < 2:
        return [None]
    m = a[-1] if _b(nd, "adj_x") else a[-2]
    n = b[-2] if _b(nd, "adj_y") else b[-1]
    batch = broadcast(a[:-2], b[:-2]) if nd.op != "BatchMatMul" else a[:-2]
    return [None if batch is None else tuple(batch) + (m, n)]


def _sf_reshape(inf, nd, d, ins):
    return [inf.reshape(ins[0], d[1])]


def _sf_transpose(inf, nd, d, ins):
    perm = inf.value_of(d[1])
    s = ins[0]
    if perm is None:
        return [None if s is None else (-1,) * len(s)]
    if s is None:
        return [(-1,) * len(perm)]
    return [tuple(s[p] for p in perm)] if len(perm) == len(s) else [None]


def _sf_expand_dims(inf, nd, d, ins):
    s, ax = ins[0], inf.value_of(d[1])
    if s is None or ax is None or len(ax) != 1:
        return [None]
    a = _axis(ax[0], len(s) + 1)
    return [None if a is None else tuple(s[:a]) + (1,) + tuple(s[a:])]


def _sf_squeeze(inf, nd, d, ins):
    s = ins[0]
    if s is None:
        return [None]
    dims = _ints(nd, "squeeze_dims")
    if dims:
        ax = {_axis(a, len(s)) for a in dims}
        return [tuple(x for i, x in enumerate(s) if i not in ax)]
    if any(x < 0 for x in s):
        return [None]
    return [tuple(x for x in s if x != 1)]


def _sf_concat(inf, nd, d, ins):
    vals, ax_ref = (d[:-1], d[-1]) if nd.op == "ConcatV2" else (d[1:], d[0])
    return [inf.concat([inf.shape_of(r) for r in vals], inf.value_of(ax_ref))]


def _sf_pack(inf, nd, d, ins):
    out = None
    for s in ins:
        out = s if out is None else _merge_same(out, s)
    if out is None:
        return [None]
    a = _axis(_i(nd, "axis"), len(out) + 1)
    return [None if a is None else tuple(out[:a]) + (len(ins),) + tuple(out[a:])]


def _sf_unpack(inf, nd, d, ins):
    s, num = ins[0], _i(nd, "num")
    if s is None:
        return [None] * num
    a = _axis(_i(nd, "axis"), len(s))
    return [tuple(x for i, x in enumerate(s) if i != a)] * num


def _sf_split(inf, nd, d, ins):
    ax, s, num = inf.value_of(d[0]), ins[1], _i(nd, "num_split", 1)
    if s is None or ax is None:
        return [None if s is None else (-1,) * len(s)] * num
    a = _axis(ax[0], len(s))
    if a is None:
        return [None] * num
    dim = s[a] // num if s[a] >= 0 else -1
    return [tuple(s[:a]) + (dim,) + tuple(s[a + 1:])] * num


def _sf_split_v(inf, nd, d, ins):
    s, sizes, ax = ins[0], inf.value_of(d[1]), inf.value_of(d[2])
    num = _i(nd, "num_split", 1)
    if s is None or ax is None or sizes is None or len(sizes) != num:
        return [None] * num
    a = _axis(ax[0], len(s))
    if a is None:
        return [None] * num
    if -1 in sizes and s[a] >= 0:
        sizes = [x if x != -1 else s[a] - sum(y for y in sizes if y != -1) for x in sizes]
    return [tuple(s[:a]) + (x,) + tuple(s[a + 1:]) for x in sizes]


def _sf_shape(inf, nd, d, ins):  # the value is the input's shape, when known
    s = ins[0]
    if s is not None:
        inf.values[(nd.name, 0)] = list(s)
    return [(-1,) if s is None else (len(s),)]


def _sf_shape_n(inf, nd, d, ins):
    out = []
    for i, s in enumerate(ins):
        if s is not None:
            inf.values[(nd.name, i)] = list(s)
        out.append((-1,) if s is None else (len(s),))
    return out


def _sf_fill(inf, nd, d, ins):
    dims = inf.value_of(d[0])
    if dims is None:
        s = ins[0]
        return [None if s is None or len(s) != 1 or s[0] < 0 else (-1,) * s[0]]
    return [tuple(dims)]


def _sf_switch(inf, nd, d, ins):
    return [ins[0], ins[0]] if ins else None


def _sf_merge(inf, nd, d, ins):
    out, first = None, True
    for r, s in zip(d, ins):
        src = inf.nodes.get(r[0])
        if src is not None and src.op in NEXT_ITERATION_OPS and not inf.back_edges:
            continue
        if r not in inf.shapes:
            continue
        out = s if first else relax(out, s)
        first = False
    return [out, ()]


def _sf_identity_n(inf, nd, d, ins):
    return list(ins)


def _sf_reduction(inf, nd, d, ins):
    return [inf.reduce(ins[0], inf.value_of(d[1]), _b(nd, "keep_dims"), ins[1])]


def _sf_arg_extreme(inf, nd, d, ins):
    return [inf.reduce(ins[0], inf.value_of(d[1]), False, ins[1])]


def _sf_tile(inf, nd, d, ins):
    s, mult = ins[0], inf.value_of(d[1])
    if s is None:
        ms = ins[1] if len(ins) > 1 else None
        return [(-1,) * ms[0] if ms is not None and len(ms) == 1 and ms[0] >= 0 else None]
    if mult is None or len(mult) != len(s):
        return [(-1,) * len(s)]
    return [tuple(x * m if x >= 0 else -1 for x, m in zip(s, mult))]


def _sf_broadcast_to(inf, nd, d, ins):
    shp = inf.value_of(d[1])
    return [None if shp is None else tuple(shp)]


def _sf_gather_v2(inf, nd, d, ins):
    p, idx, ax = ins[0], ins[1], inf.value_of(d[2])
    if p is None or idx is None or ax is None or _i(nd, "batch_dims") != 0:
        return [None]
    a = _axis(ax[0], len(p))
    return [None if a is None else tuple(p[:a]) + tuple(idx) + tuple(p[a + 1:])]


def _sf_strided_slice(inf, nd, d, ins):
    return [inf.strided_slice(nd, ins[0], d)]


def _sf_fused_batch_norm(inf, nd, d, ins):
    s = ins[0]
    c = -1 if s is None or len(s) != 4 else s[1 if _s(nd, "data_format") == b"NCHW" else 3]
    return [s] + [(c,)] * 4 + ([None] if nd.op == "FusedBatchNormV3" else [])


def _sf_conv(inf, nd, d, ins):
    return [inf.conv(nd, ins[0], ins[1], depthwise="Depthwise" in nd.op)]


def _sf_pool(inf, nd, d, ins):
    return [inf.pool(nd, ins[0])]


def _sf_conv_backprop(inf, nd, d, ins):  # the output is the shape its sizes operand names
    ref = d[1] if "Filter" in nd.op else d[0]
    v = inf.value_of(ref)
    if v is None:
        vs = inf.shape_of(ref)
        return [(-1,) * vs[0] if vs is not None and len(vs) == 1 and vs[0] >= 0 else None]
    return [tuple(v)]


def _sf_vector(inf, nd, d, ins):  # Range: a vector of unknown length
    return [(-1,)]


def _sf_one_hot(inf, nd, d, ins):
    s, depth = ins[0], inf.value_of(d[1])
    if s is None:
        return [None]
    dep = depth[0] if depth else -1
    a = _i(nd, "axis", -1)
    a = len(s) if a == -1 else a
    return [tuple(s[:a]) + (dep,) + tuple(s[a:])]


def _sf_sparse_xent(inf, nd, d, ins):
    if len(ins) != 2:
        return None
    # features [batch, classes], labels [batch] -> loss [batch], backprop [batch, classes]
    f, lab = ins
    batch = _merge_same((f[0],) if f is not None and len(f) == 2 else (-1,),
                        (lab[0],) if lab is not None and len(lab) == 1 else (-1,))
    b = batch[0] if batch is not None else -1
    return [(b,), (b, f[1] if f is not None and len(f) == 2 else -1)]


def _sf_xent(inf, nd, d, ins):
    if len(ins) != 2:
        return None
    both = broadcast(ins[0], ins[1])  # features and labels broadcast to [batch, classes]
    if both is None or len(both) != 2:
        return [(-1,), (-1, -1)]
    return [(both[0],), tuple(both)]


def _table(*entries) -> dict:
    """op -> shape function from ``(ops, fn)`` pairs; an op listed twice keeps its first entry."""
    out: dict = {}
    for ops, fn in entries:
        for op in ((ops,) if isinstance(ops, str) else ops):
            out.setdefault(op, fn)
    return out


# op -> its shape function: the ops whose shapes the Grappler simulation needs (module docstring)
SHAPE_FUNCTIONS: dict = _table(
    (CONSTANT_OPS, _sf_const),
    (SHAPED_PLACEHOLDER_OPS, _sf_placeholder),
    ("_Arg", _sf_arg),
    ("VarHandleOp", _sf_scalar),
    (("VariableV2", "Variable", "TemporaryVariable"), _sf_arg),  # a TF1 ref variable: its value, of `shape`
    ("ReadVariableOp", _sf_read_variable),
    ("ResourceGather", _sf_resource_gather),
    (UNARY, _sf_unary),
    (BINARY, _sf_binary),
    (SELECT_OPS, _sf_select),
    (ADD_N_LIKE, _sf_add_n),
    ("BiasAdd", _sf_bias_add),
    ("BiasAddGrad", _sf_bias_add_grad),
    (("MatMul", "_FusedMatMul"), _sf_mat_mul),
    (("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", "_MklBatchMatMulV2"), _sf_batch_mat_mul),
    ("Reshape", _sf_reshape),
    ("Transpose", _sf_transpose),
    ("ExpandDims", _sf_expand_dims),
    ("Squeeze", _sf_squeeze),
    (CONCAT_OPS, _sf_concat),
    ("Pack", _sf_pack),
    ("Unpack", _sf_unpack),
    ("Split", _sf_split),
    ("SplitV", _sf_split_v),
    ("Shape", _sf_shape),
    ("ShapeN", _sf_shape_n),
    (("Size", "Rank", "L2Loss"), _sf_scalar),
    ("Fill", _sf_fill),
    (BINARY_SWITCH_OPS, _sf_switch),
    (PLAIN_MERGE_OPS, _sf_merge),
    ("IdentityN", _sf_identity_n),
    (REDUCTIONS, _sf_reduction),
    (("ArgMax", "ArgMin"), _sf_arg_extreme),
    ("Tile", _sf_tile),
    ("BroadcastTo", _sf_broadcast_to),
    ("GatherV2", _sf_gather_v2),
    ("StridedSlice", _sf_strided_slice),
    (FUSED_BATCH_NORM_OPS, _sf_fused_batch_norm),
    (("Conv2D", "DepthwiseConv2dNative", "_FusedConv2D", "_FusedDepthwiseConv2dNative"), _sf_conv),
    (("MaxPool", "AvgPool"), _sf_pool),
    (("Conv2DBackpropFilter", "Conv2DBackpropInput", "DepthwiseConv2dNativeBackpropFilter",
      "DepthwiseConv2dNativeBackpropInput"), _sf_conv_backprop),
    ("Range", _sf_vector),
    ("OneHot", _sf_one_hot),
    ("Einsum", _sf_einsum),
    (("Pad", "PadV2", "MirrorPad"), _sf_pad),
    ("Slice", _sf_slice),
    ("DynamicPartition", _sf_dynamic_partition),
    (("LogUniformCandidateSampler", "UniformCandidateSampler", "FixedUnigramCandidateSampler",
      "LearnedUnigramCandidateSampler", "AllCandidateSampler", "ThreadUnsafeUnigramCandidateSampler"),
     _sf_candidate_sampler),
    (("RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt"), _sf_shaped_by_operand),
    ("ReverseV2", _sf_unary),
    ("SparseSoftmaxCrossEntropyWithLogits", _sf_sparse_xent),
    ("SoftmaxCrossEntropyWithLogits", _sf_xent),
)


def _window(size, k, stride, dilation, padding) -> int:
    if size < 0:
        return -1
    if padding == b"SAME":
        return (size + stride - 1) // stride
    if k < 0:
        return -1
    eff = (k - 1) * dilation + 1
    if padding == b"VALID":
        return max(0, (size - eff + stride) // stride)
    return -1  # EXPLICIT padding: not read


def _n_known(s) -> int:
    return sum(1 for x in s if x >= 0)


def compatible(a, b) -> bool:
    """Whether two shapes can describe the same tensor (None is compatible with anything)."""
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x < 0 or y < 0 or x == y for x, y in zip(a, b))


def _refine(a, b):
    """``a`` with its unknown dims filled from ``b`` where both have one rank (``b`` alone where
    ``a`` is None)."""
    if a is None:
        return b
    if b is None or len(a) != len(b):
        return a
    return tuple(y if x < 0 else x for x, y in zip(a, b))


def _merge_same(a, b):
    """Two shapes that must be equal (AddN, Pack inputs): their common knowledge."""
    if a is None:
        return b
    if b is None:
        return a
    if len(a) != len(b):
        return None
    return tuple(merge_dims(x, y) for x, y in zip(a, b))


def infer_shapes(graph, from_use: dict | None = None, unknown=frozenset(), seed: dict | None = None) -> dict:
    """``{(node, port): shape}`` for every output the analysis reaches (module docstring).
    ``graph``: a :class:`jitsim.graph.graphedit.EditGraph` or a :class:`jitsim.graph.Graph`;
    not modified. ``from_use`` (a dict) gets ``{variable: shape}`` for the variables whose
    shapes were read back from their uses (:meth:`_Inference.guess_from_use`), an assumption.
    ``unknown``: ``(node, port)`` tensors taken to be of unknown shape (a session call's feeds),
    recorded shapes then not read. ``seed``: variables' shapes already read back from their uses
    on an earlier form of the graph (the same variables: Grappler's rewrites keep them), taken
    as known at the start (and reported in ``from_use`` again)."""
    from jitsim.graph.graphedit import EditGraph, topological_order

    eg = graph if isinstance(graph, EditGraph) else EditGraph.from_graph(graph)
    inf = _Inference(eg.nodes, topological_order(eg), unknown)
    if seed:
        live = {v: s for v, s in seed.items() if v in eg.nodes}
        inf.var_shapes.update(live)
        inf.from_use.update(live)
    shapes = inf.run()
    if from_use is not None:
        from_use.update(inf.from_use)
    return shapes


def records_shapes(eg) -> bool:
    """Whether any node of ``eg`` records ``_output_shapes`` (SavedModel function bodies,
    ``as_graph_def(add_shapes=True)``)."""
    return any("_output_shapes" in nd.attr for nd in eg.nodes.values())


# ops whose output is their input (shape read through them when they record none)


class ShapeView:
    """The static shapes a simulated Grappler rewrite sees.

    ``shape(nd, port)``: the node's recorded ``_output_shapes``; with ``literals`` (or when
    inferring) for a ``Const`` its value's shape, for a ``Placeholder`` its ``shape``; otherwise, when ``infer`` and the graph records no
    ``_output_shapes`` at all, the shape :func:`infer_shapes` gives (computed once, when the
    view is made: rewrites keep a rewritten node's name and output shape). ``None``: unknown."""

    def __init__(self, eg=None, *, infer: bool = False, literals: bool = False, unknown=frozenset(),
                 seed: dict | None = None):
        self.inferred: dict = {}
        self.inferring = False
        self.literals = literals
        self.assumed: list[str] = []  # nodes a rewrite took for what their unknown shape hid
        self.from_use: dict = {}  # variable -> the shape read back from its uses (an assumption)
        self.unknown = frozenset(unknown)  # tensors of unknown shape (feeds); recorded shapes unread
        # a session call's unknown dimensions are unknown to TF too (a placeholder's None): the
        # rewrites then compare TF's symbols (SymbolicDims) rather than take them for one
        self.symbolic = False
        self._symbols = None
        self.eg = eg
        if eg is not None and (self.unknown or infer and not records_shapes(eg)):
            self.inferred = infer_shapes(eg, self.from_use, self.unknown, seed)
            self.inferring = True

    def shape(self, nd, port: int = 0, eg=None):
        if self.unknown:
            return None if (nd.name, port) in self.unknown else self.inferred.get((nd.name, port))
        ok, s = recorded(nd, port)
        if ok:
            return s
        eg = eg if eg is not None else self.eg
        if eg is not None and nd.op in PASS_THROUGH_OPS:
            # an Identity the inliner adds (`Func/<call>/input/_N`) records no shape; Grappler's
            # GraphProperties gives it its input's
            for _ in range(8):
                data = [r for r in nd.input if not r.startswith("^")]
                i = port if nd.op == "IdentityN" else 0
                if i >= len(data):
                    break
                src, port = parse_input(data[i])
                if src not in eg.nodes:
                    break
                nd = eg.nodes[src]
                ok, s = recorded(nd, port)
                if ok:
                    return s
                if nd.op not in PASS_THROUGH_OPS:
                    break
        if self.literals or self.inferring:
            if nd.op in CONSTANT_OPS and port == 0 and "value" in nd.attr:
                return _proto_shape(nd.attr["value"].tensor.tensor_shape)
            if nd.op == "Placeholder" and port == 0 and "shape" in nd.attr:
                return _proto_shape(nd.attr["shape"].shape)
        return self.inferred.get((nd.name, port))

    def symbolic_shape(self, nd, port: int = 0):
        """The shape as TF's symbolic shapes compare it: unknown dimensions as symbols (negative,
        below -1). In a session call (``symbolic``), TF's own symbols (:class:`SymbolicDims`,
        built once, on the graph as it stands at the first call); elsewhere every unknown
        dimension is the same symbol, -2 (TF's call knows what jitsim does not)."""
        if self.symbolic and self.eg is not None:
            if self._symbols is None:
                self._symbols = SymbolicDims(self.eg, self)
            d = self._symbols.dims((nd.name, port))
            if d is not None or nd.name in self._symbols.cache_keys:
                return d
        s = self.shape(nd, port)
        return None if s is None else tuple(-2 if x < 0 else x for x in s)

    def unknown_variable_slice(self, eg, ref) -> bool:
        """Whether tensor ``ref`` (a ``(node, port)``) is a variable's value, or a slice of it
        taken by shape-only ops (``Split``, ``Squeeze``, ``Unpack``, ``StridedSlice``, ``Gather``,
        ``Identity``, ``Cast``...), whose shape is unknown only because the graph does not say the
        variable's shape (a ConcreteFunction's captured variables are shapeless resource
        ``Placeholder`` nodes). Only when inferring; the caller decides what to assume of it."""
        if not self.inferring:
            return False
        name, port = ref
        for _ in range(16):
            nd = eg.nodes.get(name)
            if nd is None or self.shape(nd, port) is not None and nd.op != "ReadVariableOp":
                return False
            if nd.op == "ReadVariableOp":
                return self.shape(nd, 0) is None
            if nd.op not in SLICING:
                return False
            data = [parse_input(r) for r in nd.input if not r.startswith("^")]
            if not data:
                return False
            name, port = data[1] if nd.op == "Split" else data[0]
        return False

    def known(self, nd, port: int = 0):
        """The shape if every dimension is known, else None."""
        s = self.shape(nd, port)
        return list(s) if _known(s) else None


# ops whose output has the shape their shape operand (input 0) holds: ``RandomUniform(Shape(t))``
SHAPED_BY_OPERAND = frozenset({"RandomUniform", "RandomStandardNormal", "TruncatedNormal", "RandomUniformInt",
                               "StatelessRandomUniformV2", "Fill", "Empty"})
# gradient ops whose shape function merges both inputs' shapes (TF's MergeBothInputsShapeFn)
MERGE_BOTH = frozenset({"ReluGrad", "Relu6Grad", "EluGrad", "SeluGrad", "TanhGrad", "SigmoidGrad", "SoftplusGrad",
                        "SoftsignGrad", "SqrtGrad", "RsqrtGrad", "ReciprocalGrad", "LeakyReluGrad", "InvGrad"})


class SymbolicDims:
    """TF's symbolic dimensions, as far as jitsim follows them: every unknown dimension of a
    tensor is a symbol, and two symbols are one where TF's shape functions make them one: an
    element-wise op passes its operand's dimensions through where the other operands broadcast
    into them (1, missing, or the same symbol), a gradient op merges both inputs
    (``MergeBothInputsShapeFn``), ``MatMul`` takes ``m`` and ``n`` from its operands and merges
    their inner dimensions, ``BiasAdd`` merges the bias with the channels, a random tensor,
    ``Fill`` or ``Reshape`` shaped by ``Shape(t)`` takes ``t``'s dimensions (so does ``Tile(x, Shape(t))`` where
    ``x``'s are 1), ``Transpose`` permutes.
    ``dims(ref)``: the tensor's dims as ints (known) or symbol ids (negative, < -1); None for
    an unknown rank. ``same(a, b)``: the same rank and every dimension equal."""

    def __init__(self, eg, shapes):
        from jitsim.graph.graphedit import topological_order

        self.eg, self.shapes = eg, shapes
        self.parent: dict = {}
        self.cache: dict = {}
        self.cache_keys = frozenset(eg.nodes)  # the nodes it follows (later ones are read plainly)
        for name in topological_order(eg):
            try:
                self._node(eg.nodes[name])
            except (IndexError, KeyError, ValueError, TypeError):
                continue

    def _find(self, x):
        while self.parent.get(x, x) != x:
            x = self.parent[x] = self.parent.get(self.parent[x], self.parent[x])
        return x

    def _union(self, a, b):
        if a is None or b is None:
            return
        ra, rb = self._find(a), self._find(b)
        if ra != rb:
            self.parent[ra] = rb

    def _raw(self, ref):
        """Per dim: an int (known) or a symbol key ``(node, port, i)``."""
        if ref in self.cache:
            return self.cache[ref]
        nd = self.eg.nodes.get(ref[0])
        s = None if nd is None else self.shapes.shape(nd, ref[1])
        out = None if s is None else tuple(d if d >= 0 else (ref[0], ref[1], i) for i, d in enumerate(s))
        self.cache[ref] = out
        return out

    def _sym(self, d):
        return d if isinstance(d, int) else self._find(d)

    def _tie(self, a, b):
        """Two dims the shape functions make one (known sizes stay as they are)."""
        if not isinstance(a, int) and not isinstance(b, int):
            self._union(a, b)

    def _tie_all(self, x, y):
        if x is not None and y is not None and len(x) == len(y):
            for a, b in zip(x, y):
                self._tie(a, b)

    def _node(self, nd):
        data = [parse_input(r) for r in nd.input if not r.startswith("^")]
        if not data:
            return
        out = self._raw((nd.name, 0))
        ins = [self._raw(r) for r in data]
        op = nd.op
        if op in MERGE_BOTH or op == "AddN":
            for x in ins:
                self._tie_all(out, x)
        elif op in UNARY or op in ("ZerosLike", "OnesLike", "Identity", "Snapshot", "StopGradient"):
            self._tie_all(out, ins[0])
        elif op in BINARY or op in SELECT_OPS:
            if out is None:
                return
            n = len(out)
            for j in range(n):
                cand = []
                for x in ins:
                    if x is None or len(x) > n:
                        cand = None
                        break
                    k = j - (n - len(x))
                    if k < 0 or x[k] == 1:
                        continue
                    cand.append(x[k])
                if not cand:
                    continue
                first = cand[0]
                if all(self._sym(c) == self._sym(first) for c in cand[1:]) or len(cand) == 1:
                    self._tie(out[j], first)
        elif op == "MatMul" and len(ins) == 2 and all(x is not None and len(x) == 2 for x in ins) and out is not None:
            a, b = ins
            ta = "transpose_a" in nd.attr and nd.attr["transpose_a"].b
            tb = "transpose_b" in nd.attr and nd.attr["transpose_b"].b
            self._tie(out[0], a[1 if ta else 0])
            self._tie(out[1], b[0 if tb else 1])
            self._tie(a[0 if ta else 1], b[1 if tb else 0])
        elif op == "BiasAdd" and len(ins) == 2 and out is not None:
            self._tie_all(out, ins[0])
            if ins[0] is not None and ins[1] is not None and len(ins[1]) == 1:
                self._tie(ins[1][0], ins[0][-1])
        elif op in SHAPED_BY_OPERAND or op in ("Reshape", "BroadcastTo"):
            ref = data[0] if op in SHAPED_BY_OPERAND else data[1] if len(data) > 1 else None
            src = self.eg.nodes.get(ref[0]) if ref is not None else None
            if src is not None and src.op == "Shape" and ref[1] == 0:
                d = [parse_input(r) for r in src.input if not r.startswith("^")]
                if d:
                    self._tie_all(out, self._raw(d[0]))
        elif op == "Tile" and len(data) == 2 and out is not None and ins[0] is not None:
            # Tile(x, Shape(t)): a dim of x known to be 1 times t's dim is t's dim (a mean's gradient)
            src = self.eg.nodes.get(data[1][0])
            if src is not None and src.op == "Shape" and data[1][1] == 0:
                d = [parse_input(r) for r in src.input if not r.startswith("^")]
                t = self._raw(d[0]) if d else None
                if t is not None and len(t) == len(out) == len(ins[0]):
                    for o, x, m in zip(out, ins[0], t):
                        if x == 1:
                            self._tie(o, m)
        elif op == "Transpose" and out is not None and ins[0] is not None:
            perm = _const_value(self.eg.nodes[data[1][0]]) if len(data) > 1 and data[1][0] in self.eg.nodes else None
            if perm is not None and sorted(perm) == list(range(len(out))) and len(ins[0]) == len(out):
                for i, q in enumerate(perm):
                    self._tie(out[i], ins[0][q])

    def dims(self, ref):
        raw = self._raw(ref)
        if raw is None:
            return None
        ids: dict = self.__dict__.setdefault("_ids", {})
        return tuple(d if isinstance(d, int) else ids.setdefault(self._find(d), -2 - len(ids)) for d in raw)

    def same(self, a, b) -> bool:
        x, y = self.dims(a), self.dims(b)
        return x is not None and x == y
