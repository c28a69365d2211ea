"""Checks TensorFlow's importer and placer make on a user's graph, as one-line errors.

TF refuses a GraphDef whose nodes it cannot build: a node without a name, an attr the op
requires (no default) missing, an input naming an output slot the op does not have, a device
string it cannot parse, a data-input count the op does not take, a function that calls itself
or is named like an op, a node name its importer's rule refuses, an attr value of the
wrong kind, an invalid or reference ``DataType``, a shape dimension below -1, a constant
with a negative dimension, a colocation (``_class: loc:@x``) with a node the graph lacks;
a library with two different functions of one name or a gradient naming no function; a
call whose input or output count does not match its function; an attr placeholder
(``$T``) left unresolved in the graph or in the body of a function the graph calls. Bodies
of functions nobody calls are not checked here (TF does not instantiate them). jitsim refuses the
same graphs when it loads a user's file (:func:`jitsim.graph.io.load`), naming the node, its
op and the field, instead of failing later deep inside a pass. Ops nobody registers are
custom ops (their signature is inferred later) and are not checked here; a call of a function
the library lacks is imported by TF too (mark-for-compilation then gives it a reason code).
"""

from __future__ import annotations

import re
import warnings

from jitsim.errors import GraphError, JitsimWarning
from jitsim.registry import current_tf_version, op_def, op_defs, protos
from jitsim.graph.functions import called_functions
from jitsim.graph.model import CONTROL, parse_input, read_node_facts
from jitsim.opsets import CONSTANT_OPS, IF_OPS, PARTITIONED_CALL_OPS

# graph_constructor.cc's IsValidNodeName: a first character of [A-Za-z0-9.] ('_' too where
# internal ops are allowed, as in function graphs and TF's own dumps), then
# [A-Za-z0-9_./-]*, in pieces separated by '>' each starting like the first
_NAME_RE = re.compile(r"[A-Za-z0-9.][A-Za-z0-9_./-]*(?:>[A-Za-z0-9.][A-Za-z0-9_./-]*)*")
_INTERNAL_NAME_RE = re.compile(r"[A-Za-z0-9._][A-Za-z0-9_./-]*(?:>[A-Za-z0-9.][A-Za-z0-9_./-]*)*")
_LIST_FIELDS = ("s", "i", "f", "b", "type", "shape", "tensor", "func")
_DTYPES = frozenset(v for v in protos.DataType.values_by_number if 0 < v < 100)  # no DT_INVALID, no refs
_PLAIN = frozenset(("s", "i", "f", "b", "func"))
_PLAIN_OF = {"string": "s", "int": "i", "float": "f", "bool": "b", "func": "func"}
_KIND_NAME = {"s": "string", "i": "int", "f": "float", "b": "bool", "type": "type", "shape": "shape",
              "tensor": "tensor", "func": "func", "list": "list"}
_KIND_OF = {"string": "s", "int": "i", "float": "f", "bool": "b", "type": "type", "shape": "shape",
            "tensor": "tensor", "func": "func"}


_DEVICE_EXAMPLE = "e.g. /job:localhost/replica:0/task:0/device:CPU:0, /device:GPU:0 or /cpu:0"


def _where(nd) -> str:
    return f"node {nd.name!r} ({nd.op or 'no op'})"


def check_nodes(graph, source=None, facts=None, pass_input: bool = False) -> None:
    """Raise :class:`GraphError` (naming node, op and field) on the first node TF would refuse.
    ``facts``: :func:`~jitsim.graph.model.read_node_facts` of its GraphDef, where read already.
    ``pass_input``: the graph is taken as TF's pass input (``--input-stage``): what only TF's
    importer refuses is accepted with a note."""
    from jitsim.graph.device_names import parse_device_name

    source = source if source is not None else graph.source
    gd = graph.graphdef
    check_versions(gd, source)
    fns = check_library(gd.library, source)
    for name in fns:
        if name in op_defs():
            raise GraphError(f"library function {name!r} has the name of a TensorFlow op (TF refuses to add it to "
                             "the library)", source)
    n_out: dict[str, int | None] = {}
    ops: dict[str, tuple] = {}  # op -> (OpDef, signature, required attrs, fixed input/output counts)
    # internal ops (_Arg, _Retval, ...): a graph TF built or rewrote itself (a dump, a function's
    # instantiation), where TF allows '_' names and colocations may name nodes its own passes removed
    internal = any(nd.op[:1] == "_" for nd in gd.node)
    name_re = _INTERNAL_NAME_RE if internal else _NAME_RE
    names = graph.nodes  # every node's name (Graph refuses duplicates)
    declared: dict[str, dict[str, str]] = {}
    good_devices: set[str] = set()  # device strings already parsed (a graph names a handful)
    fullmatch = name_re.fullmatch
    indexed = []  # (node, data input naming an output index), in node and input order
    # per node, its op and attrs as serialized (None: no C extension): the checks that read only
    # those are made once per distinct pair (a graph has a few hundred among thousands of nodes)
    if facts is None:
        facts = read_node_facts(gd, keys_only=True)
    keys = facts.keys if facts is not None else None
    names_read = facts.names if facts is not None else None  # (None: read from the NodeDefs)
    inputs_read = facts.inputs if facts is not None else None
    passed: dict[bytes, tuple] = {}  # key -> (op has a signature, its input count, its output count)
    for i, nd in enumerate(gd.node):
        name = names_read[i] if names_read is not None else nd.name
        op = nd.op
        if not name:
            raise GraphError(f"node #{i} ({op or 'no op'}) has an empty name", source)
        if not fullmatch(name):
            raise GraphError(f"{_where(nd)}: TensorFlow refuses the node name {name!r} (names are letters, digits "
                             "and . _ - / >, and start with a letter, digit or '.')", source)
        if not op:
            raise GraphError(f"node {name!r} has no op", source)
        control = False
        have = 0  # data inputs
        for ref in (inputs_read[i] if inputs_read is not None else nd.input):
            if ref[:1] == "^":
                control = True
            elif control:
                raise GraphError(f"{_where(nd)}: data input {ref!r} comes after a control input; TF requires control "
                                 "inputs (^name) last", source)
            else:
                have += 1
                if ":" in ref:
                    indexed.append((nd, ref))
        key = keys[i] if keys is not None else None
        # a node with the op and attrs of one that passed: the checks that read only those are
        # not made again (the checks of its own inputs and device are, in the same order)
        seen = passed.get(key) if key is not None else None
        if seen is None:
            decl = declared.get(op)
            if decl is None:
                decl = _declared_attrs(op, fns, op_def, declared)
            attrs = nd.attr
            check_attrs(nd, decl, _where, source)
            if not internal and "_class" in attrs:
                for loc in attrs["_class"].list.s:
                    if loc.startswith(b"loc:@") and loc[5:].decode(errors="replace") not in names:
                        raise GraphError(f"{_where(nd)}: attr '_class' colocates it with "
                                         f"{loc[5:].decode(errors='replace')!r}, which the graph does not have", source)
        callee = _called_fn(nd, fns) if op in PARTITIONED_CALL_OPS else None
        if callee is not None:
            _check_call_counts(nd, fns[callee], source)
        elif op in IF_OPS:
            _check_branch_counts(nd, fns, source)
        elif op in CONSTANT_OPS and seen is None:
            _check_const_dtype(nd, source, pass_input)
        device = nd.device
        if device and device not in good_devices:
            if parse_device_name(device) is None:
                raise GraphError(f"{_where(nd)}: malformed device {device!r} ({_DEVICE_EXAMPLE})", source)
            good_devices.add(device)
        if seen is None:
            facts_of = ops.get(op)
            if facts_of is None:
                facts_of = ops[op] = _op_facts(op, fns, op_def)
            od, sig, required, fixed_in, fixed_out = facts_of
            if required:
                for a in required:
                    if a not in attrs:
                        raise GraphError(f"{_where(nd)}: missing attr {a!r}, which the op requires (no default)",
                                         source)
            has_sig = sig is not None
            n_in = count = None
            if has_sig:
                n_in = fixed_in if fixed_in is not None else _arg_count(nd, sig.input_arg, od, "input", source)
        else:
            has_sig, n_in, count = seen
        if has_sig:
            if n_in is not None and have != n_in:
                raise GraphError(f"{_where(nd)}: {have} data input{'s' if have != 1 else ''} given, but the op takes "
                                 f"{n_in} with these attrs", source)
            if seen is None:
                count = fixed_out if fixed_out is not None else _arg_count(nd, sig.output_arg, od, "output", source)
            n_out[name] = count
        if seen is None and key is not None:
            passed[key] = (has_sig, n_in, count)
    _check_recursion(fns, source)
    _check_called_bodies(gd, fns, op_def, declared, source)
    # an input naming an output the op lacks; a plain name is output 0, refused only by an op
    # without outputs
    if 0 in n_out.values():
        # plain names count too; the inputs are walked again only where a data input comes
        # from an op without outputs at all (the model's edges tell, without the protos)
        zero = {name for name, count in n_out.items() if count == 0}
        if any(e.src in zero and e.src_output != CONTROL for e in graph.edges()):
            indexed = [(nd, ref) for nd in gd.node for ref in nd.input if ref[:1] != "^"]
    nodes = graph.nodes
    for nd, ref in indexed:
        src, slot = parse_input(ref)
        count = n_out.get(src)
        if count is not None and slot >= count:
            op = nodes[src].op if src in nodes else "?"
            has = "no outputs" if count == 0 else f"{count} output{'s' if count != 1 else ''} (0..{count - 1})"
            raise GraphError(f"{_where(nd)}: input {ref!r} names output {slot} of {src!r}, but {op} has "
                             f"{has}", source)


def _declared_attrs(op: str, fns: dict, op_def, cache: dict) -> dict[str, tuple]:
    """attr name -> ``(declared type, allowed values or None, minimum or None)`` of an op or
    library function (``"type"``, ``"list(shape)"``...; allowed: a set of DataTypes or of
    strings); {} for an op nobody registers. ``cache``: one check's (the registry may differ
    between checks: another TF version, --op-defs)."""
    got = cache.get(op)
    if got is None:
        if op in fns:
            defs = fns[op].signature.attr
        else:
            od = op_def(op)
            defs = od.attr if od is not None else ()
        got = cache[op] = {a.name: _attr_rule(a) for a in defs}
    return got


def _attr_rule(a) -> tuple:
    allowed = None
    if a.HasField("allowed_values"):
        lst = a.allowed_values.list
        if a.type in ("type", "list(type)") and len(lst.type):
            allowed = frozenset(lst.type)
        elif a.type in ("string", "list(string)") and len(lst.s):
            allowed = frozenset(lst.s)
    return a.type, allowed, (a.minimum if a.has_minimum else None)


def _called_fn(nd, fns) -> str | None:
    """The library function a (Stateful)PartitionedCall node calls (None: another op, or a
    function the library lacks). Reads ``f`` without adding it to a node that lacks it."""
    if nd.op not in PARTITIONED_CALL_OPS:
        return None
    av = nd.attr.get("f")
    return av.func.name if av is not None and av.func.name in fns else None


def _check_dtype(v: int, where: str, attr: str, source) -> None:
    if v in _DTYPES:
        return
    if v - 100 in _DTYPES:
        raise GraphError(f"{where}: attr {attr!r} is a reference type ({v}); TensorFlow refuses reference types in "
                         "attrs", source)
    raise GraphError(f"{where}: attr {attr!r} = {v} is not a TensorFlow DataType", source)


def _check_shape(shape, where: str, attr: str, source) -> None:
    for k, d in enumerate(shape.dim):
        if d.size < -1:
            raise GraphError(f"{where}: attr {attr!r} has dimension {d.size} at position {k}; a dimension is -1 "
                             "(unknown) or 0 and more", source)


def check_attrs(nd, declared: dict[str, str], where, source, placeholders: set | None = None) -> None:
    """TF's checks of one node's attrs (node_def_util/op_def_util's ValidateAttrValue):
    every attr the op declares holds a value of the declared kind, a list of one kind, valid
    DataTypes, shapes without dimensions below -1, a tensor of known non-negative shape.
    Attr placeholders (``$T``): none in a graph node's declared attrs (``placeholders`` None);
    in a function body (``placeholders``: the function's own attrs, which its caller binds)
    every attr's placeholder must name one of them. A graph node's ``_output_shapes`` is
    checked too (the importer reads it; a body's is not read); other attrs the op does not
    declare are not. ``where``: the node's description, or a function of ``nd`` making it
    (called only for an error)."""
    attrs = nd.attr
    if placeholders is not None:
        for attr, av in attrs.items():
            if av.WhichOneof("value") == "placeholder" and av.placeholder not in placeholders:
                raise GraphError(f"{_at(where, nd)}: attr {attr!r} is ${av.placeholder}, but the function has no "
                                 f"attr {av.placeholder!r} to bind it to", source)
    at = None  # the node's description, made once, where a check needs it
    for attr in attrs:
        rule = declared.get(attr)
        if rule is None:
            if attr == "_output_shapes" and placeholders is None:
                for k, sh in enumerate(attrs[attr].list.shape):
                    for d in sh.dim:
                        if d.size < -1:
                            _check_shape(sh, _at(where, nd), f"_output_shapes[{k}]", source)
            continue
        want, allowed, minimum = rule
        av = attrs[attr]
        kind = av.WhichOneof("value")
        # the common valid cases first, each the outcome of the full checks below
        if kind == "type":
            if av.type in _DTYPES and want == "type" and (allowed is None or av.type in allowed):
                continue
        elif kind == _PLAIN_OF.get(want, ""):
            if allowed is None:
                if minimum is None or (kind == "i" and av.i >= minimum):
                    continue
            elif kind == "s" and av.s in allowed:
                continue
        elif kind == "tensor" and want == "tensor":
            t = av.tensor
            if t.dtype in _DTYPES and all(d.size >= 0 for d in t.tensor_shape.dim):
                continue
        if kind == "placeholder":
            if placeholders is None:
                raise GraphError(f"{_at(where, nd)}: attr {attr!r} is the unresolved placeholder ${av.placeholder}",
                                 source)
            continue
        if at is None:
            at = _at(where, nd)
        _check_value(av, kind, want, at, attr, source)
        _check_allowed(av, kind, allowed, minimum, at, attr, source)


def _shown(v) -> str:
    return protos.dtype_name(v) if isinstance(v, int) else repr(v.decode(errors="replace"))


def _check_allowed(av, kind, allowed, minimum, where: str, attr: str, source) -> None:
    """An attr's value against the OpDef's ``allowed_values`` and ``minimum`` (a number for
    an int, a length for a list), as op_def_util's ValidateAttrValue checks them."""
    if kind == "list":
        values = list(av.list.type) or list(av.list.s)
        n = max(len(getattr(av.list, f)) for f in _LIST_FIELDS)
        if minimum is not None and n < minimum:
            raise GraphError(f"{where}: attr {attr!r} lists {n} value{'s' if n != 1 else ''}, fewer than the op's "
                             f"minimum {minimum}", source)
    elif kind == "i":
        values = []
        if minimum is not None and av.i < minimum:
            raise GraphError(f"{where}: attr {attr!r} = {av.i}, below the op's minimum {minimum}", source)
    else:
        values = [av.type] if kind == "type" else [av.s] if kind == "s" else []
    if allowed is not None:
        for v in values:
            if v not in allowed:
                some = sorted(allowed)
                listed = ", ".join(_shown(x) for x in some[:8]) + (", ..." if len(some) > 8 else "")
                raise GraphError(f"{where}: attr {attr!r} = {_shown(v)} is not one the op allows ({listed})", source)


def _at(where, nd) -> str:
    return where if isinstance(where, str) else where(nd)


def _check_value(av, kind, want: str, where: str, attr: str, source) -> None:
    if kind is None:
        return
    if want.startswith("list("):
        field = _KIND_OF.get(want[5:-1])
        if kind != "list":
            raise GraphError(f"{where}: attr {attr!r} holds a single {_KIND_NAME.get(kind, kind)} value, but the op "
                             f"declares {want}", source)
        present = [f for f in _LIST_FIELDS if len(getattr(av.list, f))]
        if len(present) > 1:
            raise GraphError(f"{where}: attr {attr!r} is a list of mixed kinds "
                             f"({', '.join(_KIND_NAME[f] for f in present)}); a list attr holds one kind ({want})", source)
        if present and field is not None and present[0] != field:
            raise GraphError(f"{where}: attr {attr!r} is a list of {_KIND_NAME[present[0]]} values, but the op "
                             f"declares {want}", source)
        for v in av.list.type:
            _check_dtype(v, where, attr, source)
        for sh in av.list.shape:
            _check_shape(sh, where, attr, source)
        return
    field = _KIND_OF.get(want)
    if field is None:  # an attr type jitsim does not know: not checked
        return
    if kind == field and kind in _PLAIN:
        return
    if kind != field:
        raise GraphError(f"{where}: attr {attr!r} holds a {_KIND_NAME.get(kind, kind)} value, but the op declares "
                         f"{want}", source)
    if kind == "type":
        _check_dtype(av.type, where, attr, source)
    elif kind == "shape":
        _check_shape(av.shape, where, attr, source)
    elif kind == "tensor":
        if av.tensor.dtype not in _DTYPES:
            raise GraphError(f"{where}: attr {attr!r}: the tensor's dtype {av.tensor.dtype} is not a TensorFlow "
                             "DataType", source)
        for k, d in enumerate(av.tensor.tensor_shape.dim):
            if d.size < 0:
                what = "unknown (-1)" if d.size == -1 else f"negative ({d.size})"
                raise GraphError(f"{where}: attr {attr!r}: the tensor's dimension {k} is {what}; a tensor's shape "
                                 "must be fully known", source)


def check_versions(gd, source) -> None:
    """``versions`` as TF's importer checks them (core/framework/versions.cc): the simulated
    release's GraphDef version must be at least ``min_consumer`` and not among
    ``bad_consumers``."""
    from jitsim.registry.versions import PRODUCERS

    release = current_tf_version()
    own = PRODUCERS.get(release)
    v = gd.versions
    if own is None:
        return
    if v.min_consumer > own:
        raise GraphError(f"versions.min_consumer {v.min_consumer} is above TF {release}'s GraphDef version {own}: "
                         "TF refuses the graph (it needs a newer TensorFlow)", source)
    if own in v.bad_consumers:
        raise GraphError(f"versions.bad_consumers lists {own}, TF {release}'s GraphDef version: TF refuses the graph",
                         source)


def check_library(library, source) -> dict:
    """The library's functions by name, checked as TF's FunctionLibraryDefinition adds them
    (function.cc): two functions of one name must be the same function (TF keeps one; said in
    a note), a gradient must name functions the library holds, and one function has at most
    one gradient."""
    fns: dict = {}
    for f in library.function:
        name = f.signature.name
        _check_signature(f.signature, source)
        if name in fns:
            if fns[name].SerializeToString(deterministic=True) != f.SerializeToString(deterministic=True):
                raise GraphError(f"the library holds two different functions named {name!r} (TF refuses to add the "
                                 "second)", source)
            warnings.warn(JitsimWarning(f"library function {name!r} appears twice, identical: one is kept, as TF "
                                        "does", source), stacklevel=3)
            continue
        fns[name] = f
    grads: dict[str, str] = {}
    for g in library.gradient:
        for role, fn in (("function", g.function_name), ("gradient function", g.gradient_func)):
            if fn not in fns:
                raise GraphError(f"library gradient {g.function_name!r} -> {g.gradient_func!r}: its {role} {fn!r} is "
                                 "not in the library", source)
        if grads.setdefault(g.function_name, g.gradient_func) != g.gradient_func:
            raise GraphError(f"library function {g.function_name!r} has two gradient functions "
                             f"({grads[g.function_name]!r} and {g.gradient_func!r})", source)
    return fns


def _check_signature(sig, source) -> None:
    """A library function's signature: argument types and attr defaults are valid
    DataTypes / values of their attr's kind (TF's Python importer converts every signature;
    an invalid type fails there, whether or not the function is called)."""
    where = f"library function {sig.name!r}"
    for arg in list(sig.input_arg) + list(sig.output_arg):
        if arg.type and arg.type not in _DTYPES:
            raise GraphError(f"{where}: argument {arg.name!r} has type {arg.type}, not a TensorFlow DataType", source)
    for a in sig.attr:
        if a.HasField("default_value"):
            av = a.default_value
            kind = av.WhichOneof("value")
            if kind == "type" and a.type == "type":
                _check_dtype(av.type, where, f"{a.name} (default)", source)
            elif kind is not None:
                _check_value(av, kind, a.type, where, f"{a.name} (default)", source)


def _check_const_dtype(nd, source, pass_input: bool) -> None:
    """A Const whose value's dtype is not its ``dtype`` attr. TF 2.21's importer aborts on a
    GraphDef holding one (refused here too); TF's clustering passes take it as it is (they read
    the attr; only the Const kernel, built when the graph runs, refuses it: TF's own
    WhereUnsupported mark test builds one), so a graph taken as TF's pass input (``pass_input``)
    is accepted, with a note."""
    value, dtype = nd.attr.get("value"), nd.attr.get("dtype")
    if value is None or dtype is None or value.WhichOneof("value") != "tensor":
        return
    if value.tensor.dtype != dtype.type:
        what = (f"{_where(nd)}: attr 'value' holds a {protos.dtype_name(value.tensor.dtype)} tensor, but attr 'dtype' "
                f"is {protos.dtype_name(dtype.type)}")
        if not pass_input:
            raise GraphError(what, source)
        warnings.warn(JitsimWarning(f"{what}: taken as {protos.dtype_name(dtype.type)}, as TF's passes read it (TF's "
                                    "Const kernel would refuse the node when the graph runs)", source), stacklevel=2)


def _check_call_counts(nd, fdef, source, where: str | None = None, role: str = "") -> None:
    """A (Stateful)PartitionedCall's Tin/Tout against its function's signature (TF checks
    them when it instantiates the call)."""
    sig = fdef.signature
    for attr, args, what in (("Tin", sig.input_arg, "inputs"), ("Tout", sig.output_arg, "outputs")):
        if attr in nd.attr and nd.attr[attr].WhichOneof("value") == "list":
            n = len(nd.attr[attr].list.type)
            if n != len(args):
                raise GraphError(f"{where or _where(nd)}: attr {attr!r} lists {n} type{'s' if n != 1 else ''}, but function "
                                 f"{sig.name!r}{role} has {len(args)} {what if len(args) != 1 else what[:-1]}", source)


def _check_branch_counts(nd, fns, source, where: str | None = None) -> None:
    """An If's branches against its Tin/Tout (TF instantiates both branches when it runs or
    lowers the If; a While's body that is never run is not, so While is not checked)."""
    for branch in ("then_branch", "else_branch"):
        av = nd.attr.get(branch)
        if av is not None and av.func.name in fns:
            _check_call_counts(nd, fns[av.func.name], source, where, f" ({branch})")


def _called(nodes, fns, op_def=None) -> list[str]:
    """The library functions ``nodes`` call: by op name, or through a ``func`` or
    ``list(func)`` attr (looked for only in ops that declare one, or that nobody registers,
    when ``op_def`` is given)."""
    out: list[str] = []
    if not fns:
        return out
    may: dict[str, bool] = {}
    for nd in nodes:
        if op_def is not None:
            m = may.get(nd.op)
            if m is None:
                od = op_def(nd.op)
                m = may[nd.op] = od is None or any(a.type in ("func", "list(func)") for a in od.attr)
            if not m:  # no func attr to look at: only a call by op name
                if nd.op in fns:
                    out.append(nd.op)
                continue
        out += called_functions(nd, fns)
    return out


def _check_called_bodies(gd, fns: dict, op_def, declared: dict, source) -> None:
    """The bodies of the functions the graph calls, directly or through other functions, as
    TF's import (shape inference) and runtime instantiate them: every attr placeholder names
    an attr of the function's signature, calls by name and through PartitionedCall match their
    function's signature. Uncalled functions are not looked at."""
    seen: set[str] = set()
    todo = list(dict.fromkeys(_called(gd.node, fns, op_def)))
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        fdef = fns[name]
        sig_attrs = {a.name for a in fdef.signature.attr}
        for nd in fdef.node_def:
            where = f"function {name!r}: node {nd.name!r} ({nd.op or 'no op'})"
            check_attrs(nd, _declared_attrs(nd.op, fns, op_def, declared), where, source, sig_attrs)
            callee = _called_fn(nd, fns)
            if callee is not None:
                _check_call_counts(nd, fns[callee], source, where)
            elif nd.op in IF_OPS:
                _check_branch_counts(nd, fns, source, where)
        todo += [f for f in _called(fdef.node_def, fns) if f not in seen]


def _op_facts(op: str, fns: dict, op_def) -> tuple:
    """What :func:`check_nodes` needs of an op, once per op: its OpDef (None for a library
    function or an op nobody registers), the signature its nodes are counted against, the
    attrs it requires (no default), and its input and output counts when no attr sets them."""
    od = None if op in fns else op_def(op)
    sig = fns[op].signature if op in fns else od
    required = tuple(a.name for a in od.attr if not a.HasField("default_value")) if od is not None else ()

    def fixed(args) -> int | None:
        return None if any(a.type_list_attr or a.number_attr for a in args) else len(args)

    if sig is None:
        return od, sig, required, None, None
    return od, sig, required, fixed(sig.input_arg), fixed(sig.output_arg)


def _arg_count(nd, args, od, what: str, source=None) -> int | None:
    """How many tensors ``args`` (an OpDef's input or output args) expand to for ``nd``,
    counted without building them (a mutated ``N`` may be huge); None when an attr is missing
    or of the wrong kind (the attr check above names the missing ones)."""
    from jitsim.registry.optypes import attr_or_default as _attr_of

    total = 0
    for arg in args:
        if arg.type_list_attr:
            av = _attr_of(nd, od, arg.type_list_attr)
            if av is None or av.WhichOneof("value") not in ("list", None):
                return None
            total += len(av.list.type)
        elif arg.number_attr:
            av = _attr_of(nd, od, arg.number_attr)
            if av is None or av.WhichOneof("value") != "i":
                return None
            if av.i < 0:
                raise GraphError(f"{_where(nd)}: attr {arg.number_attr!r} = {av.i}, but it counts {what}s (0 or more)", source)
            total += av.i
        else:
            total += 1
    return total


def _check_recursion(fns: dict, source) -> None:
    """TF cannot instantiate a function that calls itself, directly or through others."""
    calls = {name: _called(f.node_def, fns) for name, f in fns.items()}
    state: dict[str, int] = {}
    for root in sorted(calls):
        if state.get(root):
            continue
        stack = [(root, iter(calls[root]))]
        path = [root]
        state[root] = 1
        while stack:
            name, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                state[name] = 2
                stack.pop()
                path.pop()
                continue
            if state.get(nxt) == 1:
                loop = path[path.index(nxt):] + [nxt]
                raise GraphError(f"function {nxt!r} calls itself ({' -> '.join(loop)}): TensorFlow cannot "
                                 "instantiate recursive functions", source)
            if not state.get(nxt):
                state[nxt] = 1
                stack.append((nxt, iter(calls[nxt])))
                path.append(nxt)
