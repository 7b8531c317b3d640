"""An annotated loop where one pure-Python helper (``slow_helper``) takes most of
``inference`` and another (``env_physics``) most of ``simulation``, ~1.5 s; a thread
running ``bg_helper`` inside ``bg_op`` and a forked Pool worker running ``worker_helper``
inside ``worker_op`` meanwhile. Prints the loop's own time in each operation as JSON."""

import json
import multiprocessing as mp
import threading
import time

import rlscope


def slow_helper(n: int) -> int:
    s = 0
    for i in range(n):
        s += (i * i) % 7
    return s


def policy(obs: int) -> int:
    return slow_helper(6000) + obs


def env_physics(n: int) -> int:
    s = 0
    for i in range(n):
        s ^= i << 1
    return s


def bg_helper(until: float) -> None:
    while time.perf_counter() < until:
        sum(i for i in range(500))


def worker_helper(n: int) -> int:
    t = time.perf_counter() + 0.4
    s = 0
    while time.perf_counter() < t:
        s += sum(i * n for i in range(300))
    return s


def worker_job(n: int) -> int:
    with rlscope.operation("worker_op"):
        return worker_helper(n)


def background(until: float) -> None:
    with rlscope.operation("bg_op"):
        bg_helper(until)


def main() -> None:
    spent = {"inference": 0.0, "simulation": 0.0}
    end = time.perf_counter() + 1.5
    th = threading.Thread(target=background, args=(time.perf_counter() + 0.5,))
    th.start()
    with mp.get_context("fork").Pool(1) as pool:
        job = pool.map_async(worker_job, [3])
        obs = 0
        while time.perf_counter() < end:
            t0 = time.perf_counter()
            with rlscope.operation("inference"):
                action = policy(obs)
            t1 = time.perf_counter()
            with rlscope.operation("simulation"):
                obs = env_physics(3000) + action % 3
            t2 = time.perf_counter()
            spent["inference"] += t1 - t0
            spent["simulation"] += t2 - t1
        job.get(timeout=60)
        pool.close()
        pool.join()
    th.join()
    print(json.dumps(spent))


if __name__ == "__main__":
    main()
