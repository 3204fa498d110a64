"""ndarray <-> TensorProto without the extra copies of ``numpy_helper`` on large weights."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..errors import ModelLoadError

# Dimension denotations (ONNX's own vocabulary) that record a value's layout tag in the file.
_BATCH, _CHANNEL, _FEATURE = "DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE"


def dtype_to_onnx(dtype: str | None) -> int:
    if dtype is None:
        return TensorProto.FLOAT
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def dtype_from_onnx(elem_type: int) -> str | None:
    if elem_type == TensorProto.UNDEFINED:
        return None
    try:
        return str(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, ValueError):
        return None


def little_endian_bytes(array: np.ndarray) -> bytes:
    """The array's bytes in ONNX's raw_data byte order (little endian, C order)."""
    arr = np.asarray(array)
    if arr.dtype.byteorder == ">":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    return np.ascontiguousarray(arr).tobytes()


def fill_tensor(tensor: TensorProto, array: np.ndarray, name: str) -> None:
    """Fill ``tensor`` in place (no intermediate TensorProto): header plus raw_data."""
    arr = np.asarray(array)
    tensor.name = name
    tensor.data_type = dtype_to_onnx(str(arr.dtype.newbyteorder("=")))
    tensor.dims.extend(int(d) for d in arr.shape)
    if arr.dtype == object or arr.dtype.kind in "US":
        tensor.string_data.extend(str(s).encode("utf-8") for s in arr.ravel())
        return
    tensor.raw_data = little_endian_bytes(arr)


def fill_tensor_header(tensor: TensorProto, array: np.ndarray, name: str) -> None:
    """Name, element type and dims only (the data lives in an external file)."""
    arr = np.asarray(array)
    tensor.name = name
    tensor.data_type = dtype_to_onnx(str(arr.dtype.newbyteorder("=")))
    tensor.dims.extend(int(d) for d in arr.shape)


def tensor_to_array(tensor: TensorProto) -> np.ndarray:
    """A writable ndarray with the tensor's contents (raw_data decoded directly)."""
    if tensor.data_location == TensorProto.EXTERNAL:
        raise ModelLoadError(
            f"tensor '{tensor.name}' keeps its data in an external file that was not loaded"
        )
    dims = tuple(int(d) for d in tensor.dims)
    dtype = dtype_from_onnx(tensor.data_type)
    if tensor.HasField("raw_data") and dtype is not None and np.dtype(dtype).kind in "biuf":
        expected = int(np.prod(dims, dtype=np.int64)) * np.dtype(dtype).itemsize
        raw = tensor.raw_data
        if len(raw) != expected:
            raise ModelLoadError(
                f"tensor '{tensor.name}' holds {len(raw)} bytes, its shape {list(dims)} "
                f"of {dtype} needs {expected}"
            )
        return np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).reshape(dims).astype(
            dtype, copy=True
        )
    try:
        return np.array(numpy_helper.to_array(tensor))
    except Exception as exc:  # onnx raises assorted builtins for malformed tensors
        raise ModelLoadError(f"tensor '{tensor.name}' cannot be decoded: {exc}") from exc


def fill_type(
    type_proto: onnx.TypeProto, dtype: str | None, shape: Sequence | None, layout: str | None
) -> None:
    """A tensor type with element type, shape (None dims stay unknown) and layout denotation."""
    tensor_type = type_proto.tensor_type
    tensor_type.elem_type = dtype_to_onnx(dtype)
    if shape is None:
        return
    shape_proto = tensor_type.shape
    denotations = layout_denotations(layout, len(shape))
    for i, d in enumerate(shape):
        dim = shape_proto.dim.add()
        if isinstance(d, (int, np.integer)) and d >= 0:
            dim.dim_value = int(d)
        if denotations:
            dim.denotation = denotations[i]


def read_type(type_proto: onnx.TypeProto) -> tuple[str | None, tuple | None, str | None]:
    """(dtype, shape, layout) of a tensor type; unknown dims become None."""
    if not type_proto.HasField("tensor_type"):
        return None, None, None
    tensor_type = type_proto.tensor_type
    dtype = dtype_from_onnx(tensor_type.elem_type)
    if not tensor_type.HasField("shape"):
        return dtype, None, None
    dims = tensor_type.shape.dim
    shape = tuple(int(d.dim_value) if d.HasField("dim_value") else None for d in dims)
    layout = layout_from_denotations([d.denotation for d in dims])
    return dtype, shape, layout


def layout_denotations(layout: str | None, rank: int) -> list[str] | None:
    """ONNX dimension denotations for an NHWC/NCHW tagged value of rank 3 to 5."""
    if layout not in ("NHWC", "NCHW") or not 3 <= rank <= 5:
        return None
    spatial = [_FEATURE] * (rank - 2)
    if layout == "NHWC":
        return [_BATCH, *spatial, _CHANNEL]
    return [_BATCH, _CHANNEL, *spatial]


def layout_from_denotations(denotations: list[str]) -> str | None:
    rank = len(denotations)
    for layout in ("NHWC", "NCHW"):
        if layout_denotations(layout, rank) == denotations:
            return layout
    return None
