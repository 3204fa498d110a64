"""Shape and data-movement converters: opset-dependent attribute/input forms become attributes."""
from __future__ import annotations

import numpy as np
import onnx

from .context import NodeCtx, check_shape_input, flag, ints
from .registry import REGISTRY


@REGISTRY.register("Flatten", emits=("Flatten",))
def flatten(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """2-D flatten at ``axis``."""
    ctx.emit("Flatten", [ctx.require_input(0, "X")], {"axis": int(ctx.attr("axis", 1))})


@REGISTRY.register("Reshape", emits=("Reshape",))
def reshape(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Reshape; the target shape stays an input (attribute before opset 5)."""
    x = ctx.require_input(0, "data")
    if ctx.version < 5:
        shape = ctx.attr("shape")
        if shape is None:
            ctx.refuse("attribute 'shape' is missing")
        target = ctx.constant(np.array(ints(shape), dtype=np.int64), "shape")
    else:
        target = ctx.require_input(1, "shape")
        check_shape_input(ctx, 1, "shape", lowest=-1)
    ctx.emit("Reshape", [x, target], {"allowzero": flag(ctx, "allowzero", 0)})


def _axes(ctx: NodeCtx, since_input: int, index: int = 1) -> list[int] | None:
    """Axes from the attribute (before ``since_input``) or the optional constant input."""
    if ctx.version < since_input:
        value = ctx.attr("axes")
        return None if value is None else ints(value)
    if not ctx.has_input(index):
        return None
    return ints(ctx.require_const(index, "axes"))


@REGISTRY.register("Squeeze", emits=("Squeeze",))
def squeeze(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Remove size-1 axes (all of them when no axes are given)."""
    axes = _axes(ctx, 13)
    if axes is None:
        shape = ctx.shape(0)
        if shape is None:
            ctx.refuse("Squeeze without axes needs the input's static shape")
        axes = [i for i, d in enumerate(shape) if d == 1]
    ctx.emit("Squeeze", [ctx.require_input(0, "data")], {"axes": axes})


@REGISTRY.register("Unsqueeze", emits=("Unsqueeze",))
def unsqueeze(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Insert size-1 axes."""
    axes = _axes(ctx, 13)
    if axes is None:
        ctx.refuse("axes are missing")
    ctx.emit("Unsqueeze", [ctx.require_input(0, "data")], {"axes": axes})


@REGISTRY.register("Transpose", emits=("Transpose",))
def transpose(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Permute axes (default: reverse them)."""
    perm = ctx.attr("perm")
    if perm is None:
        rank = ctx.rank(0)
        if rank is None:
            ctx.refuse("Transpose without perm needs the input's rank")
        perm = list(range(rank))[::-1]
    ctx.emit("Transpose", [ctx.require_input(0, "data")], {"perm": ints(perm)})


@REGISTRY.register("Concat", emits=("Concat",))
def concat(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Concatenate along ``axis`` (opset 1-3 default axis 1)."""
    inputs = [v for v in ctx.inputs() if v is not None]
    default = 1 if ctx.version < 4 else None
    axis = ctx.attr("axis", default)
    if axis is None:
        ctx.refuse("attribute 'axis' is missing")
    ctx.emit("Concat", inputs, {"axis": int(axis)})


@REGISTRY.register("Split", emits=("Split",))
def split(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Split into pieces: sizes from attribute, input, num_outputs, or equal parts."""
    axis = int(ctx.attr("axis", 0))
    outputs = list(ctx.proto.output)
    if ctx.version < 13:
        sizes = ctx.attr("split")
        if sizes is None and ctx.version < 2 and ctx.has_input(1):
            sizes = ctx.require_const(1, "split")
    else:
        sizes = ctx.require_const(1, "split") if ctx.has_input(1) else None
    if sizes is not None:
        sizes = ints(sizes)
    else:
        shape = ctx.shape(0)
        if shape is None:
            ctx.refuse("an equal split needs the input's static shape")
        dim = int(shape[axis])
        parts = int(ctx.attr("num_outputs", len(outputs)))
        if parts <= 0:
            ctx.refuse("no outputs to split into")
        piece = -(-dim // parts)
        sizes = [min(piece, max(dim - piece * k, 0)) for k in range(parts)]
        if ctx.version < 18 and dim % parts:
            ctx.refuse(f"dimension {dim} does not split into {parts} equal parts")
    if len(sizes) != len(outputs):
        ctx.refuse(f"{len(sizes)} split sizes for {len(outputs)} outputs")
    _check_split_sizes(ctx, sizes, axis)
    values = [ctx.output(i) if name else ctx.tmp(f"unused{i}") for i, name in enumerate(outputs)]
    ctx.emit("Split", [ctx.require_input(0, "input")], {"axis": axis, "split": sizes},
             outputs=values)


def _check_split_sizes(ctx: NodeCtx, sizes: list[int], axis: int) -> None:
    if any(s < 0 for s in sizes):
        raise ctx.invalid_attribute(
            f"split sizes {sizes} must not be negative")
    shape = ctx.shape(0)
    if shape is not None and -len(shape) <= axis < len(shape) and sum(sizes) != shape[axis]:
        raise ctx.invalid_attribute(
            f"split sizes {sizes} do not add up to the "
            f"dimension {shape[axis]} of axis {axis}")


@REGISTRY.register("Slice", emits=("Slice",))
def slice_(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Slice with constant starts/ends/axes/steps (attributes before opset 10)."""
    if ctx.version < 10:
        starts, ends, axes = ctx.attr("starts"), ctx.attr("ends"), ctx.attr("axes")
        steps = None
        if starts is None or ends is None:
            ctx.refuse("starts and ends are required")
    else:
        starts = ctx.require_const(1, "starts")
        ends = ctx.require_const(2, "ends")
        axes = ctx.require_const(3, "axes") if ctx.has_input(3) else None
        steps = ctx.require_const(4, "steps") if ctx.has_input(4) else None
    starts, ends = ints(starts), ints(ends)
    attrs = {"starts": starts, "ends": ends}
    if axes is not None:
        attrs["axes"] = ints(axes)
    if steps is not None:
        attrs["steps"] = ints(steps)
        if 0 in attrs["steps"]:
            ctx.refuse("a step of 0 is invalid")
    count = len(starts)
    if len(ends) != count or any(len(attrs[k]) != count for k in ("axes", "steps") if k in attrs):
        ctx.refuse("starts, ends, axes and steps must have the same length")
    ctx.emit("Slice", [ctx.require_input(0, "data")], attrs)


@REGISTRY.register("Pad", emits=("Pad",), condition="pads are non-negative, mode constant, "
                                                          "reflect or edge")
def pad(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Pad with pads/value from attributes (before opset 11) or constant inputs."""
    mode = ctx.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge"):
        ctx.refuse(f"mode '{mode}' is not supported (constant, reflect and edge are)")
    if ctx.version < 11:
        pads = ctx.attr("pads", ctx.attr("paddings"))
        value = float(ctx.attr("value", 0.0))
        if pads is None:
            ctx.refuse("attribute 'pads' is missing")
        pads = ints(pads)
    else:
        pads = ints(ctx.require_const(1, "pads"))
        value = 0.0
        if ctx.has_input(2):
            constant = ctx.require_const(2, "constant_value")
            if constant.size != 1:
                ctx.refuse("constant_value must be a scalar")
            value = float(constant.reshape(-1)[0])
        if ctx.has_input(3):
            pads = _expand_pad_axes(ctx, pads, ints(ctx.require_const(3, "axes")))
    if any(p < 0 for p in pads):
        ctx.refuse(f"negative pads {pads} (cropping) are not supported")
    ctx.emit("Pad", [ctx.require_input(0, "data")],
             {"pads": pads, "mode": mode, "value": value})


def _expand_pad_axes(ctx: NodeCtx, pads: list[int], axes: list[int]) -> list[int]:
    rank = ctx.rank(0)
    if rank is None:
        ctx.refuse("Pad with axes needs the input's rank")
    if len(pads) != 2 * len(axes):
        ctx.refuse("pads must have two entries per axis")
    full = [0] * (2 * rank)
    for k, axis in enumerate(axes):
        axis = axis + rank if axis < 0 else axis
        if not 0 <= axis < rank:
            ctx.refuse(f"axis {axis} is out of range")
        full[axis] = pads[k]
        full[axis + rank] = pads[k + len(axes)]
    return full


_REDUCE_AXES_INPUT = {"ReduceSum": 13}  # first opset taking axes as an input (others: 18)
_CORE_REDUCES = ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd")


def _reduce_axes(ctx: NodeCtx) -> list[int] | None:
    axes = _axes(ctx, _REDUCE_AXES_INPUT.get(ctx.op, 18))
    if axes is not None and len(axes) == 0:
        axes = None
    rank = ctx.rank(0)
    if axes is not None and rank is not None:
        if any(not -rank <= a < rank for a in axes):
            raise ctx.invalid_attribute(
                f"axes {axes} are out of range for rank {rank}")
        if len({a % rank for a in axes}) != len(axes):
            raise ctx.invalid_attribute(
                f"axes {axes} name an axis twice")
    elif axes is not None and len(set(axes)) != len(axes):
        raise ctx.invalid_attribute(f"axes {axes} repeat an axis")
    return axes


_REDUCE_EMITS = {
    **{op: (op, "Identity") for op in _CORE_REDUCES},
    "ReduceL1": ("Abs", "ReduceSum", "Identity"),
    "ReduceSumSquare": ("Mul", "ReduceSum", "Identity"),
    "ReduceL2": ("Mul", "ReduceSum", "Sqrt"), "ReduceLogSum": ("ReduceSum", "Log"),
    "ReduceLogSumExp": ("ReduceMax", "Sub", "Exp", "ReduceSum", "Log", "Add"),
}


@REGISTRY.register(*_REDUCE_EMITS, emits=_REDUCE_EMITS,
                   converts={"ReduceSumSquare": "always"})  # Mul(x, x): one shape
def reduce(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Reductions; L1/L2/SumSquare/LogSum/LogSumExp are written with core elementwise ops."""
    axes = _reduce_axes(ctx)
    keepdims = flag(ctx, "keepdims", 1)
    x = ctx.require_input(0, "data")
    noop_when_empty = int(ctx.attr("noop_with_empty_axes", 0))
    if axes is None and noop_when_empty:
        ctx.emit("Identity", [x])
        return
    attrs = {"axes": axes, "keepdims": keepdims}
    if ctx.op in _CORE_REDUCES:
        ctx.emit(ctx.op, [x], attrs)
        return
    if ctx.op == "ReduceLogSumExp":
        _log_sum_exp(ctx, x, axes, keepdims)
        return
    if ctx.op == "ReduceL1":
        terms = ctx.emit("Abs", [x], outputs=1, suffix="abs").output
    elif ctx.op == "ReduceLogSum":
        terms = x
    else:
        terms = ctx.emit("Mul", [x, x], outputs=1, suffix="square").output
    if ctx.op in ("ReduceL1", "ReduceSumSquare"):
        ctx.emit("ReduceSum", [terms], attrs)
        return
    total = ctx.emit("ReduceSum", [terms], attrs, outputs=1, suffix="sum").output
    ctx.emit("Sqrt" if ctx.op == "ReduceL2" else "Log", [total])


def _log_sum_exp(ctx: NodeCtx, x, axes, keepdims: int) -> None:
    """log(sum(exp(x - m))) + m with m the max: no overflow where the reference has none."""
    m_keep = ctx.emit("ReduceMax", [x], {"axes": axes, "keepdims": 1}, outputs=1,
                      suffix="max").output
    shifted = ctx.emit("Sub", [x, m_keep], outputs=1, suffix="shift").output
    exps = ctx.emit("Exp", [shifted], outputs=1, suffix="exp").output
    total = ctx.emit("ReduceSum", [exps], {"axes": axes, "keepdims": keepdims}, outputs=1,
                     suffix="sum").output
    logs = ctx.emit("Log", [total], outputs=1, suffix="log").output
    m = m_keep if keepdims else ctx.emit("ReduceMax", [x], {"axes": axes, "keepdims": 0},
                                         outputs=1, suffix="max_dropped").output
    ctx.emit("Add", [logs, m])


@REGISTRY.register("ArgMax", emits=("ArgMax",))
def argmax(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Index of the first maximum along ``axis``."""
    if int(ctx.attr("select_last_index", 0)):
        ctx.refuse("select_last_index=1 is not supported; select_last_index=0 would convert")
    ctx.emit("ArgMax", [ctx.require_input(0, "data")],
             {"axis": int(ctx.attr("axis", 0)), "keepdims": flag(ctx, "keepdims", 1)})


@REGISTRY.register("Constant", emits=())
def constant(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """A constant tensor: the output becomes a constant value (no node)."""
    attrs = ctx.attrs
    ctx.mark_read(*attrs)
    if "value" in attrs:
        array = np.asarray(attrs["value"])
    elif "value_float" in attrs:
        array = np.array(attrs["value_float"], dtype=np.float32)
    elif "value_floats" in attrs:
        array = np.array(attrs["value_floats"], dtype=np.float32)
    elif "value_int" in attrs:
        array = np.array(attrs["value_int"], dtype=np.int64)
    elif "value_ints" in attrs:
        array = np.array(attrs["value_ints"], dtype=np.int64)
    else:
        ctx.refuse(f"constant kind {sorted(attrs) or 'none'} is not supported")
    if array.dtype.kind in "OUS":
        ctx.refuse("string constants are not supported")
    ctx.output(0).set_const(array)
