"""Calibration of rlscope's own overhead (docs/overhead-correction.md).

``rls-prof --calibrate`` runs the workload uninstrumented and with each kind of
book-keeping on (:mod:`rlscope.calibration.runner`), estimates a per-event cost by kind
from the run times and the event counts in each run's trace (:mod:`.estimate`), and
writes ``DIR/calibration.json`` (:mod:`.file`), which the analysis uses to remove the
overhead (:mod:`rlscope.analysis.correction`).
"""
