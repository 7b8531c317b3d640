"""What SB3's per-step recording costs a SubprocVecEnv(4) of CartPoles, measured inside
one profiled run: blocks of vector steps with one side's step wrappers on and off in
turns, the same processes throughout (whole runs of identical processes differ by ±10%
here, more than the effect).

    rls-prof -q --no-cost-model -o DIR --intercept sb3 --no-sample --sample-python off -- \\
        python scripts/bench/subproc_toggle.py [--blocks 200] [--side worker|main]

``worker``: each worker's recorded env ``step`` (the instance attribute rlscope sets,
removed in the "off" blocks); ``main``: the vector env's ``VecEnv.step``,
``step_async`` and ``step_wait`` wrappers (the originals put back). Per block of 200
vector steps: the workers' mean main-thread CPU per step (read in each worker), the main
thread's CPU and the wall time per vector step. Differences on - off of adjacent blocks,
medians and their standard errors. Last line:

    RESULT side=<side> worker_cpu_ns=<on-off> worker_cpu_se_ns=... main_cpu_ns=...
        main_cpu_se_ns=... wall_ns=... wall_se_ns=... plain_step_us=<off blocks' wall>
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import gymnasium as gym
import numpy as np
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import SubprocVecEnv, VecEnv

BLOCK = 200
SETTLE = 20  # untimed vector steps after each switch


class Toggle(gym.Wrapper):
    """The outermost env of each worker: rlscope records its instance ``step``."""

    def cpu_ns(self) -> int:
        return time.thread_time_ns()

    def recorded(self, on: bool) -> bool:
        d = self.__dict__
        if "step" in d and "_recorded_step" not in d:
            d["_recorded_step"] = d["step"]
        if "_recorded_step" not in d:
            return False  # not recording: nothing to switch
        if on:
            d["step"] = d["_recorded_step"]
        else:
            d.pop("step", None)
        return True


def _se(x: list[float]) -> float:
    q1, q3 = np.percentile(x, [25, 75])
    return 1.2533 * float(q3 - q1) / 1.349 / math.sqrt(len(x))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, default=200)
    ap.add_argument("--side", choices=("worker", "main"), default="worker")
    a = ap.parse_args()
    main_wrappers = {(c, k): vars(c)[k] for c, k in (
        (VecEnv, "step"), (SubprocVecEnv, "step_async"), (SubprocVecEnv, "step_wait"))}
    if a.side == "main" and not all(hasattr(f, "__wrapped__") for f in main_wrappers.values()):
        raise SystemExit("subproc_toggle: SB3's vector env is not instrumented: run it "
                         "under rls-prof --intercept sb3")

    def switch(venv: SubprocVecEnv, on: bool) -> None:
        if a.side == "worker":
            if not all(venv.env_method("recorded", on)):
                raise SystemExit("subproc_toggle: the workers' envs are not recorded: run "
                                 "it under rls-prof --intercept sb3")
            return
        for (c, k), f in main_wrappers.items():
            setattr(c, k, f if on else f.__wrapped__)

    venv = make_vec_env("CartPole-v1", n_envs=4, vec_env_cls=SubprocVecEnv, seed=0,
                        wrapper_class=Toggle)
    venv.reset()
    actions = np.zeros(4, dtype=np.int64)
    for _ in range(200):
        venv.step(actions)
    per: dict[bool, dict[str, list[float]]] = {
        on: {"worker": [], "main": [], "wall": []} for on in (True, False)}
    for k in range(a.blocks):
        on = (k % 2 == 0) == ((k // 2) % 2 == 0)  # on/off, off/on, ...: no fixed order
        switch(venv, on)
        for _ in range(SETTLE):
            venv.step(actions)
        w0 = venv.env_method("cpu_ns")
        t0, m0 = time.perf_counter_ns(), time.thread_time_ns()
        for _ in range(BLOCK):
            venv.step(actions)
        m1, t1 = time.thread_time_ns(), time.perf_counter_ns()
        w1 = venv.env_method("cpu_ns")
        per[on]["worker"].append(sum(y - x for x, y in zip(w0, w1, strict=True))
                                 / len(w0) / BLOCK)
        per[on]["main"].append((m1 - m0) / BLOCK)
        per[on]["wall"].append((t1 - t0) / BLOCK)
    venv.close()
    fields = [f"side={a.side}"]
    for key in ("worker", "main", "wall"):
        d = [x - y for x, y in zip(per[True][key], per[False][key], strict=False)]
        name = key if key == "wall" else f"{key}_cpu"
        fields += [f"{name}_ns={statistics.median(d):+.0f}", f"{name}_se_ns={_se(d):.0f}"]
    fields.append(f"plain_step_us={statistics.median(per[False]['wall']) / 1e3:.1f}")
    print("RESULT " + " ".join(fields))


if __name__ == "__main__":
    main()
