"""ONNX file / ModelProto -> IR. Unreadable input raises ModelLoadError with one clear line."""
from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto

from ..errors import ModelLoadError
from ..ir import DIALECT, Graph, Model, Node, Value
from ..safe_io import external_span, read_regular
from .attributes import read_attribute
from .tensors import dtype_from_onnx, read_type, tensor_to_array
from .writer import KEY_IO_PERMUTATIONS


def load(path: str | os.PathLike) -> Model:
    """Read an ONNX file (external data resolved next to it) into the IR."""
    path = Path(path)
    label = str(path)
    data = read_regular(path, label)
    proto = parse_model_bytes(data, label)
    return from_onnx(proto, base_dir=path.parent, label=label)


def parse_model_bytes(data: bytes, label: str = "model") -> onnx.ModelProto:
    """Parse serialized bytes, refusing empty, truncated and foreign files."""
    if not data:
        raise ModelLoadError(f"{label}: empty file, not an ONNX model")
    proto = onnx.ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError; its message names no position
        kind = "a text file" if _looks_like_text(data) else "truncated or not ONNX"
        raise ModelLoadError(
            f"{label}: not an ONNX model ({kind}; the protobuf parser rejects its {len(data)} "
            "bytes)"
        ) from exc
    if proto.ir_version <= 0:
        raise ModelLoadError(f"{label}: not an ONNX model (no IR version; {len(data)} bytes)")
    if not proto.HasField("graph"):
        raise ModelLoadError(f"{label}: not an ONNX model or truncated (no graph)")
    if not proto.opset_import:
        raise ModelLoadError(f"{label}: truncated or not an ONNX model (no opset_import)")
    imported = {o.domain for o in proto.opset_import}
    missing = sorted({n.domain for n in proto.graph.node} - imported - {"ai.onnx"})
    if missing:
        raise ModelLoadError(f"{label}: truncated or malformed ONNX model (nodes use operator "
                             f"domain(s) {', '.join(map(repr, missing))} with no opset_import)")
    return proto


def _looks_like_text(data: bytes) -> bool:
    head = data[:512]
    printable = sum(1 for b in head if b in (9, 10, 13) or 32 <= b < 127)
    return printable >= 0.95 * len(head)


class _ExternalData:
    """Reads tensors stored next to the model file (ONNX external data), through the guards
    the source loader uses too (``safe_io.external_span``)."""

    def __init__(self, base_dir: Path | None, label: str):
        self.base_dir = base_dir
        self.label = label

    def array(self, tensor: TensorProto) -> np.ndarray:
        info = {e.key: e.value for e in tensor.external_data}
        where = f"{self.label}: tensor '{tensor.name}'"
        if self.base_dir is None:
            raise ModelLoadError(f"{where} uses external data but no model directory is known")
        dtype = dtype_from_onnx(tensor.data_type)
        if dtype is None or np.dtype(dtype).kind not in "biufc":
            raise ModelLoadError(f"{where}: element type {tensor.data_type} cannot be stored "
                                 "externally")
        span = external_span(self.base_dir, info, tensor.dims, np.dtype(dtype).itemsize, where)
        return span.read_array(dtype, where).reshape(tuple(int(d) for d in tensor.dims))


def _tensor(tensor: TensorProto, external: _ExternalData) -> np.ndarray:
    if tensor.data_location == TensorProto.EXTERNAL:
        return external.array(tensor)
    return tensor_to_array(tensor)


def from_onnx(
    proto: onnx.ModelProto, base_dir: str | os.PathLike | None = None, label: str = "model"
) -> Model:
    """Build the IR of an ONNX model: initializers and Constant nodes become constant Values,
    node domains and names are kept, attributes become plain Python values."""
    external = _ExternalData(Path(base_dir) if base_dir is not None else None, label)
    gp = proto.graph

    def text(value, what: str) -> str:
        # protobuf hands back bytes for a string field that is not UTF-8: a corrupt file
        if isinstance(value, bytes):
            raise ModelLoadError(f"{label}: {what} is not UTF-8 text (corrupt file?)")
        return value

    graph = Graph(text(gp.name, "the graph name") or "graph")
    model = Model(graph)
    model.producer_name = text(proto.producer_name, "producer_name") or model.producer_name
    model.doc = text(proto.doc_string, "doc_string")
    _read_metadata(proto, model, text)

    infos = {}
    for vi in (*gp.value_info, *gp.output, *gp.input):
        infos[text(vi.name, "a value name")] = read_type(vi.type)
    values: dict[str, Value] = {}
    input_ids: set[int] = set()

    def fresh(name: str) -> Value:
        dtype, shape, layout = infos.get(name, ("float32", None, None))
        return Value(name, dtype, shape, layout)

    def get(name: str) -> Value | None:
        if name == "":
            return None
        if name not in values:
            values[name] = fresh(name)  # produced later in the file, or dangling
        return values[name]

    for t in gp.initializer:
        values[text(t.name, "an initializer name")] = Value(t.name, const=_tensor(t, external))
    for vi in gp.input:
        if vi.name in values:
            continue  # old-style models list initializers as inputs too
        v = fresh(vi.name)
        values[vi.name] = v
        graph.add_input(v)
        input_ids.add(id(v))

    # Reserve every name of the file first so generated names (unnamed nodes) cannot collide.
    for n in gp.node:
        text(n.op_type, "an op type")
        text(n.domain, "a node domain")
        text(n.doc_string, "a node doc_string")
        for a in n.attribute:
            text(a.name, "an attribute name")
        for name in (n.name, *n.input, *n.output):
            if text(name, "a node or tensor name"):
                graph.reserve_name(name)
    for name in values:
        graph.reserve_name(name)

    for n in gp.node:
        if _is_constant_node(n):
            _read_constant_node(n, values, input_ids, label)
            continue
        inputs = [get(name) for name in n.input]
        outputs = []
        for name in n.output:
            existing = values.get(name)
            if existing is None:
                existing = values[name] = fresh(name)
            elif existing.producer() is not None or existing.is_const or id(existing) in input_ids:
                existing = fresh(name)  # a second producer: validate() reports the duplicate
            outputs.append(existing)
        attrs = {a.name: read_attribute(a, n.name) for a in n.attribute}
        node = Node(n.op_type, inputs, outputs, attrs, name=n.name, domain=n.domain,
                    doc=n.doc_string)
        original = n.name
        graph.add_node(node)
        if original:
            node.name = original  # add_node would suffix a name the file reuses
    for vi in gp.output:
        graph.outputs.append(get(vi.name))
    return model


def _is_constant_node(n: onnx.NodeProto) -> bool:
    return n.op_type == "Constant" and n.domain in ("", DIALECT) and len(n.output) == 1 \
        and not n.input


def _read_constant_node(
    n: onnx.NodeProto, values: dict[str, Value], input_ids: set[int], label: str
) -> None:
    if len(n.attribute) != 1:
        raise ModelLoadError(f"{label}: Constant node '{n.name}' must have exactly one attribute")
    attr = n.attribute[0]
    value = read_attribute(attr, n.name)
    if attr.name == "value_float":
        array = np.array(value, dtype=np.float32)
    elif attr.name == "value_int":
        array = np.array(value, dtype=np.int64)
    elif attr.name == "value_floats":
        array = np.array(value, dtype=np.float32)
    elif attr.name == "value_ints":
        array = np.array(value, dtype=np.int64)
    elif attr.name == "value" and isinstance(value, np.ndarray):
        array = value
    else:
        raise ModelLoadError(f"{label}: Constant node '{n.name}' has unsupported attribute "
                             f"'{attr.name}'")
    name = n.output[0]
    existing = values.get(name)
    if existing is not None and existing.producer() is None and not existing.is_const \
            and id(existing) not in input_ids:
        existing.set_const(array)  # a consumer earlier in the file already referenced it
    elif existing is None:
        values[name] = Value(name, const=array)
    else:
        raise ModelLoadError(f"{label}: tensor '{name}' is defined twice (Constant '{n.name}')")


def _read_metadata(proto: onnx.ModelProto, model: Model, text) -> None:
    for entry in proto.metadata_props:
        text(entry.key, "a metadata key")
        text(entry.value, "a metadata value")
        if entry.key == KEY_IO_PERMUTATIONS:
            try:
                perms = json.loads(entry.value)
                model.io_permutations = {str(k): [int(i) for i in p] for k, p in perms.items()}
                continue
            except (ValueError, TypeError, AttributeError):
                pass  # not ours: keep it as plain metadata
        model.metadata[entry.key] = entry.value
