"""A small PyTorch CUDA training loop with rlscope operations (for tests/gpu and
scripts/gpu_check.sh)."""

import json
import sys

import torch

import rlscope

steps = int(sys.argv[1]) if len(sys.argv) > 1 else 50
torch.manual_seed(0)
dev = torch.device("cuda")
model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(),
                            torch.nn.Linear(512, 8)).to(dev)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
x_host = torch.randn(128, 256)
with rlscope.phase("training"):
    for _ in range(steps):
        with rlscope.operation("simulation"):
            x = x_host.to(dev, non_blocking=False)  # HtoD copy
        with rlscope.operation("inference"):
            out = model(x)
        with rlscope.operation("backprop"):
            loss = out.square().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        with rlscope.operation("readback"):
            value = loss.item()  # DtoH copy + sync
torch.cuda.synchronize()
print(json.dumps({"steps": steps, "loss": value, "device": torch.cuda.get_device_name()}))
