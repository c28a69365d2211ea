"""The shortcuts that make encapsulate-subgraphs fast give the same answers as the plain
algorithms they skip (issue 25).

* ``FunctionOptimizer._may_fold``: constant folding is skipped when no node other than a
  constant can fold. Reference: always run the name-ordered walk.
* ``FunctionOptimizer.cse``: nodes are bucketed by op and inputs and their output types and
  attrs are read only on a clash; a node with one in-edge is keyed without sorting. Reference: TF's one hash of everything per node (below).
* ``_RefVars._body_has_refs``: a callee body without function calls is answered without the
  fixpoint, and otherwise from its first round. Reference: the full fixpoint.
* ``normalize_arg_name``: a byte table. Reference: the per-character rule of its docstring.

Each comparison runs the whole pass on TF's ``encapsulate_subgraphs_before`` dumps of corpus
runs and compares the output graph, the dump TF writes and every cluster decision.
"""

from __future__ import annotations

import os
import random

import pytest

from jitsim.crosscheck.corpus import Corpus
from jitsim.graph import load
from jitsim.graph.function_def import merge_debug_info, normalize_arg_name
from jitsim.graph.tfgraph import tfgraph_from_dump
from jitsim.opsets import FEEDABLE_PLACEHOLDER_OPS
from jitsim.options import options_for
from jitsim.passes import encapsulate as enc
from jitsim.registry.optypes import is_ref_type
from jitsim.rewrites import function_optimizer as fo

BEFORE = "encapsulate_subgraphs_before"
# runs with ref variables, function calls in clusters, loops, folding, many small clusters
RUNS = ("tf1_ref_variables", "nested_functions", "while_loop_numeric", "cond_compilable_min1",
        "switch_case", "attention_block_max3_min1", "mlp_train_adam", "tiny_pieces_min1",
        "complex_math", "decluster_shapes_min1")


def _reference_inputs(self, n):
    data, ctrl = [], []
    for e in n.in_edges.values():
        if e.is_control:
            ctrl.append(e.src)
        else:
            data.append((e.dst_input, e.src, e.src_output))
    data.sort()
    ins = [(s, o) for _, s, o in data]
    if self.types.is_commutative(n.op):
        ins.sort()
    ctrl.sort()
    return tuple(ins), tuple(ctrl)


def _reference_cse(self) -> bool:
    """TF's ``OptimizeCSE`` as written before the bucketing: every node's full key at once."""
    g, types = self.g, self.types
    order = fo._post_order(g)
    order.reverse()
    available = {}
    changed = False
    merged = []
    for n in order:
        if not n.is_op or n.op in FEEDABLE_PLACEHOLDER_OPS:
            continue
        ins, ctrl = _reference_inputs(self, n)
        attrs = tuple(sorted((k, v.SerializeToString(deterministic=True)) for k, v in n.attr.items()))
        key = (n.op, tuple(types.outputs(n.nodedef)), ins, attrs)
        cand = available.get(key)
        if cand is None:
            available[key] = n
            continue
        if types.is_stateful(cand.op):
            continue
        if any(is_ref_type(t) for t in types.inputs(cand.nodedef)) or any(
                is_ref_type(t) for t in types.inputs(n.nodedef)):
            continue
        if _reference_inputs(self, cand)[1] != ctrl:
            continue
        for e in list(n.out_edges.values()):
            g.add_edge(cand.id, e.src_output, e.dst, e.dst_input)
        merge_debug_info(n.nodedef, cand.nodedef)
        g.remove_node(n.id)
        merged.append((n.name, cand.name))
        changed = True
    if merged:
        self.report.setdefault("cse_merged", []).extend({"removed": a, "kept": b} for a, b in merged)
    return changed


def _reference_body_has_refs(self, body, forward, depth) -> bool:
    found: set[int] = set()
    self._direction(body, forward, depth, found)
    return bool(found)


def _outputs(run_dir, files, flags):
    before = load(os.path.join(run_dir, "dumps", files[BEFORE]))
    res = enc.encapsulate_subgraphs(tfgraph_from_dump(before), flags)
    return (res.graph.to_graphdef().SerializeToString(deterministic=True),
            res.dump_graphdef().SerializeToString(deterministic=True),
            {name: d.to_json() for name, d in res.decisions.items()})


@pytest.mark.parametrize("run", RUNS)
def test_shortcuts_match_the_plain_algorithms(run, monkeypatch):
    corpus = Corpus()
    graphs = [g for g in corpus.index(run)["graphs"] if BEFORE in g["files"]]
    if not graphs:
        pytest.skip("TF wrote no encapsulate dumps in this run")
    run_dir = corpus.extract(run)
    flags = options_for(corpus.run(run).flags)
    fast = [_outputs(run_dir, g["files"], flags) for g in graphs]
    monkeypatch.setattr(fo.FunctionOptimizer, "_may_fold", lambda self: True)
    monkeypatch.setattr(fo.FunctionOptimizer, "cse", _reference_cse)
    monkeypatch.setattr(enc._RefVars, "_body_has_refs", _reference_body_has_refs)
    plain = [_outputs(run_dir, g["files"], flags) for g in graphs]
    for g, a, b in zip(graphs, fast, plain):
        assert a == b, f"graph {g['id']} of {run}: the shortcuts change the result"


def _reference_normalize(name: str) -> str:
    """The docstring's rule, character by character over the UTF-8 bytes."""
    chars = [chr(b).lower() if b < 128 and chr(b).isalnum() else "_" for b in name.encode()]
    for i, c in enumerate(chars):
        if c.isalpha():
            return "".join(chars[i:])
    return "unknown"


def test_normalize_arg_name_matches_its_rule():
    rng = random.Random(25)
    alphabet = [chr(i) for i in range(256)] + ["é", "中", "\U0001F600", "ß", "İ", "Ⅻ", "²", "٣"]
    names = ["", "_", "0", "Sum_0_retval", "0/x:1", "_1", "a", "Z9"]
    names += ["".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(20000)]
    for name in names:
        assert normalize_arg_name(name) == _reference_normalize(name), repr(name)
