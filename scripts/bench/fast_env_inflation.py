"""What rlscope adds per env step to fast vector envs: a 16-env CartPole loop with a small
torch policy (4-64-2 MLP, no grad) on EnvPool (sync ``step``), gymnasium's
``SyncVectorEnv`` and stable-baselines3's ``DummyVecEnv``, each under ``rls-prof`` (the
defaults: native recorder, every interception, the script unchanged) vs uninstrumented.

    python scripts/bench/fast_env_inflation.py [--rounds 7] [--steps 3000] [--envs 16]
        [--loops envpool,sync,dummy]

Every run is a fresh process (1 torch thread, OMP_NUM_THREADS=1, fixed seed) timing the
loop only (imports, env creation and the first reset excluded). Rounds interleave plain
and rlscope runs of each loop (order alternating). Per loop: inflation = median over rounds
of the paired ratio rlscope / plain; added ns per env step = median of the paired
differences / (steps * envs). Last line:

    RESULT <loop>_inflation=<ratio> <loop>_added_ns_per_env_step=<ns>
        <loop>_added_ns_se=<standard error of that median> ... (per loop)

``--chunks N`` measures in one process per loop instead (for a loaded machine, where
fresh processes minutes apart differ by 2x): N pairs of chunks of ``--steps`` vector
steps, plain and instrumented in turns (order alternating), each on a fresh vector env
after 20 warm-up steps, timed by ``--clock``: wall (perf_counter), thread (the main
thread's CPU time: what rlscope adds on the loop's thread, without the time the thread
was descheduled) or process (CPU time of every thread: EnvPool's pool threads and
rlscope's writer thread too). An instrumented chunk is a recording session of its own,
``rlscope.start`` + ``rlscope.intercept.enable("auto")`` (what rls-prof does in a
profiled process) and ``disable`` + ``stop`` after it, outside the timed part.

``--clock-ab`` (with ``--chunks``) adds a third kind of chunk in the turns, recorded with
``RLSCOPE_CLOCK=monotonic`` (events timed by ``clock_gettime`` instead of the TSC), and
the paired difference per env step the TSC makes: ``<loop>_tsc_minus_monotonic_ns``.

``--control-us X`` (with ``--chunks``) adds a control kind of chunk, plain but with a busy
loop of at least X µs on the main thread after each vector step, its length timed as it
runs (it overshoots X; wall time, the CPU time's on a quiet machine): whether the loop
charges extra work 1:1 (one whose envs step on another thread, EnvPool's, need not).
Printed:
``<loop>_control_added_ns_per_env_step``, ``<loop>_work_amplification`` (that over what
the busy loops took), and ``<loop>_direct_ns_per_env_step``: rlscope's added ns over the
amplification. The target is on the added ns, not this.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

WORKLOAD = r"""
import json, sys, time
import numpy as np
import torch
torch.set_num_threads(1)
torch.manual_seed(0)
kind, steps, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
policy = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2))
if kind == "envpool":
    import envpool
    env = envpool.make_gymnasium("CartPole-v1", num_envs=n, seed=0, num_threads=1)
    obs, _ = env.reset()
elif kind == "sync":
    import gymnasium as gym
    env = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(n)])
    obs, _ = env.reset(seed=0)
else:
    import gymnasium as gym
    from stable_baselines3.common.vec_env import DummyVecEnv
    env = DummyVecEnv([lambda: gym.make("CartPole-v1") for _ in range(n)])
    env.seed(0)
    obs = env.reset()
t0 = time.perf_counter()
for _ in range(steps):
    with torch.no_grad():
        a = policy(torch.as_tensor(obs, dtype=torch.float32)).argmax(1).numpy()
    out = env.step(a)
    obs = out[0]
dt = time.perf_counter() - t0
env.close()
print(json.dumps({"loop_s": dt}))
"""

CHUNKS = r"""
import json, os, sys, time
import numpy as np
import torch
import rlscope
from rlscope import intercept
torch.set_num_threads(1)
torch.manual_seed(0)
kind, steps, n, pairs, out = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                              int(sys.argv[4]), sys.argv[5])
policy = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2))
import gymnasium as gym
if kind == "envpool":
    import envpool
elif kind == "dummy":
    from stable_baselines3.common import vec_env


def make():
    if kind == "envpool":
        env = envpool.make_gymnasium("CartPole-v1", num_envs=n, seed=0, num_threads=1)
        return env, env.reset()[0]
    if kind == "sync":
        env = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(n)])
        return env, env.reset(seed=0)[0]
    env = vec_env.DummyVecEnv([lambda: gym.make("CartPole-v1") for _ in range(n)])
    env.seed(0)
    return env, env.reset()


CLOCKS = {"wall": time.perf_counter, "thread": time.thread_time,
          "process": time.process_time}
clock = CLOCKS[sys.argv[6]]


busy_s = [0.0]  # the control's busy work in the last chunk, by the chunk's clock


def chunk(k, busy_ns=0):
    env, obs = make()
    busy_s[0] = 0.0
    for i in range(20 + k):
        if i == 20:
            t0 = clock()
        with torch.no_grad():
            a = policy(torch.as_tensor(obs, dtype=torch.float32)).argmax(1).numpy()
        obs = env.step(a)[0]
        if busy_ns:  # the control: extra work on the main thread, timed as it runs
            t1 = t2 = time.perf_counter_ns()
            while t2 - t1 < busy_ns:
                t2 = time.perf_counter_ns()
            if i >= 20:
                busy_s[0] += (t2 - t1) / 1e9
    dt = clock() - t0
    env.close()
    return dt


modes = sys.argv[7].split(",")
busy_ns = int(float(sys.argv[8]) * 1000) if len(sys.argv) > 8 else 0
user_clock = os.environ.get("RLSCOPE_CLOCK")  # the "rlscope" chunks keep the user's
res = {m: [] for m in modes}
res["control_busy"] = []
for r in range(pairs):
    for m in modes[r % len(modes):] + modes[:r % len(modes)]:
        if m not in ("plain", "control"):
            if m == "monotonic":
                os.environ["RLSCOPE_CLOCK"] = "monotonic"
            rlscope.start(os.path.join(out, f"c{r}{m}"))
            if user_clock is None:
                os.environ.pop("RLSCOPE_CLOCK", None)
            else:
                os.environ["RLSCOPE_CLOCK"] = user_clock
            intercept.enable("auto")
        res[m].append(chunk(steps, busy_ns if m == "control" else 0))
        if m == "control":
            res["control_busy"].append(busy_s[0])
        if m not in ("plain", "control"):
            intercept.disable()
            rlscope.stop()
print(json.dumps(res))
"""


def run(mode: str, kind: str, steps: int, envs: int, tmp: str, i: int) -> float:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    script = os.path.join(tmp, "workload.py")
    cmd = [sys.executable, script, kind, str(steps), str(envs)]
    if mode == "rlscope":
        cmd = [sys.executable, "-m", "rlscope.cli.prof", "-q", "-o",
               os.path.join(tmp, f"{kind}{i}"), "--", *cmd]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    if r.returncode != 0:
        sys.exit(f"{kind} {mode} run failed:\n{r.stderr[-2000:]}")
    return float(json.loads(r.stdout.strip().splitlines()[-1])["loop_s"])


def chunked(kind: str, steps: int, envs: int, pairs: int, tmp: str, clock: str,
            modes: list[str], control_us: float = 0.0) -> dict[str, list[float]]:
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    script = os.path.join(tmp, "chunks.py")
    with open(script, "w") as f:
        f.write(CHUNKS)
    r = subprocess.run([sys.executable, script, kind, str(steps), str(envs), str(pairs),
                        os.path.join(tmp, kind), clock, ",".join(modes), str(control_us)],
                       capture_output=True, text=True,
                       env=env,
                       timeout=3000)
    if r.returncode != 0:
        sys.exit(f"{kind} chunks failed:\n{r.stderr[-2000:]}")
    out: dict[str, list[float]] = json.loads(r.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--steps", type=int, default=3000)
    ap.add_argument("--envs", type=int, default=16)
    ap.add_argument("--loops", default="envpool,sync,dummy")
    ap.add_argument("--chunks", type=int, default=0, help="pairs of chunks in one process")
    ap.add_argument("--clock", default="wall", choices=("wall", "thread", "process"),
                    help="with --chunks: what a chunk's time is (thread: the main thread's "
                    "CPU time, not the time it was descheduled on a loaded machine)")
    ap.add_argument("--clock-ab", action="store_true",
                    help="with --chunks: also chunks recorded with RLSCOPE_CLOCK=monotonic")
    ap.add_argument("--control-us", type=float, default=0.0,
                    help="with --chunks: also plain chunks with this much busy work (us) "
                    "after each vector step: how the loop charges extra work")
    a = ap.parse_args()
    loops = a.loops.split(",")
    modes = ["plain", "rlscope"]
    times = {(k, m): [] for k in loops for m in modes}  # type: dict[tuple[str, str], list[float]]
    if a.chunks:
        chunk_modes = modes + (["monotonic"] if a.clock_ab else []) + \
            (["control"] if a.control_us > 0 else [])
        with tempfile.TemporaryDirectory() as tmp:
            for k in loops:
                got = chunked(k, a.steps, a.envs, a.chunks, tmp, a.clock, chunk_modes,
                              a.control_us)
                for m in chunk_modes + (["control_busy"] if a.control_us > 0 else []):
                    times[k, m] = got[m]
                print(f"{k}: done", flush=True)
        report(loops, times, a.steps * a.envs)
        return
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "workload.py"), "w") as f:
            f.write(WORKLOAD)
        for r in range(a.rounds):
            for k in loops:
                for m in (modes if r % 2 == 0 else modes[::-1]):
                    times[k, m].append(run(m, k, a.steps, a.envs, tmp, r))
            print(f"round {r + 1}: " + "  ".join(
                f"{k} {times[k, 'plain'][-1]:.3f}/{times[k, 'rlscope'][-1]:.3f}s"
                for k in loops), flush=True)
    report(loops, times, a.steps * a.envs)


def _median_se(values: list[float]) -> float:
    """The standard error of the median of ``values`` (normal approximation)."""
    q = statistics.quantiles(values, n=4)
    return (q[2] - q[0]) / 1.349 / len(values) ** 0.5 * 1.2533


def report(loops: list[str], times: dict[tuple[str, str], list[float]], per: int) -> None:
    result = []
    for k in loops:
        p, q = times[k, "plain"], times[k, "rlscope"]
        ratios = [y / x for x, y in zip(p, q, strict=True)]
        added = [(y - x) / per * 1e9 for x, y in zip(p, q, strict=True)]
        qr = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        qa = statistics.quantiles(added, n=4) if len(added) > 1 else added * 3
        print(f"{k}: plain median {statistics.median(p) / per * 1e9:.0f} ns/env step; "
              f"paired ratio quartiles {qr[0]:.3f} {qr[1]:.3f} {qr[2]:.3f}; added ns/env "
              f"step quartiles {qa[0]:.0f} {qa[1]:.0f} {qa[2]:.0f} ({len(p)} pairs)")
        result += [f"{k}_inflation={statistics.median(ratios):.3f}",
                   f"{k}_added_ns_per_env_step={statistics.median(added):.0f}"]
        if len(added) > 1:  # how far the median can be trusted (runs apart move more)
            result.append(f"{k}_added_ns_se={_median_se(added):.0f}")
        if (k, "monotonic") in times:  # the same loop's TSC chunks against clock_gettime's
            diff = [(y - x) / per * 1e9
                    for x, y in zip(times[k, "monotonic"], q, strict=True)]
            qd = statistics.quantiles(diff, n=4)
            print(f"{k}: TSC - monotonic ns/env step quartiles {qd[0]:.0f} {qd[1]:.0f} "
                  f"{qd[2]:.0f} (standard error of the median ~{_median_se(diff):.0f})")
            result.append(f"{k}_tsc_minus_monotonic_ns={statistics.median(diff):.0f}")
        if (k, "control") in times and len(p) > 1:
            ctl = [(y - x) / per * 1e9 for x, y in zip(p, times[k, "control"], strict=True)]
            # What the busy work itself took (it overshoots its nominal length).
            control_ns = statistics.median(times[k, "control_busy"]) / per * 1e9
            amp = statistics.median(ctl) / control_ns
            print(f"{k}: busy work of {control_ns:.0f} ns per env step added "
                  f"{statistics.median(ctl):.0f} (standard error ~{_median_se(ctl):.0f}): "
                  f"work is charged {amp:.2f}x; rlscope's added ns (standard error "
                  f"~{_median_se(added):.0f}) over that: {statistics.median(added) / amp:.0f}")
            result += [f"{k}_control_added_ns_per_env_step={statistics.median(ctl):.0f}",
                       f"{k}_work_amplification={amp:.2f}",
                       f"{k}_direct_ns_per_env_step={statistics.median(added) / amp:.0f}"]
    print("RESULT " + " ".join(result))


if __name__ == "__main__":
    main()
