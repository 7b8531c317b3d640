"""Calibration of rlscope's own overhead (docs/overhead-correction.md), on the launcher's
side: ``rls-prof --calibrate`` runs the workload uninstrumented and with each kind of
book-keeping on, as paired chunks in one process (:mod:`.chunked`, driving
:mod:`rlscope.inprocess.chunk_copies` inside the workload) or as whole runs (:mod:`.runner`),
estimates a per-event cost by kind (:mod:`.estimate`, :mod:`.build`) and writes
``DIR/calibration.json`` (:mod:`rlscope.analysis.overhead.model`), which the analysis
reads to remove the overhead (:mod:`rlscope.analysis.overhead.correction`).

Depends on launch (environments), trace and analysis.overhead; nothing below depends on it.
"""
