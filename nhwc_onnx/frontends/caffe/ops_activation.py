"""Elementwise activations: ReLU (leaky), ReLU6, PReLU, ELU, Sigmoid, TanH, AbsVal, BNLL,
Power, Clip, Swish, Dropout."""
from __future__ import annotations

import numpy as np

from ...errors import InvalidModelError
from . import caffe_pb2 as pb
from .builder import CaffeBuilder, one_bottom, shape_of
from .registry import REGISTRY
from .weights import BlobSpec


def _unary(b: CaffeBuilder, layer: pb.LayerParameter, op: str, attrs=None) -> None:
    (x,) = one_bottom(b, layer)
    if len(layer.top) != 1:
        raise InvalidModelError("needs exactly 1 top")
    top = b.top_value(layer, 0, shape_of(x))
    b.node(layer, op, [x], attrs or {}, out=top)
    b.bind(layer, [top])


@REGISTRY.register("ReLU", emits=("Relu", "LeakyRelu"),
           doc="Relu, or LeakyRelu when negative_slope != 0")
def convert_relu(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    slope = float(layer.relu_param.negative_slope)
    if slope == 0.0:
        _unary(b, layer, "Relu")
    else:
        _unary(b, layer, "LeakyRelu", {"alpha": slope})


@REGISTRY.register("ReLU6", emits=("Clip",), doc="Clip(0, 6)")
def convert_relu6(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    _unary(b, layer, "Clip", {"min": 0.0, "max": 6.0})


@REGISTRY.register("Clip", emits=("Clip",), doc="Clip(min, max)")
def convert_clip(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    p = layer.clip_param
    _unary(b, layer, "Clip", {"min": float(p.min), "max": float(p.max)})


@REGISTRY.register("ELU", emits=("Elu",), doc="Elu(alpha)")
def convert_elu(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    _unary(b, layer, "Elu", {"alpha": float(layer.elu_param.alpha)})


@REGISTRY.register("Sigmoid", emits=("Sigmoid",), doc="Sigmoid")
def convert_sigmoid(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    _unary(b, layer, "Sigmoid")


@REGISTRY.register("TanH", emits=("Tanh",), doc="Tanh")
def convert_tanh(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    _unary(b, layer, "Tanh")


@REGISTRY.register("AbsVal", emits=("Abs",), doc="Abs")
def convert_absval(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    _unary(b, layer, "Abs")


@REGISTRY.register("BNLL", emits=("Softplus",), doc="Softplus: log(1 + exp(x))")
def convert_bnll(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    _unary(b, layer, "Softplus")


@REGISTRY.register("Dropout", emits=("Identity",), doc="Identity (inference)")
def convert_dropout(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    _unary(b, layer, "Identity")


@REGISTRY.register("Swish", emits=("Mul", "Sigmoid"), converts="always",
           doc="x * Sigmoid(beta * x)")
def convert_swish(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    (x,) = one_bottom(b, layer)
    shape = shape_of(x)
    beta = float(layer.swish_param.beta)
    arg = x
    if beta != 1.0:
        arg = b.node(layer, "Mul", [x, b.const(layer, np.float32(beta), "beta")], shape=shape,
                     part="beta")
    sig = b.node(layer, "Sigmoid", [arg], shape=shape, part="sigmoid")
    top = b.top_value(layer, 0, shape)
    b.node(layer, "Mul", [x, sig], out=top)
    b.bind(layer, [top])


@REGISTRY.register("Power", emits=("Mul", "Add", "Square", "Pow", "Identity"), converts="when",
           condition="power is 1, 2 or 3 (3: x*x*x within 2 float32 ulps, refused by "
                     "--strict); a square root, reciprocal or other power has no dialect form",
           doc="(shift + scale*x)^power with Mul/Add/Pow (Sqrt/Reciprocal/Square)")
def convert_power(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    p = layer.power_param
    (x,) = one_bottom(b, layer)
    shape = shape_of(x)
    power, scale, shift = float(p.power), float(p.scale), float(p.shift)
    steps: list[tuple[str, float | None]] = []
    if scale != 1.0:
        steps.append(("Mul", scale))
    if shift != 0.0:
        steps.append(("Add", shift))
    if power != 1.0:
        # x*x is exactly Caffe's pow(x, 2); other exponents keep their own op.
        named = {2.0: "Square", 0.5: "Sqrt", -1.0: "Reciprocal"}
        steps.append((named[power], None) if power in named else ("Pow", power))
    if not steps:
        steps.append(("Identity", None))
    top = b.top_value(layer, 0, shape)
    cur = x
    for i, (op, k) in enumerate(steps):
        last = i == len(steps) - 1
        if op == "Square":
            op, inputs = "Mul", [cur, cur]
        else:
            inputs = [cur] if k is None else [cur, b.const(layer, np.float32(k), op.lower())]
        if last:
            b.node(layer, op, inputs, out=top)
        else:
            cur = b.node(layer, op, inputs, shape=shape, part=op.lower())
    b.bind(layer, [top])


@REGISTRY.register("PReLU", emits=("PRelu",), converts="always",
           doc="PRelu with per-channel (or shared) slopes")
def convert_prelu(b: CaffeBuilder, layer: pb.LayerParameter) -> None:
    (x,) = one_bottom(b, layer)
    shape = shape_of(x)
    if len(shape) < 2:
        raise InvalidModelError("needs an input of rank >= 2")
    shared = bool(layer.prelu_param.channel_shared)
    channels = 1 if shared else shape[1]
    (slope,) = b.weights.blobs(layer, [BlobSpec((channels,), "slope")])
    # Broadcast the per-channel slopes over axis 1 of an N-D input.
    bshape = (1,) if shared else (1, channels) + (1,) * (len(shape) - 2)
    top = b.top_value(layer, 0, shape)
    b.node(layer, "PRelu", [x, b.const(layer, slope.reshape(bshape), "slope")], out=top)
    b.bind(layer, [top])
