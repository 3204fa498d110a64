"""One error listing every unconvertible node; names, docs and source names kept."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.frontends.onnx import REGISTRY
from tests.frontends.onnx.onnx_helpers import convert, make_model

X = [2, 3, 7, 5]


def test_scan_lists_every_offending_node_in_one_error():
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="ok"),
             helper.make_node("Foo", ["a"], ["b"], name="foo1", domain="custom.dom"),
             helper.make_node("TopK", ["b", "k"], ["c", "ci"], name="topk"),
             helper.make_node("Resize", ["c", "", "s"], ["d"], mode="cubic", name="cubic"),
             helper.make_node("Conv", ["d", "w"], ["y"], name="conv3d", kernel_shape=[1, 1, 1])]
    model = make_model(nodes, [("x", X)], [("y", None)],
                       {"k": np.array([1], np.int64), "s": np.ones(4, np.float32),
                        "w": np.ones((1, 3, 1, 1, 1), np.float32)})
    model.opset_import.append(helper.make_opsetid("custom.dom", 1))
    with pytest.raises(UnsupportedOpError) as info:
        convert(model)
    names = {p.node for p in info.value.problems}
    assert names == {"foo1", "topk", "cubic", "conv3d"}
    assert "cubic" in str(info.value) and "TopK" in str(info.value)


def test_unknown_attribute_is_refused_not_ignored():
    node = helper.make_node("Relu", ["x"], ["y"], name="r", surprise=3)
    with pytest.raises(UnsupportedOpError, match="surprise"):
        convert(make_model([node], [("x", X)], [("y", X)]))


def test_names_docs_and_source_names():
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Sigmoid", ["r"], ["s"], name="act"),
             helper.make_node("Tanh", ["s"], ["y"], name="act")]
    core = convert(make_model(nodes, [("x", X)], [("y", X)]))
    names = [n.name for n in core.graph.nodes]
    assert len(set(names)) == 3
    assert names[0] == "Relu_r" and names[1] == "act" and names[2].startswith("act_")
    assert [n.doc for n in core.graph.nodes] == ["Relu", "Sigmoid", "Tanh"]
    assert all(n.domain == "core" for n in core.graph.nodes)
    assert [v.meta["source_name"] for v in core.graph.outputs] == ["y"]
    assert core.graph.nodes[0].outputs[0].meta["source_name"] == "r"


def test_helper_nodes_carry_the_source_node_name():
    node = helper.make_node("Softmax", ["x"], ["y"], name="sm", axis=1)
    core = convert(make_model([node], [("x", X)], [("y", X)], opset=11))
    ops = [n.op for n in core.graph.nodes]
    assert ops == ["Flatten", "Softmax", "Reshape"]
    assert all(n.name.startswith("sm") for n in core.graph.nodes)
    assert core.graph.outputs[0].name == "y"


def test_registry_covers_the_required_ops():
    required = ["Conv", "ConvTranspose", "BatchNormalization", "Relu", "LeakyRelu", "PRelu", "Elu",
                "Sigmoid", "Tanh", "Abs", "Clip", "HardSigmoid", "HardSwish", "Softmax",
                "LogSoftmax", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Add",
                "Sub", "Mul", "Div", "Sum", "Max", "Min", "Mean", "Pow", "MatMul", "Gemm",
                "Flatten", "Reshape", "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split",
                "Slice", "Pad", "ReduceMean", "SpaceToDepth", "DepthToSpace", "Resize", "Upsample",
                "Identity", "Dropout", "Constant", "Shape", "Gather", "Cast", "ConstantOfShape",
                "Range", "Expand", "Neg", "Sqrt", "Reciprocal", "Exp", "Log", "Erf", "Floor",
                "Ceil"]
    assert [op for op in required if op not in REGISTRY] == []


def test_only_core_ops_are_emitted():
    from nhwc_onnx.schemas import CORE_OPS

    nodes = [helper.make_node("LRN", ["x"], ["l"], size=3),
             helper.make_node("Selu", ["l"], ["s"]),
             helper.make_node("ReduceLogSumExp", ["s"], ["y"], axes=[1])]
    core = convert(make_model(nodes, [("x", X)], [("y", None)]))
    assert all(n.op in CORE_OPS for n in core.graph.nodes)


def test_outputs_option_cuts_the_graph_and_skips_unneeded_nodes():
    import numpy as np

    from tests.core_reference import run_core

    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Sigmoid", ["r"], ["s"]),
             helper.make_node("TopK", ["s", "k"], ["v", "i"])]  # unsupported, but not needed
    model = make_model(nodes, [("x", X)], [("v", None)], {"k": np.array([1], np.int64)})
    core = convert(model, outputs=["s"])
    assert [v.name for v in core.graph.outputs] == ["s"]
    assert core.graph.op_counts() == {"Relu": 1, "Sigmoid": 1}
    x = np.random.default_rng(0).standard_normal(X).astype(np.float32)
    np.testing.assert_allclose(run_core(core, {"x": x})["s"], 1 / (1 + np.exp(-np.maximum(x, 0))),
                               rtol=1e-5, atol=1e-6)


def test_inputs_option_names_tensors_of_the_model_only():
    from nhwc_onnx.errors import InvalidModelError, UsageError
    from tests.core_reference import run_core

    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("Sigmoid", ["r"], ["s"])]
    model = make_model(nodes, [("x", X)], [("s", None)])
    # an inner tensor becomes an input once its shape is given
    core = convert(model, inputs=["r"], input_shapes={"r": X})
    assert [v.name for v in core.graph.inputs] == ["r"]
    assert core.graph.op_counts() == {"Sigmoid": 1}
    r = np.random.default_rng(0).standard_normal(X).astype(np.float32)
    np.testing.assert_allclose(run_core(core, {"r": r})["s"], 1 / (1 + np.exp(-r)),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(InvalidModelError, match="^input 'r' is not a graph input; give its shape"):
        convert(model, inputs=["r"])
    # a name that is no tensor at all is named as such, shape or not: a usage error (exit 2)
    for shapes in ({}, {"nosuch": X}):
        with pytest.raises(UsageError,
                           match="^--inputs names 'nosuch', which is not a tensor of the model$"):
            convert(model, inputs=["nosuch"], input_shapes=shapes)
