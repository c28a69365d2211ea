"""Ops TF 2.21 core does not register (custom-op libraries such as tensorflow-text).

TF runs such a graph once the library is loaded and treats the op like a core op with no XLA
kernel. The real-TF side is covered by the corpus run ``custom_op_text`` (mark and end-to-end
pipeline fidelity, tests/test_mark_fidelity.py and tests/test_pipeline_fidelity.py) and the
reason example ``custom_op`` (tests/test_reason_examples.py); these tests pin the pieces.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from jitsim.cli import main
from jitsim.errors import GraphError
from jitsim.registry import protos
from jitsim.graph.io import save
from jitsim.graph.model import Graph
from jitsim.options import options_for
from jitsim.passes.pipeline import BEFORE_CLONE, cluster_graph, run_pipeline
from jitsim.registry import OpLibrary, op_def, using_op_libraries
from jitsim.graph.custom_ops import infer_op_library, read_op_library, unknown_ops

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
FLAGS = options_for("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_min_cluster_size=1", input_stage=BEFORE_CLONE)
F32, I64, STR = protos.AttrValue(type=1), protos.AttrValue(type=9), protos.AttrValue(type=7)


def _graph():
    """x -> Tanh -> Mul(·, cast(tok:1)) where ``tok`` is an unknown op fed by a string
    placeholder. ``tok`` has no XLA kernel (like any custom op), so it stays out; the math on
    both sides of it is compilable. Output 1 of ``tok`` is read by a Cast from int64, so its
    dtype is DT_INT64; output 0 is never read, so it cannot be known."""
    return Graph.from_nodes([
        ("s", "_Arg", [], {"T": STR, "index": 0}),
        ("x", "_Arg", [], {"T": F32, "index": 1}),
        ("tok", "MyLib>Tokenize", ["s"]),
        ("len", "Cast", ["tok:1"], {"SrcT": I64, "DstT": F32}),
        ("t", "Tanh", ["x"], {"T": F32}),
        ("m", "Mul", ["t", "len"], {"T": F32}),
        ("r", "_Retval", ["m"], {"T": F32, "index": 0}),
    ], device=CPU)


def test_unknown_op_is_not_compilable_and_the_rest_clusters():
    res = cluster_graph(_graph(), FLAGS)
    d = res.decisions["tok"]
    assert d.code == "CUSTOM_OP"
    assert d.evidence["kernel"] is False and d.evidence["op_def"].startswith("inferred from")
    assert "No registered 'MyLib>Tokenize' OpKernel" in d.detail
    assert "MyLib>" in d.evidence["registered_by"]
    labels = res.labels()
    assert labels["tok"] is None
    assert labels["len"] is not None and labels["len"] == labels["t"] == labels["m"]
    assert any("MyLib>Tokenize (1 node)" in n and "output 0" in n for n in res.notes)


def test_inferred_signature():
    inf = infer_op_library(_graph())
    od = inf.library.op_defs["MyLib>Tokenize"]
    assert [a.type for a in od.input_arg] == [7]  # from the string _Arg
    assert [a.type for a in od.output_arg] == [0, 9]  # output 0 unread, output 1 read as int64
    assert inf.undetermined == {"MyLib>Tokenize": ["output 0"]}
    assert inf.nodes == {"MyLib>Tokenize": ["tok"]}
    # inference is scoped: the op is unknown again outside the simulation
    assert op_def("MyLib>Tokenize") is None


def test_conflicting_dtypes_are_reported():
    g = Graph.from_nodes([
        ("a", "_Arg", [], {"T": F32, "index": 0}),
        ("b", "_Arg", [], {"T": I64, "index": 1}),
        ("u1", "Mystery", ["a"]),
        ("u2", "Mystery", ["b"]),
    ], device=CPU)
    inf = infer_op_library(g)
    assert "input 0 (nodes disagree on its dtype)" in inf.undetermined["Mystery"]


def test_custom_op_output_feeds_a_cluster_through_every_pass():
    """The cluster function's argument for ``tok:1`` gets its dtype from the inferred OpDef
    (int64), and build-xla-ops wires the custom op into _XlaCompile/_XlaRun."""
    res = run_pipeline(_graph(), replace(FLAGS, until="build-xla-ops"))
    gd = res.to_graphdef()
    ops = {n.name: n.op for n in gd.node}
    assert "tok" in ops and ops["tok"] == "MyLib>Tokenize"
    assert "_XlaCompile" in ops.values() and "_XlaRun" in ops.values()
    fn = gd.library.function[0]
    assert sorted(a.type for a in fn.signature.input_arg) == [1, 9]


def test_unknown_op_in_a_function_body_with_one_output_read():
    lib = protos.FunctionDefLibrary()
    f = lib.function.add()
    f.signature.name = "fn"
    f.signature.input_arg.add(name="s", type=7)
    f.signature.output_arg.add(name="out", type=7)
    nd = f.node_def.add(name="tok", op="MyLib>Tokenize")
    nd.input.append("s")
    f.ret["out"] = "tok:tokens:0"
    from jitsim.graph.functions import function_to_graphdef

    gd = function_to_graphdef(lib, "fn")
    assert [n.input[:] for n in gd.node if n.op == "_Retval"] == [["tok"]]
    # two output arguments read: their order is only a guess (first read first), and the
    # inferred library says it could not determine it
    f.ret["out"] = "tok:offsets:0"
    f.signature.output_arg.add(name="out2", type=7)
    f.ret["out2"] = "tok:tokens:0"
    gd = function_to_graphdef(lib, "fn")
    assert [n.input[:] for n in gd.node if n.op == "_Retval"] == [["tok"], ["tok:1"]]
    inf = infer_op_library(gd)
    assert any("order of output arguments offsets, tokens" in u for u in inf.undetermined["MyLib>Tokenize"])


def _library_file(tmp_path, kind: str):
    ol = protos.OpList()
    od = ol.op.add(name="MyLib>Tokenize")
    od.input_arg.add(name="text", type=7)
    od.output_arg.add(name="tokens", type=7)
    od.output_arg.add(name="lengths", type=9)
    core = ol.op.add(name="AddV2")  # a core op in the file: TF core's definition wins
    core.output_arg.add(name="bogus", type=1)
    if kind == "oplist":
        return save(ol, tmp_path / "ops.pbtxt")
    from google.protobuf import text_format

    doc = {"schema": "jitsim.op-library/1", "op_list": text_format.MessageToString(ol), "xla_kernels": "",
           "kernels": ""}
    p = tmp_path / "ops.json"
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize("kind", ["oplist", "export"])
def test_op_library_file(tmp_path, kind):
    lib = read_op_library(_library_file(tmp_path, kind))
    assert set(lib.op_defs) == {"MyLib>Tokenize"}
    with using_op_libraries(lib):
        assert [a.name for a in op_def("MyLib>Tokenize").output_arg] == ["tokens", "lengths"]
        assert op_def("AddV2").output_arg[0].name == "z"
        assert unknown_ops(_graph()) == {}
    assert op_def("MyLib>Tokenize") is None


@pytest.mark.parametrize("content", [b"{\"schema\": \"other\"}", b"{not json", b"\x00\x01garbage"])
def test_bad_op_library_file(tmp_path, content):
    p = tmp_path / "ops.json"
    p.write_bytes(content)
    with pytest.raises(GraphError) as e:
        read_op_library(p)
    assert str(p) in str(e.value)


def test_cli_op_defs(tmp_path, capsys):
    g = tmp_path / "before_clone_constants_for_better_clustering.pbtxt"
    save(_graph().graphdef, g)
    lib = _library_file(tmp_path, "export")
    assert main(["explain", str(g), "tok", "--format", "json", "--op-defs", str(lib)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["code"] == "CUSTOM_OP" and out["evidence"]["op_def"] == str(lib)
    assert main(["cluster", str(g), "--format", "json"]) == 0
    rep = json.loads(capsys.readouterr().out)["graphs"][0]
    assert rep["nodes"]["tok"]["code"] == "CUSTOM_OP"
    assert main(["cluster", str(g), "--op-defs", str(tmp_path / "missing.json")]) == 2
    assert "missing.json: no such file" in capsys.readouterr().err


def test_library_kernels_make_a_custom_op_compilable():
    """A library that registers an XLA kernel for its op (REGISTER_XLA_OP) makes it a candidate."""
    od = protos.OpDef(name="MyLib>Tokenize", is_stateful=False)
    od.input_arg.add(name="text", type=7)
    od.output_arg.add(name="a", type=7)
    od.output_arg.add(name="b", type=9)
    k = protos.KernelList().kernel.add(op="MyLib>Tokenize", device_type="XLA_CPU_JIT")
    res = cluster_graph(_graph(), replace(FLAGS, op_libraries=(OpLibrary({od.name: od}, (k,), source="test"),)))
    assert res.decisions["tok"].code == "CLUSTERED"


@pytest.mark.tf
def test_registry_export_tensorflow_text(tmp_path):
    pytest.importorskip("tensorflow_text", reason="tensorflow-text is not installed (pip install -e '.[dev]')")
    out = tmp_path / "text.json"
    assert main(["registry", "export", "--import", "tensorflow_text", "-o", str(out)]) == 0
    lib = read_op_library(out)
    assert {"CaseFoldUTF8", "TFText>WhitespaceTokenizeWithOffsetsV2"} <= set(lib.op_defs)
    assert not any(k.device_type.startswith("XLA") for k in lib.xla_kernels if k.op == "CaseFoldUTF8")
    assert any(k.op == "CaseFoldUTF8" and k.device_type == "CPU" for k in lib.kernels)


@pytest.mark.tf
def test_registry_export_of_nothing_is_refused(tmp_path):
    """Without --import/--load-library (or --all) the export would hold no op, a file --op-defs
    refuses later: it is refused at once, one line naming what to give, and no file is written."""
    import subprocess
    import sys

    out = tmp_path / "ops.json"
    r = subprocess.run([sys.executable, "-m", "jitsim", "registry", "export", "-o", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and not out.exists()
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith(f"jitsim: {out}: nothing to export") and "--import" in last and "Traceback" not in r.stderr
