"""Regenerate the registry snapshots from the installed TensorFlow.

    python -m jitsim.registry.regen            # writes data/tf-<major.minor>-*.binpb

Needs TensorFlow importable; jitsim itself never does at run time.
"""

from __future__ import annotations

import sys

from jitsim.errors import JitsimError
from jitsim.files.input import is_regular_file, read_problem
from jitsim.registry.kernels import KERNEL_DEVICE_TYPES, KERNELS_DATA
from jitsim.registry import DATA, RELEASE_DATA, XLA_DEVICE_TYPES, data_file, op_defs


def regenerate_op_defs() -> tuple[str, int]:
    import tensorflow as tf
    from tensorflow.python.client import pywrap_tf_session as c

    version = ".".join(tf.__version__.split(".")[:2])
    buf = c.TF_GetAllOpList()
    data = c.TF_GetBuffer(buf)
    from jitsim.registry import protos

    ol = protos.OpList()
    ol.ParseFromString(data)
    ops = sorted(ol.op, key=lambda o: o.name)
    out = protos.OpList()
    out.op.extend(ops)
    DATA.mkdir(exist_ok=True)
    data_file("ops.binpb", version).write_bytes(out.SerializeToString(deterministic=True))
    return version, len(ops)


def regenerate_xla_kernels() -> tuple[str, dict]:
    """Snapshot the kernels of the XLA JIT devices, with their type constraints and labels.

    TF registers XLA_CPU_JIT / XLA_GPU_JIT kernels lazily, on the first XLA compilation, so
    one tiny jit_compile function is run first. The CPU-only wheel registers both devices.
    """
    import tensorflow as tf
    from tensorflow.python.framework import kernels

    @tf.function(jit_compile=True)
    def _trigger(x):
        return x + 1.0

    _trigger(tf.ones([1]))
    version = ".".join(tf.__version__.split(".")[:2])
    from jitsim.registry import protos

    out = protos.KernelList()
    counts: dict[str, int] = {}
    found = [k for k in kernels.get_all_registered_kernels().kernel if k.device_type in XLA_DEVICE_TYPES]
    for k in sorted(found, key=lambda k: (k.device_type, k.op, k.label, k.SerializeToString(deterministic=True))):
        out.kernel.add().ParseFromString(k.SerializeToString())
        counts[k.device_type] = counts.get(k.device_type, 0) + 1
    data_file("xla-kernels.binpb", version).write_bytes(out.SerializeToString(deterministic=True))
    return version, counts


def read_xla_op_registry() -> tuple[str, dict[str, list[str]], list[str]]:
    """``(tf version, {op: compile-time-constant input names in OpDef order}, [metadata ops])``.

    ``REGISTER_XLA_OP(Name(op).CompileTimeConstantInput(arg)...IsMetadataOp())`` is not visible
    from Python, so the static ``XlaOpRegistry`` functions exported by libtensorflow_cc are
    called through ctypes: ``GetAllRegisteredOps()``, ``CompileTimeConstantInputArgNames(op)``
    (the first registration's set, as const analysis uses) and ``IsMetadataOp(op)``. Strings
    cross the boundary as libstdc++ (cxx11 ABI) ``std::string``s and the returned
    ``std::unordered_set<std::string>`` is walked node by node; every name is checked against
    the op's OpDef and a few known entries, so a layout change fails loudly instead of
    producing a wrong table.
    """
    import ctypes
    import os

    import tensorflow as tf
    from tensorflow.python.framework import op_def_registry

    version = ".".join(tf.__version__.split(".")[:2])
    lib = ctypes.CDLL(os.path.join(os.path.dirname(tf.__file__), "libtensorflow_cc.so.2"))
    std_string = "NSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"
    arg_names = getattr(lib, f"_ZN10tensorflow13XlaOpRegistry32CompileTimeConstantInputArgNamesERK{std_string}")
    arg_names.restype, arg_names.argtypes = ctypes.c_void_p, [ctypes.c_void_p]
    is_metadata = getattr(lib, f"_ZN10tensorflow13XlaOpRegistry12IsMetadataOpERK{std_string}")
    is_metadata.restype, is_metadata.argtypes = ctypes.c_bool, [ctypes.c_void_p]
    all_ops = lib._ZN10tensorflow13XlaOpRegistry19GetAllRegisteredOpsB5cxx11Ev
    all_ops.restype, all_ops.argtypes = ctypes.c_void_p, [ctypes.c_void_p]  # sret: std::vector<string>

    u64 = ctypes.c_uint64

    def read_string(addr: int) -> str:  # std::string = {char* p; size_t len; ...}
        return ctypes.string_at(u64.from_address(addr).value, u64.from_address(addr + 8).value).decode()

    def call_with_string(fn, s: str):
        data = ctypes.create_string_buffer(s.encode())
        st = (u64 * 4)(ctypes.addressof(data), len(s.encode()), len(s.encode()), 0)
        return fn(ctypes.addressof(st))

    vec = (u64 * 3)()  # {begin, end, end_of_storage}; deliberately leaked
    all_ops(ctypes.addressof(vec))
    ops = sorted(read_string(a) for a in range(vec[0], vec[1], 32))

    def const_arg_names(op: str) -> set[str]:
        # _Hashtable: {buckets, bucket_count, before_begin._M_nxt, element_count, ...};
        # node: {next, std::string value, cached hash}
        table = call_with_string(arg_names, op)
        count = u64.from_address(table + 24).value
        names, node = set(), u64.from_address(table + 16).value
        while node and len(names) <= count:
            names.add(read_string(node + 8))
            node = u64.from_address(node).value
        if len(names) != count:
            raise RuntimeError(f"unexpected std::unordered_set layout reading {op}")
        return names

    const_inputs, metadata = {}, []
    for op in ops:
        names = const_arg_names(op)
        if call_with_string(is_metadata, op):
            metadata.append(op)
        if not names:
            continue
        inputs = [a.name for a in op_def_registry.get(op).input_arg]
        unknown = names - set(inputs)
        if unknown:  # TF skips such names; none in 2.21, so report rather than guess
            raise RuntimeError(f"{op}: compile-time-constant names {sorted(unknown)} are not inputs {inputs}")
        const_inputs[op] = [a for a in inputs if a in names]
    expected = {"Reshape": ["shape"], "ConcatV2": ["axis"], "Slice": ["begin", "size"]}
    if any(const_inputs.get(k) != v for k, v in expected.items()) or "Shape" not in metadata:
        raise RuntimeError("XlaOpRegistry read-back does not contain known entries; ABI changed?")
    return version, const_inputs, metadata


def regenerate_const_inputs() -> tuple[str, int, int]:
    """Snapshot tf2xla's compile-time-constant inputs and metadata ops (data/tf-<v>-const-inputs.json)."""
    import json

    import tensorflow as tf

    version, const_inputs, metadata = read_xla_op_registry()
    doc = {
        "tf_version": version,
        "source": (
            f"TensorFlow {tf.__version__} XlaOpRegistry, read by jitsim.registry.regen.regenerate_const_inputs: "
            "for each op of XlaOpRegistry::GetAllRegisteredOps(), CompileTimeConstantInputArgNames(op) "
            "(the REGISTER_XLA_OP .CompileTimeConstantInput names of the op's first registration, as "
            "BackwardsConstAnalysis uses them) ordered by the OpDef's input_arg, and IsMetadataOp(op); "
            "called via ctypes on libtensorflow_cc.so.2. Validated for TF 2.21 on 119 ops (102 with constant "
            "inputs, 17 without) by probing real TF: the nested jit_compile call's _input_hostmem "
            "(ForceXlaConstantsOnHostPass; names and flat indices, 119/119 agree) and the auto-clustering "
            "cluster call's _XlaNumConstantArgs (104/104 clustered ops agree); metadata ops Shape, ShapeN, "
            "Size, Rank confirmed not to propagate const-ness; tf2xla kernel sources spot-checked."
        ),
        "const_inputs": const_inputs,
        "metadata_ops": metadata,
    }
    path = data_file("const-inputs.json", version)
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return version, len(const_inputs), len(metadata)


def read_allowlist_table() -> tuple[str, dict[str, list[str]]]:
    """``(tf version, {category: [op]})``: the ``--tf_xla_ops_to_cluster`` categories of the
    installed TF (``GetAllowlistTable()`` in libtensorflow_cc, an ``absl::flat_hash_map<string,
    vector<string>>*``), read through ctypes like :func:`read_xla_op_registry`.

    Four abseil layouts occur in TF 2.15-2.22: ``{ctrl, slots, size, capacity, growth_left}`` (2.15),
    ``{ctrl, slots, capacity, size}`` (2.16-2.19), ``{capacity, size (shifted, with flag bits
    below), ctrl, slots}`` (2.20, 2.21) and ``{size (shifted), ctrl, slots}`` (2.22: the capacity
    is no longer stored there; it is where the control bytes' sentinel, ``0xff``, is). A slot is a
    ``pair<const string, vector<string>>`` (56 bytes); a control byte with the high bit clear
    marks a full slot. The element count and known entries are checked, so a layout change
    fails loudly. Lists come back sorted and without repeats (TF's MISC names Transpose twice)."""
    import ctypes
    import os

    import tensorflow as tf

    version = ".".join(tf.__version__.split(".")[:2])
    lib = ctypes.CDLL(os.path.join(os.path.dirname(tf.__file__), "libtensorflow_cc.so.2"))
    fn = lib._ZN10tensorflow17GetAllowlistTableB5cxx11Ev
    fn.restype, fn.argtypes = ctypes.c_void_p, []
    u64 = ctypes.c_uint64
    head = [u64.from_address(fn() + 8 * i).value for i in range(4)]

    def read_string(addr: int) -> str:
        return ctypes.string_at(u64.from_address(addr).value, u64.from_address(addr + 8).value).decode()

    def read_table(capacity: int, ctrl: int, slots: int) -> dict[str, list[str]]:
        table: dict[str, list[str]] = {}
        for i in range(capacity):
            if ctypes.c_uint8.from_address(ctrl + i).value & 0x80:
                continue
            slot = slots + 56 * i
            begin, end = u64.from_address(slot + 32).value, u64.from_address(slot + 40).value
            table[read_string(slot)] = sorted({read_string(a) for a in range(begin, end, 32)})
        return table

    def capacity_like(n: int) -> bool:
        return 0 < n < (1 << 20) and (n & (n + 1)) == 0

    def sentinel(ctrl: int) -> int:  # the capacity: the index of the control bytes' end marker
        for i in range(1 << 16):
            if ctypes.c_uint8.from_address(ctrl + i).value == 0xFF:
                return i
        return 0

    if capacity_like(head[0]):  # {capacity, size << 17 or << 1 (flag bits below), ctrl, slots}
        layouts = [(head[0], {head[1] >> 17, head[1] >> 1}, head[2], head[3])]
    else:  # {ctrl, slots, capacity, size} (2.16-2.19) or {ctrl, slots, size, capacity, growth} (2.15)
        layouts = [(c, {n}, head[0], head[1]) for c, n in ((head[2], head[3]), (head[3], head[2])) if capacity_like(c)]
        if not layouts and head[1] > 1 << 16 and head[2] - head[1] in range(1, 1 << 12):
            # {size << 17 (flag bits below), ctrl, slots} (2.22): ctrl and slots allocated together
            cap = sentinel(head[1])
            if capacity_like(cap):
                layouts = [(cap, {head[0] >> 17, head[0] >> 1}, head[1], head[2])]
    for capacity, sizes, ctrl, slots in layouts:
        table = read_table(capacity, ctrl, slots)
        if len(table) in sizes and "Reshape" in table.get("MISC", ()) and "AddV2" in table.get("PW", ()):
            break
    else:
        raise RuntimeError("GetAllowlistTable read-back does not hold the known entries; abseil layout changed?")
    return version, dict(sorted(table.items()))


SLOW_OPS_FUNCTION = "_ZNK10tensorflow29RecursiveCompilabilityChecker8OpIsSlowERKNS_4NodeE"


def read_slow_ops(library) -> list[str]:
    """The op names ``RecursiveCompilabilityChecker::OpIsSlow`` compares a node's op with, read
    from a TF release's ``libtensorflow_cc.so.2``: the string literals its machine code loads
    (rip-relative operands, resolved through the ELF load segments). TF keeps the list in code,
    not in a registry, and it changes between releases (2.20 added NonMaxSuppressionV3/V4).
    Needs binutils' ``nm``, ``objdump`` and ``readelf``."""
    import re
    import subprocess

    def run(*cmd):
        return subprocess.run(cmd, capture_output=True, text=True, check=True).stdout

    sym = next((f for f in (line.split() for line in run("nm", "-D", "-S", str(library)).splitlines())
                if len(f) == 4 and f[3].split("@")[0] == SLOW_OPS_FUNCTION), None)
    if sym is None:
        raise RuntimeError(f"{library}: no {SLOW_OPS_FUNCTION} symbol")
    start, size = int(sym[0], 16), int(sym[1], 16)
    code = run("objdump", "-d", "--no-show-raw-insn", f"--start-address={start}", f"--stop-address={start + size}",
               str(library))
    segments = []
    for line in run("readelf", "-lW", str(library)).splitlines():
        f = line.split()
        if f and f[0] == "LOAD":
            segments.append((int(f[2], 16), int(f[1], 16), int(f[4], 16)))
    data = open(library, "rb").read()
    names: list[str] = []
    for m in re.finditer(r"#\s*([0-9a-f]+)", code):
        va = int(m.group(1), 16)
        for seg_va, offset, filesz in segments:
            if seg_va <= va < seg_va + filesz:
                o = offset + va - seg_va
                text = data[o:data.find(b"\0", o, o + 128)]
                if re.fullmatch(rb"[A-Z][A-Za-z0-9]+", text) and text.decode() not in names:
                    names.append(text.decode())
    return names


def regenerate_slow_ops(library=None, version: str | None = None) -> tuple[str, list[str]]:
    """Write ``data/tf-<version>-slow-ops.json`` from a TF release's library (default: the
    installed TensorFlow's)."""
    import json
    from pathlib import Path

    if library is None:
        import tensorflow as tf

        library = Path(tf.__file__).parent / "libtensorflow_cc.so.2"
        version = ".".join(tf.__version__.split(".")[:2])
    names = read_slow_ops(library)
    doc = {"source": "string literals of RecursiveCompilabilityChecker::OpIsSlow in libtensorflow_cc.so.2 "
                     "(jitsim.registry.regen.read_slow_ops)", "slow_ops": names}
    data_file("slow-ops.json", version).write_text(json.dumps(doc, indent=1) + "\n")
    return version, names


def regenerate_ops_to_cluster() -> tuple[str, int, bool]:
    """Write ``data/tf-<v>-ops-to-cluster.json`` (kept as it is when its categories are the
    same). Returns ``(version, categories, written)``."""
    import json

    import tensorflow as tf

    version, table = read_allowlist_table()
    path = data_file("ops-to-cluster.json", version)
    if path.exists() and json.loads(path.read_text()).get("categories") == table:
        return version, len(table), False
    doc = {"categories": table, "tf_version": version,
           "source": f"TF {tf.__version__} GetAllowlistTable() (--tf_xla_ops_to_cluster categories), read by "
                     "jitsim.registry.regen.regenerate_ops_to_cluster"}
    path.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return version, len(table), True


def export_op_library(modules=(), libraries=(), *, all_ops: bool = False) -> dict:
    """What ``jitsim registry export`` writes (schema ``jitsim.op-library/1``): the OpDefs of
    every op registered in this TF process that TF core does not register (all of them with
    ``all_ops``), after importing ``modules`` and ``tf.load_op_library``-ing ``libraries``, with
    the XLA JIT and CPU/GPU kernels registered for them. Needs TensorFlow."""
    import importlib
    import importlib.util
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # TF's start-up chatter; must precede the import
    if importlib.util.find_spec("tensorflow") is None:
        raise JitsimError("registry export runs real TensorFlow (the op libraries register into it), which is not "
                          "installed here: pip install 'jitsim[tf]' (from a clone: pip install -e '.[tf]')")
    import tensorflow as tf
    from google.protobuf import text_format
    from tensorflow.python.client import pywrap_tf_session as c
    from tensorflow.python.framework import kernels

    from jitsim.registry import protos

    for m in modules:
        try:
            importlib.import_module(m)
        except Exception as e:  # noqa: BLE001 - any import failure is the user's to see
            raise JitsimError(f"cannot import {m}: {e}", m) from None
    for lib in libraries:
        if not is_regular_file(lib):  # dlopen of a FIFO would wait forever
            raise JitsimError(read_problem(lib, "a custom-op shared library (.so)"), lib)
        try:
            tf.load_op_library(lib)
        except Exception as e:  # noqa: BLE001
            raise JitsimError(f"cannot load op library: {e}", lib) from None
    ol = protos.OpList()
    ol.ParseFromString(c.TF_GetBuffer(c.TF_GetAllOpList()))
    core = op_defs()
    ops = sorted((o for o in ol.op if all_ops or o.name not in core), key=lambda o: o.name)
    names = {o.name for o in ops}

    @tf.function(jit_compile=True)
    def _trigger(x):  # XLA JIT kernels are registered on the first compilation
        return x + 1.0

    _trigger(tf.ones([1]))
    xla, regular = protos.KernelList(), protos.KernelList()
    for k in kernels.get_all_registered_kernels().kernel:
        if k.op in names:
            (xla if k.device_type in XLA_DEVICE_TYPES else regular).kernel.add().ParseFromString(k.SerializeToString())
    out = protos.OpList()
    out.op.extend(ops)
    return {
        "schema": "jitsim.op-library/1",
        "tf_version": tf.__version__,
        "modules": list(modules),
        "libraries": [str(x) for x in libraries],
        "ops": len(ops),
        "op_names": [o.name for o in ops],
        "xla_kernel_count": len(xla.kernel),
        "kernel_count": len(regular.kernel),
        "op_list": text_format.MessageToString(out),
        "xla_kernels": text_format.MessageToString(xla),
        "kernels": text_format.MessageToString(regular),
    }


def regenerate_kernel_snapshot() -> tuple[str, int, int]:
    """Write ``registry/data/tf-<ver>-kernels-cpu-gpu.binpb`` from the installed TensorFlow.

    Keeps CPU, GPU and DEFAULT KernelDefs (op, device type, constraints, host-memory args,
    label, priority). To keep the file small, kernels that differ only in the allowed types
    of one constraint, with disjoint type sets, are merged into one kernel allowing the
    union: a lossless rewrite for kernel lookup (the same nodes match, with the same
    host-memory args; overlapping registrations, which TF reports as ambiguous, are kept
    apart). Returns ``(version, kernels read, kernels written)``.
    """
    import tensorflow as tf
    from tensorflow.python.framework import kernels as tf_kernel_lib

    from jitsim.registry import protos

    version = ".".join(tf.__version__.split(".")[:2])
    found = []
    for tk in tf_kernel_lib.get_all_registered_kernels().kernel:
        if tk.device_type in KERNEL_DEVICE_TYPES:  # into jitsim's own message classes
            k = protos.KernelList().kernel.add()
            k.ParseFromString(tk.SerializeToString())
            found.append(k)

    def key(k):
        return (k.op, k.device_type, k.label, k.priority, tuple(k.host_memory_arg),
                tuple(c.name for c in k.constraint))

    def _copy(av):
        out = type(av)()
        out.CopyFrom(av)
        return out

    def pure_types(av) -> bool:
        lst = av.list
        return len(lst.type) > 0 and not (len(lst.s) or len(lst.i) or len(lst.b))

    groups: dict[tuple, list[list]] = {}
    for k in sorted(found, key=lambda k: (key(k), k.SerializeToString(deterministic=True))):
        entries = groups.setdefault(key(k), [])
        vals = [c.allowed_values for c in k.constraint]
        for e in entries:
            diff = [i for i in range(len(vals))
                    if vals[i].SerializeToString(deterministic=True) != e[i].SerializeToString(deterministic=True)]
            if len(diff) != 1:
                continue
            i = diff[0]
            if pure_types(vals[i]) and pure_types(e[i]) and not set(vals[i].list.type) & set(e[i].list.type):
                merged = sorted(set(vals[i].list.type) | set(e[i].list.type))
                e[i] = type(e[i])()
                e[i].list.type.extend(merged)
                break
        else:
            entries.append([_copy(v) for v in vals])
    out = protos.KernelList()
    for (op, dev, label, prio, hostmem, cnames), entries in sorted(groups.items()):
        for e in entries:
            k = out.kernel.add(op=op, device_type=dev, label=label, priority=prio)
            k.host_memory_arg.extend(hostmem)
            for name, allowed in zip(cnames, e):
                k.constraint.add(name=name).allowed_values.CopyFrom(allowed)
    data_file(KERNELS_DATA, version).write_bytes(out.SerializeToString(deterministic=True))
    return version, len(found), len(out.kernel)


def regenerate_release() -> tuple[str, int]:
    """``data/tf-<release>-release.json``: the wheel the data comes from and its GraphDef producer
    (``tf.version.GRAPH_DEF_VERSION``). Written last by :func:`main`: a release is supported
    once this file exists (:data:`jitsim.registry.SUPPORTED_TF_VERSIONS`)."""
    import json

    import tensorflow as tf

    version = ".".join(tf.__version__.split(".")[:2])
    doc = {"tf_version": tf.__version__, "graph_def_version": int(tf.version.GRAPH_DEF_VERSION),
           "source": "tf.__version__ and tf.version.GRAPH_DEF_VERSION, read by jitsim.registry.regen"}
    data_file(RELEASE_DATA, version).write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return version, doc["graph_def_version"]


def main() -> int:
    version, n = regenerate_op_defs()
    print(f"TensorFlow {version}: {n} op definitions -> {data_file('ops.binpb', version)}")
    version, counts = regenerate_xla_kernels()
    print(f"TensorFlow {version}: XLA kernels {counts} -> {data_file('xla-kernels.binpb', version)}")
    version, n_const, n_meta = regenerate_const_inputs()
    print(f"TensorFlow {version}: {n_const} ops with compile-time-constant inputs, {n_meta} metadata ops "
          f"-> {data_file('const-inputs.json', version)}")
    version, n_cat, changed = regenerate_ops_to_cluster()
    print(f"TensorFlow {version}: {n_cat} --tf_xla_ops_to_cluster categories -> "
          f"{data_file('ops-to-cluster.json', version)}{'' if changed else ' (unchanged)'}")
    version, slow = regenerate_slow_ops()
    print(f"TensorFlow {version}: slow ops {', '.join(slow)} -> {data_file('slow-ops.json', version)}")
    version, read, written = regenerate_kernel_snapshot()
    print(f"TF {version}: {read} CPU/GPU/DEFAULT kernels -> {written} entries in tf-{version}-{KERNELS_DATA}")
    version, producer = regenerate_release()
    print(f"TF {version}: GraphDef producer {producer} -> {data_file(RELEASE_DATA, version)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
