"""A small range analysis: which tensors are provably >= 0 everywhere.

Used by padding normalisation: a MaxPool may read padded zeros instead of ignoring padded cells
only when its input can never be negative (then a zero never beats the window's real maximum).
The analysis is conservative: "unknown" counts as possibly negative.
"""
from __future__ import annotations

import numpy as np

from ...ir import Value

# Outputs are >= 0 whatever the input.
_ALWAYS = {"Relu", "Relu6", "Sigmoid", "Abs", "Softmax", "Exp", "Sqrt", "Square", "HardSigmoid",
           "Softplus", "Shape", "Size"}
# >= 0 when the data input (input 0) is >= 0.
_FOLLOW_FIRST = {"MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Reshape",
                 "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Slice", "Identity", "Dropout",
                 "Resize", "UpSampling2D", "SpaceToDepth", "DepthToSpace", "ReduceMean",
                 "ReduceMax", "ReduceMin", "ReduceSum", "Split", "Gather", "Tile", "Expand",
                 "Cast", "LeakyRelu", "Elu", "PRelu", "HardSwish", "Floor", "Ceil", "Round"}
# >= 0 when every input is >= 0.
_FOLLOW_ALL = {"Add", "Mul", "Sum", "Mean", "Concat", "Min", "Div", "AddBias"}

_MAX_DEPTH = 400


def is_nonnegative(value: Value) -> bool:
    """True only when ``value`` is proven >= 0 (NaN-free inputs assumed, as any converter does)."""
    return _check(value, {}, 0)


def _check(value: Value | None, memo: dict[int, bool], depth: int) -> bool:
    if value is None:
        return False
    key = id(value)
    if key in memo:
        return memo[key]
    memo[key] = False  # cycles and deep recursion: unknown
    result = depth < _MAX_DEPTH and _decide(value, memo, depth)
    memo[key] = result
    return result


def _decide(value: Value, memo: dict[int, bool], depth: int) -> bool:
    if value.is_const:
        arr = np.asarray(value.const)
        return arr.dtype.kind in "fiu" and bool(np.all(arr >= 0))
    node = value.producer()
    if node is None:
        return False
    op = node.op
    inputs = [v for v in node.inputs if v is not None]
    if op in _ALWAYS:
        return True
    if op == "Clip":
        low = node.attrs.get("min")
        if low is not None and low >= 0:
            return True
        return _check(node.input(0), memo, depth + 1)
    if op == "Max":
        return any(_check(v, memo, depth + 1) for v in inputs)
    if op == "Scale":
        return float(node.attrs.get("scale", 1.0)) >= 0 and _check(node.input(0), memo, depth + 1)
    if op == "Pad":
        value_ok = float(node.attrs.get("value", 0.0)) >= 0
        return value_ok and _check(node.input(0), memo, depth + 1)
    if op in _FOLLOW_FIRST:
        return _check(node.input(0), memo, depth + 1)
    if op in _FOLLOW_ALL:
        return bool(inputs) and all(_check(v, memo, depth + 1) for v in inputs)
    return False
