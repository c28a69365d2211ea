"""Simulating another TensorFlow release: the shipped registry data of each release, the
scoped version setting, which release a graph came from, and the --tf-version option."""

import json
import subprocess
import sys
import warnings
from dataclasses import replace

import pytest

from jitsim.errors import JitsimError, JitsimWarning
from jitsim.registry import protos
from jitsim.registry import (
    current_tf_version, data_file, find_xla_kernel, op_defs, using_tf_version, xla_kernels,
)
from jitsim.registry.const_inputs import const_input_table, metadata_ops
from jitsim.registry.versions import (release_candidates, 
    PRODUCERS, SUPPORTED, check_tf_version, choose_tf_version, producer_of, version_for_producer,
)


@pytest.mark.parametrize("version", SUPPORTED)
def test_every_release_has_loadable_data(version):
    from jitsim.registry.kernels import tf_kernels
    from jitsim.flags import ops_to_cluster_categories

    for name in ("ops.binpb", "xla-kernels.binpb", "const-inputs.json", "kernels-cpu-gpu.binpb", "ops-to-cluster.json",
                 "slow-ops.json"):
        assert data_file(name, version).is_file(), name
    assert len(op_defs(version)) > 1800
    # ops with kernels: 2.15 lacks XlaAllReduce and XlaReduceScatter; 2.22 adds BesselI0, BesselI1,
    # EuclideanNorm, UnravelIndex, MatrixDeterminant and LogMatrixDeterminant
    for dev in ("XLA_CPU_JIT", "XLA_GPU_JIT"):
        assert len(xla_kernels(dev, version)) == {"2.15": 487, "2.22": 495}.get(version, 489)
    assert const_input_table(version)["Reshape"] == ("shape",)
    assert "Shape" in metadata_ops(version)
    devices = {d for _, d in tf_kernels(version)}
    assert {"CPU", "GPU", "DEFAULT"} <= devices
    assert "AddV2" in ops_to_cluster_categories(version)["PW"]
    doc = json.loads(data_file("const-inputs.json", version).read_text())
    assert doc["tf_version"] == version


def _xla_kernel_defs(version, device):
    kl = protos.KernelList()
    kl.ParseFromString(data_file("xla-kernels.binpb", version).read_bytes())
    out = {}
    for k in kl.kernel:
        if k.device_type == device:
            out.setdefault((k.op, k.label), []).append(k.SerializeToString(deterministic=True))
    return {key: sorted(v) for key, v in out.items()}


# XLA kernels whose type constraints differ from 2.21's (the same op set from 2.16 on; TF 2.15 has
# no XLA kernel for the two collective ops XlaAllReduce and XlaReduceScatter yet)
@pytest.mark.parametrize("version,differ", [("2.15", 168), ("2.16", 164), ("2.17", 158), ("2.18", 158),
                                            ("2.19", 4), ("2.20", 1), ("2.21", 0)])
def test_xla_kernel_constraint_differences_from_2_21(version, differ):
    for dev in ("XLA_CPU_JIT", "XLA_GPU_JIT"):
        mine, ref = _xla_kernel_defs(version, dev), _xla_kernel_defs("2.21", dev)
        missing = {("XlaAllReduce", ""), ("XlaReduceScatter", "")} if version == "2.15" else set()
        assert set(mine) == set(ref) - missing
        assert sum(mine[k] != ref[k] for k in mine) == differ


def test_rfft_float64_has_no_kernel_in_2_16_only():
    nd = protos.NodeDef(name="r", op="RFFT")
    nd.attr["Treal"].type = protos.DataType.values_by_name["DT_DOUBLE"].number
    nd.attr["Tcomplex"].type = protos.DataType.values_by_name["DT_COMPLEX128"].number
    k, why = find_xla_kernel(nd, tf_version="2.16")
    assert k is None and "DT_COMPLEX128 is not supported" in why
    assert find_xla_kernel(nd, tf_version="2.21")[0] is not None
    with using_tf_version("2.16"):  # the scoped setting reaches the default
        assert find_xla_kernel(nd)[0] is None
    assert find_xla_kernel(nd)[0] is not None


def test_using_tf_version_is_scoped_and_normalised():
    assert current_tf_version() == "2.21"
    with using_tf_version("2.16.2"):
        assert current_tf_version() == "2.16"
        with using_tf_version(None):
            assert current_tf_version() == "2.16"
        with using_tf_version("2.20"):
            assert current_tf_version() == "2.20"
        assert current_tf_version() == "2.16"
        assert op_defs() is op_defs("2.16")
    assert current_tf_version() == "2.21"
    assert op_defs() is op_defs("2.21") and op_defs("2.16") is not op_defs("2.21")
    with pytest.raises(JitsimError, match="2.16, 2.17"):
        with using_tf_version("2.14"):
            pass


def test_check_tf_version():
    assert check_tf_version("2.18") == "2.18"
    assert check_tf_version("2.19.1") == "2.19"
    assert check_tf_version("2.20.0rc1") == "2.20"
    assert check_tf_version("2.21.0.dev20250101") == "2.21"
    for bad in ("2.14", "3.0", "2", "latest", ""):
        with pytest.raises(JitsimError):
            check_tf_version(bad)


def test_producers_grow_with_releases():
    assert list(PRODUCERS.values()) == sorted(PRODUCERS.values())
    assert PRODUCERS["2.15"] == 1645 and PRODUCERS["2.16"] == 1766 and PRODUCERS["2.18"] == 1994
    assert PRODUCERS["2.20"] == 2288 and PRODUCERS["2.21"] == 2474


@pytest.mark.parametrize("producer,release,warns", [
    (1766, "2.16", False), (1700, "2.16", False), (1767, "2.17", False), (1882, "2.17", False),
    (1994, "2.18", False), (2129, "2.19", False), (2200, "2.20", False), (2474, "2.21", False),
    (2475, "2.21", True), (9999, "2.21", True), (1646, "2.16", False), (1645, "2.15", False),
    (1576, "2.15", False), (1575, "2.15", True), (27, "2.15", True),
])
def test_version_for_producer(producer, release, warns):
    got, note = version_for_producer(producer)
    assert got == release
    assert (note is not None) == warns


@pytest.mark.parametrize("producer", [0, None])
def test_unknown_producer(producer):
    assert version_for_producer(producer) == (None, "unknown")


def test_choose_tf_version_rule():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert choose_tf_version("2.17", 1766, "2.20.0")[0] == "2.17"  # --tf-version first
        v, why = choose_tf_version(None, 1766, "2.20.0")  # then what the capture ran: the release itself
        assert v == "2.20" and "2.20.0" in why
        v, why = choose_tf_version(None, 1766)  # then the graph's producer
        assert v == "2.16" and "1766" in why
        v, why = choose_tf_version(None, None, None)  # then the newest final release (not a release candidate)
        assert v == "2.21" and "default" in why
        # 2474 is written by 2.21 and by 2.22: 2.21 is simulated, both are candidates (checked for agreement)
        v, why = choose_tf_version(None, 2474)
        assert v == "2.21" and "TF 2.21 or TF 2.22" in why
        assert release_candidates(None, 2474) == ("2.21", "2.22")
        assert release_candidates(None, 2474, "2.22.0-rc0") == ("2.22",)  # a capture knows its TF
        assert release_candidates("2.22", 2474) == ("2.22",)
    with pytest.warns(JitsimWarning, match="newer"):
        assert choose_tf_version(None, 5000)[0] == "2.21"
    with pytest.warns(JitsimWarning, match="no data"):
        assert choose_tf_version(None, None, "2.14.1")[0] == "2.15"
    with pytest.raises(JitsimError):
        choose_tf_version("1.15")


def test_producer_of():
    gd = protos.GraphDef()
    assert producer_of(gd) is None
    gd.versions.producer = 1994
    assert producer_of(gd) == 1994


def _jitsim(*args):
    return subprocess.run([sys.executable, "-m", "jitsim.cli", *map(str, args)], capture_output=True, text=True)


@pytest.mark.parametrize("command", [["cluster"], ["rewrite", "-o", "OUT.pbtxt"], ["explain", "x"],
                                     ["crosscheck", "verify"]])
def test_cli_bad_tf_version_is_one_line(tmp_path, command):
    r = _jitsim(*command[:1], *command[1:2] if command[0] == "crosscheck" else (), tmp_path / "g.pbtxt",
                *command[2:] if command[0] == "crosscheck" else command[1:], "--tf-version", "2.14")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("jitsim: --tf-version: "), r.stderr
    assert "2.16" in lines[0] and "Traceback" not in r.stderr


# -- a program TF 2.16 and TF 2.21 cluster differently (fixtures/versions/fft64, make.sh) ----------------

FFT64 = __import__("pathlib").Path(__file__).resolve().parents[1] / "fixtures" / "versions" / "fft64"


def _partition(labels):
    groups = {}
    for n, c in labels.items():
        if c:
            groups.setdefault(c, set()).add(n)
    return sorted(map(frozenset, groups.values()), key=sorted)


def _tf_partition(release):
    from jitsim.crosscheck.scoring import labels_of_file

    return _partition(labels_of_file(FFT64 / f"tf{release}" / "dumps" / "mark_for_compilation_1.pbtxt"))


def _simulated_partition(harvest, tf_version=None):
    from jitsim.graph.io import read_graphdef
    from jitsim.graph.model import Graph
    from jitsim.options import options_for
    from jitsim.passes.pipeline import cluster_graph

    f = FFT64 / harvest / "dumps" / "before_clone_constants_for_better_clustering_1.pbtxt"
    g = Graph(read_graphdef(f), source=str(f), validate=False)
    if tf_version is None:
        tf_version = choose_tf_version(None, producer_of(g))[0]
    res = cluster_graph(g, options_for("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit", tf_version=tf_version))
    return res.tf_version, _partition(res.labels())


def test_fft64_tf_partitions_differ():
    assert sorted(map(len, _tf_partition("2.16"))) == [6, 7, 7]
    assert sorted(map(len, _tf_partition("2.21"))) == [24]


def test_fft64_producer_picks_2_16_and_matches_tf_2_16():
    version, part = _simulated_partition("tf2.16")
    assert version == "2.16"
    assert part == _tf_partition("2.16")


def test_fft64_tf_version_2_21_reproduces_tf_2_21():
    version, part = _simulated_partition("tf2.16", "2.21")
    assert version == "2.21"
    assert part == _tf_partition("2.21")
    assert _simulated_partition("tf2.21") == ("2.21", _tf_partition("2.21"))


def test_fft64_verify_and_cli(tmp_path):
    from jitsim.crosscheck.fidelity import verify_dir
    from jitsim.options import options_for

    flags = options_for("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_clustering_debug")
    res = verify_dir(FFT64 / "tf2.16", flags)
    assert (res.tf_version, res.all_same_names) == ("2.16", True)
    assert "2.16" in res.tf_version_reason  # the harvest's TF, then the dumps' producer 1766
    assert not verify_dir(FFT64 / "tf2.16", replace(flags, tf_version="2.21")).all_identical
    dump = FFT64 / "tf2.16" / "dumps" / "before_clone_constants_for_better_clustering_1.pbtxt"
    r = _jitsim("cluster", dump, "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["tf_version"]["version"] == "2.16" and "TF 2.16" in doc["tf_version"]["reason"]
    assert sorted(c["size"] for c in doc["graphs"][0]["clusters"]) == [6, 7, 7]
    r = _jitsim("cluster", dump, "--tf-version", "2.21")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("jitsim simulating TensorFlow 2.21 (--tf-version)")


def test_fft64_api():
    import jitsim

    dump = FFT64 / "tf2.16" / "dumps" / "before_clone_constants_for_better_clustering_1.pbtxt"
    c = jitsim.cluster(dump)
    assert c.options.tf_version == "2.16" and c.to_dict()["tf_version"]["version"] == "2.16"
    assert sorted(map(len, c.clusters.values())) == [6, 7, 7]
    w = c.whatif(exclude_ops=["Tanh"])  # a what-if keeps the baseline's release
    assert w.options.tf_version == "2.16"
    c21 = jitsim.cluster(dump, tf_version="2.21")
    assert [len(m) for m in c21.clusters.values()] == [24]


# -- a rule that changed: OpIsSlow's list (fixtures/versions/nms_slow, make.sh) ---------------------

NMS = FFT64.parent / "nms_slow"


@pytest.mark.parametrize("version, slow", [("2.16", False), ("2.18", False), ("2.19", False), ("2.20", True),
                                           ("2.21", True)])
def test_slow_ops_are_the_releases_own(version, slow):
    # read from each release's libtensorflow_cc.so.2 (RecursiveCompilabilityChecker::OpIsSlow's
    # string literals, jitsim.registry.regen.read_slow_ops): TF 2.20 added the two NMS ops
    from jitsim.registry import slow_ops

    assert {"SelfAdjointEigV2", "Svd", "Qr", "MatrixInverse", "MatrixSolve", "ResizeBilinearGrad"} <= slow_ops(version)
    assert ({"NonMaxSuppressionV3", "NonMaxSuppressionV4"} <= slow_ops(version)) is slow


@pytest.mark.parametrize("release", ["2.18", "2.21"])
def test_nms_clusters_as_each_release_did(release):
    # TF 2.18 clusters NonMaxSuppressionV3 with the math around it (21 nodes); TF 2.21 keeps it
    # out as a slow op (7 nodes). Each release's dumps, simulated with no option (the release
    # read from the producer), give that release's partition; the other release's rule does not.
    from jitsim.graph.dumps import group_dumps
    from jitsim.crosscheck.scoring import labels_of_file
    from jitsim.graph.io import read_graphdef
    from jitsim.graph.model import Graph
    from jitsim.options import options_for
    from jitsim.passes.pipeline import cluster_graph

    root = NMS / f"tf{release}"
    rec = [r for r in group_dumps(root / "dumps", (root / "log.txt").read_text())
           if "mark_for_compilation" in r.files and r.files.get("before_clone_constants_for_better_clustering")][-1]
    truth = _partition(labels_of_file(root / "dumps" / rec.files["mark_for_compilation"]))
    assert sum(map(len, truth)) == {"2.18": 21, "2.21": 7}[release]
    f = root / "dumps" / rec.files["before_clone_constants_for_better_clustering"]
    g = Graph(read_graphdef(f), source=str(f), validate=False)
    flags = options_for("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
    chosen = choose_tf_version(None, producer_of(g))[0]
    assert chosen == release
    assert _partition(cluster_graph(g, replace(flags, tf_version=chosen)).labels()) == truth
    other = "2.21" if release == "2.18" else "2.18"
    assert _partition(cluster_graph(Graph(read_graphdef(f), source=str(f), validate=False),
                                    replace(flags, tf_version=other)).labels()) != truth


OPS_2_22 = FFT64.parent / "ops_2_22"  # one function per op whose data changed in TF 2.22 (its prog.py)


def test_the_ops_changed_in_2_22_cluster_as_each_release_did():
    """prog.py run under TF 2.21 and TF 2.22rc0 (make.sh): each release's dumps, with the release
    the harvest recorded, are TF's clusters graph by graph; 2.21's data on 2.22's dumps are not
    (the new kernels, slow ops and constant inputs decide half the graphs)."""
    from jitsim.crosscheck.fidelity import verify_dir
    from jitsim.options import options_for

    flags = options_for("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_clustering_debug")
    for release in ("2.21", "2.22"):
        res = verify_dir(OPS_2_22 / f"tf{release}", flags)
        assert res.tf_version == release and "captured with TF" in res.tf_version_reason
        assert res.all_identical and res.all_same_names, release
    assert not verify_dir(OPS_2_22 / "tf2.22", replace(flags, tf_version="2.21")).all_identical


@pytest.mark.parametrize("release", ["2.21", "2.22"])
def test_a_graph_that_does_not_say_its_release_is_exact_only_where_both_agree(tmp_path, release):
    """A dump alone (no harvest index beside it) says only its producer, 2474, which TF 2.21 and
    TF 2.22 both write. Simulated with no option, every result labelled exact is TF's clustering
    (whichever release made it), and the graphs where the releases' data split the clusters (the
    Bessel functions, EuclideanNorm...) are labelled approximate, naming both releases."""
    from jitsim.crosscheck.compare import compare_partitions
    from jitsim.crosscheck.scoring import labels_of_file
    from jitsim.explain.clustering import cluster
    from jitsim.graph.dumps import group_dumps

    root = OPS_2_22 / f"tf{release}"
    approximate = 0
    for rec in group_dumps(root / "dumps", (root / "log.txt").read_text()):
        if "mark_for_compilation" not in rec.files:
            continue
        alone = tmp_path / f"{rec.id}.pbtxt"
        alone.write_bytes((root / "dumps" / rec.files["before_clone_constants_for_better_clustering"]).read_bytes())
        c = cluster(alone, until="mark", flags="--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit")
        assert "TF 2.21 or TF 2.22" in c.options.tf_version_reason
        truth = labels_of_file(root / "dumps" / rec.files["mark_for_compilation"])
        d = compare_partitions(c.labels(), truth)
        if c.route.exact:
            assert d.identical, (release, rec.id, d.format_text())
        else:
            approximate += 1
            assert any("TF 2.21 and TF 2.22" in n and "--tf-version" in n for n in c.route.notes)
    assert approximate >= 3


def _bessel_graph(tmp_path):
    """Relu -> Sigmoid -> BesselI0 -> Tanh -> Exp between an _Arg and a _Retval, written by producer
    2474 (TF 2.21 and 2.22). BesselI0 has an XLA kernel in TF 2.22's data only: under 2.22 the five
    ops are one cluster of 5 (TF's minimum is 4); under 2.21 it splits them into two pieces of 2,
    each too small, so nothing clusters."""
    from graphs import F32, Type, graph_of
    from jitsim.graph.io import save

    t = {"T": Type(F32)}
    g = graph_of([("x", "_Arg", [], {**t, "index": 0}), ("a", "Relu", ["x"], t), ("a2", "Sigmoid", ["a"], t),
                  ("d", "BesselI0", ["a2"], t), ("b", "Tanh", ["d"], t), ("c", "Exp", ["b"], t),
                  ("r", "_Retval", ["c"], {**t, "index": 0})])
    g.graphdef.versions.producer = 2474
    for n in g.graphdef.node:
        n.device = "/job:localhost/replica:0/task:0/device:CPU:0"
    path = tmp_path / "bessel.pbtxt"
    save(g, path)
    return path


def test_the_upgrade_report_names_what_changes_and_why(tmp_path, capsys):
    from jitsim.cli import main

    path = _bessel_graph(tmp_path)
    stage = ["--input-stage", "before_clone_constants_for_better_clustering"]
    assert main(["diff", str(path), *stage, "--tf-version", "2.21", "--tf-version", "2.22", "--format", "json"]) == 1
    d = json.loads(capsys.readouterr().out)
    assert d["clusters"] == [0, 1] and d["baseline"].startswith("TF 2.21") and d["variant"].startswith("TF 2.22")
    why = d["why"]
    assert [w["ops"] for w in why] == [["BesselI0"]] and why[0]["nodes"] == ["d"]
    assert "XLA_CPU_JIT kernel in TF 2.22 only" in why[0]["cause"]
    assert main(["diff", str(path), *stage, "--a-tf-version", "2.21", "--b-tf-version", "2.21"]) == 2
    assert "nothing to compare" in capsys.readouterr().err
    assert main(["diff", str(path), *stage, "--tf-version", "2.21", "--tf-version", "2.3"]) == 2
    assert "--tf-version: unsupported TensorFlow version '2.3'" in capsys.readouterr().err


def test_the_upgrade_report_is_one_call_of_the_api(tmp_path):
    """jitsim.upgrade_report: the same report as the CLI, from two Clusterings of one graph (the
    BesselI0 graph above: one cluster of 5 under 2.22, nothing under 2.21, because of d's kernel)."""
    import jitsim

    path = _bessel_graph(tmp_path)
    stage = "before_clone_constants_for_better_clustering"
    a, b = (jitsim.cluster(path, input_stage=stage, tf_version=v) for v in ("2.21", "2.22"))
    u = jitsim.upgrade_report(a, b)
    assert not u.same_partition and [w["ops"] for w in u.why] == [["BesselI0"]] and u.why[0]["moved"]
    same = jitsim.upgrade_report(a, jitsim.cluster(path, input_stage=stage, tf_version="2.21"))
    assert same.same_partition and same.why == []


PYTHON_2_22 = FFT64.parent / "python_2_22"  # one function per Python change of TF 2.22 (its prog.py)


def test_each_python_change_of_2_22_is_named_on_the_graph_2_21_built():
    """prog.py run under TF 2.21 and TF 2.22rc0 (make.sh): graph by graph, where the two releases
    built the same nodes no GRAPH_BUILDS entry is named; where they built other nodes, the 2.21
    build shows an entry, and among the nodes it names are nodes the 2.22 build does not hold (or
    holds as other ops, or with other inputs) where the entry is ``certain``. Every entry is seen
    at least once, and no certain one on the 2.22 builds."""
    from jitsim.graph.dumps import group_dumps
    from jitsim.graph.io import read_graphdef
    from jitsim.registry.releases import GRAPH_BUILDS, graph_build_differences

    def builds(release):
        root = PYTHON_2_22 / f"tf{release}"
        recs = group_dumps(root / "dumps", (root / "log.txt").read_text())
        return [read_graphdef(root / "dumps" / r.files["before_clone_constants_for_better_clustering"]).node
                for r in recs]

    old, new = builds("2.21"), builds("2.22")
    assert len(old) == len(new) == 16
    seen = set()
    for a, b in zip(old, new):
        named = graph_build_differences(a, "2.21", "2.22")
        in_b = {n.name: (n.op, tuple(n.input)) for n in b}
        if sorted((n.name, (n.op, tuple(n.input))) for n in a) == sorted(in_b.items()):
            assert named == [], [g.name for g, _ in named]
            continue
        assert named, sorted(n.name for n in a)
        for entry, nodes in named:
            seen.add(entry.name)
            built = {n.name: (n.op, tuple(n.input)) for n in a}
            if entry.certain:
                assert any(in_b.get(n) != built[n] for n in nodes), (entry.name, nodes)
        assert [g.name for g, _ in graph_build_differences(b, "2.21", "2.22") if g.certain] == []
    assert seen == {g.name for g in GRAPH_BUILDS}


def test_the_graphs_2_22_builds_differently_cluster_as_each_release_did():
    """The probes of the Python changes (above), each release's build simulated under the release
    the harvest recorded: TF's clusters graph by graph."""
    from jitsim.crosscheck.fidelity import verify_dir
    from jitsim.options import options_for

    flags = options_for("--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_clustering_debug")
    for release in ("2.21", "2.22"):
        res = verify_dir(PYTHON_2_22 / f"tf{release}", flags)
        assert res.tf_version == release and res.all_identical and res.all_same_names, release


def test_a_graph_both_releases_may_be_from_says_where_they_differ(tmp_path, capsys):
    from jitsim.cli import main

    path = _bessel_graph(tmp_path)
    stage = ["--input-stage", "before_clone_constants_for_better_clustering"]
    assert main(["cluster", str(path), *stage, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["tf_version"]["version"] == "2.21" and not doc["route"]["exact"]
    note = doc["route"]["notes"][0]
    assert "TF 2.21 and TF 2.22" in note and "d (unclustered under 2.21, cluster_0 under 2.22)" in note
    assert main(["cluster", str(path), *stage, "--tf-version", "2.22", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["route"]["exact"] and [c["size"] for c in doc["graphs"][0]["clusters"]] == [5]


def test_the_tf_free_route_follows_each_releases_remapper(tmp_path):
    """TF 2.22's remapper leaves its CPU fusions out when auto-clustering is on and
    --tf_xla_cpu_global_jit is one of the flags (measured: probes under 2.22rc0); 2.21's fuses
    with the same flags. A GraphDef of a Dense layer (MatMul + BiasAdd + Relu) without TF: fused
    under 2.21, unfused under 2.22, and with no option a caveat names both."""
    from graphs import F32, Shape, Tensor, Type, graph_of
    from jitsim.frontend.resolve import pass_inputs
    from jitsim.graph.io import save

    t = {"T": Type(F32)}
    g = graph_of([("x", "Placeholder", [], {"dtype": Type(F32), "shape": Shape((2, 4))}),
                  ("w", "Const", [], {"dtype": Type(F32), "value": Tensor(F32, (4, 4))}),
                  ("b", "Const", [], {"dtype": Type(F32), "value": Tensor(F32, (4,))}),
                  ("m", "MatMul", ["x", "w"], {**t, "transpose_a": False, "transpose_b": False}),
                  ("ba", "BiasAdd", ["m", "b"], {**t, "data_format": b"NHWC"}),
                  ("y", "Relu", ["ba"], t)])
    g.graphdef.versions.producer = 2474
    save(g, tmp_path / "dense.pbtxt")
    flags = "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
    ops = {}
    for release in ("2.21", "2.22"):
        pin = pass_inputs(tmp_path / "dense.pbtxt", flags=flags, tf="never", fetch=["y:0"], tf_version=release)
        ops[release] = {n.op for n in pin.main_graph}
    assert "_FusedMatMul" in ops["2.21"] and "_FusedMatMul" not in ops["2.22"] and "BiasAdd" in ops["2.22"]
    pin = pass_inputs(tmp_path / "dense.pbtxt", flags=flags, tf="never", fetch=["y:0"])
    assert any("TF 2.21 or 2.22" in c and "CPU fusions" in c for c in pin.notes)


def test_the_shipped_list_of_changed_ops_is_current():
    """data/tf-2.22-changes-from-2.21.json (what a graph of producer 2474 is checked against, so
    that a graph without a changed op costs nothing) is what comparing every op gives."""
    from jitsim.registry.releases import op_defs as ops_of, op_differences, release_report

    shipped = json.loads(data_file("changes-from-2.21.json", "2.22").read_text())
    computed = {op for op in set(ops_of("2.21")) | set(ops_of("2.22")) if op_differences(op, "2.21", "2.22")}
    assert set(shipped["ops_changed"]) == computed
    assert shipped["ops_changed"] == release_report("2.21", "2.22")["ops_changed"]
    assert {"BesselI0", "EuclideanNorm", "MatrixDeterminant", "TpuHandleToProtoKey"} <= computed
