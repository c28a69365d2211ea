"""The shipped TF 2.21 compile-time-constant input table and metadata-op list.

Evidence legend used below (all taken with TensorFlow 2.21.0, CPU):
  registry  the table itself: XlaOpRegistry::CompileTimeConstantInputArgNames / IsMetadataOp read
            from libtensorflow_cc.so.2 by ``jitsim.registry.regen.read_xla_op_registry``.
  hostmem   probe: tf.function(lambda *a: inner(*a)) around inner = tf.function(op, jit_compile=True)
            whose op inputs are all function args; the call node's ``_input_hostmem`` (set by
            ForceXlaConstantsOnHostPass) in encapsulate_subgraphs_before_N.pbtxt lists the constant
            flat input indices. 119 ops probed, 119 agree (names and flat indices).
  autojit   probe: the same op alone in a tf.function under TF_XLA_FLAGS="--tf_xla_auto_jit=2
            --tf_xla_cpu_global_jit --tf_xla_min_cluster_size=1"; in encapsulate_subgraphs_after_N.pbtxt
            the first _XlaNumConstantArgs inputs of the cluster call are the constant args. 104 ops
            clustered, 104 agree.
  source    tensorflow/compiler/tf2xla/kernels/<file>.cc REGISTER_XLA_OP line.
"""

import os
import subprocess
import sys

import pytest

from jitsim.registry import protos
from jitsim.registry import op_def, xla_kernels
from jitsim.registry.const_inputs import (
    COMPILE_TIME_CONST_INPUTS_ATTR,
    compile_time_const_input_indices,
    compile_time_const_inputs,
    const_input_table,
    input_ranges,
    is_metadata_op,
    metadata_ops,
)

SPOT_CHECKS = [
    # op, constant input args (OpDef order), evidence
    ("Reshape", ("shape",), "hostmem [1]; autojit cluster inputs [reshape__shape | reshape__tensor], 1 const"),
    ("Fill", ("dims",), "hostmem [0]; source fill_op.cc CompileTimeConstantInput(\"dims\")"),
    ("Slice", ("begin", "size"), "hostmem [1, 2]; autojit 2 const args"),
    ("StridedSlice", ("begin", "end", "strides"), "hostmem [1, 2, 3]; autojit"),
    ("Sum", ("reduction_indices",), "hostmem [1]; autojit"),
    ("Mean", ("reduction_indices",), "hostmem [1]; autojit"),
    ("Max", ("reduction_indices",), "hostmem [1]; autojit"),
    ("All", ("reduction_indices",), "hostmem [1]; autojit"),
    ("Transpose", ("perm",), "hostmem [1]; autojit"),
    ("Tile", ("multiples",), "hostmem [1]; autojit"),
    ("Range", ("start", "limit", "delta"), "hostmem [0, 1, 2]; autojit"),
    ("OneHot", ("depth",), "hostmem [1]; autojit"),
    ("Pad", ("paddings",), "hostmem [1]; autojit"),
    ("MirrorPad", ("paddings",), "hostmem [1]; autojit"),
    ("ConcatV2", ("axis",), "hostmem [2] with N=2; autojit cluster inputs [concatv2__axis | values_0, values_1]"),
    ("Concat", ("concat_dim",), "hostmem [0] with N=2; autojit"),
    ("GatherV2", ("axis",), "hostmem [2]; autojit"),
    ("ArgMax", ("dimension",), "hostmem [1]; autojit"),
    ("ExpandDims", ("dim",), "hostmem [1]; autojit"),
    ("Split", ("split_dim",), "hostmem [0]; autojit"),
    ("SplitV", ("size_splits", "split_dim"), "hostmem [1, 2]; autojit"),
    ("BroadcastTo", ("shape",), "hostmem [1]; autojit"),
    ("Conv2DBackpropInput", ("input_sizes",), "hostmem [0]; autojit"),
    ("Conv2DBackpropFilter", ("filter_sizes",), "hostmem [1]; autojit"),
    ("ResizeBilinear", ("size",), "hostmem [1]; autojit"),
    ("TopKV2", ("k",), "hostmem [1]; autojit"),
    ("Cumsum", ("axis",), "hostmem [1]; autojit"),
    ("Roll", ("axis",), "hostmem [2] (shift is not constant); autojit; source roll_op.cc "
                        "REGISTER_XLA_OP(Name(\"Roll\").CompileTimeConstantInput(\"axis\"), RollOp)"),
    ("RandomUniform", ("shape",), "hostmem [0] (stateful: not auto-clustered)"),
    ("StatelessRandomUniformV2", ("shape", "alg"), "hostmem [0, 3]; autojit; source "
                                                   "stateless_random_ops_v2.cc .CompileTimeConstantInput(\"shape\")"
                                                   ".CompileTimeConstantInput(\"alg\")"),
    ("MatrixDiagV3", ("k", "num_rows", "num_cols", "padding_value"), "hostmem [1, 2, 3, 4]; autojit"),
    ("MatrixSetDiagV3", ("k",), "hostmem [2]; autojit"),
    ("Empty", ("shape",), "hostmem [0]; autojit"),
    ("DynamicStitch", ("indices",), "hostmem [0, 1] with N=2; autojit"),
    ("ListDiff", ("x", "y"), "hostmem [0, 1]; autojit; source listdiff_op.cc .CompileTimeConstantInput(\"x\")"
                             ".CompileTimeConstantInput(\"y\")"),
    ("StridedSliceGrad", ("shape", "begin", "end", "strides"), "hostmem [0, 1, 2, 3]; autojit"),
    ("UnsortedSegmentSum", ("num_segments",), "hostmem [2]; autojit"),
    ("MaxPoolV2", ("ksize", "strides"), "hostmem [1, 2]; autojit"),
    ("TensorListReserve", ("element_shape", "num_elements"), "hostmem [0, 1]"),
    ("_FusedConv2D", ("host_args",), "source fused_conv_ops.cc .CompileTimeConstantInput(\"host_args\")"),
]

# Ops whose inputs are all runtime values: hostmem [] and, where clustered, _XlaNumConstantArgs=0.
NO_CONST = ["Squeeze", "TensorScatterUpdate", "ZerosLike", "AddV2", "MatMul", "SelectV2", "Cast",
            "Pack", "Unpack", "IdentityN", "Where", "Relu", "Softmax", "Shape", "Size", "Rank", "ShapeN"]


def _node(op, **attrs):
    n = protos.NodeDef(name="n", op=op)
    for k, v in attrs.items():
        if isinstance(v, int):
            n.attr[k].i = v
        elif isinstance(v, list) and all(isinstance(x, str) and x.startswith("DT_") for x in v):
            n.attr[k].list.type.extend(protos.DataType.values_by_name[x].number for x in v)
        elif isinstance(v, list):
            n.attr[k].list.s.extend(x.encode() for x in v)
        else:
            n.attr[k].type = protos.DataType.values_by_name[v].number
    return n


@pytest.mark.parametrize("op,args,evidence", SPOT_CHECKS, ids=[c[0] for c in SPOT_CHECKS])
def test_spot_checks(op, args, evidence):
    assert compile_time_const_inputs(op) == args, evidence


@pytest.mark.parametrize("op", NO_CONST)
def test_ops_without_constant_inputs(op):
    assert compile_time_const_inputs(op) == ()
    assert op not in const_input_table()


def test_table_size_and_metadata_ops():
    # registry: 150 of the 489 XLA ops have constant inputs; 7 are .IsMetadataOp().
    assert len(const_input_table()) == 150
    # source: shape_op.cc Name("Shape").CompilationOnly().IsMetadataOp(); tensor_list_ops.cc
    # Name("TensorListLength").IsMetadataOp(); variable_ops.cc Name("VariableShape")...IsMetadataOp().
    # hostmem: Reshape(x, Shape(y)) / ShapeN / Size / Rank in a jit_compile fn give _input_hostmem []
    # while Reshape(x, Identity(y)) gives [1].
    assert metadata_ops() == {"Rank", "Shape", "ShapeN", "Size", "TensorListElementShape",
                              "TensorListLength", "VariableShape"}
    assert is_metadata_op("Shape") and not is_metadata_op("Reshape") and not is_metadata_op("NoSuchOp")


def test_every_entry_is_a_registered_op_with_an_xla_kernel_in_opdef_order():
    kernels = xla_kernels("XLA_CPU_JIT")
    for op, args in const_input_table().items():
        od = op_def(op)
        assert od is not None, op
        assert op in kernels, op
        inputs = [a.name for a in od.input_arg]
        assert args and set(args) <= set(inputs), (op, args)
        assert list(args) == [a for a in inputs if a in args], (op, args)
    for op in metadata_ops():
        assert op_def(op) is not None and op in kernels, op
        assert compile_time_const_inputs(op) == ()


def test_simple_indices():
    assert compile_time_const_input_indices(_node("Reshape", T="DT_FLOAT")) == [1]
    assert compile_time_const_input_indices(_node("Range", Tidx="DT_INT32")) == [0, 1, 2]
    assert compile_time_const_input_indices(_node("Roll", T="DT_FLOAT")) == [2]
    assert compile_time_const_input_indices(_node("AddV2", T="DT_FLOAT")) == []
    assert compile_time_const_input_indices(_node("NoSuchOp")) == []


def test_list_args_expand_by_number_attr():
    # ConcatV2(values: N * T, axis): with N=3, axis is flat input 3 (hostmem [2] for N=2).
    assert compile_time_const_input_indices(_node("ConcatV2", N=3)) == [3]
    # Concat(concat_dim, values: N * T): the axis comes first.
    assert compile_time_const_input_indices(_node("Concat", N=3)) == [0]
    # DynamicStitch(indices: N * int32, data: N * T): all of indices (hostmem [0, 1] for N=2).
    assert compile_time_const_input_indices(_node("DynamicStitch", N=2)) == [0, 1]
    # ConcatOffset(concat_dim, shape: N * shape_type): everything (hostmem [0, 1, 2] for N=2).
    assert compile_time_const_input_indices(_node("ConcatOffset", N=2)) == [0, 1, 2]
    assert input_ranges(_node("ConcatV2", N=3)) == {"values": (0, 3), "axis": (3, 4)}


def test_list_args_expand_by_type_list_attr_and_default_number_attr():
    # _FusedConv2D(input, filter, args: TArgs, host_args: num_host_args * float);
    # num_host_args defaults to 0 in the OpDef.
    n = _node("_FusedConv2D", TArgs=["DT_FLOAT", "DT_FLOAT"])
    assert input_ranges(n)["host_args"] == (4, 4)
    assert compile_time_const_input_indices(n) == []
    n.attr["num_host_args"].i = 2
    assert compile_time_const_input_indices(n) == [4, 5]


def test_missing_list_length_raises():
    with pytest.raises(ValueError, match="attr N is not set"):
        compile_time_const_input_indices(_node("ConcatV2"))


def test_override_attr_replaces_the_table():
    # XlaOpRegistry::CompileTimeConstantInputs: a node attr _XlaCompileTimeConstantInputs (list of
    # input arg names) is used instead of the registration; unknown names are skipped.
    n = _node("Reshape", T="DT_FLOAT", **{COMPILE_TIME_CONST_INPUTS_ATTR: ["tensor"]})
    assert compile_time_const_input_indices(n) == [0]
    n = _node("AddV2", T="DT_FLOAT", **{COMPILE_TIME_CONST_INPUTS_ATTR: ["y", "nonexistent"]})
    assert compile_time_const_input_indices(n) == [1]
    n = _node("ConcatV2", N=2, **{COMPILE_TIME_CONST_INPUTS_ATTR: ["values", "axis"]})
    assert compile_time_const_input_indices(n) == [0, 1, 2]
    n = _node("Reshape", T="DT_FLOAT")
    n.attr[COMPILE_TIME_CONST_INPUTS_ATTR].list.SetInParent()  # present but empty: no constants
    assert compile_time_const_input_indices(n) == []


def _env():
    src = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    env["PYTHONPATH"] = os.pathsep.join(p for p in [src, env.get("PYTHONPATH", "")] if p)
    return env


def test_loading_does_not_import_tensorflow():
    code = ("import sys; from jitsim.registry.const_inputs import compile_time_const_inputs as c;"
            "assert c('Reshape') == ('shape',); assert 'tensorflow' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, env=_env())


_LIVE = r"""
import json, sys
from jitsim.registry.regen import read_xla_op_registry
version, const_inputs, metadata = read_xla_op_registry()
json.dump({"version": version, "const_inputs": const_inputs, "metadata_ops": metadata}, sys.stdout)
"""


@pytest.mark.tf
def test_shipped_table_matches_installed_tensorflow():
    """Re-reads the live XlaOpRegistry of the installed TF (in a subprocess) when it is 2.21."""
    import json

    out = subprocess.run([sys.executable, "-c", _LIVE], check=True, env=_env(), capture_output=True, text=True)
    live = json.loads(out.stdout)
    if live["version"] != "2.21":
        pytest.skip(f"installed TensorFlow is {live['version']}")
    assert {k: tuple(v) for k, v in live["const_inputs"].items()} == const_input_table()
    assert frozenset(live["metadata_ops"]) == metadata_ops()
