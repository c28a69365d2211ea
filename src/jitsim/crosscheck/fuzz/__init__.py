"""Differential fuzzing against real TensorFlow: generated programs, TF's dumps, jitsim's prediction.

A campaign (``jitsim crosscheck fuzz --examples N --seed S``):

1. draws N programs (:func:`jitsim.testing.strategies.programs`, Hypothesis seeded with S)
   and one process configuration (TF_XLA_FLAGS, logical CPU devices) per batch;
2. runs each batch in **one** TF process (TF's start-up costs ~3 s; a batch of 40 programs
   costs ~10 s): every program is a file ``ex<id>.py`` run in turn, a marker line on stderr
   before each, so the dumps TF writes can be attributed to the program that caused them;
3. replays jitsim on every graph TF instantiated, in TF's order with one simulated process
   (fuel and cluster counters carry over, as in TF), starting from TF's own
   ``before_clone_constants_for_better_clustering`` dump, and compares every stage TF dumped:
   ``mark`` (partition *and* cluster names), ``mark`` again from ``before_mark_for_compilation``,
   ``decluster`` (``encapsulate_subgraphs_before``), ``encapsulate``
   (``encapsulate_subgraphs_after``), ``build-xla-ops`` (``build_xla_ops``), plus jitsim's own
   structural invariants (:mod:`jitsim.testing.invariants`) on TF's input graph;
4. runs the programs where jitsim differs from TF again under TF (the batch's differing programs
   reversed in one process, then each alone: :func:`tf_stability`) and compares TF with itself at
   the stage, cluster names canonicalised (:func:`canonical_form`): a difference where TF's own
   output changed is *TF-unstable* (evidence under ``OUT/tf-unstable/ex<id>/``), not a
   disagreement; every other difference is one, on a graph TF rebuilt or not;
5. shrinks each disagreeing program against TF (greedy one-step reductions, every round's
   candidates in one TF process) and writes a reproducer directory: ``program.py``,
   ``config.json``, TF's input graph, TF's and jitsim's graphs at the stage, the diff, and a
   standalone harvest of the program (``harvest/``) -- what a fixture under ``fixtures/fuzz/``
   keeps (see docs/fuzzing.md).

The last line of a campaign is ``N examples, M disagreements`` (M = examples with at least
one disagreement; TF-unstable differences and known TF nondeterminism do not count).

Layers, one module each: :mod:`~jitsim.crosscheck.fuzz.examples` (the programs),
:mod:`~jitsim.crosscheck.fuzz.tf_runner` (TF processes), :mod:`~jitsim.crosscheck.fuzz.check`
(jitsim against TF's dumps), :mod:`~jitsim.crosscheck.fuzz.stability` (TF against TF),
:mod:`~jitsim.crosscheck.fuzz.evaluate` (one round), :mod:`~jitsim.crosscheck.fuzz.shrink`,
:mod:`~jitsim.crosscheck.fuzz.reproducers` (reproducers, fixtures) and
:mod:`~jitsim.crosscheck.fuzz.campaign` (the driver).
"""
