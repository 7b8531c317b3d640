"""A loop of fixed CPU work that reports its own progress: ``python progress_loop.py N
[pool]`` (N iterations of ~10 ms, a progress report after each; ``pool``: half of each
iteration's work in a forked one-worker Pool, a multi-process run)."""

import multiprocessing as mp
import sys

import rlscope


def work(k: int) -> int:
    x = 0
    for j in range(k):
        x += j % 7
    return x


def main() -> None:
    n = int(sys.argv[1])
    pool = mp.get_context("fork").Pool(1) if sys.argv[2:] == ["pool"] else None
    x = 0
    try:
        for i in range(n):
            if pool is None:
                x += work(200_000)
            else:
                x += work(100_000) + pool.apply(work, (100_000,))
            rlscope.report_progress(i + 1, n)
    finally:
        if pool is not None:
            pool.terminate()
            pool.join()
    print(f"done {x}")


if __name__ == "__main__":
    main()
