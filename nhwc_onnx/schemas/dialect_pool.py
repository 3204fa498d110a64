"""Dialect ops that pool, pad, resample or normalise NHWC tensors.

MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, Pad, UpSampling2D, SpaceToDepth,
BatchNormalization. Spec: the dialect spec v0.1 with the decisions of docs/design.md. The lowerings
to standard ONNX (opset 17) are the executable meaning used by ``nhwc_onnx.runtime``.
"""
from __future__ import annotations

import numpy as np

from .base import (
    DIALECT_OPS,
    Attr,
    AttrKind,
    InferContext,
    LayoutClass,
    OpSchema,
    Port,
    RuleError,
)
from .spatial import (
    PADS_STRING,
    STRIDES,
    attrs_of,
    check_vector,
    fmt,
    lower_in_nchw,
    nhwc_input,
    onnx_pads,
    pair,
    window_output,
)

A = AttrKind
SOURCE = "dialect spec v0.1 (docs/design.md)"

_POOL_ATTRS = {
    "kernel_shape": Attr(A.INTS, required=True, doc="[kH, kW]"),
    "strides": STRIDES,
    "pads": PADS_STRING,
}


# -- MaxPool / AveragePool ---------------------------------------------------------------------


def _infer_pool(ctx: InferContext) -> list:
    x = nhwc_input(ctx)
    kernel, strides = pair(ctx, "kernel_shape"), pair(ctx, "strides")
    oh, ow = window_output(ctx, x, kernel, strides)
    return [(x[0], oh, ow, x[3])]


def _pool_lowering(op_type: str, **fixed):
    def lower(node, L, ins, outs) -> None:
        a = attrs_of(node)
        kernel, strides = tuple(a["kernel_shape"]), tuple(a["strides"])
        lower_in_nchw(L, op_type, ins[0], [], outs[0], kernel_shape=list(kernel),
                      strides=list(strides),
                      **onnx_pads(node, node.inputs[0].shape[1:3], kernel, strides, (1, 1)),
                      **fixed)
    return lower


DIALECT_OPS.register(OpSchema(
    "MaxPool", "nhwc",
    "Max pooling over H and W of an NHWC tensor; TensorFlow SAME/VALID; padded cells never win.",
    [Port("X")], [Port("Y")], dict(_POOL_ATTRS),
    layout=LayoutClass.IMPLICIT, infer=_infer_pool, lower=_pool_lowering("MaxPool"),
    source=SOURCE,
))

DIALECT_OPS.register(OpSchema(
    "AveragePool", "nhwc",
    "Average pooling over H and W of an NHWC tensor; TensorFlow SAME/VALID; each output divides "
    "by the number of real (unpadded) cells in its window.",
    [Port("X")], [Port("Y")], dict(_POOL_ATTRS),
    layout=LayoutClass.IMPLICIT, infer=_infer_pool,
    lower=_pool_lowering("AveragePool", count_include_pad=0), source=SOURCE,
))


# -- GlobalAveragePool / GlobalMaxPool ---------------------------------------------------------


def _infer_global(ctx: InferContext) -> list:
    n, _, _, c = nhwc_input(ctx)
    return [(n, 1, 1, c)]


def _global_lowering(reduce_op: str):
    def lower(node, L, ins, outs) -> None:
        L.op(reduce_op, [ins[0]], outputs=[outs[0]], axes=[1, 2], keepdims=1)
    return lower


for _name, _reduce, _what in (("GlobalAveragePool", "ReduceMean", "mean"),
                              ("GlobalMaxPool", "ReduceMax", "maximum")):
    DIALECT_OPS.register(OpSchema(
        _name, "nhwc",
        f"The {_what} over H and W of an NHWC tensor, per channel: Y (N, 1, 1, C).",
        [Port("X")], [Port("Y", doc="(N, 1, 1, C)")], {},
        layout=LayoutClass.IMPLICIT, infer=_infer_global, lower=_global_lowering(_reduce),
        source=SOURCE,
    ))


# -- Pad ---------------------------------------------------------------------------------------


def _infer_pad(ctx: InferContext) -> list:
    x = ctx.shape(0)
    pads = list(ctx.attr("pads"))
    if len(pads) != 2 * len(x) or any(p < 0 for p in pads):
        raise RuleError("attribute", "attribute 'pads' must be the TF paddings matrix "
                        "[[b0,e0],[b1,e1],...] flattened row-major: 2 ints >= 0 per input axis",
                        f"{2 * len(x)} ints >= 0", pads)
    return [tuple(None if d is None else d + pads[2 * ax] + pads[2 * ax + 1]
                  for ax, d in enumerate(x))]


def _lower_pad(node, L, ins, outs) -> None:
    pads = list(node.attrs["pads"])
    onnx_order = pads[0::2] + pads[1::2]  # begins of every axis, then ends
    L.op("Pad", [ins[0], L.const(np.array(onnx_order, np.int64), "pads")], outputs=[outs[0]],
         mode="constant")


DIALECT_OPS.register(OpSchema(
    "Pad", "nhwc",
    "Zero padding. pads = the TensorFlow paddings matrix [[b0,e0],[b1,e1],...] flattened "
    "row-major, in NHWC axis order. Only mode 'constant' with value 0.0.",
    [Port("data")], [Port("output")],
    {
        "pads": Attr(A.INTS, required=True, doc="[b0, e0, b1, e1, ...], each >= 0"),
        "mode": Attr(A.STRING, default="constant", allowed=("constant",)),
        "value": Attr(A.FLOAT, default=0.0, allowed=(0.0,)),
    },
    layout=LayoutClass.ATTRIBUTE, infer=_infer_pad, lower=_lower_pad, source=SOURCE,
))


# -- UpSampling2D ------------------------------------------------------------------------------


def _infer_upsampling(ctx: InferContext) -> list:
    x = ctx.shape(0)
    size = list(ctx.attr("size"))
    if len(size) != len(x) or any(s < 1 for s in size):
        raise RuleError("attribute", "attribute 'size' must hold one integer scale >= 1 per "
                        "input axis", f"{len(x)} ints >= 1", size)
    if ctx.attr("mode") == "linear" and (len(x) != 4 or size[0] != 1 or size[3] != 1):
        raise RuleError("attribute", "mode 'linear' is bilinear over H and W of an NHWC tensor: "
                        "size must be [1, sH, sW, 1]", "[1, sH, sW, 1]", size)
    return [tuple(None if d is None else d * s for d, s in zip(x, size))]


def _lower_upsampling(node, L, ins, outs) -> None:
    a = attrs_of(node)
    scales = L.const(np.array(a["size"], np.float32), "scales")
    if a["mode"] == "nearest":
        # asymmetric + floor: source index = floor(dst / scale), exact for integer scales.
        L.op("Resize", [ins[0], None, scales], outputs=[outs[0]], mode="nearest",
             coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    else:
        L.op("Resize", [ins[0], None, scales], outputs=[outs[0]], mode="linear",
             coordinate_transformation_mode="half_pixel")


DIALECT_OPS.register(OpSchema(
    "UpSampling2D", "nhwc",
    "Integer upsampling: output dim = input dim * size[axis]. mode 'nearest': source index = "
    "floor(dst / scale); 'linear': bilinear over H, W with half-pixel centres (TF2 "
    "tf.image.resize), size [1, sH, sW, 1].",
    [Port("X")], [Port("Y")],
    {
        "size": Attr(A.INTS, required=True, doc="one integer scale >= 1 per input axis"),
        "mode": Attr(A.STRING, default="nearest", allowed=("nearest", "linear")),
    },
    layout=LayoutClass.ATTRIBUTE, infer=_infer_upsampling, lower=_lower_upsampling,
    source=SOURCE,
))


# -- SpaceToDepth ------------------------------------------------------------------------------


def _infer_space_to_depth(ctx: InferContext) -> list:
    n, h, w, c = nhwc_input(ctx)
    bs = int(ctx.attr("blocksize"))
    if bs < 1:
        raise RuleError("attribute", "attribute 'blocksize' must be >= 1", ">= 1", bs)
    for name, d in (("H", h), ("W", w)):
        if d is not None and d % bs:
            raise RuleError("shape", f"input {name} = {d} is not divisible by blocksize {bs}",
                            f"multiple of {bs}", d)
    return [(n, None if h is None else h // bs, None if w is None else w // bs,
             None if c is None else c * bs * bs)]


def _lower_space_to_depth(node, L, ins, outs) -> None:
    n, h, w, c = node.inputs[0].shape
    bs = int(node.attrs["blocksize"])
    batch = n if isinstance(n, int) else -1  # unknown or symbolic: inferred
    split = L.const(np.array([batch, h // bs, bs, w // bs, bs, c], np.int64), "shape")
    blocks = L.op("Reshape", [ins[0], split])
    # (n, i, bi, j, bj, c) -> (n, i, j, bi, bj, c): depth index (bi*bs + bj)*C + c, as TF.
    moved = L.op("Transpose", blocks, perm=[0, 1, 3, 2, 4, 5])
    merged = L.const(np.array([batch, h // bs, w // bs, bs * bs * c], np.int64), "shape")
    L.op("Reshape", [moved[0], merged], outputs=[outs[0]])


DIALECT_OPS.register(OpSchema(
    "SpaceToDepth", "nhwc",
    "Moves blocksize x blocksize spatial blocks into channels, TensorFlow order: "
    "out[b, i, j, (bi*bs + bj)*C + c] = in[b, i*bs + bi, j*bs + bj, c]. H, W divisible by bs.",
    [Port("input")], [Port("output")],
    {"blocksize": Attr(A.INT, required=True)},
    layout=LayoutClass.IMPLICIT, infer=_infer_space_to_depth, lower=_lower_space_to_depth,
    source=SOURCE,
))


# -- BatchNormalization ------------------------------------------------------------------------

_BN_PARAMS = ("scale", "B", "mean", "var")


def _infer_batchnorm(ctx: InferContext) -> list:
    x = ctx.shape(0)
    if len(x) < 2:
        raise RuleError("rank", "BatchNormalization input X must have rank >= 2 (channel last)",
                        ">= 2", f"rank {len(x)} {fmt(x)}")
    for index, port in enumerate(_BN_PARAMS, start=1):
        check_vector(ctx, index, port, x[-1])
    eps = float(ctx.attr("epsilon"))
    if eps < 0:
        raise RuleError("attribute", "attribute 'epsilon' must be >= 0", ">= 0", eps)
    return [tuple(x)]


def _lower_batchnorm(node, L, ins, outs) -> None:
    x, scale, bias, mean, var = ins[:5]
    eps = L.const(np.array(float(attrs_of(node)["epsilon"]), np.float32), "epsilon")
    std = L.op("Sqrt", L.op("Add", [var, eps]))
    factor = L.op("Div", [scale, std[0]])
    centred = L.op("Sub", [x, mean])
    scaled = L.op("Mul", [centred[0], factor[0]])
    L.op("Add", [scaled[0], bias], outputs=[outs[0]])  # params broadcast over the last axis


DIALECT_OPS.register(OpSchema(
    "BatchNormalization", "nhwc",
    "Inference batch normalisation over the last (channel) axis: "
    "Y = (X - mean) * scale / sqrt(var + epsilon) + B. All five inputs are present; one output.",
    [Port("X")] + [Port(p, constant=True, doc="1-D, size C") for p in _BN_PARAMS],
    [Port("Y")],
    {"epsilon": Attr(A.FLOAT, default=1e-5)},
    layout=LayoutClass.IMPLICIT, infer=_infer_batchnorm, lower=_lower_batchnorm, source=SOURCE,
))
