"""The Caffe converter registry: ``@REGISTRY.register(TYPE, ..., check=...)``, the same shape
as the ONNX and TensorFlow registries. A ``check`` returns the reason a layer's configuration
cannot be converted exactly (for layer types supported only in some configurations), or None;
the loader collects every reason and every unknown type before converting anything."""
from __future__ import annotations

from ..base import OpRegistry

REGISTRY = OpRegistry("caffe")
