"""ONNX files of IR versions 3-9 convert as onnxruntime runs them. Before IR 4 the standard
lists every initializer as a graph input too; old exporters did not, and onnxruntime runs those
files: ONNX shape inference then types no weight, so every tensor after the first weighted op
had an unknown rank and a second Conv was refused ("the rank of the input is unknown")."""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.frontends.exactness import converts_exactly

N, C, H, W, M, CLASSES = 2, 3, 8, 6, 5, 4


def _model(ir_version: int, batch, weights_listed: bool) -> onnx.ModelProto:
    rng = np.random.default_rng(ir_version)
    weights = {
        "w1": rng.standard_normal((M, C, 3, 3)).astype(np.float32),
        "w2": rng.standard_normal((M, M, 3, 3)).astype(np.float32),
        "flat": np.array([0 if batch == "N" else N, -1], np.int64),
        "fc": rng.standard_normal((CLASSES, M * (H // 2) * (W // 2))).astype(np.float32),
        "fc_b": rng.standard_normal(CLASSES).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("MaxPool", ["c2"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Reshape", ["p", "flat"], ["f"]),
        helper.make_node("Gemm", ["f", "fc", "fc_b"], ["y"], transB=1),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, C, H, W])]
    if weights_listed:
        inputs += [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                                 list(v.shape)) for k, v in weights.items()]
    graph = helper.make_graph(
        nodes, "old", inputs,
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, CLASSES])],
        [numpy_helper.from_array(v, k) for k, v in weights.items()])
    opset = 7 if ir_version == 3 else 9
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ir_version
    return model


@pytest.mark.parametrize("batch", [N, "N"], ids=["static", "symbolic"])
@pytest.mark.parametrize(("ir_version", "weights_listed"),
                         [(3, False), (3, True), (4, False), (6, False), (9, True)])
def test_old_ir_versions_convert_as_onnxruntime_runs_them(tmp_path, ir_version,
                                                          weights_listed, batch):
    source = tmp_path / "old.onnx"
    onnx.save(_model(ir_version, batch, weights_listed), source)
    _, model = converts_exactly(source, tmp_path, symbolic=batch == "N")
    assert model.graph.op_counts()["Conv"] == 2
