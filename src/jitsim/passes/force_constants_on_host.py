"""TensorFlow 2.21's ``ForceXlaConstantsOnHostPass`` (POST_REWRITE_FOR_EXEC phase 12).

Every node that must be compiled (bool attr ``_XlaMustCompile`` set to true, e.g. the call
of a ``jit_compile=True`` function) names a function: the ``f`` attr of a
``(Stateful)PartitionedCall``, or its own op type for a library-function op. jitsim runs
the compile-time-constant analysis over that function's body and writes the indices of
the arguments that must be constants into the node's ``list(int)`` attr
``_input_hostmem`` (replacing any previous value, written even when empty). The executor
then keeps those inputs in host memory. The pass does not look at the jit level, and it
runs before the other two post-mark passes (tf-passes §10).
"""

from __future__ import annotations

from jitsim.codes import Code
from jitsim.errors import GraphError
from jitsim.registry import protos
from jitsim.analyses.const_analysis import ConstAnalysis
from jitsim.records import PassResult
from jitsim.graph.tfgraph import TfGraph
from jitsim.graph.custom_ops import with_custom_op_signatures
from jitsim.defs import INPUT_HOSTMEM_ATTR, MUST_COMPILE_ATTR
from jitsim.options import Options
from jitsim.opsets import PARTITIONED_CALL_OPS



def must_compile(nodedef) -> bool:
    """TF's ``CanCreateXlaKernel``: a bool ``_XlaMustCompile`` attr that is true."""
    if MUST_COMPILE_ATTR not in nodedef.attr:
        return False
    av = nodedef.attr[MUST_COMPILE_ATTR]
    return av.WhichOneof("value") == "b" and av.b


def called_function(nodedef) -> str:
    """TF's ``NameAndAttrsFromFunctionCall``: the function a call node runs (name only)."""
    if nodedef.op in PARTITIONED_CALL_OPS:
        if "f" not in nodedef.attr or nodedef.attr["f"].WhichOneof("value") != "func":
            raise GraphError(f"node {nodedef.name!r} ({nodedef.op}) has no function attr 'f'")
        return nodedef.attr["f"].func.name
    return nodedef.op


@with_custom_op_signatures
def force_xla_constants_on_host(g: TfGraph, options: Options | None = None, *,
                                analysis: ConstAnalysis | None = None) -> PassResult:
    """Set ``_input_hostmem`` on every must-compile node of ``g`` (in place). The pass reads
    no option (``options`` is taken as every pass takes it).

    ``analysis`` may be shared with other passes to reuse its cache of function bodies.
    A must-compile node whose function is not in the graph's library is an error, as in TF
    (instantiating it fails, which fails the whole graph).
    """
    result = PassResult()
    analysis = analysis or ConstAnalysis(g.library)
    for n in g.op_nodes():
        if not must_compile(n.nodedef):
            continue
        fname = called_function(n.nodedef)
        if fname not in analysis.fns:
            raise GraphError(f"ForceXlaConstantsOnHost: node {n.name!r} ({n.op}) must be compiled but "
                             f"function {fname!r} is not defined in the graph's library")
        const_args = [i for i, v in enumerate(analysis.function_const_args(fname)) if v]
        av = protos.AttrValue()
        av.list.SetInParent()  # TF writes `list {}` even when no argument is constant
        av.list.i.extend(const_args)
        n.nodedef.attr[INPUT_HOSTMEM_ATTR].CopyFrom(av)
        result.changed = True
        name = n.name
        result.decide(name, Code.INPUT_HOSTMEM,
                      f"arguments {const_args} of {fname} must be compile-time constants: kept in host memory"
                      if const_args else f"no argument of {fname} must be a compile-time constant",
                      function=fname, input_hostmem=const_args)
    return result
