"""Core elementwise, linear-algebra and shape-computation ops written as standard ONNX: the
core evaluator against onnxruntime on the lowered one-node model."""
from __future__ import annotations

import numpy as np
import pytest

from tests.runtime.core_lowering_cases import Case, check_case, const, fed, ints, rand

SHAPE = (2, 3, 5, 4)
POSITIVE = {"Sqrt", "Rsqrt", "Log"}
UNARY = ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Sqrt", "Rsqrt", "Reciprocal", "Exp", "Log",
         "Square", "Softplus", "Erf", "HardSwish", "Identity", "Dropout", "Floor", "Ceil",
         "Sign"]


def _unary_input(op: str) -> np.ndarray:
    if op in POSITIVE:
        return rand(*SHAPE, low=0.05, high=9.0)
    if op == "Reciprocal":
        return rand(*SHAPE, low=0.1, high=3.0) * np.sign(rand(*SHAPE)).astype(np.float32)
    if op == "Softplus":
        return rand(*SHAPE, low=-30.0, high=30.0)
    return rand(*SHAPE, low=-8.0, high=8.0)


def _halves() -> np.ndarray:
    """Values on and off the .5 ties Round breaks to even."""
    return (np.round(rand(*SHAPE, low=-6.0, high=6.0) * 2) / 2 + rand(*SHAPE) * (
        rand(*SHAPE) > 0)).astype(np.float32)


CASES = [Case(f"{op}", op, [fed(_unary_input(op))]) for op in UNARY] + [
    Case("Round_ties_to_even", "Round", [fed(_halves())]),
    Case("Not", "Not", [fed(rand(*SHAPE) > 0)]),
    Case("Elu_default", "Elu", [fed(rand(*SHAPE))]),
    Case("Elu_alpha", "Elu", [fed(rand(*SHAPE))], {"alpha": 0.37}),
    Case("LeakyRelu_default", "LeakyRelu", [fed(rand(*SHAPE))]),
    Case("LeakyRelu_alpha", "LeakyRelu", [fed(rand(*SHAPE))], {"alpha": 0.2}),
    Case("HardSigmoid_default", "HardSigmoid", [fed(rand(*SHAPE, low=-6, high=6))]),
    Case("HardSigmoid_alpha_beta", "HardSigmoid", [fed(rand(*SHAPE, low=-6, high=6))],
         {"alpha": 0.3, "beta": 0.4}),
    Case("Clip_both", "Clip", [fed(rand(*SHAPE))], {"min": -0.5, "max": 0.75}),
    Case("Clip_min_only", "Clip", [fed(rand(*SHAPE))], {"min": -0.25}),
    Case("Clip_max_only", "Clip", [fed(rand(*SHAPE))], {"max": 0.5}),
    Case("Clip_unbounded", "Clip", [fed(rand(*SHAPE))]),
    Case("Clip_int64", "Clip", [fed(ints(*SHAPE))], {"min": -2.0, "max": 3.0}),
    Case("PRelu_last_axis", "PRelu", [fed(rand(*SHAPE)), const(rand(4))]),
    Case("PRelu_channels", "PRelu", [fed(rand(*SHAPE)), const(rand(3, 1, 1))]),
    Case("Gemm_defaults", "Gemm", [fed(rand(3, 4)), const(rand(4, 5)), const(rand(5))]),
    Case("Gemm_trans_alpha_beta", "Gemm", [fed(rand(4, 3)), const(rand(5, 4)),
                                            const(rand(3, 5))],
         {"transA": 1, "transB": 1, "alpha": 0.5, "beta": 2.0}),
    Case("Gemm_no_bias", "Gemm", [fed(rand(3, 4)), fed(rand(5, 4))], {"transB": 1}),
    Case("MatMul_batched", "MatMul", [fed(rand(2, 3, 4)), const(rand(4, 5))]),
    Case("MatMul_broadcast", "MatMul", [fed(rand(2, 1, 3, 4)), fed(rand(5, 4, 6))]),
    Case("MatMul_vector", "MatMul", [fed(rand(4)), fed(rand(3, 4, 5))]),
]

BINARY_FLOAT = ["Add", "Sub", "Mul", "Div", "Max", "Min", "SquaredDifference"]
CASES += [Case(f"{op}_broadcast", op, [fed(rand(2, 3, 4)), fed(rand(3, 1) + 3.0)])
          for op in BINARY_FLOAT]
CASES += [
    Case("Pow", "Pow", [fed(rand(2, 3, 4, low=0.1, high=3.0)), fed(rand(3, 1))]),
    Case("Div_int_truncates", "Div", [fed(ints(3, 5, low=-20, high=21)),
                                      fed(ints(5, low=1, high=6) * np.array([1, -1, 1, -1, 1]))]),
    Case("Add_int32", "Add", [fed(ints(3, 4, dtype="int32")), const(ints(4, dtype="int32"))]),
    Case("Equal", "Equal", [fed(ints(3, 4, low=0, high=3)), fed(ints(4, low=0, high=3))]),
    Case("Less", "Less", [fed(rand(2, 3, 4)), fed(rand(4))]),
    Case("Greater", "Greater", [fed(rand(2, 3, 4)), fed(rand(3, 1))]),
    Case("And", "And", [fed(rand(3, 4) > 0), fed(rand(4) > 0)]),
    Case("Or", "Or", [fed(rand(3, 4) > 0), fed(rand(3, 1) > 0)]),
    Case("Sum_three", "Sum", [fed(rand(2, 3, 4)), fed(rand(4)), fed(rand(3, 1))]),
    Case("Mean_three", "Mean", [fed(rand(2, 3, 4)), fed(rand(4)), fed(rand(3, 1))]),
    Case("Where", "Where", [fed(rand(2, 3, 4) > 0), fed(rand(3, 4)), fed(rand(2, 1, 4))]),
]

# -- shape computation ------------------------------------------------------------------------
CASES += [
    Case("Shape", "Shape", [fed(rand(2, 3, 5))]),
    Case("Size", "Size", [fed(rand(2, 3, 5))]),
    Case("Gather_negative_indices", "Gather", [fed(rand(5, 3, 4)), const(np.array([[0, -1],
                                                                               [2, -3]]))]),
    Case("Gather_negative_axis", "Gather", [fed(rand(2, 3, 7)), fed(np.array([6, 0, -2, 3]))],
         {"axis": -1}),
    Case("Cast_to_int32", "Cast", [fed(rand(3, 4, low=-9, high=9))], {"to": "int32"}),
    Case("Cast_int_to_float", "Cast", [fed(ints(3, 4))], {"to": "float32"}),
    Case("Cast_to_bool", "Cast", [fed(ints(3, 4, low=-1, high=2))], {"to": "bool"}),
    Case("ConstantOfShape_default", "ConstantOfShape", [fed(np.array([2, 3, 4]))]),
    Case("ConstantOfShape_int_value", "ConstantOfShape", [const(np.array([3, 2]))],
         {"value": np.array([7], np.int32)}),
    Case("ConstantOfShape_float_value", "ConstantOfShape", [fed(np.array([4, 1, 2]))],
         {"value": np.array(2.5, np.float32)}),
    Case("Range_float", "Range", [fed(np.array(0.5, np.float32)), fed(np.array(7.0, np.float32)),
                                  fed(np.array(0.75, np.float32))]),
    Case("Range_int_one_element", "Range", [const(np.array([9])), const(np.array([-4])),
                                            const(np.array([-3]))]),
    Case("Expand_bidirectional", "Expand", [fed(rand(3, 1)), const(np.array([2, 1, 4]))]),
    Case("Expand_int32_shape", "Expand", [fed(rand(1, 4)), const(np.array([3, 1], np.int32))]),
    Case("Tile", "Tile", [fed(rand(2, 3)), const(np.array([3, 2]))]),
    Case("Tile_fed_repeats", "Tile", [fed(rand(2, 1, 3)), fed(np.array([1, 4, 2]))]),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_lowered_op_matches_the_core_evaluator(case):
    check_case(case)
