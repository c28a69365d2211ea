"""Mutation fuzz of jitsim's input handling: valid GraphDefs mutated at the byte level (cut,
flip, insert, delete, in text or binary form, gzip or not) and at the field level (names,
ops, inputs, devices, attrs removed, retyped or set to odd values, nodes duplicated or
dropped), then given to ``jitsim cluster``. Whatever the input, jitsim must answer: exit 0,
or exit 2 with exactly one ``jitsim: ...`` line on stderr; never an exception, never an
output file left behind by a failing run.

CI runs a small sample (``JITSIM_FUZZ_EXAMPLES`` per test, default 60: about 15 s). The long run,
10,000 examples (5,000 per test; docs/cli.md)::

    JITSIM_FUZZ_EXAMPLES=5000 python3 -m pytest -q -p no:cacheprovider --hypothesis-show-statistics tests/test_mutation_fuzz.py

No TensorFlow process is started (``--tf never``).
"""

from __future__ import annotations

import gzip
import importlib.util
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from jitsim.registry import protos
from jitsim.graph.io import to_text

EXAMPLES = int(os.environ.get("JITSIM_FUZZ_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES <= 100,
                    suppress_health_check=list(HealthCheck), database=None)
CPU = "/job:localhost/replica:0/task:0/device:CPU:0"


def _bad_inputs():
    spec = importlib.util.spec_from_file_location(
        "bad_inputs_generate", Path(__file__).resolve().parent / "bad_inputs" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_GEN = _bad_inputs()


def _placed_graph():
    """A TF pass-input-like graph (placed, _Arg/_Retval): takes the dump route."""
    gd = protos.GraphDef()
    t = ("type", 1)
    _GEN._node(gd, "a", "_Arg", device=CPU, T=t, index=0)
    _GEN._node(gd, "b", "_Arg", device=CPU, T=t, index=1)
    _GEN._node(gd, "m", "MatMul", ["a", "b"], device=CPU, T=t)
    _GEN._node(gd, "n", "Neg", ["m"], device=CPU, T=t)
    _GEN._node(gd, "e", "Exp", ["n"], device=CPU, T=t)
    _GEN._node(gd, "s", "AddN", ["e", "n"], device=CPU, T=t, N=2)
    _GEN._node(gd, "c", "Const", ["^a"], device=CPU, dtype=t, value=("tensor", [2]))
    _GEN._node(gd, "r", "_Retval", ["s"], device=CPU, T=t, index=0)
    return gd


BASES = [_GEN.valid_graph(), _GEN.valid_graph(CPU), _placed_graph()]
OPS = ["Neg", "MatMul", "AddN", "Const", "Identity", "NoOp", "Placeholder", "_Arg", "_Retval", "Switch", "Merge",
       "NextIteration", "PartitionedCall", "MyLib>Custom", "", "Matmul", "_FusedMatMul", "VarHandleOp",
       "ReadVariableOp", "Enter", "Exit", "LoopCond"]
NAMES = st.sampled_from(["a", "b", "m", "n", "x", "w", "r", "s", "out", "", "^a", "a:1", "zz", "x/y", "é", "n" * 300])
ATTR_KEYS = st.sampled_from(["T", "N", "dtype", "value", "index", "shape", "f", "Tin", "Tout", "_XlaCluster",
                             "_XlaCompile", "transpose_a", "_class"])


@st.composite
def attr_values(draw):
    av = protos.AttrValue()
    kind = draw(st.sampled_from(["type", "i", "b", "s", "f", "shape", "list_type", "func", "tensor", "none"]))
    if kind == "type":
        av.type = draw(st.sampled_from([0, 1, 2, 3, 7, 9, 10, 20, 21, 101, 999]))
    elif kind == "i":
        av.i = draw(st.sampled_from([-1, 0, 1, 2, 3, 1000, 2**31, 2**62]))
    elif kind == "b":
        av.b = draw(st.booleans())
    elif kind == "s":
        av.s = draw(st.sampled_from([b"", b"cluster_0", b"\xff\xfe", b"loc:@a"]))
    elif kind == "f":
        av.f = draw(st.sampled_from([0.0, -1.5, float("nan"), float("inf")]))
    elif kind == "shape":
        for d in draw(st.lists(st.sampled_from([-1, 0, 1, 2, 2**40]), max_size=4)):
            av.shape.dim.add(size=d)
        av.shape.unknown_rank = draw(st.booleans())
    elif kind == "list_type":
        av.list.type.extend(draw(st.lists(st.sampled_from([0, 1, 3, 20]), max_size=4)))
    elif kind == "func":
        av.func.name = draw(st.sampled_from(["", "f_missing", "Neg", "rec"]))
    elif kind == "tensor":
        av.tensor.dtype = draw(st.sampled_from([0, 1, 3, 7]))
        for d in draw(st.lists(st.sampled_from([0, 1, 3, -1]), max_size=3)):
            av.tensor.tensor_shape.dim.add(size=d)
        av.tensor.float_val.extend(draw(st.lists(st.floats(allow_nan=True), max_size=3)))
    return av


@st.composite
def field_mutants(draw):
    gd = protos.GraphDef()
    gd.CopyFrom(draw(st.sampled_from(BASES)))
    for _ in range(draw(st.integers(1, 4))):
        if not gd.node:
            gd.node.add(name="a", op="NoOp")
        i = draw(st.integers(0, len(gd.node) - 1))
        nd = gd.node[i]
        what = draw(st.sampled_from(["name", "op", "input_add", "input_set", "input_del", "device", "attr_del",
                                     "attr_set", "dup", "drop", "swap", "library"]))
        if what == "name":
            nd.name = draw(NAMES)
        elif what == "op":
            nd.op = draw(st.sampled_from(OPS))
        elif what == "input_add":
            nd.input.append(draw(NAMES) + draw(st.sampled_from(["", ":0", ":1", ":7"])))
        elif what == "input_set" and nd.input:
            nd.input[draw(st.integers(0, len(nd.input) - 1))] = draw(NAMES)
        elif what == "input_del" and nd.input:
            del nd.input[draw(st.integers(0, len(nd.input) - 1))]
        elif what == "device":
            nd.device = draw(st.sampled_from(["", CPU, "/device:GPU:0", "/cpu:0", "garbage", "/job:x/task:z",
                                              "/job:localhost/replica:0/task:0/device:TPU:0"]))
        elif what == "attr_del" and nd.attr:
            del nd.attr[draw(st.sampled_from(sorted(nd.attr)))]
        elif what == "attr_set":
            nd.attr[draw(ATTR_KEYS)].CopyFrom(draw(attr_values()))
        elif what == "dup":
            gd.node.add().CopyFrom(nd)
        elif what == "drop":
            del gd.node[i]
        elif what == "swap" and len(gd.node) > 1:
            j = draw(st.integers(0, len(gd.node) - 1))
            a, b = protos.NodeDef(), protos.NodeDef()
            a.CopyFrom(gd.node[i])
            b.CopyFrom(gd.node[j])
            gd.node[i].CopyFrom(b)
            gd.node[j].CopyFrom(a)
        elif what == "library":
            f = gd.library.function.add()
            f.signature.name = draw(st.sampled_from(["rec", "f", "Neg"]))
            f.signature.input_arg.add(name="x", type=1)
            f.signature.output_arg.add(name="y", type=1)
            body = f.node_def.add(name="b", op=draw(st.sampled_from(["rec", "Neg", "f", "Nope"])))
            body.input.append("x")
            body.attr["T"].type = 1
            f.ret["y"] = draw(st.sampled_from(["b:y:0", "b:0", "x", "nope:y:0"]))
    return gd


@st.composite
def byte_mutants(draw):
    gd = draw(st.sampled_from(BASES))
    text = draw(st.booleans())
    data = to_text(gd).encode() if text else gd.SerializeToString(deterministic=True)
    for _ in range(draw(st.integers(1, 3))):
        if not data:
            break
        k = draw(st.integers(0, len(data) - 1))
        op = draw(st.sampled_from(["cut", "flip", "insert", "delete", "dup"]))
        if op == "cut":
            data = data[:k]
        elif op == "flip":
            data = data[:k] + bytes([data[k] ^ draw(st.integers(1, 255))]) + data[k + 1:]
        elif op == "insert":
            data = data[:k] + draw(st.binary(min_size=1, max_size=8)) + data[k:]
        elif op == "delete":
            data = data[:k] + data[k + draw(st.integers(1, 16)):]
        else:
            data = data[:k] + data[k:k + 32] + data[k:]
    if draw(st.booleans()):
        data = gzip.compress(data, mtime=0)
    suffix = draw(st.sampled_from([".pbtxt", ".pb", "", ".pbtxt.gz", ".pb.gz"]))
    return data, suffix


def _check(tmp_path, capsys, data: bytes, suffix: str, extra=()):
    from jitsim.cli import main

    d = tmp_path / f"case{len(list(tmp_path.iterdir()))}"
    d.mkdir()
    f = d / ("g" + suffix)
    f.write_bytes(data)
    out = d / "out.pbtxt"
    rc = main(["cluster", str(f), "--tf", "never", "-o", str(out), *extra])
    err = capsys.readouterr().err
    assert rc in (0, 2), (rc, err)
    event(f"exit {rc}")  # --hypothesis-show-statistics counts them
    if rc == 2:
        event("refused: " + _kind(err))
        lines = err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("jitsim: "), err
        assert not out.exists()
    assert not [p for p in d.iterdir() if p.name.startswith(".")], "temporary file left behind"


def _kind(err: str) -> str:
    """The kind of refusal, for the statistics: the message without path, names and numbers."""
    import re

    msg = err.strip().split(": ", 2)[-1]
    msg = re.sub(r"'[^']*'|\"[^\"]*\"|\d+", "_", msg)
    return msg[:60]


@pytest.fixture(autouse=True)
def _no_tf(monkeypatch, tmp_path_factory):
    monkeypatch.setenv("JITSIM_CACHE", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.delenv("TF_XLA_FLAGS", raising=False)


@SETTINGS
@given(gd=field_mutants(), text=st.booleans())
def test_field_mutations_get_an_answer(gd, text, tmp_path_factory, capsys):
    data = to_text(gd).encode() if text else gd.SerializeToString(deterministic=True)
    _check(tmp_path_factory.mktemp("f"), capsys, data, ".pbtxt" if text else ".pb")


@SETTINGS
@given(mutant=byte_mutants())
def test_byte_mutations_get_an_answer(mutant, tmp_path_factory, capsys):
    data, suffix = mutant
    _check(tmp_path_factory.mktemp("b"), capsys, data, suffix)
