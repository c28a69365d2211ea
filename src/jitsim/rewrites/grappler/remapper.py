"""Grappler's remapper, the CPU fusions TF 2.21 makes (oneDNN on, the x86 Linux default).

``Remapper`` (``grappler/optimizers/remapper.cc``) visits the graph from its last node to its
first and replaces, at each root not already fused, the largest pattern that matches:

* ``MatMul`` | ``Conv2D`` | ``DepthwiseConv2dNative`` -> ``BiasAdd`` [-> activation] becomes
  ``_FusedMatMul`` / ``_FusedConv2D`` / ``_FusedDepthwiseConv2dNative`` with
  ``fused_ops = ["BiasAdd"(, act)]``; activations: ``Relu``, ``Relu6``, ``Elu``, ``LeakyRelu``
  (``Relu``/``Relu6``/``Elu`` only after a depthwise convolution), and with oneDNN ``Tanh`` and
  ``Sigmoid`` after a ``MatMul`` only (TF 2.21 on CPU leaves a ``Sigmoid`` after ``Conv2D +
  BiasAdd`` unfused: EfficientNet's squeeze-excite blocks in TF's dumps; it fuses a TF 1 GRU's
  gates, ``MatMul + Add(bias) + Sigmoid``);
  With oneDNN an ``Add``/``AddV2`` of a 1-D tensor as long as the contraction output's last
  dimension counts as a ``BiasAdd`` (``IsBiasSemanticAdd``; a Keras GRU cell's
  ``MatMul + Squeeze(bias)``), shapes read through a
  :class:`jitsim.analyses.shape_inference.ShapeView` (recorded ``_output_shapes``, or inferred
  for a GraphDef that records none);
* ``Conv2D`` -> ``FusedBatchNorm``/``V2``/``V3`` (inference: ``is_training = false``)
  [-> activation] becomes ``_FusedConv2D`` with ``fused_ops = ["FusedBatchNorm"(, act)]``;
* ``MatMul -> BiasAdd -> 0.5 * x * erfc(-x / sqrt(2))`` (Keras' exact GELU) becomes
  ``_FusedMatMul`` with ``fused_ops = ["BiasAdd", "GeluExact"]`` (oneDNN);
* ``Sigmoid(x)`` and ``Mul(x, Sigmoid(x))`` (swish) becomes ``_MklSwish`` (oneDNN only);
* ``Conv2D -> Squeeze -> BiasAdd`` (Keras' ``Conv1D``, ``FindConvWithSqueezeAndBias``): the
  Conv2D becomes ``_FusedConv2D(fused_ops=["BiasAdd"])`` under its own name and the BiasAdd
  becomes the Squeeze (``AddFusedConvNode``);
* with oneDNN, tried first at each root: ``Conv2D``|``MatMul`` + bias + ``Add``/``AddV2`` of a
  same-shaped tensor (or a two-input ``AddN``) becomes ``_Fused*`` with
  ``fused_ops = ["BiasAdd", "Add"]`` named after the Add, the other operand a fourth input
  (``FindContractionWithBiasAddAndAdd``: ResNetV2's residual adds), and ``Conv2D`` + bias +
  such an Add + activation one with ``["BiasAdd", "Add", act]`` named after the activation
  (``FindContractionWithBiasAndAddActivation``: ResNet's ``relu(x + conv(y))``). Same-shaped:
  both shapes known to the rank, equal, unknown dimensions at the same places (Grappler's
  symbolic shapes; jitsim takes two unknown batch dimensions for the same);

Patterns and their conditions follow ``grappler/optimizers/remapper.cc`` of TF 2.21 (read, not
copied). The fused node takes the root's name and place (its consumers are untouched). Every
intermediate node must have that single consumer, not be a fetch/preserved node, and be on a
CPU; data types ``float`` or ``bfloat16``; convolutions in ``NHWC``. Of these ops only
``_FusedConv2D`` for int8 has an XLA kernel: a fused op splits the XLA cluster it would have
been in, which is why TF's clusters of a CNN end at every convolution with a bias.

Not simulated (recorded as a caveat by :mod:`jitsim.frontend.prepare`): approximate (tanh) GELU, LayerNorm / InstanceNorm, ``_FusedBatchNormEx``, batch-matmul and
the quantized/int8 patterns.
"""

from __future__ import annotations

from jitsim.registry import protos
from jitsim.graph.model import parse_input
from jitsim.codes import Code
from jitsim.records import RewriteRecord
from jitsim.rewrites.grappler import preserved
from jitsim.graph.graphedit import EditGraph, topological_order
from jitsim.analyses.shape_inference import ShapeView
from jitsim.opsets import ADD_OPS, ADD_OR_ADD_N_OPS, FUSED_BATCH_NORM_OPS

DT_FLOAT, DT_BFLOAT16 = 1, 14
CONTRACTIONS = {"MatMul": "_FusedMatMul", "Conv2D": "_FusedConv2D",
                "DepthwiseConv2dNative": "_FusedDepthwiseConv2dNative"}
ACTIVATIONS = frozenset({"Relu", "Relu6", "Elu", "LeakyRelu"})
# with oneDNN also Tanh and Sigmoid, after a MatMul only (IsSupportedActivation; a convolution's
# Sigmoid stays unfused: EfficientNet's squeeze-excite in TF's dumps; TF 1 GRU gates fused)
MATMUL_ONLY_ACTIVATIONS = frozenset({"Tanh", "Sigmoid"})
DEPTHWISE_ACTIVATIONS = frozenset({"Relu", "Relu6", "Elu"})
# attributes the fused op keeps from the contraction
KEEP_ATTRS = {
    "MatMul": ("T", "transpose_a", "transpose_b"),
    "Conv2D": ("T", "strides", "padding", "explicit_paddings", "data_format", "dilations", "use_cudnn_on_gpu"),
    "DepthwiseConv2dNative": ("T", "strides", "padding", "explicit_paddings", "data_format", "dilations"),
}


class _Matcher:
    def __init__(self, eg: EditGraph, keep: set[str], shapes: ShapeView | None = None):
        self.eg = eg
        self.keep = keep
        self.shapes = shapes if shapes is not None else ShapeView()

    def cpu(self, nd) -> bool:
        return "GPU" not in nd.device.upper()

    def dtype_ok(self, nd) -> bool:
        return "T" in nd.attr and nd.attr["T"].type in (DT_FLOAT, DT_BFLOAT16)

    def single_use(self, name: str, by: str) -> bool:
        """``name`` is an intermediate: not preserved, read only by ``by``, data output 0 only."""
        if name in self.keep:
            return False
        cons = self.eg.out_refs(name)
        return len(cons) == 1 and cons[0][0] == by and cons[0][2] == 0

    def data_input(self, name: str, i: int = 0) -> tuple[str, int] | None:
        data = [r for r in self.eg[name].input if not r.startswith("^")]
        return parse_input(data[i]) if i < len(data) else None

    def contraction(self, name: str, by: str):
        nd = self.eg[name] if name in self.eg else None
        if nd is None or nd.op not in CONTRACTIONS or not self.cpu(nd) or not self.dtype_ok(nd):
            return None
        if nd.op != "MatMul" and nd.attr["data_format"].s not in (b"NHWC", b""):
            return None
        return nd if self.single_use(name, by) else None


def _ctrl(nd) -> list[str]:
    return [r for r in nd.input if r.startswith("^")]


def _fuse(eg: EditGraph, root: str, contraction, extra_inputs: list[str], fused_ops: list[str],
          absorbed: list[str], *, epsilon: float | None = None, alpha: float | None = None) -> None:
    rnd = eg[root]
    fused_op = CONTRACTIONS[contraction.op]
    cdata = [r for r in contraction.input if not r.startswith("^")]
    ctrl: list[str] = []
    for n in [contraction.name] + absorbed:
        ctrl.extend(_ctrl(eg[n]))
    new = protos.NodeDef(name=root, op=fused_op, device=rnd.device)
    new.input.extend(cdata[:2] + extra_inputs + ctrl)
    for k in KEEP_ATTRS[contraction.op]:
        if k in contraction.attr:
            new.attr[k].CopyFrom(contraction.attr[k])
    t = contraction.attr["T"].type
    if fused_op != "_FusedMatMul":
        new.attr["TArgs"].list.type.extend([t] * len(extra_inputs))
        new.attr["num_host_args"].i = 0
    new.attr["num_args"].i = len(extra_inputs)
    new.attr["fused_ops"].list.s.extend(s.encode() for s in fused_ops)
    new.attr["epsilon"].f = epsilon if epsilon is not None else 0.0
    new.attr["leakyrelu_alpha"].f = alpha if alpha is not None else 0.2
    if "_class" in rnd.attr:
        new.attr["_class"].CopyFrom(rnd.attr["_class"])
    # the root keeps its name and consumers; intermediates go
    eg.set_inputs(root, [])
    rnd.Clear()
    rnd.CopyFrom(new)
    eg.set_inputs(root, list(new.input))
    pending = [contraction.name] + [a for a in absorbed if a != root]
    for n in pending:
        eg.provenance[n] = (root, f"fused by Grappler's remapper into {root!r} ({fused_op})")
    changed = True
    while changed:  # intermediates go once nothing reads them (their own Const operands too)
        changed = False
        for n in list(pending):
            if n in eg and not eg.consumers(n):
                consts = [parse_input(r)[0] for r in eg[n].input if not r.startswith("^")]
                eg.remove(n)
                pending.remove(n)
                changed = True
                for k in consts:
                    if k in eg and eg[k].op == "Const" and not eg.consumers(k):
                        eg.remove(k)


def _bias_semantic(m: _Matcher, contraction, bias_ref: str) -> bool:
    """oneDNN's ``IsBiasSemanticAdd``: the other operand of an ``Add`` is a 1-D tensor as long as
    the contraction output's last dimension."""
    src, port = parse_input(bias_ref)
    if src not in m.eg:
        return False
    if m.shapes.unknown_variable_slice(m.eg, (src, port)) and contraction.op == "MatMul":
        # a GraphDef that does not say its variables' shapes: a slice of a weight added to a
        # MatMul is taken for its bias (a Keras GRU cell's `MatMul + Squeeze(Split(bias))`),
        # which TF, knowing the variable's shape, fuses (Prepared.caveats says so)
        m.shapes.assumed.append(src)
        return True
    bshape = m.shapes.shape(m.eg[src], port)
    if bshape is None or len(bshape) != 1 or bshape[0] < 0:
        return False
    cshape = m.shapes.shape(contraction)
    want_rank = 2 if contraction.op == "MatMul" else 4
    if cshape is None or len(cshape) != want_rank:
        return False
    if cshape[-1] < 0 and m.shapes.inferring and bshape[0] > 1:
        # the contraction's width is unknown only because its weight is a variable whose shape
        # the graph does not say; an Add with a [n > 1] operand is valid only if it is n (or 1,
        # which no layer does): taken as n, as TF, knowing the weight, sees it
        m.shapes.assumed.append(src)
        return True
    return cshape[-1] == bshape[0]


def _try_bias(m: _Matcher, bias_add: str, by: str | None, onednn: bool = True):
    """``contraction -> BiasAdd`` (with oneDNN also ``contraction -> Add(bias-like)``), the
    BiasAdd read only by ``by`` (None: it is the root)."""
    eg = m.eg
    if bias_add not in eg:
        return None
    bnd = eg[bias_add]
    if not m.cpu(bnd):
        return None
    if bnd.op not in ("BiasAdd",) and not (onednn and bnd.op in ADD_OPS):
        return None
    if by is not None and not m.single_use(bias_add, by):
        return None
    data = [r for r in bnd.input if not r.startswith("^")]
    if len(data) != 2:
        return None
    orders = ((0, 1),) if bnd.op == "BiasAdd" else ((0, 1), (1, 0))
    for ci, bi in orders:
        src = parse_input(data[ci])
        if src[1] != 0:
            continue
        c = m.contraction(src[0], bias_add)
        if c is None:
            continue
        if bnd.op != "BiasAdd" and not _bias_semantic(m, c, data[bi]):
            continue
        return c, data[bi]
    return None


def _try_batch_norm(m: _Matcher, bn: str, by: str | None):
    eg = m.eg
    if bn not in eg:
        return None
    nd = eg[bn]
    if nd.op not in FUSED_BATCH_NORM_OPS or not m.cpu(nd) or ("is_training" in nd.attr and nd.attr["is_training"].b):
        return None
    # only output 0 may be used, by `by` when the BN is not the root
    outs = eg.out_refs(bn)
    if any(p != 0 for _, _, p in outs):
        return None
    if by is not None and not m.single_use(bn, by):
        return None
    src = m.data_input(bn, 0)
    if src is None or src[1] != 0:
        return None
    c = m.contraction(src[0], bn)
    if c is None or c.op != "Conv2D":
        return None
    data = [r for r in nd.input if not r.startswith("^")]
    return c, data[1:5], nd.attr["epsilon"].f if "epsilon" in nd.attr else 0.0001


def _const_input(m: _Matcher, name: str):
    """(the Const input, the other input) of a two-input node with one ``Const`` input."""
    data = [r for r in m.eg[name].input if not r.startswith("^")]
    if len(data) != 2:
        return None
    a, b = parse_input(data[0]), parse_input(data[1])
    if a[0] in m.eg and m.eg[a[0]].op == "Const":
        return a, b
    if b[0] in m.eg and m.eg[b[0]].op == "Const":
        return b, a
    return None


def _match_gelu_exact(m: _Matcher, root: str):
    """Keras' exact GELU on TF, ``0.5 * x * erfc(-x / sqrt(2))`` with ``x = BiasAdd(MatMul)``, fused
    into ``_FusedMatMul(fused_ops=[BiasAdd, GeluExact])``. Two forms: as built,
    ``Mul(Mul(0.5, x), Erfc(Mul(Neg(x), c)))``, and as the arithmetic optimizer's
    MinimizeBroadcasts leaves it (the scalar multiplied first, TF 2.21's dump),
    ``Mul(Mul(0.5, Erfc(...)), x)``; operands of a Mul in either order."""
    eg = m.eg
    data = [parse_input(r) for r in eg[root].input if not r.startswith("^")]
    if len(data) != 2:
        return None

    def erfc_of(ref):
        """x, and the Erfc's inner Mul and Neg, when ``ref`` is ``Erfc(Mul(Neg(x), c))``."""
        if ref[0] not in eg or eg[ref[0]].op != "Erfc":
            return None
        inner = m.data_input(ref[0], 0)
        if inner is None or inner[0] not in eg or eg[inner[0]].op != "Mul":
            return None
        sc = _const_input(m, inner[0])
        if sc is None or sc[1][0] not in eg or eg[sc[1][0]].op != "Neg":
            return None
        neg = sc[1][0]
        return m.data_input(neg, 0), inner[0], neg

    for a, b in ((data[0], data[1]), (data[1], data[0])):
        if a[0] not in eg or eg[a[0]].op != "Mul":
            continue
        hm = _const_input(m, a[0])
        if hm is None:
            continue
        got = erfc_of(b)
        if got is not None:  # as built: a = Mul(0.5, x), b = Erfc(...)
            x, inner, neg = got
            if x != hm[1]:
                continue
            erfc, chain, users = b[0], ((a[0], root), (b[0], root), (inner, b[0]), (neg, inner)), {a[0], neg}
        else:  # MinimizeBroadcasts' form: a = Mul(0.5, Erfc(...)), b = x
            got = erfc_of(hm[1])
            if got is None or got[0] != b:
                continue
            x, inner, neg = got
            erfc = hm[1][0]
            chain, users = ((a[0], root), (erfc, a[0]), (inner, erfc), (neg, inner)), {root, neg}
        if x is None or x[1] != 0:
            continue
        if not all(m.single_use(p, q) for p, q in chain):
            continue
        bias_add = x[0]
        if {c for c, _, _ in eg.out_refs(bias_add)} != users or bias_add in m.keep:
            continue
        if eg[bias_add].op != "BiasAdd":
            continue
        src = m.data_input(bias_add, 0)
        if src is None or src[1] != 0:
            continue
        c = m.contraction(src[0], bias_add)
        if c is None or c.op != "MatMul":
            continue
        bias = [r for r in eg[bias_add].input if not r.startswith("^")][1]
        return c, bias, [bias_add, a[0], erfc, inner, neg, root]
    return None


def _no_control(m: _Matcher, name: str) -> bool:
    """``HasControlFaninOrFanout`` is false: no control input, no control output."""
    return not _ctrl(m.eg[name]) and not m.eg.has_control_outputs(name)


def _same_dtype(a, b) -> bool:
    return "T" in a.attr and "T" in b.attr and a.attr["T"].type == b.attr["T"].type


def _try_conv_squeeze_bias(m: _Matcher, root: str):
    """``Conv2D -> Squeeze -> BiasAdd`` (Keras' ``Conv1D``: ``ExpandDims`` around a ``Conv2D``),
    the ``FindConvWithSqueezeAndBias`` conditions of ``remapper.cc``: the root is a ``BiasAdd``
    (a bias-like ``Add`` does not count), none of the three has control edges, the Squeeze and
    the Conv2D are read once (output 0) and not preserved, all share ``T``, the Squeeze does not
    drop the channel dimension (3), and the Conv2D is CPU-compatible. Returns (conv, squeeze)."""
    eg = m.eg
    bnd = eg[root]
    if bnd.op != "BiasAdd" or not m.cpu(bnd) or not _no_control(m, root):
        return None
    src = m.data_input(root, 0)
    if src is None or src[1] != 0 or src[0] not in eg:
        return None
    sq = eg[src[0]]
    if sq.op != "Squeeze" or not _same_dtype(bnd, sq) or not _no_control(m, sq.name) \
            or not m.single_use(sq.name, root):
        return None
    csrc = m.data_input(sq.name, 0)
    if csrc is None or csrc[1] != 0 or csrc[0] not in eg:
        return None
    conv = eg[csrc[0]]
    if conv.op != "Conv2D" or not _same_dtype(bnd, conv) or not _no_control(m, conv.name):
        return None
    if m.contraction(conv.name, sq.name) is None:
        return None
    if 3 in list(sq.attr["squeeze_dims"].list.i) if "squeeze_dims" in sq.attr else False:
        return None
    return conv, sq


def _fuse_conv_squeeze_bias(eg: EditGraph, root: str, conv, sq) -> None:
    """TF's ``AddFusedConvNode`` for the squeeze pattern: the Conv2D becomes a ``_FusedConv2D``
    (its own name, ``fused_ops = ["BiasAdd"]``, the BiasAdd's bias as third input) and the
    BiasAdd becomes the Squeeze (the BiasAdd's name, reading the fused convolution); the old
    Squeeze goes."""
    bias = [r for r in eg[root].input if not r.startswith("^")][1]
    cdata = [r for r in conv.input if not r.startswith("^")]
    new = protos.NodeDef(name=conv.name, op="_FusedConv2D", device=conv.device)
    new.input.extend(cdata[:2] + [bias])
    for k in KEEP_ATTRS["Conv2D"]:
        if k in conv.attr:
            new.attr[k].CopyFrom(conv.attr[k])
    new.attr["TArgs"].list.type.extend([conv.attr["T"].type])
    new.attr["num_host_args"].i = 0
    new.attr["num_args"].i = 1
    new.attr["fused_ops"].list.s.append(b"BiasAdd")
    new.attr["epsilon"].f = 0.0
    new.attr["leakyrelu_alpha"].f = 0.2
    for k in ("_class", "_output_shapes"):
        if k in conv.attr:
            new.attr[k].CopyFrom(conv.attr[k])
    eg.set_inputs(conv.name, [])
    conv.Clear()
    conv.CopyFrom(new)
    eg.set_inputs(conv.name, list(new.input))
    rnd = eg[root]
    squeezed = protos.NodeDef(name=root, op="Squeeze", device=rnd.device)
    squeezed.input.append(conv.name)
    for k, v in sq.attr.items():
        if k != "_output_shapes":
            squeezed.attr[k].CopyFrom(v)
    if "_output_shapes" in rnd.attr:
        squeezed.attr["_output_shapes"].CopyFrom(rnd.attr["_output_shapes"])
    eg.set_inputs(root, [])
    rnd.Clear()
    rnd.CopyFrom(squeezed)
    eg.set_inputs(root, [conv.name])
    eg.remove(sq.name)


def _same_shapes(m: _Matcher, a: tuple[str, int], b: tuple[str, int]) -> bool:
    """``ShapesSymbolicallyEqual`` of two tensors, as jitsim can tell it: both ranks known and
    every dimension equal, an unknown dimension matching an unknown one at the same place (in a
    CNN both operands of a residual add carry the batch dimension of the same input, which
    Grappler's symbolic shapes identify)."""
    if a[0] not in m.eg or b[0] not in m.eg:
        return False
    sa, sb = m.shapes.shape(m.eg[a[0]], a[1]), m.shapes.shape(m.eg[b[0]], b[1])
    if sa is None or sb is None or len(sa) != len(sb):
        return False
    return all(x == y and (x >= 0 or x == -1) for x, y in zip(sa, sb))


RESIDUAL_CONTRACTIONS = ("Conv2D", "MatMul")


def _try_bias_add_add(m: _Matcher, add: str, onednn: bool):
    """oneDNN's ``FindContractionWithBiasAddAndAdd``: ``add`` is an ``AddN`` of two inputs or an
    ``Add``/``AddV2`` whose operands have the same shape (no broadcast), on a CPU, float or
    bfloat16, without control edges; one operand (input 0 tried first) is a contraction + bias
    (``BiasAdd``, or a bias-like ``Add``) read only by ``add``. Returns (contraction, bias ref,
    side-input ref, the bias add's name). Only ``Conv2D`` and ``MatMul`` are fused (TF's
    rewrite knows no fused depthwise op with an ``Add``)."""
    if not onednn or add not in m.eg:
        return None
    eg = m.eg
    nd = eg[add]
    if nd.op not in ADD_OR_ADD_N_OPS or not m.cpu(nd) or not m.dtype_ok(nd) or not _no_control(m, add):
        return None
    data = [r for r in nd.input if not r.startswith("^")]
    if len(data) != 2:
        return None
    if nd.op != "AddN" and not _same_shapes(m, parse_input(data[0]), parse_input(data[1])):
        return None
    for port in (0, 1):
        src = parse_input(data[port])
        if src[1] != 0 or src[0] not in eg or src[0] in m.keep:
            continue
        bnd = eg[src[0]]
        if not _same_dtype(nd, bnd) or not _no_control(m, src[0]):
            continue
        if len(eg.out_refs(src[0])) != 1:
            continue
        hit = _try_bias(m, src[0], add, onednn)
        if hit is None:
            continue
        c, bias = hit
        if c.op not in RESIDUAL_CONTRACTIONS or not _no_control(m, c.name):
            continue
        return c, bias, data[1 - port], src[0]
    return None


def remap(eg: EditGraph, keep=frozenset(), *, onednn: bool = True, shapes: ShapeView | None = None) -> RewriteRecord:
    """Apply the CPU fusions (see the module docstring); edits ``eg`` in place. ``shapes``: the
    static shapes the bias-like ``Add`` check reads (default: recorded ``_output_shapes`` only)."""
    rec = RewriteRecord(Code.REMAPPER)
    m = _Matcher(eg, preserved(eg, keep), shapes)
    for root in reversed(topological_order(eg)):
        if root not in eg:
            continue
        nd = eg[root]
        if not m.cpu(nd):
            continue
        op = nd.op
        if op in ACTIVATIONS and onednn and m.dtype_ok(nd) and _no_control(m, root):
            # FindContractionWithBiasAndAddActivation (oneDNN, tried first): Conv2D + BiasAdd +
            # residual Add + activation
            src = m.data_input(root, 0)
            hit = None
            if src is not None and src[1] == 0 and m.single_use(src[0], root):
                hit = _try_bias_add_add(m, src[0], onednn)
            if hit is not None and hit[0].op == "Conv2D":
                c, bias, side, bias_add = hit
                alpha = nd.attr["alpha"].f if op == "LeakyRelu" and "alpha" in nd.attr else None
                _fuse(eg, root, c, [bias, side], ["BiasAdd", "Add", op], [bias_add, src[0], root], alpha=alpha)
                rec.add(root, f"Conv2D+BiasAdd+Add+{op}")
                continue
        if op in ADD_OR_ADD_N_OPS:
            hit = _try_bias_add_add(m, root, onednn)
            if hit is not None:
                c, bias, side, bias_add = hit
                _fuse(eg, root, c, [bias, side], ["BiasAdd", "Add"], [bias_add, root])
                rec.add(root, f"{c.op}+BiasAdd+Add")
                continue
        if op in ACTIVATIONS or (op in MATMUL_ONLY_ACTIVATIONS and onednn):
            src = m.data_input(root, 0)
            if src is None or src[1] != 0:
                continue
            alpha = nd.attr["alpha"].f if op == "LeakyRelu" and "alpha" in nd.attr else None
            hit = _try_bias(m, src[0], root, onednn)
            if hit is not None:
                c, bias = hit
                if c.op == "DepthwiseConv2dNative" and op not in DEPTHWISE_ACTIVATIONS or \
                        op in MATMUL_ONLY_ACTIVATIONS and c.op != "MatMul":
                    hit = None
                else:
                    kind = f"{c.op}+BiasAdd+{op}"
                    _fuse(eg, root, c, [bias], ["BiasAdd", op], [src[0], root], alpha=alpha)
                    rec.add(root, kind)
                    continue
            bn = _try_batch_norm(m, src[0], root)
            if bn is not None:
                c, args, eps = bn
                _fuse(eg, root, c, args, ["FusedBatchNorm", op], [src[0], root], epsilon=eps, alpha=alpha)
                rec.add(root, f"Conv2D+FusedBatchNorm+{op}")
                continue
        if op in ("BiasAdd", "Add", "AddV2"):
            hit = _try_bias(m, root, None, onednn)
            if hit is not None:
                c, bias = hit
                _fuse(eg, root, c, [bias], ["BiasAdd"], [root])
                rec.add(root, f"{c.op}+BiasAdd")
                continue
            sq = _try_conv_squeeze_bias(m, root) if op == "BiasAdd" else None
            if sq is not None:
                _fuse_conv_squeeze_bias(eg, root, *sq)
                rec.add(root, "Conv2D+Squeeze+BiasAdd")
                continue
        if op in FUSED_BATCH_NORM_OPS:
            bn = _try_batch_norm(m, root, None)
            if bn is not None:
                c, args, eps = bn
                _fuse(eg, root, c, args, ["FusedBatchNorm"], [root], epsilon=eps)
                rec.add(root, "Conv2D+FusedBatchNorm")
                continue
        if op == "Mul" and onednn and m.dtype_ok(nd):
            gelu = _match_gelu_exact(m, root)
            if gelu is not None:
                c, bias, absorbed = gelu
                _fuse(eg, root, c, [bias], ["BiasAdd", "GeluExact"], absorbed)
                rec.add(root, "MatMul+BiasAdd+GeluExact")
                continue
            data = [parse_input(r) for r in nd.input if not r.startswith("^")]
            if len(data) == 2:
                for a, b in ((0, 1), (1, 0)):
                    sig, x = data[a], data[b]
                    if sig[0] in eg and eg[sig[0]].op == "Sigmoid" and sig[1] == 0 and m.single_use(sig[0], root):
                        sx = m.data_input(sig[0], 0)
                        if sx == x:
                            ctrl = _ctrl(nd) + _ctrl(eg[sig[0]])
                            x_ref = [r for r in nd.input if not r.startswith("^")][b]
                            attrs = {"T": nd.attr["T"]}
                            eg.set_inputs(root, [x_ref] + ctrl)
                            nd.op = "_MklSwish"
                            for k in list(nd.attr):
                                if k not in ("T", "_class"):
                                    del nd.attr[k]
                            nd.attr["T"].CopyFrom(attrs["T"])
                            eg.remove(sig[0])
                            rec.add(root, "Sigmoid+Mul (swish)")
                            break
    return rec
