"""Kernel launches through the fake libcupti (argv[1]) for argv[2] seconds, argv[3] at a
time with argv[4] µs of CPU work between (as a training loop launches them); prints the
launches and seconds as one JSON line."""

from __future__ import annotations

import ctypes
import json
import sys
import time

cupti = ctypes.CDLL(sys.argv[1])
seconds, batch, gap_s = float(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]) / 1e6
cupti.fake_launch_loop.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
cupti.fake_cuInit()
n = 0
t0 = now = time.perf_counter()
while now - t0 < seconds:
    cupti.fake_launch_loop(batch, 2000)
    n += batch
    spin = time.perf_counter() + gap_s
    while (now := time.perf_counter()) < spin:
        pass
print(json.dumps({"launches": n, "seconds": now - t0}))
