"""A JAX loop on a MuJoCo MJX env (CPU), no rlscope import: ``jax.jit(mjx.step)`` stepped
from Python, a jitted policy choosing the controls. It times itself with
time.perf_counter around the real calls (each blocked until ready) and writes JSON:
``env_calls``, ``env_s`` (all env steps), ``first_env_s`` (the first, which compiles),
``steady_env_s`` (median of the rest), ``forwards``.

    jax_env_loop.py OUT.json [STEPS]
"""

from __future__ import annotations

import json
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import mujoco
from mujoco import mjx

OUT = sys.argv[1]
STEPS = int(sys.argv[2]) if len(sys.argv) > 2 else 200
XML = """
<mujoco>
  <option timestep="0.01"/>
  <worldbody>
    <body name="pole" pos="0 0 1">
      <joint name="hinge" type="hinge" axis="0 1 0"/>
      <geom type="capsule" fromto="0 0 0 0 0 0.5" size="0.05" mass="1"/>
    </body>
  </worldbody>
  <actuator><motor joint="hinge" gear="1"/></actuator>
</mujoco>
"""

m = mujoco.MjModel.from_xml_string(XML)
mx = mjx.put_model(m)
dx = mjx.put_data(m, mujoco.MjData(m))
step = jax.jit(mjx.step)
w = jnp.full((2, 1), 0.1)


@jax.jit
def policy(qpos: jax.Array, qvel: jax.Array) -> jax.Array:
    return jnp.tanh(jnp.concatenate([qpos, qvel]) @ w)


perf = time.perf_counter
times: list[float] = []
forwards = 0
for _ in range(STEPS):
    ctrl = policy(dx.qpos, dx.qvel).block_until_ready()
    forwards += 1
    dx = dx.replace(ctrl=ctrl)
    t0 = perf()
    dx = step(mx, dx)
    dx.qpos.block_until_ready()
    times.append(perf() - t0)

with open(OUT, "w") as f:
    json.dump({"env_calls": len(times), "env_s": sum(times), "first_env_s": times[0],
               "steady_env_s": statistics.median(times[1:]), "forwards": forwards}, f)
