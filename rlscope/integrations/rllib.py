"""RLlib (new API stack: EnvRunner, Learner, ``Algorithm.training_step``) broken into
operations with no code change (docs/ray.md).

In each EnvRunner (its own Ray actor process, or the driver's local one):

- ``inference``: the RLModule's ``forward_exploration`` / ``forward_inference``;
- ``simulation``: the gymnasium vector env's ``step``/``reset`` (the gymnasium
  integration: RLlib builds it with ``gymnasium.make_vec``, so every env's steps are
  recorded with their index too);
- ``connectors``: every connector pipeline run (env-to-module, module-to-env, and the
  Learner's);
- ``sync_weights``: ``set_state`` (the driver pushing new weights);
- each ``sample()`` call as an env step of the EnvRunnerGroup with the runner's index
  (format.META_VECENV names the group by Ray job), so the lock-step report measures the
  runners as the envs of one barrier.

In the process holding a Learner (the driver when ``num_learners=0``): ``backprop``
around ``Learner.update``. In the driver: phase ``sampling`` around
``synchronous_parallel_sample`` (each round of remote ``sample()`` calls is a vector
step of the EnvRunnerGroup), phase ``training`` around ``LearnerGroup.update``,
``sync_weights`` around ``EnvRunnerGroup.sync_weights``, phase ``evaluation`` around
``Algorithm.evaluate``; progress = env steps sampled (RLlib's own lifetime counter) after
every training iteration (``Algorithm.step``); the algorithm's name as metadata.

Operations are skipped when one of that name is already open (user annotations win).
"""

from __future__ import annotations

import functools
import json
import threading
from collections.abc import Callable
from typing import Any

from rlscope import annotate, libraries
from rlscope.integrations import mark_method, wrap_method
from rlscope.intercept import importhook
from rlscope.intercept.patch import Patcher
from rlscope.trace import format as fmt

GROUP = "EnvRunnerGroup"  # the name of the runners' barrier (and of its env events)
EVAL_GROUP = "EnvRunnerGroup (evaluation)"
_local = threading.local()  # .sampling: inside synchronous_parallel_sample
_announced: dict[str, bool] = {}


def install(rllib: Any, p: Patcher) -> int:
    """Instrument RLlib's modules as each is imported (most are imported lazily)."""
    for module, installer in _MODULES.items():
        importhook.when_imported(module, functools.partial(_run, installer, p))
    return 1


def _run(installer: Callable[[Any, Patcher], int], p: Patcher, module: Any) -> None:
    libraries.count("rllib", installer(module, p))


# -- the env runners ---------------------------------------------------------------------

def _rl_module(m: Any, p: Patcher) -> int:
    n = 0
    for cname in ("RLModule", "TorchRLModule"):
        cls = getattr(m, cname, None)
        if isinstance(cls, type):
            n += mark_method(p, cls, "forward_exploration", "inference")
            n += mark_method(p, cls, "forward_inference", "inference")
    return n


def _connectors(m: Any, p: Patcher) -> int:
    cls = getattr(m, "ConnectorPipelineV2", None)
    return int(mark_method(p, cls, "__call__", "connectors")) if isinstance(cls, type) else 0


def _env_runners(m: Any, p: Patcher) -> int:
    n = 0
    for cname in ("SingleAgentEnvRunner", "MultiAgentEnvRunner"):
        cls = getattr(m, cname, None)
        if isinstance(cls, type):
            n += mark_method(p, cls, "set_state", "sync_weights")
            n += wrap_method(p, cls, "sample", _runner_sample)
    return n


def _group_name(runner: Any) -> str:
    config = getattr(runner, "config", None)
    return EVAL_GROUP if getattr(config, "in_evaluation", False) else GROUP


def _job_id() -> str | None:
    try:
        import ray

        return str(ray.get_runtime_context().get_job_id())
    except Exception:
        return None


def _runner_sample(func: Callable[..., Any]) -> Callable[..., Any]:
    """A remote runner's ``sample()`` as env step ``worker_index - 1`` of its group."""

    @functools.wraps(func)
    def sample(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = annotate.active_recorder()
        index = getattr(self, "worker_index", 0)
        if rec is None or not isinstance(index, int) or index < 1:
            return func(self, *args, **kwargs)  # the driver's local runner
        name = _group_name(self)
        if not self.__dict__.get("_rlscope_announced"):
            self.__dict__["_rlscope_announced"] = True
            _announce_runner(rec, name, index, getattr(self, "num_workers", None))
        rec.env_begin(False, index - 1, name)
        try:
            return func(self, *args, **kwargs)
        finally:
            rec.env_end(False, name)

    return sample


def _announce_runner(rec: Any, name: str, index: int, num: Any) -> None:
    fields: dict[str, Any] = {fmt.META_ENV_INDEX: index - 1,
                              fmt.META_VECENV: {"ray_job": _job_id(), "name": name}}
    if isinstance(num, int):
        fields[fmt.META_NUM_ENVS] = num
    for key, value in fields.items():
        annotate.record_metadata(rec, key, json.dumps(value))


# -- the driver ---------------------------------------------------------------------------

def _rollout_ops(m: Any, p: Patcher) -> int:
    """Patched in the module right after it is imported, before the algorithms import
    the function by name."""
    f = getattr(m, "synchronous_parallel_sample", None)
    if not callable(f) or getattr(f, "_rlscope_wrapped", False):
        return 0
    p.replace(m, "synchronous_parallel_sample", _flagged(_sampling(f)))
    return 1


def _flagged(w: Callable[..., Any]) -> Callable[..., Any]:
    w._rlscope_wrapped = True  # type: ignore[attr-defined]
    return w


def _sampling(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        rec = annotate.active_recorder()
        if rec is None:
            return func(*args, **kwargs)
        _local.sampling = True
        try:
            with rec.phase("sampling"):
                return func(*args, **kwargs)
        finally:
            _local.sampling = False
    return wrapper


def _group(m: Any, p: Patcher) -> int:
    cls = getattr(m, "EnvRunnerGroup", None)
    if not isinstance(cls, type):
        return 0
    return (int(mark_method(p, cls, "sync_weights", "sync_weights"))
            + wrap_method(p, cls, "foreach_env_runner", _round))


def _round(func: Callable[..., Any]) -> Callable[..., Any]:
    """A round of remote ``sample()`` calls inside synchronous_parallel_sample: one
    vector step of the group, from sending the calls to having every result."""

    @functools.wraps(func)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        rec = annotate.active_recorder()
        if rec is None or not getattr(_local, "sampling", False) \
                or kwargs.get("local_env_runner", True):
            return func(self, *args, **kwargs)
        name = GROUP
        if name not in _announced:
            _announce_group(rec, self, name)
        rec.env_begin(False, fmt.VECTOR_ENV_INDEX, name)
        try:
            return func(self, *args, **kwargs)
        finally:
            rec.env_end(False, name)

    return wrapper


def _announce_group(rec: Any, group: Any, name: str) -> None:
    from rlscope.integrations import vecenv

    try:
        n = int(group.num_remote_env_runners())
    except Exception:
        return
    _announced[name] = True
    vecenv.announce(rec, {"name": name, "class": GROUP, "num_envs": n, "workers": True,
                          "key": {"ray_job": _job_id(), "name": name}})


def _learner(m: Any, p: Patcher) -> int:
    cls = getattr(m, "Learner", None)
    return int(mark_method(p, cls, "update", "backprop")) if isinstance(cls, type) else 0


def _learner_group(m: Any, p: Patcher) -> int:
    cls = getattr(m, "LearnerGroup", None)
    return wrap_method(p, cls, "update", _phase("training")) if isinstance(cls, type) else 0


def _algorithm(m: Any, p: Patcher) -> int:
    cls = getattr(m, "Algorithm", None)
    if not isinstance(cls, type):
        return 0
    # step() runs one training iteration (training_step() is each algorithm's own).
    return (wrap_method(p, cls, "step", _after_training_step)
            + wrap_method(p, cls, "evaluate", _phase("evaluation")))


def _phase(name: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(func: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            rec = annotate.active_recorder()
            if rec is None:
                return func(*args, **kwargs)
            with rec.phase(name):
                return func(*args, **kwargs)
        return wrapper
    return make


def _after_training_step(func: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(func)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        if annotate.is_active() and not self.__dict__.get("_rlscope_named"):
            self.__dict__["_rlscope_named"] = True
            annotate.set_metadata(algorithm=type(self).__name__, framework="rllib")
        out = func(self, *args, **kwargs)
        if annotate.progress_wanted():
            steps = _env_steps_sampled(self)
            if steps is not None:
                annotate.integration_progress("rllib", steps)
        return out
    return wrapper


def _env_steps_sampled(algo: Any) -> int | None:
    """RLlib's own count of env steps sampled so far (all runners)."""
    try:
        from ray.rllib.utils.metrics import ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME

        v = algo.metrics.peek((ENV_RUNNER_RESULTS, NUM_ENV_STEPS_SAMPLED_LIFETIME), default=None)
        return None if v is None else int(v)
    except Exception:
        return None


_MODULES: dict[str, Callable[[Any, Patcher], int]] = {
    "ray.rllib.core.rl_module.rl_module": _rl_module,
    "ray.rllib.core.rl_module.torch.torch_rl_module": _rl_module,
    "ray.rllib.connectors.connector_pipeline_v2": _connectors,
    "ray.rllib.env.single_agent_env_runner": _env_runners,
    "ray.rllib.env.multi_agent_env_runner": _env_runners,
    "ray.rllib.env.env_runner_group": _group,
    "ray.rllib.execution.rollout_ops": _rollout_ops,
    "ray.rllib.core.learner.learner": _learner,
    "ray.rllib.core.learner.learner_group": _learner_group,
    "ray.rllib.algorithms.algorithm": _algorithm,
}
