"""The whole pipeline: core graph in the source layout -> validated dialect graph, same numbers."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.errors import ConversionBugError, InvalidModelError
from nhwc_onnx.ir import DIALECT, Graph, Model, Value
from nhwc_onnx.options import ConvertOptions
from nhwc_onnx.passes import PassContext, PassResult
from nhwc_onnx.passes import pipeline as pipeline_module
from nhwc_onnx.passes.pipeline import to_dialect
from nhwc_onnx.runtime import run
from tests.core_reference import run_core

RNG = np.random.default_rng(11)
N, C, H, W = 2, 3, 9, 7


def _r(*shape, low=-1.0, high=1.0):
    return RNG.uniform(low, high, size=shape).astype(np.float32)


WT = {"w": _r(5, C, 3, 3), "b": _r(5), "gamma": _r(5, low=0.5, high=1.5), "beta": _r(5),
      "mean": _r(5), "var": _r(5, low=0.2, high=1.0), "fc": _r(4, 5 * 4 * 3), "fcb": _r(4),
      "dw": _r(5, 1, 3, 3)}


def _nchw_net():
    """Caffe/ONNX-like: Identity, conv+BN, depthwise, ceil pooling, Flatten->Gemm, Softmax."""
    g = Graph("net")
    x = g.add_input(Value("data", shape=(None, C, H, W), layout="NCHW"))
    ident = g.make_node("Identity", [x], name="input_copy")
    conv = g.make_node("Conv", [ident.output, g.constant(WT["w"], "conv1/W"),
                                g.constant(WT["b"], "conv1/b")],
                       {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}, name="conv1")
    bn = g.make_node("BatchNormalization", [conv.output] + [
        g.constant(WT[k], f"bn1/{k}") for k in ("gamma", "beta", "mean", "var")], name="bn1")
    relu = g.make_node("Relu", [bn.output], name="relu1")
    dw = g.make_node("Conv", [relu.output, g.constant(WT["dw"], "dw/W")],
                     {"kernel_shape": [3, 3], "group": 5, "pads": [1, 1, 1, 1]}, name="dw")
    pool = g.make_node("MaxPool", [dw.output], {"kernel_shape": [3, 3], "strides": [2, 2],
                                                "ceil_mode": 1}, name="pool1")
    flat = g.make_node("Flatten", [pool.output], name="flatten")
    fc = g.make_node("Gemm", [flat.output, g.constant(WT["fc"], "fc/W"),
                              g.constant(WT["fcb"], "fc/b")], {"transB": 1}, name="fc")
    prob = g.make_node("Softmax", [fc.output], {"axis": 1}, name="prob")
    g.outputs.append(prob.output)
    return Model(g)


def test_nchw_network_reaches_a_valid_dialect_model_with_the_same_numbers():
    x = _r(N, C, H, W)
    want = run_core(_nchw_net(), {"data": x})["prob"]
    model = _nchw_net()
    manager, ctx = to_dialect(model, PassContext(options=ConvertOptions(batch=N)))
    names = [s.name for s in manager.stats]
    assert names[:7] == ["cleanup", "static_shapes", "fold_constants", "cleanup", "to_nhwc",
                         "preprocess", "static_shapes"]
    assert len(names) > 7 and names[-1] == "legalize"
    assert all(n.domain == DIALECT for n in model.graph.nodes)
    assert "Transpose" not in [n.op for n in model.graph.nodes]
    assert model.io_permutations == {"data": [0, 2, 3, 1]}
    assert model.graph.inputs[0].shape == (N, H, W, C)
    assert model.graph.outputs[0].name == "prob"
    got = run(model, {"data": x.transpose(0, 2, 3, 1)})["prob"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert any(d.kind == "layout" for d in ctx.decisions)


def test_unknown_batch_without_options_names_the_input():
    with pytest.raises(InvalidModelError, match="'data'.*--batch"):
        to_dialect(_nchw_net(), PassContext())


def test_an_invalid_result_is_reported_as_a_bug(monkeypatch):
    class Vandal:
        name = "vandal"

        def call(self, model, ctx):
            model.graph.nodes[0].attrs["no_such_attribute"] = 1
            return PassResult(True)

    original = pipeline_module._dialect_passes
    monkeypatch.setattr(pipeline_module, "_dialect_passes", lambda: original() + [Vandal()])
    with pytest.raises(ConversionBugError, match="no_such_attribute"):
        to_dialect(_nchw_net(), PassContext(options=ConvertOptions(batch=1)))


def _folded_reshape_net():
    """Reshape to Shape(other): its output shape is known only once Shape is folded; an
    Identity and a Dropout for Cleanup, an empty Concat piece Cleanup drops."""
    g = Graph("fold")
    x = g.add_input(Value("x", shape=(2, 3, 5, 7), layout="NCHW"))
    y = g.add_input(Value("y", shape=(2, 105)))
    ident = g.make_node("Identity", [x], name="copy")
    shape = g.make_node("Shape", [y], name="shape_of_y")
    flat = g.make_node("Reshape", [ident.output, shape.output], name="flat")
    drop = g.make_node("Dropout", [flat.output], name="drop")
    split = g.make_node("Split", [y], {"axis": 1, "split": [105, 0]}, name="split", outputs=2)
    cat = g.make_node("Concat", [split.outputs[0], split.outputs[1]], {"axis": 1}, name="cat")
    add = g.make_node("Add", [drop.output, cat.output], name="add")
    g.outputs.append(add.output)
    return Model(g)


@pytest.mark.parametrize("build", [_nchw_net, _folded_reshape_net])
def test_shapes_are_current_when_to_nhwc_runs(build):
    # The pipeline's ToNHWC skips its own inference: whatever runs before it must leave every
    # shape and type where a fresh inference would put them.
    from nhwc_onnx.passes.static_shapes import infer_graph

    model = build()
    ctx = PassContext(options=ConvertOptions(batch=N))
    passes = pipeline_module.core_passes()
    assert passes[4].name == "to_nhwc" and not passes[4].infer_shapes
    for p in passes[:4]:
        p.call(model, ctx)
    before = [(v.name, v.shape, v.dtype) for v in model.graph.values()]
    assert all(v.static for v in model.graph.values())
    assert infer_graph(model.graph) is False
    assert [(v.name, v.shape, v.dtype) for v in model.graph.values()] == before
