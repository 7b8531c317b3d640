"""Case study (c): a vectorized CartPole (a batch of N envs as tensors) stepped by eager
PyTorch, by one ``jax.jit`` call per step, and by one jitted call of k fused steps, for N
from 1 to 65,536, each run under rls-prof.

    python3 scripts/case_studies/vector_cartpole.py           # full sweep (~15 min)
    python3 scripts/case_studies/vector_cartpole.py --quick   # smoke run (tiny sizes)

Installs what it needs (scripts/setup.sh demo,jax) when the project's .venv lacks it.
Every (implementation, N) runs ``--reps`` times, configurations shuffled in every round;
a run steps the batch a fixed number of times (``steps_for(N)``: 20,000 for small N,
fewer for large N so a run stays a few seconds). rlscope's overhead is removed with one
calibration measured by chunks on the PyTorch workload at N=256 (JAX processes do not
survive the fork chunk calibration needs). JAX compile time is measured apart (the
``warmup`` operation, before the measured phase). Prints per configuration the time per
step of the batch and per env step, its Python/Backend split, the Python -> backend
transitions per step, the ``rls-analyze compare`` tables per N, where the crossovers lie,
writes the plots, and ends with ``RESULT`` lines. The workload: scripts/case_studies/vector/.
"""

from __future__ import annotations

import argparse
import os
import random
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

IMPLS = ("torch", "jax", "jax-fused")
WORKLOAD = Path("scripts/case_studies/vector/workload.py")
SIZES = (1, 16, 256, 1024, 4096, 16384, 65536)
PHASE = "simulating"


def steps_for(n: int, k: int, quick: bool) -> int:
    """Steps of the batch per run: 20,000 up to N=256, then 2^24 / N (at least 512),
    rounded down to a multiple of k."""
    steps = 64 if quick else max(512, min(20000, 2 ** 24 // n))
    return steps - steps % k


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default=",".join(map(str, SIZES)), help="values of N")
    ap.add_argument("--k", type=int, default=32, help="steps fused per call (jax-fused)")
    ap.add_argument("--reps", type=int, default=5, help="runs per configuration")
    ap.add_argument("--impls", default=",".join(IMPLS))
    ap.add_argument("--out", type=Path, default=REPO / "runs/case-studies/vector-cartpole")
    ap.add_argument("--img", type=Path, default=REPO / "docs/case-studies/img",
                    help="directory of the plots")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: N in 1, 64; 64 steps; one run each; short calibration")
    ap.add_argument("--calibration", type=Path, default=None,
                    help="reuse this calibration.json (of an earlier run of this study) "
                         "instead of calibrating again")
    ap.add_argument("--reanalyze", action="store_true",
                    help="run nothing: analyse the runs an earlier invocation left in --out")
    ap.add_argument("--no-setup", action="store_true", help="never run scripts/setup.sh")
    args = ap.parse_args()
    impls = [i.strip() for i in args.impls.split(",") if i.strip()]
    try:
        sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--sizes {args.sizes!r}: expected numbers separated by commas")
    if not impls or set(impls) - set(IMPLS) or not sizes or min(sizes) < 1 or args.k < 1:
        ap.error(f"--impls from {', '.join(IMPLS)}; --sizes and --k positive")
    if args.quick:
        sizes, args.reps, args.k = [1, 64], 1, 4
    mods = sorted({"torch", "matplotlib", *(["jax"] if any("jax" in i for i in impls) else [])})
    ensure_environment("demo,jax", mods, setup=not args.no_setup)
    clock = Clock()
    out: Path = args.out.resolve()
    py = sys.executable

    def command(impl: str, n: int, steps: int | None = None) -> list[str]:
        k = args.k if impl == "jax-fused" else 1
        steps = steps or steps_for(n, args.k, args.quick)
        return [py, str(WORKLOAD), "--impl", impl, "--n", str(n), "--steps", str(steps),
                "--k", str(k)]

    # The calibration run reports progress at every step: enough chunks even when quick.
    cal_n, cal_steps = (1, 2000) if args.quick else (256, 40000)
    cal = args.calibration.resolve() if args.calibration else \
        out / "calibration" / "calibration.json"
    if args.calibration is None and not args.reanalyze:
        print(f"[{clock}] calibrating on the PyTorch workload (N={cal_n}, {cal_steps} steps)",
              flush=True)
        rls_prof(out / "calibration", command("torch", cal_n, cal_steps),
                 calibrate=["--chunks", "6", "--chunk-seconds", "0.05"] if args.quick else [])
    print(f"[{clock}] {_short(describe_calibration(cal))}", flush=True)

    configs = [(i, n) for n in sizes for i in impls]
    dirs: dict[tuple[str, int], list[Path]] = {c: [] for c in configs}
    lines: dict[tuple[str, int], list[dict[str, str]]] = {c: [] for c in configs}
    rng = random.Random(0)
    for rep in range(args.reps):
        order = list(configs)
        rng.shuffle(order)
        for impl, n in order:
            d = out / f"{impl}-n{n}" / f"rep{rep}"
            stdout = earlier_run(d) if args.reanalyze else \
                rls_prof(d, command(impl, n), calibration=cal)
            line = workload_line(stdout, "vector")
            dirs[impl, n].append(d)
            lines[impl, n].append(line)
            print(f"[{clock}] {impl} N={n} rep {rep}: {line['us_per_step']} us per step "
                  f"(its own clock, profiled), compile {line['compile_s']} s"
                  + ("" if args.reanalyze else f", load {os.getloadavg()[0]:.1f}"),
                  flush=True)

    nums = {c: [run_numbers(d, PHASE) for d in dirs[c]] for c in configs}
    steps = {c: int(lines[c][0]["steps"]) for c in configs}
    rows = summarize(configs, nums, lines, steps)
    print_summary(rows, args.k)
    for n in sizes:
        runs = [",".join(str(d) for d in dirs[i, n]) for i in impls]
        names = [a for i in impls for a in ("--name", f"{i} N={n}")]
        # The plot for the smallest batch: where per-call overhead is everything.
        plot = ["--plot", str(args.img / "vector-cartpole-compare.png")] if n == sizes[0] \
            else []
        if plot:
            args.img.mkdir(parents=True, exist_ok=True)
        text = rls_analyze("compare", *runs, *names, "--per-timestep", "--phase", PHASE,
                           "--by", "category", *plot)
        (out / f"compare-n{n}.txt").write_text(text)
        print(f"\n$ rls-analyze compare {' '.join(_short(r) for r in runs)} "
              f"{' '.join(names)} --per-timestep --phase {PHASE} --by category"
              + (f" --plot {_short(plot[1])}" if plot else ""))
        print(text)
    crossovers(rows, sizes, impls)
    sweep_plot(rows, sizes, impls, args.k, args.img / "vector-cartpole-sweep.png")
    result(rows, sizes, impls)
    print(f"[{clock}] done; runs in {out}, plots in {args.img}")


def _short(path: str) -> str:
    return ",".join(p.replace(str(REPO) + "/", "") for p in path.split(","))


Row = dict[str, object]


def summarize(configs: list[tuple[str, int]], nums: dict[tuple[str, int], list[RunNumbers]],
              lines: dict[tuple[str, int], list[dict[str, str]]],
              steps: dict[tuple[str, int], int]) -> list[Row]:
    """Per configuration, lists over its runs (per step of the batch, seconds)."""
    rows = []
    for c in configs:
        ns, s = nums[c], steps[c]
        total = [x.per_step("self_s", s) for x in ns]
        rows.append({
            "impl": c[0], "n": c[1], "runs": len(ns), "steps": s,
            "total": total, "python": [x.per_step("python_s", s) for x in ns],
            "backend": [x.per_step("backend_s", s) for x in ns],
            "transitions": [x.per_step("backend_calls", s) for x in ns],
            "compile": [x.outside.get("setup > warmup", 0.0) for x in ns],
            "own": [float(ln["us_per_step"]) * 1e-6 for ln in lines[c]],
            "on_cpu": [float(ln["on_cpu"]) for ln in lines[c]],
        })
    return rows


def print_summary(rows: list[Row], k: int) -> None:
    print(f"\nPer step of the batch of N envs (phase '{PHASE}', overhead removed; mean ± sd "
          f"over runs; jax-fused: {k} steps per call):")
    head = ["impl", "N", "runs", "steps", "us/step", "median", "ns/env-step", "Python us",
            "Backend us", "Python %", "transitions", "Backend us/tr", "compile s",
            "own clock us", "on-CPU %"]
    body = []
    for r in rows:
        tot, pyt, be, tr = (r["total"], r["python"], r["backend"], r["transitions"])
        body.append([
            str(r["impl"]), str(r["n"]), str(r["runs"]), str(r["steps"]),
            fmt(tot, 1e6, 2), f"{1e6 * statistics.median(tot):.2f}",
            fmt([t / r["n"] for t in tot], 1e9, 1),
            fmt(pyt, 1e6, 2), fmt(be, 1e6, 2),
            fmt([p / t for p, t in zip(pyt, tot, strict=True)], 100.0, 0),
            fmt(tr, 1.0, 3),
            fmt([b / t for b, t in zip(be, tr, strict=True)], 1e6, 2),
            fmt(r["compile"], 1.0, 2), fmt(r["own"], 1e6, 2),
            fmt(r["on_cpu"], 100.0, 0),
        ])
    w = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(head)]
    print("  ".join(h.ljust(w[i]) if i == 0 else h.rjust(w[i]) for i, h in enumerate(head)))
    print("  ".join("-" * x for x in w))
    for b in body:
        print("  ".join(c.ljust(w[i]) if i == 0 else c.rjust(w[i]) for i, c in enumerate(b)))
    print("transitions: Python -> backend calls per step of the batch (outermost intercepted"
          " calls); us/tr: Backend time per transition; compile: the first call (the warmup"
          " operation, outside the measured phase); own clock: the workload's perf_counter"
          " (profiled, not corrected); on-CPU: the process's CPU time over that wall"
          " time (the rest it waited for a CPU on the shared machine).")


def _mean(rows: list[Row], impl: str, n: int, key: str) -> float:
    r = next(x for x in rows if x["impl"] == impl and x["n"] == n)
    return mean_sd(r[key])[0]  # type: ignore[arg-type]


def _median(rows: list[Row], impl: str, n: int, key: str) -> float:
    """Robust to the one run in three a loaded machine slows down several times."""
    r = next(x for x in rows if x["impl"] == impl and x["n"] == n)
    return statistics.median(r[key])  # type: ignore[arg-type]


def crossovers(rows: list[Row], sizes: list[int], impls: list[str]) -> None:
    print("\nSpeed-up of JAX over eager PyTorch per N (time per step; ratio of means, "
          "ratio of medians):")
    for n in sizes:
        parts = [f"{i} {_mean(rows, 'torch', n, 'total') / _mean(rows, i, n, 'total'):.2f}x, "
                 f"{_median(rows, 'torch', n, 'total') / _median(rows, i, n, 'total'):.2f}x"
                 for i in impls if i != "torch" and "torch" in impls]
        print(f"  N={n}: " + ", ".join(parts))
    for impl in impls:
        share = [(n, _median(rows, impl, n, "python") / _median(rows, impl, n, "total"))
                 for n in sizes]
        per_tr = [(n, _median(rows, impl, n, "backend") / _median(rows, impl, n, "transitions"))
                  for n in sizes]
        knee = next((n for n, b in per_tr if b > 2 * per_tr[0][1]), None)
        shares = ", ".join(f"N={n} {100 * s:.0f}%" for n, s in share)
        print(f"  {impl} (medians): Python share {shares}"
              + f"; Backend time per transition doubles its N={sizes[0]} value first at "
              + (f"N={knee}" if knee else f"no N up to {sizes[-1]}"))


def sweep_plot(rows: list[Row], sizes: list[int], impls: list[str], k: int, path: Path
               ) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"torch": "#D55E00", "jax": "#0072B2", "jax-fused": "#009E73"}
    label = {"torch": "eager PyTorch", "jax": "JAX jit, 1 step/call",
             "jax-fused": f"JAX jit, {k} fused steps/call"}
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(9.5, 3.8), constrained_layout=True)
    for impl in impls:
        sel = [r for r in rows if r["impl"] == impl]
        ns = [r["n"] for r in sel]
        per_env = [[t / r["n"] * 1e9 for t in r["total"]] for r in sel]
        med = [statistics.median(v) for v in per_env]
        a1.errorbar(ns, med, yerr=[[m - min(v) for m, v in zip(med, per_env, strict=True)],
                                   [max(v) - m for m, v in zip(med, per_env, strict=True)]],
                    marker="o", ms=4, capsize=2, color=colours[impl], label=label[impl])
        for key, style in (("backend", "-"), ("python", "--")):
            vals = [statistics.median(r[key]) * 1e6 for r in sel]
            a2.plot(ns, vals, style, marker="o", ms=3, color=colours[impl])
    a2.plot([], [], "-", color="grey", label="Backend")
    a2.plot([], [], "--", color="grey", label="Python")
    for ax in (a1, a2):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("N (envs in the batch)")
        ax.grid(True, which="major", alpha=0.3)
    a1.set_ylabel("ns per env step")
    a1.set_title("Time per env step (median; bars: min–max of the runs)", fontsize=9)
    a2.set_ylabel("µs per step of the batch")
    a2.set_title("Backend and Python time per step of the batch (median)", fontsize=9)
    a1.legend(fontsize=7)
    a2.legend(fontsize=7, loc="upper left")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(f"sweep plot: {_short(str(path))}")


def result(rows: list[Row], sizes: list[int], impls: list[str]) -> None:
    for impl in impls:
        kv = [f"n{n}_ns_per_env_step={_mean(rows, impl, n, 'total') / n * 1e9:.1f}"
              for n in sizes]
        kv.append(f"transitions_per_step={_mean(rows, impl, sizes[0], 'transitions'):.3f}")
        print(f"RESULT impl={impl} " + " ".join(kv))
    if "torch" in impls:
        for impl in (i for i in impls if i != "torch"):
            kv = [f"n{n}={_mean(rows, 'torch', n, 'total') / _mean(rows, impl, n, 'total'):.2f}"
                  for n in sizes]
            print(f"RESULT speedup_{impl.replace('-', '_')}_over_torch " + " ".join(kv))
            kv = [f"n{n}={_median(rows, 'torch', n, 'total') / _median(rows, impl, n, 'total'):.2f}"
                  for n in sizes]
            print(f"RESULT median_speedup_{impl.replace('-', '_')}_over_torch " + " ".join(kv))


if __name__ == "__main__":
    main()
