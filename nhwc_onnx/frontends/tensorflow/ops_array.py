"""Shapes and data movement: reshape, squeeze, concat, pack, split, pad, slice, gather ..."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import InvalidModelError
from ...ir import Value
from ...schemas import batch_values
from .context import Refusal, TFContext
from .registry import REGISTRY
from .tfnodes import TFNode

INT64_MAX = int(np.iinfo(np.int64).max)
INT64_MIN = int(np.iinfo(np.int64).min)


def int64_input(ctx: TFContext, index: int, suffix: str) -> Value:
    """Input ``index`` as an int64 tensor (a new constant when known, else a Cast)."""
    known = ctx.const(index)
    if known is not None:
        return batch_values.copy_tags(ctx.input(index), ctx.int64(known, suffix))
    value = ctx.input(index)
    if value.dtype == "int64":
        return value
    return ctx.emit1("Cast", [value], {"to": "int64"}, suffix=suffix)


def _axis_list(array: np.ndarray) -> list[int]:
    return [int(a) for a in np.asarray(array).reshape(-1)]


@REGISTRY.register("Reshape", emits=("Reshape",))
def convert_reshape(ctx: TFContext, node: TFNode) -> list[Value]:
    """Reshape; a 0 in TF's shape means size 0 (allowzero=1), -1 is inferred."""
    shape = int64_input(ctx, 1, "shape")
    return [ctx.emit1("Reshape", [ctx.input(0), shape], {"allowzero": 1})]


@REGISTRY.register("Squeeze", emits=("Squeeze",))
def convert_squeeze(ctx: TFContext, node: TFNode) -> list[Value]:
    """Remove the listed size-1 axes (all of them when none are listed)."""
    axes = [int(a) for a in ctx.attrs.ints("squeeze_dims", []) or []]
    if not axes:
        shape = ctx.static_shape(0, "Squeeze without squeeze_dims")
        axes = [i for i, d in enumerate(shape) if d == 1]
        if not axes:
            return [ctx.input(0)]
    return [ctx.emit1("Squeeze", [ctx.input(0)], {"axes": axes})]


@REGISTRY.register("ExpandDims", emits=("Unsqueeze",))
def convert_expand_dims(ctx: TFContext, node: TFNode) -> list[Value]:
    """Insert one size-1 axis (a negative axis counts from the output's end, as in ONNX)."""
    axis = _axis_list(ctx.need_const(1, "axis"))
    if len(axis) != 1:
        raise Refusal(f"axis must be a scalar, found {axis}")
    return [ctx.emit1("Unsqueeze", [ctx.input(0)], {"axes": axis})]


@REGISTRY.register("ConcatV2", "Concat", emits=("Concat",))
def convert_concat(ctx: TFContext, node: TFNode) -> list[Value]:
    """Concatenate along a constant axis (last input for V2, first for V1)."""
    n = ctx.n_inputs
    if n < 2:
        raise InvalidModelError(f"has {n} input(s); it needs at least one value and the axis")
    axis_index, values = (n - 1, range(n - 1)) if node.op == "ConcatV2" else (0, range(1, n))
    axis = _axis_list(ctx.need_const(axis_index, "axis"))[0]
    inputs = [ctx.input(i) for i in values]
    if len(inputs) == 1:
        return inputs
    return [ctx.emit1("Concat", inputs, {"axis": axis})]


@REGISTRY.register("Pack", emits=("Unsqueeze", "Concat"))
def convert_pack(ctx: TFContext, node: TFNode) -> list[Value]:
    """Stack along a new axis: Unsqueeze each input, then Concat."""
    axis = int(ctx.attrs.int("axis", 0))
    values = ctx.inputs()
    if len(values) == 1:
        return [ctx.emit1("Unsqueeze", values, {"axes": [axis]})]
    parts = [ctx.emit1("Unsqueeze", [v], {"axes": [axis]}, suffix=f"unsqueeze_{i}")
             for i, v in enumerate(values)]
    return [ctx.emit1("Concat", parts, {"axis": axis})]


@REGISTRY.register("Unpack", emits=("Split", "Squeeze"))
def convert_unpack(ctx: TFContext, node: TFNode) -> list[Value]:
    """Split into size-1 pieces along the axis, then drop that axis from each."""
    num = int(ctx.attrs.int("num", 0))
    axis = int(ctx.attrs.int("axis", 0))
    if num < 1:
        raise Refusal("num must be >= 1")
    if axis < 0:
        axis += ctx.rank(0, "Unpack with a negative axis")
    x = ctx.input(0)
    pieces = [x] if num == 1 else ctx.emit("Split", [x], {"axis": axis, "split": [1] * num},
                                           suffix="split", outputs=num).outputs
    outs = [ctx.emit1("Squeeze", [pieces[0]], {"axes": [axis]})]
    outs += [ctx.emit1("Squeeze", [p], {"axes": [axis]}, suffix=f"squeeze_{i}")
             for i, p in enumerate(pieces[1:], start=1)]
    return outs


def _split(ctx: TFContext, x_index: int, axis: int, sizes: list[int]) -> list[Value]:
    x = ctx.input(x_index)
    if len(sizes) == 1:
        return [x]
    return list(ctx.emit("Split", [x], {"axis": axis, "split": sizes},
                         outputs=len(sizes)).outputs)


@REGISTRY.register("Split", emits=("Split",))
def convert_split(ctx: TFContext, node: TFNode) -> list[Value]:
    """Equal pieces along a constant axis."""
    axis = _axis_list(ctx.need_const(0, "split axis"))[0]
    num = int(ctx.attrs.int("num_split", 1))
    shape = ctx.static_shape(1, "Split")
    dim = shape[axis]
    if num < 1 or dim % num:
        raise Refusal(f"cannot split size {dim} into {num} equal pieces")
    return _split(ctx, 1, axis, [dim // num] * num)


@REGISTRY.register("SplitV", emits=("Split",))
def convert_split_v(ctx: TFContext, node: TFNode) -> list[Value]:
    """Pieces of the listed sizes (one -1 takes the rest) along a constant axis."""
    sizes = _axis_list(ctx.need_const(1, "size_splits"))
    axis = _axis_list(ctx.need_const(2, "split axis"))[0]
    if sizes.count(-1) == 1:
        dim = ctx.static_shape(0, "SplitV with -1")[axis]
        sizes[sizes.index(-1)] = dim - (sum(sizes) + 1)
    if any(s < 0 for s in sizes):
        raise Refusal(f"size_splits {sizes} are not all known and non-negative")
    return _split(ctx, 0, axis, sizes)


@REGISTRY.register("Pad", "PadV2", "MirrorPad", emits=("Pad",))
def convert_pad(ctx: TFContext, node: TFNode) -> list[Value]:
    """Constant or mirrored padding (MirrorPad REFLECT / SYMMETRIC, the core Pad modes
    'reflect' / 'symmetric'); the paddings matrix becomes all begins then all ends."""
    attrs: dict[str, Any] = {}
    if node.op == "MirrorPad":
        mode = ctx.attrs.str("mode", "REFLECT")
        if mode not in ("REFLECT", "SYMMETRIC"):
            raise Refusal(f"MirrorPad mode {mode}: REFLECT or SYMMETRIC would convert")
        attrs["mode"] = mode.lower()
    paddings = np.asarray(ctx.need_const(1, "paddings"))
    shape = ctx.shape(0)
    if paddings.ndim != 2 or paddings.shape[1] != 2 or (
            shape is not None and paddings.shape[0] != len(shape)):
        rank = "rank" if shape is None else str(len(shape))
        raise InvalidModelError(f"paddings must be a [{rank}, 2] table, found shape "
                                f"{list(paddings.shape)}")
    attrs["pads"] = [int(p) for p in paddings[:, 0]] + [int(p) for p in paddings[:, 1]]
    if node.op == "PadV2":
        value = np.asarray(ctx.need_const(2, "constant_values")).reshape(-1)
        attrs["value"] = float(value[0]) if value.size else 0.0
    return [ctx.emit1("Pad", [ctx.input(0)], attrs)]


@REGISTRY.register("Transpose", emits=("Transpose",))
def convert_transpose(ctx: TFContext, node: TFNode) -> list[Value]:
    """Permute axes by a constant perm."""
    perm = _axis_list(ctx.need_const(1, "perm"))
    return [ctx.emit1("Transpose", [ctx.input(0)], {"perm": perm})]


@REGISTRY.register("Slice", emits=("Slice",))
def convert_slice(ctx: TFContext, node: TFNode) -> list[Value]:
    """begin + size (size -1: to the end) on every axis."""
    begin = _axis_list(ctx.need_const(1, "begin"))
    size = _axis_list(ctx.need_const(2, "size"))
    ends = [INT64_MAX if s == -1 else b + s for b, s in zip(begin, size)]
    return [ctx.emit1("Slice", [ctx.input(0)], {"starts": begin, "ends": ends,
                                                "axes": list(range(len(begin)))})]


@REGISTRY.register("Shape", "Size", emits={"Shape": ("Shape", "Cast"), "Size": ("Size", "Cast")},
                   converts="folded")
def convert_shape(ctx: TFContext, node: TFNode) -> list[Value]:
    """The input's shape (or element count), cast to out_type."""
    out_type = ctx.attrs.dtype("out_type", np.dtype("int32"))
    if out_type == np.dtype("int64"):
        return [ctx.emit1(node.op, [ctx.input(0)])]
    value = ctx.emit1(node.op, [ctx.input(0)], suffix="int64")
    return [ctx.emit1("Cast", [value], {"to": str(out_type)})]


@REGISTRY.register("Fill", emits=("ConstantOfShape", "Expand"), converts="always")
def convert_fill(ctx: TFContext, node: TFNode) -> list[Value]:
    """A tensor of the given shape filled with a scalar."""
    shape = int64_input(ctx, 0, "dims")
    dims = ctx.const(0)
    if dims is not None:
        ctx.check_size(tuple(int(d) for d in np.asarray(dims).reshape(-1)), "a filled tensor")
    value = ctx.const(1)
    if value is not None:
        return [ctx.emit1("ConstantOfShape", [shape],
                          {"value": ctx.need_scalar(1, "value").reshape(1)})]
    return [ctx.emit1("Expand", [ctx.input(1), shape])]


@REGISTRY.register("Range", emits=("Range",))
def convert_range(ctx: TFContext, node: TFNode) -> list[Value]:
    """numpy.arange(start, limit, delta)."""
    bounds = [ctx.const(i) for i in range(3)]
    if all(b is not None for b in bounds):
        start, limit, delta = (float(np.asarray(b).reshape(())) for b in bounds)
        if delta == 0:
            raise InvalidModelError("delta is 0")
        ctx.check_size((max(int(np.ceil((limit - start) / delta)), 0),), "a range")
    return [ctx.emit1("Range", [ctx.input(0), ctx.input(1), ctx.input(2)])]


@REGISTRY.register("GatherV2", "Gather", emits=("Gather",), condition="batch_dims 0")
def convert_gather(ctx: TFContext, node: TFNode) -> list[Value]:
    """Take along a constant axis (batch_dims 0 only)."""
    if int(ctx.attrs.int("batch_dims", 0)):
        raise Refusal("batch_dims != 0 is not supported; batch_dims=0 would convert")
    axis = _axis_list(ctx.need_const(2, "axis"))[0] if node.op == "GatherV2" else 0
    return [ctx.emit1("Gather", [ctx.input(0), ctx.input(1)], {"axis": axis})]


@REGISTRY.register("Tile", emits=("Tile",))
def convert_tile(ctx: TFContext, node: TFNode) -> list[Value]:
    """Repeat along every axis."""
    shape, reps = ctx.shape(0), ctx.const(1)
    if shape is not None and reps is not None and len(shape) == np.asarray(reps).size:
        ctx.check_size(tuple(d * int(r) if isinstance(d, int) else None
                             for d, r in zip(shape, np.asarray(reps).reshape(-1))), "a tiling")
    return [ctx.emit1("Tile", [ctx.input(0), int64_input(ctx, 1, "multiples")])]
