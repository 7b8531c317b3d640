"""Fixed work for chunk calibration: annotated steps of small torch calls (intercepted
as Backend) and a module's forward (a phase marker), progress every 5 steps."""

import argparse

import torch

import rlscope

torch.set_num_threads(1)
ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=400)
ap.add_argument("--tag", default="", help="ignored: lets a test find its processes")
args = ap.parse_args()
x = torch.zeros(16)
layer = torch.nn.Linear(16, 1)
for i in range(1, args.steps + 1):
    with rlscope.operation("step"):
        for _ in range(50):
            x = torch.add(x, 1.0)
        with torch.no_grad():
            layer(x)
    if i % 5 == 0:
        rlscope.report_progress(i, args.steps)
print("done", int(x[0]))
