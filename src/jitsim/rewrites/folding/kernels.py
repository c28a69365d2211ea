"""The TF kernels jitsim's constant folding evaluates with numpy: one table, :data:`KERNELS`.

Each kernel is ``fn(np, inputs, nodedef) -> [outputs]``: numpy arrays in, one array per op
output out, raising :class:`~jitsim.rewrites.folding.tensors.EvalError` where TF's kernel fails
and :class:`~jitsim.rewrites.folding.tensors.Unsupported` where jitsim does not cover a case.
Every kernel added for a fuzz-found difference is checked against TF's own op
(tests/test_fold_kernels.py). EncapsulateSubgraphs' optimizer folds with :data:`KERNELS`;
Grappler's constant folding (:mod:`jitsim.rewrites.grappler.constant_folding`) also with
:data:`GRAPPLER_KERNELS`.
"""

from __future__ import annotations

from typing import Callable

from jitsim.registry import protos
from jitsim.rewrites.folding.tensors import NP_DTYPES, EvalError, Unsupported


def _axes(np, x, axis_arr):
    axes = [int(a) for a in np.asarray(axis_arr).reshape(-1)]
    out = []
    for a in axes:
        if not -x.ndim <= a < max(x.ndim, 1):
            raise EvalError("reduction axis out of range")
        out.append(a % x.ndim if x.ndim else 0)
    return tuple(sorted(set(out)))


def _reduce(fn_name):
    def run(np, ins, nd):
        x, axis = ins
        keep = nd.attr["keep_dims"].b if "keep_dims" in nd.attr else False
        ax = _axes(np, x, axis)
        if fn_name == "mean":
            if np.issubdtype(x.dtype, np.integer):
                count = 1
                for a in ax:
                    count *= x.shape[a]
                s = np.sum(x, axis=ax, keepdims=keep, dtype=np.int64)
                return [np.trunc(s / max(count, 1)).astype(x.dtype) if count else s.astype(x.dtype)]
            return [np.mean(x, axis=ax, keepdims=keep, dtype=x.dtype)]
        fn = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min,
              "all": np.all, "any": np.any}[fn_name]
        if fn_name in ("sum", "prod"):
            return [fn(x, axis=ax, keepdims=keep, dtype=x.dtype)]
        return [fn(x, axis=ax, keepdims=keep)]
    return run


def _binary(fn):
    def run(np, ins, nd):
        x, y = ins
        try:
            np.broadcast_shapes(x.shape, y.shape)
        except ValueError as exc:
            raise EvalError(str(exc)) from None
        with np.errstate(all="ignore"):
            return [fn(np, x, y)]
    return run


def _unary(fn):
    def run(np, ins, nd):
        with np.errstate(all="ignore"):
            return [fn(np, ins[0])]
    return run


def _int_div(np, x, y, floor):
    if np.issubdtype(x.dtype, np.integer):
        if np.any(y == 0):
            raise EvalError("integer division by zero")
        if floor:
            return np.floor_divide(x, y)
        q = np.abs(x) // np.abs(y)
        return np.where((x < 0) != (y < 0), -q, q)
    return np.floor(x / y) if floor else x / y


def _div_no_nan(np, x, y):
    safe = np.where(y == 0, np.ones_like(y), y)
    return np.where(y == 0, np.zeros_like(x / safe), x / safe)


def _cast(np, ins, nd):
    dst = nd.attr["DstT"].type
    if dst not in NP_DTYPES:
        raise Unsupported(f"Cast to {protos.dtype_name(dst)}")
    x = ins[0]
    if dst == 10:
        return [x != 0]
    with np.errstate(all="ignore"):
        return [x.astype(NP_DTYPES[dst])]


def _reshape(np, ins, nd):
    x, shape = ins
    shape = [int(s) for s in shape.reshape(-1)]
    try:
        return [x.reshape(shape)]
    except ValueError as exc:
        raise EvalError(str(exc)) from None


def _expand_dims(np, ins, nd):
    x, dim = ins
    d = int(np.asarray(dim).reshape(-1)[0])
    if not -x.ndim - 1 <= d <= x.ndim:
        raise EvalError("ExpandDims dim out of range")
    if d < 0:
        d += x.ndim + 1
    return [np.expand_dims(x, d)]


def _squeeze(np, ins, nd):
    x = ins[0]
    dims = list(nd.attr["squeeze_dims"].list.i) if "squeeze_dims" in nd.attr else []
    if not dims:
        return [np.squeeze(x)]
    return [np.squeeze(x, axis=tuple(d % x.ndim for d in dims))]


def _pack(np, ins, nd):
    axis = nd.attr["axis"].i if "axis" in nd.attr else 0
    if any(i.shape != ins[0].shape for i in ins):
        raise EvalError("Pack of different shapes")
    r = ins[0].ndim + 1
    if not -r <= axis < r:
        raise EvalError("Pack axis out of range")
    return [np.stack(ins, axis=axis % r)]


def _unpack(np, ins, nd):
    axis = nd.attr["axis"].i if "axis" in nd.attr else 0
    x = ins[0]
    axis %= x.ndim
    return [np.take(x, i, axis=axis) for i in range(x.shape[axis])]


def _concat(np, ins, nd, axis_first=False):
    if axis_first:
        axis, vals = ins[0], ins[1:]
    else:
        axis, vals = ins[-1], ins[:-1]
    a = int(np.asarray(axis).reshape(-1)[0])
    r = vals[0].ndim
    if not -r <= a < r:
        raise EvalError("Concat axis out of range")
    try:
        return [np.concatenate(vals, axis=a % r)]
    except ValueError as exc:
        raise EvalError(str(exc)) from None


def _slice(np, ins, nd):
    x, begin, size = ins
    idx = []
    for d, (b, s) in enumerate(zip(begin.reshape(-1), size.reshape(-1))):
        b, s = int(b), int(s)
        if s == -1:
            s = x.shape[d] - b
        if b < 0 or s < 0 or b + s > x.shape[d]:
            raise EvalError("Slice out of range")
        idx.append(slice(b, b + s))
    return [x[tuple(idx)]]


def _strided_slice(np, ins, nd):
    x, begin, end, strides = ins
    return [np.asarray(x[_strided_index(x.shape, begin, end, strides, nd)])]


def _strided_slice_grad(np, ins, nd):
    """StridedSliceGrad(shape, begin, end, strides, dy): zeros of ``shape`` with ``dy`` written
    where StridedSlice with the same spec reads."""
    shape, begin, end, strides, dy = ins
    out = np.zeros([int(d) for d in shape.reshape(-1)], dtype=dy.dtype)
    idx = _strided_index(out.shape, begin, end, strides, nd)
    view = out[idx]
    if view.size != dy.size:
        raise EvalError("StridedSliceGrad shape mismatch")
    out[idx] = dy.reshape(view.shape)
    return [out]


def _strided_index(x_shape, begin, end, strides, nd):
    """The numpy index of a StridedSlice spec (its masks from ``nd``) on an array of ``x_shape``."""
    ndim = len(x_shape)
    a = nd.attr
    bm = a["begin_mask"].i if "begin_mask" in a else 0
    em = a["end_mask"].i if "end_mask" in a else 0
    elm = a["ellipsis_mask"].i if "ellipsis_mask" in a else 0
    nam = a["new_axis_mask"].i if "new_axis_mask" in a else 0
    sam = a["shrink_axis_mask"].i if "shrink_axis_mask" in a else 0
    begin, end, strides = (list(int(v) for v in t.reshape(-1)) for t in (begin, end, strides))
    n = len(begin)
    specs = []
    for i in range(n):
        bit = 1 << i
        if elm & bit:
            specs.append(Ellipsis)
        elif nam & bit:
            specs.append(None)
        elif sam & bit:
            b = begin[i]
            specs.append(("shrink", b))
        else:
            if strides[i] == 0:
                raise EvalError("StridedSlice stride 0")
            specs.append(slice(None if bm & bit else begin[i], None if em & bit else end[i], strides[i]))
    n_after_ellipsis = 0
    if Ellipsis in specs:
        k = specs.index(Ellipsis)
        n_after_ellipsis = len([s for s in specs[k + 1:] if s is not None])
    idx = []
    dim = 0
    for j, s in enumerate(specs):
        if s is Ellipsis:
            skip = ndim - dim - n_after_ellipsis
            idx.append(Ellipsis)
            dim += skip
        elif s is None:
            idx.append(None)
        elif isinstance(s, tuple):
            b = s[1]
            size = x_shape[dim] if dim < ndim else 0
            if b < 0:
                b += size
            if not 0 <= b < size:
                raise EvalError("StridedSlice index out of range")
            idx.append(b)
            dim += 1
        else:
            idx.append(s)
            dim += 1
    return tuple(idx)


def _one_axis(x, axis, what: str) -> int:
    """A scalar axis argument, made non-negative; out of range is an evaluation error."""
    ax = int(axis.reshape(()))
    if ax < 0:
        ax += x.ndim
    if not 0 <= ax < x.ndim:
        raise EvalError(f"{what}: axis out of range")
    return ax


def _cumulative(kind):
    """Cumsum / Cumprod(x, axis) with the ``exclusive`` and ``reverse`` attributes."""

    def run(np, ins, nd):
        x, axis = ins
        ax = _one_axis(x, axis, kind)
        a = nd.attr
        exclusive = bool(a["exclusive"].b) if "exclusive" in a else False
        reverse = bool(a["reverse"].b) if "reverse" in a else False
        y = np.flip(x, ax) if reverse else x
        out = (np.cumsum if kind == "Cumsum" else np.cumprod)(y, axis=ax, dtype=x.dtype)
        if exclusive:
            first = np.take(out, [0], axis=ax)
            first = np.zeros_like(first) if kind == "Cumsum" else np.ones_like(first)
            out = np.concatenate([first, np.take(out, range(out.shape[ax] - 1), axis=ax)], axis=ax)
        return [np.flip(out, ax) if reverse else out]

    return run


def _floor_mod(np, x, y):
    if np.issubdtype(x.dtype, np.integer) and np.any(y == 0):
        raise EvalError("integer division by zero")
    return np.mod(x, y)


def _invert_permutation(np, ins, nd):
    (p,) = ins
    v = [int(i) for i in p.reshape(-1)]
    if p.ndim != 1 or sorted(v) != list(range(len(v))):
        raise EvalError("InvertPermutation: not a permutation")
    out = np.empty_like(p)
    out[np.asarray(v, dtype=np.int64)] = np.arange(len(v), dtype=p.dtype)
    return [out]


def _list_diff(np, ins, nd):
    """ListDiff(x, y) -> (out, idx): the values of x not in y, in x's order, and their positions."""
    x, y = ins
    if x.ndim != 1 or y.ndim != 1:
        raise EvalError("ListDiff needs vectors")
    drop = set(y.tolist())
    keep = [i for i, v in enumerate(x.tolist()) if v not in drop]
    idx_t = nd.attr["out_idx"].type if "out_idx" in nd.attr else 3
    return [np.asarray(x[keep], dtype=x.dtype), np.asarray(keep, dtype=NP_DTYPES[idx_t])]


def _arg_extreme(kind):
    def run(np, ins, nd):
        x, dim = ins
        ax = _one_axis(x, dim, kind)
        if x.shape[ax] == 0:
            raise EvalError(f"{kind}: empty dimension")
        out_t = nd.attr["output_type"].type if "output_type" in nd.attr else 9
        f = np.argmax if kind == "ArgMax" else np.argmin
        return [np.asarray(f(x, axis=ax), dtype=NP_DTYPES[out_t])]
    return run


def _mat_mul(np, ins, nd):
    a, b = ins
    if a.ndim != 2 or b.ndim != 2:
        raise EvalError("MatMul needs matrices")
    if "transpose_a" in nd.attr and nd.attr["transpose_a"].b:
        a = a.T
    if "transpose_b" in nd.attr and nd.attr["transpose_b"].b:
        b = b.T
    if a.shape[1] != b.shape[0]:
        raise EvalError("MatMul shape mismatch")
    return [np.asarray(a @ b, dtype=a.dtype)]


def _concat_offset(np, ins, nd):
    """ConcatOffset(dim, shape_0..shape_n-1) -> where each input starts in the concatenation:
    zeros but along ``dim``, the sum of the earlier shapes' ``dim``."""
    dim = int(np.asarray(ins[0]).reshape(-1)[0])
    shapes = [np.asarray(t).reshape(-1) for t in ins[1:]]
    rank = len(shapes[0])
    dim = dim + rank if dim < 0 else dim
    if not 0 <= dim < rank:
        raise ValueError("concat_dim out of range")
    out, at = [], 0
    for s in shapes:
        off = np.zeros(rank, dtype=s.dtype)
        off[dim] = at
        out.append(off)
        at += int(s[dim])
    return out


def _broadcast_gradient_args(np, ins, nd):
    """BroadcastGradientArgs(s0, s1) -> (r0, r1): the axes along which each operand's gradient
    must be summed after broadcasting the two shapes together."""
    s0, s1 = ([int(v) for v in t.reshape(-1)] for t in ins)
    dt = ins[0].dtype
    if s0 == s1:  # no broadcasting at all: nothing to reduce (even size-1 axes)
        return [np.zeros(0, dtype=dt), np.zeros(0, dtype=dt)]
    n = max(len(s0), len(s1))
    a = [1] * (n - len(s0)) + s0
    b = [1] * (n - len(s1)) + s1
    r0, r1 = [], []
    for i in range(n):
        if a[i] == b[i]:
            if a[i] == 1:
                r0.append(i)
                r1.append(i)
        elif a[i] == 1:
            r0.append(i)
        elif b[i] == 1:
            r1.append(i)
        else:
            raise EvalError("BroadcastGradientArgs: incompatible shapes")
    return [np.asarray(r0, dtype=dt), np.asarray(r1, dtype=dt)]


def _unsorted_segment_sum(np, ins, nd):
    data, ids, num = ins
    k = int(num.reshape(()))
    out = np.zeros((k,) + data.shape[ids.ndim:], dtype=data.dtype)
    flat_ids = ids.reshape(-1)
    flat = data.reshape((flat_ids.size,) + data.shape[ids.ndim:])
    for i, seg in enumerate(flat_ids.tolist()):
        if seg < 0:
            continue
        if seg >= k:
            raise EvalError("UnsortedSegmentSum: segment id out of range")
        out[seg] += flat[i]
    return [out]


def _dynamic_stitch(np, ins, nd):
    n = len(ins) // 2
    indices, data = ins[:n], ins[n:]
    size = 1 + max((int(i.max()) for i in indices if i.size), default=-1)
    inner = None
    for i, d in zip(indices, data):
        inner = d.shape[i.ndim:]
        break
    out = np.zeros((size,) + tuple(inner or ()), dtype=data[0].dtype)
    for i, d in zip(indices, data):
        flat_i = i.reshape(-1)
        flat_d = d.reshape((flat_i.size,) + tuple(inner or ()))
        for k, j in enumerate(flat_i.tolist()):
            out[j] = flat_d[k]
    return [out]


def _add_n(np, ins, nd):
    """AddN: the elementwise sum of its inputs (all of one shape and type)."""
    out = ins[0]
    for x in ins[1:]:
        if x.shape != out.shape:
            raise EvalError("AddN shape mismatch")
        out = out + x
    return [np.asarray(out, dtype=ins[0].dtype)]


def _tile(np, ins, nd):
    x, mult = ins
    return [np.tile(x, [int(m) for m in mult.reshape(-1)])]


def _fill(np, ins, nd):
    dims, value = ins
    return [np.full([int(d) for d in dims.reshape(-1)], value, dtype=value.dtype)]


def _range(np, ins, nd):
    start, limit, delta = (v.reshape(()) for v in ins)
    if delta == 0:
        raise EvalError("Range delta 0")
    out_t = nd.attr["Tidx"].type if "Tidx" in nd.attr else 3
    return [np.arange(start, limit, delta).astype(NP_DTYPES[out_t])]


def _shape_of(kind):
    def run(np, ins, nd):
        x = ins[0]
        out_t = nd.attr["out_type"].type if "out_type" in nd.attr else 3
        dt = NP_DTYPES[out_t]
        if kind == "shape":
            return [np.array(x.shape, dtype=dt)]
        if kind == "size":
            return [np.array(x.size, dtype=dt)]
        return [np.array(x.ndim, dtype="int32")]
    return run


def _transpose(np, ins, nd):
    x, perm = ins
    return [np.transpose(x, [int(p) for p in perm.reshape(-1)])]


def _broadcast_to(np, ins, nd):
    x, shape = ins
    try:
        return [np.broadcast_to(x, [int(s) for s in shape.reshape(-1)]).copy()]
    except ValueError as exc:
        raise EvalError(str(exc)) from None


def _select(np, ins, nd):
    c, t, e = ins
    if nd.op == "Select" and c.ndim == 1 and t.ndim > 1:
        c = c.reshape((-1,) + (1,) * (t.ndim - 1))
    return [np.where(c, t, e)]


def _gather(np, ins, nd):
    params, indices = ins[0], ins[1]
    axis = int(np.asarray(ins[2]).reshape(-1)[0]) if len(ins) > 2 else 0
    if "batch_dims" in nd.attr and nd.attr["batch_dims"].i:
        raise Unsupported("GatherV2 with batch_dims")
    axis %= params.ndim
    if np.any(indices < 0) or np.any(indices >= params.shape[axis]):
        raise EvalError("Gather index out of range")
    return [np.take(params, indices, axis=axis)]


def _identity_n(np, ins, nd):
    return list(ins)


KERNELS: dict[str, Callable] = {
    "Identity": lambda np, ins, nd: [ins[0]],
    "Snapshot": lambda np, ins, nd: [ins[0]],
    "StopGradient": lambda np, ins, nd: [ins[0]],
    "PreventGradient": lambda np, ins, nd: [ins[0]],
    "IdentityN": _identity_n,
    "Cast": _cast,
    "Neg": _unary(lambda np, x: np.negative(x)),
    "Abs": _unary(lambda np, x: np.abs(x)),
    "Square": _unary(lambda np, x: x * x),
    "Sign": _unary(lambda np, x: np.sign(x)),
    "Floor": _unary(lambda np, x: np.floor(x)),
    "Ceil": _unary(lambda np, x: np.ceil(x)),
    "Round": _unary(lambda np, x: np.round(x) if np.issubdtype(x.dtype, np.floating) else x),
    "Sqrt": _unary(lambda np, x: np.sqrt(x)),
    "Reciprocal": _unary(lambda np, x: np.reciprocal(x)),
    "Inv": _unary(lambda np, x: np.reciprocal(x)),
    "LogicalNot": _unary(lambda np, x: np.logical_not(x)),
    "ZerosLike": _unary(lambda np, x: np.zeros_like(x)),
    "OnesLike": _unary(lambda np, x: np.ones_like(x)),
    "Add": _binary(lambda np, x, y: x + y),
    "AddV2": _binary(lambda np, x, y: x + y),
    "Sub": _binary(lambda np, x, y: x - y),
    "Mul": _binary(lambda np, x, y: x * y),
    "RealDiv": _binary(lambda np, x, y: x / y),
    "Div": _binary(lambda np, x, y: _int_div(np, x, y, floor=False)),
    "TruncateDiv": _binary(lambda np, x, y: _int_div(np, x, y, floor=False)),
    "FloorDiv": _binary(lambda np, x, y: _int_div(np, x, y, floor=True)),
    "DivNoNan": _binary(_div_no_nan),
    "MulNoNan": _binary(lambda np, x, y: np.where(y == 0, np.zeros_like(x * y), x * y)),
    "Maximum": _binary(lambda np, x, y: np.maximum(x, y)),
    "Minimum": _binary(lambda np, x, y: np.minimum(x, y)),
    "SquaredDifference": _binary(lambda np, x, y: (x - y) * (x - y)),
    "Equal": _binary(lambda np, x, y: x == y),
    "NotEqual": _binary(lambda np, x, y: x != y),
    "Less": _binary(lambda np, x, y: x < y),
    "LessEqual": _binary(lambda np, x, y: x <= y),
    "Greater": _binary(lambda np, x, y: x > y),
    "GreaterEqual": _binary(lambda np, x, y: x >= y),
    "LogicalAnd": _binary(lambda np, x, y: np.logical_and(x, y)),
    "LogicalOr": _binary(lambda np, x, y: np.logical_or(x, y)),
    "Sum": _reduce("sum"),
    "Prod": _reduce("prod"),
    "Max": _reduce("max"),
    "Min": _reduce("min"),
    "Mean": _reduce("mean"),
    "All": _reduce("all"),
    "Any": _reduce("any"),
    "Reshape": _reshape,
    "ExpandDims": _expand_dims,
    "Squeeze": _squeeze,
    "Pack": _pack,
    "Unpack": _unpack,
    "ConcatV2": _concat,
    "Concat": lambda np, ins, nd: _concat(np, ins, nd, axis_first=True),
    "Slice": _slice,
    "StridedSlice": _strided_slice,
    "StridedSliceGrad": _strided_slice_grad,
    "Tile": _tile,
    "AddN": _add_n,
    "FloorMod": _binary(_floor_mod),
    "InvertPermutation": _invert_permutation,
    "ListDiff": _list_diff,
    "TanhGrad": _binary(lambda np, y, dy: dy * (np.ones_like(y) - y * y)),
    "SigmoidGrad": _binary(lambda np, y, dy: dy * (y * (np.ones_like(y) - y))),
    "SqrtGrad": _binary(lambda np, y, dy: dy * np.asarray(0.5, dtype=y.dtype) / y),
    "ReluGrad": _binary(lambda np, g, f: np.where(f > 0, g, np.zeros_like(g))),
    "ArgMax": _arg_extreme("ArgMax"),
    "ArgMin": _arg_extreme("ArgMin"),
    "MatMul": _mat_mul,
    "BroadcastGradientArgs": _broadcast_gradient_args,
    "ConcatOffset": _concat_offset,
    "UnsortedSegmentSum": _unsorted_segment_sum,
    "DynamicStitch": _dynamic_stitch,
    "Cumsum": _cumulative("Cumsum"),
    "Cumprod": _cumulative("Cumprod"),
    "Fill": _fill,
    "Range": _range,
    "Shape": _shape_of("shape"),
    "Size": _shape_of("size"),
    "Rank": _shape_of("rank"),
    "Transpose": _transpose,
    "BroadcastTo": _broadcast_to,
    "Select": _select,
    "SelectV2": _select,
    "GatherV2": _gather,
    "Gather": _gather,
}


def _f64(fn):
    """A float kernel evaluated in float64 (the evaluator casts the result to the node's dtype):
    TF's Eigen kernels approximate these functions, so a folded value can differ from TF's in
    the last bit or two (docs/fidelity.md, known limits)."""
    return _unary(lambda np, x: fn(np, x.astype(np.float64) if np.issubdtype(x.dtype, np.floating) else x))


# Elementwise float math TF's constant folding evaluates too (found by fuzzing with Grappler
# off, where constant-only chains reach the encapsulated cluster unfolded).
KERNELS.update({
    "Sin": _f64(lambda np, x: np.sin(x)),
    "Cos": _f64(lambda np, x: np.cos(x)),
    "Tan": _f64(lambda np, x: np.tan(x)),
    "Asin": _f64(lambda np, x: np.arcsin(x)),
    "Acos": _f64(lambda np, x: np.arccos(x)),
    "Atan": _f64(lambda np, x: np.arctan(x)),
    "Sinh": _f64(lambda np, x: np.sinh(x)),
    "Cosh": _f64(lambda np, x: np.cosh(x)),
    "Tanh": _f64(lambda np, x: np.tanh(x)),
    "Asinh": _f64(lambda np, x: np.arcsinh(x)),
    "Exp": _f64(lambda np, x: np.exp(x)),
    "Expm1": _f64(lambda np, x: np.expm1(x)),
    "Log": _f64(lambda np, x: np.log(x)),
    "Log1p": _f64(lambda np, x: np.log1p(x)),
    "Rsqrt": _f64(lambda np, x: 1.0 / np.sqrt(x)),
    "Sigmoid": _f64(lambda np, x: 1.0 / (1.0 + np.exp(-x))),
    "Softplus": _f64(lambda np, x: np.logaddexp(0.0, x)),
    "Softsign": _f64(lambda np, x: x / (1.0 + np.abs(x))),
    "Relu": _unary(lambda np, x: np.maximum(x, np.zeros_like(x))),
    "Relu6": _unary(lambda np, x: np.minimum(np.maximum(x, np.zeros_like(x)), np.full_like(x, 6))),
    "IsNan": _unary(lambda np, x: np.isnan(x)),
    "IsInf": _unary(lambda np, x: np.isinf(x)),
    "IsFinite": _unary(lambda np, x: np.isfinite(x)),
})


def _einsum(np, ins, nd):
    return [np.einsum(nd.attr["equation"].s.decode(), *ins)]


def _pow(np, ins, nd):
    return [np.power(ins[0], ins[1])]


# kernels beyond encapsulation's table that TF's folding meets in Keras/KerasHub models
# (rotary position embeddings: Einsum of constant positions and frequencies, then Cos/Sin)
GRAPPLER_KERNELS = {"Einsum": _einsum, "Pow": _pow}
