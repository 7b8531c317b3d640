"""What runs inside every profiled process, apart from recording itself (``annotate``,
``recorder``) and the library wrappers (``intercept``, ``integrations``):

- ``autostart``: called by ``rlscope/_bootstrap/sitecustomize.py`` at interpreter start;
  reads the environment rls-prof set (``rlscope.envvars``), starts recording, enables
  interception and the import timer;
- ``import_timer``: the user's imports on the recording thread, for the start-up row;
- ``switches`` + ``limits``: calibration runs' ``RLSCOPE_ANNOTATIONS`` and
  ``RLSCOPE_MAX_PROGRESS``;
- ``chunk_copies``: paired-chunk calibration, forking copies of the workload.

The launcher (``rlscope.launch``, running in rls-prof) never imports this package; it
talks to it only through environment variables. Importing the package imports none of its
modules: every process under rls-prof pays for what it loads (docs/architecture.md).
"""
