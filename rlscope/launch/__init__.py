"""Launching profiled processes, in rls-prof: the environments the children get
(``child_env``: profiled, uninstrumented, chunk calibration, Ray workers' ``worker_env``),
running a command profiled (``profile``, ``descendants``), its ``run.json``
(``metadata``) and the utilisation sampler (``sampler``, ``nvml``). The variables
themselves are named in :mod:`rlscope.envvars`.

What runs inside the profiled processes is :mod:`rlscope.inprocess`; this package never
imports it (they meet only through the environment).
"""
