"""Node input/output dtypes: the planned path (per registered OpDef, args read once) gives what
reading the OpDef's args from the proto gives (``optypes._expand``), on every registered op.

Each op is checked with its attrs unset (defaults, or 0 / empty where none) and with every
type attr, type-list attr and number attr set, so all four kinds of arg are reached.
"""

from __future__ import annotations

import random

from jitsim.registry import protos
from jitsim.registry import optypes
from jitsim.registry import op_def, op_defs


def _nodes(op: str, od, rng: random.Random):
    yield protos.NodeDef(name="n", op=op)
    nd = protos.NodeDef(name="n", op=op)
    for a in od.attr:
        if a.type == "type":
            nd.attr[a.name].type = rng.choice([1, 3, 9, 20, 21])
        elif a.type == "list(type)":
            nd.attr[a.name].list.type.extend(rng.choices([1, 2, 3, 7], k=rng.randrange(4)))
        elif a.type == "int":
            nd.attr[a.name].i = rng.randrange(4)
    yield nd


def test_planned_types_are_the_opdefs_on_every_op():
    rng = random.Random(7)
    ops = sorted(op_defs())
    assert len(ops) > 1000
    kinds = set()
    for op in ops:
        od = op_def(op)
        for nd in _nodes(op, od, rng):
            assert optypes.input_types(nd) == optypes._expand(od.input_arg, nd, od), op
            assert optypes.output_types(nd) == optypes._expand(od.output_arg, nd, od), op
            # twice: the second answer comes from the plan made by the first
            assert optypes.output_types(nd) == optypes._expand(od.output_arg, nd, od), op
        for a in list(od.input_arg) + list(od.output_arg):
            kinds.add("list" if a.type_list_attr else "number" if a.number_attr else
                      "attr" if a.type_attr else "fixed")
            if a.is_ref:
                kinds.add("ref")
    assert kinds == {"list", "number", "attr", "fixed", "ref"}
