"""`jitsim profile`: the linking logic on saved artefacts of a real run (no TF needed), bad
input, and the whole command on the MNIST softmax example under real TF (marked `tf`),
its page in headless Chromium."""

import json
import re
import shutil
import xml.dom.minidom
from pathlib import Path

import pytest

from conftest import HAVE_TF, severe_browser_errors
from jitsim.cli import main
from jitsim.profile import hlo, link, page, timeline
from jitsim.profile import trace as tr

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests/data/profile"
EXAMPLE = ROOT / "examples/mnist_softmax/mnist_softmax_xla.py"


# -- saved artefacts of one run (examples/mnist_softmax, XLA off and on) ---------------------


@pytest.fixture(scope="module")
def traces():
    return {k: tr.read_trace(DATA / f"trace_xla_{k}.json") for k in ("off", "on")}


def test_step_counts(traces):
    off, on = tr.step_counts(traces["off"]), tr.step_counts(traces["on"])
    assert off["xla_launches"] == 0 and on["xla_launches"] == 1
    # every TF op kernel of the step is an op event; with XLA on most of them ran inside the launch
    assert off["tf_ops"] == sum(off["op_types"].values()) > on["tf_ops"]
    assert any("MatMul" in op for op in off["op_types"])
    assert on["op_types"]["_XlaRun"] == 1 and "_XlaRun" not in off["op_types"]


def test_hlo_modules_named_in_the_on_trace(traces):
    mods = tr.hlo_modules(traces["on"])
    assert mods and all(m.startswith("cluster_0__XlaCompiledKernel_") for m in mods)
    assert tr.hlo_modules(traces["off"]) == set()


def test_launch_functions_and_cluster_times(traces):
    functions = link.read_launch_functions(DATA / "build_xla_ops.pbtxt")
    assert functions == {"cluster_0_1": "cluster_0"}
    times = link.cluster_times(traces["on"], functions)
    launch = tr.launch_events(traces["on"])
    assert times == {"cluster_0": {"launches": 1, "time_us": pytest.approx(float(launch[0]["dur"]))}}
    # without TF's build_xla_ops dump: the call node's name, less TF's uniquifying suffix
    assert link.cluster_times(traces["on"], {}).keys() == {"cluster_0"}


def test_fusion_count():
    text = (DATA / "module_0000.cluster_0.after_optimizations.txt").read_text()
    n = hlo.count_fusions(text)
    lines = [l for l in text.splitlines() if " fusion(" in l and "=" in l]
    assert n == len(lines) > 0
    assert hlo.count_fusions("ENTRY e {\n  %a = f32[2]{0} add(%x, %y)\n}\n") == 0
    assert hlo.count_fusions(None) is None


def test_collect_modules(tmp_path):
    name = "cluster_3__XlaCompiledKernel_true__XlaHasReferenceVars_false__XlaNumConstantArgs_0__XlaNumResourceArgs_0_.12"
    for stage in ("before_optimizations", "cpu_after_optimizations"):
        (tmp_path / f"module_0007.{name}.{stage}.txt").write_text("ENTRY e {\n  %f = f32[2]{0} fusion(%p), kind=kLoop\n}\n")
        (tmp_path / f"module_0007.{name}.{stage}.dot").write_text('digraph G {\n 1 [label="f"];\n}\n')
    (tmp_path / f"module_0007.{name}.ir-no-opt.ll").write_text("llvm")
    (tmp_path / "module_0008.a_inference_f_12__.34.before_optimizations.txt").write_text("ENTRY e {}\n")
    mods = hlo.collect_modules(tmp_path)
    assert [(m.name, m.cluster) for m in mods] == [(name, "cluster_3"), ("a_inference_f_12__.34", None)]
    assert set(mods[0].files) == {"before", "after"} and set(mods[0].files["after"]) == {"txt", "dot"}
    recs = hlo.export_modules(mods, tmp_path / "out" / "hlo")
    assert recs[0]["fusions"] == 1 and recs[0]["cluster"] == "cluster_3"
    assert recs[0]["files"]["after_txt"] == "hlo/module_0007.cluster_3.after_optimizations.txt"
    if shutil.which("dot"):
        assert (tmp_path / "out" / recs[0]["files"]["after_svg"]).read_text().lstrip().startswith("<?xml")
    # a graph too big to draw is not drawn, and says so
    why = hlo.render_dot("digraph G {\n" + "".join(f" {i} [label=x];\n" for i in range(5)) + "}\n",
                         tmp_path / "big.svg", max_nodes=3)
    assert "5 nodes" in why and not (tmp_path / "big.svg").exists()


def _fake_summary(traces, prediction):
    labels, ops = link.read_labels_and_ops(DATA / "mark_for_compilation.pbtxt")
    graphs = [{"id": 8, "clusters": {"cluster_0": sum(1 for c in labels.values() if c == "cluster_0")}}]
    text = (DATA / "module_0000.cluster_0.after_optimizations.txt").read_text()
    module = next(iter(tr.hlo_modules(traces["on"])))
    modules = [{"module": module, "cluster": "cluster_0", "files": {"after_txt": "hlo/x.txt", "after_svg": "hlo/x.svg"},
                "notes": [], "fusions": hlo.count_fusions(text)}]
    clusters = link.link_clusters(link.tf_clusters(graphs, {8: labels}, {8: ops}), prediction, modules,
                                  link.cluster_times(traces["on"], {"cluster_0_1": "cluster_0"}),
                                  tr.hlo_modules(traces["on"]))
    timing = {"off": {"warmup_s": [0.2], "steps_s": [0.004, 0.002, 0.003]},
              "on": {"warmup_s": [0.9], "steps_s": [0.001, 0.002, 0.0015]}}
    return link.build_summary(target="t.py", kind="program", device="cpu", steps=3, warmup=1,
                              flags={"off": "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit --tf_xla_auto_jit=-1",
                                     "on": "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"}, timing=timing, traces=traces,
                              warmup_trace_on=traces["on"], clusters=clusters, modules=modules,
                              prediction=None, tf_version="2.21.0", notes=["a <note>"])


def test_link_and_summary(traces):
    labels, _ = link.read_labels_and_ops(DATA / "mark_for_compilation.pbtxt")
    size = sum(1 for c in labels.values() if c == "cluster_0")
    exact = {8: {"cluster_map": {"cluster_0": "cluster_0"},
                 "clusters": [{"truth": "cluster_0", "predicted": "cluster_0", "truth_size": size,
                               "predicted_size": size, "overlap": size}]}}
    s = _fake_summary(traces, exact)
    assert s["schema"] == "jitsim.profile/1"
    assert s["step_time_ratio"] == pytest.approx(0.003 / 0.0015)
    assert s["step_time"]["off"]["median_s"] == 0.003 and s["step_time"]["off"]["min_s"] == 0.002
    assert s["xla_launches_per_step"] == {"off": 0, "on": 1}
    assert s["compile_s"] == pytest.approx(tr.duration_s(tr.compile_events(traces["on"])))
    (c,) = s["clusters"]
    assert c["cluster"] == c["predicted_cluster"] == "cluster_0" and c["prediction"] == "exact"
    assert c["nodes"] == size and c["tf_ops"]["MatMul"] == 1
    assert c["hlo_module"].startswith("cluster_0__") and c["fusions"] > 0 and c["launches_per_step"] == 1
    json.dumps(s)
    # a prediction that split the cluster
    partial = {8: {"cluster_map": {"cluster_0": "cluster_1"},
                   "clusters": [{"truth": "cluster_0", "predicted": "cluster_1", "truth_size": size,
                                 "predicted_size": size - 3, "overlap": size - 3}]}}
    assert _fake_summary(traces, partial)["clusters"][0]["prediction"] == "partial"
    assert _fake_summary(traces, {})["clusters"][0]["prediction"] == "not predicted"


def test_prediction_by_graph():
    d = {"graphs": [{"name": "graph 8 (before_clone_constants_for_better_clustering_8.pbtxt)", "diff": {"x": 1}},
                    {"name": "graph 9 (f.pbtxt)", "diff": None, "error": "bad"}]}
    assert link.prediction_by_graph(d) == {8: {"x": 1}}


def test_timeline_and_page_escape(traces):
    svg = timeline.timeline_svg(traces["on"], "t <&> on")
    xml.dom.minidom.parseString(svg)  # well-formed
    assert "_XlaRun" in svg and "t &lt;&amp;&gt; on" in svg
    s = _fake_summary(traces, {})
    s["clusters"][0]["cluster"] = "<script>x</script>"
    html = page.render_page(s, "diff <b>")
    assert "<script>x" not in html and "&lt;script&gt;x" in html and "diff &lt;b&gt;" in html
    assert "a &lt;note&gt;" in html


def test_timeline_tooltips(traces):
    # every drawn event carries a <title> (the browser's tooltip): its name, the TF node and op it
    # ran for, the HLO module and op, its start in the step and its duration
    svg = timeline.timeline_svg(traces["on"], "on")
    doc = xml.dom.minidom.parseString(svg)
    groups = [g for g in doc.getElementsByTagName("g") if "ev" in g.getAttribute("class").split()]
    assert groups
    for g in groups:
        (title,) = [c for c in g.childNodes if getattr(c, "tagName", None) == "title"]
        text = title.firstChild.data
        assert "duration" in text and "start +" in text
    titles = [g.getElementsByTagName("title")[0].firstChild.data for g in groups]
    launch = next(t for t in titles if t.startswith("_XlaRun"))
    assert "TF node:op cluster_0_1/xla_run:_XlaRun" in launch
    assert any("HLO module cluster_0__" in t and "HLO op " in t for t in titles)


def test_page_flags_names_and_timelines(traces):
    s = _fake_summary(traces, {})
    s["xspace"] = {"off": ["plugins/profile/xla_off/h.xplane.pb"], "on": ["plugins/profile/xla_on/h.xplane.pb"]}
    html = page.render_page(s, "")
    # the XLA-off line shows the flags in force, not the on-flags with an override appended
    off = re.search(r'<code id="flags-off">(.*?)</code>', html).group(1)
    on = re.search(r'<code id="flags-on">(.*?)</code>', html).group(1)
    assert off == "--tf_xla_cpu_global_jit --tf_xla_auto_jit=-1"
    assert on == "--tf_xla_auto_jit=2 --tf_xla_cpu_global_jit"
    assert s["tf_xla_flags_effective"] == {"off": off, "on": on}
    # long HLO module names wrap between their parts only; no CSS that breaks inside words
    assert "break-all" not in html and "word-break: keep-all" in html
    name = s["clusters"][0]["hlo_module"]
    assert page.breakable(name) in html and "<wbr>" in page.breakable(name)
    assert page.breakable("a_b.c") == "a_<wbr>b.<wbr>c"
    # timelines embedded as documents (their tooltips show), the trace linked; xprof named
    assert html.count("<object class='timeline'") == 2
    assert "plugins/profile/xla_off/" in html and "xprof --logdir DIR" in html


def test_keep_xspace_layout(tmp_path):
    # TF's profiler writes LOGDIR/plugins/profile/<timestamp>/<host>.xplane.pb; the output keeps
    # it as DIR/plugins/profile/<run>/<host>.xplane.pb, xprof's and TensorBoard's layout
    from jitsim.profile.command import keep_xspace

    raw = tmp_path / "raw" / "step" / "plugins" / "profile" / "2026_11_25_10_00_00"
    raw.mkdir(parents=True)
    (raw / "myhost.xplane.pb").write_bytes(b"xspace")
    out = tmp_path / "out"
    assert keep_xspace(tmp_path / "raw" / "step", out, "xla_on") == ["plugins/profile/xla_on/myhost.xplane.pb"]
    assert (out / "plugins/profile/xla_on/myhost.xplane.pb").read_bytes() == b"xspace"


def test_step_stats_one_step():
    assert link.step_stats([0.5]) == {"n": 1, "median_s": 0.5, "min_s": 0.5, "max_s": 0.5, "iqr_s": 0.0}


# -- bad input: one line, exit 2, no output directory ------------------------------------------


@pytest.mark.parametrize("argv, problem", [
    (["no/such/prog.py"], "no such file or directory"),
    ([str(EXAMPLE), "--steps", "0"], "--steps 0"),
    ([str(EXAMPLE), "--warmup", "0"], "--warmup 0"),
    ([str(EXAMPLE), "--tf-xla-flags", "--tf_xla_bogus=1"], "tf_xla_bogus"),
])
def test_bad_input(tmp_path, capsys, argv, problem):
    out = tmp_path / "prof"
    assert main(["profile", *argv, "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("jitsim: ") and err.count("\n") == 1 and problem in err
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_output_not_empty(tmp_path, capsys):
    (tmp_path / "x").write_text("keep")
    assert main(["profile", str(EXAMPLE), "-o", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err and (tmp_path / "x").read_text() == "keep"


@pytest.mark.tf
def test_program_without_step_function(tmp_path, capsys):
    prog = tmp_path / "p.py"
    prog.write_text("import tensorflow as tf\nprint(tf.constant(1.0) + 1)\n")
    out = tmp_path / "prof"
    assert main(["profile", str(prog), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "defines no jitsim_step()" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.py"]


@pytest.mark.tf
def test_gpu_without_gpu(tmp_path, capsys):
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        pytest.skip("this machine has a GPU")
    out = tmp_path / "prof"
    assert main(["profile", str(EXAMPLE), "--device", "gpu", "--steps", "1", "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "TensorFlow sees no GPU" in err and not out.exists()


# -- the whole command under real TF -------------------------------------------------------------


def _run(tmp_path_factory, steps):
    if not HAVE_TF:
        pytest.skip("TensorFlow is not installed (pip install -e '.[tf]')")
    pytest.importorskip("xprof", reason="xprof is not installed (pip install -e '.[profile]')")
    out = tmp_path_factory.mktemp("profile") / "prof"
    rc = main(["profile", str(EXAMPLE), "--steps", str(steps), "--warmup", "2", "-o", str(out), "--format", "json"])
    assert rc == 0
    return out


@pytest.fixture(scope="module")
def mnist_profile(tmp_path_factory):
    return _run(tmp_path_factory, 3)


def _check_profile(out: Path, steps: int):
    on = json.loads((out / "trace_xla_on.json").read_text())
    off = json.loads((out / "trace_xla_off.json").read_text())
    for t in (on, off):
        assert isinstance(t["traceEvents"], list) and t["traceEvents"]
        assert all("ph" in e and "pid" in e for e in t["traceEvents"])
    on_names = {e.get("name") for e in on["traceEvents"]}
    off_names = {e.get("name") for e in off["traceEvents"]}
    assert "_XlaRun" in on_names and "_XlaCompile" in on_names
    assert any("MatMul" in n for n in off_names if n) and "_XlaRun" not in off_names
    svgs = sorted((out / "hlo").glob("*.svg"))
    assert svgs and all(p.read_text().lstrip().startswith("<?xml") for p in svgs)
    s = json.loads((out / "summary.json").read_text())
    assert s["schema"] == "jitsim.profile/1" and s["steps"] == steps
    assert s["step_time"]["off"]["n"] == s["step_time"]["on"]["n"] == steps
    assert s["step_time_ratio"] == pytest.approx(s["step_time"]["off"]["median_s"] / s["step_time"]["on"]["median_s"])
    assert s["xla_launches_per_step"]["on"] >= 1 and s["xla_launches_per_step"]["off"] == 0
    assert s["tf_ops_per_step"]["off"] > s["tf_ops_per_step"]["on"]
    assert s["compile_s"] > 0 and s["compilations"] >= 1
    assert s["clusters"]
    for c in s["clusters"]:
        assert c["hlo_module"] and c["predicted_cluster"]
        assert c["hlo_module"].startswith(c["cluster"] + "__")
        assert c["hlo_module"] in {m["module"] for m in s["hlo_modules"]}
        assert c["launches_per_step"] >= 1 and c["time_per_step_us"] > 0
        assert (out / c["hlo_files"]["after_txt"]).is_file()
    # the prediction is jitsim's, compared as `crosscheck compare` does
    assert s["prediction"]["schema"] == "jitsim.compare/1"
    assert (out / "index.html").is_file() and (out / "tf_on" / "index.json").is_file()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".prof.")]  # no leftovers
    return s


@pytest.mark.tf
def test_profile_mnist(mnist_profile):
    s = _check_profile(mnist_profile, 3)
    assert s["clusters"][0]["prediction"] == "exact"  # jitsim predicts the tutorial's cluster exactly


@pytest.mark.tf
def test_profile_keeps_xspace_for_xprof(mnist_profile):
    """Both runs' XSpace under DIR/plugins/profile/<run>/: xprof's profile plugin lists the runs
    from DIR, and the XLA-on run's file converts to a trace with the cluster's launch."""
    from types import SimpleNamespace

    from xprof import profile_plugin
    from xprof.convert import raw_to_tool_data

    s = json.loads((mnist_profile / "summary.json").read_text())
    assert set(s["xspace"]) == {"off", "on", "on_warmup"} and all(s["xspace"].values())
    ctx = SimpleNamespace(logdir=str(mnist_profile), data_provider=None,
                          flags=SimpleNamespace(master_tpu_unsecure_channel=""))
    assert sorted(profile_plugin.ProfilePlugin(ctx).generate_runs()) == ["xla_off", "xla_on", "xla_on_warmup"]
    data, _ = raw_to_tool_data.xspace_to_tool_data([str(mnist_profile / f) for f in s["xspace"]["on"]],
                                                   "trace_viewer", {})
    assert b"_XlaRun" in (data if isinstance(data, bytes) else data.encode())
    assert "--tf_xla_auto_jit=2" not in s["tf_xla_flags_effective"]["off"]


@pytest.mark.tf
def test_profile_page_in_browser(mnist_profile, browser):
    from selenium.webdriver.common.by import By

    browser.get((mnist_profile / "index.html").as_uri())
    assert browser.title.startswith("jitsim profile")
    assert severe_browser_errors(browser) == []
    s = json.loads((mnist_profile / "summary.json").read_text())
    rows = browser.find_elements(By.CSS_SELECTOR, "#clusters tr.cluster")
    assert [r.get_attribute("data-cluster") for r in rows] == [c["cluster"] for c in s["clusters"]]
    assert browser.find_element(By.ID, "ratio").text == f"{s['step_time_ratio']:.2f}"
    # every picture loaded (HLO graphs; the timelines are <object> documents), every trace link is there
    imgs = browser.find_elements(By.TAG_NAME, "img")
    assert len(imgs) >= 1
    objs = browser.find_elements(By.CSS_SELECTOR, "object.timeline")
    assert len(objs) == 2 and all(o.size["height"] > 100 for o in objs)  # the SVGs loaded (not the fallback text)
    svgs = [o.get_attribute("data") for o in objs]
    assert all(browser.execute_script("return arguments[0].complete && arguments[0].naturalWidth > 0", i) for i in imgs)
    hrefs = {a.get_attribute("href").rsplit("/", 1)[-1] for a in browser.find_elements(By.TAG_NAME, "a")}
    assert {"trace_xla_off.json", "trace_xla_on.json"} <= hrefs
    for svg in svgs:  # each drawn event has its tooltip (a file:// page cannot look inside an <object>)
        browser.get(svg)
        evs = browser.find_elements(By.CSS_SELECTOR, "g.ev")
        assert evs and len(browser.find_elements(By.CSS_SELECTOR, "g.ev > title")) == len(evs)


@pytest.mark.tf
@pytest.mark.slow
def test_profile_mnist_20_steps(tmp_path_factory):
    """The issue's acceptance command: `jitsim profile examples/mnist_softmax/mnist_softmax_xla.py --steps 20`."""
    _check_profile(_run(tmp_path_factory, 20), 20)


@pytest.mark.tf
def test_profile_graphdef_session(tmp_path):
    """A GraphDef target: its placeholders fed generated data, the step is one session run."""
    pytest.importorskip("xprof", reason="xprof is not installed (pip install -e '.[profile]')")
    import tensorflow as tf

    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, [16, 32], name="x")
        y = tf.nn.relu(tf.matmul(x, tf.constant(0.1, shape=[32, 8])) * 2.0 + 1.0)
        tf.reduce_sum(tf.tanh(y) * y, name="out")
    tf.io.write_graph(g.as_graph_def(), str(tmp_path), "g.pbtxt")
    out = tmp_path / "prof"
    assert main(["profile", str(tmp_path / "g.pbtxt"), "--steps", "2", "--warmup", "1", "-o", str(out)]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["kind"] == "graphdef" and s["xla_launches_per_step"] == {"off": 0, "on": 1}
    (c,) = s["clusters"]
    assert c["prediction"] == "exact" and c["tf_ops"].get("MatMul") == 1 and c["hlo_module"].startswith(c["cluster"])
    off = tr.read_trace(out / "trace_xla_off.json")
    assert any("MatMul" in op for op in tr.step_counts(off)["op_types"])
