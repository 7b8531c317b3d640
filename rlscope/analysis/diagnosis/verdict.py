"""A run-level verdict (what limits the run, its evidence, remedy and bound) and the
vector-env library facts the remedies name."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class RunVerdict:
    """One run-level verdict: what limits the run, the evidence (numbers with the table
    they come from), the remedy for the library in use and a bound on what it saves."""

    kind: str  # "ipc", "oversubscription", "lockstep-loss", "start-up"
    verdict: str
    evidence: list[str] = field(default_factory=list)
    remedy: str = ""
    bound_s: float = 0.0  # at most this much of the run's wall time saved by the remedy
    bound_share: float = 0.0  # ... as a share of the run's wall time
    bound_of: str = ""  # what the bound is
    recurring: bool = True  # False: paid once (start-up), listed after the per-step costs
    subject: str = ""  # the vector env a lock-step verdict is about

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def library(cls: str) -> str:
    if cls in ("SubprocVecEnv", "DummyVecEnv"):
        return "sb3"
    if cls in ("AsyncVectorEnv", "SyncVectorEnv"):
        return "gymnasium"
    return ""


def in_process(cls: str) -> str:
    """The vector env that steps the same envs in the main process."""
    return {"sb3": "DummyVecEnv", "gymnasium": "SyncVectorEnv"}.get(
        library(cls), "a sequential vector env (envs stepped in the main process)")
