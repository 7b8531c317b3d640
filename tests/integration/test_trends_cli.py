"""``rls-analyze trends`` on a recorded loop whose simulation slows down over the run
(known by construction, measured by the loop itself): the calls and steps per interval add
up to the loop's own counts, the drift is named with the ratio the loop measured, the
metrics reported with progress come back, and the report carries the section."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

from tests.conftest import run_tool

WORKLOAD = textwrap.dedent("""
    import json, sys, time
    import rlscope

    n, sim, inf = 80, [], []
    for i in range(n):
        t = time.perf_counter()
        with rlscope.operation("simulation"):
            time.sleep(0.002 * (1 + 2 * i / n))  # 2 ms -> 6 ms
        t1 = time.perf_counter()
        with rlscope.operation("inference"):
            time.sleep(0.002)
        inf.append(time.perf_counter() - t1)
        sim.append(t1 - t)
        rlscope.report_progress((i + 1) * 4, n * 4, metrics={"reward": float(i)})
    json.dump({"simulation": sim, "inference": inf}, open(sys.argv[1], "w"))
""")


def test_trends_name_the_drift(tmp_path: Path, recorder: str) -> None:
    script = tmp_path / "slowing.py"
    script.write_text(WORKLOAD)
    out, truth = tmp_path / "run", tmp_path / "sim.json"
    r = run_tool("rls-prof", "-o", str(out), "-q", "--recorder", recorder, "--",
                 sys.executable, str(script), str(truth))
    assert r.returncode == 0, r.stderr

    js = run_tool("rls-analyze", "trends", str(out), "--format", "json", "--no-plot")
    assert js.returncode == 0, js.stderr
    t = json.loads(js.stdout)["trends"]
    assert len(t["intervals"]) == 79  # between the 80 reports
    assert sum(i["steps"] for i in t["intervals"]) == 79 * 4
    calls = sum(o["calls"] for o in t["operations"] if o["operation"] == "simulation")
    assert calls == 79  # the first one is before the first report
    assert [m["value"] for m in t["metrics"]] == [float(i) for i in range(80)]

    own = json.loads(truth.read_text())

    def ratio(x: list[float]) -> float:
        """The loop's own ratio over the same windows (first and last fifth)."""
        k = len(x) // 5
        return sorted(x[-k:])[k // 2] / sorted(x[1:k + 1])[k // 2]

    (d,) = [d for d in t["drifts"] if d["operation"] == "simulation"]
    assert abs(d["ratio"] / ratio(own["simulation"]) - 1) < 0.25, (d, own)
    assert d["text"].startswith("simulation per timestep grew ")
    # Inference sleeps a constant 2 ms: no drift, unless the machine's load made its
    # sleeps themselves drift (the loop's own timings say).
    if abs(ratio(own["inference"]) - 1) < 0.1:
        assert not any(d["operation"] == "inference" for d in t["drifts"]), t["drifts"]

    fig = run_tool("rls-analyze", "trends", str(out), "-o", str(tmp_path / "plots"))
    assert fig.returncode == 0, fig.stderr
    assert [p.suffix for p in sorted((tmp_path / "plots").glob("trends.*"))] == [".png",
                                                                                 ".svg"]

    txt = run_tool("rls-analyze", "report", str(out))
    assert txt.returncode == 0, txt.stderr
    assert "Trends over the run" in txt.stdout
    assert "Drift: simulation per timestep grew" in txt.stdout
