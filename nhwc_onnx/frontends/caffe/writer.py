"""Write a binary .caffemodel (a NetParameter holding layer names, types and blobs).

Used to build test fixtures and examples, and to hand weights generated for a bare prototxt
(``--weights random``) to another Caffe runtime. The packed float arrays are written straight
from numpy bytes; the few small fields around them follow caffe.proto's numbering.
"""
from __future__ import annotations

import os
from collections.abc import Iterable, Sequence

import numpy as np

from ...files.protowire import encode_varint as _varint


def _len_field(number: int, payload: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(payload)) + payload


def _varint_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def encode_blob(array: np.ndarray, legacy_4d: bool = False) -> bytes:
    """BlobProto bytes: shape (or the legacy num/channels/height/width) and packed data."""
    array = np.asarray(array, dtype="<f4")
    if legacy_4d:
        dims = [1] * (4 - array.ndim) + list(array.shape)
        head = b"".join(_varint_field(i + 1, int(d)) for i, d in enumerate(dims))
    else:
        packed = b"".join(_varint(int(d)) for d in array.shape)
        head = _len_field(7, _len_field(1, packed) if array.ndim else b"")
    return head + _len_field(5, array.tobytes())


def encode_layer(name: str, type_: str, blobs: Sequence[np.ndarray]) -> bytes:
    """LayerParameter bytes with name, type and blobs."""
    body = _len_field(1, name.encode()) + _len_field(2, type_.encode())
    for blob in blobs:
        body += _len_field(7, encode_blob(blob))
    return _len_field(100, body)


def encode_v1_layer(name: str, type_number: int, blobs: Sequence[np.ndarray]) -> bytes:
    """V1LayerParameter bytes (``layers`` field 2): name 4, enum type 5, legacy 4-D blobs 6."""
    body = _len_field(4, name.encode()) + _varint_field(5, type_number)
    for blob in blobs:
        body += _len_field(6, encode_blob(blob, legacy_4d=True))
    return _len_field(2, body)


def encode_caffemodel(layers: Iterable[tuple[str, str, Sequence[np.ndarray]]],
                      net_name: str = "") -> bytes:
    """(layer name, layer type, blobs) triples as the bytes of a modern binary NetParameter
    (what a runtime reads from memory, e.g. OpenCV's readNetFromCaffe(buffer, buffer))."""
    head = [_len_field(1, net_name.encode())] if net_name else []
    return b"".join(head + [encode_layer(name, type_, blobs) for name, type_, blobs in layers])


def write_caffemodel(
    path: str | os.PathLike,
    layers: Iterable[tuple[str, str, Sequence[np.ndarray]]],
    net_name: str = "",
) -> None:
    """Write (layer name, layer type, blobs) triples as a modern binary NetParameter."""
    with open(path, "wb") as f:
        if net_name:
            f.write(_len_field(1, net_name.encode()))
        f.writelines(encode_layer(name, type_, blobs) for name, type_, blobs in layers)
