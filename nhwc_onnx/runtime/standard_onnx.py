"""Lower a dialect model, or a core-IR model (what the frontends emit, before the passes), to
standard ONNX (default domain) so onnxruntime can execute it.

Each schema's ``lower`` function (dialect or core op) emits the standard ops for one node; this
module only drives them and assembles the ModelProto.
"""
from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..errors import ConversionBugError, ModelLoadError, NodeProblem, UnsupportedOpError
from ..files.reads import file_origin
from ..ir import Model, Node
from ..ir.core import CORE, DIALECT
from ..ir.metadata import KEY_IO_PERMUTATIONS, encode_io_permutations
from ..schemas import CORE_OPS, DIALECT_OPS, infer_shapes
from ..schemas.base import Registry

LOWERED_OPSET = 17
LOWERED_IR_VERSION = 8  # onnxruntime 1.31 rejects IR 14, which onnx 1.23 writes by default


class OnnxLowerer:
    """Collects standard ONNX nodes and constants for one model; see schemas.base.Lowerer."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._counter = 0
        self._prefix = "lower"
        # (name, outputs) of the source node being written whose standard node writing one of
        # those outputs takes its name (core lowering: refusals then name the source's nodes)
        self.naming: tuple[str, frozenset] | None = None

    def fresh(self, hint: str) -> str:
        self._counter += 1
        return f"{self._prefix}/{hint}_{self._counter}"

    def op(
        self, op_type: str, inputs: Sequence[str | None], outputs: int | Sequence[str] = 1,
        **attrs: Any,
    ) -> list[str]:
        if isinstance(outputs, int):
            outs = [self.fresh(op_type.lower()) for _ in range(outputs)]
        else:
            outs = list(outputs)
        ins = ["" if i is None else i for i in inputs]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        name = self.fresh(op_type)
        if self.naming is not None and self.naming[1].intersection(outs):
            name, self.naming = self.naming[0], None
        self.nodes.append(helper.make_node(op_type, ins, outs, name=name, **attrs))
        return outs

    def const(self, array: np.ndarray, hint: str = "c") -> str:
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name


def _dtype_enum(dtype: str | None) -> int:
    if dtype is None:
        return TensorProto.FLOAT
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


# (array, name) -> the initializer holding it
WeightTensor = Callable[[np.ndarray, str], onnx.TensorProto]


def inline_tensor(array, name: str) -> onnx.TensorProto:
    """The initializer with the array's bytes copied in (np.array(order="C"), unlike
    ascontiguousarray, keeps 0-d constants 0-d)."""
    return numpy_helper.from_array(np.array(array, order="C", copy=None), name)


# A weight this big that a file holds unchanged is handed to onnxruntime as a reference to the
# file's bytes, which it maps: no copy in the lowered model, none in the session.
FILE_REFERENCE_MIN_BYTES = 1 << 20


class FileReferences:
    """``WeightTensor`` for ``runtime.run``: large weights viewing a mapped file unchanged
    (``files.reads.file_origin``: external data, or raw data inside the model file) become
    external-data entries naming that file, relative to ``folder`` (onnxruntime resolves them
    there: ``session.model_external_initializers_file_folder_path``); the rest is copied in."""

    def __init__(self, model: Model):
        self.spans = {}
        for value in model.graph.constants():
            span = file_origin(value.const)
            if span is not None and span.length >= FILE_REFERENCE_MIN_BYTES:
                self.spans[id(value.const)] = span
        folders = {os.path.dirname(span.path) for span in self.spans.values()}
        self.folder = os.path.commonpath(sorted(folders)) if folders else None

    def __bool__(self) -> bool:
        return bool(self.spans)

    def __call__(self, array, name: str) -> onnx.TensorProto:
        span = self.spans.get(id(array))
        if span is None or file_origin(array) is not span:
            return inline_tensor(array, name)
        tensor = onnx.TensorProto(name=name, data_type=_dtype_enum(str(array.dtype)),
                                  dims=[int(d) for d in array.shape])
        tensor.data_location = onnx.TensorProto.EXTERNAL
        for key, value in (("location", os.path.relpath(span.path, self.folder)),
                           ("offset", str(span.offset)), ("length", str(span.length))):
            tensor.external_data.add(key=key, value=value)
        return tensor


def lower_model(model: Model, extra_outputs: Sequence[str] = (),
                weights: WeightTensor = inline_tensor) -> onnx.ModelProto:
    """Standard ONNX (opset 17, IR 8) computing the same outputs as the dialect ``model``, or
    as a core-IR one: each node written by the ``lower`` of its op in its domain's registry
    (``lower_core_model`` also checks that every node is core and shapes the outputs).

    ``extra_outputs`` names internal tensors to expose as additional outputs (for bisecting);
    ``weights`` makes the initializer of each graph constant (default: its bytes copied in).
    """
    graph = model.graph
    core = any(node.domain == CORE for node in graph.nodes)
    graph.toposort()
    low = OnnxLowerer()
    # Lowerings read static shapes from node.inputs[i].shape; intermediate values often carry
    # none, so lend them the inferred ones for the duration of the lowering only.
    lent = _lend_inferred_shapes(model, CORE_OPS if core else DIALECT_OPS)
    refusals = []
    try:
        for node in graph.nodes:
            try:
                _lower_node(node, low)
            except UnsupportedOpError as exc:  # every node that cannot be written, at once
                refusals.append(exc)
    finally:
        for value in lent:
            value.shape = None
    if refusals:
        raise UnsupportedOpError.merged(refusals)
    constants = graph.constants()
    if core:  # a weight the lowering rearranged into a new constant is read no more
        read = {name for n in low.nodes for name in n.input} | {
            v.name for v in graph.inputs + graph.outputs}
        constants = [v for v in constants if v.name in read]
    inits = [weights(v.const, v.name) for v in constants if v.const is not None]
    inputs = [
        helper.make_tensor_value_info(v.name, _dtype_enum(v.dtype), _dims(v.shape))
        for v in graph.inputs
    ]
    outputs = [
        helper.make_tensor_value_info(v.name, _dtype_enum(v.dtype), None) for v in graph.outputs
    ]
    known = {v.name: v for v in graph.values()}
    for name in extra_outputs:
        if name not in known:
            raise KeyError(f"no tensor named '{name}' in the model")
        if name not in {o.name for o in outputs}:
            outputs.append(helper.make_tensor_value_info(name, _dtype_enum(known[name].dtype),
                                                         None))
    g = helper.make_graph(low.nodes, graph.name or "lowered", inputs, outputs,
                          initializer=inits + low.initializers)
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", LOWERED_OPSET)],
                              producer_name="nhwc-onnx-runtime")
    proto.ir_version = LOWERED_IR_VERSION
    return proto


def lower_core_model(model: Model, extra_outputs: Sequence[str] = (),
                     weights: WeightTensor = inline_tensor) -> onnx.ModelProto:
    """Standard ONNX (opset 17, IR 8) computing what the core-IR ``model`` computes (a
    frontend's output before the passes): each core node as its op's ``lower`` writes it,
    graph input and output names, element types and shapes kept. A node no standard
    ONNX computes is refused (UnsupportedOpError naming every such node and attribute)."""
    foreign = [NodeProblem(n.name, n.op, f"its domain '{n.domain}' is not core", "lower")
               for n in model.graph.nodes if n.domain != CORE]
    if foreign:
        raise UnsupportedOpError(foreign)
    proto = lower_model(model, extra_outputs, weights)
    declare_output_shapes(proto, model, CORE_OPS, unknown=None)
    return proto


def declare_output_shapes(proto: onnx.ModelProto, model: Model, registry: Registry,
                          unknown: tuple | None = ()) -> None:
    """Standard ONNX wants a shape on every graph output (the runtime path does without):
    each of the model's outputs gets its shape, inferred where the model has none
    (``unknown`` where inference finds none)."""
    shapes = infer_shapes(model, registry)
    by_name = {v.name: v for v in model.graph.outputs}
    for out in proto.graph.output:
        value = by_name.get(out.name)
        if value is None:  # an extra output
            continue
        shape = value.shape if value.shape is not None else shapes.get(out.name)
        out.CopyFrom(helper.make_tensor_value_info(
            out.name, _dtype_enum(value.dtype), _dims(shape) if shape is not None else unknown))


def _lend_inferred_shapes(model: Model, registry: Registry) -> list:
    """Set the inferred shape on every value that has none; return those values."""
    missing = [v for v in model.graph.values() if v.shape is None]
    if not missing:
        return []
    shapes = infer_shapes(model, registry)
    lent = []
    for value in missing:
        shape = shapes.get(value.name)
        if shape is not None:
            value.shape = tuple(shape)
            lent.append(value)
    return lent


def _dims(shape):
    """Dims for helper.make_tensor_value_info: sizes, names (a symbolic batch: its
    dim_param) and None."""
    if shape is None:
        return None
    return [d if isinstance(d, (int, str)) else None for d in shape]


def _lower_node(node: Node, low: OnnxLowerer) -> None:
    # by domain: a core op and a dialect op may share a name (Conv, Add) and not a meaning
    if node.domain not in (CORE, DIALECT, ""):
        raise UnsupportedOpError([NodeProblem(
            node.name, node.op, f"its domain '{node.domain}' is neither core nor the dialect's",
            "lower")])
    registry = CORE_OPS if node.domain == CORE else DIALECT_OPS
    schema = registry.get(node.op)
    if schema is None or schema.lower is None:
        raise ConversionBugError(
            f"node '{node.name}': op '{node.op}' has no lowering to standard ONNX"
        )
    undeclared = sorted(set(node.attrs) - set(schema.attrs))
    if registry is CORE_OPS and undeclared:  # a lowering honours the attributes it declares
        raise UnsupportedOpError([NodeProblem(
            node.name, node.op, f"attribute '{undeclared[0]}' is not one of core {node.op}'s, "
            "so its lowering would ignore it", "lower")])
    low._prefix = node.name
    ins = [v.name if v is not None else None for v in node.inputs]
    outs = [v.name for v in node.outputs]
    if registry is CORE_OPS:
        low.naming = (node.name, frozenset(outs))
    schema.lower(node, low, ins, outs)


# metadata_props key telling a reader that the file is a lowering, not a dialect model
KEY_LOWERED_FROM = "lowered_from"


# Protobuf cannot hold a message of 2 GiB or more (serialize.EXTERNAL_DATA_THRESHOLD keeps
# the same margin for the graph around the weights).
MAX_LOWERED_WEIGHT_BYTES = 2**31 - 2**26


def refuse_oversized(model: Model, label: str | None = None) -> None:
    """A lowered model is one standard ONNX file: refuse weights that cannot fit one (said
    from the shapes, before any weight is read or copied)."""
    total = sum(int(v.const.nbytes) for v in model.graph.constants() if v.const is not None)
    if total > MAX_LOWERED_WEIGHT_BYTES:
        whose = f"{label}: its" if label else "the model's"
        raise ModelLoadError(
            f"{whose} weights ({total:,} bytes) do not fit one standard ONNX file "
            f"(protobuf's limit is 2 GiB) and lowering writes a single file; refused")


def lower_for_export(model: Model, weights: WeightTensor = inline_tensor,
                     label: str | None = None) -> onnx.ModelProto:
    """``lower_model`` plus the dialect model's metadata, for writing a standard ONNX file.

    The graph's input and output names stay those of the dialect model, and so do their NHWC
    layouts; ``io_permutations`` (and ``source_names``) are carried over unchanged so a reader
    still knows how each graph input/output relates to the source model's layout. Weights
    too large for one file are refused first (``refuse_oversized``).
    """
    if not isinstance(model, Model):
        raise TypeError(f"model: expected a loaded Model, got {type(model).__name__}; for a "
                        "file use nhwc_onnx.lower(path, output), or load it with "
                        "nhwc_onnx.serialize.load(path)")
    refuse_oversized(model, label)
    proto = lower_model(model, weights=weights)
    proto.producer_name = "nhwc-onnx"
    declare_output_shapes(proto, model, DIALECT_OPS)
    meta = {str(k): str(v) for k, v in model.metadata.items()}
    if model.io_permutations:
        meta[KEY_IO_PERMUTATIONS] = encode_io_permutations(model.io_permutations)
    meta[KEY_LOWERED_FROM] = "nhwc-onnx dialect"
    for key, text in sorted(meta.items()):
        entry = proto.metadata_props.add()
        entry.key = key
        entry.value = text
    return proto


def save_lowered(model: Model, path, label: str | None = None) -> onnx.ModelProto:
    """What ``lower`` writes: ``lower_for_export(model)``, checked by ``onnx.checker``, saved
    atomically to ``path`` with each weight streamed from its array (for a loaded model, the
    mapped file) into the output. Returns the lowered model without its weights' bytes.

    Serializing the whole proto instead holds the weights several times over (the proto's
    copy, the serialized bytes, the checker's own serialization: 4.5 GB for 906 MB of
    weights); here no copy of them is made.
    """
    from ..serialize import save_streamed

    streamed: dict[str, Any] = {}

    def header(array, name: str) -> onnx.TensorProto:
        if np.asarray(array).nbytes < FILE_REFERENCE_MIN_BYTES:
            return inline_tensor(array, name)
        streamed[name] = array
        return onnx.TensorProto(name=name, data_type=_dtype_enum(str(array.dtype)),
                                dims=[int(d) for d in array.shape])

    proto = lower_for_export(model, weights=header, label=label)
    _check_without_weights(proto, streamed)

    def build(defer):
        written = onnx.ModelProto()
        written.CopyFrom(proto)  # write_streaming takes the initializers out of what it writes
        for tensor in written.graph.initializer:
            if tensor.name in streamed:
                defer(streamed[tensor.name], tensor)
        return written

    save_streamed(build, path)
    return proto


def _check_without_weights(proto: onnx.ModelProto, streamed: dict) -> None:
    """onnx.checker on the lowered model with each streamed weight replaced by one element of
    its type and rank (the checker reads a weight's size only, and the writer takes size and
    dims from the same array)."""
    stand_in = onnx.ModelProto()
    stand_in.CopyFrom(proto)
    for tensor in stand_in.graph.initializer:
        if tensor.name in streamed:
            rank = len(tensor.dims)
            del tensor.dims[:]
            tensor.dims.extend([1] * rank)
            tensor.raw_data = bytes(np.dtype(streamed[tensor.name].dtype).itemsize)
    try:
        onnx.checker.check_model(stand_in)
    except onnx.checker.ValidationError as exc:
        raise ConversionBugError(f"the lowering is not valid ONNX ({exc})") from None
