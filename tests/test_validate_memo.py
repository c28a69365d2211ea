"""check_nodes makes the checks that read only a node's op and attrs once per distinct pair
(issue 25: a ResNet-50 step has 898 of them among 12.6k nodes). The checks of a node's own name,
inputs and device still run for every node, so a graph is refused with the same line, naming the
same node, as when every node is checked in full (``model._text_c = None``: the route without
the C extension)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import need_c_extension
from graphs import graph_of

from jitsim.errors import GraphError
from jitsim.graph import model, validate

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
F32, I32 = 1, 3


def _outcome(g, memo: bool) -> str:
    saved = model._text_c
    if not memo:
        model._text_c = None
    try:
        validate.check_nodes(g, "g.pbtxt")
    except GraphError as e:
        return str(e)
    finally:
        model._text_c = saved
    return "ok"


def _node(name, op, inputs, device=CPU, **attrs):
    return (name, op, inputs, attrs, device)


def _graph(nodes):
    g = graph_of([n[:4] for n in nodes])
    for nd, n in zip(g.graphdef.node, nodes):
        nd.device = n[4]
    return g


def _a(v):
    from jitsim.registry import protos

    av = protos.AttrValue()
    av.type = v
    return av


@pytest.mark.parametrize("last, error", [
    (_node("y", "AddV2", ["a", "a", "a"], T=_a(F32)), "node 'y' (AddV2): 3 data inputs given, but the op takes 2"),
    (_node("y", "AddV2", ["a", "a"], device="/bad:device", T=_a(F32)), "node 'y' (AddV2): malformed device"),
    (_node("y", "AddV2", ["a", "^a", "a"], T=_a(F32)), "node 'y' (AddV2): data input 'a' comes after a control input"),
    (_node("y", "AddV2", ["a", "a"], T=_a(F32)), None),
])
def test_a_node_like_an_earlier_one_is_still_checked_itself(last, error):
    need_c_extension("jitsim.graph._fasttext")
    # x passes; y has x's op and attrs, so only y's own inputs and device are checked again
    g = _graph([_node("a", "Placeholder", [], dtype=_a(F32)), _node("x", "AddV2", ["a", "a"], T=_a(F32)), last])
    got = _outcome(g, memo=True)
    assert got == _outcome(g, memo=False)
    assert (got == "ok") if error is None else got.startswith(f"g.pbtxt: {error}")


_OPS = [("AddV2", 2, {"T": F32}), ("AddV2", 2, {"T": I32}), ("Identity", 1, {"T": F32}), ("AddV2", 2, {}),
        ("Neg", 1, {"T": 0}), ("NoOp", 0, {}), ("Identity", 1, {"T": F32, "_class": b"loc:@n0"}),
        ("Identity", 1, {"T": F32, "_class": b"loc:@missing"})]


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_the_same_refusal_as_checking_every_node_in_full(seed):
    need_c_extension("jitsim.graph._fasttext")
    from jitsim.registry import protos

    rng = random.Random(seed)
    nodes = [_node("n0", "Placeholder", [], dtype=_a(F32))]
    for i in range(1, rng.randint(2, 12)):
        op, arity, attrs = rng.choice(_OPS)
        n_in = arity if rng.random() < 0.85 else rng.randint(0, 3)
        inputs = [f"n{rng.randrange(i)}" for _ in range(n_in)]
        if rng.random() < 0.2:
            inputs.append(f"^n{rng.randrange(i)}")
        values = {}
        for k, v in attrs.items():
            av = protos.AttrValue()
            if k == "_class":
                av.list.s.append(v)
            else:
                av.type = v
            values[k] = av
        device = CPU if rng.random() < 0.9 else "/not:a:device"
        nodes.append(_node(f"n{i}", op, inputs, device=device, **values))
    g = _graph(nodes)
    assert _outcome(g, memo=True) == _outcome(g, memo=False)
