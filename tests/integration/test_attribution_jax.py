"""JAX: calls of functions jitted after the hook are Backend time (runs when jax is
installed; in a subprocess)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rlscope.analysis

pytest.importorskip("jax")

CODE = textwrap.dedent("""
    import sys
    import rlscope
    from rlscope import intercept
    intercept.enable("jax")
    import jax, jax.numpy as jnp

    @jax.jit
    def step(x):
        return jnp.tanh(x @ x).sum()

    x = jnp.ones((64, 64))
    step(x).block_until_ready()  # compile outside the recording
    assert step.lower(x) is not None  # attributes forwarded
    rlscope.start(sys.argv[1])
    for _ in range(20):
        with rlscope.operation("jitted"):
            step(x).block_until_ready()
    rlscope.stop()
""")


def test_jitted_calls_are_backend(tmp_path: Path):
    out = tmp_path / "t"
    r = subprocess.run([sys.executable, "-c", CODE, str(out)], capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    row = rlscope.analysis.load(out).operations().set_index("operation").loc["jitted"]
    assert row["backend_calls"] >= 20 and row["backend_s"] > 0
