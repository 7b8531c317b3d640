"""Case study (b): the same DQN on CartPole-v1 written in PyTorch (eager), TensorFlow
(eager and tf.function) and JAX (jit), each run under rls-prof, compared per step.

    python3 scripts/case_studies/dqn_frameworks.py            # full study (~15 min)
    python3 scripts/case_studies/dqn_frameworks.py --quick    # smoke run (tiny sizes)

Installs what it needs (scripts/setup.sh demo,tensorflow,jax) when the project's .venv
lacks it. Per framework ``--reps`` profiled runs of ``--steps`` DQN steps, frameworks
rotated in every round; rlscope's overhead is removed with one calibration measured by
chunks on the PyTorch workload (TensorFlow and JAX processes do not survive the fork
that chunk calibration needs; docs/case-studies/dqn-frameworks.md). Prints per
framework the time per step, its Python/Backend split and the Python -> backend
transitions per step (mean ± standard deviation over the runs), the backend calls by
name, the ``rls-analyze compare`` tables, writes the compare plot, and ends with a
``RESULT`` line. The workloads: scripts/case_studies/dqn/.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profiled_runs import (
    REPO,
    Clock,
    RunNumbers,
    describe_calibration,
    earlier_run,
    ensure_environment,
    fmt,
    mean_sd,
    rls_analyze,
    rls_prof,
    run_numbers,
    workload_line,
)

FRAMEWORKS = ("torch", "tf-eager", "tf-function", "jax")
MODULES = {"torch": "torch", "tf-eager": "tensorflow", "tf-function": "tensorflow",
           "jax": "jax"}
WORKLOAD = Path("scripts/case_studies/dqn/workload.py")
STEP_OPS = ("inference", "simulation", "replay", "backprop", "(unannotated)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=3000, help="measured DQN steps per run")
    ap.add_argument("--reps", type=int, default=5, help="runs per framework")
    ap.add_argument("--calibration-steps", type=int, default=15000,
                    help="steps of the PyTorch run that calibrates (chunks)")
    ap.add_argument("--frameworks", default=",".join(FRAMEWORKS))
    ap.add_argument("--out", type=Path, default=REPO / "runs/case-studies/dqn-frameworks")
    ap.add_argument("--plot", type=Path,
                    default=REPO / "docs/case-studies/img/dqn-frameworks-compare.png")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 100 steps, one run each, short calibration")
    ap.add_argument("--calibration", type=Path, default=None,
                    help="reuse this calibration.json (of an earlier run of this study) "
                         "instead of calibrating again")
    ap.add_argument("--reanalyze", action="store_true",
                    help="run nothing: analyse the runs an earlier invocation left in --out")
    ap.add_argument("--no-setup", action="store_true", help="never run scripts/setup.sh")
    args = ap.parse_args()
    fws = [f.strip() for f in args.frameworks.split(",") if f.strip()]
    bad = [f for f in fws if f not in FRAMEWORKS]
    if bad or not fws:
        ap.error(f"--frameworks: unknown {bad}; choose from {', '.join(FRAMEWORKS)}")
    if args.quick:
        args.steps, args.reps, args.calibration_steps = 100, 1, 600
    mods = sorted({"torch", "gymnasium", "matplotlib", *(MODULES[f] for f in fws)})
    ensure_environment("demo,tensorflow,jax", mods, setup=not args.no_setup)
    clock = Clock()
    out: Path = args.out.resolve()
    py = sys.executable

    def command(fw: str, steps: int) -> list[str]:
        return [py, str(WORKLOAD), "--framework", fw, "--steps", str(steps)]

    cal = args.calibration.resolve() if args.calibration else \
        out / "calibration" / "calibration.json"
    if args.calibration is None and not args.reanalyze:
        print(f"[{clock}] calibrating on the PyTorch workload ({args.calibration_steps} steps)",
              flush=True)
        rls_prof(out / "calibration", command("torch", args.calibration_steps),
                 calibrate=["--chunks", "6", "--chunk-seconds", "0.05"] if args.quick else [])
    print(f"[{clock}] {_short(describe_calibration(cal))}", flush=True)

    dirs: dict[str, list[Path]] = {f: [] for f in fws}
    lines: dict[str, list[dict[str, str]]] = {f: [] for f in fws}
    for rep in range(args.reps):
        order = fws[rep % len(fws):] + fws[:rep % len(fws)]
        for fw in order:
            d = out / fw / f"rep{rep}"
            stdout = earlier_run(d) if args.reanalyze else \
                rls_prof(d, command(fw, args.steps), calibration=cal)
            line = workload_line(stdout, "dqn")
            dirs[fw].append(d)
            lines[fw].append(line)
            print(f"[{clock}] {fw} rep {rep}: {line['us_per_step']} us/step (its own clock, "
                  f"profiled), warm-up {line['warmup_s']} s, mean return "
                  f"{line['mean_return']}"
                  + ("" if args.reanalyze else f", load {os.getloadavg()[0]:.1f}"),
                  flush=True)

    nums = {f: [run_numbers(d, "training") for d in dirs[f]] for f in fws}
    report(fws, nums, lines, args.steps)
    names = [a for f in fws for a in ("--name", f)]
    runs = [",".join(str(d) for d in dirs[f]) for f in fws]
    args.plot.parent.mkdir(parents=True, exist_ok=True)
    common = [*runs, *names, "--per-timestep", "--phase", "training"]
    by_op = rls_analyze("compare", *common, "--plot", str(args.plot))
    by_cat = rls_analyze("compare", *common, "--by", "category")
    (out / "compare-operations.txt").write_text(by_op)
    (out / "compare-categories.txt").write_text(by_cat)
    print("\n$ rls-analyze compare " + " ".join(_short(r) for r in runs)
          + " " + " ".join(names) + " --per-timestep --phase training --plot "
          + _short(str(args.plot)))
    print(by_op)
    print("$ rls-analyze compare ... --per-timestep --phase training --by category")
    print(by_cat)
    split_plot(fws, nums, args.steps, args.plot.with_name("dqn-frameworks-split.png"))
    result(fws, nums, args.steps)
    print(f"[{clock}] done; runs in {out}, plot {args.plot}")


def _short(path: str) -> str:
    return path.replace(str(REPO) + "/", "")


def _per_step(ns: list[RunNumbers], col: str, steps: int, ops: tuple[str, ...] = STEP_OPS
              ) -> list[float]:
    return [n.per_step(col, steps, ops) for n in ns]


def report(fws: list[str], nums: dict[str, list[RunNumbers]],
           lines: dict[str, list[dict[str, str]]], steps: int) -> None:
    print(f"\nPer measured DQN step (phase 'training', {steps} steps per run, overhead "
          "removed; mean ± sd over runs):")
    head = ["framework", "runs", "us/step", "median", "Python us", "Backend us", "inference us",
            "backprop us", "transitions", "Backend us/tr", "Python us/tr", "warm-up s",
            "own clock us", "on-CPU %"]
    rows = []
    for fw in fws:
        ns = nums[fw]
        tr = _per_step(ns, "backend_calls", steps)
        be = _per_step(ns, "backend_s", steps)
        pyt = _per_step(ns, "python_s", steps)
        rows.append([
            fw, str(len(ns)), fmt(_per_step(ns, "self_s", steps), 1e6),
            f"{1e6 * statistics.median(_per_step(ns, 'self_s', steps)):.1f}",
            fmt(pyt, 1e6), fmt(be, 1e6),
            fmt(_per_step(ns, "self_s", steps, ("inference",)), 1e6),
            fmt(_per_step(ns, "self_s", steps, ("backprop",)), 1e6),
            fmt(tr, 1.0),
            fmt([b / t for b, t in zip(be, tr, strict=True)], 1e6, 2),
            fmt([p / t for p, t in zip(pyt, tr, strict=True)], 1e6, 2),
            fmt([n.outside.get("setup > warmup", 0.0) for n in ns], 1.0, 2),
            fmt([float(ln["us_per_step"]) for ln in lines[fw]], 1.0),
            fmt([float(ln["on_cpu"]) for ln in lines[fw]], 100.0, 0),
        ])
    _table(head, rows)
    print("median: of the runs' us/step; transitions: Python -> backend calls per step"
          " (outermost intercepted calls); us/tr: per transition; warm-up: the first"
          " act/update/target copy (tf.function"
          " tracing, XLA compilation), outside the measured steps; own clock: the"
          " workload's perf_counter over the training loop (profiled, not corrected); on-CPU:"
          " the process's CPU time over that wall time (the rest it waited for a CPU"
          " on the shared machine, counted in whatever category was running).")
    print("\nBackend calls by name, the 8 with the most time (raw, main thread, phase "
          "'training', first run): calls per step, raw us per call, share of the raw "
          "backend time")
    for fw in fws:
        n = nums[fw][0]
        total = sum(n.seconds_by_name.values()) or 1.0
        parts = [f"{name.split('.', 1)[-1]} {n.calls_by_name[name] / steps:.1f}/step "
                 f"{1e6 * sec / n.calls_by_name[name]:.1f} us {100 * sec / total:.0f}%"
                 for name, sec in n.seconds_by_name.most_common(8)]
        print(f"  {fw} ({len(n.calls_by_name)} names): " + "; ".join(parts))


def _table(head: list[str], rows: list[list[str]]) -> None:
    w = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w[i]) if i == 0 else h.rjust(w[i]) for i, h in enumerate(head)))
    print("  ".join("-" * x for x in w))
    for r in rows:
        print("  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(r)))


def split_plot(fws: list[str], nums: dict[str, list[RunNumbers]], steps: int, path: Path
               ) -> None:
    """Left: Python and Backend time per step, stacked. Right: Backend time against
    transitions per step (log-log) with lines of equal time per transition: a framework
    is slow either through many transitions or through costly ones."""
    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.5, 3.6), constrained_layout=True)
    y = range(len(fws))
    pyt = [mean_sd(_per_step(nums[f], "python_s", steps))[0] * 1e6 for f in fws]
    be = [mean_sd(_per_step(nums[f], "backend_s", steps))[0] * 1e6 for f in fws]
    a1.barh(list(y), be, color="#0072B2", label="Backend")
    a1.barh(list(y), pyt, left=be, color="#E69F00", label="Python")
    for i, (b, p) in enumerate(zip(be, pyt, strict=True)):
        a1.text(b + p, i, f" {b + p:,.0f}", va="center", fontsize=8)
    a1.set_yticks(list(y), fws)
    a1.invert_yaxis()
    a1.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(5))
    a1.set_xlabel("µs per DQN step (training phase)")
    a1.set_xlim(0, 1.25 * max(b + p for b, p in zip(be, pyt, strict=True)))
    a1.legend(fontsize=8, loc="lower right")
    colours = ["#D55E00", "#0072B2", "#56B4E9", "#009E73", "#CC79A7", "#000000"]
    tr = [mean_sd(_per_step(nums[f], "backend_calls", steps))[0] for f in fws]
    lo, hi = 0.5 * min(tr), 2 * max(tr)
    for cost in (1, 10, 100, 1000):
        a2.plot([lo, hi], [lo * cost, hi * cost], ":", color="grey", lw=0.8)
        a2.text(hi, hi * cost, f" {cost} µs/call", fontsize=7, color="grey", va="center")
    for f, t, b, c in zip(fws, tr, be, colours, strict=False):
        a2.scatter([t], [b], color=c, s=30, zorder=3)
        a2.annotate(f, (t, b), textcoords="offset points", xytext=(-6, 6), ha="right",
                    fontsize=8)
    a2.set_xscale("log")
    a2.set_yscale("log")
    a2.set_xlim(lo, hi * 4)
    a2.set_xlabel("Python → backend transitions per step")
    a2.set_ylabel("Backend µs per step")
    a2.grid(True, alpha=0.3)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"split plot: {_short(str(path))}")


def result(fws: list[str], nums: dict[str, list[RunNumbers]], steps: int) -> None:
    us = {f: mean_sd(_per_step(nums[f], "self_s", steps))[0] * 1e6 for f in fws}
    med = {f: statistics.median(_per_step(nums[f], "self_s", steps)) * 1e6 for f in fws}
    tr = {f: mean_sd(_per_step(nums[f], "backend_calls", steps))[0] for f in fws}
    kv = [f"{f.replace('-', '_')}_us_per_step={us[f]:.1f}" for f in fws]
    if "torch" in us:
        kv += [f"{f.replace('-', '_')}_over_torch={us[f] / us['torch']:.2f}"
               for f in fws if f != "torch"]
        kv += [f"median_{f.replace('-', '_')}_over_torch={med[f] / med['torch']:.2f}"
               for f in fws if f != "torch"]
    kv += [f"{f.replace('-', '_')}_transitions_per_step={tr[f]:.1f}" for f in fws]
    print("RESULT " + " ".join(kv))


if __name__ == "__main__":
    main()
