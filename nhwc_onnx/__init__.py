"""nhwc-onnx: convert TensorFlow, Caffe and NCHW ONNX models into the NHWC ONNX dialect."""
from __future__ import annotations

__version__ = "0.1.0"

from .errors import NhwcOnnxError

__all__ = ["ConvertOptions", "NhwcOnnxError", "__version__", "check", "convert", "info", "lower",
           "run", "verify"]

# Keep `import nhwc_onnx` cheap: the API (onnx, numpy, the schemas) is imported when first used.
_LAZY = {
    "convert": "api", "check": "api", "verify": "api", "info": "api",
    "ConversionResult": "api", "ConversionReport": "api",
    "run": "dialect.run_lower", "lower": "dialect.run_lower", "RunResult": "dialect.run_lower",
    "LowerResult": "dialect.run_lower",
    "ConvertOptions": "options",
}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'nhwc_onnx' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"{__name__}.{module}"), name)
