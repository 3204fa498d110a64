"""IR <-> ONNX: ``save``/``load`` files, ``to_onnx``/``from_onnx`` protos.

The only place (besides the ONNX frontend) that builds ModelProtos. Files use IR version 8, the
dialect's ops in domain ``nhwc`` (opset version 1), weights as initializers, deterministic bytes
and atomic writes.
"""
from .reader import from_onnx, load, parse_model_bytes
from .writer import (
    DEFAULT_DOMAIN_OPSET,
    DIALECT_OPSET_VERSION,
    EXTERNAL_DATA_THRESHOLD,
    IR_VERSION,
    save,
    save_bytes,
    to_bytes,
    to_onnx,
)

__all__ = [
    "DEFAULT_DOMAIN_OPSET", "DIALECT_OPSET_VERSION", "EXTERNAL_DATA_THRESHOLD", "IR_VERSION",
    "from_onnx", "load", "parse_model_bytes", "save", "save_bytes", "to_bytes", "to_onnx",
]
