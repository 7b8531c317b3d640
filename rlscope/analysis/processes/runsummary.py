"""One run, many processes: the process table (tree order), the run summary per role and
the top-level operations per role, as DataFrames (docs/multiprocess.md).

Per process: wall = its recorded span; busy / waiting = CPU seconds (summed over threads)
outside / inside the waiting category; idle = wall time with no thread active and no GPU
work; operations = time inside any operation. An *idle helper* is a process other than
the main one that recorded no operation, no backend/simulator/CUDA call, no GPU work and
no progress (the forkserver, the resource tracker, workers never given work), and that
rls-prof's sampler did not see busy after its start-up (``sampled_cpu_s``: its CPU from
then on, by /proc; a process working in code rlscope does not see is not idle): reports
fold them into one line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis.engine.paths import PathTable
from rlscope.analysis.engine.process import ProcessResult
from rlscope.analysis.processes import roles
from rlscope.analysis.processes import tree as proctree
from rlscope.analysis.processes.times import ProcessTimes, process_times, top_operations
from rlscope.trace import format as fmt
from rlscope.trace.argv import shell_line
from rlscope.trace.clocks import RunClock
from rlscope.trace.data import Header
from rlscope.trace.samples import Samples

PROCESS_COLUMNS = [
    "index", "depth", "pid", "ppid", "parent_index", "parent_in_run", "role", "role_label",
    "role_source", "env_index", "num_envs", "mp_name", "mp_target", "name", "command", "host",
    "start_s", "end_s", "wall_s", "busy_s", "waiting_s", "idle_s", "operations_s", "gpu_s",
    "operation_calls", "native_calls", "complete", "events", "idle_helper",
    "ray_actor_class", "ray_actor_id", "ray_tasks", "session", "continues", "sampled_cpu_s"]
SUMMARY_COLUMNS = ["role", "processes", "idle_helpers", "wall_s", "busy_s", "waiting_s",
                   "idle_s", "operations_s", "gpu_s", "busy_pct"]
ROLE_OPERATION_COLUMNS = ["role", "operation", "processes", "calls", "wall_s"]
ALL = "all processes"
_TIME_COLS = ["wall_s", "busy_s", "waiting_s", "idle_s", "operations_s", "gpu_s"]


@dataclass(frozen=True)
class ProcessEntry:
    """What the analysis knows of one process besides its result."""

    header: Header
    metadata: dict[str, Any]
    complete: bool
    events: int
    progress_records: int
    session: int = 0  # (pid, session) is the process's key (api.assign_sessions)


# Roles whose processes are shown even when they recorded nothing: the program, and Ray
# workers that ran tasks (their work is the user's code, annotated or not).
NEVER_IDLE = (fmt.ROLE_MAIN, fmt.ROLE_RAY_ACTOR, fmt.ROLE_RAY_TASK)
# Sampled CPU after start-up that makes a process busy: this much, and this share of the
# time it was sampled (rlscope's own threads use ~1-2% of a process that runs Python).
BUSY_CPU_S, BUSY_SHARE = 0.25, 0.10
# Services whose CPU is not the program's work (Ray's raylet, dashboard and agents poll
# all the time): folded whatever they use; the utilisation table still shows it.
SERVICES = (fmt.ROLE_RAY_HELPER, fmt.ROLE_FORKSERVER, fmt.ROLE_RESOURCE_TRACKER)


def is_idle_helper(role: str, t: ProcessTimes, progress_records: int,
                   sampled: tuple[float, float] | None = None) -> bool:
    """``sampled``: (CPU seconds, seconds sampled) after the process's start-up."""
    busy = role not in SERVICES and sampled is not None and sampled[0] >= BUSY_CPU_S \
        and sampled[0] >= BUSY_SHARE * sampled[1]
    return (role not in NEVER_IDLE and t.operation_calls == 0 and t.native_calls == 0
            and t.gpu_activities == 0 and t.operations_ns == 0 and t.gpu_ns == 0
            and progress_records == 0 and not busy)


def sampled_cpu(samples: Samples | None, pid: int, after_ns: int
                ) -> tuple[float, float] | None:
    """(CPU seconds, seconds) of ``pid`` between its first /proc sample at or after
    ``after_ns`` and its last (None: not sampled twice in that time)."""
    if samples is None or not len(samples.proc_pid):
        return None
    mine = np.flatnonzero((samples.proc_pid == pid) & (samples.proc_time_ns >= after_ns))
    if len(mine) < 2:
        return None
    t, c = samples.proc_time_ns[mine], samples.proc_cpu_ns[mine]
    a, b = int(np.argmin(t)), int(np.argmax(t))
    return (int(c[b]) - int(c[a])) / 1e9, (int(t[b]) - int(t[a])) / 1e9


def run_span(clock: RunClock, r: ProcessResult, h: Header) -> tuple[int, int]:
    """A process's recorded span on the run's clock (trace.clocks: hosts aligned)."""
    shift = clock.shift(h.host)
    if r.span == (0, 0):  # no events: the header's clock reading is all there is
        return h.clock.monotonic_ns + shift, h.clock.monotonic_ns + shift
    return r.span[0] + shift, r.span[1] + shift


def process_table(results: Sequence[ProcessResult], entries: Sequence[ProcessEntry],
                  run: dict[str, Any], samples: Samples | None = None) -> pd.DataFrame:
    """One row per process in tree order (depth-first, by start time): identity, parent,
    role, name, times relative to the run's start, and where its time went; with
    ``samples`` (rls-prof's /proc sampler), its CPU after start-up."""
    clock = RunClock.of(run, [e.header for e in entries])
    spans = [run_span(clock, r, e.header) for r, e in zip(results, entries, strict=True)]
    facts = [proctree.ProcessFacts(e.header.pid, e.header.ppid, e.header.host, s[0],
                                   tuple(e.header.argv), e.metadata)
             for e, s in zip(entries, spans, strict=True)]
    tree = proctree.build_tree(facts)
    launcher = run.get("launcher", {}).get("pid") if isinstance(run.get("launcher"), dict) \
        else None
    assigned = proctree.assign_roles(facts, tree, launcher if isinstance(launcher, int)
                                     else None)
    t0 = min([s[0] for s in spans] + ([clock.start_ns] if clock.start_ns is not None else []))
    rows = []
    for i in tree.order:
        r, e, f, role = results[i], entries[i], facts[i], assigned[i]
        t = process_times(r)
        pa = tree.parent[i]
        md = e.metadata
        name = roles.display_name(f.argv, md, proctree.forked(facts, tree, i),
                                  e.header.process_name)
        used = sampled_cpu(samples, f.pid, r.span[0] + r.startup_ns) \
            if e.header.host == _first_host(entries) else None
        earlier = proctree.previous_session(facts, i)
        if earlier is not None:
            name += f" [session {proctree.session_number(f) + 1}]"
        rows.append({
            "index": i, "depth": tree.depth[i], "pid": f.pid, "session": e.session,
            "continues": -1 if earlier is None else earlier, "ppid": f.ppid,
            "parent_index": pa, "parent_in_run": pa != proctree.NO_PARENT,
            "role": role.role, "role_label": roles.role_label(role.role, md),
            "role_source": role.source, "env_index": md.get(fmt.META_ENV_INDEX),
            "num_envs": md.get(fmt.META_NUM_ENVS), "mp_name": md.get(fmt.META_MP_NAME),
            "mp_target": md.get(fmt.META_MP_TARGET),
            "name": name,
            "command": shell_line(f.argv), "host": f.host,
            "start_s": (spans[i][0] - t0) / 1e9, "end_s": (spans[i][1] - t0) / 1e9,
            "wall_s": t.wall_ns / 1e9, "busy_s": t.busy_ns / 1e9,
            "waiting_s": t.waiting_ns / 1e9, "idle_s": t.idle_ns / 1e9,
            "operations_s": t.operations_ns / 1e9, "gpu_s": t.gpu_ns / 1e9,
            "operation_calls": t.operation_calls, "native_calls": t.native_calls,
            "complete": e.complete, "events": e.events,
            "idle_helper": is_idle_helper(role.role, t, e.progress_records, used),
            **_ray_columns(roles.ray_info(md)),
            "sampled_cpu_s": used[0] if used is not None else np.nan,
        })
    return pd.DataFrame(rows, columns=PROCESS_COLUMNS)


def _first_host(entries: Sequence[ProcessEntry]) -> str:
    """The host rls-prof's sampler ran on (its /proc: the launching host's pids)."""
    return entries[0].header.host if entries else ""


def _ray_columns(ray: dict[str, Any]) -> dict[str, Any]:
    tasks = ray.get("tasks")
    return {"ray_actor_class": ray.get("actor_class"), "ray_actor_id": ray.get("actor_id"),
            "ray_tasks": ", ".join(map(str, tasks)) if isinstance(tasks, list) else None}


def _role_order(table: pd.DataFrame) -> list[str]:
    """Known roles in their canonical order, then others as first seen."""
    seen = list(dict.fromkeys(table["role"]))
    return [r for r in fmt.ROLES if r in seen] + [r for r in seen if r not in fmt.ROLES]


def run_summary(table: pd.DataFrame) -> pd.DataFrame:
    """One row per role (processes, how many are idle helpers, summed times, busy share
    of the processes' wall time), then the whole run (``all processes``)."""
    rows = []
    first = table["continues"] < 0  # a process's later sessions are not more processes
    for role in _role_order(table):
        g = table[table["role"] == role]
        rows.append({"role": role, "processes": int(first[g.index].sum()),
                     "idle_helpers": int(g["idle_helper"].sum()),
                     **{c: float(g[c].sum()) for c in _TIME_COLS}})
    if len(table):
        rows.append({"role": ALL, "processes": int(first.sum()),
                     "idle_helpers": int(table["idle_helper"].sum()),
                     **{c: float(table[c].sum()) for c in _TIME_COLS}})
    df = pd.DataFrame(rows, columns=SUMMARY_COLUMNS[:-1])
    df["busy_pct"] = 100.0 * df["busy_s"] / df["wall_s"].where(df["wall_s"] > 0)
    return df[SUMMARY_COLUMNS]


def role_operations(results: Sequence[ProcessResult], table: pd.DataFrame,
                    paths: PathTable) -> pd.DataFrame:
    """Top-level operations per role: processes that ran each, calls, and inclusive time
    summed over those processes (and their threads); largest first within a role."""
    role_of = dict(zip(table["index"], table["role"], strict=True))
    process_of = first_sessions(table)
    acc: dict[tuple[str, int], list[float]] = {}
    ran: dict[tuple[str, int], set[int]] = {}
    for i, r in enumerate(results):
        for path, (ns, calls) in top_operations(r, paths).items():
            a = acc.setdefault((role_of[i], path), [0, 0.0])
            ran.setdefault((role_of[i], path), set()).add(process_of[i])
            a[0] += calls
            a[1] += ns / 1e9
    order = {r: k for k, r in enumerate(_role_order(table))}
    rows = [{"role": role, "operation": paths.path(path), "processes": len(ran[(role, path)]),
             "calls": int(a[0]), "wall_s": a[1]} for (role, path), a in acc.items()]
    df = pd.DataFrame(rows, columns=ROLE_OPERATION_COLUMNS)
    if len(df):
        df = df.assign(_r=df["role"].map(order)).sort_values(
            ["_r", "wall_s"], ascending=[True, False], kind="stable").drop(columns="_r")
    return df.reset_index(drop=True)


def first_sessions(table: pd.DataFrame) -> dict[int, int]:
    """Row index -> the row of the same process's first recording session."""
    cont = dict(zip(table["index"], table["continues"], strict=True))
    out = {}
    for i in cont:
        j, hops = i, 0
        while cont.get(j, -1) >= 0 and hops < len(cont):
            j, hops = cont[j], hops + 1
        out[i] = j
    return out


def run_wall_s(table: pd.DataFrame, run: dict[str, Any]) -> float:
    """The run's wall time: rls-prof's measurement, else first start to last end."""
    d = run.get("duration_s")
    if isinstance(d, (int, float)) and d > 0:
        return float(d)
    if not len(table):
        return 0.0
    return float(max(table["end_s"].max(), 0.0) - min(table["start_s"].min(), 0.0))
