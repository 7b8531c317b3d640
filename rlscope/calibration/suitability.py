"""Whether paired chunks (forked copies of the workload's process) can calibrate a run,
read off the profiled run before anything is started: a copy forked from a process that
talks to other processes of its own (vector-env workers over pipes, a pool, Ray) would
share them with its parent, and the run breaks (seen: SB3's SubprocVecEnv,
``BrokenPipeError``). The chunk driver checks again in the process, at the fork
(:mod:`rlscope.inprocess.chunk_copies`)."""

from __future__ import annotations

from pathlib import Path

from rlscope.errors import RLScopeError
from rlscope.trace.data import Header
from rlscope.trace.reader import read_process, trace_files
from rlscope.trace.records import iter_chunks, read_header

HELPER_BYTES = 4 << 20  # a trace file this small may be a helper that ended early


def _headers(out: Path) -> tuple[dict, list[tuple[Header, Path]]]:
    try:
        _d, run, files = trace_files(out)
    except RLScopeError:
        return {}, []
    headers = []
    for f in files:
        if f.name.startswith("cuda."):
            continue
        try:
            headers.append((read_header(f)[0], f))
        except (RLScopeError, OSError):
            continue
    return run, headers


def _first_progress_ns(path: Path) -> int | None:
    """When the process first reported progress (the first chunk fork), reading no
    further than the chunk that holds it."""
    try:
        for c in iter_chunks(path):
            if len(c.progress.time_ns):
                return int(c.progress.time_ns[0])
    except (RLScopeError, OSError):
        pass
    return None


def _ended_before(path: Path, t_ns: int) -> bool:
    """Whether the process of a small trace file had ended before ``t_ns`` (a helper such
    as a ``python -c 'import sys'`` probe run at import time)."""
    try:
        if path.stat().st_size > HELPER_BYTES:
            return False
        ev = read_process(path).events
    except (RLScopeError, OSError):
        return False
    return len(ev) > 0 and int(ev.time_ns.max()) < t_ns


def _root(run: dict, headers: list[tuple[Header, Path]]) -> tuple[Header, Path] | None:
    """The process rls-prof started (its parent is the launcher), else the first."""
    launcher = int(run.get("launcher", {}).get("pid", -1))
    roots = [h for h in headers if h[0].ppid == launcher] or headers[:1]
    return roots[0] if roots else None


def other_processes(out: Path) -> int:
    """How many recorded processes of the profiled run descend from its root process (the
    one rls-prof started) and were still running when it first reported progress (when
    the first copies would be forked). A process whose recorded ancestry stops at a
    process that was not recorded (Ray's workers, children of its C++ raylet) descends
    from the root too: only a chain that ends at rls-prof itself does not."""
    run, headers = _headers(out)
    if len(headers) < 2:
        return 0
    launcher = int(run.get("launcher", {}).get("pid", -1))
    found = _root(run, headers)
    assert found is not None  # two headers or more
    root, root_file = found[0].pid, found[1]
    parent = {h.pid: h.ppid for h, _f in headers}
    first: int | None = None
    n = 0
    for h, f in headers:
        p, seen = h.ppid, set()
        while p in parent and p not in seen and p != root:
            seen.add(p)
            p = parent[p]
        if h.pid == root or p == launcher:
            continue
        if first is None:
            first = _first_progress_ns(root_file) or -1
        n += not (first > 0 and _ended_before(f, first))
    return n


def root_progress_reports(out: Path) -> int | None:
    """How many progress reports the profiled run's root process (the one rls-prof
    started) recorded (a bounded trace keeps at least one per 100 ms of a gap), or None
    when its trace cannot be read."""
    run, headers = _headers(out)
    found = _root(run, headers)
    if found is None:
        return None
    try:
        return sum(len(c.progress.time_ns) for c in iter_chunks(found[1]))
    except (RLScopeError, OSError):
        return None


def why_not_chunks(out: Path) -> str | None:
    """Why forked copies cannot measure this run (a plain clause), or None."""
    n = other_processes(out)
    if n:
        return (f"the workload runs {n} other Python process{'es' if n != 1 else ''} "
                "(vector-env workers, a pool, Ray, ...) that a forked copy of it could "
                "not share")
    return None
