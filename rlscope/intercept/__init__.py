"""Cross-stack attribution: wrap the native entry points of ML backends and simulators so
that time inside them is recorded as Backend / Simulator (docs/attribution.md).

    import rlscope.intercept
    rlscope.intercept.enable("torch,gym")    # or "auto" (everything), "none"
    ...
    rlscope.intercept.disable()              # every original restored

Each library is instrumented right after it is imported (an import hook), or at once if
it already is, so user code needs no change. Wrappers record only while a recording is
active; otherwise they cost a flag test per call. ``rls-prof`` calls :func:`enable` in
every profiled process (``--intercept``/``--no-intercept``).
"""

from __future__ import annotations

import threading

from rlscope.intercept import _hook
from rlscope.intercept.patch import BACKEND, SIMULATOR, WAIT, Patcher

TYPE_CHECKING = False  # typing is for the type checker: every profiled process imports this
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable
    from types import ModuleType

__all__ = ["ANNOTATING", "BACKEND", "BACKENDS", "LIBRARIES", "SIMULATOR", "SIMULATORS", "WAIT",
           "WAITS", "disable", "enable", "enabled", "parse"]


def _torch(m: ModuleType, p: Patcher) -> int:
    from rlscope.intercept import torch_backend

    return torch_backend.install(m, p)


def _tf(m: ModuleType, p: Patcher) -> int:
    from rlscope.intercept import tf_backend

    return tf_backend.install(m, p)


def _keras(m: ModuleType, p: Patcher) -> int:
    from rlscope.intercept import tf_backend

    return tf_backend.install_keras(m, p)


def _jax(m: ModuleType, p: Patcher) -> int:
    from rlscope.intercept import jax_backend

    return jax_backend.install(m, p)


def _sim(name: str) -> Callable[[ModuleType, Patcher], int]:
    def install(m: ModuleType, p: Patcher) -> int:
        from rlscope.intercept import simulators

        return int(getattr(simulators, f"install_{name}")(m, p))
    return install


def _wait(m: ModuleType, p: Patcher) -> int:
    from rlscope.intercept import waits

    # os triggers it (always imported); the other modules are hooked from there.
    return waits.install_os(m, p, _add_count("wait"))


def _add_count(name: str) -> Callable[[int], None]:
    def add(n: int) -> None:
        counts[name] = counts.get(name, 0) + n
    return add


def _gym(m: ModuleType, p: Patcher) -> int:
    from rlscope.integrations import gymnasium as gym_integration

    return gym_integration.install(m, p)


def _gym_legacy(m: ModuleType, p: Patcher) -> int:
    from rlscope.integrations import gym_legacy

    return gym_legacy.install(m, p)


def _sb3(m: ModuleType, p: Patcher) -> int:
    from rlscope.integrations import sb3

    return sb3.install(m, p)


def _mp(m: ModuleType, p: Patcher) -> int:
    from rlscope.integrations import mp

    return mp.install(m, p)


# name -> (top-level module that triggers it, installer)
LIBRARIES: dict[str, tuple[str, Callable[[ModuleType, Patcher], int]]] = {
    "torch": ("torch", _torch),
    "tensorflow": ("tensorflow", _tf),
    "keras": ("keras", _keras),  # phase markers only (inferred operations)
    "jax": ("jax", _jax),
    "mujoco": ("mujoco", _sim("mujoco")),
    "box2d": ("Box2D", _sim("box2d")),
    "ale": ("ale_py", _sim("ale")),
    "pybullet": ("pybullet", _sim("pybullet")),
    "wait": ("os", _wait),
    "gym": ("gymnasium", _gym),
    "gym-legacy": ("gym", _gym_legacy),  # gym 0.21-0.26 (import gym)
    "sb3": ("stable_baselines3", _sb3),
    "multiprocessing": ("multiprocessing", _mp),  # process roles (metadata only)
}
# Library groups by the kind of events they produce (calibration switches them by group).
ANNOTATING = ("gym", "gym-legacy", "sb3")  # zero-code annotations: operation events
BACKENDS = ("torch", "tensorflow", "jax")  # BACKEND_CALL events
SIMULATORS = ("mujoco", "box2d", "ale", "pybullet")  # SIMULATOR_CALL events
WAITS = ("wait",)  # WAIT_CALL events (blocking standard-library calls)
ALIASES = {"tf": "tensorflow", "waits": "wait", "gymnasium": "gym", "stable_baselines3": "sb3",
           "stable-baselines3": "sb3", "gym_legacy": "gym-legacy", "ale_py": "ale",
           "Box2D": "box2d", "mp": "multiprocessing"}

_lock = threading.Lock()
_patcher: Patcher | None = None
_enabled: list[str] = []
counts: dict[str, int] = {}  # library -> attributes replaced (for tests and diagnostics)


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
    return out


def enable(spec: str | Iterable[str] | None = "auto") -> list[str]:
    """Instrument the chosen libraries now if imported, else when they are imported.
    Returns the library names now enabled."""
    global _patcher
    names = parse(spec)
    with _lock:
        if _patcher is None:
            _patcher = Patcher()
        for name in names:
            if name in _enabled:
                continue
            _enabled.append(name)
            module, installer = LIBRARIES[name]
            _hook.when_imported(module, _make_callback(name, installer, _patcher))
        return list(_enabled)


def _make_callback(name: str, installer: Callable[[ModuleType, Patcher], int],
                   p: Patcher) -> Callable[[ModuleType], None]:
    def callback(module: ModuleType) -> None:
        n = installer(module, p)  # first: an installer may count hooks it ran itself
        counts[name] = counts.get(name, 0) + n
    return callback


def disable() -> None:
    """Remove the import hook and restore every wrapped attribute exactly."""
    global _patcher
    with _lock:
        _hook.cancel_all()
        if _patcher is not None:
            _patcher.undo()
        _patcher = None
        _enabled.clear()
        counts.clear()


def enabled() -> list[str]:
    return list(_enabled)
