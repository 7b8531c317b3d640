"""rlscope's own overhead, offline: the calibration model (``model``: per-kind costs read
from ``calibration.json``), the cost kinds and their event counts (``kinds``), and the
correction that removes the costs from a trace before analysis (``correction``).
``rlscope.calibration`` measures the costs and writes the model; this package only reads
it, so analysis never depends on calibration."""
