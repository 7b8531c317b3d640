"""Serial vs parallel analysis of a run with many processes (rls-analyze --jobs / --ray).

Writes a synthetic run (by default 64 processes x 2M events, in the real trace format, by
make_trace.py's writer) once into a cache directory, then times ``rlscope.analysis.load``
serially and fanned out over local processes (and over a local Ray instance when Ray is
installed), in interleaved rounds, and checks the results are identical. Throughput is
events per second of wall time; the ratio is bounded by the CPUs (and disk) available.

    python scripts/bench/fanout.py                      # 64 x 2M events, jobs = CPUs
    python scripts/bench/fanout.py --processes 8 --events 200000 --rounds 1

Last line: RESULT fanout_events_per_s=... serial_events_per_s=... [ray_events_per_s=...]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent


def _make_trace():
    spec = importlib.util.spec_from_file_location("make_trace", HERE / "make_trace.py")
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def _write_one(args: tuple[Path, int, int]) -> int:
    out, k, events = args
    mt = _make_trace()
    from rlscope.trace import format as fmt

    time_ns, kind, name, _, steps = mt.synth_events(events, 32, k)
    return mt.write_process(out / f"python.{1000 + k}{fmt.FILE_SUFFIX}", 1000 + k,
                            [(time_ns, kind, name)], steps, 65536)


def ensure_run(cache: Path, processes: int, events: int) -> Path:
    """The synthetic run, written once per (processes, events) and reused."""
    d = cache / f"fanout-{processes}x{events}"
    done = d / "complete"
    if done.exists():
        return d
    d.mkdir(parents=True, exist_ok=True)
    t = time.perf_counter()
    with ProcessPoolExecutor() as pool:
        n = sum(pool.map(_write_one, [(d, k, events) for k in range(processes)]))
    (d / "run.json").write_text('{"command": ["fanout.py"], "status": "exited", '
                                '"exit_status": 0}')
    done.write_text(str(n))
    print(f"wrote {n:,} events in {processes} files to {d} in "
          f"{time.perf_counter() - t:.1f} s", file=sys.stderr)
    return d


def _cpu_s() -> float:
    """CPU seconds of this process and its reaped children (the local workers)."""
    import resource

    s = resource.getrusage(resource.RUSAGE_SELF)
    c = resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def timed(fn) -> tuple[float, float, object]:
    """Wall and CPU seconds of ``fn()`` (CPU: not Ray's workers), and its result."""
    c, t = _cpu_s(), time.perf_counter()
    out = fn()
    return time.perf_counter() - t, _cpu_s() - c, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--processes", type=int, default=64)
    ap.add_argument("--events", type=int, default=2_000_000, help="events per process")
    ap.add_argument("--jobs", type=int, default=None, help="default: the CPUs available")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--cache", type=Path,
                    default=Path(tempfile.gettempdir()) / "rlscope-bench")
    ap.add_argument("--no-ray", action="store_true", help="skip Ray even if installed")
    a = ap.parse_args()

    from rlscope.analysis import load

    d = ensure_run(a.cache, a.processes, a.events)
    jobs = a.jobs or len(os.sched_getaffinity(0))
    ray = None
    if not a.no_ray:
        try:
            import ray
        except ImportError:
            ray = None
    if ray is not None:
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
        import logging

        ray.init(num_cpus=jobs, include_dashboard=False, log_to_driver=False,
                 logging_level=logging.WARNING)
        # Start the workers (and their imports) before timing, as a long-lived cluster has.
        warm = ray.remote(num_cpus=1)(lambda: __import__("rlscope.analysis.pipeline.fanout") and 0)
        ray.get([warm.remote() for _ in range(jobs)])

    times: dict[str, list[float]] = {"serial": [], "fanout": [], "ray": []}
    cpu: dict[str, list[float]] = {"serial": [], "fanout": []}
    ref = None
    events = 0
    for _ in range(a.rounds):
        runs = [("serial", lambda: load(d, jobs=1)), ("fanout", lambda: load(d, jobs=jobs))]
        if ray is not None:
            runs.append(("ray", lambda: load(d, ray="")))
        for key, fn in runs:
            s, c, an = timed(fn)
            times[key].append(s)
            if key in cpu:
                cpu[key].append(c)
            ops = an.operations()  # type: ignore[attr-defined]
            if ref is None:
                ref = ops
                events = int(an.processes()["events"].sum())  # type: ignore[attr-defined]
            else:
                pd.testing.assert_frame_equal(ref, ops, check_exact=True)
            print(f"{key}: {s:.2f} s wall, {c:.2f} s CPU ({events / s / 1e6:.2f}M "
                  "events/s)", file=sys.stderr)
    if ray is not None:
        ray.shutdown()
    rate = {k: events / statistics.median(v) for k, v in times.items() if v}
    # cpu_ratio: CPU the fanned-out analysis spent over the serial one's (near 1: no work
    # duplicated, so on idle CPUs the wall time divides by min(jobs, processes));
    # *_cpu_per_wall: CPUs each actually got (below 1 / jobs: a shared machine).
    extra = f" ray_events_per_s={rate['ray']:.0f}" if "ray" in rate else ""
    med = {k: statistics.median(v) for k, v in cpu.items()}
    wall = {k: statistics.median(v) for k, v in times.items() if v}
    print(f"events={events} processes={a.processes} jobs={jobs} cpus={os.cpu_count()} "
          f"speedup={rate['fanout'] / rate['serial']:.2f} "
          f"cpu_ratio={med['fanout'] / med['serial']:.2f} "
          f"serial_cpu_per_wall={med['serial'] / wall['serial']:.2f} "
          f"fanout_cpu_per_wall={med['fanout'] / wall['fanout']:.2f}")
    print(f"RESULT fanout_events_per_s={rate['fanout']:.0f} "
          f"serial_events_per_s={rate['serial']:.0f}{extra}")


if __name__ == "__main__":
    main()
