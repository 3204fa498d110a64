"""TensorProto -> numpy, DataType -> numpy dtype, and typed reads of node attributes.

Tensor bytes become arrays with ``np.frombuffer`` (one copy out of the parsed message at most,
never a Python list); a tensor stored as a short value list is broadcast the way TensorFlow
does it: the last value repeats to fill the shape (MIGraphX's test graphs rely on it).
"""
from __future__ import annotations

import builtins
from collections.abc import Mapping
from typing import Any, TypeGuard, overload

import numpy as np

from ...errors import (
    ConversionContext,
    InvalidAttributeError,
    InvalidModelError,
    ModelLoadError,
    located,
)
from ...files.reads import mapped_array
from ..context import Refusal

# TensorFlow DataType enum value -> numpy dtype (reference types map like their base type).
_DTYPES: dict[int, np.dtype] = {
    1: np.dtype("float32"),
    2: np.dtype("float64"),
    3: np.dtype("int32"),
    4: np.dtype("uint8"),
    5: np.dtype("int16"),
    6: np.dtype("int8"),
    9: np.dtype("int64"),
    10: np.dtype("bool"),
    17: np.dtype("uint16"),
    19: np.dtype("float16"),
    22: np.dtype("uint32"),
    23: np.dtype("uint64"),
}
_DTYPE_NAMES = {
    0: "invalid", 7: "string", 8: "complex64", 11: "qint8", 12: "quint8", 13: "qint32",
    14: "bfloat16", 15: "qint16", 16: "quint16", 18: "complex128", 20: "resource", 21: "variant",
}
# Which repeated field carries the values of a tensor of each dtype when tensor_content is empty.
_VALUE_FIELD = {
    1: "float_val", 2: "double_val", 3: "int_val", 4: "int_val", 5: "int_val", 6: "int_val",
    9: "int64_val", 10: "bool_val", 17: "int_val", 19: "half_val", 22: "uint32_val",
    23: "uint64_val",
}
MAX_ELEMENTS = 1 << 34  # refuse absurd constant shapes before allocating anything
MAX_FILLED_BYTES = 1 << 29  # a short value list may expand to at most this much memory


class UnsupportedDtype(Refusal, InvalidAttributeError):
    """An element type the project does not handle: inside a converter a refusal listed with
    the others, elsewhere an invalid attribute."""


def numpy_dtype(tf_type: int, what: str = "tensor") -> np.dtype:
    """The numpy dtype of a TensorFlow DataType enum value (REF types map to their base)."""
    base = tf_type - 100 if tf_type > 100 else tf_type
    dtype = _DTYPES.get(base)
    if dtype is None:
        name = _DTYPE_NAMES.get(base, f"enum {tf_type}")
        raise UnsupportedDtype(f"{what} has TensorFlow dtype {name}, which is not supported")
    return dtype


def shape_from_proto(shape_proto) -> tuple[int | None, ...] | None:
    """TensorShapeProto -> tuple (None for an unknown dim) or None for unknown rank."""
    if shape_proto.unknown_rank:
        return None
    return tuple(None if d.size < 0 else int(d.size) for d in shape_proto.dim)


def _all_known(shape: tuple[int | None, ...]) -> TypeGuard[tuple[int, ...]]:
    return all(d is not None for d in shape)


def tensor_to_numpy(tensor, what: str = "tensor", buffer=None) -> np.ndarray:
    """Decode a TensorProto into a numpy array (a view of ``buffer`` for lifted contents)."""
    dtype = numpy_dtype(tensor.dtype, what)
    shape = shape_from_proto(tensor.tensor_shape)
    if shape is None or not _all_known(shape):
        raise InvalidModelError(f"{what} has an unknown shape")
    count = 1
    for d in shape:
        count *= d
    if count > MAX_ELEMENTS:
        raise InvalidModelError(f"{what} has an absurd shape {list(shape)}")
    if tensor.external_length:
        return _external(tensor, what, buffer, dtype, shape, count)
    content = tensor.tensor_content
    if content:
        if len(content) != count * dtype.itemsize:  # bytes that do not decode: unreadable
            raise ModelLoadError(
                f"{what}: tensor_content holds {len(content)} bytes, shape {list(shape)} of "
                f"{dtype} needs {count * dtype.itemsize}"
            )
        return np.frombuffer(content, dtype=dtype.newbyteorder("<")).astype(dtype, copy=False) \
            .reshape(shape)
    if count * dtype.itemsize > MAX_FILLED_BYTES:
        raise InvalidModelError(
            f"{what}: shape {list(shape)} would expand a short value list to "
            f"{count * dtype.itemsize} bytes"
        )
    field = _VALUE_FIELD[tensor.dtype - 100 if tensor.dtype > 100 else tensor.dtype]
    values = getattr(tensor, field)
    n = len(values)
    if field == "half_val":
        flat = np.array(values, dtype=np.int32).astype(np.uint16).view(np.float16)
    else:
        flat = np.array(values, dtype=dtype) if n else np.zeros(0, dtype)
    if n == count:
        return flat.reshape(shape)
    if n == 0:
        return np.zeros(shape, dtype)
    if n > count:
        raise ModelLoadError(f"{what} lists {n} values for shape {list(shape)}")
    # TensorFlow's rule: the last listed value fills the rest of the tensor.
    try:
        out = np.empty(count, dtype)
    except MemoryError:
        raise InvalidModelError(f"{what}: not enough memory for shape {list(shape)}") from None
    out[:n] = flat
    out[n:] = flat[-1]
    return out.reshape(shape)


def _external(tensor, what: str, buffer, dtype: np.dtype, shape: tuple, count: int) -> np.ndarray:
    offset, length = tensor.external_offset, tensor.external_length
    if buffer is None or offset + length > len(buffer):
        raise ModelLoadError(f"{what}: tensor data lies outside the file")
    if length != count * dtype.itemsize:
        raise ModelLoadError(
            f"{what}: tensor_content holds {length} bytes, shape {list(shape)} of {dtype} "
            f"needs {count * dtype.itemsize}"
        )
    # A read-only view of the mapped file, never a copy: a pass that replaces the weight
    # (BatchNorm folding, a layout transpose) lets its pages go when the view is dropped.
    return mapped_array(buffer, dtype, count, offset, shape)


class Attrs:
    """Typed reads of a NodeDef's attribute map; '$name' placeholders resolve from ``bound``."""

    def __init__(self, node_name: str, op: str, attr_map: Mapping, bound: Mapping | None = None,
                 buffer=None):
        self.node_name = node_name
        self.op = op
        self._map = attr_map
        self._bound = bound
        self._buffer = buffer  # where lifted weights live (see wire.py)
        self.attr_map = attr_map  # the NodeDef's own map, for binding function attributes
        self._overrides: dict = {}  # rewritten attributes (patterns.py); the proto stays as is
        self.read: set[builtins.str] = set()  # names asked for (the converter's, see TFContext)

    @property
    def where(self) -> ConversionContext:
        return ConversionContext(self.node_name, self.op, "tensorflow")

    def names(self) -> set[builtins.str]:
        """Every attribute the node carries."""
        return set(self._map) | set(self._overrides)

    def is_type(self, name: builtins.str) -> builtins.bool:
        """Whether the attribute holds element types (a DataType or a list of them)."""
        value = self._lookup(name)
        which = None if value is None else value.WhichOneof("value")
        return which == "type" or (which == "list" and len(value.list.type) > 0)

    def value(self, name: builtins.str) -> Any:
        """The attribute as a Python value of its own kind, or None (not recorded as read:
        the caller records what it reads)."""
        value = self._lookup(name)
        which = None if value is None else value.WhichOneof("value")
        if which is None or which == "placeholder":
            return None
        if which == "type":
            return value.type
        return self._decode(name, value, which, None)

    def override(self, name: str, value) -> None:
        """Replace one attribute (an AttrValue) for this node only."""
        self._overrides[name] = value

    def raw(self, name: str):
        """The AttrValue message of ``name`` (placeholders resolved), or None."""
        self.read.add(name)
        return self._lookup(name)

    def _lookup(self, name: builtins.str):
        if name in self._overrides:
            return self._overrides[name]
        if name not in self._map:
            return None
        value = self._map[name]
        if value.WhichOneof("value") == "placeholder" and self._bound is not None:
            return self._bound.get(value.placeholder)
        return value

    def has(self, name: str) -> bool:
        return self.raw(name) is not None

    def _bad(self, name: str, want: str) -> InvalidAttributeError:
        return located(InvalidAttributeError, self.where, f"attribute '{name}' is not {want}")

    def get(self, name: str, kind: str, default: Any = None) -> Any:
        return self._decode(name, self.raw(name), kind, default)

    def _decode(self, name: str, value, kind: str, default: Any) -> Any:
        if value is None:
            return default
        which = value.WhichOneof("value")
        if which is None:
            return default
        if kind == "list":
            if which != "list":
                raise self._bad(name, "a list")
            lst = value.list
            for field in ("i", "f", "s", "type", "b"):
                items = getattr(lst, field)
                if len(items):
                    return [x.decode("utf-8", "replace") if field == "s" else x for x in items]
            if len(lst.shape):
                return [shape_from_proto(s) for s in lst.shape]
            return []
        if which != kind:
            raise self._bad(name, f"of kind {kind}")
        if kind == "s":
            return value.s.decode("utf-8", "replace")
        if kind == "shape":
            return shape_from_proto(value.shape)
        if kind == "tensor":
            # an element type not handled is a refusal inside a converter: said as before
            numpy_dtype(value.tensor.dtype, f"attribute '{name}' of node '{self.node_name}'")
            try:
                return tensor_to_numpy(value.tensor, f"attribute '{name}'", self._buffer)
            except (InvalidModelError, ModelLoadError) as exc:  # named at the node, once
                raise located(type(exc), self.where, str(exc)) from None
        return getattr(value, kind)

    # Given a default, the typed getters return a value (the attribute's, else the default).
    @overload
    def int(self, name: str, default: builtins.int) -> builtins.int: ...
    @overload
    def int(self, name: str, default: None = None) -> builtins.int | None: ...

    def int(self, name: str, default: builtins.int | None = None) -> builtins.int | None:
        return self.get(name, "i", default)

    @overload
    def float(self, name: str, default: builtins.float) -> builtins.float: ...
    @overload
    def float(self, name: str, default: None = None) -> builtins.float | None: ...

    def float(self, name: str, default: builtins.float | None = None) -> builtins.float | None:
        return self.get(name, "f", default)

    @overload
    def bool(self, name: str, default: builtins.bool) -> builtins.bool: ...
    @overload
    def bool(self, name: str, default: None = None) -> builtins.bool | None: ...

    def bool(self, name: str, default: builtins.bool | None = None) -> builtins.bool | None:
        return self.get(name, "b", default)

    @overload
    def str(self, name: builtins.str, default: builtins.str) -> builtins.str: ...
    @overload
    def str(self, name: builtins.str, default: None = None) -> builtins.str | None: ...

    def str(self, name: builtins.str, default: builtins.str | None = None) -> builtins.str | None:
        return self.get(name, "s", default)

    @overload
    def ints(self, name: builtins.str, default: list) -> list: ...
    @overload
    def ints(self, name: builtins.str, default: None = None) -> list | None: ...

    def ints(self, name: builtins.str, default: list | None = None) -> list | None:
        return self.get(name, "list", default)

    def dtype(self, name: builtins.str, default: np.dtype | builtins.str | None = None
              ) -> np.dtype | builtins.str | None:
        value = self.raw(name)
        if value is None or value.WhichOneof("value") != "type":
            return default
        return numpy_dtype(value.type, f"attribute '{name}' of node '{self.node_name}'")

    def shape(self, name: builtins.str):
        """(found, shape): shape is a tuple with None dims, or None for an unknown rank."""
        value = self.raw(name)
        if value is None or value.WhichOneof("value") != "shape":
            return False, None
        return True, shape_from_proto(value.shape)

    def tensor(self, name: builtins.str) -> np.ndarray | None:
        return self.get(name, "tensor")


def check_loadable(data: bytes, path: str) -> None:
    """Refuse containers that are clearly not a GraphDef, with a hint of what they are."""
    if not data:
        raise ModelLoadError(f"{path}: the file is empty")
    if data[:4] == b"PK\x03\x04":
        raise ModelLoadError(
            f"{path}: this is a ZIP archive (a Keras .keras file?), not a TensorFlow GraphDef"
        )
    if data[:8] == b"\x89HDF\r\n\x1a\n":
        raise ModelLoadError(
            f"{path}: this is an HDF5 file (a Keras .h5 model?), not a TensorFlow GraphDef"
        )
