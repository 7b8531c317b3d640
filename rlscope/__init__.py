"""rlscope: where does the time of a deep RL training run go?

Mark the algorithmic operations of your training loop::

    import rlscope
    with rlscope.operation("inference"):
        action = policy(obs)

and run it under ``rls-prof -o DIR -- python train.py``; then ``rls-analyze report DIR``.
"""

from rlscope._version import __version__
from rlscope.annotate import (
    current_operations,
    flush,
    is_active,
    operation,
    phase,
    pop_operation,
    push_operation,
    report_progress,
    set_metadata,
    start,
    stop,
)
from rlscope.errors import RLScopeError, RLScopeWarning

__all__ = [
    "RLScopeError",
    "RLScopeWarning",
    "__version__",
    "current_operations",
    "flush",
    "is_active",
    "operation",
    "phase",
    "pop_operation",
    "push_operation",
    "report_progress",
    "set_metadata",
    "start",
    "stop",
]
