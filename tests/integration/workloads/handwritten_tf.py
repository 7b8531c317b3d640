"""A hand-written Keras / GradientTape loop on CartPole (our own small code, CPU, fixed
seeds): act with the model, step the env, every few steps one gradient update on a
batch of recent observations (a regression to made-up targets: the phases matter here,
not learning).

Usage: handwritten_tf.py [--annotate] [--steps N]
"""

from __future__ import annotations

import argparse
import contextlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import gymnasium as gym
import numpy as np
import tensorflow as tf

ap = argparse.ArgumentParser()
ap.add_argument("--annotate", action="store_true")
ap.add_argument("--steps", type=int, default=400)
args = ap.parse_args()
if args.annotate:
    import rlscope

    op = rlscope.operation
else:
    _null = contextlib.nullcontext()

    def op(name: str) -> contextlib.nullcontext[None]:
        return _null

tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
tf.keras.utils.set_random_seed(0)
env = gym.make("CartPole-v1")
model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(64, "relu"),
                             tf.keras.layers.Dense(2)])
optimizer = tf.keras.optimizers.Adam(1e-3)
with op("simulation"):
    obs, _ = env.reset(seed=0)
recent: list[np.ndarray] = []
updates = 0
for step in range(args.steps):
    x = tf.convert_to_tensor(obs[None], tf.float32)
    with op("inference"):
        action = int(tf.argmax(model(x), axis=1)[0])
    with op("simulation"):
        obs, _, terminated, truncated, _ = env.step(action)
    recent.append(obs)
    if terminated or truncated:
        with op("simulation"):
            obs, _ = env.reset()
    if step % 8 == 7:
        batch = tf.convert_to_tensor(np.stack(recent[-32:]), tf.float32)
        with op("backprop"):
            with tf.GradientTape() as tape:
                loss = tf.reduce_mean(tf.square(model(batch) - 1.0))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        updates += 1
print(f"done: {args.steps} steps, {updates} updates")
