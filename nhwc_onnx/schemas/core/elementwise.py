"""Core elementwise ops (numpy broadcasting) and linear algebra (MatMul, Gemm)."""
from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..base import Attr
from .define import (
    A,
    broadcast,
    core_op,
    dtype_bool,
    dtype_of_inputs,
    numpy_function,
    same_shape,
)
from .lowering import as_onnx, core_attrs, scalar_like


def _erf(x: np.ndarray) -> np.ndarray:
    return np.vectorize(math.erf, otypes=[np.float64])(x.astype(np.float64))


def _unary(fn: Callable[[np.ndarray], np.ndarray]):
    return lambda attrs, xs: np.asarray(fn(xs[0])).astype(xs[0].dtype)


# -- unary --------------------------------------------------------------------------------------
_UNARY: dict[str, Callable] = {
    "Relu": lambda x: np.maximum(x, 0),
    "Sigmoid": lambda x: 1.0 / (1.0 + np.exp(-x.astype(np.float64))),
    "Tanh": numpy_function("tanh"),
    "Abs": numpy_function("abs"),
    "Neg": numpy_function("negative"),
    "Sqrt": numpy_function("sqrt"),
    "Rsqrt": lambda x: 1.0 / np.sqrt(x.astype(np.float64)),
    "Reciprocal": lambda x: 1.0 / x.astype(np.float64),
    "Exp": numpy_function("exp"),
    "Log": numpy_function("log"),
    "Square": lambda x: x * x,
    "Softplus": lambda x: np.logaddexp(0.0, x.astype(np.float64)),
    "Erf": _erf,
    "HardSwish": lambda x: x * np.clip(x.astype(np.float64) / 6.0 + 0.5, 0.0, 1.0),
    "Identity": lambda x: x,
    "Dropout": lambda x: x,
    "Floor": numpy_function("floor"),
    "Ceil": numpy_function("ceil"),
    "Round": numpy_function("round"),  # half to even, as ONNX Round
    "Sign": numpy_function("sign"),
    "Not": numpy_function("logical_not"),
}


def _lower_rsqrt(node, L, inputs, outputs) -> None:
    # Two float32 roundings (sqrt, then 1/x) where the evaluator rounds 1/sqrt once from
    # float64: within 1 ulp of it.
    L.op("Reciprocal", L.op("Sqrt", inputs), outputs=outputs)


def _lower_square(node, L, inputs, outputs) -> None:
    L.op("Mul", [inputs[0], inputs[0]], outputs=outputs)


def _lower_identity(node, L, inputs, outputs) -> None:
    L.op("Identity", inputs, outputs=outputs)  # Dropout at inference passes its input through


_UNARY_LOWERINGS = {"Rsqrt": _lower_rsqrt, "Square": _lower_square, "Dropout": _lower_identity}
for _name, _fn in _UNARY.items():
    core_op(_name, f"Elementwise {_name} (ONNX semantics; Rsqrt = 1/sqrt, Square = x*x; Dropout "
            "and Identity pass their input through at inference).", ["X"],
            infer=same_shape, dtype=dtype_bool if _name == "Not" else dtype_of_inputs,
            evaluate=_unary(_fn), lower=_UNARY_LOWERINGS.get(_name, as_onnx()),
            elementwise=True)


def _elu(attrs, xs):
    x = xs[0].astype(np.float64)
    return np.where(x > 0, x, attrs["alpha"] * np.expm1(np.minimum(x, 0))).astype(xs[0].dtype)


def _leaky(attrs, xs):
    x = xs[0]
    return np.where(x >= 0, x, x * np.asarray(attrs["alpha"], x.dtype)).astype(x.dtype)


def _hard_sigmoid(attrs, xs):
    x = xs[0].astype(np.float64)
    return np.clip(attrs["alpha"] * x + attrs["beta"], 0.0, 1.0).astype(xs[0].dtype)


def _clip(attrs, xs):
    y = xs[0]
    if attrs.get("min") is not None:
        y = np.maximum(y, np.asarray(attrs["min"], y.dtype))
    if attrs.get("max") is not None:
        y = np.minimum(y, np.asarray(attrs["max"], y.dtype))
    return y.astype(xs[0].dtype)


def _lower_clip(node, L, inputs, outputs) -> None:
    attrs = core_attrs(node)
    bounds = [None if attrs.get(name) is None else scalar_like(L, node, 0, attrs[name], name)
              for name in ("min", "max")]
    L.op("Clip", [inputs[0], *bounds], outputs=outputs)


_ELEMENTWISE: dict[str, Any] = {"infer": same_shape, "dtype": dtype_of_inputs, "elementwise": True}
core_op("Elu", "Elementwise ELU.", ["X"], attrs={"alpha": Attr(A.FLOAT, default=1.0)},
        evaluate=_elu, lower=as_onnx("alpha"), **_ELEMENTWISE)
core_op("LeakyRelu", "Elementwise leaky ReLU.", ["X"],
        attrs={"alpha": Attr(A.FLOAT, default=0.01)}, evaluate=_leaky, lower=as_onnx("alpha"),
        **_ELEMENTWISE)
core_op("HardSigmoid", "max(0, min(1, alpha*x + beta)).", ["X"],
        attrs={"alpha": Attr(A.FLOAT, default=0.2), "beta": Attr(A.FLOAT, default=0.5)},
        evaluate=_hard_sigmoid, lower=as_onnx("alpha", "beta"), **_ELEMENTWISE)
core_op("Clip", "min(max(x, min), max); an absent bound is unbounded.", ["X"],
        attrs={"min": Attr(A.FLOAT), "max": Attr(A.FLOAT)}, evaluate=_clip, lower=_lower_clip,
        **_ELEMENTWISE)


def _infer_prelu(ctx):
    x = ctx.shape(0)
    out = broadcast(ctx, [x, ctx.shape(1)])
    ctx.require(len(out) == len(x), "broadcast", "slope must broadcast to X")
    return [x]


def _prelu(attrs, xs):
    x, slope = xs
    return np.where(x >= 0, x, x * slope).astype(x.dtype)


core_op("PRelu", "x if x >= 0 else slope*x, slope broadcast to X (unidirectional).",
        ["X", "slope"], infer=_infer_prelu, dtype=dtype_of_inputs, evaluate=_prelu,
        lower=as_onnx(), elementwise=True)


# -- binary and variadic (numpy broadcasting) -----------------------------------------------------


def _infer_broadcast(ctx):
    return [broadcast(ctx, [ctx.shape(i) for i in range(len(ctx.node.inputs))])]


def _divide(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if np.issubdtype(a.dtype, np.integer):
        return np.trunc(a.astype(np.float64) / b).astype(a.dtype)  # ONNX integer Div truncates
    return a / b


def _pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.power(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)


_BINARY: dict[str, Callable] = {
    "Add": numpy_function("add"), "Sub": numpy_function("subtract"),
    "Mul": numpy_function("multiply"), "Div": _divide,
    "Max": numpy_function("maximum"), "Min": numpy_function("minimum"), "Pow": _pow,
    "SquaredDifference": lambda a, b: (a - b) * (a - b),
    "Equal": numpy_function("equal"), "Less": numpy_function("less"),
    "Greater": numpy_function("greater"),
    "And": numpy_function("logical_and"), "Or": numpy_function("logical_or"),
}
_BOOL_RESULT = {"Equal", "Less", "Greater", "And", "Or"}


def _binary(name: str, fn: Callable):
    if name == "Pow":
        return lambda attrs, xs: fn(xs[0], xs[1])
    if name in _BOOL_RESULT:
        return lambda attrs, xs: np.asarray(fn(xs[0], xs[1]))
    return lambda attrs, xs: np.asarray(fn(xs[0], xs[1])).astype(np.result_type(xs[0], xs[1]))


def _lower_squared_difference(node, L, inputs, outputs) -> None:
    (difference,) = L.op("Sub", inputs)
    L.op("Mul", [difference, difference], outputs=outputs)  # the evaluator's two roundings


for _name, _fn in _BINARY.items():
    core_op(_name, f"Elementwise {_name} with numpy broadcasting.", ["A", "B"], outputs=("C",),
            infer=_infer_broadcast, dtype=dtype_bool if _name in _BOOL_RESULT else dtype_of_inputs,
            evaluate=_binary(_name, _fn), elementwise=True,
            lower=_lower_squared_difference if _name == "SquaredDifference" else as_onnx())


def _sum(attrs, xs):
    out = xs[0]
    for x in xs[1:]:
        out = out + x
    return np.asarray(out)


core_op("Sum", "Elementwise variadic Sum with numpy broadcasting.", ["data*"],
        infer=_infer_broadcast, dtype=dtype_of_inputs, evaluate=_sum, lower=as_onnx(),
        elementwise=True)
core_op("Mean", "Elementwise variadic Mean with numpy broadcasting.", ["data*"],
        infer=_infer_broadcast, dtype=dtype_of_inputs, elementwise=True, lower=as_onnx(),
        evaluate=lambda attrs, xs: (_sum(attrs, xs) / len(xs)).astype(xs[0].dtype))


def _dtype_where(node, in_dtypes: list) -> list:
    return [in_dtypes[1]] * len(node.outputs)


core_op("Where", "numpy.where(condition, X, Y).", ["condition", "X", "Y"],
        infer=_infer_broadcast, dtype=_dtype_where, elementwise=True, lower=as_onnx(),
        evaluate=lambda attrs, xs: np.where(xs[0], xs[1], xs[2]))


# -- linear algebra -------------------------------------------------------------------------------


def _infer_matmul(ctx):
    a, b = ctx.shape(0), ctx.shape(1)
    ctx.require(len(a) >= 1 and len(b) >= 1, "rank", "MatMul operands need rank >= 1")
    a2 = (1,) + tuple(a) if len(a) == 1 else tuple(a)
    b2 = tuple(b) + (1,) if len(b) == 1 else tuple(b)
    k1, k2 = a2[-1], b2[-2]
    ctx.require(k1 is None or k2 is None or k1 == k2, "shape", "MatMul inner dimensions differ",
                k1, k2)
    batch = broadcast(ctx, [a2[:-2], b2[:-2]]) if len(a2) > 2 or len(b2) > 2 else ()
    out = batch + (a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return [out]


def _matmul(attrs, xs):
    a, b = xs
    return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(np.result_type(a, b))


core_op("MatMul", "numpy.matmul.", ["A", "B"], infer=_infer_matmul, dtype=dtype_of_inputs,
        evaluate=_matmul, lower=as_onnx())


def _infer_gemm(ctx):
    a, b = ctx.shape(0), ctx.shape(1)
    ctx.require(len(a) == 2 and len(b) == 2, "rank", "Gemm operands must be 2-D")
    m, k1 = (a[1], a[0]) if ctx.attrs["transA"] else a
    k2, n = (b[1], b[0]) if ctx.attrs["transB"] else b
    ctx.require(k1 is None or k2 is None or k1 == k2, "shape", "Gemm inner dimensions differ",
                k1, k2)
    if ctx.has(2):
        broadcast(ctx, [(m, n), ctx.shape(2)])
    return [(m, n)]


_GEMM_BLOCK = 1 << 22  # elements of B widened to float64 at a time


def _gemm(attrs, xs):
    a, b = xs[0], xs[1]
    c = xs[2] if len(xs) > 2 else None
    a64 = a.astype(np.float64).T if attrs["transA"] else a.astype(np.float64)
    bt = b.T if attrs["transB"] else b
    # B widened to float64 a block of result columns at a time: a fully connected layer's
    # weight would otherwise cost a float64 copy eight bytes an element (and page faults).
    y = np.empty((a64.shape[0], bt.shape[1]))
    step = max(1, _GEMM_BLOCK // max(bt.shape[0], 1))
    for j in range(0, bt.shape[1], step):
        y[:, j:j + step] = a64 @ bt[:, j:j + step].astype(np.float64)
    y = attrs["alpha"] * y
    if c is not None:
        y = y + attrs["beta"] * c.astype(np.float64)
    return y.astype(a.dtype)


core_op("Gemm", "alpha * A' . B' + beta * C (ONNX Gemm).", ["A", "B", "C?"], attrs={
    "alpha": Attr(A.FLOAT, default=1.0), "beta": Attr(A.FLOAT, default=1.0),
    "transA": Attr(A.INT, default=0, allowed=(0, 1)),
    "transB": Attr(A.INT, default=0, allowed=(0, 1))},
    infer=_infer_gemm, dtype=dtype_of_inputs, evaluate=_gemm,
    lower=as_onnx("alpha", "beta", "transA", "transB"))
