"""A multiprocessing worker started with spawn (its command line is ``python -c ...``):
it runs a target function of this script that does a few operations of CPU work."""

import multiprocessing as mp
import time

import rlscope


def spin(seconds: float) -> None:
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        with rlscope.operation("spin-step"):
            stop = time.perf_counter() + 0.002
            while time.perf_counter() < stop:
                pass


def main() -> None:
    ctx = mp.get_context("spawn")
    with rlscope.operation("parent"):
        p = ctx.Process(target=spin, args=(0.4,))
        p.start()
        p.join()
        assert p.exitcode == 0


if __name__ == "__main__":
    main()
