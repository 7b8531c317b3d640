"""A pool of 2 workers mapping a function over 20 items, one of them slow (item 13
sleeps 0.3 s, the others ~0.02 s). argv[1]: pool (multiprocessing.Pool.map, chunksize
2), imap (Pool.imap_unordered), apply (Pool.apply_async, func by position and by
keyword), executor (ProcessPoolExecutor.map, chunksize 2, and one submit) or threads
(multiprocessing.pool.ThreadPool.map and one apply_async)."""

import concurrent.futures
import multiprocessing as mp
import sys
import time

SLOW = 13
ITEMS = 20


def slow_square(x: int) -> int:
    time.sleep(0.3 if x == SLOW else 0.02)
    return x * x


def main() -> None:
    how = sys.argv[1]
    want = [x * x for x in range(ITEMS)]
    ctx = mp.get_context("fork")
    if how == "executor":
        with concurrent.futures.ProcessPoolExecutor(2, mp_context=ctx) as ex:
            assert list(ex.map(slow_square, range(ITEMS), chunksize=2)) == want
            assert ex.submit(slow_square, 3).result() == 9
        return
    if how == "threads":
        from multiprocessing.pool import ThreadPool

        with ThreadPool(2) as tp:
            assert tp.map(slow_square, range(ITEMS)) == want
            assert tp.apply_async(slow_square, (3,)).get() == 9
        return
    with ctx.Pool(2) as pool:
        if how == "pool":
            assert pool.map(slow_square, range(ITEMS), chunksize=2) == want
        elif how == "imap":
            assert sorted(pool.imap_unordered(slow_square, range(ITEMS))) == want
        else:
            # The function passed by position and by keyword.
            assert [pool.apply_async(slow_square, (0,)).get(),
                    pool.apply_async(func=slow_square, args=(1,)).get(),
                    pool.apply_async(slow_square, args=(2,)).get()] == want[:3]
        pool.close()
        pool.join()


if __name__ == "__main__":
    main()
