"""A loop of fixed CPU work that reports its own progress: ``python progress_loop.py N``
(N iterations of ~20 ms, a progress report after each)."""

import sys

import rlscope


def main() -> None:
    n = int(sys.argv[1])
    x = 0
    for i in range(n):
        for j in range(200_000):
            x += j % 7
        rlscope.report_progress(i + 1, n)
    print(f"done {x}")


if __name__ == "__main__":
    main()
