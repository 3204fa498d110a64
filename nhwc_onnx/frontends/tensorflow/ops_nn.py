"""Convolutions, pooling, batch norm, bias, resize and block rearrangements."""
from __future__ import annotations

from typing import Any

import numpy as np

from ...errors import InvalidModelError
from ...ir import Value
from ..lrn import channel_window_band
from .context import Refusal, TFContext
from .registry import REGISTRY
from .tfnodes import TFNode

_PADDING = {"SAME": "SAME_UPPER", "VALID": "VALID"}


def data_format(ctx: TFContext) -> str:
    fmt = ctx.attrs.str("data_format", "NHWC") or "NHWC"
    if fmt not in ("NHWC", "NCHW"):
        raise Refusal(f"data_format '{fmt}' is not supported (only NHWC and NCHW)")
    return fmt


MAX_WINDOW = (1 << 31) - 1  # kernel/stride/dilation entries beyond int32 are no real model


def hw(values: list, fmt: str, name: str) -> list[int]:
    """The H and W entries of a 4-long TF attribute list (strides, ksize, dilations)."""
    if len(values) != 4:
        raise Refusal(f"attribute '{name}' has {len(values)} entries, expected 4")
    h, w, n, c = (1, 2, 0, 3) if fmt == "NHWC" else (2, 3, 0, 1)
    if any(int(v) < 1 for v in values):
        raise InvalidModelError(f"attribute '{name}' {list(values)} has an entry below 1")
    if any(int(v) > MAX_WINDOW for v in values):
        raise InvalidModelError(f"attribute '{name}' {list(values)} has an entry above "
                                f"{MAX_WINDOW}; refused as absurd")
    if values[n] != 1 or values[c] != 1:
        raise Refusal(f"attribute '{name}' {values} moves along the batch or channel axis")
    return [int(values[h]), int(values[w])]


def padding_attrs(ctx: TFContext, fmt: str) -> dict:
    padding = ctx.attrs.str("padding", "VALID")
    if padding in _PADDING:
        return {"auto_pad": _PADDING[padding]}
    if padding == "EXPLICIT":
        flat = ctx.attrs.ints("explicit_paddings", [])
        if len(flat) != 8:
            raise Refusal(f"explicit_paddings has {len(flat)} entries, expected 8")
        pairs = [flat[0:2], flat[2:4], flat[4:6], flat[6:8]]
        h, w, n, c = (1, 2, 0, 3) if fmt == "NHWC" else (2, 3, 0, 1)
        if any(pairs[n]) or any(pairs[c]):
            raise Refusal("explicit padding on the batch or channel axis")
        return {"auto_pad": "NOTSET", "pads": [pairs[h][0], pairs[w][0], pairs[h][1], pairs[w][1]]}
    raise Refusal(f"padding '{padding}' is not supported (SAME, VALID and EXPLICIT are)")


def _spatial_attrs(ctx: TFContext, fmt: str) -> dict:
    attrs = {"strides": hw(ctx.attrs.ints("strides", [1, 1, 1, 1]), fmt, "strides"),
             "dilations": hw(ctx.attrs.ints("dilations", [1, 1, 1, 1]), fmt, "dilations"),
             "data_format": fmt}
    attrs.update(padding_attrs(ctx, fmt))
    return attrs


def _filter_shape(ctx: TFContext, index: int) -> tuple:
    shape = ctx.shape(index)
    if shape is None or len(shape) != 4 or not all(isinstance(d, int) for d in shape):
        raise Refusal(f"the filter's shape must be a known 4-D shape (found {shape})")
    return shape


@REGISTRY.register("Conv2D", emits=("Conv",))
def convert_conv2d(ctx: TFContext, node: TFNode) -> list[Value]:
    """Conv with the HWIO filter; grouped when the input has a multiple of its in-channels."""
    fmt = data_format(ctx)
    ctx.check_same_dtype(0, 1)
    kh, kw, cin, _ = _filter_shape(ctx, 1)
    attrs = {"kernel_shape": [kh, kw], "weight_layout": "HWIO", **_spatial_attrs(ctx, fmt)}
    x_shape = ctx.shape(0)
    c = None if x_shape is None or len(x_shape) != 4 else x_shape[3 if fmt == "NHWC" else 1]
    if isinstance(c, int) and c != cin:
        if c % cin:
            raise Refusal(f"input has {c} channels, the filter {cin}: not a whole group count")
        attrs["group"] = c // cin
    return [ctx.emit1("Conv", [ctx.input(0), ctx.input(1)], attrs)]


@REGISTRY.register("DepthwiseConv2dNative", emits=("Conv", "Reshape"))
def convert_depthwise(ctx: TFContext, node: TFNode) -> list[Value]:
    """Conv with group=C; the (kH,kW,C,mult) filter read as HWIO (kH,kW,1,C*mult)."""
    fmt = data_format(ctx)
    ctx.check_same_dtype(0, 1)
    kh, kw, c, mult = _filter_shape(ctx, 1)
    target = (kh, kw, 1, c * mult)
    w = ctx.const(1)
    if w is not None:
        weight = ctx.constant(np.reshape(w, target), "filter_hwio")
    else:
        weight = ctx.emit1("Reshape", [ctx.input(1), ctx.int64(target, "filter_shape")],
                           suffix="filter_hwio")
    attrs = {"kernel_shape": [kh, kw], "weight_layout": "HWIO", "group": c,
             **_spatial_attrs(ctx, fmt)}
    return [ctx.emit1("Conv", [ctx.input(0), weight], attrs)]


@REGISTRY.register("Conv2DBackpropInput",
                   emits=("ConvTranspose",), condition="SAME or VALID padding")
def convert_conv2d_backprop_input(ctx: TFContext, node: TFNode) -> list[Value]:
    """ConvTranspose (HWOI filter) with the output size taken from input_sizes."""
    fmt = data_format(ctx)
    sizes = [int(v) for v in ctx.need_const(0, "input_sizes").reshape(-1)]
    if len(sizes) != 4:
        raise Refusal(f"input_sizes has {len(sizes)} entries, expected 4")
    ctx.check_same_dtype(1, 2)
    kh, kw, _, _ = _filter_shape(ctx, 1)
    attrs = _spatial_attrs(ctx, fmt)
    if attrs["auto_pad"] == "NOTSET":
        raise Refusal("EXPLICIT padding on a transposed convolution is not supported; SAME or "
                      "VALID would convert")
    out_hw = [sizes[1], sizes[2]] if fmt == "NHWC" else [sizes[2], sizes[3]]
    attrs.update({"kernel_shape": [kh, kw], "weight_layout": "HWOI", "output_shape": out_hw})
    return [ctx.emit1("ConvTranspose", [ctx.input(2), ctx.input(1)], attrs)]


@REGISTRY.register("BiasAdd", "BiasAddV1", emits=("Add", "Reshape"),
                   converts="always")  # per channel
def convert_bias_add(ctx: TFContext, node: TFNode) -> list[Value]:
    """Add of the bias vector on the channel axis."""
    fmt = data_format(ctx) if node.op == "BiasAdd" else "NHWC"
    ctx.check_same_dtype(0, 1)
    bias = ctx.input(1)
    if fmt == "NCHW":
        rank = ctx.rank(0, "BiasAdd with NCHW")
        target = (-1,) + (1,) * (rank - 2)
        b = ctx.const(1)
        if b is not None:
            bias = ctx.constant(np.reshape(b, target), "bias")
        else:
            bias = ctx.emit1("Reshape", [bias, ctx.int64(target, "bias_shape")], suffix="bias")
    return [ctx.emit1("Add", [ctx.input(0), bias])]


@REGISTRY.register("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3",
                   emits=("BatchNormalization",), condition="inference: is_training false")
def convert_fused_batch_norm(ctx: TFContext, node: TFNode) -> list[Value]:
    """Inference BatchNormalization on the data_format's channel axis."""
    fmt = data_format(ctx)
    if ctx.attrs.bool("is_training", False):
        raise Refusal("is_training=True computes batch statistics: not an inference graph")
    axis = 1 if fmt == "NCHW" else ctx.rank(0, "FusedBatchNorm") - 1
    x, scale, offset, mean, var = (ctx.input(i) for i in range(5))
    y = ctx.emit1("BatchNormalization", [x, scale, offset, mean, var],
                  {"epsilon": float(ctx.attrs.float("epsilon", 1e-4)), "axis": axis})
    return [y, mean, var, mean, var, mean]


@REGISTRY.register("MaxPool", "AvgPool", "MaxPoolV2", emits={
    "MaxPool": ("MaxPool",), "MaxPoolV2": ("MaxPool",), "AvgPool": ("AveragePool",)})
def convert_pool(ctx: TFContext, node: TFNode) -> list[Value]:
    """MaxPool / AveragePool; SAME averages divide by the real cells (count_include_pad=0)."""
    fmt = data_format(ctx)
    if node.op == "MaxPoolV2":
        ksize = [int(v) for v in ctx.need_const(1, "ksize").reshape(-1)]
        strides = [int(v) for v in ctx.need_const(2, "strides").reshape(-1)]
    else:
        ksize = ctx.attrs.ints("ksize", [])
        strides = ctx.attrs.ints("strides", [1, 1, 1, 1])
    attrs = {"kernel_shape": hw(ksize, fmt, "ksize"), "strides": hw(strides, fmt, "strides"),
             "data_format": fmt, **padding_attrs(ctx, fmt)}
    if node.op == "AvgPool":
        attrs["count_include_pad"] = 0
        return [ctx.emit1("AveragePool", [ctx.input(0)], attrs)]
    return [ctx.emit1("MaxPool", [ctx.input(0)], attrs)]


@REGISTRY.register("ResizeBilinear", "ResizeNearestNeighbor", emits=("Resize",))
def convert_resize(ctx: TFContext, node: TFNode) -> list[Value]:
    """Resize to a constant size with TF's exact coordinate rule."""
    size = [int(v) for v in ctx.need_const(1, "size").reshape(-1)]
    shape = ctx.static_shape(0, "Resize")
    if len(size) != 2 or len(shape) != 4:
        raise Refusal("expects a 4-D NHWC image and a 2-element size")
    align = bool(ctx.attrs.bool("align_corners", False))
    half = bool(ctx.attrs.bool("half_pixel_centers", False))
    if align and half:
        raise Refusal("align_corners and half_pixel_centers are both set")
    attrs: dict[str, Any] = {"sizes": [shape[0], size[0], size[1], shape[3]]}
    if node.op == "ResizeBilinear":
        attrs["mode"] = "linear"
        attrs["coordinate_transformation_mode"] = (
            "align_corners" if align else "half_pixel" if half else "asymmetric")
    else:
        attrs["mode"] = "nearest"
        if align:
            # TF rounds half away from zero; coordinates are non-negative here.
            attrs.update(coordinate_transformation_mode="align_corners",
                         nearest_mode="round_prefer_ceil")
        elif half:
            attrs.update(coordinate_transformation_mode="tf_half_pixel_for_nn",
                         nearest_mode="floor")
        else:
            attrs.update(coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    return [ctx.emit1("Resize", [ctx.input(0)], attrs)]


@REGISTRY.register("SpaceToDepth", "DepthToSpace", emits={
    "SpaceToDepth": ("SpaceToDepth",), "DepthToSpace": ("DepthToSpace",)})
def convert_block_rearrange(ctx: TFContext, node: TFNode) -> list[Value]:
    """SpaceToDepth / DepthToSpace (TF's is mode DCR)."""
    fmt = data_format(ctx)
    attrs: dict[str, Any] = {"blocksize": int(ctx.attrs.int("block_size", 0)),
                             "data_format": fmt}
    if attrs["blocksize"] < 2:
        raise Refusal(f"block_size {attrs['blocksize']} is not >= 2")
    if node.op == "DepthToSpace":
        attrs["mode"] = "DCR"
    return [ctx.emit1(node.op, [ctx.input(0)], attrs)]


@REGISTRY.register("Softmax", "LogSoftmax", emits={"Softmax": ("Softmax",),
                                                   "LogSoftmax": ("LogSoftmax",)})
def convert_softmax(ctx: TFContext, node: TFNode) -> list[Value]:
    """Softmax over the last axis."""
    return [ctx.emit1(node.op, [ctx.input(0)], {"axis": -1})]


@REGISTRY.register("LRN", emits=("Mul", "Conv", "Add", "Pow", "Div"), converts="never",
                   condition="x / (bias + alpha * window sum of x^2)^beta divides by a tensor "
                             "computed at run time")
def convert_lrn(ctx: TFContext, node: TFNode) -> list[Value]:
    """Local response normalisation over the last axis (channels), as core ops: the sum of
    squares over [c - depth_radius, c + depth_radius] is a 1x1 convolution with a banded
    weight, then x / (bias + alpha * sum)^beta (TensorFlow does not divide alpha by the
    window's size, ONNX and Caffe do)."""
    shape = ctx.static_shape(0, "LRN's window over channels")
    if len(shape) != 4:
        raise InvalidModelError(f"LRN needs a 4-D input, found shape {list(shape)}")
    radius = ctx.attrs.int("depth_radius", 5)
    if radius < 0:
        raise InvalidModelError(f"LRN's depth_radius {radius} is negative")
    x = ctx.input(0)
    squared = ctx.emit1("Mul", [x, x], suffix="square")
    band = channel_window_band(int(shape[3]), radius, radius).transpose(2, 3, 1, 0)
    summed = ctx.emit1("Conv", [squared, ctx.constant(band, "band")], {
        "kernel_shape": [1, 1], "strides": [1, 1], "dilations": [1, 1], "group": 1,
        "pads": [0, 0, 0, 0], "auto_pad": "NOTSET", "data_format": "NHWC",
        "weight_layout": "HWIO"}, suffix="window_sum")
    scaled = ctx.emit1("Mul", [summed, ctx.constant(
        np.float32(ctx.attrs.float("alpha", 1.0)), "alpha")], suffix="scale")
    shifted = ctx.emit1("Add", [scaled, ctx.constant(
        np.float32(ctx.attrs.float("bias", 1.0)), "bias")], suffix="bias")
    denom = ctx.emit1("Pow", [shifted, ctx.constant(
        np.float32(ctx.attrs.float("beta", 0.5)), "beta")], suffix="pow")
    return [ctx.emit1("Div", [x, denom])]
