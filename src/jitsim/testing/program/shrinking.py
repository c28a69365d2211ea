"""Shrinking without Hypothesis: smaller valid programs of a failing one (a statement
replaced by a constant of its type, a chunk of statements dropped)."""

from __future__ import annotations

import dataclasses
from typing import Iterator

from jitsim.testing.program.model import (
    Block,
    Call,
    Cond,
    Const,
    Group,
    Op,
    Print,
    Program,
    Read,
    While,
    Write,
    is_value,
    reads,
    validate,
    walk,
)

# -- reductions (shrinking without Hypothesis) ----------------------------------------------------


def _rename_refs(s, m: dict):
    """Statement ``s`` with the values it reads renamed by ``m`` (control deps on renamed
    values are dropped: they must name statements of the same block)."""
    r = lambda n: m.get(n, n)  # noqa: E731
    if hasattr(s, "ctrl") and s.ctrl:
        s = dataclasses.replace(s, ctrl=tuple(c for c in s.ctrl if c not in m))
    if isinstance(s, Op):
        return dataclasses.replace(s, args=tuple(r(a) for a in s.args))
    if isinstance(s, Write) and s.value is not None:
        return dataclasses.replace(s, value=r(s.value))
    if isinstance(s, Print):
        return dataclasses.replace(s, arg=r(s.arg))
    if isinstance(s, Group):
        return dataclasses.replace(s, deps=tuple(d for d in s.deps if d not in m))
    if isinstance(s, Cond):
        return dataclasses.replace(s, pred=r(s.pred), then=_rename_block(s.then, m), else_=_rename_block(s.else_, m))
    if isinstance(s, While):
        return dataclasses.replace(s, init=r(s.init), body=_rename_block(s.body, m))
    if isinstance(s, Call):
        return dataclasses.replace(s, args=tuple(r(a) for a in s.args))
    return s


def _rename_block(b: Block, m: dict) -> Block:
    return Block(tuple(_rename_refs(s, m) for s in b.stmts), m.get(b.result, b.result) if b.result else b.result)


def _rename_defs(b: Block, m: dict) -> Block:
    """Rename definitions *and* uses (for inlining a function body twice)."""
    out = []
    for s in _rename_block(b, m).stmts:
        s = dataclasses.replace(s, out=m.get(s.out, s.out))
        if isinstance(s, Op) and s.ctrl:
            s = dataclasses.replace(s, ctrl=tuple(m.get(c, c) for c in s.ctrl))
        out.append(s)
    return Block(tuple(out), m.get(b.result, b.result) if b.result else b.result)


def _blocks(p: Program):
    """(path, block) for every block; path = ("main"|"fn", i, then stmt index/branch pairs)."""
    def rec(path, b):
        yield path, b
        for k, s in enumerate(b.stmts):
            if isinstance(s, Cond):
                yield from rec(path + ((k, "then"),), s.then)
                yield from rec(path + ((k, "else_"),), s.else_)
            elif isinstance(s, While):
                yield from rec(path + ((k, "body"),), s.body)
    yield from rec(("main",), p.body)
    for i, fn in enumerate(p.functions):
        yield from rec(("fn", i), fn.body)


def _set_block(p: Program, path: tuple, new: Block) -> Program:
    def rec(b: Block, steps) -> Block:
        if not steps:
            return new
        (k, attr), rest = steps[0], steps[1:]
        s = b.stmts[k]
        s = dataclasses.replace(s, **{attr: rec(getattr(s, attr), rest)})
        return Block(b.stmts[:k] + (s,) + b.stmts[k + 1:], b.result)

    if path[0] == "main":
        return dataclasses.replace(p, body=rec(p.body, path[1:]))
    i = path[1]
    fn = p.functions[i]
    fns = list(p.functions)
    fns[i] = dataclasses.replace(fn, body=rec(fn.body, path[2:]))
    return dataclasses.replace(p, functions=tuple(fns))


def _without(b: Block, k: int, rename: dict | None = None, insert: tuple = ()) -> Block:
    """Block ``b`` with statement k replaced by ``insert`` and later uses renamed."""
    rename = rename or {}
    gone = b.stmts[k].out
    rest = tuple(_rename_refs(s, {**rename, gone: rename.get(gone, gone)}) if rename else s for s in b.stmts[k + 1:])
    rest = tuple(dataclasses.replace(s, ctrl=tuple(c for c in s.ctrl if c != gone)) if getattr(s, "ctrl", ()) else s
                 for s in rest)
    rest = tuple(dataclasses.replace(s, deps=tuple(d for d in s.deps if d != gone)) if isinstance(s, Group) else s
                 for s in rest)
    rest = tuple(s for s in rest if not (isinstance(s, Group) and not s.deps))
    res = rename.get(b.result, b.result) if b.result else b.result
    return Block(b.stmts[:k] + tuple(insert) + rest, res)


def chunk_reductions(p: Program) -> Iterator[Program]:
    """Big steps for shrinking large programs (delta debugging): drop a run of the top block's
    statements at once, halves first, then quarters...; a dropped value still used later
    becomes a constant of its type."""
    types = p.types()
    stmts = p.body.stmts
    n = len(stmts)
    k = n // 2
    while k >= 2:
        for start in range(0, n, k):
            gone = stmts[start:start + k]
            later = Block(stmts[start + k:], p.body.result)
            used: set[str] = set()
            for st in walk(later):
                used.update(reads(st))
            names = {st.out for st in gone}
            keep = tuple(Const(st.out, *types[st.out]) for st in gone if st.out in used and is_value(st))
            rest = tuple(_strip_refs(st, names - {c.out for c in keep}) for st in later.stmts)
            q = dataclasses.replace(p, body=Block(stmts[:start] + keep + rest, p.body.result))
            try:
                validate(q)
            except (ValueError, KeyError, StopIteration):
                continue
            yield q
        k //= 2


def _strip_refs(s, names: set):
    """Statement ``s`` without control deps / group deps on ``names``."""
    if getattr(s, "ctrl", ()):
        s = dataclasses.replace(s, ctrl=tuple(c for c in s.ctrl if c not in names))
    if isinstance(s, Group):
        s = dataclasses.replace(s, deps=tuple(d for d in s.deps if d not in names))
    return s


def reductions(p: Program) -> Iterator[Program]:
    """Smaller variants of ``p`` (each one step simpler and still valid), biggest steps first:
    inline control flow and calls, replace statements by constants, delete effects and unused
    constants, forward an op's argument, drop control deps / devices / jit, drop unused
    inputs, variables and functions."""
    types = p.types()
    used: set[str] = set()
    for _, b in _blocks(p):
        for s in b.stmts:
            used.update(reads(s))
    out: list[Program] = []
    fns = {f.name: f for f in p.functions}
    for path, b in _blocks(p):
        for k, s in enumerate(b.stmts):
            if isinstance(s, Cond):
                for blk in (s.then, s.else_):
                    out.append(_set_block(p, path, _without(b, k, {s.out: blk.result}, blk.stmts)))
            elif isinstance(s, While):
                body = _rename_block(s.body, {s.var: s.init})
                res = s.init if s.body.result == s.var else s.body.result
                out.append(_set_block(p, path, _without(b, k, {s.out: res}, body.stmts)))
            elif isinstance(s, Call):
                fn = fns[s.fn]
                m = {q.name: a for q, a in zip(fn.params, s.args)}
                m.update({t.out: f"{t.out}_{s.out}" for t in fn.body.stmts})
                body = _rename_defs(fn.body, m)
                out.append(_set_block(p, path, _without(b, k, {s.out: body.result}, body.stmts)))
    for path, b in _blocks(p):
        for k, s in enumerate(b.stmts):
            if s.out not in used and b.result != s.out and not (path[0] == "fn" and k == len(b.stmts) - 1):
                out.append(_set_block(p, path, _without(b, k)))
    for path, b in _blocks(p):
        for k, s in enumerate(b.stmts):
            if isinstance(s, (Write, Print, Group)):
                out.append(_set_block(p, path, _without(b, k)))
            elif isinstance(s, Const):
                if s.out not in used:
                    out.append(_set_block(p, path, _without(b, k)))
            else:
                dtype, shape = types[s.out]
                c = Const(s.out, dtype, shape)
                out.append(_set_block(p, path, Block(b.stmts[:k] + (c,) + b.stmts[k + 1:], b.result)))
                if isinstance(s, Op):
                    for a in dict.fromkeys(s.args):
                        if types[a] == (dtype, shape):
                            out.append(_set_block(p, path, _without(b, k, {s.out: a})))
    for path, b in _blocks(p):
        for k, s in enumerate(b.stmts):
            simpler = {}
            if getattr(s, "ctrl", ()):
                simpler["ctrl"] = ()
            if getattr(s, "device", 0):
                simpler["device"] = 0
            if isinstance(s, While) and s.iters > 1:
                simpler["iters"] = 1
            if isinstance(s, Const) and s.seed:
                simpler["seed"] = 0
            if isinstance(s, Op) and s.xla is not None:
                simpler["xla"] = None
            if isinstance(s, Group) and len(s.deps) > 1:
                simpler["deps"] = s.deps[:1]
            for key, val in simpler.items():
                t = dataclasses.replace(s, **{key: val})
                out.append(_set_block(p, path, Block(b.stmts[:k] + (t,) + b.stmts[k + 1:], b.result)))
    for i, fn in enumerate(p.functions):
        if fn.jit is not None:
            fs = list(p.functions)
            fs[i] = dataclasses.replace(fn, jit=None)
            out.append(dataclasses.replace(p, functions=tuple(fs)))
    called = {s.fn for _, b in _blocks(p) for s in b.stmts if isinstance(s, Call)}
    p_fns = tuple(f for f in p.functions if f.name in called)
    if len(p_fns) < len(p.functions):
        out.append(dataclasses.replace(p, functions=p_fns))
    read_vars = {s.var for _, b in _blocks(p) for s in b.stmts if isinstance(s, (Read, Write))}
    p_vars = tuple(v for v in p.variables if v.name in read_vars)
    if len(p_vars) < len(p.variables):
        out.append(dataclasses.replace(p, variables=p_vars))
    if p.grad:
        out.append(dataclasses.replace(p, grad=False))
    if p.dynamic:
        out.append(dataclasses.replace(p, dynamic=False))
    p_in = tuple(x for i, x in enumerate(p.inputs) if i == 0 or x.name in used)
    if len(p_in) < len(p.inputs):
        out.append(dataclasses.replace(p, inputs=p_in))
    seen = set()
    for q in out:
        key = repr(q)
        if key in seen or q == p:
            continue
        seen.add(key)
        try:
            validate(q)
        except (ValueError, KeyError, StopIteration):
            continue
        yield q
