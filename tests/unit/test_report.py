"""Reports and plots from a synthetic analysis with GPU work."""

from __future__ import annotations

import json
from pathlib import Path

from rlscope.analysis import analyze
from rlscope.analysis.engine.synthetic import process_trace
from rlscope.reporters import plots, table
from rlscope.trace import format as fmt
from rlscope.trace import gpu as G
from rlscope.trace.data import Trace

OB, OE = fmt.OPERATION_BEGIN, fmt.OPERATION_END
# As in test_overlap: nested CPU operations; and GPU work crossing operation boundaries.
NESTED = [(0, 0, fmt.PROCESS_START, ""), (10, 0, OB, "a"),
          (20, 0, fmt.BACKEND_CALL_BEGIN, "torch.mm"), (30, 0, fmt.BACKEND_CALL_END, "torch.mm"),
          (40, 0, OB, "b"), (50, 0, fmt.SIMULATOR_CALL_BEGIN, "mujoco.step"),
          (70, 0, fmt.SIMULATOR_CALL_END, "mujoco.step"), (80, 0, OE, "b"), (90, 0, OE, "a"),
          (100, 0, fmt.PROCESS_END, "")]
GPU_CASE = dict(
    events=[(0, 0, fmt.PROCESS_START, ""), (10, 0, OB, "a"), (50, 0, OE, "a"),
            (50, 0, OB, "b"), (100, 0, OE, "b"), (100, 0, fmt.PROCESS_END, "")],
    threads={0: 111},
    api=[(111, 20, 25, 1, "cudaLaunchKernel"), (111, 60, 90, 2, "cudaStreamSynchronize")],
    gpu=[(G.KERNEL, 7, 30, 80, 1), (G.MEMCPY, 8, 95, 120, 0)])


def _analysis(**case):
    p = process_trace(**case, progress=[(40, 100, 400), (90, 200, 400)])
    return analyze(Trace(Path("."), {"command": ["train.py"], "status": "succeeded"}, [p]))


def test_text_report_has_split_columns_and_extrapolation():
    out = table.render(_analysis(**GPU_CASE), "text")
    for word in ("Python", "CUDA API", "GPU only", "CPU+GPU", "CPU only", "(start-up)",
                 "Progress: 200 timesteps of 400 (50.0%)", "estimated full training run"):
        assert word in out, word
    # A CPU-only run shows no GPU columns.
    cpu = table.render(_analysis(events=NESTED), "text")
    assert "Backend" in cpu and "Simulator" in cpu and "GPU" not in cpu


def test_csv_json_markdown():
    a = _analysis(**GPU_CASE)
    csv = table.render(a, "csv").splitlines()
    assert csv[0].startswith("pid,process,phase,operation,depth,calls,wall_s,self_s")
    assert csv[0].endswith(",session")
    for col in ("python_s", "gpu_s", "cpu_only_s", "gpu_only_s", "cpu_gpu_s"):
        assert col in csv[0]
    doc = json.loads(table.render(a, "json"))
    assert {"run", "processes", "operations", "extrapolation"} <= set(doc)
    ops = {o["operation"]: o for o in doc["operations"]}
    assert round(ops["a"]["gpu_only_s"] * 1e9) == 20
    assert doc["extrapolation"][0]["estimated_total_s"] > 0
    md = table.render(a, "markdown").splitlines()
    assert md[0].startswith("| pid |") and md[1].startswith("|---|")


def test_plots_are_written_as_png_and_svg(tmp_path: Path):
    a = _analysis(**GPU_CASE)
    files = []
    for stem, fig in plots.figures(a):  # reporters render; the caller chooses the files
        for ext in ("png", "svg"):
            files.append(tmp_path / f"{stem}.{ext}")
            fig.savefig(files[-1])
        plots.pyplot().close(fig)
    names = sorted(f.name for f in files)
    assert names == ["breakdown.png", "breakdown.svg", "transitions.png", "transitions.svg"]
    for f in files:
        assert f.stat().st_size > 1000
    assert (tmp_path / "breakdown.png").read_bytes()[:4] == b"\x89PNG"
    seg = plots.operation_segments(a, a.processes()["pid"][0])
    assert seg.index[0] == "(start-up)"
    assert round(seg.to_numpy().sum() * 1e9) == 120  # every covered ns, once


def test_transitions_per_timestep_and_per_call():
    a = _analysis(events=NESTED)
    df, unit = plots.transitions_per_iteration(a, 100)
    assert unit == "per timestep" and df.loc["a", "Backend"] == 1 / 200
    b = analyze(Trace(Path("."), {}, [process_trace(NESTED)]))
    df, unit = plots.transitions_per_iteration(b, 100)
    assert unit == "per operation call" and df.loc["a > b", "Simulator"] == 1
