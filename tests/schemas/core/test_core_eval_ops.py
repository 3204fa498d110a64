"""Elementwise, linear-algebra and tensor core-op evaluators against onnxruntime / TensorFlow."""
from __future__ import annotations

import numpy as np
import pytest

from tests.passes.core_oracles import close, eval_core, rand, run_onnx

UNARY_SAME_NAME = ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp", "Softplus", "Erf", "HardSwish",
                   "Identity", "Floor", "Ceil", "Round", "Sign", "Reciprocal"]


@pytest.mark.parametrize("op", UNARY_SAME_NAME)
def test_unary_matches_onnxruntime(op):
    x = rand(2, 3, 5, low=-3, high=3)
    x[0, 0, :3] = [0.5, -1.5, 2.5]  # Round: halves go to even
    close(eval_core(op, [x]), run_onnx(op, [x]))


def test_positive_domain_unary_and_tf_only_ops():
    import tensorflow as tf

    x = rand(3, 4, low=0.1, high=4)
    close(eval_core("Sqrt", [x]), run_onnx("Sqrt", [x]))
    close(eval_core("Log", [x]), run_onnx("Log", [x]))
    close(eval_core("Rsqrt", [x]), tf.math.rsqrt(x).numpy())
    close(eval_core("Square", [x]), tf.math.square(x).numpy())
    y = rand(1, 4)
    close(eval_core("SquaredDifference", [x, y]), tf.math.squared_difference(x, y).numpy())
    b = rand(3, 4) > 0
    close(eval_core("Not", [b]), run_onnx("Not", [b]))


@pytest.mark.parametrize("op,attrs", [
    ("Elu", {"alpha": 0.7}), ("LeakyRelu", {"alpha": 0.2}), ("LeakyRelu", {}),
    ("HardSigmoid", {"alpha": 0.3, "beta": 0.4}), ("Elu", {}),
])
def test_parametric_unary(op, attrs):
    x = rand(2, 7, low=-4, high=4)
    close(eval_core(op, [x], attrs), run_onnx(op, [x], attrs))


def test_clip_with_one_or_two_bounds():
    x = rand(3, 5, low=-8, high=8)
    f = np.float32
    close(eval_core("Clip", [x], {"min": 0.0, "max": 6.0}),
          run_onnx("Clip", [x, f(0.0), f(6.0)]))
    close(eval_core("Clip", [x], {"max": 1.5}), run_onnx("Clip", [x, None, f(1.5)]))
    close(eval_core("Clip", [x], {"min": -2.0}), run_onnx("Clip", [x, f(-2.0)]))


def test_prelu_broadcast_slope():
    x = rand(2, 3, 4, 5)
    slope = rand(3, 1, 1)
    close(eval_core("PRelu", [x, slope]), run_onnx("PRelu", [x, slope]))


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min", "Equal", "Less",
                                "Greater"])
def test_binary_broadcast(op):
    a = rand(2, 3, 1, 5)
    b = rand(3, 4, 1, low=0.5, high=2)
    if op == "Equal":
        b = np.round(b)
        a = np.round(a)
    close(eval_core(op, [a, b]), run_onnx(op, [a, b]))


def test_integer_div_truncates_and_pow():
    a = np.array([7, -7, 9, -3], np.int64)
    b = np.array([2, 2, -4, 5], np.int64)
    close(eval_core("Div", [a, b]), run_onnx("Div", [a, b]))
    x = rand(2, 3, low=0.2, high=3)
    e = rand(3, low=-2, high=2)
    close(eval_core("Pow", [x, e]), run_onnx("Pow", [x, e]))


def test_logic_variadic_and_where():
    a, b = rand(2, 3) > 0, rand(3) > 0
    close(eval_core("And", [a, b]), run_onnx("And", [a, b]))
    close(eval_core("Or", [a, b]), run_onnx("Or", [a, b]))
    xs = [rand(2, 1, 4), rand(3, 1), rand(4)]
    close(eval_core("Sum", xs), run_onnx("Sum", xs))
    close(eval_core("Mean", xs), run_onnx("Mean", xs))
    c = rand(2, 3) > 0
    x, y = rand(2, 3), rand(3)
    close(eval_core("Where", [c, x, y]), run_onnx("Where", [c, x, y]))


def test_matmul_and_gemm():
    a, b = rand(2, 3, 4), rand(4, 5)
    close(eval_core("MatMul", [a, b]), run_onnx("MatMul", [a, b]))
    a, b, c = rand(4, 3), rand(5, 4), rand(5)
    attrs = {"alpha": 0.5, "beta": 2.0, "transA": 1, "transB": 1}
    close(eval_core("Gemm", [a, b, c], attrs), run_onnx("Gemm", [a, b, c], attrs))
    close(eval_core("Gemm", [a.T, b.T]), run_onnx("Gemm", [a.T, b.T]))


# -- tensor ops -----------------------------------------------------------------------------------
def test_flatten_and_reshape():
    x = rand(2, 3, 5, 4)
    for axis in (0, 1, 2, -1, 4):
        close(eval_core("Flatten", [x], {"axis": axis}), run_onnx("Flatten", [x], {"axis": axis}))
    for shape in ([0, -1], [2, 0, 4, 5], [-1, 20], [5, 0, -1]):
        s = np.asarray(shape, np.int64)
        close(eval_core("Reshape", [x, s]), run_onnx("Reshape", [x, s]))
    z = np.zeros((2, 0, 3), np.float32)
    s = np.asarray([0, 3, 0], np.int64)
    close(eval_core("Reshape", [z, s], {"allowzero": 1}),
          run_onnx("Reshape", [z, s], {"allowzero": 1}))


def test_squeeze_unsqueeze_transpose():
    x = rand(2, 1, 5, 1)
    axes = np.asarray([1, -1], np.int64)
    close(eval_core("Squeeze", [x], {"axes": [1, -1]}), run_onnx("Squeeze", [x, axes]))
    y = rand(2, 5)
    axes = np.asarray([0, -1, 2], np.int64)
    close(eval_core("Unsqueeze", [y], {"axes": [0, -1, 2]}), run_onnx("Unsqueeze", [y, axes]))
    z = rand(2, 3, 4, 5)
    close(eval_core("Transpose", [z], {"perm": [0, 2, 3, 1]}),
          run_onnx("Transpose", [z], {"perm": [0, 2, 3, 1]}))
    close(eval_core("Transpose", [z]), run_onnx("Transpose", [z]))


def test_concat_split_gather():
    xs = [rand(2, 3, 4), rand(2, 5, 4), rand(2, 1, 4)]
    close(eval_core("Concat", xs, {"axis": -2}), run_onnx("Concat", xs, {"axis": -2}))
    x = rand(2, 9, 4)
    got = eval_core("Split", [x], {"axis": 1, "split": [2, 3, 4]}, n_out=3)
    want = run_onnx("Split", [x, np.asarray([2, 3, 4], np.int64)], {"axis": 1}, n_out=3)
    for g, w in zip(got, want):
        close(g, w)
    idx = np.asarray([[0, -1], [2, 1]], np.int64)
    close(eval_core("Gather", [x, idx], {"axis": 1}), run_onnx("Gather", [x, idx], {"axis": 1}))
    close(eval_core("Gather", [x, np.int64(-2)], {"axis": 0}),
          run_onnx("Gather", [x, np.int64(-2)], {"axis": 0}))


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([1, 0], [3, 100], [1, 3], [1, 2]),
    ([-1], [-100], [2], [-1]),
    ([5, -3], [0, 9], [1, -1], [-2, 1]),
    ([0, 2, 1, 1], [2, 3, 4, 5], None, None),
    ([2**62], [2**63 - 1], [0], [1]),
])
def test_slice(starts, ends, axes, steps):
    x = rand(2, 6, 5, 7)
    attrs = {"starts": starts, "ends": ends}
    ins = [x, np.asarray(starts, np.int64), np.asarray(ends, np.int64)]
    if axes is not None:
        attrs.update(axes=axes, steps=steps)
        ins += [np.asarray(axes, np.int64), np.asarray(steps, np.int64)]
    close(eval_core("Slice", [x], attrs), run_onnx("Slice", ins))


@pytest.mark.parametrize("mode,pads", [
    ("constant", [0, 1, 2, 0, 2, 1]), ("constant", [0, -1, 2, 1, 0, -2]),
    ("reflect", [0, 2, 1, 0, 1, 3]), ("edge", [1, 0, 2, 0, 3, 1]),
])
def test_pad(mode, pads):
    x = rand(2, 4, 5)
    attrs = {"pads": pads, "mode": mode, "value": 1.5 if mode == "constant" else 0.0}
    ins = [x, np.asarray(pads, np.int64)]
    if mode == "constant":
        ins.append(np.float32(1.5))
    close(eval_core("Pad", [x], attrs), run_onnx("Pad", ins, {"mode": mode}))


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd"])
@pytest.mark.parametrize("axes,keepdims", [([1, -1], 1), ([2], 0), (None, 1), (None, 0)])
def test_reduce(op, axes, keepdims):
    x = rand(2, 3, 4, 5, low=0.5, high=1.5)
    attrs = {"keepdims": keepdims}
    if axes is not None:
        attrs["axes"] = axes
    close(eval_core(op, [x], attrs), run_onnx(op, [x], attrs, opset=13 if op != "ReduceSum"
                                                else 11))


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("axis", [1, -1, 0])
def test_softmax(op, axis):
    x = rand(2, 3, 4, low=-5, high=5)
    close(eval_core(op, [x], {"axis": axis}), run_onnx(op, [x], {"axis": axis}))


def test_argmax_shape_size_cast():
    x = rand(2, 7, 3)
    for keep in (0, 1):
        close(eval_core("ArgMax", [x], {"axis": 1, "keepdims": keep}),
              run_onnx("ArgMax", [x], {"axis": 1, "keepdims": keep}))
    close(eval_core("Shape", [x]), run_onnx("Shape", [x]))
    close(eval_core("Size", [x]), run_onnx("Size", [x]))
    y = rand(3, 4, low=-5, high=5)
    close(eval_core("Cast", [y], {"to": "int32"}), run_onnx("Cast", [y], {"to": 6}))
    close(eval_core("Cast", [y], {"to": "int64"}), run_onnx("Cast", [y], {"to": 7}))


def test_constant_of_shape_range_expand_tile():
    from onnx import numpy_helper

    shape = np.asarray([2, 3, 4], np.int64)
    value = np.asarray([2.5], np.float32)
    close(eval_core("ConstantOfShape", [shape], {"value": value}),
          run_onnx("ConstantOfShape", [shape], {"value": numpy_helper.from_array(value)}))
    close(eval_core("ConstantOfShape", [shape]), run_onnx("ConstantOfShape", [shape]))
    for args in ((np.int64(2), np.int64(11), np.int64(3)),
                 (np.float32(1.0), np.float32(-2.0), np.float32(-0.7))):
        close(eval_core("Range", list(args)), run_onnx("Range", list(args)))
    x = rand(3, 1)
    s = np.asarray([2, 3, 4], np.int64)
    close(eval_core("Expand", [x, s]), run_onnx("Expand", [x, s]))
    r = np.asarray([2, 3], np.int64)
    close(eval_core("Tile", [x, r]), run_onnx("Tile", [x, r]))
