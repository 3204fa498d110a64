"""nhwc_onnx.onnxfile (our ONNX protobuf classes) describe exactly onnx's messages: the same
fields, numbers, types and options, so files read and written with them are byte-identical."""
from __future__ import annotations

from google.protobuf import descriptor_pb2
from onnx import onnx_ml_pb2

from nhwc_onnx.onnxfile import ModelProto
from nhwc_onnx.onnxfile import onnx_ml_pb2 as ours
from nhwc_onnx.onnxfile.regenerate import PACKAGE, _rename, renamed_descriptor


def _file(descriptor) -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto()
    descriptor.CopyToProto(proto)
    return proto


def test_same_messages_and_fields_as_onnx():
    theirs = _file(onnx_ml_pb2.DESCRIPTOR)
    mine = _file(ours.DESCRIPTOR)
    assert mine.package == PACKAGE  # never collides with onnx's own classes
    # the same file once the package name is put back: fields, numbers, types, options
    mine.name, mine.package = theirs.name, theirs.package
    _rename(mine.message_type, f".{PACKAGE}.", ".onnx.")
    assert mine == theirs
    assert len(theirs.message_type) > 15


def test_committed_module_matches_the_installed_onnx():
    committed = descriptor_pb2.FileDescriptorProto()
    ours.DESCRIPTOR.CopyToProto(committed)
    regenerated = descriptor_pb2.FileDescriptorProto.FromString(renamed_descriptor())
    assert committed == regenerated, "run python nhwc_onnx/onnxfile/regenerate.py"


def test_bytes_round_trip_through_both_classes(rich_model):
    from nhwc_onnx.serialize import to_bytes, to_onnx

    data = to_bytes(rich_model, weights_as_constants=True)
    assert to_onnx(rich_model, weights_as_constants=True).SerializeToString(
        deterministic=True) == data
    assert ModelProto.FromString(data).SerializeToString(deterministic=True) == data
