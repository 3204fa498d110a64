"""Helpers for the core -> dialect pass tests: graph building, running the dialect passes, and
brute-force numpy references of each source convention (written from the conventions'
definitions, independent of the passes under test)."""
from __future__ import annotations

import math

import numpy as np

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.ir import CORE, DIALECT, NHWC, Graph, Model, Value
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.passes.base import PassContext, PassManager
from nhwc_onnx.passes.to_dialect.pipeline import dialect_passes
from nhwc_onnx.runtime import run
from nhwc_onnx.schemas import validate

RNG = np.random.default_rng(20261122)


def rand(*shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, size=shape).astype(np.float32)


class Builder:
    """A core graph with one NHWC input; ``op`` adds a node with a static output shape."""

    def __init__(self, shape, name="x"):
        self.g = Graph("test")
        self.x = self.g.add_input(Value(name, "float32", shape, NHWC if len(shape) == 4 else None))

    def const(self, array, name="c"):
        return self.g.constant(np.asarray(array), name)

    def op(self, op, inputs, shape, name="", domain=CORE, **attrs):
        node = self.g.make_node(op, inputs, attrs, name=name or op.lower(), domain=domain)
        node.output.shape = tuple(shape)
        node.output.layout = NHWC if len(shape) == 4 else None
        return node.output

    def model(self, *outputs):
        self.g.outputs = list(outputs)
        return Model(self.g)


def convert(model: Model, **options) -> PassContext:
    """Run the dialect passes; the result must be a valid dialect model."""
    ctx = PassContext(options=ConvertOptions(**options))
    PassManager(dialect_passes()).run(model, ctx)
    issues = validate(model)
    assert not issues, "\n".join(str(i) for i in issues)
    assert all(n.domain == DIALECT for n in model.graph.nodes)
    return ctx


def convert_or_refuse(model: Model, **options) -> PassContext | None:
    try:
        return convert(model, **options)
    except UnsupportedOpError:
        return None


def run_dialect(model: Model, x: np.ndarray, name: str = "x") -> np.ndarray:
    out = run(model, {name: x})
    return out[model.graph.outputs[0].name]


def max_err(a, b) -> float:
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)))) if a.size else 0.0


# -- numpy references ---------------------------------------------------------------------------


def conv_ref(x, w_oihw, b, strides, dilations, pads, group=1):
    """Zero-padded grouped conv of NHWC x; pads (h_begin, w_begin, h_end, w_end)."""
    n, h, w, c = x.shape
    m, cg, kh, kw = w_oihw.shape
    hb, wb, he, we = pads
    xp = np.zeros((n, h + hb + he, w + wb + we, c))
    xp[:, hb:hb + h, wb:wb + w] = x
    oh = (xp.shape[1] - ((kh - 1) * dilations[0] + 1)) // strides[0] + 1
    ow = (xp.shape[2] - ((kw - 1) * dilations[1] + 1)) // strides[1] + 1
    y = np.zeros((n, oh, ow, m))
    mg = m // group
    for o in range(m):
        g = o // mg
        for i in range(kh):
            for j in range(kw):
                rows = xp[:, i * dilations[0]: i * dilations[0] + (oh - 1) * strides[0] + 1:
                          strides[0],
                          j * dilations[1]: j * dilations[1] + (ow - 1) * strides[1] + 1:
                          strides[1], g * cg:(g + 1) * cg]
                y[..., o] += rows @ w_oihw[o, :, i, j]
    if b is not None:
        y += b
    return y


def pool_ref(x, kind, kernel, strides, begins, outs, divisor_extent=None, dilations=(1, 1)):
    """Brute-force pooling: output (oy, ox) reads rows oy*s - begin + t*d (real cells only).

    AVG divides by the real cells, or with ``divisor_extent`` ((h_lo, h_hi), (w_lo, w_hi)) by the
    taps inside that extent.
    """
    n, h, w, c = x.shape
    y = np.zeros((n, outs[0], outs[1], c))
    for oy in range(outs[0]):
        rows = [oy * strides[0] - begins[0] + t * dilations[0] for t in range(kernel[0])]
        for ox in range(outs[1]):
            cols = [ox * strides[1] - begins[1] + t * dilations[1] for t in range(kernel[1])]
            rr = [r for r in rows if 0 <= r < h]
            cc = [q for q in cols if 0 <= q < w]
            cells = x[:, rr][:, :, cc].reshape(n, -1, c)
            if kind == "max":
                y[:, oy, ox] = cells.max(axis=1)
                continue
            if divisor_extent is None:
                count = len(rr) * len(cc)
            else:
                (hl, hh), (wl, wh) = divisor_extent
                count = (sum(hl <= r < hh for r in rows) * sum(wl <= q < wh for q in cols))
            y[:, oy, ox] = cells.sum(axis=1) / count
    return y


def tf_same(i, k, s, d=1):
    e = (k - 1) * d + 1
    o = math.ceil(i / s)
    total = max((o - 1) * s + e - i, 0)
    return o, total // 2, total - total // 2


def caffe_pool_out(i, k, s, p):
    """Caffe pooling: ceil rounding; the last window must start inside input + pad."""
    o = math.ceil((i + 2 * p - k) / s) + 1
    if p and (o - 1) * s >= i + p:
        o -= 1
    return o


def onnx_pool_out(i, k, s, d, pb, pe, ceil_mode):
    e = (k - 1) * d + 1
    span = i + pb + pe - e
    if ceil_mode:
        o = -(-span // s) + 1
        if (o - 1) * s >= i + pb:
            o -= 1
        return o
    return span // s + 1


__all__ = [
    "DIALECT",
    "Builder",
    "caffe_pool_out",
    "conv_ref",
    "convert",
    "convert_or_refuse",
    "max_err",
    "onnx_pool_out",
    "pool_ref",
    "rand",
    "run_dialect",
    "tf_same",
]


def conv_transpose_ref(x, w_iohw, b, strides, dilations, windows, group=1):
    """Transposed conv of NHWC x, W (C, M/group, kH, kW); ``windows`` per axis (start, length)
    into the full (uncropped) output, zeros past its end."""
    n, h, w, c = x.shape
    _, mg, kh, kw = w_iohw.shape
    m = mg * group
    cg = c // group
    fh = (h - 1) * strides[0] + (kh - 1) * dilations[0] + 1
    fw = (w - 1) * strides[1] + (kw - 1) * dilations[1] + 1
    (sh, lh), (sw, lw) = windows
    full = np.zeros((n, max(fh, sh + lh), max(fw, sw + lw), m))
    for iy in range(h):
        for ix in range(w):
            for ty in range(kh):
                for tx in range(kw):
                    oy = iy * strides[0] + ty * dilations[0]
                    ox = ix * strides[1] + tx * dilations[1]
                    for g in range(group):
                        xs = x[:, iy, ix, g * cg:(g + 1) * cg]
                        full[:, oy, ox, g * mg:(g + 1) * mg] += xs @ w_iohw[g * cg:(g + 1) * cg,
                                                                             :, ty, tx]
    y = full[:, sh:sh + lh, sw:sw + lw]
    return y + (0 if b is None else b)


def batchnorm_ref(y, scale, bias, mean, var, eps):
    return (y - mean) / np.sqrt(var + eps) * scale + bias
