"""Tensors between ``TensorProto`` and numpy, and the two ways an evaluation can fail.

:func:`tensor_proto_to_numpy` reads a constant (numeric and bool dtypes);
:func:`to_tensor_proto` writes one as TF's ``SetAttrValue(const Tensor&)`` does.
"""

from __future__ import annotations

from jitsim.registry import protos


class Unsupported(Exception):
    """jitsim has no numpy kernel for this case; TF may fold it (a warning, nothing folded)."""


class EvalError(Exception):
    """The evaluation fails as TF's kernel would (nothing is folded, as in TF)."""


def numpy():
    """numpy, imported on first use (jitsim starts without it).

    Its OpenBLAS starts one thread a core when it loads, and where one cannot be made (a
    memory limit nearly reached: each thread's stack is address space) it raises SIGINT, which
    would end jitsim as "interrupted" (issue 39). Folding evaluates small tensors, with no use
    for those threads: unless the environment says otherwise, OpenBLAS is loaded with one
    (the environment is left as it was)."""
    import sys

    if "numpy" not in sys.modules:
        import os

        names = ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
        if not any(os.environ.get(n) for n in names):
            os.environ["OPENBLAS_NUM_THREADS"] = "1"
            try:
                import numpy as np
            finally:
                os.environ.pop("OPENBLAS_NUM_THREADS", None)
            return np
    import numpy as np

    return np


NP_DTYPES = {1: "float32", 2: "float64", 3: "int32", 4: "uint8", 5: "int16", 6: "int8",
             9: "int64", 10: "bool", 17: "uint16", 19: "float16", 22: "uint32", 23: "uint64",
             8: "complex64", 18: "complex128"}
DTYPE_SIZES = {1: 4, 2: 8, 3: 4, 4: 1, 5: 2, 6: 1, 9: 8, 10: 1, 17: 2, 19: 2, 22: 4, 23: 8,
               8: 8, 18: 16, 14: 2}


def total_bytes(arr, dtype: int) -> int:
    return int(arr.size) * DTYPE_SIZES.get(dtype, 8)


def tensor_proto_to_numpy(tp):
    """A ``TensorProto`` as a numpy array (numeric and bool dtypes)."""
    np = numpy()
    dt = tp.dtype
    if dt not in NP_DTYPES:
        raise Unsupported(f"constant of type {protos.dtype_name(dt)}")
    npdt = np.dtype(NP_DTYPES[dt]).newbyteorder("<")
    shape = tuple(d.size for d in tp.tensor_shape.dim)
    size = 1
    for d in shape:
        size *= d
    if tp.tensor_content:
        return np.frombuffer(tp.tensor_content, dtype=npdt).astype(npdt.newbyteorder("=")).reshape(shape)
    if dt == 1:
        vals = list(tp.float_val)
    elif dt == 2:
        vals = list(tp.double_val)
    elif dt in (3, 4, 5, 6, 17):
        vals = list(tp.int_val)
    elif dt == 9:
        vals = list(tp.int64_val)
    elif dt == 10:
        vals = list(tp.bool_val)
    elif dt == 19:
        vals = list(np.array(list(tp.half_val), dtype="uint16").view("float16"))
    elif dt == 22:
        vals = list(tp.uint32_val)
    elif dt == 23:
        vals = list(tp.uint64_val)
    elif dt == 8:
        s = list(tp.scomplex_val)
        vals = [complex(s[i], s[i + 1]) for i in range(0, len(s), 2)]
    elif dt == 18:
        s = list(tp.dcomplex_val)
        vals = [complex(s[i], s[i + 1]) for i in range(0, len(s), 2)]
    else:  # pragma: no cover
        raise Unsupported(f"constant of type {protos.dtype_name(dt)}")
    out = np.zeros(size, dtype=npdt.newbyteorder("="))
    if vals:
        n = min(len(vals), size)
        out[:n] = vals[:n]
        if n < size:
            out[n:] = vals[-1]
    return out.reshape(shape)


def to_tensor_proto(arr, dtype: int, tp) -> None:
    """``SetAttrValue(const Tensor&)``: more than one element -> ``tensor_content``, else the
    typed field (``Tensor::AsProtoField``)."""
    np = numpy()
    tp.dtype = dtype
    tp.tensor_shape.SetInParent()
    for d in arr.shape:
        tp.tensor_shape.dim.add(size=int(d))
    npdt = np.dtype(NP_DTYPES[dtype])
    arr = np.ascontiguousarray(arr, dtype=npdt)
    if arr.size > 1:
        tp.tensor_content = arr.astype(npdt.newbyteorder("<")).tobytes()
        return
    for v in arr.reshape(-1):
        if dtype == 1:
            tp.float_val.append(float(v))
        elif dtype == 2:
            tp.double_val.append(float(v))
        elif dtype in (3, 4, 5, 6, 17):
            tp.int_val.append(int(v))
        elif dtype == 9:
            tp.int64_val.append(int(v))
        elif dtype == 10:
            tp.bool_val.append(bool(v))
        elif dtype == 19:
            tp.half_val.append(int(np.array(v, dtype="float16").view("uint16")))
        elif dtype == 22:
            tp.uint32_val.append(int(v))
        elif dtype == 23:
            tp.uint64_val.append(int(v))
        elif dtype == 8:
            tp.scomplex_val.extend([float(v.real), float(v.imag)])
        elif dtype == 18:
            tp.dcomplex_val.extend([float(v.real), float(v.imag)])
