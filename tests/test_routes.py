"""Every simulating command takes the same inputs by the same routes with the same options
(issue 22, A6/A7/A8/D19/D22): a SavedModel signature's call on the TF-free route, the one
definition of the input-route options, rewrite on the cluster route, crosscheck verify/index on
every form of a dump directory, and a TF capture shared by flag sets that cannot change it."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest

from jitsim import cli
from jitsim.errors import HarvestError
from jitsim.registry import protos
from jitsim.graph.io import read_graphdef

ROOT = Path(__file__).resolve().parents[1]
MNIST = ROOT / "examples" / "mnist_softmax" / "before_clone_constants_for_better_clustering.pbtxt"
F = 1  # DT_FLOAT

SIMULATING = ("cluster", "rewrite", "explain", "whatif", "diff", "render", "report", ("crosscheck", "verify"))
ROUTE_OPTIONS = ("--tf", "--tf-version", "--tf-xla-flags", "--no-default-flags", "--fetch", "--feed", "--signature",
                 "--input-shape", "--input-stage", "--device", "--op-defs", "--cluster-number-start",
                 "--session-jit-level", "--session-cpu-global-jit")


def run(capsys, *argv):
    try:
        rc = cli.main([str(a) for a in argv])
    except SystemExit as e:  # a usage error: argparse's exit
        rc = e.code
    out, err = capsys.readouterr()
    return rc, out, err


# -- building blocks: a SavedModel written with jitsim's protos (no TensorFlow needed) ---------

def _add(gd, name, op, inputs=(), t=True):
    n = gd.node.add(name=name, op=op)
    n.input.extend(inputs)
    if t:
        n.attr["dtype" if op in ("Placeholder", "Const") else "T"].type = F
    return n


def _const(gd, name, value, dims=()):
    n = _add(gd, name, "Const")
    n.attr["value"].tensor.dtype = F
    n.attr["value"].tensor.float_val.append(value)
    for d in dims:
        n.attr["value"].tensor.tensor_shape.dim.add(size=d)
    return n


def _body(lib):
    """f(x) = sin(tanh(x @ w)) + cos(tanh(x @ w)): 6 compilable nodes."""
    f = lib.function.add()
    f.signature.name = "f"
    f.signature.input_arg.add(name="x", type=F)
    f.signature.output_arg.add(name="y", type=F)
    w = f.node_def.add(name="w", op="Const")
    w.attr["dtype"].type = F
    w.attr["value"].tensor.dtype = F
    w.attr["value"].tensor.float_val.append(1.0)
    for _ in range(2):
        w.attr["value"].tensor.tensor_shape.dim.add(size=4)
    for name, op, ins in (("m", "MatMul", ["x", "w:output:0"]), ("t", "Tanh", ["m:product:0"]),
                          ("s", "Sin", ["t:y:0"]), ("c", "Cos", ["t:y:0"]), ("a", "AddV2", ["s:y:0", "c:y:0"])):
        n = f.node_def.add(name=name, op=op)
        n.input.extend(ins)
        n.attr["T"].type = F
    f.ret["y"] = "a:z:0"


def saved_model(path: Path, *, with_call: bool) -> Path:
    """A SavedModel whose serving_default output names ``out:0``, an Identity of the result,
    so no call node is named by the signature; beside it the MetaGraph holds a computation the
    signature does not need (u0..u5 on constants k0..k5) and TF's init entry
    ``__saved_model_init_op``. ``with_call``: the result is a StatefulPartitionedCall of f (a
    TF2 export); else f's ops sit in the MetaGraph itself (a TF1 export)."""
    sm = protos.SavedModel()
    mg = sm.meta_graphs.add()
    mg.meta_info_def.tags.append("serve")
    gd = mg.graph_def
    x = _add(gd, "x", "Placeholder")
    for d in (2, 4):
        x.attr["shape"].shape.dim.add(size=d)
    if with_call:
        _body(gd.library)
        call = _add(gd, "call", "StatefulPartitionedCall", ["x"], t=False)
        call.attr["f"].func.name = "f"
        call.attr["Tin"].list.type.append(F)
        call.attr["Tout"].list.type.append(F)
        _add(gd, "out", "Identity", ["call:0"])
    else:
        _const(gd, "w", 1.0, (4, 4))
        for name, op, ins in (("m", "MatMul", ["x", "w"]), ("t", "Tanh", ["m"]), ("s", "Sin", ["t"]),
                              ("c", "Cos", ["t"]), ("y", "AddV2", ["s", "c"])):
            _add(gd, name, op, ins)
        _add(gd, "out", "Identity", ["y"])
    for i in range(6):
        _const(gd, f"k{i}", float(i))
    for name, op, ins in (("u0", "AddV2", ["k0", "k1"]), ("u1", "Mul", ["u0", "k2"]), ("u2", "Sub", ["u1", "k3"]),
                          ("u3", "Maximum", ["u2", "k4"]), ("u4", "Minimum", ["u3", "k5"]), ("u5", "Exp", ["u4"])):
        _add(gd, name, op, ins)
    _add(gd, "NoOp", "NoOp", ["^u5"], t=False)
    sig = mg.signature_def["serving_default"]
    sig.inputs["x"].name = "x:0"
    sig.outputs["output_0"].name = "out:0"
    mg.signature_def["__saved_model_init_op"].outputs["__saved_model_init_op"].name = "NoOp"
    path.mkdir(parents=True)
    (path / "saved_model.pb").write_bytes(sm.SerializeToString())
    return path


RAW = """
node { name: "x" op: "Placeholder" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "shape" value { shape { dim { size: 2 } dim { size: 4 } } } } }
node { name: "w" op: "Const" attr { key: "dtype" value { type: DT_FLOAT } }
  attr { key: "value" value { tensor { dtype: DT_FLOAT tensor_shape { dim { size: 4 } dim { size: 4 } } float_val: 1 } } } }
node { name: "m" op: "MatMul" input: "x" input: "w" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "t" op: "Tanh" input: "m" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "s" op: "Sin" input: "t" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "c" op: "Cos" input: "t" attr { key: "T" value { type: DT_FLOAT } } }
node { name: "y" op: "AddV2" input: "s" input: "c" attr { key: "T" value { type: DT_FLOAT } } }
"""


def _clustered(path) -> set[str]:
    return {n.name for n in read_graphdef(path).node if "_XlaCluster" in n.attr}


# -- A6: a SavedModel signature on the TF-free route -------------------------------------------

def test_signature_output_through_identity_clusters_the_call(tmp_path, capsys):
    """The signature's output is an Identity of the call's output: the signature computes f
    and nothing else, so the TF-free route clusters f's body (the _Arg, its 6 ops, the _Retval),
    never the MetaGraph's other nodes (u0..u5 would make a cluster of their own)."""
    sm = saved_model(tmp_path / "sm", with_call=True)
    rc, out, err = run(capsys, "cluster", sm, "--tf", "never", "--format", "json")
    assert rc == 0, err
    g = json.loads(out)["graphs"][0]
    ops = sorted(n["op"] for n in g["nodes"].values())
    assert ops == sorted(["_Arg", "Const", "MatMul", "Tanh", "Sin", "Cos", "AddV2", "_Retval"])
    assert [sorted(g["nodes"][m]["op"] for m in c["nodes"]) for c in g["clusters"]] == \
        [sorted(["Const", "MatMul", "Tanh", "Sin", "Cos", "AddV2"])]


def test_tf1_signature_is_pruned_to_its_outputs(tmp_path, capsys):
    """No call computes a TF1 signature: the MetaGraph is cut to what out:0 needs with x:0 fed,
    as TF's signature function (the MetaGraph wrapped and pruned) is: x becomes an _Arg, out an
    _Retval, and u0..u5, k0..k5 and NoOp are gone."""
    sm = saved_model(tmp_path / "sm", with_call=False)
    rc, out, err = run(capsys, "cluster", sm, "--tf", "never", "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    names = set(doc["graphs"][0]["nodes"])
    assert not names & ({f"u{i}" for i in range(6)} | {f"k{i}" for i in range(6)} | {"NoOp"})
    assert {"m", "t", "s", "c", "y"} <= names
    call = doc["route"]["call"]
    assert call["fetches"] == ["out:0"] and call["feeds"] == ["x:0"] and call["exact"]
    assert "signature" in call["chosen_by"]


@pytest.mark.parametrize("tf", ["never", "always"])
def test_init_op_is_not_a_signature_on_either_route(tmp_path, capsys, tf):
    """TF's __saved_model_init_op is what its loader runs, not a call: both routes refuse it,
    before any TF run, with the same one line naming the signatures there are."""
    sm = saved_model(tmp_path / "sm", with_call=True)
    rc, out, err = run(capsys, "cluster", sm, "--tf", tf, "--signature", "__saved_model_init_op")
    assert rc == 2 and out == ""
    assert err.count("\n") == 1 and "not a signature to call" in err and "signatures: serving_default" in err
    from jitsim.tfprocess.harvest import check_signature

    with pytest.raises(HarvestError, match="not a signature to call"):  # harvest and capture's check
        check_signature(sm, "__saved_model_init_op")


def test_signature_applies_to_saved_models_only(capsys):
    rc, _, err = run(capsys, "cluster", MNIST, "--signature", "serving_default")
    assert rc == 2 and "--signature names a SavedModel's signature" in err


# -- A7: one set of input-route options for every simulating command ----------------------------

def _subparsers(parser):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _command(parser, path):
    path = (path,) if isinstance(path, str) else path
    for word in path:
        parser = dict(_subparsers(parser))[word]
    return parser


def test_every_parser_refuses_option_prefixes(capsys):
    """argparse's prefix matching is off in every parser, subcommands' included: --tf is never
    taken for --tf-xla-flags, and a cut option is an error."""
    parser = cli.build_parser()
    todo, seen = [parser], 0
    while todo:
        p = todo.pop()
        assert p.allow_abbrev is False, p.prog
        seen += 1
        todo.extend(sub for _, sub in _subparsers(p))
    assert seen > 15
    rc, _, err = run(capsys, "cluster", MNIST, "--tf-xla", "--tf_xla_auto_jit=1")
    assert rc == 2 and "unrecognized arguments: --tf-xla" in err
    rc, _, err = run(capsys, "crosscheck", "verify", MNIST.parent, "--input-st", "before_mark_for_compilation")
    assert rc == 2 and "unrecognized arguments" in err


@pytest.mark.parametrize("command", SIMULATING, ids=lambda c: c if isinstance(c, str) else " ".join(c))
def test_every_simulating_command_takes_the_route_options(command):
    p = _command(cli.build_parser(), command)
    have = {s for a in p._actions for s in a.option_strings}
    assert set(ROUTE_OPTIONS) <= have, sorted(set(ROUTE_OPTIONS) - have)
    tf = next(a for a in p._actions if "--tf" in a.option_strings)
    assert tf.choices == ("auto", "always", "never") and tf.default == "auto"


def test_rewrite_takes_the_cluster_route(tmp_path, capsys):
    """A raw GraphDef (Placeholders, no devices) is not TF's pass input: cluster takes it by
    the TF-free route (placement on the CPU, Grappler simulated) and marks MatMul..AddV2 plus
    the weight constant; rewrite --until mark takes the same route, so it marks the same nodes
    (it used to run the passes on the raw graph, where nothing is placed: 0 marked)."""
    raw = tmp_path / "raw.pbtxt"
    raw.write_text(RAW)
    rc, _, err = run(capsys, "cluster", raw, "--tf", "never", "-o", tmp_path / "cluster.pbtxt")
    assert rc == 0, err
    rc, _, err = run(capsys, "rewrite", raw, "--tf", "never", "--until", "mark", "-o", tmp_path / "rewrite.pbtxt")
    assert rc == 0, err
    assert "input: GraphDef; approximate" in err
    marked = _clustered(tmp_path / "cluster.pbtxt")
    assert {"m", "t", "s", "c", "y"} <= marked
    assert _clustered(tmp_path / "rewrite.pbtxt") == marked


# -- A8 and D22: crosscheck on every form of a dump directory ---------------------------------------

@pytest.fixture
def harvest_dir(corpus, tmp_path):
    """A committed TF 2.21 harvest (dumps/, log.txt, index.json), copied with its mtimes."""
    h = tmp_path / "h"
    shutil.copytree(corpus.extract("complex_math"), h, copy_function=shutil.copy2)
    return h


def _plain_dump_dir(h: Path, dest: Path, drop=()) -> Path:
    """h's dump files alone (what TF_DUMP_GRAPH_PREFIX leaves), less the stages in ``drop``."""
    dest.mkdir()
    for f in (h / "dumps").iterdir():
        if not f.name.startswith(tuple(drop)):
            shutil.copy2(f, dest / f.name)
    shutil.copy2(h / "log.txt", dest / "log.txt")
    return dest


def test_index_verify_and_cluster_take_every_form_of_a_harvest(harvest_dir, capsys):
    docs = {}
    for form in (harvest_dir, harvest_dir / "dumps"):
        rc, out, err = run(capsys, "crosscheck", "index", form, "--format", "json")
        assert rc == 0, err
        docs[form] = json.loads(out)
        rc, out, err = run(capsys, "crosscheck", "verify", form, "--format", "json")
        assert rc == 0, err
        assert json.loads(out)["flags_origin"] == "recorded by the harvest"
    a, b = docs.values()
    assert a["graphs"] == b["graphs"] and a["tf_xla_flags"] == b["tf_xla_flags"] is not None
    recorded = json.loads((harvest_dir / "index.json").read_text())
    assert a["tf_xla_flags"] == recorded["tf_xla_flags"]


def test_index_of_a_plain_dump_dir_says_what_it_does_not_know(harvest_dir, tmp_path, capsys):
    plain = _plain_dump_dir(harvest_dir, tmp_path / "plain")
    rc, out, err = run(capsys, "crosscheck", "index", plain)
    assert rc == 0, err
    assert "None" not in out and "TF_XLA_FLAGS not recorded" in out
    rows = [line for line in out.splitlines() if ".pbtxt" in line]
    shown = [next(c.strip() for c in r.split("│") if ".pbtxt" in c) for r in rows]
    assert len(rows) >= 2 and len(set(shown)) == len(shown)  # no two rows read alike


def test_verify_table_is_a_rich_table_and_json(harvest_dir, capsys):
    rc, out, _ = run(capsys, "crosscheck", "verify", harvest_dir)
    assert rc == 0 and "┃ graph" in out and "graphs identical" in out
    rc, out, _ = run(capsys, "crosscheck", "verify", harvest_dir, "--format", "json")
    doc = json.loads(out)
    assert doc["truth_stage"] == "mark_for_compilation" and doc["notes"] == []


def test_verify_without_mark_dumps_checks_what_tf_wrote(harvest_dir, tmp_path, capsys):
    """TF writes mark_for_compilation dumps only with --tf_xla_clustering_debug. Without them,
    the clusters TF kept at encapsulate_subgraphs_before (after partial declustering) are the
    truth, and verify says that mark was not checked; the committed run agrees there too."""
    nomark = _plain_dump_dir(harvest_dir, tmp_path / "nomark", drop=("mark_for_compilation",))
    flags = json.loads((harvest_dir / "index.json").read_text())["tf_xla_flags"]  # a plain dir records none
    rc, out, err = run(capsys, "crosscheck", "verify", nomark, "--no-default-flags", "--tf-xla-flags", flags,
                       "--format", "json")
    assert rc == 0, err
    doc = json.loads(out)
    assert doc["truth_stage"] == "encapsulate_subgraphs_before"
    assert "mark_for_compilation was not checked" in doc["notes"][0]
    assert doc["summary"]["identical"] == doc["summary"]["graphs"] > 0
    assert any(c for g in doc["graphs"] for c in [g["diff"]["n_truth_clusters"]])  # clusters were compared
    rc, out, _ = run(capsys, "crosscheck", "verify", nomark, "--no-default-flags", "--tf-xla-flags", flags)
    assert rc == 0 and "note: TF wrote no mark_for_compilation dump" in out

    neither = _plain_dump_dir(harvest_dir, tmp_path / "neither",
                              drop=("mark_for_compilation", "encapsulate_subgraphs_before"))
    rc, out, err = run(capsys, "crosscheck", "verify", neither)
    assert rc == 2 and out == "" and err.count("\n") == 1
    assert "--tf_xla_clustering_debug" in err and "DIFFERENT" not in err


def test_verify_names_the_exact_settings_for_missing_input_dumps(harvest_dir, tmp_path, capsys):
    from jitsim.tfprocess.harvest import VMODULE

    only_later = _plain_dump_dir(harvest_dir, tmp_path / "later",
                                 drop=("before_clone_constants_for_better_clustering", "before_mark_for_compilation"))
    rc, _, err = run(capsys, "crosscheck", "verify", only_later)
    assert rc == 2 and f"TF_CPP_VMODULE={VMODULE}" in err and err.count("\n") == 1


def test_verify_takes_the_shared_options_with_their_meaning(harvest_dir, capsys):
    rc, _, err = run(capsys, "crosscheck", "verify", harvest_dir, "--signature", "serving_default")
    assert rc == 2 and "applies to a SavedModel, not to a TF dump directory" in err
    rc, _, err = run(capsys, "crosscheck", "verify", harvest_dir, "--input-stage", "graphdef")
    assert rc == 2 and "verify starts from TF's dumps" in err
    rc, out, err = run(capsys, "crosscheck", "verify", harvest_dir, "--input-stage", "before_mark_for_compilation",
                       "--device", "cpu", "--format", "json")
    assert rc == 0, err
    assert all("before_mark_for_compilation" in g["name"] for g in json.loads(out)["graphs"])


# -- D19: one capture for every flag set that cannot change it -----------------------------------

def test_capture_flags_keep_only_what_changes_the_pass_input():
    from jitsim.frontend.capture import capture_flags

    base, added = capture_flags("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
    assert not added
    # read from mark_for_compilation on, or the same auto-clustering state for TF's Grappler
    for same in ("--tf_xla_auto_jit=1", "--tf_xla_auto_jit=fusible --tf_xla_min_cluster_size=1",
                 "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit=false --tf_xla_max_cluster_size=3 "
                 "--tf_xla_clustering_fuel=5 --tf_xla_deterministic_cluster_names"):
        assert capture_flags(same)[0] == base, same
    # auto-clustering off: captured with it on (simulated with the user's flags: nothing clustered)
    assert capture_flags("--tf_xla_min_cluster_size=2") == (base, True)
    # flags TF reads before the dump stay: XLA devices, a single-GPU-only level
    assert "--tf_xla_enable_xla_devices" in capture_flags("--tf_xla_auto_jit=2 --tf_xla_enable_xla_devices")[0]
    assert capture_flags("--tf_xla_auto_jit=single-gpu(2)")[0] != base


@pytest.mark.tf
def test_cluster_with_other_clustering_flags_reuses_the_capture(tmp_path, monkeypatch, capsys):
    import subprocess
    import sys

    prog = tmp_path / "make.py"
    prog.write_text(
        "import tensorflow as tf\n"
        "class M(tf.Module):\n"
        "    @tf.function(input_signature=[tf.TensorSpec([2, 4], tf.float32)])\n"
        "    def __call__(self, x):\n"
        "        y = tf.tanh(x * 2.0 + 1.0)\n"
        "        return tf.reduce_sum(tf.sin(y) * tf.cos(y) + tf.exp(y))\n"
        f"tf.saved_model.save(M(), {str(tmp_path / 'sm')!r})\n")
    subprocess.run([sys.executable, str(prog)], check=True, capture_output=True)
    monkeypatch.setenv("JITSIM_CACHE", str(tmp_path / "cache"))
    # the capture's cost is a timing: in JSON only with --timings (0.0: served from the cache)
    rc, out, err = run(capsys, "cluster", tmp_path / "sm", "--format", "json", "--timings")
    assert rc == 0, err
    first = json.loads(out)
    assert first["route"]["capture_seconds"] > 0
    rc, out, err = run(capsys, "cluster", tmp_path / "sm", "--tf-xla-flags", "--tf_xla_min_cluster_size=100",
                       "--format", "json", "--timings")
    assert rc == 0, err
    again = json.loads(out)
    assert again["route"]["capture_seconds"] == 0.0
    assert first["graphs"][first["main_graph"]]["clusters"] and not again["graphs"][again["main_graph"]]["clusters"]
    assert len(list((tmp_path / "cache").iterdir())) == 1


def test_diff_of_two_kinds_gives_each_option_to_its_own_kind(tmp_path, capsys):
    """diff SAVEDMODEL GRAPHDEF --signature S: the signature states the SavedModel's call and is
    not refused for the GraphDef. Both compute sin(tanh(x @ w)) + cos(tanh(x @ w)) from x, so
    both make one cluster of the same ops."""
    sm = saved_model(tmp_path / "sm", with_call=False)
    raw = tmp_path / "raw.pbtxt"
    raw.write_text(RAW)
    rc, out, err = run(capsys, "diff", sm, raw, "--tf", "never", "--signature", "serving_default", "--format", "json")
    assert rc in (0, 1), err
    assert "Traceback" not in err and "--signature" not in err
    rc, _, err = run(capsys, "explain", raw, "m", "--tf", "never", "--signature", "serving_default")
    assert rc == 2 and "not to a GraphDef" in err
