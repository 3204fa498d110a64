"""Dialect ops with weights: Conv, DepthwiseConv2d, ConvTranspose, Dense, Gemm, MatMul.

Spec: the dialect spec v0.1 with the decisions of docs/design.md ("The dialect, rule by rule").
Activations are NHWC; SAME/VALID are TensorFlow's. Lowerings emit standard ONNX (opset 17):
Conv-like ops run in NCHW between two Transposes, which is only the executable meaning used by
``nhwc_onnx.runtime``.
"""
from __future__ import annotations

import numpy as np

from ..errors import InvalidModelError
from .base import (
    DIALECT_OPS,
    Attr,
    AttrKind,
    InferContext,
    LayoutClass,
    OpSchema,
    Port,
    RuleError,
    conv_transpose_tf,
)
from .spatial import (
    DILATIONS,
    KERNEL_FROM_W,
    PADS_STRING,
    STRIDES,
    TO_NCHW,
    TO_NHWC,
    attrs_of,
    check_kernel_attr,
    check_vector,
    fmt,
    lower_in_nchw,
    nhwc_input,
    onnx_pads,
    pair,
    same_dim,
    window_output,
)

A = AttrKind
SOURCE = "dialect spec v0.1 (docs/design.md)"


def _x() -> Port:
    return Port("X", doc="activation, NHWC")


def _weight(doc: str) -> Port:
    return Port("W", constant=True, doc=doc)


def _bias(doc: str = "optional bias, 1-D of size M") -> Port:
    return Port("B", optional=True, constant=True, doc=doc)


def _weight4(ctx: InferContext, layout: str) -> tuple:
    w = ctx.shape(1)
    if len(w) != 4:
        raise RuleError("weight-shape", f"weight W must be 4-D {layout}", layout, fmt(w))
    return tuple(w)


# -- Conv --------------------------------------------------------------------------------------


def _infer_conv(ctx: InferContext) -> list:
    n, h, w, c = nhwc_input(ctx)
    m, kh, kw, c_per_group = _weight4(ctx, "(M, kH, kW, C/group)")
    group = int(ctx.attr("group"))
    if group < 1:
        raise RuleError("attribute", "attribute 'group' must be >= 1", ">= 1", group)
    if c is not None and c % group:
        raise RuleError("attribute", f"input channels C={c} are not divisible by group={group}",
                        f"C % {group} == 0", c)
    if c is not None and c // group != c_per_group:
        # Name the kernel from kernel_shape when given: W's own middle dims may be the wrong ones.
        ks = ctx.attr("kernel_shape")
        ekh, ekw = ((ks[0], ks[1]) if isinstance(ks, (list, tuple)) and len(ks) == 2
                    else ("kH", "kW"))
        raise RuleError("weight-shape", f"Conv W must be (M, kH, kW, C/group) with C={c}, "
                        f"group={group}", f"(M,{ekh},{ekw},{c // group})",
                        fmt((m, kh, kw, c_per_group)))
    if m % group:
        raise RuleError("weight-shape", f"output channels M={m} are not divisible by "
                        f"group={group}", f"M % {group} == 0", m)
    kernel = check_kernel_attr(ctx, (kh, kw))
    strides, dilations = pair(ctx, "strides"), pair(ctx, "dilations")
    if ctx.has(2):
        check_vector(ctx, 2, "B", m)
    oh, ow = window_output(ctx, (n, h, w, c), kernel, strides, dilations)
    return [(n, oh, ow, m)]


def _lower_conv(node, L, ins, outs) -> None:
    a = attrs_of(node)
    x_shape = node.inputs[0].shape
    kernel = tuple(node.inputs[1].shape[1:3])
    strides, dilations = tuple(a["strides"]), tuple(a["dilations"])
    w_oihw = L.op("Transpose", [ins[1]], perm=[0, 3, 1, 2])[0]
    bias = [ins[2]] if len(ins) > 2 and ins[2] is not None else []
    lower_in_nchw(L, "Conv", ins[0], [w_oihw, *bias], outs[0], kernel_shape=list(kernel),
                  strides=list(strides), dilations=list(dilations), group=int(a["group"]),
                  **onnx_pads(node, x_shape[1:3], kernel, strides, dilations))


DIALECT_OPS.register(OpSchema(
    "Conv", "nhwc",
    "2-D convolution of an NHWC tensor. W (M, kH, kW, C/group); optional B (M). Zero padding "
    "per TensorFlow SAME/VALID. Y (N, oH, oW, M).",
    [_x(), _weight("(M, kH, kW, C/group)"), _bias()],
    [Port("Y")],
    {
        "kernel_shape": KERNEL_FROM_W,
        "strides": STRIDES,
        "dilations": DILATIONS,
        "group": Attr(A.INT, default=1, doc="C and M are split into this many groups"),
        "pads": PADS_STRING,
    },
    layout=LayoutClass.IMPLICIT, infer=_infer_conv, lower=_lower_conv, source=SOURCE,
))


# -- DepthwiseConv2d ---------------------------------------------------------------------------


def _infer_depthwise(ctx: InferContext) -> list:
    n, h, w, c = nhwc_input(ctx)
    kh, kw, wc, mult = _weight4(ctx, "(kH, kW, C, multiplier)")
    if not same_dim(c, wc):
        raise RuleError("weight-shape", "DepthwiseConv2d W must be (kH, kW, C, multiplier) with "
                        f"C={c} the input channels", f"({kh},{kw},{c},{mult})",
                        fmt((kh, kw, wc, mult)))
    kernel = check_kernel_attr(ctx, (kh, kw))
    strides, dilations = pair(ctx, "strides"), pair(ctx, "dilations")
    oh, ow = window_output(ctx, (n, h, w, c), kernel, strides, dilations)
    return [(n, oh, ow, wc * mult)]


def _lower_depthwise(node, L, ins, outs) -> None:
    a = attrs_of(node)
    x_shape = node.inputs[0].shape
    kh, kw, c, mult = node.inputs[1].shape
    strides, dilations = tuple(a["strides"]), tuple(a["dilations"])
    # Output channel k*mult+q uses W[:, :, k, q]: (kH,kW,C*mult) -> (C*mult, 1, kH, kW).
    flat = L.op("Reshape", [ins[1], L.const(np.array([kh, kw, 1, c * mult], np.int64), "shape")])
    w_oihw = L.op("Transpose", flat, perm=[3, 2, 0, 1])[0]
    lower_in_nchw(L, "Conv", ins[0], [w_oihw], outs[0], kernel_shape=[kh, kw],
                  strides=list(strides), dilations=list(dilations), group=int(c),
                  **onnx_pads(node, x_shape[1:3], (kh, kw), strides, dilations))


DIALECT_OPS.register(OpSchema(
    "DepthwiseConv2d", "nhwc",
    "Depthwise 2-D convolution (TensorFlow depthwise_conv2d): W (kH, kW, C, multiplier); "
    "out[..., k*multiplier + q] convolves channel k with W[:, :, k, q]. No bias input (a bias "
    "is a following AddBias). Stride and dilation may both exceed 1.",
    [_x(), _weight("(kH, kW, C, multiplier)")],
    [Port("Y")],
    {"kernel_shape": KERNEL_FROM_W, "strides": STRIDES, "dilations": DILATIONS,
     "pads": PADS_STRING},
    layout=LayoutClass.IMPLICIT, infer=_infer_depthwise, lower=_lower_depthwise, source=SOURCE,
))


# -- ConvTranspose -----------------------------------------------------------------------------


def _transpose_geometry(attrs: dict, hw: tuple, kernel: tuple) -> list[tuple[int, int, int]]:
    """Per spatial axis: (output size, crop at begin, crop at end; negative = zero-fill)."""
    strides, dilations = attrs["strides"], attrs["dilations"]
    out_pad = attrs["output_padding"]
    shape = attrs.get("output_shape")
    return [
        conv_transpose_tf(hw[ax], kernel[ax], strides[ax], dilations[ax], out_pad[ax],
                          attrs["pads"], None if shape is None else shape[ax])
        for ax in range(2)
    ]


def _infer_conv_transpose(ctx: InferContext) -> list:
    n, h, w, c = nhwc_input(ctx)
    wc, m_per_group, kh, kw = _weight4(ctx, "(C, M/group, kH, kW)")
    group = int(ctx.attr("group"))
    if group < 1:
        raise RuleError("attribute", "attribute 'group' must be >= 1", ">= 1", group)
    if not same_dim(c, wc) or wc % group:
        raise RuleError("weight-shape", f"ConvTranspose W must be (C, M/group, kH, kW) with C={c}"
                        f" divisible by group={group}", f"({c},M/group,{kh},{kw})",
                        fmt((wc, m_per_group, kh, kw)))
    m = m_per_group * group
    kernel = check_kernel_attr(ctx, (kh, kw))
    strides, dilations = pair(ctx, "strides"), pair(ctx, "dilations")
    out_pad = pair(ctx, "output_padding", minimum=0)
    for ax in range(2):
        if out_pad[ax] >= max(strides[ax], dilations[ax]):
            raise RuleError("attribute", "each output_padding must be less than its stride or "
                            "dilation (ConvTranspose-11)", f"< {max(strides[ax], dilations[ax])}",
                            list(out_pad))
    if ctx.attr("output_shape") is not None:
        pair(ctx, "output_shape")
    if ctx.has(2):
        check_vector(ctx, 2, "B", m)
    if h is None or w is None:
        shape = ctx.attr("output_shape")
        return [(n, *(shape if shape is not None else (None, None)), m)]
    geometry = _transpose_geometry(ctx.attrs, (h, w), kernel)
    return [(n, geometry[0][0], geometry[1][0], m)]


def _lower_conv_transpose(node, L, ins, outs) -> None:
    a = attrs_of(node)
    x_shape = node.inputs[0].shape
    if any(d is None for d in x_shape[1:3]):
        raise InvalidModelError(f"node '{node.name}' (ConvTranspose): running it needs the "
                                f"input's H and W, found {fmt(x_shape)}")
    kernel = tuple(node.inputs[1].shape[2:4])
    geometry = _transpose_geometry(a, x_shape[1:3], kernel)
    # Full transposed convolution (no crop), then zero-fill the end and slice [begin, begin+o):
    # output_padding and a negative end crop both read zeros past the computed rows.
    x_nchw = L.op("Transpose", [ins[0]], perm=TO_NCHW)[0]
    y = L.op("ConvTranspose", [x_nchw, ins[1]], kernel_shape=list(kernel),
             strides=list(a["strides"]), dilations=list(a["dilations"]), group=int(a["group"]),
             pads=[0, 0, 0, 0])[0]
    full = [(x_shape[1 + ax] - 1) * a["strides"][ax] + (kernel[ax] - 1) * a["dilations"][ax] + 1
            for ax in range(2)]
    fill = [max(begin + o - full[ax], 0) for ax, (o, begin, _) in enumerate(geometry)]
    if any(fill):
        pads = L.const(np.array([0, 0, 0, 0, 0, 0, fill[0], fill[1]], np.int64), "pads")
        y = L.op("Pad", [y, pads], mode="constant")[0]
    starts = [g[1] for g in geometry]
    ends = [g[1] + g[0] for g in geometry]
    if starts != [0, 0] or [full[ax] + fill[ax] for ax in range(2)] != ends:
        y = L.op("Slice", [y, L.const(np.array(starts, np.int64), "starts"),
                           L.const(np.array(ends, np.int64), "ends"),
                           L.const(np.array([2, 3], np.int64), "axes")])[0]
    if len(ins) > 2 and ins[2] is not None:
        y = L.op("Transpose", [y], perm=TO_NHWC)[0]
        L.op("Add", [y, ins[2]], outputs=[outs[0]])  # bias everywhere, as TF's BiasAdd
    else:
        L.op("Transpose", [y], outputs=[outs[0]], perm=TO_NHWC)


DIALECT_OPS.register(OpSchema(
    "ConvTranspose", "nhwc",
    "Transposed 2-D convolution of an NHWC tensor. W keeps the ONNX layout (C, M/group, kH, kW); "
    "optional B (M). With full = (i-1)*s + (k-1)*d + 1 + output_padding: VALID gives o = full; "
    "SAME gives o = i*s (TF conv2d_transpose), cropping floor(max(full-o,0)/2) at the start and "
    "the rest at the end, zero-filling the end when full < o. output_shape [oH, oW] sets o.",
    [_x(), _weight("(C, M/group, kH, kW)"), _bias()],
    [Port("Y")],
    {
        "kernel_shape": KERNEL_FROM_W,
        "strides": STRIDES,
        "dilations": DILATIONS,
        "group": Attr(A.INT, default=1),
        "output_padding": Attr(A.INTS, default=[0, 0], doc="[h, w] zeros added after the full "
                               "output before cropping; each < its stride or dilation"),
        "output_shape": Attr(A.INTS, doc="[oH, oW]: the output's spatial size"),
        "pads": PADS_STRING,
    },
    layout=LayoutClass.IMPLICIT, infer=_infer_conv_transpose, lower=_lower_conv_transpose,
    source=SOURCE + " + ONNX ConvTranspose-11",
))


# -- Dense -------------------------------------------------------------------------------------


def _infer_dense(ctx: InferContext) -> list:
    x = ctx.shape(0)
    w = ctx.shape(1)
    if len(x) not in (2, 4):
        raise RuleError("rank", "Dense input X must be (N, K) or (N, H, W, C)", "rank 2 or 4",
                        f"rank {len(x)} {fmt(x)}")
    expected = "(M,K)" if len(x) == 2 else f"(M,{x[1]},{x[2]},{x[3]})"
    if len(w) != len(x) or not all(same_dim(a, b) for a, b in zip(w[1:], x[1:])):
        raise RuleError("weight-shape", "Dense W must be (M, K) for X (N, K), or (M, H, W, C) "
                        "matching X (N, H, W, C)", expected, fmt(w))
    if ctx.has(2):
        check_vector(ctx, 2, "B", w[0])
    return [(x[0], w[0])]


def _lower_dense(node, L, ins, outs) -> None:
    x, w = ins[0], ins[1]
    if len(node.inputs[0].shape) == 4:
        m = node.inputs[1].shape[0]
        x = L.op("Flatten", [x], axis=1)[0]
        w = L.op("Reshape", [w, L.const(np.array([m, -1], np.int64), "shape")])[0]
    bias = [ins[2]] if len(ins) > 2 and ins[2] is not None else []
    L.op("Gemm", [x, w, *bias], outputs=[outs[0]], transB=1)


DIALECT_OPS.register(OpSchema(
    "Dense", "nhwc",
    "Fully connected: Y = flatten(X) . flatten(W)^T + B. X (N, K) with W (M, K), or X "
    "(N, H, W, C) with W (M, H, W, C) (rows in H, W, C order). Optional B (M). Y (N, M). "
    "No attributes.",
    [Port("X", doc="(N, K) or (N, H, W, C)"), _weight("(M, K) or (M, H, W, C)"), _bias()],
    [Port("Y", doc="(N, M)")],
    {},
    layout=LayoutClass.IMPLICIT, infer=_infer_dense, lower=_lower_dense, source=SOURCE,
))


# -- Gemm --------------------------------------------------------------------------------------


def _infer_gemm(ctx: InferContext) -> list:
    a, b, c = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    for port, shape in (("A", a), ("B", b)):
        if len(shape) != 2:
            raise RuleError("rank", f"Gemm input '{port}' must be 2-D", "rank 2", fmt(shape))
    m, k = (a[1], a[0]) if ctx.attr("transA") else (a[0], a[1])
    kb, n = (b[1], b[0]) if ctx.attr("transB") else (b[0], b[1])
    if not same_dim(k, kb):
        raise RuleError("shape", "Gemm inner dimensions of A' and B' differ", k, kb)
    if len(c) > 2 or not all(
        d == 1 or same_dim(d, full) for d, full in zip(reversed(c), (n, m))
    ):
        raise RuleError("shape", "Gemm C must broadcast (one direction) to (M, N)",
                        fmt((m, n)), fmt(c))
    return [(m, n)]


def _lower_gemm(node, L, ins, outs) -> None:
    a = attrs_of(node)
    L.op("Gemm", ins[:3], outputs=[outs[0]], alpha=float(a["alpha"]), beta=float(a["beta"]),
         transA=int(a["transA"]), transB=int(a["transB"]))


DIALECT_OPS.register(OpSchema(
    "Gemm", "nhwc",
    "Y = alpha * A' . B' + beta * C (standard ONNX Gemm; A' = A^T if transA, B' = B^T if "
    "transB). A, B 2-D; C broadcasts one-directionally to (M, N). C is required, as in the "
    "dialect spec. Used only where Dense does not fit.",
    [Port("A"), Port("B"), Port("C")],
    [Port("Y")],
    {
        "alpha": Attr(A.FLOAT, default=1.0),
        "beta": Attr(A.FLOAT, default=1.0),
        "transA": Attr(A.INT, default=0, allowed=(0, 1)),
        "transB": Attr(A.INT, default=0, allowed=(0, 1)),
    },
    layout=LayoutClass.TERMINATE, infer=_infer_gemm, lower=_lower_gemm, source=SOURCE,
))


# -- MatMul ------------------------------------------------------------------------------------


def _infer_matmul(ctx: InferContext) -> list:
    a, b = list(ctx.shape(0)), list(ctx.shape(1))
    if not a or not b:
        raise RuleError("rank", "MatMul operands must have rank >= 1", ">= 1",
                        f"{fmt(a)}, {fmt(b)}")
    a2 = [1] + a if len(a) == 1 else a
    b2 = b + [1] if len(b) == 1 else b
    if not same_dim(a2[-1], b2[-2]):
        raise RuleError("shape", "MatMul inner dimensions differ", a2[-1], b2[-2])
    batch_a, batch_b = a2[:-2], b2[:-2]
    rank = max(len(batch_a), len(batch_b))
    batch_a = [1] * (rank - len(batch_a)) + batch_a
    batch_b = [1] * (rank - len(batch_b)) + batch_b
    batch = []
    for da, db in zip(batch_a, batch_b):
        if da == 1 or db == 1 or same_dim(da, db):
            batch.append(db if da == 1 else da)
        else:
            raise RuleError("shape", "MatMul batch dimensions do not broadcast",
                            fmt(batch_a), fmt(batch_b))
    out = batch + ([a2[-2]] if len(a) > 1 else []) + ([b2[-1]] if len(b) > 1 else [])
    return [tuple(out)]


def _lower_matmul(node, L, ins, outs) -> None:
    L.op("MatMul", ins[:2], outputs=[outs[0]])


DIALECT_OPS.register(OpSchema(
    "MatMul", "nhwc",
    "numpy.matmul of two tensors (batch dimensions broadcast); meant for two non-constant "
    "operands, where Dense does not apply.",
    [Port("A"), Port("B")],
    [Port("Y")],
    {},
    layout=LayoutClass.TERMINATE, infer=_infer_matmul, lower=_lower_matmul, source=SOURCE,
))
