"""BatchNorm, Scale and Bias."""
from __future__ import annotations

import numpy as np

from ...errors import InvalidModelError
from ...ir import Value
from ..lrn import channel_window_band
from . import caffe_pb2 as pb
from .builder import CaffeBuilder, canonical_axis, one_bottom, shape_of
from .registry import REGISTRY
from .weights import BlobSpec


@REGISTRY.register("BatchNorm", emits=("BatchNormalization",), converts="when",
           condition="use_global_stats (the default at test time): batch statistics have no "
                     "dialect form",
           doc="BatchNormalization with stored mean/var divided by the scale factor; "
               "use_global_stats: false normalises with the batch's own statistics")
def convert_batchnorm(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    (x,) = one_bottom(b, layer)
    shape = shape_of(x)
    if len(shape) < 2:
        raise InvalidModelError("needs an input of rank >= 2")
    c = shape[1]
    mean, var, factor = b.weights.blobs(
        layer, [BlobSpec((c,), "mean"), BlobSpec((c,), "var"), BlobSpec((1,), "scale_factor")])
    p = layer.batch_norm_param
    if p.HasField("use_global_stats") and not p.use_global_stats:
        _batch_statistics(b, layer, x, shape)
        return
    # Caffe stores running sums; the statistics are sum / factor, with 0 meaning "no scaling".
    f = float(factor.reshape(-1)[0])
    inv = np.float32(0.0 if f == 0.0 else 1.0 / f)
    top = b.top_value(layer, 0, shape)
    inputs = [
        x,
        b.const(layer, np.ones(c, np.float32), "scale"),
        b.const(layer, np.zeros(c, np.float32), "B"),
        b.const(layer, (mean * inv).astype(np.float32), "mean"),
        b.const(layer, (var * inv).astype(np.float32), "var"),
    ]
    b.node(layer, "BatchNormalization", inputs,
           {"epsilon": float(layer.batch_norm_param.eps), "axis": 1}, out=top)
    b.bind(layer, [top])


def _param_shape(shape: tuple[int, ...], axis: int, num_axes: int) -> tuple[int, ...]:
    if num_axes == -1:
        return tuple(shape[axis:])
    if num_axes < 0 or axis + num_axes > len(shape):
        raise InvalidModelError(
            f"num_axes {num_axes} from axis {axis} does not fit a {len(shape)}-D input")
    return tuple(shape[axis:axis + num_axes])


def _broadcast_shape(rank: int, axis: int, pshape: tuple[int, ...]) -> tuple[int, ...]:
    """Place a parameter covering axes [axis, axis+len) in a rank-``rank`` shape of ones."""
    return (1,) * axis + tuple(pshape) + (1,) * (rank - axis - len(pshape))


def _affine(b: CaffeBuilder, layer: pb.LayerParameter, multiply: bool) -> None:
    p = layer.scale_param if multiply else layer.bias_param
    xs = b.bottoms(layer)
    if not 1 <= len(xs) <= 2:
        raise InvalidModelError(
            f"needs 1 or 2 bottoms, got {len(xs)}")
    x = xs[0]
    shape = shape_of(x)
    rank = len(shape)
    axis = canonical_axis(p.axis, rank) if rank else 0
    bias_term = multiply and p.bias_term
    specs: list[BlobSpec] = []
    if len(xs) == 2:
        other_shape = shape_of(xs[1])
        if tuple(shape[axis:axis + len(other_shape)]) != tuple(other_shape) and other_shape:
            raise InvalidModelError(
                f"second bottom shape {list(other_shape)} "
                f"does not match input axes from {axis} of {list(shape)}")
        pshape = tuple(other_shape)
    else:
        pshape = _param_shape(shape, axis, int(p.num_axes))
        specs.append(BlobSpec(pshape, "gamma" if multiply else "beta"))
    if bias_term:
        specs.append(BlobSpec(pshape, "beta"))
    blobs = b.weights.blobs(layer, specs) if specs else []
    bshape = _broadcast_shape(rank, axis, pshape)
    if len(xs) == 2:
        factor: Value = xs[1]
        if tuple(other_shape) != bshape:
            factor = b.node(layer, "Reshape", [xs[1], b.shape_const(layer, bshape, "shape")],
                            shape=bshape, part="reshape")
        bias = b.const(layer, blobs[0].reshape(bshape), "bias") if bias_term else None
    else:
        factor = b.const(layer, blobs[0].reshape(bshape), "scale" if multiply else "bias")
        bias = b.const(layer, blobs[1].reshape(bshape), "bias") if bias_term else None
    top = b.top_value(layer, 0, shape)
    op = "Mul" if multiply else "Add"
    if bias is None:
        b.node(layer, op, [x, factor], out=top)
    else:
        y = b.node(layer, "Mul", [x, factor], shape=shape, part="mul")
        b.node(layer, "Add", [y, bias], out=top)
    b.bind(layer, [top])


@REGISTRY.register("Scale", emits=("Mul", "Add", "Reshape"), converts="always",
           doc="Mul by channel-shaped constants (or a second bottom), optional Add")
def convert_scale(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    _affine(b, layer, multiply=True)


@REGISTRY.register("Bias", emits=("Add", "Reshape"), converts="always",
           doc="Add of a broadcast constant (or a second bottom)")
def convert_bias(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    _affine(b, layer, multiply=False)


def _batch_statistics(b: CaffeBuilder, layer: pb.LayerParameter, x: Value, shape) -> None:
    """Caffe's use_global_stats: false: per-channel mean and (biased) variance of this batch
    over every axis but 1, then (x - mean) / sqrt(var + eps)."""
    axes = [a for a in range(len(shape)) if a != 1]
    kept = tuple(1 if a != 1 else shape[1] for a in range(len(shape)))
    mean = b.node(layer, "ReduceMean", [x], {"axes": axes, "keepdims": 1}, shape=kept,
                  part="mean")
    centered = b.node(layer, "Sub", [x, mean], shape=shape, part="center")
    square = b.node(layer, "Mul", [centered, centered], shape=shape, part="square")
    var = b.node(layer, "ReduceMean", [square], {"axes": axes, "keepdims": 1}, shape=kept,
                 part="var")
    eps = b.const(layer, np.float32(layer.batch_norm_param.eps), "eps")
    shifted = b.node(layer, "Add", [var, eps], shape=kept, part="var_eps")
    std = b.node(layer, "Sqrt", [shifted], shape=kept, part="std")
    top = b.top_value(layer, 0, shape)
    b.node(layer, "Div", [centered, std], out=top)
    b.bind(layer, [top])


@REGISTRY.register("LRN", emits=("Mul", "AveragePool", "Conv", "Add", "Pow", "Div"),
           converts="never",
           condition="x / (k + alpha/n * window sum of x^2)^beta divides by a tensor computed "
                     "at run time",
           doc="Local response normalisation as core ops, like ONNX LRN (refused there with "
               "the same reason)")
def convert_lrn(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    """ACROSS_CHANNELS: the windowed sum of squares over channels is a 1x1 convolution with a
    banded 0/1 weight, exactly as the ONNX converter builds it; WITHIN_CHANNEL: Caffe's average
    pool of squares (kernel n, pad (n-1)/2, divisor n^2). Then (k + alpha/n * sum)^beta and a
    division, the core ops ONNX LRN becomes."""
    (x,) = one_bottom(b, layer)
    shape = shape_of(x)
    if len(shape) != 4:
        raise InvalidModelError("needs a 4-D input")
    p = layer.lrn_param
    size = int(p.local_size)
    if size < 1 or size % 2 == 0:
        raise InvalidModelError(f"local_size {size} must be odd")
    squared = b.node(layer, "Mul", [x, x], shape=shape, part="square")
    if p.norm_region == pb.LRNParameter.WITHIN_CHANNEL:
        pad = (size - 1) // 2
        window = b.node(layer, "AveragePool", [squared], {
            "kernel_shape": [size, size], "strides": [1, 1], "pads": [pad] * 4,
            "count_include_pad": 1, "data_format": "NCHW"}, shape=shape, part="window_mean")
        scale, shift = float(p.alpha), 1.0  # Caffe's within-channel form has no k
        b.mark_read("lrn_param.k")  # so a k given has no effect here
    else:
        channels = shape[1]
        band = channel_window_band(channels, (size - 1) // 2, size // 2)
        window = b.node(layer, "Conv", [squared, b.const(layer, band, "band")], {
            "kernel_shape": [1, 1], "strides": [1, 1], "dilations": [1, 1], "group": 1,
            "pads": [0, 0, 0, 0], "auto_pad": "NOTSET", "data_format": "NCHW",
            "weight_layout": "OIHW"}, shape=shape, part="window_sum")
        scale, shift = float(p.alpha) / size, float(p.k)
    scaled = b.node(layer, "Mul", [window, b.const(layer, np.float32(scale), "alpha")],
                    shape=shape, part="scale")
    shifted = b.node(layer, "Add", [scaled, b.const(layer, np.float32(shift), "k")],
                     shape=shape, part="bias")
    denom = b.node(layer, "Pow", [shifted, b.const(layer, np.float32(p.beta), "beta")],
                   shape=shape, part="pow")
    top = b.top_value(layer, 0, shape)
    b.node(layer, "Div", [x, denom], out=top)
    b.bind(layer, [top])
