"""The Grappler rewrites that change XLA auto-clustering most, simulated without TF.

TF 2.21 optimizes every function graph with Grappler's meta optimizer between placement and
the clustering passes (``grappler/optimizers/meta_optimizer.cc``: pruning, function,
common-subgraph elimination, arithmetic, constant folding, shape, remapper, dependency,
loop... twice over). jitsim simulates the parts that decide clusters, each a pure function
``EditGraph -> RewriteRecord`` (:mod:`jitsim.records`; its code names the optimizer):

* :mod:`.model_pruner`: nodes that cannot reach a fetch are dropped; trivial Identity nodes
  (among them the inliner's ``Func/.../input`` and ``output`` Identities) are bypassed;
* :mod:`.dependency_optimizer`: NoOps bypassed or removed when that does not add edges;
* :mod:`.remapper`: the CPU fusions into ``_FusedMatMul`` / ``_FusedConv2D`` /
  ``_FusedDepthwiseConv2dNative`` / ``_MklSwish`` / ``_FusedBatchNormEx``, which split XLA
  clusters because most of them have no XLA kernel;
* :mod:`.common_subgraph_elimination`: identical nodes merged;
* :mod:`.arithmetic_optimizer`: Add trees into AddN, redundant Reshapes, unary ops hoisted out
  of Concats, and the other stages its docstring names;
* :mod:`.constant_folding`: constant subgraphs, shape queries with static answers, neutral
  operands (``x * 1``).
"""

from __future__ import annotations

from jitsim.graph.model import parse_input
from jitsim.opsets import BINARY_SWITCH_OPS, FUNCTION_IO_OPS
from jitsim.registry import protos

CTRL_PREFIX = "ConstantFoldingCtrl"  # TF's kConstantFoldingCtrl: the Identity a control edge from a Switch goes through
DT_BOOL = 10

STRING_TYPES = (7, 107)  # DT_STRING, DT_STRING_REF


def is_add(nd) -> bool:
    """TF's ``IsAdd``: an ``AddV2``, or an ``Add`` not of strings (which concatenates them).

    >>> from jitsim.registry import protos
    >>> n = protos.NodeDef(op="Add"); n.attr["T"].type = 7
    >>> is_add(protos.NodeDef(op="AddV2")), is_add(n)
    (True, False)
    """
    if nd.op == "AddV2":
        return True
    return nd.op == "Add" and "T" in nd.attr and nd.attr["T"].type not in (0,) + STRING_TYPES


def preserved(eg, keep=frozenset()) -> set[str]:
    """Grappler's nodes-to-preserve in a function graph: its ``_Arg`` and ``_Retval`` nodes
    (feeds and fetches) and its control outputs (``keep``)."""
    return {n for n, nd in eg.nodes.items() if nd.op in FUNCTION_IO_OPS} | set(keep)


def control_dependency(eg, ref: str, nd) -> str:
    """TF's ``AddControlDependency``: ``^node`` of a tensor, or for a ``Switch`` output the
    ``ConstantFoldingCtrl`` Identity of that output (a control edge from a Switch would wait on
    both branches)."""
    src, port = parse_input(ref)
    snd = eg.nodes.get(src)
    if snd is not None and snd.op in BINARY_SWITCH_OPS:
        return "^" + switch_anchor(eg, src, port, nd)
    return "^" + src


def switch_anchor(eg, switch: str, port: int, nd) -> str:
    """TF's ``AddControlDependency`` on a switch output: the Identity
    ``ConstantFoldingCtrl/<switch>_<port>`` of it (made once). TF also looks for an Identity
    already reading the output, but compares the *switch's* first input with the output's name,
    which never match: it always makes (or reuses by name) this one. An existing reader could
    not anchor anyway: it is one of the consumers rewired to the constant, a cycle."""
    name = f"{CTRL_PREFIX}/{switch}_{port}"
    if name not in eg:
        eg.add(name, "Identity", [switch if port == 0 else f"{switch}:{port}"], device=nd.device,
               attrs={"T": protos.AttrValue(type=nd.attr["T"].type if "T" in nd.attr else DT_BOOL)})
    return name
