"""Resize and Upsample: every form becomes core Resize with per-axis scales or sizes.

Upsample and Resize-10 compute ``asymmetric`` source coordinates; the spec says nearest uses
``floor``. onnxruntime rounds differently when downsampling in those old forms, so a nearest
scale below 1 there is ambiguous and refused.
"""
from __future__ import annotations

import math

import numpy as np
import onnx

from .context import NodeCtx, ints
from .registry import REGISTRY

_COORDINATE_MODES = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                     "tf_half_pixel_for_nn")
_NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _mode(ctx: NodeCtx) -> str:
    mode = ctx.attr("mode", "nearest")
    if mode == "bilinear":
        mode = "linear"
    if mode not in ("nearest", "linear"):
        ctx.refuse(f"mode '{mode}' is not supported (nearest and linear are)")
    return mode


def _legacy(ctx: NodeCtx, scales) -> None:
    """Upsample / Resize-10: asymmetric coordinates, floor for nearest."""
    mode = _mode(ctx)
    scales = _checked_scales(ctx, scales)
    attrs = {"mode": mode, "scales": scales, "coordinate_transformation_mode": "asymmetric"}
    if mode == "nearest":
        if any(s < 1 for s in scales):
            ctx.refuse("nearest downsampling in Upsample / Resize-10 is ambiguous "
                       "(the spec floors, onnxruntime does not)")
        attrs["nearest_mode"] = "floor"
    ctx.emit("Resize", [ctx.require_input(0, "X")], attrs)


@REGISTRY.register("Upsample", emits=("Resize",),
                   condition="opset 7 or later, mode nearest or linear")
def upsample(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Upsample-7 (scales attribute) and -9 (scales input)."""
    if ctx.version < 7:
        ctx.refuse("Upsample before opset 7 (height_scale/width_scale) is not supported")
    if ctx.version < 9:
        scales = ctx.attr("scales")
        if scales is None:
            ctx.refuse("attribute 'scales' is missing")
    else:
        scales = ctx.require_const(1, "scales")
    _legacy(ctx, scales)


@REGISTRY.register("Resize", emits=("Resize",),
                   condition="mode nearest or linear")
def resize(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Resize-10/11/13/18/19 nearest / linear; other attributes judged by their effect.

    cubic_coeff_a and extrapolation_value are ignored outside cubic / tf_crop_and_resize;
    antialias=1 converts when upsampling linear; exclude_outside=1 only with antialiased
    linear; keep_aspect_ratio_policy must be 'stretch'."""
    if ctx.version < 11:
        _legacy(ctx, ctx.require_const(1, "scales"))
        return
    mode = _mode(ctx)
    ctm = ctx.attr("coordinate_transformation_mode", "half_pixel")
    if ctm not in _COORDINATE_MODES:
        ctx.refuse(f"coordinate_transformation_mode '{ctm}' is not supported "
                   f"({', '.join(_COORDINATE_MODES)} are)")
    nearest = ctx.attr("nearest_mode", "round_prefer_floor")
    if mode == "nearest" and nearest not in _NEAREST_MODES:
        ctx.refuse(f"nearest_mode '{nearest}' is not supported ({', '.join(_NEAREST_MODES)} are)")
    scales = ctx.require_const(2, "scales") if ctx.has_input(2) else None
    sizes = ctx.require_const(3, "sizes", batch_at_0=True) if ctx.has_input(3) else None
    if scales is not None and scales.size == 0:
        scales = None
    if sizes is not None and sizes.size == 0:
        sizes = None
    if (scales is None) == (sizes is None):
        ctx.refuse("exactly one of scales and sizes must be given")
    _check_mode_attributes(ctx, mode, scales, sizes)
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
    if mode == "nearest":
        attrs["nearest_mode"] = nearest
    axes = ctx.attr("axes")
    if scales is not None:
        attrs["scales"] = _full_rank(ctx, _checked_scales(ctx, scales), axes, None)
    else:
        wanted = ints(sizes)
        if any(d < 1 for d in wanted):
            raise ctx.invalid_attribute(
                f"output sizes {wanted} must all be >= 1")
        attrs["sizes"] = _full_rank(ctx, wanted, axes, ctx.shape(0))
    ctx.emit("Resize", [ctx.require_input(0, "X")], attrs)


def _check_mode_attributes(ctx: NodeCtx, mode: str, scales, sizes) -> None:
    """Attributes judged by their effect in this mode, not by their presence (PyTorch's
    exporters write cubic_coeff_a, exclude_outside, extrapolation_value,
    keep_aspect_ratio_policy and antialias on every Resize). Only a value that changes the
    result is refused, naming the value that would convert."""
    # cubic_coeff_a weighs cubic taps only; extrapolation_value fills samples outside the
    # crop box of tf_crop_and_resize only: both modes are refused above, so here no-ops.
    ctx.attr("cubic_coeff_a")
    ctx.attr("extrapolation_value")
    antialias = int(ctx.attr("antialias", 0))
    if antialias and mode == "nearest":
        ctx.refuse("antialias=1 is defined for linear and cubic only (runtimes reject it "
                   "with nearest); antialias=0 would convert")
    if antialias and any(s < 1 for s in _effective_scales(ctx, scales, sizes)):
        ctx.refuse("antialias=1 widens the linear filter when downsampling, which has no "
                   "dialect form; antialias=0 would convert")
    # Upsampling linear with antialias is the plain two-tap filter (the spec clamps the
    # filter scale to 1), so antialias=1 is a no-op there.
    if int(ctx.attr("exclude_outside", 0)) and not (mode == "linear" and antialias):
        # Linear's outside tap repeats the edge pixel, but the spec leaves nearest undefined
        # (0/0) and runtimes reject exclude_outside=1 outside cubic / antialiased linear.
        ctx.refuse(f"exclude_outside=1 is defined for cubic and antialiased linear only "
                   f"(mode '{mode}' here); exclude_outside=0 would convert")
    # A policy other than stretch rescales the requested sizes; with scales ONNX shape
    # inference rejects it, so either way only the default converts.
    policy = ctx.attr("keep_aspect_ratio_policy", "stretch")
    if policy != "stretch":
        ctx.refuse(f"keep_aspect_ratio_policy '{policy}' "
                   + ("rescales the requested sizes" if sizes is not None
                      else "is invalid with scales")
                   + "; 'stretch' (the default) would convert")


def _effective_scales(ctx: NodeCtx, scales, sizes) -> list[float]:
    """Per-axis output/input ratios; an unknown input shape with sizes counts as downsampling
    so that antialias is refused rather than guessed."""
    if scales is not None:
        return [float(s) for s in np.asarray(scales, dtype=np.float64).reshape(-1)]
    shape = ctx.shape(0)
    sizes = ints(sizes)
    axes = ctx.attr("axes")
    if shape is None or any(d is None or d < 1 for d in shape):
        return [0.0]
    if axes is not None:
        rank = len(shape)
        shape = tuple(shape[a + rank if a < 0 else a] for a in ints(axes))
    if len(shape) != len(sizes):
        return [0.0]
    return [size / dim for size, dim in zip(sizes, shape)]


def _checked_scales(ctx: NodeCtx, scales) -> list[float]:
    """Scales as floats; zero, negative, infinite or NaN scales are a broken model."""
    try:
        values = [float(s) for s in np.asarray(scales, dtype=np.float64).reshape(-1)]
    except (TypeError, ValueError):
        raise ctx.invalid_attribute(
            "scales are not numbers") from None
    if not values or any(not math.isfinite(s) or s <= 0 for s in values):
        raise ctx.invalid_attribute(
            f"scales {values} must be finite and > 0")
    return values


def _full_rank(ctx: NodeCtx, values: list, axes, shape) -> list:
    """Per-axis values for every axis of X; axes not listed keep scale 1 / their size."""
    if axes is None:
        return values
    rank = ctx.rank(0)
    if rank is None or (shape is None and not isinstance(values[0], float)):
        ctx.refuse("Resize with axes needs the input's static shape")
    axes = [a + rank if a < 0 else a for a in ints(axes)]
    if len(axes) != len(values):
        ctx.refuse("one scale/size per listed axis is required")
    full = [1.0] * rank if isinstance(values[0], float) else [int(d) for d in shape]
    for axis, value in zip(axes, values):
        full[axis] = value
    return full
