"""Programs as JSON: reproducers keep the program, not only its source."""

from __future__ import annotations

import dataclasses

from jitsim.testing.program.model import (
    Block,
    Call,
    Cond,
    Const,
    Function,
    Group,
    Op,
    Print,
    Program,
    Read,
    Val,
    Variable,
    While,
    Write,
    validate,
)

# -- serialization (reproducers keep the program, not only its source) ----------------------------

_CLASSES = {c.__name__: c for c in (Val, Op, Const, Read, Write, Print, Group, Block, Cond, While, Call, Variable,
                                     Function, Program)}


def program_to_json(p: Program) -> dict:
    """A JSON-ready form of ``p`` (``program_from_json`` reads it back)."""
    def enc(x):
        if dataclasses.is_dataclass(x):
            return {"_": type(x).__name__, **{f.name: enc(getattr(x, f.name)) for f in dataclasses.fields(x)}}
        if isinstance(x, tuple):
            return [enc(y) for y in x]
        return x

    return enc(p)


def program_from_json(d: dict) -> Program:
    def dec(x, tuple_ok=True):
        if isinstance(x, dict):
            cls = _CLASSES[x["_"]]
            return cls(**{k: dec(v) for k, v in x.items() if k != "_"})
        if isinstance(x, list):
            return tuple(dec(y) for y in x)
        return x

    p = dec(d)
    validate(p)
    return p
