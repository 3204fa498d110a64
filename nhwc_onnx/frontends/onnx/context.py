"""What a converter sees of one ONNX node, and how it emits core nodes.

Converters receive a ``NodeCtx``: the node's resolved operator version (``ctx.version`` is the
``since_version`` of the schema the model's opset import selects), its attributes as plain Python
values, its inputs as IR Values, and ``ctx.const(i)`` which returns an input's value when it is
constant: an initializer, a Constant node, or a shape computation whose result depends only on
static shapes (folded here only because a core attribute needs the number).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import onnx
from onnx import numpy_helper

from ...ir import CORE, Graph, Node, Value
from ...schemas import batch_values
from ..context import NodeContext, Refusal


class ImportedGraph(Protocol):
    """What a node's context reads from the importer converting its graph (``OnnxImporter``):
    the values made so far, folded constants and known shapes."""

    graph: Graph
    used_names: set[str]
    folder: Any  # its ShapeFolder (folding.py): inferred shapes and element types
    probe: int | None
    batch_findings: list

    def value(self, name: str) -> Value: ...

    def fold(self, name: str) -> np.ndarray | None: ...

    def static_shape(self, name: str) -> tuple | None: ...

    def known_rank_shape(self, name: str) -> tuple | None: ...


# Attributes without effect on inference results (training, legacy bookkeeping): a converter
# need not read them (frontends/context.py).
WITHOUT_EFFECT = frozenset({"consumed_inputs", "is_test", "momentum", "storage_order", "seed",
                            "saturate"})


def attribute_values(node: onnx.NodeProto) -> dict[str, Any]:
    """Attributes as Python values: str for strings, ndarray for tensors."""
    out: dict[str, Any] = {}
    for attr in node.attribute:
        value = onnx.helper.get_attribute_value(attr)
        if isinstance(value, bytes):
            value = value.decode("utf-8", errors="replace")
        elif isinstance(value, onnx.TensorProto):
            value = numpy_helper.to_array(value)
        elif isinstance(value, list) and value and isinstance(value[0], bytes):
            value = [v.decode("utf-8", errors="replace") for v in value]
        out[attr.name] = value
    return out


class NodeCtx(NodeContext):
    framework = "onnx"

    def __init__(self, importer: ImportedGraph, proto: onnx.NodeProto, name: str, version: int):
        super().__init__()
        self.begin_node(name, proto.op_type)
        self.importer = importer
        self.proto = proto
        self.version = version
        self.attrs = attribute_values(proto)
        self.emitted: list[Node] = []  # core nodes this ONNX node became, for the checks

    # -- reading ----------------------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return list(self.proto.input)

    def has_input(self, index: int) -> bool:
        return index < len(self.proto.input) and self.proto.input[index] != ""

    def input(self, index: int) -> Value | None:
        if not self.has_input(index):
            return None
        return self.importer.value(self.proto.input[index])

    def inputs(self) -> list[Value | None]:
        return [self.input(i) for i in range(len(self.proto.input))]

    def require_input(self, index: int, what: str) -> Value:
        value = self.input(index)
        if value is None:
            raise Refusal(f"input {index} ({what}) is missing")
        return value

    def const(self, index: int) -> np.ndarray | None:
        """The input's value if it is constant (folding shape-only subgraphs), else None."""
        if not self.has_input(index):
            return None
        return self.importer.fold(self.proto.input[index])

    def require_const(self, index: int, what: str, batch_at_0: bool = False) -> np.ndarray:
        """An input the converter takes as an attribute. ``batch_at_0``: a shape whose entry
        0 may be the symbolic batch itself (Resize sizes keep it)."""
        if not self.has_input(index):
            raise Refusal(f"input {index} ({what}) is missing")
        value = self.const(index)
        if value is None:
            raise Refusal(
                f"input '{self.proto.input[index]}' ({what}) must be a constant or computable "
                "from static shapes, but it depends on runtime data"
            )
        self._check_batch_value(index, value, what, batch_at_0)
        return value

    def _check_batch_value(self, index: int, value: np.ndarray, what: str,
                           batch_at_0: bool) -> None:
        folder, probe = self.importer.folder, self.importer.probe
        name = self.proto.input[index]
        meta = folder.batch_tags.get(name) if folder is not None and probe else None
        if not meta or probe is None or (batch_at_0 and batch_values.is_the_batch_at_0(
                meta[batch_values.SLOPE], value, probe)):
            return
        self.importer.batch_findings.append(batch_values.attribute_finding(
            name, meta, value, probe, self.name, self.op, what))

    def attribute_names(self) -> list[str]:
        return list(self.attrs)

    def attribute_value(self, name: str) -> Any:
        return self.attrs.get(name)

    def without_effect(self, name: str) -> bool:
        return name in WITHOUT_EFFECT

    def shape(self, index: int) -> tuple | None:
        """Static shape of an input as ONNX shape inference sees it (None: unknown)."""
        if not self.has_input(index):
            return None
        return self.importer.static_shape(self.proto.input[index])

    def rank(self, index: int) -> int | None:
        shape = self.importer.known_rank_shape(self.proto.input[index]) if self.has_input(
            index) else None
        return None if shape is None else len(shape)

    def is_used(self, tensor: str) -> bool:
        """Whether any node or graph output reads this tensor."""
        return tensor in self.importer.used_names

    # -- writing ----------------------------------------------------------------------------
    @property
    def outputs(self) -> list[Value]:
        return [self.importer.value(n) for n in self.proto.output if n]

    def output(self, index: int = 0) -> Value:
        return self.importer.value(self.proto.output[index])

    def emit(
        self,
        op: str,
        inputs: Sequence[Value | None],
        attrs: dict[str, Any] | None = None,
        outputs: Sequence[Value] | int | None = None,
        suffix: str = "",
    ) -> Node:
        """Emit a core node. ``outputs`` None: this ONNX node's outputs; an int: fresh values.

        The first node emitted without ``suffix`` carries the ONNX node's name; helper nodes
        get ``name/suffix``.
        """
        graph = self.importer.graph
        node_name = f"{self.name}/{suffix}" if suffix else self.name
        if outputs is None:
            outs: list[Value] = self.outputs
        elif isinstance(outputs, int):
            outs = [
                graph.new_value(f"{node_name}:{i}" if i else node_name) for i in range(outputs)
            ]
        else:
            outs = list(outputs)
        clean = {k: v for k, v in (attrs or {}).items() if v is not None}
        node = Node(op, list(inputs), outs, clean, node_name, CORE, doc=self.op)
        graph.add_node(node)
        self.emitted.append(node)
        return node

    def tmp(self, hint: str, dtype: str = "float32") -> Value:
        return self.importer.graph.new_value(f"{self.name}/{hint}", dtype)

    def constant(self, array: np.ndarray, hint: str) -> Value:
        return self.importer.graph.constant(np.asarray(array), f"{self.name}/{hint}")

    def passthrough(self, index: int = 0) -> None:
        """Identity from input ``index`` to output 0 (keeps the output's ONNX name)."""
        self.emit("Identity", [self.require_input(index, "X")], outputs=[self.output(0)])


def ints(values: Any) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]


def flag(ctx: NodeCtx, name: str, default: int) -> int:
    """A 0/1 attribute (keepdims, allowzero): any other value is a broken model."""
    value = int(ctx.attr(name, default))
    if value not in (0, 1):
        raise ctx.invalid_attribute(f"{name} must be 0 or 1, found {value}")
    return value


def check_shape_input(ctx: NodeCtx, index: int, what: str, lowest: int) -> None:
    """A shape-like input (Reshape/Expand target, ConstantOfShape dims, Tile repeats) must be a
    1-D integer tensor with entries >= ``lowest``; checked as far as it is known here."""
    name = ctx.proto.input[index]
    value = ctx.const(index)
    folder = ctx.importer.folder
    dtype: str | None
    if value is not None:
        dtype = str(value.dtype)
    else:
        dtype = folder.dtypes.get(name) if folder is not None else None
    where = f"{what} '{name}'"
    if dtype is not None and np.dtype(dtype).kind not in "iu":
        raise ctx.invalid_attribute(f"{where} has element type {dtype}; it must be integer")
    shape = tuple(value.shape) if value is not None else ctx.importer.known_rank_shape(name)
    if shape is not None and len(shape) != 1:
        raise ctx.invalid_attribute(f"{where} has rank {len(shape)}; it must be 1-D")
    if value is not None and value.size and int(np.min(value)) < lowest:
        raise ctx.invalid_attribute(
            f"{where} is {ints(value)}; entries must be >= {lowest}")
