"""Evaluating constant-foldable tensors of a :class:`~jitsim.graph.tfgraph.TfGraph` with the
numpy kernels (what TF's ``GraphRunner`` does on the CPU during constant folding)."""

from __future__ import annotations

from jitsim.registry import protos
from jitsim.rewrites.folding import kernels
from jitsim.rewrites.folding.tensors import NP_DTYPES, EvalError, Unsupported, numpy, tensor_proto_to_numpy
from jitsim.registry.optypes import NodeTypes
from jitsim.opsets import CONSTANT_OPS
from jitsim.graph.tfgraph import TfGraph, TfNode


class Evaluator:
    """Evaluates constant-foldable tensors (what TF's GraphRunner does on the CPU)."""

    def __init__(self, g: TfGraph, types: NodeTypes):
        self.g = g
        self.types = types
        self.memo: dict[int, list] = {}

    def value(self, nid: int, slot: int):
        self._ensure(nid)
        n = self.g.nodes[nid]
        outs = self.memo[nid]
        if slot >= len(outs):
            raise EvalError(f"{n.name} has no output {slot}")
        return outs[slot], self.types.output_type(n.nodedef, slot)

    def _ensure(self, nid: int) -> None:
        nodes = self.g.nodes
        stack = [(nid, False)]
        while stack:
            cur, ready = stack.pop()
            if cur in self.memo:
                continue
            if ready:
                self.memo[cur] = self._compute(nodes[cur])
                continue
            stack.append((cur, True))
            for e in nodes[cur].in_edges.values():
                if not e.is_control and e.src not in self.memo:
                    stack.append((e.src, False))

    def _compute(self, n: TfNode) -> list:
        np = numpy()
        if n.op in CONSTANT_OPS:
            return [tensor_proto_to_numpy(n.attr["value"].tensor)]
        fn = kernels.KERNELS.get(n.op)
        if fn is None:
            raise Unsupported(f"no numpy kernel for {n.op} ('{n.name}')")
        types = self.types.outputs(n.nodedef)
        for t in types:
            if t not in NP_DTYPES:
                raise Unsupported(f"{n.op} ('{n.name}') produces {protos.dtype_name(t)}")
        ins = [None] * len(self.types.inputs(n.nodedef))
        for e in n.in_edges.values():
            if not e.is_control:
                ins[e.dst_input] = self.memo[e.src][e.src_output]
        try:
            outs = fn(np, ins, n.nodedef)
            return [np.asarray(o).astype(NP_DTYPES[t]) for o, t in zip(outs, types)]
        except (Unsupported, EvalError):
            raise
        except Exception as exc:  # a case the numpy kernel does not cover
            raise Unsupported(f"numpy evaluation of {n.op} ('{n.name}') failed: {exc}") from None
