"""ndarray <-> TensorProto without the extra copies of ``numpy_helper`` on large weights, and
without importing onnx (our own classes of the file format, ``nhwc_onnx.onnxfile``)."""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import ModelLoadError
from ..files.reads import element_count
from ..ir import DeferredArray
from ..onnxfile import TensorProto, TypeProto

# Dimension denotations (ONNX's own vocabulary) that record a value's layout tag in the file.
_BATCH, _CHANNEL, _FEATURE = "DATA_BATCH", "DATA_CHANNEL", "DATA_FEATURE"

# TensorProto.DataType -> numpy dtype name (onnx.helper's table; the types past complex128 need
# ml_dtypes, which onnx registers when it is imported).
_ONNX_TO_DTYPE = {
    TensorProto.FLOAT: "float32", TensorProto.UINT8: "uint8", TensorProto.INT8: "int8",
    TensorProto.UINT16: "uint16", TensorProto.INT16: "int16", TensorProto.INT32: "int32",
    TensorProto.INT64: "int64", TensorProto.STRING: "object", TensorProto.BOOL: "bool",
    TensorProto.FLOAT16: "float16", TensorProto.DOUBLE: "float64",
    TensorProto.UINT32: "uint32", TensorProto.UINT64: "uint64",
    TensorProto.COMPLEX64: "complex64", TensorProto.COMPLEX128: "complex128",
    TensorProto.BFLOAT16: "bfloat16", TensorProto.FLOAT8E4M3FN: "float8_e4m3fn",
    TensorProto.FLOAT8E4M3FNUZ: "float8_e4m3fnuz", TensorProto.FLOAT8E5M2: "float8_e5m2",
    TensorProto.FLOAT8E5M2FNUZ: "float8_e5m2fnuz", TensorProto.UINT4: "uint4",
    TensorProto.INT4: "int4", TensorProto.FLOAT4E2M1: "float4_e2m1fn",
    TensorProto.FLOAT8E8M0: "float8_e8m0fnu", TensorProto.UINT2: "uint2",
    TensorProto.INT2: "int2", TensorProto.FLOAT6E2M3: "float6_e2m3fn",
    TensorProto.FLOAT6E3M2: "float6_e3m2fn",
}
_DTYPE_TO_ONNX = {name: code for code, name in _ONNX_TO_DTYPE.items()}
# Typed repeated fields our decoder reads without onnx: data type -> (field, its element type).
_TYPED_FIELDS = {
    TensorProto.FLOAT: ("float_data", "float32"), TensorProto.DOUBLE: ("double_data", "float64"),
    TensorProto.INT64: ("int64_data", "int64"), TensorProto.INT32: ("int32_data", "int32"),
    TensorProto.INT16: ("int32_data", "int32"), TensorProto.INT8: ("int32_data", "int32"),
    TensorProto.UINT16: ("int32_data", "int32"), TensorProto.UINT8: ("int32_data", "int32"),
    TensorProto.BOOL: ("int32_data", "int32"), TensorProto.UINT32: ("uint64_data", "uint64"),
    TensorProto.UINT64: ("uint64_data", "uint64"),
}


def dtype_to_onnx(dtype: str | None) -> int:
    if dtype is None:
        return TensorProto.FLOAT
    code = _DTYPE_TO_ONNX.get(str(dtype))
    if code is not None:
        return code
    np_dtype = np.dtype(dtype)
    if np_dtype.kind in "OU":
        return TensorProto.STRING
    code = _DTYPE_TO_ONNX.get(np_dtype.name)
    if code is None:
        raise ValueError(f"Unable to convert type {np_dtype!r} into TensorProto element type.")
    return code


def dtype_from_onnx(elem_type: int) -> str | None:
    return _ONNX_TO_DTYPE.get(elem_type)


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
    """Name, element type and dims only (the data is written elsewhere; a DeferredArray is
    not read here)."""
    tensor.name = name
    if isinstance(array, DeferredArray):
        dtype, shape = array.dtype_name, array.shape
    else:
        arr = np.asarray(array)
        dtype, shape = str(arr.dtype.newbyteorder("=")), arr.shape
    tensor.data_type = dtype_to_onnx(dtype)
    tensor.dims.extend(int(d) for d in shape)


def tensor_to_array(tensor: TensorProto) -> np.ndarray:
    """A writable ndarray with the tensor's contents (raw_data decoded directly)."""
    if tensor.data_location == TensorProto.EXTERNAL:
        raise ModelLoadError(
            f"tensor '{tensor.name}' keeps its data in an external file that was not loaded"
        )
    dims = tuple(int(d) for d in tensor.dims)
    count = element_count(dims, f"tensor '{tensor.name}'")
    dtype = dtype_from_onnx(tensor.data_type)
    if tensor.HasField("raw_data") and dtype is not None and np.dtype(dtype).kind in "biuf":
        expected = count * np.dtype(dtype).itemsize
        raw = tensor.raw_data
        if len(raw) != expected:
            raise ModelLoadError(
                f"tensor '{tensor.name}' holds {len(raw)} bytes, its shape {list(dims)} "
                f"of {dtype} needs {expected}"
            )
        return np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<")).reshape(dims).astype(
            dtype, copy=True
        )
    return _typed_array(tensor, dims, dtype, count)


def _typed_array(tensor, dims: tuple, dtype: str | None, count: int) -> np.ndarray:
    """A tensor stored in its typed repeated field (or an element type only onnx decodes)."""
    data_type = tensor.data_type
    if data_type == TensorProto.STRING:
        items = list(tensor.string_data)
        if len(items) != count:
            raise ModelLoadError(f"tensor '{tensor.name}' cannot be decoded: {len(items)} "
                                 f"strings for shape {list(dims)}")
        try:
            texts = [item.decode("utf-8") for item in items]
        except UnicodeDecodeError as exc:
            raise ModelLoadError(f"tensor '{tensor.name}' cannot be decoded: {exc}") from exc
        array = np.empty(count, dtype=object)
        array[:] = texts
        return array.reshape(dims)
    typed = _TYPED_FIELDS.get(data_type)
    if typed is None or tensor.HasField("raw_data"):
        return _onnx_array(tensor)
    field, stored = typed
    values = getattr(tensor, field)
    if len(values) != count:
        raise ModelLoadError(f"tensor '{tensor.name}' cannot be decoded: {len(values)} values "
                             f"for shape {list(dims)} of {dtype}")
    return np.array(values, dtype=stored).astype(dtype).reshape(dims)


def _onnx_array(tensor) -> np.ndarray:
    """onnx's own decoder, for the element types and encodings the dialect never writes."""
    from onnx import TensorProto as OnnxTensorProto
    from onnx import numpy_helper

    try:
        onnx_tensor = OnnxTensorProto.FromString(tensor.SerializeToString())
        return np.array(numpy_helper.to_array(onnx_tensor))
    except Exception as exc:  # onnx raises assorted builtins for malformed tensors
        raise ModelLoadError(f"tensor '{tensor.name}' cannot be decoded: {exc}") from exc


def fill_type(
    type_proto: TypeProto, dtype: str | None, shape: Sequence | None, layout: str | None
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
        elif isinstance(d, str) and d:
            dim.dim_param = d  # a symbolic batch
        if denotations:
            dim.denotation = denotations[i]


def read_type(type_proto: TypeProto) -> tuple[str | None, tuple | None, str | None]:
    """(dtype, shape, layout) of a tensor type; a named dim (dim_param) is its name, other
    unknown dims become None."""
    if not type_proto.HasField("tensor_type"):
        return None, None, None
    tensor_type = type_proto.tensor_type
    dtype = dtype_from_onnx(tensor_type.elem_type)
    if not tensor_type.HasField("shape"):
        return dtype, None, None
    dims = tensor_type.shape.dim
    shape = tuple(int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or None)
                  for d in dims)
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
