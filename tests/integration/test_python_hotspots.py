"""Python hotspots (docs/attribution.md#python-hotspots): rls-prof samples the Python
stacks of every process and thread; in an annotated loop where ``slow_helper`` takes most
of ``inference``, the JSON report names it under inference and not under simulation, the
sample shares follow the loop's own timing, a thread's and a forked Pool worker's
operations have their own helpers, and ``rls-analyze flame`` writes a valid speedscope
file and an SVG."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

from rlscope.trace.reader import read_process
from tests.conftest import run_tool
from tests.integration.test_multiprocess import WORKLOADS, settled

SCRIPT = WORKLOADS / "hot_helper.py"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, float]]:
    """One run of the workload (utilisation sampling off: not what this tests), and the
    loop's own time in each operation. Stacks at 200 Hz: at the default 50 Hz the main
    thread's ~1 s loop got 23 samples beside a suite, too few for the shares' check
    (one share's standard error ~0.1; read 0.48 against 0.69 once)."""
    import sys

    out = tmp_path_factory.mktemp("hotspots") / "run"
    r = run_tool("rls-prof", "-o", str(out), "-q", "--no-sample", "--sample-python", "200",
                 "--", sys.executable, str(SCRIPT), timeout=300)
    assert r.returncode == 0, r.stderr
    settled(out)
    return out, json.loads(r.stdout.strip().splitlines()[-1])


def test_the_sampler_thread_records_nothing(recorded: tuple[Path, dict[str, float]]
                                            ) -> None:
    """rlscope's own thread is not one of the process's: its sleeps are not waits."""
    out, _ = recorded
    for path in out.glob("python.*.rlscope"):
        t = read_process(path)
        named = {i: info.name for i, info in t.threads.items()}
        assert "rlscope-pysampler" not in named.values(), (path.name, named)
        assert set(np.unique(t.events.thread).tolist()) <= set(named), named


def _names(rows: list[dict]) -> set[str]:
    return {r["function"] for r in rows}


def test_hot_helper_named_under_its_operation(recorded: tuple[Path, dict[str, float]]
                                              ) -> None:
    out, spent = recorded
    assert sorted(p.name.split(".")[0] for p in out.glob("pystacks.*.rlstacks")) == \
        ["pystacks", "pystacks"]  # the main process and the Pool worker
    r = run_tool("rls-analyze", "report", str(out), "--format", "json")
    assert r.returncode == 0, r.stderr
    hot = json.loads(r.stdout)["python_hotspots"]
    ops = {o["operation"]: o for o in hot["operations"]}
    inf, sim = ops["inference"], ops["simulation"]

    top = inf["top_self"][0]
    assert top["function"] == "slow_helper" and top["share"] > 0.5, inf["top_self"]
    assert Path(top["file"]) == SCRIPT and top["line"] == 14  # def slow_helper
    assert "slow_helper" in _names(inf["top_total"])
    assert "slow_helper" not in _names(sim["top_self"]) | _names(sim["top_total"])
    assert "env_physics" in _names(sim["top_self"])
    assert "env_physics" not in _names(inf["top_self"]) | _names(inf["top_total"])

    # The main thread's samples split as the loop's own clock says (pure Python both).
    share = inf["samples"] / (inf["samples"] + sim["samples"])
    truth = spent["inference"] / (spent["inference"] + spent["simulation"])
    assert abs(share - truth) < 0.2, (share, truth, inf["samples"], sim["samples"])

    # A thread's operation and a forked Pool worker's, with their own helpers.
    assert "bg_helper" in _names(ops["bg_op"]["top_total"])
    worker = [o for name, o in ops.items() if name.endswith("worker_op")]
    assert len(worker) == 1 and "worker_helper" in _names(worker[0]["top_total"])
    assert "bg_helper" not in _names(inf["top_total"])


def test_flame_files(recorded: tuple[Path, dict[str, float]], tmp_path: Path) -> None:
    out = recorded[0]
    flames = tmp_path / "flame"
    r = run_tool("rls-analyze", "flame", str(out), "--operation", "inference", "-o",
                 str(flames))
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in flames.iterdir()) == ["inference.speedscope.json",
                                                        "inference.svg"]
    doc = json.loads((flames / "inference.speedscope.json").read_text())
    # The speedscope file format (https://www.speedscope.app/file-format-schema.json).
    assert doc["$schema"] == "https://www.speedscope.app/file-format-schema.json"
    frames = doc["shared"]["frames"]
    assert all(isinstance(f["name"], str) for f in frames)
    (prof,) = doc["profiles"]
    assert prof["type"] == "sampled" and prof["unit"] == "none"
    assert len(prof["samples"]) == len(prof["weights"]) > 0
    assert all(0 <= i < len(frames) for st in prof["samples"] for i in st)
    assert prof["endValue"] - prof["startValue"] == sum(prof["weights"])
    assert any(f["name"] == "slow_helper" and f["line"] == 14 for f in frames)
    svg = ET.parse(flames / "inference.svg").getroot()
    assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    assert any("slow_helper" in (t.text or "")
               for t in svg.iter("{http://www.w3.org/2000/svg}title"))

    r = run_tool("rls-analyze", "flame", str(out), "--operation", "nope")
    assert r.returncode == 2 and "sampled operations: " in r.stderr
    assert "Traceback" not in r.stderr


def test_timeline_carries_the_samples(recorded: tuple[Path, dict[str, float]],
                                      tmp_path: Path) -> None:
    """``--tracks python``: a flame chart per sampled thread; each run of samples starts
    at a sample taken in that function, so the helpers' runs start inside the operation
    that called them (the operations' track of the same export says where those are)."""
    out = recorded[0]
    tl = tmp_path / "tl.json"
    r = run_tool("rls-analyze", "timeline", str(out), "-o", str(tl), "--tracks",
                 "operations,python")
    assert r.returncode == 0, r.stderr
    events = json.loads(tl.read_text())["traceEvents"]
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
             if e.get("ph") == "M" and e["name"] == "thread_name"}
    slices = [e for e in events if e.get("ph") == "X"]

    def on(track: str, prefix: str) -> list[dict]:
        return [e for e in slices if names[(e["pid"], e["tid"])] == track
                and e["name"].startswith(prefix)]

    pids = {e["pid"] for e in on("MainThread: operations", "inference")}
    assert len(pids) == 1  # the main process's main thread

    def starts_inside(fn: str, op: str) -> tuple[int, int]:
        ops = [(e["ts"], e["ts"] + e["dur"]) for e in on("MainThread: operations", op)
               if e["pid"] in pids]
        runs = [e["ts"] for e in on("MainThread: Python samples", fn) if e["pid"] in pids]
        return sum(any(a <= s <= b for a, b in ops) for s in runs), len(runs)

    inside, n = starts_inside("slow_helper (hot_helper.py:14)", "inference")
    assert n > 0 and inside == n
    inside, n = starts_inside("env_physics", "simulation")
    assert n > 0 and inside == n
    assert starts_inside("slow_helper", "simulation")[0] == 0
    # The thread's own track, and the frames above the helper nest over it.
    assert any(v == "Thread-1 (background): Python samples" for v in names.values())
    main_runs = on("MainThread: Python samples", "")
    top = [e for e in main_runs if e["name"].startswith("main (hot_helper.py")]
    helper = on("MainThread: Python samples", "slow_helper")
    assert all(any(t["ts"] <= h["ts"] and h["ts"] + h["dur"] <= t["ts"] + t["dur"]
                   for t in top) for h in helper)
