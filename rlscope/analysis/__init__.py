"""Offline analysis: overlap of CPU categories and GPU work per operation, as DataFrames.

    import rlscope.analysis
    a = rlscope.analysis.load("runs/ppo")
    a.operations()      # per operation: calls, wall/self, category and region split
    a.breakdown()       # seconds per process/phase/operation/category/region
"""

from rlscope.analysis.api import Analysis, analyze, load

__all__ = ["Analysis", "analyze", "load"]
