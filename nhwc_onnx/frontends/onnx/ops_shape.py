"""Shape-computation converters PyTorch exports emit; the constant-folding pass removes them."""
from __future__ import annotations

import numpy as np
import onnx

from .context import NodeCtx, check_shape_input
from .registry import REGISTRY

_CASTABLE = ("float32", "float16", "float64", "int64", "int32", "int8", "uint8", "bool")


@REGISTRY.register("Shape", emits=("Shape", "Slice"), converts="folded")
def shape(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """The input's shape (opset 15 start/end become a Slice)."""
    x = ctx.require_input(0, "data")
    start, end = ctx.attr("start"), ctx.attr("end")
    if start is None and end is None:
        ctx.emit("Shape", [x])
        return
    full = ctx.emit("Shape", [x], outputs=1, suffix="full").output
    big = np.iinfo(np.int64).max
    ctx.emit("Slice", [full], {"starts": [int(start or 0)],
                               "ends": [big if end is None else int(end)], "axes": [0]})


@REGISTRY.register("Size", emits=("Size",), converts="folded")
def size(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Element count."""
    ctx.emit("Size", [ctx.require_input(0, "data")])


@REGISTRY.register("Gather", emits=("Gather",))
def gather(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """numpy.take along ``axis``."""
    ctx.emit("Gather", [ctx.require_input(0, "data"), ctx.require_input(1, "indices")],
             {"axis": int(ctx.attr("axis", 0))})


@REGISTRY.register("Cast", emits=("Cast",))
def cast(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Element type conversion to a numeric type."""
    to = ctx.attr("to")
    if isinstance(to, str):  # opset 1-5 spelled the type as a string
        to = getattr(onnx.TensorProto, to.upper(), None)
    try:
        target = str(onnx.helper.tensor_dtype_to_np_dtype(int(to)))
    except (KeyError, ValueError, TypeError):
        ctx.refuse(f"cast to type {ctx.attr('to')!r} is not supported")
    if target not in _CASTABLE:
        ctx.refuse(f"cast to {target} is not supported")
    ctx.emit("Cast", [ctx.require_input(0, "input")], {"to": target})


@REGISTRY.register("ConstantOfShape", emits=("ConstantOfShape",))
def constant_of_shape(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """A tensor of the given shape filled with one value."""
    value = ctx.attr("value")
    if value is None:
        value = np.zeros((1,), dtype=np.float32)
    shape = ctx.require_input(0, "shape")
    check_shape_input(ctx, 0, "shape", lowest=0)
    ctx.emit("ConstantOfShape", [shape], {"value": np.asarray(value)})


@REGISTRY.register("Range", emits=("Range",))
def range_(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """numpy.arange(start, limit, delta)."""
    ctx.emit("Range", [ctx.require_input(i, n) for i, n in
                       enumerate(("start", "limit", "delta"))])


@REGISTRY.register("Expand", "Tile", emits={"Expand": ("Expand",), "Tile": ("Tile",)})
def expand(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Broadcast to a shape / repeat along axes (shape and repeats stay inputs)."""
    if ctx.op == "Tile" and ctx.version < 6:
        ctx.refuse("Tile before opset 6 (tiles + axis inputs) is not supported")
    what = "repeats" if ctx.op == "Tile" else "shape"
    inputs = [ctx.require_input(0, "input"), ctx.require_input(1, what)]
    check_shape_input(ctx, 1, what, lowest=0)
    ctx.emit(ctx.op, inputs)
