"""Which envs lag in an async vector env (EnvPool, PufferLib's worker backends): how often
each env was in the batches ``recv`` returned, from the counts the integrations tally on
sampled batches (format.META_ASYNC_BATCHES_PREFIX, rlscope.integrations.batches). In
async mode ``recv`` returns the first ``batch_size`` envs done, so the batches are always
full; an env that steps slower than the others is in fewer of them (with PufferLib, the
envs of its worker with it)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from rlscope.trace import format as fmt

# An env lags when it was in fewer batches than an even share by both this fraction and
# this many standard deviations of the count an even share would give (binomial).
LAG_FRACTION = 0.1
LAG_SIGMAS = 3.0


@dataclass
class AsyncBatches:
    """One async vector env's batches: per env, how many of the tallied batches held it."""

    pid: int
    process: str
    name: str  # the vector env, e.g. CartPoleGymnasiumEnvPool#1
    num_envs: int
    batch_size: int
    batches: int  # recv calls
    tallied: int  # batches whose envs were counted
    counts: np.ndarray  # per env
    library: str = "EnvPool"

    @property
    def even(self) -> float:
        """The count each env would have if all stepped at the same speed."""
        return self.tallied * self.batch_size / self.num_envs if self.num_envs else 0.0

    def relative(self) -> np.ndarray:
        """Each env's count over the even count (1.0: an even share)."""
        return self.counts / self.even if self.even > 0 else np.zeros(len(self.counts))

    def resolution(self) -> float:
        """How far below an even share (a fraction of it) an env must be to be told
        lagging from these counts."""
        if self.even <= 0:
            return float("inf")
        p = self.batch_size / self.num_envs
        sd = math.sqrt(self.tallied * p * (1.0 - p))
        return max(LAG_FRACTION, LAG_SIGMAS * sd / self.even)

    def lagging(self) -> list[int]:
        """Envs in clearly fewer batches than an even share, the most lagging first."""
        if self.num_envs < 2 or self.even <= 0:
            return []
        below = self.even - self.counts
        lag = np.flatnonzero(below > self.resolution() * self.even)
        return [int(i) for i in lag[np.argsort(self.counts[lag], kind="stable")]]


def from_metadata(pid: int, process: str, metadata: dict[str, Any]) -> list[AsyncBatches]:
    """The async vector envs one process's metadata describes (malformed entries
    skipped)."""
    out = []
    for key, v in metadata.items():
        if not key.startswith(fmt.META_ASYNC_BATCHES_PREFIX) or not isinstance(v, dict):
            continue
        try:
            counts = np.asarray(v["counts"], dtype=np.int64)
            library = v.get("library", "EnvPool")
            b = AsyncBatches(pid, process, key[len(fmt.META_ASYNC_BATCHES_PREFIX):],
                             int(v["num_envs"]), int(v["batch_size"]), int(v["batches"]),
                             int(v["tallied"]), counts,
                             library if isinstance(library, str) else "EnvPool")
        except (KeyError, TypeError, ValueError):
            continue
        if len(counts) == b.num_envs and b.num_envs > 0 and b.batch_size > 0:
            out.append(b)
    return sorted(out, key=lambda b: b.name)
