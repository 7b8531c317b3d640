"""The timeline engine: one process's events → scopes, thread states, elementary intervals,
the overlap sweep and its aggregated rows (``overlap.ProcessResult``). Knows nothing of
files, runs or reports."""
