"""rls-prof's cost model of the machine (issue 22): the hooks' microbenchmarks and an
empty process's start-up, measured in a few seconds into DIR/costs.json, found by the
analysis as an unchecked calibration."""

from __future__ import annotations

from pathlib import Path

from rlscope.analysis.overhead.applied import withheld_reason
from rlscope.analysis.overhead.model import find_calibration
from rlscope.calibration import cost_model
from rlscope.launch.child_env import Recording


def test_cost_model_is_measured_and_found(tmp_path: Path):
    out = tmp_path / "run"
    out.mkdir()
    cal, took = cost_model.measure(["python", "x.py"], out, Recording(str(out), cuda=False))
    assert took > 0
    assert cal is not None and (out / "costs.json").exists()
    found = find_calibration(out)
    assert found is not None and found.mode == "model"
    # Every kind is priced, an annotation at nothing where it costs less than the
    # benchmark resolves (-2..+2 ns measured on a quiet day). The inside part is the
    # hook's code between its stamps, the benchmark's empty interval, even where that is
    # more than the hook adds (an annotation: ~1 ns added, ~20 ns between its stamps).
    mb = found.microbenchmark
    for kind in ("annotation", "backend_call", "env_call", "process"):
        c = found.costs[kind]
        assert c.per_event_ns >= 0 and c.inside_ns >= 0, (kind, c)
        if kind != "process":
            assert c.inside_ns == max(mb[kind]["inside_ns"], 0.0), (kind, c)
    for kind in ("backend_call", "env_call", "process"):
        assert found.costs[kind].per_event_ns > 0, kind
    assert "not been checked" in withheld_reason(found)  # raw numbers until --calibrate
    assert "an annotation" in cost_model.summary(found)
    # No pool and no Python stack samples in this directory: their kinds (a real pool,
    # ~0.7 s; a loop under the sampler, 0.6 s) are not timed.
    assert not {"pool_task", "pool_call", "py_sample"} & set(found.costs)


def test_pool_kinds_are_timed_for_a_run_with_pool_tasks(tmp_path: Path):
    import sys

    from tests.conftest import run_tool

    out = tmp_path / "run"
    workload = Path(__file__).parent / "workloads" / "pool_tasks.py"
    r = run_tool("rls-prof", "-o", str(out), "-q", "--", sys.executable, str(workload),
                 "pool", timeout=300)
    assert r.returncode == 0, r.stderr
    cal, _ = cost_model.measure(["python", str(workload)], out,
                                Recording(str(out), cuda=False))
    assert cal is not None
    # A profiled run (its Python stacks sampled, as by default) with pool tasks.
    for kind in ("pool_task", "pool_call", "py_sample"):
        c = cal.costs[kind]
        assert c.per_event_ns > 0 and c.source == "microbenchmark"
    assert cal.costs["pool_task"].inside_ns == 0  # the pool's task thread's part of a call:
    assert 0 <= cal.costs["pool_call"].inside_ns <= cal.costs["pool_call"].per_event_ns


def test_report_names_the_operation_rlscope_inflated_most(tmp_path: Path):
    """A real run with the machine's cost model beside it: the report's overhead line
    names the operation with the largest share of book-keeping, and the JSON report
    carries the per-operation figures (each operation's own counted calls x costs)."""
    import json
    import sys

    from tests.conftest import run_tool

    out = tmp_path / "run"
    workload = Path(__file__).parent / "workloads" / "nested_ops.py"
    r = run_tool("rls-prof", "-o", str(out), "-q", "--", sys.executable, str(workload),
                 timeout=300)
    assert r.returncode == 0, r.stderr
    cal, _ = cost_model.measure(["python", str(workload)], out,
                                Recording(str(out), cuda=False))
    assert cal is not None
    doc = json.loads(run_tool("rls-analyze", "report", "--format", "json", str(out)).stdout)
    per_op = {(o["pid"], o["operation"]): o for o in doc["overhead_per_operation"]}
    ops = {(o["pid"], o["operation"]): o for o in doc["operations"]}
    costs = doc["run"]["correction"]["costs_ns"]
    for key, o in per_op.items():
        own = ops[key]["calls"] * costs["annotation"] \
            + ops[key]["backend_calls"] * costs.get("backend_call", 0)
        assert o["overhead_s"] >= own / 1e9 * (1 - 1e-9)  # its own, and its subtree's
    w = doc["overhead_worst_operation"]
    assert w is not None and (w["pid"], w["operation"]) in per_op
    assert 0 < w["overhead_pct"] < 100
    text = run_tool("rls-analyze", "report", str(out)).stdout
    assert f"per operation at most {w['overhead_pct']:.1f}% ({w['operation']})" in text


def test_start_up_is_timed_beyond_the_standard_library_it_shares(tmp_path: Path):
    """The per-process start-up is rlscope's beyond the standard-library modules its
    start-up imports (a workload imports them anyway): they are found, are standard
    library only, and import in a plain interpreter."""
    import subprocess
    import sys

    from rlscope.calibration.model_check import shared_imports

    shared = shared_imports(Recording(str(tmp_path / "t"), cuda=False))
    assert {"collections", "threading"} <= set(shared), shared
    assert all(m.split(".")[0] in sys.stdlib_module_names for m in shared), shared
    assert not any(m.startswith("rlscope") for m in shared)
    r = subprocess.run([sys.executable, "-c", "import " + ", ".join(shared)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_importing_rlscope_is_priced_apart_for_scripts_that_do_not(tmp_path: Path):
    """A script that uses rlscope (annotations, progress) imports it with or without
    recording: the start-up's import part is measured apart, and the trace says which
    processes' scripts use rlscope (their import is not rlscope's cost)."""
    import sys

    from rlscope.analysis.overhead.kinds import RLSCOPE_IMPORT, count_process
    from rlscope.calibration.model_check import startup_cost_ns
    from rlscope.trace import format as fmt
    from rlscope.trace.reader import read_trace
    from tests.conftest import run_tool

    s = startup_cost_ns(Recording(str(tmp_path / "t"), cuda=False))
    assert 0 < s.import_ns <= s.ns, s
    scripts = {"uses": "from rlscope import operation\nwith operation('x'):\n    pass\n",
               "plain": "print(sum(range(10)))\n"}
    for name, code in scripts.items():
        script = tmp_path / f"{name}.py"
        script.write_text(code)
        out = tmp_path / name
        r = run_tool("rls-prof", "-o", str(out), "-q", "--no-cost-model", "--",
                     sys.executable, str(script), timeout=120)
        assert r.returncode == 0, r.stderr
        p = read_trace(out).processes[0]
        uses = fmt.META_SCRIPT_USES_RLSCOPE in p.metadata
        assert uses == (name == "uses")
        assert count_process(p)[RLSCOPE_IMPORT] == int(name == "plain")
