"""Legacy gym (``import gym``: 0.21 to 0.26, as older single-file scripts use it):
``step``/``reset`` of environments as the ``simulation`` operation, as for gymnasium.

Marked: the class of every environment returned by ``gym.make`` (the outermost layer) and
the vector envs ``gym.vector.SyncVectorEnv`` / ``AsyncVectorEnv``, whose envs and vector
steps are also recorded with their env index (rlscope.integrations.vecenv; gym's vector
envs step through ``step_async``/``step_wait`` and reset through
``reset_async``/``reset_wait``). A step inside an open ``simulation`` operation is not
marked again. gym 0.26 does not run on NumPy 2 as it is: its env checker calls
``np.bool8`` (``gym.make(..., disable_env_checker=True)`` avoids it).
"""

from __future__ import annotations

import sys
from types import ModuleType

from rlscope.integrations import gymnasium as gymnasium_integration
from rlscope.intercept.patch import Patcher


def install(gym: ModuleType, p: Patcher) -> int:
    if sys.modules.get("gymnasium") is gym:  # an alias module: gymnasium's hook has it
        return 0
    n = 0
    registration = sys.modules.get("gym.envs.registration")
    for owner in (gym, registration):
        orig = getattr(owner, "make", None) if owner is not None else None
        if orig is None or getattr(orig, "_rlscope_marked", False):
            continue
        p.replace(owner, "make", gymnasium_integration.marking_make(orig, p))
        n += 1
    vector = sys.modules.get("gym.vector")
    classes = [getattr(vector, c, None) for c in ("SyncVectorEnv", "AsyncVectorEnv")] \
        if vector is not None else []
    for cls in classes:
        if isinstance(cls, type):
            n += gymnasium_integration.mark_env_class(p, cls)
    if vector is not None:  # after marking: the env-index layer goes outside it
        from rlscope.integrations import vecenv

        n += vecenv.install_gym_legacy(vector, p)
    return n
