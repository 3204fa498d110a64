"""Numpy evaluators of the spatial core ops: Conv, ConvTranspose, pooling, Resize, depth/space.

Everything is computed on NCHW float64 arrays (an NHWC input is transposed in and out), so one
implementation serves both ``data_format`` values. Output sizes and pads follow the rules of
the core op schemas and are shared with their shape inference through ``spatial_plan``.
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import InvalidAttributeError
from ..base import ceil_div, conv_transpose_axis, same_tf, valid_tf

TO_NCHW = (0, 3, 1, 2)
TO_NHWC = (0, 2, 3, 1)


def to_nchw(x: np.ndarray, data_format: str) -> np.ndarray:
    return x.transpose(TO_NCHW) if data_format == "NHWC" else x


def from_nchw(x: np.ndarray, data_format: str) -> np.ndarray:
    return x.transpose(TO_NHWC) if data_format == "NHWC" else x


def hw_axes(data_format: str) -> tuple[int, int]:
    return (1, 2) if data_format == "NHWC" else (2, 3)


# -- sizes and pads -----------------------------------------------------------------------------


def axis_plan(
    size: int, kernel: int, stride: int, dilation: int, pad_begin: int, pad_end: int,
    auto_pad: str, ceil_mode: int = 0,
) -> tuple[int, int, int]:
    """(output size, pad begin, pad end) along one spatial axis of a Conv or a pool.

    SAME_* and VALID follow TensorFlow's output sizes (ceil_mode does not apply to them);
    explicit pads use floor or ceil rounding, and with ceil a window must start inside the
    input plus its begin pad (the rule Caffe, ONNX and PyTorch share).
    """
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        out, small, large = same_tf(size, kernel, stride, dilation)
        return (out, small, large) if auto_pad == "SAME_UPPER" else (out, large, small)
    if auto_pad == "VALID":
        return valid_tf(size, kernel, stride, dilation), 0, 0
    span = size + pad_begin + pad_end - (kernel - 1) * dilation - 1
    if ceil_mode:
        out = ceil_div(span, stride) + 1
        if (out - 1) * stride >= size + pad_begin:
            out -= 1
    else:
        out = span // stride + 1
    return out, pad_begin, pad_end


def spatial_plan(attrs: dict, in_hw: Sequence[int | None], pooling: bool = False):
    """Per spatial axis (output size or None, pad begin, pad end) for Conv/pool attributes."""
    kernel = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides") or [1, 1])
    dilations = list(attrs.get("dilations") or [1, 1])
    pads = list(attrs.get("pads") or [0, 0, 0, 0])
    if len(kernel) != 2 or len(strides) != 2 or len(dilations) != 2 or len(pads) != 4:
        raise InvalidAttributeError(
            f"kernel_shape/strides/dilations need 2 values and pads 4, found {kernel}, "
            f"{strides}, {dilations}, {pads}"
        )
    auto_pad = attrs.get("auto_pad", "NOTSET")
    ceil_mode = int(attrs.get("ceil_mode", 0)) if pooling else 0
    plan: list[tuple[int | None, int, int]] = []
    for axis in range(2):
        size = in_hw[axis]
        if size is None:
            plan.append((None, pads[axis], pads[axis + 2]))
            continue
        plan.append(axis_plan(size, kernel[axis], strides[axis], dilations[axis], pads[axis],
                              pads[axis + 2], auto_pad, ceil_mode))
    return plan


# -- convolution --------------------------------------------------------------------------------


def conv_weight_oihw(w: np.ndarray, layout: str) -> np.ndarray:
    return w.transpose(3, 2, 0, 1) if layout == "HWIO" else w


def conv_transpose_weight_iohw(w: np.ndarray, layout: str) -> np.ndarray:
    # HWOI (kH, kW, M/group, C) -> IOHW (C, M/group, kH, kW)
    return w.transpose(3, 2, 0, 1) if layout == "HWOI" else w


def _pad_hw(x: np.ndarray, hb: int, wb: int, he: int, we: int, value: float) -> np.ndarray:
    """Pad (positive) or crop (negative) the two last axes."""
    x = x[:, :, max(-hb, 0): x.shape[2] - max(-he, 0), max(-wb, 0): x.shape[3] - max(-we, 0)]
    widths = ((0, 0), (0, 0), (max(hb, 0), max(he, 0)), (max(wb, 0), max(we, 0)))
    return np.pad(x, widths, constant_values=value)


def conv(attrs: dict, x: np.ndarray, w: np.ndarray, b: np.ndarray | None) -> np.ndarray:
    fmt = attrs["data_format"]
    xc = to_nchw(x, fmt).astype(np.float64)
    wk = conv_weight_oihw(w, attrs["weight_layout"]).astype(np.float64)
    group = int(attrs["group"])
    n, c, h, wd = xc.shape
    m, cg, kh, kw = wk.shape
    if cg * group != c or m % group:
        raise InvalidAttributeError(
            f"Conv weight {list(w.shape)} does not fit {c} input channels in {group} group(s)"
        )
    (oh, hb, he), (ow, wb, we) = spatial_plan(attrs, (h, wd))
    sh, sw = attrs["strides"]
    dh, dw = attrs["dilations"]
    need_h = (oh - 1) * sh + (kh - 1) * dh + 1
    need_w = (ow - 1) * sw + (kw - 1) * dw + 1
    xp = _pad_hw(xc, hb, wb, max(need_h - h - hb, he), max(need_w - wd - wb, we), 0.0)
    xg = xp.reshape(n, group, cg, xp.shape[2], xp.shape[3])
    wg = wk.reshape(group, m // group, cg, kh, kw)
    out = np.zeros((n, group, m // group, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xg[:, :, :, i * dh: i * dh + (oh - 1) * sh + 1: sh,
                       j * dw: j * dw + (ow - 1) * sw + 1: sw]
            # one matrix product per group (BLAS): the einsum's sums, several times faster
            out += np.matmul(wg[None, :, :, :, i, j],
                             patch.reshape(n, group, cg, oh * ow)).reshape(out.shape)
    out = out.reshape(n, m, oh, ow)
    if b is not None:
        out += b.astype(np.float64).reshape(1, m, 1, 1)
    return from_nchw(out, fmt).astype(x.dtype)


def conv_transpose_plan(attrs: dict, size: int, axis: int, kernel: int) -> tuple[int, int, int]:
    """``conv_transpose_axis`` of spatial axis ``axis`` (0: H, 1: W) for the op's attributes."""
    pads = list(attrs.get("pads") or [0, 0, 0, 0])
    shape = attrs.get("output_shape")
    return conv_transpose_axis(size, kernel, attrs["strides"][axis], attrs["dilations"][axis],
                               attrs["output_padding"][axis], pads[axis], pads[axis + 2],
                               attrs["auto_pad"],
                               None if shape is None else int(list(shape)[-2:][axis]))


def conv_transpose(attrs: dict, x: np.ndarray, w: np.ndarray, b: np.ndarray | None):
    fmt = attrs["data_format"]
    xc = to_nchw(x, fmt).astype(np.float64)
    wk = conv_transpose_weight_iohw(w, attrs["weight_layout"]).astype(np.float64)
    group = int(attrs["group"])
    n, c, h, wd = xc.shape
    cw, mg, kh, kw = wk.shape
    if cw != c or c % group:
        raise InvalidAttributeError(
            f"ConvTranspose weight {list(w.shape)} does not fit {c} input channels"
        )
    m = mg * group
    sh, sw = attrs["strides"]
    dh, dw = attrs["dilations"]
    oph, opw = attrs["output_padding"]
    fh = (h - 1) * sh + (kh - 1) * dh + 1 + oph
    fw = (wd - 1) * sw + (kw - 1) * dw + 1 + opw
    full = np.zeros((n, group, mg, fh, fw))
    xg = xc.reshape(n, group, c // group, h, wd)
    wg = wk.reshape(group, c // group, mg, kh, kw)
    for i in range(kh):
        for j in range(kw):
            contrib = np.einsum("ngchw,gcm->ngmhw", xg, wg[:, :, :, i, j])
            full[:, :, :, i * dh: i * dh + (h - 1) * sh + 1: sh,
                 j * dw: j * dw + (wd - 1) * sw + 1: sw] += contrib
    full = full.reshape(n, m, fh, fw)
    (oh, hb, he) = conv_transpose_plan(attrs, h, 0, kh)
    (ow, wb, we) = conv_transpose_plan(attrs, wd, 1, kw)
    out = _pad_hw(full, -hb, -wb, -he, -we, 0.0)
    if out.shape[2:] != (oh, ow):
        raise InvalidAttributeError(f"ConvTranspose output {out.shape[2:]} != {(oh, ow)}")
    if b is not None:
        out = out + b.astype(np.float64).reshape(1, m, 1, 1)
    return from_nchw(out, fmt).astype(x.dtype)


# -- pooling ------------------------------------------------------------------------------------


def pool(attrs: dict, x: np.ndarray, kind: str) -> np.ndarray:
    """MaxPool or AveragePool with every padding/rounding/counting convention."""
    fmt = attrs["data_format"]
    xc = to_nchw(x, fmt).astype(np.float64)
    n, c, h, wd = xc.shape
    kh, kw = attrs["kernel_shape"]
    sh, sw = attrs["strides"]
    dh, dw = attrs.get("dilations") or [1, 1]
    (oh, hb, he), (ow, wb, we) = spatial_plan(attrs, (h, wd), pooling=True)
    need_h = (oh - 1) * sh + (kh - 1) * dh + 1
    need_w = (ow - 1) * sw + (kw - 1) * dw + 1
    extra_h = max(need_h - h - hb, he)
    extra_w = max(need_w - wd - wb, we)
    real = _pad_hw(np.ones((1, 1, h, wd)), hb, wb, extra_h, extra_w, 0.0)
    # Cells inside [-pad_begin, size + pad_end): what count_include_pad=1 divides by.
    extent = np.zeros_like(real)
    extent[:, :, : hb + h + he, : wb + wd + we] = 1.0
    fill = -np.inf if kind == "max" else 0.0
    xp = _pad_hw(xc, hb, wb, extra_h, extra_w, fill)
    acc = np.full((n, c, oh, ow), -np.inf) if kind == "max" else np.zeros((n, c, oh, ow))
    count = np.zeros((1, 1, oh, ow))
    counter = extent if int(attrs.get("count_include_pad", 0)) else real
    for i in range(kh):
        for j in range(kw):
            rows = slice(i * dh, i * dh + (oh - 1) * sh + 1, sh)
            cols = slice(j * dw, j * dw + (ow - 1) * sw + 1, sw)
            if kind == "max":
                acc = np.maximum(acc, xp[:, :, rows, cols])
            else:
                acc += xp[:, :, rows, cols]
                count += counter[:, :, rows, cols]
    if kind != "max":
        acc = acc / np.maximum(count, 1.0)
    return from_nchw(acc, fmt).astype(x.dtype)


def global_pool(attrs: dict, x: np.ndarray, kind: str) -> np.ndarray:
    axes = hw_axes(attrs["data_format"])
    fn = np.max if kind == "max" else np.mean
    return fn(x.astype(np.float64), axis=axes, keepdims=True).astype(x.dtype)


# -- Resize -------------------------------------------------------------------------------------


def _source_coords(mode: str, out_len: int, in_len: int, scale: float) -> np.ndarray:
    x = np.arange(out_len, dtype=np.float64)
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if out_len > 1 else np.zeros_like(x)
    if mode == "align_corners":
        return x * (in_len - 1) / (out_len - 1) if out_len > 1 else np.zeros_like(x)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_half_pixel_for_nn":
        return (x + 0.5) / scale
    raise InvalidAttributeError(f"unknown coordinate_transformation_mode '{mode}'")


def _nearest_index(coords: np.ndarray, rule: str, in_len: int) -> np.ndarray:
    if rule == "floor":
        idx = np.floor(coords)
    elif rule == "ceil":
        idx = np.ceil(coords)
    else:
        frac = coords - np.floor(coords)
        half_down = np.floor(coords) if rule == "round_prefer_floor" else np.ceil(coords)
        idx = np.where(np.isclose(frac, 0.5, rtol=0, atol=1e-9), half_down, np.round(coords))
    return np.clip(idx, 0, in_len - 1).astype(np.int64)


def resize_output_shape(attrs: dict, shape: Sequence[int | None]) -> tuple:
    scales, sizes = attrs.get("scales"), attrs.get("sizes")
    if (scales is None) == (sizes is None):
        raise InvalidAttributeError("Resize needs exactly one of 'scales' and 'sizes'")
    given = scales if scales is not None else sizes
    assert given is not None  # exactly one of them (checked above)
    if len(given) != len(shape):
        raise InvalidAttributeError(f"Resize scales/sizes must list {len(shape)} axes")
    if sizes is not None:
        return tuple(int(s) for s in sizes)
    assert scales is not None  # the one given
    return tuple(None if d is None else int(np.floor(d * float(s))) for d, s in zip(shape, scales))


def resize_coords(attrs: dict, axis: int, in_len: int, out_len: int) -> np.ndarray | None:
    """Where each output position of ``axis`` samples the input (None: the axis is kept)."""
    scales = attrs.get("scales")
    scale = float(scales[axis]) if scales is not None else out_len / in_len
    if in_len == out_len and scale == 1.0:
        return None
    return _source_coords(attrs["coordinate_transformation_mode"], out_len, in_len, scale)


def nearest_indices(attrs: dict, coords: np.ndarray, in_len: int) -> np.ndarray:
    """The input index each nearest-mode sample reads."""
    return _nearest_index(coords, attrs["nearest_mode"], in_len)


def resize(attrs: dict, x: np.ndarray) -> np.ndarray:
    out_shape = resize_output_shape(attrs, x.shape)
    y = x.astype(np.float64)
    for axis, (in_len, out_len) in enumerate(zip(x.shape, out_shape)):
        coords = resize_coords(attrs, axis, in_len, out_len)
        if coords is None:
            continue
        if attrs["mode"] == "nearest":
            y = np.take(y, nearest_indices(attrs, coords, in_len), axis=axis)
            continue
        coords = np.clip(coords, 0, in_len - 1)
        lo = np.floor(coords).astype(np.int64)
        hi = np.minimum(lo + 1, in_len - 1)
        frac_shape = [1] * y.ndim
        frac_shape[axis] = out_len
        frac = (coords - lo).reshape(frac_shape)
        y = np.take(y, lo, axis=axis) * (1 - frac) + np.take(y, hi, axis=axis) * frac
    return y.astype(x.dtype)


# -- depth/space --------------------------------------------------------------------------------


def depth_to_space(attrs: dict, x: np.ndarray) -> np.ndarray:
    fmt = attrs["data_format"]
    bs = int(attrs["blocksize"])
    xc = to_nchw(x, fmt)
    n, c, h, w = xc.shape
    if c % (bs * bs):
        raise InvalidAttributeError(f"DepthToSpace: {c} channels are not divisible by {bs}*{bs}")
    if attrs["mode"] == "DCR":
        t = xc.reshape(n, bs, bs, c // (bs * bs), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        t = xc.reshape(n, c // (bs * bs), bs, bs, h, w).transpose(0, 1, 4, 2, 5, 3)
    return from_nchw(t.reshape(n, c // (bs * bs), h * bs, w * bs), fmt)


def space_to_depth(attrs: dict, x: np.ndarray) -> np.ndarray:
    fmt = attrs["data_format"]
    bs = int(attrs["blocksize"])
    xc = to_nchw(x, fmt)
    n, c, h, w = xc.shape
    if h % bs or w % bs:
        raise InvalidAttributeError(f"SpaceToDepth: {h}x{w} is not divisible by block {bs}")
    t = xc.reshape(n, c, h // bs, bs, w // bs, bs).transpose(0, 3, 5, 1, 2, 4)
    return from_nchw(t.reshape(n, c * bs * bs, h // bs, w // bs), fmt)
