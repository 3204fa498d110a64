"""Constants reach onnxruntime with their exact shape (0-d included)."""
import numpy as np

from nhwc_onnx.ir import DIALECT, Graph, Model, Value
from nhwc_onnx.runtime import run


def test_zero_d_constant_output_keeps_its_shape():
    g = Graph()
    x = g.add_input(Value("x", shape=(2, 3)))
    relu = g.make_node("Relu", [x], domain=DIALECT, name="relu")
    scalar = g.constant(np.array(2.5, np.float32), "scalar")
    g.outputs = [relu.output, scalar]
    out = run(Model(g), {"x": np.array([[-1, 2, -3], [4, -5, 6]], np.float32)})
    assert out["scalar"].shape == ()
    assert out["scalar"] == np.float32(2.5)
    np.testing.assert_array_equal(out["relu"], [[0, 2, 0], [4, 0, 6]])
