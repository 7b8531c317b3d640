"""One clock for a run over several hosts.

Every timestamp is its host's CLOCK_MONOTONIC, which means nothing on another host. Each
trace header carries the (monotonic, realtime) pair its process read at start
(format.ClockPair), so ``realtime - monotonic`` (the host's *offset*) maps a host's
monotonic time to realtime and back. The run clock is the monotonic clock of one
*reference* host (the one rls-prof ran on, else the first to start); another host's times
move onto it by ``shift = offset(host) - offset(reference)``. Processes of one host share
one shift, so their times keep exactly their recorded relation; a single-host run is
never shifted.

A host's offset is the one of its tightest pair (smallest uncertainty). The bound on the
error of a shift, from what the traces show: half the uncertainty of each of the two
pairs, plus how far each host's offsets moved over the run beyond their own reading
error (realtime slewed or stepped by NTP while the processes started; zero for a host
with one process). Not seen in the
traces, and not included: how far the hosts' realtime clocks disagree (NTP keeps hosts
on a LAN typically within a millisecond, PTP within microseconds).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from rlscope.trace.data import Events, Header, ProcessTrace, Trace
from rlscope.trace.format import ClockPair


@dataclass(frozen=True)
class HostClock:
    host: str
    files: int  # trace files recorded on it
    offset_ns: int  # realtime - monotonic, from its tightest pair
    uncertainty_ns: int  # that pair's uncertainty
    spread_ns: int  # largest distance of its other pairs' offsets from offset_ns
    shift_ns: int  # add to its monotonic times to put them on the run clock
    error_ns: int  # bound of the shift's error (0 on the reference host)
    reference: bool


@dataclass(frozen=True)
class RunClock:
    reference: str  # the host whose CLOCK_MONOTONIC is the run's clock
    hosts: dict[str, HostClock]  # in order of first start
    start_ns: int | None  # rls-prof's start on the run clock, when run.json has it

    def shift(self, host: str) -> int:
        h = self.hosts.get(host)
        return 0 if h is None else h.shift_ns

    def start(self, header: Header) -> int:
        """A process's recording start (its header's clock reading) on the run clock."""
        return header.clock.monotonic_ns + self.shift(header.host)

    @property
    def error_ns(self) -> int:
        """The largest shift error bound over the hosts."""
        return max((h.error_ns for h in self.hosts.values()), default=0)

    @staticmethod
    def of(run: dict[str, Any], headers: Sequence[Header]) -> RunClock:
        by_host: dict[str, list[Header]] = {}
        for h in sorted(headers, key=lambda h: h.clock.realtime_ns):
            by_host.setdefault(h.host, []).append(h)
        start = run.get("start") if isinstance(run.get("start"), dict) else None
        host = run.get("host")
        run_host = host.get("name") if isinstance(host, dict) else None
        if not by_host:
            return RunClock(str(run_host or ""), {}, _int(start, "monotonic_ns"))
        reference = run_host if run_host in by_host else next(iter(by_host))
        own = {n: _own(hs) for n, hs in by_host.items()}
        ref_offset, ref_u, ref_spread = own[reference]
        hosts = {}
        for n, hs in by_host.items():
            offset, u, spread = own[n]
            is_ref = n == reference
            hosts[n] = HostClock(
                n, len(hs), offset, u, spread, 0 if is_ref else offset - ref_offset,
                0 if is_ref else (u + 1) // 2 + (ref_u + 1) // 2 + spread + ref_spread,
                is_ref)
        start_ns = None
        if start is not None:
            mono, real = _int(start, "monotonic_ns"), _int(start, "realtime_ns")
            if run_host == reference:
                start_ns = mono
            elif real is not None:  # rls-prof ran elsewhere: its realtime, mapped here
                start_ns = real - ref_offset
        return RunClock(reference, hosts, start_ns)


def _own(headers: list[Header]) -> tuple[int, int, int]:
    """(offset, its pair's uncertainty, spread) of one host's pairs."""
    best = min(headers, key=lambda h: (h.clock.uncertainty_ns, h.clock.realtime_ns))
    offset = best.clock.realtime_ns - best.clock.monotonic_ns
    # What a pair's own reading error (half its uncertainty) does not explain moved.
    spread = max(abs(h.clock.realtime_ns - h.clock.monotonic_ns - offset)
                 - (max(h.clock.uncertainty_ns, 0) + 1) // 2 for h in headers)
    return offset, max(best.clock.uncertainty_ns, 0), max(spread, 0)


def _int(d: dict[str, Any] | None, key: str) -> int | None:
    v = d.get(key) if d else None
    return v if isinstance(v, int) else None


def on_run_clock(trace: Trace) -> Trace:
    """``trace`` with every process's times on the run's clock: the processes of hosts
    other than the reference shifted (events, progress, env steps, CUDA API calls, GPU
    work, the header's clock reading), for consumers that compare times across processes
    (the timeline). A one-host trace is returned as it is."""
    clock = RunClock.of(trace.run, [p.header for p in trace.processes])
    shifts = [clock.shift(p.header.host) for p in trace.processes]
    if not any(shifts):
        return trace
    return replace(trace, processes=[p if s == 0 else _shifted(p, s)
                                     for p, s in zip(trace.processes, shifts, strict=True)])


def _shifted(p: ProcessTrace, s: int) -> ProcessTrace:
    c = p.header.clock
    header = replace(p.header, clock=ClockPair(c.monotonic_ns + s, c.realtime_ns,
                                               c.uncertainty_ns))
    ev = p.events
    cuda = p.cuda
    if cuda is not None:
        o = cuda.overhead
        cuda = replace(cuda, overhead=replace(o, start_ns=o.start_ns + s, end_ns=o.end_ns + s))
    return replace(p, header=header, events=Events(ev.time_ns + s, ev.thread, ev.kind, ev.name),
                   progress=replace(p.progress, time_ns=p.progress.time_ns + s),
                   env=replace(p.env, time_ns=p.env.time_ns + s),
                   api_calls=replace(p.api_calls, start_ns=p.api_calls.start_ns + s,
                                     end_ns=p.api_calls.end_ns + s),
                   gpu=replace(p.gpu, start_ns=p.gpu.start_ns + s, end_ns=p.gpu.end_ns + s),
                   cuda=cuda)
