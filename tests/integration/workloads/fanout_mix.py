"""Processes that name their operations and phases in different orders (so each meets
names in its own order), with threads, waits and progress, and a pool whose tasks the
main process waits for: parallel analysis must number them as the serial one does (and
correct the pool's waits as it does)."""

import multiprocessing as mp
import threading
import time

import rlscope

ORDERS = [["alpha", "beta", "gamma"], ["gamma", "delta", "alpha"], ["beta", "epsilon"]]


def spin(us: int) -> None:
    end = time.perf_counter() + us / 1e6
    while time.perf_counter() < end:
        pass


def work(k: int) -> None:
    names = ORDERS[k % len(ORDERS)]
    phases = ["warmup", "training"] if k % 2 else ["training", f"eval-{k}"]

    def helper() -> None:
        for i in range(20):
            with rlscope.operation(f"helper-{names[i % len(names)]}"):
                spin(50)

    t = threading.Thread(target=helper)
    t.start()
    for ph in phases:
        with rlscope.phase(ph):
            for i in range(30):
                with rlscope.operation(names[i % len(names)]):
                    with rlscope.operation(f"inner-{names[(i + 1) % len(names)]}"):
                        spin(30)
                    time.sleep(0.0002)
                rlscope.report_progress(i + 1, 60)
    t.join()


def pool_task(k: int) -> int:
    for _ in range(20):
        with rlscope.operation("pool-step"):
            spin(100)
    return k


def main() -> None:
    with mp.get_context("fork").Pool(2) as pool, rlscope.operation("pool"):
        assert pool.map(pool_task, range(4)) == list(range(4))
    ctx = mp.get_context("spawn")
    with rlscope.phase("setup"), rlscope.operation("parent"):
        procs = [ctx.Process(target=work, args=(k,)) for k in range(4)]
        for p in procs:
            p.start()
        work(5)
        for p in procs:
            p.join()
            assert p.exitcode == 0


if __name__ == "__main__":
    main()
