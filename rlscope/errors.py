"""Exceptions raised by rlscope. Each carries one line that says what is wrong and what to do."""


class RLScopeError(Exception):
    """Misuse of the annotation API (e.g. a pop without a push) or a recording problem."""


class TraceError(RLScopeError):
    """A trace directory or file cannot be read (missing, foreign, corrupt)."""


class UsageError(RLScopeError):
    """Bad command-line input."""


class RLScopeWarning(UserWarning):
    """Misuse of the annotation API that rlscope ignores, as it would without a recording
    (a pop_operation with no matching push). ``warnings.simplefilter("error",
    RLScopeWarning)`` turns it into an exception."""
