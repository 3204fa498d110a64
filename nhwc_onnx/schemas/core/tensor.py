"""Core ops that move data or change shape: Flatten, Reshape, Squeeze, Unsqueeze, Transpose,
Concat, Split, Slice, Pad, the reductions, Softmax/LogSoftmax and ArgMax."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import InvalidAttributeError
from ..base import Attr, RuleError
from .define import (
    A,
    core_op,
    dtype_int64,
    dtype_of_inputs,
    eval_axis,
    flatten_axis,
    infer_axis,
    numpy_function,
    prod,
)
from .lowering import as_int64, as_onnx, core_attrs, int64, known, refuse, scalar_like

_MOVES: dict[str, Any] = {"dtype": dtype_of_inputs}


# -- Flatten, Reshape -----------------------------------------------------------------------------


def _infer_flatten(ctx):
    shape = ctx.shape(0)
    try:
        axis = flatten_axis(ctx.attrs["axis"], len(shape))
    except InvalidAttributeError as exc:
        raise RuleError("axis", str(exc)) from exc
    return [(prod(shape[:axis]), prod(shape[axis:]))]


def _flatten(attrs, xs):
    x = xs[0]
    axis = flatten_axis(attrs["axis"], x.ndim)
    rows = int(np.prod(x.shape[:axis], dtype=np.int64))
    return x.reshape(rows, -1) if x.size else x.reshape(rows, int(np.prod(x.shape[axis:])))


core_op("Flatten", "ONNX Flatten: 2-D (prod(dims[:axis]), prod(dims[axis:])).", ["X"],
        attrs={"axis": Attr(A.INT, default=1)}, infer=_infer_flatten, evaluate=_flatten,
        lower=as_onnx("axis"), **_MOVES)


def _infer_reshape(ctx):
    target = ctx.consts[1] if len(ctx.consts) > 1 else None
    if target is None:
        spec = ctx.shapes[1] if len(ctx.shapes) > 1 else None
        if spec is not None and len(spec) == 1 and spec[0] is not None:
            return [(None,) * spec[0]]
        return [None]
    target = np.asarray(target)
    if target.dtype.kind not in "iu":  # str(dtype) only when it is needed: it is slow
        ctx.fail("shape", "the Reshape target must be integer", "int64", str(target.dtype))
    dims = [int(d) for d in target.reshape(-1)]
    shape = ctx.shape(0)
    out: list[int | None] = []
    copied: set[int] = set()  # axes whose dim is copied from the input (0 without allowzero)
    for i, d in enumerate(dims):
        if d == 0 and not ctx.attrs["allowzero"]:
            ctx.require(i < len(shape), "shape", f"0 at axis {i} has no input dim to copy")
            out.append(shape[i])
            copied.add(i)
        else:
            out.append(d)
    ctx.require(out.count(-1) <= 1, "shape", f"more than one -1 in {dims}")
    # Copied dims appear on both sides: cancel them so an unknown batch still resolves -1.
    total = prod([d for i, d in enumerate(shape) if i not in copied])
    rest = prod([d for i, d in enumerate(out) if d != -1 and i not in copied])
    if -1 in out:
        if total is None or rest is None:
            out[out.index(-1)] = None
        else:
            ctx.require(rest != 0 and total % rest == 0, "shape",
                        f"cannot reshape {list(shape)} to {dims}")
            out[out.index(-1)] = total // rest
    elif total is not None and rest is not None:
        ctx.require(total == rest, "shape", f"cannot reshape {list(shape)} to {dims}")
    return [tuple(out)]


def reshape_target(in_shape, shape, allowzero: int) -> list[int]:
    """Resolve Reshape's 0 and -1 against a known input shape."""
    dims = [int(d) for d in shape]
    if not allowzero:
        for i, d in enumerate(dims):
            if d == 0:
                if i >= len(in_shape):
                    raise InvalidAttributeError(f"Reshape: 0 at axis {i} has no input dim to copy")
                dims[i] = int(in_shape[i])
    if dims.count(-1) > 1:
        raise InvalidAttributeError(f"Reshape: more than one -1 in {list(shape)}")
    total = prod(in_shape)
    if -1 in dims:
        known = prod([d for d in dims if d != -1])
        assert total is not None and known is not None  # every dim is an int
        if known == 0 or total % known:
            raise InvalidAttributeError(
                f"Reshape: cannot reshape {list(in_shape)} to {list(shape)}")
        dims[dims.index(-1)] = total // known
    if prod(dims) != total:
        raise InvalidAttributeError(f"Reshape: cannot reshape {list(in_shape)} to {list(shape)}")
    return dims


def _lower_reshape(node, L, inputs, outputs) -> None:
    L.op("Reshape", [inputs[0], as_int64(L, node, 1, inputs[1])], outputs=outputs,
         allowzero=int(core_attrs(node)["allowzero"]))


core_op("Reshape", "ONNX Reshape (0 copies the input dim unless allowzero, one -1 inferred). "
        "``shape`` is an int64 tensor, constant once folded.", ["X", "shape"],
        attrs={"allowzero": Attr(A.INT, default=0, allowed=(0, 1))},
        infer=_infer_reshape,
        evaluate=lambda attrs, xs: xs[0].reshape(
            reshape_target(xs[0].shape, xs[1], attrs["allowzero"])), lower=_lower_reshape,
        **_MOVES)


# -- Squeeze, Unsqueeze, Transpose ----------------------------------------------------------------


def _infer_squeeze(ctx):
    shape = ctx.shape(0)
    axes = {infer_axis(ctx, a, len(shape)) for a in ctx.attrs["axes"]}
    for a in axes:
        ctx.require(shape[a] in (1, None), "axes", f"axis {a} has size {shape[a]}, not 1")
    return [tuple(d for i, d in enumerate(shape) if i not in axes)]


def _squeeze(attrs, xs):
    x = xs[0]
    axes = tuple(eval_axis(a, x.ndim) for a in attrs["axes"])
    if any(x.shape[a] != 1 for a in axes):
        raise InvalidAttributeError(f"Squeeze: axes {list(axes)} of {list(x.shape)} are not all 1")
    return np.squeeze(x, axis=axes)


def _lower_axes_input(node, L, inputs, outputs) -> None:
    """The ONNX op of the node's name, ``axes`` as its second input (opset 13 and later)."""
    L.op(node.op, [inputs[0], int64(L, core_attrs(node)["axes"], "axes")], outputs=outputs)


core_op("Squeeze", "Remove the listed size-1 axes.", ["X"],
        attrs={"axes": Attr(A.INTS, required=True)}, infer=_infer_squeeze, evaluate=_squeeze,
        lower=_lower_axes_input, **_MOVES)


def _infer_unsqueeze(ctx):
    shape = list(ctx.shape(0))
    rank = len(shape) + len(ctx.attrs["axes"])
    axes = sorted(infer_axis(ctx, a, rank) for a in ctx.attrs["axes"])
    ctx.require(len(set(axes)) == len(axes), "axes", "repeated axes")
    for a in axes:
        shape.insert(a, 1)
    return [tuple(shape)]


def _unsqueeze(attrs, xs):
    x = xs[0]
    rank = x.ndim + len(attrs["axes"])
    axes = sorted(eval_axis(a, rank) for a in attrs["axes"])
    return np.expand_dims(x, tuple(axes))


core_op("Unsqueeze", "Insert size-1 axes at the listed output positions.", ["X"],
        attrs={"axes": Attr(A.INTS, required=True)}, infer=_infer_unsqueeze,
        evaluate=_unsqueeze, lower=_lower_axes_input, **_MOVES)


def _infer_transpose(ctx):
    shape = ctx.shape(0)
    perm = ctx.attrs.get("perm")
    perm = list(range(len(shape)))[::-1] if perm is None else list(perm)
    ctx.require(sorted(perm) == list(range(len(shape))), "perm",
                f"perm {perm} is not a permutation of {len(shape)} axes")
    return [tuple(shape[p] for p in perm)]


def _transpose(attrs, xs):
    perm = attrs.get("perm")
    return np.transpose(xs[0], None if perm is None else tuple(perm))


core_op("Transpose", "numpy.transpose(X, perm).", ["X"], attrs={"perm": Attr(A.INTS)},
        infer=_infer_transpose,
        evaluate=_transpose, lower=as_onnx("perm"), **_MOVES)


# -- Concat, Split, Slice, Pad --------------------------------------------------------------------


def _infer_concat(ctx):
    shapes = [ctx.shape(i) for i in range(len(ctx.node.inputs))]
    rank = len(shapes[0])
    axis = infer_axis(ctx, ctx.attrs["axis"], rank)
    out = list(shapes[0])
    for s in shapes[1:]:
        ctx.require(len(s) == rank, "rank", "Concat inputs differ in rank")
        for i in range(rank):
            if i != axis and out[i] is None:
                out[i] = s[i]
            elif i != axis and s[i] is not None:
                ctx.require(s[i] == out[i], "shape", f"Concat inputs differ at axis {i}")
    sizes = [s[axis] for s in shapes]
    out[axis] = None if None in sizes else sum(sizes)
    return [tuple(out)]


core_op("Concat", "Concatenate along ``axis``.", ["inputs*"],
        attrs={"axis": Attr(A.INT, required=True)}, infer=_infer_concat,
        evaluate=lambda attrs, xs: np.concatenate(xs, axis=eval_axis(attrs["axis"], xs[0].ndim)),
        lower=as_onnx("axis"), **_MOVES)


def _infer_split(ctx):
    shape = ctx.shape(0)
    axis = infer_axis(ctx, ctx.attrs["axis"], len(shape))
    sizes = list(ctx.attrs["split"])
    ctx.require(len(sizes) == len(ctx.node.outputs), "split", "one size per output",
                len(ctx.node.outputs), len(sizes))
    ctx.require(shape[axis] is None or sum(sizes) == shape[axis], "split",
                "split sizes must add up to the axis size", shape[axis], sum(sizes))
    return [shape[:axis] + (s,) + shape[axis + 1:] for s in sizes]


def _split(attrs, xs):
    x = xs[0]
    axis = eval_axis(attrs["axis"], x.ndim)
    sizes = list(attrs["split"])
    if sum(sizes) != x.shape[axis]:
        raise InvalidAttributeError(f"Split sizes {sizes} do not add up to {x.shape[axis]}")
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def _lower_split(node, L, inputs, outputs) -> None:
    attrs = core_attrs(node)
    L.op("Split", [inputs[0], int64(L, attrs["split"], "split")], outputs=outputs,
         axis=int(attrs["axis"]))


core_op("Split", "Split along ``axis`` into pieces of the listed sizes (one output each).", ["X"],
        outputs=("outputs*",), attrs={"axis": Attr(A.INT, default=0),
                                      "split": Attr(A.INTS, required=True)},
        infer=_infer_split,
        evaluate=_split, lower=_lower_split, **_MOVES)


def slice_bounds(dim: int, start: int, end: int, step: int) -> tuple[int, int | None]:
    """ONNX Slice clamping: (start, end) for a Python slice (end None = past the beginning)."""
    if step == 0:
        raise InvalidAttributeError("Slice step must not be 0")
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return min(max(start, 0), dim), min(max(end, 0), dim)
    start = min(max(start, 0), dim - 1)
    end = min(max(end, -1), dim - 1)
    return start, (None if end < 0 else end)


def slice_index(shape, attrs) -> tuple[slice, ...]:
    starts, ends = list(attrs["starts"]), list(attrs["ends"])
    axes = attrs.get("axes")
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = attrs.get("steps")
    steps = [1] * len(starts) if steps is None else list(steps)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise InvalidAttributeError("Slice starts/ends/axes/steps have different lengths")
    index = [slice(None)] * len(shape)
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = eval_axis(a, len(shape))
        lo, hi = slice_bounds(int(shape[a]), int(s), int(e), int(st))
        index[a] = slice(lo, hi, int(st))
    return tuple(index)


def _infer_slice(ctx):
    shape = list(ctx.shape(0))
    starts, ends = list(ctx.attrs["starts"]), list(ctx.attrs["ends"])
    axes = ctx.attrs.get("axes")
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = ctx.attrs.get("steps") or [1] * len(starts)
    ctx.require(len(starts) == len(ends) == len(axes) == len(steps), "slice",
                "starts/ends/axes/steps differ in length")
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = infer_axis(ctx, a, len(shape))
        if shape[a] is None:
            continue
        ctx.require(st != 0, "slice", "step 0")
        lo, hi = slice_bounds(shape[a], int(s), int(e), int(st))
        shape[a] = len(range(shape[a])[slice(lo, hi, int(st))])
    return [tuple(shape)]


def _lower_slice(node, L, inputs, outputs) -> None:
    attrs = core_attrs(node)
    given = [None if attrs.get(name) is None else int64(L, attrs[name], name)
             for name in ("starts", "ends", "axes", "steps")]
    L.op("Slice", [inputs[0], *given], outputs=outputs)


core_op("Slice", "ONNX Slice-13 with constant starts/ends/axes/steps (clamped like numpy).", ["X"],
        attrs={"starts": Attr(A.INTS, required=True), "ends": Attr(A.INTS, required=True),
               "axes": Attr(A.INTS), "steps": Attr(A.INTS)}, infer=_infer_slice,
        evaluate=lambda attrs, xs: xs[0][slice_index(xs[0].shape, attrs)], lower=_lower_slice,
        **_MOVES)


def _infer_pad(ctx):
    shape = ctx.shape(0)
    pads = list(ctx.attrs["pads"])
    ctx.require(len(pads) == 2 * len(shape), "pads", "one begin and one end per axis",
                2 * len(shape), len(pads))
    r = len(shape)
    return [tuple(None if d is None else d + pads[i] + pads[i + r] for i, d in enumerate(shape))]


def _pad(attrs, xs):
    x = xs[0]
    pads = list(attrs["pads"])
    if len(pads) != 2 * x.ndim:
        raise InvalidAttributeError(f"Pad needs {2 * x.ndim} pads, found {len(pads)}")
    begin, end = pads[: x.ndim], pads[x.ndim:]
    crop = tuple(slice(max(-b, 0), x.shape[i] - max(-e, 0)) for i, (b, e) in
                 enumerate(zip(begin, end)))
    x = x[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    mode = attrs["mode"]
    if mode == "constant":
        return np.pad(x, widths, constant_values=np.asarray(attrs["value"], x.dtype))
    return np.pad(x, widths, mode=mode if mode in ("reflect", "symmetric") else "edge")


_PAST_BEGIN = -(1 << 63)  # a Slice end before the first element (a backward slice's end)


def lower_pad(node, L, inputs, outputs) -> None:
    """Crops (negative pads) first, as the evaluator does, then the positive widths: ONNX Pad
    for constant, reflect and edge; symmetric (no ONNX mode) as mirrored Slices concatenated
    on each axis in turn, as numpy pads axis by axis."""
    attrs = core_attrs(node)
    pads, mode = [int(p) for p in attrs["pads"]], attrs["mode"]
    rank = len(pads) // 2
    begin, end = pads[:rank], pads[rank:]
    _check_mirror_widths(node, mode, pads)
    x = inputs[0]
    if any(p < 0 for p in pads):
        x = L.op("Slice", [x, int64(L, [max(-b, 0) for b in begin], "starts"),
                           int64(L, [e if e < 0 else (1 << 63) - 1 for e in end], "ends")])[0]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    if mode != "symmetric":
        value = scalar_like(L, node, 0, attrs["value"], "value") if mode == "constant" else None
        L.op("Pad", [x, int64(L, [b for b, _ in widths] + [e for _, e in widths], "pads"),
                     value], outputs=outputs, mode=mode)
        return
    for axis, (b, e) in enumerate(widths):
        if not (b or e):
            continue
        axes = int64(L, [axis], "axis")
        step = int64(L, [-1], "backward")
        parts = [x]
        if b:  # the first b elements, last one first
            parts.insert(0, L.op("Slice", [x, int64(L, [b - 1], "start"),
                                           int64(L, [_PAST_BEGIN], "end"), axes, step])[0])
        if e:  # the last e elements, last one first
            parts.append(L.op("Slice", [x, int64(L, [-1], "start"), int64(L, [-e - 1], "end"),
                                        axes, step])[0])
        x = L.op("Concat", parts, axis=axis)[0]
    L.op("Identity", [x], outputs=outputs)


def _check_mirror_widths(node, mode: str, pads: list[int]) -> None:
    """numpy mirrors a width beyond one reflection of the axis again and again; ONNX's
    reflect (and the symmetric Slices) mirror once: refuse what one mirror cannot give."""
    if mode not in ("reflect", "symmetric"):
        return
    shape, rank = node.inputs[0].shape, len(pads) // 2
    for axis in range(rank):
        begin, end = pads[axis], pads[axis + rank]
        width = max(begin, end, 0)
        if not width:
            continue
        dim = shape[axis] if shape is not None and axis < len(shape) else None
        cropped = None
        if dim is not None and known(dim):
            cropped = int(dim) - max(-begin, 0) - max(-end, 0)
        if cropped is None or width > cropped - (mode == "reflect"):
            refuse(node, "pads", f"{mode} padding of {width} on axis {axis} of size "
                   f"{cropped if cropped is not None else 'unknown'} needs more than one mirror")


core_op("Pad", "ONNX Pad: pads = [x1_begin, x2_begin, ..., x1_end, x2_end, ...] over all axes.",
        ["X"], attrs={"pads": Attr(A.INTS, required=True),
                      "mode": Attr(A.STRING, default="constant",
                                   allowed=("constant", "reflect", "edge", "symmetric")),
                      "value": Attr(A.FLOAT, default=0.0)},
        infer=_infer_pad, evaluate=_pad, lower=lower_pad, **_MOVES)


# -- reductions, Softmax, ArgMax ------------------------------------------------------------------


def _infer_reduce(ctx):
    shape = ctx.shape(0)
    axes = ctx.attrs.get("axes")
    axes = set(range(len(shape))) if axes is None else {infer_axis(ctx, a, len(shape))
                                                        for a in axes}
    if ctx.attrs["keepdims"]:
        return [tuple(1 if i in axes else d for i, d in enumerate(shape))]
    return [tuple(d for i, d in enumerate(shape) if i not in axes)]


def _reducer(fn):
    def reduce(attrs, xs):
        x = xs[0]
        axes = attrs.get("axes")
        axes = tuple(range(x.ndim)) if axes is None else tuple(eval_axis(a, x.ndim) for a in axes)
        wide = x.astype(np.float64) if np.issubdtype(x.dtype, np.floating) else x
        return np.asarray(fn(wide, axis=axes, keepdims=bool(attrs["keepdims"]))).astype(x.dtype)

    return reduce


def _lower_reduce(node, L, inputs, outputs) -> None:
    attrs = core_attrs(node)
    axes, keepdims = attrs.get("axes"), int(attrs["keepdims"])
    if axes is not None and not len(axes):
        L.op("Identity", inputs, outputs=outputs)  # no axis: numpy reduces nothing, ONNX all
    elif node.op == "ReduceSum":  # the one reduction whose axes are an input in opset 17
        axes_input = None if axes is None else int64(L, axes, "axes")
        L.op("ReduceSum", [inputs[0], axes_input], outputs=outputs, keepdims=keepdims)
    else:
        L.op(node.op, inputs, outputs=outputs, keepdims=keepdims,
             axes=None if axes is None else [int(a) for a in axes])


_REDUCE = {"ReduceMean": numpy_function("mean"), "ReduceMax": numpy_function("max"),
           "ReduceMin": numpy_function("min"), "ReduceSum": numpy_function("sum"),
           "ReduceProd": numpy_function("prod")}
for _name, _fn in _REDUCE.items():
    core_op(_name, f"{_name} over ``axes`` (all axes when absent).", ["X"],
            attrs={"axes": Attr(A.INTS), "keepdims": Attr(A.INT, default=1, allowed=(0, 1))},
            infer=_infer_reduce,
            evaluate=_reducer(_fn), lower=_lower_reduce, **_MOVES)


def _infer_softmax(ctx):
    infer_axis(ctx, ctx.attrs["axis"], len(ctx.shape(0)))
    return [ctx.shape(0)]


def _softmax(log: bool):
    def softmax(attrs, xs):
        x = xs[0]
        axis = eval_axis(attrs["axis"], x.ndim)
        z = x.astype(np.float64) - np.max(x, axis=axis, keepdims=True)
        lse = np.log(np.sum(np.exp(z), axis=axis, keepdims=True))
        return (z - lse if log else np.exp(z - lse)).astype(x.dtype)

    return softmax


for _name in ("Softmax", "LogSoftmax"):
    core_op(_name, f"{_name} along one axis (ONNX-13 semantics; frontends express older "
            "coerce-to-2-D forms with Flatten/Reshape).", ["X"],
            attrs={"axis": Attr(A.INT, default=-1)}, infer=_infer_softmax,
            evaluate=_softmax(_name == "LogSoftmax"), lower=as_onnx("axis"), **_MOVES)


def _infer_argmax(ctx):
    shape = ctx.shape(0)
    axis = infer_axis(ctx, ctx.attrs["axis"], len(shape))
    if ctx.attrs["keepdims"]:
        return [shape[:axis] + (1,) + shape[axis + 1:]]
    return [shape[:axis] + shape[axis + 1:]]


def _argmax(attrs, xs):
    axis = eval_axis(attrs["axis"], xs[0].ndim)
    out = np.argmax(xs[0], axis=axis)
    return (np.expand_dims(out, axis) if attrs["keepdims"] else out).astype(np.int64)


core_op("ArgMax", "Index of the maximum along ``axis`` (int64).", ["X"],
        attrs={"axis": Attr(A.INT, default=0), "keepdims": Attr(A.INT, default=1)},
        infer=_infer_argmax, dtype=dtype_int64, evaluate=_argmax,
        lower=as_onnx("axis", "keepdims"))
