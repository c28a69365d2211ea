"""Writes the malformed and odd inputs of ``tests/bad_inputs/`` and their manifest.

    python3 tests/bad_inputs/generate.py [DEST]     # write DEST/cases/ and DEST/manifest.json
    python3 tests/bad_inputs/generate.py --check    # exit 1 if the checked-in manifest is out of date

Deterministic: the same files and manifest every run (no randomness, no clock). Each case is
one jitsim command line over one input (``{CASE}`` is the case's file, ``{OUT}`` an output
path in a fresh temporary directory) with its documented outcome: ``exit`` 0 (accepted;
``notes`` are the fragments of what jitsim says it assumed, on stderr) or 2 (refused: exactly
one ``jitsim: FILE: problem`` line holding every fragment of ``error``). Truncation and
garbling positions are chosen where protobuf itself refuses the prefix, so the outcome does not
depend on where a message boundary happens to fall. tests/test_bad_inputs.py runs them all.
"""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "src"))

from google.protobuf import text_format  # noqa: E402

from jitsim.registry import protos  # noqa: E402
from jitsim.graph.io import to_text  # noqa: E402

CPU = "/job:localhost/replica:0/task:0/device:CPU:0"
F32 = 1
NEVER = ["--tf", "never"]


def _node(gd, name, op, inputs=(), device="", **attrs):
    nd = gd.node.add(name=name, op=op, device=device)
    nd.input.extend(inputs)
    for k, v in attrs.items():
        if isinstance(v, tuple) and v[0] == "type":
            nd.attr[k].type = v[1]
        elif isinstance(v, tuple) and v[0] == "func":
            nd.attr[k].func.name = v[1]
        elif isinstance(v, tuple) and v[0] == "types":
            nd.attr[k].list.type.extend(v[1])
        elif isinstance(v, tuple) and v[0] == "ints":
            nd.attr[k].list.i.extend(v[1])
        elif isinstance(v, tuple) and v[0] == "shape":
            for d in v[1]:
                nd.attr[k].shape.dim.add(size=d)
        elif isinstance(v, tuple) and v[0] == "tensor":
            t = nd.attr[k].tensor
            t.dtype = F32
            for d in v[1]:
                t.tensor_shape.dim.add(size=d)
            t.float_val.append(1.0)
        elif isinstance(v, bool):
            nd.attr[k].b = v
        elif isinstance(v, int):
            nd.attr[k].i = v
        elif isinstance(v, str):
            nd.attr[k].s = v.encode()
    return nd


def valid_graph(device: str = "") -> "protos.GraphDef":
    """x @ w, relu, tanh, add: a small graph TF runs, with every required attr."""
    gd = protos.GraphDef()
    t = ("type", F32)
    _node(gd, "x", "Placeholder", device=device, dtype=t, shape=("shape", [2, 2]))
    _node(gd, "w", "Const", device=device, dtype=t, value=("tensor", [2, 2]))
    _node(gd, "m", "MatMul", ["x", "w"], device=device, T=t)
    _node(gd, "r", "Relu", ["m"], device=device, T=t)
    _node(gd, "h", "Tanh", ["r"], device=device, T=t)
    _node(gd, "s", "AddV2", ["h", "m"], device=device, T=t)
    _node(gd, "out", "Identity", ["s"], device=device, T=t)
    gd.versions.producer = 2160
    return gd


def _text(gd) -> bytes:
    return to_text(gd).encode()


def _bin(gd) -> bytes:
    return gd.SerializeToString(deterministic=True)


def _edit(fn):
    gd = valid_graph()
    fn(gd)
    return gd


def _binary_refused(data: bytes) -> bool:
    try:
        protos.GraphDef().ParseFromString(data)
    except Exception:
        return True
    return False


def _text_refused(data: bytes) -> bool:
    try:
        text_format.Parse(data.decode("utf-8"), protos.GraphDef())
    except Exception:
        return True
    return False


def _positions(data: bytes, refused, count: int) -> list[int]:
    """``count`` cut/garble positions spread over ``data`` where ``refused`` holds."""
    n = len(data)
    out = []
    for k in range(count):
        start = max(1, (n * (k + 1)) // (count + 1))
        for pos in list(range(start, n)) + list(range(1, start)):
            if pos not in out and refused(pos):
                out.append(pos)
                break
    return sorted(out)


def _saved_model(sigs: dict[str, str | None], fn_body=True, missing_fn: bool = False) -> bytes:
    """A binary SavedModel: one MetaGraph (tag serve) whose signatures call a function."""
    sm = protos.SavedModel()
    sm.saved_model_schema_version = 1
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.append("serve")
    gd = mg.graph_def
    f = gd.library.function.add()
    f.signature.name = "f_body"
    a = f.signature.input_arg.add(name="x", type=F32)
    o = f.signature.output_arg.add(name="y", type=F32)
    del a, o
    n = f.node_def.add(name="t", op="Tanh")
    n.input.append("x")
    n.attr["T"].type = F32
    f.ret["y"] = "t:y:0"
    _node(gd, "p", "Placeholder", dtype=("type", F32))
    _node(gd, "call", "StatefulPartitionedCall", ["p"], f=("func", "missing_fn" if missing_fn else "f_body"),
          Tin=("types", [F32]), Tout=("types", [F32]))
    for sig, out in sigs.items():
        sd = mg.signature_def[sig]
        if out:
            sd.outputs["y"].name = out
    return sm.SerializeToString(deterministic=True)


def _mixed() -> "protos.AttrValue":
    """A list attr holding two kinds of values (types and ints)."""
    a = protos.AttrValue()
    a.list.type.append(F32)
    a.list.i.append(1)
    return a


def _zip(members: dict[str, bytes]) -> bytes:
    """A zip archive of ``members``, byte-identical every run (fixed timestamps)."""
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in members.items():
            z.writestr(zipfile.ZipInfo(name, date_time=(2020, 1, 1, 0, 0, 0)), data)
    return buf.getvalue()


def cases() -> list[dict]:
    """Every case: ``id``, ``files`` (name -> bytes, or a directory as {name: bytes}), ``argv``,
    ``exit``, ``error`` / ``notes`` fragments, ``what``."""
    out: list[dict] = []

    def case(id_, what, data, argv=None, exit=2, error=(), notes=(), name=None, files=None):
        name = name or f"{id_}.pbtxt"
        out.append({"id": id_, "what": what, "files": files if files is not None else {name: data},
                    "input": name, "argv": argv or ["cluster", "{CASE}", *NEVER], "exit": exit,
                    "error": list(error), "notes": list(notes)})

    good = valid_graph()
    gtext, gbin = _text(good), _bin(good)

    # -- empty and not-a-graph inputs
    case("empty", "an empty file", b"", error=["empty.pbtxt", "is empty"])
    case("whitespace", "only whitespace", b"\n  \n\t\n", error=["whitespace.pbtxt", "is empty"])
    case("comment_only", "only a text-format comment", b"# nothing here\n", error=["no graph nodes"])
    case("empty_pb", "an empty binary file", b"", name="empty_pb.pb", error=["empty_pb.pb", "is empty"])
    case("library_only", "a function library and no nodes",
         _text(_edit(lambda g: (g.ClearField("node"), g.library.function.add().signature.__setattr__("name", "f")))),
         error=["no graph nodes", "function library"])
    case("versions_only", "a GraphDef with only versions", b"versions { producer: 2160 }\n", error=["no graph nodes"])
    case("dev_null", "/dev/null", None, files={}, argv=["cluster", "/dev/null", *NEVER], error=["/dev/null", "not a regular file"])
    case("dev_zero", "/dev/zero (would never end)", None, files={}, argv=["cluster", "/dev/zero", *NEVER],
         error=["/dev/zero", "not a regular file"])
    case("missing_file", "a path that does not exist", None, files={}, argv=["cluster", "{DIR}/nope.pbtxt", *NEVER],
         error=["nope.pbtxt", "no such file"])
    case("empty_dir", "a directory that is neither a SavedModel nor a dump directory", None,
         files={"empty_dir": {}}, argv=["cluster", "{DIR}/empty_dir", *NEVER], error=["empty_dir", "no TF dump files"])

    # -- what TF's importer refuses
    case("matmul_no_T", "MatMul without its required T attr",
         _text(_edit(lambda g: g.node[2].attr.pop("T"))), error=["node 'm' (MatMul)", "missing attr 'T'"])
    case("placeholder_no_dtype", "Placeholder without dtype",
         _text(_edit(lambda g: g.node[0].attr.pop("dtype"))), error=["node 'x' (Placeholder)", "'dtype'"])
    case("empty_name", "a node with an empty name",
         _text(_edit(lambda g: setattr(g.node[4], "name", ""))), error=["node #4", "empty name"])
    case("no_op", "a node without an op", b'node { name: "a" }\n', error=["node 'a'", "no op"])
    case("garbage_device", "a device string TF cannot parse",
         _text(_edit(lambda g: setattr(g.node[2], "device", "garbage!!"))), error=["node 'm'", "malformed device 'garbage!!'"])
    case("device_half", "a device string cut in the middle",
         _text(_edit(lambda g: setattr(g.node[2], "device", "/job:localhost/repl"))), error=["node 'm'", "malformed device"])
    case("missing_slot", "an input naming output 7 of a one-output op",
         _text(_edit(lambda g: g.node[3].input.__setitem__(0, "m:7"))),
         error=["node 'r' (Relu)", "'m:7'", "MatMul has 1 output"])
    case("negative_slot", "an input with a negative slot", _text(_edit(lambda g: g.node[3].input.__setitem__(0, "m:-1"))),
         error=["node 'r'", "names no node"])
    case("too_many_inputs", "Relu given two data inputs", _text(_edit(lambda g: g.node[3].input.append("x"))),
         error=["node 'r' (Relu)", "2 data inputs given", "takes 1"])
    case("addn_count_mismatch", "AddN with N=3 and two inputs",
         _text(_edit(lambda g: _node(g, "a3", "AddN", ["h", "m"], T=("type", F32), N=3))),
         error=["node 'a3' (AddN)", "takes 3"])
    case("negative_count", "AddN with N=-1",
         _text(_edit(lambda g: _node(g, "an", "AddN", ["h", "m"], T=("type", F32), N=-1))),
         error=["node 'an' (AddN)", "'N' = -1"])
    case("dangling_input", "an input naming no node", _text(_edit(lambda g: g.node[3].input.__setitem__(0, "nope"))),
         error=["node 'r'", "'nope'", "names no node"])
    case("dangling_control", "a control input naming no node", _text(_edit(lambda g: g.node[3].input.append("^ghost"))),
         error=["'^ghost'", "names no node"])
    case("duplicate_name", "two nodes with one name", _text(_edit(lambda g: setattr(g.node[4], "name", "r"))),
         error=["duplicate node name 'r'"])
    case("cycle", "a data cycle", _text(_edit(lambda g: g.node[2].input.__setitem__(0, "h"))),
         error=["cycle", "closes it"])
    case("self_loop", "a node feeding itself", _text(_edit(lambda g: g.node[3].input.__setitem__(0, "r"))),
         error=["cycle", "r -> r", "closes it"])
    case("control_cycle", "a cycle through a control edge", _text(_edit(lambda g: g.node[2].input.append("^out"))),
         error=["cycle", "control input of 'm'"])
    case("missing_function", "a call of a function the library does not hold (TF imports it too; the call gets a "
         "reason code)", _text(_edit(lambda g: _node(g, "c", "PartitionedCall", ["x"], f=("func", "not_there"),
                                                      Tin=("types", [F32]), Tout=("types", [F32])))), exit=0)
    case("bad_float", "a number out of range for its field", b'node { name: "a" op: "NoOp" attr { key: "i" value { i: 99999999999999999999999 } } }\n',
         error=["malformed text GraphDef"])
    case("unknown_field", "a field GraphDef does not have", b'node { name: "a" op: "NoOp" colour: "red" }\n',
         error=["malformed text GraphDef", "colour"])
    case("wrong_message_text", "an OpList (another message type) in text", b'op { name: "MyOp" output_arg { name: "y" type: DT_FLOAT } }\n',
         error=["malformed text GraphDef"])
    case("saved_model_as_graph", "a SavedModel proto given as a GraphDef file", _saved_model({"serving_default": "call:0"}),
         name="saved_model_as_graph.pb", error=["saved_model_as_graph.pb"])
    case("non_utf8", "Latin-1 bytes in a text file", b'node { name: "caf\xe9" op: "NoOp" }\n', error=["non_utf8.pbtxt", "not UTF-8"])
    case("nul_bytes", "NUL bytes in a text file", b'node { name: "a" op: "NoOp" }\n\x00\x00\x00', error=["nul_bytes.pbtxt"])
    case("utf16_no_bom", "UTF-16 text without a byte-order mark", gtext.decode().encode("utf-16-le"),
         error=["utf16_no_bom.pbtxt", "UTF-16"])
    case("binary_garbage", "random-looking bytes named .pb", bytes((i * 73 + 41) % 256 for i in range(300)),
         name="binary_garbage.pb", error=["binary_garbage.pb"])
    case("gzip_truncated", "a gzip file cut short", gzip.compress(gtext, mtime=0)[:60], name="gzip_truncated.pbtxt.gz",
         error=["gzip_truncated.pbtxt.gz", "truncated"])
    case("gzip_corrupt", "a gzip header over garbage", b"\x1f\x8b\x08\x00" + b"\x00" * 6 + b"garbage" * 10,
         name="gzip_corrupt.pb.gz", error=["gzip_corrupt.pb.gz", "gzip"])

    # -- odd inputs TF would take: accepted, with what was assumed said
    case("valid", "the reference graph", gtext, exit=0)
    case("utf8_bom", "UTF-8 with a byte-order mark", b"\xef\xbb\xbf" + gtext, exit=0)
    case("utf16_bom", "UTF-16 with a byte-order mark", gtext.decode().encode("utf-16"), exit=0, notes=["UTF-16"])
    case("gzip_text", "gzip-compressed text dump", gzip.compress(gtext, mtime=0), name="gzip_text.pbtxt.gz", exit=0)
    case("gzip_binary", "gzip-compressed binary GraphDef", gzip.compress(gbin, mtime=0), name="gzip_binary.pb.gz", exit=0)
    case("text_named_pb", "text format in a .pb file", gtext, name="text_named_pb.pb", exit=0, notes=["content is text"])
    case("binary_named_pbtxt", "binary format in a .pbtxt file", gbin, exit=0, notes=["content is binary"])
    case("binary_no_ext", "binary GraphDef without an extension", gbin, name="binary_no_ext", exit=0)
    case("text_no_ext", "text GraphDef without an extension", gtext, name="text_no_ext", exit=0)
    case("crlf", "Windows line ends", gtext.replace(b"\n", b"\r\n"), exit=0)
    case("huge_name", "a 100,000-character node name",
         _text(_edit(lambda g: (setattr(g.node[4], "name", "n" * 100_000), g.node[5].input.__setitem__(0, "n" * 100_000)))),
         exit=0)
    # graph_constructor.cc's IsValidNodeName takes ASCII letters, digits and . _ - / > only
    case("unicode_name", "non-ASCII node names (TF's importer refuses them)",
         _text(_edit(lambda g: (setattr(g.node[4], "name", "tanh_ü_λ"), g.node[5].input.__setitem__(0, "tanh_ü_λ")))),
         error=["'tanh_ü_λ'", "refuses the node name"])
    case("custom_op", "an op TF core does not register (a custom op)",
         _text(_edit(lambda g: _node(g, "tok", "MyLib>Tokenize", ["x"]))), exit=0)
    case("auto_jit_off", "flags that leave auto-clustering off", gtext, exit=0,
         argv=["cluster", "{CASE}", *NEVER, "--no-default-flags", "--tf-xla-flags", "--tf_xla_min_cluster_size=1"],
         notes=["auto-clustering off"])

    def chain(n):
        gd = protos.GraphDef()
        _node(gd, "n0", "_Arg", device=CPU, T=("type", F32), index=0)
        for i in range(1, n):
            _node(gd, f"n{i}", "Neg", [f"n{i - 1}"], device=CPU, T=("type", F32))
        _node(gd, "ret", "_Retval", [f"n{n - 1}"], device=CPU, T=("type", F32), index=0)
        return gd

    case("deep_chain", "a 10,000-node chain (no recursion limit may be hit)", gzip.compress(_bin(chain(10_000)), mtime=0),
         name="deep_chain.pb.gz", exit=0, argv=["cluster", "{CASE}", *NEVER, "--format", "json"])

    depth = 3000
    nested = (b'node { name: "a" op: "NoOp" attr { key: "k" value { ' + b'func { name: "f" attr { key: "k" value { ' * depth
              + b"} } } " * depth + b"} }\n")
    case("deep_nesting_text", f"attr values nested {depth} deep (text)", nested, error=["deep_nesting_text.pbtxt"])

    def nested_bin(levels):
        av = protos.AttrValue()
        inner = av
        for _ in range(levels):
            inner = inner.func.attr["k"]
        gd = protos.GraphDef()
        gd.node.add(name="a", op="NoOp").attr["k"].CopyFrom(av)
        return gd

    case("deep_nesting_binary_ok", "attr values nested 30 deep (binary; 90 message levels, under protobuf's 100)",
         _bin(nested_bin(30)), name="deep_nesting_binary_ok.pb", exit=0)
    case("deep_nesting_binary", "attr values nested 40 deep (binary; 120 message levels: TF refuses it too)",
         _bin(nested_bin(40)), name="deep_nesting_binary.pb", error=["deep_nesting_binary.pb", "nested too deeply"])

    def recursive(g):
        f = g.library.function.add()
        f.signature.name = "rec"
        f.signature.input_arg.add(name="x", type=F32)
        f.signature.output_arg.add(name="y", type=F32)
        n = f.node_def.add(name="again", op="rec")
        n.input.append("x")
        f.ret["y"] = "again:y:0"
        _node(g, "c", "rec", ["x"])

    def op_named_function(g):
        f = g.library.function.add()
        f.signature.name = "Neg"
        f.signature.input_arg.add(name="x", type=F32)
        f.signature.output_arg.add(name="y", type=F32)
        f.ret["y"] = "x"

    case("function_named_like_op", "a library function named like a TF op (Neg)", _text(_edit(op_named_function)),
         error=["'Neg'", "name of a TensorFlow op"])
    case("recursive_function", "a function that calls itself", _text(_edit(recursive)),
         error=["recursive_function.pbtxt", "'rec'", "calls itself"])

    # -- truncated and garbled files, at positions where protobuf itself refuses them
    for pos in _positions(gbin, lambda k: _binary_refused(gbin[:k]), 8):
        case(f"pb_cut_{pos}", f"binary GraphDef cut at byte {pos}", gbin[:pos], name=f"pb_cut_{pos}.pb",
             error=[f"pb_cut_{pos}.pb", "truncated or corrupt"])
    for pos in _positions(gtext, lambda k: _text_refused(gtext[:k]), 8):
        case(f"pbtxt_cut_{pos}", f"text GraphDef cut at byte {pos}", gtext[:pos], error=[f"pbtxt_cut_{pos}.pbtxt", "malformed"])

    def garble_bin(k):
        return gbin[:k] + bytes([gbin[k] ^ 0xFF]) + gbin[k + 1:]

    for pos in _positions(gbin[:-1], lambda k: _binary_refused(garble_bin(k)), 6):
        case(f"pb_flip_{pos}", f"binary GraphDef with byte {pos} inverted", garble_bin(pos), name=f"pb_flip_{pos}.pb",
             error=[f"pb_flip_{pos}.pb"])

    def garble_text(k):
        return gtext[:k] + b"}{" + gtext[k + 2:]

    for pos in _positions(gtext[:-2], lambda k: _text_refused(garble_text(k)), 6):
        case(f"pbtxt_garble_{pos}", f"text GraphDef with '}}{{' at byte {pos}", garble_text(pos), error=[f"pbtxt_garble_{pos}.pbtxt", "malformed"])

    # -- SavedModels
    sm_files = lambda data: {"saved_model.pb": data, "variables": {}}  # noqa: E731
    case("sm_garbage", "a SavedModel directory whose saved_model.pb is garbage", None,
         files={"sm_garbage": sm_files(b"\x0a\xff\xff\xff")}, argv=["cluster", "{DIR}/sm_garbage", *NEVER],
         error=["saved_model.pb", "not a valid binary SavedModel"])
    case("sm_no_serving_default", "a SavedModel without serving_default (only TF's init op and 'predict')", None,
         files={"sm_no_serving_default": sm_files(_saved_model({"__saved_model_init_op": None, "predict": "call:0"}))},
         argv=["cluster", "{DIR}/sm_no_serving_default", *NEVER],
         error=["sm_no_serving_default", "no 'serving_default'", "predict"])
    case("sm_only_init_op", "a SavedModel whose only signature is TF's init op", None,
         files={"sm_only_init_op": sm_files(_saved_model({"__saved_model_init_op": None}))},
         argv=["cluster", "{DIR}/sm_only_init_op", *NEVER], error=["sm_only_init_op", "no usable signature"])
    case("sm_missing_function", "a SavedModel whose signature calls a function it does not hold", None,
         files={"sm_missing_function": sm_files(_saved_model({"serving_default": "call:0"}, missing_fn=True))},
         argv=["cluster", "{DIR}/sm_missing_function", *NEVER], error=["sm_missing_function", "'missing_fn'"])
    case("sm_bad_signature", "a SavedModel asked for a signature it lacks", None,
         files={"sm_bad_signature": sm_files(_saved_model({"serving_default": "call:0"}))},
         argv=["cluster", "{DIR}/sm_bad_signature", *NEVER, "--signature", "nope"],
         error=["sm_bad_signature", "'nope'", "serving_default"])
    case("sm_valid", "a minimal valid SavedModel", None,
         files={"sm_valid": sm_files(_saved_model({"serving_default": "call:0"}))},
         argv=["cluster", "{DIR}/sm_valid", *NEVER], exit=0)


    # -- issue 22 B14: what TF 2.21's importer refuses (each checked against TF 2.21 itself:
    # tf.graph_util.import_graph_def, then a session run; see tests/test_faults_inputs.py)
    def lib_fn(g, name="f", nargs=1, T=None, ret="n:y:0", body_attrs=None):
        f = g.library.function.add()
        f.signature.name = name
        for i in range(nargs):
            f.signature.input_arg.add(name=f"a{i}", type=F32)
        f.signature.output_arg.add(name="o", type=F32)
        n = f.node_def.add(name="n", op="Neg", input=["a0"])
        if T is None:
            n.attr["T"].type = F32
        else:
            n.attr["T"].placeholder = T
        for k, v in (body_attrs or {}).items():
            n.attr[k].CopyFrom(v)
        f.ret["o"] = ret
        return g

    def call_f(g, inputs=("h",), fn="f"):
        _node(g, "c", fn, list(inputs))
        return g

    def av(**kw):
        a = protos.AttrValue()
        for k, v in kw.items():
            if k == "shapes":
                for dims in v:
                    sh = a.list.shape.add()
                    for d in dims:
                        sh.dim.add(size=d)
            else:
                setattr(a, k, v)
        return a

    case("fn_placeholder_called", "a called function's body node with attr $T, the function having no attr T",
         _text(_edit(lambda g: call_f(lib_fn(g, T="T")))), error=["function 'f'", "node 'n' (Neg)", "'T' is $T"])
    case("fn_placeholder_uncalled", "the same function nobody calls (TF never instantiates it)",
         _text(_edit(lambda g: lib_fn(g, T="T"))), exit=0)
    case("fn_dangling_ret_uncalled", "a function nobody calls whose ret names no node (TF's own pass tests have one)",
         _text(_edit(lambda g: lib_fn(g, ret="nope:y:0"))), exit=0)
    case("fn_enum_in_body", "a called function's body node with T = 999",
         _text(_edit(lambda g: call_f(lib_fn(g, body_attrs={"T": av(type=999)})))),
         error=["function 'f'", "node 'n' (Neg)", "'T' = 999"])
    case("fn_output_shapes_in_body", "a called function's body node with _output_shapes holding a -2 (TF's importer "
         "reads _output_shapes of graph nodes only)",
         _text(_edit(lambda g: call_f(lib_fn(g, body_attrs={"_output_shapes": av(shapes=[[2, -2]])})))), exit=0,
         argv=["cluster", "{CASE}", *NEVER, "--fetch", "out"])  # not the call: fetching a call by name is a separate problem

    def ensure_shape(g, dims):
        f = g.library.function[0]
        e = f.node_def.add(name="e", op="EnsureShape", input=["a0"])
        e.attr["T"].type = F32
        for d in dims:
            e.attr["shape"].shape.dim.add(size=d)
        return g

    case("fn_shape_attr_in_body", "a called function's body node whose shape attr has a -2",
         _text(_edit(lambda g: call_f(ensure_shape(lib_fn(g), [2, -2])))),
         error=["function 'f'", "node 'e' (EnsureShape)", "'shape'", "-2"])
    case("fn_type_list_in_body", "a called function's IdentityN whose T list holds 999",
         _text(_edit(lambda g: call_f(lib_fn(g)) and g.library.function[0].node_def.add(
             name="i", op="IdentityN", input=["a0"]).attr["T"].list.type.append(999))),
         error=["function 'f'", "node 'i' (IdentityN)", "999"])
    case("fn_enum_uncalled", "an uncalled function's body node with T = 999 (not instantiated: not checked)",
         _text(_edit(lambda g: lib_fn(g, body_attrs={"T": av(type=999)}))), exit=0)
    case("call_arity", "a call by name with two inputs to a one-input function",
         _text(_edit(lambda g: call_f(lib_fn(g), inputs=("h", "m")))), error=["node 'c' (f)", "2 data inputs", "takes 1"])
    case("spc_tin_arity", "StatefulPartitionedCall whose Tin lists 2 types for a one-input function",
         _text(_edit(lambda g: (lib_fn(g), _node(g, "c", "StatefulPartitionedCall", ["h", "m"], f=("func", "f"),
                                                 Tin=("types", [F32, F32]), Tout=("types", [F32]))))),
         error=["node 'c' (StatefulPartitionedCall)", "'Tin' lists 2 types", "1 input"])
    def if_node(g, then_inputs):
        lib_fn(g, name="t", nargs=then_inputs)
        lib_fn(g, name="e")
        p = _node(g, "p", "Const", dtype=("type", 10))
        p.attr["value"].tensor.dtype = 10
        p.attr["value"].tensor.bool_val.append(True)
        n = _node(g, "c", "If", ["p", "h"], Tcond=("type", 10), Tin=("types", [F32]), Tout=("types", [F32]),
                  then_branch=("func", "t"), else_branch=("func", "e"))
        n.attr["output_shapes"].list.SetInParent()
        return g

    def while_node(g, body_inputs):
        lib_fn(g, name="b", nargs=body_inputs)
        f = g.library.function.add()
        f.signature.name = "cnd"
        f.signature.input_arg.add(name="a0", type=F32)
        f.signature.output_arg.add(name="o", type=10)
        z = f.node_def.add(name="z", op="Const")
        z.attr["dtype"].type = 10
        z.attr["value"].tensor.dtype = 10
        z.attr["value"].tensor.bool_val.append(False)
        f.ret["o"] = "z:output:0"
        n = _node(g, "c", "While", ["h"], T=("types", [F32]), cond=("func", "cnd"), body=("func", "b"),
                  parallel_iterations=10)
        n.attr["output_shapes"].list.SetInParent()
        return g

    case("if_branch_arity", "an If whose then_branch takes 2 inputs where Tin lists 1 (TF fails when it runs it)",
         _text(_edit(lambda g: if_node(g, 2))), error=["node 'c' (If)", "'Tin' lists 1 type", "'t' (then_branch)"])
    case("while_body_arity", "a While whose body takes 2 inputs where T lists 1, never run (TF runs the graph)",
         _text(_edit(lambda g: while_node(g, 2))), exit=0, argv=["cluster", "{CASE}", *NEVER, "--fetch", "out"])
    def sig_fn(g, argtype=F32, default=None):
        lib_fn(g)
        f = g.library.function[0]
        f.signature.input_arg[0].type = argtype
        if default is not None:
            a = f.signature.attr.add(name="T", type="type")
            a.default_value.type = default
        return g

    case("fn_argtype_999", "a library function (uncalled) whose argument has type 999 (TF's Python importer "
         "converts every signature)", _text(_edit(lambda g: sig_fn(g, 999))),
         error=["library function 'f'", "argument 'a0'", "999"])
    case("fn_attr_default_999", "a called function whose attr T defaults to type 999",
         _text(_edit(lambda g: call_f(sig_fn(g, default=999)))), error=["library function 'f'", "'T (default)' = 999"])
    case("const_tensor_dtype_999", "a Const whose value tensor has dtype 999",
         _text(_edit(lambda g: setattr(g.node[1].attr["value"].tensor, "dtype", 999))),
         error=["node 'w' (Const)", "dtype 999"])
    # TF 2.21 aborts the process (SIGABRT) on this one at import
    case("const_tensor_dtype_mismatch", "a Const whose value is an int32 tensor while its dtype attr says float",
         _text(_edit(lambda g: setattr(g.node[1].attr["value"].tensor, "dtype", 3))),
         error=["node 'w' (Const)", "DT_INT32 tensor", "'dtype' is DT_FLOAT"])
    case("control_before_data", "a control input listed before a data input",
         _text(_edit(lambda g: g.node[4].input.__setitem__(slice(None), ["^m", "r"]))),
         error=["node 'h' (Tanh)", "data input 'r' comes after a control input"])
    case("type_not_allowed", "Relu with T = DT_STRING (not in the OpDef's allowed types)",
         _text(_edit(lambda g: setattr(g.node[3].attr["T"], "type", 7))), error=["node 'r' (Relu)", "DT_STRING", "allows"])
    case("string_not_allowed", "MaxPool with padding 'HALF' (not one of the OpDef's allowed strings)",
         _text(_edit(lambda g: _node(g, "mp", "MaxPool", ["x"], T=("type", F32), ksize=("ints", [1, 1, 1, 1]),
                                     strides=("ints", [1, 1, 1, 1]), padding="HALF"))),
         error=["node 'mp' (MaxPool)", "'padding'", "'HALF'"])
    case("below_minimum", "AddN with N = 0 and no inputs (the OpDef's minimum is 1)",
         _text(_edit(lambda g: _node(g, "a0", "AddN", [], T=("type", F32), N=0))), error=["node 'a0' (AddN)", "minimum 1"])
    case("min_consumer_future", "versions.min_consumer above TF 2.21's GraphDef version",
         _text(_edit(lambda g: setattr(g.versions, "min_consumer", 99999))), error=["min_consumer 99999", "2474"])
    case("bad_consumer_listed", "versions.bad_consumers listing TF 2.21's GraphDef version",
         _text(_edit(lambda g: (setattr(g.versions, "producer", 2474), g.versions.bad_consumers.append(2474)))),
         error=["bad_consumers", "2474"])
    case("bad_consumer_other", "versions.bad_consumers listing another version (TF accepts)",
         _text(_edit(lambda g: g.versions.bad_consumers.append(2100))), exit=0)
    case("undeclared_attr", "an attr Relu does not declare (TF's importer accepts it)",
         _text(_edit(lambda g: setattr(g.node[3].attr["bogus"], "i", 1))), exit=0)
    case("dup_fn_different", "two different functions named f",
         _text(_edit(lambda g: lib_fn(lib_fn(g), nargs=2))), error=["two different functions named 'f'"])
    case("dup_fn_identical", "the same function twice (TF keeps one)",
         _text(_edit(lambda g: lib_fn(lib_fn(g)))), exit=0, notes=["'f' appears twice"])
    case("grad_names_no_function", "a gradient whose gradient function is not in the library",
         _text(_edit(lambda g: lib_fn(g).library.gradient.add(function_name="f", gradient_func="nope"))),
         error=["gradient 'f' -> 'nope'", "'nope' is not in the library"])
    case("grad_of_no_function", "a gradient for a function the library lacks",
         _text(_edit(lambda g: lib_fn(g).library.gradient.add(function_name="ghost", gradient_func="f"))),
         error=["'ghost' is not in the library"])
    case("grad_two", "one function with two gradient functions",
         _text(_edit(lambda g: (lib_fn(lib_fn(g), name="g1"), lib_fn(g, name="g2"),
                                g.library.gradient.add(function_name="f", gradient_func="g1"),
                                g.library.gradient.add(function_name="f", gradient_func="g2")))),
         error=["'f' has two gradient functions"])
    case("dtype_999", "Placeholder dtype 999 (no such DataType)",
         _text(_edit(lambda g: setattr(g.node[0].attr["dtype"], "type", 999))), error=["node 'x' (Placeholder)", "999"])
    case("dtype_invalid", "Placeholder dtype DT_INVALID (0)",
         _bin(_edit(lambda g: setattr(g.node[0].attr["dtype"], "type", 0))), name="dtype_invalid.pb",
         error=["node 'x' (Placeholder)", "'dtype' = 0"])
    case("dtype_ref", "Relu with T = DT_FLOAT_REF (a reference type in an attr)",
         _text(_edit(lambda g: setattr(g.node[3].attr["T"], "type", 101))), error=["node 'r' (Relu)", "reference type"])
    case("list_mixed", "IdentityN whose T list mixes types and ints",
         _text(_edit(lambda g: _node(g, "idn", "IdentityN", ["h", "m"]).attr["T"].CopyFrom(_mixed()))), error=["node 'idn' (IdentityN)", "mixed kinds"])
    case("list_wrong_kind", "IdentityN whose T is a list of ints",
         _text(_edit(lambda g: _node(g, "idn", "IdentityN", ["h", "m"]).attr["T"].list.i.extend([1, 1]))),
         error=["node 'idn' (IdentityN)", "list of int values", "list(type)"])
    case("attr_wrong_kind", "MatMul transpose_a given a string",
         _text(_edit(lambda g: setattr(g.node[2].attr["transpose_a"], "s", b"yes"))),
         error=["node 'm' (MatMul)", "'transpose_a'", "bool"])
    case("graph_placeholder", "a graph node whose T is the placeholder $T (no function to bind it)",
         _text(_edit(lambda g: setattr(g.node[3].attr["T"], "placeholder", "T"))), error=["node 'r' (Relu)", "$T"])
    case("shape_dim_m3", "Placeholder shape with a dimension of -3",
         _text(_edit(lambda g: setattr(g.node[0].attr["shape"].shape.dim[0], "size", -3))),
         error=["node 'x' (Placeholder)", "'shape'", "-3"])
    case("shape_dim_m1", "Placeholder shape with -1 (unknown: fine)",
         _text(_edit(lambda g: setattr(g.node[0].attr["shape"].shape.dim[0], "size", -1))), exit=0)
    case("output_shapes_m2", "_output_shapes with a -2", _text(_edit(
        lambda g: g.node[3].attr["_output_shapes"].CopyFrom(av(shapes=[[2, -2]])))),
         error=["node 'r' (Relu)", "_output_shapes[0]", "-2"])
    case("const_negdim", "a Const whose value has dimension -3 (B15: said with node, op, attr)",
         _text(_edit(lambda g: setattr(g.node[1].attr["value"].tensor.tensor_shape.dim[0], "size", -3))),
         error=["node 'w' (Const)", "'value'", "negative (-3)"])
    case("const_unknown_dim", "a Const whose value has dimension -1",
         _text(_edit(lambda g: setattr(g.node[1].attr["value"].tensor.tensor_shape.dim[0], "size", -1))),
         error=["node 'w' (Const)", "unknown (-1)"])
    case("class_missing", "_class colocating a node with one the graph lacks",
         _text(_edit(lambda g: g.node[3].attr["_class"].list.s.append(b"loc:@nope"))),
         error=["node 'r' (Relu)", "'_class'", "'nope'"])
    case("class_present", "_class colocating with an existing node",
         _text(_edit(lambda g: g.node[3].attr["_class"].list.s.append(b"loc:@m"))), exit=0)
    for id_, bad in (("name_space", "a b"), ("name_underscore", "_r"), ("name_slash_first", "/r"),
                     ("name_angle_end", "r>"), ("name_caret", "r^")):
        case(id_, f"node name {bad!r} (TF's IsValidNodeName refuses it)",
             _text(_edit(lambda g, bad=bad: (setattr(g.node[3], "name", bad), g.node[4].input.__setitem__(0, bad)))),
             error=[repr(bad), "refuses the node name"])
    for id_, ok in (("name_dot_first", ".r"), ("name_angle", "a>b"), ("name_dash", "r-1"), ("name_double_slash", "a//b")):
        case(id_, f"node name {ok!r} (TF accepts it)",
             _text(_edit(lambda g, ok=ok: (setattr(g.node[3], "name", ok), g.node[4].input.__setitem__(0, ok)))), exit=0)

    # -- issue 22 A4: gzip members, trailing bytes, nesting
    half = gtext.index(b"node {", len(gtext) // 2)
    gz = lambda d: gzip.compress(d, mtime=0)  # noqa: E731
    case("gzip_two_members", "cat a.gz b.gz: the graph split over two gzip members", gz(gtext[:half]) + gz(gtext[half:]),
         name="gzip_two_members.pbtxt.gz", exit=0)
    case("gzip_empty_member", "a zero-length gzip member between two", gz(gtext[:half]) + gz(b"") + gz(gtext[half:]),
         name="gzip_empty_member.pbtxt.gz", exit=0)
    case("gzip_trailing_junk", "bytes that are not gzip after the gzip data", gz(gtext) + b"junk!",
         name="gzip_trailing_junk.pbtxt.gz", error=["5 bytes after the gzip data", "not gzip"])
    case("gzip_trailing_zeros", "zero padding after the gzip data", gz(gtext) + b"\0" * 512,
         name="gzip_trailing_zeros.pbtxt.gz", exit=0, notes=["512 zero bytes", "ignored"])
    case("gzip_member_cut", "the second member cut short", gz(gtext[:half]) + gz(gtext[half:])[:-12],
         name="gzip_member_cut.pbtxt.gz", error=["member 2", "truncated"])
    case("gzip_in_gzip", "a gzip file gzipped again", gz(gz(gtext)), name="gzip_in_gzip.pbtxt.gz", exit=0,
         notes=["decompressed twice"])
    case("gz_name_plain_text", "a plain text graph named .pbtxt.gz", gtext, name="gz_name_plain_text.pbtxt.gz", exit=0,
         notes=["named .gz but not gzip-compressed"])
    case("gzip_thrice", "gzip three levels deep", gz(gz(gz(gtext))), name="gzip_thrice.pb.gz", error=["nested more"])
    case("gzip_only_empty", "a gzip file of nothing", gz(b""), name="gzip_only_empty.pbtxt.gz", error=["no graph nodes"])
    case("sm_gzipped_pb", "a SavedModel whose saved_model.pb is gzip-compressed (read as jitsim reads any gzip)",
         None, files={"sm_gzipped_pb": {"saved_model.pb": gz(_saved_model({"serving_default": "call:0"})), "variables": {}}},
         argv=["cluster", "{DIR}/sm_gzipped_pb", *NEVER], exit=0)

    # -- issue 22 B15: say what the input is
    case("sm_holds_graphdef", "a GraphDef saved as saved_model.pb, the directory given", None,
         files={"sm_holds_graphdef": {"saved_model.pb": gbin}}, argv=["cluster", "{DIR}/sm_holds_graphdef", *NEVER],
         error=["holds a GraphDef, not a SavedModel", "saved_model.pb"])
    case("sm_file_holds_graphdef", "a GraphDef saved as saved_model.pb, the file given", None,
         files={"sm_file_holds_graphdef": {"saved_model.pb": gbin}},
         argv=["cluster", "{DIR}/sm_file_holds_graphdef/saved_model.pb", *NEVER], exit=0, notes=["read as a GraphDef"])
    sm2 = protos.SavedModel.FromString(_saved_model({"serving_default": "call:0"}))
    sm2.meta_graphs.add().CopyFrom(sm2.meta_graphs[0])
    sm2.meta_graphs[1].meta_info_def.tags[:] = ["train"]
    sm2.meta_graphs[0].meta_info_def.tags.append("gpu")
    case("sm_two_metagraphs", "a SavedModel with two MetaGraphs (tags serve+gpu, train)", None,
         files={"sm_two_metagraphs": {"saved_model.pb": sm2.SerializeToString(deterministic=True), "variables": {}}},
         argv=["cluster", "{DIR}/sm_two_metagraphs", *NEVER], exit=0, notes=["2 MetaGraphs", "[serve, gpu]"])
    import bz2
    import lzma

    case("xz_graph", "an xz-compressed GraphDef", lzma.compress(gbin), name="xz_graph.pb.xz",
         error=["xz-compressed", "xz -d"])
    case("bz2_graph", "a bzip2-compressed text GraphDef", bz2.compress(gtext), name="bz2_graph.pbtxt.bz2",
         error=["bzip2-compressed"])
    case("zip_of_graph", "a zip archive holding a graph file", _zip({"g.pbtxt": gtext}), name="zip_of_graph.pb",
         error=["a zip archive", "extract"])
    case("hdf5_model", "an HDF5 file (a Keras .h5 model)", b"\x89HDF\r\n\x1a\n" + bytes(504), name="hdf5_model.h5",
         error=["HDF5", "SavedModel or .keras"])
    case("saved_model_renamed", "a SavedModel's saved_model.pb under another name",
         _saved_model({"serving_default": "call:0"}), name="saved_model_renamed.pb",
         error=["holds a SavedModel", "directory"])
    case("keras_random_bytes", "random bytes named .keras", bytes(range(256)) * 4, name="keras_random_bytes.keras",
         error=["not a Keras archive", "not a zip"])
    case("keras_zip_no_config", "a zip file named .keras without Keras' config.json", _zip({"a.txt": b"x"}),
         name="keras_zip_no_config.keras", error=["not a Keras archive", "config.json"])
    case("keras_renamed", "a Keras archive named model.bin (recognised by content; tracing needs TensorFlow)",
         _zip({"config.json": b"{}", "metadata.json": b"{}"}), name="keras_renamed.bin",
         argv=["cluster", "{CASE}", *NEVER], error=["keras_renamed.bin", ".keras file"])

    # -- bad flags and option values
    flag_cases = [
        ("flag_unknown", ["--tf-xla-flags", "--tf_xla_bogus=1"], ["--tf_xla_bogus"]),
        ("flag_bad_value", ["--tf-xla-flags", "--tf_xla_auto_jit=banana"], ["banana"]),
        ("flag_auto_jit_yes", ["--tf-xla-flags", "--tf_xla_auto_jit=yes"], ["--tf_xla_auto_jit=yes", "not a jit level"]),
        ("flag_bool_yes", ["--tf-xla-flags", "--tf_xla_cpu_global_jit=yes"], ["=yes", "not a boolean"]),
        ("flag_no_form", ["--tf-xla-flags", "--notf_xla_cpu_global_jit"], ["--notf_xla_cpu_global_jit", "no --no form"]),
        ("flag_int_overflow", ["--tf-xla-flags", "--tf_xla_min_cluster_size=99999999999"], ["32-bit"]),
        ("flag_string_no_value", ["--tf-xla-flags", "--tf_xla_ops_to_cluster"], ["needs '=value'"]),
        ("flag_no_dashes", ["--tf-xla-flags", "tf_xla_auto_jit=2"], ["does not start with '-'"]),
        ("device_banana", ["--device", "banana"], ["--device 'banana'"]),
        ("device_bad_full", ["--device", "/job:x/nonsense"], ["--device"]),
        ("cluster_number_negative", ["--cluster-number-start", "-5"], ["--cluster-number-start -5"]),
        ("top_negative", ["--top", "-1"], ["--top -1"]),
    ]
    for id_, extra, frag in flag_cases:
        case(id_, f"cluster {' '.join(extra)}", gtext, argv=["cluster", "{CASE}", *NEVER, *extra], error=frag)
    case("whatif_misspelt_op", "whatif --exclude-op Matmul (the op is MatMul)", gtext,
         argv=["whatif", "{CASE}", *NEVER, "--exclude-op", "Matmul"], error=["'Matmul'", "did you mean MatMul"])
    case("whatif_unknown_force", "whatif --force-compilable of an op no node has", gtext,
         argv=["whatif", "{CASE}", *NEVER, "--force-compilable", "_FusedConv2D"], error=["'_FusedConv2D'", "change nothing"])
    case("usage_missing_value", "--tf-xla-flags without its value (a usage error, one line too)", gtext,
         argv=["cluster", "{CASE}", "--tf-xla-flags"], error=["--tf-xla-flags", "expected one argument"])
    case("usage_unknown_option", "an option jitsim does not have", gtext, argv=["cluster", "{CASE}", "--no-such-option"],
         error=["unrecognized arguments", "--no-such-option"])
    case("usage_bad_choice", "--tf with a value it does not take", gtext, argv=["cluster", "{CASE}", "--tf", "sometimes"],
         error=["--tf", "invalid choice"])
    case("render_bad_format", "render -o with a picture format it cannot write", gtext,
         argv=["render", "{CASE}", *NEVER, "-o", "{DIR}/x.jpg"], error=["x.jpg", "unknown picture format"])
    case("index_of_a_file", "crosscheck index given a file", gtext, argv=["crosscheck", "index", "{CASE}"],
         error=["index_of_a_file.pbtxt", "not a dump directory"])
    case("op_defs_missing", "--op-defs naming no file", gtext,
         argv=["cluster", "{CASE}", *NEVER, "--op-defs", "{DIR}/no_ops.json"], error=["no_ops.json", "no such file"])

    # -- bad output paths (checked before any work; nothing written)
    out_cases = [
        ("out_proc", ["cluster", "{CASE}", *NEVER, "-o", "/proc/x.pbtxt"], ["/proc/x.pbtxt", "cannot write"]),
        ("out_under_file", ["cluster", "{CASE}", *NEVER, "-o", "{CASE}/x.pbtxt"], ["x.pbtxt", "not a directory"]),
        ("out_no_dir", ["cluster", "{CASE}", *NEVER, "-o", "{DIR}/no/such/x.pbtxt"], ["does not exist"]),
        ("out_is_dir", ["rewrite", "{CASE}", "-o", "{DIR}"], ["is a directory"]),  # rewrite has no --tf
        ("out_render_proc", ["render", "{CASE}", *NEVER, "-o", "/proc/x.dot"], ["/proc/x.dot", "cannot write"]),
        ("out_rewrite_under_file", ["rewrite", "{CASE}", "-o", "{CASE}/x.pbtxt"], ["not a directory"]),
        ("out_report_file", ["report", "{CASE}", *NEVER, "-o", "{CASE}"], ["not a directory"]),
        ("out_index_proc", ["crosscheck", "index", "{DIR}", "-o", "/proc/i.json"], ["/proc/i.json", "cannot write"]),
    ]
    for id_, argv, frag in out_cases:
        case(id_, "output " + " ".join(argv[argv.index("-o"):]), gtext, argv=argv, error=frag)
    return out


def _write_tree(root: Path, files: dict) -> None:
    for name, content in files.items():
        if isinstance(content, dict):
            (root / name).mkdir(parents=True, exist_ok=True)
            _write_tree(root / name, content)
        elif content is not None:
            (root / name).write_bytes(content)


def write(dest: Path) -> list[dict]:
    """Write every case's files under ``dest/cases`` and ``dest/manifest.json``; returns the manifest."""
    cases_dir = dest / "cases"
    if cases_dir.exists():
        shutil.rmtree(cases_dir)
    cases_dir.mkdir(parents=True)
    manifest = []
    for c in cases():
        _write_tree(cases_dir, c["files"])
        manifest.append({k: v for k, v in c.items() if k != "files"} | {"files": sorted(_names(c["files"]))})
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False) + "\n")
    return manifest


def _names(files: dict, prefix: str = "") -> list[str]:
    out = []
    for name, content in files.items():
        if isinstance(content, dict):
            out.append(prefix + name + "/")
            out += _names(content, prefix + name + "/")
        elif content is not None:
            out.append(prefix + name)
    return out


if __name__ == "__main__":
    if "--check" in sys.argv:
        import tempfile

        with tempfile.TemporaryDirectory() as tmp:
            write(Path(tmp))
            same = (Path(tmp) / "manifest.json").read_text() == (HERE / "manifest.json").read_text()
        print("up to date" if same else "out of date: run python3 tests/bad_inputs/generate.py")
        sys.exit(0 if same else 1)
    dest = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE
    m = write(dest)
    print(f"{len(m)} cases written to {dest / 'cases'} (not checked in: tests/test_bad_inputs.py writes them afresh)")
