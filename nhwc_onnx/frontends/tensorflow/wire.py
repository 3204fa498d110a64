"""Zero-copy weights: lift large ``tensor_content`` fields out of a binary GraphDef before
protobuf parses it.

A frozen model is almost all weight bytes. Instead of letting protobuf copy them into its
arena (and then copying them again into numpy), this walks the protobuf wire format along
GraphDef.node -> NodeDef.attr -> AttrValue.tensor -> TensorProto.tensor_content, and rewrites
each large content field as two small fields (``external_offset`` / ``external_length``, see
tf_graph.proto) that point into the memory-mapped file. What protobuf then parses is only the
graph's structure (a few hundred KB); the weights become ``np.frombuffer`` views of the file.

Anything unexpected (truncation, group wire types) raises WireFormatError and the caller falls
back to a plain parse, which produces the proper error message.
"""
from __future__ import annotations

from ...files.protowire import WireFormatError, encode_varint, fields, rewrite

__all__ = ["WireFormatError", "strip_tensor_contents"]

EXTERNAL_MIN_BYTES = 1024  # smaller contents stay inline: not worth a view
_GRAPH_NODE, _NODE_ATTR, _ENTRY_VALUE, _ATTR_TENSOR, _TENSOR_CONTENT = 1, 5, 2, 8, 4
_EXTERNAL_OFFSET, _EXTERNAL_LENGTH = 1001, 1002


def _tensor(buf, start: int, end: int, _ordinal: int = 0) -> bytes | None:
    pieces = []
    changed = False
    for number, wire, vs, ve, fs in fields(buf, start, end):
        if number == _TENSOR_CONTENT and wire == 2 and ve - vs >= EXTERNAL_MIN_BYTES:
            pieces.append(encode_varint(_EXTERNAL_OFFSET << 3) + encode_varint(vs))
            pieces.append(encode_varint(_EXTERNAL_LENGTH << 3) + encode_varint(ve - vs))
            changed = True
            continue
        pieces.append(buf[fs:ve])
    return b"".join(pieces) if changed else None


def _descend(field: int, inner):
    """A handler rewriting ``field`` of a message with ``inner``; messages smaller than the
    smallest lifted content cannot hold one, so they are copied without a look inside."""
    handlers = {field: inner}

    def handler(buf, start: int, end: int, _ordinal: int = 0) -> bytes | None:
        return rewrite(buf, start, end, handlers, EXTERNAL_MIN_BYTES)
    return handler


_attr_value = _descend(_ATTR_TENSOR, _tensor)
_attr_entry = _descend(_ENTRY_VALUE, _attr_value)
_node = _descend(_NODE_ATTR, _attr_entry)
_graph = _descend(_GRAPH_NODE, _node)


def strip_tensor_contents(buf) -> bytes | None:
    """The GraphDef in ``buf`` with large tensor contents replaced by file references, or None
    when no content was large enough to lift."""
    return _graph(buf, 0, len(buf))
