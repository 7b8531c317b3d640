"""TensorFlow eager ops, gradients and tf.function calls as Backend time. Runs when the
tensorflow extra is installed (RLSCOPE_TEST_EXTRAS=test,tensorflow scripts/test.sh);
in a subprocess, so TensorFlow never loads into the test process."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import rlscope.analysis

pytest.importorskip("tensorflow")

CODE = textwrap.dedent("""
    import os, sys
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    import rlscope
    from rlscope import intercept
    intercept.enable("tensorflow")
    import tensorflow as tf
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    # Big enough that the kernels, not tf.function's Python dispatch, dominate.
    w = tf.Variable(tf.random.normal((256, 256)))
    x = tf.random.normal((512, 256))

    @tf.function
    def infer(x):
        return tf.reduce_sum(tf.tanh(x @ w))

    infer(x)  # trace outside the recording
    rlscope.start(sys.argv[1])
    for _ in range(20):
        with rlscope.operation("eager"):
            with tf.GradientTape() as tape:
                loss = tf.reduce_sum(tf.tanh(x @ w))
            tape.gradient(loss, w)
        with rlscope.operation("function"):
            infer(x)
    rlscope.stop()
""")


def test_tensorflow_eager_gradient_and_function(tmp_path: Path):
    out = tmp_path / "t"
    r = subprocess.run([sys.executable, "-c", CODE, str(out)], capture_output=True,
                       text=True, timeout=180)
    assert r.returncode == 0, r.stderr[-3000:]
    a = rlscope.analysis.load(out)
    ops = a.operations().set_index("operation")
    for op in ("eager", "function"):
        assert ops.loc[op, "backend_calls"] >= 20
        assert ops.loc[op, "backend_s"] > 0.3 * ops.loc[op, "wall_s"], ops.loc[op]
    from rlscope.trace.reader import read_trace

    (p,) = read_trace(out).processes
    names = {p.strings[int(n)] for k, n in zip(p.events.kind, p.events.name, strict=True)
             if int(k) == 16}
    assert {"tensorflow.TFE_Py_FastPathExecute", "tensorflow.TFE_Py_TapeGradient"} <= names
