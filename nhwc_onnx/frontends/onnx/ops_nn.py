"""Convolution, pooling, normalisation and depth/space converters (2-D, NCHW)."""
from __future__ import annotations

import numpy as np
import onnx

from ..lrn import channel_window_band
from .context import NodeCtx, ints
from .registry import REGISTRY

MAX_WINDOW = (1 << 31) - 1  # kernel/stride/dilation values beyond int32 are no real model
_AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")


def _require_2d(ctx: NodeCtx, what: str = "input") -> None:
    rank = ctx.rank(0)
    if rank is None:
        ctx.refuse(f"the rank of the {what} is unknown (only 2-D spatial, rank-4 tensors convert)")
    if rank != 4:
        ctx.refuse(f"only 2-D spatial ops on rank-4 NCHW tensors convert; this {what} has "
                   f"rank {rank} ({rank - 2}-D)")


def _spatial(ctx: NodeCtx, name: str, default: list[int]) -> list[int]:
    value = ctx.attr(name)
    if value is None:
        return list(default)
    value = ints(value)
    if len(value) != len(default):
        ctx.refuse(f"attribute '{name}' has {len(value)} values, expected {len(default)}")
    return value


def _positive(ctx: NodeCtx, name: str, default: list[int]) -> list[int]:
    """Strides, dilations and kernel sizes of 0 or less are a broken model, not a refusal."""
    value = _spatial(ctx, name, default)
    if any(v < 1 for v in value):
        raise ctx.invalid_attribute(
            f"{name} {value} must all be >= 1")
    if any(v > MAX_WINDOW for v in value):
        raise ctx.invalid_attribute(
            f"{name} {value} exceed {MAX_WINDOW}; refused as "
            "absurd")
    return value


def _group(ctx: NodeCtx) -> int:
    group = int(ctx.attr("group", 1))
    if group < 1:
        raise ctx.invalid_attribute(f"group {group} must be >= 1")
    return group


def _blocksize(ctx: NodeCtx) -> int:
    size = ctx.attr("blocksize")
    if size is None or int(size) < 1:
        raise ctx.invalid_attribute(
            f"blocksize must be given and >= 1, found {size}")
    return int(size)


def _auto_pad(ctx: NodeCtx) -> str:
    mode = ctx.attr("auto_pad", "NOTSET") or "NOTSET"
    if mode not in _AUTO_PADS:
        ctx.refuse(f"auto_pad '{mode}' is not one of {', '.join(_AUTO_PADS)}")
    return mode


def _pads(ctx: NodeCtx, mode: str, dims: int = 2) -> list[int] | None:
    if mode != "NOTSET":
        return None
    pads = _spatial(ctx, "pads", [0] * (2 * dims))
    if any(p < 0 for p in pads):
        ctx.refuse(f"negative pads {pads} are not supported")
    return pads


def _kernel(ctx: NodeCtx) -> list[int]:
    if ctx.attr("kernel_shape") is not None:
        return _positive(ctx, "kernel_shape", [1, 1])
    wshape = ctx.shape(1)
    if wshape is None or len(wshape) != 4:
        ctx.refuse("kernel_shape is absent and the weight's shape is unknown")
    kernel = [int(wshape[2]), int(wshape[3])]
    if min(kernel) < 1:
        raise ctx.invalid_attribute(
            f"the weight's kernel {kernel} is empty")
    return kernel


def _is_1d(ctx: NodeCtx) -> bool:
    return ctx.rank(0) == 3


def _attrs_1d_as_2d(ctx: NodeCtx, kernel: list[int], mode: str) -> dict:
    """1-D window attributes as a 1 x k 2-D window (H = 1)."""
    pads = _pads(ctx, mode, 1)
    return {"kernel_shape": [1, kernel[0]], "strides": [1, *_positive(ctx, "strides", [1])],
            "dilations": [1, *_positive(ctx, "dilations", [1])], "auto_pad": mode,
            "pads": None if pads is None else [0, pads[0], 0, pads[1]], "data_format": "NCHW"}


def _emit_1d_as_2d(ctx: NodeCtx, op: str, inputs: list, attrs: dict, channels_out: int) -> None:
    """An op on N,C,L as Reshape to N,C,1,L, the 2-D op, Reshape back to N,C',L'. The layout
    pass stores the N,C,L map as N,L,C, so both Reshapes are free on the stored bytes."""
    shape = ctx.shape(0)
    if shape is None or any(d is None for d in shape):
        ctx.refuse("a 1-D op needs the input's static shape")
    n, c, length = (int(d) for d in shape)
    lifted = ctx.emit("Reshape", [inputs[0], ctx.constant(np.array([n, c, 1, length], np.int64),
                                                          "shape_2d")],
                      outputs=1, suffix="as_2d").output
    y = ctx.emit(op, [lifted, *inputs[1:]], attrs, outputs=1, suffix="2d").output
    ctx.emit("Reshape", [y, ctx.constant(np.array([n, channels_out, -1], np.int64),
                                         "shape_1d")], outputs=[ctx.output(0)])


def _conv_1d(ctx: NodeCtx) -> None:
    weight = ctx.require_input(1, "W")
    wshape = ctx.shape(1)
    if wshape is None or len(wshape) != 3 or any(d is None for d in wshape):
        ctx.refuse("a 1-D convolution needs its weight's static shape (M, C/group, k)")
    m, cg, k = (int(d) for d in wshape)
    kernel = _positive(ctx, "kernel_shape", [k])
    mode = _auto_pad(ctx)
    attrs = _attrs_1d_as_2d(ctx, kernel, mode)
    attrs.update({"group": _group(ctx), "weight_layout": "OIHW"})
    w2d = ctx.emit("Reshape", [weight, ctx.constant(np.array([m, cg, 1, k], np.int64),
                                                    "weight_2d")],
                   outputs=1, suffix="weight_2d").output
    _emit_1d_as_2d(ctx, "Conv", [ctx.require_input(0, "X"), w2d, ctx.input(2)], attrs, m)


@REGISTRY.register("Conv", emits=("Conv", "Reshape"))
def conv(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """2-D convolution (OIHW weights); 1-D as a 1 x k 2-D convolution."""
    if _is_1d(ctx):
        _conv_1d(ctx)
        return
    _require_2d(ctx)
    mode = _auto_pad(ctx)
    attrs = {
        "kernel_shape": _kernel(ctx), "strides": _positive(ctx, "strides", [1, 1]),
        "dilations": _positive(ctx, "dilations", [1, 1]), "group": _group(ctx),
        "pads": _pads(ctx, mode), "auto_pad": mode, "data_format": "NCHW",
        "weight_layout": "OIHW",
    }
    ctx.emit("Conv", [ctx.require_input(0, "X"), ctx.require_input(1, "W"), ctx.input(2)], attrs)


@REGISTRY.register("ConvTranspose", emits=("ConvTranspose",),
                   condition="2-D; an output_shape needs no zero-filling before the output "
                             "(with SAME_UPPER: is not larger than the full output)")
def conv_transpose(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """2-D transposed convolution (IOHW weights); output_shape resolved into explicit pads."""
    _require_2d(ctx)
    mode = _auto_pad(ctx)
    kernel = _kernel(ctx)
    strides = _positive(ctx, "strides", [1, 1])
    dilations = _positive(ctx, "dilations", [1, 1])
    out_pad = _spatial(ctx, "output_padding", [0, 0])
    if any(p < 0 for p in out_pad):
        raise ctx.invalid_attribute(
            f"output_padding {out_pad} must be >= 0")
    attrs = {
        "kernel_shape": kernel, "strides": strides, "dilations": dilations,
        "group": _group(ctx), "output_padding": out_pad, "auto_pad": mode,
        "data_format": "NCHW", "weight_layout": "IOHW",
    }
    output_shape = ctx.attr("output_shape")
    if output_shape is not None:
        output_shape = ints(output_shape)[-2:]
        attrs.update(_pads_for_output_shape(ctx, kernel, strides, dilations, out_pad,
                                            output_shape, mode))
    else:
        attrs["pads"] = _pads(ctx, mode)
    ctx.emit("ConvTranspose",
             [ctx.require_input(0, "X"), ctx.require_input(1, "W"), ctx.input(2)], attrs)


def _pads_for_output_shape(ctx, kernel, strides, dilations, out_pad, output_shape, mode):
    """ONNX: total = s*(i-1) + output_padding + (k-1)*d + 1 - out; SAME_UPPER puts the odd
    crop at the end, otherwise at the begin. A negative total (output larger than the full
    result) zero-fills at the end, which is extra output_padding."""
    shape = ctx.shape(0)
    if shape is None:
        ctx.refuse("output_shape needs the input's static shape")
    pads_b, pads_e, extra = [], [], []
    for axis in range(2):
        i, k, s, d = shape[2 + axis], kernel[axis], strides[axis], dilations[axis]
        total = s * (i - 1) + out_pad[axis] + (k - 1) * d + 1 - output_shape[axis]
        if mode == "SAME_UPPER":
            if total < 0:
                # onnxruntime zero-fills at the end, the ONNX reference at the begin.
                ctx.refuse(f"output_shape {output_shape} with SAME_UPPER is larger than the "
                           "full output: runtimes disagree where the zeros go")
            begin, end = total // 2, total - total // 2
        else:
            begin, end = total - total // 2, total // 2
        if begin < 0:
            ctx.refuse(f"output_shape {output_shape} needs zero-filling before the output")
        pads_b.append(begin)
        pads_e.append(max(end, 0))
        extra.append(out_pad[axis] + max(-end, 0))
    return {"pads": pads_b + pads_e, "output_padding": extra, "auto_pad": "NOTSET"}


def _pool_attrs(ctx: NodeCtx) -> dict:
    _require_2d(ctx)
    mode = _auto_pad(ctx)
    kernel = ctx.attr("kernel_shape")
    if kernel is None:
        ctx.refuse("kernel_shape is required")
    attrs = {
        "kernel_shape": _positive(ctx, "kernel_shape", [1, 1]),
        "strides": _positive(ctx, "strides", [1, 1]), "pads": _pads(ctx, mode),
        "auto_pad": mode, "ceil_mode": int(ctx.attr("ceil_mode", 0)), "data_format": "NCHW",
    }
    if mode == "VALID" and attrs["ceil_mode"]:
        _refuse_partial_valid_window(ctx, attrs)
    return attrs


def _refuse_partial_valid_window(ctx: NodeCtx, attrs: dict) -> None:
    """auto_pad VALID with ceil_mode 1: the ONNX spec's VALID size drops a last partial
    window, onnxruntime keeps it; refused where they differ (or the size is unknown)."""
    shape = ctx.shape(0)
    dilations = _positive(ctx, "dilations", [1, 1])
    sizes = shape[2:] if shape is not None and len(shape) == 4 else [None, None]
    for size, k, s, d in zip(sizes, attrs["kernel_shape"], attrs["strides"], dilations):
        span = (k - 1) * d + 1
        if size is None or (size >= span and (size - span) % s):
            ctx.refuse(f"{VALID_CEIL_CONDITION}: a last partial window (kernel {k}, stride "
                       f"{s}) that the ONNX spec drops and onnxruntime keeps")


VALID_CEIL_CONDITION = "auto_pad VALID only with ceil_mode 0 or whole windows"


def _pool_1d(ctx: NodeCtx, op: str, extra: dict) -> None:
    mode = _auto_pad(ctx)
    if ctx.attr("kernel_shape") is None:
        ctx.refuse("kernel_shape is required")
    attrs = _attrs_1d_as_2d(ctx, _positive(ctx, "kernel_shape", [1]), mode)
    attrs["ceil_mode"] = int(ctx.attr("ceil_mode", 0))
    attrs.update(extra)
    if op == "AveragePool" and attrs.pop("dilations") != [1, 1]:
        ctx.refuse("dilated average pooling is not supported")
    shape = ctx.shape(0)
    _emit_1d_as_2d(ctx, op, [ctx.require_input(0, "X")], attrs,
                   int(shape[1]) if shape is not None and shape[1] is not None else -1)


@REGISTRY.register("MaxPool", emits=("MaxPool", "Reshape"),
                   condition=f"the Indices output is unused; {VALID_CEIL_CONDITION}")
def max_pool(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """2-D max pooling (the Indices output is refused); 1-D as a 1 x k window."""
    if len(ctx.proto.output) > 1 and ctx.proto.output[1] and ctx.is_used(ctx.proto.output[1]):
        ctx.refuse("the Indices output is not supported")
    if _is_1d(ctx):
        _pool_1d(ctx, "MaxPool", {})
        return
    attrs = _pool_attrs(ctx)
    attrs["dilations"] = _positive(ctx, "dilations", [1, 1])
    ctx.emit("MaxPool", [ctx.require_input(0, "X")], attrs, outputs=[ctx.output(0)])


@REGISTRY.register("AveragePool", emits=("AveragePool", "Reshape"),
                   condition=f"dilations are 1; {VALID_CEIL_CONDITION}")
def average_pool(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """2-D average pooling (count_include_pad and ceil_mode kept); 1-D as a 1 x k window."""
    if _is_1d(ctx):
        _pool_1d(ctx, "AveragePool", {"count_include_pad": int(ctx.attr("count_include_pad", 0))})
        return
    attrs = _pool_attrs(ctx)
    if _positive(ctx, "dilations", [1, 1]) != [1, 1]:
        ctx.refuse("dilated average pooling is not supported; dilations [1, 1] would convert")
    attrs["count_include_pad"] = int(ctx.attr("count_include_pad", 0))
    ctx.emit("AveragePool", [ctx.require_input(0, "X")], attrs)


@REGISTRY.register("GlobalAveragePool", "GlobalMaxPool",
                   emits={"GlobalAveragePool": ("GlobalAveragePool",),
                          "GlobalMaxPool": ("GlobalMaxPool",)})
def global_pool(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Mean / max over H and W."""
    _require_2d(ctx)
    ctx.emit(ctx.op, [ctx.require_input(0, "X")], {"data_format": "NCHW"})


@REGISTRY.register("BatchNormalization", emits=("BatchNormalization",),
                   condition="inference: training_mode 0, the statistics outputs unused")
def batch_norm(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Inference batch norm along axis 1 (training mode and statistics outputs refused)."""
    if int(ctx.attr("training_mode", 0)) != 0:
        ctx.refuse("training_mode=1 is not supported (inference only); training_mode=0 would "
                   "convert")
    if ctx.version < 9 and int(ctx.attr("spatial", 1)) == 0:
        rank = ctx.rank(0)
        if rank is None or rank > 2:
            ctx.refuse("spatial=0 (per-activation statistics) is not supported; spatial=1 "
                       "would convert")
    for extra in ctx.proto.output[1:]:
        if extra and ctx.is_used(extra):
            ctx.refuse(f"training output '{extra}' is used; only inference is supported")
    ins = [ctx.require_input(i, n) for i, n in enumerate(("X", "scale", "B", "mean", "var"))]
    ctx.emit("BatchNormalization", ins,
             {"epsilon": float(ctx.attr("epsilon", 1e-5)), "axis": 1}, outputs=[ctx.output(0)])


@REGISTRY.register("SpaceToDepth", emits=("SpaceToDepth",),
                   condition="mode DCR (the only one before opset 25)")
def space_to_depth(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Blocks of H x W move into channels (mode DCR, the only one before opset 25)."""
    _require_2d(ctx)
    if ctx.attr("mode", "DCR") != "DCR":
        ctx.refuse(f"mode '{ctx.attr('mode')}' is not supported (DCR is)")
    ctx.emit("SpaceToDepth", [ctx.require_input(0, "X")],
             {"blocksize": _blocksize(ctx), "data_format": "NCHW"})


@REGISTRY.register("DepthToSpace", emits=("DepthToSpace",))
def depth_to_space(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Channels move into blocks of H x W (DCR or CRD)."""
    _require_2d(ctx)
    mode = ctx.attr("mode", "DCR")
    if mode not in ("DCR", "CRD"):
        ctx.refuse(f"mode '{mode}' is not DCR or CRD")
    ctx.emit("DepthToSpace", [ctx.require_input(0, "X")],
             {"blocksize": _blocksize(ctx), "mode": mode, "data_format": "NCHW"})


@REGISTRY.register("LRN", emits=("Mul", "Conv", "Add", "Pow", "Div"), converts="never",
                   condition="x / (bias + alpha/size * window sum of x^2)^beta divides by a "
                             "tensor computed at run time")
def lrn(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Local response normalisation across channels, as core ops: the windowed sum of squares
    is a 1x1 convolution with a banded 0/1 weight (window [c - (size-1)//2, c + size//2])."""
    _require_2d(ctx)
    shape = ctx.shape(0)
    if shape is None:
        ctx.refuse("LRN needs the input's static channel count")
    size = int(ctx.attr("size", 0))
    if size <= 0:
        ctx.refuse("size must be positive")
    alpha = float(ctx.attr("alpha", 1e-4))
    beta = float(ctx.attr("beta", 0.75))
    bias = float(ctx.attr("bias", 1.0))
    channels = int(shape[1])
    # ONNX: floor((size-1)/2) channels before, ceil((size-1)/2) after
    band = channel_window_band(channels, (size - 1) // 2, size // 2)
    x = ctx.require_input(0, "X")
    squared = ctx.emit("Mul", [x, x], outputs=1, suffix="square").output
    summed = ctx.emit("Conv", [squared, ctx.constant(band, "band")], {
        "kernel_shape": [1, 1], "strides": [1, 1], "dilations": [1, 1], "group": 1,
        "pads": [0, 0, 0, 0], "auto_pad": "NOTSET", "data_format": "NCHW",
        "weight_layout": "OIHW"}, outputs=1, suffix="window_sum").output
    scaled = ctx.emit("Mul", [summed, ctx.constant(np.float32(alpha / size), "alpha")],
                      outputs=1, suffix="scale").output
    shifted = ctx.emit("Add", [scaled, ctx.constant(np.float32(bias), "bias")],
                       outputs=1, suffix="bias").output
    denom = ctx.emit("Pow", [shifted, ctx.constant(np.float32(beta), "beta")],
                     outputs=1, suffix="pow").output
    ctx.emit("Div", [x, denom])
