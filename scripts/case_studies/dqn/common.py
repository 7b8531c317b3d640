"""What every DQN implementation shares: hyperparameters, the initial weights (drawn once
in numpy, so all frameworks start from the same network), the replay buffer and the
thread settings. Framework-free: numpy only."""

from __future__ import annotations

import os
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

OBS_DIM, N_ACTIONS = 4, 2


@dataclass(frozen=True)
class Config:
    hidden: int = 64
    batch: int = 64
    gamma: float = 0.99
    lr: float = 1e-3
    adam_b1: float = 0.9
    adam_b2: float = 0.999
    adam_eps: float = 1e-8
    buffer: int = 10_000
    learning_starts: int = 500  # random steps that fill the buffer before training
    target_every: int = 250  # steps between copies of the online net into the target
    eps_start: float = 1.0
    eps_end: float = 0.05
    eps_fraction: float = 0.3  # of the measured steps over which epsilon decays


def init_params(cfg: Config, seed: int) -> list[np.ndarray]:
    """[W1, b1, W2, b2, W3, b3] of the 4-64-64-2 ReLU MLP (uniform fan-in init)."""
    rng = np.random.default_rng(seed)
    sizes = (OBS_DIM, cfg.hidden, cfg.hidden, N_ACTIONS)
    out: list[np.ndarray] = []
    for n_in, n_out in pairwise(sizes):
        bound = 1.0 / np.sqrt(n_in)
        out.append(rng.uniform(-bound, bound, (n_in, n_out)).astype(np.float32))
        out.append(np.zeros(n_out, np.float32))
    return out


class Replay:
    """Circular buffer of transitions in numpy arrays; uniform minibatches."""

    def __init__(self, capacity: int, seed: int) -> None:
        self.obs = np.zeros((capacity, OBS_DIM), np.float32)
        self.next_obs = np.zeros((capacity, OBS_DIM), np.float32)
        self.action = np.zeros(capacity, np.int32)
        self.reward = np.zeros(capacity, np.float32)
        self.done = np.zeros(capacity, np.float32)
        self.capacity, self.size, self.pos = capacity, 0, 0
        self.rng = np.random.default_rng(seed)

    def add(self, obs: np.ndarray, action: int, reward: float, next_obs: np.ndarray,
            terminated: bool) -> None:
        i = self.pos
        self.obs[i], self.next_obs[i] = obs, next_obs
        self.action[i], self.reward[i], self.done[i] = action, reward, float(terminated)
        self.pos = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, n: int) -> tuple[np.ndarray, ...]:
        idx = self.rng.integers(0, self.size, n)
        return (self.obs[idx], self.action[idx], self.reward[idx], self.next_obs[idx],
                self.done[idx])


def pin_threads() -> None:
    """One intra-op thread everywhere (set before the frameworks are imported): with two
    threads on a shared 2-core machine, runs swing by up to 10x."""
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        os.environ.setdefault(var, "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_multi_thread_eigen" not in flags:
        os.environ["XLA_FLAGS"] = (flags + " --xla_cpu_multi_thread_eigen=false "
                                   "intra_op_parallelism_threads=1").strip()
