"""Property test of the overlap engine against a brute-force oracle that walks the
timeline one nanosecond at a time: per-thread and process-wide regions are disjoint and
sum to the covered time, and every CPU instant is charged to the right operation and
category."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from rlscope.analysis import analyze
from rlscope.analysis.engine import categories as C
from rlscope.analysis.engine.synthetic import process_trace
from rlscope.trace import format as fmt
from rlscope.trace.data import Trace

OB, OE = fmt.OPERATION_BEGIN, fmt.OPERATION_END
BB, BE = fmt.BACKEND_CALL_BEGIN, fmt.BACKEND_CALL_END
SB, SE = fmt.SIMULATOR_CALL_BEGIN, fmt.SIMULATOR_CALL_END
WB, WE = fmt.WAIT_CALL_BEGIN, fmt.WAIT_CALL_END
TIDS = {0: 500, 1: 501}
ACTIONS = [OB, OE, BB, BE, SB, SE, WB, WE]


@st.composite
def timelines(draw):
    n_threads = draw(st.integers(1, 2))
    events = [(0, 0, fmt.PROCESS_START, "")]
    for th in range(n_threads):
        t = draw(st.integers(0, 5))
        for _ in range(draw(st.integers(0, 14))):
            t += draw(st.integers(0, 6))
            k = draw(st.sampled_from(ACTIONS))
            events.append((t, th, k, draw(st.sampled_from("ab")) if k in (OB, OE) else "f"))
    end = draw(st.one_of(st.none(), st.integers(40, 70)))
    if end is not None:
        events.append((end, 0, fmt.PROCESS_END, ""))
    api = []
    for i in range(draw(st.integers(0, 4))):
        s = draw(st.integers(0, 60))
        tid = draw(st.sampled_from([500, 501, 777]))
        name = draw(st.sampled_from(["cudaLaunchKernel", "cudaStreamSynchronize"]))
        api.append((tid, s, s + draw(st.integers(0, 15)), i + 1, name))
    gpu = []
    for _ in range(draw(st.integers(0, 4))):
        s = draw(st.integers(0, 70))
        gpu.append((draw(st.sampled_from([1, 2, 3])), draw(st.integers(0, 2)), s,
                    s + draw(st.integers(0, 20)), draw(st.integers(0, len(api) + 1))))
    # Timed imports of the main thread (rlscope.inprocess.import_timer), possibly nested.
    imports = {}
    for i in range(draw(st.integers(0, 3))):
        b = draw(st.integers(0, 30))
        imports[f"{fmt.META_IMPORT_PREFIX}m{i}"] = [b, b + draw(st.integers(0, 12))]
    return events, api, gpu, imports


def oracle(events, api, gpu, imports=None):
    """(per (thread, region) ns, per (thread, op, category) ns for CPU-charged instants,
    process region ns)."""
    by_tid = {v: k for k, v in TIDS.items()}
    threads = sorted({e[1] for e in events} | set(TIDS))
    for tid, *_ in api:
        if tid not in by_tid:
            by_tid[tid] = max(threads) + 1
            threads.append(by_tid[tid])
    t_start = min(e[0] for e in events if e[2] == fmt.PROCESS_START)
    ends = [e[0] for e in events if e[2] == fmt.PROCESS_END]
    t_end = max(ends[-1], t_start) if ends else max(e[0] for e in events)
    # Start-up: the main thread outside operations before the first operation begins
    # (none without one: then its time is all unannotated).
    t_user = min((e[0] for e in events if e[2] == OB), default=-1)
    # Its imports: those that began in it, up to its end.
    runs = [(b, e) for b, e in (imports or {}).values() if t_start <= b < t_user]
    # Launching thread of each GPU activity.
    launch = []
    for *_, s, _e, corr in gpu:
        hit = [a for a in api if a[3] == corr and corr != 0]
        if hit:
            launch.append(by_tid[hit[0][0]])
            continue
        before = sorted((a[1], i) for i, a in enumerate(api) if a[1] <= s)
        launch.append(by_tid[api[before[-1][1]][0]] if before else 0)
    horizon = max([t_end, *(g[3] for g in gpu), *(a[2] for a in api), 1]) + 1
    per_thread: Counter = Counter()
    cpu_rows: Counter = Counter()
    proc: Counter = Counter()
    for u in range(horizon):
        any_active = any_busy = False
        for th in threads:
            evs = [e for e in events if e[1] == th and e[0] <= u]
            stack: list[str] = []
            open_calls = {C.BACKEND: [0, -1], C.SIMULATOR: [0, -1], C.WAITING: [0, -1]}
            begins = {BB: C.BACKEND, SB: C.SIMULATOR, WB: C.WAITING}
            ends = {BE: C.BACKEND, SE: C.SIMULATOR, WE: C.WAITING}
            for i, (_, _, k, n) in enumerate(evs):
                if k == OB:
                    stack.append(n)
                elif k == OE and stack:
                    stack.pop()
                elif k in begins:
                    c = open_calls[begins[k]]
                    c[0], c[1] = c[0] + 1, i
                elif k in ends and open_calls[ends[k]][0]:
                    open_calls[ends[k]][0] -= 1
            my_api = [a for a in api if by_tid[a[0]] == th and a[1] <= u < a[2]]
            waiting = (any(a[4] == "cudaStreamSynchronize" for a in my_api)
                       or open_calls[C.WAITING][0] > 0)
            inner = max(((last, c) for c, (depth, last) in open_calls.items() if depth),
                        default=(-1, C.PYTHON))
            cat = C.CUDA_API if my_api else inner[1]
            if th == 0:
                active = t_start <= u < t_end
            else:  # a wait call alone does not make a thread active
                active = (bool(stack) or bool(my_api) or open_calls[C.BACKEND][0] > 0
                          or open_calls[C.SIMULATOR][0] > 0) and u < t_end
            busy = active and not waiting
            gpu_on = any(launch[i] == th and g[2] <= u < g[3] for i, g in enumerate(gpu))
            any_active |= active
            any_busy |= busy
            if not (active or gpu_on):
                continue
            region = (C.CPU_GPU if busy else C.GPU_ONLY) if gpu_on else C.CPU_ONLY
            per_thread[(th, region)] += 1
            if region != C.GPU_ONLY:
                outside = "(unannotated)"
                if th == 0 and u < t_user:
                    outside = "(start-up)" + (" > imports" if any(b <= u < e for b, e in runs)
                                              else "")
                cpu_rows[(th, " > ".join(stack) or outside, cat)] += 1
        any_gpu = any(g[2] <= u < g[3] for g in gpu)
        if any_gpu:
            proc[C.CPU_GPU if any_busy else C.GPU_ONLY] += 1
        elif any_active:
            proc[C.CPU_ONLY] += 1
    return per_thread, cpu_rows, proc


@settings(max_examples=150, deadline=None)
@given(timelines())
def test_engine_matches_the_brute_force_oracle(case):
    events, api, gpu, imports = case
    p = process_trace(events, threads=TIDS, api=api, gpu=gpu, metadata=imports)
    a = analyze(Trace(None, {}, [p]))  # type: ignore[arg-type]
    want_thread, want_cpu, want_proc = oracle(events, api, gpu, imports)
    df = a.breakdown(by=("thread", "operation", "category", "region"))
    region_id = {n: i for i, n in enumerate(C.REGION_NAMES)}
    cat_id = {n: i for i, n in enumerate(C.CATEGORY_NAMES)}
    got_thread: Counter = Counter()
    got_cpu: Counter = Counter()
    for th, op, cat, region, sec in df.itertuples(index=False):
        ns = round(sec * 1e9)
        got_thread[(th, region_id[region])] += ns
        if region_id[region] != C.GPU_ONLY:
            got_cpu[(th, op, cat_id[cat])] += ns
    assert +got_thread == +want_thread
    assert +got_cpu == +want_cpu
    proc = a.processes().iloc[0]
    got_proc = Counter({C.CPU_ONLY: round(proc.cpu_only_s * 1e9),
                        C.GPU_ONLY: round(proc.gpu_only_s * 1e9),
                        C.CPU_GPU: round(proc.cpu_gpu_s * 1e9)})
    assert +got_proc == +want_proc
    assert round(proc.covered_s * 1e9) == sum(want_proc.values())
    # Operations: the region split and the category split each sum to self time.
    ops = a.operations()
    region_sum = ops[["cpu_only_s", "gpu_only_s", "cpu_gpu_s"]].sum(axis=1)
    cat_sum = ops[["python_s", "backend_s", "simulator_s", "cuda_api_s", "waiting_s",
                   "gpu_s"]].sum(axis=1)
    assert ((region_sum - ops["self_s"]).abs() < 1e-12).all()
    assert ((cat_sum - ops["self_s"]).abs() < 1e-12).all()


@settings(max_examples=100, deadline=None)
@given(timelines(), st.integers(1, 8))
def test_batches_give_the_same_result_as_one_pass(case, batch):
    """Streaming: feeding a process's events in batches (each thread's open scopes carried
    from one batch to the next) changes nothing."""
    events, api, gpu, imports = case
    p = process_trace(events, threads=TIDS, api=api, gpu=gpu, metadata=imports)
    whole = analyze(Trace(None, {}, [p]))  # type: ignore[arg-type]
    parts = analyze(Trace(None, {}, [p]), batch_events=batch)  # type: ignore[arg-type]
    by = ("thread", "phase", "operation", "category", "region")

    def rows(a):
        df = a.breakdown(by=by)
        return sorted((*r[:-1], round(r[-1] * 1e9)) for r in df.itertuples(index=False)
                      if round(r[-1] * 1e9))

    assert rows(parts) == rows(whole)
    cols = ["phase", "operation", "calls", "backend_calls", "simulator_calls",
            "cuda_api_calls"]
    key = ["phase", "operation"]
    assert (parts.operations()[cols].sort_values(key).values.tolist()
            == whole.operations()[cols].sort_values(key).values.tolist())
    pw, pp = whole.processes().iloc[0], parts.processes().iloc[0]
    for c in ("covered_s", "cpu_only_s", "gpu_only_s", "cpu_gpu_s"):
        assert round(pw[c] * 1e9) == round(pp[c] * 1e9), c
