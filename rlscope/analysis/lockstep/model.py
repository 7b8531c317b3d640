"""The lock-step analysis's results: each vector env with its barrier figures, the
Sampling / Optimizing table of each process holding vector envs, and the whole."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from rlscope.analysis.lockstep.batches import AsyncBatches


def straggler_min_share(n: int) -> float:
    """The share of the loss an env must cause to be called the straggler: halfway
    between an even share (1/n) and all of it."""
    return (1.0 + 1.0 / n) / 2.0


@dataclass
class VectorEnv:
    """One vector env: its envs' step times and, per vector step, the barrier."""

    pid: int  # the process holding it
    process: str
    name: str  # e.g. SubprocVecEnv#1
    cls: str
    num_envs: int
    workers: bool  # envs in worker processes (False: stepped one after another in place)
    vector_steps: int  # recorded vector steps
    complete_steps: int  # ... with every env's events found (the ones measured below)
    vector_resets: int
    step_s: float  # main-process time of the complete vector steps
    send_s: float  # ... of which sending (step start to the start of the wait); nan: unknown
    wait_s: float  # ... and waiting for the results; nan: no wait recorded
    reset_s: float  # main-process time in vector resets
    env_mean_s: float  # sum over vector steps of the mean env busy time
    env_sum_s: float  # ... of the total over envs
    slowest_s: float  # ... of the slowest env's busy time
    lockstep_loss_s: float  # sum of (slowest - mean): wall time lost to the barrier
    idle_env_s: float  # sum over steps and envs of (slowest - env): env time spent waiting
    overhead_s: float  # step_s - slowest_s (workers) or - env_sum_s (sequential)
    straggler: int | None  # env that causes most of the loss, when it stands out
    straggler_share: float  # the largest share of the loss one env causes
    envs: pd.DataFrame  # one row per env (ENV_COLUMNS)
    projections: pd.DataFrame  # PROJECTION_COLUMNS
    step_times: dict[int, np.ndarray] = field(repr=False)  # env -> each step's seconds
    per_step: pd.DataFrame = field(repr=False)  # one row per complete vector step
    busy: np.ndarray = field(repr=False)  # complete steps x envs: each env's busy seconds
    sampling_s: float = float("nan")  # the owning process's Sampling (SamplingTable)
    # Stepped one after another: the env stepped first in (nearly) every vector step, right
    # after other code (the policy), when there is one. Caches are cold there whichever
    # env it is, so its extra time is not all its own.
    first_env: int | None = None

    @property
    def loss_share(self) -> float:
        """Lock-step loss as a share of sampling time."""
        return self.lockstep_loss_s / self.sampling_s if self.sampling_s > 0 else float("nan")


ENV_COLUMNS = ["env", "pid", "name", "steps", "resets", "step_mean_ms", "step_p50_ms",
               "step_p99_ms", "step_max_ms", "reset_mean_ms", "busy_s", "slowest_steps",
               "slowest_pct", "barrier_wait_s", "loss_caused_s", "loss_caused_pct"]
PROJECTION_COLUMNS = ["design", "scenario", "step_s", "saved_s", "sampling_speedup",
                      "assumptions"]


@dataclass
class SamplingTable:
    """The seed talk's table for one process holding vector envs: Sampling (Reset,
    Inference, Step, other) and Optimizing, in seconds of that process's thread."""

    pid: int
    process: str
    sampling_s: float
    reset_s: float
    inference_s: float
    step_s: float
    other_s: float
    optimizing_s: float
    vector_steps: int

    @property
    def total_s(self) -> float:
        return self.sampling_s + self.optimizing_s


@dataclass
class Lockstep:
    vector_envs: list[VectorEnv]
    tables: list[SamplingTable]
    warnings: list[str]
    corrected: bool = False  # rlscope's own overhead removed (a calibration was applied)
    batches: list[AsyncBatches] = field(default_factory=list)  # EnvPool pools in async mode

    def envs(self) -> pd.DataFrame:
        frames = [v.envs.assign(vector_env=v.name, vector_pid=v.pid) for v in self.vector_envs]
        cols = ["vector_pid", "vector_env", *ENV_COLUMNS]
        return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(
            columns=cols)
