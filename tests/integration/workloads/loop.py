"""A small annotated workload with a known structure, for rls-prof integration tests.

Prints one JSON line with what it did and the wall time it measured itself.
"""

import argparse
import json
import os
import threading
import time

import rlscope


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def side_thread(n: int) -> None:
    for _ in range(n):
        with rlscope.operation("prefetch"):
            time.sleep(0.0002)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--work-s", type=float, default=0.0002)
    ap.add_argument("--crash-at", type=int, default=-1)
    ap.add_argument("--hang-at", type=int, default=-1)
    ap.add_argument("--fork", action="store_true")
    args = ap.parse_args()
    rlscope.set_metadata(algo="test", iterations=args.iterations)
    th = threading.Thread(target=side_thread, args=(50,), name="prefetcher")
    th.start()
    th.join()
    t0 = time.perf_counter_ns()
    with rlscope.phase("training"):
        for i in range(args.iterations):
            if i == args.hang_at:
                print("HANGING", flush=True)
                time.sleep(3600)
            with rlscope.operation("inference"):
                spin(args.work_s)
            with rlscope.operation("simulation"):
                spin(args.work_s / 2)
            with rlscope.operation("backprop"):
                with rlscope.operation("forward"):
                    spin(args.work_s / 2)
                spin(args.work_s / 2)
                if i == args.crash_at:
                    raise RuntimeError("workload crashed on purpose")
            rlscope.report_progress(i + 1, args.iterations)
    wall = time.perf_counter_ns() - t0
    child = None
    if args.fork:
        pid = os.fork()
        if pid == 0:
            for _ in range(7):
                with rlscope.operation("child-op"):
                    spin(0.0001)
            rlscope.stop()
            os._exit(0)
        os.waitpid(pid, 0)
        child = pid
    print(json.dumps({"wall_ns": wall, "iterations": args.iterations, "child": child}))


if __name__ == "__main__":
    main()
