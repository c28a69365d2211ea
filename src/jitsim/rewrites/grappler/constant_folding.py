"""Grappler's constant folding, the part that changes clustering: constant subgraphs become
one ``Const``.

``ConstantFolding`` (``grappler/optimizers/constant_folding.cc``) evaluates, in topological
order, every node that is not to be preserved, is stateless, has a CPU kernel and whose data
inputs are all constants, and replaces it by a ``Const`` with the same name (single-output
nodes) that keeps its control inputs and those of its constant inputs (so a folded node
inside a cond branch stays in the branch). It also materializes ``Shape``/``Size``/``Rank`` of
tensors whose shape is fully known. Results over 10 MB are not folded (``kMaxConstantSize``).

jitsim evaluates with the numpy kernels of encapsulation's constant folding
(:mod:`jitsim.rewrites.folding.kernels`, checked against ``tf.raw_ops``); shapes are known from a
producer's ``_output_shapes`` attribute, a ``Placeholder``'s ``shape`` or a ``Const``'s value, and in
a GraphDef that records no shapes what :mod:`jitsim.analyses.shape_inference` infers (TF folds
with the shapes ``GraphProperties`` infers).
Nodes it cannot evaluate are left alone and counted by :func:`foldable_candidates`.

Of the arithmetic simplifications constant folding also makes, jitsim simulates the
neutral-element ones with a scalar constant (``x * 1``, ``1 * x``, ``x / 1``, ``x + 0``, ``0 + x``,
``x - 0`` become ``Identity(x)`` with a control edge from the constant, as TF's
``ReplaceOperationWithIdentity`` does). They matter: Keras' ``swish``/``silu`` computes
``x * sigmoid(1.0 * x)``, and only once ``1.0 * x`` is gone does the remapper see the swish
pattern it turns into ``_MklSwish`` (no XLA kernel): EfficientNet's clusters split there.

A reduction (``Sum``, ``Prod``, ``Min``, ``Max``, ``Mean``, ``Any``, ``All``) whose reduction
indices are a ``Const`` with no elements reduces nothing: TF's ``SimplifyReduction`` makes it an
``Identity`` of its input (the indices kept as a control input), whatever the input's shape, and
the dependency optimizer then bypasses it. ``tf.debugging.assert_equal`` on scalars builds
``All(Equal(x, y), Range(0, Rank=0, 1))``; once the ``Range`` is folded to ``[]`` the ``All`` goes,
and with it one clusterable op: TF Text's ragged-tensor checks then fall under the minimum
cluster size (``text_tokenizer``).
A ``Tile`` by a constant multiples vector of ones (or an empty one) likewise becomes an
``Identity`` (TF's ``SimplifyTile``): the gradient of a sum over a scalar tiles by ``[]``.
A division by a constant becomes a multiplication by its reciprocal, a new constant
``ConstantFolding/<name>_recip`` (TF's ``ReduceDivToReciprocalMul``, :func:`reduce_div_to_reciprocal_mul`).
Before it folds, TF materializes what its shape inference already knows (:func:`materialize_shapes`,
:func:`materialize_constants`): ``Shape``/``Size``/``Rank`` of a fully known shape, ``Fill`` of
constants, ``ZerosLike``/``OnesLike`` of a known shape, and the integer shape vectors it tracks
(``StridedSlice``/``Slice``/``ConcatV2``/``Pack`` of constant shape vectors) become constants
that wait on their former inputs by control edges; a folded node instead keeps only the control
inputs of itself and of its inputs, and none of its attributes (``_class`` included). A node of
several outputs folds into one ``ConstantFolding/<name>-folded-<i>`` per output (``ConcatOffset``,
``BroadcastGradientArgs``). Simplified after folding: ``Pack`` of one tensor to ``ExpandDims``
(``SimplifyPack``), ``Reshape`` to the shape its input has to ``Identity`` (``SimplifyReshape``),
``1 / y`` to ``Reciprocal(y)``. ``BroadcastGradientArgs`` of two shapes whose broadcast TF's
symbolic shapes decide becomes two constants ``ConstantFolding/<name>-bcastargs-<i>``
(:func:`materialize_broadcast_gradient_args`). In a session call, constant folding does not
assume valid feeds: a fed tensor's shape is unknown to it (``ShapeView(unknown=...)``). These were
measured on TF 1 session programs (TF's per-optimizer dumps of ``fixtures/tf1``).
Not simulated: partial folding of ``AddN``/``Concat``, moving constants through associative ops,
the shape-dependent reduction simplifications (reducing only size-1 dimensions: ``Identity``
with ``keep_dims``, ``Reshape`` without).
"""

from __future__ import annotations

from jitsim.registry import op_def, protos
from jitsim.graph.model import CONTROL, Graph, parse_input
from jitsim.rewrites.folding.kernels import GRAPPLER_KERNELS, KERNELS
from jitsim.rewrites.folding.tensors import NP_DTYPES, numpy, tensor_proto_to_numpy, to_tensor_proto
from jitsim.codes import Code
from jitsim.records import RewriteRecord
from jitsim.rewrites.grappler import control_dependency, preserved, switch_anchor
from jitsim.graph.graphedit import EditGraph, topological_order
from jitsim.analyses.shape_inference import ShapeView, SymbolicDims
from jitsim.opsets import BINARY_SWITCH_OPS, CONSTANT_OPS, ENTER_OPS, FUNCTION_IO_OPS, IDENTITY_N_OPS, SHAPED_PLACEHOLDER_OPS, SHAPE_SIZE_RANK_OPS

MAX_CONSTANT_BYTES = 10 * 1024 * 1024
NEVER_FOLD = frozenset({"Const", "HostConst", "Placeholder", "PlaceholderWithDefault", "_Arg", "_Retval",
                        "Identity", "IdentityN", "NoOp", "Enter", "Exit", "Switch", "Merge", "NextIteration",
                        "LoopCond", "RandomUniform", "RandomStandardNormal", "TruncatedNormal"})


MAX_PASSES = 10  # TF's ConstantFolding repeats its pass while it changes the graph (bounded)


def fold_constants(eg: EditGraph, keep=frozenset(), shapes: ShapeView | None = None) -> RewriteRecord:
    """Fold constant subgraphs and static shape queries (module docstring); edits ``eg``.
    ``shapes``: what is statically known (default: recorded shapes, Const and Placeholder shapes).
    As TF's optimizer does, the pass runs again while it changes something: a simplification
    (``x / 1`` to an Identity of a constant) makes more to fold (Gemma's rotary embedding)."""
    rec = _fold_once(eg, keep, shapes)
    for _ in range(MAX_PASSES - 1):
        more = _fold_once(eg, keep, shapes)
        if not more.count:
            break
        rec.extend(more)
    return rec


def _fold_once(eg: EditGraph, keep=frozenset(), shapes: ShapeView | None = None) -> RewriteRecord:
    from jitsim.registry.optypes import output_types

    np = numpy()
    shapes = shapes if shapes is not None else ShapeView(literals=True)
    shapes.literals = True
    # TF's pass: materialize shapes, fold, then simplify (neutral operands, after folding)
    rec = materialize_shape_n(eg, keep, shapes)
    rec.extend(materialize_shapes(eg, keep, shapes))
    rec.extend(materialize_constants(eg, keep, shapes))
    switches = simplify_switches(eg, keep)
    rec.extend(switches)
    keep_set = preserved(eg, keep)
    touched: set[str] = set()
    for name in topological_order(eg):
        if name not in eg or name in keep_set:
            continue
        nd = eg[name]
        if nd.op in NEVER_FOLD or "_noinline" in nd.attr:
            continue
        data = [parse_input(r) for r in nd.input if not r.startswith("^")]
        ctrl = [r for r in nd.input if r.startswith("^")]
        if not data or any(src not in eg for src, _ in data):
            continue
        outs_t = output_types(nd, None)
        if outs_t and len(outs_t) > 1:
            if _fold_outputs(eg, nd, data, ctrl, outs_t, np):
                rec.add(name, f"{nd.op} of constants: one Const per output")
                touched.update(src for src, _ in data)
            continue
        if not outs_t or len(outs_t) != 1 or outs_t[0] not in NP_DTYPES:
            continue
        # (Shape/Size/Rank of a static shape: materialize_shapes, before this loop)
        if not all(eg[src].op in CONSTANT_OPS for src, _ in data):
            continue
        fn = KERNELS.get(nd.op) or GRAPPLER_KERNELS.get(nd.op)
        if fn is None:
            continue
        try:
            ins = [tensor_proto_to_numpy(eg[src].attr["value"].tensor) for src, _ in data]
            value = fn(np, ins, nd)[0]
        except Exception:
            continue
        kind = f"{nd.op} of constants"
        for src, _ in data:
            ctrl.extend(r for r in eg[src].input if r.startswith("^"))
        try:
            arr = np.asarray(value).astype(NP_DTYPES[outs_t[0]])
        except Exception:
            continue
        if arr.nbytes > MAX_CONSTANT_BYTES:
            continue
        device = nd.device
        nd.op = "Const"
        for k in list(nd.attr):  # FoldNode: the constant's attributes only (`_class` goes too)
            del nd.attr[k]
        nd.attr["dtype"].type = outs_t[0]
        to_tensor_proto(arr, outs_t[0], nd.attr["value"].tensor)
        nd.device = device
        eg.set_inputs(name, ctrl)
        rec.add(name, kind)
        touched.update(src for src, _ in data)
    # TF simplifies after it folds, in the same pass: what folding has just made a constant
    # (a reduction's axes, a Tile's multiples, a neutral operand) is simplified now
    for simplified in (simplify_trivial_tiles(eg, keep), simplify_single_packs(eg, keep), move_constants_past_enter(eg, keep),
                       simplify_empty_reductions(eg, keep), simplify_reshapes(eg, keep, shapes),
                       simplify_neutral_operands(eg, keep, shapes), reduce_div_to_reciprocal_mul(eg, keep),
                       merge_concats(eg, keep)):
        rec.extend(simplified)
    # what folding leaves unread goes (TF's ConstantFolding deletes the nodes it made useless)
    while touched:
        n = touched.pop()
        nd = eg.nodes.get(n)
        if nd is None or n in keep_set or eg.consumers(n) or not _stateless(nd):
            continue
        ins = [parse_input(r)[0] for r in nd.input]
        eg.remove(n)
        touched.update(ins)
    for n in rec.nodes:
        if n in eg and n not in keep_set and not eg.consumers(n):
            eg.remove(n)
    return rec


def _to_const(eg: EditGraph, nd, value, dtype: int, *, keep_attrs=None) -> None:
    """``nd`` made a ``Const`` of ``value`` whose data inputs become control inputs (first, in
    order, once each), as TF's ``ReplaceOperationWithConstantTensor`` does; the attributes kept
    are TF's internal ones (``_class``...: ``EraseRegularNodeAttributes``) or ``keep_attrs``."""
    data = [r for r in nd.input if not r.startswith("^")]
    ctrl = [r for r in nd.input if r.startswith("^")]
    keep = keep_attrs if keep_attrs is not None else lambda k: k.startswith("_")
    for k in list(nd.attr):
        if not keep(k):
            del nd.attr[k]
    nd.op = "Const"
    nd.attr["dtype"].type = dtype
    to_tensor_proto(value, dtype, nd.attr["value"].tensor)
    deps: list[str] = []
    for r in [control_dependency(eg, r, nd) for r in data] + ctrl:
        if r not in deps:
            deps.append(r)
    eg.set_inputs(nd.name, deps)


def materialize_shapes(eg: EditGraph, keep=frozenset(), shapes: ShapeView | None = None) -> RewriteRecord:
    """TF's ``MaterializeShapes`` for ``Shape``/``Size``/``Rank`` of a tensor whose shape is fully
    known: the node becomes a ``Const`` of it, waiting on the tensor's node by a control input
    (so it runs where the shape op would have)."""
    rec = RewriteRecord(Code.CONSTANT_FOLDING)
    shapes = shapes if shapes is not None else ShapeView(literals=True)
    keep_set = preserved(eg, keep)
    np = numpy()
    for name in list(eg.nodes):
        nd = eg.nodes.get(name)
        if nd is None or nd.op not in SHAPE_SIZE_RANK_OPS or name in keep_set:
            continue
        data = [parse_input(r) for r in nd.input if not r.startswith("^")]
        if len(data) != 1 or data[0][0] not in eg.nodes:
            continue
        shp = shapes.known(eg[data[0][0]], data[0][1])
        out_t = nd.attr["out_type"].type if "out_type" in nd.attr else 3  # DT_INT32
        if shp is None or out_t not in NP_DTYPES:
            continue
        value = shp if nd.op == "Shape" else (int(np.prod(shp)) if nd.op == "Size" else len(shp))
        _to_const(eg, nd, np.array(value, dtype=NP_DTYPES[out_t]), out_t)
        rec.add(name, f"{nd.op} of a static shape")
    return rec


# ops whose value TF's GraphProperties knows from integer shape vectors it tracks (its
# ``tensors_as_shapes``): those constant folding materializes before it folds
SHAPE_VALUE_OPS = frozenset({"StridedSlice", "Slice", "ConcatV2", "Pack"})
MAX_SHAPE_VECTOR = 128  # GraphProperties' kThresholdToSkipConstTensorInstantiation (elements)


def _shape_vector(eg: EditGraph, ref):
    """An integer Const read as a shape (``MaybeTensorProtoToShape``): its dims (a scalar ``v >= 0``
    is ``[v]``), or None (not integer, too large, a matrix, a value below 0)."""
    nd = eg.nodes.get(parse_input(ref)[0])
    if nd is None or nd.op not in CONSTANT_OPS or "value" not in nd.attr:
        return None
    t = nd.attr["value"].tensor
    if t.dtype not in (3, 9) or len(t.tensor_shape.dim) > 1:
        return None
    try:
        v = tensor_proto_to_numpy(t)
    except Exception:
        return None
    if v.size > MAX_SHAPE_VECTOR:
        return None
    vals = [int(x) for x in v.reshape(-1)]
    if v.ndim == 0:
        return vals if vals[0] >= 0 else None
    return vals if all(x >= 0 for x in vals) else None


def _shape_value(eg: EditGraph, nd):
    """The value GraphProperties knows of ``nd`` from the shape vectors it reads (TF's
    ``MaybeUpdateNodeContextOutput``), or None."""
    data = [r for r in nd.input if not r.startswith("^")]
    if nd.op == "Pack":
        dims = []
        for r in data:
            src = eg.nodes.get(parse_input(r)[0])
            v = _shape_vector(eg, r)
            if v is None or src is None or len(src.attr["value"].tensor.tensor_shape.dim) != 0:
                return None
            dims.append(v[0])
        return dims
    if nd.op == "ConcatV2":
        out = []
        for r in data[:-1]:
            v = _shape_vector(eg, r)
            if v is None:
                return None
            out.extend(v)
        return out
    if nd.op in ("Slice", "StridedSlice"):
        base = _shape_vector(eg, data[0])
        if base is None or len(data) < 3:
            return None
        args = []
        for r in data[1:]:
            c = eg.nodes.get(parse_input(r)[0])
            if c is None or c.op not in CONSTANT_OPS or "value" not in c.attr:
                return None
            a = tensor_proto_to_numpy(c.attr["value"].tensor).reshape(-1)
            if a.size != 1:
                return None
            args.append(int(a[0]))
        if nd.op == "Slice":
            start, size = args[0], args[1]
            if start < 0 or start > len(base):
                return None
            return base[start:] if size == -1 else (base[start:start + size] if start + size <= len(base) else None)
        if any(nd.attr[k].i for k in ("ellipsis_mask", "new_axis_mask", "shrink_axis_mask") if k in nd.attr):
            return None
        bm = nd.attr["begin_mask"].i if "begin_mask" in nd.attr else 0
        em = nd.attr["end_mask"].i if "end_mask" in nd.attr else 0
        if bm not in (0, 1) or em not in (0, 1) or len(args) != 3 or args[2] == 0:
            return None
        begin = None if bm else args[0]
        end = None if em else args[1]
        return base[slice(begin, end, args[2])]
    return None


def _broadcast_shape(eg: EditGraph, ref, shapes: ShapeView):
    """TF's ``ExtractShape`` for ``BroadcastGradientArgs``: a ``Shape`` node's input's dims (-1
    unknown) with the tensor it measures, or a constant's values; None where the rank is unknown."""
    nd = eg.nodes.get(parse_input(ref)[0])
    if nd is None:
        return None
    if nd.op == "Shape":
        d = [parse_input(r) for r in nd.input if not r.startswith("^")]
        src = eg.nodes.get(d[0][0]) if d else None
        s = shapes.shape(src, d[0][1]) if src is not None else None
        return None if s is None else (list(s), d[0])
    if nd.op in CONSTANT_OPS and "value" in nd.attr and not nd.input:
        try:
            return [int(v) for v in tensor_proto_to_numpy(nd.attr["value"].tensor).reshape(-1)], None
        except Exception:
            return None
    return None


def materialize_broadcast_gradient_args(eg: EditGraph, keep=frozenset(), shapes: ShapeView | None = None) -> RewriteRecord:
    """TF's ``MaterializeBroadcastGradientArgs``: ``BroadcastGradientArgs`` of two shapes (each a
    ``Shape`` node or a constant) whose broadcast is decided (every unknown dimension paired
    with the same symbolic dimension, here: the two measured tensors have the same shape for
    TF's symbolic shape inference, :class:`jitsim.analyses.shape_inference.SymbolicDims`;
    extra leading dims known) has its two outputs made constants
    ``ConstantFolding/<name>-bcastargs-<i>`` (waiting on the node), read in their place (the
    gradient of ``x * mask`` in a dropout: no axis to reduce, so the Sum then goes too)."""
    rec = RewriteRecord(Code.CONSTANT_FOLDING)
    shapes = shapes if shapes is not None else ShapeView(literals=True)
    keep_set = preserved(eg, keep)
    np = numpy()
    same = None
    for name in list(eg.nodes):
        nd = eg.nodes.get(name)
        if nd is None or nd.op != "BroadcastGradientArgs" or name in keep_set or "T" not in nd.attr:
            continue
        data = [r for r in nd.input if not r.startswith("^")]
        outs = [f"ConstantFolding/{name}-bcastargs-{j}" for j in (0, 1)]
        if len(data) != 2 or f"ConstantFolding/{name}-folded-1" in eg.nodes or any(o in eg.nodes for o in outs) \
                or not any(p >= 0 for _, _, p in eg.out_refs(name)):
            continue
        a, b = (_broadcast_shape(eg, r, shapes) for r in data)
        if a is None or b is None:
            continue
        (s1, t1), (s2, t2) = a, b
        if any(d < 0 for d in s1 + s2):
            if same is None:
                same = SymbolicDims(eg, shapes)
            # TF's check: unknown dimensions only paired with the same symbol, extra ones known
            s1 = list(same.dims(t1)) if t1 is not None else s1
            s2 = list(same.dims(t2)) if t2 is not None else s2
            common = min(len(s1), len(s2))
            if any((x < 0 or y < 0) and x != y for x, y in zip(s1[:common], s2[:common])) or \
                    any(d < 0 for d in s1[common:] + s2[common:]):
                continue
        t = nd.attr["T"].type
        try:
            r0, r1 = KERNELS["BroadcastGradientArgs"](np, [np.array(s1), np.array(s2)], nd)
        except Exception:
            continue
        for out, v in zip(outs, (r0, r1)):
            const = protos.NodeDef(name=out, op="Const", device=nd.device)
            const.input.append("^" + name)
            const.attr["dtype"].type = t
            to_tensor_proto(np.asarray(v, dtype=NP_DTYPES[t]), t, const.attr["value"].tensor)
            eg.add_nodedef(const)
        for port in (0, 1):
            if any(p == port for _, _, p in eg.out_refs(name)):
                eg.replace_uses(name, port, outs[port])
        for out in outs:  # FoldGraph keeps no node nothing reads
            if not eg.consumers(out):
                eg.remove(out)
        rec.add(name, "BroadcastGradientArgs of decided shapes materialized")
    return rec


def materialize_constants(eg: EditGraph, keep=frozenset(), shapes: ShapeView | None = None) -> RewriteRecord:
    """TF's ``MaterializeConstants``, before it folds, over the graph in its order:

    * ``Fill`` of two constants (``MaterializeConstantValuedNode``): a ``Const`` of the filled
      value, keeping the node's attributes but ``T``/``index_type``, its inputs made control
      inputs (Keras' and ``tf.gradients``' ``ones``/``grad_ys_0``);
    * ``ZerosLike``/``OnesLike`` of a tensor of fully known shape: a ``Const`` of zeros/ones (no
      attributes kept), the input a control input;
    * an op of constants whose value TF's shape inference already knows, from the integer
      shape vectors it tracks (``StridedSlice``/``Slice`` of one element each, ``ConcatV2``,
      ``Pack`` of scalars; :func:`_shape_value`): a ``Const`` of it waiting on each former input
      (``MaterializeOutputValues``: ``tf.gather``'s gradient slicing a constant shape).

    Other constant subgraphs are folded next, their constants keeping only the control inputs
    of the folded node and of its inputs."""
    rec = materialize_broadcast_gradient_args(eg, keep, shapes)
    shapes = shapes if shapes is not None else ShapeView(literals=True)
    keep_set = preserved(eg, keep)
    np = numpy()
    for name in list(eg.nodes):
        nd = eg.nodes.get(name)
        if nd is None or name in keep_set or "_noinline" in nd.attr:
            continue
        data = [r for r in nd.input if not r.startswith("^")]
        if not data or any(parse_input(r)[0] not in eg.nodes for r in data):
            continue
        consts = all(eg[parse_input(r)[0]].op in CONSTANT_OPS for r in data)
        try:
            if nd.op == "Fill" and consts and len(data) == 2:
                dims, val = (tensor_proto_to_numpy(eg[parse_input(r)[0]].attr["value"].tensor) for r in data)
                dtype = eg[parse_input(data[1])[0]].attr["dtype"].type
                if dtype not in NP_DTYPES:
                    continue
                value = np.full([int(d) for d in dims.reshape(-1)], val, dtype=NP_DTYPES[dtype])
                if value.nbytes > MAX_CONSTANT_BYTES:
                    continue
                ctrl = [r for r in nd.input if r.startswith("^")]
                for k in ("T", "index_type"):
                    if k in nd.attr:
                        del nd.attr[k]
                nd.op = "Const"
                nd.attr["dtype"].type = dtype
                to_tensor_proto(value, dtype, nd.attr["value"].tensor)
                eg.set_inputs(name, ["^" + parse_input(r)[0] for r in data] + ctrl)
                rec.add(name, "Fill of constants materialized")
            elif nd.op in ("ZerosLike", "OnesLike") and len(data) == 1 and "T" in nd.attr:
                src, port = parse_input(data[0])
                shp = shapes.known(eg[src], port)
                dtype = nd.attr["T"].type
                if shp is None or dtype not in NP_DTYPES:
                    continue
                value = (np.zeros if nd.op == "ZerosLike" else np.ones)(shp, dtype=NP_DTYPES[dtype])
                if value.nbytes > MAX_CONSTANT_BYTES:
                    continue
                _to_const(eg, nd, value, dtype, keep_attrs=lambda k: False)
                rec.add(name, f"{nd.op} of a static shape materialized")
            elif nd.op in SHAPE_VALUE_OPS and consts:
                value = _shape_value(eg, nd)
                out_t = nd.attr["T"].type if nd.op in ("Pack", "ConcatV2") and "T" in nd.attr else \
                    eg[parse_input(data[0])[0]].attr["dtype"].type
                if value is None or out_t not in (3, 9):
                    continue
                _to_const(eg, nd, np.array(value, dtype=NP_DTYPES[out_t]), out_t)
                rec.add(name, f"{nd.op} of a known shape vector materialized")
        except (KeyError, ValueError, TypeError, IndexError):
            continue
    return rec


def _fold_outputs(eg: EditGraph, nd, data, ctrl, outs_t, np) -> bool:
    """A node of several outputs whose data inputs are all constants (``ConcatOffset``,
    ``BroadcastGradientArgs``, ``Unpack``... of constants), folded as TF's ``FoldNode`` does: one
    ``Const`` per output, ``ConstantFolding/<name>-folded-<i>`` (the node's control inputs and
    its inputs' with it), each consumer of output i reading the i-th, a control consumer waiting
    on the last; the node, read no more, goes."""
    if not all(eg[src].op in CONSTANT_OPS for src, _ in data) or any(t not in NP_DTYPES for t in outs_t):
        return False
    fn = KERNELS.get(nd.op) or GRAPPLER_KERNELS.get(nd.op)
    if fn is None:
        return False
    try:
        ins = [tensor_proto_to_numpy(eg[src].attr["value"].tensor) for src, _ in data]
        values = [np.asarray(v).astype(NP_DTYPES[t]) for v, t in zip(fn(np, ins, nd), outs_t)]
    except Exception:
        return False
    names = [f"ConstantFolding/{nd.name}-folded-{i}" for i in range(len(outs_t))]
    if len(values) != len(outs_t) or any(n in eg.nodes for n in names) or \
            sum(v.nbytes for v in values) > MAX_CONSTANT_BYTES:
        return False
    deps = list(ctrl)
    for src, _ in data:
        deps.extend(r for r in eg[src].input if r.startswith("^") and r not in deps)
    for n, v, t in zip(names, values, outs_t):
        const = protos.NodeDef(name=n, op="Const", device=nd.device)
        const.input.extend(deps)
        const.attr["dtype"].type = t
        to_tensor_proto(v, t, const.attr["value"].tensor)
        eg.add_nodedef(const)
    for c in sorted(eg.consumers(nd.name)):
        refs = []
        for r in eg[c].input:
            src, port = parse_input(r)
            if src != nd.name:
                refs.append(r)
            elif port < 0:
                refs.append("^" + names[-1])
            else:
                refs.append(names[port])
        eg.set_inputs(c, refs)
    return True


def _concat_axis(eg: EditGraph, nd):
    """TF's ``GetConcatAxis``: a ``ConcatV2``'s axis when its last data input is a constant."""
    if nd.op != "ConcatV2":
        return None
    data = [r for r in nd.input if not r.startswith("^")]
    if not data:
        return None
    src = eg.nodes.get(parse_input(data[-1])[0])
    if src is None or src.op not in CONSTANT_OPS or "value" not in src.attr:
        return None
    try:
        return int(tensor_proto_to_numpy(src.attr["value"].tensor).reshape(-1)[0])
    except Exception:
        return None


def merge_concats(eg: EditGraph, keep=frozenset()) -> RewriteRecord:
    """TF's ``MergeConcat``: a ``ConcatV2`` read by one node only, itself a ``ConcatV2`` on the
    same constant axis, is spliced into it (its tensors where it was read, its control inputs
    appended) and becomes a NoOp (InceptionV3's nested concatenations). Not when every tensor
    it concatenates is a constant (folding takes those) or when it is preserved."""
    rec = RewriteRecord(Code.CONSTANT_FOLDING)
    keep_set = preserved(eg, keep)
    for name in list(eg.nodes):
        nd = eg.nodes.get(name)
        if nd is None or name in keep_set:
            continue
        axis = _concat_axis(eg, nd)
        consumers = eg.consumers(name)
        if axis is None or len(consumers) != 1:
            continue
        data = [r for r in nd.input if not r.startswith("^")]
        if all(eg.nodes.get(parse_input(r)[0]) is not None and eg.nodes[parse_input(r)[0]].op in CONSTANT_OPS
               for r in data[:-1]):
            continue
        parent = eg.nodes[consumers[0]]
        if _concat_axis(eg, parent) != axis:
            continue
        pdata = [r for r in parent.input if not r.startswith("^")]
        tasks = set()
        for r in pdata[:-1]:
            src = eg.nodes.get(parse_input(r)[0])
            if src is not None and src.device:
                tasks.add(src.device.split("/device:")[0])
        if len(tasks) >= 2:
            continue
        new = []
        for r in parent.input:
            if parse_input(r)[0] == name and not r.startswith("^") and parse_input(r)[1] == 0:
                new.extend(data[:-1])
            else:
                new.append(r)
        ctrl = [r for r in nd.input if r.startswith("^")]
        new.extend(reversed(ctrl))
        eg.set_inputs(parent.name, new)
        parent.attr["N"].i = sum(1 for r in parent.input if not r.startswith("^")) - 1
        # the child becomes a NoOp waiting on what it read (ReplaceOperationWithNoOp)
        for k in list(nd.attr):
            if k != "_class":
                del nd.attr[k]
        nd.op = "NoOp"
        eg.set_inputs(name, ["^" + parse_input(r)[0] for r in nd.input])
        rec.add(name, f"ConcatV2 merged into {parent.name!r}")
    return rec


def materialize_shape_n(eg: EditGraph, keep=frozenset(), shapes: ShapeView | None = None) -> RewriteRecord:
    """TF's ``MaterializeShapes`` for ``ShapeN``: each output whose input's shape is fully known
    becomes a constant ``ConstantFolding/<name>-matshapes-<port>`` (waiting on the ShapeN by a
    control input), read in its place; the outputs of unknown shapes stay (a gradient's
    ``ShapeN`` of a known kernel and a batch-dependent activation)."""
    rec = RewriteRecord(Code.CONSTANT_FOLDING)
    shapes = shapes if shapes is not None else ShapeView(literals=True)
    keep_set = preserved(eg, keep)
    np = numpy()
    for name in list(eg.nodes):
        nd = eg.nodes.get(name)
        if nd is None or nd.op != "ShapeN" or name in keep_set:
            continue
        data = [parse_input(r) for r in nd.input if not r.startswith("^")]
        out_t = nd.attr["out_type"].type if "out_type" in nd.attr else 3  # DT_INT32
        if out_t not in NP_DTYPES:
            continue
        for port, (src, sport) in enumerate(data):
            if src not in eg.nodes:
                continue
            shp = shapes.known(eg.nodes[src], sport)
            if shp is None:
                continue
            const = f"ConstantFolding/{name}-matshapes-{port}"
            if const not in eg.nodes:
                c = eg.add(const, "Const", [f"^{name}"], device=nd.device,
                           attrs={"dtype": protos.AttrValue(type=out_t)})
                to_tensor_proto(np.array(shp, dtype=NP_DTYPES[out_t]), out_t, c.attr["value"].tensor)
            if any(p == port for _, _, p in eg.out_refs(name)):
                eg.replace_uses(name, port, const)
                rec.add(const, f"output {port} of ShapeN {name!r}: a static shape")
    return rec


def _stateless(nd) -> bool:
    """A node whose only effect is its outputs (a constant, or an op whose OpDef is not
    stateful, not a function's argument): one folding left unread can go."""
    if nd.op in CONSTANT_OPS:
        return True
    if nd.op in FUNCTION_IO_OPS or nd.op == "Placeholder" or nd.op == "NoOp":
        return False
    od = op_def(nd.op)
    return od is not None and not od.is_stateful


NEUTRAL = {  # op -> (neutral value, operand positions the constant may take)
    "Mul": (1.0, (0, 1)), "MulNoNan": (1.0, (1,)), "Div": (1.0, (1,)), "RealDiv": (1.0, (1,)),
    "Add": (0.0, (0, 1)), "AddV2": (0.0, (0, 1)), "Sub": (0.0, (1,)),
}


def _scalar_one(eg: EditGraph, ref: str) -> bool:
    cnd = eg.nodes.get(parse_input(ref)[0])
    if cnd is None or cnd.op != "Const" or "value" not in cnd.attr:
        return False
    try:
        v = tensor_proto_to_numpy(cnd.attr["value"].tensor)
    except Exception:
        return False
    return v.ndim == 0 and v == 1


def _keeps_shape(eg: EditGraph, name: str, ref: str, shapes: ShapeView | None, cache: list) -> bool:
    """Whether operand ``ref`` of element-wise ``name`` has the output's shape for TF's symbolic
    shapes (a ``x * ones_like(x)``): both of known rank, the same symbols."""
    if shapes is None:
        return False
    if not cache:
        cache.append(SymbolicDims(eg, shapes))
    return cache[0].same(parse_input(ref), (name, 0))


def simplify_neutral_operands(eg: EditGraph, keep=frozenset(), shapes: ShapeView | None = None) -> RewriteRecord:
    """``x op c`` with ``c`` a scalar neutral constant becomes ``Identity(x)`` (``^c`` kept); a
    division of a scalar one by ``y`` (floating or complex) becomes ``Reciprocal(y, ^one)``, as
    TF's ``SimplifyArithmeticOperations`` checks it first (``ReplaceDivisionOfOnesByReciprocal``:
    ``tf.clip_by_global_norm``'s ``1.0 / global_norm``). TF requires the kept operand's shape to
    be the output's: where ``shapes`` holds a session's feeds, whose shapes constant folding
    does not know, an operand of unknown rank is left alone (``1.0 * squared_difference(x, y)``
    of a fed ``x`` stays a Mul in TF's dumps); elsewhere jitsim takes the shape TF's call knows."""
    rec = RewriteRecord(Code.CONSTANT_FOLDING)
    keep_set = preserved(eg, keep)
    strict = shapes is not None and bool(getattr(shapes, "unknown", ()))

    def unknown_rank(ref) -> bool:
        src, port = parse_input(ref)
        return strict and src in eg.nodes and shapes.shape(eg.nodes[src], port) is None

    sym: list = []

    for name in topological_order(eg):
        nd = eg.nodes.get(name)
        if nd is None or name in keep_set or (nd.op not in NEUTRAL and nd.op not in ANY_DIV):
            continue
        data = [r for r in nd.input if not r.startswith("^")]
        if len(data) != 2:
            continue
        if (nd.op in ANY_DIV and "T" in nd.attr and nd.attr["T"].type in FLOAT_OR_COMPLEX
                and parse_input(data[0])[0] != parse_input(data[1])[0] and _scalar_one(eg, data[0])
                and not unknown_rank(data[1])):
            ctrl = [r for r in nd.input if r.startswith("^")]
            nd.op = "Reciprocal"
            eg.set_inputs(name, [data[1], "^" + parse_input(data[0])[0]] + ctrl)
            rec.add(name, "1 / y to Reciprocal(y)")
            continue
        if nd.op not in NEUTRAL:
            continue
        neutral, positions = NEUTRAL[nd.op]
        for pos in positions:
            c = parse_input(data[pos])[0]
            other = data[1 - pos]
            cnd = eg.nodes.get(c)
            if cnd is None or parse_input(other)[0] == c or unknown_rank(other):
                continue
            if cnd.op == "Const":
                try:
                    v = tensor_proto_to_numpy(cnd.attr["value"].tensor)
                except Exception:
                    continue
                if v.size == 0 or not (v == neutral).all():
                    continue
                scalar = v.ndim == 0
            elif cnd.op == ("OnesLike" if neutral == 1.0 else "ZerosLike"):
                scalar = False  # TF's IsOnes/IsZeros: a OnesLike is ones whatever its input
            else:
                continue
            if not scalar and not _keeps_shape(eg, name, other, shapes, sym):
                continue  # TF needs the kept operand to have the output's (symbolic) shape
            t = nd.attr["T"] if "T" in nd.attr else None
            ctrl = [r for r in nd.input if r.startswith("^")]
            nd.op = "Identity"
            for k in list(nd.attr):
                if k not in ("T", "_class"):
                    del nd.attr[k]
            if t is None:
                del nd.attr["T"]
            eg.set_inputs(name, [other, "^" + c] + ctrl)
            rec.add(name, f"{'x * 1' if neutral == 1.0 else 'x + 0'} to Identity")
            break
    return rec


# DT_HALF, DT_FLOAT, DT_DOUBLE, DT_BFLOAT16, DT_COMPLEX64, DT_COMPLEX128
FLOAT_OR_COMPLEX = frozenset({19, 1, 2, 14, 8, 18})
DIVISIONS = frozenset({"Div", "RealDiv", "Xdivy"})
ANY_DIV = frozenset({"Div", "RealDiv", "Xdivy", "TruncateDiv"})  # TF's IsAnyDiv but FloorDiv


def reduce_div_to_reciprocal_mul(eg: EditGraph, keep=frozenset()) -> RewriteRecord:
    """TF's ``ReduceDivToReciprocalMul``: ``x / c`` (``Div`` of a floating or complex type,
    ``RealDiv``, ``Xdivy``) by a ``Const`` becomes ``Mul(x, r)`` (``Xdivy``: ``MulNoNan(r, x)``),
    ``r`` a new node ``ConstantFolding/<name>_recip`` that TF's next folding round makes the
    constant ``1 / c``; jitsim writes that constant at once (floating and complex values only:
    an integer ``RealDiv`` is left as it is). The constant keeps ``c``'s control inputs, as a
    folded node does; ``c`` goes when nothing else reads it."""
    rec = RewriteRecord(Code.CONSTANT_FOLDING)
    keep_set = preserved(eg, keep)
    np = numpy()
    for name in topological_order(eg):
        nd = eg.nodes.get(name)
        if nd is None or name in keep_set or nd.op not in DIVISIONS or "T" not in nd.attr:
            continue
        data = [r for r in nd.input if not r.startswith("^")]
        if len(data) != 2:
            continue
        t = nd.attr["T"].type
        if t not in FLOAT_OR_COMPLEX or t not in NP_DTYPES:
            continue  # integer division (TF skips Div; an integer RealDiv jitsim does not evaluate)
        c = parse_input(data[1])[0]
        cnd = eg.nodes.get(c)
        if cnd is None or cnd.op != "Const" or "value" not in cnd.attr:
            continue
        new = f"ConstantFolding/{name}_recip"
        if new in eg.nodes:
            continue
        try:
            value = tensor_proto_to_numpy(cnd.attr["value"].tensor)
            with np.errstate(divide="ignore", invalid="ignore"):
                recip = np.reciprocal(value.astype(NP_DTYPES[t]))
        except Exception:
            continue
        const = protos.NodeDef(name=new, op="Const", device=nd.device)
        const.input.extend(r for r in cnd.input if r.startswith("^"))
        const.attr["dtype"].type = t
        to_tensor_proto(recip, t, const.attr["value"].tensor)
        eg.add_nodedef(const)
        ctrl = [r for r in nd.input if r.startswith("^")]
        if nd.op == "Xdivy":
            nd.op = "MulNoNan"
            eg.set_inputs(name, [new, data[0]] + ctrl)
        else:
            nd.op = "Mul"
            eg.set_inputs(name, [data[0], new] + ctrl)
        rec.add(name, "x / c to x * (1 / c)")
        if c not in keep_set and not eg.consumers(c):
            eg.remove(c)
    return rec


REDUCTIONS = frozenset({"Sum", "Prod", "Min", "Max", "Mean", "Any", "All"})
DT_BOOL = 10


def simplify_single_packs(eg: EditGraph, keep=frozenset()) -> RewriteRecord:
    """TF's ``SimplifyPack``: a ``Pack`` of one tensor becomes ``ExpandDims`` of it along the
    Pack's ``axis``, a new int32 scalar ``ConstantFolding/<name>_const_axis`` (on the node's
    device, waiting on the packed tensor's node, or on a ``Switch`` output through its
    ``ConstantFoldingCtrl`` Identity, so that it lives in the same frame) read as the second
    input; not when the tensor is fed (a ``Placeholder``'s value). ``tf.stack([i])`` as a
    loop's slice index (``strided_slice/stack``)."""

    rec = RewriteRecord(Code.CONSTANT_FOLDING)
    keep_set = preserved(eg, keep)
    np = numpy()
    for name in [n for n, x in eg.nodes.items() if x.op == "Pack"]:  # each on its own: any order
        nd = eg.nodes.get(name)
        if nd is None or nd.op != "Pack" or name in keep_set:
            continue
        data = [r for r in nd.input if not r.startswith("^")]
        ctrl = [r for r in nd.input if r.startswith("^")]
        axis_name = f"ConstantFolding/{name}_const_axis"
        if len(data) != 1 or axis_name in eg.nodes:
            continue
        src, port = parse_input(data[0])
        snd = eg.nodes.get(src)
        if snd is None or snd.op in SHAPED_PLACEHOLDER_OPS:
            continue
        anchor = switch_anchor(eg, src, port, nd) if snd.op in BINARY_SWITCH_OPS else src
        axis = nd.attr["axis"].i if "axis" in nd.attr else 0
        const = protos.NodeDef(name=axis_name, op="Const", device=nd.device)
        const.input.append("^" + anchor)
        const.attr["dtype"].type = 3  # DT_INT32
        to_tensor_proto(np.array(axis, dtype=np.int32), 3, const.attr["value"].tensor)
        eg.add_nodedef(const)
        nd.op = "ExpandDims"
        for k in ("axis", "N"):
            if k in nd.attr:
                del nd.attr[k]
        nd.attr["Tdim"].type = 3
        eg.set_inputs(name, [data[0], axis_name] + ctrl)
        rec.add(name, "Pack of one tensor to ExpandDims")
    return rec


def simplify_reshapes(eg: EditGraph, keep=frozenset(), shapes: ShapeView | None = None) -> RewriteRecord:
    """TF's ``SimplifyReshape``: a ``Reshape`` to a constant shape its input already has (the
    input's shape fully known, the constant's dims equal to it or -1) becomes ``Identity`` of the
    input, the shape kept as a control input (``ReplaceOperationWithIdentity``: attributes but
    ``T`` dropped)."""
    rec = RewriteRecord(Code.CONSTANT_FOLDING)
    shapes = shapes if shapes is not None else ShapeView(literals=True)
    keep_set = preserved(eg, keep)
    for name in [n for n, x in eg.nodes.items() if x.op == "Reshape"]:  # each on its own: any order
        nd = eg.nodes.get(name)
        if nd is None or nd.op != "Reshape" or name in keep_set or "T" not in nd.attr:
            continue
        data = [r for r in nd.input if not r.startswith("^")]
        ctrl = [r for r in nd.input if r.startswith("^")]
        if len(data) != 2:
            continue
        snd = eg.nodes.get(parse_input(data[1])[0])
        xsrc, xport = parse_input(data[0])
        if snd is None or snd.op not in CONSTANT_OPS or "value" not in snd.attr or xsrc not in eg.nodes:
            continue
        have = shapes.known(eg[xsrc], xport)
        try:
            want = [int(v) for v in tensor_proto_to_numpy(snd.attr["value"].tensor).reshape(-1)]
        except Exception:
            continue
        if have is None or len(have) != len(want) or any(w != -1 and w != h for w, h in zip(want, have)):
            continue
        t = nd.attr["T"].type
        for k in list(nd.attr):
            del nd.attr[k]
        nd.op = "Identity"
        nd.attr["T"].type = t
        eg.set_inputs(name, [data[0], control_dependency(eg, data[1], nd)] + ctrl)
        rec.add(name, "Reshape to the shape it has to Identity")
    return rec


def move_constants_past_enter(eg: EditGraph, keep=frozenset()) -> RewriteRecord:
    """TF's ``MoveConstantsPastEnter``: an ``Enter`` (``is_constant``) of a constant hands its
    non-constant data consumers a copy of the constant inside the frame,
    ``ConstantFolding/<constant>_enter``, waiting on the Enter (a v1 loop's ``b_count`` and
    per-iteration constants)."""
    rec = RewriteRecord(Code.CONSTANT_FOLDING)
    for name in [n for n, x in eg.nodes.items() if x.op in ENTER_OPS]:  # each on its own: any order
        nd = eg.nodes.get(name)
        if nd is None or nd.op not in ENTER_OPS or not nd.input or "is_constant" not in nd.attr \
                or not nd.attr["is_constant"].b:
            continue
        src = eg.nodes.get(parse_input(nd.input[0])[0])
        if src is None or src.op not in CONSTANT_OPS or src.input and any(not r.startswith("^") for r in src.input):
            continue
        new = f"ConstantFolding/{src.name}_enter"
        if new in eg.nodes:
            continue
        consumers = [c for c in sorted(eg.consumers(name))
                     if eg.nodes[c].op not in CONSTANT_OPS and name in eg.nodes[c].input]
        if not consumers:
            continue
        copy = protos.NodeDef()
        copy.CopyFrom(src)
        copy.name = new
        copy.device = nd.device
        del copy.input[:]
        copy.input.append("^" + name)
        eg.add_nodedef(copy)
        for c in consumers:
            eg.set_inputs(c, [new if r == name else r for r in eg.nodes[c].input])
        rec.add(name, f"constant {src.name!r} moved past the Enter")
    return rec


def simplify_empty_reductions(eg: EditGraph, keep=frozenset()) -> RewriteRecord:
    """A reduction over a constant, empty list of axes becomes ``Identity(x)`` with ``^indices``
    (module docstring). Runs after folding, as TF simplifies after it folds: the indices are
    often a ``Range`` folding has just made a ``Const``."""
    def identity_type(nd, indices):
        dims = [d.size for d in indices.attr["value"].tensor.tensor_shape.dim]
        if not dims or all(d != 0 for d in dims):
            return None  # a scalar index, or a non-empty list
        if "T" in nd.attr:
            return nd.attr["T"].type
        return DT_BOOL if nd.op in ("Any", "All") else None

    return _by_constant_operand(eg, keep, REDUCTIONS, identity_type, "reduction over no axes to Identity")


def simplify_trivial_tiles(eg: EditGraph, keep=frozenset()) -> RewriteRecord:
    """A ``Tile`` whose multiples are a ``Const`` of ones (or of no elements: a scalar's gradient
    ``Tile(Reshape(g, []), [])``) repeats nothing: TF's ``SimplifyTile`` makes it ``Identity(x)``
    with ``^multiples``, whatever the input's shape."""
    def identity_type(nd, multiples):
        try:
            v = tensor_proto_to_numpy(multiples.attr["value"].tensor)
        except Exception:  # noqa: BLE001 - a value jitsim cannot read: left as it is
            return None
        return nd.attr["T"].type if v.ndim == 1 and (v == 1).all() and "T" in nd.attr else None

    return _by_constant_operand(eg, keep, frozenset({"Tile"}), identity_type, "Tile by ones to Identity")


def _by_constant_operand(eg: EditGraph, keep, ops, identity_type, kind: str) -> RewriteRecord:
    """``op(x, c)`` (``op`` in ``ops``, ``c`` a ``Const``) for which ``identity_type(node, c)``
    gives a dtype becomes ``Identity(x)`` of that type with ``^c`` added to its control inputs
    (TF's ``ReplaceOperationWithIdentity``)."""
    rec = RewriteRecord(Code.CONSTANT_FOLDING)
    keep_set = preserved(eg, keep)
    for name in topological_order(eg):
        nd = eg.nodes.get(name)
        if nd is None or name in keep_set or nd.op not in ops:
            continue
        data = [r for r in nd.input if not r.startswith("^")]
        if len(data) != 2:
            continue
        c = parse_input(data[1])[0]
        cnd = eg.nodes.get(c)
        if cnd is None or cnd.op not in CONSTANT_OPS or "value" not in cnd.attr:
            continue
        t = identity_type(nd, cnd)
        if t is None:
            continue
        ctrl = [r for r in nd.input if r.startswith("^")]
        nd.op = "Identity"
        for k in list(nd.attr):  # TF clears every attribute (a recorded shape of the old op too)
            del nd.attr[k]
        nd.attr["T"].type = t
        eg.set_inputs(name, [data[0], "^" + c] + ctrl)
        rec.add(name, kind)
    return rec


FOLDING_PREFIX = "ConstantFolding"


def simplify_switches(eg: EditGraph, keep=frozenset()) -> RewriteRecord:
    """TF's ``SimplifySwitch``: a ``Switch(p, p)`` forwards ``p`` on the port ``p`` selects, so
    its false output is always ``false`` and its true output always ``true``. A lowered
    ``tf.cond`` on a bool ``p`` whose branches read ``p`` has such a switch (``cond/p/_N``; the
    predicate's own ``switch_pred`` is left alone: its two outputs feed the pivots, Identities
    without data consumers, the form this rewrite itself leaves). Each data use of port 0 /
    port 1 reads a new scalar ``Const`` ``ConstantFolding/<switch>_const_false`` /
    ``_const_true``, anchored by a control edge on that port through a new ``Identity``
    ``ConstantFoldingCtrl/<switch>_<port>``. Folding then evaluates what the constants feed (a
    ``Cast(p)`` in a branch becomes a ``Const`` under the pivot)."""
    rec = RewriteRecord(Code.CONSTANT_FOLDING)
    keep_set = preserved(eg, keep)
    for name in list(eg.nodes):
        nd = eg.nodes.get(name)
        if nd is None or name in keep_set or nd.op != "Switch" or len(nd.input) < 2 or nd.input[0] != nd.input[1]:
            continue
        base = f"{FOLDING_PREFIX}/{name}"
        if f"{base}_const_false" in eg or f"{base}_const_true" in eg:
            continue
        consumers = sorted(set(eg.consumers(name)))
        if len(consumers) == 2 and all(_bare_identity(eg, c) for c in consumers):
            continue
        made = []
        for port, value in ((0, False), (1, True)):
            anchor = switch_anchor(eg, name, port, nd)
            value_attr = protos.AttrValue()
            to_tensor_proto(numpy().array(value), DT_BOOL, value_attr.tensor)
            made.append(f"{base}_const_{'true' if value else 'false'}")
            eg.add(made[-1], "Const", ["^" + anchor], device=nd.device,
                   attrs={"dtype": protos.AttrValue(type=DT_BOOL), "value": value_attr})
        refs = {name: made[0], f"{name}:0": made[0], f"{name}:1": made[1]}
        for c in consumers:
            ins = list(eg[c].input)
            new = [refs.get(r, r) for r in ins]
            if new != ins:
                eg.set_inputs(c, new)
        rec.add(name, "Switch(p, p) outputs to constants")
    return rec


def _bare_identity(eg: EditGraph, name: str) -> bool:
    """An Identity (or one-input IdentityN) whose outputs are read by control edges only."""
    nd = eg[name]
    return (nd.op in IDENTITY_N_OPS and sum(1 for r in nd.input if not r.startswith("^")) == 1
            and not any(p != CONTROL for _, _, p in eg.out_refs(name)))


def foldable_candidates(g: Graph) -> int:
    """Nodes of a prepared graph TF's constant folding could still fold: non-constant,
    stateless-looking nodes whose data inputs are all ``Const``, and shape queries."""
    n = 0
    for node in g:
        if node.op in NEVER_FOLD:
            continue
        ins = [e for e in g.in_edges(node.name) if not e.is_control]
        if not ins:
            continue
        if node.op in SHAPE_SIZE_RANK_OPS or all(g[e.src].op == "Const" for e in ins):
            n += 1
    return n
