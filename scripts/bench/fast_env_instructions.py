"""What rlscope adds per env step to fast vector envs, in instructions: the loops of
``fast_env_inflation.py`` (a 16-env CartPole loop with a small torch policy on EnvPool,
gymnasium's ``SyncVectorEnv`` and SB3's ``DummyVecEnv``) run under valgrind's callgrind,
uninstrumented and recording (``rlscope.start`` + ``intercept.enable("auto")`` before the
env is made, as rls-prof does), counting the main thread's instructions over the same
vector steps only (a toggle around the loop). The sequential vector envs record each
env's steps on *sampled* vector steps only (one every 1 ms x num_envs: ~1 in 30 for
CartPole x16), chosen by time, which valgrind stretches ~50x: they are counted apart,
once with no step sampled and once with every step sampled, and averaged at the rate
the loop samples outside valgrind (its vector step timed plain, without valgrind:
one in ``SAMPLE_NS_PER_ENV x envs / step time``).

    python scripts/bench/fast_env_instructions.py [--steps 200] [--envs 16]
        [--loops envpool,sync,dummy] [--repeat 3]

Identical runs still differ by up to ~1.5k instructions per vector step (~90 per env step
of 16: the garbage collector's passes, memory layout), so ``--repeat N`` counts every
configuration N times and takes the medians (string hashing is fixed: PYTHONHASHSEED=0).

Why: on this 2-core VM the wall and CPU clocks of identical chunks differ by +-10%,
so a few % of inflation cannot be resolved by timing; instruction counts repeat to
within ~0.1%. They leave out what instructions do not show (cache misses, clock reads
in the kernel) and are not time: read them beside the timed benchmark. EnvPool's own
native code is left out of the counts (its caller spins while the pool's thread steps
the envs: the spin's length is the scheduler's, not rlscope's), as are libstdc++ and
pthread functions it calls.

Needs valgrind with its headers (``valgrind/callgrind.h``) and a C compiler; else one
line says so and the exit status is 2. Last line:

    RESULT <loop>_instr_ratio=<r> <loop>_added_instr_per_env_step=<n>
        [<loop>_sampled_added_instr_per_env_step=<n>
         <loop>_averaged_added_instr_per_env_step=<n>] ... (per loop)
"""

from __future__ import annotations

import argparse
import itertools
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import NoReturn

TOGGLE_C = r"""
#include <valgrind/callgrind.h>
void rls_cg_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void rls_cg_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; CALLGRIND_DUMP_STATS_AT("loop"); }
"""

WORKLOAD = r"""
import ctypes, sys
cg = ctypes.CDLL(sys.argv[5])
import numpy as np
import torch
torch.set_num_threads(1)
torch.manual_seed(0)
kind, mode, steps, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
out = sys.argv[6]
policy = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2))
import gymnasium as gym
if mode not in ("plain", "time"):
    import rlscope
    from rlscope import intercept
    from rlscope.integrations import vecenv
    # Sampling is by time, and valgrind runs ~50x slower: no step sampled, or all.
    vecenv.SAMPLE_NS_PER_ENV = 0 if mode == "sampled" else 10**15
    rlscope.start(out)
    intercept.enable("auto")
if kind == "envpool":
    import envpool
    env = envpool.make_gymnasium("CartPole-v1", num_envs=n, seed=0, num_threads=1)
    obs = env.reset()[0]
elif kind == "sync":
    env = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(n)])
    obs = env.reset(seed=0)[0]
else:
    from stable_baselines3.common.vec_env import DummyVecEnv
    env = DummyVecEnv([lambda: gym.make("CartPole-v1") for _ in range(n)])
    env.seed(0)
    obs = env.reset()


def step(obs):
    with torch.no_grad():
        a = policy(torch.as_tensor(obs, dtype=torch.float32)).argmax(1).numpy()
    return env.step(a)[0]


for _ in range(30):
    obs = step(obs)
if mode == "time":  # outside valgrind: the plain loop's ns per vector step
    import time
    t0 = time.perf_counter_ns()
    for _ in range(steps):
        obs = step(obs)
    print((time.perf_counter_ns() - t0) / steps)
    sys.exit(0)
cg.rls_cg_start()
for _ in range(steps):
    obs = step(obs)
cg.rls_cg_stop()
env.close()
if mode != "plain":
    intercept.disable()
    rlscope.stop()
"""

# Left out of the counts: EnvPool's native code and what it calls while its caller waits.
EXCLUDED = re.compile(r"envpool|libstdc\+\+|pthread|futex|sched_yield")
LINE = re.compile(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)")


_RUN = itertools.count()


def unavailable(why: str) -> NoReturn:
    print(f"fast_env_instructions: {why}; install valgrind (apt install valgrind) to "
          "count instructions", file=sys.stderr)
    sys.exit(2)


def build_toggle(tmp: str) -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if shutil.which("valgrind") is None or shutil.which("callgrind_annotate") is None:
        unavailable("valgrind not found")
    if cc is None:
        unavailable("no C compiler")
    src, lib = os.path.join(tmp, "toggle.c"), os.path.join(tmp, "libtoggle.so")
    with open(src, "w") as f:
        f.write(TOGGLE_C)
    r = subprocess.run([cc, "-O2", "-shared", "-fPIC", "-o", lib, src], capture_output=True,
                       text=True)
    if r.returncode != 0:
        unavailable("valgrind/callgrind.h not found")
    return lib


def main_thread_instructions(profile: str) -> int:
    """The main thread's instructions in the toggled loop, EnvPool's own code left out."""
    r = subprocess.run(["callgrind_annotate", "--threshold=100", profile],
                       capture_output=True, text=True, check=True)
    total = 0
    for line in r.stdout.splitlines():
        m = LINE.match(line)
        if m and "PROGRAM TOTALS" not in line and not EXCLUDED.search(m.group(2)):
            total += int(m.group(1).replace(",", ""))
    return total


def count(kind: str, mode: str, steps: int, envs: int, tmp: str, lib: str) -> int:
    script = os.path.join(tmp, "workload.py")
    prefix = os.path.join(tmp, f"cg.{kind}.{mode}.{next(_RUN)}")  # runs may overlap
    env = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", PYTHONHASHSEED="0")
    cmd = ["valgrind", "--tool=callgrind", "--separate-threads=yes", "--instr-atstart=no",
           f"--callgrind-out-file={prefix}", sys.executable, script, kind, mode, str(steps),
           str(envs), lib, os.path.join(tmp, f"run.{kind}")]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    if r.returncode != 0:
        raise SystemExit(f"{kind} {mode}: exit {r.returncode}: {r.stderr[-2000:]}")
    # The toggle's dump, main thread: <prefix>.1-01 (dump 1, thread 1).
    return main_thread_instructions(f"{prefix}.1-01")


def step_ns(kind: str, steps: int, envs: int, tmp: str, lib: str) -> float:
    """The plain loop's vector step, in ns, outside valgrind."""
    r = subprocess.run([sys.executable, os.path.join(tmp, "workload.py"), kind, "time",
                        str(steps), str(envs), lib, ""], capture_output=True, text=True,
                       env=dict(os.environ, OMP_NUM_THREADS="1"), timeout=600, check=True)
    return float(r.stdout.split()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--envs", type=int, default=16)
    ap.add_argument("--loops", default="envpool,sync,dummy")
    ap.add_argument("--repeat", type=int, default=1, help="counts per configuration (median)")
    a = ap.parse_args()
    result = []
    with tempfile.TemporaryDirectory() as tmp:
        lib = build_toggle(tmp)
        with open(os.path.join(tmp, "workload.py"), "w") as f:
            f.write(WORKLOAD)
        for kind in a.loops.split(","):
            modes = ["plain", "rlscope"] + ([] if kind == "envpool" else ["sampled"])
            runs = [m for _ in range(a.repeat) for m in modes]  # interleaved
            with ThreadPoolExecutor(2) as ex:  # side by side
                got = list(ex.map(count, [kind] * len(runs), runs, [a.steps] * len(runs),
                                  [a.envs] * len(runs), [tmp] * len(runs), [lib] * len(runs)))
            counts = {m: int(statistics.median(c for r, c in zip(runs, got, strict=True)
                                               if r == m)) for m in modes}
            per_step = a.steps * a.envs
            plain, rec = counts["plain"], counts["rlscope"]
            added = (rec - plain) / per_step
            print(f"{kind}: {plain / a.steps:,.0f} instructions per vector step "
                  f"uninstrumented, {rec / a.steps:,.0f} recording: {rec / plain:.4f}x, "
                  f"+{added:,.0f} per env step", flush=True)
            result += [f"{kind}_instr_ratio={rec / plain:.4f}",
                       f"{kind}_added_instr_per_env_step={added:.0f}"]
            if "sampled" in counts:
                from rlscope.integrations.vecenv import SAMPLE_NS_PER_ENV

                extra = (counts["sampled"] - plain) / per_step
                ns = step_ns(kind, a.steps, a.envs, tmp, lib)
                rate = min(1.0, ns / (SAMPLE_NS_PER_ENV * a.envs))
                avg = added + rate * (extra - added)
                print(f"{kind}: a sampled vector step, +{extra:,.0f} per env step; the plain "
                      f"vector step takes {ns / 1e3:,.0f} us, so one in {1 / rate:,.0f} is "
                      f"sampled: +{avg:,.0f} per env step on average", flush=True)
                result += [f"{kind}_sampled_added_instr_per_env_step={extra:.0f}",
                           f"{kind}_averaged_added_instr_per_env_step={avg:.0f}"]
    print("RESULT " + " ".join(result))


if __name__ == "__main__":
    main()
