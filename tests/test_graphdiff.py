"""Whole-graph comparison: every kind of difference between jitsim's and TF's graphs is reported."""

from graphs import parse_graphdef
from jitsim.crosscheck.graphdiff import diff_graphdefs

BASE = """
node { name: "x" op: "_Arg" device: "/device:CPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "n" op: "Neg" input: "x" input: "^c" device: "/device:CPU:0" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "c" op: "NoOp" }
library { function { signature { name: "f" input_arg { name: "a" type: DT_FLOAT } output_arg { name: "r" type: DT_FLOAT } }
  node_def { name: "m" op: "Neg" input: "a" }  ret { key: "r" value: "m:y:0" } } }
"""


def gd(text=BASE, edit=None):
    g = parse_graphdef(text)
    if edit:
        edit(g)
    return g


def test_identical_graphs():
    d = diff_graphdefs(gd(), gd())
    assert d.identical and d.summary() == "identical (3 nodes, 1 functions)"


def test_node_order_is_ignored():
    def reverse(g):
        nodes = list(g.node)
        del g.node[:]
        g.node.extend(reversed(nodes))
    assert diff_graphdefs(gd(edit=reverse), gd()).identical


def test_each_kind_of_node_difference():
    def edit(g):
        g.node[1].op = "Abs"
        g.node[1].device = "/device:GPU:0"
        g.node[1].attr["T"].type = 2
        g.node[1].attr["_XlaCluster"].s = b"cluster_0"
        g.node[1].input[1] = "^x"
        g.node.add(name="extra", op="NoOp")
        del g.node[2]
    d = diff_graphdefs(gd(edit=edit), gd())
    assert d.missing_nodes == ["c"] and d.extra_nodes == ["extra"]
    msgs = d.node_diffs["n"]
    assert any(m.startswith("op: jitsim Abs, TF Neg") for m in msgs)
    assert any(m.startswith("device:") for m in msgs)
    assert any(m.startswith("control inputs:") for m in msgs)
    assert any(m.startswith("attr T: jitsim") for m in msgs)
    assert any(m.startswith("attr _XlaCluster: only in jitsim") for m in msgs)
    assert not d.identical and "1 nodes only in TF" in d.summary()


def test_ignored_attrs():
    def edit(g):
        g.node[1].attr["_output_shapes"].list.shape.add()
    assert diff_graphdefs(gd(edit=edit), gd(), ignore_attrs=["_output_shapes"]).identical
    assert not diff_graphdefs(gd(edit=edit), gd()).identical


def test_function_differences():
    def edit(g):
        f = g.library.function[0]
        f.node_def[0].op = "Abs"
        f.ret["r"] = "m:z:0"
        f.attr["_XlaCompiledKernel"].b = True
        g.library.function.add().signature.name = "g"
    d = diff_graphdefs(gd(edit=edit), gd())
    assert d.extra_functions == ["g"]
    msgs = d.function_diffs["f"]
    assert "body node m: op: jitsim Abs, TF Neg" in msgs
    assert any(m.startswith("ret:") for m in msgs)
    assert any(m.startswith("function attr _XlaCompiledKernel: only in jitsim") for m in msgs)


def test_a_nan_constant_equals_its_text_dump():
    """jitsim folds Sqrt(-1) to a NaN whose sign bit numpy sets; TF's .pbtxt dump writes `nan`,
    which reads back as the positive quiet NaN. Both are what the dump can say: equal. A real
    value difference still shows."""
    import struct

    from google.protobuf import text_format

    from jitsim.registry import protos

    def const(bits):
        g = protos.GraphDef()
        n = g.node.add(name="c", op="Const")
        n.attr["value"].tensor.dtype = 1
        n.attr["value"].tensor.float_val.append(struct.unpack("<f", struct.pack("<I", bits))[0])
        return g

    mine = const(0xFFC00000)  # -nan, as numpy's sqrt of a negative number gives on x86
    tf_dump = text_format.Parse(text_format.MessageToString(mine), protos.GraphDef())
    assert mine.SerializeToString() != tf_dump.SerializeToString()
    assert diff_graphdefs(mine, tf_dump).identical
    assert not diff_graphdefs(mine, const(0x3F800000)).identical
