"""An event-dense loop for the bounded-trace tests: ``step > inner`` operations in a
phase, a progress report every 1000 iterations, until SECONDS have passed or the file
STOP exists (checked every 1000 iterations). Writes its own count to OUT (JSON)."""

import json
import os
import sys
import time

import rlscope

seconds, out = float(sys.argv[1]), sys.argv[2]
stop = sys.argv[3] if len(sys.argv) > 3 else None
n = 0
t0 = time.perf_counter()
with rlscope.phase("train"):
    while True:
        with rlscope.operation("step"), rlscope.operation("inner"):
            pass
        n += 1
        if n % 1000 == 0:
            rlscope.report_progress(n)
            if time.perf_counter() - t0 >= seconds or (stop and os.path.exists(stop)):
                break
with open(out, "w") as f:
    json.dump({"iterations": n, "seconds": time.perf_counter() - t0}, f)
