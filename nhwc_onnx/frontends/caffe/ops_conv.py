"""Convolution, deconvolution, pooling and inner product."""
from __future__ import annotations

import math

from ...errors import InvalidModelError
from ...schemas import RuleError
from ...schemas.core import infer_output_shapes
from ..base import Refusal
from . import caffe_pb2 as pb
from .builder import CaffeBuilder, canonical_axis, one_bottom, shape_of
from .registry import REGISTRY
from .weights import BlobSpec


def _pair(values, h_field_set: bool, h: int, w: int, default: int,
          what: str) -> tuple[int, int]:
    """Caffe's rule: explicit *_h/*_w win; else one value (both) or two values (h, w)."""
    if h_field_set:
        return int(h), int(w)
    values = list(values)
    if not values:
        return default, default
    if len(values) == 1:
        return int(values[0]), int(values[0])
    if len(values) == 2:
        return int(values[0]), int(values[1])
    raise InvalidModelError(
        f"{len(values)} {what} values; only 2-D spatial layers are supported")


def conv_geometry(p) -> dict:
    kernel = _pair(p.kernel_size, p.HasField("kernel_h") or p.HasField("kernel_w"),
                   p.kernel_h, p.kernel_w, 0, "kernel_size")
    stride = _pair(p.stride, p.HasField("stride_h") or p.HasField("stride_w"),
                   p.stride_h, p.stride_w, 1, "stride")
    pad = _pair(p.pad, p.HasField("pad_h") or p.HasField("pad_w"), p.pad_h, p.pad_w, 0,
                "pad")
    if min(kernel) <= 0:
        raise InvalidModelError("has no kernel size")
    if min(stride) <= 0:
        raise InvalidModelError("has a zero stride")
    return {"kernel": kernel, "stride": stride, "pad": pad}


def _check_conv(layer: pb.LayerParameter) -> str | None:
    p = layer.convolution_param
    if p.axis != 1:
        return f"convolution over axis {p.axis} (only axis 1, channels of NCHW, is supported)"
    if len(p.kernel_size) > 2 or len(p.stride) > 2 or len(p.pad) > 2 or len(p.dilation) > 2:
        return "N-D convolution (only 2-D is supported)"
    if len(layer.bottom) != len(layer.top):
        return "bottom and top counts differ"
    return None


def _conv_common(b: CaffeBuilder, layer: pb.LayerParameter, transpose: bool) -> None:
    p = layer.convolution_param
    geo = conv_geometry(p)
    dil = _pair(p.dilation, False, 0, 0, 1, "dilation")
    (kh, kw), (sh, sw), (ph, pw) = geo["kernel"], geo["stride"], geo["pad"]
    outs = []
    for idx, x in enumerate(b.bottoms(layer)):
        n, c, h, w = _nchw(x)
        m = int(p.num_output)
        if m <= 0:
            raise InvalidModelError(f"has num_output {m}")
        group = int(p.group)
        if layer.type in ("ConvolutionDepthwise", "DepthwiseConvolution"):
            if m != c:
                raise InvalidModelError(
                    f"depthwise convolution with num_output {m} != {c} input channels")
            group = c
        if group <= 0 or c % group or m % group:
            raise InvalidModelError(
                f"group {group} does not divide {c} input and {m} output channels")
        if transpose:
            wshape = (c, m // group, kh, kw)
            fan_in = c * kh * kw // group
        else:
            wshape = (m, c // group, kh, kw)
            fan_in = c // group * kh * kw
        attrs = {
            "kernel_shape": [kh, kw], "strides": [sh, sw], "dilations": list(dil),
            "group": group, "pads": [ph, pw, ph, pw], "data_format": "NCHW",
            "weight_layout": "IOHW" if transpose else "OIHW",
        }
        op = "ConvTranspose" if transpose else "Conv"
        out_shape = _core_shape(op, attrs, [(n, c, h, w), wshape]
                                + ([(m,)] if p.bias_term else []))
        # Weights are read once and shared by every bottom (Caffe shares them too).
        if idx == 0:
            specs = [BlobSpec(wshape, "weight", fan_in)]
            if p.bias_term:
                specs.append(BlobSpec((m,), "bias"))
            blobs = b.weights.blobs(layer, specs)
            wv = b.const(layer, blobs[0], "weight")
            bv = b.const(layer, blobs[1], "bias") if p.bias_term else None
        top = b.top_value(layer, idx, out_shape)
        inputs = [x, wv] + ([bv] if bv is not None else [])
        part = "" if idx == 0 else f"bottom{idx}"
        if part:
            b.node(layer, op, inputs, attrs, out=top, part=part)
        else:
            b.node(layer, op, inputs, attrs, out=top)
        outs.append(top)
    b.bind(layer, outs)


def _core_shape(op: str, attrs: dict, shapes: list) -> tuple:
    """The top's shape from the core op's own inference (the sizes Caffe computes)."""
    try:
        (shape,) = infer_output_shapes(op, attrs, shapes)
    except RuleError as err:
        h, w = shapes[0][2:]
        raise InvalidModelError(
            f"{err.message} (input {h}x{w})") from err
    return tuple(int(d) for d in shape)


def _nchw(x) -> tuple[int, int, int, int]:
    shape = shape_of(x)
    if len(shape) != 4:
        raise InvalidModelError(
            f"needs a 4-D NCHW input, got shape {list(shape)}")
    return shape


@REGISTRY.register("Convolution", "ConvolutionDepthwise", "DepthwiseConvolution", check=_check_conv,
           emits=("Conv",), converts="when", condition="2-D",
           doc="Conv (group, dilation, per-axis pads/strides), weights OIHW")
def convert_convolution(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    _conv_common(b, layer, transpose=False)


@REGISTRY.register("Deconvolution", check=_check_conv, emits=("ConvTranspose",), converts="when",
           condition="2-D", doc="ConvTranspose, weights IOHW")
def convert_deconvolution(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    _conv_common(b, layer, transpose=True)


def _check_pooling(layer: pb.LayerParameter) -> str | None:
    p = layer.pooling_param
    if p.pool == pb.PoolingParameter.STOCHASTIC:
        return "STOCHASTIC pooling (random at training, a weighted sum at test) is not supported"
    if len(layer.top) != 1:
        return "pooling with a mask top (max-unpooling indices) is not supported"
    return None


@REGISTRY.register("Pooling", check=_check_pooling,
           emits=("MaxPool", "AveragePool", "GlobalMaxPool", "GlobalAveragePool"),
           condition="MAX or AVE without a mask top; with ceil rounding, a stride no larger "
                     "than the kernel",
           doc="MaxPool/AveragePool (ceil or floor rounding, Caffe AVE counting), global pools")
def convert_pooling(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    p = layer.pooling_param
    (x,) = one_bottom(b, layer)
    n, c, h, w = _nchw(x)
    is_max = p.pool == pb.PoolingParameter.MAX
    if p.global_pooling:
        top = b.top_value(layer, 0, (n, c, 1, 1))
        b.node(layer, "GlobalMaxPool" if is_max else "GlobalAveragePool", [x],
               {"data_format": "NCHW"}, out=top)
        b.bind(layer, [top])
        return
    geo = conv_geometry(p)
    (kh, kw), (sh, sw), (ph, pw) = geo["kernel"], geo["stride"], geo["pad"]
    if ph >= kh or pw >= kw:
        raise InvalidModelError(
            f"pad {ph, pw} must be smaller than kernel {kh, kw}")
    ceil = p.round_mode == pb.PoolingParameter.CEIL and p.ceil_mode
    if h + 2 * ph < kh or w + 2 * pw < kw:
        raise InvalidModelError(
            f"kernel {kh}x{kw} is larger than the padded input {h}x{w}")
    attrs = {"kernel_shape": [kh, kw], "strides": [sh, sw], "pads": [ph, pw, ph, pw],
             "ceil_mode": 1 if ceil else 0, "data_format": "NCHW"}
    if not is_max:
        attrs["count_include_pad"] = 1  # Caffe divides by the window clipped to input + pad
    out_shape = _core_shape("MaxPool" if is_max else "AveragePool", attrs, [(n, c, h, w)])
    oh, ow = out_shape[2:]
    if _window_outside(h, kh, sh, ph, oh, ceil) or _window_outside(w, kw, sw, pw, ow, ceil):
        # Caffe keeps a last window that starts past the input (stride > kernel, no pad) and
        # fills it with -FLT_MAX or a negative count: nothing to reproduce exactly.
        raise Refusal(f"ceil rounding with stride {sh, sw} > kernel {kh, kw} makes Caffe emit a "
                      "window that lies entirely outside the input")
    top = b.top_value(layer, 0, out_shape)
    b.node(layer, "MaxPool" if is_max else "AveragePool", [x], attrs, out=top)
    b.bind(layer, [top])


def _window_outside(size: int, k: int, s: int, pad: int, out: int, ceil: bool) -> bool:
    """Whether Caffe's last window along one axis starts past the input plus its pad.

    ``out`` is the core op's count, which drops such a window; Caffe drops it only when the
    axis is padded, so unpadded it keeps the window the core op dropped."""
    if ceil and pad == 0 and -(-(size - k) // s) * s >= size:
        return True
    return (out - 1) * s >= size + pad


@REGISTRY.register("InnerProduct", emits=("Flatten", "Gemm", "Reshape"),
           doc="Flatten(axis) + Gemm (transB unless transpose)")
def convert_inner_product(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    p = layer.inner_product_param
    (x,) = one_bottom(b, layer)
    shape = shape_of(x)
    axis = canonical_axis(p.axis, len(shape))
    k = int(math.prod(shape[axis:]))
    rows = int(math.prod(shape[:axis]))
    m = int(p.num_output)
    if m <= 0:
        raise InvalidModelError(f"has num_output {m}")
    wshape = (k, m) if p.transpose else (m, k)
    specs = [BlobSpec(wshape, "weight", k)] + ([BlobSpec((m,), "bias")] if p.bias_term else [])
    blobs = b.weights.blobs(layer, specs)
    flat = x
    if len(shape) != 2 or axis != 1:
        flat = b.node(layer, "Flatten", [x], {"axis": axis}, shape=(rows, k), part="flatten")
    inputs = [flat, b.const(layer, blobs[0], "weight")]
    if p.bias_term:
        inputs.append(b.const(layer, blobs[1], "bias"))
    attrs = {"transB": 0 if p.transpose else 1}
    out_shape = tuple(shape[:axis]) + (m,)
    top = b.top_value(layer, 0, out_shape)
    if axis == 1:
        b.node(layer, "Gemm", inputs, attrs, out=top)
    else:  # keep the leading axes Caffe keeps
        y = b.node(layer, "Gemm", inputs, attrs, shape=(rows, m), part="gemm")
        b.node(layer, "Reshape", [y, b.shape_const(layer, out_shape, "shape")], out=top)
    b.bind(layer, [top])
