"""Imported by nested_ops.py: a module that takes 0.2 s of CPU to import."""

import time

_t = time.perf_counter()
while time.perf_counter() - _t < 0.2:
    pass
