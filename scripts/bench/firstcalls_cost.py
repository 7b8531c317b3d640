"""What keeping each operation's first calls (engine.firstcalls, for the warm-up) costs
the sweep, on its worst case: a trace of operation events only.

    python scripts/bench/firstcalls_cost.py [--calls 200000] [--rounds 5] [--batch 250000]

An operation nested in another, ``--calls`` times (4 events each), analysed by
``engine.overlap.analyze_process`` in batches of ``--batch`` events, with FirstCalls and
with a no-op in its place, in ``--rounds`` interleaved rounds (order alternating);
medians and the spread of the per-round ratios.

Last line:

    RESULT firstcalls_ratio=<median on/off> on_s=<median> off_s=<median> min_ratio=.. max_ratio=..
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from rlscope.analysis.engine import firstcalls, overlap
from rlscope.analysis.engine.paths import NameTable, PathTable
from rlscope.analysis.engine.synthetic import process_trace
from rlscope.trace import format as fmt


class _Off:
    def __init__(self, paths: PathTable, keep: int = firstcalls.KEEP) -> None:
        pass

    def take(self, *args: object) -> None:
        pass

    def result(self) -> np.ndarray:
        return np.zeros((0, 5), np.int64)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--batch", type=int, default=250_000)
    args = ap.parse_args()
    n = args.calls
    t = np.arange(4 * n, dtype=np.int64) * 1000 + 10
    kinds = np.tile([fmt.OPERATION_BEGIN, fmt.OPERATION_BEGIN, fmt.OPERATION_END,
                     fmt.OPERATION_END], n)
    names = np.tile(["outer", "inner", "inner", "outer"], n)
    events = [(0, 0, fmt.PROCESS_START, ""),
              *zip(t.tolist(), [0] * len(t), kinds.tolist(), names.tolist(), strict=True),
              (int(t[-1]) + 10, 0, fmt.PROCESS_END, "")]
    p = process_trace(events)
    times: dict[str, list[float]] = {"on": [], "off": []}
    ratios = []
    for r in range(args.rounds):
        for mode in (("on", "off") if r % 2 else ("off", "on")):
            overlap.FirstCalls = firstcalls.FirstCalls if mode == "on" else _Off  # type: ignore[misc,assignment]
            t0 = time.perf_counter()
            overlap.analyze_process(p, PathTable(), NameTable(), batch_events=args.batch)
            times[mode].append(time.perf_counter() - t0)
        ratios.append(times["on"][-1] / times["off"][-1])
    overlap.FirstCalls = firstcalls.FirstCalls  # type: ignore[misc]
    on, off = statistics.median(times["on"]), statistics.median(times["off"])
    print(f"sweep with first calls {on:.3f} s, without {off:.3f} s (medians of "
          f"{args.rounds}); per-round ratios {min(ratios):.2f} .. {max(ratios):.2f}")
    print(f"RESULT firstcalls_ratio={statistics.median(ratios):.3f} on_s={on:.3f} "
          f"off_s={off:.3f} min_ratio={min(ratios):.3f} max_ratio={max(ratios):.3f}")


if __name__ == "__main__":
    main()
