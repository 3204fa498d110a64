"""Protobuf wire-format varints, shared by the readers that walk raw bytes (caffemodel,
GraphDef) and the writers that emit them (caffemodel, streamed ONNX)."""
from __future__ import annotations


class WireFormatError(ValueError):
    """The bytes are not a well-formed protobuf message along the walked path."""


class Truncated(WireFormatError):
    """A field runs past the end of the bytes it lives in."""


def encode_varint(value: int) -> bytes:
    """A base-128 varint; a negative int is written as its 64-bit two's complement."""
    if value < 0:
        value += 1 << 64
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def read_varint(buf, pos: int, end: int) -> tuple[int, int]:
    """(value, position after it) of the varint at ``buf[pos:end]``."""
    result = shift = 0
    while True:
        if pos >= end:
            raise Truncated("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise WireFormatError("varint longer than 10 bytes")


def fields(buf, pos: int, end: int):
    """(field number, wire type, value start, value end, field start) for each field of the
    message ``buf[pos:end]``; groups (wire types 3/4) are not supported."""
    while pos < end:
        start = pos
        tag, pos = read_varint(buf, pos, end)
        wire = tag & 7
        if wire == 2:
            length, pos = read_varint(buf, pos, end)
            value_end = pos + length
        elif wire == 0:
            _, value_end = read_varint(buf, pos, end)
        elif wire == 1:
            value_end = pos + 8
        elif wire == 5:
            value_end = pos + 4
        else:
            raise WireFormatError(f"unsupported wire type {wire}")
        if value_end > end:
            raise Truncated("field runs past its message")
        yield tag >> 3, wire, pos, value_end, start
        pos = value_end


def length_delimited(number: int, value: bytes) -> bytes:
    """Tag and length of a length-delimited field, followed by its value."""
    return encode_varint(number << 3 | 2) + encode_varint(len(value)) + value


def rewrite(buf, start: int, end: int, inner: dict, min_bytes: int = 0) -> bytes | None:
    """Re-encode the message ``buf[start:end]`` with ``inner[number](buf, vs, ve, ordinal)``
    applied to each length-delimited field ``number`` (``ordinal``: how many fields of that
    number came before it). ``inner`` returns the new value bytes, or None to keep the field.
    Values shorter than ``min_bytes`` are kept without a look inside (the caller knows nothing
    that small can change). None when nothing changed: the caller keeps the original bytes."""
    pieces = []
    counts = dict.fromkeys(inner, 0)
    run = start  # start of the unchanged bytes not yet copied into pieces
    for number, wire, vs, ve, fs in fields(buf, start, end):
        handler = inner.get(number)
        if handler is None or wire != 2:
            continue
        ordinal = counts[number]
        counts[number] = ordinal + 1
        if ve - vs < min_bytes:
            continue
        new = handler(buf, vs, ve, ordinal)
        if new is None:
            continue
        pieces.append(buf[run:fs])
        pieces.append(length_delimited(number, new))
        run = ve
    if not pieces:
        return None
    pieces.append(buf[run:end])
    return b"".join(pieces)
