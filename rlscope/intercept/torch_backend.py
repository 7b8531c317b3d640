"""PyTorch: the C entry points user code and torch.nn reach, as Backend time.

Wrapped (once, right after ``import torch``, before any warm-up: patching ``torch.Tensor``
invalidates type caches):
- every op of ``torch._C._VariableFunctions`` where torch exposes it (``torch.add``,
  ``torch._foreach_mul_`` used by optimizers, ``torch._VF.lstm``);
- the builtins bound in ``torch.nn.functional``, ``torch._C._nn``, ``torch.linalg``,
  ``torch.fft`` and ``torch.special`` (bound early from C modules);
- C-implemented Tensor methods, set on ``torch.Tensor`` so that operators (``a + b``,
  ``a[i]``), which go through type slots, reach them too;
- the autograd engine's ``run_backward`` (``loss.backward()``, ``torch.autograd.grad``).

Phase markers (MARK_CALL events, the outermost per thread; analysis infers the
``inference`` and ``backprop`` operations from them: rlscope.analysis.inferred):
``nn.Module.__call__`` (a forward), ``Optimizer.step`` (the ``step`` torch wraps in each
optimizer class at its first instance), ``Optimizer.zero_grad`` and
``nn.Module.zero_grad``.

Not covered: names bound before the import hook ran (``from torch._C import X`` at import
time of another module imported before torch finished), torch.compile / TorchScript
(they look builtins up by identity), and C++ work that Python never calls directly.
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from rlscope.intercept.patch import BACKEND, MARK, Patcher, is_wrapper, public_builtins, wrappable

# TensorBase entries that are object protocol or construction, not compute.
_TENSOR_SKIP = frozenset({
    "__new__", "__init__", "__getattribute__", "__setattr__", "__delattr__", "__repr__",
    "__str__", "__hash__", "__reduce__", "__reduce_ex__", "__getstate__", "__setstate__",
    "__sizeof__", "__dir__", "__format__", "__init_subclass__", "__subclasshook__",
    "__class_getitem__", "__torch_function__", "__torch_dispatch__", "_make_subclass",
    "_make_wrapper_subclass", "_dtensor__new__", "__dlpack__", "__dlpack_device__",
    "__array__", "__array_wrap__", "__deepcopy__", "__doc__",
})


class _EngineProxy:
    """Stands in for ``Variable._execution_engine`` (a C type's instance whose methods
    cannot be replaced): ``run_backward`` is wrapped, everything else forwarded."""

    def __init__(self, engine: Any, run_backward: Any) -> None:
        self._rlscope_engine = engine
        self.run_backward = run_backward

    def __getattr__(self, name: str) -> Any:
        return getattr(self._rlscope_engine, name)


def install(torch: ModuleType, p: Patcher) -> int:
    """Wrap torch's entry points; returns how many attributes were replaced."""
    import sys

    n = 0
    vf = torch._C._VariableFunctions
    ops = [name for name in dir(vf) if not name.startswith("__")]
    n += p.patch_all(torch, [o for o in ops if o in vars(torch)], BACKEND, "torch")
    vf_module = sys.modules.get("torch._VF")
    if vf_module is not None:
        # torch._VF forwards unknown names to _VariableFunctions; our attributes win.
        for o in ops:
            raw = getattr(vf, o, None)
            if wrappable(raw):
                w = p.wrapper_for(raw, BACKEND, f"torch.{o}")
                p.add(vf_module, o, w)
    for mod, prefix in ((torch._C._nn, "torch.nn.functional"),
                        (sys.modules.get("torch.nn.functional"), "torch.nn.functional"),
                        (sys.modules.get("torch.linalg"), "torch.linalg"),
                        (sys.modules.get("torch.fft"), "torch.fft"),
                        (sys.modules.get("torch.special"), "torch.special")):
        if mod is not None:
            n += p.patch_all(mod, public_builtins(mod), BACKEND, prefix)
    n += _install_tensor_methods(torch, p)
    n += _install_engine(p)
    n += _install_markers(torch, p)
    return n


# Names of the phase markers (their roles: rlscope.trace.format.MARK_*).
MARK_FORWARD = "torch.nn.Module"
MARK_STEP = "torch.optim.Optimizer.step"
MARK_ZERO_GRAD = "torch.optim.Optimizer.zero_grad"


def _install_markers(torch: ModuleType, p: Patcher) -> int:
    n = int(p.patch(torch.nn.Module, "__call__", MARK, MARK_FORWARD))
    n += p.patch(torch.nn.Module, "zero_grad", MARK, MARK_ZERO_GRAD)
    optim = getattr(torch, "optim", None)
    opt = getattr(optim, "Optimizer", None)
    if not isinstance(opt, type):
        return n
    n += p.patch(opt, "zero_grad", MARK, MARK_ZERO_GRAD)
    orig = opt.__dict__.get("_patch_step_function")
    if callable(orig) and not getattr(orig, "_rlscope_marks", False):
        def _patch_step_function(self: Any) -> None:
            orig(self)  # torch wraps the class's step once (profile_hook_step)
            _mark_step(p, type(self))

        _patch_step_function._rlscope_marks = True  # type: ignore[attr-defined]
        p.replace(opt, "_patch_step_function", _patch_step_function)
        n += 1
    todo: list[type] = list(opt.__subclasses__())  # optimizers made before interception
    while todo:
        cls = todo.pop()
        todo += cls.__subclasses__()
        n += _mark_step(p, cls)
    return n


def _mark_step(p: Patcher, cls: type) -> int:
    raw = cls.__dict__.get("step")
    if raw is None or is_wrapper(raw) or not getattr(raw, "hooked", False):
        return 0
    return int(p.patch(cls, "step", MARK, MARK_STEP))


def _install_tensor_methods(torch: ModuleType, p: Patcher) -> int:
    base = torch._C.TensorBase
    tensor = torch.Tensor
    names = [name for name in base.__dict__
             if name not in _TENSOR_SKIP and name not in tensor.__dict__]
    return p.patch_all(tensor, names, BACKEND, "torch.Tensor")


def _install_engine(p: Patcher) -> int:
    try:
        from torch.autograd.variable import Variable
    except ImportError:
        return 0
    engine = Variable.__dict__.get("_execution_engine")
    if engine is None or isinstance(engine, _EngineProxy):
        return 0
    run = p.wrapper_for(engine.run_backward, BACKEND, "torch.autograd.backward")
    p.replace(Variable, "_execution_engine", _EngineProxy(engine, run))
    return 1
