"""A batch of N CartPoles as torch tensors, stepped eagerly: every arithmetic operation
of one step is its own call into PyTorch, whatever N is."""

from __future__ import annotations

import physics as P
import torch


class TorchCartPole:
    def __init__(self, n: int, seed: int) -> None:
        torch.set_num_threads(1)
        self.gen = torch.Generator().manual_seed(seed)
        self.n = n
        self.state = self._reset_state()
        self.t = torch.zeros(n, dtype=torch.int32)

    def _reset_state(self) -> torch.Tensor:
        u = torch.rand((self.n, 4), generator=self.gen)
        return u * (P.RESET_HIGH - P.RESET_LOW) + P.RESET_LOW

    def step(self) -> tuple[torch.Tensor, torch.Tensor]:
        """One step of every env with random actions; returns (reward, done)."""
        action = torch.randint(0, 2, (self.n,), generator=self.gen)
        x, x_dot, theta, theta_dot = self.state.unbind(1)
        force = (action * 2 - 1) * P.FORCE_MAG
        cos, sin = torch.cos(theta), torch.sin(theta)
        temp = (force + P.POLEMASS_LENGTH * theta_dot * theta_dot * sin) / P.TOTAL_MASS
        theta_acc = (P.GRAVITY * sin - cos * temp) / (
            P.LENGTH * (4.0 / 3.0 - P.MASS_POLE * cos * cos / P.TOTAL_MASS))
        x_acc = temp - P.POLEMASS_LENGTH * theta_acc * cos / P.TOTAL_MASS
        x = x + P.TAU * x_dot
        x_dot = x_dot + P.TAU * x_acc
        theta = theta + P.TAU * theta_dot
        theta_dot = theta_dot + P.TAU * theta_acc
        state = torch.stack((x, x_dot, theta, theta_dot), 1)
        self.t = self.t + 1
        terminated = (x.abs() > P.X_LIMIT) | (theta.abs() > P.THETA_LIMIT)
        done = terminated | (self.t >= P.MAX_STEPS)
        self.state = torch.where(done.unsqueeze(1), self._reset_state(), state)
        self.t = torch.where(done, 0, self.t)
        return torch.ones(self.n), done

    def steps(self, k: int) -> None:
        for _ in range(k):
            self.step()

    def sync(self) -> None:
        """Eager CPU ops finish before they return: nothing to wait for."""
