"""The libraries rlscope instruments, as data: for each one, the module whose import
triggers it and the function that installs it (docs/attribution.md).

``rlscope.intercept.enable`` reads this table; the installers live in
:mod:`rlscope.intercept` (backends, simulators, waits: call wrappers) and
:mod:`rlscope.integrations` (RL libraries: operations, phases, progress, process roles),
and are looked up by name when their library is imported. This module imports nothing
from rlscope, so neither of those packages imports the other through it. Every profiled
process imports it: standard library only, nothing typing needs at run time.

Adding a library: a row in :data:`LIBRARIES` (its ``install(module, patcher) -> int``
returns how many attributes it replaced), its group below if it produces call events,
and an alias if users may spell it otherwise.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # typing is for the type checker: every profiled process imports this
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from types import ModuleType
    from typing import Any

    Installer = Callable[[ModuleType, Any], int]  # (module, rlscope.intercept.patch.Patcher)

_I = "rlscope.intercept."
_RL = "rlscope.integrations."
# name -> (module whose import triggers it, "package.module:function" that installs it)
LIBRARIES: dict[str, tuple[str, str]] = {
    "torch": ("torch", _I + "torch_backend:install"),
    "tensorflow": ("tensorflow", _I + "tf_backend:install"),
    "keras": ("keras", _I + "tf_backend:install_keras"),  # phase markers only (inferred ops)
    "jax": ("jax", _I + "jax_backend:install"),
    # JIT compilers' compile events (metadata, only when they compile; no call events)
    "torch-compile": ("torch._dynamo", _I + "compilers:install_torch"),
    "jax-compile": ("jax", _I + "compilers:install_jax"),
    "tf-compile": ("tensorflow", _I + "compilers:install_tf"),
    "mujoco": ("mujoco", _I + "simulators:install_mujoco"),
    "box2d": ("Box2D", _I + "simulators:install_box2d"),
    "ale": ("ale_py", _I + "simulators:install_ale"),
    "pybullet": ("pybullet", _I + "simulators:install_pybullet"),
    # os triggers it (always imported); the other modules are hooked from there.
    "wait": ("os", _I + "waits:install"),
    "gym": ("gymnasium", _RL + "gymnasium:install"),
    "gym-legacy": ("gym", _RL + "gym_legacy:install"),  # gym 0.21-0.26 (import gym)
    "sb3": ("stable_baselines3", _RL + "sb3:install"),
    "envpool": ("envpool", _RL + "envpool:install"),  # operations + its native calls
    # native envs (PufferEnv) + their C calls; its vector envs when pufferlib.vector loads
    "pufferlib": ("pufferlib", _RL + "pufferlib:install"),
    "pufferlib-vector": ("pufferlib.vector", _RL + "pufferlib:install_vector"),
    # any class of the user's code with env-like step/reset (builtins: hooked at once)
    "duck-env": ("builtins", _I + "duckenv:install"),
    "multiprocessing": ("multiprocessing", _RL + "mp:install"),  # process roles (metadata)
    # pool tasks: an operation per item in the workers, with its index (metadata)
    "pool": ("multiprocessing.pool", _RL + "pooltasks:install_pool"),
    "executor": ("concurrent.futures.process", _RL + "pooltasks:install_executor"),
    "ray": ("ray", _RL + "ray_workers:install"),  # roles, complete worker traces (metadata)
    "rllib": ("ray.rllib", _RL + "rllib:install"),
}
# Library groups by the kind of events they produce (calibration switches them by group).
# zero-code annotations: operation events
ANNOTATING = ("gym", "gym-legacy", "sb3", "envpool", "pufferlib", "pufferlib-vector",
              "duck-env", "rllib")
BACKENDS = ("torch", "tensorflow", "jax")  # BACKEND_CALL events
# SIMULATOR_CALL events
SIMULATORS = ("mujoco", "box2d", "ale", "pybullet", "envpool", "pufferlib")
WAITS = ("wait",)  # WAIT_CALL events (blocking standard-library calls)
COMPILERS = ("torch-compile", "jax-compile", "tf-compile")  # compile records (metadata)
# Integrations whose progress reports RLSCOPE_MAX_PROGRESS can count in a run without
# rlscope too (RLSCOPE_PROGRESS_BY; rlscope.inprocess.limits), by what they are counted
# there: (module, class, method), one call per report the integration makes while
# recording. sb3: SB3's updates of its progress counter (where the sb3 integration
# reports). rllib: a training iteration, ``Algorithm.train`` (Ray Tune's Trainable
# method, which calls ``Algorithm.step`` once: the rllib integration reports after each
# step, inside train, so the limit's count comes after the report).
SB3_PROGRESS_METHOD = "_update_current_progress_remaining"
PROGRESS_COUNTED: dict[str, tuple[str, str, str]] = {
    "sb3": ("stable_baselines3.common.base_class", "BaseAlgorithm", SB3_PROGRESS_METHOD),
    "rllib": ("ray.rllib.algorithms.algorithm", "Algorithm", "train"),
}
PROGRESS_BOUNDABLE = tuple(PROGRESS_COUNTED)
# What one such report is, in words (the calibration's check says where its runs ended).
PROGRESS_UNITS = {"rllib": "training iteration"}  # others: "progress report"
# RLSCOPE_PROGRESS_BY for a script that reports no progress: the root process's torch
# optimizer steps (torch's global step post-hook, with or without recording; a profiled
# run's steps are its MARK_STEP markers).
OPTIMIZER_STEPS = "torch-optimizer"
# ... a Keras 3 optimizer's steps (outermost ``BaseOptimizer.apply`` calls; a profiled
# run's MARK_STEP markers of keras); and the calls of one jitted JAX function,
# JIT_CALLS + its qualified name (outermost calls of jitted functions; a profiled run's
# backend calls "jax.jit.<name>"): for loops of either with no progress reports.
KERAS_STEPS = "keras-optimizer"
KERAS_OPTIMIZER = ("keras.src.optimizers.base_optimizer", "BaseOptimizer", "apply")
JIT_CALLS = "jax-jit:"
ALIASES = {"tf": "tensorflow", "waits": "wait", "gymnasium": "gym", "stable_baselines3": "sb3",
           "stable-baselines3": "sb3", "gym_legacy": "gym-legacy", "ale_py": "ale",
           "Box2D": "box2d", "mp": "multiprocessing"}

counts: dict[str, int] = {}  # library -> attributes replaced (for tests and diagnostics)


def count(name: str, n: int) -> None:
    """Add ``n`` replaced attributes to library ``name`` (installers that hook parts of
    their library as those are imported count them here)."""
    counts[name] = counts.get(name, 0) + n


def installer(name: str) -> Installer:
    """The install function of library ``name``, importing its module now."""
    where = LIBRARIES[name][1]
    module, _, function = where.partition(":")
    __import__(module)  # not importlib: its package is not loaded at start-up
    install: Installer = getattr(sys.modules[module], function)
    return install


def parse(spec: str | Iterable[str] | None) -> list[str]:
    """Library names from "auto"/"all" (every one), "none"/"" (no one), or "torch,gym"."""
    if spec is None:
        return list(LIBRARIES)
    items = [s.strip() for s in (spec.split(",") if isinstance(spec, str) else spec)]
    items = [s for s in items if s]
    if items in ([], ["none"]):
        return []
    if items in (["auto"], ["all"]):
        return list(LIBRARIES)
    out = []
    for s in items:
        name = ALIASES.get(s, s)
        if name not in LIBRARIES:
            raise ValueError(f"unknown library {s!r} to intercept; choose from "
                             f"{', '.join(LIBRARIES)} (or auto, none)")
        if name not in out:
            out.append(name)
        if name == "gym" and "gym-legacy" not in out:  # "gym" names both generations
            out.append("gym-legacy")
        if name == "pufferlib" and "pufferlib-vector" not in out:  # and both its parts
            out.append("pufferlib-vector")
    return out
