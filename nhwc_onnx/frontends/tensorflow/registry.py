"""The TensorFlow converter registry (one instance; several op names per converter)."""
from __future__ import annotations

from ..base import OpRegistry

REGISTRY = OpRegistry("tf")
