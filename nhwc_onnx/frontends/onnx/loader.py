"""Read a ``.onnx`` file into a checked ``onnx.ModelProto``.

External data is read by us, not by ``onnx.load``: a location must stay inside the model's
folder (no absolute paths, no ``..`` escapes, no symlinks pointing out), and a missing or short
file is a clear ModelLoadError instead of a traceback.
"""
from __future__ import annotations

import os
import sys

import numpy as np
import onnx
from google.protobuf.message import DecodeError
from onnx import TensorProto

from ...errors import InvalidModelError, ModelLoadError
from ...files.onnx_wire import lift_raw_data
from ...files.protowire import WireFormatError
from ...files.reads import external_span, map_regular, mapped_array
from ..base import MAX_SOURCE_NODES, check_node_count

# First bytes of formats people mistake for ONNX: say what the file is instead of "cannot parse".
_MAX_GRAPH_NESTING = 64  # If/Loop bodies inside bodies; deeper is a corrupt or hostile file
_FOREIGN_MAGIC = {
    b"PK\x03\x04": "a ZIP archive (Keras .keras / TF SavedModel bundle?)",
    b"\x89HDF": "an HDF5 file (Keras .h5?)",
}


def read_model(path: str, external: dict | None = None) -> onnx.ModelProto:
    """Load and structurally check an ONNX model; raise ModelLoadError / InvalidModelError.

    With ``external`` (a dict), external initializers are read straight into numpy arrays
    stored there by name, and stay out of the proto (no bytes object, no copy into protobuf).
    """
    data = map_regular(path, f"'{path}'")
    lifted = _lift_weights(data) if external is not None else None
    model = parse_model_bytes(data if lifted is None else lifted.skeleton, path, data[:8])
    load_external_data(model, os.path.dirname(os.path.abspath(path)), path, external)
    if lifted is not None and external is not None:  # lifted only with external
        _view_lifted(model, data, lifted, external, path)
    return model


# Initializers lifted out of the parse: large enough that the shape-inference skeleton
# (folding.py) makes every one of them a typed input, so no pass needs their bytes in the proto.
LIFT_MIN_BYTES = 1 << 17


def _lift_weights(data):
    """The model without its large initializers' raw_data (None: nothing to lift, or the
    bytes are malformed and the plain parse reports why)."""
    if not data:
        return None
    try:
        lifted = lift_raw_data(data, LIFT_MIN_BYTES)
    except WireFormatError:
        return None
    return lifted if lifted.initializers else None


def _view_lifted(model: onnx.ModelProto, data, lifted, external: dict, label: str) -> None:
    """Lifted initializers become read-only views of the mapped file in ``external``; a
    lifted tensor of a type numpy cannot view gets its bytes back. A Constant node's tensor
    always does (rare, and the importer reads those from the proto)."""
    for index, (offset, length) in lifted.initializers.items():
        tensor = model.graph.initializer[index]
        dtype = _np_dtype(tensor)
        if dtype is None or dtype.kind not in "biuf":
            tensor.raw_data = bytes(data[offset:offset + length])
            continue
        dims = tuple(int(d) for d in tensor.dims)
        count = int(np.prod(dims, dtype=np.int64)) if dims else 1
        if any(d < 0 for d in dims) or count * dtype.itemsize != length:
            raise ModelLoadError(
                f"malformed tensor data: initializer '{tensor.name}' of '{label}' declares dims "
                f"{list(dims)} but stores {length // dtype.itemsize} element(s)")
        view = mapped_array(data, dtype.newbyteorder("<"), count, offset, dims)
        external[tensor.name] = view if sys.byteorder == "little" else view.astype(dtype)
        tensor.data_location = TensorProto.EXTERNAL  # its data is in ``external``, not here
    for index, (offset, length) in lifted.constants.items():
        for attr in model.graph.node[index].attribute:
            if attr.HasField("t") and not attr.t.HasField("raw_data"):
                attr.t.raw_data = bytes(data[offset:offset + length])


def parse_model_bytes(data: bytes, label: str = "<bytes>", head: bytes | None = None
                      ) -> onnx.ModelProto:
    """``head``: the file's first bytes when ``data`` is a skeleton of it."""
    if not data:
        raise ModelLoadError(f"'{label}' is empty, not an ONNX model")
    head = bytes(data[:8]) if head is None else bytes(head)
    for magic, what in _FOREIGN_MAGIC.items():
        if head.startswith(magic):
            raise ModelLoadError(f"'{label}' is {what}, not an ONNX model")
    model = onnx.ModelProto()
    try:
        model.ParseFromString(data if isinstance(data, bytes) else memoryview(data))
    except (DecodeError, RuntimeError, ValueError) as exc:
        raise ModelLoadError(
            f"'{label}' is not a valid ONNX model (truncated or not protobuf): {_short(exc)}"
        ) from exc
    # Protobuf accepts many byte strings as an almost-empty message: demand the essentials.
    if not model.HasField("graph") or not model.opset_import or model.ir_version <= 0:
        raise ModelLoadError(
            f"'{label}' is not an ONNX model (no graph, opset import or IR version)"
        )
    if not model.graph.node and not model.graph.output:
        raise ModelLoadError(f"'{label}' holds an empty ONNX graph")
    _check_text(model, label)
    _check_expanded_size(model, label)
    return model


def _check_expanded_size(model: onnx.ModelProto, label: str) -> None:
    """Refuse a graph that, with its model-local functions expanded, exceeds MAX_SOURCE_NODES:
    functions calling the next level twice grow exponentially, and ONNX's shape inference
    would expand them (for minutes) before any converter sees the model. Counted statically
    from the call graph."""
    functions = {(f.domain, f.name): f for f in model.functions}
    if not functions:
        check_node_count(len(model.graph.node), f"'{label}'")
        return
    sizes: dict[tuple[str, str], int] = {}

    def expanded(key: tuple[str, str], depth: int) -> int:
        if key in sizes:
            return sizes[key]
        if depth > _MAX_GRAPH_NESTING:
            raise ModelLoadError(f"'{label}': model-local function '{key[1]}' calls functions "
                                 f"more than {_MAX_GRAPH_NESTING} deep (or itself)")
        size = sum(expanded((n.domain, n.op_type), depth + 1)
                   if (n.domain, n.op_type) in functions else 1
                   for n in functions[key].node)
        sizes[key] = size
        return size

    total, biggest = 0, (0, "", "")
    for node in model.graph.node:
        key = (node.domain, node.op_type)
        size = expanded(key, 1) if key in functions else 1
        total += size
        biggest = max(biggest, (size, node.op_type, node.name))
    if total > MAX_SOURCE_NODES:
        size, name, caller = biggest
        raise InvalidModelError(
            f"'{label}': model-local function '{name}' (called by node '{caller}') expands to "
            f"{size} nodes; the graph would have {total}, more than the {MAX_SOURCE_NODES} "
            "nhwc-onnx converts (functions that each call the next level several times grow "
            "exponentially); refused")


def _check_text(model: onnx.ModelProto, label: str) -> None:
    """Protobuf hands string fields that are not UTF-8 to Python as ``bytes``: a corrupt file.
    Refuse them here, before any of them reaches a name, a message or the writer."""

    def text(value, what: str) -> None:
        if isinstance(value, bytes):
            raise ModelLoadError(
                f"'{label}': {what} {value!r} is not UTF-8 text (corrupt file?)")

    for imp in model.opset_import:
        text(imp.domain, "an opset import domain")
    graphs = [(model.graph, 0)]
    while graphs:
        graph, depth = graphs.pop()
        if depth > _MAX_GRAPH_NESTING:
            raise ModelLoadError(f"'{label}' nests subgraphs more than {_MAX_GRAPH_NESTING} deep")
        text(graph.name, "a graph name")
        for info in list(graph.input) + list(graph.output) + list(graph.value_info):
            text(info.name, "a value name")
        for init in graph.initializer:
            text(init.name, "an initializer name")
        for node in graph.node:
            for what, value in (("a node name", node.name), ("an op type", node.op_type),
                                ("an operator domain", node.domain)):
                text(value, what)
            for name in list(node.input) + list(node.output):
                text(name, f"a tensor name of node '{node.name}'")
            for attr in node.attribute:
                text(attr.name, f"an attribute name of node '{node.name}'")
                if attr.HasField("g"):
                    graphs.append((attr.g, depth + 1))
                graphs.extend((g, depth + 1) for g in attr.graphs)


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def _tensors_with_external_data(model: onnx.ModelProto) -> list[TensorProto]:
    tensors = [t for t in model.graph.initializer]
    for node in model.graph.node:
        for attr in node.attribute:
            if attr.HasField("t"):
                tensors.append(attr.t)
    return [t for t in tensors if t.data_location == TensorProto.EXTERNAL]


def load_external_data(model: onnx.ModelProto, base_dir: str, label: str,
                       arrays: dict | None = None) -> None:
    """Read every external tensor's bytes into raw_data (checked by ``files.reads.external_span``:
    inside ``base_dir``, a regular file, the right length).

    Initializers go into ``arrays`` (name -> ndarray) instead, when it is given."""
    initializers = {t.name for t in model.graph.initializer} if arrays is not None else set()
    for tensor in _tensors_with_external_data(model):
        info = {e.key: e.value for e in tensor.external_data}
        where = f"tensor '{tensor.name}' of '{label}'"
        dtype = _np_dtype(tensor)
        span = external_span(base_dir, info, tensor.dims,
                             dtype.itemsize if dtype is not None else None, where)
        if tensor.name in initializers and dtype is not None and arrays is not None:
            arrays[tensor.name] = span.array(dtype, tuple(tensor.dims), where)  # mapped
            continue
        tensor.raw_data = span.read(where)
        tensor.data_location = TensorProto.DEFAULT
        del tensor.external_data[:]


def _np_dtype(tensor: TensorProto) -> np.dtype | None:
    try:
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tensor.data_type)
    except (KeyError, ValueError, TypeError):
        return None
    return None if dtype.kind in "OUS" else dtype
