"""Caffe frontend: a deploy .prototxt (+ .caffemodel) -> core-op Model in Caffe's NCHW layout.

``load(path, options)`` is the entry point; ``REGISTRY`` lists the supported layer types.
"""
from __future__ import annotations

from . import ops_activation, ops_conv, ops_input, ops_norm, ops_resize, ops_tensor  # noqa: F401
from .loader import load, random_weights
from .registry import REGISTRY

__all__ = ["REGISTRY", "load", "random_weights"]
