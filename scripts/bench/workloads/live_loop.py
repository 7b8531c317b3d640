"""A small multi-process job to follow live (docs/performance.md, the live view's cost):
the main process loops over a phase with two operations and a progress report per
iteration while two multiprocessing workers step. Usage: live_loop.py [ITERATIONS]
[WORKER_STEPS]"""

import sys
import time
from multiprocessing import Process

import rlscope


def worker(n: int) -> None:
    for _ in range(n):
        with rlscope.operation("env.step"):
            time.sleep(0.005)


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    m = int(sys.argv[2]) if len(sys.argv) > 2 else 400
    workers = [Process(target=worker, args=(m,)) for _ in range(2)]
    for w in workers:
        w.start()
    for i in range(n):
        with rlscope.phase("training"):
            with rlscope.operation("simulation"):
                time.sleep(0.004)
            with rlscope.operation("inference"):
                sum(range(20000))
        rlscope.report_progress((i + 1) * 4, n * 4)
    for w in workers:
        w.join()
