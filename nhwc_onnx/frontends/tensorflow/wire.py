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

from ...protowire import WireFormatError
from ...protowire import encode_varint as _encode_varint
from ...protowire import read_varint as _varint

__all__ = ["WireFormatError", "strip_tensor_contents"]

EXTERNAL_MIN_BYTES = 1024  # smaller contents stay inline: not worth a view
_GRAPH_NODE, _NODE_ATTR, _ENTRY_VALUE, _ATTR_TENSOR, _TENSOR_CONTENT = 1, 5, 2, 8, 4
_EXTERNAL_OFFSET, _EXTERNAL_LENGTH = 1001, 1002


def _fields(buf, pos: int, end: int):
    """(field number, wire type, value start, value end, field start) for each field."""
    while pos < end:
        start = pos
        tag, pos = _varint(buf, pos, end)
        wire = tag & 7
        if wire == 2:
            length, pos = _varint(buf, pos, end)
            value_end = pos + length
        elif wire == 0:
            _, value_end = _varint(buf, pos, end)
        elif wire == 1:
            value_end = pos + 8
        elif wire == 5:
            value_end = pos + 4
        else:
            raise WireFormatError(f"unsupported wire type {wire}")
        if value_end > end:
            raise WireFormatError("field runs past its message")
        yield tag >> 3, wire, pos, value_end, start
        pos = value_end


def _rewrite(buf, start: int, end: int, field: int, inner) -> bytes | None:
    """Re-encode the message buf[start:end] with ``inner`` applied to each length-delimited
    ``field``; None when nothing changed (the caller keeps the original bytes)."""
    pieces = []
    changed = False
    for number, wire, vs, ve, fs in _fields(buf, start, end):
        if number == field and wire == 2:
            new = inner(buf, vs, ve)
            if new is not None:
                pieces.append(_encode_varint(number << 3 | 2) + _encode_varint(len(new)))
                pieces.append(new)
                changed = True
                continue
        pieces.append(buf[fs:ve])
    return b"".join(pieces) if changed else None


def _tensor(buf, start: int, end: int) -> bytes | None:
    pieces = []
    changed = False
    for number, wire, vs, ve, fs in _fields(buf, start, end):
        if number == _TENSOR_CONTENT and wire == 2 and ve - vs >= EXTERNAL_MIN_BYTES:
            pieces.append(_encode_varint(_EXTERNAL_OFFSET << 3) + _encode_varint(vs))
            pieces.append(_encode_varint(_EXTERNAL_LENGTH << 3) + _encode_varint(ve - vs))
            changed = True
            continue
        pieces.append(buf[fs:ve])
    return b"".join(pieces) if changed else None


def _attr_value(buf, start: int, end: int) -> bytes | None:
    return _rewrite(buf, start, end, _ATTR_TENSOR, _tensor)


def _attr_entry(buf, start: int, end: int) -> bytes | None:
    return _rewrite(buf, start, end, _ENTRY_VALUE, _attr_value)


def _node(buf, start: int, end: int) -> bytes | None:
    return _rewrite(buf, start, end, _NODE_ATTR, _attr_entry)


def strip_tensor_contents(buf) -> bytes | None:
    """The GraphDef in ``buf`` with large tensor contents replaced by file references, or None
    when no content was large enough to lift."""
    return _rewrite(buf, 0, len(buf), _GRAPH_NODE, _node)
