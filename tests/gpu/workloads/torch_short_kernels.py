"""Short kernels in a CPU-bound loop on a real GPU (tests/gpu, scripts/gpu_check.sh):
each step spins the CPU ~1 ms and launches one tiny kernel, so the GPU is busy well
under 5% of the time while NVML's utilisation says it is often busy."""

import json
import sys
import time

import torch

import rlscope

seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 3.0
x = torch.zeros(1024, device="cuda")
torch.cuda.synchronize()
n = 0
with rlscope.phase("training"):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        spin = time.perf_counter() + 0.001
        while time.perf_counter() < spin:
            pass
        x.add_(1)
        n += 1
    torch.cuda.synchronize()
print(json.dumps({"steps": n}))
