#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: build rlscope, run the real-GPU suite (tests/gpu) and
# print a summary of a traced PyTorch CUDA run, the sampled-vs-true utilisation of a
# short-kernels loop, and the sampler's cost with the real NVML. See docs/cuda.md.
#   scripts/gpu_check.sh [steps]
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${RLSCOPE_VENV:-.venv}"
[ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import rlscope._native" 2>/dev/null \
  || scripts/setup.sh test
PY="$VENV/bin/python"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true
"$PY" - <<'PY'
import torch
from rlscope.launch.child_env import cuda_library
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, GPU available: {torch.cuda.is_available()}")
print(f"librlscope_cuda: {cuda_library() or 'NOT BUILT (no CUPTI headers at build time)'}")
PY
# A failing test still lets the summaries below print; the script exits with its status.
tests=0
"$PY" -m pytest -q -rs -s -p no:cacheprovider tests/gpu tests/cuda || tests=$?
out="$(mktemp -d)/run"
"$VENV/bin/rls-prof" -o "$out" -- "$PY" tests/gpu/workloads/torch_cuda_train.py "${1:-200}"
"$PY" - "$out" <<'PY'
import sys
import numpy as np
from rlscope.trace import gpu as g
from rlscope.trace.reader import read_trace
t = read_trace(sys.argv[1])
for p in t.processes:
    a, k = p.api_calls, p.gpu
    print(f"pid {p.pid}: {len(a)} CUDA API calls, {len(k)} GPU records")
    if p.cuda:
        c = p.cuda
        print(f"  CUPTI {c.cupti_version}, clock offset error {c.cupti_offset_error_ns} ns, "
              f"dropped api={c.dropped_api_calls} activity={c.dropped_activity_records} "
              f"invalid={c.invalid_activity_records}")
    names, counts = np.unique([a.strings[n] for n in a.name], return_counts=True)
    for n, c in sorted(zip(names, counts), key=lambda x: -x[1])[:8]:
        print(f"  {c:7d} x {n}")
    for kind, label in g.GPU_KIND_NAMES.items():
        sel = k.kind == kind
        busy = (k.end_ns[sel] - k.start_ns[sel]).sum() / 1e6
        print(f"  {label:7s} {sel.sum():7d} records, {busy:.1f} ms")
    corr = np.isin(k.correlation_id, a.correlation_id).mean() if len(k) else 0
    print(f"  GPU records correlated to an API call: {corr:.1%}")
    for w in p.warnings:
        print(f"  warning: {w}")
PY
"$VENV/bin/rls-analyze" report "$out"
# Sampled (NVML) vs true (CUPTI) GPU time: tiny kernels in a CPU-bound loop.
short="$(mktemp -d)/short"
"$VENV/bin/rls-prof" -o "$short" --sample-hz 20 -- "$PY" tests/gpu/workloads/torch_short_kernels.py 5
"$VENV/bin/rls-analyze" report "$short" | sed -n '/^Utilisation:/,/^$/p'
# What the sampler costs with the driver's NVML (docs/performance.md).
"$PY" scripts/bench/sampler_overhead.py --rounds 5 --nvml real
[ "$tests" = 0 ] || echo "gpu_check: tests failed (pytest exit status $tests)"
exit "$tests"
