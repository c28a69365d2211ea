"""The shipped TF 2.21 registries: op definitions and XLA JIT kernels with type constraints."""

import pytest

from jitsim.registry import protos
from jitsim.registry import find_xla_kernel, op_def, xla_kernels


def _node(op, **types):
    n = protos.NodeDef(name="n", op=op)
    for k, v in types.items():
        n.attr[k].type = protos.DataType.values_by_name[v].number
    return n


def test_op_defs_cover_tf_ops():
    assert [a.name for a in op_def("Unique").output_arg] == ["y", "idx"]
    assert op_def("RandomUniform").is_stateful and not op_def("AddV2").is_stateful
    assert op_def("NoSuchOp") is None


@pytest.mark.parametrize("device", ["XLA_CPU_JIT", "XLA_GPU_JIT"])
def test_both_jit_devices_have_the_documented_kernel_set(device):
    # tf-passes Appendix B / V23: 489 ops; control-flow v1 and placeholders have none,
    # while Where, Unique, Assert, RandomUniform and PartitionedCall do (they are filtered
    # later by mark-for-compilation's own rules, not by the kernel lookup).
    ks = xla_kernels(device)
    assert len(ks) == 489
    for op in ("Enter", "Switch", "Merge", "AsString", "VarHandleOp", "Placeholder"):
        assert op not in ks
    for op in ("Where", "Unique", "Assert", "RandomUniform", "PartitionedCall"):
        assert op in ks


def test_type_constraints_decide():
    # Identity exists on XLA_CPU_JIT, but not for strings (tf-passes trap 16)
    assert find_xla_kernel(_node("Identity", T="DT_FLOAT"))[0] is not None
    k, why = find_xla_kernel(_node("Identity", T="DT_STRING"))
    assert k is None and why == "T=DT_STRING is not supported by XLA_CPU_JIT"


def test_missing_kernel_reason():
    assert find_xla_kernel(_node("Enter", T="DT_FLOAT")) == (None, "no XLA_CPU_JIT kernel for op Enter")


def test_label_must_match():
    n = _node("AddV2", T="DT_FLOAT")
    n.attr["_kernel"].s = b"mkl"
    k, why = find_xla_kernel(n)
    assert k is None and "label" in why


def test_cpu_and_gpu_differ_only_in_some_type_constraints():
    cpu, gpu = xla_kernels("XLA_CPU_JIT"), xla_kernels("XLA_GPU_JIT")
    assert set(cpu) == set(gpu)

    def allowed(ks):
        return sorted((c.name, tuple(sorted(c.allowed_values.list.type))) for k in ks for c in k.constraint)

    differ = sorted(op for op in cpu if allowed(cpu[op]) != allowed(gpu[op]))
    assert "Conv2D" in differ and len(differ) < 10
