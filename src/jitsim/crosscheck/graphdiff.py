"""Node-by-node and function-by-function comparison of two GraphDefs.

Used to check jitsim's rewritten graphs (after decluster / encapsulate / build-xla-ops)
against TF's dumps of the same stage. Node order in the file is ignored; everything
else is compared: op, device, data inputs in order, control inputs as a set (TF's dumps
sort them by name anyway) and attributes (minus ``ignore_attrs``). Library functions are
compared by signature, attributes, argument attributes, body nodes, ``ret`` and
``control_ret``.

>>> from jitsim.registry import protos
>>> a = protos.GraphDef(); _ = a.node.add(name="x", op="Neg", input=["y"])
>>> b = protos.GraphDef(); _ = b.node.add(name="x", op="Abs", input=["y"])
>>> diff_graphdefs(a, b).node_diffs
{'x': ['op: jitsim Neg, TF Abs']}

Attribute values are equal when their bytes are, or when they print the same in text format
(TF's dumps are text: a folded NaN constant reads back as ``nan`` whatever its sign bit was).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from google.protobuf import text_format


def _attr_text(av) -> str:
    t = text_format.MessageToString(av, as_one_line=True)
    return t if len(t) <= 120 else t[:117] + "..."


def _split_inputs(inputs) -> tuple[list[str], set[str]]:
    data = [i for i in inputs if not i.startswith("^")]
    ctrl = {i for i in inputs if i.startswith("^")}
    return data, ctrl


def _config_proto_equal(x: bytes, y: bytes) -> bool:
    """``config_proto`` attrs hold a serialized ConfigProto whose maps TF writes in hash
    order: compare the parsed messages, not the bytes."""
    from jitsim.registry import protos

    try:
        a, b = protos.ConfigProto(), protos.ConfigProto()
        a.ParseFromString(x)
        b.ParseFromString(y)
    except Exception:
        return x == y
    return a == b


def diff_attrs(a, b, ignore: Iterable[str] = ()) -> list[str]:
    ignore = set(ignore)
    out = []
    for k in sorted((set(a) | set(b)) - ignore):
        if k not in b:
            out.append(f"attr {k}: only in jitsim ({_attr_text(a[k])})")
        elif k not in a:
            out.append(f"attr {k}: only in TF ({_attr_text(b[k])})")
        elif a[k].SerializeToString(deterministic=True) != b[k].SerializeToString(deterministic=True):
            if k == "config_proto" and _config_proto_equal(a[k].s, b[k].s):
                continue
            if text_format.MessageToString(a[k]) == text_format.MessageToString(b[k]):
                # equal as TF's text dumps write them: a NaN's sign and payload (``nan``) are
                # not in a .pbtxt, so TF's NaN reads back as 0x7fc00000 whatever it was
                continue
            out.append(f"attr {k}: jitsim {_attr_text(a[k])}, TF {_attr_text(b[k])}")
    return out


def diff_nodes(a, b, ignore_attrs: Iterable[str] = ()) -> list[str]:
    """Differences between two NodeDefs of the same name (empty list: equal)."""
    out = []
    if a.op != b.op:
        out.append(f"op: jitsim {a.op}, TF {b.op}")
    if a.device != b.device:
        out.append(f"device: jitsim {a.device!r}, TF {b.device!r}")
    da, ca = _split_inputs(a.input)
    db, cb = _split_inputs(b.input)
    if da != db:
        out.append(f"data inputs: jitsim {da}, TF {db}")
    if ca != cb:
        out.append(f"control inputs: jitsim {sorted(ca)}, TF {sorted(cb)}")
    out += diff_attrs(a.attr, b.attr, ignore_attrs)
    return out


def _sig_text(sig) -> str:
    def args(lst):
        return ", ".join(f"{x.name}:{x.type or x.type_attr}" for x in lst)

    return f"({args(sig.input_arg)}) -> ({args(sig.output_arg)})"


def diff_functions(a, b, ignore_attrs: Iterable[str] = ()) -> list[str]:
    """Differences between two FunctionDefs of the same name."""
    out = []
    if _sig_text(a.signature) != _sig_text(b.signature):
        out.append(f"signature: jitsim {_sig_text(a.signature)}, TF {_sig_text(b.signature)}")
    if a.signature.is_stateful != b.signature.is_stateful:
        out.append(f"is_stateful: jitsim {a.signature.is_stateful}, TF {b.signature.is_stateful}")
    if list(a.signature.control_output) != list(b.signature.control_output):
        out.append(f"control_output: jitsim {list(a.signature.control_output)}, TF {list(b.signature.control_output)}")
    out += [f"function {x}" for x in diff_attrs(a.attr, b.attr, ignore_attrs)]
    for idx in sorted(set(a.arg_attr) | set(b.arg_attr)):
        aa = a.arg_attr[idx].attr if idx in a.arg_attr else {}
        bb = b.arg_attr[idx].attr if idx in b.arg_attr else {}
        out += [f"arg {idx} {x}" for x in diff_attrs(aa, bb, ignore_attrs)]
    an = {n.name: n for n in a.node_def}
    bn = {n.name: n for n in b.node_def}
    for name in sorted(set(bn) - set(an)):
        out.append(f"body node {name}: only in TF")
    for name in sorted(set(an) - set(bn)):
        out.append(f"body node {name}: only in jitsim")
    for name in sorted(set(an) & set(bn)):
        out += [f"body node {name}: {x}" for x in diff_nodes(an[name], bn[name], ignore_attrs)]
    if dict(a.ret) != dict(b.ret):
        out.append(f"ret: jitsim {dict(sorted(a.ret.items()))}, TF {dict(sorted(b.ret.items()))}")
    if dict(a.control_ret) != dict(b.control_ret):
        out.append(f"control_ret: jitsim {dict(sorted(a.control_ret.items()))}, TF {dict(sorted(b.control_ret.items()))}")
    return out


@dataclass
class GraphDiff:
    missing_nodes: list[str] = field(default_factory=list)  # in TF only
    extra_nodes: list[str] = field(default_factory=list)  # in jitsim only
    node_diffs: dict[str, list[str]] = field(default_factory=dict)
    missing_functions: list[str] = field(default_factory=list)
    extra_functions: list[str] = field(default_factory=list)
    function_diffs: dict[str, list[str]] = field(default_factory=dict)
    n_nodes: int = 0
    n_functions: int = 0

    @property
    def identical(self) -> bool:
        return not (self.missing_nodes or self.extra_nodes or self.node_diffs or self.missing_functions
                    or self.extra_functions or self.function_diffs)

    def summary(self) -> str:
        if self.identical:
            return f"identical ({self.n_nodes} nodes, {self.n_functions} functions)"
        parts = []
        for label, n in (("nodes only in TF", len(self.missing_nodes)), ("nodes only in jitsim", len(self.extra_nodes)),
                         ("nodes differ", len(self.node_diffs)), ("functions only in TF", len(self.missing_functions)),
                         ("functions only in jitsim", len(self.extra_functions)),
                         ("functions differ", len(self.function_diffs))):
            if n:
                parts.append(f"{n} {label}")
        return "DIFFERENT: " + ", ".join(parts)

    def format_text(self, limit: int = 50) -> str:
        lines = [self.summary()]

        def names(title, items):
            if items:
                lines.append(f"{title} ({len(items)}): " + ", ".join(items[:limit])
                             + (f", ... and {len(items) - limit} more" if len(items) > limit else ""))

        names("only in TF", self.missing_nodes)
        names("only in jitsim", self.extra_nodes)
        for i, (name, ds) in enumerate(sorted(self.node_diffs.items())):
            if i >= limit:
                lines.append(f"... and {len(self.node_diffs) - limit} more differing nodes")
                break
            lines.append(f"node {name}:")
            lines += [f"  {d}" for d in ds]
        names("functions only in TF", self.missing_functions)
        names("functions only in jitsim", self.extra_functions)
        for name, ds in sorted(self.function_diffs.items()):
            lines.append(f"function {name}:")
            lines += [f"  {d}" for d in ds[:limit]]
        return "\n".join(lines)

    def to_dict(self) -> dict:
        return {"identical": self.identical, "summary": self.summary(), "missing_nodes": self.missing_nodes,
                "extra_nodes": self.extra_nodes, "node_diffs": self.node_diffs,
                "missing_functions": self.missing_functions, "extra_functions": self.extra_functions,
                "function_diffs": self.function_diffs}


def diff_graphdefs(predicted, truth, ignore_attrs: Iterable[str] = (), compare_library: bool = True) -> GraphDiff:
    """Compare jitsim's GraphDef (``predicted``) with TF's (``truth``)."""
    ignore_attrs = tuple(ignore_attrs)
    pa = {n.name: n for n in predicted.node}
    tb = {n.name: n for n in truth.node}
    d = GraphDiff(n_nodes=len(tb))
    d.missing_nodes = sorted(set(tb) - set(pa))
    d.extra_nodes = sorted(set(pa) - set(tb))
    for name in sorted(set(pa) & set(tb)):
        ds = diff_nodes(pa[name], tb[name], ignore_attrs)
        if ds:
            d.node_diffs[name] = ds
    if compare_library:
        fa = {f.signature.name: f for f in predicted.library.function}
        fb = {f.signature.name: f for f in truth.library.function}
        d.n_functions = len(fb)
        d.missing_functions = sorted(set(fb) - set(fa))
        d.extra_functions = sorted(set(fa) - set(fb))
        for name in sorted(set(fa) & set(fb)):
            ds = diff_functions(fa[name], fb[name], ignore_attrs)
            if ds:
                d.function_diffs[name] = ds
    return d
