"""The programs a campaign runs: :class:`Example` (a generated program and its process
configuration) and :func:`draw_examples` (Hypothesis, seeded).
"""

from __future__ import annotations

from dataclasses import dataclass

from jitsim.errors import JitsimError


@dataclass
class Example:
    id: int
    program: object  # testing.program.Program
    flags: str
    devices: int
    grappler: bool = True

    def source(self) -> str:
        from jitsim.testing.program import body_source

        return body_source(self.program)


def draw_examples(n: int, seed: int, *, batch_size: int = 40, profile: str = "full", features=None) -> list[Example]:
    """N programs and their process configuration, reproducibly from ``seed``.

    ``profile``: ``full`` (every feature, any flags), ``ci`` (same programs, flags limited to
    the default and one varied configuration so that the sample runs in two TF processes),
    ``no-grappler`` (any flags, Grappler off in every process: TF then clusters graphs it never
    rebuilt, whose edge order jitsim reconstructs from node names -- see docs/fuzzing.md), ``large`` (as
    ``full`` with programs up to 30 top-level statements and control flow three deep)."""
    try:
        from hypothesis import HealthCheck, Phase, given, settings
        from hypothesis import seed as hseed
    except ImportError:
        raise JitsimError("generating programs needs Hypothesis: pip install 'jitsim[fuzz]'") from None
    from jitsim.testing.strategies import (
        BASE_FLAGS, Features, ProcessConfig, process_configs, programs, same_draws_everywhere,
    )

    if features is None and profile == "large":
        features = Features(max_statements=30, block_statements=5, max_depth=3)

    drawn: list = []
    common = dict(database=None, phases=[Phase.generate], deadline=None, suppress_health_check=list(HealthCheck),
                  derandomize=False)

    @hseed(seed)
    @settings(max_examples=max(1, n), **common)
    @given(programs(features))
    def draw_programs(p):
        if len(drawn) < n:
            drawn.append(p)

    with same_draws_everywhere():  # the seed alone decides (not what the process imported)
        draw_programs()
    while len(drawn) < n:  # Hypothesis stops early only if it ran out of distinct examples
        drawn.append(drawn[len(drawn) % max(1, len(drawn))])
    n_batches = max(1, -(-n // batch_size))
    configs: list = []
    if profile == "ci":
        configs = [ProcessConfig(BASE_FLAGS, 1), ProcessConfig(
            BASE_FLAGS + " --tf_xla_min_cluster_size=2 --tf_xla_max_cluster_size=5", 2)]
    else:
        @hseed(seed + 1)
        @settings(max_examples=max(1, 4 * n_batches), **common)
        @given(process_configs(grappler="off" if profile == "no-grappler" else "on"))
        def draw_configs(c):
            if len(configs) < n_batches and c not in configs:
                configs.append(c)

        with same_draws_everywhere():
            draw_configs()
        if not configs:
            configs = [ProcessConfig(BASE_FLAGS, 1)]
    out = []
    for i, p in enumerate(drawn):
        if profile == "ci":  # half the sample in each configuration
            c = configs[i * len(configs) // max(1, n)]
        else:
            c = configs[(i // batch_size) % len(configs)]
        out.append(Example(i, p, c.flags, c.devices, c.grappler))
    return out
