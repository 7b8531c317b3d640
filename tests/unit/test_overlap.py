"""The overlap engine on hand-built timelines: exact durations per operation, category
and region."""

from __future__ import annotations

import random

import pandas as pd

from rlscope.analysis import analyze
from rlscope.analysis.engine.synthetic import process_trace
from rlscope.trace import format as fmt
from rlscope.trace import gpu as G
from rlscope.trace.data import Trace

OB, OE = fmt.OPERATION_BEGIN, fmt.OPERATION_END
BB, BE = fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END
SB, SE = fmt.SIMULATOR_CALL_BEGIN, fmt.SIMULATOR_CALL_END
PB, PE = fmt.PHASE_BEGIN, fmt.PHASE_END
START, END = fmt.PROCESS_START, fmt.PROCESS_END


def run(*procs):
    return analyze(Trace(None, {}, list(procs)))  # type: ignore[arg-type]


def table(a, *by: str) -> dict[tuple, float]:
    """Breakdown as {(key...): ns}."""
    df = a.breakdown(by=by)
    return {tuple(r[:-1]): round(r[-1] * 1e9) for r in df.itertuples(index=False)}


NESTED = [(0, 0, START, ""), (10, 0, OB, "a"), (20, 0, BB, "torch.mm"),
          (30, 0, BE, "torch.mm"), (40, 0, OB, "b"), (50, 0, SB, "mujoco.step"),
          (70, 0, SE, "mujoco.step"), (80, 0, OE, "b"), (90, 0, OE, "a"), (100, 0, END, "")]


def test_nested_operations_cpu_only():
    a = run(process_trace(NESTED))
    # Before the first operation: the start-up; after the last: unannotated.
    assert table(a, "operation", "category") == {
        ("(start-up)", "Python"): 10, ("(unannotated)", "Python"): 10, ("a", "Python"): 30,
        ("a", "Backend"): 10, ("a > b", "Python"): 20, ("a > b", "Simulator"): 20}
    assert table(a, "region") == {("CPU only",): 100}
    ops = a.operations().set_index("operation")
    assert ops.loc["a", "calls"] == 1 and ops.loc["a > b", "calls"] == 1
    assert round(ops.loc["a", "wall_s"] * 1e9) == 80
    assert round(ops.loc["a", "self_s"] * 1e9) == 40
    assert round(ops.loc["a > b", "wall_s"] * 1e9) == 40
    assert ops.loc["a", "backend_calls"] == 1 and ops.loc["a > b", "simulator_calls"] == 1
    assert round(ops.loc["a > b", "simulator_s"] * 1e9) == 20


def test_out_of_order_and_zero_length_events_give_the_same_result():
    rows = [*NESTED, (60, 0, OB, "z"), (60, 0, OE, "z")]
    # Shuffle the times; events at the same time keep their order (a zero-length
    # operation's begin comes before its end).
    groups: dict[int, list] = {}
    for r in rows:
        groups.setdefault(r[0], []).append(r)
    keys = list(groups)
    random.Random(1).shuffle(keys)
    shuffled = [r for k in keys for r in groups[k]]
    a1, a2 = run(process_trace(rows)), run(process_trace(shuffled))
    assert table(a1, "operation", "category") == table(a2, "operation", "category")
    ops = a1.operations().set_index("operation")
    assert ops.loc["a > b > z", "calls"] == 1
    assert ops.loc["a > b > z", "wall_s"] == 0
    assert round(ops.loc["a > b", "wall_s"] * 1e9) == 40


# Main thread (tid 111): a [10, 50), b [50, 100); a launches a kernel [30, 80) that runs
# into b, where the CPU waits in cudaStreamSynchronize [60, 90); a memcpy with no known
# correlation [95, 120) is charged by time to the latest API call (the sync, in b).
GPU_CASE = dict(
    events=[(0, 0, START, ""), (10, 0, OB, "a"), (50, 0, OE, "a"), (50, 0, OB, "b"),
            (100, 0, OE, "b"), (100, 0, END, "")],
    threads={0: 111},
    api=[(111, 20, 25, 1, "cudaLaunchKernel"), (111, 60, 90, 2, "cudaStreamSynchronize")],
    gpu=[(G.KERNEL, 7, 30, 80, 1), (G.MEMCPY, 8, 95, 120, 0)])


def test_cpu_gpu_overlap_with_correlation_and_crossing_boundaries():
    a = run(process_trace(**GPU_CASE))
    assert table(a, "operation", "category", "region") == {
        ("(start-up)", "Python", "CPU only"): 10,
        ("a", "Python", "CPU only"): 15, ("a", "CUDA API", "CPU only"): 5,
        ("a", "Python", "CPU + GPU"): 20,
        ("b", "Python", "CPU + GPU"): 15,
        ("a", "GPU kernel", "GPU only"): 20,
        ("b", "CUDA API", "CPU only"): 10, ("b", "Python", "CPU only"): 5,
        ("b", "GPU memcpy", "GPU only"): 20}
    proc = a.processes().iloc[0]
    assert round(proc.cpu_only_s * 1e9) == 45
    assert round(proc.cpu_gpu_s * 1e9) == 35
    assert round(proc.gpu_only_s * 1e9) == 40
    assert round(proc.covered_s * 1e9) == 120
    g = a.gpu().set_index(["operation", "category"])
    assert round(g.loc[("a", "GPU kernel"), "seconds"] * 1e9) == 50
    assert g.loc[("b", "GPU memcpy"), "count"] == 1
    ops = a.operations().set_index("operation")
    assert ops.loc["a", "cuda_api_calls"] == 1 and ops.loc["b", "cuda_api_calls"] == 1


def test_threads_streams_and_unknown_api_threads():
    p = process_trace(
        events=[(0, 0, START, ""), (10, 0, OB, "main"), (90, 0, OE, "main"),
                (100, 0, END, ""), (20, 1, OB, "w"), (60, 1, OE, "w")],
        threads={0: 111, 1: 222},
        api=[(222, 25, 30, 5, "cudaLaunchKernel"), (333, 5, 8, 6, "cudaMalloc")],
        gpu=[(G.KERNEL, 2, 40, 70, 5), (G.MEMSET, 3, 45, 50, 5)])
    a = run(p)
    t = table(a, "thread", "operation", "category", "region")
    assert t == {
        (0, "(start-up)", "Python", "CPU only"): 10,
        (0, "(unannotated)", "Python", "CPU only"): 10, (0, "main", "Python", "CPU only"): 80,
        (1, "w", "Python", "CPU only"): 15, (1, "w", "CUDA API", "CPU only"): 5,
        (1, "w", "Python", "CPU + GPU"): 20, (1, "w", "GPU kernel", "GPU only"): 10,
        (2, "(unannotated)", "CUDA API", "CPU only"): 3}
    proc = a.processes().iloc[0]
    # Process-wide: the main thread runs throughout, so GPU work always overlaps it.
    assert (round(proc.cpu_only_s * 1e9), round(proc.cpu_gpu_s * 1e9),
            round(proc.gpu_only_s * 1e9)) == (70, 30, 0)
    threads = a.threads().set_index("thread")
    assert threads.loc[2, "tid"] == 333
    gpu = a.gpu()
    assert set(gpu["stream"]) == {2, 3} and set(gpu["operation"]) == {"w"}


def test_phases_split_time_and_are_inherited_by_other_threads():
    p = process_trace(events=[(0, 0, START, ""), (0, 0, PB, "collect"), (10, 0, OB, "a"),
                              (30, 0, PE, "collect"), (30, 0, PB, "train"), (40, 0, OE, "a"),
                              (50, 0, PE, "train"), (50, 0, END, ""),
                              (20, 1, OB, "w"), (35, 1, OE, "w")])
    a = run(p)
    assert table(a, "phase", "operation") == {
        ("collect", "(unannotated)"): 10, ("collect", "a"): 20, ("train", "a"): 10,
        ("train", "(unannotated)"): 10, ("collect", "w"): 10, ("train", "w"): 5}
    ops = a.operations()
    calls = {(r.phase, r.operation): r.calls for r in ops.itertuples()}
    assert calls[("collect", "a")] == 1 and calls[("train", "a")] == 0


def test_unclosed_operation_after_a_crash_runs_to_the_last_event():
    p = process_trace(events=[(0, 0, START, ""), (10, 0, OB, "a"), (25, 0, BB, "x"),
                              (40, 0, BE, "x")])
    a = run(p)
    assert table(a, "operation", "category") == {
        ("(start-up)", "Python"): 10, ("a", "Python"): 15, ("a", "Backend"): 15}


def test_empty_and_multi_process():
    a = run(process_trace(NESTED, pid=1), process_trace(NESTED, pid=2))
    df = a.operations()
    assert set(df["pid"]) == {1, 2}
    assert isinstance(df, pd.DataFrame)


def test_cuda_only_process_counts_api_and_gpu_time():
    p = process_trace(events=[], api=[(9, 10, 20, 1, "cudaLaunchKernel"),
                                      (9, 30, 60, 2, "cudaDeviceSynchronize")],
                      gpu=[(G.KERNEL, 1, 15, 50, 1)])
    a = run(p)
    # [10,15) launch alone, [15,20) launch + kernel, [20,30) kernel alone, [30,50) kernel
    # while the CPU waits in the sync, [50,60) the sync alone.
    assert table(a, "operation", "category", "region") == {
        ("(unannotated)", "CUDA API", "CPU only"): 5 + 10,
        ("(unannotated)", "CUDA API", "CPU + GPU"): 5,
        ("(unannotated)", "GPU kernel", "GPU only"): 10 + 20}


WB, WE = fmt.WAIT_CALL_BEGIN, fmt.WAIT_CALL_END


def test_waiting_is_its_own_category_innermost_wins():
    # Main thread: op a [10, 90) with a sleep [20, 40), a backend call [50, 80) inside
    # which the thread waits [60, 70). A worker thread blocks [5, 95) outside any
    # operation (idle: adds nothing), then waits [30, 50) inside its own operation w.
    a = run(process_trace([
        (0, 0, START, ""), (10, 0, OB, "a"), (20, 0, WB, "time.sleep"),
        (40, 0, WE, "time.sleep"), (50, 0, BB, "torch.mm"), (60, 0, WB, "os.read"),
        (70, 0, WE, "os.read"), (80, 0, BE, "torch.mm"), (90, 0, OE, "a"),
        (100, 0, END, ""),
        (5, 1, WB, "queue.Queue.get"), (25, 1, WE, "queue.Queue.get"), (25, 1, OB, "w"),
        (30, 1, WB, "os.read"), (50, 1, WE, "os.read"), (60, 1, OE, "w"),
        (60, 1, WB, "queue.Queue.get"), (95, 1, WE, "queue.Queue.get")]))
    assert table(a, "thread", "operation", "category") == {
        (0, "(start-up)", "Python"): 10, (0, "(unannotated)", "Python"): 10,
        (0, "a", "Python"): 30,
        (0, "a", "Waiting"): 30, (0, "a", "Backend"): 20,
        (1, "w", "Python"): 15, (1, "w", "Waiting"): 20}
    ops = a.operations().set_index("operation")
    assert ops.loc["a", "wait_calls"] == 2 and ops.loc["w", "wait_calls"] == 1
    assert round(ops.loc["a", "waiting_s"] * 1e9) == 30


def test_gpu_work_under_a_wait_is_gpu_only():
    # The kernel [30, 80) runs while the thread sleeps [40, 60): GPU only there.
    a = run(process_trace(
        events=[(0, 0, START, ""), (10, 0, OB, "a"), (40, 0, WB, "time.sleep"),
                (60, 0, WE, "time.sleep"), (90, 0, OE, "a"), (100, 0, END, "")],
        threads={0: 111}, api=[(111, 20, 25, 1, "cudaLaunchKernel")],
        gpu=[(G.KERNEL, 7, 30, 80, 1), (G.KERNEL, 7, 92, 95, 1)]))
    t = table(a, "operation", "category", "region")
    assert t[("a", "GPU kernel", "GPU only")] == 20
    assert t[("a", "Python", "CPU + GPU")] == 30
    assert ("a", "Waiting", "CPU only") not in t
