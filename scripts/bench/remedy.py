"""Remedies checked, not guessed: for each workload, the profiled run's first run-level
verdict, its remedy applied, and the gain it predicted against the gain measured.

    python scripts/bench/remedy.py [--rounds 3] [--only vecenv,straggler,pool,oversub]

Workloads (scripts/bench/workloads/remedy_*.py; each times its own loop with
perf_counter and prints ``RESULT loop_s=``):

  vecenv     SB3 PPO CartPole, SubprocVecEnv(4) on this machine's cores
             remedies: DummyVecEnv (IPC, oversubscription)
  straggler  SubprocVecEnv(2) rollout loop, env 1 sleeping 4 ms per step
             remedies: env 1 fixed (lock-step loss), DummyVecEnv (IPC, oversubscription)
  pool       Pool(2).map over 6 items, chunksize 1, the last one five times as slow
             remedies: the slow item handed out first (pool straggler)
  oversub    a CPU-bound main loop beside 4 CPU-burning worker processes
             remedies: 1 worker (oversubscription)

For each: one run under ``rls-prof`` (the diagnosis: ``rls-analyze report --format json``,
``run_diagnosis[0]``: its kind and ``bound_s``, the predicted gain), then ``--rounds``
rounds of uninstrumented runs of the baseline and of every remedy the workload has,
interleaved (order rotated each round); gains are medians of (baseline - remedy) per round.
The first verdict's remedy should be the one that helps most, its predicted gain within
25% of the measured one. Last line:

    RESULT workloads=<n> first_helps_most=<k> within_25pct=<k> median_abs_error_pct=<x>
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent


@dataclass
class Workload:
    name: str
    script: str
    baseline: list[str]
    remedies: dict[str, list[str]]  # variant -> argv
    by_kind: dict[str, str]  # verdict kind -> the variant that applies its remedy
    measured: dict[str, list[float]] = field(default_factory=dict)


WORKLOADS = [
    Workload("vecenv", "remedy_vecenv.py", ["subproc", "4096"],
             {"dummy": ["dummy", "4096"]}, {"ipc": "dummy", "oversubscription": "dummy"}),
    Workload("straggler", "remedy_straggler.py", ["planted", "300"],
             {"fixed": ["fixed", "300"], "dummy": ["dummy", "300"]},
             {"lockstep-loss": "fixed", "ipc": "dummy", "oversubscription": "dummy"}),
    Workload("pool", "remedy_pool.py", ["given"], {"first": ["first"]},
             {"straggler-task": "first"}),
    Workload("oversub", "remedy_oversub.py", ["4", "800"], {"one": ["1", "800"]},
             {"oversubscription": "one"}),
]


def loop_s(stdout: str) -> float:
    m = re.findall(r"^RESULT loop_s=(\S+)", stdout, re.M)
    if not m:
        raise SystemExit(f"no RESULT line in the workload's output:\n{stdout[-2000:]}")
    return float(m[-1])


def run(argv: list[str], timeout: float = 900) -> str:
    env = dict(os.environ, OMP_NUM_THREADS="1")
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    if r.returncode:
        raise SystemExit(f"{' '.join(argv)} exited {r.returncode}:\n{r.stderr[-3000:]}")
    return r.stdout


def diagnose(w: Workload, tmp: Path) -> tuple[dict, float]:
    out = tmp / w.name
    stdout = run([str(BIN / "rls-prof"), "-o", str(out), "-q", "--", sys.executable,
                  str(HERE / "workloads" / w.script), *w.baseline])
    rep = json.loads(run([str(BIN / "rls-analyze"), "report", "--format", "json",
                          str(out)]))
    verdicts = [v for v in rep.get("run_diagnosis", []) if v.get("recurring", True)]
    return (verdicts[0] if verdicts else {}), loop_s(stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated workload names")
    args = ap.parse_args()
    only = {x for x in args.only.split(",") if x}
    loads = [w for w in WORKLOADS if not only or w.name in only]
    with tempfile.TemporaryDirectory(prefix="rlscope-remedy-") as d:
        firsts = {w.name: diagnose(w, Path(d)) for w in loads}
        for r in range(args.rounds):
            for w in loads:
                variants = [("baseline", w.baseline), *w.remedies.items()]
                k = r % len(variants)
                for name, argv in variants[k:] + variants[:k]:
                    t = loop_s(run([sys.executable, str(HERE / "workloads" / w.script),
                                    *argv]))
                    w.measured.setdefault(name, []).append(t)
            print(f"round {r + 1}/{args.rounds}: " + "; ".join(
                f"{w.name} " + " ".join(f"{n}={v[-1]:.3f}" for n, v in w.measured.items())
                for w in loads), flush=True)
    errors = []
    helps = within = 0
    print("\n| workload | first verdict | remedy applied | predicted gain s | measured gain "
          "s (spread) | error | other remedies' gains s | first helps most |")
    print("|---|---|---|---|---|---|---|---|")
    for w in loads:
        v, prof = firsts[w.name]
        base = w.measured["baseline"]
        gains = {n: [b - x for b, x in zip(base, w.measured[n], strict=True)]
                 for n in w.remedies}
        med = {n: statistics.median(g) for n, g in gains.items()}
        kind = v.get("kind", "")
        variant = w.by_kind.get(kind)
        pred = float(v.get("bound_s", float("nan")))
        if variant is None:  # no verdict, or one this workload has no remedy for
            errors.append(float("inf"))
            print(f"| {w.name} | {kind or '(none)'} | - | {pred:.3f} | - | - | "
                  f"{', '.join(f'{n} {m:.3f}' for n, m in med.items())} | no |")
            continue
        meas = med[variant]
        err = (pred - meas) / meas if meas > 0 else float("inf")
        errors.append(abs(err))
        most = all(meas >= g for g in med.values())
        helps += most
        within += abs(err) <= 0.25
        g = gains[variant]
        spread = f"{min(g):.3f}–{max(g):.3f}"
        others = ", ".join(f"{n} {m:.3f}" for n, m in med.items() if n != variant) or "-"
        print(f"| {w.name} | {kind} | {variant} | {pred:.3f} | {meas:.3f} ({spread}) | "
              f"{100 * err:+.0f}% | {others} | {'yes' if most else 'no'} |")
        print(f"|   | baseline {statistics.median(base):.3f} s uninstrumented, "
              f"{prof:.3f} s profiled | | | | | | |")
    mae = 100 * statistics.median(errors) if errors else float("nan")
    print(f"\nRESULT workloads={len(loads)} first_helps_most={helps} within_25pct={within} "
          f"median_abs_error_pct={mae:.0f}")


if __name__ == "__main__":
    main()
