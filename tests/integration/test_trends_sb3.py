"""Trends of an unmodified SB3 script (no rlscope code in it): the sb3 integration reports
progress and SB3's own episode metrics (ep_rew_mean, ep_len_mean, as its logger computes
them), so ``rls-analyze trends`` shows them next to the operations' time per timestep."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import run_tool

pytest.importorskip("stable_baselines3")

SCRIPT = textwrap.dedent("""
    import sys, time, torch
    from stable_baselines3 import PPO


    torch.set_num_threads(1)
    model = PPO("MlpPolicy", "CartPole-v1", n_steps=128, batch_size=64, n_epochs=1, seed=0)
    model.learn(total_timesteps=int(sys.argv[1]))
""")


def test_sb3_metrics_in_trends(tmp_path: Path) -> None:
    script, out = tmp_path / "ppo.py", tmp_path / "run"
    script.write_text(SCRIPT)
    r = run_tool("rls-prof", "-o", str(out), "-q", "--", sys.executable, str(script),
                 "2048", timeout=600)
    assert r.returncode == 0, r.stderr
    js = run_tool("rls-analyze", "trends", str(out), "--format", "json", "--no-plot",
                  timeout=300)
    assert js.returncode == 0, js.stderr
    t = json.loads(js.stdout)["trends"]
    assert {o["operation"] for o in t["operations"]} >= {"simulation", "inference",
                                                        "backprop"}
    names = {m["name"] for m in t["metrics"]}
    assert names == {"ep_rew_mean", "ep_len_mean"}, t["metrics"][:5]
    rew = [m for m in t["metrics"] if m["name"] == "ep_rew_mean"]
    # CartPole returns 1 per step: the mean return is the mean length, 8 to 500.
    lens = {m["timesteps"]: m["value"] for m in t["metrics"] if m["name"] == "ep_len_mean"}
    assert all(8 <= m["value"] <= 500 and m["value"] == lens[m["timesteps"]] for m in rew)
    assert [m["timesteps"] for m in rew] == sorted(m["timesteps"] for m in rew)
    text = run_tool("rls-analyze", "trends", str(out), "--no-plot")
    assert "ep_rew_mean=" in text.stdout
