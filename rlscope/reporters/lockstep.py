"""Render the lock-step analysis of vector envs (rlscope.analysis.lockstep): text,
CSV, JSON, Markdown, and a figure of each env's step-time distribution."""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np
import pandas as pd

from rlscope.analysis.lockstep import (
    AsyncBatches,
    Lockstep,
    SamplingTable,
    VectorEnv,
    straggler_min_share,
)
from rlscope.reporters.markdown import to_markdown
from rlscope.reporters.section import Section
from rlscope.reporters.units import millis, ms, s, seconds

FORMATS = ("text", "csv", "json", "markdown")


def _pct(part: float, whole: float) -> str:
    return f"{100 * part / whole:.1f}%" if whole > 0 else "-"


def _num(x: float, spec: str = ".3f") -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)


def _table(head: list[str], body: list[list[str]], left: int = 1) -> list[str]:
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h)
              for i, h in enumerate(head)]

    def line(cells: list[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True)))

    return [line(head), "  ".join("-" * w for w in widths), *(line(b) for b in body)]


def sampling_lines(t: SamplingTable) -> list[str]:
    """The seed talk's table: Sampling (Reset, Inference, Step) and Optimizing; totals in
    seconds, per vector step in milliseconds (rlscope.reporters.units)."""
    total = t.total_s
    per = (lambda x: millis(x / t.vector_steps)) if t.vector_steps else (lambda x: "-")

    def op(label: str, x: float, op_name: str) -> list[str]:
        if not x:  # no such operation: say so rather than show a zero
            return [label, "-", "-", f"(no '{op_name}' operation)"]
        return [label, seconds(x), _pct(x, total), per(x) if "Inf" in label else ""]

    body = [["Sampling", seconds(t.sampling_s), _pct(t.sampling_s, total), ""],
            ["  Reset", seconds(t.reset_s), _pct(t.reset_s, total), ""],
            op("  Inference", t.inference_s, "inference"),
            ["  Step", seconds(t.step_s), _pct(t.step_s, total), per(t.step_s)],
            ["  other", seconds(t.other_s), _pct(t.other_s, total), ""],
            op("Optimizing", t.optimizing_s, "backprop"),
            ["Total", seconds(total), "", ""]]
    return _table(["", "Time s", "Share", "Per vector step ms"], body)


def _env_rows(v: VectorEnv) -> list[list[str]]:
    out = []
    for r in v.envs.itertuples():
        out.append([str(r.env), str(r.pid) if r.pid >= 0 else "-", r.name, f"{r.steps:,}",
                    f"{r.resets:,}", _num(r.step_mean_ms), _num(r.step_p50_ms),
                    _num(r.step_p99_ms), _num(r.step_max_ms), _num(r.slowest_pct, ".1f"),
                    *([seconds(r.barrier_wait_s), _num(r.loss_caused_pct, ".1f")]
                      if v.workers else [seconds(r.loss_caused_s)])])
    return out


def vector_env_lines(v: VectorEnv) -> list[str]:
    where = "in worker processes" if v.workers else f"stepped one after another in pid {v.pid}"
    lines = [f"{v.name}: {v.num_envs} envs {where}; {v.vector_steps:,} vector steps "
             f"({v.complete_steps:,} with every env's events), {v.vector_resets:,} vector "
             f"reset(s) ({s(v.reset_s)})"]
    if not v.complete_steps:
        lines.append("  no vector step has every env's events: nothing to measure")
        return lines
    k = v.complete_steps
    split = (f": send {s(v.send_s)}, wait {s(v.wait_s)}" if v.send_s == v.send_s else "")
    lines.append(f"  Vector steps: {s(v.step_s)} ({ms(v.step_s / k)} each){split}")
    if v.workers:
        lines.append(f"    = mean env busy {s(v.env_mean_s)} + lock-step loss "
                     f"{s(v.lockstep_loss_s)} + IPC/scheduling {s(v.overhead_s)}")
        lines.append(f"  Lock-step loss: {s(v.lockstep_loss_s)} = "
                     f"{_pct(v.lockstep_loss_s, v.sampling_s)} of sampling "
                     f"({ms(v.lockstep_loss_s / k)} per vector step); envs idle at the "
                     f"barrier: {s(v.idle_env_s)} in all")
    else:
        lines.append(f"    = envs' steps {s(v.env_sum_s)} (one after another: no barrier, "
                     f"no env waits for another) + the vector env's own code "
                     f"{s(v.overhead_s)}")
    if v.straggler is None and v.straggler_share == v.straggler_share:  # not nan
        what = "of the lock-step loss" if v.workers else "of the time above the mean env"
        top = int(v.envs["loss_caused_pct"].idxmax())
        lines.append(f"  No straggler: the largest share {what}, env {top}'s, is "
                     f"{100 * v.straggler_share:.0f}% (an even spread gives "
                     f"{100 / v.num_envs:.0f}% each; a straggler causes at least "
                     f"{100 * straggler_min_share(v.num_envs):.0f}%)")
    if v.straggler is not None:
        r = v.envs.iloc[v.straggler]
        others = v.envs.drop(index=v.straggler)
        what = "of the lock-step loss" if v.workers else "of the time above the mean env"
        lines.append(f"  Straggler: env {v.straggler} ({r['name']}"
                     + (f", pid {r['pid']}" if v.workers and r["pid"] >= 0 else "")
                     + f"): causes {100 * v.straggler_share:.0f}% {what}; slowest in "
                     f"{r['slowest_pct']:.0f}% of vector steps; step p99 "
                     f"{r['step_p99_ms']:.2f} ms vs {others['step_p99_ms'].median():.2f} ms "
                     "(median of the other envs)")
        if v.straggler == v.first_env:
            lines.append(f"    (env {v.straggler} is stepped first in (nearly) every vector step, "
                         "right after the code before it: caches are cold there whichever "
                         "env it is, so part of its extra time may be its place, not the "
                         "env; step the envs in another order, or in workers, to tell)")
    lines.append("")
    head = ["Env", "Pid", "Name", "Steps", "Resets", "Mean ms", "p50 ms", "p99 ms", "Max ms",
            "Slowest %"] + (["Barrier wait s", "Loss caused %"] if v.workers
                            else ["Above mean s"])
    lines += ["  " + x for x in _table(head, _env_rows(v), left=3)]
    if len(v.projections):
        lines.append("")
        lines.append(f"  Projections: time to step the same samples ({k:,} vector steps "
                     f"now take {s(v.step_s)})")
        body = [[r.scenario, seconds(r.step_s), seconds(r.saved_s, signed=True),
                 _num(r.sampling_speedup, ".2f") + "x"] for r in v.projections.itertuples()]
        lines += ["  " + x for x in _table(["Scenario", "Step s", "Saved s",
                                            "Sampling speed-up"], body)]
        lines.append("  Assumptions:")
        for r in v.projections.drop_duplicates("design").itertuples():
            lines.append(f"    {r.design}: {r.assumptions}")
    return lines


def batch_lines(b: AsyncBatches) -> list[str]:
    """An async vector env: how evenly its envs were in the batches."""
    rel = b.relative()
    lo, hi = int(np.argmin(rel)), int(np.argmax(rel))
    lines = [f"{b.name} ({b.library}, async: {b.num_envs} envs, batches of {b.batch_size}) in "
             f"pid {b.pid}: {b.batches:,} batches received, the envs of {b.tallied:,} "
             "sampled ones counted",
             f"  per env, batches it was in against an even share: lowest "
             f"{rel[lo]:.2f}x (env {lo}), highest {rel[hi]:.2f}x (env {hi})"]
    lag = b.lagging()
    if lag:
        shown = ", ".join(f"{i} ({rel[i]:.2f}x)" for i in lag[:8])
        more = f" and {len(lag) - 8} more" if len(lag) > 8 else ""
        lines.append(f"  lagging (in clearly fewer batches: slower steps): env {shown}{more}")
    else:
        lines.append(f"  no env lags by more than these counts resolve "
                     f"({b.resolution():.0%} below an even share)")
    if b.library == "PufferLib":
        lines.append("  (batches are always full: recv returns the first workers done, and a "
                     "worker's envs step together, so an env lags with its worker; recv's wait "
                     "is Waiting time)")
    else:
        lines.append("  (batches are always full: recv returns the first envs done; its wait "
                     "is Waiting time of the pool's _recv)")
    return lines


def render_text(result: Lockstep, title: str = "") -> str:
    lines = [f"Vector envs{f': {title}' if title else ''}"]
    if not result.vector_envs and not result.batches:
        lines.append("No vector env steps were recorded (SB3 DummyVecEnv/SubprocVecEnv, "
                     "gymnasium SyncVectorEnv/AsyncVectorEnv under rls-prof).")
    for t in result.tables:
        lines.append("")
        lines.append(f"Process {t.pid} {t.process}: Sampling / Optimizing")
        lines += ["  " + x for x in sampling_lines(t)]
        for v in result.vector_envs:
            if v.pid == t.pid:
                lines.append("")
                lines += ["  " + x if x else "" for x in vector_env_lines(v)]
    for b in result.batches:
        lines.append("")
        lines += ["  " + x for x in batch_lines(b)]
    lines.append("")
    lines.append("Times overhead-corrected (calibration.json; --no-correct shows raw ones)."
                 if result.corrected else "Raw times: rlscope's own overhead is in them (no "
                 "calibration.json, or --no-correct).")
    lines.append("Sampling: from the first vector env call to the last, less Optimizing "
                 "(operation 'backprop') in it; Step/Reset: vector steps/resets in the main "
                 "process; Inference: operation 'inference' outside Optimizing.")
    if any(v.workers for v in result.vector_envs):
        lines.append("Per vector step, env busy = its env's step (and reset) time in the "
                     "worker; lock-step loss = slowest env - mean env, summed; barrier "
                     "wait = slowest env - this env; IPC/scheduling = vector step - slowest "
                     "env.")
    return "\n".join(lines)


def to_dict(result: Lockstep) -> dict[str, Any]:
    def vec(v: VectorEnv) -> dict[str, Any]:
        d = {k: getattr(v, k) for k in (
            "pid", "process", "name", "cls", "num_envs", "workers", "vector_steps",
            "complete_steps", "vector_resets", "step_s", "send_s", "wait_s", "reset_s",
            "env_mean_s", "env_sum_s", "slowest_s", "lockstep_loss_s", "idle_env_s",
            "overhead_s", "straggler", "straggler_share", "sampling_s", "first_env")}
        d["loss_share_of_sampling"] = v.loss_share
        d["envs"] = _records(v.envs)
        d["projections"] = _records(v.projections)
        return d

    tables = [{**t.__dict__, "total_s": t.total_s} for t in result.tables]
    pools = [{"pid": b.pid, "process": b.process, "name": b.name, "library": b.library,
              "num_envs": b.num_envs,
              "batch_size": b.batch_size, "batches": b.batches, "tallied": b.tallied,
              "counts": b.counts.tolist(), "relative": b.relative().tolist(),
              "lagging": b.lagging(), "resolution": b.resolution()}
             for b in result.batches]
    return _plain({"vector_envs": [vec(v) for v in result.vector_envs], "sampling": tables,
                   "async_batches": pools, "corrected": result.corrected,
                   "warnings": result.warnings})


def _plain(x: Any) -> Any:
    """JSON-ready: numpy scalars to Python, NaN to None."""
    if isinstance(x, dict):
        return {str(k): _plain(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [_plain(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and math.isnan(x):
        return None
    return x


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [dict(r) for r in df.to_dict(orient="records")]


def render(result: Lockstep, fmt: str, title: str = "") -> str:
    if fmt == "text":
        return render_text(result, title)
    if fmt == "json":
        return json.dumps(to_dict(result), indent=2)
    if fmt == "csv":
        return result.envs().to_csv(index=False).rstrip("\n")
    if fmt == "markdown":
        parts = []
        for t in result.tables:
            parts.append(f"### Process {t.pid}: Sampling / Optimizing\n")
            parts.append(to_markdown(pd.DataFrame([{**t.__dict__, "total_s": t.total_s}])))
        parts.append("\n### Envs\n")
        parts.append(to_markdown(result.envs()))
        for v in result.vector_envs:
            if len(v.projections):
                parts.append(f"\n### Projections: {v.name}\n")
                parts.append(to_markdown(v.projections))
        return "\n".join(parts)
    raise ValueError(f"unknown format {fmt!r}")


def figure(result: Lockstep) -> Any:
    """Per-env step-time distributions, one panel per vector env: a box per env (median
    line, quartiles, whiskers at the 1st and 99th percentiles), its mean as a dot, the
    straggler in vermillion and hatched (colour-blind safe: Okabe–Ito colours)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from rlscope.reporters.plots import pyplot

    plt = pyplot()
    vecs = [v for v in result.vector_envs if any(len(t) for t in v.step_times.values())]
    fig, axes = plt.subplots(max(len(vecs), 1), 1, squeeze=False, constrained_layout=True,
                             figsize=(max(6.5, 0.6 * max((v.num_envs for v in vecs),
                                                         default=4) + 2.5),
                                      3.4 * max(len(vecs), 1)))
    for ax, v in zip(axes[:, 0], vecs, strict=False):
        envs = sorted(v.step_times)
        data = [v.step_times[i] * 1e3 for i in envs]
        box = ax.boxplot(data, whis=(1, 99), showfliers=True, patch_artist=True,
                         medianprops={"color": "black", "linewidth": 1.2},
                         flierprops={"markersize": 2, "alpha": 0.4})
        for i, patch in zip(envs, box["boxes"], strict=True):
            straggler = i == v.straggler
            patch.set_facecolor(_STRAGGLER if straggler else _ENV)
            if straggler:
                patch.set_hatch("////")
        ax.plot(range(1, len(envs) + 1), [d.mean() if len(d) else np.nan for d in data],
                "o", color="black", markersize=4)
        ax.set_xticks(range(1, len(envs) + 1), [str(i) for i in envs])
        positive = [d[d > 0] for d in data if len(d)]
        lo = min((d.min() for d in positive if len(d)), default=1.0)
        hi = max((d.max() for d in positive if len(d)), default=1.0)
        log = hi / max(lo, 1e-9) > 20
        if log:
            ax.set_yscale("log")
        ax.set_xlabel("env index" + (f" (straggler: env {v.straggler})"
                                     if v.straggler is not None else ""))
        ax.set_ylabel("env step wall time (ms" + (", log scale)" if log else ")"))
        title = f"{v.name} (pid {v.pid}): {v.num_envs} env{'s' if v.num_envs != 1 else ''}"
        if v.workers and v.sampling_s > 0:
            title += f"; lock-step loss {100 * v.loss_share:.1f}% of sampling"
        ax.set_title(title, fontsize=10)
        handles = [Patch(facecolor=_ENV, edgecolor="black", label="p25–p75, median line; "
                         "whiskers p1–p99"),
                   Line2D([], [], marker="o", color="black", linestyle="", markersize=4,
                          label="mean")]
        if v.straggler is not None:
            handles.append(Patch(facecolor=_STRAGGLER, edgecolor="black", hatch="////",
                                 label="straggler"))
        ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.2),
                  ncols=len(handles), fontsize=8, frameon=False)
    if not vecs:
        axes[0, 0].text(0.5, 0.5, "no env steps recorded", ha="center", va="center")
    return fig


_ENV = "#56B4E9"  # Okabe–Ito sky blue
_STRAGGLER = "#D55E00"  # Okabe–Ito vermillion


def section(result: Lockstep, title: str = "") -> Section:
    """The lock-step section of a report (rlscope.reporters.section)."""
    return Section("lockstep", lambda: to_dict(result), lambda: render_text(result, title))
