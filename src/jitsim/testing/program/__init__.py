"""Generated TensorFlow programs: one small description, two renderings.

A :class:`Program` is a ``tf.function`` body written as typed statements (``v3 = Sin(v1)``,
``var0 += v2``, ``v5 = cond(sum(v1) > 0, then, else)``, ...). It renders as

* **Python source** (:func:`to_python`): a standalone TF program with deterministic inputs,
  one ``@tf.function f`` (plus nested ``tf.function``s), every op spelled as ``tf.raw_ops.<Op>``
  and named after its statement, so TF's dumps carry the program's own names
  (``v3``, ``a4``...). This is what the differential tests run under real TF;
* **a GraphDef** (:func:`to_graphdef` / :func:`to_graph`) shaped like TF's
  ``before_clone_constants_for_better_clustering`` dump of that function: ``_Arg``/``_Retval``,
  devices set, attrs filled from the op registry, ``tf.cond`` / ``tf.while_loop`` lowered to
  Switch/Merge/Enter/Exit/NextIteration as TF's LowerFunctionalOpsPass does, non-jit nested
  functions inlined and ``jit_compile`` ones kept as calls into the library. This is what the
  TF-free invariant tests feed jitsim. It is a faithful *kind* of graph, not TF's exact graph
  (no Grappler).

Values are tensors of three shapes (``v`` = ``[4]``, ``s`` = ``[]``, ``m`` = ``[2, 2]``) and
five dtypes (``f`` float32, ``i`` int32, ``h`` int16, ``s`` string, ``b`` bool); each op
kind of :data:`CATALOG` says which it takes and makes, so every program is valid by
construction and any statement can be replaced by a constant of its type, which is how
counterexamples shrink (:func:`reductions`).

One job a module: :mod:`.model` (types, op catalogue, statements, validation),
:mod:`.python` (Python source), :mod:`.graphdef` (the GraphDef), :mod:`.shrinking`
(shrinking) and :mod:`.serialize` (JSON). This package re-exports their public names.
"""

from __future__ import annotations

_MODEL = ("CATALOG", "DTYPES", "SHAPES", "Arg", "Block", "C", "Call", "Cond", "Const", "DType", "E", "Function",
          "Group", "Kind", "Op", "Print", "Read", "Val", "Variable", "While", "Write", "const_values", "validate")
# Names resolved on first use from the module that defines them (PEP 562), so that a submodule
# never imports its package back. ``Program`` comes through the Python rendering, which gives
# it its repr (the program's source, which is how Hypothesis shows a failing example).
_LAZY = {
    **{name: "jitsim.testing.program.model" for name in _MODEL},
    "Program": "jitsim.testing.program.python",
    "body_source": "jitsim.testing.program.python",
    "header_source": "jitsim.testing.program.python",
    "to_python": "jitsim.testing.program.python",
    "to_graph": "jitsim.testing.program.graphdef",
    "to_graphdef": "jitsim.testing.program.graphdef",
    "chunk_reductions": "jitsim.testing.program.shrinking",
    "reductions": "jitsim.testing.program.shrinking",
    "program_from_json": "jitsim.testing.program.serialize",
    "program_to_json": "jitsim.testing.program.serialize",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'jitsim.testing.program' has no attribute {name!r}")
