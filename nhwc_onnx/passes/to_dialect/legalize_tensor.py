"""Legalisation of data-movement ops: broadcasting, Split, Pad modes, Tile, Expand, Resize,
DepthToSpace and the reductions the dialect lacks, each as an exact dialect subgraph.

Broadcasting replicates values, so it is exact: a size-1 axis becomes UpSampling2D "nearest"
with an integer factor (source index floor(dst / factor) = 0), a constant is materialised.
"""
from __future__ import annotations

from math import floor, prod
from typing import TYPE_CHECKING

import numpy as np

from ...ir import DIALECT, Graph, Node, Value
from ...schemas.base import attr
from ..base import PassContext
from ..rewrite import become, const, const_of, dims, emit, positive_axis, present, refuse
from . import rounding

if TYPE_CHECKING:  # fractions (with decimal) is slow to import; only Resize needs it
    from fractions import Fraction


def _shape_const(graph: Graph, shape, name: str) -> Value:
    return const(graph, np.array(list(shape), np.int64), name, np.int64)


def broadcast_to(graph: Graph, v: Value, out: tuple, name: str, max_bytes: int,
                 into: Node | None = None) -> Value | None:
    """``v`` replicated to ``out`` exactly (None when impossible); ``into`` becomes the last op."""
    shape = tuple(dims(v))
    if shape == tuple(out) and into is None:
        if v.is_const and v.dtype != "float32":
            return const(graph, v.const, name)
        return v
    if v.is_const:
        try:
            arr = np.broadcast_to(np.asarray(v.const), out)
        except ValueError:
            return None
        if arr.size * 4 > max_bytes:
            return None
        c = const(graph, arr, f"{name}/broadcast")
        if into is not None:
            become(into, "Reshape", [c, _shape_const(graph, out, f"{into.name}/shape")])
        return c
    if len(shape) > len(out):
        return None
    aligned = (1,) * (len(out) - len(shape)) + shape
    sizes = []
    for d_in, d_out in zip(aligned, out):
        if d_in == d_out:
            sizes.append(1)
        elif d_in == 1:
            sizes.append(int(d_out))
        else:
            return None
    if aligned != shape:
        v = emit(graph, "Reshape", [v, _shape_const(graph, aligned, f"{name}/rank")], None,
                 f"{name}/rank", aligned)
    attrs = {"size": sizes, "mode": "nearest"}
    if into is not None:
        become(into, "UpSampling2D", [v], attrs)
        return into.output
    return emit(graph, "UpSampling2D", [v], attrs, f"{name}/broadcast", out)


def split(graph: Graph, node: Node, ctx: PassContext) -> bool:
    x = present(node.input(0))
    axis = positive_axis(int(attr(node, "axis")), len(dims(x)))
    sizes = [int(s) for s in node.attrs["split"]]
    if sum(sizes) != dims(x)[axis] or len(sizes) != len(node.outputs):
        return refuse(ctx, node, f"split sizes {sizes} do not cover axis {axis} of "
                      f"{tuple(dims(x))}")
    outputs = list(node.outputs)
    used_empty = [i for i, (size, out) in enumerate(zip(sizes, outputs))
                  if size == 0 and (out.uses() or out in graph.outputs)]
    if used_empty:
        return refuse(ctx, node, f"split sizes {sizes}: the empty piece(s) {used_empty} are "
                      "read, and empty tensors have no dialect form")
    graph.remove_node(node)
    start = 0
    for i, (size, out) in enumerate(zip(sizes, outputs)):
        if size == 0:
            continue  # an empty piece nobody reads
        graph.make_node("Slice", [x], {"starts": [start], "ends": [start + size], "axes": [axis]},
                        name=f"{node.name}/slice{i}", outputs=[out], domain=DIALECT)
        start += size
    return True


def _slice_one(graph: Graph, x: Value, axis: int, index: int, name: str) -> Value:
    shape = list(dims(x))
    shape[axis] = 1
    return emit(graph, "Slice", [x], {"starts": [index], "ends": [index + 1], "axes": [axis]},
                name, shape)


def _pad_pieces(graph: Graph, x: Value, axis: int, begin: int, end: int, mode: str,
                value: float, name: str) -> tuple[list[Value], list[Value]] | None:
    d = dims(x)[axis]
    if mode == "constant":
        def block(n: int, where: str) -> list[Value]:
            shape = list(dims(x))
            shape[axis] = n
            return [const(graph, np.full(shape, value), f"{name}/{where}")] if n else []
        return block(begin, "begin"), block(end, "end")
    if mode == "edge":
        first = [_slice_one(graph, x, axis, 0, f"{name}/first")] if begin else []
        last = [_slice_one(graph, x, axis, d - 1, f"{name}/last")] if end else []
        return first * begin, last * end
    # reflect mirrors around the border cell, symmetric (TF MirrorPad) repeats it first
    edge = 1 if mode == "symmetric" else 0
    if begin > d - 1 + edge or end > d - 1 + edge:
        return None  # the mirrored cells must exist
    head = [_slice_one(graph, x, axis, i, f"{name}/r{i}")
            for i in range(begin - edge, -edge, -1)]
    tail = [_slice_one(graph, x, axis, i, f"{name}/r{i}")
            for i in range(d - 2 + edge, d - 2 + edge - end, -1)]
    return head, tail


def pad(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """Edge / reflect / non-zero constant padding as Concat of Slices and constant blocks."""
    x = present(node.input(0))
    rank = len(dims(x))
    pads = [int(p) for p in node.attrs["pads"]]
    mode = attr(node, "mode")
    value = float(attr(node, "value"))
    if any(p < 0 for p in pads):
        return refuse(ctx, node, f"negative pads {pads} with mode {mode}")
    axes = [a for a in range(rank) if pads[a] or pads[a + rank]]
    for i, axis in enumerate(axes):
        pieces = _pad_pieces(graph, x, axis, pads[axis], pads[axis + rank], mode, value,
                             f"{node.name}/axis{axis}")
        if pieces is None:
            limit = "" if mode == "symmetric" else " - 1"
            return refuse(ctx, node, f"{mode} padding {pads} exceeds the axis size "
                          f"{dims(x)[axis]}{limit}")
        inputs = [*pieces[0], x, *pieces[1]]
        if i == len(axes) - 1:
            become(node, "Concat", inputs, {"axis": axis})
            return True
        shape = list(dims(x))
        shape[axis] += pads[axis] + pads[axis + rank]
        x = emit(graph, "Concat", inputs, {"axis": axis}, f"{node.name}/axis{axis}", shape)
    become(node, "Reshape", [x, _shape_const(graph, dims(x), f"{node.name}/shape")])
    return True


def tile(graph: Graph, node: Node, ctx: PassContext) -> bool:
    x = present(node.input(0))
    reps = const_of(node.input(1))
    if reps is None or reps.size != len(dims(x)):
        return refuse(ctx, node, "repeats must be a constant with one value per axis")
    axes = [a for a, r in enumerate(reps.tolist()) if int(r) != 1]
    if not axes:
        become(node, "Reshape", [x, _shape_const(graph, dims(x), f"{node.name}/shape")])
        return True
    for i, axis in enumerate(axes):
        copies = _copies(graph, x, axis, int(reps[axis]), f"{node.name}/axis{axis}")
        if i == len(axes) - 1:
            become(node, "Concat", copies, {"axis": axis})
            return True
        shape = list(dims(x))
        shape[axis] *= int(reps[axis])
        x = emit(graph, "Concat", copies, {"axis": axis}, f"{node.name}/axis{axis}", shape)
    return True


DIRECT_COPIES = 16  # up to this many repeats, one Concat reads x that many times


def _copies(graph: Graph, x: Value, axis: int, r: int, name: str) -> list[Value]:
    """Pieces whose concatenation along ``axis`` is x repeated r times. Large r (a Tile by
    2^20) uses doubling: x, xx, xxxx ... by binary digits of r, so O(log r) nodes instead of
    a Concat with r inputs; every piece is copies of x, so any grouping is the same data."""
    if r <= DIRECT_COPIES:
        return [x] * r
    pieces, piece, count = [], x, 1
    while count <= r:
        if r & count:
            pieces.append(piece)
        if 2 * count <= r:
            shape = list(dims(piece))
            shape[axis] *= 2
            piece = emit(graph, "Concat", [piece, piece], {"axis": axis},
                         f"{name}/x{2 * count}", shape)
        count *= 2
    return pieces


def expand(graph: Graph, node: Node, ctx: PassContext) -> bool:
    out = tuple(dims(node.output))
    if broadcast_to(graph, present(node.input(0)), out, node.name, 16 << 20, into=node) is None:
        return refuse(ctx, node, f"cannot replicate {tuple(dims(node.input(0)))} to {out}")
    return True


def _coordinate(mode: str, d: int, scale: Fraction, n: int, m: int) -> Fraction:
    from fractions import Fraction

    if mode == "asymmetric":
        return d / scale
    if mode == "align_corners":
        return Fraction(d * (n - 1), m - 1) if m > 1 else Fraction(0)
    if mode == "tf_half_pixel_for_nn":
        return (d + Fraction(1, 2)) / scale
    if mode == "pytorch_half_pixel" and m == 1:
        return Fraction(0)
    return (d + Fraction(1, 2)) / scale - Fraction(1, 2)  # half_pixel, pytorch_half_pixel


def _nearest(x: Fraction, rule: str) -> int:
    from fractions import Fraction

    if rule == "floor":
        return floor(x)
    if rule == "ceil":
        return -floor(-x)
    frac = x - floor(x)
    if frac == Fraction(1, 2):
        return floor(x) if rule == "round_prefer_floor" else floor(x) + 1
    return floor(x + Fraction(1, 2))


MAX_CHECKED_CELLS = 1 << 16  # output cells compared one by one when no shortcut applies


def _nearest_mismatch(coord: str, rule: str, scale: Fraction, n: int, m: int) -> int | None:
    """First output index whose nearest source differs from UpSampling2D's ``d // f``
    (None: none does; -1: too many cells to check one by one).

    Shortcut when the scale is exactly the integer factor f = m / n and the coordinate map
    is ``(d + a) / f - b``: then source(d + f) = source(d) + 1, so the offset
    source(d) - d // f depends only on d mod f and never decreases within a block (the map
    and the rounding are monotone). All offsets are 0 iff those of d = 0 and d = f - 1 are;
    a non-zero offset reads a neighbouring block in block 1 or block n - 2 (n >= 2)."""
    factor = m // n
    if n == 1:
        return None  # every output reads the only source cell, as UpSampling2D does
    if scale == factor and coord != "align_corners":
        for d in (0, factor - 1):
            if _nearest(_coordinate(coord, d, scale, n, m), rule) != 0:
                # the offset of residue d shows unclamped in block 1 or in block n - 2
                for block in (1, n - 2):
                    index = block * factor + d
                    src = min(max(_nearest(_coordinate(coord, index, scale, n, m), rule), 0),
                              n - 1)
                    if src != block:
                        return index
                return d  # pragma: no cover - a non-zero offset always shows in one of them
        return None
    if m > MAX_CHECKED_CELLS:
        return -1
    for d in range(m):
        src = min(max(_nearest(_coordinate(coord, d, scale, n, m), rule), 0), n - 1)
        if src != d // factor:
            return d
    return None


def resize(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """Resize equal to UpSampling2D: integer factors and the same source cells."""
    from fractions import Fraction

    x = present(node.input(0))
    shape, out = tuple(dims(x)), tuple(dims(node.output))
    mode = attr(node, "mode")
    coord = attr(node, "coordinate_transformation_mode")
    rule = attr(node, "nearest_mode")
    given = node.attrs.get("scales")
    sizes = []
    for axis, (n, m) in enumerate(zip(shape, out)):
        if m % n:
            return refuse(ctx, node, f"axis {axis}: {n} -> {m} is not an integer factor")
        sizes.append(m // n)
        scale = Fraction(given[axis]).limit_denominator(1 << 20) if given else Fraction(m, n)
        if m == n and scale == 1:
            continue
        if mode == "nearest":
            bad = _nearest_mismatch(coord, rule, scale, n, m)
            if bad == -1:
                return refuse(ctx, node, f"nearest resize ({coord}) of axis {axis} from {n} to "
                              f"{m}: too many output cells to prove equal to UpSampling2D")
            if bad is not None:
                src = min(max(_nearest(_coordinate(coord, bad, scale, n, m), rule), 0), n - 1)
                return refuse(ctx, node, f"nearest resize ({coord}, {rule}) reads source "
                              f"{src} for output {bad} on axis {axis}; UpSampling2D reads "
                              f"{bad // sizes[-1]}")
        elif coord not in ("half_pixel", "pytorch_half_pixel") or scale != sizes[-1]:
            return refuse(ctx, node, f"linear resize with {coord} and scale {float(scale)} on "
                          f"axis {axis}: only half-pixel bilinear with integer factors equals "
                          "UpSampling2D linear")
    if mode == "linear" and (len(shape) != 4 or sizes[0] != 1 or sizes[3] != 1):
        return refuse(ctx, node, f"linear resize factors {sizes} are not [1, sH, sW, 1]")
    become(node, "UpSampling2D", [x], {"size": sizes, "mode": mode})
    return True


def depth_to_space(graph: Graph, node: Node, ctx: PassContext) -> bool:
    if attr(node, "data_format") != "NHWC":
        return refuse(ctx, node, "data_format is not NHWC after layout conversion")
    x = present(node.input(0))
    n, h, w, c = dims(x)
    bs = int(node.attrs["blocksize"])
    cc = c // (bs * bs)
    if attr(node, "mode") == "DCR":  # channel index (bi*bs + bj)*C' + c
        split, perm = (n, h, w, bs, bs, cc), [0, 1, 3, 2, 4, 5]
    else:  # CRD: channel index c*bs*bs + bi*bs + bj
        split, perm = (n, h, w, cc, bs, bs), [0, 1, 4, 2, 5, 3]
    blocks = emit(graph, "Reshape", [x, _shape_const(graph, split, f"{node.name}/split")], None,
                  f"{node.name}/blocks", split)
    moved_shape = [split[p] for p in perm]
    moved = emit(graph, "Transpose", [blocks], {"perm": perm}, f"{node.name}/move", moved_shape)
    become(node, "Reshape", [moved, _shape_const(graph, node.output.shape, f"{node.name}/shape")])
    return True


def reduce(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """ReduceMax/Min over H, W -> global pool; ReduceSum = ReduceMean * n for n a power of 2."""
    x = present(node.input(0))
    rank = len(dims(x))
    axes = node.attrs.get("axes")
    axes = sorted({positive_axis(int(a), rank) for a in axes}) if axes else list(range(rank))
    keep = int(attr(node, "keepdims"))
    out = dims(node.output)
    if not axes:  # a scalar: reducing no axis leaves it as it is
        become(node, "Reshape", [x, _shape_const(graph, out, f"{node.name}/shape")])
        return True
    if node.op == "ReduceSum":
        count = prod(dims(x)[a] for a in axes)
        exact = not count & (count - 1)  # dividing and multiplying by 2^k is bit-exact
        if not exact and rounding.strict(ctx):
            return refuse(ctx, node, rounding.refusal("reduce_sum_scale"))
        mean = emit(graph, "ReduceMean", [x], {"axes": axes, "keepdims": keep},
                    f"{node.name}/mean", out)
        become(node, "Scale", [mean], {"scale": float(count)})
        if not exact:
            rounding.record(ctx, node, "reduce_sum_scale", f"{count} cells")
        return True
    if 0 in axes and dims(x)[0] != 1 and any("batch_symbol" in v.meta for v in graph.inputs):
        return refuse(ctx, node, f"{node.op} over axes {axes} of {tuple(dims(x))} reduces the "
                      "batch axis, which a symbolic batch keeps per sample: convert with "
                      "--batch N for a fixed batch")
    src = x if node.op == "ReduceMax" else emit(graph, "Scale", [x], {"scale": -1.0},
                                               f"{node.name}/neg", dims(x))
    if rank == 4 and axes == [1, 2]:
        pooled_shape = (dims(x)[0], 1, 1, dims(x)[3])
        pooled = emit(graph, "GlobalMaxPool", [src], None, f"{node.name}/pool", pooled_shape)
    else:
        pooled, pooled_shape = _max_over_blocks(graph, node, src, axes)
    if node.op == "ReduceMin":
        pooled = emit(graph, "Scale", [pooled], {"scale": -1.0}, f"{node.name}/back",
                      pooled_shape)
    become(node, "Reshape", [pooled, _shape_const(graph, out, f"{node.name}/shape")])
    return True


def _max_over_blocks(graph: Graph, node: Node, x: Value, axes: list[int]
                     ) -> tuple[Value, tuple]:
    """The max of ``x`` over ``axes`` as one MaxPool per run of reduced axes (adjacent once
    size-1 axes, which hold no data, are skipped): the tensor is reshaped (the same bytes) to
    (batch, before, run, after), or (1, 1, run, after) for a run that starts at the batch, so
    that a VALID MaxPool with a 1 x run window and stride 1 takes the max of each run. Max is
    exact in any order, so the runs reduce one after the other. Returns the last result (in
    the last run's grid; the caller reshapes it) and its shape."""
    sizes = list(dims(x))
    reduced = set(axes)
    runs: list[list[int]] = []
    inside = False
    for a in (a for a in range(len(sizes)) if sizes[a] != 1):
        if a in reduced and inside:
            runs[-1].append(a)
        elif a in reduced:
            runs.append([a])
        inside = a in reduced
    current = x
    for i, run in enumerate(runs):
        first, last = run[0], run[-1]
        block, after = prod(sizes[first:last + 1]), prod(sizes[last + 1:])
        grid = (sizes[0], prod(sizes[1:first]), block, after) if first else (1, 1, block, after)
        current = emit(graph, "Reshape", [current, _shape_const(
            graph, grid, f"{node.name}/run{i}_shape")], None, f"{node.name}/run{i}", grid)
        current = emit(graph, "MaxPool", [current], {
            "kernel_shape": [1, block], "strides": [1, 1], "pads": "VALID"},
            f"{node.name}/run{i}_max", (*grid[:2], 1, after))
        sizes[first:last + 1] = [1] * (last + 1 - first)
    return current, tuple(dims(current))


def gather(graph: Graph, node: Node, ctx: PassContext) -> bool:
    """Gather with constant indices: one Slice per index (a Concat of them), then a Reshape
    when the indices are a scalar (the axis disappears)."""
    x, idx = present(node.input(0)), const_of(node.input(1))
    if idx is None or idx.dtype.kind not in "iu" or idx.ndim > 1 or x.is_const:
        return refuse(ctx, node, "indices must be a constant scalar or 1-D integer list")
    axis = positive_axis(int(attr(node, "axis")), len(dims(x)))
    dim = dims(x)[axis]
    picks = [int(i) + dim if int(i) < 0 else int(i) for i in idx.reshape(-1)]
    if not picks or any(not 0 <= i < dim for i in picks):
        return refuse(ctx, node, f"indices {idx.tolist()} out of range for axis size {dim}")
    pieces = [_slice_one(graph, x, axis, i, f"{node.name}/at{i}") for i in picks]
    if idx.ndim == 1 and len(pieces) > 1:
        become(node, "Concat", pieces, {"axis": axis})
        return True
    become(node, "Reshape", [pieces[0], _shape_const(graph, node.output.shape,
                                                     f"{node.name}/shape")])
    return True
