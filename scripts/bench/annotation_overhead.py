"""Cost of one annotation (enter + exit of an operation), several ways, side by side.

    python scripts/bench/annotation_overhead.py [--rounds 30] [--iterations 50000]

Variants, each timed as ``for _ in range(N): with <annotation>: pass``:

  baseline          ``for _ in range(N): pass`` -- subtracted from every other row
  noop              ``rlscope.operation("op")`` with no recording active
  native            ``rlscope.operation("op")`` under ``rlscope.start(d, recorder="native")``
  native-cached     the same C scope object fetched once and reused (``with s: pass``)
  python            ``rlscope.operation("op")`` under ``recorder="python"`` (the fallback)
  ctypes            a small Python context-manager class whose ``__enter__``/``__exit__``
                    each make one ctypes call into the native library
                    (``rlscope_ctypes_record``), i.e. the RL-Scope approach, while a
                    native recording is active
  record_function   ``torch.autograd.profiler.record_function("op")`` under an active
                    ``torch.profiler.profile(activities=[ProfilerActivity.CPU])``

How a round runs (the machine is noisy, so every variant is measured once per round,
the rounds interleave the variants, and we report medians over rounds; the order of
the variants is rotated by one each round so no variant always runs first or last):

  * each recording variant gets a FRESH recording per round: start the recording (or
    the torch profiler), run a short untimed warm-up, time the loop, stop. Starting and
    stopping are outside the timed region; their time is reported separately (for
    torch that is ``profile.__exit__``; torch parses its events lazily, when results
    are first asked for, which this benchmark never does). A fresh recording per
    variant per round means every variant starts from empty buffers and none pays for
    another's events; the native writer thread, which encodes and writes events in
    the background, runs during the timed loop as it would in real use, and its
    cost on this thread (if any) is included.
  * ``ctypes`` runs inside its own native recording, separate from ``native``'s, for
    the same reason.
  * ns/op = (loop time - baseline loop time of the same round) / N; the spread is the
    interquartile range over rounds. The ratio on the RESULT line is the median over
    rounds of the per-round ratio record_function / native.

The last line is machine readable:

    RESULT annotation_ns=<native ns/op> vs_record_function=<record_function / native>
"""

from __future__ import annotations

import argparse
import ctypes
import gc
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable

import torch
from torch.autograd.profiler import record_function
from torch.profiler import ProfilerActivity, profile

import rlscope
import rlscope.annotate

clock = time.perf_counter_ns
WARMUP = 2000


# ---------------------------------------------------------------- timed loops
# One function per variant, all of the same shape, so each loop's bytecode is as
# simple as the baseline's plus the annotation.


def loop_baseline(n: int) -> int:
    r = range(n)
    t0 = clock()
    for _ in r:
        pass
    return clock() - t0


def loop_operation(n: int) -> int:
    op = rlscope.operation
    r = range(n)
    t0 = clock()
    for _ in r:
        with op("op"):
            pass
    return clock() - t0


def loop_scope(n: int, scope: object) -> int:
    r = range(n)
    t0 = clock()
    for _ in r:
        with scope:  # type: ignore[attr-defined]
            pass
    return clock() - t0


def loop_ctypes(n: int) -> int:
    op = ctypes_operation
    r = range(n)
    t0 = clock()
    for _ in r:
        with op("op"):
            pass
    return clock() - t0


def loop_record_function(n: int) -> int:
    rf = record_function
    r = range(n)
    t0 = clock()
    for _ in r:
        with rf("op"):
            pass
    return clock() - t0


# ---------------------------------------------------- the ctypes-per-event recorder

KIND_BEGIN, KIND_END = 1, 2
_ctypes_record: Callable[[int, int], int] | None = None
_ctypes_names: dict[str, int] = {}


class CtypesOperation:
    """RL-Scope style: a Python object per annotation, one ctypes call per event."""

    __slots__ = ("name_id",)

    def __init__(self, name_id: int) -> None:
        self.name_id = name_id

    def __enter__(self) -> CtypesOperation:
        _ctypes_record(KIND_BEGIN, self.name_id)  # type: ignore[misc]
        return self

    def __exit__(self, *exc: object) -> bool:
        _ctypes_record(KIND_END, self.name_id)  # type: ignore[misc]
        return False


def ctypes_operation(name: str) -> CtypesOperation:
    return CtypesOperation(_ctypes_names[name])


def setup_ctypes() -> None:
    global _ctypes_record
    try:
        from rlscope import _native
    except ImportError as e:
        raise SystemExit(f"the native recorder is not built ({e}); "
                         "pip install -e . first") from None

    lib = ctypes.CDLL(_native.__file__)
    fn = lib.rlscope_ctypes_record
    fn.argtypes = [ctypes.c_uint, ctypes.c_uint]
    fn.restype = ctypes.c_int
    _ctypes_record = fn


def intern_name(name: str, tmp: str) -> int:
    """The native recorder's string id for ``name``.

    Ids are process-wide and every trace file defines all of them, so record ``name``
    once in a throwaway native recording and look its id up in the file."""
    from rlscope import _native
    from rlscope.trace.reader import read_trace

    scope = _native.operation(name)  # interns name
    if hasattr(scope, "name_id"):
        return int(scope.name_id)
    d = os.path.join(tmp, "intern")
    rlscope.start(d, recorder="native")
    with rlscope.operation(name):
        pass
    rlscope.stop()
    strings = read_trace(d).processes[0].strings
    return strings.index(name)


# ------------------------------------------------------------------- variants


class Variant:
    """Set up (untimed), run one timed loop, tear down (timed separately)."""

    name = ""
    note = ""

    def __init__(self, tmp: str) -> None:
        self.tmp = tmp
        self.count = 0

    def new_dir(self) -> str:
        self.count += 1
        return os.path.join(self.tmp, f"{self.name}-{self.count}")

    def run(self, n: int) -> tuple[int, int]:
        """Returns (loop ns, teardown ns)."""
        self.setup()
        try:
            self.loop(WARMUP)
            t = self.loop(n)
        finally:
            t0 = clock()
            self.teardown()
            td = clock() - t0
        return t, td

    def setup(self) -> None:
        pass

    def loop(self, n: int) -> int:
        raise NotImplementedError

    def teardown(self) -> None:
        pass


class Baseline(Variant):
    name = "baseline"
    note = "empty for loop (subtracted)"

    def loop(self, n: int) -> int:
        return loop_baseline(n)


class Noop(Variant):
    name = "noop"
    note = "rlscope.operation, not recording"

    def setup(self) -> None:
        assert not rlscope.is_active()

    def loop(self, n: int) -> int:
        return loop_operation(n)


class Recording(Variant):
    recorder = "native"

    def setup(self) -> None:
        rlscope.start(self.new_dir(), recorder=self.recorder)
        got = getattr(rlscope.annotate.active_recorder(), "__name__", "")
        want = "rlscope._native" if self.recorder == "native" else "pyrecorder"
        if not got.endswith(want.split(".")[-1]):
            rlscope.stop()
            raise SystemExit(f"asked for the {self.recorder} recorder, got {got}")

    def teardown(self) -> None:
        rlscope.stop()


class Native(Recording):
    name = "native"
    note = "rlscope.operation, native recorder"

    def loop(self, n: int) -> int:
        return loop_operation(n)


class NativeCached(Recording):
    name = "native-cached"
    note = "one C scope object reused"

    def setup(self) -> None:
        super().setup()
        self.scope = rlscope.operation("op")

    def loop(self, n: int) -> int:
        return loop_scope(n, self.scope)


class Python(Recording):
    name = "python"
    recorder = "python"
    note = "rlscope.operation, pure-Python recorder"

    def loop(self, n: int) -> int:
        return loop_operation(n)


class Ctypes(Recording):
    name = "ctypes"
    note = "ctypes call per event (RL-Scope style)"

    def setup(self) -> None:
        if "op" not in _ctypes_names:
            _ctypes_names["op"] = intern_name("op", self.tmp)
        super().setup()
        name_id = _ctypes_names["op"]
        if _ctypes_record(KIND_BEGIN, name_id) or _ctypes_record(KIND_END, name_id):  # type: ignore[misc]
            rlscope.stop()
            raise SystemExit("rlscope_ctypes_record did not record during a native recording")

    def loop(self, n: int) -> int:
        return loop_ctypes(n)


class RecordFunction(Variant):
    name = "record_function"
    note = "torch record_function under torch.profiler (CPU)"

    def setup(self) -> None:
        self.prof = profile(activities=[ProfilerActivity.CPU])
        self.prof.__enter__()

    def loop(self, n: int) -> int:
        return loop_record_function(n)

    def teardown(self) -> None:
        self.prof.__exit__(None, None, None)
        del self.prof


ALL = (Baseline, Noop, Native, NativeCached, Python, Ctypes, RecordFunction)


# ------------------------------------------------------------------------ main


def quartiles(xs: list[float]) -> tuple[float, float, float]:
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q1, q2, q3 = statistics.quantiles(xs, n=4, method="inclusive")
    return q1, q2, q3


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=30, help="rounds (default 30)")
    p.add_argument("--iterations", type=int, default=50_000,
                   help="annotations per variant per round (default 50000)")
    args = p.parse_args(argv)
    if args.rounds < 1 or args.iterations < 1:
        p.error("--rounds and --iterations must be positive")
    n = args.iterations

    torch.set_num_threads(1)
    if rlscope.is_active():
        raise SystemExit("run this benchmark on its own, not under rls-prof")
    setup_ctypes()

    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rlscope-bench-") as tmp:
        variants = [cls(tmp) for cls in ALL]
        names = [v.name for v in variants]
        loop_ns: dict[str, list[float]] = {k: [] for k in names}   # per op, raw
        net_ns: dict[str, list[float]] = {k: [] for k in names}    # per op, - baseline
        teardown_ms: dict[str, list[float]] = {k: [] for k in names}

        # One untimed round first: imports, first-start costs, interpreter warm-up.
        for v in variants:
            v.run(WARMUP)
        # torch leaves ~10^6 objects for the collector to walk; freeze them so the
        # gc.collect() before each timed loop (and any collection inside one) only
        # sees what the benchmark itself allocated.
        gc.collect()
        gc.freeze()

        for rnd in range(args.rounds):
            k = rnd % len(variants)
            order = variants[k:] + variants[:k]
            raw: dict[str, float] = {}
            for v in order:
                gc.collect()
                t, td = v.run(n)
                raw[v.name] = t / n
                teardown_ms[v.name].append(td / 1e6)
            for name in names:
                loop_ns[name].append(raw[name])
                net_ns[name].append(raw[name] - raw["baseline"])

    elapsed = time.perf_counter() - t_start
    notes = {v.name: v.note for v in variants}
    print(f"annotation cost, enter+exit, ns per operation: {args.rounds} rounds x "
          f"{n} iterations, {elapsed:.1f} s; python {sys.version.split()[0]}, "
          f"torch {torch.__version__}, rlscope {rlscope.__version__}")
    print(f"{'variant':<16} {'median':>8} {'p25':>8} {'p75':>8} {'raw':>8} "
          f"{'stop ms':>8}  what")
    for name in names:
        q1, med, q3 = quartiles(net_ns[name])
        raw_med = statistics.median(loop_ns[name])
        td = statistics.median(teardown_ms[name])
        if name == "baseline":
            print(f"{name:<16} {'-':>8} {'-':>8} {'-':>8} {raw_med:8.1f} {'-':>8}  "
                  f"{notes[name]}")
            continue
        print(f"{name:<16} {med:8.1f} {q1:8.1f} {q3:8.1f} {raw_med:8.1f} {td:8.2f}  "
              f"{notes[name]}")

    ratios = [rf / nat for rf, nat in zip(net_ns["record_function"], net_ns["native"],
                                           strict=True) if nat > 0]
    for other in ("python", "ctypes"):
        rs = [o / nat for o, nat in zip(net_ns[other], net_ns["native"], strict=True)
              if nat > 0]
        if rs:
            print(f"{other} / native: median of per-round ratios {statistics.median(rs):.1f}x")
    native_ns = statistics.median(net_ns["native"])
    ratio = statistics.median(ratios) if ratios else float("nan")
    print(f"record_function / native: median of per-round ratios {ratio:.1f}x")
    print(f"RESULT annotation_ns={round(native_ns)} vs_record_function={ratio:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
