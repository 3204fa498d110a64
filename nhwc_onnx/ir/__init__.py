"""The shared intermediate representation: see ``core.py``."""
from .core import (
    CORE,
    DIALECT,
    LAYOUTS,
    NCHW,
    NHWC,
    UNCONVERTED,
    Graph,
    Model,
    Node,
    Shape,
    Value,
)
from .deferred import DeferredArray, ScaledWeight

__all__ = ["CORE", "DIALECT", "LAYOUTS", "NCHW", "NHWC", "UNCONVERTED", "DeferredArray", "Graph",
           "Model", "Node", "ScaledWeight", "Shape", "Value"]
