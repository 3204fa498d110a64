"""Core convolution, pooling, BatchNormalization, Resize and depth/space ops.

Output sizes (SAME/VALID/explicit pads/ceil_mode, ConvTranspose crops) come from
``spatial_math``, shared by shape inference and the numpy evaluators so they cannot disagree.
"""
from __future__ import annotations

import numpy as np

from ...errors import InvalidAttributeError
from ..base import Attr, InferContext, RuleError
from . import spatial_lowering as lowering
from . import spatial_math as sp
from .define import AUTO_PAD, FORMAT, PADS, A, core_op, dtype_of_inputs, eval_axis, infer_axis


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


# -- Conv, ConvTranspose ---------------------------------------------------------------------------
_CONV_ATTRS = {
    "kernel_shape": Attr(A.INTS, required=True),
    "strides": Attr(A.INTS, default=[1, 1]),
    "dilations": Attr(A.INTS, default=[1, 1]),
    "group": Attr(A.INT, default=1),
    "pads": PADS,
    "auto_pad": AUTO_PAD,
    "data_format": FORMAT,
}


def _infer_conv(ctx):
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


core_op(
    "Conv", "2-D convolution, zero padding. weight_layout 'OIHW' = (M, C/group, kH, kW) as ONNX "
    "and Caffe store it; 'HWIO' = (kH, kW, C/group, M) as TensorFlow stores it (a TF depthwise "
    "filter (kH,kW,C,mult) is the HWIO filter (kH,kW,1,C*mult) with group=C).",
    ["X", "W", "B?"],
    attrs={**_CONV_ATTRS,
           "weight_layout": Attr(A.STRING, default="OIHW", allowed=("OIHW", "HWIO"))},
    infer=_infer_conv, dtype=dtype_of_inputs, lower=lowering.lower_conv,
    evaluate=lambda attrs, xs: sp.conv(attrs, xs[0], xs[1], xs[2] if len(xs) > 2 else None))


def _infer_conv_transpose(ctx):
    fmt = ctx.attrs["data_format"]
    n, c, h, w = _split_layout(_rank4(ctx), fmt)
    wshape = ctx.shape(1)
    ctx.require(len(wshape) == 4, "rank", "ConvTranspose weight must be rank 4", 4, len(wshape))
    iohw = wshape if ctx.attrs["weight_layout"] == "IOHW" else (
        wshape[3], wshape[2], wshape[0], wshape[1])
    if c is not None:
        ctx.require(iohw[0] == c, "channels", "weight input channels differ from X", iohw[0], c)
    m = iohw[1] * int(ctx.attrs["group"])
    dims: list[int | None] = []
    for axis, size in enumerate((h, w)):
        if size is None and ctx.attrs.get("output_shape") is None:
            dims.append(None)
            continue
        dims.append(sp.conv_transpose_plan(ctx.attrs, size if size is not None else 1, axis,
                                           iohw[2 + axis])[0])
    _check_positive(ctx, dims)
    return [_join_layout(n, m, dims[0], dims[1], fmt)]


core_op(
    "ConvTranspose", "ONNX ConvTranspose-11. pads = per-side crops of the full "
    "output; output_padding adds zeros at the end. With output_shape ([oH, oW]) and auto_pad "
    "SAME_UPPER the odd crop goes to the end (TensorFlow conv2d_transpose SAME), SAME_LOWER to "
    "the begin. weight_layout 'IOHW' = (C, M/group, kH, kW) (ONNX, Caffe); 'HWOI' = (kH, kW, M, C) "
    "(TensorFlow).",
    ["X", "W", "B?"],
    attrs={**_CONV_ATTRS,
           "output_padding": Attr(A.INTS, default=[0, 0]),
           "output_shape": Attr(A.INTS),
           "weight_layout": Attr(A.STRING, default="IOHW", allowed=("IOHW", "HWOI"))},
    infer=_infer_conv_transpose, dtype=dtype_of_inputs, lower=lowering.lower_conv_transpose,
    evaluate=lambda attrs, xs: sp.conv_transpose(attrs, xs[0], xs[1],
                                                 xs[2] if len(xs) > 2 else None))

# -- pooling ---------------------------------------------------------------------------------------
_POOL_ATTRS = {
    "kernel_shape": Attr(A.INTS, required=True),
    "strides": Attr(A.INTS, default=[1, 1]),
    "pads": PADS,
    "auto_pad": AUTO_PAD,
    "ceil_mode": Attr(A.INT, default=0, allowed=(0, 1),
                      doc="1: output size rounds up; a window must start inside input + begin pad "
                          "(Caffe, ONNX and PyTorch agree)"),
    "data_format": FORMAT,
}


def _infer_pool(ctx):
    fmt = ctx.attrs["data_format"]
    n, c, h, w = _split_layout(_rank4(ctx), fmt)
    (oh, _, _), (ow, _, _) = _plan(ctx, (h, w), pooling=True)
    _check_positive(ctx, (oh, ow))
    return [_join_layout(n, c, oh, ow, fmt)]


def _infer_global_pool(ctx):
    fmt = ctx.attrs["data_format"]
    n, c, _, _ = _split_layout(_rank4(ctx), fmt)
    return [_join_layout(n, c, 1, 1, fmt)]


core_op("MaxPool", "Max pooling; padded cells never win.", ["X"],
        attrs={**_POOL_ATTRS, "dilations": Attr(A.INTS, default=[1, 1])},
        infer=_infer_pool, dtype=dtype_of_inputs,
        lower=lowering.pool_lowering("MaxPool", "dilations"),
        evaluate=lambda attrs, xs: sp.pool(attrs, xs[0], "max"))
core_op("AveragePool", "Average pooling. count_include_pad=0: divide by the real cells in the "
        "window. count_include_pad=1: divide by the window clipped to the padded extent "
        "[-pad_begin, size + pad_end) (Caffe AVE, PyTorch, ONNX).", ["X"],
        attrs={**_POOL_ATTRS, "count_include_pad": Attr(A.INT, default=0, allowed=(0, 1))},
        infer=_infer_pool, dtype=dtype_of_inputs,
        lower=lowering.pool_lowering("AveragePool", "count_include_pad"),
        evaluate=lambda attrs, xs: sp.pool(attrs, xs[0], "avg"))
core_op("GlobalAveragePool", "Mean over H and W, keeping them as size 1.", ["X"],
        attrs={"data_format": FORMAT}, infer=_infer_global_pool, dtype=dtype_of_inputs,
        lower=lowering.nchw_lowering(),
        evaluate=lambda attrs, xs: sp.global_pool(attrs, xs[0], "avg"))
core_op("GlobalMaxPool", "Max over H and W, keeping them as size 1.", ["X"],
        attrs={"data_format": FORMAT}, infer=_infer_global_pool, dtype=dtype_of_inputs,
        lower=lowering.nchw_lowering(),
        evaluate=lambda attrs, xs: sp.global_pool(attrs, xs[0], "max"))


# -- BatchNormalization ----------------------------------------------------------------------------


def _infer_batchnorm(ctx):
    shape = ctx.shape(0)
    axis = infer_axis(ctx, ctx.attrs["axis"], len(shape))
    for i in range(1, 5):
        p = ctx.shape(i)
        ctx.require(len(p) == 1 and (shape[axis] is None or p[0] == shape[axis]), "parameter",
                    f"parameter {i} must be a vector of the channel size", (shape[axis],), p)
    return [shape]


def _eval_batchnorm(attrs, xs):
    x, scale, bias, mean, var = xs
    axis = eval_axis(attrs["axis"], x.ndim)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]

    def col(v):
        return v.astype(np.float64).reshape(shape)

    y = (x.astype(np.float64) - col(mean)) / np.sqrt(col(var) + attrs["epsilon"])
    return (y * col(scale) + col(bias)).astype(x.dtype)


core_op("BatchNormalization", "Inference batch norm: scale*(X-mean)/sqrt(var+epsilon)+B along "
        "``axis`` (the channel axis in the source layout).", ["X", "scale", "B", "mean", "var"],
        attrs={"epsilon": Attr(A.FLOAT, default=1e-5), "axis": Attr(A.INT, default=1)},
        infer=_infer_batchnorm, dtype=dtype_of_inputs, evaluate=_eval_batchnorm,
        lower=lowering.lower_batchnorm)


# -- Resize, depth/space ---------------------------------------------------------------------------


def _infer_resize(ctx):
    try:
        return [sp.resize_output_shape(ctx.attrs, ctx.shape(0))]
    except InvalidAttributeError as exc:
        raise RuleError("attribute", str(exc)) from exc


core_op("Resize", "ONNX Resize-13 on the given axes: exactly one of scales (per axis) or sizes.",
        ["X"], attrs={
            "mode": Attr(A.STRING, default="nearest", allowed=("nearest", "linear")),
            "scales": Attr(A.FLOATS), "sizes": Attr(A.INTS),
            "coordinate_transformation_mode": Attr(A.STRING, default="half_pixel", allowed=(
                "half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel",
                "tf_half_pixel_for_nn")),
            "nearest_mode": Attr(A.STRING, default="round_prefer_floor", allowed=(
                "round_prefer_floor", "round_prefer_ceil", "floor", "ceil")),
        }, infer=_infer_resize, dtype=dtype_of_inputs, lower=lowering.lower_resize,
        evaluate=lambda attrs, xs: sp.resize(attrs, xs[0]))


def _infer_depth_space(ctx):
    fmt = ctx.attrs["data_format"]
    n, c, h, w = _split_layout(_rank4(ctx), fmt)
    bs = int(ctx.attrs["blocksize"])
    if ctx.node.op == "DepthToSpace":
        ctx.require(c is None or c % (bs * bs) == 0, "blocksize",
                    f"channels {c} not divisible by {bs * bs}")
        return [_join_layout(n, None if c is None else c // (bs * bs),
                             None if h is None else h * bs, None if w is None else w * bs, fmt)]
    for d in (h, w):
        ctx.require(d is None or d % bs == 0, "blocksize",
                    f"spatial size {d} not divisible by {bs}")
    return [_join_layout(n, None if c is None else c * bs * bs,
                         None if h is None else h // bs, None if w is None else w // bs, fmt)]


core_op("SpaceToDepth", "out channel index (bi*bs + bj)*C + c, as both TF and ONNX define it.",
        ["X"], attrs={"blocksize": Attr(A.INT, required=True), "data_format": FORMAT},
        infer=_infer_depth_space, dtype=dtype_of_inputs,
        lower=lowering.nchw_lowering("blocksize"),
        evaluate=lambda attrs, xs: sp.space_to_depth(attrs, xs[0]))
core_op("DepthToSpace", "ONNX DepthToSpace; TensorFlow's is mode DCR.", ["X"],
        attrs={"blocksize": Attr(A.INT, required=True),
               "mode": Attr(A.STRING, default="DCR", allowed=("DCR", "CRD")),
               "data_format": FORMAT},
        infer=_infer_depth_space, dtype=dtype_of_inputs,
        lower=lowering.nchw_lowering("blocksize", "mode"),
        evaluate=lambda attrs, xs: sp.depth_to_space(attrs, xs[0]))
