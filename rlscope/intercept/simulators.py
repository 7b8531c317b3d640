"""Native simulator entry points as Simulator time.

- MuJoCo: every ``mujoco.mj_*`` function (gymnasium's MujocoEnv calls ``mujoco.mj_step``,
  ``mj_forward``, ``mj_rnePostConstraint``, ``mj_resetData`` through the module).
- Box2D: ``b2World`` stepping and queries (gymnasium's box2d envs call ``world.Step``).
- ALE (ale_py): ``ALEInterface`` emulation and screen/RAM reads (ale-py ≥ 0.10 binds
  them with nanobind, whose method objects are neither C method descriptors nor
  pybind11's instance methods: any native method that binds like one is taken).
- PyBullet: every function of the ``pybullet`` module (``BulletClient`` looks them up at
  call time).

Cheap helpers (``mujoco.mju_*`` math, Box2D shape/body accessors) are not wrapped: each
would cost a transition for little time. Names bound before import completes are missed.
"""

from __future__ import annotations

from types import ModuleType

from rlscope.intercept.patch import SIMULATOR, Patcher, native_method, public_builtins

_BOX2D_WORLD = ("Step", "RayCast", "QueryAABB", "ClearForces", "CreateBody",
                "CreateDynamicBody", "CreateStaticBody", "CreateKinematicBody",
                "DestroyBody", "CreateJoint", "DestroyJoint")
_ALE = ("act", "reset_game", "getScreenRGB", "getScreenGrayscale", "getScreen", "getRAM",
        "loadROM", "cloneState", "restoreState", "cloneSystemState", "restoreSystemState",
        "game_over", "lives")


def install_mujoco(mujoco: ModuleType, p: Patcher) -> int:
    names = [n for n in public_builtins(mujoco, dir(mujoco)) if n.startswith("mj_")]
    return sum(p.patch(mujoco, n, SIMULATOR, f"mujoco.{n}") for n in names
               if n in vars(mujoco))


def install_box2d(box2d: ModuleType, p: Patcher) -> int:
    world = getattr(box2d, "b2World", None)
    if world is None:
        return 0
    return p.patch_all(world, _BOX2D_WORLD, SIMULATOR, "Box2D.b2World")


def install_ale(ale_py: ModuleType, p: Patcher) -> int:
    ale = getattr(ale_py, "ALEInterface", None)
    if ale is None:
        return 0
    return p.patch_all(ale, _ALE, SIMULATOR, "ale_py.ALEInterface", native_method)


def install_pybullet(pybullet: ModuleType, p: Patcher) -> int:
    n = p.patch_all(pybullet, public_builtins(pybullet), SIMULATOR, "pybullet")
    # pybullet_utils.bullet_client binds nothing early; envs importing
    # `from pybullet import X` before the hook ran are not covered.
    return n
