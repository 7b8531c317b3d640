"""An unmodified stable-baselines3 script (no rlscope import): PPO or another algorithm
on a small budget. Usage: sb3_ppo.py [ALGO] [TIMESTEPS]"""

import sys

import torch
from stable_baselines3 import A2C, DQN, PPO, SAC, TD3

torch.set_num_threads(1)
algo = sys.argv[1] if len(sys.argv) > 1 else "PPO"
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 256
if algo in ("PPO", "A2C"):
    model = {"PPO": PPO, "A2C": A2C}[algo]("MlpPolicy", "CartPole-v1", n_steps=64, seed=0,
                                           **({"batch_size": 32, "n_epochs": 2}
                                              if algo == "PPO" else {}))
elif algo == "DQN":
    model = DQN("MlpPolicy", "CartPole-v1", learning_starts=32, train_freq=4, seed=0,
                policy_kwargs={"net_arch": [32, 32]})
else:
    model = {"SAC": SAC, "TD3": TD3}[algo]("MlpPolicy", "Pendulum-v1", learning_starts=32,
                                           seed=0, policy_kwargs={"net_arch": [32, 32]})
model.learn(total_timesteps=steps)
print("done")
