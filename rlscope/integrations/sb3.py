"""stable-baselines3: ``model.learn()`` of PPO, A2C, DQN, SAC, TD3 (and DDPG) broken into
operations with no code change.

- ``inference``: ``ActorCriticPolicy.forward`` / ``predict_values`` (on-policy rollouts),
  ``BasePolicy.predict`` and ``OffPolicyAlgorithm._sample_action`` (off-policy rollouts);
- ``simulation``: ``VecEnv.step`` and every SB3 vec env's ``reset``;
- ``backprop``: each algorithm's ``train()``;
- ``DummyVecEnv``/``SubprocVecEnv``: every env's step and reset with its env index, and
  each vector step's send and wait parts (rlscope.integrations.vecenv).

Each is skipped when an operation of the same name is already open (user annotations
win, nested calls count once). Progress (timesteps of total) is reported at every update
SB3 makes to its progress counter, with SB3's episode metrics (``ep_rew_mean``,
``ep_len_mean``: as its logger's, over its episode buffer) when an episode ended since
they were last recorded, at most once a second; the algorithm's name is set as run
metadata.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

from rlscope import annotate
from rlscope.integrations import mark_method, wrap_method
from rlscope.intercept.patch import Patcher
from rlscope.libraries import SB3_PROGRESS_METHOD

_ALGOS = ("PPO", "A2C", "DQN", "SAC", "TD3")


def install(sb3: ModuleType, p: Patcher) -> int:
    from stable_baselines3.common import base_class, off_policy_algorithm, policies, vec_env

    n = 0
    for name in _ALGOS:
        algo = getattr(sb3, name, None)
        if isinstance(algo, type):
            n += mark_method(p, algo, "train", "backprop")
    n += mark_method(p, policies.ActorCriticPolicy, "forward", "inference")
    n += mark_method(p, policies.ActorCriticPolicy, "predict_values", "inference")
    n += mark_method(p, policies.BasePolicy, "predict", "inference")
    n += mark_method(p, off_policy_algorithm.OffPolicyAlgorithm, "_sample_action", "inference")
    n += mark_method(p, vec_env.VecEnv, "step", "simulation")
    for obj in list(vars(vec_env).values()):
        if isinstance(obj, type) and issubclass(obj, vec_env.VecEnv) and "reset" in vars(obj):
            n += mark_method(p, obj, "reset", "simulation")
    n += wrap_method(p, base_class.BaseAlgorithm, SB3_PROGRESS_METHOD, _progress)
    n += wrap_method(p, base_class.BaseAlgorithm, "_setup_learn", _metadata)
    from rlscope.integrations import vecenv

    return n + vecenv.install_sb3(vec_env, p)  # per env index; after the marking above


def _progress(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(self: Any, num_timesteps: int, total_timesteps: int) -> Any:
        if annotate.progress_wanted():
            annotate.integration_progress("sb3", num_timesteps, total_timesteps,
                                          metrics=_episode_metrics(self))
        return func(self, num_timesteps, total_timesteps)
    return wrapper


_last_metrics: list[Any] = [None, 0.0]  # the last episode recorded, when


def _episode_metrics(algo: Any) -> dict[str, float] | None:
    """SB3's rollout/ep_rew_mean and ep_len_mean when an episode ended since the last
    record, at most once a second (off-policy algorithms report progress every step)."""
    buf = getattr(algo, "ep_info_buffer", None)
    if not buf or buf[-1] is _last_metrics[0]:
        return None
    now = time.monotonic()
    if now - _last_metrics[1] < 1.0:
        return None
    _last_metrics[:] = [buf[-1], now]
    try:
        return {"ep_rew_mean": sum(float(e["r"]) for e in buf) / len(buf),
                "ep_len_mean": sum(float(e["l"]) for e in buf) / len(buf)}
    except (KeyError, TypeError, ValueError):
        return None


def _metadata(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if annotate.is_active():
            annotate.set_metadata(algorithm=type(self).__name__, framework="stable-baselines3")
        return func(self, *args, **kwargs)
    return wrapper
