"""TensorFlow eager execution and function calls as Backend time.

Generated op wrappers call ``pywrap_tfe.TFE_Py_FastPathExecute`` (slow path
``TFE_Py_Execute``), looked up on the module at each call; gradients go through
``TFE_Py_TapeGradient``; ``tf.function`` / concrete function calls end in
``TFE_Py_Execute`` (or ``TFE_Py_ExecuteCancelable``) of the function's call op. Wrapping
every builtin of ``tensorflow.python.pywrap_tfe`` covers all of them.

Not covered: small ``EagerTensor`` helper methods (``numpy()``, ``shape``) and graph-mode
``Session.run`` (TF1).
"""

from __future__ import annotations

import sys
from types import ModuleType

from rlscope.intercept.patch import BACKEND, Patcher, public_builtins


def install(tf: ModuleType, p: Patcher) -> int:
    pywrap_tfe = sys.modules.get("tensorflow.python.pywrap_tfe")
    if pywrap_tfe is None:
        from tensorflow.python import pywrap_tfe  # type: ignore[no-redef]
    return p.patch_all(pywrap_tfe, public_builtins(pywrap_tfe), BACKEND, "tensorflow")
