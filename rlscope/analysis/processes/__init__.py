"""Many processes, one run: the process tree and roles, the run summary, where each
process's time went, and sampled utilisation next to what rlscope measured."""
