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
from rlscope.trace.reader import trace_files
from rlscope.trace.records import read_header


def _headers(out: Path) -> tuple[dict, list[Header]]:
    try:
        _d, run, files = trace_files(out)
    except RLScopeError:
        return {}, []
    headers = []
    for f in files:
        if f.name.startswith("cuda."):
            continue
        try:
            headers.append(read_header(f)[0])
        except (RLScopeError, OSError):
            continue
    return run, headers


def other_processes(out: Path) -> int:
    """How many recorded processes of the profiled run descend from its root process (the
    one rls-prof started)."""
    run, headers = _headers(out)
    if len(headers) < 2:
        return 0
    launcher = int(run.get("launcher", {}).get("pid", -1))
    roots = [h for h in headers if h.ppid == launcher] or headers[:1]
    root = roots[0].pid
    parent = {h.pid: h.ppid for h in headers}
    n = 0
    for h in headers:
        p, seen = h.ppid, set()
        while p in parent and p not in seen and p != root:
            seen.add(p)
            p = parent[p]
        n += p == root and h.pid != root
    return n


def why_not_chunks(out: Path) -> str | None:
    """Why forked copies cannot measure this run (a plain clause), or None."""
    n = other_processes(out)
    if n:
        return (f"the workload runs {n} other Python process{'es' if n != 1 else ''} "
                "(vector-env workers, a pool, Ray, ...) that a forked copy of it could "
                "not share")
    return None
