"""DQN in eager PyTorch: plain tensors and autograd, Adam written out (the same update the
TensorFlow and JAX versions make), in-place updates under no_grad."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from common import Config


class TorchAgent:
    def __init__(self, params: list[np.ndarray], cfg: Config) -> None:
        torch.set_num_threads(1)
        self.cfg = cfg
        self.p = [torch.tensor(w, requires_grad=True) for w in params]
        self.t = [w.detach().clone() for w in self.p]
        self.m = [torch.zeros_like(w) for w in self.p]
        self.v = [torch.zeros_like(w) for w in self.p]
        self.steps = 0

    @staticmethod
    def q(params: list[torch.Tensor], x: torch.Tensor) -> torch.Tensor:
        w1, b1, w2, b2, w3, b3 = params
        h = torch.relu(x @ w1 + b1)
        h = torch.relu(h @ w2 + b2)
        return h @ w3 + b3

    def act(self, obs: np.ndarray) -> int:
        with torch.no_grad():
            return int(self.q(self.p, torch.as_tensor(obs)).argmax())

    def update(self, batch: tuple[np.ndarray, ...]) -> None:
        c = self.cfg
        obs, action, reward, next_obs, done = (torch.as_tensor(x) for x in batch)
        with torch.no_grad():
            best = self.q(self.t, next_obs).max(dim=1).values
            target = reward + c.gamma * (1.0 - done) * best
        q = self.q(self.p, obs).gather(1, action.long().unsqueeze(1)).squeeze(1)
        loss = F.smooth_l1_loss(q, target)
        grads = torch.autograd.grad(loss, self.p)
        self.steps += 1
        bc1, bc2 = 1.0 - c.adam_b1 ** self.steps, 1.0 - c.adam_b2 ** self.steps
        with torch.no_grad():
            for p, g, m, v in zip(self.p, grads, self.m, self.v, strict=True):
                m.mul_(c.adam_b1).add_(g, alpha=1.0 - c.adam_b1)
                v.mul_(c.adam_b2).addcmul_(g, g, value=1.0 - c.adam_b2)
                p.sub_((c.lr / bc1) * m / (v / bc2).sqrt_().add_(c.adam_eps))

    def sync_target(self) -> None:
        with torch.no_grad():
            for t, p in zip(self.t, self.p, strict=True):
                t.copy_(p)
