"""Write examples/onnx/small_nchw.onnx: a small NCHW network as PyTorch exports it (opset 11).

Conv + BatchNorm + ReLU, ceil-mode max pooling, a depthwise convolution, nearest Upsample via
Resize, Concat, global average pooling, then the PyTorch flatten idiom (Shape -> Gather ->
Unsqueeze -> Concat -> Reshape) into Gemm and an opset-11 Softmax. Seeded random weights; run
`python examples/onnx/make_example.py` to regenerate (deterministic output).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
OUT = HERE / "small_nchw.onnx"


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(2024)

    def w(name, *shape, scale=0.3):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32),
                                       name)

    inits = [
        w("conv1.weight", 8, 3, 3, 3), w("conv1.bias", 8),
        w("bn1.weight", 8), w("bn1.bias", 8), w("bn1.running_mean", 8),
        numpy_helper.from_array(rng.uniform(0.5, 1.5, 8).astype(np.float32), "bn1.running_var"),
        w("dw.weight", 8, 1, 3, 3),
        w("fc.weight", 10, 16), w("fc.bias", 10),
        numpy_helper.from_array(np.array([], np.float32), "roi"),
        numpy_helper.from_array(np.array([1, 1, 2, 2], np.float32), "up.scales"),
        numpy_helper.from_array(np.array(0, np.int64), "zero"),
        numpy_helper.from_array(np.array([0], np.int64), "axes0"),
        numpy_helper.from_array(np.array([-1], np.int64), "minus_one"),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["c1"], name="conv1",
                         kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn1.weight", "bn1.bias",
                                                "bn1.running_mean", "bn1.running_var"],
                         ["b1"], name="bn1", epsilon=1e-5),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[3, 3],
                         strides=[2, 2], ceil_mode=1),
        helper.make_node("Conv", ["p1", "dw.weight"], ["d1"], name="dwconv", group=8,
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Resize", ["d1", "roi", "up.scales"], ["u1"], name="up",
                         mode="nearest", coordinate_transformation_mode="asymmetric",
                         nearest_mode="floor"),
        helper.make_node("MaxPool", ["u1"], ["u2"], name="pool2", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Concat", ["u2", "d1"], ["cat"], name="concat", axis=1),
        helper.make_node("GlobalAveragePool", ["cat"], ["gap"], name="gap"),
        helper.make_node("Shape", ["gap"], ["shape"], name="flatten/shape"),
        helper.make_node("Gather", ["shape", "zero"], ["batch"], name="flatten/gather", axis=0),
        helper.make_node("Unsqueeze", ["batch"], ["batch1"], name="flatten/unsqueeze",
                         axes=[0]),
        helper.make_node("Concat", ["batch1", "minus_one"], ["target"], name="flatten/concat",
                         axis=0),
        helper.make_node("Reshape", ["gap", "target"], ["flat"], name="flatten/reshape"),
        helper.make_node("Gemm", ["flat", "fc.weight", "fc.bias"], ["logits"], name="fc",
                         transB=1),
        helper.make_node("Softmax", ["logits"], ["prob"], name="softmax", axis=1),
    ]
    graph = helper.make_graph(
        nodes, "small_nchw",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 33, 31])],
        [helper.make_tensor_value_info("prob", TensorProto.FLOAT, [1, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)],
                              producer_name="nhwc-onnx example")
    model.ir_version = 6
    onnx.checker.check_model(model)
    return model


if __name__ == "__main__":
    OUT.write_bytes(build().SerializeToString())
    print(f"wrote {OUT}")
