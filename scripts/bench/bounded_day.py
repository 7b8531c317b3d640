"""Write the bounded trace a long run would leave under a budget (docs/trace-format.md,
"Bounded traces"), without running it: the native writer's output for a simulated
training loop (make_trace.py's step/update template, one thread) of --hours hours.

Detail windows as the writer opens them (the start window until 25% of the budget or 100 MB, then
2 s windows at 30 s, 90 s, 210 s, ... of the run (the period doubling), none opened
past 75% of the budget), every event of the loop inside them; between them the
aggregate rows of the gap every 5 s (time, calls and events per shadow-stack state, event
counts per kind), progress thinned to one per 100 ms, and the gap edges. Windows start
and end at loop iterations (only the phase is open then; phases stay open across gaps).

    python scripts/bench/bounded_day.py -o /tmp/day --hours 24 --budget 1000000000
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_trace import SID, _delimited, _packed, _step_template, _update_template, _varint, zigzag

from rlscope.trace import format as fmt
from rlscope.trace import messages

STEPS_PER_UPDATE = 32
ROWS_NS = 5_000_000_000  # the writer's row interval
PROGRESS_NS = 100_000_000  # progress kept in a gap: one per 100 ms
WINDOW_NS, FIRST_PERIOD_NS = 2_000_000_000, 30_000_000_000
START_MAX_BYTES = 100_000_000  # the writer's start_max_bytes
T0 = 1_000_000_000
BASE = T0 + 1000  # the loop's first iteration, after the process start and the phase
_BEGINS = {fmt.OPERATION_BEGIN, fmt.PHASE_BEGIN, fmt.BACKEND_CALL_BEGIN,
           fmt.SIMULATOR_CALL_BEGIN, fmt.WAIT_CALL_BEGIN}


class Loop:
    """One loop iteration (32 steps and an update): its events and, for the gaps, the
    per-state time, calls and events the native aggregator would sum."""

    def __init__(self) -> None:
        it = _step_template() * STEPS_PER_UPDATE + _update_template()
        self.kind = np.array([k for k, _, _ in it], np.uint8)
        self.name = np.array([SID.get(s, 0) for _, s, _ in it], np.uint32)
        self.delta = np.array([d for _, _, d in it], np.int64)
        self.ns = int(self.delta.sum())  # one iteration's length
        self.steps = STEPS_PER_UPDATE
        self.per_iter = len(it)
        self.states: dict[tuple[int, int, int], int] = {}  # (parent, kind, name) -> id
        phase = self._state(0, fmt.PHASE_BEGIN, SID["training"])
        stack = [(fmt.PHASE_BEGIN, SID["training"], phase)]
        rows: dict[int, list[int]] = {}
        for k, n, d in zip(self.kind.tolist(), self.name.tolist(), self.delta.tolist(),
                           strict=True):
            rows.setdefault(stack[-1][2], [0, 0, 0])[0] += d
            if k in _BEGINS:
                stack.append((k, n, self._state(stack[-1][2], k, n)))
            elif k - 1 in _BEGINS:
                i = max(j for j, e in enumerate(stack) if e[0] == k - 1)
                del stack[i]
            if k == fmt.PROGRESS:
                continue
            r = rows.setdefault(stack[-1][2], [0, 0, 0])
            r[2] += 1
            r[1] += k in _BEGINS
        self.rows = rows
        counted = self.kind[self.kind != fmt.PROGRESS]
        self.counts = np.bincount(counted, minlength=32)

    def _state(self, parent: int, kind: int, name: int) -> int:
        return self.states.setdefault((parent, kind, name), len(self.states) + 1)


def windows(hours: float, budget: int, loop: Loop, bytes_per_event: float
            ) -> list[tuple[str, int, int]]:
    """(reason, first iteration, end iteration) of each detail window."""
    end_ns = int(hours * 3600e9)
    ev_per_ns = loop.per_iter / loop.ns
    used = 0.0
    start_events = min(0.25 * budget, START_MAX_BYTES) / bytes_per_event
    start_it = int(start_events / loop.per_iter)
    out = [("start", 0, start_it)]
    used += start_it * loop.per_iter * bytes_per_event
    t = start_it * loop.ns
    period, nxt = FIRST_PERIOD_NS, FIRST_PERIOD_NS  # start + P, + 2P more, + 4P more...

    def skip_past(now: int) -> None:
        nonlocal period, nxt
        while nxt <= now:
            period *= 2
            nxt += period

    skip_past(t)
    while True:
        t = nxt
        if t >= end_ns or used >= 0.75 * budget:
            break
        n_events = WINDOW_NS * ev_per_ns  # periodic windows end on time only
        a = int(t // loop.ns)
        b = a + max(1, int(n_events / loop.per_iter))
        out.append(("periodic", a, b))
        used += (b - a) * loop.per_iter * bytes_per_event
        skip_past(b * loop.ns)
    return out


class Writer:
    def __init__(self, path: Path, loop: Loop, total_steps: int) -> None:
        self.f = open(path, "wb")  # noqa: SIM115 (closed by close())
        self.loop, self.total = loop, total_steps
        self.seq, self.gap_no, self.events, self.rows = 0, 0, 0, 0
        rec = messages.Record()
        h = rec.header
        h.format_version, h.source, h.pid, h.ppid, h.host = fmt.FORMAT_VERSION, "python", \
            1000, 1, "synthetic"
        h.process_name, h.recorder, h.rlscope_version = "synthetic-day", "synthetic", "0"
        h.argv.extend(["bounded_day.py"])
        h.clock.monotonic_ns, h.clock.realtime_ns = T0, T0
        self.f.write(fmt.MAGIC + _delimited(rec.SerializeToString()))

    def chunk(self, time: np.ndarray, kind: np.ndarray, name: np.ndarray, args: np.ndarray,
              meta: dict[str, object] | None = None, agg: bytes = b"") -> None:
        c = messages.Record()
        ch = c.chunk
        ch.sequence = self.seq
        if self.seq == 0:
            for s, i in SID.items():
                ch.strings.add(id=i, value=s)
            ch.threads.add(index=0, tid=1000, name="MainThread")
        for k, v in (meta or {}).items():
            ch.metadata.add(key=k, json_value=json.dumps(v), time_ns=int(time[-1]) if
                            len(time) else T0)
        body = ch.SerializeToString()
        if len(time):
            ch2 = messages.Record().chunk
            ch2.base_time_ns = int(time[0])
            body += ch2.SerializeToString()
            body += (_packed(5, zigzag(np.diff(time, prepend=time[0])))
                     + _packed(6, np.zeros(len(time), np.uint32)) + _packed(7, kind)
                     + _packed(8, name) + _packed(9, zigzag(args)))
        body += agg
        self.f.write(_delimited(_varint(2 << 3 | 2) + _varint(len(body)) + body))
        self.seq += 1
        self.events += len(time)

    def detail(self, first: int, end: int) -> None:
        """Every event of iterations [first, end), a chunk per ~64k events."""
        lp = self.loop
        per = max(1, 65536 // lp.per_iter)
        for a in range(first, end, per):
            b = min(end, a + per)
            n = b - a
            rel = np.cumsum(np.tile(lp.delta, n)) - lp.delta[0]
            time = BASE + a * lp.ns + rel
            kind = np.tile(lp.kind, n)
            name = np.tile(lp.name, n)
            prog = np.flatnonzero(kind == fmt.PROGRESS)
            steps = a * lp.steps + 1 + np.arange(len(prog))
            args = np.empty(2 * len(prog), np.int64)
            args[0::2], args[1::2] = steps, self.total
            self.chunk(time, kind, name, args)

    def aggregated(self, first: int, end: int) -> None:
        """Iterations [first, end) as aggregates: rows every 5 s, thinned progress, and
        the gap's edges."""
        lp = self.loop
        per = max(1, ROWS_NS // lp.ns)
        prog_every = max(1, PROGRESS_NS // (lp.ns // lp.steps))  # steps between kept ones
        states = b"" if self.gap_no_defs else self._state_defs()
        self.gap_no_defs = True
        for a in range(first, end, per):
            b = min(end, a + per)
            n = b - a
            step0, step1 = a * lp.steps, b * lp.steps
            steps = np.arange(step0 + prog_every, step1 + 1, prog_every)
            ptime = BASE + (steps // lp.steps) * lp.ns + (steps % lp.steps) * (lp.ns //
                                                                                 lp.steps)
            kind = np.full(len(steps), fmt.PROGRESS, np.uint8)
            name = np.zeros(len(steps), np.uint32)
            args = np.empty(2 * len(steps), np.int64)
            args[0::2], args[1::2] = steps, self.total
            if a == first:  # the gap's first event
                ptime = np.r_[BASE + a * lp.ns, ptime]
                kind = np.r_[np.uint8(fmt.AGGREGATED_BEGIN), kind]
                name = np.r_[np.uint32(0), name]
            if b == end:  # its last
                ptime = np.r_[ptime, BASE + b * lp.ns - 1]
                kind = np.r_[kind, np.uint8(fmt.AGGREGATED_END)]
                name = np.r_[name, np.uint32(0)]
            o = np.argsort(ptime, kind="stable")
            self.chunk(ptime[o], kind[o], name[o], args, agg=states + self._rows(n))
            states = b""
        self.gap_no_defs = True
        self.gap_no += 1

    gap_no_defs = False

    def _state_defs(self) -> bytes:
        out = b""
        for (parent, kind, name), sid in self.loop.states.items():
            m = messages.Record().chunk.agg_states.add(id=sid, parent=parent, kind=kind,
                                                        name=name)
            body = m.SerializeToString()
            out += _varint(12 << 3 | 2) + _varint(len(body)) + body
        return out

    def _rows(self, n: int) -> bytes:
        lp = self.loop
        st = np.array(sorted(lp.rows), np.int64)
        r = np.array([lp.rows[s] for s in st.tolist()], np.int64) * n
        nz = np.flatnonzero(lp.counts)
        self.rows += len(st)
        return (_packed(13, np.zeros(len(st), np.uint32)) + _packed(14, np.full(len(st),
                self.gap_no, np.int64)) + _packed(15, st) + _packed(16, r[:, 0])
                + _packed(17, zigzag(r[:, 1])) + _packed(18, r[:, 2])
                + _packed(19, np.zeros(len(nz), np.uint32))
                + _packed(20, np.full(len(nz), self.gap_no, np.int64)) + _packed(21, nz)
                + _packed(22, zigzag(lp.counts[nz] * n)))

    def close(self) -> None:
        self.f.close()


def iter_plan(plan: list[tuple[str, int, int]], total_iters: int
              ) -> Iterator[tuple[str, int, int]]:
    at = 0
    for reason, a, b in plan:
        a, b = min(a, total_iters), min(b, total_iters)
        if a > at:
            yield "gap", at, a
        if b > a:
            yield reason, a, b
        at = max(at, b)
    if at < total_iters:
        yield "gap", at, total_iters


def write_day(out: Path, hours: float, budget: int, bytes_per_event: float = 5.0) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    loop = Loop()
    total_iters = int(hours * 3600e9 // loop.ns)
    plan = windows(hours, budget, loop, bytes_per_event)
    w = Writer(out / f"python.1000{fmt.FILE_SUFFIX}", loop, total_iters * loop.steps)
    start = np.array([T0], np.int64)
    z8, z32 = np.zeros(1, np.uint8), np.zeros(1, np.uint32)
    w.chunk(start, z8 + fmt.PROCESS_START, z32, np.zeros(0, np.int64),
            meta={"rlscope.trace_budget": budget})
    w.chunk(start + 1, z8 + fmt.PHASE_BEGIN, z32 + SID["training"], np.zeros(0, np.int64))
    n_win = 0
    for what, a, b in iter_plan(plan, total_iters):
        if what == "gap":
            w.aggregated(a, b)
        else:
            w.detail(a, b)
            w.chunk(np.zeros(0, np.int64), z8[:0], z32[:0], np.zeros(0, np.int64),
                    meta={f"rlscope.window:{n_win}": {"reason": what,
                          "begin_ns": BASE + a * loop.ns, "end_ns": BASE + b * loop.ns}})
            n_win += 1
    end = np.array([BASE + total_iters * loop.ns], np.int64)
    w.chunk(np.r_[end, end + 1], np.array([fmt.PHASE_END, fmt.PROCESS_END], np.uint8),
            np.array([SID["training"], 0], np.uint32), np.zeros(0, np.int64))
    w.close()
    (out / "run.json").write_text(json.dumps({"command": ["bounded_day.py"],
                                              "status": "exited", "exit_status": 0}))
    full_events = total_iters * loop.per_iter
    return {"hours": hours, "iterations": total_iters, "steps": total_iters * loop.steps,
            "windows": n_win, "detail_events": w.events, "aggregate_rows": w.rows,
            "full_events": full_events,
            "bytes": sum(p.stat().st_size for p in out.iterdir() if p.is_file()),
            "operation_calls": {"inference": total_iters * loop.steps,
                                "simulation": total_iters * loop.steps,
                                "backprop": total_iters}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--hours", type=float, default=24.0)
    ap.add_argument("--budget", type=int, default=1_000_000_000)
    a = ap.parse_args()
    print(json.dumps(write_day(a.out, a.hours, a.budget)))


if __name__ == "__main__":
    main()
