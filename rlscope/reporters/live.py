"""The live view's screen and scalars (rlscope.analysis.live): pure functions of a
:class:`~rlscope.analysis.live.Snapshot`; the terminal and TensorBoard writing are the
command's (rlscope.cli.live).

Verdict of the last interval, for the selected process: the category holding at least
:data:`BOUND_SHARE` of its time names it ("simulator-bound"); waiting that much is
"waiting (on workers, IPC or I/O)"; otherwise "mixed", with the two largest categories.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from rlscope.analysis.live import ProcessView, Snapshot

BOUND_SHARE = 0.5
ALL = "(all phases)"
_CATS = ("Python", "Backend", "Simulator", "CUDA API", "Waiting")
_SHORT = {"Python": "Py", "Backend": "Bk", "Simulator": "Sim", "CUDA API": "CUDA",
          "Waiting": "Wait"}
_BOUND = {"Python": "Python-bound", "Backend": "backend-bound (ML framework)",
          "Simulator": "simulator-bound", "CUDA API": "CUDA-API-bound",
          "Waiting": "waiting (on workers, IPC or I/O)"}


@dataclass
class Selection:
    process: int = 0  # index into the snapshot's processes (tree order)
    phase: str = ALL


def ordered(s: Snapshot) -> list[tuple[int, ProcessView]]:
    """The processes as a tree (children under their parent, by pid), with depth."""
    by_pid = {v.pid: v for v in s.processes}
    kids: dict[int, list[ProcessView]] = {}
    roots = []
    for v in sorted(s.processes, key=lambda v: v.pid):
        if v.ppid in by_pid and v.ppid != v.pid:
            kids.setdefault(v.ppid, []).append(v)
        else:
            roots.append(v)
    out: list[tuple[int, ProcessView]] = []

    def walk(v: ProcessView, depth: int) -> None:
        out.append((depth, v))
        for k in kids.get(v.pid, []):
            walk(k, depth + 1)

    for r in roots:
        walk(r, 0)
    return out


def _filtered(d: dict[tuple[str, str, str], float], phase: str
              ) -> dict[tuple[str, str, str], float]:
    return d if phase == ALL else {k: v for k, v in d.items() if k[0] == phase}


def shares(d: dict[tuple[str, str, str], float]) -> dict[str, float]:
    """Category -> share of the time (GPU categories as "GPU")."""
    tot = sum(d.values())
    out: dict[str, float] = {}
    for (_, _, cat), v in d.items():
        c = cat if cat in _CATS else "GPU"
        out[c] = out.get(c, 0.0) + v
    return {k: v / tot for k, v in out.items()} if tot > 0 else {}


def verdict(v: ProcessView, phase: str = ALL) -> str:
    """The last interval's verdict (the module's rule)."""
    sh = shares(_filtered(v.last, phase))
    whole = ""
    if not sh and v.ended:  # nothing new from a process that ended: its whole run
        sh, whole = shares(_filtered(v.total, phase)), "whole run: "
    if not sh:
        return "no time recorded in the last interval"
    top = sorted(sh.items(), key=lambda kv: -kv[1])
    c, x = top[0]
    split = ", ".join(f"{k} {100 * s:.0f}%" for k, s in top[:3])
    if x >= BOUND_SHARE:
        return f"{whole}{_BOUND.get(c, 'GPU-bound')} ({split})"
    return f"{whole}mixed ({split})"


def operations(d: dict[tuple[str, str, str], float], phase: str
               ) -> dict[str, dict[str, float]]:
    """Operation path -> category -> inclusive seconds (a path's time counts in its
    ancestors too)."""
    out: dict[str, dict[str, float]] = {}
    for (_, path, cat), v in _filtered(d, phase).items():
        parts = path.split(" > ")
        for i in range(1, len(parts) + 1):
            p = " > ".join(parts[:i])
            row = out.setdefault(p, {})
            row[cat] = row.get(cat, 0.0) + v
    return out


def _rate(x: float) -> str:
    return "-" if math.isnan(x) else f"{x:,.1f}"


def screen(s: Snapshot, sel: Selection, width: int = 100, height: int = 40) -> list[str]:
    """The lines of the live screen."""
    tree = ordered(s)
    head = (f"rls-analyze live: {'recording' if s.running else 'finished'}   "
            f"{s.time_s:,.0f} s, refreshed every {s.interval_s:.1f} s   {s.directory}")
    lines = [head[:width]]
    if not tree:
        lines.append("waiting for the run's first trace file...")
        return lines + s.warnings[-3:]
    sel.process %= len(tree)
    _, v = tree[sel.process]
    if sel.phase != ALL and sel.phase not in v.phases:
        sel.phase = ALL
    lines.append(f"Process {sel.process + 1}/{len(tree)}, phase: {sel.phase}   "
                 f"pid {v.pid}{' [' + v.role + ']' if v.role else ''}"
                 f"{' (ended)' if v.ended else ''}: {v.name}")  # the name last: it may be cut
    lines.append("keys: tab/n next process, N previous, p next phase, q quit")
    if v.timesteps >= 0:
        lines.append(f"Progress: {v.timesteps:,} {v.unit}; {v.unit}/s last interval "
                     f"{_rate(v.steps_per_s_last)}, run {_rate(v.steps_per_s_run)}")
    lines.append(f"Verdict: {verdict(v, sel.phase)}")
    lines.append("")
    last, total = operations(v.last, sel.phase), operations(v.total, sel.phase)
    last_sum = sum(_filtered(v.last, sel.phase).values())
    tot_sum = sum(_filtered(v.total, sel.phase).values())
    name_w = max(20, min(48, width - 58))
    lines.append(f"{'Operation':<{name_w}} {'last s':>8} {'last %':>6}  "
                 f"{'Py/Bk/Sim/Wait % (last)':<24} {'run s':>9} {'run %':>6}")
    rows = sorted(total, key=lambda p: (p.split(" > ")[0] != "(unannotated)", p))
    rows = _tree_order(rows, total)
    room = max(height - len(lines) - 4 - min(len(tree), 8), 3)
    for p in rows[:room]:
        lt = sum(last.get(p, {}).values())
        tt = sum(total[p].values())
        mix = "/".join(f"{100 * last.get(p, {}).get(c, 0.0) / lt:.0f}" if lt > 0 else "-"
                       for c in ("Python", "Backend", "Simulator", "Waiting"))
        indent = "  " * p.count(" > ")
        label = (indent + p.split(" > ")[-1])[:name_w]
        lines.append(f"{label:<{name_w}} {lt:>8.3f} {_pct(lt, last_sum):>6}  {mix:<24} "
                     f"{tt:>9.2f} {_pct(tt, tot_sum):>6}")
    if len(rows) > room:
        lines.append(f"... {len(rows) - room} more operations")
    lines.append("")
    lines.append("Processes (CPU: % of one core over the sampler's last interval)")
    for i, (d, q) in enumerate(tree[:8]):
        mark = ">" if i == sel.process else " "
        cpu = "-" if math.isnan(q.cpu_pct) else f"{q.cpu_pct:.0f}%"
        lines.append(f"{mark} {'  ' * d}{q.pid} {q.name}"
                     f"{' [' + q.role + ']' if q.role else ''}{' (ended)' if q.ended else ''}"
                     f"  CPU {cpu}  RSS {q.rss_bytes / 2**20:,.0f} MiB")
    if len(tree) > 8:
        lines.append(f"  ... {len(tree) - 8} more processes")
    if s.gpus:  # NVML's view: device-wide, every process on the GPU counts
        lines.append("GPUs (NVML, device-wide): " + "   ".join(
            f"{i}: {u:.0f}% busy, {m / 2**30:,.1f} GiB" for i, (u, m) in s.gpus.items()))
    lines += [f"warning: {w}" for w in s.warnings[-2:]]
    return [ln[:width] for ln in lines[:height]]


def _pct(x: float, tot: float) -> str:
    return f"{100 * x / tot:.0f}%" if tot > 0 else "-"


def _tree_order(paths: list[str], total: dict[str, dict[str, float]]) -> list[str]:
    """Depth first, siblings by their run time, largest first."""
    kids: dict[str, list[str]] = {}
    for p in paths:
        parent = p.rsplit(" > ", 1)[0] if " > " in p else ""
        kids.setdefault(parent, []).append(p)
    out: list[str] = []

    def walk(parent: str) -> None:
        for p in sorted(kids.get(parent, []), key=lambda p: -sum(total[p].values())):
            out.append(p)
            walk(p)

    walk("")
    return out


def _tag(name: str) -> str:
    """A process's name as one TensorBoard tag level: its first word (the script, or
    what a multiprocessing child runs), without slashes."""
    first = name.split()[0] if name.split() else "process"
    return re.sub(r"[^A-Za-z0-9_.\-]", "_", first)


def scalars(s: Snapshot) -> tuple[int | None, dict[str, float]]:
    """TensorBoard scalars of a snapshot: (step, {tag: value}). Step: the timesteps of the
    process that reports progress (None: none does, the caller uses wall seconds); per
    process (``rlscope/<first word of its name>.<pid>/...``) and top-level operation, its
    share of the last interval (%) and, with
    progress, its milliseconds per step; steps/s; CPU %."""
    step = max((v.timesteps for v in s.processes if v.timesteps >= 0), default=None)
    out: dict[str, float] = {}
    for v in s.processes:
        who = f"{_tag(v.name)}.{v.pid}"
        last = v.last
        tot = sum(last.values())
        ops: dict[str, float] = {}
        for (_, path, _), x in last.items():
            top = path.split(" > ")[0]
            ops[top] = ops.get(top, 0.0) + x
        for op, x in ops.items():
            if tot > 0:
                out[f"rlscope/{who}/share_pct/{op}"] = 100 * x / tot
            if v.steps_last > 0:  # the steps reported in the same new chunks
                out[f"rlscope/{who}/ms_per_step/{op}"] = 1e3 * x / v.steps_last
        if not math.isnan(v.steps_per_s_last):
            out[f"rlscope/{who}/steps_per_s"] = v.steps_per_s_last
        if not math.isnan(v.cpu_pct):
            out[f"rlscope/{who}/cpu_pct"] = v.cpu_pct
    for i, (u, _) in s.gpus.items():
        out[f"rlscope/gpu{i}/util_pct"] = u
    return step, out
