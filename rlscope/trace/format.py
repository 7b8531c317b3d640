"""Constants of the trace format (proto/rlscope/trace.proto), shared by writers and readers.

The values mirror the proto's EventKind enum; a unit test checks they agree with the
compiled schema (rlscope.trace.messages). Recording processes import this module, so it
imports next to nothing.
"""

from __future__ import annotations

import os
import time

MAGIC = b"RLSCOPE\n"
FORMAT_VERSION = 1
FILE_SUFFIX = ".rlscope"
RUN_FILE = "run.json"  # run metadata rls-prof writes beside the trace files
# Touched (by the user, or rls-prof on SIGUSR1) to ask every recording process of the run
# for a detail window now (bounded traces; the native writer watches its mtime).
WINDOW_REQUEST_FILE = "rlscope.window"
# rls-analyze timeline's default outputs in a run directory (--format perfetto, json)
TIMELINE_FILES = {"perfetto": "timeline.pftrace", "json": "trace.json"}
LOCK_FILE = "rlscope.lock"  # held by a live rls-prof (rlscope.trace.rundir)
# rls-prof's utilisation samples (samples.<launcher pid>.rlsamples): the same framing as a
# trace file (magic, header, records) under another suffix, so that "*.rlscope" keeps
# meaning "one file per recorded process".
SAMPLES_SUFFIX = ".rlsamples"
SOURCE_SAMPLES = "samples"
# Python stack samples of one process (pystacks.<pid>.rlstacks, rlscope.inprocess.pysampler:
# the format is described there).
STACKS_SUFFIX = ".rlstacks"
SOURCE_STACKS = "pystacks"

OPERATION_BEGIN = 1
OPERATION_END = 2
PHASE_BEGIN = 3
PHASE_END = 4
PROGRESS = 5
PROCESS_START = 6
PROCESS_END = 7
ENV_STEP_BEGIN = 8
ENV_STEP_END = 9
ENV_RESET_BEGIN = 10
ENV_RESET_END = 11
BACKEND_CALL_BEGIN = 16
BACKEND_CALL_END = 17
SIMULATOR_CALL_BEGIN = 18
SIMULATOR_CALL_END = 19
WAIT_CALL_BEGIN = 20
WAIT_CALL_END = 21
MARK_CALL_BEGIN = 22  # loop-phase markers (module forward, optimizer step): analysis infers
MARK_CALL_END = 23  # operations from them (rlscope.analysis.inferred)
# A thread's stretch outside detail windows (bounded traces): its time is in aggregates.
AGGREGATED_BEGIN = 24
AGGREGATED_END = 25

KIND_NAMES = {
    OPERATION_BEGIN: "OPERATION_BEGIN",
    OPERATION_END: "OPERATION_END",
    PHASE_BEGIN: "PHASE_BEGIN",
    PHASE_END: "PHASE_END",
    PROGRESS: "PROGRESS",
    PROCESS_START: "PROCESS_START",
    PROCESS_END: "PROCESS_END",
    ENV_STEP_BEGIN: "ENV_STEP_BEGIN",
    ENV_STEP_END: "ENV_STEP_END",
    ENV_RESET_BEGIN: "ENV_RESET_BEGIN",
    ENV_RESET_END: "ENV_RESET_END",
    BACKEND_CALL_BEGIN: "BACKEND_CALL_BEGIN",
    BACKEND_CALL_END: "BACKEND_CALL_END",
    SIMULATOR_CALL_BEGIN: "SIMULATOR_CALL_BEGIN",
    SIMULATOR_CALL_END: "SIMULATOR_CALL_END",
    WAIT_CALL_BEGIN: "WAIT_CALL_BEGIN",
    WAIT_CALL_END: "WAIT_CALL_END",
    MARK_CALL_BEGIN: "MARK_CALL_BEGIN",
    MARK_CALL_END: "MARK_CALL_END",
    AGGREGATED_BEGIN: "AGGREGATED_BEGIN",
    AGGREGATED_END: "AGGREGATED_END",
}

# Process metadata keys rlscope itself sets (rlscope.set_metadata is the user's): what
# analysis needs to relate the processes of a run (docs/multiprocess.md).
META_ROLE = "rlscope.role"  # one of ROLES
META_ROLE_DETAIL = "rlscope.role_detail"  # e.g. the vector env's class, the pool's name
META_ENV_INDEX = "rlscope.env_index"  # vector-env worker: index of the env(s) it holds
META_NUM_ENVS = "rlscope.num_envs"  # ... and the vector env's number of envs
META_MP_NAME = "rlscope.mp_name"  # multiprocessing.current_process().name
META_MP_TARGET = "rlscope.mp_target"  # what a multiprocessing child runs: "module:qualname"
# A process's n-th recording session (rlscope.start after rlscope.stop): 1, 2, ... in its
# second, third, ... trace file; absent in the first.
META_SESSION = "rlscope.session"
# Vector envs (rlscope.integrations.vecenv): the process holding them lists them, each
# {"name", "class", "num_envs", "workers"}; "name" names its vector-level ENV events.
META_VECENVS = "rlscope.vecenvs"
META_VECENV = "rlscope.vecenv"  # vector-env worker: {"pid", "name"} of the env it serves
# One outermost import on the recording thread (rlscope.inprocess.import_timer): the key is this
# prefix and the module's name, the value [begin_ns, end_ns] (CLOCK_MONOTONIC).
META_IMPORT_PREFIX = "rlscope.import:"
# rlscope's own set-up of one library's interception in this process (rlscope.intercept):
# the key is this prefix and the library's name, the value the CPU ns it took (overhead
# correction adds it to the process's fixed cost).
META_INSTALL_PREFIX = "rlscope.install:"
# CPU ns one of rlscope's own threads of this process (the writer, a sampler: named
# "rlscope-...") had used when recording stopped; the key is this prefix and the thread's
# name. Off the program's timeline, in the process tree's CPU time (correction counts it).
META_THREAD_CPU_PREFIX = "rlscope.cpu:"
# "1" in the trace of a process forked from a recording one (no exec): it paid no
# interpreter or rlscope start-up of its own (overhead correction charges it none).
META_FORKED = "rlscope.forked"
# Calls the operation wrappers passed on while recording because the operation of their
# name was open on the thread (rlscope.intercept.passed_calls): {operation: calls}.
# Nothing is recorded for them; overhead correction prices them (kinds.PASSED_CALL).
META_PASSED_CALLS = "rlscope.passed_calls"
# Which envs the batches of an async vector env held (rlscope.integrations.batches,
# sampled batches: EnvPool, PufferLib's worker backends): the key is this prefix and the
# vector env's name, the value {"library" (absent: EnvPool, in older traces), "num_envs",
# "batch_size", "batches" (recv calls), "tallied" (batches counted), "counts" (per env:
# how many counted batches held it)}. The prefix keeps its first name.
META_ASYNC_BATCHES_PREFIX = "rlscope.envpool_batches:"
# One pool or executor task run in this process (rlscope.integrations.pooltasks): the key
# is this prefix and the task's number in the process, the value [function's qualname,
# call, item index, begin_ns, end_ns, tid, by, submitted_ns] (CLOCK_MONOTONIC; tid: the
# thread that ran it; by: the submitting process's pid; submitted_ns: when it made the
# call; records of older traces stop earlier).
META_TASK_PREFIX = "rlscope.task:"
# One Ray task or actor method call run in this process (rlscope.integrations.ray_workers):
# the key is this prefix and the call's number in the process, the value [name, begin_ns,
# end_ns, tid] (CLOCK_MONOTONIC; name: the function, or Class.method).
META_RAY_CALL_PREFIX = "rlscope.ray_call:"
# "1" in the trace of a process that handed tasks to a pool or executor while recording.
META_POOL_TASKS = "rlscope.pool_tasks"
# How many submissions to process pools or executors (a mapping call, an apply_async or
# a submit) this process made while recording (written at stop; the cost model's
# pool_call kind).
META_POOL_CALLS = "rlscope.pool_calls"
# One JIT compilation (rlscope.intercept.compile_record): the key is this prefix and its
# number in the process, the value [framework, function, begin_ns, end_ns, tid, reason,
# kind, counts, graph_breaks] (CLOCK_MONOTONIC; tid: the compiling thread's native id).
META_COMPILE_PREFIX = "rlscope.compile:"
# Ray (rlscope.integrations.ray_workers): {"kind": "driver" | "actor" | "task", "job_id",
# and "actor_class", "module", "actor_id" (an actor) or "tasks" (names of the remote
# functions a task worker ran)}.
META_RAY = "rlscope.ray"
# What rlscope.report_progress counts in this process ("episodes", "iterations", ...), as
# a JSON string; recorded when it changes, absent while it is the default.
META_PROGRESS_UNIT = "rlscope.progress_unit"
PROGRESS_UNIT = "timesteps"  # the default unit
# Progress reported by an integration (sb3, rllib), not by the script: the value names it.
# Recorded once per trace file; without it, every progress report is the script's own
# (what RLSCOPE_MAX_PROGRESS counts, with or without recording).
META_PROGRESS_BY = "rlscope.progress_by"
# The script (its __main__ module) uses rlscope itself (``import rlscope``, ``from rlscope
# import operation``): importing rlscope is then not rlscope's cost in that process. "1".
META_SCRIPT_USES_RLSCOPE = "rlscope.script_uses_rlscope"
# The user's training metrics at a progress report (report_progress(metrics=...)): the key
# is this prefix and the report's number in the process, the value [time_ns (CLOCK_MONOTONIC),
# timesteps, {name: value}].
META_METRIC_PREFIX = "rlscope.metric:"
VECTOR_ENV_INDEX = -1  # env index of a vector-level ENV event (all envs of a vector env)
ROLE_MAIN = "main"
ROLE_VECENV_WORKER = "vector-env worker"
ROLE_POOL_WORKER = "pool worker"
ROLE_MP_PROCESS = "multiprocessing process"
ROLE_FORKSERVER = "forkserver"
ROLE_RESOURCE_TRACKER = "resource tracker"
ROLE_SUBPROCESS = "subprocess"
ROLE_RAY_ACTOR = "ray actor"  # a Ray worker holding an actor (role detail: its class)
ROLE_RAY_TASK = "ray task worker"  # a Ray worker that ran remote functions
ROLE_RAY_WORKER = "ray worker"  # a Ray worker that ran nothing (pre-started, spare)
ROLE_RAY_HELPER = "ray helper"  # Ray's own Python services: dashboard, agents, monitors
ROLES = (ROLE_MAIN, ROLE_VECENV_WORKER, ROLE_RAY_ACTOR, ROLE_RAY_TASK, ROLE_POOL_WORKER,
         ROLE_MP_PROCESS, ROLE_FORKSERVER, ROLE_RESOURCE_TRACKER, ROLE_RAY_WORKER,
         ROLE_RAY_HELPER, ROLE_SUBPROCESS)

# How multiprocessing starts its helpers and spawned children: the start of the code they
# run with ``python -c``, read from argv by recording and analysis.
MP_HELPER_CODE = {
    "from multiprocessing.forkserver import main": ROLE_FORKSERVER,
    "from multiprocessing.resource_tracker import main": ROLE_RESOURCE_TRACKER,
}
MP_SPAWN_CODE = "from multiprocessing.spawn import spawn_main"

# Phase markers (MARK_CALL names) by their role in a training loop, and the backend calls
# that are a backward pass: analysis infers ``inference`` / ``backprop`` from them
# (rlscope.analysis.inferred, docs/attribution.md#inferred-operations).
MARK_FORWARD = ("torch.nn.Module", "keras.Layer")  # a model's forward (outermost)
# Starts an update if it comes before the forwards of the loss: zero_grad, a tape opened.
MARK_UPDATE_START = ("torch.optim.Optimizer.zero_grad", "tensorflow.GradientTape")
MARK_BACKWARD: tuple[str, ...] = ()  # a backward pass recorded as a marker (none yet)
MARK_STEP = ("torch.optim.Optimizer.step", "keras.Optimizer.apply")  # applying gradients
# BACKEND_CALL names of a backward pass: torch's autograd engine, TensorFlow's tape.
BACKWARD_CALLS = ("torch.autograd.backward", "tensorflow.TFE_Py_TapeGradient")
# The operations analysis infers, and the recorded names that block inferring any of
# them where they are (a user's annotation or an integration's operation wins).
INFERRED_OPS = ("inference", "backprop")
LOOP_OPS = ("inference", "backprop", "simulation")

# Number of Chunk.args entries each kind carries.
KIND_ARGS = {PROGRESS: 2, ENV_STEP_BEGIN: 1, ENV_RESET_BEGIN: 1}


def trace_file_path(output_dir: str | os.PathLike[str], source: str = "python",
                    pid: int | None = None, suffix: str = FILE_SUFFIX) -> str:
    """A fresh file name for one process's trace: ``<source>.<pid>[.<n>].rlscope``.

    A numeric suffix avoids clobbering a file left by an earlier process with the same pid.
    """
    pid = os.getpid() if pid is None else pid
    base = os.path.join(os.fspath(output_dir), f"{source}.{pid}")
    path, n = base + suffix, 0
    while os.path.exists(path):
        n += 1
        path = f"{base}.{n}{suffix}"
    return path


class ClockPair:
    """CLOCK_MONOTONIC and CLOCK_REALTIME read together, and the bound of the error."""

    __slots__ = ("monotonic_ns", "realtime_ns", "uncertainty_ns")

    def __init__(self, monotonic_ns: int, realtime_ns: int, uncertainty_ns: int) -> None:
        self.monotonic_ns = monotonic_ns
        self.realtime_ns = realtime_ns
        self.uncertainty_ns = uncertainty_ns

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClockPair) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (f"ClockPair(monotonic_ns={self.monotonic_ns}, realtime_ns={self.realtime_ns}, "
                f"uncertainty_ns={self.uncertainty_ns})")

    def _key(self) -> tuple[int, int, int]:
        return (self.monotonic_ns, self.realtime_ns, self.uncertainty_ns)


def read_clock_pair() -> ClockPair:
    """CLOCK_MONOTONIC and CLOCK_REALTIME read back to back; midpoint and error bound."""
    best = None
    for _ in range(5):
        m0 = time.monotonic_ns()
        r = time.time_ns()
        m1 = time.monotonic_ns()
        if best is None or m1 - m0 < best.uncertainty_ns:
            best = ClockPair((m0 + m1) // 2, r, m1 - m0)
    assert best is not None
    return best


# Several hosts (docs/multiprocess.md#several-hosts); rlscope.envvars lists these too. The
# native recorder and the CUDA collector read them the same way (native/common/host.h).
HOST_ENV = "RLSCOPE_HOST"  # the host label, when the hostname does not tell nodes apart
HOST_DIRS_ENV = "RLSCOPE_HOST_DIRS"  # "1": each host writes into OUTPUT_DIR/<host>/
_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def host_name() -> str:
    """This process's host label: $RLSCOPE_HOST, else the hostname, as a file name."""
    # os.uname().nodename is what socket.gethostname() returns, without importing socket.
    s = os.environ.get(HOST_ENV) or os.uname().nodename
    s = "".join(c if c in _LABEL_CHARS else "_" for c in s)
    return "host" if s in ("", ".", "..") else s


def machine_name() -> str:
    """The hostname itself (locks: is a pid on this machine), whatever RLSCOPE_HOST says."""
    return os.uname().nodename


def host_directory(output_dir: str) -> str:
    """Where this process's trace goes: ``output_dir/<host>`` when RLSCOPE_HOST_DIRS=1."""
    if os.environ.get(HOST_DIRS_ENV) != "1" or not output_dir:
        return output_dir
    return os.path.join(output_dir, host_name())
