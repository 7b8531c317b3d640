"""DQN in TensorFlow: tf.Variables, GradientTape, Adam written out. The same code runs
eagerly or, with ``function=True``, with ``act`` and ``update`` each a tf.function (one
graph call per use, traced once: fixed input signatures)."""

from __future__ import annotations

import numpy as np
import tensorflow as tf
from common import OBS_DIM, Config


class TFAgent:
    def __init__(self, params: list[np.ndarray], cfg: Config, function: bool) -> None:
        tf.config.threading.set_intra_op_parallelism_threads(1)
        tf.config.threading.set_inter_op_parallelism_threads(1)
        self.cfg = cfg
        self.p = [tf.Variable(w) for w in params]
        self.t = [tf.Variable(w) for w in params]
        self.m = [tf.Variable(tf.zeros_like(w)) for w in params]
        self.v = [tf.Variable(tf.zeros_like(w)) for w in params]
        self.steps = tf.Variable(0.0)
        self._act, self._update, self._sync = self.act_, self.update_, self.sync_
        if function:
            b = cfg.batch
            self._act = tf.function(self.act_, input_signature=[
                tf.TensorSpec([OBS_DIM], tf.float32)])
            self._update = tf.function(self.update_, input_signature=[
                tf.TensorSpec([b, OBS_DIM], tf.float32), tf.TensorSpec([b], tf.int32),
                tf.TensorSpec([b], tf.float32), tf.TensorSpec([b, OBS_DIM], tf.float32),
                tf.TensorSpec([b], tf.float32)])
            self._sync = tf.function(self.sync_, input_signature=[])

    @staticmethod
    def q(params: list[tf.Variable], x: tf.Tensor) -> tf.Tensor:
        w1, b1, w2, b2, w3, b3 = params
        h = tf.nn.relu(tf.matmul(x, w1) + b1)
        h = tf.nn.relu(tf.matmul(h, w2) + b2)
        return tf.matmul(h, w3) + b3

    def act_(self, obs: tf.Tensor) -> tf.Tensor:
        return tf.argmax(self.q(self.p, tf.expand_dims(obs, 0))[0])

    def update_(self, obs: tf.Tensor, action: tf.Tensor, reward: tf.Tensor,
                next_obs: tf.Tensor, done: tf.Tensor) -> None:
        c = self.cfg
        target = reward + c.gamma * (1.0 - done) * tf.reduce_max(self.q(self.t, next_obs), 1)
        with tf.GradientTape() as tape:
            q = tf.gather(self.q(self.p, obs), action, batch_dims=1)
            d = q - target
            a = tf.abs(d)
            loss = tf.reduce_mean(tf.where(a < 1.0, 0.5 * d * d, a - 0.5))  # Huber
        grads = tape.gradient(loss, self.p)
        self.steps.assign_add(1.0)
        bc1 = 1.0 - tf.pow(c.adam_b1, self.steps)
        bc2 = 1.0 - tf.pow(c.adam_b2, self.steps)
        for p, g, m, v in zip(self.p, grads, self.m, self.v, strict=True):
            m.assign(c.adam_b1 * m + (1.0 - c.adam_b1) * g)
            v.assign(c.adam_b2 * v + (1.0 - c.adam_b2) * g * g)
            p.assign_sub((c.lr / bc1) * m / (tf.sqrt(v / bc2) + c.adam_eps))

    def sync_(self) -> None:
        for t, p in zip(self.t, self.p, strict=True):
            t.assign(p)

    def act(self, obs: np.ndarray) -> int:
        return int(self._act(obs))

    def update(self, batch: tuple[np.ndarray, ...]) -> None:
        self._update(*batch)

    def sync_target(self) -> None:
        self._sync()
