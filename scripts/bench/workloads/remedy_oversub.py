"""A main loop of fixed CPU work beside WORKERS background processes that burn CPU until it
ends (prefetchers, loggers, replay workers polling): with more processes doing work than
cores the main loop waits for a core. The remedy rlscope's oversubscription verdict names:
at most cores - 1 workers beside it.

    python remedy_oversub.py WORKERS ITERATIONS
Last line: ``RESULT loop_s=<seconds of the main loop>``.
"""

import multiprocessing as mp
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
    workers, iterations = int(sys.argv[1]), int(sys.argv[2])
    ctx = mp.get_context("fork")
    stop = ctx.Event()
    procs = [ctx.Process(target=burn, args=(stop,)) for _ in range(workers)]
    for p in procs:
        p.start()
    t = time.perf_counter()
    for _ in range(iterations):
        work(20_000)
    loop = time.perf_counter() - t
    stop.set()
    for p in procs:
        p.join()
    print(f"RESULT loop_s={loop:.4f}")
