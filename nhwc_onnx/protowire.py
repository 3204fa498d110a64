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
