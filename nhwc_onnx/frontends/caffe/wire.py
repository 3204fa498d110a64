"""A minimal protobuf wire-format reader for .caffemodel files.

A caffemodel is a binary NetParameter whose weights are packed float arrays. Parsing it with
the generated module would copy every float through Python objects; this reader walks only
the fields the converter needs (layer name, type and blobs) and turns each packed array into
a numpy view of the file's bytes, so a 550 MB VGG16 loads in about the time it takes to read
the file. Fields it does not need are skipped by their length, so fork-specific layer
parameters never confuse it.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ...errors import InvalidModelError, ModelLoadError
from ...files.protowire import Truncated
from ...files.protowire import read_varint as _varint
from ...files.reads import map_regular, mapped_array

# Wire types.
_VARINT, _I64, _LEN, _I32 = 0, 1, 2, 5

# V1LayerParameter.LayerType numbers -> modern type strings (enough for weight matching).
V1_TYPE_NAMES = {
    0: "None", 35: "AbsVal", 1: "Accuracy", 30: "ArgMax", 2: "BNLL", 3: "Concat",
    37: "ContrastiveLoss", 4: "Convolution", 40: "Crop", 5: "Data", 39: "Deconvolution",
    6: "Dropout", 32: "DummyData", 7: "EuclideanLoss", 25: "Eltwise", 38: "Exp", 8: "Flatten",
    9: "HDF5Data", 10: "HDF5Output", 28: "HingeLoss", 11: "Im2col", 12: "ImageData",
    13: "InfogainLoss", 14: "InnerProduct", 15: "LRN", 29: "MemoryData",
    16: "MultinomialLogisticLoss", 34: "MVN", 17: "Pooling", 26: "Power", 18: "ReLU",
    19: "Sigmoid", 27: "SigmoidCrossEntropyLoss", 36: "Silence", 20: "Softmax",
    21: "SoftmaxWithLoss", 22: "Split", 33: "Slice", 23: "TanH", 24: "WindowData",
    31: "Threshold",
}


# File signatures of formats people mistake for a binary caffemodel.
_FOREIGN_FORMATS = (
    (b"\x89HDF\r\n\x1a\n", "an HDF5 file (Caffe's .caffemodel.h5 snapshots are not supported)"),
    (b"PK\x03\x04", "a ZIP archive"),
    (b"\x89PNG", "a PNG image"),
)
_TEXT_BYTES = frozenset(b"\t\n\r") | frozenset(range(32, 127))


@dataclass
class StoredLayer:
    """One layer's weights as stored in a caffemodel."""

    name: str
    type: str
    blobs: list[np.ndarray] = field(default_factory=list)


def _fields(buf: memoryview, start: int, end: int):
    """Yield (field number, wire type, value) where value is an int or a (start, end) span."""
    pos = start
    while pos < end:
        key, pos = _varint(buf, pos, end)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ValueError("field number 0")
        if wire == _VARINT:
            value, pos = _varint(buf, pos, end)
            yield number, wire, value
        elif wire == _LEN:
            length, pos = _varint(buf, pos, end)
            if pos + length > end:
                raise Truncated()
            yield number, wire, (pos, pos + length)
            pos += length
        elif wire == _I32:
            if pos + 4 > end:
                raise Truncated()
            yield number, wire, (pos, pos + 4)
            pos += 4
        elif wire == _I64:
            if pos + 8 > end:
                raise Truncated()
            yield number, wire, (pos, pos + 8)
            pos += 8
        else:
            raise ValueError(f"unknown wire type {wire}")


def _signed64(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


def _text(buf: memoryview, span: tuple[int, int]) -> str:
    return bytes(buf[span[0]:span[1]]).decode("utf-8", errors="replace")


def _read_shape(buf: memoryview, span: tuple[int, int]) -> list[int]:
    dims: list[int] = []
    for number, wire, value in _fields(buf, *span):
        if number != 1:
            continue
        if wire == _LEN:  # packed
            pos, end = value
            while pos < end:
                d, pos = _varint(buf, pos, end)
                dims.append(_signed64(d))
        elif wire == _VARINT:
            dims.append(_signed64(value))
    return dims


def _read_blob(buf: memoryview, span: tuple[int, int]) -> np.ndarray:
    shape: list[int] | None = None
    legacy = [0, 0, 0, 0]
    has_legacy = False
    chunks: list[np.ndarray] = []
    first_span = (0, 0)
    doubles: list[np.ndarray] = []
    for number, wire, value in _fields(buf, *span):
        if number == 7 and wire == _LEN:
            shape = _read_shape(buf, value)
        elif number == 5:  # float data, packed (LEN) or one fixed32 per element
            if wire not in (_LEN, _I32) or (value[1] - value[0]) % 4:
                raise ValueError(f"blob data (field 5) has wire type {wire}")
            chunks.append(np.frombuffer(buf[value[0]:value[1]], dtype="<f4"))
            first_span = first_span if len(chunks) > 1 else value
        elif number == 8:
            if wire not in (_LEN, _I64) or (value[1] - value[0]) % 8:
                raise ValueError(f"blob double_data (field 8) has wire type {wire}")
            doubles.append(np.frombuffer(buf[value[0]:value[1]], dtype="<f8"))
        elif 1 <= number <= 4 and wire == _VARINT:
            legacy[number - 1] = _signed64(value)
            has_legacy = True
    if chunks:
        data = chunks[0] if len(chunks) == 1 else np.concatenate(chunks)
    elif doubles:
        data = np.concatenate(doubles).astype(np.float32)
    else:
        data = np.zeros(0, np.float32)
    if shape is None:
        shape = legacy if has_legacy else [int(data.size)]
    if any(d < 0 for d in shape):
        raise ModelLoadError(f"a blob has a negative dimension {shape}")
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    if count != data.size:  # bytes that do not decode into weights: unreadable
        raise ModelLoadError(
            f"a blob declares shape {shape} ({count} values) but stores {data.size} values")
    if len(chunks) == 1 and count:
        # The usual case, one packed array: a view with the final shape (see mapped_array).
        return mapped_array(buf.obj, np.dtype("<f4"), count, first_span[0], tuple(shape))
    return data.reshape(shape)


def _read_layer(buf: memoryview, span: tuple[int, int], v1: bool) -> StoredLayer:
    name_field, type_field, blob_field = (4, 5, 6) if v1 else (1, 2, 7)
    layer = StoredLayer("", "")
    for number, wire, value in _fields(buf, *span):
        if number == name_field and wire == _LEN:
            layer.name = _text(buf, value)
        elif number == type_field:
            layer.type = (V1_TYPE_NAMES.get(value, str(value)) if wire == _VARINT
                          else _text(buf, value))
        elif number == blob_field and wire == _LEN:
            try:
                layer.blobs.append(_read_blob(buf, value))
            except ModelLoadError as e:
                raise ModelLoadError(
                    f"layer '{layer.name}' blob {len(layer.blobs)}: {e}") from None
        elif v1 and number == 1 and wire == _LEN:  # nested V0 layer: name 1, type 2, blobs 50
            for n0, w0, v0 in _fields(buf, *value):
                if n0 == 1 and w0 == _LEN and not layer.name:
                    layer.name = _text(buf, v0)
                elif n0 == 2 and w0 == _LEN and not layer.type:
                    layer.type = _text(buf, v0)
                elif n0 == 50 and w0 == _LEN:
                    layer.blobs.append(_read_blob(buf, v0))
    return layer


def read_caffemodel(path: str | os.PathLike) -> list[StoredLayer]:
    """Layers (name, type, blobs as float32 arrays) of a binary .caffemodel, in file order."""
    path = os.fspath(path)
    # Mapped, not read: blobs are read-only views of the file (no copy of the weights), and
    # a blob replaced by a pass (BatchNorm folding) gives its pages back (files.reads).
    data = map_regular(path, f"caffemodel {path}")
    size = len(data)
    if size == 0:
        raise ModelLoadError(f"caffemodel {path} is empty")
    for magic, what in _FOREIGN_FORMATS:
        if data[:len(magic)] == magic:
            raise ModelLoadError(f"caffemodel {path} is {what}, not a binary Caffe NetParameter")
    if all(b in _TEXT_BYTES for b in data[:256]):
        raise ModelLoadError(
            f"caffemodel {path} is text (a prototxt?); --weights takes the binary .caffemodel")
    buf = memoryview(data)
    layers: list[StoredLayer] = []
    try:
        for number, wire, value in _fields(buf, 0, size):
            if number == 100 and wire == _LEN:
                layers.append(_read_layer(buf, value, v1=False))
            elif number == 2 and wire == _LEN:
                layers.append(_read_layer(buf, value, v1=True))
    except Truncated:
        raise ModelLoadError(
            f"caffemodel {path} is truncated or corrupt (a field runs past the end of the "
            f"file, {size} bytes)") from None
    except InvalidModelError as e:  # before ValueError: it is one
        raise InvalidModelError(f"caffemodel {path}: {e}") from None
    except ModelLoadError as e:  # a blob that does not decode (also a ValueError)
        raise ModelLoadError(f"caffemodel {path}: {e}") from None
    except ValueError as e:
        raise ModelLoadError(
            f"caffemodel {path} is not a valid binary Caffe model ({e})") from None
    if not layers:
        raise ModelLoadError(f"caffemodel {path} contains no layers: not a binary Caffe model")
    if not any(layer.name for layer in layers):
        raise ModelLoadError(f"caffemodel {path} has no named layers: not a binary Caffe model")
    return layers
