"""The actor/learner verdict's remedy, checked: for a sampler-bound and a learner-bound
RLlib PPO job (scripts/bench/workloads/rllib_remedy.py), profile the job under rls-prof,
take the first actor/learner verdict of ``rls-analyze report --format json``
(run_diagnosis, kind ``actors-*``), apply its remedy (the env runner or learner count it
names) and measure the gain it predicted against the one measured.

    python scripts/bench/remedy_actors.py [--python PY] [--workloads sampler,learner]
        [--iterations 4] [--rounds 5] [--keep DIR]

PY: an interpreter with ray[rllib] (default: $RLSCOPE_RLLIB_PYTHON, else .venv-rllib's).
The measured gain: both configurations built in one plain (unprofiled) Ray session, one
warm-up iteration each, then ``--rounds`` rounds of one iteration of each, order
alternating; gain = median base iteration / median remedied iteration (spread: min-max
of the per-round ratios). ``run()`` returns the rows for a caller (scripts/bench/
remedy.py). Predicted: the verdict's bound with every core the run's; free cores: its
gain on the cores other processes left the run (given when the machine was shared; the
same as predicted otherwise); in range: measured between the two. The load column: the
machine's 1-minute load average around the profiled run / the plain runs (mean of before
and after; the runs share the machine). Last line:

    RESULT sampler_predicted=<x> sampler_measured=<x> learner_predicted=<x> ...
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
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
WORKLOAD = ROOT / "scripts" / "bench" / "workloads" / "rllib_remedy.py"
BASE = {"sampler": (1, 0), "learner": (1, 0)}  # (env runners, learners) profiled


def _bin(name: str) -> str:
    return str(Path(sys.executable).with_name(name))


def _python(arg: str | None) -> str:
    py = arg or os.environ.get("RLSCOPE_RLLIB_PYTHON") or str(ROOT / ".venv-rllib/bin/python")
    if not Path(py).exists():
        raise SystemExit(f"no interpreter with ray[rllib] at {py}: make one with "
                         "RLSCOPE_VENV=.venv-rllib scripts/setup.sh rllib, or pass --python")
    return py


def _load() -> float:
    """The machine's 1-minute load average (the other processes the runs share it with)."""
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return float("nan")


def _check(r: subprocess.CompletedProcess[str], what: str) -> None:
    if r.returncode:
        raise SystemExit(f"{what} failed ({r.returncode}):\n{r.stderr[-3000:]}")


def verdict(directory: Path) -> dict[str, Any]:
    """The report's first actor/learner verdict with its predicted gain and the remedy's
    configuration, and the kind of the report's first run-level verdict."""
    r = subprocess.run([_bin("rls-analyze"), "report", str(directory), "--format", "json"],
                       capture_output=True, text=True, timeout=900)
    _check(r, "rls-analyze report")
    rd = json.loads(r.stdout).get("run_diagnosis", [])
    actors = [v for v in rd if str(v["kind"]).startswith("actors-")]
    if not actors:
        raise SystemExit(f"{directory}: no actor/learner verdict; run_diagnosis: "
                         f"{[v['kind'] for v in rd]}")
    v = actors[0]
    m = re.search(r"(\S+) -> (\d+) (env runners|learners) bounds the gain at ([\d.]+)x"
                  r"(?: \(([\d.]+)x on the)?", str(v["verdict"]))
    if m is None:
        raise SystemExit(f"{directory}: the verdict names no count to scale: {v['verdict']}")
    return {"kind": v["kind"], "verdict": v["verdict"], "first": rd[0]["kind"],
            "scale": m.group(3), "to": int(m.group(2)), "predicted": float(m.group(4)),
            "predicted_free": float(m.group(5) or m.group(4))}


def run(python: str, workload: str, iterations: int, rounds: int,
        keep: Path | None = None) -> dict[str, Any]:
    """One workload: profiled, its verdict, the remedy measured. ``keep``: keep the
    profiled run and the times in ``keep/<workload>/`` (a run already there is analysed
    again, not recorded again)."""
    runners, learners = BASE[workload]
    with tempfile.TemporaryDirectory(prefix=f"remedy-{workload}-") as tmp:
        where = (keep / workload) if keep is not None else Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        d = where / "run"
        loads = {"profile": _load(), "measure": float("nan")}
        if not (d / "run.json").exists() or not list(d.glob("python.*")):
            r = subprocess.run([_bin("rls-prof"), "-o", str(d), "-q", "--force", "--",
                                python, str(WORKLOAD), "profile", workload, str(runners),
                                str(learners), str(iterations)],
                               capture_output=True, text=True, timeout=1200)
            _check(r, f"rls-prof ({workload})")
            loads["profile"] = (loads["profile"] + _load()) / 2
        v = verdict(d)
        to = int(v["to"])
        r1, l1 = (to, learners) if v["scale"] == "env runners" else (runners, to)
        out = where / f"times-{r1}-{l1}.json"
        if not out.exists():
            loads["measure"] = _load()
            r = subprocess.run([python, str(WORKLOAD), "measure", workload, str(runners),
                                str(learners), str(r1), str(l1), str(rounds), str(out)],
                               capture_output=True, text=True, timeout=1200)
            _check(r, f"the plain runs ({workload})")
            loads["measure"] = (loads["measure"] + _load()) / 2
        times = json.loads(out.read_text())
    base, rem = times["base"], times["remedy"]
    ratios = [b / x for b, x in zip(base, rem, strict=True)]
    measured = statistics.median(base) / statistics.median(rem)
    predicted, low = float(v["predicted"]), float(v["predicted_free"])
    return {"workload": workload, "base": f"{runners} runners, {learners} learners",
            "remedy": f"{r1} runners, {l1} learners", "first_verdict": v["first"],
            "kind": v["kind"], "predicted": predicted, "predicted_free": low,
            "measured": measured, "in_range": low * 0.999 <= measured <= predicted * 1.001,
            "spread": (min(ratios), max(ratios)), "base_s": statistics.median(base),
            "remedy_s": statistics.median(rem), "verdict": v["verdict"],
            "error": predicted / measured - 1, "load": loads}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--python", default=None)
    ap.add_argument("--workloads", default="sampler,learner")
    ap.add_argument("--iterations", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--keep", type=Path, default=None,
                    help="keep the profiled runs and times here (reused when present)")
    a = ap.parse_args()
    py = _python(a.python)
    rows = [run(py, w, a.iterations, a.rounds, a.keep) for w in a.workloads.split(",")]
    print(f"{'workload':9} {'first verdict':17} {'actor verdict':16} {'remedy':22} "
          f"{'iter s base':>11} {'remedied':>9} {'predicted':>9} {'free cores':>10} "
          f"{'measured':>9} {'spread':>11} {'error':>6} {'in range':>8} {'load':>9}")
    for r in rows:
        lo, hi = r["spread"]
        print(f"{r['workload']:9} {r['first_verdict']:17} {r['kind']:16} "
              f"{r['base']} -> {r['remedy']}  {r['base_s']:11.3f} {r['remedy_s']:9.3f} "
              f"{r['predicted']:8.2f}x {r['predicted_free']:9.2f}x "
              f"{r['measured']:8.2f}x {lo:5.2f}-{hi:4.2f}x "
              f"{100 * r['error']:+5.0f}% {'yes' if r['in_range'] else 'no':>8} "
              f"{r['load']['profile']:4.1f}/"
              f"{r['load']['measure']:<4.1f}")
        print(f"  verdict: {r['verdict']}")
    print("RESULT " + " ".join(f"{r['workload']}_predicted={r['predicted']:.2f} "
                               f"{r['workload']}_predicted_free={r['predicted_free']:.2f} "
                               f"{r['workload']}_measured={r['measured']:.2f}"
                               for r in rows))


if __name__ == "__main__":
    main()
