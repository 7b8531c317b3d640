"""A main loop of fixed CPU work beside CPU-burning helper processes (one more than the
machine has cores), unmodified for rlscope. The loop measures itself: its wall time and
its CPU time (time.thread_time); the difference is time it was runnable without a core,
since it never blocks. Writes {"wall_s", "cpu_s"} to argv[1].

    oversub_loop.py OUT.json [ITERATIONS]
"""

import json
import multiprocessing as mp
import os
import sys
import time


def work(n: int) -> int:
    s = 0
    for i in range(n):
        s += i * i % 7
    return s


def burn(stop) -> None:
    while not stop.is_set():
        work(20_000)


if __name__ == "__main__":
    iterations = int(sys.argv[2]) if len(sys.argv) > 2 else 300
    ctx = mp.get_context("fork")
    stop = ctx.Event()
    procs = [ctx.Process(target=burn, args=(stop,)) for _ in range((os.cpu_count() or 1) + 1)]
    for p in procs:
        p.start()
    w, c = time.perf_counter(), time.thread_time()
    for _ in range(iterations):
        work(20_000)
    wall, cpu = time.perf_counter() - w, time.thread_time() - c
    stop.set()
    for p in procs:
        p.join()
    with open(sys.argv[1], "w") as f:
        json.dump({"wall_s": wall, "cpu_s": cpu}, f)
