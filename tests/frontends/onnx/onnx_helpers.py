"""Build small ONNX models in code, run them with onnxruntime (the oracle) and our converter."""
from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from nhwc_onnx.frontends.onnx import load_proto
from nhwc_onnx.options import ConvertOptions
from tests.core_reference import run_core

ORT_IR_VERSION = 8  # onnxruntime 1.31 rejects the IR version onnx 1.23 writes by default


def make_model(nodes, inputs, outputs, initializers=(), opset=13) -> onnx.ModelProto:
    """inputs/outputs: (name, shape) pairs (float32) or ValueInfoProto; initializers: dict."""
    def info(item):
        if isinstance(item, onnx.ValueInfoProto):
            return item
        name, shape = item
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)

    inits = [numpy_helper.from_array(np.asarray(a), n) for n, a in dict(initializers).items()]
    graph = helper.make_graph(list(nodes), "test", [info(i) for i in inputs],
                              [info(o) for o in outputs], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = ORT_IR_VERSION if opset >= 9 else 3
    return model


def run_ort(model: onnx.ModelProto, feeds: dict) -> dict:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds)))


def convert(model: onnx.ModelProto, **options):
    return load_proto(model, ConvertOptions(**options))


def random_feeds(model: onnx.ModelProto, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    feeds = {}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
        feeds[inp.name] = rng.standard_normal(shape).astype(np.float32)
    return feeds


def assert_matches_ort(model: onnx.ModelProto, feeds: dict | None = None, atol=1e-4,
                       **options) -> None:
    """Convert, run the core graph with the numpy reference, compare with onnxruntime."""
    feeds = feeds if feeds is not None else random_feeds(model)
    expected = run_ort(model, feeds)
    core = convert(model, **options)
    got = run_core(core, {v.name: feeds[v.name] for v in core.graph.inputs})
    assert set(expected) <= set(got), (sorted(expected), sorted(got))
    for name, want in expected.items():
        have = np.asarray(got[name])
        assert have.shape == want.shape, (name, have.shape, want.shape)
        np.testing.assert_allclose(have.astype(np.float64), want.astype(np.float64),
                                   rtol=atol, atol=atol, err_msg=name)
