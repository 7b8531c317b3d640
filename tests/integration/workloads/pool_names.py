"""The same work in a Pool worker under fork and under spawn, started inside an
operation of the parent (``pool_map``)."""

import multiprocessing as mp
import sys

import rlscope


def child_work(n: int) -> int:
    with rlscope.operation("child_work"):
        return sum(range(n))


def main() -> None:
    ctx = mp.get_context(sys.argv[1])
    with rlscope.operation("pool_map"), ctx.Pool(1) as pool:
        assert pool.map(child_work, [1000, 2000]) == [sum(range(1000)), sum(range(2000))]
        pool.close()
        pool.join()


if __name__ == "__main__":
    main()
