"""Elementwise and linear-algebra converters: onnxruntime on the source model is the oracle."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.frontends.onnx.onnx_helpers import assert_matches_ort, make_model

SHAPE = [2, 3, 7, 5]


@pytest.mark.parametrize("op", ["Relu", "Sigmoid", "Tanh", "Abs", "Neg", "Exp", "Erf", "Floor",
                                "Ceil", "HardSwish", "Softplus", "Softsign", "Selu", "Identity"])
def test_unary(op):
    model = make_model([helper.make_node(op, ["x"], ["y"])], [("x", SHAPE)], [("y", SHAPE)],
                       opset=14)
    assert_matches_ort(model)


@pytest.mark.parametrize("op", ["Sqrt", "Log", "Reciprocal"])
def test_unary_positive(op):
    model = make_model([helper.make_node(op, ["x"], ["y"])], [("x", SHAPE)], [("y", SHAPE)])
    x = np.random.default_rng(1).uniform(0.5, 3, SHAPE).astype(np.float32)
    assert_matches_ort(model, {"x": x})


@pytest.mark.parametrize("op,attrs", [("Elu", {"alpha": 0.7}), ("LeakyRelu", {"alpha": 0.3}),
                                      ("HardSigmoid", {"alpha": 0.3, "beta": 0.4})])
def test_alpha_activations(op, attrs):
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", SHAPE)],
                       [("y", SHAPE)])
    assert_matches_ort(model)


def test_prelu_per_channel():
    slope = np.array([0.1, -0.2, 0.3], np.float32).reshape(3, 1, 1)
    model = make_model([helper.make_node("PRelu", ["x", "s"], ["y"])], [("x", SHAPE)],
                       [("y", SHAPE)], {"s": slope})
    assert_matches_ort(model)


@pytest.mark.parametrize("opset", [6, 11, 13])
def test_clip_attribute_and_input_forms(opset):
    if opset < 11:
        node = helper.make_node("Clip", ["x"], ["y"], min=-0.5, max=0.25)
        inits = {}
    else:
        node = helper.make_node("Clip", ["x", "lo", "hi"], ["y"])
        inits = {"lo": np.array(-0.5, np.float32), "hi": np.array(0.25, np.float32)}
    model = make_model([node], [("x", SHAPE)], [("y", SHAPE)], inits, opset=opset)
    assert_matches_ort(model)


def test_clip_only_max_input():
    node = helper.make_node("Clip", ["x", "", "hi"], ["y"])
    model = make_model([node], [("x", SHAPE)], [("y", SHAPE)],
                       {"hi": np.array(0.1, np.float32)}, opset=13)
    assert_matches_ort(model)


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
def test_binary_broadcast(op):
    other = np.random.default_rng(2).uniform(0.5, 2, (3, 1, 5)).astype(np.float32)
    model = make_model([helper.make_node(op, ["x", "b"], ["y"])], [("x", SHAPE)],
                       [("y", SHAPE)], {"b": other})
    assert_matches_ort(model)


def test_pow():
    model = make_model([helper.make_node("Pow", ["x", "e"], ["y"])], [("x", SHAPE)],
                       [("y", SHAPE)], {"e": np.array([2.0], np.float32)})
    assert_matches_ort(model)


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min"])
def test_variadic(op):
    model = make_model([helper.make_node(op, ["a", "b", "c"], ["y"])],
                       [("a", SHAPE), ("b", SHAPE), ("c", SHAPE)], [("y", SHAPE)])
    assert_matches_ort(model)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("opset,axis", [(11, 1), (11, 2), (11, 3), (11, -1), (11, 0), (13, 1),
                                        (13, -2)])
def test_softmax_axis_meaning(op, opset, axis):
    """Before opset 13 the input is coerced to 2-D at axis: a different function."""
    model = make_model([helper.make_node(op, ["x"], ["y"], axis=axis)], [("x", SHAPE)],
                       [("y", SHAPE)], opset=opset)
    assert_matches_ort(model)


def test_softmax_pre13_default_axis():
    model = make_model([helper.make_node("Softmax", ["x"], ["y"])], [("x", SHAPE)],
                       [("y", SHAPE)], opset=9)
    assert_matches_ort(model)


def test_matmul_and_gemm():
    rng = np.random.default_rng(3)
    w = rng.standard_normal((5, 4)).astype(np.float32)
    wt = rng.standard_normal((6, 4)).astype(np.float32)
    c = rng.standard_normal((6,)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Gemm", ["m2", "wt", "c"], ["y"], alpha=0.5, beta=2.0, transB=1),
             helper.make_node("Reshape", ["m", "shape"], ["m2"])]
    model = make_model(nodes, [("x", [2, 3, 5])], [("y", [6, 6])],
                       {"w": w, "wt": wt, "c": c, "shape": np.array([6, 4], np.int64)})
    assert_matches_ort(model)


def test_gemm_trans_a_without_bias():
    w = np.random.default_rng(4).standard_normal((3, 5)).astype(np.float32)
    model = make_model([helper.make_node("Gemm", ["x", "w"], ["y"], transA=1)],
                       [("x", [3, 7])], [("y", [7, 5])], {"w": w}, opset=11)
    assert_matches_ort(model)


def test_dropout_is_identity_at_inference():
    model = make_model([helper.make_node("Dropout", ["x"], ["y"], ratio=0.3)], [("x", SHAPE)],
                       [("y", SHAPE)], opset=10)
    assert_matches_ort(model)
