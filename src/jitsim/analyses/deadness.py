"""TensorFlow's deadness analysis (``tensorflow/compiler/jit/deadness_analysis.cc``).

In TF's dataflow executor a tensor is *dead* when it comes from the untaken side of a
``Switch``. An XLA cluster runs as a unit, so auto-clustering only merges nodes that are
provably alive under the same condition. This module gives every tensor ``(node, output)``
and every node's control output ``^node`` a symbolic **predicate** meaning "this is alive",
exactly as TF 2.21 computes it (tf-passes §8):

* :class:`Predicate` -- immutable, interned formulas (``And``, ``Or``, ``Not``,
  ``AndRecurrence``, ``Symbol``, ``IntSymbol``); two predicates are "the same" iff they are
  the same object. ``str()`` prints like TF's ``ToString``.
* :class:`PredicateFactory` -- creates predicates with TF's simplifications (flattening,
  contradiction/tautology detection, AndRecurrence absorption, factoring, De Morgan, the
  depth-8 cut-off). Ids are handed out in creation order, and operand lists are sorted by
  id, so the order of creation requests matters and is reproduced.
* :func:`deadness_analysis` -- the whole-graph analysis (frame-based topological order,
  per-frame optimistic then pessimistic population), returning a :class:`DeadnessResult`.

Where TF's own order is not deterministic we use insertion order: TF walks the out-edges
of a node with more than 4 of them in pointer-hash order and picks among ready top-level
loops in hash-map order. That can change predicate ids (so the print order of And/Or
operands), the optimistic-mode representative merge of a frame and the order of the
"Done populating frame" lines between runs of TF itself.

>>> f = PredicateFactory()
>>> a, b = f.make_symbol("a", 0, True), f.make_symbol("b", 0, True)
>>> str(f.make_and([a, f.make_not(b)])), f.make_and([a, f.make_not(a)]) is f.make_false()
('(*a:0 & ~*b:0)', True)
"""

from __future__ import annotations

import struct
from typing import Iterable, Sequence

from jitsim.errors import GraphError
from jitsim.registry import op_def
from jitsim.opsets import ENTER_OPS, EXIT_OPS, MERGE_OPS, NEXT_ITERATION_OPS
from jitsim.graph.tfgraph import SINK_ID, SOURCE_ID, TfGraph, TfNode, control_flow_info
from jitsim.opsets import RECV_OPS, SWITCH_OPS

CONTROL_SLOT = -1
# the most characters of a predicate's text a message or record holds (Predicate.text)
TEXT_LIMIT = 2_000

# Predicate kinds (the order of TF's Predicate::Kind enum).
AND, OR, NOT, AND_RECURRENCE, SYMBOL, INT_SYMBOL = range(6)

# The factory stops simplifying once this many Make{And,Or,Not} calls are nested.
MAX_STACK_DEPTH = 8

CONTROL_TRIGGER_OPS = frozenset({"ControlTrigger"})
# the ops the analysis does not handle as generic nodes (dead outputs, #true control outputs,
# symbols) or that open and close loop frames: a graph without any is alive under #true throughout
PREDICATE_OPS = (SWITCH_OPS | MERGE_OPS | CONTROL_TRIGGER_OPS | RECV_OPS | ENTER_OPS | EXIT_OPS
                 | NEXT_ITERATION_OPS)


class Predicate:
    """One interned formula. Create through a :class:`PredicateFactory` only.

    ``id`` is the creation index within the factory, ``kind`` one of ``AND``, ``OR``,
    ``NOT``, ``AND_RECURRENCE``, ``SYMBOL``, ``INT_SYMBOL``; ``operands`` the sub-formulas
    (``(start, step)`` for an AndRecurrence, ``()`` for symbols). Symbols carry
    ``tensor = (node name, output index)`` and ``must_be_true`` (Symbol) or ``value``
    (IntSymbol, ``None`` = just alive); an AndRecurrence carries ``frame`` (frame names,
    innermost first).
    """

    __slots__ = ("id", "kind", "operands", "tensor", "must_be_true", "value", "frame", "_str")

    def __init__(self, pid: int, kind: int, operands: tuple = (), *, tensor=None,
                 must_be_true: bool = False, value=None, frame: tuple = ()):
        self.id = pid
        self.kind = kind
        self.operands = operands
        self.tensor = tensor
        self.must_be_true = must_be_true
        self.value = value
        self.frame = frame
        self._str = None

    @property
    def start(self) -> "Predicate":
        return self.operands[0]

    @property
    def step(self) -> "Predicate":
        return self.operands[1]

    def _own_str(self, sub: list[str]) -> str:
        k = self.kind
        if k == AND:
            return "(" + " & ".join(sub) + ")" if sub else "#true"
        if k == OR:
            return "(" + " | ".join(sub) + ")" if sub else "#false"
        if k == NOT:
            return "~" + sub[0]
        if k == AND_RECURRENCE:
            return "{" + sub[0] + ",&," + sub[1] + "}<" + ";".join(self.frame) + ">"
        name, idx = self.tensor
        tid = f"{name}:{idx}" if idx != CONTROL_SLOT else f"^{name}"
        if k == SYMBOL:
            return "*" + tid if self.must_be_true else tid
        return tid if self.value is None else f"{tid}={self.value}"

    def __str__(self) -> str:
        if self._str is not None:
            return self._str
        # iterative post-order so that deep formulas do not hit Python's recursion limit
        stack = [(self, False)]
        while stack:
            p, expanded = stack.pop()
            if p._str is not None:
                continue
            if expanded:
                p._str = p._own_str([o._str for o in p.operands])
                continue
            stack.append((p, True))
            for o in p.operands:
                if o._str is None:
                    stack.append((o, False))
        return self._str

    def __repr__(self) -> str:
        return f"<Predicate #{self.id} {self}>"

    def text(self, limit: int = TEXT_LIMIT) -> str:
        """``str(self)`` when it is at most ``limit`` characters, else its first ``limit``
        characters and how many more there are, built without the whole text: loops nested N
        frames deep give predicates whose text grows like N**3 (8 MB at 100 nested loops, whose
        frame names grow with the nesting), and a message holds two of them (issue 22)."""
        if self._str is not None and len(self._str) <= limit:
            return self._str
        out: list[str] = []
        n = 0
        stack: list = [self]  # Predicates still to print, and literal pieces
        while stack and n <= limit:
            item = stack.pop()
            if isinstance(item, str):
                out.append(item)
                n += len(item)
                continue
            if item._str is not None:
                out.append(item._str[:limit + 1])
                n += len(out[-1])
                continue
            k, ops = item.kind, item.operands
            if k in (AND, OR) and ops:
                pieces: list = ["("]
                for i, o in enumerate(ops):
                    pieces += [" & " if k == AND else " | "] if i else []
                    pieces.append(o)
                pieces.append(")")
            elif k == NOT:
                pieces = ["~", ops[0]]
            elif k == AND_RECURRENCE:
                pieces = ["{", ops[0], ",&,", ops[1], "}<"]
                for i, f in enumerate(item.frame):
                    pieces += [";", f] if i else [f]
                pieces.append(">")
            else:
                pieces = [item._own_str([])]
            stack.extend(reversed(pieces))
        s = "".join(out)
        if not stack and len(s) <= limit:
            return s
        return s[:limit] + f"… (more than {limit:,} characters)"

    def contains(self, target: "Predicate") -> bool:
        """Whether ``target`` is this formula or occurs anywhere inside it."""
        if self is target:
            return True
        seen = {id(self)}
        stack = [self]
        while stack:
            for o in stack.pop().operands:
                if o is target:
                    return True
                if id(o) not in seen:
                    seen.add(id(o))
                    stack.append(o)
        return False


class PredicateFactory:
    """Creates, simplifies and interns predicates the way TF's ``PredicateFactory`` does."""

    def __init__(self):
        self._next_id = 0
        self._depth = 0
        self._and_or: dict[tuple, Predicate] = {}
        self._not: dict[Predicate, Predicate] = {}
        self._not_cache: dict[Predicate, Predicate] = {}
        self._and_rec: dict[tuple, Predicate] = {}
        self._sym: dict[tuple, Predicate] = {}
        self._int_sym: dict[tuple, Predicate] = {}

    @property
    def num_created(self) -> int:
        return self._next_id

    def _new(self, kind: int, operands: tuple = (), **kw) -> Predicate:
        p = Predicate(self._next_id, kind, operands, **kw)
        self._next_id += 1
        return p

    # -- public constructors -----------------------------------------------------------
    def make_true(self) -> Predicate:
        return self.make_and_or((), True)

    def make_false(self) -> Predicate:
        return self.make_and_or((), False)

    def make_and(self, ops: Iterable[Predicate]) -> Predicate:
        return self.make_and_or(ops, True)

    def make_or(self, ops: Iterable[Predicate]) -> Predicate:
        return self.make_and_or(ops, False)

    def make_not(self, p: Predicate) -> Predicate:
        hit = self._not_cache.get(p)
        if hit is not None:
            return hit
        result = self._make_not_impl(p)
        # like a map insert: a nested call that already cached ``p`` keeps its entry
        self._not_cache.setdefault(p, result)
        return result

    def make_and_recurrence(self, start: Predicate, step: Predicate, frame: Sequence[str]) -> Predicate:
        key = (start, step, tuple(frame))
        p = self._and_rec.get(key)
        if p is None:
            p = self._and_rec[key] = self._new(AND_RECURRENCE, (start, step), frame=key[2])
        return p

    def make_symbol(self, name: str, output: int, must_be_true: bool) -> Predicate:
        """``*name:output`` (alive and true) or ``name:output`` (alive)."""
        key = (name, output, bool(must_be_true))
        p = self._sym.get(key)
        if p is None:
            p = self._sym[key] = self._new(SYMBOL, tensor=(name, output), must_be_true=bool(must_be_true))
        return p

    def make_int_symbol(self, name: str, output: int, value: int | None) -> Predicate:
        """``name:output=value`` (alive and equal to ``value``) or ``name:output``."""
        key = (name, output, value)
        p = self._int_sym.get(key)
        if p is None:
            p = self._int_sym[key] = self._new(INT_SYMBOL, tensor=(name, output), value=value)
        return p

    # -- simplification ----------------------------------------------------------------
    def _make_not_impl(self, p: Predicate) -> Predicate:
        self._depth += 1
        try:
            if self._depth < MAX_STACK_DEPTH:
                k = p.kind
                if k == AND or k == OR:
                    # De Morgan: ~(a & b) = ~a | ~b and ~(a | b) = ~a & ~b
                    negs = [self.make_not(o) for o in p.operands]
                    return self.make_and_or(negs, k == OR)
                if k == NOT:
                    return p.operands[0]
            q = self._not.get(p)
            if q is None:
                q = self._not[p] = self._new(NOT, (p,))
            return q
        finally:
            self._depth -= 1

    def _intern_and_or(self, ops: list[Predicate], kind: int) -> Predicate:
        ops.sort(key=_by_id)  # stable, like std::stable_sort
        key = (kind, tuple(ops))
        p = self._and_or.get(key)
        if p is None:
            p = self._and_or[key] = self._new(kind, key[1])
        return p

    def make_and_or(self, operands: Iterable[Predicate], is_and: bool) -> Predicate:
        kind = AND if is_and else OR
        self._depth += 1
        try:
            if self._depth >= MAX_STACK_DEPTH:
                return self._intern_and_or(list(operands), kind)
            return self._simplify_and_or(operands, is_and, kind)
        finally:
            self._depth -= 1

    def _simplify_and_or(self, operands: Iterable[Predicate], is_and: bool, kind: int) -> Predicate:
        other = OR if is_and else AND
        # 1. flatten one level of same-kind operands and drop duplicates; ``seen`` holds every
        #    operand met, the flattened containers included
        seen: set[Predicate] = set()
        ops: list[Predicate] = []
        for op in operands:
            if op in seen:
                continue
            seen.add(op)
            if op.kind == kind:
                for sub in op.operands:
                    if sub not in seen:
                        seen.add(sub)
                        ops.append(sub)
            else:
                ops.append(op)
        if len(ops) == 1:
            return ops[0]
        # 2. a & ~a = false, a | ~a = true; also a & b & ~(a & b)-like cases where the
        #    negation of an operand is an And (Or) of operands already present
        negated: set[Predicate] = set()
        for op in ops:
            if op in negated:
                return self.make_false() if is_and else self.make_true()
            neg = self.make_not(op)
            if neg.kind == kind and all(s in seen for s in neg.operands):
                return self.make_false() if is_and else self.make_true()
            negated.add(neg)
        # 3. {S,&,X} & ~X = S
        if is_and:
            to_remove: set[Predicate] = set()
            to_add: list[Predicate] = []
            for op in ops:
                if op.kind == AND_RECURRENCE and op.operands[1] in negated:
                    to_remove.add(op)
                    to_remove.add(self.make_not(op.operands[1]))
                    to_add.append(op.operands[0])
            if to_remove:
                ops = [op for op in ops if op not in to_remove]
            ops.extend(to_add)
        # 4. factor out operands common to every operand of the other kind:
        #    (a | b) & (a | c) = a | (b & c)
        common: list[Predicate] = []
        common_set: set[Predicate] = set()
        for op in ops:
            if op.kind != other:
                common = []
                break
            if not common:
                common = list(op.operands)
            else:
                common = [s for s in op.operands if s in common_set]
            if not common:
                break
            common_set = set(common)
        if not common:
            return self._intern_and_or(ops, kind)
        common_set = set(common)
        factored = [self.make_and_or([s for s in op.operands if s not in common_set], not is_and) for op in ops]
        inner = self.make_and_or(factored, is_and)
        return self.make_and_or([inner] + common, not is_and)


def _by_id(p: Predicate) -> int:
    return p.id


# -- graph helpers ---------------------------------------------------------------------------


def _attr_count(nodedef, opdef, arg) -> int:
    """Number of tensors of one OpDef output arg for this node."""
    if arg.number_attr:
        name = arg.number_attr
        if name in nodedef.attr:
            return nodedef.attr[name].i
        return _default_attr(opdef, name, "i", 0)
    if arg.type_list_attr:
        name = arg.type_list_attr
        if name in nodedef.attr:
            return len(nodedef.attr[name].list.type)
        d = _default_attr(opdef, name, "list", None)
        return len(d.type) if d is not None else 0
    return 1


def _default_attr(opdef, name, field, fallback):
    for a in opdef.attr:
        if a.name == name and a.HasField("default_value"):
            return getattr(a.default_value, field)
    return fallback


def num_outputs(g: TfGraph, n: TfNode, functions: dict | None = None) -> int:
    """TF's ``Node::num_outputs()``: from the OpDef (or the called function's signature).

    ``functions`` maps library function names to their number of outputs (built from
    ``g.library`` when not given). For an op neither the jitsim op registry nor the library
    knows, fall back to the largest consumed output index plus one.
    """
    if not n.is_op:
        return 0
    opdef = op_def(n.op)
    if opdef is not None:
        return sum(_attr_count(n.nodedef, opdef, a) for a in opdef.output_arg)
    if functions is None:
        functions = _function_outputs(g)
    if n.op in functions:
        return functions[n.op]
    return max((e.src_output + 1 for e in n.out_edges.values()), default=0)


def _function_outputs(g: TfGraph) -> dict[str, int]:
    return {f.signature.name: len(f.signature.output_arg) for f in g.library.function}


def _const_scalar(nodedef, want: str):
    """The scalar value of a ``Const`` node's ``value`` attr (bool or int32)."""
    t = nodedef.attr["value"].tensor
    if want == "bool":
        if t.bool_val:
            return bool(t.bool_val[0])
        if t.tensor_content:
            return t.tensor_content[0] != 0
        return False
    if t.int_val:
        return int(t.int_val[0])
    if t.tensor_content:
        return struct.unpack_from("<i", t.tensor_content)[0]
    return 0


# -- the analysis ----------------------------------------------------------------------------


class DeadnessResult:
    """The predicate of every tensor ``(node id, output)`` and control output ``(node id, -1)``."""

    def __init__(self, g: TfGraph, factory: PredicateFactory, predicates: dict, log: list[str]):
        self.graph = g
        self.factory = factory
        self.predicates = predicates  # (node id, output or -1) -> Predicate
        self._log = log

    def control_predicate(self, node_id: int) -> Predicate:
        """Predicate of the node's control output ``^n`` (what clustering compares)."""
        return self.tensor_predicate(node_id, CONTROL_SLOT)

    def tensor_predicate(self, node_id: int, output: int) -> Predicate:
        try:
            return self.predicates[(node_id, output)]
        except KeyError:
            name = self.graph.name(node_id) if self.graph.node(node_id) is not None else f"#{node_id}"
            raise KeyError(f"no deadness predicate for {name}:{output}") from None

    def __contains__(self, key) -> bool:
        return key in self.predicates

    def _sorted_keys(self) -> list[tuple[int, int]]:
        names = self.graph.nodes
        # TF sorts TensorIds: node name (bytes), then output index (control = -1 first)
        return sorted(self.predicates, key=lambda k: (names[k[0]].name.encode(), k[1]))

    def lines(self) -> list[str]:
        """TF's VLOG(2) dump: ``<name>:<i> -> <pred>`` / ``^<name> -> <pred>``, TF's order."""
        names = self.graph.nodes
        out = []
        for nid, idx in self._sorted_keys():
            name = names[nid].name
            tid = f"^{name}" if idx == CONTROL_SLOT else f"{name}:{idx}"
            out.append(f"{tid} -> {self.predicates[(nid, idx)]}")
        return out

    def frame_log(self) -> list[str]:
        """TF's VLOG(2) messages printed while populating frames (in order)."""
        return list(self._log)

    def vlog(self) -> list[str]:
        """Everything TF prints at ``deadness_analysis=2`` for this graph, in order."""
        return self.frame_log() + self.lines()

    def as_strings(self) -> dict[str, str]:
        """``{"name:i" or "^name": predicate string}`` (like TF's ``PredicateMapAsString``)."""
        return dict(line.split(" -> ", 1) for line in self.lines())


class _Analysis:
    def __init__(self, g: TfGraph):
        self.g = g
        self.nodes = g.nodes
        self.f = PredicateFactory()
        self.pm: dict[tuple[int, int], Predicate] = {}
        self.log: list[str] = []
        self.frame_to_merge: dict[str, int] = {}
        self._nout: dict[int, int] = {}
        self._fixed_outputs: dict[str, int] = {}  # op -> output count, for ops whose count no attr sets
        self._functions: dict[str, int] | None = None
        self.cfi = None

    # -- helpers ---------------------------------------------------------------------------
    def num_outputs(self, n: TfNode) -> int:
        v = self._nout.get(n.id)
        if v is None:
            v = self._fixed_outputs.get(n.op)
            if v is None:
                if self._functions is None:
                    self._functions = _function_outputs(self.g)
                v = num_outputs(self.g, n, self._functions)
                od = op_def(n.op) if n.is_op else None
                if od is not None and not any(a.number_attr or a.type_list_attr for a in od.output_arg):
                    self._fixed_outputs[n.op] = v  # the same for every node of the op
            self._nout[n.id] = v
        return v

    def is_next_iteration(self, nid: int) -> bool:
        return self.nodes[nid].op in NEXT_ITERATION_OPS

    def set_pred(self, n: TfNode, idx: int, pred: Predicate, revisit) -> None:
        key = (n.id, idx)
        old = self.pm.get(key)
        if old is None:
            self.pm[key] = pred
        elif old is not pred:
            self.pm[key] = pred
            if revisit is not None:
                for e in n.out_edges.values():
                    revisit[e.dst] = 1

    def input_preds(self, n: TfNode, data: bool = True, control: bool = True) -> list[Predicate]:
        out = []
        pm = self.pm
        for e in n.in_edges.values():
            if e.src_output == CONTROL_SLOT:
                if not control:
                    continue
            elif not data:
                continue
            p = pm.get((e.src, e.src_output))
            if p is None:
                src = self.nodes[e.src].name
                why = _missing_slot(self.nodes[e.src], e.src_output)
                raise GraphError(
                    f"node {n.name!r}: input {src}:{e.src_output} " + (why or
                    "was not found when visiting the graph in post-order (TF: most likely a bug in deadness "
                    "analysis)")
                )
            out.append(p)
        return out

    def symbol(self, node: TfNode, output: int, must_be_true: bool) -> Predicate:
        if must_be_true and node.op == "Const":
            return self.f.make_true() if _const_scalar(node.nodedef, "bool") else self.f.make_false()
        return self.f.make_symbol(node.name, output, must_be_true)

    def int_symbol(self, node: TfNode, output: int, value: int | None) -> Predicate:
        if value is not None and node.op == "Const":
            return self.f.make_true() if _const_scalar(node.nodedef, "int32") == value else self.f.make_false()
        return self.f.make_int_symbol(node.name, output, value)

    # -- transfer functions ----------------------------------------------------------------
    def handle_switch(self, n: TfNode, revisit) -> None:
        f = self.f
        preds = self.input_preds(n)
        pred_edge = self.g.input_edge(n.id, 1)
        if pred_edge is None:
            raise GraphError(f"switch node {n.name!r} has no input 1 (its predicate)")
        src = self.nodes[pred_edge.src]
        if n.op != "_SwitchN":
            t = self.symbol(src, pred_edge.src_output, True)
            fl = f.make_not(t)
            self.set_pred(n, 0, f.make_and(preds + [fl]), revisit)
            self.set_pred(n, 1, f.make_and(preds + [t]), revisit)
        else:
            nout = self.num_outputs(n)
            for i in range(nout - 1):
                b = self.int_symbol(src, pred_edge.src_output, i)
                self.set_pred(n, i, f.make_and(preds + [b]), revisit)
                preds.append(f.make_not(b))
            self.set_pred(n, nout - 1, f.make_and(preds), revisit)
        # for _SwitchN the list still holds the negated branch symbols, as in TF
        self.set_pred(n, CONTROL_SLOT, f.make_and(preds), revisit)

    def unique_backedge(self, n: TfNode):
        found = None
        for e in n.in_edges.values():
            if self.is_next_iteration(e.src):
                if found is not None:
                    srcs = [self.nodes[x.src].name for x in n.in_edges.values() if self.is_next_iteration(x.src)]
                    raise GraphError(
                        f"Multiple NextIteration inputs to merge node {n.name!r}: {', '.join(srcs)}. "
                        "Merge nodes can have at most one incoming NextIteration edge."
                    )
                found = e
        return found

    def deduce_step(self, sym: Predicate, backedge: Predicate) -> Predicate | None:
        if backedge.kind != AND:
            return None
        rest = []
        found = False
        for op in backedge.operands:
            if op is sym:
                found = True
                continue
            if op.contains(sym):
                return None
            rest.append(op)
        return self.f.make_and(rest) if found else None

    def full_frame(self, n: TfNode) -> list[str]:
        cfi = self.cfi
        out = []
        nid = n.id
        while nid != SOURCE_ID:
            info = cfi[nid]
            out.append(info.frame_name)
            nid = info.parent_frame
            if len(out) > 5001:
                raise GraphError("Frame of depth > 5000: Probably malformed graph or a bug in BuildControlFlowInfo")
        return out

    def handle_merge(self, n: TfNode, revisit, optimistic: bool) -> None:
        f = self.f
        pm = self.pm
        unvisited_backedge = False
        for e in n.in_edges.values():
            if e.src_output != CONTROL_SLOT and self.is_next_iteration(e.src):
                unvisited_backedge |= (e.src, e.src_output) not in pm
        cur = pm.get((n.id, 0))
        if cur is None:
            if unvisited_backedge:
                if optimistic:
                    rep = self.frame_to_merge.setdefault(self.cfi[n.id].frame_name, n.id)
                    p = self.symbol(self.nodes[rep], 0, False)
                else:
                    p = self.symbol(n, 0, False)
            else:
                p = f.make_or(self.input_preds(n, control=False))
            for idx in (0, 1, CONTROL_SLOT):
                self.set_pred(n, idx, p, revisit)
            return
        if cur.kind != SYMBOL:
            return  # an acyclic merge, or a loop merge already in AndRecurrence form: kept
        be = self.unique_backedge(n)
        if be is None:
            return
        step = self.deduce_step(cur, pm.get((be.src, be.src_output)))
        if step is None:
            return
        start_ops = [pm.get((e.src, e.src_output)) for e in n.in_edges.values() if e is not be]
        if any(p is None for p in start_ops):
            raise GraphError(f"merge {n.name!r} has an input without a deadness predicate")
        start = f.make_or(start_ops)
        rec = f.make_and_recurrence(start, step, self.full_frame(n))
        for idx in (0, 1, CONTROL_SLOT):
            self.set_pred(n, idx, rec, revisit)

    def handle_recv(self, n: TfNode, revisit) -> None:
        preds = self.input_preds(n)
        preds.append(self.symbol(n, 0, False))
        p = self.f.make_and(preds)
        self.set_pred(n, 0, p, revisit)
        self.set_pred(n, CONTROL_SLOT, p, revisit)

    def handle_generic(self, n: TfNode, revisit) -> None:
        preds = self.input_preds(n)
        p = preds[0] if preds else None
        # every input alive under one predicate that is no And, or under #true: the And of
        # them is that predicate, and making it creates nothing (make_and's first step)
        if p is None or not (all(q is p for q in preds) and (p.kind != AND or not p.operands)):
            p = self.f.make_and(preds)
        nid = n.id
        pm = self.pm
        if revisit is None:  # the first visit: nothing to revisit, as set_pred does it
            for i in range(self.num_outputs(n)):
                pm[(nid, i)] = p
            pm[(nid, CONTROL_SLOT)] = p
            return
        for i in range(self.num_outputs(n)):
            self.set_pred(n, i, p, revisit)
        self.set_pred(n, CONTROL_SLOT, p, revisit)

    def handle_node(self, n: TfNode, revisit, optimistic: bool = False) -> None:
        op = n.op
        if op in SWITCH_OPS:
            self.handle_switch(n, revisit)
        elif op in MERGE_OPS:
            self.handle_merge(n, revisit, optimistic)
        elif op in CONTROL_TRIGGER_OPS:
            self.set_pred(n, CONTROL_SLOT, self.f.make_true(), None)
        elif op in RECV_OPS:
            self.handle_recv(n, revisit)
        else:  # NextIteration included
            self.handle_generic(n, revisit)

    # -- traversal -------------------------------------------------------------------------
    def is_root_enter(self, n: TfNode) -> bool:
        return n.op in ENTER_OPS and self.cfi[n.id].parent_frame == SOURCE_ID

    def is_root_exit(self, n: TfNode) -> bool:
        return n.op in EXIT_OPS and self.cfi[n.id].parent_frame == SOURCE_ID

    def frame_based_topological_order(self) -> list[TfNode]:
        nodes = self.nodes
        cfi = self.cfi
        num_enters: dict[str, int] = {}
        num_exits: dict[str, int] = {}
        ready_inputs = [0] * len(nodes)
        is_next_iteration = self.is_next_iteration
        for n in self.g.op_nodes():
            op = n.op
            if op in ENTER_OPS or op in EXIT_OPS:
                info = cfi[n.id]
                if info.parent_frame == SOURCE_ID:  # a root Enter or Exit
                    counts = num_enters if op in ENTER_OPS else num_exits
                    counts[info.frame_name] = counts.get(info.frame_name, 0) + 1
            elif op in MERGE_OPS:
                for e in n.in_edges.values():
                    if is_next_iteration(e.src):
                        ready_inputs[n.id] += 1
        order: list[TfNode] = []
        ready: list[TfNode] = [nodes[SOURCE_ID]]
        head = 0
        ready_enters: dict[str, list[TfNode]] = {}
        ready_exits: list[TfNode] = []
        while head < len(ready):
            cur = ready[head]
            head += 1
            order.append(cur)
            cur_is_ni = cur.op in NEXT_ITERATION_OPS
            for e in cur.out_edges.values():
                oid = e.dst
                out = nodes[oid]
                if cur_is_ni and out.op in MERGE_OPS:
                    continue
                k = ready_inputs[oid] = ready_inputs[oid] + 1
                if oid <= SINK_ID:  # not an op
                    continue
                if k != len(out.in_edges):
                    continue
                op = out.op
                if (op in ENTER_OPS or op in EXIT_OPS) and cfi[oid].parent_frame == SOURCE_ID:
                    if op in ENTER_OPS:
                        ready_enters.setdefault(cfi[oid].frame_name, []).append(out)
                    else:
                        ready_exits.append(out)
                else:
                    ready.append(out)
            if head == len(ready):
                if ready_exits:
                    fname = cfi[ready_exits[0].id].frame_name
                    if len(ready_exits) != num_exits.get(fname, 0):
                        raise GraphError(
                            f"deadness analysis: {len(ready_exits)} exits of frame {fname!r} became "
                            f"ready together but the frame has {num_exits.get(fname, 0)}"
                        )
                    ready.extend(ready_exits)
                    ready_exits = []
                else:
                    # TF scans a hash map here; insertion order stands in for it
                    for fname, lst in ready_enters.items():
                        if len(lst) == num_enters.get(fname, 0):
                            ready.extend(lst)
                            del ready_enters[fname]
                            break
        if ready_enters or ready_exits:
            raise GraphError(
                "Some enters/exits have never been visited in the traversal. "
                "Most probably the input graph is malformed."
            )
        return order

    def root_frame(self, n: TfNode) -> str:
        cfi = self.cfi
        info = cfi[n.id]
        depth = 0
        while info.parent_frame != SOURCE_ID:
            info = cfi[info.parent_frame]
            depth += 1
            if depth > 5001:
                raise GraphError("Frame of depth > 5000: Probably malformed graph or a bug in BuildControlFlowInfo")
        return info.frame_name

    def populate(self, enable_optimistic: bool = True, control_flow=None) -> None:
        cfi, unreachable = control_flow or control_flow_info(self.g)
        if unreachable:
            raise GraphError(
                "Found unreachable nodes, most likely source and sink nodes not connected: "
                + ", ".join(unreachable[:5])
            )
        self.cfi = cfi
        topo = self.frame_based_topological_order()
        roots = [cfi[n.id].frame_name if cfi[n.id].parent_frame == SOURCE_ID else self.root_frame(n) for n in topo]
        start = 0
        while start < len(topo):
            name = roots[start]
            end = start + 1
            while end < len(topo) and roots[end] == name:
                end += 1
            run = topo[start:end]
            start = end
            success = False
            if enable_optimistic and name:
                success = self.populate_frame(run, True)
            if not success:
                self.populate_frame(run, False)
            self.log.append(
                f"Done populating frame {name} using the {'optimistic' if success else 'pessimistic'} mode."
            )

    def populate_frame(self, topo: list[TfNode], optimistic: bool) -> bool:
        revisit = bytearray(len(self.nodes))
        for n in topo:
            self.handle_node(n, None, optimistic)
            if n.op in NEXT_ITERATION_OPS:
                for e in n.out_edges.values():
                    if self.nodes[e.dst].op in MERGE_OPS:
                        revisit[e.dst] = 1
        for n in topo:
            if revisit[n.id]:
                self.handle_node(n, revisit)
        if not optimistic:
            return True
        converged = True
        frame_to_pred: dict[str, Predicate] = {}
        for n in topo:
            if n.op not in MERGE_OPS:
                continue
            if self.unique_backedge(n) is None:
                continue
            fname = self.cfi[n.id].frame_name
            p = self.pm[(n.id, 0)]
            if p.kind != AND_RECURRENCE:
                converged = False
                self.log.append(
                    f"Running the optimistic mode on frame {fname} does not converge because node "
                    f"{n.name} cannot be mapped into the AndRecurrence form."
                )
                break
            prev = frame_to_pred.setdefault(fname, p)
            if prev is not p:
                converged = False
                self.log.extend([
                    f"Running the optimistic mode on frame {fname} does not converge. "
                    "Seeing different Merge predicates: ",
                    f"{p} and ",
                    f"{prev}",
                ])
                break
        if not converged:
            pm = self.pm
            for n in topo:
                for i in range(self.num_outputs(n)):
                    pm.pop((n.id, i), None)
                pm.pop((n.id, CONTROL_SLOT), None)
        return converged


class AllAlive:
    """:func:`deadness_analysis`'s answer for a graph :func:`all_alive` accepts: every output
    and control output alive under ``#true`` (the one predicate of its own factory)."""

    def __init__(self) -> None:
        self.factory = PredicateFactory()
        self.true = self.factory.make_true()

    def control_predicate(self, node_id: int) -> Predicate:
        return self.true

    def tensor_predicate(self, node_id: int, output: int) -> Predicate:
        return self.true


def all_alive(g: TfGraph, control_flow=None) -> AllAlive | None:
    """:class:`AllAlive` where :func:`deadness_analysis` of ``g`` (acyclic: its cycle graph was
    built) would give every node's outputs the predicate ``#true``, found without running it;
    None where it might not, or would raise.

    Why that is its result: with none of :data:`PREDICATE_OPS` every node is handled as a
    generic one, whose outputs get the And of its inputs' predicates, all in the root frame;
    a node without inputs (``_SOURCE``) gets the empty And, ``#true``, and so, in topological
    order, does every other (the And of ``#true`` is ``#true``). What the full analysis could
    still raise is checked here, and sends the graph to it: nodes unreachable from ``_SOURCE``,
    an input naming an output its op lacks (a graph that skipped load-time validation).
    ``control_flow``: :func:`control_flow_info` of ``g`` where the caller has it (else not
    needed: see the comment in the loop).

    >>> from jitsim.graph.model import Graph
    >>> from jitsim.graph.tfgraph import TfGraph
    >>> tg = TfGraph.from_graph(Graph.from_nodes([("a", "Const", []), ("b", "Neg", ["a"])]))
    >>> all_alive(tg).control_predicate(tg.by_name["b"]).text()
    '#true'
    >>> all_alive(TfGraph.from_graph(Graph.from_nodes([("s", "Switch", ["a", "a"]), ("a", "Const", [])]))) is None
    True
    """
    nodes = g.nodes
    for n in g.op_nodes():
        if n.op in PREDICATE_OPS:
            return None
    if control_flow is not None and control_flow[1]:
        return None
    a = _Analysis(g)
    num_outputs = a.num_outputs
    for n in nodes:
        if n is None:
            continue
        if not n.in_edges and n.id != SOURCE_ID:
            # (with the frames not given: in an acyclic graph where every other node has an
            # in-edge, walking in-edges back from any node ends at _SOURCE, so none is unreachable)
            return None
        for e in n.in_edges.values():
            out = e.src_output
            if out != CONTROL_SLOT and out >= num_outputs(nodes[e.src]):
                return None
    return AllAlive()


def deadness_analysis(g: TfGraph, *, enable_optimistic: bool = True, control_flow=None) -> DeadnessResult:
    """Run TF's deadness analysis on ``g`` (optimistic mode on, as MarkForCompilation does).

    ``control_flow``: :func:`control_flow_info` of ``g`` when the caller has it already.

    Raises :class:`jitsim.errors.GraphError` where TF's analysis returns an error
    (unreachable nodes, several NextIteration inputs to one Merge, malformed frames...).
    """
    a = _Analysis(g)
    a.populate(enable_optimistic, control_flow)
    return DeadnessResult(g, a.f, a.pm, a.log)


__all__ = [
    "AND",
    "AND_RECURRENCE",
    "INT_SYMBOL",
    "NOT",
    "OR",
    "SYMBOL",
    "AllAlive",
    "DeadnessResult",
    "PREDICATE_OPS",
    "Predicate",
    "PredicateFactory",
    "all_alive",
    "deadness_analysis",
    "num_outputs",
]


def _missing_slot(node, slot: int) -> str | None:
    """Why input ``node:slot`` has no predicate when the op has no such output (a graph that
    skipped jitsim's load-time validation, e.g. built in Python)."""
    from jitsim.registry.optypes import output_types

    nodedef = getattr(node, "nodedef", None)
    if nodedef is None:
        return None
    try:
        types = output_types(nodedef)
    except Exception:
        return None
    if types is None or slot < len(types):
        return None
    return (f"names output {slot} of {node.name!r}, but {nodedef.op} has {len(types)} output"
            f"{'s' if len(types) != 1 else ''}")
