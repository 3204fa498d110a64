"""Passes that turn a core-op graph into a valid dialect graph (see ``pipeline.py``)."""
from . import (
    core_eval,  # noqa: F401  (attaches a numpy evaluator to every core schema)
    core_infer,  # noqa: F401  (attaches shape inference to every core schema)
)
from .base import Decision, Pass, PassContext, PassManager, PassResult, PassStat

__all__ = ["Decision", "Pass", "PassContext", "PassManager", "PassResult", "PassStat"]
