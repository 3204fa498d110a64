"""The ONNX file format's protobuf classes (ModelProto, TensorProto, ...) under a package name
of our own: reading and writing dialect files needs no ``import onnx`` (which costs more than
the rest of ``check``'s start-up), and these classes never collide with onnx's in one process.
Same messages and field numbers as onnx-ml.proto, so the bytes are the same."""
from .onnx_ml_pb2 import (
    AttributeProto,
    GraphProto,
    ModelProto,
    NodeProto,
    TensorProto,
    TypeProto,
    ValueInfoProto,
)

__all__ = ["AttributeProto", "GraphProto", "ModelProto", "NodeProto", "TensorProto",
           "TypeProto", "ValueInfoProto"]
