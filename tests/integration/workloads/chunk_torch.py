"""Fixed work for chunk calibration: annotated steps of small torch calls (intercepted
as Backend), progress every 5 steps."""

import argparse

import torch

import rlscope

torch.set_num_threads(1)
ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=400)
ap.add_argument("--tag", default="", help="ignored: lets a test find its processes")
args = ap.parse_args()
x = torch.zeros(16)
for i in range(1, args.steps + 1):
    with rlscope.operation("step"):
        for _ in range(50):
            x = torch.add(x, 1.0)
    if i % 5 == 0:
        rlscope.report_progress(i, args.steps)
print("done", int(x[0]))
