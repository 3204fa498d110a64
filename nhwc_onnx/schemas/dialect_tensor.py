"""Tensor-manipulation dialect ops (domain ``nhwc``): shapes, axes and constants.

Semantics: the dialect spec v0.1 with the decisions of docs/design.md, with the ONNX
opset 1-7 meanings where the spec copies them: Flatten and Softmax coerce to 2-D at ``axis``
(default 1); Slice takes ``starts``/``ends``/``axes`` attributes, a negative start/end counts from
the end and values past the end are clamped; Reshape's ``shape`` is an int64 constant where 0 copies
the input dimension and one -1 is inferred (OpenVINO Reshape-1, ``special_zero=true``). Every axis
attribute is non-negative and counts NHWC axes.

Each schema also lowers to standard ONNX (opset 17) for ``nhwc_onnx.runtime``.
"""
from __future__ import annotations

import numpy as np

from .base import DIALECT_OPS, Attr, AttrKind, InferContext, LayoutClass, OpSchema, Port
from .dialect_elementwise import attrs_of, dims_agree, element_count, merge_dims, shape_text

SOURCE = ("dialect spec v0.1 (docs/design.md); ONNX opset 1-7 semantics, Reshape as "
          "OpenVINO Reshape-1")


def _int64(values) -> np.ndarray:
    return np.asarray([int(v) for v in values], dtype=np.int64)


def _check_axes(ctx: InferContext, name: str, axes, rank: int) -> list[int]:
    """Axes must be distinct and in [0, rank): the dialect uses non-negative NHWC axes."""
    axes = [int(a) for a in axes]
    for a in axes:
        ctx.require(0 <= a < rank, "axis-range",
                    f"'{name}' contains {a}, outside the input's axes 0..{rank - 1}",
                    f"0..{rank - 1}", a)
    ctx.require(len(set(axes)) == len(axes), "axis-repeated",
                f"'{name}' lists an axis more than once: {axes}", "distinct axes", axes)
    return axes


# -- Reshape ------------------------------------------------------------------------------------


def _infer_reshape(ctx: InferContext) -> list:
    data = ctx.shape(0)
    target = ctx.consts[1]
    if target is None:
        ctx.fail("constant-input", "input 'shape' must be a constant int64 tensor")
    ctx.require(target.ndim == 1, "reshape-shape", "input 'shape' must be 1-D",
                "1-D", f"{target.ndim}-D")
    dims = [int(d) for d in target]
    out: list[int | None] = []
    inferred_at: int | None = None
    for i, d in enumerate(dims):
        if d == 0:  # special_zero: copy the input dimension at the same index
            ctx.require(i < len(data), "reshape-zero",
                        f"shape[{i}] is 0 (copy input dim {i}) but the input has rank "
                        f"{len(data)}", f"index < {len(data)}", i)
            out.append(data[i])
        elif d == -1:
            ctx.require(inferred_at is None, "reshape-shape",
                        f"shape {dims} has more than one -1", "at most one -1",
                        dims.count(-1))
            inferred_at = i
            out.append(None)
        elif d < -1:
            ctx.fail("reshape-shape", f"shape[{i}] is {d}; allowed are -1, 0 and sizes >= 1",
                     "-1, 0 or >= 1", d)
        else:
            out.append(d)
    total = element_count(data)
    if inferred_at is not None:
        rest = element_count(out[:inferred_at] + out[inferred_at + 1:])
        if total is not None and rest is not None:
            ctx.require(rest > 0 and total % rest == 0, "reshape-count",
                        f"the input {shape_text(data)} has {total} elements, which shape {dims} "
                        f"cannot hold (the other dims multiply to {rest})",
                        f"a divisor of {total}", rest)
            out[inferred_at] = total // rest
    else:
        count = element_count(out)
        if total is not None and count is not None:
            ctx.require(total == count, "reshape-count",
                        f"the input {shape_text(data)} has {total} elements but shape {dims} "
                        f"has {count}", f"{total} elements", f"{count} elements")
    return [tuple(out)]


def _lower_reshape(node, L, inputs, outputs) -> None:
    # ONNX Reshape with allowzero=0 has the same 0 / -1 rules.
    L.op("Reshape", inputs, outputs=outputs)


# -- Flatten and Softmax (ONNX-1 coerce-to-2-D) -------------------------------------------------


def _coerced(ctx: InferContext, upper: int) -> tuple:
    x = ctx.shape(0)
    axis = int(ctx.attr("axis"))
    ctx.require(0 <= axis <= upper, "axis-range",
                f"axis {axis} is outside 0..{upper} for an input of rank {len(x)}",
                f"0..{upper}", axis)
    return x, axis


def _infer_flatten(ctx: InferContext) -> list:
    x, axis = _coerced(ctx, len(ctx.shape(0)))
    return [(element_count(x[:axis]), element_count(x[axis:]))]


def _lower_flatten(node, L, inputs, outputs) -> None:
    L.op("Flatten", inputs, outputs=outputs, axis=int(attrs_of(node)["axis"]))


def _infer_softmax(ctx: InferContext) -> list:
    rank = len(ctx.shape(0))
    ctx.require(rank >= 1, "rank", "Softmax needs an input of rank >= 1", ">= 1", rank)
    x, _ = _coerced(ctx, rank - 1)
    return [x]


def _lower_softmax(node, L, inputs, outputs) -> None:
    # Softmax-13 normalises one axis; ONNX-1 normalises the flattened tail from ``axis``:
    # flatten to 2-D, normalise the rows, restore the input's shape.
    axis = int(attrs_of(node)["axis"])
    (rows,) = L.op("Flatten", [inputs[0]], axis=axis)
    (normed,) = L.op("Softmax", [rows], axis=1)
    (shape,) = L.op("Shape", [inputs[0]])
    L.op("Reshape", [normed, shape], outputs=outputs)


# -- Squeeze, Concat, Transpose -----------------------------------------------------------------


def _infer_squeeze(ctx: InferContext) -> list:
    x = ctx.shape(0)
    ctx.require(len(ctx.attr("axes")) > 0, "axes",
                "'axes' is empty; list the size-1 axes to remove", "at least one axis", "[]")
    axes = _check_axes(ctx, "axes", ctx.attr("axes"), len(x))
    for a in axes:
        ctx.require(x[a] in (1, None), "squeeze-dim",
                    f"axis {a} has size {x[a]}; only size-1 axes can be squeezed", 1, x[a])
    return [tuple(d for i, d in enumerate(x) if i not in axes)]


def _lower_squeeze(node, L, inputs, outputs) -> None:
    axes = L.const(_int64(node.attrs["axes"]), "axes")
    L.op("Squeeze", [inputs[0], axes], outputs=outputs)


def _infer_concat(ctx: InferContext) -> list:
    first = ctx.shape(0)
    axis = int(ctx.attr("axis"))
    rank = len(first)
    ctx.require(0 <= axis < rank, "axis-range",
                f"axis {axis} is outside 0..{rank - 1} for inputs of rank {rank}",
                f"0..{rank - 1}", axis)
    out = list(first)
    for i in range(1, len(ctx.shapes)):
        s = ctx.shape(i)
        ctx.require(len(s) == rank, "concat-rank",
                    f"input {i} has rank {len(s)} but input 0 has rank {rank}", rank, len(s))
        others, first_others = list(s), list(first)
        others[axis] = first_others[axis] = None
        ctx.require(dims_agree(first_others, others), "concat-dims",
                    f"input {i} has shape {shape_text(s)}, input 0 {shape_text(first)}: all "
                    f"dims except axis {axis} must agree",
                    shape_text(first_others), shape_text(others))
        out = list(merge_dims(out, others))
        out[axis] = None if out[axis] is None or s[axis] is None else out[axis] + s[axis]
    return [tuple(out)]


def _lower_concat(node, L, inputs, outputs) -> None:
    L.op("Concat", inputs, outputs=outputs, axis=int(node.attrs["axis"]))


def _infer_transpose(ctx: InferContext) -> list:
    x = ctx.shape(0)
    perm = ctx.attr("perm")
    if perm is None:
        return [tuple(reversed(x))]
    perm = [int(p) for p in perm]
    ctx.require(sorted(perm) == list(range(len(x))), "perm",
                f"perm {perm} is not a permutation of the input's {len(x)} axes",
                f"a permutation of 0..{len(x) - 1}", perm)
    return [tuple(x[p] for p in perm)]


def _lower_transpose(node, L, inputs, outputs) -> None:
    perm = node.attrs.get("perm")
    extra = {} if perm is None else {"perm": [int(p) for p in perm]}  # absent: reversed
    L.op("Transpose", inputs, outputs=outputs, **extra)


# -- Slice and ReduceMean -----------------------------------------------------------------------


def slice_bounds(start: int, end: int, size: int) -> tuple[int, int]:
    """ONNX-1 Slice: negative counts from the end, then clamp to [0, size]."""
    if start < 0:
        start += size
    if end < 0:
        end += size
    return min(max(start, 0), size), min(max(end, 0), size)


def _infer_slice(ctx: InferContext) -> list:
    x = ctx.shape(0)
    starts, ends = list(ctx.attr("starts")), list(ctx.attr("ends"))
    axes = ctx.attr("axes")
    axes = list(range(len(starts))) if axes is None else list(axes)
    ctx.require(len(starts) == len(ends) == len(axes), "slice-lengths",
                "starts, ends and axes must have the same length",
                "equal lengths", f"{len(starts)}, {len(ends)}, {len(axes)}")
    axes = _check_axes(ctx, "axes", axes, len(x))
    out = list(x)
    for axis, start, end in zip(axes, starts, ends):
        if x[axis] is None:
            out[axis] = None
            continue
        begin, stop = slice_bounds(int(start), int(end), x[axis])
        ctx.require(stop > begin, "slice-empty",
                    f"slice [{start}:{end}] of axis {axis} (size {x[axis]}) is empty",
                    "at least one element", 0)
        out[axis] = stop - begin
    return [tuple(out)]


def _lower_slice(node, L, inputs, outputs) -> None:
    attrs = node.attrs
    starts = _int64(attrs["starts"])
    axes = attrs.get("axes")
    axes = np.arange(len(starts), dtype=np.int64) if axes is None else _int64(axes)
    # Slice-13 with step 1 clamps exactly as ONNX-1 does.
    L.op("Slice", [inputs[0], L.const(starts, "starts"), L.const(_int64(attrs["ends"]), "ends"),
                   L.const(axes, "axes")], outputs=outputs)


def _infer_reduce_mean(ctx: InferContext) -> list:
    x = ctx.shape(0)
    axes = ctx.attr("axes")
    if axes is None:
        axes = list(range(len(x)))
    else:
        ctx.require(len(axes) > 0, "axes", "'axes' is empty; omit it to reduce every axis",
                    "at least one axis", "[]")
        axes = _check_axes(ctx, "axes", axes, len(x))
    keep = int(ctx.attr("keepdims")) == 1
    return [tuple(1 if i in axes else d for i, d in enumerate(x) if keep or i not in axes)]


def _lower_reduce_mean(node, L, inputs, outputs) -> None:
    attrs = attrs_of(node)
    extra = {} if attrs.get("axes") is None else {"axes": [int(a) for a in attrs["axes"]]}
    # ReduceMean-13 (current in opset 17) still takes axes as an attribute; absent: all axes.
    L.op("ReduceMean", inputs, outputs=outputs, keepdims=int(attrs["keepdims"]), **extra)


# -- Constant -----------------------------------------------------------------------------------


def _infer_constant(ctx: InferContext) -> list:
    value = ctx.attr("value")
    ctx.require(value.dtype == np.float32, "dtype", "attribute 'value' must be a float32 tensor",
                "float32", str(value.dtype))
    return [tuple(int(d) for d in value.shape)]


def _lower_constant(node, L, inputs, outputs) -> None:
    value = np.asarray(node.attrs["value"], dtype=np.float32)
    L.op("Identity", [L.const(value, "value")], outputs=outputs)


# -- registration -------------------------------------------------------------------------------

A = AttrKind
F32 = ("float32",)


def _register(name: str, doc: str, inputs: list[Port], output: str, attrs: dict, layout,
              infer, lower) -> None:
    DIALECT_OPS.register(OpSchema(
        name, "nhwc", doc, inputs, [Port(output, dtypes=F32)], attrs,
        layout=layout, infer=infer, lower=lower, source=SOURCE,
    ))


_register("Reshape", "numpy.reshape(data, shape). 'shape' is a 1-D int64 constant: 0 copies the "
          "input dimension at the same index, one -1 is inferred so that the element count is "
          "unchanged; the counts must agree.",
          [Port("data"), Port("shape", dtypes=("int64",), constant=True)], "reshaped", {},
          LayoutClass.TERMINATE, _infer_reshape, _lower_reshape)
_register("Flatten", "2-D (prod(dims[:axis]), prod(dims[axis:])) view of the input "
          "(ONNX-1 Flatten), axis in 0..rank.", [Port("input")], "output",
          {"axis": Attr(A.INT, default=1, doc="first dimension of the inner (second) output dim")},
          LayoutClass.TERMINATE, _infer_flatten, _lower_flatten)
_register("Softmax", "ONNX-1 Softmax: the input is viewed as 2-D (prod(dims[:axis]), "
          "prod(dims[axis:])) and each row is normalised; a channel softmax of an NHWC tensor "
          "is axis = rank-1.", [Port("input")], "output",
          {"axis": Attr(A.INT, default=1, doc="first axis of the normalised block, 0..rank-1")},
          LayoutClass.ATTRIBUTE, _infer_softmax, _lower_softmax)
_register("Squeeze", "Remove the listed axes, each of size 1.", [Port("data")], "squeezed",
          {"axes": Attr(A.INTS, required=True, doc="non-negative axes to remove")},
          LayoutClass.ATTRIBUTE, _infer_squeeze, _lower_squeeze)
_register("Concat", "Concatenate one or more inputs along 'axis'; all other dims must agree.",
          [Port("inputs", variadic=True)], "concat_result",
          {"axis": Attr(A.INT, required=True, doc="non-negative NHWC axis")},
          LayoutClass.ATTRIBUTE, _infer_concat, _lower_concat)
_register("Transpose", "numpy.transpose(data, perm); without perm the axes are reversed.",
          [Port("data")], "transposed", {"perm": Attr(A.INTS, doc="a permutation of the axes")},
          LayoutClass.ATTRIBUTE, _infer_transpose, _lower_transpose)
_register("Slice", "data[starts:ends] on the listed axes (step 1). A negative start or end "
          "counts from the end of the axis; bounds are then clamped to [0, size]. Without "
          "'axes' the first len(starts) axes are sliced. An empty result is an error.",
          [Port("data")], "output",
          {"starts": Attr(A.INTS, required=True), "ends": Attr(A.INTS, required=True),
           "axes": Attr(A.INTS, doc="non-negative axes; default 0..len(starts)-1")},
          LayoutClass.ATTRIBUTE, _infer_slice, _lower_slice)
_register("ReduceMean", "Mean over 'axes' (every axis when absent); keepdims=1 keeps them as "
          "size 1.", [Port("data")], "reduced",
          {"axes": Attr(A.INTS, doc="non-negative axes, at least one"),
           "keepdims": Attr(A.INT, default=1, allowed=(0, 1))},
          LayoutClass.ATTRIBUTE, _infer_reduce_mean, _lower_reduce_mean)
_register("Constant", "A constant float32 tensor given by attribute 'value'; no inputs.",
          [], "output", {"value": Attr(A.TENSOR, required=True)},
          LayoutClass.TRANSPARENT, _infer_constant, _lower_constant)

__all__ = ["slice_bounds"]
