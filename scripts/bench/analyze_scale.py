"""Analysis throughput and peak memory on a large synthetic trace.

    python scripts/bench/analyze_scale.py --events 10000000 [--gpu] [--trace DIR]

Generates the trace with make_trace.py (not timed) unless --trace is given, then times
the streaming analysis (rlscope.analysis.load: two passes over the file, batches of 1M
events) + the per-operation table (best of --repeat runs), and measures
the peak of Python-tracked memory (tracemalloc, which sees numpy's arrays) in a separate
run, divided by the number of events. --whole reads the trace whole and analyses it in
one batch. With --gpu, synthetic CUDA API calls and kernels (one per backend call) are
attached in memory to the trace read whole, counted as events (2 per row), and the sweep
runs in 1M-event batches as in streaming.
Last line: RESULT analyze_events_per_s=<n> peak_bytes_per_event=<n>
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_trace import make_trace

from rlscope.analysis import analyze, load
from rlscope.trace import format as fmt
from rlscope.trace.gpu import KERNEL, RUNTIME_API, CudaApiCalls, GpuActivities
from rlscope.trace.reader import read_trace


def attach_gpu(trace) -> None:
    """One cudaLaunchKernel inside each backend call, and the kernel it launches."""
    for p in trace.processes:
        ev = p.events
        idx = np.flatnonzero(ev.kind == fmt.BACKEND_CALL_BEGIN)
        t = ev.time_ns[idx]
        tid = np.array([p.threads[int(i)].tid for i in range(int(ev.thread.max()) + 1)]
                       )[ev.thread[idx]]
        n = len(idx)
        corr = np.arange(1, n + 1, dtype=np.uint64)
        p.api_calls = CudaApiCalls(tid.astype(np.int64), t + 50, t + 250, corr,
                                   np.ones(n, np.uint32), np.full(n, RUNTIME_API, np.uint8),
                                   ["", "cudaLaunchKernel"])
        p.gpu = GpuActivities(np.full(n, KERNEL, np.uint8), np.zeros(n, np.uint32),
                              np.full(n, 7, np.uint32), t + 1000, t + 4000, corr,
                              np.zeros(n, np.uint32), np.zeros(n, np.int64))


def run_once(d: Path, gpu: bool, whole: bool) -> tuple[float, int]:
    t0 = time.perf_counter()
    if gpu or whole:  # read whole, then analyse (GPU tables attached in memory)
        trace = read_trace(d)
        if gpu:
            attach_gpu(trace)
        n = sum(len(p.events) + 2 * len(p.api_calls) + 2 * len(p.gpu)
                for p in trace.processes)
        a = analyze(trace, batch_events=None if whole else 1 << 20)
    else:  # streaming: rlscope.analysis.load, as rls-analyze does
        a = load(d, correct=False)
        n = int(a.processes()["events"].sum())
    a.operations()
    return time.perf_counter() - t0, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--events", type=int, default=10_000_000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--gpu", action="store_true")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--trace", type=Path, default=None)
    ap.add_argument("--whole", action="store_true",
                    help="read the whole trace first instead of streaming (--gpu implies it)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = args.trace or Path(tmp) / "trace"
        if args.trace is None:
            make_trace(d, args.events, args.threads)
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        times = []
        for _ in range(args.repeat):
            dt, n = run_once(d, args.gpu, args.whole)
            times.append(dt)
            print(f"run: {n:,} events in {dt:.3f} s ({n / dt / 1e6:.2f} M events/s)",
                  file=sys.stderr)
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
        tracemalloc.start()
        run_once(d, args.gpu, args.whole)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    best = min(times)
    print(f"events={n} best_s={best:.3f} tracemalloc_peak_bytes={peak} "
          f"max_rss_growth_bytes={rss1 - rss0}", file=sys.stderr)
    print(f"RESULT analyze_events_per_s={n / best:.0f} peak_bytes_per_event={peak / n:.1f}")


if __name__ == "__main__":
    main()
