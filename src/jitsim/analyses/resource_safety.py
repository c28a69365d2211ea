"""Resource-operation safety: which (producer, consumer) pairs may not share a cluster.

A compiled cluster reads all its resources before running and writes them all after,
so inside one cluster it can honour "read, then anything" and "anything, then write"
but not "write/modify, then read/modify". TF records every pair of resource operations
connected by a path (through any nodes, data or control edges) whose order would be
broken, ignoring which variable they touch. Function calls count as read+write.

Kinds follow TF's resource operation table (``tf2xla/resource_operation_table.cc``).
"""

from __future__ import annotations

from typing import Callable

from jitsim.opsets import NEXT_ITERATION_OPS
from jitsim.graph.tfgraph import TfGraph, TfNode, not_back_edge, reverse_post_order
from jitsim.graph.tfgraph import topological_order as _topological_order  # (tests replace it by TF's walk)

READ, WRITE, MODIFY = "Read", "Write", "Modify"
VARIABLE, STACK, TENSOR_ARRAY = "Variable", "Stack", "TensorArray"

_APPLY = ("AdaMax Adadelta Adagrad AdagradV2 AdagradDA Adam AddSign CenteredRMSProp Ftrl FtrlV2 "
          "GradientDescent Momentum KerasMomentum PowerSign ProximalAdagrad ProximalGradientDescent RMSProp").split()
_SCATTER = "Add Div Max Min Mul NdAdd NdSub NdUpdate Sub Update".split()

RESOURCE_OPS: dict[str, tuple[str, str]] = {
    "ReadVariableOp": (READ, VARIABLE),
    "ResourceGather": (READ, VARIABLE),
    "VarIsInitializedOp": (READ, VARIABLE),
    "VariableShape": (READ, VARIABLE),
    "AssignVariableOp": (WRITE, VARIABLE),
    "AssignAddVariableOp": (MODIFY, VARIABLE),
    "AssignSubVariableOp": (MODIFY, VARIABLE),
    "ResourceStridedSliceAssign": (MODIFY, VARIABLE),
    "RngReadAndSkip": (MODIFY, VARIABLE),
    "RngSkip": (MODIFY, VARIABLE),
    "StatefulStandardNormalV2": (MODIFY, VARIABLE),
    "StatefulTruncatedNormal": (MODIFY, VARIABLE),
    "StatefulUniform": (MODIFY, VARIABLE),
    "StatefulUniformFullInt": (MODIFY, VARIABLE),
    "StatefulUniformInt": (MODIFY, VARIABLE),
    **{f"ResourceApply{a}": (MODIFY, VARIABLE) for a in _APPLY},
    **{f"ResourceScatter{s}": (MODIFY, VARIABLE) for s in _SCATTER},
    "StackV2": (WRITE, STACK),
    "StackCloseV2": (READ, STACK),
    "StackPopV2": (MODIFY, STACK),
    "StackPushV2": (MODIFY, STACK),
    "TensorArrayV3": (WRITE, TENSOR_ARRAY),
    "TensorArrayScatterV3": (WRITE, TENSOR_ARRAY),
    "TensorArraySplitV3": (WRITE, TENSOR_ARRAY),
    "TensorArrayWriteV3": (WRITE, TENSOR_ARRAY),
    "TensorArrayConcatV3": (READ, TENSOR_ARRAY),
    "TensorArrayGatherV3": (READ, TENSOR_ARRAY),
    "TensorArrayGradV3": (READ, TENSOR_ARRAY),
    "TensorArrayCloseV3": (READ, TENSOR_ARRAY),
    "TensorArrayReadV3": (READ, TENSOR_ARRAY),
    "TensorArraySizeV3": (READ, TENSOR_ARRAY),
}


def resource_op_kind(op: str) -> str | None:
    info = RESOURCE_OPS.get(op)
    return info[0] if info else None


def is_stack_or_tensor_array_op(op: str) -> bool:
    info = RESOURCE_OPS.get(op)
    return info is not None and info[1] in (STACK, TENSOR_ARRAY)


def may_call_function(node: TfNode, library_fns) -> bool:
    """A library-function op, or any attr holding a function (If, While, PartitionedCall...)."""
    if node.op in library_fns:
        return True
    attrs = node.nodedef.attr
    for key in attrs:  # (not .values(): the Mapping mixin's view is a Python generator)
        kind = attrs[key].WhichOneof("value")
        if kind == "func":
            return True
        if kind == "list" and len(attrs[key].list.func):
            return True
    return False


def is_edge_safe(from_kind: str, to_kind: str) -> bool:
    return from_kind == READ or to_kind == WRITE


def unsafe_resource_pairs(
    g: TfGraph, library_fns, ignore: Callable[[TfNode], bool] | None = None,
    calls: dict[int, bool] | None = None,
) -> set[tuple[int, int]]:
    """``{(from_node_id, to_node_id)}`` that may not end up in one cluster.

    ``ignore(node)`` true makes a node count as a non-resource op (TF passes nodes whose
    device cannot be compiled, or allows unsafe resource clustering). ``calls``, when given,
    receives ``may_call_function`` of each node this had to ask it about (by node id).
    """
    kinds: dict[int, str] = {}
    resource_ops = RESOURCE_OPS
    for n in g.op_nodes():
        info = resource_ops.get(n.op)
        if info is not None:
            k = info[0]
        else:
            called = may_call_function(n, library_fns)
            if calls is not None:
                calls[n.id] = called
            if not called:
                continue
            k = MODIFY
        if ignore is None or not ignore(n):  # (asked only of the nodes it could change)
            kinds[n.id] = k
    # A pair needs a path from a writing/modifying op to a reading/modifying one: without
    # both kinds in the graph there is none (and no traversal is needed).
    if not kinds or MODIFY not in kinds.values() and (WRITE not in kinds.values() or READ not in kinds.values()):
        return set()
    nodes = g.nodes
    reach: dict[int, frozenset] = {}
    pairs: set[tuple[int, int]] = set()
    empty: frozenset = frozenset()
    next_iteration = NEXT_ITERATION_OPS
    # any topological order gives TF's pairs (each node's set is the union over its
    # predecessors, all done before it): graph.tfgraph.topological_order where it has one
    order = _topological_order(g)
    if order is None:
        order = reverse_post_order(g, by_name=True, edge_filter=not_back_edge(g))
    for n in order:
        acc: set | None = None
        single: frozenset = empty
        for e in n.in_edges.values():
            r = reach.get(e.src)
            if not r or nodes[e.src].op in next_iteration:
                continue
            if acc is None and not single:
                single = r
            else:
                if acc is None:
                    acc = set(single)
                acc |= r
        cur = frozenset(acc) if acc is not None else single
        nid = n.id
        k = kinds.get(nid)
        if k is not None:
            for (m, km) in cur:
                if not is_edge_safe(km, k):
                    pairs.add((m, nid))
            if k != READ:
                cur = cur | {(nid, k)}
        if cur:
            reach[nid] = cur
    return pairs
