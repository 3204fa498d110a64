"""Caffe frontend: a deploy .prototxt (+ .caffemodel) -> core-op Model in Caffe's NCHW layout.

``load(path, options)`` is the entry point; ``REGISTRY`` lists the supported layer types
(the parts every frontend provides: ``nhwc_onnx.frameworks``).
"""
from __future__ import annotations

from . import (  # noqa: F401
    ops_activation,
    ops_conv,
    ops_detection,
    ops_input,
    ops_math,
    ops_norm,
    ops_resize,
    ops_tensor,
)
from .loader import load, random_weights
from .registry import REGISTRY


def recognises(path) -> bool:
    """A deploy .prototxt is text that many files resemble: never guessed from the content
    (a Caffe net is named by its suffix)."""
    return False


__all__ = ["REGISTRY", "load", "random_weights", "recognises"]
