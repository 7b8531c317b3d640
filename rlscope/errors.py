"""Exceptions raised by rlscope. Each carries one line that says what is wrong and what to do."""


class RLScopeError(Exception):
    """Misuse of the annotation API (e.g. a pop without a push) or a recording problem."""


class TraceError(RLScopeError):
    """A trace directory or file cannot be read (missing, foreign, corrupt)."""


class UsageError(RLScopeError):
    """Bad command-line input."""
