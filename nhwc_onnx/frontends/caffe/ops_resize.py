"""Upsample (nearest, integer factors) and Interp (DeepLab's align-corners bilinear)."""
from __future__ import annotations

from ...errors import InvalidModelError
from . import caffe_pb2 as pb
from .builder import CaffeBuilder, shape_of
from .registry import REGISTRY


def _check_upsample(layer: pb.LayerParameter) -> str | None:
    if len(layer.bottom) != 1:
        return "max-unpooling (Upsample with a mask bottom) has no exact core equivalent"
    return None


@REGISTRY.register("Upsample", check=_check_upsample, emits=("Resize",), converts="when",
           condition="no mask bottom (max-unpooling)",
           doc="Resize nearest (asymmetric, floor) by integer factors")
def convert_upsample(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    p = layer.upsample_param
    (x,) = b.bottoms(layer)
    shape = shape_of(x)
    if len(shape) != 4:
        raise InvalidModelError("needs a 4-D input")
    n, c, h, w = shape
    sh = int(p.scale_h) if p.HasField("scale_h") else int(p.scale)
    sw = int(p.scale_w) if p.HasField("scale_w") else int(p.scale)
    if sh <= 0 or sw <= 0:
        raise InvalidModelError("scale must be positive")
    oh, ow = h * sh, w * sw
    if (p.HasField("upsample_h") and p.upsample_h != oh) or (
            p.HasField("upsample_w") and p.upsample_w != ow):
        raise InvalidModelError(
            f"upsample_h/w {p.upsample_h}x{p.upsample_w} "
            f"is not the input size times the scale ({oh}x{ow})")
    top = b.top_value(layer, 0, (n, c, oh, ow))
    attrs = {"mode": "nearest", "scales": [1.0, 1.0, float(sh), float(sw)],
             "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
    b.node(layer, "Resize", [x], attrs, out=top)
    b.bind(layer, [top])


def _check_interp(layer: pb.LayerParameter) -> str | None:
    p = layer.interp_param
    if p.pad_beg != 0 or p.pad_end != 0:
        return "Interp with pad_beg/pad_end (cropping before resizing) is not supported"
    return None


def _interp_size(size: int, p: pb.InterpParameter) -> int:
    zoom = p.zoom_factor if p.HasField("zoom_factor") else None
    shrink = p.shrink_factor if p.HasField("shrink_factor") else None
    if shrink and zoom:
        out = (size - 1) // shrink + 1
        return out + (out - 1) * (zoom - 1)
    if zoom:
        return size + (size - 1) * (zoom - 1)
    if shrink:
        return (size - 1) // shrink + 1
    return 0


@REGISTRY.register("Interp", check=_check_interp, emits=("Resize",), converts="when",
           condition="the output keeps the input's size (align_corners bilinear resizing has "
                     "no dialect form)",
           doc="Resize linear with align_corners (DeepLab Interp)")
def convert_interp(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    p = layer.interp_param
    xs = b.bottoms(layer)
    if not 1 <= len(xs) <= 2:
        raise InvalidModelError("needs 1 or 2 bottoms")
    shape = shape_of(xs[0])
    if len(shape) != 4:
        raise InvalidModelError("needs a 4-D input")
    n, c, h, w = shape
    if len(xs) == 2:
        oh, ow = shape_of(xs[1])[2:4]
    elif p.height and p.width:
        oh, ow = int(p.height), int(p.width)
    else:
        oh, ow = _interp_size(h, p), _interp_size(w, p)
    if oh <= 0 or ow <= 0:
        raise InvalidModelError(
            "set height and width, zoom_factor or shrink_factor")
    top = b.top_value(layer, 0, (n, c, oh, ow))
    attrs = {"mode": "linear", "sizes": [n, c, oh, ow],
             "coordinate_transformation_mode": "align_corners"}
    b.node(layer, "Resize", [xs[0]], attrs, out=top)
    b.bind(layer, [top])
