"""nhwc-onnx: convert TensorFlow, Caffe and NCHW ONNX models into the NHWC ONNX dialect."""
from __future__ import annotations

__version__ = "0.1.0"

from .errors import NhwcOnnxError

__all__ = ["NhwcOnnxError", "__version__", "check", "convert", "verify"]


def __getattr__(name: str):
    # Keep `import nhwc_onnx` cheap: the API pulls in onnx and the schemas only when used.
    if name in ("convert", "check", "verify", "ConversionResult", "ConversionReport"):
        from . import api

        return getattr(api, name)
    raise AttributeError(f"module 'nhwc_onnx' has no attribute {name!r}")
