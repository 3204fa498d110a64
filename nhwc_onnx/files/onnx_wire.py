"""Zero-copy ONNX weights: lift large ``raw_data`` fields out of a serialized ModelProto before
protobuf parses it.

Walks ModelProto.graph -> GraphProto.initializer (and GraphProto.node -> NodeProto.attribute ->
AttributeProto.t for Constant nodes) on the wire and drops each TensorProto.raw_data of at least
``min_bytes``, remembering where its bytes are in the buffer. What protobuf then parses is the
model's structure only; the caller views the weights in the (memory-mapped) buffer.

Malformed bytes along that path raise WireFormatError; the caller falls back to a plain parse,
which produces the proper error message.
"""
from __future__ import annotations

from .protowire import WireFormatError, fields, rewrite

__all__ = ["LiftedModel", "WireFormatError", "lift_raw_data"]

# Field numbers of onnx.proto (facts of the format).
_MODEL_GRAPH = 7
_GRAPH_NODE, _GRAPH_INITIALIZER = 1, 5
_NODE_ATTRIBUTE = 5
_ATTRIBUTE_TENSOR = 5
_TENSOR_RAW_DATA = 9


class LiftedModel:
    """``skeleton``: the ModelProto without its large raw_data fields. ``initializers`` /
    ``constants``: index in graph.initializer / graph.node -> (offset, length) of the lifted
    bytes in the original buffer."""

    __slots__ = ("constants", "initializers", "skeleton")

    def __init__(self, skeleton: bytes):
        self.skeleton = skeleton
        self.initializers: dict[int, tuple[int, int]] = {}
        self.constants: dict[int, tuple[int, int]] = {}


def lift_raw_data(buffer, min_bytes: int = 1024) -> LiftedModel:
    """The skeleton of the ModelProto in ``buffer`` and where its lifted tensors' bytes are."""
    if min_bytes < 1:
        raise ValueError("min_bytes must be positive")  # an empty raw_data has nothing to lift
    lifted = LiftedModel(b"")

    def tensor(sink: dict, index: int):
        def strip(buf, start: int, end: int, _ordinal: int) -> bytes | None:
            pieces = []
            run = start
            for number, wire, vs, ve, fs in fields(buf, start, end):
                if number == _TENSOR_RAW_DATA and wire == 2 and ve - vs >= min_bytes:
                    if index in sink:
                        raise WireFormatError("tensor with two raw_data fields")
                    sink[index] = (vs, ve - vs)
                    pieces.append(buf[run:fs])
                    run = ve
            if not pieces:
                return None
            pieces.append(buf[run:end])
            return b"".join(pieces)
        return strip

    def initializer(buf, start: int, end: int, ordinal: int) -> bytes | None:
        return tensor(lifted.initializers, ordinal)(buf, start, end, ordinal)

    def node(buf, start: int, end: int, ordinal: int) -> bytes | None:
        attribute = {_ATTRIBUTE_TENSOR: tensor(lifted.constants, ordinal)}

        def each_attribute(buf, vs: int, ve: int, _ordinal: int) -> bytes | None:
            return rewrite(buf, vs, ve, attribute, min_bytes)
        return rewrite(buf, start, end, {_NODE_ATTRIBUTE: each_attribute}, min_bytes)

    graph_fields = {_GRAPH_NODE: node, _GRAPH_INITIALIZER: initializer}

    def graph(buf, start: int, end: int, ordinal: int) -> bytes | None:
        if ordinal:  # protobuf would merge both graphs; the indices would be wrong
            raise WireFormatError("ModelProto with two graph fields")
        return rewrite(buf, start, end, graph_fields, min_bytes)

    skeleton = rewrite(buffer, 0, len(buffer), {_MODEL_GRAPH: graph}, min_bytes)
    lifted.skeleton = bytes(buffer) if skeleton is None else skeleton
    return lifted


def read_structure(path):
    """The file's ModelProto (the project's own class) without its large weights, which stay
    in the memory-mapped file; None when it does not parse as one (unreadable files are
    reported by the loaders)."""
    from ..onnxfile import ModelProto
    from .reads import map_regular

    try:
        return ModelProto.FromString(lift_raw_data(map_regular(path, str(path))).skeleton)
    except Exception:  # noqa: BLE001 - any failure means: not an ONNX model
        return None
