"""Actor/learner runs (Ray, RLlib's new API stack): per training iteration, sampling,
learner update, weight sync and waiting per role, and the part on the critical path
(``iterations``); docs/ray.md#training-iterations."""

from rlscope.analysis.actors.iterations import (
    ITERATION_COLUMNS,
    ROLE_COLUMNS,
    Iterations,
    analyze,
    role_summary,
)

__all__ = ["ITERATION_COLUMNS", "ROLE_COLUMNS", "Iterations", "analyze", "role_summary"]
