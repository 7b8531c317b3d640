"""Offline analysis: overlap of CPU categories and GPU work per operation, as DataFrames.

    import rlscope.analysis
    a = rlscope.analysis.load("runs/ppo")         # or open_run(dir, RunOptions(...))
    a.operations()      # per operation: calls, wall/self, category and region split
    a.breakdown()       # seconds per process/phase/operation/category/region
"""

from rlscope.analysis.api import analyze, load, load_lockstep
from rlscope.analysis.frames import Analysis
from rlscope.analysis.pipeline.run import Run, RunOptions, open_run

__all__ = ["Analysis", "Run", "RunOptions", "analyze", "load", "load_lockstep", "open_run"]
