"""A Python helper process run to completion at start-up (as some libraries probe the
interpreter with ``python -c 'import sys'``), then progress reports with no child alive:
forked chunk copies share nothing, so chunks can calibrate it."""

import subprocess
import sys

import rlscope

subprocess.run([sys.executable, "-c", "import sys"], check=True)
acc = 0
for i in range(1, 2001):
    with rlscope.operation("step"):
        for j in range(2000):
            acc += j * i
    if i % 10 == 0:
        rlscope.report_progress(i, 2000)
print("done")
