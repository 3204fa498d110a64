"""Core shape-computation ops (folded away when constant): Shape, Size, Gather, Cast,
ConstantOfShape, Range, Expand, Tile."""
from __future__ import annotations

import numpy as np

from ...errors import InvalidAttributeError
from ..base import Attr
from .define import (
    A,
    broadcast,
    const_ints,
    core_op,
    dtype_int64,
    dtype_of_inputs,
    eval_axis,
    infer_axis,
    same_shape,
)
from .lowering import as_int64, as_onnx, core_attrs, int64

core_op("Shape", "The input's shape as int64.", ["X"],
        infer=lambda ctx: [(len(ctx.shape(0)),)], dtype=dtype_int64, lower=as_onnx(),
        evaluate=lambda attrs, xs: np.asarray(xs[0].shape, dtype=np.int64))
core_op("Size", "The input's element count as int64.", ["X"],
        infer=lambda ctx: [()], dtype=dtype_int64, lower=as_onnx(),
        evaluate=lambda attrs, xs: np.asarray(xs[0].size, dtype=np.int64))


def _infer_gather(ctx):
    data, idx = ctx.shape(0), ctx.shape(1)
    axis = infer_axis(ctx, ctx.attrs["axis"], len(data))
    return [data[:axis] + tuple(idx) + data[axis + 1:]]


def _gather(attrs, xs):
    data, idx = xs
    axis = eval_axis(attrs["axis"], data.ndim)
    idx = np.asarray(idx).astype(np.int64)
    dim = data.shape[axis]
    if np.any((idx < -dim) | (idx >= dim)):
        raise InvalidAttributeError(f"Gather: index out of range for axis size {dim}")
    return np.take(data, np.where(idx < 0, idx + dim, idx), axis=axis)


core_op("Gather", "numpy.take(data, indices, axis).", ["data", "indices"],
        attrs={"axis": Attr(A.INT, default=0)}, infer=_infer_gather, dtype=dtype_of_inputs,
        evaluate=_gather, lower=as_onnx("axis"))


def _dtype_cast(node, in_dtypes: list) -> list:
    return [str(np.dtype(node.attrs["to"]))] * len(node.outputs)


def _lower_cast(node, L, inputs, outputs) -> None:
    from onnx import helper  # only a lowering needs onnx

    to = helper.np_dtype_to_tensor_dtype(np.dtype(core_attrs(node)["to"]))
    L.op("Cast", inputs, outputs=outputs, to=int(to))


core_op("Cast", "Convert element type to ``to`` (a numpy dtype name).", ["X"],
        attrs={"to": Attr(A.STRING, required=True)}, infer=same_shape, dtype=_dtype_cast,
        elementwise=True, evaluate=lambda attrs, xs: xs[0].astype(np.dtype(attrs["to"])),
        lower=_lower_cast)


def _infer_constant_of_shape(ctx):
    dims = const_ints(ctx, 0)
    if dims is not None:
        ctx.require(np.ndim(ctx.consts[0]) == 1 and min(dims, default=0) >= 0, "shape",
                    "the shape must be a 1-D list of integers >= 0", found=str(dims))
        return [tuple(dims)]
    spec = ctx.shape(0)
    return [(None,) * spec[0] if spec and spec[0] is not None else None]


def _dtype_constant_of_shape(node, in_dtypes: list) -> list:
    value = node.attrs.get("value")
    return ["float32" if value is None else str(np.asarray(value).dtype)] * len(node.outputs)


def _constant_of_shape(attrs, xs):
    value = attrs.get("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    dims = np.asarray(xs[0])
    if dims.ndim != 1 or dims.dtype.kind not in "iu" or (dims.size and dims.min() < 0):
        raise InvalidAttributeError(f"ConstantOfShape: the shape must be a 1-D list of integers "
                                    f">= 0, found {dims.tolist()} ({dims.dtype})")
    return np.full([int(d) for d in dims], value.reshape(-1)[0], dtype=value.dtype)


def _lower_constant_of_shape(node, L, inputs, outputs) -> None:
    from onnx import numpy_helper  # only a lowering needs onnx

    value = core_attrs(node).get("value")
    value = np.zeros(1, np.float32) if value is None else np.asarray(value)
    fill = numpy_helper.from_array(value.reshape(-1)[:1])  # ONNX wants one element, 1-D
    L.op("ConstantOfShape", [as_int64(L, node, 0, inputs[0])], outputs=outputs, value=fill)


core_op("ConstantOfShape", "A tensor of the given shape filled with ``value``.", ["shape"],
        attrs={"value": Attr(A.TENSOR)}, infer=_infer_constant_of_shape,
        dtype=_dtype_constant_of_shape, evaluate=_constant_of_shape,
        lower=_lower_constant_of_shape)


def _infer_range(ctx):
    args = [ctx.consts[i] if i < len(ctx.consts) else None for i in range(3)]
    if any(a is None for a in args):
        return [(None,)]
    start, limit, delta = (float(np.asarray(a).reshape(())) for a in args)
    ctx.require(delta != 0, "delta", "Range delta must not be 0")
    return [(max(int(np.ceil((limit - start) / delta)), 0),)]


def _range(attrs, xs):
    start, limit, delta = (np.asarray(x).reshape(()) for x in xs)
    # numpy takes 0-d arrays as the scalars they hold; its stubs want Python numbers
    return np.arange(start, limit, delta).astype(start.dtype)  # type: ignore[call-overload]


def _lower_range(node, L, inputs, outputs) -> None:
    # ONNX Range takes 0-d tensors; the evaluator reads any one-element tensor
    scalars = [name if node.inputs[i].shape == () else
               L.op("Reshape", [name, int64(L, [], "scalar")])[0]
               for i, name in enumerate(inputs)]
    L.op("Range", scalars, outputs=outputs)


core_op("Range", "numpy.arange(start, limit, delta).", ["start", "limit", "delta"],
        infer=_infer_range, dtype=dtype_of_inputs, evaluate=_range, lower=_lower_range)


def _infer_expand(ctx):
    dims = const_ints(ctx, 1)
    if dims is None:
        return [None]
    return [broadcast(ctx, [ctx.shape(0), tuple(dims)])]


def _expand(attrs, xs):
    x = xs[0]
    target = np.broadcast_shapes(x.shape, tuple(int(d) for d in xs[1]))
    return np.array(np.broadcast_to(x, target))


def _lower_with_int64_second(node, L, inputs, outputs) -> None:
    """The ONNX op of the node's name, its second input (a shape, repeats) as int64."""
    L.op(node.op, [inputs[0], as_int64(L, node, 1, inputs[1])], outputs=outputs)


core_op("Expand", "Broadcast X to ``shape`` (numpy rules).", ["X", "shape"],
        infer=_infer_expand, dtype=dtype_of_inputs, evaluate=_expand,
        lower=_lower_with_int64_second)


def _infer_tile(ctx):
    reps = const_ints(ctx, 1)
    shape = ctx.shape(0)
    if reps is None:
        return [(None,) * len(shape)]
    ctx.require(len(reps) == len(shape), "repeats", "one repeat per axis", len(shape), len(reps))
    return [tuple(None if d is None else d * r for d, r in zip(shape, reps))]


core_op("Tile", "numpy.tile(X, repeats).", ["X", "repeats"], infer=_infer_tile,
        dtype=dtype_of_inputs, lower=_lower_with_int64_second,
        evaluate=lambda attrs, xs: np.tile(xs[0], [int(r) for r in xs[1]]))
