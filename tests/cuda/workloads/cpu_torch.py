"""A small deterministic CPU-only PyTorch workload: prints values that must be identical
with and without rls-prof (the CUDA collector must not change anything)."""

import torch

torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
x, y = torch.randn(64, 16), torch.randn(64, 1)
for _ in range(50):
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"cuda_available={torch.cuda.is_available()} loss={loss.item():.10f}")
print(f"checksum={sum(float(p.double().sum()) for p in model.parameters()):.12f}")
