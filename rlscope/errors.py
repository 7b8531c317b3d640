"""Exceptions raised by rlscope. Each carries one line that says what is wrong and what to do."""


class RLScopeError(Exception):
    """Misuse of the annotation API (e.g. a pop without a push) or a recording problem."""


class TraceError(RLScopeError):
    """A trace directory or file cannot be read (missing, foreign, corrupt)."""


class UserError(RLScopeError):
    """Something the user asked for cannot be done as given (an option, the command to
    run, the output directory); the commands print it as one line with exit status 2.
    Named apart from ``click.UsageError``, which click raises for options it rejects."""


class RLScopeWarning(UserWarning):
    """Misuse of the annotation API that rlscope ignores, as it would without a recording
    (a pop_operation with no matching push). ``warnings.simplefilter("error",
    RLScopeWarning)`` turns it into an exception."""
