"""The ONNX frontend's converter registry (one instance; ops_*.py modules register on import)."""
from __future__ import annotations

from ..base import OpRegistry

REGISTRY = OpRegistry("onnx")
