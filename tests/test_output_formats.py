"""What every command prints: ``--format text|json`` and ``--timings`` (one definition each),
JSON that is byte-identical from run to run and whose ``schema`` docs/json.md documents, the one
``wrote PATH (...)`` line of every ``-o``, ``explain``'s grouped refused merges and short lines,
``diff`` pairing names across a function-inlining prefix, and messages that name the user's input,
never jitsim's capture cache (issue 22, D18-D21).

The graphs are the shipped MNIST dump (``examples/mnist_softmax``) and small hand-built ones
whose clustering each test derives in its docstring; the TF tests (marked ``tf``) build one tiny
Keras model, kept as a ``.keras`` file and as a SavedModel.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from jitsim.cli import TIMING_KEYS, build_parser
from jitsim.explain.explanation import LINE_LIMIT, fit
from jitsim.graph import save
from graphs import AUTO, arg, graph, op, ret

ROOT = Path(__file__).resolve().parents[1]
MNIST = ROOT / "examples" / "mnist_softmax"
DUMP = MNIST / "before_clone_constants_for_better_clustering.pbtxt"
TRUTH = MNIST / "mark_for_compilation.pbtxt"
JSON_DOC = (ROOT / "docs" / "json.md").read_text()
BEFORE_CLONE = "before_clone_constants_for_better_clustering"


def run(*args, seed: str = "0", env=None, cwd=None):
    """``python -m jitsim ARGS`` in a fresh process (``seed``: PYTHONHASHSEED, so that an order
    taken from a set or dict of strings would show as a byte difference)."""
    e = {**os.environ, "PYTHONHASHSEED": seed, **(env or {})}
    return subprocess.run([sys.executable, "-m", "jitsim", *map(str, args)], capture_output=True, env=e,
                          cwd=cwd)


def leaf_commands() -> dict[str, object]:
    """'cluster', 'crosscheck index', ... -> its parser, from the real parser."""
    out = {}
    top = build_parser()
    for name, p in next(a for a in top._actions if a.__class__.__name__ == "_SubParsersAction").choices.items():
        subs = [a for a in p._actions if a.__class__.__name__ == "_SubParsersAction"]
        if subs:
            for sub, sp in subs[0].choices.items():
                out[f"{name} {sub}"] = sp
        else:
            out[name] = p
    return out


def schema_section(schema: str) -> str:
    """docs/json.md's section of ``schema`` (its ``## `schema` `` heading to the next)."""
    m = re.search(rf"^## `{re.escape(schema)}`\n(.*?)(?=^## |\Z)", JSON_DOC, re.S | re.M)
    assert m, f"docs/json.md has no section for {schema}"
    return m.group(1)


def assert_documented(doc: dict) -> None:
    """The object has a schema, docs/json.md has its section, and the section names every
    top-level field (as `field`)."""
    schema = doc.get("schema")
    assert isinstance(schema, str) and re.fullmatch(r"jitsim\.[a-z-]+/\d+", schema), schema
    section = schema_section(schema)
    missing = [k for k in doc if f"`{k}`" not in section and f'"{k}"' not in section]
    assert not missing, f"docs/json.md's {schema} section does not describe {missing}"


# -- every command, one definition ---------------------------------------------------------------

# the commands that run without TensorFlow, each on the shipped MNIST dump; OUT is a per-test dir
NO_TF = {
    "show": ["show", DUMP],
    "cluster": ["cluster", DUMP, "-o", "OUT/marked.pbtxt"],
    "rewrite": ["rewrite", DUMP, "--until", "mark", "-o", "OUT/rewritten.pbtxt"],
    "explain": ["explain", DUMP, "add"],
    "whatif": ["whatif", DUMP, "--exclude-op", "MatMul"],
    "diff": ["diff", DUMP, "--b-exclude-op", "MatMul"],
    "render": ["render", DUMP, "-o", "OUT/picture.dot"],
    "report": ["report", DUMP, "-o", "OUT/report"],
    "crosscheck index": ["crosscheck", "index", MNIST, "-o", "OUT/index.json"],
    "crosscheck verify": ["crosscheck", "verify", MNIST],
    "crosscheck compare": ["crosscheck", "compare", DUMP, TRUTH],
    "runtime": ["runtime", ROOT / "fixtures/runtime/graphs/mlp_batch.pbtxt", "--shapes",
                ROOT / "fixtures/runtime/streams/batch_many.jsonl", "--tf", "never"],
}
# the commands that run TensorFlow (tested once each, below)
WITH_TF = ("registry export", "crosscheck harvest", "crosscheck fuzz", "crosscheck matrix", "profile")


def test_every_command_is_covered_here():
    """A new command must say here how it is run, so that the tests below cover it."""
    assert set(leaf_commands()) == set(NO_TF) | set(WITH_TF)


def test_format_and_timings_are_one_definition_in_every_command():
    """Every command takes --format text|json and --timings, and each option is the same
    (same choices, default, help) everywhere: one shared definition."""
    seen = {}
    for name, p in leaf_commands().items():
        opts = {o: a for a in p._actions for o in a.option_strings}
        assert "--format" in opts and "--timings" in opts, name
        f, t = opts["--format"], opts["--timings"]
        assert tuple(f.choices) == ("text", "json") and f.default == "text", name
        seen.setdefault("--format", set()).add(f.help)
        seen.setdefault("--timings", set()).add(t.help)
    assert all(len(helps) == 1 for helps in seen.values()), seen


def _argv(name, out: Path):
    return [str(a).replace("OUT", str(out)) if isinstance(a, str) else a for a in NO_TF[name]]


@pytest.mark.parametrize("name", sorted(NO_TF))
def test_json_is_byte_identical_valid_and_documented(name, tmp_path):
    """Each command twice (other hash seeds, the same -o): the same bytes on stdout, one JSON
    object whose schema and top-level fields docs/json.md documents, no timing; the text form
    runs too."""
    argv = _argv(name, tmp_path)
    first = run(*argv, "--format", "json", seed="1")
    second = run(*argv, "--format", "json", seed="2")
    assert first.returncode in (0, 1) and b"Traceback" not in first.stderr, first.stderr.decode()
    assert first.returncode == second.returncode
    assert first.stdout == second.stdout, f"{name}: JSON differs between two runs"
    doc = json.loads(first.stdout)
    assert_documented(doc)
    text = json.dumps(doc)
    assert not any(f'"{k}"' in text for k in TIMING_KEYS), f"{name}: a timing without --timings"
    plain = run(*argv)
    assert plain.returncode == first.returncode and b"Traceback" not in plain.stderr, plain.stderr.decode()


def test_timings_only_on_request(tmp_path):
    """`seconds` (jitsim's time per graph) is in cluster's JSON with --timings only, and the
    rest of the object is the same."""
    bare = json.loads(run("cluster", DUMP, "--format", "json").stdout)
    timed = json.loads(run("cluster", DUMP, "--format", "json", "--timings").stdout)
    assert "seconds" not in bare["graphs"][0] and isinstance(timed["graphs"][0]["seconds"], float)
    del timed["graphs"][0]["seconds"]
    assert timed == bare


def test_show_schema_is_documented():
    """jitsim.show/1 was undocumented: its section names every field show writes."""
    doc = json.loads(run("show", DUMP, "--format", "json").stdout)
    assert doc["schema"] == "jitsim.show/1" and doc["nodes"] == 59
    assert_documented(doc)


# -- one "wrote PATH" line for every -o ------------------------------------------------------------

@pytest.mark.parametrize("name,written", [("cluster", "marked.pbtxt"), ("rewrite", "rewritten.pbtxt"),
                                          ("render", "picture.dot"), ("report", "report/index.html"),
                                          ("crosscheck index", "index.json")])
def test_every_output_says_wrote_path(name, written, tmp_path):
    """Text or JSON, a command that writes -o says so in one stderr line `wrote PATH (...)`."""
    for fmt in ("text", "json"):
        r = run(*_argv(name, tmp_path), "--format", fmt)
        assert r.returncode in (0, 1), r.stderr.decode()
        lines = r.stderr.decode().splitlines()
        wrote = [ln for ln in lines if ln.startswith("wrote ")]
        assert wrote and wrote[0].startswith(f"wrote {tmp_path / written} ("), lines
        assert (tmp_path / written).is_file()


# -- explain: the answer first, refused merges grouped, short lines ------------------------------

def fan_of_diamonds(n: int):
    """A feeds, for each i, X_i (BesselJ0: no XLA kernel) and B_i = A + X_i. With clusters of
    size 1 allowed, A and each B_i are clusters, and merging A with B_i would close the cycle
    A -> X_i -> B_i: TF refuses n merges, each MERGE_CYCLE, each towards another cluster."""
    nodes = [arg("x"), op("A", "Neg", "x")]
    for i in range(n):
        nodes += [op(f"X{i}", "BesselJ0", "A"), op(f"B{i}", "AddV2", "A", f"X{i}"), ret(f"y{i}", f"B{i}", i)]
    return graph(*nodes)


def test_explain_groups_refused_merges(tmp_path):
    f = tmp_path / "fan.pbtxt"
    save(fan_of_diamonds(40), f)
    base = ["explain", f, "A", "--input-stage", BEFORE_CLONE, "--tf-xla-flags", f"{AUTO} --tf_xla_min_cluster_size=1"]
    r = run(*base)
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().splitlines()
    assert lines[0].startswith("A (Neg") and "is in cluster_" in lines[0]  # the answer first
    assert any(re.search(r"MERGE_CYCLE ×40\b.*\(40 other clusters\)", ln) for ln in lines), lines
    assert any("--all lists each of the 40 refused merges" in ln for ln in lines)
    assert len(lines) < 15 and max(map(len, lines)) <= LINE_LIMIT
    every = run(*base, "--all").stdout.decode().splitlines()
    assert sum(1 for ln in every if "MERGE_CYCLE: merging would create a cycle" in ln) == 40
    doc = json.loads(run(*base, "--format", "json").stdout)  # the JSON keeps every record
    assert len(doc["refused_merges"]) == 40 and {m["code"] for m in doc["refused_merges"]} == {"MERGE_CYCLE"}


def test_long_lines_keep_both_ends():
    line = "inside: " + " -> ".join(f"f{i}/PartitionedCall" for i in range(300))
    short = fit(line)
    assert len(short) <= LINE_LIMIT + 10 and short.startswith("inside: f0/") and short.endswith("f299/PartitionedCall")
    assert "--format json has all" in short and fit("short") == "short"


# -- diff: names across a function-inlining prefix -------------------------------------------------

def chain(prefix: str = "", names=("a", "b", "c", "d")):
    """x -> a -> b -> BesselJ0 -> c -> d -> y: two clusters {a, b} and {c, d} (the middle op has
    no XLA kernel); ``prefix`` on every op node, as TF names the nodes of an inlined call."""
    a, b, c, d = (prefix + n for n in names)
    s = prefix + "s"
    return graph(arg("x"), op(a, "Neg", "x"), op(b, "Exp", a), op(s, "BesselJ0", b), op(c, "Neg", s),
                 op(d, "Exp", c), ret("y", d))


def _diff(tmp_path, ga, gb):
    save(ga, tmp_path / "a.pbtxt")
    save(gb, tmp_path / "b.pbtxt")
    return run("diff", tmp_path / "a.pbtxt", tmp_path / "b.pbtxt", "--input-stage", BEFORE_CLONE,
               "--tf-xla-flags", f"{AUTO} --tf_xla_min_cluster_size=2")


def test_diff_pairs_names_across_an_inlining_prefix(tmp_path):
    """The same graph, one side's op nodes under `StatefulPartitionedCall/` (a SavedModel's
    signature wrapper): the same clusters, said so, exit 0; the note names the prefix."""
    r = _diff(tmp_path, chain("StatefulPartitionedCall/"), chain())
    out = r.stdout.decode()
    assert r.returncode == 0, out + r.stderr.decode()
    assert "no change in the clusters" in out and "disappears" not in out and "new cluster" not in out
    assert "removing the baseline's 'StatefulPartitionedCall/'" in out
    save(chain("StatefulPartitionedCall/"), tmp_path / "a.pbtxt")
    doc = json.loads(run("diff", tmp_path / "a.pbtxt", tmp_path / "b.pbtxt", "--input-stage", BEFORE_CLONE,
                         "--tf-xla-flags", f"{AUTO} --tf_xla_min_cluster_size=2", "--format", "json").stdout)
    assert doc["name_match"]["baseline_prefix"] == "StatefulPartitionedCall/" and doc["name_match"]["paired"] == 7


def long_chain(name: str, n: int = 12):
    """x -> NAME0 -> ... -> NAME{n-1} -> y, alternating Neg and Exp: one cluster of n nodes."""
    nodes, prev = [arg("x")], "x"
    for i in range(n):
        nodes.append(op(f"{name}{i}", ("Neg", "Exp")[i % 2], prev))
        prev = f"{name}{i}"
    return graph(*nodes, ret("y", prev))


def test_diff_of_unrelated_graphs_is_one_note(tmp_path):
    """No op name in common, only the _Arg/_Retval `x`, `y` (2 of 14 nodes): one note says
    so, and no 'new cluster'/'disappears' line lists every cluster."""
    r = _diff(tmp_path, long_chain("p"), long_chain("a"))
    out = r.stdout.decode()
    assert "node names pair" in out and "do not look like one model" in out, out
    assert "new cluster" not in out and "disappears" not in out and "only in the" not in out


# -- TensorFlow: the JSON of the commands that run TF; the user's input named, never the cache ----

@pytest.mark.tf
@pytest.mark.parametrize("name", WITH_TF)
def test_tf_commands_write_documented_json(name, tmp_path):
    argv = {"registry export": ["registry", "export", "--import", "tensorflow_text", "-o", tmp_path / "ops.json"],
            "crosscheck harvest": ["crosscheck", "harvest", MNIST / "mnist_softmax_xla.py", "-o", tmp_path / "h"],
            "crosscheck fuzz": ["crosscheck", "fuzz", "--examples", "1", "--no-shrink", "--tf-reruns", "0",
                                "-o", tmp_path / "fz"],
            "crosscheck matrix": ["crosscheck", "matrix", "--python", sys.executable, "--only", "asserts_checks_print",
                                  "-o", tmp_path / "mx"],
            "profile": ["profile", MNIST / "mnist_softmax_xla.py", "-o", tmp_path / "pf", "--steps", "1",
                        "--warmup", "1"]}[name]
    r = run(*argv, "--format", "json")
    assert r.returncode == 0, r.stderr.decode()[-2000:]
    assert_documented(json.loads(r.stdout))
    assert any(ln.startswith(f"wrote {argv[argv.index('-o') + 1]}") for ln in r.stderr.decode().splitlines())


MAKE_MODEL = """
import sys, keras
from pathlib import Path
out = Path(sys.argv[1])
x = keras.Input((6,), name="x", batch_size=2)
h = keras.layers.LayerNormalization()(keras.layers.Dense(8, activation="gelu")(x))
m = keras.Model(x, keras.layers.Dense(3, activation="softmax")(h))
m.save(str(out / "m.keras"))
m.export(str(out / "sm"))
"""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    d = tmp_path_factory.mktemp("model")
    subprocess.run([sys.executable, "-c", MAKE_MODEL, str(d)], check=True, capture_output=True)
    return d


@pytest.mark.tf
def test_saved_model_and_keras_file_of_one_model_pair_up(model):
    """One Keras model as a SavedModel and as a .keras file: the SavedModel's nodes sit under
    its signature wrapper's `StatefulPartitionedCall/`; paired across it, the clusters are the
    same (exit 0), where plain names reported one cluster gone and one new."""
    r = run("diff", model / "sm", model / "m.keras")
    out = r.stdout.decode()
    assert r.returncode == 0, out + r.stderr.decode()[-2000:]
    assert "'StatefulPartitionedCall/'" in out and "no change in the clusters" in out


@pytest.mark.tf
def test_messages_and_pictures_name_the_input_not_the_cache(model, tmp_path):
    """A SavedModel goes through a TF capture cached under ~/.cache/jitsim/capture: the text, the
    JSON, the picture and the report name the SavedModel, never a cache file."""
    from jitsim.frontend.capture import default_cache_dir

    cache = str(default_cache_dir())
    sm = model / "sm"
    outputs = []
    for argv in (["cluster", sm], ["cluster", sm, "--format", "json"], ["explain", sm, "Softmax"],
                 ["explain", sm, "Softmax", "--format", "json"], ["render", sm, "-o", tmp_path / "p.dot"],
                 ["report", sm, "-o", tmp_path / "r"]):
        r = run(*argv)
        assert r.returncode == 0, r.stderr.decode()[-2000:]
        outputs.append(r.stdout.decode() + r.stderr.decode())
    outputs += [(tmp_path / "p.dot").read_text(), (tmp_path / "r" / "index.html").read_text()]
    for text in outputs:
        assert cache not in text and "/dumps/" not in text, text[:3000]
    doc = json.loads(run("cluster", sm, "--format", "json").stdout)
    main = doc["graphs"][doc["main_graph"]]
    assert main["source"] == str(sm) and main["name"].startswith("graph ") and " of sm" in main["name"]
    assert "sm" in (tmp_path / "p.dot").read_text()


def test_long_notes_are_wrapped_not_cut():
    """A route note (a SavedModel's signature wrapper...) is wrapped: every word kept, no line
    over the limit; the answer stays first."""
    from jitsim.explain.explanation import NodeExplanation

    note = "; ".join(f"clause {i} says something about the route" for i in range(20))
    ex = NodeExplanation("n", "Neg", "", "cluster_0", "cluster_0", "CLUSTERED", "", {}, cluster_size=1,
                         cluster_ops="Neg", notes=[note])
    lines = ex.format_text().splitlines()
    assert lines[0] == "n (Neg) is in cluster_0 (1 nodes: Neg)."
    assert max(map(len, lines)) <= LINE_LIMIT and " ".join(ln.strip() for ln in lines[1:]) == f"note: {note}"


def test_match_names_strips_one_prefix_per_side_unambiguously():
    from jitsim.explain.diff import match_names

    a = ["x", "StatefulPartitionedCall/a", "StatefulPartitionedCall/b", "StatefulPartitionedCall/c", "y"]
    b = ["x", "a", "b", "c", "y"]
    assert match_names(a, b) == ({n: ("StatefulPartitionedCall/" + n if n in "abc" else n) for n in b},
                                 ("StatefulPartitionedCall/", ""))
    assert match_names(b, a)[1] == ("", "StatefulPartitionedCall/")  # either side may carry it
    # "P/a" and "a" would both become "a": that name pairs with neither, the others do
    assert match_names(["P/a", "a", "P/b", "P/c"], ["a", "b", "c"]) == ({"b": "P/b", "c": "P/c"}, ("P/", ""))
    assert match_names(b, b) == ({n: n for n in b}, ("", ""))  # the same names: nothing removed
