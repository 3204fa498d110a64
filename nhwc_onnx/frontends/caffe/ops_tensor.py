"""Layers that combine, split or rearrange blobs: Eltwise, Axpy, Concat, Slice, Split, Softmax,
Flatten, Reshape, Permute, Crop, ShuffleChannel, Silence."""
from __future__ import annotations

import itertools
import math

import numpy as np

from ...errors import InvalidModelError
from . import caffe_pb2 as pb
from .builder import CaffeBuilder, canonical_axis, one_bottom, shape_of
from .registry import REGISTRY


@REGISTRY.register("Eltwise", emits=("Mul", "Add", "Max"), converts="always",
           doc="SUM (with coefficients) as Mul/Add, PROD as Mul, MAX as Max")
def convert_eltwise(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    p = layer.eltwise_param
    xs = b.bottoms(layer)
    if len(xs) < 2:
        raise InvalidModelError(f"needs at least 2 bottoms, got {len(xs)}")
    shape = shape_of(xs[0])
    for x in xs[1:]:
        if shape_of(x) != shape:
            raise InvalidModelError(f"bottom shapes differ: {list(shape)} vs {list(shape_of(x))}")
    op = {pb.EltwiseParameter.SUM: "Add", pb.EltwiseParameter.PROD: "Mul",
          pb.EltwiseParameter.MAX: "Max"}[p.operation]
    terms = list(xs)
    if op == "Add" and len(p.coeff):
        if len(p.coeff) != len(xs):
            raise InvalidModelError(f"{len(p.coeff)} coefficients for {len(xs)} bottoms")
        for i, (x, k) in enumerate(zip(xs, p.coeff)):
            if float(k) != 1.0:
                terms[i] = b.node(layer, "Mul", [x, b.const(layer, np.float32(k), f"coeff{i}")],
                                  shape=shape, part=f"coeff{i}")
    top = b.top_value(layer, 0, shape)
    acc = terms[0]
    for i, t in enumerate(terms[1:], start=1):
        if i == len(terms) - 1:
            b.node(layer, op, [acc, t], out=top)
        else:
            acc = b.node(layer, op, [acc, t], shape=shape, part=f"{op.lower()}{i}")
    b.bind(layer, [top])


@REGISTRY.register("Axpy", emits=("Mul", "Add"), converts="always",
           doc="a * x + y with a of shape (N, C, 1, 1) (SENet forks)")
def convert_axpy(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    xs = b.bottoms(layer)
    if len(xs) != 3:
        raise InvalidModelError(f"needs 3 bottoms (a, x, y), got {len(xs)}")
    a, x, y = xs
    shape = shape_of(x)
    if shape_of(y) != shape or shape_of(a) != tuple(shape[:2]) + (1,) * (len(shape) - 2):
        raise InvalidModelError("bottom shapes must be a: (N, C, 1, 1), x and y: (N, C, H, W)")
    ax = b.node(layer, "Mul", [a, x], shape=shape, part="mul")
    top = b.top_value(layer, 0, shape)
    b.node(layer, "Add", [ax, y], out=top)
    b.bind(layer, [top])


@REGISTRY.register("Concat", emits=("Concat", "Identity"),
           doc="Concat along axis (or the legacy concat_dim)")
def convert_concat(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    p = layer.concat_param
    xs = b.bottoms(layer)
    shape = shape_of(xs[0])
    axis = p.concat_dim if p.HasField("concat_dim") else p.axis
    axis = canonical_axis(axis, len(shape))
    total = 0
    for x in xs:
        s = shape_of(x)
        if len(s) != len(shape) or s[:axis] != shape[:axis] or s[axis + 1:] != shape[axis + 1:]:
            raise InvalidModelError(
                f"bottom shapes {list(shape)} and {list(s)} differ off axis {axis}")
        total += s[axis]
    out_shape = shape[:axis] + (total,) + shape[axis + 1:]
    top = b.top_value(layer, 0, out_shape)
    if len(xs) == 1:
        b.node(layer, "Identity", xs, out=top)
    else:
        b.node(layer, "Concat", xs, {"axis": axis}, out=top)
    b.bind(layer, [top])


@REGISTRY.register("Slice", emits=("Split", "Identity"),
           doc="Split at slice_point (or into equal parts)")
def convert_slice(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    p = layer.slice_param
    (x,) = one_bottom(b, layer)
    shape = shape_of(x)
    axis = p.slice_dim if p.HasField("slice_dim") else p.axis
    axis = canonical_axis(axis, len(shape))
    dim, count = shape[axis], len(layer.top)
    if len(p.slice_point):
        points = [int(v) for v in p.slice_point]
        if len(points) != count - 1:
            raise InvalidModelError(f"{len(points)} slice points for {count} tops")
        bounds = [0] + points + [dim]
        if any(hi <= lo for lo, hi in itertools.pairwise(bounds)):
            raise InvalidModelError(f"slice points {points} are not increasing inside (0, {dim})")
        sizes = [hi - lo for lo, hi in itertools.pairwise(bounds)]
    else:
        if count == 0 or dim % count:
            raise InvalidModelError(
                f"axis {axis} of size {dim} does not split into {count} equal parts")
        sizes = [dim // count] * count
    outs = [b.top_value(layer, i, shape[:axis] + (n,) + shape[axis + 1:])
            for i, n in enumerate(sizes)]
    if count == 1:
        b.node(layer, "Identity", [x], out=outs[0])
    else:
        b.node(layer, "Split", [x], {"axis": axis, "split": sizes}, outputs=outs)
    b.bind(layer, outs)


@REGISTRY.register("Split", emits=("Identity",), doc="Identity copies, one per top")
def convert_split(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    (x,) = one_bottom(b, layer)
    outs = [b.top_value(layer, i, shape_of(x)) for i in range(len(layer.top))]
    for i, out in enumerate(outs):
        if i == 0:
            b.node(layer, "Identity", [x], out=out)
        else:
            b.node(layer, "Identity", [x], out=out, part=f"copy{i}")
    b.bind(layer, outs)


@REGISTRY.register("Silence", emits=(), doc="consumes its bottoms, produces nothing")
def convert_silence(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    b.bottoms(layer)


@REGISTRY.register("Softmax", emits=("Softmax",), doc="Softmax along axis")
def convert_softmax(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    (x,) = one_bottom(b, layer)
    shape = shape_of(x)
    axis = canonical_axis(layer.softmax_param.axis, len(shape))
    top = b.top_value(layer, 0, shape)
    b.node(layer, "Softmax", [x], {"axis": axis}, out=top)
    b.bind(layer, [top])


def _reshape_to(b: CaffeBuilder, layer: pb.LayerParameter, x, out_shape) -> None:
    top = b.top_value(layer, 0, out_shape)
    b.node(layer, "Reshape", [x, b.shape_const(layer, out_shape, "shape")], out=top)
    b.bind(layer, [top])


@REGISTRY.register("Flatten", emits=("Flatten", "Reshape"),
           doc="Flatten (axis 1 to the end) or an equivalent static Reshape")
def convert_flatten(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    p = layer.flatten_param
    (x,) = one_bottom(b, layer)
    shape = shape_of(x)
    rank = len(shape)
    start = canonical_axis(p.axis, rank)
    end = canonical_axis(p.end_axis, rank, "end_axis")
    if end < start:
        raise InvalidModelError(f"end_axis {p.end_axis} comes before axis {p.axis}")
    out_shape = shape[:start] + (int(math.prod(shape[start:end + 1])),) + shape[end + 1:]
    if start == 1 and end == rank - 1:
        top = b.top_value(layer, 0, out_shape)
        b.node(layer, "Flatten", [x], {"axis": 1}, out=top)
        b.bind(layer, [top])
    else:
        _reshape_to(b, layer, x, out_shape)


def caffe_reshape(shape: tuple[int, ...], p: pb.ReshapeParameter) -> tuple[int, ...]:
    """The output shape of Caffe's Reshape layer (0 copies a dim, one -1 is inferred)."""
    rank = len(shape)
    start = p.axis if p.axis >= 0 else rank + p.axis + 1
    if not 0 <= start <= rank:
        raise InvalidModelError(f"axis {p.axis} is out of range for a {rank}-D input")
    end = rank if p.num_axes == -1 else start + p.num_axes
    if p.num_axes < -1 or end > rank:
        raise InvalidModelError(f"num_axes {p.num_axes} does not fit a {rank}-D input")
    spec = [int(d) for d in p.shape.dim]
    new: list[int] = []
    infer = -1
    for i, d in enumerate(spec):
        if d == 0:
            if start + i >= rank:
                raise InvalidModelError(f"dim {i} is 0 but the input has no axis {start + i}")
            new.append(shape[start + i])
        elif d == -1:
            if infer >= 0:
                raise InvalidModelError("more than one -1 in the shape")
            infer = i
            new.append(1)
        elif d < 0:
            raise InvalidModelError(f"invalid dim {d}")
        else:
            new.append(d)
    out = list(shape[:start]) + new + list(shape[end:])
    total = int(math.prod(shape))
    known = int(math.prod(out))
    if infer >= 0:
        if known == 0 or total % known:
            raise InvalidModelError(f"cannot infer -1: {total} values do not fit {spec}")
        out[start + infer] = total // known
    if int(math.prod(out)) != total:
        raise InvalidModelError(
            f"reshape of {list(shape)} ({total} values) to {out} changes the count")
    return tuple(out)


@REGISTRY.register("Reshape", emits=("Reshape",), doc="Reshape to the static shape Caffe computes")
def convert_reshape(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    (x,) = one_bottom(b, layer)
    _reshape_to(b, layer, x, caffe_reshape(shape_of(x), layer.reshape_param))


@REGISTRY.register("Permute", emits=("Transpose", "Identity"),
           doc="Transpose (order, missing axes appended)")
def convert_permute(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    (x,) = one_bottom(b, layer)
    shape = shape_of(x)
    rank = len(shape)
    order = [int(o) for o in layer.permute_param.order]
    if any(o >= rank for o in order) or len(set(order)) != len(order):
        raise InvalidModelError(f"order {order} is not a permutation of {rank} axes")
    perm = order + [a for a in range(rank) if a not in order]
    top = b.top_value(layer, 0, tuple(shape[a] for a in perm))
    if perm == list(range(rank)):
        b.node(layer, "Identity", [x], out=top)
    else:
        b.node(layer, "Transpose", [x], {"perm": perm}, out=top)
    b.bind(layer, [top])


@REGISTRY.register("Crop", emits=("Slice",), converts="always",
           doc="Slice to the second bottom's size at the given offsets")
def convert_crop(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    p = layer.crop_param
    xs = b.bottoms(layer)
    if len(xs) != 2:
        raise InvalidModelError(f"needs 2 bottoms (data, reference), got {len(xs)}")
    shape, ref = shape_of(xs[0]), shape_of(xs[1])
    if len(shape) != len(ref):
        raise InvalidModelError(f"bottoms have ranks {len(shape)} and {len(ref)}")
    axis = canonical_axis(p.axis, len(shape))
    axes = list(range(axis, len(shape)))
    offsets = [int(o) for o in p.offset]
    if len(offsets) == 0:
        offsets = [0] * len(axes)
    elif len(offsets) == 1:
        offsets = offsets * len(axes)
    elif len(offsets) != len(axes):
        raise InvalidModelError(f"{len(offsets)} offsets for {len(axes)} cropped axes")
    for a, off in zip(axes, offsets):
        if off + ref[a] > shape[a]:
            raise InvalidModelError(
                f"crop of axis {a} (offset {off}, size {ref[a]}) exceeds {shape[a]}")
    out_shape = tuple(shape[:axis]) + tuple(ref[axis:])
    top = b.top_value(layer, 0, out_shape)
    attrs = {"starts": offsets, "ends": [o + ref[a] for a, o in zip(axes, offsets)],
             "axes": axes}
    b.node(layer, "Slice", [xs[0]], attrs, out=top)
    b.bind(layer, [top])


@REGISTRY.register("ShuffleChannel", emits=("Reshape", "Transpose"),
           doc="Reshape (N, g, C/g, H, W) -> Transpose -> Reshape")
def convert_shuffle_channel(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    (x,) = one_bottom(b, layer)
    shape = shape_of(x)
    if len(shape) != 4:
        raise InvalidModelError(f"needs a 4-D input, got {list(shape)}")
    n, c, h, w = shape
    g = int(layer.shuffle_channel_param.group)
    if g <= 0 or c % g:
        raise InvalidModelError(f"group {g} does not divide {c} channels")
    split = (n, g, c // g, h, w)
    y = b.node(layer, "Reshape", [x, b.shape_const(layer, split, "split_shape")], shape=split,
               part="split")
    swapped = (n, c // g, g, h, w)
    z = b.node(layer, "Transpose", [y], {"perm": [0, 2, 1, 3, 4]}, shape=swapped, part="swap")
    _reshape_to(b, layer, z, shape)
