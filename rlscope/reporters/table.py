"""Render the per-operation breakdown as a terminal table, CSV, JSON or Markdown.

Consumes only the data API (:class:`rlscope.analysis.Analysis`).
"""

from __future__ import annotations

import json
import math
from typing import Any

import pandas as pd

from rlscope.analysis import Analysis
from rlscope.analysis.engine.paths import PATH_SEP, STARTUP, UNANNOTATED
from rlscope.analysis.overhead import per_operation
from rlscope.reporters import compiles, gpuwork, hosts, processes, warmup
from rlscope.reporters import utilisation as util_report
from rlscope.reporters.correction import correction_lines
from rlscope.reporters.markdown import to_markdown
from rlscope.reporters.section import Section
from rlscope.reporters.units import s as secs
from rlscope.reporters.units import seconds
from rlscope.reporters.windows import windows_line
from rlscope.trace.argv import shell_line

FORMATS = ("text", "csv", "json", "markdown")
_COMMAND_CHARS = 200  # of the command on the Run line (run.json has all of it)

# (column, heading) of the optional split columns; shown in text when not all zero.
_SPLITS = [("python_s", "Python"), ("backend_s", "Backend"), ("simulator_s", "Simulator"),
           ("cuda_api_s", "CUDA API"), ("waiting_s", "Waiting"), ("gpu_s", "GPU"),
           ("cpu_only_s", "CPU only"), ("gpu_only_s", "GPU only"), ("cpu_gpu_s", "CPU+GPU")]
# (column, heading) of Python -> native transition counts, shown when not all zero.
_TRANSITIONS = [("backend_calls", "→Backend"), ("simulator_calls", "→Simulator")]
_GPU_COLS = {"cuda_api_s", "gpu_s", "cpu_only_s", "gpu_only_s", "cpu_gpu_s"}


def _process_title(proc: pd.Series, label: str | None = None) -> str:
    state = "complete" if proc["complete"] else "incomplete: the process did not stop cleanly"
    title = (f"Process {proc['pid']} {label or proc['process']}: {proc['seconds']:.3f} s recorded, "
             f"{proc['recorder']} recorder, {state}")
    if proc["gpu_only_s"] or proc["cpu_gpu_s"]:
        cov = max(proc["covered_s"], 1e-12)
        title += (f"\n  wall time {proc['covered_s']:.3f} s: CPU only "
                  f"{100 * proc['cpu_only_s'] / cov:.1f}%, GPU only "
                  f"{100 * proc['gpu_only_s'] / cov:.1f}%, CPU+GPU "
                  f"{100 * proc['cpu_gpu_s'] / cov:.1f}%")
    if proc["threads"] > 1:
        title += f"\n  {proc['threads']} threads: times are summed over threads"
    bounded = windows_line(proc["metadata"], proc["seconds"])
    if bounded:
        title += "\n" + bounded
    return title


def per_progress_unit(unit: str) -> str:
    """"per episode" for the unit "episodes" (rlscope.report_progress's unit=)."""
    for plural, one in (("ches", "ch"), ("shes", "sh"), ("sses", "ss"), ("xes", "x"),
                        ("ies", "y"), ("s", "")):
        if unit.endswith(plural) and len(unit) > len(plural):
            return f"per {unit[:-len(plural)]}{one}"
    return f"per {unit}"


def _extrapolation_line(row: pd.Series) -> str:
    done, total, unit = int(row["timesteps"]), int(row["total_timesteps"]), row["unit"]
    line = f"  Progress: {done:,} {unit}"
    if 0 < total < done:  # SB3 & co. finish the rollout or update under way
        line += f", target of {total:,} reached (the last iteration ran {done - total:,} past it)"
    elif total > 0:
        line += f" of {total:,} ({100 * row['fraction_done']:.1f}%)"
    if not math.isnan(row["steps_per_s"]):
        line += f" at {row['steps_per_s']:,.1f} {unit}/s"
    if not math.isnan(row["estimated_total_s"]) and row["fraction_done"] < 1:
        line += (f"; estimated full training run: {_duration(row['estimated_total_s'])} "
                 f"(recorded {_duration(row['recorded_s'])})")
    if row.get("compile_s", 0) > 0:
        line += f"; the rate leaves out {row['compile_s']:.2f} s of JIT compiling"
    return line


def _startup_line(proc: pd.Series, imports: pd.DataFrame, top: int = 3) -> str | None:
    """The start-up and its slowest imports, or None when the process has none."""
    if not proc["startup_s"] > 0:
        return None
    share = 100 * proc["startup_s"] / max(proc["covered_s"], 1e-12)
    line = (f"  Start-up (recording start to the first event): {secs(proc['startup_s'])}"
            f" ({share:.1f}% of the process)")
    if proc["imports_s"] > 0:
        slow = ", ".join(f"{r.module} {secs(r.seconds)}"
                         for r in imports.head(top).itertuples())
        more = f", {len(imports) - top} more" if len(imports) > top else ""
        line += f"; imports {secs(proc['imports_s'])}: {slow}{more}"
    return line


def _duration(s: float) -> str:
    """A whole training run's (estimated) length: a total, in seconds, or in hours or
    minutes once it is that long (never in milliseconds)."""
    if s >= 3600:
        return f"{s / 3600:.2f} h"
    if s >= 60:
        return f"{s / 60:.1f} min"
    return secs(s)


def _transition_cell(count: int, calls: int) -> str:
    """Transitions of an operation, and per call of it (per iteration of a loop body)."""
    return f"{count:,} ({count / calls:,.1f}/call)" if calls else f"{count:,}"


def _row(cells: list[str], widths: list[int]) -> str:
    return "  ".join(c.ljust(w) if i < 2 else c.rjust(w)
                     for i, (c, w) in enumerate(zip(cells, widths, strict=True)))


def render_text(a: Analysis) -> str:
    ops, procs, extra, imports = a.operations(), a.processes(), a.extrapolation(), a.imports()
    lines = []
    run = a.run
    command = run.get("command")
    if isinstance(command, list) and command:  # rls-prof's run.json
        lines.append(f"Run: {shell_line(command, _COMMAND_CHARS)}  "
                     f"[{run.get('status', '?')}"
                     + (f", exit status {run['exit_status']}" if "exit_status" in run else "")
                     + "]")
    if run:
        lines.extend(correction_lines(run, overhead_worst(ops, run)))
    lines.extend(hosts.host_lines(a))  # several hosts: their clock alignment
    lines.extend(processes.overview_lines(a))  # tree and run summary, before the tables
    folded = processes.folded_indices(a)
    labels = processes.process_label(a, role=len(procs) > 1)
    for i, proc in procs.iterrows():
        if i in folded:
            continue
        lines.append("")
        lines.append(_process_title(proc, labels.get(int(i))))
        ex = extra[(extra["pid"] == proc["pid"]) & (extra["session"] == proc["session"])]
        if len(ex):
            lines.append(_extrapolation_line(ex.iloc[0]))
        startup = _startup_line(proc, imports[imports["pid"] == proc["pid"]])
        if startup:
            lines.append(startup)
        rows = ops[(ops["pid"] == proc["pid"]) & (ops["session"] == proc["session"])]
        splits = [(c, h) for c, h in _SPLITS if c in rows and rows[c].abs().sum() > 0
                  and not (c == "cpu_only_s" and not (rows["gpu_only_s"].sum()
                                                      or rows["cpu_gpu_s"].sum()))]
        # Totals, in seconds however long the run (rlscope.reporters.units).
        transitions = [(c, h) for c, h in _TRANSITIONS if c in rows and rows[c].sum() > 0]
        compiled = "compile_s" in rows and rows["compiles"].sum() + rows["compile_s"].sum() > 0
        head = ["Phase", "Operation", "Calls", "Wall s", "Wall %", "Self s",
                "Self %", *[f"{h} s" for _, h in splits],
                *(["Compile s", "Compiles"] if compiled else []), *[h for _, h in transitions]]
        body = []
        for r in rows.itertuples():
            op = "  " * int(r.depth) + r.operation.split(PATH_SEP)[-1]
            calls = "-" if r.operation in (UNANNOTATED, STARTUP) else f"{r.calls:,}"
            body.append([r.phase or "-", op, calls, seconds(r.wall_s),
                         f"{r.wall_pct:.1f}", seconds(r.self_s), f"{r.self_pct:.1f}",
                         *[seconds(getattr(r, c)) for c, _ in splits],
                         *([seconds(r.compile_s), f"{r.compiles:,}"] if compiled else []),
                         *[_transition_cell(getattr(r, c), r.calls) for c, _ in transitions]])
        widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
                  for i, h in enumerate(head)]
        lines.append("  " + _row(head, widths))
        lines.append("  " + "  ".join("-" * w for w in widths))
        lines.extend("  " + _row(b, widths) for b in body)
        if transitions and len(ex) and ex.iloc[0]["timesteps"] > 0:
            steps = ex.iloc[0]["timesteps"]
            per = ", ".join(f"{h.lstrip('→')} {rows[c].sum() / steps:,.1f}"
                            for c, h in transitions)
            lines.append(f"  Transitions from Python "
                         f"{per_progress_unit(ex.iloc[0]['unit'])}: {per}")
    lines.extend(processes.folded_lines(a))
    lines.extend(compiles.lines(a))
    lines.extend(warmup.lines(a))
    lines.extend(gpuwork.lines(a))
    lines.extend(util_report.lines(a))
    lines.append("")
    lines.append("Wall: time inside the operation, nested operations included. Self: "
                 "excluding them. %: of the process's wall time.")
    if (ops["operation"] == STARTUP).any():
        lines.append("(start-up): the main thread from recording start to the process's "
                     "first operation, phase, progress or env event (imports: the modules "
                     "it imported then, calls = imports); (unannotated): outside "
                     "operations afterwards.")
    if any(ops[c].abs().sum() > 0 for c in _GPU_COLS - {"cpu_only_s"}):
        lines.append("Python/Backend/Simulator/CUDA API/Waiting/GPU and CPU only/GPU only/"
                     "CPU+GPU split the self time.")
    elif len(ops) and (ops["backend_s"].sum() or ops["simulator_s"].sum()
                       or ops["waiting_s"].sum()):
        lines.append("Python/Backend/Simulator/Waiting split the self time.")
    if "compile_s" in ops and ops["compile_s"].sum() > 0:
        lines.append("Compile: time JIT-compiling (torch.compile, jax.jit, tf.function) in the "
                     "operation, within its self time and categories; Compiles: compilations. "
                     "The estimated full run's rate leaves compile time out.")
    if len(ops) and ops["waiting_s"].sum():
        lines.append("Waiting: blocked in an intercepted call (sleep, pipe/socket receive, "
                     "select, lock/queue waits, waiting for a child): off the CPU.")
    if len(ops) and any(c in ops and ops[c].sum() for c, _ in _TRANSITIONS):
        lines.append("→Backend/→Simulator: calls from Python into the ML backend / simulator "
                     "(outermost intercepted calls), in total and per call of the operation.")
    return "\n".join(lines)


def to_dict(a: Analysis) -> dict[str, Any]:
    """The report's tables as data (the top-level keys of the JSON report)."""
    return {"run": a.run, "processes": _records(a.processes()),
            "operations": _records(a.operations()),
            "extrapolation": _records(a.extrapolation()),
            **processes.json_sections(a), **_utilisation_json(a),
            **({"gpu_work": gpuwork.to_dict(a)} if len(a.gpu()) else {}),
            **compiles.json_section(a), **warmup.json_section(a),
            **hosts.json_section(a), **_overhead_json(a), "warnings": a.warnings}


def _costs_ns(run: dict[str, Any]) -> dict[str, float]:
    """The per-event costs the run's correction entry carries (empty: none known)."""
    c = run.get("correction")
    return dict(c.get("costs_ns") or {}) if isinstance(c, dict) else {}


def overhead_worst(ops: pd.DataFrame, run: dict[str, Any]) -> dict[str, Any] | None:
    """The operation rlscope's book-keeping inflated most, by the cost model."""
    costs = _costs_ns(run)
    return per_operation.worst(per_operation.operation_overhead(ops, costs), ops) \
        if costs else None


def _overhead_json(a: Analysis) -> dict[str, Any]:
    costs = _costs_ns(a.run)
    if not costs:
        return {}
    ops = a.operations()
    per_op = per_operation.operation_overhead(ops, costs)
    return {"overhead_per_operation": _records(per_op),
            "overhead_worst_operation": per_operation.worst(per_op, ops)}


def section(a: Analysis) -> Section:
    """The per-process tables (rlscope.reporters.section)."""
    return Section("tables", lambda: to_dict(a), lambda: render_text(a), merge=True)


def render(a: Analysis, fmt: str) -> str:
    if fmt == "text":
        return render_text(a)
    if fmt == "json":
        return json.dumps(to_dict(a), indent=2)
    return render_frame(a.operations(), fmt)


def _utilisation_json(a: Analysis) -> dict[str, Any]:
    section = util_report.to_dict(a)
    return {} if section is None else {"utilisation": section}


def render_frame(df: pd.DataFrame, fmt: str) -> str:
    """Any one table as CSV or Markdown."""
    if fmt == "csv":
        return df.to_csv(index=False).rstrip("\n")
    if fmt == "markdown":
        return to_markdown(df)
    raise ValueError(f"one table renders as csv or markdown, not {fmt!r}")


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return json.loads(df.to_json(orient="records"))
