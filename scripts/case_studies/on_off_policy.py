"""Case study (a): how simulation-bound on-policy and off-policy algorithms are, per
simulator: stable-baselines3 PPO and A2C (on-policy) against SAC and TD3 (off-policy),
and DQN where the action space is discrete, each trained from scratch under rls-prof.

    python3 scripts/case_studies/on_off_policy.py            # full study (~40 min here)
    python3 scripts/case_studies/on_off_policy.py --quick    # smoke run (tiny sizes)

Installs what it needs (scripts/setup.sh sb3,mujoco,box2d,plot) when the project's .venv
lacks it. Per simulator and algorithm ``--reps`` profiled runs of ``--steps`` environment
steps (SB3's default hyperparameters, one thread), algorithms rotated in every round;
rlscope's overhead is removed with one calibration per algorithm, measured by chunks on
its classic-control run and reused on every simulator. Prints per run the share of the
training phase spent in simulation (and in inference and backprop), per simulator the
on-policy / off-policy ratio of those shares (mean ± standard deviation over the rounds),
the ``rls-analyze compare`` tables, writes the plots, and ends with a ``RESULT`` line.
The workload: scripts/case_studies/policy/workload.py.
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
    describe_calibration,
    earlier_run,
    ensure_environment,
    fmt,
    rls_analyze,
    rls_prof,
    workload_line,
)

ON_POLICY = ("ppo", "a2c")
OFF_POLICY = ("sac", "td3", "dqn")
# simulator -> (environment, algorithms whose action space fits it)
SIMULATORS: dict[str, tuple[str, tuple[str, ...]]] = {
    "classic": ("Pendulum-v1", ("ppo", "a2c", "sac", "td3")),
    "classic-discrete": ("CartPole-v1", ("ppo", "a2c", "dqn")),
    "mujoco": ("HalfCheetah-v5", ("ppo", "a2c", "sac", "td3")),
    "box2d": ("LunarLanderContinuous-v3", ("ppo", "a2c", "sac", "td3")),
}
CALIBRATION_ENV = {"dqn": "CartPole-v1"}  # the others: Pendulum-v1
WORKLOAD = Path("scripts/case_studies/policy/workload.py")
OPS = ("simulation", "inference", "backprop")


@dataclass
class Shares:
    """One run's training phase: wall seconds and each operation's share of it (%)."""

    wall_s: float
    share: dict[str, float]  # operation (and "other") -> % of the phase
    simulator_pct: float  # of the simulation operation's time, inside the simulator


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=4096, help="environment steps per run")
    ap.add_argument("--reps", type=int, default=3, help="runs per simulator and algorithm")
    ap.add_argument("--calibration-steps", type=int, default=4096,
                    help="steps of each algorithm's calibrating run (chunks)")
    ap.add_argument("--simulators", default=",".join(SIMULATORS))
    ap.add_argument("--out", type=Path, default=REPO / "runs/case-studies/on-off-policy")
    ap.add_argument("--img", type=Path, default=REPO / "docs/case-studies/img",
                    help="directory of the plots")
    ap.add_argument("--quick", action="store_true",
                    help="smoke run: 300 steps, one run each, short calibrations")
    ap.add_argument("--reanalyze", action="store_true",
                    help="run nothing: analyse the runs an earlier invocation left in --out")
    ap.add_argument("--no-setup", action="store_true", help="never run scripts/setup.sh")
    args = ap.parse_args()
    sims = [s.strip() for s in args.simulators.split(",") if s.strip()]
    bad = [s for s in sims if s not in SIMULATORS]
    if bad or not sims:
        ap.error(f"--simulators: unknown {bad}; choose from {', '.join(SIMULATORS)}")
    if args.quick:
        args.steps, args.reps, args.calibration_steps = 300, 1, 400
    mods = ["stable_baselines3", "gymnasium", "matplotlib"]
    mods += ["mujoco"] if "mujoco" in sims else []
    mods += ["Box2D"] if "box2d" in sims else []
    ensure_environment("sb3,mujoco,box2d,plot", mods, setup=not args.no_setup)
    clock = Clock()
    out: Path = args.out.resolve()
    py = sys.executable

    def command(algo: str, env: str, steps: int) -> list[str]:
        return [py, str(WORKLOAD), "--algo", algo, "--env", env, "--steps", str(steps)]

    algos = sorted({a for s in sims for a in SIMULATORS[s][1]})
    cal: dict[str, Path] = {}
    for algo in algos:
        d = out / "calibration" / algo
        cal[algo] = d / "calibration.json"
        if not args.reanalyze:
            env = CALIBRATION_ENV.get(algo, "Pendulum-v1")
            print(f"[{clock}] calibrating {algo} on {env} ({args.calibration_steps} steps)",
                  flush=True)
            rls_prof(d, command(algo, env, args.calibration_steps),
                     calibrate=["--chunks", "6", "--chunk-seconds", "0.05"] if args.quick
                     else ["--chunks", "24"])
        print(f"[{clock}] {algo}: {_short(describe_calibration(cal[algo]))}", flush=True)

    shares: dict[tuple[str, str], list[Shares]] = {}
    dirs: dict[tuple[str, str], list[Path]] = {}
    for rep in range(args.reps):
        for sim in sims:
            env, sim_algos = SIMULATORS[sim]
            order = sim_algos[rep % len(sim_algos):] + sim_algos[:rep % len(sim_algos)]
            for algo in order:
                d = out / sim / algo / f"rep{rep}"
                stdout = earlier_run(d) if args.reanalyze else \
                    rls_prof(d, command(algo, env, args.steps), calibration=cal[algo])
                line = workload_line(stdout, "policy")
                s = run_shares(d)
                shares.setdefault((sim, algo), []).append(s)
                dirs.setdefault((sim, algo), []).append(d)
                print(f"[{clock}] {sim} {algo} rep {rep}: {line['us_per_step']} us/step "
                      f"(its own clock, profiled); simulation {s.share['simulation']:.1f}%, "
                      f"inference {s.share['inference']:.1f}%, backprop "
                      f"{s.share['backprop']:.1f}% of the training phase"
                      + ("" if args.reanalyze else f"; load {os.getloadavg()[0]:.1f}"),
                      flush=True)

    report(sims, shares)
    args.img.mkdir(parents=True, exist_ok=True)
    for sim in sims:
        sim_algos = SIMULATORS[sim][1]
        runs = [",".join(str(d) for d in dirs[(sim, a)]) for a in sim_algos]
        names = [x for a in sim_algos for x in ("--name", a)]
        plot = args.img / f"on-off-policy-{sim}.png"
        table = rls_analyze("compare", *runs, *names, "--per-timestep", "--phase", "training",
                            "--plot", str(plot))
        (out / f"compare-{sim}.txt").write_text(table)
        print(f"\n$ rls-analyze compare <{sim} runs> " + " ".join(names)
              + f" --per-timestep --phase training --plot {_short(str(plot))}")
        print(table)
    share_plot(sims, shares, args.img / "on-off-policy-share.png")
    result(sims, shares)
    print(f"[{clock}] done; runs in {out}")


def run_shares(run_dir: Path) -> Shares:
    """The training phase of the run's main process, overhead-corrected when the run
    directory holds a calibration."""
    import rlscope.analysis

    df = rlscope.analysis.load(run_dir).operations()
    df = df[df["phase"] == "training"]
    wall = float(df["self_s"].sum())  # self times in the phase add up to its wall time
    if wall <= 0:
        sys.exit(f"{run_dir}: no training phase recorded")
    by_op = df.groupby("operation")[["self_s", "simulator_s"]].sum()
    share = {op: 100.0 * float(by_op["self_s"].get(op, 0.0)) / wall for op in OPS}
    share["other"] = 100.0 - sum(share.values())
    sim_s = float(by_op["self_s"].get("simulation", 0.0))
    inside = float(by_op["simulator_s"].get("simulation", 0.0))
    return Shares(wall, share, 100.0 * inside / sim_s if sim_s > 0 else float("nan"))


def ratios(sim: str, shares: dict[tuple[str, str], list[Shares]]) -> list[float]:
    """Per round: the mean simulation share of the on-policy algorithms over that of the
    off-policy ones."""
    sim_algos = SIMULATORS[sim][1]
    on = [a for a in sim_algos if a in ON_POLICY]
    off = [a for a in sim_algos if a in OFF_POLICY]
    n = min(len(shares[(sim, a)]) for a in sim_algos)
    out = []
    for r in range(n):
        num = statistics.fmean(shares[(sim, a)][r].share["simulation"] for a in on)
        den = statistics.fmean(shares[(sim, a)][r].share["simulation"] for a in off)
        out.append(num / den if den > 0 else float("inf"))
    return out


def report(sims: list[str], shares: dict[tuple[str, str], list[Shares]]) -> None:
    print("\nShare of the training phase (%; mean ± sd over the runs), overhead-corrected:")
    head = ["simulator", "environment", "algorithm", "policy", "simulation", "inference",
            "backprop", "other", "in simulator", "training s"]
    rows = []
    for sim in sims:
        env, sim_algos = SIMULATORS[sim]
        for a in sim_algos:
            s = shares[(sim, a)]
            rows.append([sim, env, a, "on" if a in ON_POLICY else "off",
                         *(fmt([x.share[k] for x in s]) for k in (*OPS, "other")),
                         fmt([x.simulator_pct for x in s]), fmt([x.wall_s for x in s])])
    _table(head, rows)
    print("(in simulator: % of the simulation operation spent inside the simulator's "
          "native calls; the rest is Python in the environment and SB3's VecEnv)")
    print("\nOn-policy / off-policy simulation share, per round (mean ± sd):")
    _table(["simulator", "on-policy", "off-policy", "ratio", "per round"],
           [[sim, ",".join(a for a in SIMULATORS[sim][1] if a in ON_POLICY),
             ",".join(a for a in SIMULATORS[sim][1] if a in OFF_POLICY),
             fmt(ratios(sim, shares)), " ".join(f"{x:.1f}" for x in ratios(sim, shares))]
            for sim in sims])


def _table(head: list[str], rows: list[list[str]]) -> None:
    w = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    print("  ".join(h.ljust(w[i]) for i, h in enumerate(head)))
    print("  ".join("-" * x for x in w))
    for r in rows:
        print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)))


def share_plot(sims: list[str], shares: dict[tuple[str, str], list[Shares]], path: Path
               ) -> None:
    """Simulation share per simulator and algorithm: bars at the mean, the runs as dots;
    on-policy filled, off-policy hatched (Okabe-Ito colours)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    colours = {"ppo": "#0072B2", "a2c": "#56B4E9", "sac": "#D55E00", "td3": "#E69F00",
               "dqn": "#CC79A7"}
    fig, ax = plt.subplots(figsize=(8, 3.8), dpi=120)
    x = 0.0
    ticks, labels = [], []
    seen: set[str] = set()
    for sim in sims:
        env, sim_algos = SIMULATORS[sim]
        start = x
        for a in sim_algos:
            v = [s.share["simulation"] for s in shares[(sim, a)]]
            ax.bar(x, statistics.fmean(v), 0.8, color=colours[a],
                   hatch="" if a in ON_POLICY else "//", edgecolor="black", linewidth=0.5,
                   label=None if a in seen else
                   f"{a.upper()} ({'on' if a in ON_POLICY else 'off'}-policy)")
            ax.plot([x] * len(v), v, "k.", markersize=4)
            seen.add(a)
            x += 1
        ticks.append((start + x - 1) / 2)
        labels.append(f"{sim}\n{env}")
        x += 0.8
    ax.set_xticks(ticks, labels, fontsize=8)
    ax.set_ylabel("simulation, % of training time")
    ax.set_title("Share of training spent in simulation (bars: mean; dots: runs)",
                 fontsize=10)
    ax.legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.22),
              frameon=False)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    print(f"plot: {_short(str(path))}")


def result(sims: list[str], shares: dict[tuple[str, str], list[Shares]]) -> None:
    parts = []
    for sim in sims:
        r = ratios(sim, shares)
        parts.append(f"ratio_{sim.replace('-', '_')}={statistics.fmean(r):.2f}")
        for a in SIMULATORS[sim][1]:
            m = statistics.fmean(s.share["simulation"] for s in shares[(sim, a)])
            parts.append(f"sim_pct_{sim.replace('-', '_')}_{a}={m:.1f}")
    print("RESULT " + " ".join(parts))


def _short(path: str) -> str:
    return path.replace(str(REPO) + "/", "")


if __name__ == "__main__":
    main()
