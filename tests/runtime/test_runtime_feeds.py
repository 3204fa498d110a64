"""Feeds that cannot run a model are said in the model's terms, before onnxruntime starts."""
import numpy as np
import pytest

from nhwc_onnx.errors import UsageError
from nhwc_onnx.ir import DIALECT, Graph, Model, Value
from nhwc_onnx.runtime import run


def _relu_model() -> Model:
    g = Graph()
    x = g.add_input(Value("x", shape=(None, 3)))  # any batch, 3 channels
    g.outputs = [g.make_node("Relu", [x], domain=DIALECT, name="relu").output]
    return Model(g)


@pytest.mark.parametrize("feeds, message", [
    ({}, "no array for input 'x'"),
    ({"x": np.zeros((2, 4), np.float32)}, "input 'x' needs shape (None, 3), the array has (2, 4)"),
    ({"x": np.zeros(3, np.float32)}, "input 'x' needs shape (None, 3), the array has (3,)"),
    ({"x": np.zeros((2, 3), np.float32), "y": np.zeros(1)},
     "'y' is not an input of the model (inputs: x)"),
])
def test_feeds_that_do_not_fit_are_a_usage_error(feeds, message):
    with pytest.raises(UsageError) as info:
        run(_relu_model(), feeds)
    assert str(info.value) == f"Invalid value for 'feeds': {message}"


def test_feeds_that_fit_run_any_batch():
    x = np.array([[-1, 2, -3], [4, -5, 6], [0, 1, -1]], np.float32)
    np.testing.assert_array_equal(run(_relu_model(), {"x": x})["relu"], np.maximum(x, 0))
    np.testing.assert_array_equal(run(_relu_model(), {"x": x[:1]})["relu"], np.maximum(x[:1], 0))
