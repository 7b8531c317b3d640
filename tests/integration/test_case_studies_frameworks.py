"""The case studies (scripts/case_studies/dqn_frameworks.py, vector_cartpole.py,
on_off_policy.py) end to end with --quick: every workload runs under rls-prof with a
calibration, the compare tables come out, and the transitions per step are what the code
makes."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

pytestmark = pytest.mark.slow
pytest.importorskip("torch")
pytest.importorskip("matplotlib")


def _have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


# A bound for a stuck run, not a speed check: on_off_policy takes ~4 min quiet and over
# 10 min on two cores shared with two busy loops and another test run.
TIMEOUT_S = 1800


def _run(script: str, *args: str) -> str:
    r = subprocess.run([sys.executable, str(REPO / "scripts" / "case_studies" / script),
                        "--quick", "--no-setup", *args], capture_output=True, text=True,
                       timeout=TIMEOUT_S, cwd=REPO)
    if r.returncode != 0:  # whole lines: an assertion's repr elides the middle
        pytest.fail(f"{script} exited with status {r.returncode}\n--- stdout (end)\n"
                    f"{r.stdout[-3000:]}\n--- stderr (end)\n{r.stderr[-3000:]}",
                    pytrace=False)
    return r.stdout


def _result(stdout: str, prefix: str = "RESULT ") -> dict[str, str]:
    out: dict[str, str] = {}
    for line in stdout.splitlines():
        if line.startswith(prefix):
            out.update(re.findall(r"(\S+)=(\S+)", line))
    return out


def test_dqn_frameworks_quick(tmp_path: Path):
    pytest.importorskip("gymnasium")
    fws = ["torch"] + (["tf-function"] if _have("tensorflow") else []) \
        + (["jax"] if _have("jax") else [])
    out = _run("dqn_frameworks.py", "--frameworks", ",".join(fws), "--out",
               str(tmp_path / "runs"), "--plot", str(tmp_path / "compare.png"))
    res = _result(out)
    for fw in fws:
        assert float(res[f"{fw.replace('-', '_')}_us_per_step"]) > 0
    # Eager PyTorch: every tensor operation is a transition (dozens per step).
    assert float(res["torch_transitions_per_step"]) > 50
    if "jax" in fws:  # one jitted act and one jitted update per step
        assert float(res["jax_transitions_per_step"]) == 2.0
    if "tf-function" in fws:  # each tf.function call executes its graph once
        line = next(ln for ln in out.splitlines() if ln.startswith("  tf-function"))
        assert "TFE_Py_Execute 2.0/step" in line
    # --phase training: the compare table has the step's operations, not the set-up.
    table = out.split("$ rls-analyze compare", 1)[1]
    for op in ("inference", "simulation", "replay", "backprop"):
        assert re.search(rf"^{op}\s", table, re.M), op
    assert not re.search(r"^setup", table, re.M)
    assert (tmp_path / "compare.png").stat().st_size > 1000
    assert (tmp_path / "runs" / "calibration" / "calibration.json").exists()
    assert (tmp_path / "runs" / "torch" / "rep0" / "calibration.json").exists()


def test_vector_cartpole_quick(tmp_path: Path):
    pytest.importorskip("jax")
    out = _run("vector_cartpole.py", "--out", str(tmp_path / "runs"), "--img",
               str(tmp_path / "img"))
    per_impl = {ln.split()[1].split("=")[1]: dict(re.findall(r"(\S+)=(\S+)", ln))
                for ln in out.splitlines() if ln.startswith("RESULT impl=")}
    # torch: one call per tensor operation of the step; jax: one jitted call per step;
    # jax-fused (k=4 when quick): one call per 4 steps.
    assert float(per_impl["torch"]["transitions_per_step"]) > 30
    assert float(per_impl["jax"]["transitions_per_step"]) == 1.0
    assert float(per_impl["jax-fused"]["transitions_per_step"]) == 0.25
    for impl in per_impl.values():
        assert float(impl["n1_ns_per_env_step"]) > 0 and float(impl["n64_ns_per_env_step"]) > 0
    assert "--phase simulating --by category" in out and "Backend" in out
    for name in ("vector-cartpole-sweep.png", "vector-cartpole-compare.png"):
        assert (tmp_path / "img" / name).stat().st_size > 1000


def test_on_off_policy_quick(tmp_path: Path):
    pytest.importorskip("stable_baselines3")
    # One simulator (four algorithms, each with a calibration) keeps this the suite's
    # heaviest test at ~5 min on two loaded cores; the case study's own runs cover the rest.
    out = _run("on_off_policy.py", "--simulators", "classic", "--out",
               str(tmp_path / "runs"), "--img", str(tmp_path / "img"))
    res = _result(out)
    shares = {k: float(v) for k, v in res.items() if k.startswith("sim_pct_")}
    assert set(shares) == {"sim_pct_classic_ppo", "sim_pct_classic_a2c", "sim_pct_classic_sac",
                           "sim_pct_classic_td3"}
    assert all(0 < v < 100 for v in shares.values()), shares
    # SAC and TD3 take a gradient step per environment step, PPO and A2C far fewer: the
    # ratio is large even in a 300-step run (7x here).
    assert float(res["ratio_classic"]) > 2
    # Every run's operations come from rls-prof's sb3 integration (the workload has none).
    table = out.split("$ rls-analyze compare <classic runs>", 1)[1]
    for op in ("simulation", "inference", "backprop"):
        assert re.search(rf"^{op}\s", table, re.M), op
    for algo in ("ppo", "a2c", "sac", "td3"):
        assert (tmp_path / "runs" / "calibration" / algo / "calibration.json").exists()
    for name in ("on-off-policy-share.png", "on-off-policy-classic.png"):
        assert (tmp_path / "img" / name).stat().st_size > 1000


def test_lockstep_envs_quick(tmp_path: Path):
    pytest.importorskip("stable_baselines3")
    out = _run("lockstep_envs.py", "--out", str(tmp_path / "runs"))
    res = _result(out)
    loss, ipc = float(res["loss_pct_classic_n2"]), float(res["ipc_pct_classic_n2"])
    assert 0 <= loss < 100 and 0 < ipc < 100 and loss + ipc < 100
    # The lock-step report of the run, as rls-analyze prints it.
    assert "SubprocVecEnv#1: 2 envs in worker processes" in out
    assert "Lock-step loss:" in out
    assert "Straggler: env " in out or "No straggler: the largest share" in out
