"""Node attributes: plain Python values <-> AttributeProto.

The kind of an attribute comes from the op's schema when there is one (so ``alpha=1`` on a float
attribute is still written as FLOAT); otherwise from the Python type of the value.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidAttributeError, ModelLoadError
from ..onnxfile import AttributeProto, GraphProto
from ..schemas.base import CORE_OPS, DIALECT_OPS, AttrKind, is_int, is_number
from .tensors import fill_tensor, tensor_to_array

# A graph attribute may come as our GraphProto or as onnx's (same message, another class).
_GRAPH_NAMES = ("nhwc_onnx.onnxfile.GraphProto", "onnx.GraphProto")

_KIND_TO_TYPE = {
    AttrKind.INT: AttributeProto.INT,
    AttrKind.FLOAT: AttributeProto.FLOAT,
    AttrKind.STRING: AttributeProto.STRING,
    AttrKind.INTS: AttributeProto.INTS,
    AttrKind.FLOATS: AttributeProto.FLOATS,
    AttrKind.STRINGS: AttributeProto.STRINGS,
    AttrKind.TENSOR: AttributeProto.TENSOR,
}


def schema_attr_type(op: str, domain: str, name: str) -> int | None:
    """The AttributeProto type the schema declares for ``op.name``, if any."""
    registry = CORE_OPS if domain == CORE_OPS.domain else DIALECT_OPS
    schema = registry.get(op)
    if schema is None:
        return None
    spec = schema.attrs.get(name)
    return None if spec is None else _KIND_TO_TYPE[spec.kind]


def infer_attr_type(value: Any) -> int:
    """The AttributeProto type a Python value naturally maps to."""
    if isinstance(value, (bool, np.bool_)) or is_int(value):
        return AttributeProto.INT
    if isinstance(value, (float, np.floating)):
        return AttributeProto.FLOAT
    if isinstance(value, (str, bytes)):
        return AttributeProto.STRING
    if isinstance(value, np.ndarray):
        return AttributeProto.TENSOR
    if _is_graph(value):
        return AttributeProto.GRAPH
    if isinstance(value, (list, tuple)):
        if all(isinstance(x, (str, bytes)) for x in value) and value:
            return AttributeProto.STRINGS
        if all(is_int(x) or isinstance(x, (bool, np.bool_)) for x in value):
            return AttributeProto.INTS  # the empty list too: ints are the common case
        if all(is_number(x) for x in value):
            return AttributeProto.FLOATS
    raise InvalidAttributeError(f"cannot store attribute value {value!r} in ONNX")


def _is_graph(value: Any) -> bool:
    descriptor = getattr(value, "DESCRIPTOR", None)
    return getattr(descriptor, "full_name", None) in _GRAPH_NAMES


def fits(attr_type: int, value: Any) -> bool:
    """Whether ``value`` can be written as ``attr_type`` without changing what it says."""
    if attr_type == AttributeProto.INT:
        return is_int(value) or isinstance(value, (bool, np.bool_))
    if attr_type == AttributeProto.FLOAT:
        return is_number(value)
    if attr_type == AttributeProto.STRING:
        return isinstance(value, (str, bytes))
    if attr_type == AttributeProto.TENSOR:
        return isinstance(value, np.ndarray)
    if not isinstance(value, (list, tuple)):
        return False
    if attr_type == AttributeProto.INTS:
        return all(is_int(x) for x in value)
    if attr_type == AttributeProto.FLOATS:
        return all(is_number(x) for x in value)
    if attr_type == AttributeProto.STRINGS:
        return all(isinstance(x, (str, bytes)) for x in value)
    return False


def attribute_type(op: str, domain: str, name: str, value: Any) -> int:
    """The schema's kind when the value fits it (so 1 on a float attribute is FLOAT), else the
    value's own kind: a wrong value is written as it is, for ``check`` to report."""
    declared = schema_attr_type(op, domain, name)
    if declared is not None and fits(declared, value):
        return declared
    return infer_attr_type(value)


def fill_attribute(
    attr: AttributeProto, name: str, value: Any, attr_type: int, node_name: str
) -> None:
    """Write ``value`` into ``attr`` (in place) with the given AttributeProto type."""
    attr.name = name
    attr.type = attr_type
    try:
        if attr_type == AttributeProto.INT:
            attr.i = int(value)
        elif attr_type == AttributeProto.FLOAT:
            attr.f = float(value)
        elif attr_type == AttributeProto.STRING:
            attr.s = value if isinstance(value, bytes) else str(value).encode("utf-8")
        elif attr_type == AttributeProto.INTS:
            attr.ints.extend(int(x) for x in value)
        elif attr_type == AttributeProto.FLOATS:
            attr.floats.extend(float(x) for x in value)
        elif attr_type == AttributeProto.STRINGS:
            attr.strings.extend(x if isinstance(x, bytes) else str(x).encode("utf-8")
                                for x in value)
        elif attr_type == AttributeProto.TENSOR:
            fill_tensor(attr.t, np.asarray(value), "")
        elif attr_type == AttributeProto.GRAPH:
            if isinstance(value, GraphProto):
                attr.g.CopyFrom(value)
            else:  # onnx's GraphProto: the same bytes
                attr.g.ParseFromString(value.SerializeToString())
        else:
            raise TypeError(f"unsupported attribute type {attr_type}")
    except (TypeError, ValueError) as exc:
        kind = AttributeProto.AttributeType.Name(attr_type).lower()
        raise InvalidAttributeError(
            f"node '{node_name}': attribute '{name}' = {value!r} cannot be written as {kind}"
        ) from exc


def read_attribute(attr: AttributeProto, node_name: str) -> Any:
    """The plain Python value of an attribute: int, float, str, lists, ndarray."""
    t = attr.type
    if t == AttributeProto.INT:
        return int(attr.i)
    if t == AttributeProto.FLOAT:
        return float(attr.f)
    if t == AttributeProto.STRING:
        return _text(attr.s)
    if t == AttributeProto.INTS:
        return [int(x) for x in attr.ints]
    if t == AttributeProto.FLOATS:
        return [float(x) for x in attr.floats]
    if t == AttributeProto.STRINGS:
        return [_text(x) for x in attr.strings]
    if t == AttributeProto.TENSOR:
        return tensor_to_array(attr.t)
    if t == AttributeProto.GRAPH:
        # Kept as a proto: not part of the dialect, but a foreign model must still load so
        # that `check` can name the op it does not know.
        graph = type(attr.g)()  # ours, or onnx's when from_onnx was given onnx's ModelProto
        graph.CopyFrom(attr.g)
        return graph
    kind = AttributeProto.AttributeType.Name(t) if t in AttributeProto.AttributeType.values() \
        else str(t)
    raise ModelLoadError(f"node '{node_name}': attribute '{attr.name}' has unsupported type {kind}")


def _text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")
