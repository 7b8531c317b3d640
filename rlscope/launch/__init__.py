"""Launching profiled processes: the environment contract (``env``: every ``RLSCOPE_*``
name), the environments children get (``environment``), what every Python process does
at start-up (``autostart`` with ``limits``, ``switches`` and calibration's
``chunk_copies``), running a command profiled (``profile``) and its ``run.json``
(``metadata``).

Importing this package imports none of them: ``autostart`` runs in every process under
``rls-prof`` and must stay cheap (docs/architecture.md).
"""
