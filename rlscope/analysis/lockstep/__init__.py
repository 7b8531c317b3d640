"""Vector environments in lock-step: per env step times, the barrier wait of every vector
step, the straggler, IPC overhead, the Sampling / Optimizing table and projections
(``rls-analyze lockstep``; definitions in docs/multiprocess.md).

Input is what rlscope.integrations.vecenv records: in the process holding a vector env,
each vector step as an ENV_STEP pair with env index -1 named after the vector env (its
wait part a WAIT_CALL ``<class>.step_wait``), vector resets likewise; every env's own
steps and resets with its env index, in its worker (metadata format.META_VECENV names the
vector env it serves) or, for the sequential classes, nested in the vector step. An env
event belongs to the vector step whose interval contains its start: every process of a
host reads the same CLOCK_MONOTONIC, and a worker can only start an env step after the
actions were sent and must end it before the result is received. A step command that
also resets (SB3 auto-reset, gymnasium's next-step autoreset) counts both toward that
vector step. A barrier over Ray workers (RLlib's EnvRunnerGroup: rlscope.integrations.rllib)
is announced with a ``key`` its workers record instead of the holder's pid, and its
events are told from the workers' own vector envs' by name. EnvPool pools in async mode
have no per-env events: which envs lag comes from the env ids of sampled batches
(rlscope.analysis.lockstep.batches). Pure data: no rendering here
(rlscope.reporters.lockstep).
"""

from rlscope.analysis.lockstep.barrier import analyze, has_vector_envs
from rlscope.analysis.lockstep.batches import AsyncBatches
from rlscope.analysis.lockstep.model import (
    ENV_COLUMNS,
    PROJECTION_COLUMNS,
    Lockstep,
    SamplingTable,
    VectorEnv,
    straggler_min_share,
)
from rlscope.analysis.lockstep.reader import ProcessEvents, from_trace

__all__ = ["ENV_COLUMNS", "PROJECTION_COLUMNS", "AsyncBatches", "Lockstep", "ProcessEvents",
           "SamplingTable", "VectorEnv", "analyze", "from_trace", "has_vector_envs",
           "straggler_min_share"]
