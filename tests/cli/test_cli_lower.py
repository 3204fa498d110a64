"""`nhwc-onnx lower`: the written file is standard ONNX that onnxruntime runs by itself."""
from __future__ import annotations

import json

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from nhwc_onnx.api import convert


def _nchw_source(path):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((5, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(5).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1], name="conv"),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("MaxPool", ["r"], ["y"], kernel_shape=[2, 2], strides=[2, 2],
                         name="pool"),
    ]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 7, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return model


def _ort(model_bytes, feeds):
    # Graph optimizations off, as in nhwc_onnx.runtime: then the two runs must agree bit for bit.
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def test_lowered_file_runs_in_onnxruntime_like_nhwc_onnx_run(tmp_path, invoke):
    source = tmp_path / "nchw.onnx"
    src_model = _nchw_source(source)
    dialect = tmp_path / "dialect.onnx"
    converted = convert(source, dialect).model
    lowered = tmp_path / "standard.onnx"

    result = invoke("lower", dialect, "-o", lowered)
    assert result.exit_code == 0, result.output + result.stderr
    proto = onnx.load(str(lowered))
    onnx.checker.check_model(proto)
    assert {op.domain for op in proto.opset_import} == {""}
    assert all(n.domain == "" for n in proto.graph.node)
    meta = {p.key: p.value for p in proto.metadata_props}
    assert json.loads(meta["io_permutations"]) == converted.io_permutations
    assert converted.io_permutations  # an NCHW source: the I/O really were permuted

    x = np.random.default_rng(0).standard_normal((2, 3, 7, 6)).astype(np.float32)
    perm_in = converted.io_permutations["x"]
    x_nhwc = np.ascontiguousarray(x.transpose(perm_in))
    np.save(tmp_path / "x.npy", x_nhwc)
    ran = invoke("run", dialect, "--input", f"x={tmp_path / 'x.npy'}", "-o", tmp_path / "out")
    assert ran.exit_code == 0, ran.output + ran.stderr
    via_run = np.load(tmp_path / "out" / "y.npy")

    direct = _ort(lowered.read_bytes(), {"x": x_nhwc})["y"]
    np.testing.assert_array_equal(direct, via_run)
    # and both are the source's numbers, in the recorded layout
    expected = _ort(src_model.SerializeToString(), {"x": x})["y"]
    np.testing.assert_allclose(direct, expected.transpose(converted.io_permutations["y"]),
                               atol=1e-4, rtol=1e-4)


def test_lower_refuses_invalid_model_and_writes_nothing(tmp_path, invoke, examples):
    bad = examples / "invalid" / "broken.onnx"
    out = tmp_path / "standard.onnx"
    result = invoke("lower", bad, "-o", out)
    assert result.exit_code == 1, result.output + result.stderr
    assert not out.exists()


def test_lower_never_overwrites_its_input(tmp_path, invoke, examples):
    model = tmp_path / "m.onnx"
    model.write_bytes((examples / "tiny_convnet.onnx").read_bytes())
    before = model.read_bytes()
    result = invoke("lower", model, "-o", model)
    assert result.exit_code == 1
    assert "overwrite" in result.stderr
    assert model.read_bytes() == before
