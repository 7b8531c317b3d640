"""A Pool(2) mapping a rollout function over 6 items with chunksize 1, the last one five
times as slow as the others (sleep-based, so the figures do not depend on the machine's load);
``first`` hands the slow item out first (the remedy rlscope's pool-straggler verdict names).

    python remedy_pool.py given|first
Last line: ``RESULT loop_s=<seconds of the map call>``.
"""

import multiprocessing as mp
import sys
import time

ITEMS, SLOW = 6, 5


def rollout(i: int) -> int:
    time.sleep(0.5 if i == SLOW else 0.1)
    return i


if __name__ == "__main__":
    order = list(range(ITEMS))
    if sys.argv[1] == "first":
        order = [SLOW] + [i for i in order if i != SLOW]
    with mp.get_context("fork").Pool(2) as pool:
        pool.map(rollout, [0, 1])  # workers started and warm before the timed call
        t = time.perf_counter()
        pool.map(rollout, order, chunksize=1)
        loop = time.perf_counter() - t
    print(f"RESULT loop_s={loop:.4f}")
