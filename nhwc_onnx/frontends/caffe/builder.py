"""Graph building state shared by the Caffe converters.

Caffe blobs are mutable (an in-place layer writes its result back into its bottom blob);
the IR wants single assignment. The builder keeps, per blob name, the Value holding the
blob's latest version; an in-place layer's output gets a new Value named after the layer,
and every Value remembers its blob in ``meta["source_name"]`` so a verifier can match them.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...errors import InvalidModelError
from ...ir import Graph, Node, Value
from ...ir.input_shapes import batch_symbol, find_override, input_shape
from ..context import NodeContext
from . import caffe_pb2 as pb
from . import params
from .weights import WeightSource

# Largest blob a layer may produce (elements): far above real nets, far below a blow-up.
MAX_ACTIVATION = 1 << 32


class CaffeBuilder(NodeContext):
    """The net being built, and (``begin``) the context of the layer being converted: its
    attributes are the fields set in its ``*_param`` messages (params.py)."""

    framework = "caffe"

    def __init__(self, graph: Graph, weights: WeightSource,
                 input_shapes: Mapping[str, Sequence[int]] | None = None,
                 batch: int | None = None,
                 batch_probe: int | None = None):
        super().__init__()
        self.layer: pb.LayerParameter | None = None  # the layer being converted
        self.graph = graph
        self.weights = weights
        self.input_shapes = dict(input_shapes or {})  # user overrides, by blob name
        self.batch = batch
        self.batch_probe = batch_probe  # a symbolic batch's size (--input-shape NAME=-1,...)
        self.batch_symbols: dict[str, str] = {}  # input blob -> its symbolic batch's name
        self.preprocessing: list[dict[str, Any]] = []  # Data layers' transform_param
        self.blobs: dict[str, Value] = {}  # blob name -> latest version
        self.consumed: set[int] = set()  # ids of Values read by some layer
        self.produced: list[Value] = []  # layer outputs in creation order
        self._value_names: set[str] = set()
        self._versions: dict[str, int] = {}

    # -- the current layer ------------------------------------------------------------------
    def begin(self, layer: pb.LayerParameter) -> params.TrackedLayer:
        """Make ``layer`` the one being converted; what its converter reads it through (so
        the fields read are recorded)."""
        self.layer = layer
        self.begin_node(layer.name, layer.type)
        return params.TrackedLayer(layer, self.read_attributes)

    def attribute_names(self) -> list[str]:
        if self.layer is None:
            return []
        return params.set_fields(self.layer, self.read_attributes)

    def attribute_value(self, name: str) -> Any:
        return params.field_value(self.layer, name) if self.layer is not None else None

    def without_effect(self, name: str) -> bool:
        return params.without_effect(name)

    def inputs(self) -> list[Value]:
        return self.bottoms(self.layer) if self.layer is not None else []

    # -- blobs ------------------------------------------------------------------------------
    def bottoms(self, layer: pb.LayerParameter) -> list[Value]:
        values = []
        for name in layer.bottom:
            value = self.blobs.get(name)
            if value is None:
                raise InvalidModelError(
                    f"reads blob '{name}', which no earlier layer or input produces")
            self.consumed.add(id(value))
            values.append(value)
        return values

    def resolve_input_shape(self, name: str, declared: Sequence[int] | None,
                            where: str = "") -> tuple[int, ...]:
        """The shape of input blob ``name``: the user's override, else the declared one.
        ``where`` says where it is declared (no need for a layer: its errors name it)."""
        where = f" ({where})" if where else ""
        if declared is not None and any(int(d) < 0 for d in declared):
            raise InvalidModelError(f"input '{name}' has an invalid shape {list(declared)}")
        override = find_override(self.input_shapes, name)
        shape = input_shape(declared, override, self.batch, probe=self.batch_probe, name=name)
        if not shape:
            raise InvalidModelError(
                f"input '{name}'{where} has no shape; pass one with --input-shape "
                f"{name}=1,3,224,224")
        if shape[0] is None:  # Caffe declares sizes: only --input-shape NAME=-1,... opens one
            raise InvalidModelError(f"input '{name}'{where} has no batch size; pass one "
                                    "with --batch N")
        symbol = batch_symbol(declared, override, self.batch)
        if symbol is not None:
            self.batch_symbols[name] = symbol
        sizes = [int(d) for d in shape if d is not None]
        if len(sizes) != len(shape) or any(d <= 0 for d in sizes) \
                or any(d > 1 << 31 for d in sizes):
            raise InvalidModelError(f"input '{name}' has an invalid shape {list(shape)}")
        return tuple(sizes)

    def define_input(self, name: str, shape: Sequence[int]) -> Value:
        layout = "NCHW" if len(shape) == 4 else None
        value = Value(self._fresh_name(name), "float32", shape, layout)
        value.meta["source_name"] = name
        if name in self.batch_symbols:
            value.meta["batch_symbol"] = self.batch_symbols[name]
        self.graph.add_input(value)
        self.blobs[name] = value
        return value

    def _fresh_name(self, base: str) -> str:
        name = base or "blob"
        i = 0
        while name in self._value_names:
            i += 1
            name = f"{base}_{i}"
        self._value_names.add(name)
        return name

    def top_value(self, layer: pb.LayerParameter, index: int, shape: Sequence[int]) -> Value:
        """A fresh Value for top ``index`` of ``layer`` (not yet bound to the blob)."""
        top = layer.top[index]
        count = math.prod(int(d) for d in shape)
        if count > MAX_ACTIVATION or any(int(d) <= 0 for d in shape):
            raise InvalidModelError(
                f"would produce a blob of shape {list(shape)} ({count} values): refused as absurd")
        in_place = top in layer.bottom or top in self.blobs
        value = Value(self._fresh_name(version_base(layer, index, in_place)), "float32", shape)
        value.meta["source_name"] = top
        value.meta["source_layer"] = layer.name
        value.meta["source_top"] = index
        version = self._versions.get(top, -1) + 1
        value.meta["source_version"] = version
        return value

    def bind(self, layer: pb.LayerParameter, values: Sequence[Value]) -> None:
        """Make ``values`` the latest versions of the layer's tops."""
        if len(values) != len(layer.top):
            raise InvalidModelError(
                f"has {len(layer.top)} top(s), expected {len(values)}")
        for top, value in zip(layer.top, values):
            self._versions[top] = value.meta.get("source_version", 0)
            self.blobs[top] = value
            self.produced.append(value)

    # -- nodes ------------------------------------------------------------------------------
    def node(
        self,
        layer: pb.LayerParameter,
        op: str,
        inputs: Sequence[Value | None],
        attrs: dict[str, Any] | None = None,
        shape: Sequence[int] | None = None,
        out: Value | None = None,
        part: str = "",
        outputs: Sequence[Value] | None = None,
    ) -> Value:
        """Add a core node for ``layer``.

        The layer's final node passes ``out`` (its top Value) and is named after the layer;
        helper nodes pass ``part`` and are named "<layer>/<part>" (the scheme of every
        frontend and pass), as are their outputs.
        """
        if outputs is None:
            if out is None:
                out = Value(self._fresh_name(f"{layer.name}/{part or op.lower()}"), "float32",
                            shape)
            outputs = [out]
        name = layer.name if not part else f"{layer.name}/{part}"
        node = Node(op, list(inputs), list(outputs), attrs, name=name, doc=layer.type)
        self.graph.add_node(node)
        return outputs[0]

    def const(self, layer: pb.LayerParameter, array: np.ndarray, what: str) -> Value:
        array = np.asarray(array)
        value = Value(self._fresh_name(f"{layer.name}/{what}"), const=array)
        return value

    def shape_const(self, layer: pb.LayerParameter, dims: Sequence[int], what: str) -> Value:
        return self.const(layer, np.asarray(list(dims), dtype=np.int64), what)

    def finish(self) -> None:
        """Reserve every value name so later passes never reuse one."""
        for name in self._value_names:
            self.graph.reserve_name(name)


def one_bottom(b: CaffeBuilder, layer: pb.LayerParameter) -> list[Value]:
    """The one bottom of a single-input layer (an InvalidModelError for any other count)."""
    xs = b.bottoms(layer)
    if len(xs) != 1:
        raise InvalidModelError(
            f"needs exactly 1 bottom, got {len(xs)}")
    return xs


def version_base(layer: pb.LayerParameter, index: int, in_place: bool) -> str:
    """The name of the Value holding top ``index`` of ``layer`` (before a suffix that keeps
    it unique): the top's own name, or, for an in-place layer (one writing a blob that exists
    already), the layer's name (``layer:i`` when it has several tops). Verification maps the
    converted model's tensors back to Caffe layers with it."""
    if not in_place:
        return layer.top[index]
    return layer.name if len(layer.top) == 1 else f"{layer.name}:{index}"


def shape_of(value: Value) -> tuple[int, ...]:
    if value.shape is None or any(not isinstance(d, int) for d in value.shape):
        raise InvalidModelError(f"blob '{value.name}' has no static shape")
    return tuple(value.shape)


def canonical_axis(axis: int, rank: int, what: str = "axis") -> int:
    a = axis + rank if axis < 0 else axis
    if not 0 <= a < rank:
        raise InvalidModelError(
            f"{what} {axis} is out of range for a {rank}-D input")
    return a
