"""The SSD layers with an exact core form: Normalize (L2 normalisation with a learnt scale) and
PriorBox (anchor boxes computed from static shapes, a constant). DetectionOutput (NMS) has none.
"""
from __future__ import annotations

import numpy as np

from ...errors import InvalidModelError
from . import caffe_pb2 as pb
from .builder import CaffeBuilder, one_bottom, shape_of
from .registry import REGISTRY
from .weights import BlobSpec


@REGISTRY.register("Normalize", emits=("Mul", "ReduceSum", "Add", "Sqrt", "Div"),
                   converts="never",
                   condition="x / sqrt(sum of x^2 + eps) divides by a tensor computed at run "
                             "time",
                   doc="SSD's L2 normalisation: x / sqrt(sum of squares + eps) * scale, over "
                       "C,H,W (across_spatial) or over C at each position")
def convert_normalize(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    """SSD's Caffe and OpenCV both add eps to the sum of squares, inside the square root, in
    both modes; the scale blob is one value (channel_shared) or one per channel."""
    (x,) = one_bottom(b, layer)
    shape = shape_of(x)
    rank = len(shape)
    if rank < 2:
        raise InvalidModelError("needs an input of rank >= 2")
    p = layer.norm_param
    shared = bool(p.channel_shared)
    channels = shape[1]
    (scale,) = b.weights.blobs(layer, [BlobSpec((1,) if shared else (channels,), "gamma")])
    axes = list(range(1, rank)) if p.across_spatial else [1]
    kept = tuple(1 if a in axes else d for a, d in enumerate(shape))
    square = b.node(layer, "Mul", [x, x], shape=shape, part="square")
    total = b.node(layer, "ReduceSum", [square], {"axes": axes, "keepdims": 1}, shape=kept,
                   part="sum")
    shifted = b.node(layer, "Add", [total, b.const(layer, np.float32(p.eps), "eps")],
                     shape=kept, part="eps")
    norm = b.node(layer, "Sqrt", [shifted], shape=kept, part="norm")
    unit = b.node(layer, "Div", [x, norm], shape=shape, part="unit")
    bshape = (1,) if shared else (1, channels) + (1,) * (rank - 2)
    top = b.top_value(layer, 0, shape)
    b.node(layer, "Mul", [unit, b.const(layer, scale.reshape(bshape), "scale")], out=top)
    b.bind(layer, [top])


@REGISTRY.register("PriorBox", emits=("Identity",), converts="folded",
                   doc="SSD anchor boxes and variances, computed at conversion from the "
                       "static shapes as a constant [1, 2, H*W*priors*4]")
def convert_prior_box(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    xs = b.bottoms(layer)
    if len(xs) != 2:
        raise InvalidModelError(
            f"needs 2 bottoms (feature map, image), "
            f"got {len(xs)}")
    feature, image = (shape_of(x) for x in xs)
    if len(feature) != 4 or len(image) != 4:
        raise InvalidModelError("needs 4-D bottoms")
    boxes = prior_boxes(layer, feature[2], feature[3], image[2], image[3])
    top = b.top_value(layer, 0, boxes.shape)
    b.node(layer, "Identity", [b.const(layer, boxes, "boxes")], out=top)
    b.bind(layer, [top])


def _aspect_ratios(layer: pb.LayerParameter) -> list[np.float32]:
    """Caffe-SSD's list without the implicit 1: each new ratio (and 1/ratio with flip), a
    ratio within 1e-6 of one already listed skipped."""
    p = layer.prior_box_param
    ratios: list[np.float32] = []
    for ar in p.aspect_ratio:
        ar = np.float32(ar)
        if any(abs(float(ar) - float(r)) < 1e-6 for r in [np.float32(1.0), *ratios]):
            continue
        ratios.append(ar)
        if p.flip:
            ratios.append(np.float32(1.0 / float(ar)))
    return ratios


def _box_sizes(layer: pb.LayerParameter) -> list[tuple[np.float32, np.float32]]:
    """(width, height) of each prior of one cell, in Caffe-SSD's order: per min_size, the
    square, the sqrt(min*max) square, then one box per aspect ratio."""
    p = layer.prior_box_param
    if not p.min_size:
        raise InvalidModelError("has no min_size")
    if p.max_size and len(p.max_size) != len(p.min_size):
        raise InvalidModelError(
            f"{len(p.max_size)} max_size for "
            f"{len(p.min_size)} min_size")
    f32 = np.float32
    sizes = []
    for i, given in enumerate(p.min_size):
        # Caffe-SSD, whose models these are, reads each size into an int (a fractional size
        # is truncated; OpenCV keeps the fraction).
        if not given > 0:
            raise InvalidModelError("min_size must be > 0")
        low = f32(int(given))
        sizes.append((low, low))
        if p.max_size:
            if not p.max_size[i] > given:
                raise InvalidModelError(
                    "max_size must exceed min_size")
            high = f32(int(p.max_size[i]))
            side = np.sqrt(low * high, dtype=f32)
            sizes.append((side, side))
        for ar in _aspect_ratios(layer):
            root = np.sqrt(ar, dtype=f32)
            sizes.append((f32(low * root), f32(low / root)))
    return sizes


def _variances(layer: pb.LayerParameter) -> np.ndarray:
    given = [np.float32(v) for v in layer.prior_box_param.variance]
    if not given:
        return np.full(4, 0.1, np.float32)
    if len(given) == 1:
        return np.full(4, given[0], np.float32)
    if len(given) != 4 or any(v <= 0 for v in given):
        raise InvalidModelError(
            "needs 1 or 4 positive variances")
    return np.asarray(given, np.float32)


def _image_and_step(layer: pb.LayerParameter, height: int, width: int,
                    image_h: int, image_w: int) -> tuple[int, int, np.float32, np.float32]:
    p = layer.prior_box_param
    if p.HasField("img_size"):
        image_h = image_w = int(p.img_size)
    elif p.HasField("img_h") or p.HasField("img_w"):
        image_h, image_w = int(p.img_h), int(p.img_w)
    if p.HasField("step"):
        step_h = step_w = np.float32(p.step)
    elif p.HasField("step_h") or p.HasField("step_w"):
        step_h, step_w = np.float32(p.step_h), np.float32(p.step_w)
    else:
        step_h = np.float32(image_h) / np.float32(height)
        step_w = np.float32(image_w) / np.float32(width)
    if image_h <= 0 or image_w <= 0 or step_h <= 0 or step_w <= 0:
        raise InvalidModelError(
            "image size and step must be positive")
    return image_h, image_w, step_h, step_w


def prior_boxes(layer: pb.LayerParameter, height: int, width: int, image_h: int,
                image_w: int) -> np.ndarray:
    """The PriorBox top, [1, 2, height*width*priors*4]: channel 0 the boxes (xmin, ymin,
    xmax, ymax normalised by the image size, clipped to [0, 1] with clip), channel 1 the
    variances. float32 throughout, in OpenCV's order of operations (bit-exact with it;
    Caffe-SSD forms the corners in double, at most one float32 rounding apart)."""
    p = layer.prior_box_param
    f32 = np.float32
    image_h, image_w, step_h, step_w = _image_and_step(layer, height, width, image_h, image_w)
    offset = f32(p.offset)
    sizes = np.asarray(_box_sizes(layer), f32)  # [priors, 2]
    cx = (np.arange(width, dtype=f32) + offset) * step_w  # [W]
    cy = (np.arange(height, dtype=f32) + offset) * step_h  # [H]
    half_w = sizes[:, 0] * f32(0.5)
    half_h = sizes[:, 1] * f32(0.5)
    shape = (height, width, len(sizes))
    cx3 = np.broadcast_to(cx[None, :, None], shape)
    cy3 = np.broadcast_to(cy[:, None, None], shape)
    corners = np.stack([(cx3 - half_w) / f32(image_w), (cy3 - half_h) / f32(image_h),
                        (cx3 + half_w) / f32(image_w), (cy3 + half_h) / f32(image_h)], axis=-1)
    corners = corners.astype(f32).reshape(-1)
    if p.clip:
        corners = np.clip(corners, f32(0.0), f32(1.0))
    variances = np.tile(_variances(layer), corners.size // 4)
    return np.stack([corners, variances]).reshape(1, 2, -1).astype(f32)
