"""Cost of detecting one Python -> native transition, several ways, side by side.

    python scripts/bench/transition_overhead.py [--rounds 21] [--iterations 100000]

Each variant times ``for _ in range(N): f(-1)`` where ``f`` is the C builtin ``abs``,
reached as:

  baseline        ``abs`` itself (subtracted from every other row)
  c-wrapper       rlscope's C call wrapper (``_native.wrap``) while a native recording
                  is active: BEGIN + END recorded per call
  c-wrapper-idle  the same wrapper with no recording (what an installed hook costs
                  while nothing records)
  python-wrapper  RL-Scope's approach: a Python function that records BEGIN and END
                  with one ctypes call each into the native recorder
  pyrecorder      rlscope's pure-Python twin wrapper (``recorder="python"``)
  setprofile      ``sys.setprofile`` with a Python callback that records c_call /
                  c_return (what a profile hook sees), appended to a list

Rounds interleave the variants (order rotated each round); each recording variant gets
a fresh recording per round, started and stopped outside the timed loop. ns/transition =
(loop - baseline loop of the same round) / N, median over rounds (IQR shown). The ratio
is the median over rounds of python-wrapper / c-wrapper. Last line:

    RESULT transition_ns=<c-wrapper ns> vs_python_wrapper=<ratio>
"""

from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import rlscope
from rlscope import _native
from rlscope.recorder import pyrecorder

BEGIN, END = 16, 17


def timed(f: Callable[[int], int], n: int) -> int:
    t0 = time.perf_counter_ns()
    f(n)
    return time.perf_counter_ns() - t0


def loop_of(func: Callable[[int], int]) -> Callable[[int], int]:
    def loop(n: int) -> int:
        for _ in range(n):
            func(-1)
        return n
    return loop


def make_python_wrapper() -> Callable[[int], int]:
    lib = ctypes.CDLL(_native.__file__)
    rec = lib.rlscope_ctypes_record
    rec.argtypes = [ctypes.c_uint, ctypes.c_uint]
    rec.restype = ctypes.c_int

    def wrapper(*args: object, **kwargs: object) -> int:
        rec(BEGIN, 1)
        try:
            return abs(*args, **kwargs)  # type: ignore[arg-type]
        finally:
            rec(END, 1)
    return wrapper


def run_variant(name: str, n: int, tmp: str, counter: list[int]) -> int:
    counter[0] += 1
    d = os.path.join(tmp, f"{name}{counter[0]}")
    if name == "baseline":
        return timed(loop_of(abs), n)
    if name == "c-wrapper-idle":
        return timed(loop_of(_native.wrap(abs, 0, "builtins.abs")), n)
    if name in ("c-wrapper", "python-wrapper"):
        f = _native.wrap(abs, 0, "builtins.abs") if name == "c-wrapper" \
            else make_python_wrapper()
        rlscope.start(d, recorder="native")
        try:
            loop_of(f)(1000)  # warm-up
            return timed(loop_of(f), n)
        finally:
            rlscope.stop()
    if name == "pyrecorder":
        f = pyrecorder.wrap(abs, 0, "builtins.abs")
        rlscope.start(d, recorder="python")
        try:
            loop_of(f)(1000)
            return timed(loop_of(f), n)
        finally:
            rlscope.stop()
    if name == "setprofile":
        events: list[tuple[int, object]] = []
        now = time.perf_counter_ns

        def hook(frame: object, event: str, arg: object) -> None:
            if event == "c_call" or event == "c_return":
                events.append((now(), arg))

        loop = loop_of(abs)
        sys.setprofile(hook)
        try:
            return timed(loop, n)
        finally:
            sys.setprofile(None)
    raise ValueError(name)


VARIANTS = ["baseline", "c-wrapper", "c-wrapper-idle", "python-wrapper", "pyrecorder",
            "setprofile"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--iterations", type=int, default=100_000)
    a = ap.parse_args()
    per: dict[str, list[float]] = {v: [] for v in VARIANTS}
    ratios: list[float] = []
    counter = [0]
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            order = VARIANTS[r % len(VARIANTS):] + VARIANTS[:r % len(VARIANTS)]
            ns = {v: run_variant(v, a.iterations, tmp, counter) for v in order}
            for v in VARIANTS[1:]:
                per[v].append((ns[v] - ns["baseline"]) / a.iterations)
            ratios.append(per["python-wrapper"][-1] / max(per["c-wrapper"][-1], 1e-9))
            per["baseline"].append(ns["baseline"] / a.iterations)
    print(f"{'variant':<16} {'ns/transition':>14} {'IQR':>16}   (baseline: ns per abs() call)")
    for v in VARIANTS:
        q = statistics.quantiles(per[v], n=4)
        print(f"{v:<16} {statistics.median(per[v]):>14.1f} {q[0]:>7.1f}-{q[2]:<8.1f}")
    c = statistics.median(per["c-wrapper"])
    print(f"python-wrapper / c-wrapper (median of per-round ratios): "
          f"{statistics.median(ratios):.1f}x")
    print(f"RESULT transition_ns={c:.0f} vs_python_wrapper={statistics.median(ratios):.1f}")


if __name__ == "__main__":
    main()
