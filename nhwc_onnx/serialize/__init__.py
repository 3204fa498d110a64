"""IR <-> ONNX: ``save``/``load`` files, ``to_onnx``/``from_onnx`` protos.

The only place (besides the ONNX frontend) that builds ModelProtos. Files use IR version 8, the
dialect's ops in domain ``nhwc`` (opset version 1), weights as initializers, deterministic bytes
and atomic writes.
"""
from .reader import from_onnx, load, parse_model_bytes

# The writer (and what it needs: temp files, shape inference) loads on first use: `check` and
# `info` only read.
_WRITER_NAMES = ("DEFAULT_DOMAIN_OPSET", "DIALECT_OPSET_VERSION", "EXTERNAL_DATA_THRESHOLD",
                 "IR_VERSION", "save", "save_bytes", "save_streamed", "to_bytes", "to_onnx")


def __getattr__(name: str):
    if name in _WRITER_NAMES:
        from . import writer

        return getattr(writer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_DOMAIN_OPSET", "DIALECT_OPSET_VERSION", "EXTERNAL_DATA_THRESHOLD", "IR_VERSION",
    "from_onnx", "load", "parse_model_bytes", "save", "save_bytes", "save_streamed", "to_bytes",
    "to_onnx",
]
