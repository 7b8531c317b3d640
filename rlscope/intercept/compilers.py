"""The JIT compilers' own hooks, as compile records (rlscope.intercept.compile_record).

Each runs only when its framework compiles, never per call, and records nothing while
no recording is active:

- torch.compile (library ``torch-compile``, on ``import torch._dynamo``): dynamo's
  compile callbacks (``torch._dynamo.callback.callback_handler``: one start/end pair per
  frame compiled, dynamo + AOTAutograd + inductor, and per lazily compiled backward);
  the guard failure that caused a recompile (``convert_frame``'s
  ``get_and_maybe_log_recompilation_reasons``); graph breaks (``counters``).
- jax.jit (``jax-compile``, on ``import jax``): ``jax.monitoring`` duration events:
  tracing to a jaxpr, lowering to MLIR, XLA compilation (persistent-cache hits marked).
  JAX does not say why it retraced without ``jax_explain_cache_misses`` (which logs).
- tf.function (``tf-compile``, on ``import tensorflow``): ``tracing_compilation``'s
  ``_create_concrete_function`` (a trace: a cache miss), outermost per thread; a retrace
  names the input signature that differed; and the new function's first call (graph
  instantiation and optimisation, its execution included), timed once.
"""

from __future__ import annotations

import sys
import threading
import time
from types import FrameType, ModuleType
from typing import Any

from rlscope.intercept import compile_record
from rlscope.intercept.patch import Patcher

_local = threading.local()
# Switched on by an installer through Patcher.replace, so disabling interception puts it
# back (JAX keeps its listeners: they test this flag).
_jax_on = False


def _now() -> int:
    return time.perf_counter_ns()  # CLOCK_MONOTONIC, the recorders' clock


# -- torch.compile ---------------------------------------------------------------------
def _frame_name(limit: int = 16) -> str:
    """The name of the code dynamo compiles: ``_compile``'s ``code`` argument, a few
    frames up from the start callback (once per compile)."""
    f: FrameType | None = sys._getframe(2)
    for _ in range(limit):
        if f is None:
            break
        if f.f_code.co_name == "_compile":
            local = f.f_locals
            code = local.get("code")
            name = getattr(code, "co_qualname", None) or getattr(code, "co_name", None)
            if name == "wrap_inline.<locals>.inner":  # a compiled nn.Module: its wrapper
                fn = getattr(local.get("frame"), "f_locals", {}).get("fn")
                owner = getattr(fn, "__self__", None)
                if owner is not None:  # a bound method: Policy.forward
                    return f"{type(owner).__qualname__}.{getattr(fn, '__name__', '')}"
                if fn is not None:  # the module itself: its class
                    return str(getattr(fn, "__qualname__", None) or type(fn).__qualname__)
            if isinstance(name, str):
                return name
        f = f.f_back
    return ""


def _graph_breaks(torch_dynamo: Any) -> int:
    try:
        return int(sum(torch_dynamo.utils.counters["graph_break"].values()))
    except Exception:
        return 0


def install_torch(dynamo: ModuleType, p: Patcher) -> int:
    handler: Any = getattr(getattr(dynamo, "callback", None), "callback_handler", None)
    if not (callable(getattr(handler, "run_start_callbacks", None))
            and callable(getattr(handler, "run_end_callbacks", None))):
        return 0  # a torch without dynamo's compile callbacks (before 2.2)
    if getattr(handler.run_start_callbacks, "_rlscope", False):
        return 0
    run_start, run_end = handler.run_start_callbacks, handler.run_end_callbacks

    def start(*args: Any, **kwargs: Any) -> Any:
        try:
            trigger = getattr(getattr(args[0], "callback_trigger", None), "name", "DYNAMO") \
                if args else "DYNAMO"
            name = "backward" if trigger == "LAZY_BACKWARD" else _frame_name()
            stack = _local.__dict__.setdefault("torch", [])
            # the guard failure that made dynamo compile again: found just before
            reason = _local.__dict__.pop("torch_reason", "")
            stack.append((_now(), trigger, name, _graph_breaks(dynamo), reason))
        except Exception:
            pass
        return run_start(*args, **kwargs)

    def end(*args: Any, **kwargs: Any) -> Any:
        try:
            return run_end(*args, **kwargs)
        finally:
            stack = _local.__dict__.get("torch")
            if stack:
                begin, trigger, name, breaks, reason = stack.pop()
                cid = str(getattr(args[0], "compile_id", "")) if args else ""
                kind = {"DYNAMO": "compile", "LAZY_BACKWARD": "backward"}.get(
                    trigger, trigger.lower())
                compile_record.record("torch", name or cid, begin, _now(), reason, kind,
                                      graph_breaks=_graph_breaks(dynamo) - breaks)

    start._rlscope = True  # type: ignore[attr-defined]
    # Instance attributes over the class's methods: torch._dynamo.reset() clears the
    # registered callbacks, not these; disabling deletes them.
    p.add(handler, "run_start_callbacks", start)
    p.add(handler, "run_end_callbacks", end)
    n = 2
    convert = sys.modules.get("torch._dynamo.convert_frame")
    reasons = getattr(convert, "get_and_maybe_log_recompilation_reasons", None)
    if callable(reasons):
        def recompilation_reasons(*args: Any, **kwargs: Any) -> Any:
            out = reasons(*args, **kwargs)
            try:
                if out:
                    _local.torch_reason = str(out[0])
            except Exception:
                pass
            return out

        p.replace(convert, "get_and_maybe_log_recompilation_reasons", recompilation_reasons)
        n += 1
    return n


# -- jax.jit ---------------------------------------------------------------------------
_JAX_STAGES = {
    "/jax/core/compile/jaxpr_trace_duration": "trace",
    "/jax/core/compile/jaxpr_to_mlir_module_duration": "lower",
    "/jax/core/compile/backend_compile_duration": "compile",
}
_JAX_HIT = "/jax/compilation_cache/cache_hits"
_jax_registered = False


def _jax_duration(event: str, duration_secs: float, **kwargs: Any) -> None:
    if not _jax_on:
        return
    kind = _JAX_STAGES.get(event)
    if kind is None:
        return
    end = _now()
    counts = kind == "compile"
    if counts and _local.__dict__.pop("jax_hit", False):
        kind = "cache hit"  # the persistent compilation cache had it
    name = str(kwargs.get("fun_name", ""))
    if name.startswith("jit(") and name.endswith(")"):
        name = name[4:-1]  # lowering and compiling say jit(f), tracing says f
    compile_record.record("jax", name,
                          end - int(duration_secs * 1e9), end, "", kind, counts)


def _jax_event(event: str, **kwargs: Any) -> None:
    if _jax_on and event == _JAX_HIT:
        _local.jax_hit = True


def install_jax(jax: ModuleType, p: Patcher) -> int:
    global _jax_registered
    monitoring = getattr(jax, "monitoring", None)
    if monitoring is None:
        return 0
    if not _jax_registered:
        monitoring.register_event_duration_secs_listener(_jax_duration)
        monitoring.register_event_listener(_jax_event)
        _jax_registered = True
    p.replace(sys.modules[__name__], "_jax_on", True)
    return 1


# -- tf.function -----------------------------------------------------------------------
def _time_first_run(cf: Any, name: str) -> None:
    """Time a new concrete function's first call (TensorFlow instantiates and optimises
    its graph then; the execution is included) through an instance attribute that
    removes itself: later calls are the class's method, untouched."""
    call_flat = cf._call_flat

    def first_call(*args: Any, **kwargs: Any) -> Any:
        try:
            del cf._call_flat
        except AttributeError:
            pass
        begin = _now()
        try:
            return call_flat(*args, **kwargs)
        finally:
            compile_record.record("tensorflow", name, begin, _now(), "", "first run",
                                  counts=False)

    cf._call_flat = first_call


def install_tf(tf: ModuleType, p: Patcher) -> int:
    tc = sys.modules.get("tensorflow.python.eager.polymorphic_function.tracing_compilation")
    create = getattr(tc, "_create_concrete_function", None)
    if not callable(create) or getattr(create, "_rlscope", False):
        return 0
    seen: dict[str, str] = {}  # function -> the input signature it was last traced for

    def _create_concrete_function(*args: Any, **kwargs: Any) -> Any:
        depth = _local.__dict__.get("tf_depth", 0)
        _local.tf_depth = depth + 1
        begin = _now()
        cf = None
        try:
            cf = create(*args, **kwargs)
            return cf
        finally:
            _local.tf_depth = depth
            if depth == 0:
                try:
                    # (function_type, type_context, func_graph, tracing_options)
                    function_type = args[0] if args else kwargs.get("function_type")
                    tracing_options = (args[3] if len(args) > 3
                                       else kwargs.get("tracing_options"))
                    name = str(getattr(tracing_options, "name", "") or "")
                    sig = str(function_type)
                    before = seen.get(name)
                    seen[name] = sig
                    reason = (f"input signature changed: {before} -> {sig}"
                              if before is not None and before != sig else "")
                    compile_record.record("tensorflow", name, begin, _now(), reason,
                                          "trace")
                    if cf is not None:
                        _time_first_run(cf, name)
                except Exception:
                    pass

    _create_concrete_function._rlscope = True  # type: ignore[attr-defined]
    p.replace(tc, "_create_concrete_function", _create_concrete_function)
    return 1
