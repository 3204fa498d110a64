"""ONNX frontend: standard NCHW ONNX (opsets 7-22) -> core-op ``Model``.

``load(path, options)`` reads the file (external data confined to the model's folder), checks
its structure, scans every node and raises one UnsupportedOpError listing all that cannot be
converted, then emits core ops in NCHW (``data_format="NCHW"``, Conv weights ``OIHW``,
ConvTranspose ``IOHW``). Graph inputs keep their ONNX names; rank-4 ones are tagged NCHW.

Options: ``input_shapes`` / ``batch`` fix unknown dims; ``inputs`` / ``outputs`` cut the graph;
``extra["constant_inputs"] = {name: array}`` turns graph inputs into constants (ONNX test cases
feed weights, shapes, scales ... as inputs).
"""
from __future__ import annotations

from ...ir import Model
from ..base import FrontendOptions
from . import ops_elementwise, ops_nn, ops_resize, ops_shape, ops_tensor  # noqa: F401 (register)
from .importer import OnnxImporter
from .loader import parse_model_bytes, read_model
from .registry import REGISTRY


def load(path: str, options: FrontendOptions | None = None) -> Model:
    """Convert the ONNX model at ``path`` into a core-op Model."""
    external: dict = {}
    proto = read_model(str(path), external)
    return OnnxImporter(proto, options or FrontendOptions(), REGISTRY, str(path), external).run()


def load_proto(proto, options: FrontendOptions | None = None, source_file: str = "") -> Model:
    """Convert an in-memory ``onnx.ModelProto`` (already parsed, external data resolved)."""
    return OnnxImporter(proto, options or FrontendOptions(), REGISTRY, source_file).run()


__all__ = ["REGISTRY", "load", "load_proto", "parse_model_bytes", "read_model"]
