"""Case study (d): lock-step waste in vectorized environments. stable-baselines3 PPO steps
N copies of an environment in SubprocVecEnv worker processes, all in lock-step: each
vector step waits for the slowest env. Per simulator and N, under rls-prof, the lock-step
report's figures: how much of sampling the barrier costs, what the pipes and scheduling
cost, which env straggles, and what stepping without a barrier would save.

    python3 scripts/case_studies/lockstep_envs.py            # full study (~15 min here)
    python3 scripts/case_studies/lockstep_envs.py --quick    # smoke run (tiny sizes)

Installs what it needs (scripts/setup.sh sb3,mujoco,box2d,plot) when the project's .venv
lacks it. Per simulator and N ``--reps`` runs of one PPO rollout and update (SB3's
defaults: 2,048 steps per env), N rotated in every round. No overhead correction: the
lock-step figures are raw times (docs/multiprocess.md), and they compare times measured
alike. Prints per run and per (simulator, N) the figures (mean ± standard deviation over
the runs), the ``rls-analyze lockstep`` report of one run each, and a ``RESULT`` line.
The workload: scripts/case_studies/policy/workload.py (``--n-envs N --vec subproc``).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from profiled_runs import (
    REPO,
    Clock,
    earlier_run,
    ensure_environment,
    fmt,
    rls_analyze,
    rls_prof,
    workload_line,
)

# simulator -> environment: uniform step costs (CartPole, HalfCheetah: no early episode
# ends) and varied ones (Hopper falls and resets at random times, BipedalWalker's
# contacts change its step cost)
SIMULATORS = {
    "classic": "CartPole-v1",
    "mujoco": "HalfCheetah-v5",
    "mujoco-resets": "Hopper-v5",
    "box2d": "BipedalWalker-v3",
}
WORKLOAD = Path("scripts/case_studies/policy/workload.py")
STEPS_PER_ENV = 2048  # SB3 PPO's n_steps: one rollout


@dataclass
class Figures:
    """One run's vector env, from the lock-step report (times in seconds)."""

    sampling_s: float
    optimizing_s: float
    step_s: float  # vector steps, main process
    env_mean_s: float  # mean env busy, summed over vector steps
    loss_s: float  # lock-step loss
    ipc_s: float  # IPC and scheduling
    straggler: int | None
    straggler_share: float
    async_speedup: float  # sampling speed-up projected without a barrier

    def pct_of_sampling(self, x: float) -> float:
        return 100.0 * x / self.sampling_s if self.sampling_s > 0 else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--envs", default="2,4", help="N: environments per vector env")
    ap.add_argument("--reps", type=int, default=3, help="runs per simulator and N")
    ap.add_argument("--simulators", default=None,
                    help=f"comma list of {', '.join(SIMULATORS)} [default: all]")
    ap.add_argument("--out", type=Path, default=REPO / "runs/case-studies/lockstep")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 2 envs, one run each, classic only unless --simulators")
    ap.add_argument("--reanalyze", action="store_true",
                    help="run nothing: analyse the runs an earlier invocation left in --out")
    ap.add_argument("--no-setup", action="store_true", help="never run scripts/setup.sh")
    args = ap.parse_args()
    chosen = args.simulators or ("classic" if args.quick else ",".join(SIMULATORS))
    sims = [s.strip() for s in chosen.split(",") if s.strip()]
    bad = [s for s in sims if s not in SIMULATORS]
    if bad or not sims:
        ap.error(f"--simulators: unknown {bad}; choose from {', '.join(SIMULATORS)}")
    ns = [int(x) for x in args.envs.split(",") if x.strip()]
    if not ns or min(ns) < 2:
        ap.error("--envs: numbers of 2 or more")
    if args.quick:
        args.reps, ns = 1, [2]
    mods = ["stable_baselines3", "gymnasium"]
    mods += ["mujoco"] if any(s.startswith("mujoco") for s in sims) else []
    mods += ["Box2D"] if "box2d" in sims else []
    ensure_environment("sb3,mujoco,box2d,plot", mods, setup=not args.no_setup)
    clock = Clock()
    out: Path = args.out.resolve()
    py = sys.executable

    figs: dict[tuple[str, int], list[Figures]] = {}
    dirs: dict[tuple[str, int], list[Path]] = {}
    inplace: dict[str, list[Figures]] = {}  # DummyVecEnv with the largest N
    for rep in range(args.reps):
        for sim in sims:
            order = ns[rep % len(ns):] + ns[:rep % len(ns)]
            for n in [*order, 0]:  # 0: DummyVecEnv, max(ns) envs in this process
                vec, k = ("subproc", n) if n else ("dummy", max(ns))
                d = out / sim / (f"n{n}" if n else f"dummy-n{k}") / f"rep{rep}"
                steps = (256 if args.quick else STEPS_PER_ENV) * k
                cmd = [py, str(WORKLOAD), "--algo", "ppo", "--env", SIMULATORS[sim],
                       "--steps", str(steps), "--n-envs", str(k), "--vec", vec]
                stdout = earlier_run(d) if args.reanalyze else rls_prof(d, cmd)
                line = workload_line(stdout, "policy")
                if not n:
                    f = figures(d, workers=False)
                    inplace.setdefault(sim, []).append(f)
                    print(f"[{clock}] {sim} DummyVecEnv N={k} rep {rep}: "
                          f"{line['us_per_step']} us/step; vector steps "
                          f"{f.pct_of_sampling(f.step_s):.1f}% of sampling", flush=True)
                    continue
                f = figures(d)
                figs.setdefault((sim, n), []).append(f)
                dirs.setdefault((sim, n), []).append(d)
                print(f"[{clock}] {sim} N={n} rep {rep}: {line['us_per_step']} us/step; "
                      f"lock-step loss {f.pct_of_sampling(f.loss_s):.1f}% of sampling, "
                      f"IPC/scheduling {f.pct_of_sampling(f.ipc_s):.1f}%, "
                      + (f"straggler env {f.straggler}" if f.straggler is not None
                         else "no straggler")
                      + f" (largest share of the loss {100 * f.straggler_share:.0f}%), "
                      f"no barrier: {f.async_speedup:.2f}x"
                      + ("" if args.reanalyze else f"; load {os.getloadavg()[0]:.1f}"),
                      flush=True)

    report(sims, ns, figs)
    report_inplace(sims, max(ns), figs, inplace)
    for sim in sims:
        d = dirs[(sim, max(ns))][0]
        print(f"\n$ rls-analyze lockstep {_short(str(d))} --no-plot")
        print(rls_analyze("lockstep", str(d), "--no-plot"))
    result(sims, ns, figs)
    print(f"[{clock}] done; runs in {out}")


def figures(run_dir: Path, workers: bool = True) -> Figures:
    from rlscope.analysis import load_lockstep

    ls = load_lockstep(run_dir, correct=False)
    vs = [v for v in ls.vector_envs if v.workers == workers]
    if len(vs) != 1 or len(ls.tables) != 1:
        sys.exit(f"{run_dir}: expected one vector env {'in workers' if workers else 'in place'}"
                 f", found {[v.name for v in ls.vector_envs]}")
    v, t = vs[0], ls.tables[0]
    proj = v.projections
    nb = proj[proj["design"].str.startswith("asynchronous")]
    speedup = float(nb["sampling_speedup"].iloc[0]) if len(nb) else float("nan")
    return Figures(t.sampling_s, t.optimizing_s, v.step_s, v.env_mean_s, v.lockstep_loss_s,
                   v.overhead_s, v.straggler, v.straggler_share, speedup)


def report(sims: list[str], ns: list[int], figs: dict[tuple[str, int], list[Figures]]
           ) -> None:
    print("\nPer simulator and N (mean ± sd over the runs); % of the Sampling time:")
    head = ["simulator", "environment", "N", "sampling s", "step %", "env busy %",
            "lock-step loss %", "IPC/sched. %", "largest loss share %", "stragglers",
            "no barrier"]
    rows = []
    for sim in sims:
        for n in ns:
            f = figs[(sim, n)]
            rows.append([sim, SIMULATORS[sim], str(n), fmt([x.sampling_s for x in f], 1, 2),
                         fmt([x.pct_of_sampling(x.step_s) for x in f]),
                         fmt([x.pct_of_sampling(x.env_mean_s) for x in f]),
                         fmt([x.pct_of_sampling(x.loss_s) for x in f]),
                         fmt([x.pct_of_sampling(x.ipc_s) for x in f]),
                         fmt([100 * x.straggler_share for x in f], 1, 0),
                         f"{sum(x.straggler is not None for x in f)}/{len(f)}",
                         fmt([x.async_speedup for x in f], 1, 2) + "x"])
    w = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    print("  ".join(h.ljust(w[i]) for i, h in enumerate(head)))
    print("  ".join("-" * x for x in w))
    for r in rows:
        print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)))
    print("(vector step time = mean env busy + lock-step loss + IPC/scheduling; no barrier: "
          "the sampling speed-up projected for envs that each step at their own pace)")


def report_inplace(sims: list[str], n: int, figs: dict[tuple[str, int], list[Figures]],
                   inplace: dict[str, list[Figures]]) -> None:
    """The same N envs stepped one after another in the main process (DummyVecEnv): no
    barrier, no pipes; what the worker processes bought on this machine."""
    print(f"\nN={n}: SubprocVecEnv (workers, lock-step) vs DummyVecEnv (in place); seconds "
          "(mean ± sd over the runs):")
    head = ["simulator", "environment", "Subproc vector steps", "Dummy vector steps",
            "Subproc sampling", "Dummy sampling", "sampling ratio"]
    rows = []
    for sim in sims:
        sub, dum = figs[(sim, n)], inplace[sim]
        ratio = [a.sampling_s / b.sampling_s for a, b in zip(sub, dum, strict=False)]
        rows.append([sim, SIMULATORS[sim], fmt([x.step_s for x in sub], 1, 3),
                     fmt([x.step_s for x in dum], 1, 3), fmt([x.sampling_s for x in sub], 1, 3),
                     fmt([x.sampling_s for x in dum], 1, 3), fmt(ratio, 1, 2) + "x"])
    w = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    print("  ".join(h.ljust(w[i]) for i, h in enumerate(head)))
    print("  ".join("-" * x for x in w))
    for r in rows:
        print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)))
    print("(sampling ratio > 1: the worker processes made sampling slower than stepping the "
          "envs in place)")


def result(sims: list[str], ns: list[int], figs: dict[tuple[str, int], list[Figures]]
           ) -> None:
    parts = []
    for sim in sims:
        for n in ns:
            f = figs[(sim, n)]
            key = f"{sim.replace('-', '_')}_n{n}"
            parts.append(f"loss_pct_{key}="
                         f"{statistics.fmean(x.pct_of_sampling(x.loss_s) for x in f):.1f}")
            parts.append(f"ipc_pct_{key}="
                         f"{statistics.fmean(x.pct_of_sampling(x.ipc_s) for x in f):.1f}")
    print("RESULT " + " ".join(parts))


def _short(path: str) -> str:
    return path.replace(str(REPO) + "/", "")


if __name__ == "__main__":
    main()
