"""Fixed work for calibration tests: annotated iterations, progress every 50; without a
bound it runs --iterations, with RLSCOPE_MAX_PROGRESS it stops early."""

import argparse

import rlscope

ap = argparse.ArgumentParser()
ap.add_argument("--iterations", type=int, default=2000)
args = ap.parse_args()
acc = 0
for i in range(1, args.iterations + 1):
    with rlscope.operation("step"):
        for j in range(200):
            acc += j * i
    if i % 50 == 0:
        rlscope.report_progress(i, args.iterations)
print("done", i)
