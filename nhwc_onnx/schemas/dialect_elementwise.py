"""Elementwise dialect ops (domain ``nhwc``): activations, arithmetic, bias and scale.

Semantics: the dialect spec v0.1 with the decisions of docs/design.md. Add, Mul and Sum never
broadcast (all inputs share one shape); Max broadcasts like numpy; AddBias adds a 1-D constant
along the last (channel) axis; PRelu's slope is a 1-D constant of size C on the last axis or a
single value. Every tensor is float32.

Each schema also lowers to standard ONNX (opset 17) for ``nhwc_onnx.runtime``.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .base import DIALECT_OPS, Attr, AttrKind, InferContext, LayoutClass, OpSchema, Port

SOURCE = "dialect spec v0.1 (docs/design.md)"

# -- shape helpers shared with dialect_tensor (a None dimension is unknown) ---------------------


def shape_text(shape: Sequence[int | None]) -> str:
    return "(" + ",".join("?" if d is None else str(d) for d in shape) + ")"


def element_count(shape: Sequence[int | None]) -> int | None:
    """Product of the dimensions, or None when one is unknown."""
    total = 1
    for d in shape:
        if d is None:
            return None
        total *= int(d)
    return total


def dims_agree(a: Sequence[int | None], b: Sequence[int | None]) -> bool:
    """Same rank and no dimension provably different (unknown dims cannot disagree)."""
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def merge_dims(a: Sequence[int | None], b: Sequence[int | None]) -> tuple:
    """Two agreeing shapes combined, keeping the known dimension where one side is unknown."""
    return tuple(y if x is None else x for x, y in zip(a, b))


def attrs_of(node) -> dict[str, Any]:
    """A node's attributes with the schema's defaults filled in (for lowering)."""
    return DIALECT_OPS[node.op].with_defaults(node.attrs)


def scalar(value: float) -> np.ndarray:
    return np.array(value, dtype=np.float32)


# -- shape inference ----------------------------------------------------------------------------


def _infer_same_as_input(ctx: InferContext) -> list:
    return [ctx.shape(0)]


def _infer_same_shape(ctx: InferContext) -> list:
    """Add, Mul, Sum: no broadcasting, every input has input 0's shape."""
    first = ctx.shape(0)
    out = tuple(first)
    for i in range(1, len(ctx.shapes)):
        other = ctx.shape(i)
        if not dims_agree(first, other):
            ctx.fail(
                "same-shape",
                f"input {i} has shape {shape_text(other)} but input 0 has {shape_text(first)}; "
                f"{ctx.node.op} does not broadcast: all inputs must have the same shape",
                shape_text(first), shape_text(other),
            )
        out = merge_dims(out, other)
    return [out]


def broadcast_shapes(shapes: Sequence[Sequence[int | None]]) -> tuple | None:
    """numpy broadcasting of several shapes; None when they are incompatible."""
    rank = max(len(s) for s in shapes)
    out: list[int | None] = []
    for axis in range(rank):
        dims = [s[len(s) - rank + axis] for s in shapes if len(s) - rank + axis >= 0]
        known = {d for d in dims if d is not None and d != 1}
        if len(known) > 1:
            return None
        if known:
            out.append(known.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def _infer_broadcast(ctx: InferContext) -> list:
    shapes = [ctx.shape(i) for i in range(len(ctx.shapes))]
    out = broadcast_shapes(shapes)
    if out is None:
        found = ", ".join(shape_text(s) for s in shapes)
        ctx.fail("broadcast", f"input shapes {found} do not broadcast (numpy rules)",
                 "shapes whose trailing dims are equal or 1", found)
    return [out]


def _infer_add_bias(ctx: InferContext) -> list:
    a, b = ctx.shape(0), ctx.shape(1)
    ctx.require(len(a) >= 1, "rank", "input A must have at least one axis", ">= 1", len(a))
    channels = a[-1]
    want = shape_text((channels,))
    ctx.require(len(b) == 1, "bias-shape",
                f"bias B must be 1-D of size A.shape[-1] (the channel axis), got {shape_text(b)}",
                want, shape_text(b))
    ctx.require(channels is None or b[0] == channels, "bias-shape",
                f"bias B has {b[0]} values but A has {channels} channels on its last axis",
                want, shape_text(b))
    return [a]


def _infer_prelu(ctx: InferContext) -> list:
    x, slope = ctx.shape(0), ctx.shape(1)
    ctx.require(len(x) >= 1, "rank", "input X must have at least one axis", ">= 1", len(x))
    channels = x[-1]
    single = len(slope) == 0 or tuple(slope) == (1,)
    per_channel = len(slope) == 1 and (channels is None or slope[0] == channels)
    if not (single or per_channel):
        ctx.fail("slope-shape",
                 f"slope must be 1-D of size C = X.shape[-1] or a single value, "
                 f"got {shape_text(slope)} for X {shape_text(x)}",
                 f"{shape_text((channels,))} or (1)", shape_text(slope))
    return [x]


# -- lowering -----------------------------------------------------------------------------------


def _lower_as(onnx_op: str, float_attrs: Sequence[str] = ()):
    """Lowering to the standard op of the same meaning, copying float attributes."""

    def lower(node, L, inputs, outputs) -> None:
        attrs = attrs_of(node)
        L.op(onnx_op, inputs, outputs=outputs, **{k: float(attrs[k]) for k in float_attrs})

    return lower


def _lower_relu6(node, L, inputs, outputs) -> None:
    L.op("Clip", [inputs[0], L.const(scalar(0.0), "zero"), L.const(scalar(6.0), "six")],
         outputs=outputs)


def _lower_scale(node, L, inputs, outputs) -> None:
    factor = L.const(scalar(float(attrs_of(node)["scale"])), "scale")
    L.op("Mul", [inputs[0], factor], outputs=outputs)


# -- registration -------------------------------------------------------------------------------

A = AttrKind
F32 = ("float32",)


def _register(name: str, doc: str, inputs: list[Port], infer, lower, attrs=None,
              layout: LayoutClass = LayoutClass.TRANSPARENT, output: str = "Y") -> None:
    DIALECT_OPS.register(OpSchema(
        name, "nhwc", doc, inputs, [Port(output, dtypes=F32)], dict(attrs or {}),
        layout=layout, infer=infer, lower=lower, source=SOURCE,
    ))


_UNARY = {
    "Abs": ("Y = |X|, elementwise.", "Abs"),
    "Relu": ("Y = max(X, 0), elementwise.", "Relu"),
    "Sigmoid": ("Y = 1 / (1 + exp(-X)), elementwise.", "Sigmoid"),
    "Tanh": ("Y = tanh(X), elementwise.", "Tanh"),
}
for _name, (_doc, _onnx) in _UNARY.items():
    _register(_name, _doc, [Port("X")], _infer_same_as_input, _lower_as(_onnx))

_register("Relu6", "Y = min(max(X, 0), 6), elementwise.", [Port("X")],
          _infer_same_as_input, _lower_relu6)
_register("Elu", "Y = X for X >= 0, alpha * (exp(X) - 1) otherwise.", [Port("X")],
          _infer_same_as_input, _lower_as("Elu", ["alpha"]),
          attrs={"alpha": Attr(A.FLOAT, default=1.0, doc="coefficient of the negative part")})
_register("LeakyRelu", "Y = X for X >= 0, alpha * X otherwise.", [Port("X")],
          _infer_same_as_input, _lower_as("LeakyRelu", ["alpha"]),
          attrs={"alpha": Attr(A.FLOAT, default=0.01, doc="slope of the negative part")})
_register("Scale", "Y = X * scale, one float factor for the whole tensor.", [Port("X")],
          _infer_same_as_input, _lower_scale,
          attrs={"scale": Attr(A.FLOAT, default=1.0, doc="the factor")})
_register("PRelu", "Y = X for X >= 0, slope * X otherwise. slope is a constant: 1-D of size C "
          "(the last axis of X) or a single value.",
          [Port("X"), Port("slope", constant=True, doc="(C) or a single value")],
          _infer_prelu, _lower_as("PRelu"), layout=LayoutClass.IMPLICIT)
_register("Add", "C = A + B, elementwise; A and B must have the same shape (no broadcasting).",
          [Port("A"), Port("B")], _infer_same_shape, _lower_as("Add"), output="C")
_register("Mul", "C = A * B, elementwise; A and B must have the same shape (no broadcasting).",
          [Port("A"), Port("B")], _infer_same_shape, _lower_as("Mul"), output="C")
_register("Sum", "Elementwise sum of one or more inputs, all of the same shape (no "
          "broadcasting).", [Port("data", variadic=True)], _infer_same_shape, _lower_as("Sum"),
          output="sum")
_register("Max", "Elementwise maximum of one or more inputs with numpy broadcasting.",
          [Port("data", variadic=True)], _infer_broadcast, _lower_as("Max"), output="max")
_register("AddBias", "C = A + B with B a 1-D constant of size A.shape[-1] (the channel axis) "
          "added at every position; no other broadcasting.",
          [Port("A"), Port("B", constant=True, doc="(C), the bias")],
          _infer_add_bias, _lower_as("Add"), layout=LayoutClass.IMPLICIT, output="C")

__all__ = ["broadcast_shapes", "dims_agree", "element_count", "shape_text"]
