"""Lower a dialect model to standard ONNX (default domain) so onnxruntime can execute it.

Each dialect schema's ``lower`` function emits the standard ops for one node; this module only
drives them and assembles the ModelProto.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ..errors import ConversionBugError
from ..ir import Model, Node
from ..schemas import DIALECT_OPS, infer_shapes
from ..serialize.keys import KEY_IO_PERMUTATIONS, encode_io_permutations

LOWERED_OPSET = 17
LOWERED_IR_VERSION = 8  # onnxruntime 1.31 rejects IR 14, which onnx 1.23 writes by default


class OnnxLowerer:
    """Collects standard ONNX nodes and constants for one model; see schemas.base.Lowerer."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self._counter = 0
        self._prefix = "lower"

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
        self.nodes.append(helper.make_node(op_type, ins, outs, name=self.fresh(op_type), **attrs))
        return outs

    def const(self, array: np.ndarray, hint: str = "c") -> str:
        name = self.fresh(hint)
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name


def _dtype_enum(dtype: str | None) -> int:
    if dtype is None:
        return TensorProto.FLOAT
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


def lower_model(model: Model, extra_outputs: Sequence[str] = ()) -> onnx.ModelProto:
    """Standard ONNX (opset 17, IR 8) computing the same outputs as the dialect ``model``.

    ``extra_outputs`` names internal tensors to expose as additional outputs (for bisecting).
    """
    graph = model.graph
    graph.toposort()
    low = OnnxLowerer()
    # Lowerings read static shapes from node.inputs[i].shape; intermediate values often carry
    # none, so lend them the inferred ones for the duration of the lowering only.
    lent = _lend_inferred_shapes(model)
    try:
        for node in graph.nodes:
            _lower_node(node, low)
    finally:
        for value in lent:
            value.shape = None
    # np.array(order="C"), unlike ascontiguousarray, keeps 0-d constants 0-d.
    inits = [numpy_helper.from_array(np.array(v.const, order="C", copy=None), v.name)
             for v in graph.constants()]
    inputs = [
        helper.make_tensor_value_info(v.name, _dtype_enum(v.dtype), _dims(v.shape))
        for v in graph.inputs
    ]
    outputs = [
        helper.make_tensor_value_info(v.name, _dtype_enum(v.dtype), None) for v in graph.outputs
    ]
    known = {v.name for v in graph.values()}
    for name in extra_outputs:
        if name not in known:
            raise KeyError(f"no tensor named '{name}' in the model")
        if name not in {o.name for o in outputs}:
            outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    g = helper.make_graph(low.nodes, graph.name or "lowered", inputs, outputs,
                          initializer=inits + low.initializers)
    proto = helper.make_model(g, opset_imports=[helper.make_opsetid("", LOWERED_OPSET)],
                              producer_name="nhwc-onnx-runtime")
    proto.ir_version = LOWERED_IR_VERSION
    return proto


def _lend_inferred_shapes(model: Model) -> list:
    """Set the inferred shape on every value that has none; return those values."""
    missing = [v for v in model.graph.values() if v.shape is None]
    if not missing:
        return []
    shapes = infer_shapes(model)
    lent = []
    for value in missing:
        shape = shapes.get(value.name)
        if shape is not None:
            value.shape = tuple(shape)
            lent.append(value)
    return lent


def _dims(shape):
    if shape is None:
        return None
    return [d if isinstance(d, int) else None for d in shape]


def _lower_node(node: Node, low: OnnxLowerer) -> None:
    schema = DIALECT_OPS.get(node.op)
    if schema is None or schema.lower is None:
        raise ConversionBugError(
            f"node '{node.name}': op '{node.op}' has no lowering to standard ONNX"
        )
    low._prefix = node.name
    ins = [v.name if v is not None else None for v in node.inputs]
    outs = [v.name for v in node.outputs]
    schema.lower(node, low, ins, outs)


# metadata_props key telling a reader that the file is a lowering, not a dialect model
KEY_LOWERED_FROM = "lowered_from"


def lower_for_export(model: Model) -> onnx.ModelProto:
    """``lower_model`` plus the dialect model's metadata, for writing a standard ONNX file.

    The graph's input and output names stay those of the dialect model, and so do their NHWC
    layouts; ``io_permutations`` (and ``source_names``) are carried over unchanged so a reader
    still knows how each graph input/output relates to the source model's layout.
    """
    proto = lower_model(model)
    proto.producer_name = "nhwc-onnx"
    # Standard ONNX wants a shape on every graph output (the runtime path does without).
    shapes = infer_shapes(model)
    by_name = {v.name: v for v in model.graph.outputs}
    for out in proto.graph.output:
        value = by_name[out.name]
        shape = value.shape if value.shape is not None else shapes.get(out.name)
        out.CopyFrom(helper.make_tensor_value_info(out.name, _dtype_enum(value.dtype),
                                                   _dims(shape) if shape is not None else []))
    meta = {str(k): str(v) for k, v in model.metadata.items()}
    if model.io_permutations:
        meta[KEY_IO_PERMUTATIONS] = encode_io_permutations(model.io_permutations)
    meta[KEY_LOWERED_FROM] = "nhwc-onnx dialect"
    for key, value in sorted(meta.items()):
        entry = proto.metadata_props.add()
        entry.key = key
        entry.value = value
    return proto
