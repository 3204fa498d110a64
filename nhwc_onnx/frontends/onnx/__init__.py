"""ONNX frontend: standard NCHW ONNX (opsets 7-22) -> core-op ``Model``.

``load(path, options)`` reads the file (external data confined to the model's folder), checks
its structure, scans every node and raises one UnsupportedOpError listing all that cannot be
converted, then emits core ops in NCHW (``data_format="NCHW"``, Conv weights ``OIHW``,
ConvTranspose ``IOHW``). Graph inputs keep their ONNX names; rank-4 ones are tagged NCHW.

Options: ``input_shapes`` / ``batch`` fix unknown dims; ``inputs`` / ``outputs`` cut the graph;
the run state's ``constant_inputs = {name: array}`` (``ConvertOptions.running``) turns graph
inputs into constants (ONNX test cases feed weights, shapes, scales ... as inputs).
"""
from __future__ import annotations

import os

from ...ir import Model
from ...options import ConvertOptions
from . import ops_elementwise, ops_nn, ops_resize, ops_shape, ops_tensor  # noqa: F401 (register)
from .importer import OnnxImporter
from .loader import parse_model_bytes, read_model
from .registry import REGISTRY


def load(path: str, options: ConvertOptions | None = None) -> Model:
    """Convert the ONNX model at ``path`` into a core-op Model."""
    external: dict = {}
    proto = read_model(str(path), external)
    return OnnxImporter(proto, options or ConvertOptions(), REGISTRY, str(path), external).run()


def load_proto(proto, options: ConvertOptions | None = None, source_file: str = "", *,
               float32_only: bool = True) -> Model:
    """Convert an in-memory ``onnx.ModelProto`` (already parsed, external data resolved).
    ``float32_only=False`` keeps graph inputs/outputs of other types (to test the core graph
    alone: the dialect computes in float32 only)."""
    return OnnxImporter(proto, options or ConvertOptions(), REGISTRY, source_file,
                        float32_only=float32_only).run()


def recognises(path: str | os.PathLike) -> bool:
    """Whether the file parses as an ONNX model with a graph (its weights are not read)."""
    from ...files.onnx_wire import read_structure

    proto = read_structure(path)
    return proto is not None and proto.ir_version > 0 and bool(proto.opset_import) \
        and len(proto.graph.node) > 0


__all__ = ["REGISTRY", "load", "load_proto", "parse_model_bytes", "read_model", "recognises"]
