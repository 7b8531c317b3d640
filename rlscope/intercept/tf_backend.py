"""TensorFlow eager execution and function calls as Backend time.

Generated op wrappers call ``pywrap_tfe.TFE_Py_FastPathExecute`` (slow path
``TFE_Py_Execute``), looked up on the module at each call; gradients go through
``TFE_Py_TapeGradient``; ``tf.function`` / concrete function calls end in
``TFE_Py_Execute`` (or ``TFE_Py_ExecuteCancelable``) of the function's call op. Wrapping
every builtin of ``tensorflow.python.pywrap_tfe`` covers all of them.

Phase markers (MARK_CALL events; rlscope.analysis.inferred): ``GradientTape.__enter__``
(an update begins), and, through :func:`install_keras` when Keras is imported, the
outermost ``keras.Layer.__call__`` (a model's forward) and the optimizer's
``apply_gradients`` / ``apply``. The backward pass is the ``TFE_Py_TapeGradient`` call.

Not covered: small ``EagerTensor`` helper methods (``numpy()``, ``shape``) and graph-mode
``Session.run`` (TF1).
"""

from __future__ import annotations

import sys
from types import ModuleType

from rlscope.intercept.patch import BACKEND, MARK, Patcher, public_builtins


def install(tf: ModuleType, p: Patcher) -> int:
    pywrap_tfe = sys.modules.get("tensorflow.python.pywrap_tfe")
    if pywrap_tfe is None:
        from tensorflow.python import pywrap_tfe  # type: ignore[no-redef]
    n = p.patch_all(pywrap_tfe, public_builtins(pywrap_tfe), BACKEND, "tensorflow")
    backprop = sys.modules.get("tensorflow.python.eager.backprop")
    tape = getattr(backprop, "GradientTape", None)
    if isinstance(tape, type):
        n += p.patch(tape, "__enter__", MARK, "tensorflow.GradientTape")
    return n


def install_keras(keras: ModuleType, p: Patcher) -> int:
    """Keras 3 (``tf.keras`` with TensorFlow 2.16+, or standalone): phase markers."""
    n = 0
    layer = getattr(sys.modules.get("keras.src.layers.layer"), "Layer", None)
    opt = getattr(sys.modules.get("keras.src.optimizers.base_optimizer"), "BaseOptimizer", None)
    if not isinstance(layer, type) or not isinstance(opt, type):
        return 0  # Keras 2 (tf-keras): not marked
    n += p.patch(layer, "__call__", MARK, "keras.Layer")
    for attr in ("apply_gradients", "apply"):  # apply_gradients calls apply: counted once
        n += p.patch(opt, attr, MARK, "keras.Optimizer.apply")
    return n
