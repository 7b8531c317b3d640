"""Reading rlscope trace directories into columnar numpy arrays."""

from rlscope.trace.reader import ProcessTrace, Trace, read_trace

__all__ = ["ProcessTrace", "Trace", "read_trace"]
