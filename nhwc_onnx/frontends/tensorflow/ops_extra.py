"""Less common ops seen in frozen graphs: clipping, selection, broadcasting, and the integer
shape arithmetic Keras leaves behind (Rank, FloorDiv, FloorMod on values known from static
shapes)."""
from __future__ import annotations

import numpy as np

from ...ir import Value
from ...schemas import batch_values
from .context import Refusal, TFContext
from .ops_array import int64_input
from .registry import REGISTRY
from .tfnodes import TFNode


def _scalar(ctx: TFContext, index: int, what: str) -> float:
    value = np.asarray(ctx.need_const(index, what))
    if value.size != 1:
        raise Refusal(f"{what} must be a scalar constant, found shape {list(value.shape)}")
    return float(value.reshape(()))


@REGISTRY.register("ClipByValue", emits=("Clip",))
def convert_clip_by_value(ctx: TFContext, node: TFNode) -> list[Value]:
    """Clip between two scalar constants."""
    low, high = _scalar(ctx, 1, "clip_value_min"), _scalar(ctx, 2, "clip_value_max")
    return [ctx.emit1("Clip", [ctx.input(0)], {"min": low, "max": high})]


@REGISTRY.register("SelectV2", emits=("Where",))
def convert_select_v2(ctx: TFContext, node: TFNode) -> list[Value]:
    """numpy.where with broadcasting."""
    return [ctx.emit1("Where", [ctx.input(0), ctx.input(1), ctx.input(2)])]


@REGISTRY.register("BroadcastTo", emits=("Expand",))
def convert_broadcast_to(ctx: TFContext, node: TFNode) -> list[Value]:
    """Broadcast to a shape."""
    target = ctx.const(1)
    if target is not None:
        ctx.check_size(tuple(int(d) for d in np.asarray(target).reshape(-1)), "a broadcast")
    return [ctx.emit1("Expand", [ctx.input(0), int64_input(ctx, 1, "shape")])]


@REGISTRY.register("ZerosLike", "OnesLike", emits=("Shape", "ConstantOfShape"), converts="folded")
def convert_fill_like(ctx: TFContext, node: TFNode) -> list[Value]:
    """A tensor of zeros (ones) shaped like the input."""
    x = ctx.input(0)
    fill = np.zeros(1, dtype=x.dtype or "float32") + (1 if node.op == "OnesLike" else 0)
    shape = ctx.emit1("Shape", [x], suffix="shape")
    return [ctx.emit1("ConstantOfShape", [shape], {"value": fill})]


@REGISTRY.register("Rank", emits=(), converts="folded")
def convert_rank(ctx: TFContext, node: TFNode) -> list[Value]:
    """The input's rank, an int32 scalar known from its static shape."""
    rank = ctx.rank(0, "Rank")
    return [ctx.graph.constant(np.asarray(rank, np.int32), ctx.own_name())]


@REGISTRY.register("FloorDiv", "FloorMod", emits={"FloorDiv": ("Div", "Floor"), "FloorMod": ()},
                   converts={"FloorMod": "never"},
                   condition={"FloorMod": "a floating-point remainder has no exact core form"})
def convert_floor_div_mod(ctx: TFContext, node: TFNode) -> list[Value]:
    """Floats: floor(a / b) (and a - b * floor(a / b)). Integers: only when both values are
    known here (shape arithmetic), computed with numpy's identical floor rule."""
    a, b = ctx.input(0), ctx.input(1)
    if np.dtype(a.dtype or "float32").kind in "iu":
        va, vb = ctx.const(0), ctx.const(1)
        if va is None or vb is None:
            raise Refusal("integer floor division of values unknown before running the graph")
        if np.any(np.asarray(vb) == 0):
            raise Refusal("integer division by zero")
        fn = np.floor_divide if node.op == "FloorDiv" else np.mod
        result = ctx.graph.constant(fn(va, vb).astype(a.dtype), ctx.own_name())
        if ctx.probe is not None:
            batch_values.tag_quotient(result, a, b, va, vb, ctx.probe, node.op == "FloorMod",
                                      (ctx.name, node.op))
        return [result]
    if node.op == "FloorDiv":
        quotient = ctx.emit1("Div", [a, b], suffix="div")
        return [ctx.emit1("Floor", [quotient])]
    raise Refusal("floating-point FloorMod has no exact core form")
