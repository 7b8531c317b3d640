"""What Python stack sampling (rlscope.inprocess.pysampler) costs, and why a thread.

    python scripts/bench/python_sampler_overhead.py [--rates 20,50,100,200,1000]
        [--pairs 30] [--reps 6] [--sb3-hz 50] [--timesteps 16384] [--sb3-runs 1]

Every comparison is paired in time, so that a machine whose load drifts over seconds
(this one: 2 cores shared by several test suites) cancels out of it:

1. Rate/cost curve: a fresh process per (mechanism, rate, threads) runs a fixed pure-Python
   workload (recursion and loops, ~25 frames deep) in ``--pairs`` pairs of slices of
   ``--reps`` units (~100 ms), one slice sampled and one not, adjacent, order alternating.
   Mechanisms side by side:
     thread  rlscope's sampler thread (samples every thread);
     signal  setitimer(ITIMER_PROF) + a Python SIGPROF handler walking the interrupted
             frame (main thread only) with the same interning: the signal-based option.
   Per cell: the median of the pairs' wall ratios (sampled / not) and of their process
   CPU ratios (all threads, the sampler included: the cost in core time), with
   quartiles; the samples taken per second of sampled slice; the sampler's CPU time per
   sample (``thread_time`` around each sample, the walk and interning of every thread:
   ``PySampler.cost_ns / samples``), for 1 thread and for 4 threads.
2. SB3 PPO CartPole (1 torch thread) under ``rls-prof --sample-python off``, the workload
   itself starting and stopping the sampler at PPO iteration boundaries (a callback), so
   that adjacent iterations (rollout + train) run with and without it, in pairs of both
   orders; median of the pairs' wall and CPU ratios at each ``--sb3-hz``.

Last line:

    RESULT inflation_<hz>hz=<wall> cpu_inflation_<hz>hz=<CPU> ... per_sample_us=<100 Hz,
           1 thread> per_sample_us_4threads=... signal_inflation_<hz>hz=...
           sb3_inflation_<hz>hz=<wall> sb3_cpu_inflation_<hz>hz=<CPU>
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
ratios, cpu_ratios, samples, cost, on_s = [], [], 0, 0, 0.0
for k in range(pairs):
    t, c = {}, {}
    for on in ((True, False) if k % 2 == 0 else (False, True)):
        others = [threading.Thread(target=work, args=(reps,)) for _ in range(nthreads - 1)]
        if on:
            start()
        t0, c0 = time.perf_counter(), time.process_time()
        for th in others:
            th.start()
        work(reps)
        for th in others:
            th.join()
        t[on], c[on] = time.perf_counter() - t0, time.process_time() - c0
        if on:
            n, spent = stop()
            samples, cost, on_s = samples + n, cost + spent, on_s + t[on]
    ratios.append(t[True] / t[False])
    cpu_ratios.append(c[True] / c[False])
print(json.dumps({"ratios": ratios, "cpu_ratios": cpu_ratios, "samples": samples,
                  "cost_ns": cost, "on_s": on_s}))
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
        self.k, self.t, self.c, self.on, self.times = 0, None, None, False, []
        self.sampler_cpu, self.on_cpu, self.samples = 0, 0.0, 0
    def _on_rollout_start(self):
        now, cpu = time.perf_counter(), time.process_time()
        if self.t is not None:
            self.times.append((self.on, now - self.t, cpu - self.c))
            if self.on:
                self.on_cpu += cpu - self.c
        s = pysampler.active()
        # iteration 0 warms up (off); then pairs of iterations, on first in every other
        j = self.k - 1
        self.on = j >= 0 and ((j % 2 == 0) == ((j // 2) % 2 == 0))
        pysampler.stop()
        if s is not None:  # its thread has ended: its whole CPU time
            self.sampler_cpu += s.thread_cpu_ns
            self.samples += s.samples
        if self.on:
            pysampler.start(annotate.output_dir(), hz)
        self.k += 1
        self.t, self.c = time.perf_counter(), time.process_time()
    def _on_step(self):
        return True

model = PPO("MlpPolicy", "CartPole-v1", seed=0, n_steps=512, batch_size=64, n_epochs=4)
cb = Toggle()
model.learn(total_timesteps=steps, callback=cb)
t = cb.times[1:]  # the first iteration warms up
pairs = [(a, b) for a, b in zip(t[0::2], t[1::2])]
def ratio(i):
    return [(a[i] / b[i]) if a[0] else (b[i] / a[i]) for a, b in pairs if a[0] != b[0]]
print(json.dumps({"ratios": ratio(1), "cpu_ratios": ratio(2),
                  "sampler_cpu_s": cb.sampler_cpu / 1e9, "on_cpu_s": cb.on_cpu,
                  "samples": cb.samples}))
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


def sb3(hz: float, steps: int, out: str) -> dict:
    cmd = [sys.executable, "-m", "rlscope.cli.prof", "-q", "-o", out, "--sample-python",
           "off", "--", sys.executable, "-c", SB3, str(steps), str(hz)]
    r = subprocess.run(cmd, capture_output=True, text=True, env=ENV, timeout=1800)
    if r.returncode != 0:
        sys.exit(f"sb3 run failed:\n{r.stderr[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


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
    ap.add_argument("--sb3-hz", default="50", help="rates sampled in SB3 PPO (comma list)")
    ap.add_argument("--timesteps", type=int, default=16384)
    ap.add_argument("--sb3-runs", type=int, default=1)
    a = ap.parse_args()
    rates = [float(x) for x in a.rates.split(",") if float(x) > 0]
    line = "RESULT"
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'mechanism':<8} {'threads':>7} {'Hz':>6} {'wall x':>7} {'quartiles':>15} "
              f"{'CPU x':>7} {'quartiles':>15} {'taken/s':>8} {'us CPU/sample':>13}",
              flush=True)
        cells = [("thread", hz, 1) for hz in rates] + [("thread", 100.0, 4)] + \
            [("signal", hz, 1) for hz in rates]
        for mech, hz, n in cells:
            r = workload(mech, hz, tmp, a.pairs, a.reps, n)
            med, cmed = statistics.median(r["ratios"]), statistics.median(r["cpu_ratios"])
            lo, hi = quartiles(r["ratios"])
            clo, chi = quartiles(r["cpu_ratios"])
            per = r["cost_ns"] / max(1, r["samples"]) / 1e3
            print(f"{mech:<8} {n:>7} {hz:>6g} {med:>7.4f} {lo:>7.4f}-{hi:<7.4f} "
                  f"{cmed:>7.4f} {clo:>7.4f}-{chi:<7.4f} "
                  f"{r['samples'] / r['on_s']:>8.1f} {per:>13.1f}", flush=True)
            tag = f"{'' if mech == 'thread' else 'signal_'}inflation_{hz:g}hz" + \
                ("" if n == 1 else f"_{n}threads")
            line += f" {tag}={med:.4f} cpu_{tag}={cmed:.4f}"
            if (mech, hz, n) == ("thread", 100.0, 1):
                line += f" per_sample_us={per:.1f}"
            if (mech, hz, n) == ("thread", 100.0, 4):
                line += f" per_sample_us_4threads={per:.1f}"
        for hz in [float(x) for x in a.sb3_hz.split(",") if x]:
            wall: list[float] = []
            cpu: list[float] = []
            own = on = 0.0
            n = 0
            for i in range(a.sb3_runs):
                got = sb3(hz, a.timesteps, os.path.join(tmp, f"sb3-{hz:g}-{i}"))
                wall += got["ratios"]
                cpu += got["cpu_ratios"]
                own, on, n = own + got["sampler_cpu_s"], on + got["on_cpu_s"], n + got["samples"]
            # The sampler thread's own CPU over the process's CPU while it ran (both
            # counted by the kernel: not swayed by the machine's load as the ratios are).
            print(f"sb3 PPO at {hz:g} Hz: sampler thread CPU {own:.3f} s = "
                  f"{100 * own / on:.2f}% of the process's CPU in the sampled iterations "
                  f"({n} samples, {1e6 * own / max(1, n):.0f} us each)", flush=True)
            line += f" sb3_sampler_cpu_pct_{hz:g}hz={100 * own / on:.2f}"
            for what, xs in (("wall", wall), ("CPU", cpu)):
                med = statistics.median(xs)
                lo, hi = quartiles(xs)
                print(f"sb3 PPO at {hz:g} Hz, {what}: on / off iteration pairs ({len(xs)}): "
                      f"median {med:.4f} (quartiles {lo:.4f} / {hi:.4f})", flush=True)
                line += f" sb3_{'' if what == 'wall' else 'cpu_'}inflation_{hz:g}hz={med:.4f}"
    print(line)


if __name__ == "__main__":
    main()
