"""Every environment variable rlscope reads or sets, in one place (docs/rls-prof.md).

rls-prof sets them for the command it runs and every descendant inherits them; the
start-up hook (:mod:`rlscope.inprocess.autostart`) and the CUDA collector
(native/cuda/config.cpp) read them. Names only, importing nothing: the launcher's side
(:mod:`rlscope.launch`, :mod:`rlscope.calibration`) and the profiled process's side
(:mod:`rlscope.inprocess`) both use it, and meet nowhere else.
"""

from __future__ import annotations

PREFIX = "RLSCOPE_"

# Recording (set by rls-prof in every profiled run).
OUTPUT_DIR = "RLSCOPE_OUTPUT_DIR"  # recording starts in a process when this is set
RECORDER = "RLSCOPE_RECORDER"  # "native" or "python"
FLUSH_INTERVAL = "RLSCOPE_FLUSH_INTERVAL_S"
MAX_BUFFER = "RLSCOPE_MAX_BUFFER_BYTES"  # optional memory bound of the recorder
BOOTSTRAP_DIR = "RLSCOPE_BOOTSTRAP_DIR"  # directory of rlscope's sitecustomize.py
INTERCEPT = "RLSCOPE_INTERCEPT"  # "auto" (default), "none", or "torch,gym,..."
CUDA = "RLSCOPE_CUDA"  # "1" when the CUDA collector is injected
# Python stack samples a second in each process, or "off" (rlscope.inprocess.pysampler)
SAMPLE_PYTHON = "RLSCOPE_SAMPLE_PYTHON"

# Several hosts (docs/multiprocess.md#several-hosts); set by the user or rlscope's Ray
# worker environment (launch.child_env.worker_env), never by rls-prof itself.
HOST = "RLSCOPE_HOST"  # host label in headers and host directories (default: hostname)
HOST_DIRS = "RLSCOPE_HOST_DIRS"  # "1": write into $RLSCOPE_OUTPUT_DIR/<host>/

# Calibration runs.
ANNOTATIONS = "RLSCOPE_ANNOTATIONS"  # "0": recording, but annotations are not recorded
MAX_PROGRESS = "RLSCOPE_MAX_PROGRESS"  # end each process at its N-th progress report
# ... counting the reports of this integration (libraries.PROGRESS_BOUNDABLE), or the torch
# or Keras optimizer steps (libraries.OPTIMIZER_STEPS, KERAS_STEPS), or a jitted JAX
# function's calls (libraries.JIT_CALLS + its name), instead of the script's own reports:
# counted with or without recording, in the process started with it only.
PROGRESS_BY = "RLSCOPE_PROGRESS_BY"
# A file the process started with it writes its count of those units into at exit (the
# calibration's runs without rlscope: did they do the profiled run's work?).
WORK_TALLY = "RLSCOPE_WORK_TALLY"
# Size budget of the run directory in bytes (rls-prof --trace-budget; unset: every event
# kept): full events in detail windows only, aggregates always (docs/trace-format.md).
TRACE_BUDGET = "RLSCOPE_TRACE_BUDGET"
# The first period between detail windows, a window's length and the start window's
# longest, in ms (30000, 2000, no limit), and its largest in MB of the run directory
# (100; or 25% of the budget, if less): read by the native writer, for tests and benchmarks.
TRACE_PERIOD_MS = "RLSCOPE_TRACE_PERIOD_MS"
TRACE_WINDOW_MS = "RLSCOPE_TRACE_WINDOW_MS"
TRACE_START_MS = "RLSCOPE_TRACE_START_MS"
TRACE_START_MB = "RLSCOPE_TRACE_START_MB"
# The run's start (CLOCK_MONOTONIC ns; rls-prof): every process of the run opens its
# periodic detail windows at the same times from it.
RUN_START_NS = "RLSCOPE_RUN_START_NS"
CHUNK_DIR = "RLSCOPE_CALIBRATE_CHUNKS"  # chunk calibration: where the copies write
CHUNK_CONFIGS = "RLSCOPE_CHUNK_CONFIGS"  # JSON list of [name, record, call mask]
CHUNK_S = "RLSCOPE_CHUNK_S"
MAX_CHUNKS = "RLSCOPE_MAX_CHUNKS"
CHUNK_BUDGET_S = "RLSCOPE_CHUNK_BUDGET_S"  # wall seconds the chunk calibration run may take
CHUNK_SLICE_S = "RLSCOPE_CHUNK_SLICE_S"
CHUNK_VARIABLES = (CHUNK_DIR, CHUNK_CONFIGS, CHUNK_S, MAX_CHUNKS, CHUNK_BUDGET_S,
                   CHUNK_SLICE_S)

# Read by rls-prof.
CUDA_LIBRARY = "RLSCOPE_CUDA_LIBRARY"  # use this collector library instead of the bundled one
NVML_LIBRARY = "RLSCOPE_NVML_LIBRARY"  # the sampler's libnvidia-ml (default libnvidia-ml.so.1)
GPM_HZ = "RLSCOPE_GPM_HZ"  # the sampler's NVML GPM samples per second (default 1; 0: none)
# Seconds to wait, after the command exits, for the processes it started (default 10).
DESCENDANTS_WAIT = "RLSCOPE_DESCENDANTS_WAIT_S"

# Read by the CUDA collector only (native/cuda/config.cpp).
CUDA_BUFFER_BYTES = "RLSCOPE_CUDA_BUFFER_BYTES"
CUDA_NESTED = "RLSCOPE_CUDA_NESTED"
CUDA_VERBOSE = "RLSCOPE_CUDA_VERBOSE"
CUDA_SYNC_AT_EXIT = "RLSCOPE_CUDA_SYNC_AT_EXIT"
# "0": API callbacks only, no activity records (calibration's full-cuda-api configuration).
CUDA_ACTIVITY = "RLSCOPE_CUDA_ACTIVITY"
CUPTI_LIBRARY = "RLSCOPE_CUPTI_LIBRARY"

# Read by the native recorder at each recording start: "monotonic" times events with
# clock_gettime even where the TSC would do (native/common/ticks.h).
CLOCK = "RLSCOPE_CLOCK"

# Tests: fail instead of falling back to the Python recorder.
REQUIRE_NATIVE = "RLSCOPE_REQUIRE_NATIVE"
