"""Can XLA compile this node? (TF's ``RecursiveCompilabilityChecker`` with the
auto-clustering operation filter, tf-passes §7.3.1.)

:func:`check_node` returns ``None`` when compilable, else a :class:`Failure`: a
:class:`~jitsim.records.NodeDecision` (the :class:`~jitsim.codes.Code`, TF's words for it) with,
for failures inside called functions, the chain of ``function/node`` frames down to the
offending node (``path``).
"""

from __future__ import annotations

from dataclasses import dataclass

from jitsim.codes import Code

from jitsim.errors import GraphError
from jitsim.graph.model import attr_value_to_python
from jitsim.registry import optypes
from jitsim.analyses.resource_safety import RESOURCE_OPS, STACK, TENSOR_ARRAY
from jitsim.opsets import CASE_OPS, FUNCTION_CALL_OPS, FUNCTION_IO_OPS, IDENTITY_OPS, IF_OPS, PARTITIONED_CALL_OPS, WHILE_OPS
from jitsim.registry import find_xla_kernel, kernel_mismatch, op_def, op_defs, op_library_of, slow_ops, xla_kernels_for
from jitsim.records import NodeDecision

STATEFUL_RNG_OPS = frozenset({"RandomUniform", "RandomShuffle", "RandomUniformInt", "RandomStandardNormal",
                              "TruncatedNormal", "Multinomial"})
INACCURATE_OPS = frozenset({"SelfAdjointEigV2", "Svd"})
MAX_RECURSION_DEPTH = 50
# attrs a top-level check reads for every op (the kernel label, the scoped-allocator markers)
_ALWAYS_READ = ("_kernel", "_scoped_allocator", "_forward_from")
# per op kind, the attrs naming what it calls (check_call / _check_branch / the Case branches)
_CALLEE_ATTRS = {**{op: ("f",) for op in FUNCTION_CALL_OPS}, **{op: ("cond", "body") for op in WHILE_OPS},
                 **{op: ("then_branch", "else_branch") for op in IF_OPS}, **{op: ("branches",) for op in CASE_OPS}}


@dataclass(frozen=True)
class OperationFilter:
    """What the auto-clustering filter allows on CPU/GPU (TF 2.21 values)."""

    allow_where_op: bool = True
    allow_resource_ops_in_called_functions: bool = False
    allow_stack_ops: bool = False
    allow_tensor_array_ops: bool = False
    allow_stateful_rng_ops: bool = False
    allow_control_trigger: bool = False
    allow_eliding_assert_and_checknumerics_ops: bool = False
    allow_ops_producing_or_consuming_variant: bool = False
    allow_slow_ops: bool = False
    allow_inaccurate_ops: bool = False
    require_always_compilable: bool = True
    allow_string_consts: bool = False
    allow_collective_reduce_v2: bool = False
    allow_unique_op: bool = False


@dataclass(kw_only=True)
class Failure(NodeDecision):
    """Why the checker refuses a node: a :class:`NodeDecision` and, for a node inside called
    functions, ``path``: the ``function/node`` frames from the call down to it."""

    path: tuple[str, ...] = ()

    def inside(self, frame: str) -> Failure:
        """The same failure seen one call further out (``frame`` = ``function/node``)."""
        return Failure(code=self.code, detail=self.detail, path=(frame,) + self.path)


def _summarize_attr(av) -> str:
    kind = av.WhichOneof("value")
    v = attr_value_to_python(av)
    if kind == "s":
        return f'"{v}"'
    if kind == "b":
        return "true" if v else "false"
    if kind == "list":
        return "[" + ", ".join(str(x) for x in v) + "]"
    if kind == "shape":
        return "<unknown>" if av.shape.unknown_rank else "[" + ",".join(str(d.size) for d in av.shape.dim) + "]"
    if kind in ("i", "f", "type"):
        return str(v)
    return "<...>"


def _find_kernel_error(nodedef, jit_device: str, why: str) -> str:
    """TF's ``FindKernelDef`` error text (what it logs for an uncompilable node); jitsim's
    own diagnosis (``why``, e.g. the offending type attr) follows in parentheses."""
    text = f"No registered '{nodedef.op}' OpKernel for {jit_device} devices compatible with node {{{{node {nodedef.name}}}}}"
    if why.startswith("no "):
        return text
    attrs = ", ".join(f"{k}={_summarize_attr(nodedef.attr[k])}" for k in sorted(nodedef.attr) if not k.startswith("_"))
    return (f"{text}\n\t (OpKernel was found, but attributes didn't match) Requested Attributes: {attrs}"
            f" [jitsim: {why}]")


def is_custom_op(op: str) -> bool:
    """An op TF 2.21 core does not register (a custom-op library's), whoever described it."""
    return op not in op_defs()


def custom_op_evidence(op: str) -> dict:
    """Where jitsim's OpDef of a custom op came from, and the library its name suggests."""
    lib = op_library_of(op)
    ev = {"registered_by": "a custom-op library (not TensorFlow 2.21 core)",
          "op_def": lib.source if lib is not None else "none (no node uses its outputs in a way that tells)"}
    if ">" in op:
        ev["registered_by"] = f"the custom-op library that names its ops {op.split('>')[0]}>..."
    return ev


class CompilabilityChecker:
    def __init__(self, library, jit_device: str = "XLA_CPU_JIT", op_filter: OperationFilter = OperationFilter(),
                 force_compilable: frozenset = frozenset()):
        self.library = library
        self.force_compilable = force_compilable  # what-if: ops passed as compilable without checks
        self.fns = {f.signature.name: f for f in library.function}
        self.jit_device = jit_device
        self.filter = op_filter
        self._body_cache: dict[str, list] = {}
        self.instantiation_errors: dict[str, str] = {}  # function -> why TF cannot instantiate it
        self._key_attrs: dict[str, tuple[str, ...]] = {}
        self._compilable: set[tuple] = set()  # node_key()s (+ forwarded-ref flag) found compilable

    # -- memoized top-level check -------------------------------------------------------------
    def _attrs_read(self, op: str) -> tuple[str, ...]:
        """Every attr a top-level :meth:`check_node` of an ``op`` node reads, its name aside:
        the kernel label and constrained type attrs of ``op``'s kernels on this device
        (find_xla_kernel), the type/number attrs its args expand by (the DT_VARIANT check; also
        all that :func:`optypes.input_types` / :func:`optypes.output_types` read), ``dtype``
        of a Const, the callee attrs of call/While/If/Case nodes, and the scoped-allocator
        markers. The rest the check reads is the op itself, this checker's filter and
        function library, and the registry (release, active op libraries): all fixed for the
        checker's life, which is one run of the pass."""
        names = self._key_attrs.get(op)
        if names is None:
            sig = self.fns[op].signature if op in self.fns else op_def(op)
            found = set(_ALWAYS_READ)
            if sig is not None:
                for a in (*sig.input_arg, *sig.output_arg):
                    found.update(x for x in (a.type_attr, a.type_list_attr, a.number_attr) if x)
            for k in xla_kernels_for(op, self.jit_device):
                found.update(c.name for c in k.constraint)
            if op == "Const":
                found.add("dtype")
            found.update(_CALLEE_ATTRS.get(op, ()))
            names = self._key_attrs[op] = tuple(sorted(found))
        return names

    def node_key(self, nodedef) -> tuple:
        """A key equal for two nodes when a top-level :meth:`check_node` reads the same of both
        (producer types aside), and their input and output dtypes are equal: the op and the
        serialized values of :meth:`_attrs_read` (None where absent)."""
        attr = nodedef.attr
        op = nodedef.op
        names = self._key_attrs.get(op) or self._attrs_read(op)
        return op, tuple([attr[a].SerializeToString() if a in attr else None for a in names])

    def check_top_level(self, nodedef, key: tuple, node=None, input_types_of=None, producer_types_of=None,
                        output_types_of=None) -> Failure | None:
        """:meth:`check_node` at depth 1 of a node whose :meth:`node_key` is ``key``, remembering
        the keys that pass: a node is compilable when another with the same key (and, for an
        Identity, the same answer to "does a producer forward a ref?") was. Failures are checked
        per node (their text names the node). The ``*_types_of(node)`` give what check_node's
        arguments of those names give."""
        def bind(types_of):
            return (lambda: types_of(node)) if types_of is not None else None

        if nodedef.op in IDENTITY_OPS:
            key = (key, self._has_forwarded_ref_input(nodedef, bind(producer_types_of)))
        if key in self._compilable:
            return None
        fail = self.check_node(nodedef, 1, bind(input_types_of), bind(producer_types_of), bind(output_types_of))
        if fail is None:
            self._compilable.add(key)
        return fail

    # -- helpers ---------------------------------------------------------------------------
    def is_function_call(self, nodedef) -> bool:
        return nodedef.op in FUNCTION_CALL_OPS or nodedef.op in self.fns

    def _body(self, name: str):
        """NodeDefs of a function body in TF's instantiation order (args, nodes, rets), or None
        when TF cannot instantiate it: not in the library, or a body TF's instantiation refuses
        (``instantiation_errors`` keeps why; IsCompilableCall then rejects the call, it does
        not fail the pass)."""
        if name not in self._body_cache:
            if name not in self.fns:
                self._body_cache[name] = None
            else:
                from jitsim.graph.functions import function_to_graphdef

                try:
                    gd = function_to_graphdef(self.library, name, fns=self.fns, with_library=False)
                except GraphError as e:
                    self.instantiation_errors[name] = e.message
                    self._body_cache[name] = None
                else:
                    self._body_cache[name] = list(gd.node)
        return self._body_cache[name]

    def _has_forwarded_ref_input(self, nodedef, producer_types_of) -> bool:
        if nodedef.op not in IDENTITY_OPS or producer_types_of is None:
            return False
        return any(optypes.is_ref_type(t) for t in producer_types_of())

    def _has_xla_kernel(self, nodedef, producer_types_of) -> Failure | None:
        if nodedef.op == "SymbolicGradient":
            return Failure(code=Code.UNSUPPORTED_OP, detail="SymbolicGradient should be handled by IsCompilableCall().")
        if (nodedef.op == "Const" and not self.filter.allow_string_consts and "dtype" in nodedef.attr
                and nodedef.attr["dtype"].type == optypes.DT_STRING):
            return Failure(code=Code.STRING_CONST, detail="Const op with type DT_STRING is not supported by XLA.")
        if self._has_forwarded_ref_input(nodedef, producer_types_of):
            return Failure(code=Code.IDENTITY_UNSAFE_CAST, detail="Identity with unsafe cast.")
        kernel, why = find_xla_kernel(nodedef, self.jit_device)
        if kernel is None:
            code = Code.CUSTOM_OP if is_custom_op(nodedef.op) else Code.UNSUPPORTED_OP
            return Failure(code=code, detail=_find_kernel_error(nodedef, self.jit_device, why))
        return None

    # -- the checker -------------------------------------------------------------------------
    def check_node(self, nodedef, depth: int = 1, input_types_of=None, producer_types_of=None,
                   output_types_of=None) -> Failure | None:
        """``None`` if compilable at this call depth (1 = top level), else the failure.

        ``input_types_of()`` / ``output_types_of()`` give the node's input / output dtypes per
        its OpDef (computed here when not given);
        ``producer_types_of()`` the dtypes its producers actually output (refs included),
        known only for top-level nodes."""
        op = nodedef.op
        f = self.filter
        if input_types_of is None:
            def input_types_of():
                return optypes.input_types(nodedef, self.fns) or []
        if output_types_of is None:
            def output_types_of():
                return optypes.output_types(nodedef, self.fns) or []

        if op in ("_SOURCE", "_SINK"):
            return Failure(code=Code.SOURCE_OR_SINK, detail="source or sink node")
        if depth == 1 and op in FUNCTION_IO_OPS:
            return Failure(code=Code.TOP_LEVEL_ARG_RETVAL, detail="top level _Arg or _Retval")
        if "_scoped_allocator" in nodedef.attr or "_forward_from" in nodedef.attr:
            return Failure(code=Code.SCOPED_ALLOCATOR, detail="_scoped_allocator or _forward_from attribute")
        if op in self.force_compilable:
            return None
        if self.is_function_call(nodedef):
            fail = self.check_call(nodedef, depth)
            if fail is not None:
                if fail.code in (Code.FUNCTION_DEPTH_LIMIT, Code.FUNCTION_NOT_FOUND):
                    return fail
                return Failure(code=Code.UNSUPPORTED_FUNCTION, detail=f"unsupported function: {fail.detail}",
                               path=fail.path)
        else:
            bad = self._has_xla_kernel(nodedef, producer_types_of)
            if bad is not None:
                return bad
        if op in WHILE_OPS:
            for key in ("cond", "body"):
                fail = self._check_branch(nodedef, key, depth)
                if fail is not None:
                    return Failure(code=Code.UNSUPPORTED_WHILE, detail=f"unsupported while: {fail.detail}", path=fail.path)
        if op in IF_OPS:
            for key in ("then_branch", "else_branch"):
                fail = self._check_branch(nodedef, key, depth)
                if fail is not None:
                    return Failure(code=Code.UNSUPPORTED_IF, detail=f"unsupported if: {fail.detail}", path=fail.path)
        if f.require_always_compilable and op in CASE_OPS:
            if "branches" not in nodedef.attr:
                return Failure(code=Code.UNSUPPORTED_CASE, detail=f"missing 'branches' attribute from node{nodedef.name}")
            for fn in nodedef.attr["branches"].list.func:
                fail = self._check_call_named(fn.name, depth)
                if fail is not None:
                    return Failure(code=Code.UNSUPPORTED_CASE, detail=f"unsupported case: {fail.detail}", path=fail.path)
        if not f.allow_stateful_rng_ops and op in STATEFUL_RNG_OPS:
            return Failure(code=Code.STATEFUL_RNG, detail="stateful random op")
        if not f.allow_control_trigger and op == "ControlTrigger":
            return Failure(code=Code.CONTROL_TRIGGER, detail="not allowed control trigger")
        if not f.allow_eliding_assert_and_checknumerics_ops and op in ("Assert", "CheckNumerics"):
            return Failure(code=Code.ASSERT_OR_CHECKNUMERICS, detail="Assert or CheckNumerics")
        if not f.allow_collective_reduce_v2 and op == "CollectiveReduceV2":
            return Failure(code=Code.COLLECTIVE_OP, detail="Collective op")
        if not f.allow_where_op and op == "Where":
            return Failure(code=Code.WHERE_EXCLUDED, detail="Where op")
        if not f.allow_unique_op and op == "Unique":
            return Failure(code=Code.UNIQUE_OP, detail="Unique op")
        if not f.allow_ops_producing_or_consuming_variant:
            ins = input_types_of()
            outs = output_types_of()
            if optypes.DT_VARIANT in ins or optypes.DT_VARIANT in outs:
                return Failure(code=Code.VARIANT_OP, detail="DT_VARIANT producer/consumer")
        kind = RESOURCE_OPS.get(op)
        if not f.allow_stack_ops and kind is not None and kind[1] == STACK:
            return Failure(code=Code.STACK_OP, detail="Stack op")
        if not f.allow_tensor_array_ops and kind is not None and kind[1] == TENSOR_ARRAY:
            return Failure(code=Code.TENSOR_ARRAY_OP, detail="TensorArray op")
        if not f.allow_resource_ops_in_called_functions and depth > 1 and optypes.DT_RESOURCE in input_types_of():
            return Failure(code=Code.RESOURCE_OP_IN_FUNCTION, detail="resource variable op in called function")
        if not f.allow_inaccurate_ops and op in INACCURATE_OPS:
            return Failure(code=Code.INACCURATE_OP, detail="operation with numerical accuracy issues")
        if not f.allow_slow_ops and op in slow_ops():  # the simulated release's OpIsSlow list
            return Failure(code=Code.SLOW_OP, detail="slow operation")
        return None

    def kernel_evidence(self, nodedef, path: tuple[str, ...] = ()) -> dict:
        """Evidence for UNSUPPORTED_OP / CUSTOM_OP: the op, and the type attr no XLA kernel
        accepts (with the types it does accept), for ``nodedef`` or, with ``path``, the node
        inside a function; for an op of a custom-op library, where its OpDef came from."""
        if path:
            fn, _, inner = path[-1].partition("/")
            body = self._body(fn) or []
            nodedef = next((nd for nd in body if nd.name == inner), None)
            if nodedef is None:
                return {}
        ev = kernel_mismatch(nodedef, self.jit_device)
        if is_custom_op(nodedef.op):
            ev.update(custom_op_evidence(nodedef.op))
        return ev

    def inner_code(self, path: tuple[str, ...]) -> Code | None:
        """For a failure inside called functions (``path`` as :meth:`check_node` returns it):
        the code of the innermost offending node, checked at its own depth (e.g.
        ``RESOURCE_OP_IN_FUNCTION`` under an ``UNSUPPORTED_FUNCTION`` call)."""
        if not path:
            return None
        fn, _, inner = path[-1].partition("/")
        nodedef = next((nd for nd in self._body(fn) or [] if nd.name == inner), None)
        if nodedef is None:
            return None
        fail = self.check_node(nodedef, len(path) + 1)
        return fail.code if fail is not None else None

    def _check_branch(self, nodedef, key: str, depth: int) -> Failure | None:
        if key not in nodedef.attr:
            return Failure(code=Code.UNSUPPORTED_OP, detail=f"missing '{key}' attribute from node{nodedef.name}")
        return self._check_call_named(nodedef.attr[key].func.name, depth)

    def check_call(self, nodedef, depth: int) -> Failure | None:
        if nodedef.op in PARTITIONED_CALL_OPS:
            name = nodedef.attr["f"].func.name if "f" in nodedef.attr else ""
        else:
            name = nodedef.op
        return self._check_call_named(name, depth)

    def _check_call_named(self, name: str, depth: int) -> Failure | None:
        if depth > MAX_RECURSION_DEPTH:
            return Failure(code=Code.FUNCTION_DEPTH_LIMIT, detail="function depth limit exceeded")
        body = self._body(name)
        if body is None:
            why = self.instantiation_errors.get(name)
            return Failure(code=Code.FUNCTION_NOT_FOUND, detail=f"could not instantiate call: '{name}'" + (f" ({why})" if why else ""))
        for nd in body:
            fail = self.check_node(nd, depth + 1)
            if fail is not None:
                return fail.inside(f"{name}/{nd.name}")
        return None
