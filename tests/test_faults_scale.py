"""Inputs whose size or depth is the fault (issue 22): a library of thousands of functions each
called once, and function calls nested 1,000 deep, on every command; an input that exhausts
Python's stack or memory anyway gets one error line (exit 2), never a traceback.

The graphs come from ``benchmarks/generate.py`` (``functions``, ``nested_calls``), which
``benchmarks/functions_scale.py`` times; no test here is timed."""

import sys
from pathlib import Path

import pytest

from jitsim import cli
from jitsim.graph import save

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
import generate  # noqa: E402

DEPTH = 1_000  # Python's default recursion limit: a recursive walk over the nesting fails here


def _run(capsys, *args):
    """``jitsim ARGS`` in this process (its stack is deeper than a fresh process's: stricter)."""
    rc = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return rc, out, err


def _ok(rc, err):
    assert rc == 0, err
    assert "Traceback" not in err and not any(
        ln.startswith("jitsim: ") and ": note: " not in ln for ln in err.splitlines()), err


@pytest.fixture(scope="module")
def nested(tmp_path_factory):
    d = tmp_path_factory.mktemp("nested")
    return {kind: save(generate.nested_calls(DEPTH, kind=kind), d / f"{kind}.pbtxt")
            for kind in generate.NESTING_KINDS}


# -- 1,000 nested calls ------------------------------------------------------------------------

@pytest.mark.parametrize("kind", generate.NESTING_KINDS)
def test_nesting_on_the_graphdef_route(nested, kind, tmp_path, capsys):
    """The graph as it is (``--input-stage graphdef``): the call of ``f0`` is a candidate whose
    constant inputs const analysis asks of ``f0``, which asks ``f1``... 1,000 deep, through calls,
    ``If`` branches and ``While`` bodies; compilability stops at TF's call-depth limit."""
    g = nested[kind]
    rc, out, err = _run(capsys, "cluster", g, "--input-stage", "graphdef", "--format", "json")
    _ok(rc, err)
    assert '"call"' in out
    for until in ("mark", "decluster", "encapsulate", "build-xla-ops"):
        rc, out, err = _run(capsys, "rewrite", g, "--input-stage", "graphdef", "--until", until,
                            "-o", tmp_path / f"{until}.pbtxt")
        _ok(rc, err)
        assert (tmp_path / f"{until}.pbtxt").stat().st_size > 0
    rc, out, err = _run(capsys, "explain", g, "call", "--input-stage", "graphdef")
    _ok(rc, err)
    assert "call" in out


def test_nesting_on_every_command(nested, tmp_path, capsys):
    """``f0`` calls ``f1`` ... calls ``f999`` by PartitionedCall (the issue's case), on the
    default route (every call inlined, 1,000 rounds), the graph route and every command that
    draws or reports. The calls inline to one chain of Mul/Relu pairs: one cluster."""
    g = nested["PartitionedCall"]
    rc, out, err = _run(capsys, "cluster", g, "--tf", "never")
    _ok(rc, err)
    assert "1 cluster (" in out
    for until in ("mark", "decluster", "encapsulate", "build-xla-ops"):
        rc, out, err = _run(capsys, "rewrite", g, "--tf", "never", "--until", until, "-o", tmp_path / f"{until}.pbtxt")
        _ok(rc, err)
    rc, out, err = _run(capsys, "explain", g, "result", "--tf", "never")
    _ok(rc, err)
    rc, out, err = _run(capsys, "render", g, "--tf", "never", "-o", tmp_path / "g.dot")
    _ok(rc, err)
    dot = (tmp_path / "g.dot").read_text()
    assert "digraph" in dot and "cluster_0" in dot
    rc, out, err = _run(capsys, "report", g, "--tf", "never", "-o", tmp_path / "report")
    _ok(rc, err)
    assert (tmp_path / "report" / "index.html").stat().st_size > 0
    rc, out, err = _run(capsys, "show", g)
    _ok(rc, err)
    rc, out, err = _run(capsys, "diff", g, g, "--input-stage", "graphdef")
    _ok(rc, err)


def test_nested_loops_give_bounded_messages(tmp_path, capsys):
    """Loops nested 60 deep, lowered: the deadness predicates of the inner frames are long
    formulas (their text grows like depth**3: 8 MB at 100 levels); a refusal quotes at most
    2,000 characters of each, and says that it cut."""
    import jitsim
    from jitsim.analyses.deadness import TEXT_LIMIT

    g = save(generate.nested_calls(60, kind="While"), tmp_path / "loops.pbtxt")
    c = jitsim.cluster(g, tf="never")
    dead = [r for r in c.refusals if r.code == "MERGE_DEADNESS"]
    assert dead
    for r in dead:
        for key in ("from_predicate", "to_predicate"):
            assert len(r.evidence[key]) <= TEXT_LIMIT + 40
    assert any("more than" in r.evidence[k] for r in dead for k in ("from_predicate", "to_predicate"))


def test_predicate_text_is_str_when_short():
    from jitsim.analyses.deadness import PredicateFactory

    f = PredicateFactory()
    a, b = f.make_symbol("a", 0, True), f.make_symbol("b", 0, True)
    p = f.make_or([f.make_and([a, f.make_not(b)]), b])
    assert p.text() == str(p)
    assert p.text(4) == str(p)[:4] + "… (more than 4 characters)"


# -- a library of 2,000 functions, each called once ---------------------------------------------

N = 2_000


def _members(capsys, *args):
    import json

    rc, out, err = _run(capsys, "cluster", *args, "--format", "json")
    _ok(rc, err)
    doc = json.loads(out)
    graph = doc["graphs"][0]
    return graph


@pytest.mark.parametrize("consumer", ["AddN", "Pack"])
def test_two_thousand_functions_default_route(tmp_path, capsys, consumer):
    """Hand-derived: ``call{i}`` calls ``f{i}(x) = Relu(x * (i+1))`` (by PartitionedCall,
    StatefulPartitionedCall or the function's name in turn); TF inlines every call (none is
    ``_noinline`` or marked for compilation), and Grappler's dependency optimizer removes the
    inlining's Identity nodes. ``x * 1.0`` (``f0``) is a multiplication by one, but ``x`` is fed
    and Grappler's constant folding does not assume valid feeds: it does not know ``x``'s shape,
    so it cannot tell the product has it, and the Mul stays (TF's own run of the same graph with 4
    functions, jitsim's TF route, clusters ``call0/c`` and ``call0/m``; issue 41). Const, Mul, Relu
    per call, the wide AddN/Pack ``sum`` and the fetched Identity ``result`` all have XLA CPU
    kernels for float, there is no control flow (every node alive under #true) and no resource,
    and everything is connected through ``sum``: one cluster of 3*2000 + 2 nodes. The feed
    ``x`` and the fetch become ``_Arg``/``_Retval`` (never clustered at the top level)."""
    g = save(generate.functions(N, consumer=consumer), tmp_path / "g.pbtxt")
    graph = _members(capsys, g, "--tf", "never")
    clusters = graph["clusters"]
    assert len(clusters) == 1
    members = set(clusters[0]["nodes"])
    expected = {f"call{i}/{n}" for i in range(N) for n in ("c", "m", "r")} | {"sum", "result"}
    assert members == expected


def test_two_thousand_functions_graph_route(tmp_path, capsys):
    """Hand-derived, the graph as it is (``--input-stage graphdef``): nothing is inlined; each
    call's body (Const, Mul, Relu on float) is compilable, so each call is a candidate, and so
    are ``sum`` and ``result``; the Placeholder has no XLA kernel. One cluster: 2,000 calls +
    2 nodes."""
    g = save(generate.functions(N), tmp_path / "g.pbtxt")
    graph = _members(capsys, g, "--input-stage", "graphdef")
    clusters = graph["clusters"]
    assert len(clusters) == 1
    members = set(clusters[0]["nodes"])
    assert members == {f"call{i}" for i in range(N)} | {"sum", "result"}


def test_functions_calling_functions(tmp_path, capsys):
    """``nested=True``: ``f{i}(x) = Relu(g{i}(x) * (i+1))`` where ``g{i}(x) = Relu(x * -(i+1))``,
    the inner call made the next way in turn. Both levels inline (TF inlines what an inlined
    body calls), the inlining's Identity nodes go. Per call: g's Const, Mul, Relu
    (``call{i}/inner/...``) and f's Const, Mul, Relu. ``call0``'s f multiplies by one, but of a
    tensor computed from the fed ``x``, whose shape Grappler's constant folding does not know
    (it does not assume valid feeds): the Mul stays (issue 41). All compilable, connected through
    ``sum``: one cluster."""
    n = 300
    g = save(generate.functions(n, nested=True), tmp_path / "g.pbtxt")
    graph = _members(capsys, g, "--tf", "never")
    clusters = graph["clusters"]
    assert len(clusters) == 1
    expected = {f"call{i}/{p}{n}" for i in range(n) for p in ("", "inner/") for n in ("c", "m", "r")} | {"sum", "result"}
    assert set(clusters[0]["nodes"]) == expected


# -- the backstop: stack or memory exhausted ---------------------------------------------------

@pytest.mark.parametrize("exc,fragment", [(RecursionError, "nested too deeply"), (MemoryError, "out of memory")])
def test_resource_exhaustion_is_one_line(monkeypatch, tmp_path, capsys, exc, fragment):
    """Whatever walk still recursed or whatever allocation failed: one ``jitsim: FILE: problem``
    line, exit 2, no traceback, no output file."""
    from jitsim.passes import pipeline

    g = save(generate.nested_calls(3), tmp_path / "g.pbtxt")

    def boom(*a, **k):
        raise exc("maximum recursion depth exceeded" if exc is RecursionError else "")

    monkeypatch.setattr(pipeline, "run_pipeline", boom)
    out = tmp_path / "out.pbtxt"
    rc, _, err = _run(capsys, "rewrite", g, "--tf", "never", "-o", out)
    assert rc == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"jitsim: {g}: ") and fragment in lines[0], err
    assert not out.exists()


# -- the in-place redirect gives what rewriting the whole input list gave ------------------------

def _reference_replace(inputs, old, old_port, new_ref):
    """The input list after redirecting ``old:old_port`` by rewriting the whole list (EditGraph's
    rule before the in-place path: TF's order after, data then control without duplicates)."""
    from jitsim.graph.model import parse_input

    new = [new_ref if parse_input(r) == (old, old_port) else r for r in inputs]
    data = [r for r in new if not r.startswith("^")]
    return data + list(dict.fromkeys(r for r in new if r.startswith("^")))


@pytest.mark.parametrize("inputs", [
    ["a", "b", "a:1", "^c"],            # in TF's order: redirected in place
    ["a:0", "a", "a:1", "^c", "^d"],   # the same tensor spelled two ways, another port kept as written
    ["^c", "a", "b"],                   # control first: the list is rewritten (reordered)
    ["a", "^c", "^c"],                  # a duplicate control input: rewritten (deduplicated)
    ["a", "^a"],                        # a control use of the producer too: rewritten
])
def test_redirect_in_place_matches_rewrite(inputs):
    from jitsim.registry import protos
    from jitsim.graph.graphedit import EditGraph

    gd = protos.GraphDef()
    for n in ("a", "b", "c", "d", "n"):
        gd.node.add(name=n, op="NoOp")
    gd.node.add(name="z", op="AddN", input=inputs)
    eg = EditGraph(gd)
    eg.out_refs("a")  # builds the position index the in-place path uses
    eg.replace_uses("a", 0, "n:2")
    assert list(eg["z"].input) == _reference_replace(inputs, "a", 0, "n:2")
    # the indexes agree with the new list
    assert sorted(eg.out_refs("n")) == [("z", i, 2) for i, r in enumerate(eg["z"].input) if r == "n:2"]
    assert ("z" in eg.consumers("a")) == any(r.split(":")[0].lstrip("^") == "a" for r in eg["z"].input)


def test_an_unexpected_exception_is_one_line_and_exit_3(monkeypatch, capsys):
    """A bug (any exception jitsim did not expect) is one line naming the input, exit 3 (not 1,
    which means "differences found"), no traceback; JITSIM_DEBUG=1 shows the traceback."""
    from jitsim import cli
    from jitsim.explain import clustering

    def boom(*a, **k):
        raise TypeError("a planted bug")

    monkeypatch.setattr(clustering, "cluster", boom)
    graph = str(Path(__file__).resolve().parents[1] / "examples/mnist_softmax/before_clone_constants_for_better_clustering.pbtxt")
    monkeypatch.delenv("JITSIM_DEBUG", raising=False)
    assert cli.main(["explain", graph, "add"]) == 3
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"jitsim: {graph}: internal error (TypeError: a planted bug)")
    monkeypatch.setenv("JITSIM_DEBUG", "1")
    with pytest.raises(TypeError):
        cli.main(["explain", graph, "add"])
