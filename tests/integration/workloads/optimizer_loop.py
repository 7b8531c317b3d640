"""A small torch training loop with no rlscope code and no progress reports:
``python optimizer_loop.py N [M]`` (N optimizer steps of a small MLP on a fixed batch;
M instead when rlscope records the process: a command whose work is not the same in
every run; prints "done" at the end)."""

import os
import sys

import torch

if __name__ == "__main__":
    n = int(sys.argv[1])
    if len(sys.argv) > 2 and os.environ.get("RLSCOPE_OUTPUT_DIR"):
        n = int(sys.argv[2])
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    x, y = torch.randn(256, 8), torch.randn(256, 1)
    for _ in range(n):
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("done", float(loss))
