"""Launching profiled processes, in rls-prof: the environment contract (``env``: every
``RLSCOPE_*`` name), the environments children get (``environment``), running a command
profiled (``profile``, ``descendants``), its ``run.json`` (``metadata``) and the
utilisation sampler (``sampler``, ``nvml``).

What runs inside the profiled processes is :mod:`rlscope.inprocess`; this package never
imports it.
"""
