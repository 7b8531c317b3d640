"""A fork Pool(2) whose tasks time themselves inside the worker: the ground truth for
what recording costs a forked single-threaded worker (scripts/bench/forked_worker_cost.py).

    python pool_worker_task.py MODE OUT.json [--maps 40] [--steps 1500]

MODE: ``plain``, or ``thread`` (each worker starts one idle Python thread in its
initializer: what any extra thread costs a single-threaded worker, rlscope's or not).
Each task steps a small learned model (~3 small torch calls a step, as the per-operation
benchmark's ``pool_torch``) and times the loop with the worker's thread CPU clock, so
neither the pool's hand-offs nor the machine's other processes are in it. OUT.json:
{"task_ns": [each task's CPU ns]}.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import sys
import threading
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import torch

torch.set_num_threads(1)
_idle = threading.Event()


def _start_idle_thread() -> None:
    threading.Thread(target=_idle.wait, name="idle", daemon=True).start()


def task(args: tuple[int, int]) -> int:
    seed, steps = args
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, 4, generator=g)
    w = torch.randn(4, 4, generator=g) * 0.5
    t0 = time.thread_time_ns()
    for _ in range(steps):
        x = torch.tanh(x @ w) + 0.01
    return time.thread_time_ns() - t0


def main() -> None:
    mode, out = sys.argv[1], sys.argv[2]
    maps = int(sys.argv[sys.argv.index("--maps") + 1]) if "--maps" in sys.argv else 40
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 1500
    if mode not in ("plain", "thread"):
        sys.exit(f"pool_worker_task: unknown mode {mode!r} (plain or thread)")
    init = _start_idle_thread if mode == "thread" else None
    ns: list[int] = []
    with mp.get_context("fork").Pool(2, initializer=init) as pool:
        for i in range(maps):
            ns += pool.map(task, [(2 * i, steps), (2 * i + 1, steps)])
    with open(out, "w") as f:
        json.dump({"task_ns": ns}, f)


if __name__ == "__main__":
    main()
