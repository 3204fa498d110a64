"""Passes that turn a core-op graph into a valid dialect graph (see ``pipeline.py``)."""
from .base import Decision, Pass, PassContext, PassManager, PassResult, PassStat

__all__ = ["Decision", "Pass", "PassContext", "PassManager", "PassResult", "PassStat"]
