"""Records a little, says READY on stdout, then waits (at most 120 s) until the file
named by its first argument exists: a run that stays live as long as a test needs."""

import os
import sys
import time

import rlscope

go = sys.argv[1]
with rlscope.operation("before"):
    time.sleep(0.001)
rlscope.flush()
print("READY", os.getpid(), flush=True)
deadline = time.monotonic() + 120
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.02)
with rlscope.operation("after"):
    time.sleep(0.001)
