"""What runs inside TensorFlow's single backend calls of the DQN (rlscope counts each as
one Backend transition and does not look inside):

* the eager backward pass, one ``TFE_Py_TapeGradient`` call: how many eager ops it runs
  through ``TFE_Py_FastPathExecute``, and how much of its time those ops take (the rest
  is the Python gradient functions and the tape's own work);
* a ``tf.function`` call, one ``TFE_Py_Execute``: how many operations its graph holds.

    python scripts/case_studies/dqn/tf_inside.py [--updates 300]

Prints ``tape: updates=... gradient_us=... nested_ops=... nested_op_us=...
outside_ops_pct=...`` (per update) and ``graph: act_ops=... update_ops=...
update_compute_ops=...`` (compute: not placeholders, constants, identities or no-ops).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from common import Config, init_params, pin_threads


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--updates", type=int, default=300)
    args = ap.parse_args()
    pin_threads()
    from agent_tf import TFAgent
    from tensorflow.python import pywrap_tfe
    from tensorflow.python.eager import imperative_grad

    cfg = Config()
    agent = TFAgent(init_params(cfg, 0), cfg, function=False)
    rng = np.random.default_rng(0)
    b = cfg.batch
    batch = (rng.normal(size=(b, 4)).astype(np.float32), rng.integers(0, 2, b, np.int32),
             np.ones(b, np.float32), rng.normal(size=(b, 4)).astype(np.float32),
             np.zeros(b, np.float32))
    agent.update(batch)

    state = {"inside": False, "ops": 0, "op_s": 0.0, "grad_s": 0.0}
    fast = pywrap_tfe.TFE_Py_FastPathExecute
    tape_gradient = pywrap_tfe.TFE_Py_TapeGradient

    def counting_fast(*a, **k):
        if not state["inside"]:
            return fast(*a, **k)
        t = time.perf_counter()
        try:
            return fast(*a, **k)
        finally:
            state["ops"] += 1
            state["op_s"] += time.perf_counter() - t

    def timed_gradient(*a, **k):
        state["inside"] = True
        t = time.perf_counter()
        try:
            return tape_gradient(*a, **k)
        finally:
            state["grad_s"] += time.perf_counter() - t
            state["inside"] = False

    # Generated ops and imperative_grad look both up on the module at each call.
    pywrap_tfe.TFE_Py_FastPathExecute = counting_fast
    assert imperative_grad.pywrap_tfe is pywrap_tfe
    pywrap_tfe.TFE_Py_TapeGradient = timed_gradient
    for _ in range(args.updates):
        agent.update(batch)
    n = args.updates
    outside = 1 - state["op_s"] / state["grad_s"] if state["grad_s"] else float("nan")
    print(f"tape: updates={n} gradient_us={1e6 * state['grad_s'] / n:.1f} "
          f"nested_ops={state['ops'] / n:.1f} nested_op_us={1e6 * state['op_s'] / n:.1f} "
          f"outside_ops_pct={100 * outside:.0f}")
    graph = TFAgent(init_params(cfg, 0), cfg, function=True)
    act_ops = graph._act.get_concrete_function().graph.get_operations()
    update_ops = graph._update.get_concrete_function().graph.get_operations()
    skip = {"Placeholder", "Const", "Identity", "NoOp"}
    print(f"graph: act_ops={len(act_ops)} update_ops={len(update_ops)} "
          f"update_compute_ops={sum(o.type not in skip for o in update_ops)}")


if __name__ == "__main__":
    main()
