"""Malformed ONNX input ends in the project's errors, raised by the frontend, naming the node.

Corrupt strings -> ModelLoadError; wrong input/output counts and impossible attribute values
(strides, dilations, kernels, groups, block sizes of 0, repeated axes, NaN scales) ->
InvalidModelError / InvalidAttributeError; never a ConversionBugError from the passes.
"""
from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from nhwc_onnx.errors import (
    ConversionBugError,
    InvalidAttributeError,
    InvalidModelError,
    ModelLoadError,
    UnsupportedOpError,
)
from nhwc_onnx.frontends.onnx.folding import _data_propagation_is_bounded
from nhwc_onnx.frontends.onnx.loader import parse_model_bytes
from tests.frontends.onnx.onnx_helpers import assert_matches_ort, convert, make_model

X = ("x", [2, 3, 7, 5])
W = {"w": np.ones((4, 3, 3, 3), np.float32)}


def _one(node, inits=None, opset=13):
    return make_model([node], [X], [("y", None)], inits or {}, opset)


def test_node_name_that_is_not_utf8_is_a_load_error():
    model = _one(helper.make_node("Relu", ["x"], ["y"], name="relu"))
    data = model.SerializeToString()
    assert data.count(b"\x1a\x04relu") == 1
    with pytest.raises(ModelLoadError, match="not UTF-8"):
        parse_model_bytes(data.replace(b"\x1a\x04relu", b"\x1a\x04r\xffl\xfe"))


def test_op_type_that_is_not_utf8_is_a_load_error():
    model = _one(helper.make_node("Relu", ["x"], ["y"], name="r"))
    data = model.SerializeToString()
    assert data.count(b"\x22\x04Relu") == 1  # NodeProto.op_type = field 4
    with pytest.raises(ModelLoadError, match="op type"):
        parse_model_bytes(data.replace(b"\x22\x04Relu", b"\x22\x04R\xfflu"))


def test_valid_model_still_parses():
    model = _one(helper.make_node("Relu", ["x"], ["y"], name="relu"))
    assert parse_model_bytes(model.SerializeToString()).graph.node[0].name == "relu"


@pytest.mark.parametrize("node, count", [
    (helper.make_node("Conv", ["x", "w"], ["y", "extra"], name="bad"), "2 outputs"),
    (helper.make_node("Relu", ["x", "x"], ["y"], name="bad"), "2 inputs"),
])
def test_wrong_input_or_output_count_is_an_invalid_model(node, count):
    with pytest.raises(InvalidModelError, match=f"node 'bad' .* has {count}"):
        convert(_one(node, W))


def test_concat_without_inputs_is_an_invalid_model():
    model = make_model([helper.make_node("Concat", [], ["c"], axis=0, name="cat"),
                        helper.make_node("Add", ["x", "c"], ["y"])], [X], [("y", None)])
    with pytest.raises(InvalidModelError, match="node 'cat' \\(Concat\\) has 0 inputs"):
        convert(model)


@pytest.mark.parametrize("node, inits, message", [
    (helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 2], strides=[0, 2]), {},
     "strides \\[0, 2\\]"),
    (helper.make_node("AveragePool", ["x"], ["y"], kernel_shape=[0, 2]), {},
     "kernel_shape \\[0, 2\\]"),
    (helper.make_node("Conv", ["x", "w"], ["y"], dilations=[0, 1]), W, "dilations \\[0, 1\\]"),
    (helper.make_node("Conv", ["x", "w"], ["y"], strides=[1, -1]), W, "strides \\[1, -1\\]"),
    (helper.make_node("Conv", ["x", "w"], ["y"], group=0), W, "group 0"),
    (helper.make_node("Conv", ["x", "w"], ["y"]), {"w": np.ones((4, 3, 0, 3), np.float32)},
     "kernel \\[0, 3\\] is empty"),
    (helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[1 << 40, 2], auto_pad="SAME_UPPER"),
     {}, "kernel_shape .* exceed 2147483647"),
    (helper.make_node("SpaceToDepth", ["x"], ["y"]), {}, "blocksize"),
    (helper.make_node("DepthToSpace", ["x"], ["y"], blocksize=0), {}, "blocksize"),
    (helper.make_node("ReduceMean", ["x"], ["y"], axes=[1, 1]), {}, "axis twice"),
    (helper.make_node("ReduceMean", ["x"], ["y"], axes=[1, -3]), {}, "axis twice"),
    (helper.make_node("ReduceMax", ["x"], ["y"], axes=[4]), {}, "out of range"),
    (helper.make_node("Split", ["x", "s"], ["y", "z"], axis=1), {"s": np.array([4, -1])},
     "must not be negative"),
    (helper.make_node("Split", ["x", "s"], ["y", "z"], axis=1), {"s": np.array([1, 1])},
     "do not add up"),
])
def test_impossible_attribute_values_name_the_node(node, inits, message):
    node.name = "bad"
    with pytest.raises(InvalidAttributeError, match=f"node 'bad' .*{message}"):
        convert(_one(node, inits))


@pytest.mark.parametrize("scales", [[1, 1, 0, 0], [1, 1, np.nan, 2], [1, 1, np.inf, 2],
                                    [1, 1, -2, 2]])
def test_resize_scales_must_be_finite_and_positive(scales):
    node = helper.make_node("Resize", ["x", "roi", "scales"], ["y"], mode="nearest", name="rs")
    inits = {"roi": np.array([], np.float32), "scales": np.array(scales, np.float32)}
    with pytest.raises(InvalidAttributeError, match="node 'rs' .*finite and > 0"):
        convert(_one(node, inits))


def test_upsample_scale_zero_is_refused_as_invalid():
    node = helper.make_node("Upsample", ["x", "scales"], ["y"], mode="nearest", name="up")
    with pytest.raises(InvalidAttributeError, match="finite and > 0"):
        convert(_one(node, {"scales": np.array([1, 1, 0, 2], np.float32)}, opset=9))


def test_resize_sizes_of_zero_are_invalid():
    node = helper.make_node("Resize", ["x", "roi", "", "sizes"], ["y"], mode="nearest",
                            name="rs")
    inits = {"roi": np.array([], np.float32), "sizes": np.array([2, 3, 0, 5], np.int64)}
    with pytest.raises(InvalidAttributeError, match="sizes .* >= 1"):
        convert(_one(node, inits))


def test_split_with_an_empty_piece_converts_in_the_core_graph():
    """An empty piece is valid ONNX (onnxruntime computes it): the core graph keeps it."""
    node = helper.make_node("Split", ["x", "s"], ["y", "z"], axis=1)
    model = make_model([node], [X], [("y", None), ("z", None)], {"s": np.array([3, 0])})
    assert_matches_ort(model)


def test_a_read_empty_split_piece_is_refused_by_the_pipeline_not_a_bug():
    from nhwc_onnx.passes.pipeline import to_dialect

    node = helper.make_node("Split", ["x", "s"], ["y", "z"], axis=1, name="split")
    model = make_model([node], [X], [("y", None), ("z", None)], {"s": np.array([0, 3])})
    with pytest.raises(UnsupportedOpError, match="node .split. .*empty") as info:
        to_dialect(convert(model))
    assert not isinstance(info.value, ConversionBugError)


def _range_graph(limit_from_initializer: bool) -> onnx.GraphProto:
    def i64(name, v):
        return onnx.numpy_helper.from_array(np.array(v, np.int64), name)

    nodes = [helper.make_node("Range", ["start", "limit", "delta"], ["r"])]
    inits = [i64("start", 0), i64("delta", 1)]
    inputs = []
    if limit_from_initializer:
        inits.append(i64("limit", 1 << 40))
    else:
        inputs.append(helper.make_tensor_value_info("limit", TensorProto.INT64, []))
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(
        "r", TensorProto.INT64, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    return onnx.shape_inference.infer_shapes(model, strict_mode=False).graph


def test_data_propagation_is_skipped_for_huge_or_unknown_ranges():
    # ONNX data propagation would materialise Range(0, 2^40) (minutes, terabytes).
    assert not _data_propagation_is_bounded(_range_graph(limit_from_initializer=True))
    assert not _data_propagation_is_bounded(_range_graph(limit_from_initializer=False))
    small = make_model([helper.make_node("Relu", ["x"], ["y"])], [X], [("y", None)]).graph
    assert _data_propagation_is_bounded(small)


@pytest.mark.parametrize("nodes, inits, message", [
    ([helper.make_node("ReduceMean", ["x"], ["y"], axes=[1], keepdims=-1, name="bad")], {},
     "keepdims must be 0 or 1"),
    ([helper.make_node("Reshape", ["x", "s"], ["y"], name="bad")],
     {"s": np.array([np.nan, 105], np.float32)}, "element type float32"),
    ([helper.make_node("Reshape", ["x", "s"], ["y"], name="bad")],
     {"s": np.array([-2, 105], np.int64)}, "entries must be >= -1"),
    ([helper.make_node("Neg", ["one"], ["s"]),
      helper.make_node("ConstantOfShape", ["s"], ["c"], name="bad"),
      helper.make_node("Add", ["x", "c"], ["y"])], {"one": np.array([1], np.int64)},
     "entries must be >= 0"),
    ([helper.make_node("Size", ["x"], ["n"]),
      helper.make_node("ConstantOfShape", ["n"], ["c"], name="bad"),
      helper.make_node("ReduceSum", ["c"], ["s"], keepdims=0),
      helper.make_node("Add", ["x", "s"], ["y"])], {}, "rank 0; it must be 1-D"),
    ([helper.make_node("Tile", ["x", "r"], ["y"], name="bad")],
     {"r": np.array([1, 1, -1, 1], np.int64)}, "entries must be >= 0"),
])
def test_shape_inputs_and_flags_are_checked(nodes, inits, message):
    model = make_model(nodes, [X], [("y", None)], inits)
    with pytest.raises(InvalidAttributeError, match=f"node 'bad' .*{message}"):
        convert(model)


def test_expand_to_an_empty_tensor_is_refused_by_the_pipeline_not_a_bug():
    from nhwc_onnx.passes.pipeline import to_dialect

    node = helper.make_node("Expand", ["x", "s"], ["y"], name="grow")
    model = make_model([node], [("x", [2, 3, 7, 1])], [("y", None)],
                       {"s": np.array([2, 3, 7, 0], np.int64)})
    with pytest.raises(UnsupportedOpError, match="node 'grow' .*empty"):
        to_dialect(convert(model))


@pytest.mark.parametrize("version", [-1, 1 << 31, 1 << 40])
def test_absurd_opset_version_is_an_invalid_model(version):
    model = _one(helper.make_node("Relu", ["x"], ["y"]))
    model.opset_import[0].version = version
    with pytest.raises(InvalidModelError, match=f"version {version}"):
        convert(model)


@pytest.mark.parametrize("attr", ["transA", "transB"])
def test_gemm_transpose_flags_must_be_0_or_1(attr):
    node = helper.make_node("Gemm", ["a", "b"], ["y"], name="bad", **{attr: 2})
    model = make_model([node], [("a", [3, 3])], [("y", None)], {"b": np.eye(3, dtype=np.float32)})
    with pytest.raises(InvalidAttributeError, match=f"node 'bad' .*{attr} must be 0 or 1"):
        convert(model)


def test_emitted_core_attributes_are_checked_against_the_core_schema(monkeypatch):
    """The backstop: a value no core op accepts names the source node (here a converter is
    made to pass transA = 2 through, as a future converter might forget to check)."""
    from nhwc_onnx.frontends.onnx import ops_elementwise

    monkeypatch.setattr(ops_elementwise, "flag", lambda ctx, name, default: int(
        ctx.attr(name, default)))
    node = helper.make_node("Gemm", ["a", "b"], ["y"], name="bad", transA=2)
    model = make_model([node], [("a", [3, 3])], [("y", None)], {"b": np.eye(3, dtype=np.float32)})
    with pytest.raises(InvalidAttributeError, match="node 'bad' \\(Gemm\\): attribute 'transA'"):
        convert(model)


@pytest.mark.parametrize("attrs, opset, message", [
    ({"num_outputs": 1}, 18, "num_outputs 1 but 2 outputs"),
    ({"split": [6]}, 11, "1 split sizes for 2 outputs"),
])
def test_split_counts_disagreeing_with_outputs_are_invalid_before_onnx_inference(
        attrs, opset, message):
    # ONNX's C++ shape inference indexes past its vectors on these (an abort, not an error).
    node = helper.make_node("Split", ["x"], ["y", "z"], axis=1, name="bad", **attrs)
    model = make_model([node], [("x", [2, 6])], [("y", None), ("z", None)], opset=opset)
    with pytest.raises(InvalidModelError, match=message):
        convert(model)


def test_a_graph_output_listed_twice_is_named():
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [X], [("y", None), ("y", None)])
    with pytest.raises(InvalidModelError, match="output\\(s\\) 'y' twice"):
        convert(model)


def test_tensor_declaring_more_elements_than_it_stores_is_refused_before_inference(tmp_path):
    from nhwc_onnx.frontends.onnx import load
    from nhwc_onnx.options import ConvertOptions

    weight = helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    weight.dims[0] = 2**40  # declares 2^40 elements, stores 3
    stored = helper.make_tensor("v", TensorProto.FLOAT, [3], [0.0] * 3)
    stored.dims[0] = 4  # declares 4, stores 3
    bias = helper.make_node("Constant", [], ["b"], name="bias_const", value=stored)
    graph = helper.make_graph(
        [bias, helper.make_node("Add", ["x", "w"], ["y"]),
         helper.make_node("Add", ["y", "b"], ["z"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [3])], [weight])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    path = tmp_path / "m.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(ModelLoadError) as err:  # bytes that do not decode: unreadable
        load(str(path), ConvertOptions())
    text = str(err.value)
    assert "initializer 'w' declares dims [1099511627776] but stores 3" in text
    assert "Constant node 'bias_const' declares dims [4] but stores 3" in text


def test_attributes_of_another_type_than_the_schema_are_named_for_every_node():
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads="SAME"),  # a string
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("Softmax", ["r"], ["y"], name="soft", axis=1.5),  # a float
    ]
    with pytest.raises(UnsupportedOpError) as info:
        convert(make_model(nodes, [X], [("y", None)], W))
    problems = {p.node: p.reason for p in info.value.problems}
    assert problems == {
        "conv": "attribute 'pads' is of type STRING, but ONNX Conv takes INTS: the model is "
                "malformed",
        "soft": "attribute 'axis' is of type FLOAT, but ONNX Softmax takes INT: the model is "
                "malformed",
    }
    # the same nodes with the schema's types convert and compute what onnxruntime does
    nodes[0] = helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1])
    nodes[2] = helper.make_node("Softmax", ["r"], ["y"], name="soft", axis=1)
    assert_matches_ort(make_model(nodes, [X], [("y", None)], W))
