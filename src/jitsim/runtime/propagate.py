"""Concrete shapes and small values of every tensor of a graph, for one step's inputs.

Where :mod:`jitsim.analyses.shape_inference` answers "what is known before running", this
answers "what does this step run with": the call's inputs get the step's shapes (and, for
integer inputs, values when given), and every node is then evaluated in topological order:

* a value, where TF's kernel would compute one from values already known: constants,
  ``Shape``/``ShapeN``/``Size``/``Rank`` of a tensor whose shape is known (its contents do not
  matter), and any stateless op of :data:`jitsim.rewrites.folding.kernels.KERNELS` whose inputs
  all have values (small tensors only: the point is shape arithmetic, not the model's math);
* a shape, from the value when there is one, else from shape_inference's per-op shape
  functions (which read the values computed here, as TF's ``InferenceContext`` reads constant
  shape tensors), else the node's recorded ``_output_shapes``;
* a function call (``PartitionedCall``/``StatefulPartitionedCall`` of a library function, as a
  ``jit_compile=True`` call is) is evaluated by propagating through the function's body.

A tensor whose value cannot be computed is *data-dependent* (it depends on tensor contents:
a float input, a variable's value, ``Unique``...); :meth:`StepState.value_sources` names the
nodes where the chain of known values breaks.

Deadness, as TF's executor propagates it: a ``Switch`` whose predicate has a value sends its
input down one output, the other output is dead; a node with a dead data input or a control
input from a dead node is dead, except a ``Merge``, dead only when all its inputs are. So a
cluster in an untaken ``tf.cond`` branch does not run that step (:meth:`StepState.is_dead`).
A ``Switch`` whose predicate is unknown (a loop's, or a data-dependent one) kills nothing;
:attr:`StepState.unknown_switches` lists the non-loop ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from jitsim.graph.model import parse_input
from jitsim.analyses import shape_inference as si
from jitsim.rewrites.folding import kernels
from jitsim.rewrites.folding.tensors import NP_DTYPES, EvalError, Unsupported, numpy, tensor_proto_to_numpy
from jitsim.registry.optypes import NodeTypes
from jitsim.opsets import (BINARY_SWITCH_OPS, CONSTANT_OPS, MERGE_OPS, NEXT_ITERATION_OPS, PARTITIONED_CALL_OPS,
                           PLAIN_MERGE_OPS, SHAPE_OPS, SHAPED_PLACEHOLDER_OPS)

MAX_VALUE_ELEMENTS = 4096  # values bigger than this are not kept (shape arithmetic is small)
INPUT_OPS = frozenset({"_Arg", "Placeholder", "PlaceholderWithDefault"})
MAX_CALL_DEPTH = 8
# kernels whose output size comes from an input's value: evaluated only when the shape
# functions bound the output (a huge Range/Fill would otherwise be allocated)
SIZED_BY_VALUE = frozenset({"Range", "Fill", "Tile", "BroadcastTo", "Pad", "PadV2", "MirrorPad", "OneHot",
                            "ZerosLike", "OnesLike", "StridedSliceGrad", "UnsortedSegmentSum", "DynamicStitch",
                            "Reshape", "ConcatV2", "Pack"})


def _unique(np, ins, nd):
    """Unique(x) -> (y, idx): the distinct values in order of first appearance."""
    x = ins[0].reshape(-1)
    _, first, inverse = np.unique(x, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return [x[np.sort(first)], rank[inverse.reshape(-1)]]


def _where(np, ins, nd):
    """Where(condition) with one argument: the coordinates of the true (non-zero) elements."""
    return [np.argwhere(ins[0]).astype(np.int64)]


# Ops whose *output shape* depends on their input values (so TF's shape functions leave it
# unknown): evaluated here when the step states the values they read. The other kernels are
# constant folding's (jitsim.rewrites.folding.kernels).
DATA_SHAPE_KERNELS = {"Unique": _unique, "Where": _where}


@dataclass
class Seed:
    """What a step says about one tensor: its shape, and optionally its value."""

    shape: tuple
    value: object = None  # numpy array or None
    handle_shape: object = None  # a resource: its variable's shape (tuple), when known


@dataclass
class StepState:
    shapes: dict = field(default_factory=dict)  # (node, port) -> tuple (-1 unknown) or None
    values: dict = field(default_factory=dict)  # (node, port) -> numpy array
    nodes: dict = field(default_factory=dict)  # name -> NodeDef
    errors: dict = field(default_factory=dict)  # node name -> why its evaluation failed
    inference: object = None  # the shape functions' view of this step (handle shapes)
    lists: dict = field(default_factory=dict)  # TensorList ref -> (element shape or None, length or None)
    previous: object = None  # the first pass's state (graphs with loops)
    trip_counts: dict | None = None  # while-loop frame -> iterations this step (jitsim.runtime.loops)
    dead: set = field(default_factory=set)  # (node, port) refs that carry a dead tensor
    dead_nodes: set = field(default_factory=set)  # nodes all of whose outputs are dead
    unknown_switches: list = field(default_factory=list)  # cond Switches whose predicate is unknown

    def is_dead(self, ref) -> bool:
        return ref in self.dead or ref[0] in self.dead_nodes

    def shape(self, ref):
        return self.shapes.get(ref)

    def value(self, ref):
        return self.values.get(ref)

    def shape_sources(self, ref, limit: int = 3) -> list[str]:
        """The nodes, upstream of ``ref``, where known shapes stop: each has an unknown output
        shape though every data input's shape is known (an op without a shape rule, or one
        whose output size depends on tensor contents): ``op 'name'``."""
        def known(r):
            s = self.shapes.get(r)
            return s is not None and all(d >= 0 for d in s)

        out, seen, stack = [], set(), [ref[0]]
        while stack and len(out) < limit:
            name = stack.pop()
            if name in seen or name not in self.nodes:
                continue
            seen.add(name)
            ins = [parse_input(r) for r in self.nodes[name].input if not r.startswith("^")]
            missing = [r for r in ins if not known(r)]
            if not missing:
                out.append(f"{self.nodes[name].op} '{name}'")
            else:
                stack.extend(r[0] for r in reversed(missing))
        return out

    def value_sources(self, ref, limit: int = 3) -> list[str]:
        """The nodes, upstream of ``ref``, where known values stop: each has no value though all
        of its data inputs have one (or it has none): ``op 'name'``."""
        out, seen, stack = [], set(), [ref[0]]
        while stack and len(out) < limit:
            name = stack.pop()
            if name in seen or name not in self.nodes:
                continue
            seen.add(name)
            nd = self.nodes[name]
            ins = [parse_input(r) for r in nd.input if not r.startswith("^")]
            if nd.op in SHAPE_OPS:
                # a shape op reads shapes only: follow the inputs whose shape is unknown
                missing = [r for r in ins if self.shapes.get(r) is None or any(d < 0 for d in self.shapes[r])]
            else:
                missing = [r for r in ins if r not in self.values]
            if not missing:
                out.append(f"{nd.op} '{name}'")
            else:
                stack.extend(r[0] for r in reversed(missing))
        return out


def topological_order(nodes: dict) -> list[str]:
    """Node names, each after its data and control inputs (loop back edges ignored), ties in
    file order."""
    from collections import deque

    indeg = {n: 0 for n in nodes}
    succ: dict[str, list[str]] = {n: [] for n in nodes}
    for name, nd in nodes.items():
        if nd.op in NEXT_ITERATION_OPS:
            continue
        for r in nd.input:
            src = parse_input(r)[0]
            if src in nodes:
                indeg[name] += 1
                succ[src].append(name)
    pos = {n: i for i, n in enumerate(nodes)}
    ready = deque(n for n in nodes if indeg[n] == 0)
    order = []
    import heapq

    heap = [(pos[n], n) for n in ready]
    heapq.heapify(heap)
    while heap:
        _, n = heapq.heappop(heap)
        order.append(n)
        for s in succ[n]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(heap, (pos[s], s))
    # a cycle not closed by NextIteration: evaluate the rest in file order
    done = set(order)
    order += [n for n in nodes if n not in done]
    return order


LIST_OPS = frozenset({"TensorListReserve", "TensorListFromTensor", "TensorListGetItem", "TensorListSetItem",
                      "TensorListStack", "EmptyTensorList", "TensorListPushBack"})
# ops that hand a TensorList (a variant) on unchanged, output by output
LIST_PASS_THROUGH = frozenset({"Identity", "Enter", "RefEnter", "Exit", "RefExit", "Switch", "RefSwitch", "Merge",
                               "RefMerge", "NextIteration", "RefNextIteration", "Snapshot"})


def _elem_shape(v):
    """A TensorList element_shape operand's value: -1 dims unknown; a scalar -1: unknown rank."""
    if v is None:
        return None
    flat = [int(x) for x in v.reshape(-1)]
    if v.ndim == 0:
        return None
    return tuple(flat)


def _merge_list_shapes(a, b):
    if a is None:
        return b
    if b is None or len(a) != len(b):
        return a
    return tuple(x if x >= 0 else y for x, y in zip(a, b))


# Shape functions the run-time propagation adds to shape_inference's (which serves the
# clustering passes and stays as it is): TF's ``UnchangedShape`` ops (output 0 has input 0's
# shape) that corpora put between an input and a cluster, and ``Slice`` with known ``begin``
# and ``size`` values (``SliceOp``'s shape function: ``size[i]``, or ``dim - begin[i]`` for -1).
SAME_SHAPE_OPS = frozenset({
    "ReverseV2", "Reverse", "Roll", "Cumsum", "Cumprod", "CumulativeLogsumexp", "RandomShuffle", "EnsureShape",
    "MatrixBandPart", "AdjustContrastv2", "AdjustHue", "AdjustSaturation", "HSVToRGB", "RGBToHSV",
    "AsString", "StringLength", "StringLower", "StringUpper", "StringStrip", "StaticRegexReplace", "RegexReplace",
    "StringToHashBucketFast", "StringToHashBucketStrong", "StringToHashBucket", "PopulationCount",
})


# The random family: each output's shape is the value of the op's ``shape`` input (TF's
# RandomShape / MakeShapeFromShapeTensor shape functions in random_ops.cc, stateless_random_ops.cc,
# stateless_random_ops_v2.cc and stateful_random_ops.cc), known every step where that value is
# (``tf.random.normal(tf.shape(x))``, Keras's dropout mask). op -> (the shape input's index,
# the input whose shape is appended: RandomGamma's alpha, RandomPoisson's rate).
RANDOM_SHAPE_INPUT = {
    **{op: (0, None) for op in (
        "RandomUniform", "RandomUniformInt", "RandomStandardNormal", "TruncatedNormal", "RiscRandomUniform",
        "ParameterizedTruncatedNormal", "StatelessRandomUniform", "StatelessRandomNormal",
        "StatelessTruncatedNormal", "StatelessRandomUniformInt", "StatelessRandomUniformFullInt",
        "StatelessRandomBinomial", "StatelessRandomGammaV2", "StatelessRandomGammaV3", "StatelessRandomPoisson",
        "StatelessParameterizedTruncatedNormal", "StatelessRandomUniformV2", "StatelessRandomNormalV2",
        "StatelessTruncatedNormalV2", "StatelessRandomUniformIntV2", "StatelessRandomUniformFullIntV2")},
    "RandomGamma": (0, 1), "RandomPoisson": (0, 1), "RandomPoissonV2": (0, 1),
    "StatefulStandardNormal": (1, None),
    **{op: (2, None) for op in ("StatefulStandardNormalV2", "StatefulTruncatedNormal", "StatefulUniform",
                                "StatefulUniformInt", "StatefulUniformFullInt", "StatefulRandomBinomial")},
}
# the seed's key/counter (RNG_KEY_SIZE 1, RNG_MAX_COUNTER_SIZE 2) and the algorithm: fixed shapes
RNG_STATE_SHAPES = {"StatelessRandomGetKeyCounter": [(1,), (2,)],
                    "StatelessRandomGetKeyCounterAlg": [(1,), (2,), ()],
                    "StatelessRandomGetAlg": [()], "RngReadAndSkip": [(3,)]}
MULTINOMIAL_OPS = frozenset({"Multinomial", "StatelessMultinomial"})  # [batch, num_samples]
# images [N, H, W, C] transformed to the size given by the value of input 2 (image_ops.cc's
# shape function): Keras's RandomRotation, RandomZoom, RandomTranslation
PROJECTIVE_TRANSFORM_OPS = frozenset({"ImageProjectiveTransformV2", "ImageProjectiveTransformV3"})
_RULED_HERE = (frozenset(RANDOM_SHAPE_INPUT) | frozenset(RNG_STATE_SHAPES) | MULTINOMIAL_OPS | PROJECTIVE_TRANSFORM_OPS
               | {"XlaRngBitGenerator"})


class _Concrete(si._Inference):
    """shape_inference's shape functions, reading this step's concrete values."""

    def _random(self, nd):
        """The shape of a random op's output: its shape input's value (-1 per dimension where
        only the value's length is known), with RandomGamma's/RandomPoisson's parameter shape
        appended; for XlaRngBitGenerator, the state's shape and the shape input's value; for a
        projective transform (the random image layers' op), the batch and channels of the
        images and the size its output_shape input gives."""
        d = self.data(nd)
        if nd.op in RNG_STATE_SHAPES:
            return RNG_STATE_SHAPES[nd.op]
        if nd.op in MULTINOMIAL_OPS:
            logits, n = (self.shape_of(d[0]) if d else None), (self.value_of(d[1]) if len(d) > 1 else None)
            batch = logits[0] if logits is not None and len(logits) == 2 else -1
            return [(batch, n[0] if n is not None and len(n) == 1 else -1)]
        if nd.op in PROJECTIVE_TRANSFORM_OPS:
            images = self.shape_of(d[0]) if d else None
            size = self.value_of(d[2]) if len(d) > 2 else None
            if images is None or len(images) != 4:
                return [None]
            h, w = (size[0], size[1]) if size is not None and len(size) == 2 else (-1, -1)
            return [(images[0], h, w, images[3])]
        if nd.op == "XlaRngBitGenerator":
            return [self.shape_of(d[1]) if len(d) > 1 else None, self._from_shape_input(d, 2)]
        index, extra = RANDOM_SHAPE_INPUT[nd.op]
        shape = self._from_shape_input(d, index)
        if shape is not None and extra is not None:
            more = self.shape_of(d[extra]) if len(d) > extra else None
            shape = shape + tuple(more) if more is not None else None
        return [shape]

    def _from_shape_input(self, d, index):
        if len(d) <= index:
            return None
        dims = self.value_of(d[index])
        if dims is not None:
            return tuple(dims)
        s = self.shape_of(d[index])
        return (-1,) * s[0] if s is not None and len(s) == 1 and s[0] >= 0 else None

    def infer(self, nd):
        op = nd.op
        if op in _RULED_HERE:
            return self._random(nd)
        if op in SAME_SHAPE_OPS or op == "Slice":
            d = self.data(nd)
            if not d:
                return None
            shape = self.shape_of(d[0])
            if op in SAME_SHAPE_OPS or shape is None:
                return [shape]
            begin = self.value_of(d[1]) if len(d) > 2 else None
            size = self.value_of(d[2]) if len(d) > 2 else None
            if begin is None or size is None or len(begin) != len(shape) or len(size) != len(shape):
                return [tuple(-1 if z < 0 else z for z in size)] if size is not None and len(size) == len(shape) \
                    else [tuple(-1 for _ in shape)]
            return [tuple(z if z >= 0 else (dim - b if dim >= 0 else -1)
                          for z, b, dim in zip(size, begin, shape))]
        return super().infer(nd)

    # a variable read inside a while body: its handle followed back through the loop's ops
    handle_pass_through = LIST_PASS_THROUGH

    def __init__(self, nodes, order, np_values, handles):
        super().__init__(nodes, order)
        self.np_values = np_values
        self.handles = handles  # resource input node -> its variable's shape

    def handle_shape(self, ref):
        root = self.resource_root(ref)
        if root in self.handles:
            return self.handles[root]
        return super().handle_shape(ref)

    def value_of(self, ref):
        v = self.np_values.get(ref)
        if v is not None:
            if v.dtype.kind in "iu" and v.ndim <= 1:
                return [int(x) for x in v.reshape(-1)]
            return None
        return super().value_of(ref)


class Propagator:
    """Evaluates one graph (name -> NodeDef, with its function ``library``) step by step."""

    def __init__(self, nodedefs, library, *, depth: int = 0):
        self.nodes = {nd.name: nd for nd in nodedefs}
        self.library = library
        self.types = NodeTypes(library)
        self.order = topological_order(self.nodes)
        self.depth = depth
        self._bodies: dict[str, Propagator] = {}

    def inputs(self) -> list:
        """The graph's input nodes (``_Arg`` by index, then placeholders in file order)."""
        args = sorted((nd for nd in self.nodes.values() if nd.op == "_Arg"),
                      key=lambda nd: nd.attr["index"].i if "index" in nd.attr else 0)
        return args + [nd for nd in self.nodes.values() if nd.op in SHAPED_PLACEHOLDER_OPS]

    def run(self, seeds: dict) -> StepState:
        """``seeds``: ``(node, port)`` -> :class:`Seed` (inputs, and any tensor the step states).
        A graph with while loops is evaluated twice: the second pass lets a loop's ``Merge``
        see what its back edge carried in the first (a TensorList's element shape, set in the
        body), as TF's shape refiner relaxes loop shapes."""
        st = self._run(seeds, None)
        if self.has_loops:
            st = self._run(seeds, st)
        return st

    @property
    def has_loops(self) -> bool:
        return any(nd.op in NEXT_ITERATION_OPS for nd in self.nodes.values())

    def _run(self, seeds: dict, previous) -> StepState:
        np = numpy()
        st = StepState(nodes=self.nodes)
        st.previous = previous
        handles = {name: sd.handle_shape for (name, p), sd in seeds.items() if sd.handle_shape is not None}
        inf = st.inference = _Concrete(self.nodes, self.order, st.values, handles)
        inf.shapes = st.shapes
        for name in self.order:
            nd = self.nodes[name]
            n_out = self._num_outputs(nd)
            seeded = False
            for p in range(max(n_out, 1)):
                sd = seeds.get((name, p))
                if sd is not None:
                    seeded = True
                    st.shapes[(name, p)] = tuple(sd.shape)
                    if sd.value is not None:
                        st.values[(name, p)] = np.asarray(sd.value)
            if seeded:
                continue
            self._deadness(nd, n_out, st)
            try:
                vals = self._values(nd, st)
            except (EvalError, Unsupported) as exc:
                st.errors[name] = str(exc)
                vals = None
            except Exception as exc:  # noqa: BLE001 - a kernel case numpy refuses: no value
                st.errors[name] = f"{type(exc).__name__}: {exc}"
                vals = None
            if vals is not None:
                for p, v in enumerate(vals):
                    if v is None:
                        continue
                    st.shapes[(name, p)] = tuple(int(d) for d in v.shape)
                    if v.size <= MAX_VALUE_ELEMENTS:
                        st.values[(name, p)] = v
                if all(v is not None for v in vals):
                    continue
            if nd.op in PARTITIONED_CALL_OPS:
                outs = self._call_shapes(nd, st)
            elif nd.op in LIST_OPS or nd.op in LIST_PASS_THROUGH:
                outs = self._list_shapes(nd, st)
                if outs is None:
                    try:
                        outs = inf.infer(nd)
                    except (IndexError, KeyError, ValueError, ZeroDivisionError, TypeError, OverflowError):
                        outs = None
            else:
                try:
                    outs = inf.infer(nd)
                except (IndexError, KeyError, ValueError, ZeroDivisionError, TypeError, OverflowError):
                    outs = None
            outs = list(outs or [])
            for p in range(max(n_out, len(outs))):
                if (name, p) in st.shapes:
                    continue
                s = outs[p] if p < len(outs) else None
                ok, rec = si.recorded(nd, p)
                if ok and rec is not None:
                    s = rec if s is None else _merge(s, rec)
                st.shapes[(name, p)] = s
        return st

    # -- deadness ------------------------------------------------------------------------
    def _deadness(self, nd, n_out: int, st) -> None:
        name = nd.name
        data = self._data(nd)
        ctrl = [r[1:] for r in nd.input if r.startswith("^")]
        if nd.op in MERGE_OPS:
            dead = bool(data) and all(st.is_dead(r) for r in data)
        else:
            dead = any(st.is_dead(r) for r in data) or any(c in st.dead_nodes for c in ctrl)
        if dead:
            st.dead_nodes.add(name)
            return
        if nd.op in BINARY_SWITCH_OPS and len(data) == 2:
            pred = st.values.get(data[1])
            if pred is None or pred.size != 1:
                src = self.nodes.get(data[1][0])
                if src is not None and src.op != "LoopCond":
                    st.unknown_switches.append(name)
                return
            st.dead.add((name, 0 if bool(pred.reshape(-1)[0]) else 1))

    # -- values --------------------------------------------------------------------------
    def _num_outputs(self, nd) -> int:
        if nd.op in INPUT_OPS:
            return 1
        return len(self.types.outputs(nd))

    def _data(self, nd):
        return [parse_input(r) for r in nd.input if not r.startswith("^")]

    def _values(self, nd, st):
        np = numpy()
        op = nd.op
        if op in CONSTANT_OPS:
            return [tensor_proto_to_numpy(nd.attr["value"].tensor)]
        d = self._data(nd)
        if op in SHAPE_OPS:
            out_t = nd.attr["out_type"].type if "out_type" in nd.attr else 3
            outs = []
            for ref in (d if op == "ShapeN" else d[:1]):
                s = st.shapes.get(ref)
                if s is None or any(x < 0 for x in s):
                    outs.append(None)
                elif op == "Rank":
                    outs.append(np.array(len(s), dtype="int32"))
                elif op == "Size":
                    outs.append(np.array(int(np.prod(s, dtype=np.int64)), dtype=NP_DTYPES[out_t]))
                else:
                    outs.append(np.array(s, dtype=NP_DTYPES[out_t]))
            return outs
        fn = DATA_SHAPE_KERNELS.get(op) or kernels.KERNELS.get(op)
        if fn is None or op in PARTITIONED_CALL_OPS or self.types.is_stateful(op):
            return None
        ins = []
        for ref in d:
            v = st.values.get(ref)
            if v is None:
                return None
            ins.append(v)
        # an output sized by a value (Range, Fill, Tile, BroadcastTo...) could be huge: evaluate
        # only outputs the shape functions bound by MAX_VALUE_ELEMENTS
        try:
            outs = st.inference.infer(nd)
        except (IndexError, KeyError, ValueError, ZeroDivisionError, TypeError, OverflowError):
            outs = None
        if op not in DATA_SHAPE_KERNELS:
            known = [o for o in (outs or []) if o is not None and all(x >= 0 for x in o)]
            if any(_elements(o) > MAX_VALUE_ELEMENTS for o in known):
                return None
            if op in SIZED_BY_VALUE and len(known) < len(self.types.outputs(nd)):
                return None
        types = self.types.outputs(nd)
        if not types or any(t not in NP_DTYPES for t in types):
            return None
        outs = fn(np, ins, nd)
        return [np.asarray(o).astype(NP_DTYPES[t]) for o, t in zip(outs, types)]

    # -- TensorLists (the while loops of tf.function and Keras RNNs) ------------------------
    def _list_shapes(self, nd, st):
        """Shapes of TensorList ops, from the element shapes and lengths carried beside the
        variant handles (TF's shape functions keep them as handle data); None: not a list."""
        op, d, name = nd.op, self._data(nd), nd.name
        if op in LIST_PASS_THROUGH:
            if op in PLAIN_MERGE_OPS:
                infos = [st.lists[r] for r in d if r in st.lists]
                prev = st.previous.lists if st.previous is not None else {}
                for r in d:  # the back edge: what its NextIteration received in the last pass
                    src = self.nodes.get(r[0])
                    if r not in st.lists and src is not None and src.op in NEXT_ITERATION_OPS:
                        fed = self._data(src)
                        if fed and fed[0] in prev:
                            infos.append(prev[fed[0]])
                if not infos:
                    return None
                elem, length = infos[0]
                for e2, _ in infos[1:]:
                    elem = _merge_list_shapes(elem, e2)
                st.lists[(name, 0)] = (elem, length)
                return None
            if not d or d[0] not in st.lists:
                return None
            n = 2 if op in BINARY_SWITCH_OPS else 1
            for p in range(n):
                st.lists[(name, p)] = st.lists[d[0]]
            return None  # the variant's own shape (a scalar) comes from the shape functions
        if op == "TensorListReserve":
            st.lists[(name, 0)] = (_elem_shape(st.values.get(d[0])),
                                   _int(st.values.get(d[1])) if len(d) > 1 else None)
            return [()]
        if op == "EmptyTensorList":
            st.lists[(name, 0)] = (_elem_shape(st.values.get(d[0])), 0)
            return [()]
        if op == "TensorListFromTensor":
            s = st.shapes.get(d[0])
            elem = None if s is None else tuple(s[1:])
            st.lists[(name, 0)] = (_merge_list_shapes(elem, _elem_shape(st.values.get(d[1]))),
                                   None if s is None or s[0] < 0 else s[0])
            return [()]
        elem, length = st.lists.get(d[0], (None, None)) if d else (None, None)
        if op == "TensorListGetItem":
            return [_merge_list_shapes(elem, _elem_shape(st.values.get(d[2])) if len(d) > 2 else None)]
        if op in ("TensorListSetItem", "TensorListPushBack"):
            item = st.shapes.get(d[-1])
            st.lists[(name, 0)] = (_merge_list_shapes(item, elem),
                                   length + 1 if op == "TensorListPushBack" and length is not None else length)
            return [()]
        if op == "TensorListStack":
            elem = _merge_list_shapes(elem, _elem_shape(st.values.get(d[1])) if len(d) > 1 else None)
            n = nd.attr["num_elements"].i if "num_elements" in nd.attr and nd.attr["num_elements"].i >= 0 else length
            if elem is None:
                return [None]
            return [(-1 if n is None else n,) + tuple(elem)]
        return None

    # -- calls ---------------------------------------------------------------------------
    def _call_shapes(self, nd, st):
        fname = nd.attr["f"].func.name if "f" in nd.attr else None
        fns = {f.signature.name: f for f in self.library.function}
        if fname not in fns or self.depth >= MAX_CALL_DEPTH:
            return None
        body = self._bodies.get(fname)
        if body is None:
            from jitsim.graph.functions import function_to_graphdef

            gd = function_to_graphdef(self.library, fname)
            body = self._bodies[fname] = Propagator(list(gd.node), self.library, depth=self.depth + 1)
        seeds = {}
        for i, (arg, ref) in enumerate(zip(body.inputs(), self._data(nd))):
            handle = st.inference.handle_shape(ref)
            s = st.shapes.get(ref)
            if s is None and handle is not None:
                s = ()  # a resource handle is a scalar
            if s is None:
                continue
            seeds[(arg.name, 0)] = Seed(s, st.values.get(ref), handle)
        inner = body.run(seeds)
        rets = sorted((x for x in body.nodes.values() if x.op == "_Retval"),
                      key=lambda x: x.attr["index"].i if "index" in x.attr else 0)
        outs = []
        for r in rets:
            src = self._data(r)
            outs.append(inner.shapes.get(src[0]) if src else None)
        return outs


def _elements(shape) -> int:
    n = 1
    for d in shape:
        n *= d
    return n


def _int(v):
    if v is None or v.size != 1:
        return None
    return int(v.reshape(-1)[0])


def _merge(a, b):
    """A computed shape and a recorded one: the computed dims win where known."""
    if a is None:
        return b
    if b is None or len(a) != len(b):
        return a
    return tuple(x if x >= 0 else y for x, y in zip(a, b))
