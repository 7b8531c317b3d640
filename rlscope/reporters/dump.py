"""Print every record of a trace as text: a debugging aid and a golden-test oracle."""

from __future__ import annotations

from collections.abc import Iterator

from rlscope.trace import format as fmt
from rlscope.trace.argv import shell_line
from rlscope.trace.data import ProcessTrace


def dump_lines(p: ProcessTrace, limit: int | None = None) -> Iterator[str]:
    h = p.header
    yield (f"# file {p.path.name}: pid={h.pid} ppid={h.ppid} host={h.host} "
           f"process={h.process_name} source={h.source} recorder={h.recorder} "
           f"format={h.format_version} rlscope={h.rlscope_version}")
    yield f"# argv {shell_line(h.argv)}"
    yield (f"# clock monotonic_ns={h.clock.monotonic_ns} realtime_ns={h.clock.realtime_ns} "
           f"uncertainty_ns={h.clock.uncertainty_ns}")
    for t in p.threads.values():
        yield f"# thread {t.index}: tid={t.tid} name={t.name}"
    for k, v in p.metadata.items():
        yield f"# metadata {k}={v!r}"
    yield f"# events={len(p.events)} chunks={p.chunks} dropped={p.dropped_events}"
    ev = p.events
    t0 = h.clock.monotonic_ns
    prog = iter(zip(p.progress.timesteps.tolist(), p.progress.total_timesteps.tolist(),
                    strict=True))
    env_index = iter(p.env.index.tolist())
    n = len(ev) if limit is None else min(limit, len(ev))
    times, threads = ev.time_ns[:n].tolist(), ev.thread[:n].tolist()
    kinds, names = ev.kind[:n].tolist(), ev.name[:n].tolist()
    for ts, th, kind, name in zip(times, threads, kinds, names, strict=True):
        label = fmt.KIND_NAMES.get(kind, f"KIND_{kind}")
        extra = p.name_of(name) if name else ""
        if kind == fmt.PROGRESS:
            steps, total = next(prog)
            extra = f"timesteps={steps} total={total}"
        elif fmt.ENV_STEP_BEGIN <= kind <= fmt.ENV_RESET_END:
            i = next(env_index)
            extra += f" env={i}" if i >= 0 else ""
        yield f"{ts - t0:>15} t{th:<3} {label:<16} {extra}".rstrip()
    if n < len(ev):
        yield f"# ... {len(ev) - n} more events"
