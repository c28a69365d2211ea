"""jitsim's modules import each other without cycles, and no import hides inside a function
for nothing.

The graph: one node per module of ``src/jitsim``; an edge for every ``import`` statement
naming a jitsim module, wherever it stands (module level, function, method), resolved to
the most specific module (``from jitsim.registry import protos`` is an edge to
``jitsim.registry.protos``). Importing ``a.b.c`` also runs the ``__init__`` of ``a`` and ``a.b``,
so those are edges too. Imports of other packages (TensorFlow, numpy, graphviz, selenium,
xprof...) are no edges: they cannot close a cycle through jitsim.

Rules (each a test below):

1. **Packages in layers.** Each package of ``jitsim`` (and each top-level module) sits in one
   layer of :data:`LAYERS` and imports only from lower layers: no package-level cycle, and
   the order is written down (docs/architecture.md draws it).
2. **No cycles** between modules, counting function-local imports. A local import never hides a cycle,
   because it is in the graph like any other.
3. **A function-local import of a jitsim module must defer something**: the module must not
   already be loaded when the importing module is (through its module-level imports,
   transitively, and its packages). Local imports are how jitsim keeps start-up cheap
   (the CLI's parser loads the named command's module; ``pipeline`` loads the passes
   after the requested stage only when asked; the registry parses protos on first use;
   pictures load graphviz only when drawn), and that is the only reason for one. A local
   import of a module that is loaded anyway buys nothing and reads as a dodged cycle: it
   belongs at the top of the module.

Not counted: names a package resolves on attribute access through ``importlib`` (PEP 562
``__getattr__`` in ``jitsim/__init__.py``, ``jitsim/graph/__init__.py`` and
``jitsim/testing/program/__init__.py``): importing a
submodule never runs them, and the modules they name import nothing back through them.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "jitsim"


def _modules() -> dict[str, tuple[Path, bool]]:
    out = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_pkg = parts[-1] == "__init__"
        if is_pkg:
            parts = parts[:-1]
        out[".".join(parts)] = (path, is_pkg)
    return out


MODULES = _modules()


def _resolve(name: str) -> str | None:
    """The most specific jitsim module ``name`` (a module or module.attribute) lives in."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _with_packages(module: str) -> list[str]:
    parts = module.split(".")
    return [m for m in (".".join(parts[:i]) for i in range(1, len(parts) + 1)) if m in MODULES]


def _imports(module: str) -> list[tuple[str, bool, int]]:
    """``(imported module, inside a function, line)`` for every jitsim import of ``module``."""
    path, is_pkg = MODULES[module]
    package = module if is_pkg else module.rpartition(".")[0]
    found: list[tuple[str, bool, int]] = []

    def visit(node: ast.AST, local: bool) -> None:
        for child in ast.iter_child_nodes(node):
            in_function = local or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            names: list[str] = []
            if isinstance(child, ast.Import):
                names = [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package.split(".")[: len(package.split(".")) - (child.level - 1)]
                    target = ".".join(base + ([child.module] if child.module else []))
                else:
                    target = child.module or ""
                names = [f"{target}.{a.name}" for a in child.names]
            for name in names:
                if name == PACKAGE or name.startswith(PACKAGE + "."):
                    resolved = _resolve(name)
                    if resolved is not None:
                        found.append((resolved, in_function, child.lineno))
            visit(child, in_function)

    visit(ast.parse(path.read_text(), filename=str(path)), False)
    return found


IMPORTS = {m: _imports(m) for m in MODULES}


def _graph(*, local: bool) -> nx.DiGraph:
    g = nx.DiGraph()
    g.add_nodes_from(MODULES)
    for module, imports in IMPORTS.items():
        for target, in_function, line in imports:
            if in_function and not local:
                continue
            for m in _with_packages(target):
                if m != module and not module.startswith(m + "."):
                    g.add_edge(module, m, line=line)
        for m in _with_packages(module):  # a module's packages run first
            if m != module and not _imports_child(m, module):
                g.add_edge(module, m, line=0)
    return g


def _imports_child(package: str, module: str) -> bool:
    """A package that imports its own submodule ``module`` runs first and then loads it: the
    usual order, no cycle (``registry/__init__`` parses its data with ``registry.protos``)."""
    return any(t == module or t.startswith(module + ".") for t, _, _ in IMPORTS[package])


def test_the_scan_sees_the_package():
    assert {"jitsim.cli", "jitsim.passes.pipeline", "jitsim.registry.protos"} <= set(MODULES)
    assert any(t == "jitsim.graph.tfgraph" for t, _, _ in IMPORTS["jitsim.passes.pipeline"])


def test_no_import_cycles():
    g = _graph(local=True)
    cycles = [sorted(c) for c in nx.strongly_connected_components(g) if len(c) > 1]
    described = []
    for c in cycles:
        edges = [f"{a} -> {b} ({MODULES[a][0].name}:{g[a][b]['line']})" for a in c for b in g[a] if b in c]
        described.append("; ".join(edges))
    assert not described, "import cycles:\n" + "\n".join(described)


def test_function_local_imports_defer_something():
    top = _graph(local=False)
    pointless = []
    for module, imports in IMPORTS.items():
        loaded = nx.descendants(top, module) | {module}
        for target, in_function, line in imports:
            if in_function and target in loaded:
                pointless.append(f"{MODULES[module][0].relative_to(SRC)}:{line}: {target} is loaded with {module} anyway")
    assert not pointless, "function-local imports that defer nothing (move them to the top):\n" + "\n".join(pointless)


# The packages from the bottom up (docs/architecture.md, "Layers"). A unit is a package of
# jitsim or one of its top-level modules; ``jitsim`` itself is the lazy API root (its
# ``__init__`` imports nothing).
LAYERS = [
    ("jitsim", "jitsim.defs", "jitsim.errors", "jitsim.accel", "jitsim.beside", "jitsim.words"),
    ("jitsim.opsets",),                      # TF's op categories (over defs' names)
    ("jitsim.codes",),                       # the decision codes (the catalogue)
    ("jitsim.records",),                     # the decision records, for every pass, analysis, rewrite
    ("jitsim.files",),                       # reading and writing files
    ("jitsim.registry", "jitsim.process"),   # TF registries as data; the command process
    ("jitsim.graph", "jitsim.flags"),        # graph models and their I/O; TF_XLA_FLAGS
    ("jitsim.options",),                     # what one simulation runs with (flags, release, session...)
    ("jitsim.tfprocess",),                   # real TF's processes: the sandbox, the runners, a harvest
    ("jitsim.analyses",),                    # what TF's passes consult
    ("jitsim.rewrites",),                    # what TF does before its JIT passes
    ("jitsim.passes", "jitsim.memory"),      # TF's JIT passes and their pipeline; memory bounds
    ("jitsim.testing",),                     # program generators and invariants
    ("jitsim.crosscheck",),                  # real TF: harvests, dumps compared
    ("jitsim.frontend",),                    # what users hold -> TF's pass input
    ("jitsim.simulation",),                  # the front door: pass input, release, options, pipeline
    ("jitsim.explain", "jitsim.runtime", "jitsim.profile"),
    ("jitsim.cli",),
    ("jitsim.__main__",),
]
LAYER_OF = {unit: i for i, units in enumerate(LAYERS) for unit in units}


def _unit(module: str) -> str:
    return ".".join(module.split(".")[:2])


def test_every_package_has_a_layer():
    units = {_unit(m) for m in MODULES}
    assert units == set(LAYER_OF), f"not in LAYERS: {sorted(units - set(LAYER_OF))}; gone: {sorted(set(LAYER_OF) - units)}"


def test_the_root_package_imports_nothing():
    assert IMPORTS["jitsim"] == []


def test_packages_import_only_lower_layers():
    wrong = []
    for module, imports in IMPORTS.items():
        a = _unit(module)
        for target, _, line in imports:
            b = _unit(target)
            if a != b and LAYER_OF[b] >= LAYER_OF[a]:
                wrong.append(f"{MODULES[module][0].relative_to(SRC)}:{line}: {a} (layer {LAYER_OF[a]}) imports "
                             f"{target} (layer {LAYER_OF[b]})")
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_no_package_level_cycle():
    g = nx.DiGraph()
    for module, imports in IMPORTS.items():
        for target, _, _ in imports:
            if _unit(module) != _unit(target):
                g.add_edge(_unit(module), _unit(target))
    assert nx.is_directed_acyclic_graph(g), list(nx.simple_cycles(g))[:3]
