"""Workers started by multiprocessing (fork and spawn) each record their own trace."""

import multiprocessing as mp
import sys

import rlscope


def work(n: int) -> int:
    total = 0
    for i in range(n):
        with rlscope.operation("worker-step"):
            total += i
    return total


def main() -> None:
    method = sys.argv[1]
    ctx = mp.get_context(method)
    with rlscope.operation("parent"):
        procs = [ctx.Process(target=work, args=(25,)) for _ in range(2)]
        for p in procs:
            p.start()
        for p in procs:
            p.join()
            assert p.exitcode == 0
        with ctx.Pool(2) as pool:
            assert pool.map(work, [10, 10, 10]) == [45, 45, 45]
            pool.close()
            pool.join()


if __name__ == "__main__":
    main()
