"""What the pool integration costs in situ, inside one profiled run: a ``Pool`` (fork)
maps a no-op over two items, in blocks with the main process recording (its calls
wrapped in tasks, the workers recording them) and not (plain calls), in turns. Per pair
of blocks: the workers' CPU added per task (their ``/proc/<pid>/schedstat``), the main
thread's CPU added per call, the pool's task thread's (it pickles the call's tasks), the
wall added per call (the round trip), and the main process's CPU added per call (all its
threads: the pool's handler threads too).

    OMP_NUM_THREADS=1 python scripts/bench/pool_task_cost.py [--pairs 40] [--calls 100]
        [--workers 1] [--intercept pool]

runs itself under ``rls-prof`` (samplers off). Last line:

    RESULT worker_task_ns=<median> worker_task_se_ns=... caller_call_ns=...
        caller_call_se_ns=... task_thread_call_ns=... task_thread_call_se_ns=...
        wall_call_ns=... wall_call_se_ns=... caller_process_ns=...
        caller_process_se_ns=... plain_call_us=...

(standard errors of the medians from their quartiles). The cost model's ``pool_task``
(rlscope.calibration.microbench.in_situ_pool) is the first, the task's operation left
out; its ``pool_call`` the next two, the task thread's part inside the wait.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from rlscope.calibration.microbench import median_se


def _noop(x: object) -> object:
    return x


def _cpu_ns(pid: int, tid: int | None = None) -> int:
    path = f"/proc/{pid}/schedstat" if tid is None else f"/proc/{pid}/task/{tid}/schedstat"
    with open(path) as f:
        return int(f.read().split()[0])


def inside(pairs: int, calls: int, workers: int) -> None:
    """Under rls-prof: the blocks, then the RESULT line."""
    import multiprocessing as mp

    import rlscope
    from rlscope import annotate

    directory = annotate.output_dir()
    if directory is None:
        sys.exit("pool_task_cost: run it without --inside (it starts rls-prof itself)")
    items = [1, 2]
    with mp.get_context("fork").Pool(workers) as pool:
        pids = [p.pid for p in pool._pool]  # type: ignore[attr-defined]
        for _ in range(calls):
            pool.map(_noop, items)
        task, call, wall, process, sent, plain = [], [], [], [], [], []
        me, sender = os.getpid(), pool._task_handler.native_id  # type: ignore[attr-defined]
        for k in range(pairs):
            per: dict[bool, tuple[float, float, float, float, float]] = {}
            for on in (True, False) if k % 2 == 0 else (False, True):
                if not on:
                    rlscope.stop()
                w0 = sum(_cpu_ns(p) for p in pids)
                c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
                p0, s0 = time.process_time_ns(), _cpu_ns(me, sender)
                for _ in range(calls):
                    pool.map(_noop, items)
                p1, s1 = time.process_time_ns(), _cpu_ns(me, sender)
                t1, c1 = time.perf_counter_ns(), time.thread_time_ns()
                per[on] = ((sum(_cpu_ns(p) for p in pids) - w0) / calls / len(items),
                           (c1 - c0) / calls, (t1 - t0) / calls, (p1 - p0) / calls,
                           (s1 - s0) / calls)
                if not on:
                    rlscope.start(directory)
            task.append(per[True][0] - per[False][0])
            call.append(per[True][1] - per[False][1])
            wall.append(per[True][2] - per[False][2])
            process.append(per[True][3] - per[False][3])
            sent.append(per[True][4] - per[False][4])
            plain.append(per[False][2])
        pool.close()
        pool.join()
    fields = []
    for name, d in (("worker_task", task), ("caller_call", call), ("task_thread_call", sent),
                    ("wall_call", wall), ("caller_process", process)):
        med, se = median_se(d)
        fields.append(f"{name}_ns={med:.0f} {name}_se_ns={se:.0f}")
    print("RESULT " + " ".join(fields) + f" plain_call_us={np.median(plain) / 1e3:.1f}",
          flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--calls", type=int, default=100, help="pool.map calls per block")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--intercept", default="pool")
    ap.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.inside:
        inside(a.pairs, a.calls, a.workers)
        return
    with tempfile.TemporaryDirectory(prefix="rls-pool-cost-") as d:
        cmd = [sys.executable, "-m", "rlscope.cli.prof", "-q", "--force", "--no-cost-model",
               "--no-sample", "--sample-python", "off", "--intercept", a.intercept, "-o",
               os.path.join(d, "run"), "--", sys.executable, os.path.abspath(__file__),
               "--inside", "--pairs", str(a.pairs), "--calls", str(a.calls), "--workers",
               str(a.workers)]
        r = subprocess.run(cmd, env=dict(os.environ, OMP_NUM_THREADS="1"))
    sys.exit(r.returncode)


if __name__ == "__main__":
    main()
