"""Log, Exp (with Caffe's base/scale/shift) and MVN (mean-variance normalisation)."""
from __future__ import annotations

import math

import numpy as np

from ...errors import InvalidModelError
from ...ir import Value
from . import caffe_pb2 as pb
from .builder import CaffeBuilder, one_bottom, shape_of
from .registry import REGISTRY


def _chain(b: CaffeBuilder, layer: pb.LayerParameter, x: Value,
           steps: list[tuple[str, float | None]]) -> None:
    """Apply ``steps`` (op, constant operand or None for a unary op) in order; the last one
    writes the layer's top."""
    shape = shape_of(x)
    top = b.top_value(layer, 0, shape)
    cur = x
    for i, (op, k) in enumerate(steps):
        inputs = [cur] if k is None else [cur, b.const(layer, np.float32(k), op.lower())]
        if i == len(steps) - 1:
            b.node(layer, op, inputs, out=top)
        else:
            cur = b.node(layer, op, inputs, shape=shape, part=f"{op.lower()}{i}")
    b.bind(layer, [top])


def _log_base(layer: pb.LayerParameter, base: float) -> float:
    """ln(base), with Caffe's base -1 meaning e."""
    if base == -1.0:
        return 1.0
    if not base > 0.0 or base == 1.0:
        raise InvalidModelError(
            f"base {base} must be positive and not 1 "
            "(or -1 for e)")
    return math.log(base)


@REGISTRY.register("Log", emits=("Mul", "Add", "Log"),
                   doc="log_base(shift + scale*x): Mul, Add, Log, then Mul by 1/ln(base)")
def convert_log(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    """Caffe's order: x * scale, + shift, natural log, * (1 / ln(base)). (OpenCV's Log layer
    reads no log_param: it computes ln(x) whatever the parameters.)"""
    (x,) = one_bottom(b, layer)
    p = layer.log_param
    base_scale = 1.0 / _log_base(layer, float(p.base))
    steps: list[tuple[str, float | None]] = []
    if float(p.scale) != 1.0:
        steps.append(("Mul", float(p.scale)))
    if float(p.shift) != 0.0:
        steps.append(("Add", float(p.shift)))
    steps.append(("Log", None))
    if float(np.float32(base_scale)) != 1.0:
        steps.append(("Mul", base_scale))
    _chain(b, layer, x, steps)


@REGISTRY.register("Exp", emits=("Mul", "Exp"), converts="never",
                   condition="no dialect op computes an exponential (the ELU idiom that "
                             "converts an ONNX or TensorFlow Exp, Where(x > 0, ...), cannot be "
                             "formed from Caffe layers)",
                   doc="base^(shift + scale*x) = base^shift * exp(ln(base)*scale * x)")
def convert_exp(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    """Caffe's form: an inner scale ln(base)*scale before exp, an outer factor base^shift
    after it (each left out when it is 1)."""
    (x,) = one_bottom(b, layer)
    p = layer.exp_param
    base, scale, shift = float(p.base), float(p.scale), float(p.shift)
    log_base = _log_base(layer, base)
    inner = float(np.float32(log_base) * np.float32(scale))
    outer = 1.0 if shift == 0.0 else (math.exp(shift) if base == -1.0 else base ** shift)
    steps: list[tuple[str, float | None]] = []
    if inner != 1.0:
        steps.append(("Mul", inner))
    steps.append(("Exp", None))
    if float(np.float32(outer)) != 1.0:
        steps.append(("Mul", outer))
    _chain(b, layer, x, steps)


@REGISTRY.register("MVN", emits=("ReduceMean", "Sub"), converts="when",
                   condition="normalize_variance: false (the mean subtracted only); dividing "
                             "by the standard deviation computed at run time has no dialect "
                             "form",
                   doc="x - mean (per sample, and per channel unless across_channels), "
                       "divided by (std + eps) with normalize_variance")
def convert_mvn(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    """Caffe's MVN: the biased variance E((x - E x)^2), its square root, then eps added to
    that standard deviation: (x - mean) / (sqrt(var) + eps). (OpenCV divides by
    sqrt(var + eps) instead: the two agree only while eps is negligible.)"""
    (x,) = one_bottom(b, layer)
    shape = shape_of(x)
    p = layer.mvn_param
    first = 1 if p.across_channels else 2
    if len(shape) <= first:
        raise InvalidModelError(
            f"needs an input of rank > {first} "
            f"{'' if p.across_channels else 'without across_channels'}".rstrip())
    axes = list(range(first, len(shape)))
    kept = tuple(1 if a in axes else d for a, d in enumerate(shape))
    mean = b.node(layer, "ReduceMean", [x], {"axes": axes, "keepdims": 1}, shape=kept,
                  part="mean")
    top = b.top_value(layer, 0, shape)
    if not p.normalize_variance:
        b.node(layer, "Sub", [x, mean], out=top)
        b.bind(layer, [top])
        return
    centered = b.node(layer, "Sub", [x, mean], shape=shape, part="center")
    square = b.node(layer, "Mul", [centered, centered], shape=shape, part="square")
    var = b.node(layer, "ReduceMean", [square], {"axes": axes, "keepdims": 1}, shape=kept,
                 part="var")
    std = b.node(layer, "Sqrt", [var], shape=kept, part="std")
    shifted = b.node(layer, "Add", [std, b.const(layer, np.float32(p.eps), "eps")],
                     shape=kept, part="std_eps")
    b.node(layer, "Div", [centered, shifted], out=top)
    b.bind(layer, [top])
