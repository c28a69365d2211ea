"""Which tensors must be known when XLA compiles (TF's ``BackwardsConstAnalysis``).

Walking consumers before producers (post order of a name-sorted DFS from ``_SOURCE``,
loop back edges ignored), a node whose registration says input *i* must be a
compile-time constant marks the producer of input *i*; a marked node marks all of its
data producers in turn (``_Arg`` nodes record their index instead). ``Identity``,
``IdentityN`` and ``While`` are looked through: the tensor feeding them is marked, not
they. Metadata ops (``Shape``, ``Size``...) stop the propagation. Calls, ``If``/``Case``
and ``While`` ask the same question of their function bodies.
"""

from __future__ import annotations

from typing import Callable

from jitsim.graph.model import Graph
from jitsim.opsets import CASE_OPS, IDENTITY_OPS, IF_OPS, NEXT_ITERATION_OPS, WHILE_OPS
from jitsim.graph.tfgraph import TfEdge, TfGraph, TfNode, not_back_edge, post_order, topological_order
from jitsim.opsets import PARTITIONED_CALL_OPS

# ops whose constant inputs const_input_indices takes from the functions they call
_ASKS_FUNCTIONS = WHILE_OPS | IF_OPS | CASE_OPS | frozenset(PARTITIONED_CALL_OPS)


def walk_order(g: TfGraph) -> list[TfNode]:
    """The order :meth:`ConstAnalysis.run` visits nodes in: TF's (the post order of a by-name DFS
    from ``_SOURCE`` without back edges), or where the graph has no ``NextIteration`` (no back
    edges) and :func:`~jitsim.graph.tfgraph.topological_order` has an order, that order
    reversed, which marks the same nodes: a visit marks only ancestors of the node visited
    (its inputs, up chains of pass-through ops), and in a DAG every reverse topological order,
    TF's post order among them, visits every ancestor after the node. (A back edge would let
    a Merge mark a loop input visited before it in one order and after it in another.)"""
    if not any(n is not None and n.op in NEXT_ITERATION_OPS for n in g.nodes):
        order = topological_order(g)
        if order is not None:
            order.reverse()
            return order
    return post_order(g, by_name=True, edge_filter=not_back_edge(g))


def traversable(op: str) -> bool:
    return op in IDENTITY_OPS or op == "IdentityN" or op in WHILE_OPS


class ConstAnalysis:
    """Runs the analysis on graphs and (cached) function bodies of one library."""

    def __init__(self, library):
        self.library = library
        self.fns = {f.signature.name: f for f in library.function}
        self._fn_cache: dict[str, tuple[list[bool], TfGraph | None]] = {}

    # -- function bodies ------------------------------------------------------------------
    def function_graph(self, name: str) -> TfGraph | None:
        if name not in self.fns:
            return None
        from jitsim.graph.functions import function_to_graphdef

        g = TfGraph.from_graph(Graph(function_to_graphdef(self.library, name, fns=self.fns, with_library=False),
                                     validate=False))
        g.library = self.library  # shared, not copied per body
        return g

    def function_const_args(self, name: str) -> list[bool]:
        if name not in self._fn_cache:
            self._analyse_functions(name)
        return self._fn_cache[name][0]

    @staticmethod
    def _callees(g: TfGraph) -> list[str]:
        """The functions whose constant arguments :meth:`const_input_indices` asks for, for
        the nodes of ``g`` in id order."""
        out: list[str] = []
        for n in g.op_nodes():
            attr = n.attr
            if n.op in WHILE_OPS:
                out.extend(attr[k].func.name for k in ("cond", "body") if k in attr)
            elif n.op in IF_OPS:
                out.extend(attr[k].func.name for k in ("then_branch", "else_branch") if k in attr)
            elif n.op in CASE_OPS:
                out.extend(f.name for f in attr["branches"].list.func)
            elif n.op in PARTITIONED_CALL_OPS and "f" in attr:
                out.append(attr["f"].func.name)
        return out

    def _analyse_functions(self, root: str) -> None:
        """Analyse ``root`` and every function it calls, callees first, with an explicit stack
        (function nesting is as deep as the input makes it: 5,000 nested calls must not
        exhaust Python's stack, issue 22). A function still being analysed when a (recursive)
        call reaches it again counts as having no constant arguments, as TF's recursion guard."""
        graphs: dict[str, TfGraph | None] = {}

        def enter(name: str):
            self._fn_cache[name] = ([], None)  # recursion guard
            graphs[name] = fg = self.function_graph(name)
            return iter(self._callees(fg) if fg is not None else ())

        stack = [(root, enter(root))]
        while stack:
            name, callees = stack[-1]
            for callee in callees:
                if callee not in self._fn_cache:
                    stack.append((callee, enter(callee)))
                    break
            else:
                stack.pop()
                fg = graphs.pop(name)
                if fg is not None:
                    args = [False] * len(self.fns[name].signature.input_arg)
                    self.run(fg, args)  # every callee is analysed (or guarded) by now
                    self._fn_cache[name] = (args, fg)

    def _loop_invariant(self, body: str, index: int) -> bool:
        self.function_const_args(body)
        fg = self._fn_cache[body][1]
        if fg is None:
            return False
        rets = [n for n in fg.op_nodes() if n.op == "_Retval" and n.attr["index"].i == index]
        if not rets:
            return False
        e = rets[0].data_inputs()[0] if rets[0].data_inputs() else None
        while e is not None:
            src = fg.nodes[e.src]
            if src.op == "_Arg":
                return src.attr["index"].i == index
            if src.op in IDENTITY_OPS:
                e = fg.input_edge(src.id, 0)
            elif src.op == "IdentityN":
                e = fg.input_edge(src.id, e.src_output)
            else:
                return False
        return False

    def const_input_indices(self, node) -> list[int]:
        """Flat input indices of ``node`` that must be compile-time constants."""
        op = node.op
        attr = node.attr
        if op in WHILE_OPS:
            cond = attr["cond"].func.name if "cond" in attr else ""
            body = attr["body"].func.name if "body" in attr else ""
            c, b = self.function_const_args(cond), self.function_const_args(body)
            n = max(len(c), len(b))
            out = []
            for i in range(n):
                if (i < len(c) and c[i]) or (i < len(b) and b[i]):
                    if self._loop_invariant(body, i):
                        out.append(i)
            return out
        if op in IF_OPS or op in CASE_OPS:
            names = ([attr["then_branch"].func.name, attr["else_branch"].func.name] if op in IF_OPS
                     else [f.name for f in attr["branches"].list.func])
            union: set[int] = set()
            for nm in names:
                union.update(i for i, v in enumerate(self.function_const_args(nm)) if v)
            return sorted(i + 1 for i in union)
        if op in PARTITIONED_CALL_OPS:
            f = attr["f"].func.name if "f" in attr else ""
            return [i for i, v in enumerate(self.function_const_args(f)) if v]
        from jitsim.registry.const_inputs import compile_time_const_input_indices

        return sorted(compile_time_const_input_indices(node.nodedef))

    # -- the analysis ---------------------------------------------------------------------
    def run(
        self,
        g: TfGraph,
        const_args: list[bool] | None = None,
        edge_filter: Callable[[TfEdge], bool] | None = None,
    ) -> bytearray:
        """Per node id: 1 if its output must be a compile-time constant."""
        from jitsim.registry.const_inputs import COMPILE_TIME_CONST_INPUTS_ATTR, const_input_ops, metadata_ops

        nodes = g.nodes
        must = bytearray(len(nodes))
        ok = edge_filter
        metadata = metadata_ops()
        registered = const_input_ops()  # ops with registered constant inputs

        def mark_through(e: TfEdge) -> None:
            while (ok is None or ok(e)) and traversable(nodes[e.src].op):
                nxt = g.input_edge(e.src, e.src_output)
                if nxt is None:
                    return
                e = nxt
            if ok is None or ok(e):
                must[e.src] = 1

        def visit(n) -> None:
            nodedef = n.nodedef
            if nodedef is None or n.op in metadata:  # _SOURCE / _SINK, metadata ops
                return
            if must[n.id]:
                if n.op == "_Arg":
                    if const_args is not None:
                        idx = n.attr["index"].i
                        if 0 <= idx < len(const_args):
                            const_args[idx] = True
                    return
                for e in list(n.in_edges.values()):
                    if not e.is_control and (ok is None or ok(e)):
                        mark_through(e)
                return
            if (n.op not in registered and n.op not in _ASKS_FUNCTIONS
                    and COMPILE_TIME_CONST_INPUTS_ATTR not in nodedef.attr):
                return  # const_input_indices(n) is empty
            idxs = self.const_input_indices(n)
            if not idxs:
                return
            wanted = set(idxs)
            for e in list(n.in_edges.values()):
                if not e.is_control and (ok is None or ok(e)) and e.dst_input in wanted:
                    mark_through(e)

        # TF's DFS from _SOURCE with NodeComparatorName, visiting on leave; loop back edges
        # (a NextIteration's out-edges) are not followed. A node that is not marked, has no
        # registered constant inputs and calls no function is not visited: it does nothing.
        for n in walk_order(g):
            op = n.op
            if must[n.id] or op in registered or op in _ASKS_FUNCTIONS or (
                    n.nodedef is not None and COMPILE_TIME_CONST_INPUTS_ATTR in n.nodedef.attr):
                visit(n)
        return must
