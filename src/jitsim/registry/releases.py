"""What two TensorFlow releases say differently, op by op and rule by rule.

A release is its shipped data (``data/tf-<release>-*``: op definitions, XLA kernels with their
type constraints, compile-time-constant inputs, metadata ops, ``OpIsSlow``'s list,
``--tf_xla_ops_to_cluster``'s categories, the CPU/GPU kernel table) plus the few rules that change
by release (:data:`RULES`). Two releases can only cluster a graph differently through an op of
the graph whose data differ, or a rule the graph's route reads: :func:`op_differences` says
which data differ for an op, :func:`graph_differences` for every op of a graph (its functions
included), and :func:`rule_differences` which rules. What a release's Python builds differently
for the same call is another pass input, not a pass: :data:`GRAPH_BUILDS` lists those changes and
:func:`graph_build_differences` which of them a graph an older release built shows. Used when a graph's producer does not say
which release wrote it (2.21 and 2.22 both write 2474: :mod:`jitsim.registry.versions`) and by
the upgrade report (``jitsim diff G --tf-version 2.21 --tf-version 2.22``).

>>> op_differences("AddV2", "2.21", "2.21")
[]
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache

from jitsim.registry import check_tf_version, data_file, op_defs, read_data, slow_ops, xla_kernels

JIT_DEVICES = ("XLA_CPU_JIT", "XLA_GPU_JIT")


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in release.split("."))


@dataclass(frozen=True)
class Rule:
    """A rule of TF's code that changed between releases: ``name``, the first release with the new
    behaviour, what it did before and does since, and where it applies (``route``: ``no-tf`` for a
    rewrite jitsim simulates before the pass input, ``all`` for a pass)."""

    name: str
    since: str
    before: str
    after: str
    route: str

    def applies(self, release: str) -> bool:
        return _release_key(release) >= _release_key(self.since)


# The rules that switch by release, the one place they are listed (docs/recipes.md, "Adding a
# TensorFlow release"): code reads a rule with rule_on(NAME, release), never by comparing versions.
RULES = (
    Rule("remapper_flag_split", "2.22",
         "Grappler's remapper splits the raw TF_XLA_FLAGS on commas only when it looks for "
         "--tf_xla_cpu_global_jit (so it sees the flag only when it is the whole variable)",
         "the remapper splits TF_XLA_FLAGS on commas, spaces and tabs: with auto-clustering on, "
         "--tf_xla_cpu_global_jit among the flags turns its CPU fusions (_FusedMatMul, _FusedConv2D, "
         "_MklSwish...) off", "no-tf"),
)
_RULES = {r.name: r for r in RULES}


@dataclass(frozen=True)
class GraphBuild:
    """A change in what a release's Python builds for the same call: the graph TF's passes get is
    another one, whatever the passes do. ``api``: the Python API; ``before``/``after``: what the
    releases before ``since`` and from ``since`` build. A graph built by an older release shows it
    by its nodes (:meth:`nodes_in`): op types ``ops`` (``dtype``: of that ``T``; ``scope``: under a
    name-scope component starting with it; ``gradient``: in a graph that holds a gradient, under a
    ``gradients``/``gradient_tape`` scope when ``gradient == "scope"``)."""

    name: str
    since: str
    api: str
    before: str
    after: str
    ops: tuple[str, ...]
    scope: str | None = None
    dtype: int | None = None  # a DataType enum value (DT_DOUBLE = 2)
    gradient: str | None = None  # None, "graph" (the graph holds a gradient) or "scope" (the node is in one)
    part: tuple[str, ...] = ()  # a component of the node's name starts with one of these
    fed_by: tuple[str, ...] = ()  # the op of the node's first input is one of these
    unless_scope_has: tuple[str, ...] = ()  # no node of these ops in the same scope
    certain: bool = True  # the nodes show the older build (False: both builds hold them; the API differs)

    def applies(self, release: str) -> bool:
        return _release_key(release) >= _release_key(self.since)

    def nodes_in(self, nodes) -> list[str]:
        """The names of ``nodes`` (objects with ``name``, ``op``, ``attr``) that show an older
        release built this API there."""
        nodes = list(nodes)
        if self.gradient == "graph" and not any(_in_gradient(n.name) for n in nodes):
            return []
        op_of = {n.name: n.op for n in nodes} if self.fed_by else {}
        out = []
        for n in nodes:
            if n.op not in self.ops:
                continue
            if self.dtype is not None and ("T" not in n.attr or n.attr["T"].type != self.dtype):
                continue
            if self.scope is not None and not any(p.startswith(self.scope) for p in n.name.split("/")[:-1]):
                continue
            if self.gradient == "scope" and not _in_gradient(n.name):
                continue
            if self.part and not any(p.startswith(self.part) for p in n.name.split("/")):
                continue
            if self.fed_by and op_of.get(_first_input(n)) not in self.fed_by:
                continue
            out.append(n.name)
        if self.unless_scope_has and out:
            marked = {self._scope_of(n.name) for n in nodes if n.op in self.unless_scope_has}
            out = [n for n in out if self._scope_of(n) not in marked]
        return out

    def _scope_of(self, name: str) -> str | None:
        """The name-scope prefix of ``name`` up to its component that starts with ``scope`` (without
        the prefix a Grappler optimizer gives the nodes it makes)."""
        parts = name.split("/")
        if parts[0] in _GRAPPLER_PREFIXES:
            parts = parts[1:]
        for i, p in enumerate(parts[:-1]):
            if self.scope and p.startswith(self.scope):
                return "/".join(parts[:i + 1])
        return None


# the first name component of nodes Grappler's optimizers make
_GRAPPLER_PREFIXES = ("ConstantFolding", "ArithmeticOptimizer", "DependencyOptimizer", "LayoutOptimizer",
                      "LoopOptimizer", "Remapper", "CommonSubexpressionElimination")


def _first_input(node) -> str | None:
    """The node name of a NodeDef's (or a TfNode's) first input."""
    inputs = node.input if hasattr(node, "input") else node.nodedef.input
    return inputs[0].lstrip("^").split(":")[0] if inputs else None


def _in_gradient(name: str) -> bool:
    return any(p.startswith(("gradients", "gradient_tape")) for p in name.split("/")[:-1])


_DOUBLE = 2
# What TF 2.22's Python builds differently for the same call, found by diffing the wheels' ops
# modules (nn_impl, nn_grad, math_ops, math_grad, clip_ops, linalg_ops, array_ops) and checked on
# fixtures/versions/python_2_22 (one function each, harvested under both releases). Other modules
# and Keras were not reviewed: a program rebuilt under a new release can differ elsewhere too.
GRAPH_BUILDS = (
    GraphBuild("moments_variance", "2.22", "tf.nn.moments",
               "the variance as mean(SquaredDifference(x, mean))",
               "the variance as max(mean(x²) - mean(x)², 0) (Square, Mean, Sub, Maximum)",
               ("SquaredDifference",), scope="moments"),
    GraphBuild("elu_gradient", "2.22", "the gradient of tf.nn.elu", "EluGrad",
               "grad * exp(min(x, 0)) (Minimum, Exp, Mul)", ("EluGrad",)),
    GraphBuild("selu_gradient", "2.22", "the gradient of tf.nn.selu", "SeluGrad",
               "element-wise ops (Less, Minimum, Exp, SelectV2, IsNan, Mul)", ("SeluGrad",)),
    GraphBuild("softplus_gradient", "2.22", "the gradient of tf.nn.softplus", "grad * sigmoid(x) (Sigmoid, Mul)",
               "SoftplusGrad", ("Sigmoid",), gradient="scope"),
    GraphBuild("softmax_gradient_f64", "2.22", "the float64 gradient of tf.nn.softmax and tf.nn.log_softmax",
               "(g - sum(g * softmax)) * softmax", "a correction of the dominant class (ArgMax, OneHot, Sum, Sub)",
               ("Softmax", "LogSoftmax"), dtype=_DOUBLE, gradient="graph", certain=False),
    GraphBuild("tanh_gradient_f64", "2.22", "the float64 gradient of tf.math.tanh", "TanhGrad",
               "4·exp(-2|x|) / (1 + exp(-2|x|))² (Abs, Exp, Square, RealDiv)", ("TanhGrad",), dtype=_DOUBLE),
    GraphBuild("swish_gradient_f64", "2.22", "the float64 gradient of tf.nn.silu/swish",
               "sigmoid(x) * (1 + x * (1 - sigmoid(x)))", "with the smaller sigmoid tail (GreaterEqual, SelectV2)",
               ("Sigmoid",), dtype=_DOUBLE, gradient="graph", certain=False),
    GraphBuild("euclidean_norm", "2.22", "tf.norm (euclidean)", "sqrt(sum(x·x))",
               "a safe sqrt: where(sum == 0, 0, sqrt(max(sum, tiny))) (Maximum, Equal, Select)",
               ("Sqrt",), scope="norm", fed_by=("Sum",)),
    GraphBuild("boolean_mask_static", "2.22", "tf.boolean_mask",
               "a reshape to a computed shape (Shape, Prod, ConcatV2)",
               "a reshape to the static shape when the input's shape is known (seen where Grappler folded "
               "the old shape to constants: their names change)", ("Const",),
               scope="boolean_mask", part=("concat", "Prod"), unless_scope_has=("ConcatV2",)),
    GraphBuild("clip_by_norm_inf", "2.22", "tf.clip_by_norm with a tensor clip_norm", "no infinity check",
               "an infinite clip_norm leaves the values as they are (IsInf, Select)", ("Mul", "Maximum"),
               scope="clip_by_norm", unless_scope_has=("IsInf",)),
    GraphBuild("clip_by_global_norm_inf", "2.22", "tf.clip_by_global_norm with a tensor clip_norm",
               "no infinity check", "an infinite clip_norm scales by 1 (IsInf, Select, RealDiv)",
               ("Reciprocal", "RealDiv", "Minimum"), scope="clip_by_global_norm", unless_scope_has=("IsInf",)),
)


def graph_build_differences(nodes, a: str, b: str) -> list[tuple[GraphBuild, list[str]]]:
    """The entries of :data:`GRAPH_BUILDS` that differ between releases ``a`` and ``b`` and that
    ``nodes`` (a graph built by the older of the two) shows, each with the nodes that show it."""
    old = min(a, b, key=_release_key)
    nodes = list(nodes)
    out = []
    for gb in GRAPH_BUILDS:
        if gb.applies(a) == gb.applies(b) or gb.applies(old):
            continue
        hit = gb.nodes_in(nodes)
        if hit:
            out.append((gb, hit))
    return out


def rule_on(name: str, release: str) -> bool:
    """Whether release ``release`` has the new behaviour of rule ``name`` (:data:`RULES`)."""
    return _RULES[name].applies(release)


def rule_differences(a: str, b: str, route: str | None = None) -> list[Rule]:
    """The rules whose behaviour differs between releases ``a`` and ``b`` (for ``route``: those of
    that route and of every route)."""
    return [r for r in RULES if r.applies(a) != r.applies(b) and (route is None or r.route in (route, "all"))]


def _kernel_text(kernels) -> list[bytes]:
    return sorted(k.SerializeToString(deterministic=True) for k in kernels or ())


def op_differences(op: str, a: str, b: str) -> list[str]:
    """What jitsim's data say differently of ``op`` in releases ``a`` and ``b``, one phrase each
    (empty: the same definition, kernels, constant inputs, slow-op entry and category)."""
    from jitsim.registry.const_inputs import const_input_table, metadata_ops

    out = []
    da, db = op_defs(a).get(op), op_defs(b).get(op)
    if (da is None) != (db is None):
        out.append(f"registered in TF {a if da is not None else b} only")
    elif da is not None and da.SerializeToString(deterministic=True) != db.SerializeToString(deterministic=True):
        out.append("its OpDef changed (arguments or attributes)")
    for dev in JIT_DEVICES:
        ka, kb = xla_kernels(dev, a).get(op), xla_kernels(dev, b).get(op)
        if bool(ka) != bool(kb):
            out.append(f"an {dev} kernel in TF {a if ka else b} only")
        elif ka and _kernel_text(ka) != _kernel_text(kb):
            out.append(f"its {dev} kernel's type constraints changed")
    if (op in slow_ops(a)) != (op in slow_ops(b)):
        out.append(f"OpIsSlow lists it in TF {a if op in slow_ops(a) else b} only")
    ca, cb = const_input_table(a).get(op), const_input_table(b).get(op)
    if ca != cb:
        out.append(f"compile-time-constant inputs {list(ca or ())} in TF {a}, {list(cb or ())} in TF {b}")
    if (op in metadata_ops(a)) != (op in metadata_ops(b)):
        out.append(f"a metadata op in TF {a if op in metadata_ops(a) else b} only")
    cat_a = sorted(c for c, ops in _categories(a).items() if op in ops)
    cat_b = sorted(c for c, ops in _categories(b).items() if op in ops)
    if cat_a != cat_b:
        out.append(f"--tf_xla_ops_to_cluster category {'/'.join(cat_a) or 'none'} in TF {a}, "
                   f"{'/'.join(cat_b) or 'none'} in TF {b}")
    return out


@lru_cache(maxsize=None)
def _categories(release: str) -> dict[str, list[str]]:
    return json.loads(read_data("ops-to-cluster.json", release))["categories"]


def graph_ops(graphdef) -> set[str]:
    """The op types of a GraphDef's nodes and of its library functions' bodies."""
    ops = {n.op for n in graphdef.node}
    for f in graphdef.library.function:
        ops.update(n.op for n in f.node_def)
    return ops


def changes_file(a: str, b: str) -> str:
    """The shipped list of the ops whose data differ between two releases that write the same
    producer (``data/tf-<b>-changes-from-<a>.json``, written by ``python -m jitsim.registry.releases
    A B --write``): reading it costs nothing, where comparing every op loads both releases' data."""
    lo, hi = sorted((a, b), key=_release_key)
    return f"changes-from-{lo}.json", hi


@lru_cache(maxsize=None)
def changed_ops(a: str, b: str) -> frozenset[str]:
    """The ops whose data differ between releases ``a`` and ``b``: from the shipped list when there
    is one, else by comparing every op (:func:`op_differences`)."""
    name, release = changes_file(a, b)
    try:
        return frozenset(json.loads(read_data(name, release))["ops_changed"])
    except FileNotFoundError:
        return frozenset(op for op in set(op_defs(a)) | set(op_defs(b)) if op_differences(op, a, b))


def graph_differences(graphdef, a: str, b: str) -> dict[str, list[str]]:
    """``op -> what differs`` for the ops of ``graphdef`` whose data differ between ``a`` and ``b``
    (only those ops are compared: a graph without one costs a set intersection)."""
    out = {}
    for op in sorted(graph_ops(graphdef) & changed_ops(a, b)):
        d = op_differences(op, a, b)
        if d:
            out[op] = d
    return out


def release_report(a: str, b: str) -> dict:
    """What changed from release ``a`` to ``b`` in jitsim's data and rules: per op the phrases of
    :func:`op_differences` (every op either release registers), the rules of :data:`RULES`
    between them, and their producers."""
    from jitsim.registry.versions import PRODUCERS

    ops = sorted(set(op_defs(a)) | set(op_defs(b)))
    changed = {op: d for op in ops if (d := op_differences(op, a, b))}
    return {"from": a, "to": b, "producers": [PRODUCERS[a], PRODUCERS[b]], "ops_changed": changed,
            "rules": [{"name": r.name, "since": r.since, "before": r.before, "after": r.after, "route": r.route}
                      for r in rule_differences(a, b)]}


def main(argv=None) -> int:
    """``python -m jitsim.registry.releases A B``: what changed from release A to B (after the regen
    of a new release: docs/recipes.md, "Adding a TensorFlow release")."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__.splitlines()[0])
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--write", action="store_true", help="ship the list of changed ops (data/tf-<B>-changes-from-<A>.json)")
    args = ap.parse_args(argv)
    r = release_report(check_tf_version(args.a), check_tf_version(args.b))
    if args.write:
        name, release = changes_file(r["from"], r["to"])
        path = data_file(name, release)
        path.write_text(json.dumps({"from": r["from"], "to": r["to"], "ops_changed": r["ops_changed"],
                                    "rules": [x["name"] for x in r["rules"]]}, indent=1, sort_keys=True) + "\n")
        print(f"wrote {path}")
    if args.json:
        print(json.dumps(r, indent=1))
        return 0
    print(f"TF {r['from']} -> TF {r['to']} (GraphDef producers {r['producers'][0]} -> {r['producers'][1]}"
          + (": the same, so a graph cannot say which of the two wrote it" if r["producers"][0] == r["producers"][1]
             else "") + ")")
    print(f"{len(r['ops_changed'])} ops whose data changed:")
    for op, d in r["ops_changed"].items():
        print(f"  {op}: {'; '.join(d)}")
    print(f"{len(r['rules'])} rules that changed:" if r["rules"] else "no rule changed")
    for rule in r["rules"]:
        print(f"  {rule['name']} (since TF {rule['since']}, route {rule['route']}): {rule['after']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
