"""Encapsulate's constant-folding kernels against TensorFlow's own ops (marked ``tf``).

TF's EncapsulateSubgraphs folds constant-only subgraphs with its CPU kernels; jitsim evaluates
them with numpy. Here each kernel jitsim added for a fuzz-found difference is compared with the
TF op on the same inputs and attributes.
"""

from __future__ import annotations

import numpy as np
import pytest

from jitsim.registry import protos
from jitsim.rewrites.folding.kernels import KERNELS

pytestmark = pytest.mark.tf

# (input shape, begin, end, strides, masks)
SPECS = [
    ((4,), [0], [4], [1], {}),
    ((6,), [1], [5], [2], {}),
    ((6,), [-1], [0], [-2], {}),
    ((3, 4), [0, 1], [2, 3], [1, 1], {}),
    ((3, 4), [0, 1], [0, 3], [1, 1], {"begin_mask": 1, "end_mask": 1}),
    ((3, 4), [1, 0], [2, 4], [1, 1], {"shrink_axis_mask": 1}),
    ((3, 4), [0, 0], [1, 4], [1, 1], {"new_axis_mask": 1}),
    ((2, 3, 4), [0, 1], [0, 3], [1, 1], {"ellipsis_mask": 1}),
]


def _nodedef(op, masks):
    nd = protos.NodeDef(name="n", op=op)
    for k, v in masks.items():
        nd.attr[k].i = v
    return nd


@pytest.mark.parametrize("spec", SPECS, ids=[str(i) for i in range(len(SPECS))])
def test_strided_slice_and_its_gradient_fold_like_tf(spec):
    tf = pytest.importorskip("tensorflow")
    shape, begin, end, strides, masks = spec
    x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    args = [np.array(v, dtype=np.int32) for v in (begin, end, strides)]
    want = tf.raw_ops.StridedSlice(input=x, begin=args[0], end=args[1], strides=args[2], **masks).numpy()
    (got,) = KERNELS["StridedSlice"](np, [x, *args], _nodedef("StridedSlice", masks))
    np.testing.assert_array_equal(got, want)
    dy = np.arange(1, want.size + 1, dtype=np.float32).reshape(want.shape)
    shape_t = np.array(shape, dtype=np.int32)
    want_g = tf.raw_ops.StridedSliceGrad(shape=shape_t, begin=args[0], end=args[1], strides=args[2], dy=dy,
                                         **masks).numpy()
    (got_g,) = KERNELS["StridedSliceGrad"](np, [shape_t, *args, dy], _nodedef("StridedSliceGrad", masks))
    assert got_g.dtype == want_g.dtype
    np.testing.assert_array_equal(got_g, want_g)


@pytest.mark.parametrize("op", ["Cumsum", "Cumprod"])
@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_cumulative_ops_fold_like_tf(op, axis, exclusive, reverse, dtype):
    tf = pytest.importorskip("tensorflow")
    x = np.array([[-1, 0, 3], [1, 2, -2]], dtype=dtype)
    want = getattr(tf.raw_ops, op)(x=x, axis=axis, exclusive=exclusive, reverse=reverse).numpy()
    nd = protos.NodeDef(name="n", op=op)
    nd.attr["exclusive"].b = exclusive
    nd.attr["reverse"].b = reverse
    (got,) = KERNELS[op](np, [x, np.array(axis, dtype=np.int32)], nd)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("n", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_add_n_folds_like_tf(n, dtype):
    tf = pytest.importorskip("tensorflow")
    xs = [np.array([[1, -2], [3, 4]], dtype=dtype) * (k + 1) for k in range(n)]
    want = tf.raw_ops.AddN(inputs=xs).numpy()
    (got,) = KERNELS["AddN"](np, xs, protos.NodeDef(name="n", op="AddN"))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32])
def test_floor_mod_folds_like_tf(dtype):
    tf = pytest.importorskip("tensorflow")
    x = np.array([7, -7, 7, -7, 0, 5], dtype=dtype)
    y = np.array([3, 3, -3, -3, 2, 5], dtype=dtype)
    want = tf.raw_ops.FloorMod(x=x, y=y).numpy()
    (got,) = KERNELS["FloorMod"](np, [x, y], protos.NodeDef(name="n", op="FloorMod"))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("perm", [[0], [2, 0, 1], [3, 1, 0, 2]])
def test_invert_permutation_folds_like_tf(perm):
    tf = pytest.importorskip("tensorflow")
    x = np.array(perm, dtype=np.int32)
    want = tf.raw_ops.InvertPermutation(x=x).numpy()
    (got,) = KERNELS["InvertPermutation"](np, [x], protos.NodeDef(name="n", op="InvertPermutation"))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("out_idx", ["int32", "int64"])
def test_list_diff_folds_like_tf(out_idx):
    tf = pytest.importorskip("tensorflow")
    x = np.array([4, 1, 3, 1, 0, 2], dtype=np.int32)
    y = np.array([1, 2, 9], dtype=np.int32)
    want_out, want_idx = (t.numpy() for t in tf.raw_ops.ListDiff(x=x, y=y, out_idx=getattr(tf, out_idx)))
    nd = protos.NodeDef(name="n", op="ListDiff")
    nd.attr["out_idx"].type = getattr(tf, out_idx).as_datatype_enum
    got_out, got_idx = KERNELS["ListDiff"](np, [x, y], nd)
    np.testing.assert_array_equal(got_out, want_out)
    assert got_idx.dtype == want_idx.dtype
    np.testing.assert_array_equal(got_idx, want_idx)


def test_tanh_grad_folds_like_tf():
    tf = pytest.importorskip("tensorflow")
    y = np.tanh(np.linspace(-2, 2, 9)).astype(np.float32)
    dy = np.linspace(0.5, 1.5, 9).astype(np.float32)
    want = tf.raw_ops.TanhGrad(y=y, dy=dy).numpy()
    (got,) = KERNELS["TanhGrad"](np, [y, dy], protos.NodeDef(name="n", op="TanhGrad"))
    assert got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-7)


def _run(op, ins, **attrs):
    nd = protos.NodeDef(name="n", op=op)
    for k, v in attrs.items():
        if isinstance(v, bool):
            nd.attr[k].b = v
        else:
            nd.attr[k].type = v
    return KERNELS[op](np, ins, nd)


def test_activation_gradients_fold_like_tf():
    tf = pytest.importorskip("tensorflow")
    y = np.linspace(0.1, 0.9, 9).astype(np.float32)
    dy = np.linspace(-1.5, 1.5, 9).astype(np.float32)
    for op, kw in (("SigmoidGrad", dict(y=y, dy=dy)), ("SqrtGrad", dict(y=y, dy=dy))):
        want = getattr(tf.raw_ops, op)(**kw).numpy()
        (got,) = _run(op, [y, dy])
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-6)
    f = np.array([-1.0, 0.0, 2.0], dtype=np.float32)
    g = np.array([3.0, 4.0, 5.0], dtype=np.float32)
    np.testing.assert_array_equal(_run("ReluGrad", [g, f])[0], tf.raw_ops.ReluGrad(gradients=g, features=f).numpy())


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_arg_extremes_fold_like_tf(op, dim):
    tf = pytest.importorskip("tensorflow")
    x = np.array([[3, 1, 3], [0, 5, -2]], dtype=np.float32)
    d = np.array(dim, dtype=np.int32)
    for out_t in (tf.int64, tf.int32):
        want = getattr(tf.raw_ops, op)(input=x, dimension=d, output_type=out_t).numpy()
        (got,) = _run(op, [x, d], output_type=out_t.as_datatype_enum)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
def test_mat_mul_folds_like_tf(ta, tb):
    tf = pytest.importorskip("tensorflow")
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.arange(6, dtype=np.float32).reshape(3, 2)
    a, b = (a.T if ta else a), (b.T if tb else b)
    want = tf.raw_ops.MatMul(a=a, b=b, transpose_a=ta, transpose_b=tb).numpy()
    (got,) = _run("MatMul", [a, b], transpose_a=ta, transpose_b=tb)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("s0,s1", [([2, 3], [2, 3]), ([2, 3], [3]), ([1], [1]), ([4, 1, 3], [2, 1]), ([], [2, 2]),
                                   ([1, 2], [1, 2]), ([1, 3], [1]), ([1, 1, 3], [2, 1, 3]), ([1], []), ([1, 1], [1])])
def test_broadcast_gradient_args_fold_like_tf(s0, s1):
    tf = pytest.importorskip("tensorflow")
    a, b = np.array(s0, dtype=np.int32), np.array(s1, dtype=np.int32)
    want = [t.numpy() for t in tf.raw_ops.BroadcastGradientArgs(s0=a, s1=b)]
    got = _run("BroadcastGradientArgs", [a, b])
    for w, g in zip(want, got):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


def test_segment_and_stitch_ops_fold_like_tf():
    tf = pytest.importorskip("tensorflow")
    data = np.arange(12, dtype=np.float32).reshape(4, 3)
    ids = np.array([2, 0, 2, -1], dtype=np.int32)
    num = np.array(3, dtype=np.int32)
    want = tf.raw_ops.UnsortedSegmentSum(data=data, segment_ids=ids, num_segments=num).numpy()
    np.testing.assert_array_equal(_run("UnsortedSegmentSum", [data, ids, num])[0], want)
    idx = [np.array([0, 2], dtype=np.int32), np.array([[1], [3]], dtype=np.int32)]
    dat = [np.array([[1, 2], [3, 4]], dtype=np.int32), np.array([[[5, 6]], [[7, 8]]], dtype=np.int32)]
    want = tf.raw_ops.DynamicStitch(indices=idx, data=dat).numpy()
    np.testing.assert_array_equal(_run("DynamicStitch", idx + dat)[0], want)
