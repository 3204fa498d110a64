"""Core data-movement ops, reductions, Softmax and ArgMax written as standard ONNX (opset 17
takes axes, pads, starts ... as inputs): the core evaluator against onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.errors import UnsupportedOpError
from tests.runtime.core_lowering_cases import Case, check_case, const, fed, ints, rand

X = rand(2, 3, 5, 4)

CASES = [
    Case("Flatten_default", "Flatten", [fed(X)]),
    Case("Flatten_axis0", "Flatten", [fed(X)], {"axis": 0}),
    Case("Flatten_negative_axis", "Flatten", [fed(X)], {"axis": -1}),
    Case("Reshape_copy_and_infer", "Reshape", [fed(X), const(np.array([0, -1, 4]))]),
    Case("Reshape_int32_shape", "Reshape", [fed(X), const(np.array([6, 20], np.int32))]),
    Case("Reshape_allowzero", "Reshape", [fed(rand(0, 3)), const(np.array([3, 0]))],
         {"allowzero": 1}),
    Case("Squeeze_negative_axes", "Squeeze", [fed(rand(2, 1, 3, 1))], {"axes": [-1, 1]}),
    Case("Unsqueeze_negative_axes", "Unsqueeze", [fed(rand(2, 3))], {"axes": [-1, 0]}),
    Case("Transpose_perm", "Transpose", [fed(X)], {"perm": [0, 2, 3, 1]}),
    Case("Transpose_reverse", "Transpose", [fed(X)]),
    Case("Concat_negative_axis", "Concat", [fed(rand(2, 3, 1)), const(rand(2, 3, 4)),
                                            fed(rand(2, 3, 2))], {"axis": -1}),
    Case("Split_three", "Split", [fed(X)], {"axis": -1, "split": [1, 2, 1]}, outputs=3),
    Case("Split_axis0", "Split", [fed(rand(5, 3))], {"split": [2, 3]}, outputs=2),
    Case("Slice_steps_and_clamps", "Slice", [fed(X)],
         {"starts": [-1, 1, 0], "ends": [-(1 << 62), 1 << 62, 5], "axes": [-1, 1, 2],
          "steps": [-2, 1, 2]}),
    Case("Slice_axes_absent", "Slice", [fed(X)], {"starts": [1, 0], "ends": [2, -1]}),
    Case("Pad_constant_value", "Pad", [fed(rand(2, 3, 4))],
         {"pads": [0, 1, 2, 1, 0, 3], "value": 1.5}),
    Case("Pad_constant_int", "Pad", [fed(ints(3, 4))], {"pads": [1, 0, 0, 2], "value": 7.0}),
    Case("Pad_negative_crops", "Pad", [fed(rand(4, 5, 6))],
         {"pads": [-1, 2, 0, 0, -2, -3], "value": -1.0}),
    Case("Pad_reflect", "Pad", [fed(rand(2, 4, 5))], {"pads": [0, 3, 1, 0, 2, 4],
                                                      "mode": "reflect"}),
    Case("Pad_edge", "Pad", [fed(rand(2, 4, 5))], {"pads": [1, 3, 0, 0, 5, 2], "mode": "edge"}),
    Case("Pad_symmetric", "Pad", [fed(rand(2, 4, 5))], {"pads": [0, 4, 1, 0, 2, 5],
                                                        "mode": "symmetric"}),
    Case("Pad_symmetric_after_crop", "Pad", [fed(rand(3, 6))], {"pads": [-1, 2, 1, -2],
                                                                "mode": "symmetric"}),
    Case("Softmax_last", "Softmax", [fed(X * 4)]),
    Case("Softmax_axis1", "Softmax", [fed(X * 4)], {"axis": 1}),
    Case("LogSoftmax_negative_axis", "LogSoftmax", [fed(X * 4)], {"axis": -3}),
    Case("ArgMax_default", "ArgMax", [fed(X)]),
    Case("ArgMax_axis_no_keepdims", "ArgMax", [fed(X)], {"axis": -2, "keepdims": 0}),
    Case("ArgMax_ties_first", "ArgMax", [fed(ints(3, 6, low=0, high=2).astype(np.float32))],
         {"axis": 1}),
]

REDUCE = ["ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd"]
for _op in REDUCE:
    CASES += [
        Case(f"{_op}_axes_keepdims", _op, [fed(X)], {"axes": [1, -1]}),
        Case(f"{_op}_axes_no_keepdims", _op, [fed(X)], {"axes": [-2], "keepdims": 0}),
        Case(f"{_op}_all_axes_no_keepdims", _op, [fed(rand(3, 4, low=0.5, high=1.5))],
             {"keepdims": 0}),
        Case(f"{_op}_all_axes_keepdims", _op, [fed(rand(3, 4, low=0.5, high=1.5))]),
        Case(f"{_op}_empty_axes", _op, [fed(X)], {"axes": []}),
    ]
CASES.append(Case("ReduceSum_int", "ReduceSum", [fed(ints(3, 4, 5))], {"axes": [0, 2]}))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_lowered_op_matches_the_core_evaluator(case):
    check_case(case)


@pytest.mark.parametrize("mode, width", [("reflect", 4), ("symmetric", 5)])
def test_pad_wider_than_one_mirror_is_refused(mode, width):
    # numpy mirrors again past the edge; one ONNX mirror cannot: refused, naming the attribute
    case = Case("wide", "Pad", [fed(rand(2, 4))], {"pads": [0, width, 0, 0], "mode": mode})
    with pytest.raises(UnsupportedOpError, match="attribute 'pads'.*more than one mirror"):
        check_case(case)
