"""Shape (and element type) inference for every core op, attached as ``CORE_OPS[op].infer``.

Same contract as the dialect schemas: ``infer(ctx) -> list of output shapes``; a shape is a
tuple whose entries may be None (unknown dimension), or None when even the rank is unknown.
Broken rules raise RuleError. Size rules (SAME/VALID/explicit pads/ceil_mode, ConvTranspose
crops) are shared with the numpy evaluators, so inference and evaluation cannot disagree.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import InvalidAttributeError
from ..schemas.base import CORE_OPS, InferContext, RuleError
from . import core_eval_spatial as sp
from .core_eval import flatten_axis, slice_bounds

_RULES: dict[str, Callable[[InferContext], list]] = {}

BOOL_OPS = {"Equal", "Less", "Greater", "And", "Or", "Not"}


def _rule(*names: str):
    def deco(fn):
        for name in names:
            _RULES[name] = fn
        return fn

    return deco


def _axis(ctx: InferContext, axis: int, rank: int) -> int:
    if not -rank <= axis < max(rank, 1):
        ctx.fail("axis", f"axis {axis} is out of range for rank {rank}")
    return axis % rank if rank else 0


def _prod(dims) -> int | None:
    if any(d is None for d in dims):
        return None
    return int(np.prod(dims, dtype=np.int64))


def broadcast(ctx: InferContext, shapes: list[tuple]) -> tuple:
    """numpy broadcasting with unknown dims: a known dim > 1 wins; 1 against unknown is unknown."""
    rank = max(len(s) for s in shapes)
    out = []
    for i in range(rank):
        dims = [s[len(s) - rank + i] for s in shapes if len(s) - rank + i >= 0]
        big = {d for d in dims if d is not None and d != 1}
        if len(big) > 1:
            ctx.fail("broadcast", f"shapes {[list(s) for s in shapes]} do not broadcast")
        if big:
            out.append(big.pop())
        elif any(d is None for d in dims):
            out.append(None)
        else:
            out.append(1)
    return tuple(out)


def _same(ctx):
    return [ctx.shape(0)]


def _rank4(ctx: InferContext) -> tuple:
    shape = ctx.shape(0)
    ctx.require(len(shape) == 4, "rank", f"{ctx.node.op} needs a rank-4 input", 4, len(shape))
    return shape


def _split_layout(shape: tuple, fmt: str) -> tuple:
    """(N, C, H, W) whatever the data_format."""
    if fmt == "NHWC":
        return shape[0], shape[3], shape[1], shape[2]
    return shape


def _join_layout(n, c, h, w, fmt: str) -> tuple:
    return (n, h, w, c) if fmt == "NHWC" else (n, c, h, w)


def _plan(ctx: InferContext, hw, pooling: bool):
    try:
        return sp.spatial_plan(ctx.attrs, hw, pooling=pooling)
    except InvalidAttributeError as exc:
        raise RuleError("attribute", str(exc)) from exc


def _check_positive(ctx: InferContext, dims) -> None:
    for d in dims:
        if d is not None and d <= 0:
            ctx.fail("shape", f"{ctx.node.op} output would have size {d}: the window does not fit")


# -- spatial ------------------------------------------------------------------------------------


@_rule("Conv")
def _conv(ctx):
    fmt = ctx.attrs["data_format"]
    n, c, h, w = _split_layout(_rank4(ctx), fmt)
    wshape = ctx.shape(1)
    ctx.require(len(wshape) == 4, "rank", "Conv weight must be rank 4", 4, len(wshape))
    oihw = wshape if ctx.attrs["weight_layout"] == "OIHW" else (
        wshape[3], wshape[2], wshape[0], wshape[1])
    group = int(ctx.attrs["group"])
    ctx.require(list(oihw[2:]) == list(ctx.attrs["kernel_shape"]), "kernel",
                "weight spatial size differs from kernel_shape", ctx.attrs["kernel_shape"],
                list(oihw[2:]))
    if c is not None:
        ctx.require(oihw[1] * group == c, "channels",
                    f"weight expects {oihw[1]}x{group} input channels", oihw[1] * group, c)
    ctx.require(oihw[0] % group == 0, "group", "output channels not divisible by group")
    if ctx.has(2):
        ctx.require(tuple(ctx.shape(2)) == (oihw[0],), "bias", "bias must be (M,)",
                    (oihw[0],), ctx.shape(2))
    (oh, _, _), (ow, _, _) = _plan(ctx, (h, w), pooling=False)
    _check_positive(ctx, (oh, ow))
    return [_join_layout(n, oihw[0], oh, ow, fmt)]


@_rule("ConvTranspose")
def _conv_transpose(ctx):
    fmt = ctx.attrs["data_format"]
    n, c, h, w = _split_layout(_rank4(ctx), fmt)
    wshape = ctx.shape(1)
    ctx.require(len(wshape) == 4, "rank", "ConvTranspose weight must be rank 4", 4, len(wshape))
    iohw = wshape if ctx.attrs["weight_layout"] == "IOHW" else (
        wshape[3], wshape[2], wshape[0], wshape[1])
    if c is not None:
        ctx.require(iohw[0] == c, "channels", "weight input channels differ from X", iohw[0], c)
    m = iohw[1] * int(ctx.attrs["group"])
    dims = []
    for axis, size in enumerate((h, w)):
        if size is None and ctx.attrs.get("output_shape") is None:
            dims.append(None)
            continue
        dims.append(sp.conv_transpose_plan(ctx.attrs, size if size is not None else 1, axis,
                                           iohw[2 + axis])[0])
    _check_positive(ctx, dims)
    return [_join_layout(n, m, dims[0], dims[1], fmt)]


@_rule("MaxPool", "AveragePool")
def _pool(ctx):
    fmt = ctx.attrs["data_format"]
    n, c, h, w = _split_layout(_rank4(ctx), fmt)
    (oh, _, _), (ow, _, _) = _plan(ctx, (h, w), pooling=True)
    _check_positive(ctx, (oh, ow))
    return [_join_layout(n, c, oh, ow, fmt)]


@_rule("GlobalAveragePool", "GlobalMaxPool")
def _global_pool(ctx):
    fmt = ctx.attrs["data_format"]
    n, c, _, _ = _split_layout(_rank4(ctx), fmt)
    return [_join_layout(n, c, 1, 1, fmt)]


@_rule("BatchNormalization")
def _batchnorm(ctx):
    shape = ctx.shape(0)
    axis = _axis(ctx, ctx.attrs["axis"], len(shape))
    for i in range(1, 5):
        p = ctx.shape(i)
        ctx.require(len(p) == 1 and (shape[axis] is None or p[0] == shape[axis]), "parameter",
                    f"parameter {i} must be a vector of the channel size", (shape[axis],), p)
    return [shape]


@_rule("Resize")
def _resize(ctx):
    try:
        return [sp.resize_output_shape(ctx.attrs, ctx.shape(0))]
    except InvalidAttributeError as exc:
        raise RuleError("attribute", str(exc)) from exc


@_rule("DepthToSpace", "SpaceToDepth")
def _depth_space(ctx):
    fmt = ctx.attrs["data_format"]
    n, c, h, w = _split_layout(_rank4(ctx), fmt)
    bs = int(ctx.attrs["blocksize"])
    if ctx.node.op == "DepthToSpace":
        ctx.require(c is None or c % (bs * bs) == 0, "blocksize",
                    f"channels {c} not divisible by {bs * bs}")
        return [_join_layout(n, None if c is None else c // (bs * bs),
                             None if h is None else h * bs, None if w is None else w * bs, fmt)]
    for d in (h, w):
        ctx.require(d is None or d % bs == 0, "blocksize", f"spatial size {d} not divisible by {bs}")
    return [_join_layout(n, None if c is None else c * bs * bs,
                         None if h is None else h // bs, None if w is None else w // bs, fmt)]


# -- elementwise and linear algebra --------------------------------------------------------------


@_rule("Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "SquaredDifference", "Equal", "Less",
       "Greater", "And", "Or", "Sum", "Mean", "Where")
def _broadcast_rule(ctx):
    shapes = [ctx.shape(i) for i in range(len(ctx.node.inputs))]
    return [broadcast(ctx, shapes)]


@_rule("PRelu")
def _prelu(ctx):
    x = ctx.shape(0)
    out = broadcast(ctx, [x, ctx.shape(1)])
    ctx.require(len(out) == len(x), "broadcast", "slope must broadcast to X")
    return [x]


@_rule("MatMul")
def _matmul(ctx):
    a, b = ctx.shape(0), ctx.shape(1)
    ctx.require(len(a) >= 1 and len(b) >= 1, "rank", "MatMul operands need rank >= 1")
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    k1, k2 = a2[-1], b2[-2]
    ctx.require(k1 is None or k2 is None or k1 == k2, "shape", "MatMul inner dimensions differ",
                k1, k2)
    batch = broadcast(ctx, [a2[:-2], b2[:-2]]) if len(a2) > 2 or len(b2) > 2 else ()
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return [out]


@_rule("Gemm")
def _gemm(ctx):
    a, b = ctx.shape(0), ctx.shape(1)
    ctx.require(len(a) == 2 and len(b) == 2, "rank", "Gemm operands must be 2-D")
    m, k1 = (a[1], a[0]) if ctx.attrs["transA"] else a
    k2, n = (b[1], b[0]) if ctx.attrs["transB"] else b
    ctx.require(k1 is None or k2 is None or k1 == k2, "shape", "Gemm inner dimensions differ",
                k1, k2)
    if ctx.has(2):
        broadcast(ctx, [(m, n), ctx.shape(2)])
    return [(m, n)]


# -- shape and data movement ---------------------------------------------------------------------


@_rule("Flatten")
def _flatten(ctx):
    shape = ctx.shape(0)
    try:
        axis = flatten_axis(ctx.attrs["axis"], len(shape))
    except InvalidAttributeError as exc:
        raise RuleError("axis", str(exc)) from exc
    return [(_prod(shape[:axis]), _prod(shape[axis:]))]


@_rule("Reshape")
def _reshape(ctx):
    target = ctx.consts[1] if len(ctx.consts) > 1 else None
    if target is None:
        spec = ctx.shapes[1] if len(ctx.shapes) > 1 else None
        if spec is not None and len(spec) == 1 and spec[0] is not None:
            return [(None,) * spec[0]]
        return [None]
    target = np.asarray(target)
    ctx.require(target.dtype.kind in "iu", "shape", "the Reshape target must be integer",
                "int64", str(target.dtype))
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
    total = _prod([d for i, d in enumerate(shape) if i not in copied])
    rest = _prod([d for i, d in enumerate(out) if d != -1 and i not in copied])
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


@_rule("Squeeze")
def _squeeze(ctx):
    shape = ctx.shape(0)
    axes = {_axis(ctx, a, len(shape)) for a in ctx.attrs["axes"]}
    for a in axes:
        ctx.require(shape[a] in (1, None), "axes", f"axis {a} has size {shape[a]}, not 1")
    return [tuple(d for i, d in enumerate(shape) if i not in axes)]


@_rule("Unsqueeze")
def _unsqueeze(ctx):
    shape = list(ctx.shape(0))
    rank = len(shape) + len(ctx.attrs["axes"])
    axes = sorted(_axis(ctx, a, rank) for a in ctx.attrs["axes"])
    ctx.require(len(set(axes)) == len(axes), "axes", "repeated axes")
    for a in axes:
        shape.insert(a, 1)
    return [tuple(shape)]


@_rule("Transpose")
def _transpose(ctx):
    shape = ctx.shape(0)
    perm = ctx.attrs.get("perm")
    perm = list(range(len(shape)))[::-1] if perm is None else list(perm)
    ctx.require(sorted(perm) == list(range(len(shape))), "perm",
                f"perm {perm} is not a permutation of {len(shape)} axes")
    return [tuple(shape[p] for p in perm)]


@_rule("Concat")
def _concat(ctx):
    shapes = [ctx.shape(i) for i in range(len(ctx.node.inputs))]
    rank = len(shapes[0])
    axis = _axis(ctx, ctx.attrs["axis"], rank)
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


@_rule("Split")
def _split(ctx):
    shape = ctx.shape(0)
    axis = _axis(ctx, ctx.attrs["axis"], len(shape))
    sizes = list(ctx.attrs["split"])
    ctx.require(len(sizes) == len(ctx.node.outputs), "split", "one size per output",
                len(ctx.node.outputs), len(sizes))
    ctx.require(shape[axis] is None or sum(sizes) == shape[axis], "split",
                "split sizes must add up to the axis size", shape[axis], sum(sizes))
    return [shape[:axis] + (s,) + shape[axis + 1:] for s in sizes]


@_rule("Slice")
def _slice(ctx):
    shape = list(ctx.shape(0))
    starts, ends = list(ctx.attrs["starts"]), list(ctx.attrs["ends"])
    axes = ctx.attrs.get("axes")
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = ctx.attrs.get("steps") or [1] * len(starts)
    ctx.require(len(starts) == len(ends) == len(axes) == len(steps), "slice",
                "starts/ends/axes/steps differ in length")
    for s, e, a, st in zip(starts, ends, axes, steps):
        a = _axis(ctx, a, len(shape))
        if shape[a] is None:
            continue
        ctx.require(st != 0, "slice", "step 0")
        lo, hi = slice_bounds(shape[a], int(s), int(e), int(st))
        shape[a] = len(range(shape[a])[slice(lo, hi, int(st))])
    return [tuple(shape)]


@_rule("Pad")
def _pad(ctx):
    shape = ctx.shape(0)
    pads = list(ctx.attrs["pads"])
    ctx.require(len(pads) == 2 * len(shape), "pads", "one begin and one end per axis",
                2 * len(shape), len(pads))
    r = len(shape)
    return [tuple(None if d is None else d + pads[i] + pads[i + r] for i, d in enumerate(shape))]


@_rule("ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd")
def _reduce(ctx):
    shape = ctx.shape(0)
    axes = ctx.attrs.get("axes")
    axes = set(range(len(shape))) if axes is None else {_axis(ctx, a, len(shape)) for a in axes}
    if ctx.attrs["keepdims"]:
        return [tuple(1 if i in axes else d for i, d in enumerate(shape))]
    return [tuple(d for i, d in enumerate(shape) if i not in axes)]


@_rule("Softmax", "LogSoftmax")
def _softmax(ctx):
    _axis(ctx, ctx.attrs["axis"], len(ctx.shape(0)))
    return [ctx.shape(0)]


@_rule("ArgMax")
def _argmax(ctx):
    shape = ctx.shape(0)
    axis = _axis(ctx, ctx.attrs["axis"], len(shape))
    if ctx.attrs["keepdims"]:
        return [shape[:axis] + (1,) + shape[axis + 1:]]
    return [shape[:axis] + shape[axis + 1:]]


@_rule("Shape")
def _shape(ctx):
    return [(len(ctx.shape(0)),)]


@_rule("Size")
def _size(ctx):
    return [()]


@_rule("Gather")
def _gather(ctx):
    data, idx = ctx.shape(0), ctx.shape(1)
    axis = _axis(ctx, ctx.attrs["axis"], len(data))
    return [data[:axis] + tuple(idx) + data[axis + 1:]]


def _const_ints(ctx: InferContext, index: int) -> list[int] | None:
    value = ctx.consts[index] if index < len(ctx.consts) else None
    return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]


@_rule("ConstantOfShape")
def _constant_of_shape(ctx):
    dims = _const_ints(ctx, 0)
    if dims is not None:
        ctx.require(np.ndim(ctx.consts[0]) == 1 and min(dims, default=0) >= 0, "shape",
                    "the shape must be a 1-D list of integers >= 0", found=str(dims))
        return [tuple(dims)]
    spec = ctx.shape(0)
    return [(None,) * spec[0] if spec and spec[0] is not None else None]


@_rule("Range")
def _range(ctx):
    args = [ctx.consts[i] if i < len(ctx.consts) else None for i in range(3)]
    if any(a is None for a in args):
        return [(None,)]
    start, limit, delta = (float(np.asarray(a).reshape(())) for a in args)
    ctx.require(delta != 0, "delta", "Range delta must not be 0")
    return [(max(int(np.ceil((limit - start) / delta)), 0),)]


@_rule("Expand")
def _expand(ctx):
    dims = _const_ints(ctx, 1)
    if dims is None:
        return [None]
    return [broadcast(ctx, [ctx.shape(0), tuple(dims)])]


@_rule("Tile")
def _tile(ctx):
    reps = _const_ints(ctx, 1)
    shape = ctx.shape(0)
    if reps is None:
        return [(None,) * len(shape)]
    ctx.require(len(reps) == len(shape), "repeats", "one repeat per axis", len(shape), len(reps))
    return [tuple(None if d is None else d * r for d, r in zip(shape, reps))]


# -- element types --------------------------------------------------------------------------------


def infer_dtypes(node, in_dtypes: list[str | None]) -> list[str | None]:
    """Element type of each output of a core node from its inputs' types."""
    op = node.op
    first = next((d for d in in_dtypes if d is not None), None)
    if op in BOOL_OPS:
        out = "bool"
    elif op in ("Shape", "Size", "ArgMax"):
        out = "int64"
    elif op == "Cast":
        out = str(np.dtype(node.attrs["to"]))
    elif op == "ConstantOfShape":
        value = node.attrs.get("value")
        out = "float32" if value is None else str(np.asarray(value).dtype)
    elif op == "Where":
        out = in_dtypes[1]
    else:
        out = first
    return [out] * len(node.outputs)


def attach() -> None:
    for schema in CORE_OPS.all():
        rule = _RULES.get(schema.name)
        if rule is None:
            rule = _same  # unary elementwise ops, Cast, Identity, Dropout
        if schema.infer is None:
            schema.infer = rule


def missing_rules() -> list[str]:
    """Core ops whose inference is the generic 'same shape as input 0' fallback."""
    return [name for name in CORE_OPS.names() if name not in _RULES]


attach()
