"""Book-keeping event counts by cost kind, read from a trace.

A *cost kind* is one unit of book-keeping whose overhead is estimated and removed: an
annotation (a begin/end pair of an operation or phase), an intercepted backend or
simulator call (a begin/end pair), an intercepted blocking call (a wait: its wrapper's
cost, not the wait), a recorded env step or reset (the Python wrapper of a vector env or
of one of its envs: a begin/end pair), a CUDA API call (two CUPTI callbacks), a GPU
activity record, the fixed per-process cost of recording at all (a process started
by exec; a forked child inherits its parent's set-up), a pool's tasks: per task run
in a worker process (receiving its Task and recording it, beyond its operation's
annotation) and per submission (making and pickling the Task in the submitting process),
a Python stack sample (the pause of the thread it samples), a phase marker (a module
forward or optimizer step marked: its wrappers, nested module calls included), and a call
an operation wrapper passed on because its operation was open already (recorded as a
count per operation, format.META_PASSED_CALLS).
"""

from __future__ import annotations

import numpy as np

from rlscope.trace import format as fmt
from rlscope.trace.data import ProcessTrace, Trace

PROCESS = "process"
# Importing rlscope, in a process whose script does not use rlscope itself (else the
# same import is the script's too): apart from PROCESS, rlscope's start-up beyond it.
RLSCOPE_IMPORT = "rlscope_import"
ANNOTATION = "annotation"
BACKEND_CALL = "backend_call"
SIMULATOR_CALL = "simulator_call"
WAIT_CALL = "wait_call"
ENV_CALL = "env_call"
CUDA_API = "cuda_api"
GPU_ACTIVITY = "gpu_activity"
POOL_TASK = "pool_task"  # a task a process-pool worker ran for another process
POOL_CALL = "pool_call"  # a submission to a process pool or executor
# A Python stack sample (rlscope.inprocess.pysampler): the sampler takes the GIL from
# the thread running Python, which stalls meanwhile (off its CPU).
PY_SAMPLE = "py_sample"
# A phase marker (the outermost module forward, an optimizer step): its wrapper, the
# module calls nested in it (each through a wrapper that passes it on), and what the
# backend calls inside a module cost beyond a backend call's price (colder there).
PHASE_MARKER = "phase_marker"
# A call an operation wrapper passed on, its operation open (a marked env's step inside
# the user's ``simulation``): the wrapper's call, nothing recorded; paid inside an
# operation of that name (rlscope.analysis.overhead.passed_calls).
PASSED_CALL = "passed_call"
KINDS = (PROCESS, RLSCOPE_IMPORT, ANNOTATION, BACKEND_CALL, SIMULATOR_CALL, WAIT_CALL,
         ENV_CALL, CUDA_API, GPU_ACTIVITY, POOL_TASK, POOL_CALL, PY_SAMPLE, PHASE_MARKER,
         PASSED_CALL)
# Kinds whose cost is paid on the timeline of a thread as a begin/end pair; the
# per-process cost is paid before recording starts and after it stops.
PAIR_KINDS = {
    ANNOTATION: ((fmt.OPERATION_BEGIN, fmt.PHASE_BEGIN), (fmt.OPERATION_END, fmt.PHASE_END)),
    BACKEND_CALL: ((fmt.BACKEND_CALL_BEGIN,), (fmt.BACKEND_CALL_END,)),
    SIMULATOR_CALL: ((fmt.SIMULATOR_CALL_BEGIN,), (fmt.SIMULATOR_CALL_END,)),
    WAIT_CALL: ((fmt.WAIT_CALL_BEGIN,), (fmt.WAIT_CALL_END,)),
    ENV_CALL: ((fmt.ENV_STEP_BEGIN, fmt.ENV_RESET_BEGIN), (fmt.ENV_STEP_END, fmt.ENV_RESET_END)),
    PHASE_MARKER: ((fmt.MARK_CALL_BEGIN,), (fmt.MARK_CALL_END,)),
}
# Kinds that whole runs cannot separate: env events are recorded by the same integrations
# as the simulation operation (every configuration that has one has the other, in a
# fixed ratio), a pool's tasks and submissions with their tasks' operations, so their
# cost is the microbenchmark's, taken as known by the estimate; phase markers are
# installed with the backend's wrappers, and passed calls with the integrations' others.
MICROBENCHMARK_ONLY = (ENV_CALL, POOL_TASK, POOL_CALL, PY_SAMPLE, PHASE_MARKER, PASSED_CALL,
                       RLSCOPE_IMPORT)


def in_situ_what(kind: str) -> str:
    """What a kind's in-situ microbenchmark times (rlscope.calibration.microbench), for
    the lines that say where a cost came from."""
    if kind == ENV_CALL:
        return "an env's recorded step timed around gymnasium's CartPole"
    if kind == POOL_TASK:
        return "a one-worker pool's tasks, the worker's CPU with and without them recorded"
    if kind == PY_SAMPLE:
        return "a Python loop's pause around each stack sample"
    if kind == PHASE_MARKER:
        return "a small policy's forward through rlscope's wrappers, beyond its backend calls"
    if kind == PASSED_CALL:
        return ("gymnasium's CartPole stepped through a marked step inside its open "
                "operation, against stepped plainly")
    if kind == POOL_CALL:
        return ("a one-worker pool's map calls, the CPU of the caller and of the pool's task "
                "thread with and without recording")
    return "a wrapped call timed between small torch ops"


def count_process(p: ProcessTrace) -> dict[str, int]:
    kinds = np.bincount(p.events.kind, minlength=256) if len(p.events) else np.zeros(256)
    if len(p.aggregates):  # a bounded trace: the events its gaps aggregated
        kinds = kinds + p.aggregates.kind_counts()[:len(kinds)]
    # A forked child (no exec) paid no interpreter or rlscope start-up of its own.
    out = {PROCESS: int(len(p.events) > 0 and fmt.META_FORKED not in p.metadata)}
    out[RLSCOPE_IMPORT] = int(out[PROCESS] and fmt.META_SCRIPT_USES_RLSCOPE not in p.metadata)
    for k, (begins, _ends) in PAIR_KINDS.items():
        out[k] = int(sum(kinds[b] for b in begins))
    out[CUDA_API] = len(p.api_calls)
    out[GPU_ACTIVITY] = len(p.gpu)
    out[POOL_TASK] = len(tasks_for_others(p))
    calls = p.metadata.get(fmt.META_POOL_CALLS)
    out[POOL_CALL] = calls if isinstance(calls, int) and calls > 0 else 0
    out[PY_SAMPLE] = 0 if p.py_samples is None else len(p.py_samples)
    out[PASSED_CALL] = sum(passed_calls(p).values())
    return out


def passed_calls(p: ProcessTrace) -> dict[str, int]:
    """Calls ``p``'s operation wrappers passed on, per operation name
    (format.META_PASSED_CALLS; malformed entries left out)."""
    v = p.metadata.get(fmt.META_PASSED_CALLS)
    if not isinstance(v, dict):
        return {}
    return {str(k): n for k, n in v.items() if isinstance(n, int) and n > 0}


def tasks_for_others(p: ProcessTrace) -> list[tuple[int, int, int, int, int]]:
    """(submitter pid, OS thread id, submitted_ns, begin_ns, end_ns) of each pool task
    ``p`` ran for another process (rlscope.integrations.pooltasks' records; those of older
    traces, without the submission, are left out)."""
    out = []
    for key, v in p.metadata.items():
        if not key.startswith(fmt.META_TASK_PREFIX) or not isinstance(v, list) or len(v) < 8:
            continue
        _name, _call, _index, begin, end, tid, by, submitted = v[:8]
        if all(isinstance(x, int) for x in (begin, end, tid, by, submitted)) \
                and by != p.pid and submitted <= begin <= end:
            out.append((by, tid, submitted, begin, end))
    return out


def count_events(trace: Trace) -> dict[str, int]:
    """Events per cost kind, summed over the trace's processes."""
    total = dict.fromkeys(KINDS, 0)
    for p in trace.processes:
        for k, n in count_process(p).items():
            total[k] += n
    return total
