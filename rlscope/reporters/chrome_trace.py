"""Chrome / Perfetto trace-event JSON: one track (a "thread" of the JSON format) per
thread and kind of slice, one per GPU stream, counters, launch → GPU work flows; opens in
ui.perfetto.dev and chrome://tracing.

Written incrementally, a batch of slices at a time, so a large trace needs no large
in-memory document. Times are µs from the timeline's zero (the run's first event).
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from typing import IO

import numpy as np

from rlscope.analysis.timeline.select import TimelinePlan
from rlscope.analysis.timeline.slices import CounterTrack, Track, counter_tracks, process_tracks

BATCH = 1 << 18
BYTES_PER_SLICE = 115  # for size estimates (measured: 100-110 on real runs)
BYTES_PER_COUNTER_VALUE = 80
_SORT_STRIDE = 10_000_000  # above any track's sort index (slices.process_tracks)


@dataclass
class Stats:
    """What a written timeline holds."""

    slices: int = 0
    counter_values: int = 0
    flows: int = 0
    tracks: int = 0


def write_chrome_trace(plan: TimelinePlan, out: IO[str], directory: str = "") -> Stats:
    """Write the planned timeline; return what it holds."""
    stats = Stats()
    t0 = plan.origin_ns
    out.write('{"displayTimeUnit": "ns", "otherData": ')
    out.write(json.dumps({"source": "rlscope", "directory": directory,
                          "origin_monotonic_ns": t0}))
    out.write(', "traceEvents": [\n')
    first = True

    def emit(obj: dict) -> None:
        nonlocal first
        out.write(("" if first else ",\n") + json.dumps(obj, separators=(",", ":")))
        first = False

    # A pid's later recording sessions (docs/rls-analyze.md) are the same JSON process:
    # their tracks follow its first trace's, with thread ids and sort indices after them.
    tids: dict[int, int] = {}  # pid -> thread ids used so far
    for pp in plan.processes:
        p = pp.trace
        pid = p.pid
        later = pid in tids
        if not later:
            emit({"ph": "M", "name": "process_name", "pid": pid, "args": {"name": pp.name}})
            emit({"ph": "M", "name": "process_sort_index", "pid": pid,
                  "args": {"sort_index": pp.sort}})
        suffix = pp.name[pp.name.rindex(" ["):] if later and pp.name.endswith("]") else ""
        tid0 = tids.get(pid, 0)
        n = 0
        for n, tr in enumerate(itertools.chain(
                process_tracks(p, plan.kinds, plan.window, pp.ordinal), pp.samples), start=1):
            emit({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid0 + n,
                  "args": {"name": tr.name + suffix}})
            emit({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid0 + n,
                  "args": {"sort_index": tid0 * _SORT_STRIDE + tr.sort}})
            _slices(out, tr, pid, tid0 + n, t0, stats)
        tids[pid] = tid0 + n
        for c in [*counter_tracks(p, plan.kinds, plan.window), *pp.counters]:
            _counter(out, c, pid, t0, stats)
    for g in plan.groups:
        emit({"ph": "M", "name": "process_name", "pid": g.pid, "args": {"name": g.name}})
        for c in g.tracks:
            _counter(out, c, g.pid, t0, stats)
    out.write("\n]}\n")
    return stats


def _us(t: np.ndarray, t0: int) -> np.ndarray:
    return np.round((t - t0) / 1e3, 3)  # whole ns: nesting survives the rounding


def _slices(out: IO[str], tr: Track, pid: int, tid: int, t0: int, stats: Stats) -> None:
    head = f',\n{{"ph":"X","pid":{pid},"tid":{tid},"cat":{json.dumps(tr.category)},"name":'
    names = [head + json.dumps(n) for n in tr.labels]
    for a in range(0, len(tr), BATCH):
        ts = _us(tr.start_ns[a:a + BATCH], t0)
        dur = np.round(_us(tr.end_ns[a:a + BATCH], t0) - ts, 3)
        out.write("".join([f'{names[k]},"ts":{t},"dur":{d}}}' for k, t, d in zip(
            tr.label[a:a + BATCH].tolist(), ts.tolist(), dur.tolist(), strict=True)]))
        for flows, ph in ((tr.flow_out, "s"), (tr.flow_in, "f")):
            if flows is None:
                continue
            f = flows[a:a + BATCH]
            has = np.flatnonzero(f)
            bind = ',"bp":"e"' if ph == "f" else ""
            out.write("".join([
                f',\n{{"ph":"{ph}","id":{i},"pid":{pid},"tid":{tid},"ts":{t},'
                f'"cat":"flow","name":"launch"{bind}}}'
                for i, t in zip(f[has].tolist(), ts[has].tolist(), strict=True)]))
            if ph == "s":
                stats.flows += len(has)
    stats.slices += len(tr)
    stats.tracks += 1


def _counter(out: IO[str], c: CounterTrack, pid: int, t0: int, stats: Stats) -> None:
    head = f',\n{{"ph":"C","pid":{pid},"name":{json.dumps(c.name)},"ts":'
    key = json.dumps(c.unit or c.name)
    for a in range(0, len(c), BATCH):
        ts = _us(c.time_ns[a:a + BATCH], t0)
        out.write("".join([f'{head}{t},"args":{{{key}:{v}}}}}' for t, v in zip(
            ts.tolist(), c.values[a:a + BATCH].tolist(), strict=True)]))
    stats.counter_values += len(c)
    stats.tracks += 1
