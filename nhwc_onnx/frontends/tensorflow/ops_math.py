"""Elementwise math, activations, reductions and matrix products."""
from __future__ import annotations

import numpy as np

from ...errors import InvalidModelError
from ...ir import Value
from .context import Refusal, TFContext
from .registry import REGISTRY
from .tfnodes import TFNode

_UNARY = {
    "Relu": "Relu", "Sigmoid": "Sigmoid", "Tanh": "Tanh", "Abs": "Abs", "Neg": "Neg",
    "Sqrt": "Sqrt", "Rsqrt": "Rsqrt", "Square": "Square", "Exp": "Exp", "Log": "Log",
    "Softplus": "Softplus", "Floor": "Floor", "Ceil": "Ceil", "Sign": "Sign",
    "Reciprocal": "Reciprocal", "Inv": "Reciprocal", "Erf": "Erf", "LogicalNot": "Not",
    "Round": "Round",
}
_BINARY = {
    "Add": "Add", "AddV2": "Add", "Sub": "Sub", "Mul": "Mul", "RealDiv": "Div",
    "Maximum": "Max", "Minimum": "Min", "Pow": "Pow", "SquaredDifference": "SquaredDifference",
    "Equal": "Equal", "Less": "Less", "Greater": "Greater", "LogicalAnd": "And",
    "LogicalOr": "Or", "Div": "Div",
}


@REGISTRY.register(*_UNARY, emits={op: (core,) for op, core in _UNARY.items()})
def convert_unary(ctx: TFContext, node: TFNode) -> list[Value]:
    """One-input elementwise op of the same meaning."""
    return [ctx.emit1(_UNARY[node.op], [ctx.input(0)])]


@REGISTRY.register(*_BINARY, emits={op: (core,) for op, core in _BINARY.items()},
                   condition={"Div": "floating-point operands (integer Div floors)"})
def convert_binary(ctx: TFContext, node: TFNode) -> list[Value]:
    """Two-input elementwise op with numpy broadcasting."""
    a, b = ctx.input(0), ctx.input(1)
    ctx.check_same_dtype(0, 1)
    if node.op == "Div" and np.dtype(a.dtype or "float32").kind in "iu":
        raise Refusal("integer Div rounds toward negative infinity; no exact core op")
    return [ctx.emit1(_BINARY[node.op], [a, b])]


@REGISTRY.register("Erfc", emits=("Erf", "Sub"))
def convert_erfc(ctx: TFContext, node: TFNode) -> list[Value]:
    """1 - erf(x) (Keras GELU). Expressed in core ops so that the passes report it together
    with every other node the dialect cannot express, instead of stopping here first."""
    erf = ctx.emit1("Erf", [ctx.input(0)], suffix="erf")
    one = ctx.constant(np.ones((), dtype=np.dtype(erf.dtype or "float32")), "one")
    return [ctx.emit1("Sub", [one, erf])]


@REGISTRY.register("AddN", emits=("Sum",), converts="always")  # inputs of one shape
def convert_add_n(ctx: TFContext, node: TFNode) -> list[Value]:
    """Sum of all inputs."""
    values = ctx.inputs()
    if len(values) == 1:
        return values
    return [ctx.emit1("Sum", values)]


@REGISTRY.register("Relu6", emits=("Clip",))
def convert_relu6(ctx: TFContext, node: TFNode) -> list[Value]:
    """min(max(x, 0), 6)."""
    return [ctx.emit1("Clip", [ctx.input(0)], {"min": 0.0, "max": 6.0})]


@REGISTRY.register("Elu", emits=("Elu",))
def convert_elu(ctx: TFContext, node: TFNode) -> list[Value]:
    """ELU with alpha 1."""
    return [ctx.emit1("Elu", [ctx.input(0)], {"alpha": 1.0})]


@REGISTRY.register("Selu", emits=("Elu", "Mul"), converts="always")  # Mul by a scalar
def convert_selu(ctx: TFContext, node: TFNode) -> list[Value]:
    """SELU: scale * ELU(x, alpha) with TF's fixed constants (as ONNX Selu converts)."""
    elu = ctx.emit1("Elu", [ctx.input(0)], {"alpha": 1.6732632423543772}, suffix="elu")
    return [ctx.emit1("Mul", [elu, ctx.constant(np.float32(1.0507009873554805), "scale")])]


@REGISTRY.register("LeakyRelu", emits=("LeakyRelu",))
def convert_leaky_relu(ctx: TFContext, node: TFNode) -> list[Value]:
    """Leaky ReLU with the node's alpha (TF default 0.2)."""
    alpha = float(ctx.attrs.float("alpha", 0.2))
    return [ctx.emit1("LeakyRelu", [ctx.input(0)], {"alpha": alpha})]


_REDUCE = {"Mean": "ReduceMean", "Sum": "ReduceSum", "Max": "ReduceMax", "Min": "ReduceMin",
           "Prod": "ReduceProd"}


@REGISTRY.register(*_REDUCE, emits={op: (core,) for op, core in _REDUCE.items()})
def convert_reduce(ctx: TFContext, node: TFNode) -> list[Value]:
    """Reduction over constant axes; keep_dims -> keepdims."""
    axes = [int(a) for a in ctx.need_const(1, "reduction axes").reshape(-1)]
    if not axes:  # TensorFlow reduces nothing; the core op would reduce everything
        return [ctx.input(0)]
    shape = ctx.input(0).shape
    rank = len(shape) if shape is not None else None
    if rank is not None and any(not -rank <= a < rank for a in axes):
        raise InvalidModelError(f"reduction axes {axes} are out of range for rank {rank}")
    if len({a % rank for a in axes} if rank else set(axes)) != len(axes):
        raise InvalidModelError(f"reduction axes {axes} repeat an axis (TensorFlow refuses "
                                "them too)")
    keep = 1 if ctx.attrs.bool("keep_dims", False) else 0
    return [ctx.emit1(_REDUCE[node.op], [ctx.input(0)], {"axes": axes, "keepdims": keep})]


@REGISTRY.register("ArgMax", emits=("ArgMax", "Cast"))
def convert_argmax(ctx: TFContext, node: TFNode) -> list[Value]:
    """Index of the maximum along a constant axis (output_type int64 or int32)."""
    axis = int(ctx.need_scalar(1, "dimension"))
    return [_argmax_as(ctx, ctx.input(0), axis)]


def _argmax_as(ctx: TFContext, x: Value, axis: int) -> Value:
    """ArgMax, cast to the node's output_type; the last node carries the TF name."""
    want = ctx.attrs.dtype("output_type", np.dtype("int64"))
    cast = want != np.dtype("int64")
    out = ctx.emit1("ArgMax", [x], {"axis": axis, "keepdims": 0},
                    suffix="argmax" if cast else None)
    if cast:
        out = ctx.emit1("Cast", [out], {"to": str(want)})
    return out


@REGISTRY.register("MatMul", emits=("MatMul", "Gemm"))
def convert_matmul(ctx: TFContext, node: TFNode) -> list[Value]:
    """2-D product; transposes become Gemm flags."""
    ctx.check_same_dtype(0, 1)
    ta = 1 if ctx.attrs.bool("transpose_a", False) else 0
    tb = 1 if ctx.attrs.bool("transpose_b", False) else 0
    a, b = ctx.input(0), ctx.input(1)
    if ta or tb:
        return [ctx.emit1("Gemm", [a, b], {"transA": ta, "transB": tb})]
    return [ctx.emit1("MatMul", [a, b])]


@REGISTRY.register("BatchMatMul", "BatchMatMulV2", "BatchMatMulV3", emits=("MatMul", "Transpose"))
def convert_batch_matmul(ctx: TFContext, node: TFNode) -> list[Value]:
    """numpy matmul; adjoints transpose the last two axes of that operand."""
    operands = []
    for i, flag in ((0, "adj_x"), (1, "adj_y")):
        v = ctx.input(i)
        if ctx.attrs.bool(flag, False):
            rank = ctx.rank(i, flag)
            perm = list(range(rank - 2)) + [rank - 1, rank - 2]
            v = ctx.emit1("Transpose", [v], {"perm": perm}, suffix=f"{flag}_transpose")
        operands.append(v)
    return [ctx.emit1("MatMul", operands)]


@REGISTRY.register("Cast", emits=("Cast",))
def convert_cast(ctx: TFContext, node: TFNode) -> list[Value]:
    """Element type conversion."""
    to = ctx.attrs.dtype("DstT")
    if to is None:
        raise Refusal("Cast without a DstT type")
    x = ctx.input(0)
    if ctx.attrs.bool("Truncate", False) and _narrows_float(x.dtype, np.dtype(to)):
        raise Refusal(f"Truncate=true drops mantissa bits from {x.dtype} to {to} instead of "
                      "rounding; Truncate=false would convert")
    if x.dtype == str(to):
        return [x]
    return [ctx.emit1("Cast", [x], {"to": str(to)})]


def _narrows_float(source: str | None, target: np.dtype) -> bool:
    """Whether a cast goes from a float type to a narrower one (where Truncate matters)."""
    if not source:
        return False
    found = np.dtype(source)
    return found.kind == "f" and target.kind == "f" and target.itemsize < found.itemsize


@REGISTRY.register("ArgMin", emits=("Neg", "ArgMax", "Cast"))
def convert_argmin(ctx: TFContext, node: TFNode) -> list[Value]:
    """ArgMax of the negation: the first minimum is the first maximum of -x."""
    axis = int(ctx.need_scalar(1, "dimension"))
    negated = ctx.emit1("Neg", [ctx.input(0)], suffix="neg")
    return [_argmax_as(ctx, negated, axis)]
