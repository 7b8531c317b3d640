"""The run-level diagnosis on a real workload: SB3 PPO on CartPole with SubprocVecEnv(4)
under rls-prof (IPC/scheduling, oversubscription on few cores: the first verdict names
them, with DummyVecEnv or fewer workers and a bound; one start-up entry; no "vectorise"
for the vector env's step), and the same with DummyVecEnv (no IPC verdict)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import run_tool

pytest.importorskip("stable_baselines3")
WORKLOAD = str(Path(__file__).parent / "workloads" / "sb3_vec_cls.py")


def report(tmp_path: Path, cls: str) -> tuple[dict[str, Any], str]:
    out = tmp_path / cls
    r = run_tool("rls-prof", "-o", str(out), "-q", "--", sys.executable, WORKLOAD, cls, "4",
                 "512", timeout=300)
    assert r.returncode == 0, r.stderr
    j = run_tool("rls-analyze", "report", "--format", "json", str(out))
    assert j.returncode == 0, j.stderr
    t = run_tool("rls-analyze", "report", str(out))
    assert t.returncode == 0, t.stderr
    return json.loads(j.stdout), t.stdout


def check_common(d: dict[str, Any], text: str) -> None:
    run = d["run_diagnosis"]
    assert sum(r["kind"] == "start-up" for r in run) <= 1, run
    assert not [v for v in d["diagnosis"] if v["operation"] == "(start-up)"]
    assert not [v for v in d["diagnosis"] if v["operation"] == "simulation"
                and "vectorise across envs" in v["remedy"]]
    assert "bound by start-up" not in text
    if run:  # the run-level verdicts open the section
        after = text.split("What limits this run", 1)[1].splitlines()
        assert after[1].startswith("  1. ")


def test_subproc_vec_env_is_ipc_or_oversubscription_bound(tmp_path: Path):
    d, text = report(tmp_path, "subproc")
    check_common(d, text)
    first = d["run_diagnosis"][0]
    assert first["kind"] in ("ipc", "oversubscription"), d["run_diagnosis"]
    assert "IPC" in first["verdict"] or "oversubscribed" in first["verdict"]
    assert "DummyVecEnv" in first["remedy"] or "fewer worker processes" in first["remedy"]
    assert first["bound_s"] > 0 and 0 < first["bound_share"] <= 1
    assert first["evidence"]
    # The critical path: the main process waited on the envs' steps and on IPC.
    parts = {r["part"]: r for r in d["critical_path"]}
    assert sum(r["share"] for r in parts.values()) == pytest.approx(1.0, abs=0.01)
    ipc_part = parts["SubprocVecEnv#1: IPC and scheduling"]
    assert ipc_part["seconds"] > parts["SubprocVecEnv#1: the slowest env's step"]["seconds"]
    ipc = [r for r in d["run_diagnosis"] if r["kind"] == "ipc"]
    assert ipc and "lock-step table: IPC/scheduling" in ipc[0]["evidence"][0]
    assert "DummyVecEnv instead of SubprocVecEnv" in ipc[0]["remedy"]


def test_dummy_vec_env_gets_no_ipc_verdict(tmp_path: Path):
    d, text = report(tmp_path, "dummy")
    check_common(d, text)
    assert not [r for r in d["run_diagnosis"] if r["kind"] in ("ipc", "oversubscription")]
