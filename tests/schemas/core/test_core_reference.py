"""run_core executes a whole core graph: compare with onnxruntime on the same standard graph."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import helper, numpy_helper

from nhwc_onnx.errors import InvalidModelError
from nhwc_onnx.ir import Graph, Model, Value
from tests.core_reference import run_core

RNG = np.random.default_rng(7)


def _weights():
    return {
        "w": RNG.normal(size=(4, 3, 3, 2)).astype(np.float32),
        "b": RNG.normal(size=(4,)).astype(np.float32),
        "fc": RNG.normal(size=(5, 4 * 4 * 3)).astype(np.float32),
        "fcb": RNG.normal(size=(5,)).astype(np.float32),
    }


def _core_model(wt) -> Model:
    g = Graph("net")
    x = g.add_input(Value("x", shape=(2, 3, 7, 5), layout="NCHW"))
    conv = g.make_node("Conv", [x, g.constant(wt["w"], "w"), g.constant(wt["b"], "b")],
                       {"kernel_shape": [3, 2], "pads": [1, 0, 1, 1]}, name="conv")
    relu = g.make_node("Relu", [conv.output], name="relu")
    pool = g.make_node("MaxPool", [relu.output], {"kernel_shape": [2, 2], "strides": [2, 2],
                                                      "ceil_mode": 1}, name="pool")
    flat = g.make_node("Flatten", [pool.output], name="flat")
    fc = g.make_node("Gemm",
                     [flat.output, g.constant(wt["fc"], "fc"), g.constant(wt["fcb"], "fcb")],
                     {"transB": 1}, name="fc")
    soft = g.make_node("Softmax", [fc.output], {"axis": 1}, name="prob")
    g.outputs.append(soft.output)
    return Model(g)


def _onnx_model(wt) -> bytes:
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[3, 2], pads=[1, 0, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2], ceil_mode=1),
        helper.make_node("Flatten", ["p"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fcb"], ["g"], transB=1),
        helper.make_node("Softmax", ["g"], ["prob"], axis=1),
    ]
    graph = helper.make_graph(
        nodes, "net",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 3, 7, 5])],
        [helper.make_tensor_value_info("prob", onnx.TensorProto.FLOAT, None)],
        [numpy_helper.from_array(v, k) for k, v in wt.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def test_run_core_matches_onnxruntime_on_a_small_network():
    wt = _weights()
    x = RNG.normal(size=(2, 3, 7, 5)).astype(np.float32)
    got = run_core(_core_model(wt), {"x": x})
    sess = ort.InferenceSession(_onnx_model(wt), providers=["CPUExecutionProvider"])
    want = sess.run(["prob"], {"x": x})[0]
    assert list(got) == ["prob"]
    np.testing.assert_allclose(got["prob"], want, rtol=1e-4, atol=1e-5)
    extra = run_core(_core_model(wt), {"x": x}, extra_outputs=["relu"])
    assert extra["relu"].shape == (2, 4, 7, 5) and extra["relu"].min() >= 0


def test_run_core_names_a_missing_feed():
    with pytest.raises(InvalidModelError, match="'x'"):
        run_core(_core_model(_weights()), {})
