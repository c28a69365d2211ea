"""Run-time prediction: which steps compile, reuse or fall back, per compiled cluster.

policy (TF's compile/fallback/megamorphic rules), propagate (one step's concrete shapes and
values), stream (the shape stream file), simulate (signatures per step, the static answer),
tflog (TF's own log lines, for verification), table (the text rendering).
"""
