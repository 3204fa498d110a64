"""End to end: ONNX -> core -> passes -> dialect -> runtime, against onnxruntime on the source.

Graph inputs and outputs are permuted as ``model.io_permutations`` says (NCHW -> NHWC).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from onnx import helper

from tests.frontends.onnx.onnx_backend_cases import execute_pipeline
from tests.frontends.onnx.onnx_helpers import convert, make_model, random_feeds, run_ort

REPO = Path(__file__).resolve().parents[3]
RNG = np.random.default_rng(11)


def _w(*shape):
    return (RNG.standard_normal(shape) * 0.5).astype(np.float32)


def _compare(model, feeds=None):
    feeds = feeds or random_feeds(model)
    want = run_ort(model, feeds)
    core = convert(model)
    got = execute_pipeline(core, feeds)
    for name, expected in want.items():
        np.testing.assert_allclose(got[name], expected, rtol=1e-4, atol=1e-4, err_msg=name)
    return core


def _pytorch_style_classifier():
    """conv -> relu -> x.view(x.size(0), -1) as PyTorch exports it -> Linear."""
    nodes = [
        helper.make_node("Conv", ["input", "conv.w", "conv.b"], ["c"], name="conv",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Shape", ["r"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "zero"], ["n"], name="gather", axis=0),
        helper.make_node("Unsqueeze", ["n", "axes0"], ["n1"], name="unsqueeze"),
        helper.make_node("Concat", ["n1", "minus_one"], ["target"], name="concat", axis=0),
        helper.make_node("Reshape", ["r", "target"], ["flat"], name="reshape"),
        helper.make_node("Gemm", ["flat", "fc.w", "fc.b"], ["logits"], name="fc", transB=1),
    ]
    inits = {"conv.w": _w(4, 3, 3, 3), "conv.b": _w(4), "zero": np.array(0, np.int64),
             "axes0": np.array([0], np.int64), "minus_one": np.array([-1], np.int64),
             "fc.w": _w(6, 4 * 7 * 5), "fc.b": _w(6)}
    return make_model(nodes, [("input", [2, 3, 7, 5])], [("logits", [2, 6])], inits, opset=13)


def test_pytorch_style_flatten_becomes_dense_with_permuted_weights():
    model = _pytorch_style_classifier()
    feeds = random_feeds(model)
    core = _compare(model, feeds)
    ops = core.graph.op_counts()
    assert "Shape" not in ops and "Transpose" not in ops and "Gather" not in ops
    assert "Dense" in ops, ops
    dense = next(n for n in core.graph.nodes if n.op == "Dense")
    weights = next(v.const for v in dense.inputs if v is not None and v.is_const and
               v.const.ndim == 2)
    source = model.graph.initializer[-2]
    from onnx import numpy_helper

    fc = numpy_helper.to_array(source)  # (6, C*H*W) in C, H, W order
    # The rows the dialect reads in H, W, C order are the source columns permuted.
    perm = np.arange(4 * 7 * 5).reshape(4, 7, 5).transpose(1, 2, 0).reshape(-1)
    assert any(np.array_equal(weights, m) for m in (fc[:, perm], fc[:, perm].T))


@pytest.mark.parametrize("opset", [9, 11, 13])
def test_conv_bn_pool_softmax_network(opset):
    var = RNG.uniform(0.5, 2, 4).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[3, 3], strides=[2, 1],
                         pads=[1, 0, 1, 2]),
        helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["bn"]),
        helper.make_node("LeakyRelu", ["bn"], ["r"], alpha=0.2),
        helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["g"]),
        helper.make_node("Flatten", ["g"], ["f"]),
        helper.make_node("Softmax", ["f"], ["y"], axis=1),
    ]
    inits = {"w": _w(4, 3, 3, 3), "s": _w(4), "b": _w(4), "m": _w(4), "v": var}
    _compare(make_model(nodes, [("x", [2, 3, 9, 6])], [("y", [2, 4])], inits, opset=opset))


def test_upsample_concat_pad_network():
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], kernel_shape=[1, 1]),
        helper.make_node("Resize", ["c", "", "scales"], ["u"], mode="nearest",
                         coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
        helper.make_node("Pad", ["x", "pads"], ["xp"]),
        helper.make_node("Concat", ["u", "xp"], ["y"], axis=1),
    ]
    inits = {"w": _w(2, 3, 1, 1), "scales": np.array([1, 1, 2, 2], np.float32),
             "pads": np.array([0, 0, 3, 2, 0, 0, 4, 3], np.int64)}
    _compare(make_model(nodes, [("x", [2, 3, 7, 5])], [("y", [2, 5, 14, 10])], inits))


def test_example_model_converts_and_matches():
    import onnx

    model = onnx.load(str(REPO / "examples" / "onnx" / "small_nchw.onnx"))
    core = _compare(model)
    assert "Shape" not in core.graph.op_counts()
