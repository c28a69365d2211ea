#!/usr/bin/env python3
"""Generate docs/reasons.md from the code catalogue (jitsim.codes.Code) and the examples in
fixtures/reasons/.

    python docs/tools/reasons_md.py            # rewrite docs/reasons.md
    python docs/tools/reasons_md.py --check    # exit 1 if docs/reasons.md is not current

A source-checkout tool (like rewrite_spec_refs.py): it reads fixtures/reasons/, which the
installed package does not ship. Each example is run through jitsim (``jitsim.cluster`` on the
example's graph) so the page shows what jitsim says today; tests/test_docs.py keeps the page
current.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from jitsim.codes import Code

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "reasons.md"
EXAMPLES = ROOT / "fixtures" / "reasons"

# the page's sections: (kind, heading); node and merge codes have examples
GROUPS = (("node", "Node decisions (candidate filters, cluster outcome, later passes)"),
          ("merge", "Refused merges (in TF's check order)"))
RECORD_GROUPS = (("arg", "Cluster arguments (EncapsulateSubgraphs: `encapsulate_subgraphs` decisions' `args[].kind`)"),
                 ("cluster", "Cluster compilation modes (BuildXlaOps: `build_xla_ops` decisions' `reasons`)"),
                 ("rewrite", "Rewrites before clustering (the TF-free route's steps: inlining, placement, "
                             "Grappler)"))


def _examples_module():
    """fixtures/reasons/examples.py, loaded once under one module name."""
    path = EXAMPLES / "examples.py"
    name = "jitsim_reason_examples"
    if name in sys.modules and getattr(sys.modules[name], "__file__", None) == str(path):
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _example_section(store, ex) -> list[str]:
    """Markdown for one example: the case, its program (or TF's reasoning) and jitsim's answer."""
    case = store.cases[ex.case]
    rel = "../fixtures/reasons/"
    if case.kind == "unreachable":
        return [f"**Never produced by TF 2.21.** {case.why}", "",
                f"Checked by `tests/test_reason_examples.py::{case.test}`.", ""]
    out = []
    c = store.clustering(ex)
    if case.kind == "tf":
        g = store.graph(ex)
        graph_file = g.input.name
        out += [f"**Example** (real TF 2.21, case `{case.name}`, `TF_XLA_FLAGS=\"{case.flags}\"`): "
                f"[`programs/{case.program}`]({rel}programs/{case.program})", "",
                "```python", case.program_path(store.root).read_text().rstrip(), "```", ""]
    else:
        graph_file = f"fixtures/reasons/{case.hand}"
        out += [f"**Example** (hand-derived: TF on a CPU build does not make this decision; "
                f"graph [`{case.hand}`]({rel}{case.hand})). {case.why}", ""]
    cmd = f"jitsim explain {graph_file} {ex.node}" + (f" {ex.other}" if ex.other else "")
    cmd += f" --no-default-flags --tf-xla-flags \"{case.flags}\"" + "".join(f" --exclude-op {op}" for op in ex.exclude_ops)
    if case.hand:
        cmd += " --input-stage graphdef"
    if ex.other:
        text = str(c.explain(ex.node, ex.other))
    elif ex.node in c.nodes:
        text = str(c.explain(ex.node))
    else:  # removed by a later pass: only the pass's own record knows it
        stage, d = next((name, res.decisions[ex.node]) for name, res in c.pipeline.stage_results.items()
                        if ex.node in (getattr(res, "decisions", None) or {}))
        cmd = (f"jitsim.cluster(\"{graph_file}\", flags=\"{case.flags}\")"
               f".pipeline.stage_results[\"{stage}\"].decisions[\"{ex.node}\"]")
        text = (f"{ex.node}: {d.code} ({Code(d.code).title})\n  TF says:   {d.detail}\n"
                + "\n".join(f"  evidence:  {k}: {v}" for k, v in d.evidence.items()))
        out += [f"`{ex.node}` no longer exists after the rewrite, and `jitsim explain` only names nodes of the "
                "final graph; the pass's own record says:", ""]
    if ex.field == "inner_code":
        out += [f"The decision is about a node inside the called function, so the call's explanation "
                f"carries it as `inner_code: {ex.code}`:", ""]
    elif ex.field == "history":
        out += [f"`{ex.code}` annotates the node without changing its cluster state: it appears in the "
                "node's `history`, while its reason stays mark-for-compilation's:", ""]
    out += [f"`{cmd}`:", "", "```", text, "```", ""]
    if ex.code == "GRAPH_NO_CANDIDATES":
        gd = c.graph_decision
        out += [f"The graph-level decision (`jitsim cluster {graph_file} --format json`, `graph_decision`): "
                f"`{gd.code}` ({gd.detail}).", ""]
    return out


def _entry(c: Code) -> list[str]:
    lines = [f"<a id=\"{c.value.lower()}\"></a>", "", f"### `{c.value}`: {c.title}", ""]
    if c.explanation:
        lines += [c.explanation, ""]
    facts = ([f"- **What you can change:** {c.hint}"] if c.hint else []) + (
        [f"- **TF's log words:** `{c.tf_log}`"] if c.tf_log else [])
    return lines + facts + ([""] if facts else [])


def reasons_markdown() -> str:
    """docs/reasons.md, generated from the catalogue and the examples in fixtures/reasons/."""
    lines = [
        "# Reason codes",
        "",
        "Every decision jitsim records carries one of these stable codes (`--format json`: `nodes.<name>.code`",
        "and `refused_merges[].code`). Generated from the catalogue `jitsim/codes.py` and the examples in",
        "[`fixtures/reasons/`](../fixtures/reasons/) by `python docs/tools/reasons_md.py`;",
        "a test keeps the two in sync. Adding a code: [recipes.md](recipes.md#adding-a-reason-code).",
        "",
        "Each code has a minimal example: a small TensorFlow program whose clustering, run under real",
        "TF 2.21 (`fixtures/reasons/generate.py` stores TF's dumps and log), makes that decision, and",
        "what `jitsim explain` says about it on TF's own input graph. `tests/test_reason_examples.py`",
        "checks each one: TF's dumps show the decision, jitsim reports the code with the evidence shown,",
        "and TF's log has the words quoted under *TF's log words*. A few decisions TF on a CPU build",
        "cannot make are shown on hand-derived graphs, with TF's reasoning; two are never produced.",
        "",
        "<a id=\"words\"></a>",
        "",
        "## Words in the tables",
        "",
        "- **candidate**: a node that passed every candidate filter of mark-for-compilation (an XLA",
        "  kernel for its device, its op allowed by the flags, none of the node decisions below that",
        "  keep a node out before clustering). Only candidates can join a cluster; `jitsim cluster`'s",
        "  first line counts them.",
        "- **nodes** (cluster table): every node the pass put in the cluster, constants and identities",
        "  included.",
        "- **effective** (effective size): what TF counts against `--tf_xla_min_cluster_size` (4 by",
        "  default): each member counts 1, except constants and identity-like ops, which count 0. A",
        "  cluster under the minimum is dissolved and its nodes get `CLUSTER_TOO_SMALL`.",
        "- **reason**: the stable code of the node's decision, one of the codes below; `jitsim explain",
        "  GRAPH NODE` prints the whole record for one node (TF's words and the evidence).",
        "",
    ]
    store = _examples_module().Examples(EXAMPLES)
    try:
        firsts = store.by_code()
        kinds = {code: store.cases[exs[0].case].kind for code, exs in firsts.items()}
        label = {"tf": "real TF", "hand": "hand-derived", "unreachable": "never produced"}
        lines += ["## Summary", ""]
        for kind, title in GROUPS:
            lines += [f"**{title}**", "", "| code | meaning | example |", "|---|---|---|"]
            for c in Code:
                if c.kind == kind:
                    ex = firsts.get(c.value, [None])[0]
                    where = f"`{ex.case}` ({label[kinds[c.value]]})" if ex is not None else ""
                    lines.append(f"| [`{c.value}`](#{c.value.lower()}) | {c.title} | {where} |")
            lines.append("")
        for kind, title in GROUPS:
            lines += [f"## {title}", ""]
            for c in Code:
                if c.kind == kind:
                    lines += _entry(c)
                    if c.value in firsts:
                        lines += _example_section(store, firsts[c.value][0])
    finally:
        store.close()
    lines += ["## Codes of the other records", "",
              "Not node decisions: what the passes record about a cluster's arguments and compilation mode, "
              "and about the rewrites before clustering (`jitsim.records`). Same catalogue, no colour in the "
              "pictures (family `record`).", ""]
    for kind, title in RECORD_GROUPS:
        lines += [f"**{title}**", "", "| code | meaning | what TF does |", "|---|---|---|"]
        lines += [f"| <a id=\"{c.value.lower()}\"></a>`{c.value}` | {c.title} | {c.explanation} |"
                  for c in Code if c.kind == kind]
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str]) -> int:
    text = reasons_markdown()
    if "--check" in argv:
        if DOC.read_text() != text:
            print(f"{DOC.relative_to(ROOT)} is not current: run python docs/tools/reasons_md.py", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(text)
    print(f"wrote {DOC.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
