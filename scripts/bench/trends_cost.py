"""What the trend intervals cost the sweep: the same synthetic process (a training loop of
nested operations with a progress report per iteration, N events) analysed with the trend
grid (rlscope.analysis.engine.trendbins: 100 intervals cut into the sweep) and without it
(the grid replaced by an empty one), in interleaved rounds; medians and spread.

Usage: python scripts/bench/trends_cost.py [EVENTS] [ROUNDS]
Last line: RESULT trends_cost_ratio=<with/without, median> with_s=<s> without_s=<s>
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np

from rlscope.analysis.engine import overlap, synthetic
from rlscope.analysis.engine.overlap import analyze_process
from rlscope.analysis.engine.paths import NameTable, PathTable
from rlscope.analysis.engine.trendbins import TrendGrid
from rlscope.trace import format as fmt


def trace(n_events: int):  # type: ignore[no-untyped-def]
    """Iterations of: simulation > env.step (with a simulator call), inference (with a
    backend call), a progress report; 12 events each."""
    k = max(n_events // 12, 2)
    t = np.arange(k, dtype=np.int64) * 12_000
    rows = []
    for off, kind, name in ((0, fmt.OPERATION_BEGIN, "simulation"),
                            (100, fmt.OPERATION_BEGIN, "env.step"),
                            (200, fmt.SIMULATOR_CALL_BEGIN, ""),
                            (3000, fmt.SIMULATOR_CALL_END, ""),
                            (3100, fmt.OPERATION_END, "env.step"),
                            (3200, fmt.OPERATION_END, "simulation"),
                            (4000, fmt.OPERATION_BEGIN, "inference"),
                            (4100, fmt.BACKEND_CALL_BEGIN, ""),
                            (9000, fmt.BACKEND_CALL_END, ""),
                            (9100, fmt.OPERATION_END, "inference")):
        rows += [(int(x), 0, kind, name) for x in (t + off).tolist()]
    rows.sort(key=lambda r: r[0])
    rows = [(0, 0, fmt.PROCESS_START, ""), *rows, (int(t[-1]) + 12_000, 0, fmt.PROCESS_END, "")]
    progress = [(int(x) + 11_000, i * 4, k * 4) for i, x in enumerate(t.tolist())]
    return synthetic.process_trace(rows, progress=progress)


def one(p, trends: bool) -> float:  # type: ignore[no-untyped-def]
    real = overlap.trend_grid
    if not trends:
        overlap.trend_grid = lambda *a, **k: TrendGrid(np.zeros(0, np.int64))  # type: ignore
    try:
        t0 = time.perf_counter()
        analyze_process(p, PathTable(), NameTable(), batch_events=1 << 20)
        return time.perf_counter() - t0
    finally:
        overlap.trend_grid = real


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 4_000_000
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    p = trace(n)
    print(f"{len(p.events):,} events, {len(p.progress.time_ns):,} progress reports; "
          f"{rounds} interleaved rounds")
    with_s, without_s = [], []
    for r in range(rounds):
        order = (True, False) if r % 2 == 0 else (False, True)
        for trends in order:
            (with_s if trends else without_s).append(one(p, trends))
    ratios = [a / b for a, b in zip(with_s, without_s, strict=True)]
    for name, xs in (("with trends", with_s), ("without", without_s), ("ratio", ratios)):
        print(f"{name:>12}: median {statistics.median(xs):.3f}  min {min(xs):.3f}  "
              f"max {max(xs):.3f}")
    print(f"RESULT trends_cost_ratio={statistics.median(ratios):.3f} "
          f"with_s={statistics.median(with_s):.3f} without_s={statistics.median(without_s):.3f}")


if __name__ == "__main__":
    main()
