"""What telling Waiting from Python costs, by the two mechanisms the issue weighed.

    python scripts/bench/wait_overhead.py [--rounds 21] [--iterations 20000]

Rows (ns per call, loop overhead subtracted, medians over interleaved rounds):

  perf_counter_ns     the clock every event reads (CLOCK_MONOTONIC, vDSO)
  thread_time_ns      the thread CPU clock (CLOCK_THREAD_CPUTIME_ID, a system call):
                      what reading it at every event boundary would add, twice per scope
  annotation          an operation's enter + exit, native recorder recording (reference)
  read raw            os.read(fd, 1) on a pipe that always has data (returns at once)
  read wrapped idle   the same through the wait wrapper, nothing recording
  read wrapped        the same, native recording: WAIT_CALL_BEGIN/END
  sleep(0) raw / wrapped   time.sleep(0), unwrapped and wrapped while recording

The wrapper's cost is (wrapped - raw): what each intercepted blocking call pays (the
``wait_call`` cost kind of overhead correction). The last line is machine readable:

    RESULT wait_call_ns=<read wrapped - read raw> thread_clock_ns=<thread_time_ns>
           annotation_ns=<annotation>
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import rlscope
from rlscope import _native
from rlscope.intercept.patch import WAIT


def _loop(n: int, f: Callable[[], object]) -> int:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        f()
    return time.perf_counter_ns() - t0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--iterations", type=int, default=20000)
    a = ap.parse_args()
    n = a.iterations
    n = min(n, 60000)  # a pipe holds 64 KiB: one refill per timed loop
    r, w = os.pipe()
    os.set_blocking(r, False)  # data is always there when timed; draining needs this
    read = os.read
    wrapped_read = _native.wrap(os.read, WAIT, "os.read")
    wrapped_sleep = _native.wrap(time.sleep, WAIT, "time.sleep")
    op = rlscope.operation("op")

    def refill() -> None:
        try:
            while os.read(r, 65536):
                pass
        except BlockingIOError:
            pass
        os.write(w, b"x" * (n + 200))

    def annotate() -> None:
        with op:
            pass

    variants: dict[str, Callable[[], object]] = {
        "perf_counter_ns": time.perf_counter_ns,
        "thread_time_ns": time.thread_time_ns,
        "read raw": lambda: read(r, 1),
        "read wrapped idle": lambda: wrapped_read(r, 1),
        "sleep(0) raw": lambda: time.sleep(0),
    }
    recorded: dict[str, Callable[[], object]] = {
        "annotation": annotate,
        "read wrapped": lambda: wrapped_read(r, 1),
        "sleep(0) wrapped": lambda: wrapped_sleep(0),
    }
    names = [*variants, *recorded]
    ns: dict[str, list[float]] = {k: [] for k in names}
    with tempfile.TemporaryDirectory() as d:
        for rnd in range(a.rounds):
            base = _loop(n, lambda: None)
            order = names[rnd % len(names):] + names[:rnd % len(names)]
            for name in order:
                if name.startswith("read"):
                    refill()
                if name in recorded:
                    rlscope.start(os.path.join(d, str(rnd), name.replace(" ", "_")))
                    try:
                        _loop(200, recorded[name])  # warm-up, untimed
                        if name.startswith("read"):
                            refill()
                        t = _loop(n, recorded[name])
                    finally:
                        rlscope.stop()
                else:
                    t = _loop(n, variants[name])
                ns[name].append((t - base) / n)
    med = {k: statistics.median(v) for k, v in ns.items()}
    print(f"{'variant':<20} {'ns/call':>9} {'q1':>9} {'q3':>9}")
    for k in names:
        q = statistics.quantiles(ns[k], n=4) if len(ns[k]) > 1 else [med[k]] * 3
        print(f"{k:<20} {med[k]:9.1f} {q[0]:9.1f} {q[2]:9.1f}")
    wait_ns = med["read wrapped"] - med["read raw"]
    print(f"wait wrapper: {wait_ns:.0f} ns per blocking call recorded "
          f"({med['read wrapped idle'] - med['read raw']:.0f} ns idle); a thread CPU clock "
          f"read at both ends of every scope would add {2 * med['thread_time_ns']:.0f} ns "
          f"to each annotation ({med['annotation']:.0f} ns)")
    print(f"RESULT wait_call_ns={wait_ns:.0f} thread_clock_ns={med['thread_time_ns']:.0f} "
          f"annotation_ns={med['annotation']:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
