"""The CUDA calibration workload: a fixed number of kernel launches through the fake
libcupti (argv[1]), in argv[2] steps of argv[3] launches, each step one operation. The
fake burns a scripted CPU cost per API callback and per activity record
(FAKE_CUPTI_*_COST_NS), which calibration must find again; prints how long those burns
really took (means) as one JSON line."""

from __future__ import annotations

import ctypes
import json
import sys

import rlscope

cupti = ctypes.CDLL(sys.argv[1])
steps, per_step = int(sys.argv[2]), int(sys.argv[3])
cupti.fake_launch_loop.argtypes = [ctypes.c_uint64, ctypes.c_uint64]
cupti.fake_burn_mean.restype = ctypes.c_uint64
cupti.cuptiActivityFlushAll.argtypes = [ctypes.c_uint32]
cupti.fake_cuInit()
for _ in range(steps):
    with rlscope.operation("step"):
        cupti.fake_launch_loop(per_step, 2000)
cupti.cuptiActivityFlushAll(0)
# What each injected cost really was (see fake_burn_mean), for the test to compare.
print(json.dumps({"callback_burn_ns": cupti.fake_burn_mean(0),
                  "record_burn_ns": cupti.fake_burn_mean(1)}))
