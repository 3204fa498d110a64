"""Elementwise converters: activations, arithmetic with broadcasting, Clip, softmax family."""
from __future__ import annotations

import numpy as np
import onnx

from .context import NodeCtx, flag
from .registry import REGISTRY

_UNARY = ("Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Sqrt", "Reciprocal", "Exp", "Log",
          "Softplus", "Erf", "HardSwish", "Floor", "Ceil", "Round", "Sign", "Not")


@REGISTRY.register(*_UNARY, emits={op: (op,) for op in _UNARY})
def unary(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Elementwise op with the same meaning in core."""
    ctx.emit(ctx.op, [ctx.require_input(0, "X")])


@REGISTRY.register("Identity", emits=("Identity",))
def identity(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Pass-through."""
    ctx.passthrough()


@REGISTRY.register("Dropout", emits=("Identity",),
                   condition="inference: training_mode absent or a constant false, the mask "
                             "output unused")
def dropout(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Inference dropout is the identity (training mode and a used mask are refused)."""
    ctx.attr("ratio")  # no effect at inference
    if ctx.version >= 12 and ctx.has_input(2):
        training = ctx.const(2)
        if training is None or bool(np.asarray(training).reshape(-1)[0]):
            ctx.refuse("training_mode must be a constant false")
    if len(ctx.proto.output) > 1 and ctx.proto.output[1] and ctx.is_used(ctx.proto.output[1]):
        ctx.refuse("the mask output is not supported")
    ctx.emit("Identity", [ctx.require_input(0, "X")], outputs=[ctx.output(0)])


@REGISTRY.register("Elu", "LeakyRelu", emits={"Elu": ("Elu",), "LeakyRelu": ("LeakyRelu",)})
def alpha_activation(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """ELU / leaky ReLU with their alpha."""
    default = 1.0 if ctx.op == "Elu" else 0.01
    ctx.emit(ctx.op, [ctx.require_input(0, "X")], {"alpha": float(ctx.attr("alpha", default))})


@REGISTRY.register("HardSigmoid", emits=("HardSigmoid",))
def hard_sigmoid(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """max(0, min(1, alpha*x + beta))."""
    ctx.emit("HardSigmoid", [ctx.require_input(0, "X")],
             {"alpha": float(ctx.attr("alpha", 0.2)), "beta": float(ctx.attr("beta", 0.5))})


@REGISTRY.register("Selu", emits=("Elu", "Mul"), converts="always")  # Mul by a scalar
def selu(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """gamma * Elu(x, alpha)."""
    alpha = float(ctx.attr("alpha", 1.67326319217681884765625))
    gamma = float(ctx.attr("gamma", 1.05070102214813232421875))
    elu = ctx.emit("Elu", [ctx.require_input(0, "X")], {"alpha": alpha}, outputs=1,
                   suffix="elu").output
    ctx.emit("Mul", [elu, ctx.constant(np.float32(gamma), "gamma")])


@REGISTRY.register("Softsign", emits=("Abs", "Add", "Div"), converts="never",
                   condition="x / (1 + |x|) divides by a tensor computed at run time")
def softsign(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """x / (1 + |x|)."""
    x = ctx.require_input(0, "X")
    magnitude = ctx.emit("Abs", [x], outputs=1, suffix="abs").output
    denom = ctx.emit("Add", [magnitude, ctx.constant(np.float32(1.0), "one")], outputs=1,
                     suffix="denominator").output
    ctx.emit("Div", [x, denom])


@REGISTRY.register("Clip", emits=("Clip",),
                   condition="the bounds are constant (attributes before opset 11; inputs "
                   "given by initializers or computed from static shapes after)")
def clip(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Clip: bounds from attributes (before opset 11) or constant inputs."""
    if ctx.version < 11:
        low, high = ctx.attr("min"), ctx.attr("max")
    else:
        low = _scalar(ctx, 1, "min")
        high = _scalar(ctx, 2, "max")
    attrs = {}
    if low is not None:
        attrs["min"] = float(low)
    if high is not None:
        attrs["max"] = float(high)
    ctx.emit("Clip", [ctx.require_input(0, "X")], attrs)


def _scalar(ctx: NodeCtx, index: int, what: str):
    if not ctx.has_input(index):
        return None
    value = ctx.require_const(index, what)
    if value.size != 1:
        ctx.refuse(f"{what} must be a scalar")
    return value.reshape(-1)[0]


@REGISTRY.register("PRelu", emits=("PRelu",))
def prelu(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """x if x >= 0 else slope*x (slope broadcast numpy-style; before opset 7 a 1-D slope of
    C values is per channel)."""
    slope = ctx.require_input(1, "slope")
    rank = ctx.rank(0)
    if ctx.version < 7 and rank is not None and rank > 2:
        value = ctx.const(1)
        if value is None:
            ctx.refuse("a pre-opset-7 slope must be constant")
        if value.ndim == 1 and value.size > 1:
            slope = ctx.constant(value.reshape((-1,) + (1,) * (rank - 2)), "slope")
    ctx.emit("PRelu", [ctx.require_input(0, "X"), slope])


_BINARY = ("Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "And", "Or")


@REGISTRY.register(*_BINARY, emits={op: (op,) for op in _BINARY})
def binary(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Binary op with numpy broadcasting (legacy axis-broadcast refused unless equivalent)."""
    _check_legacy_broadcast(ctx)
    ctx.emit(ctx.op, [ctx.require_input(0, "A"), ctx.require_input(1, "B")])


def _check_legacy_broadcast(ctx: NodeCtx) -> None:
    """Before opset 7, broadcast=1 aligned B at ``axis`` instead of at the end."""
    if ctx.version >= 7 or not int(ctx.attr("broadcast", 0)) or ctx.attr("axis") is None:
        return
    ra, rb = ctx.rank(0), ctx.rank(1)
    axis = int(ctx.attr("axis"))
    if ra is None or rb is None:
        ctx.refuse("legacy broadcast with an axis needs known ranks")
    if axis < 0:
        axis += ra
    if axis != ra - rb:
        ctx.refuse(f"legacy broadcast along axis {axis} is not numpy broadcasting")


@REGISTRY.register("Max", "Min", emits={"Max": ("Max", "Identity"), "Min": ("Min", "Identity")})
def variadic_extreme(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Max / Min of any number of inputs, as a chain of binary core ops."""
    inputs = [v for v in ctx.inputs() if v is not None]
    if not inputs:
        ctx.refuse("no inputs")
    if len(inputs) == 1:
        ctx.emit("Identity", inputs)
        return
    acc = inputs[0]
    for k, v in enumerate(inputs[1:-1], start=1):
        acc = ctx.emit(ctx.op, [acc, v], outputs=1, suffix=f"step{k}").output
    ctx.emit(ctx.op, [acc, inputs[-1]])


@REGISTRY.register("Sum", "Mean", emits={"Sum": ("Sum",), "Mean": ("Mean",)})
def variadic_sum(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Sum / Mean of any number of inputs."""
    inputs = [v for v in ctx.inputs() if v is not None]
    if not inputs:
        ctx.refuse("no inputs")
    ctx.emit(ctx.op, inputs)


@REGISTRY.register("Where", emits=("Where",))
def where(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """numpy.where."""
    ctx.emit("Where", [ctx.require_input(i, n) for i, n in enumerate(("condition", "X", "Y"))])


@REGISTRY.register("Softmax", "LogSoftmax", emits={
    "Softmax": ("Softmax", "Flatten", "Reshape", "Shape"),
    "LogSoftmax": ("LogSoftmax", "Flatten", "Reshape", "Shape")})
def softmax(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """Softmax along one axis; before opset 13 the input is coerced to 2-D at ``axis``."""
    x = ctx.require_input(0, "X")
    rank = ctx.rank(0)
    if rank == 0:
        raise ctx.invalid("the input is a scalar; "
                                "softmax needs an axis (rank >= 1)")
    if ctx.version >= 13:
        axis = int(ctx.attr("axis", -1))
        if rank is not None and not -rank <= axis < rank:
            raise ctx.invalid_attribute(
                f"axis {axis} is out of range for rank {rank}")
        ctx.emit(ctx.op, [x], {"axis": axis})
        return
    if rank is None:
        ctx.refuse("the input's rank is unknown (needed for the pre-13 2-D coercion)")
    axis = int(ctx.attr("axis", 1))
    if axis < 0:
        axis += rank
    if not 0 <= axis <= rank:
        ctx.refuse(f"axis {ctx.attr('axis')} is out of range for rank {rank}")
    if axis == rank:
        ctx.refuse("axis equal to the rank (softmax over single elements) is not supported")
    if axis == rank - 1:
        # Coercing at the last axis keeps every row intact: a plain softmax on that axis.
        ctx.emit(ctx.op, [x], {"axis": rank - 1})
        return
    flat = ctx.emit("Flatten", [x], {"axis": axis}, outputs=1, suffix="coerce_2d").output
    soft = ctx.emit(ctx.op, [flat], {"axis": 1}, outputs=1, suffix=ctx.op.lower()).output
    shape = ctx.shape(0)
    if shape is not None:
        target = ctx.constant(np.array(shape, dtype=np.int64), "shape")
    else:
        target = ctx.emit("Shape", [x], outputs=1, suffix="shape").output
    ctx.emit("Reshape", [soft, target])


@REGISTRY.register("MatMul", emits=("MatMul",))
def matmul(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """numpy.matmul."""
    ctx.emit("MatMul", [ctx.require_input(0, "A"), ctx.require_input(1, "B")])


@REGISTRY.register("Gemm", emits=("Gemm",))
def gemm(ctx: NodeCtx, node: onnx.NodeProto) -> None:
    """alpha * A' B' + beta * C."""
    ctx.attr("broadcast")  # before opset 7: C broadcasts one way, as numpy does for valid C
    attrs = {"alpha": float(ctx.attr("alpha", 1.0)), "beta": float(ctx.attr("beta", 1.0)),
             "transA": flag(ctx, "transA", 0), "transB": flag(ctx, "transB", 0)}
    ctx.emit("Gemm", [ctx.require_input(0, "A"), ctx.require_input(1, "B"), ctx.input(2)], attrs)
