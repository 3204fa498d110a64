"""ONNX file / ModelProto -> IR. Unreadable input raises ModelLoadError with one clear line."""
from __future__ import annotations

import contextlib
import math
import os
import sys
from pathlib import Path

import numpy as np

from ..errors import ModelLoadError, ValidationIssue
from ..files.onnx_wire import LiftedModel, WireFormatError, lift_raw_data
from ..files.reads import (
    MAP_MIN_BYTES,
    element_count,
    external_span,
    map_regular,
    mapped_array,
    remember_origin,
)
from ..ir import DIALECT, DeferredArray, Graph, Model, Node, Value
from ..ir.deferred import ITEMSIZE
from ..ir.metadata import KEY_IO_PERMUTATIONS, READERS, check_model_metadata
from ..onnxfile import ModelProto, NodeProto, TensorProto
from .attributes import read_attribute
from .tensors import dtype_from_onnx, read_type, tensor_to_array


class _Lifted:
    """Tensors whose raw_data stayed in the mapped file (onnx_wire.lift_raw_data)."""

    __slots__ = ("buffer", "path", "spans")

    def __init__(self, buffer, spans: LiftedModel, path: Path):
        self.buffer = buffer
        self.spans = spans
        self.path = path


def load(path: str | os.PathLike, defer_weights: bool = False) -> Model:
    """Read an ONNX file (external data resolved next to it) into the IR.

    The file is memory-mapped and protobuf parses only its structure: large weights become
    read-only numpy views of the mapped file, so a model's weights cost no copy (and pages
    that are never touched are never read). ``defer_weights``: initializers become
    ``DeferredArray`` constants, decoded on first use (``check`` reads shapes only, so it
    runs without numpy); every size check of the eager read is still made now.
    """
    path = Path(path)
    label = str(path)
    data = map_regular(path, label)
    lifted = None
    if data:
        try:
            spans = lift_raw_data(data)
        except WireFormatError:
            spans = None  # malformed: the plain parse below reports it properly
        if spans is not None and (spans.initializers or spans.constants):
            lifted = _Lifted(data, spans, path)
    skeleton = lifted.spans.skeleton if lifted is not None else data[:]
    proto = parse_model_bytes(skeleton, label, size=len(data))
    if lifted is not None and not _constants_resolve(proto, lifted.spans):
        lifted = None  # a lifted node tensor is ambiguous: read the file the plain way
        proto = parse_model_bytes(data[:], label)
    return from_onnx(proto, base_dir=path.parent, label=label, _lifted=lifted,
                     defer_weights=defer_weights)


def _lifted_attribute(node: NodeProto):
    """The tensor attribute whose raw_data was lifted, or None when not exactly one fits."""
    found = [a for a in node.attribute if a.HasField("t") and not a.t.HasField("raw_data")]
    return found[0] if len(found) == 1 else None


def _constants_resolve(proto: ModelProto, spans: LiftedModel) -> bool:
    nodes = proto.graph.node
    return all(index < len(nodes) and _lifted_attribute(nodes[index]) is not None
               for index in spans.constants) and \
        all(index < len(proto.graph.initializer) for index in spans.initializers)


def parse_model_bytes(data: bytes, label: str = "model", size: int | None = None) -> ModelProto:
    """Parse serialized bytes, refusing empty, truncated and foreign files. ``size``: the
    file's size when ``data`` is its skeleton (large weights lifted out)."""
    size = len(data) if size is None else size
    if not data:
        raise ModelLoadError(f"{label}: empty file, not an ONNX model")
    proto = ModelProto()
    try:
        proto.ParseFromString(data)
    except Exception as exc:  # protobuf's DecodeError; its message names no position
        kind = "a text file" if _looks_like_text(data) else "truncated or not ONNX"
        raise ModelLoadError(
            f"{label}: not an ONNX model ({kind}; the protobuf parser rejects its {size} "
            "bytes)"
        ) from exc
    if proto.ir_version <= 0:
        raise ModelLoadError(f"{label}: not an ONNX model (no IR version; {size} bytes)")
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
    the source loader uses too (``files.reads.external_span``)."""

    def __init__(self, base_dir: Path | None, label: str):
        self.base_dir = base_dir
        self.label = label

    def reader(self, tensor: TensorProto):
        """(element type, shape, read): every check of the entry is made now, the bytes are
        mapped by ``read()`` (large ones are never copied; see ``ExternalSpan.array``)."""
        info = {e.key: e.value for e in tensor.external_data}
        where = f"{self.label}: tensor '{tensor.name}'"
        if self.base_dir is None:
            raise ModelLoadError(f"{where} uses external data but no model directory is known")
        dtype = dtype_from_onnx(tensor.data_type)
        if dtype is None or np.dtype(dtype).kind not in "biufc":
            raise ModelLoadError(f"{where}: element type {tensor.data_type} cannot be stored "
                                 "externally")
        span = external_span(self.base_dir, info, tensor.dims, np.dtype(dtype).itemsize, where)
        shape = tuple(int(d) for d in tensor.dims)
        return dtype, shape, lambda: span.array(dtype, shape, where)


def _view(tensor: TensorProto, lifted: _Lifted, span: tuple[int, int], label: str) -> np.ndarray:
    """The read-only view of a tensor whose raw_data was lifted (checked like an inline one)."""
    offset, length = span
    dims = tuple(int(d) for d in tensor.dims)
    dtype = dtype_from_onnx(tensor.data_type)
    where = f"{label}: tensor '{tensor.name}'"
    if tensor.data_location == TensorProto.EXTERNAL:
        raise ModelLoadError(f"{where} has both inline and external data")
    if dtype is None or np.dtype(dtype).kind not in "biuf":
        raise ModelLoadError(f"{where}: raw data of element type {tensor.data_type} is not "
                             "supported")
    itemsize = np.dtype(dtype).itemsize
    expected = element_count(dims, where) * itemsize  # Python ints: no int64 wrap-around
    if length != expected:
        raise ModelLoadError(f"tensor '{tensor.name}' holds {length} bytes, its shape "
                             f"{list(dims)} of {dtype} needs {expected}")
    view = mapped_array(lifted.buffer, np.dtype(dtype).newbyteorder("<"), length // itemsize,
                        offset, dims)
    if sys.byteorder == "big" and itemsize > 1:
        return view.astype(dtype)  # the IR computes in native byte order
    if length >= MAP_MIN_BYTES:
        remember_origin(view, lifted.path, offset)  # a runtime may read it from the file
    return view


def _deferred(tensor: TensorProto, length: int | None, read) -> DeferredArray | None:
    """``tensor`` (``length`` bytes of raw data) as a DeferredArray when the eager read would
    accept it: a numeric type, inline data whose size fits the shape. Otherwise None, and the
    eager read runs now (and reports what is wrong in its own words)."""
    dtype = dtype_from_onnx(tensor.data_type)
    itemsize = ITEMSIZE.get(dtype) if dtype is not None else None
    dims = tuple(int(d) for d in tensor.dims)
    if dtype is None or itemsize is None or length is None \
            or tensor.data_location == TensorProto.EXTERNAL \
            or any(d < 0 for d in dims) or length != math.prod(dims) * itemsize:
        return None
    return DeferredArray(dims, dtype, read)


def _initializer(tensor: TensorProto, external: _ExternalData, lifted: _Lifted | None,
                 span: tuple[int, int] | None, label: str, defer: bool):
    if tensor.data_location == TensorProto.EXTERNAL and span is None:
        dtype, shape, read = external.reader(tensor)  # checked now, mapped on first use
        if defer and dtype in ITEMSIZE:
            return DeferredArray(shape, dtype, read)  # ``check`` reads no weight bytes
        return read()
    if span is None:
        def read():
            return tensor_to_array(tensor)
        length = len(tensor.raw_data) if defer and tensor.HasField("raw_data") else None
    else:
        assert lifted is not None  # the spans are lifted's
        def read():
            return _view(tensor, lifted, span, label)
        length = span[1]
    deferred = _deferred(tensor, length, read) if defer else None
    return read() if deferred is None else deferred


def from_onnx(
    proto: ModelProto, base_dir: str | os.PathLike | None = None, label: str = "model",
    _lifted: _Lifted | None = None, defer_weights: bool = False,
) -> Model:
    """Build the IR of an ONNX model (our ModelProto or onnx's: the fields are the same):
    initializers and Constant nodes become constant Values, node domains and names are kept,
    attributes become plain Python values."""
    reader = _GraphReader(proto, base_dir, label, _lifted, defer_weights)
    reader.read_initializers_and_inputs()
    reader.reserve_names()
    reader.read_nodes()
    return reader.finish()


class _GraphReader:
    """One ModelProto read into a Model, stage by stage (values, names, nodes, outputs)."""

    def __init__(self, proto: ModelProto, base_dir, label: str, lifted: _Lifted | None,
                 defer_weights: bool):
        self.proto, self.gp, self.label = proto, proto.graph, label
        self.external = _ExternalData(Path(base_dir) if base_dir is not None else None, label)
        self.lifted, self.defer_weights = lifted, defer_weights
        self.graph = Graph(self.text(self.gp.name, "the graph name") or "graph")
        self.model = Model(self.graph)
        self.model.producer_name = (self.text(proto.producer_name, "producer_name")
                                    or self.model.producer_name)
        self.model.doc = self.text(proto.doc_string, "doc_string")
        _read_metadata(proto, self.model, self.text, label)
        self.infos = {self.text(vi.name, "a value name"): read_type(vi.type)
                      for vi in (*self.gp.value_info, *self.gp.output, *self.gp.input)}
        self.values: dict[str, Value] = {}
        self.input_ids: set[int] = set()
        self.defined: dict[str, int] = {}  # name -> initializers with it (onnx.checker: one)
        self.listed: dict[str, int] = {}  # name -> times the graph lists it as an input

    def text(self, value, what: str) -> str:
        # protobuf hands back bytes for a string field that is not UTF-8: a corrupt file
        if isinstance(value, bytes):
            raise ModelLoadError(f"{self.label}: {what} is not UTF-8 text (corrupt file?)")
        return value

    def fresh(self, name: str) -> Value:
        dtype, shape, layout = self.infos.get(name, ("float32", None, None))
        return Value(name, dtype, shape, layout)

    def get(self, name: str) -> Value | None:
        if name == "":
            return None
        if name not in self.values:
            self.values[name] = self.fresh(name)  # produced later in the file, or dangling
        return self.values[name]

    def read_initializers_and_inputs(self) -> None:
        spans = self.lifted.spans.initializers if self.lifted is not None else {}
        for index, t in enumerate(self.gp.initializer):
            with _naming(self.label, "initializer", t.name):
                array = _initializer(t, self.external, self.lifted, spans.get(index),
                                     self.label, self.defer_weights)
            name = self.text(t.name, "an initializer name")
            self.defined[name] = self.defined.get(name, 0) + 1
            self.values[name] = Value(t.name, const=array)
        for vi in self.gp.input:
            self.listed[vi.name] = self.listed.get(vi.name, 0) + 1
            if vi.name in self.values:
                continue  # old-style models list initializers as inputs too
            v = self.fresh(vi.name)
            self.values[vi.name] = v
            self.graph.add_input(v)
            self.input_ids.add(id(v))

    def reserve_names(self) -> None:
        """Every name of the file first, so generated names (unnamed nodes) cannot collide."""
        for n in self.gp.node:
            self.text(n.op_type, "an op type")
            self.text(n.domain, "a node domain")
            self.text(n.doc_string, "a node doc_string")
            for a in n.attribute:
                self.text(a.name, "an attribute name")
            for name in (n.name, *n.input, *n.output):
                if self.text(name, "a node or tensor name"):
                    self.graph.reserve_name(name)
        for name in self.values:
            self.graph.reserve_name(name)

    def read_nodes(self) -> None:
        spans = self.lifted.spans.constants if self.lifted is not None else {}
        for index, n in enumerate(self.gp.node):
            span = spans.get(index)
            view = None
            if span is not None:
                assert self.lifted is not None  # the spans are its
                lifted_attr = _lifted_attribute(n)
                view = lifted_attr.name, _view(lifted_attr.t, self.lifted, span, self.label)
            if _is_constant_node(n):
                with _naming(self.label, "Constant node", n.name):
                    _read_constant_node(n, self.values, self.input_ids, self.label, view)
                continue
            self._add_node(n, view)

    def _add_node(self, n, view) -> None:
        inputs = [self.get(name) for name in n.input]
        outputs = []
        for name in n.output:
            existing = self.values.get(name)
            if existing is None:
                existing = self.values[name] = self.fresh(name)
            elif (existing.producer() is not None or existing.is_const
                  or id(existing) in self.input_ids):
                existing = self.fresh(name)  # a second producer: validate() reports it
            outputs.append(existing)
        with _naming(self.label, "node", n.name):
            attrs = {a.name: read_attribute(a, n.name) for a in n.attribute
                     if view is None or a.name != view[0]}
        if view is not None:
            attrs[view[0]] = view[1]
        node = Node(n.op_type, inputs, outputs, attrs, name=n.name, domain=n.domain,
                    doc=n.doc_string)
        original = n.name
        self.graph.add_node(node)
        if original:
            node.name = original  # add_node would suffix a name the file reuses

    def finish(self) -> Model:
        for vi in self.gp.output:
            output = self.get(vi.name)
            if output is None:  # the IR cannot hold a nameless output: validate() reports it
                self.model.load_issues.append(ValidationIssue(
                    "", "", "graph-output", "a graph output has an empty name"))
                continue
            self.graph.outputs.append(output)
        self.model.load_issues += [
            ValidationIssue("", "", "duplicate-name", f"{count} initializers are named "
                            f"'{name}' (the graph may define each name once)")
            for name, count in self.defined.items() if count > 1]
        self.model.load_issues += [
            ValidationIssue("", "", "duplicate-name", f"the graph lists input '{name}' "
                            f"{count} times") for name, count in self.listed.items() if count > 1]
        try:
            check_model_metadata(self.model)
        except ModelLoadError as exc:
            raise ModelLoadError(f"{self.label}: {exc}") from None
        return self.model


@contextlib.contextmanager
def _naming(label: str, kind: str, name: str):
    """Say which file (and which initializer or node) a tensor that cannot be read is in:
    the tensor decoder knows only the tensor's own name, often empty in a Constant."""
    try:
        yield
    except ModelLoadError as exc:
        text = str(exc)
        if text.startswith(f"{label}:"):
            raise
        where = label if f"tensor '{name}'" in text else f"{label}: {kind} '{name}'"
        raise ModelLoadError(f"{where}: {text}") from None


def _is_constant_node(n: NodeProto) -> bool:
    return n.op_type == "Constant" and n.domain in ("", DIALECT) and len(n.output) == 1 \
        and not n.input


def _read_constant_node(
    n: NodeProto, values: dict[str, Value], input_ids: set[int], label: str,
    view: tuple[str, np.ndarray] | None = None,
) -> None:
    if len(n.attribute) != 1:
        raise ModelLoadError(f"{label}: Constant node '{n.name}' must have exactly one attribute")
    attr = n.attribute[0]
    value = view[1] if view is not None else read_attribute(attr, n.name)
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


def _read_metadata(proto: ModelProto, model: Model, text, label: str) -> None:
    for entry in proto.metadata_props:
        text(entry.key, "a metadata key")
        text(entry.value, "a metadata value")
        read = READERS.get(entry.key)
        if read is not None:
            try:
                value = read(entry.value)
            except ModelLoadError as exc:
                raise ModelLoadError(f"{label}: {exc}") from None
            if entry.key == KEY_IO_PERMUTATIONS:
                model.io_permutations = value  # type: ignore[assignment]  # its reader checked
                continue
        model.metadata[entry.key] = entry.value
