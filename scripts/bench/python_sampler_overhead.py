"""What Python stack sampling (rlscope.inprocess.pysampler) costs, and why a thread.

    python scripts/bench/python_sampler_overhead.py [--rounds 5] [--rates 0,50,100,200,500,1000]
                                                   [--sb3-rounds 5] [--timesteps 4096]

1. Per sample: the sampler's own time per sample (``sys._current_frames``, walking and
   interning every thread's stack, formatting the lines), measured inside the sampler
   (``PySampler.cost_ns / samples``) in a pure-Python workload of 1 and of 4 threads
   (stacks ~25 frames deep).
2. Rate/cost curve: a fixed pure-Python workload (recursion and loops, ~1 s, timed inside
   the process with perf_counter), a fresh process per run, at each rate, for two
   mechanisms side by side:
     thread  the sampler thread rlscope uses (samples every thread);
     signal  setitimer(ITIMER_PROF) + a Python SIGPROF handler walking the interrupted
             frame (main thread only) with the same interning: the signal-based option.
   Rounds interleave every (mechanism, rate); inflation = median over rounds of the run
   time over the same round's rate-0 run; also the samples actually taken per second.
3. SB3 PPO CartPole (1 torch thread), ``model.learn`` timed inside the workload, under
   ``rls-prof --sample-python off`` and ``rls-prof`` (sampling at the default rate),
   interleaved, order alternating per round; median of per-round ratios on / off.

Last line:

    RESULT per_sample_us=<1 thread> per_sample_us_4threads=<4 threads>
           inflation_<hz>hz=<thread sampler, pure Python> ... sb3_inflation=<on / off>
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
import json, os, sys, threading, time
mech, hz, nthreads, out = sys.argv[1], float(sys.argv[2]), int(sys.argv[3]), sys.argv[4]

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

def nest(d, n):
    if d:
        return nest(d - 1, n)
    s = 0
    for _ in range(n):
        s += fib(14)
    return s

def work(reps):
    for _ in range(reps):
        nest(10, 50)

def make(path):
    # (start, stop) of one sampling slice for the mechanism
    if mech == "thread":
        from rlscope.inprocess.pysampler import PySampler
        box = []
        def start():
            box.append(PySampler(path, hz))
            box[-1].start()
        def stop():
            box[-1].stop()
            return box[-1].samples, box[-1].cost_ns
        return start, stop
    import signal
    codes, stacks, taken = {}, {}, []
    def on_prof(signum, frame):
        t0 = time.thread_time_ns()
        ids = []
        while frame is not None:
            c = frame.f_code
            i = codes.get(id(c))
            if i is None:
                i = codes[id(c)] = len(codes)
            ids.append(i)
            frame = frame.f_back
        key = tuple(ids)
        sid = stacks.get(key)
        if sid is None:
            sid = stacks[key] = len(stacks)
        taken.append((time.monotonic_ns(), threading.get_native_id(), sid,
                      time.thread_time_ns() - t0))
    signal.signal(signal.SIGPROF, on_prof)
    def start():
        taken.clear()
        signal.setitimer(signal.ITIMER_PROF, 1.0 / hz, 1.0 / hz)
    def stop():
        signal.setitimer(signal.ITIMER_PROF, 0)
        return len(taken), sum(x[3] for x in taken)
    return start, stop

# Paired slices: each pair runs the same work with and without sampling, adjacent in
# time (order alternating), so a load that drifts over seconds cancels out.
start, stop = make(os.path.join(out, f"s{os.getpid()}.rlstacks"))
pairs, reps = int(sys.argv[5]), int(sys.argv[6])
work(reps)  # warm-up
ratios, samples, cost, on_s = [], 0, 0, 0.0
for k in range(pairs):
    t = {}
    for on in ((True, False) if k % 2 == 0 else (False, True)):
        others = [threading.Thread(target=work, args=(reps,)) for _ in range(nthreads - 1)]
        if on:
            start()
        t0 = time.perf_counter()
        for th in others:
            th.start()
        work(reps)
        for th in others:
            th.join()
        t[on] = time.perf_counter() - t0
        if on:
            n, c = stop()
            samples, cost, on_s = samples + n, cost + c, on_s + t[on]
    ratios.append(t[True] / t[False])
print(json.dumps({"ratios": ratios, "samples": samples, "cost_ns": cost, "on_s": on_s}))
"""

SB3 = r"""
import json, sys, time
import torch
torch.set_num_threads(1)
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback
from rlscope import annotate
from rlscope.inprocess import pysampler
steps, hz = int(sys.argv[1]), float(sys.argv[2])

class Toggle(BaseCallback):
    # PPO iterations (rollout + train) alternately with and without stack sampling, in
    # pairs of adjacent iterations (order alternating), each timed.
    def __init__(self):
        super().__init__()
        self.k, self.t, self.on, self.times = 0, None, False, []
    def _on_rollout_start(self):
        now = time.perf_counter()
        if self.t is not None:
            self.times.append((self.on, now - self.t))
        # iteration 0 warms up (off); then pairs of iterations, on first in every other
        j = self.k - 1
        self.on = j >= 0 and ((j % 2 == 0) == ((j // 2) % 2 == 0))
        pysampler.stop()
        if self.on:
            pysampler.start(annotate.output_dir(), hz)
        self.k += 1
        self.t = time.perf_counter()
    def _on_step(self):
        return True

model = PPO("MlpPolicy", "CartPole-v1", seed=0, n_steps=512, batch_size=64, n_epochs=4)
cb = Toggle()
model.learn(total_timesteps=steps, callback=cb)
t = cb.times[1:]  # the first iteration warms up
pairs = [(a, b) for a, b in zip(t[0::2], t[1::2])]
ratios = [(a[1] / b[1]) if a[0] else (b[1] / a[1]) for a, b in pairs if a[0] != b[0]]
print(json.dumps({"ratios": ratios}))
"""

ENV = dict(os.environ, OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")


def workload(mech: str, hz: float, tmp: str, pairs: int, reps: int, threads: int = 1
             ) -> dict:
    r = subprocess.run([sys.executable, "-c", WORKLOAD, mech, str(hz), str(threads), tmp,
                        str(pairs), str(reps)], capture_output=True, text=True, env=ENV,
                       timeout=900)
    if r.returncode != 0:
        sys.exit(f"workload {mech} {hz} failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def sb3(hz: float, steps: int, out: str) -> list[float]:
    cmd = [sys.executable, "-m", "rlscope.cli.prof", "-q", "-o", out, "--sample-python",
           "off", "--", sys.executable, "-c", SB3, str(steps), str(hz)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=1800)
    if r.returncode != 0:
        sys.exit(f"sb3 run failed:\n{r.stderr[-2000:]}")
    return list(json.loads(r.stdout.strip().splitlines()[-1])["ratios"])


def quartiles(xs: list[float]) -> tuple[float, float]:
    if len(xs) < 2:
        return xs[0], xs[0]
    q = statistics.quantiles(xs, n=4)
    return q[0], q[2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", default="20,50,100,200,1000")
    ap.add_argument("--pairs", type=int, default=30, help="slice pairs per rate")
    ap.add_argument("--reps", type=int, default=6, help="work per slice (~16 ms each)")
    ap.add_argument("--sb3-hz", default="100", help="rates sampled in SB3 PPO (comma list)")
    ap.add_argument("--timesteps", type=int, default=16384)
    ap.add_argument("--sb3-runs", type=int, default=1)
    a = ap.parse_args()
    rates = [float(x) for x in a.rates.split(",") if float(x) > 0]
    line = "RESULT"
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'mechanism':<8} {'threads':>7} {'Hz':>6} {'inflation':>9} {'quartiles':>15} "
              f"{'taken/s':>8} {'us CPU/sample':>13}", flush=True)
        cells = [("thread", hz, 1) for hz in rates] + [("thread", 100.0, 4)] + \
            [("signal", hz, 1) for hz in rates]
        for mech, hz, n in cells:
            r = workload(mech, hz, tmp, a.pairs, a.reps, n)
            med = statistics.median(r["ratios"])
            lo, hi = quartiles(r["ratios"])
            per = r["cost_ns"] / max(1, r["samples"]) / 1e3
            print(f"{mech:<8} {n:>7} {hz:>6g} {med:>9.4f} {lo:>7.4f}-{hi:<7.4f} "
                  f"{r['samples'] / r['on_s']:>8.1f} {per:>13.1f}", flush=True)
            tag = f"{'' if mech == 'thread' else 'signal_'}inflation_{hz:g}hz" + \
                ("" if n == 1 else f"_{n}threads")
            line += f" {tag}={med:.4f}"
            if (mech, hz, n) == ("thread", 100.0, 1):
                line += f" per_sample_us={per:.1f}"
            if (mech, hz, n) == ("thread", 100.0, 4):
                line += f" per_sample_us_4threads={per:.1f}"
        for hz in [float(x) for x in a.sb3_hz.split(",") if x]:
            ratios: list[float] = []
            for i in range(a.sb3_runs):
                ratios += sb3(hz, a.timesteps, os.path.join(tmp, f"sb3-{hz:g}-{i}"))
            med = statistics.median(ratios)
            lo, hi = quartiles(ratios)
            print(f"sb3 PPO at {hz:g} Hz: on / off iteration pairs ({len(ratios)}): median "
                  f"{med:.4f} (quartiles {lo:.4f} / {hi:.4f})", flush=True)
            line += f" sb3_inflation_{hz:g}hz={med:.4f}"
    print(line)


if __name__ == "__main__":
    main()
