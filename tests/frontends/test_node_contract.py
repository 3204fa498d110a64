"""The contract the three frontends share (frontends/context.py): a node carrying an attribute
with an effect that its converter never read is refused, naming node and attribute, while
attributes without effect (types, training settings, implementation hints) are accepted and
the node converts to the same numbers; an error about a broken node carries the node and its
message names it exactly once."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from nhwc_onnx.errors import (
    ConversionContext,
    InvalidAttributeError,
    InvalidModelError,
    UnsupportedOpError,
)
from nhwc_onnx.frontends import caffe
from nhwc_onnx.frontends.tensorflow.proto import tf_graph_pb2 as tfpb
from nhwc_onnx.options import ConvertOptions
from tests.core_reference import run_core
from tests.frontends.caffe.caffe_testlib import compare_with_opencv
from tests.frontends.onnx.onnx_helpers import assert_matches_ort, convert, make_model
from tests.frontends.tensorflow.test_reader import _const, _node, _placeholder
from tests.frontends.tensorflow.tf_helpers import close, freeze, load_bytes, rand, spec, tf

T = {"T": tfpb.AttrValue(type=tfpb.DT_FLOAT)}
INPUT = ('name: "t"\nlayer { name: "data" type: "Input" top: "data" '
         "input_param { shape { dim: 1 dim: 3 dim: 6 dim: 9 } } }\n")


def _only_problem(info) -> tuple[str, str, str]:
    (problem,) = info.value.problems
    return problem.node, problem.op, problem.reason


# -- unread attributes with an effect are refused -------------------------------------------
def test_onnx_refuses_a_node_with_an_attribute_its_converter_does_not_read():
    node = helper.make_node("Relu", ["x"], ["y"], name="clipped", max_value=6.0)
    model = make_model([node], [("x", [2, 3])], [("y", [2, 3])])
    with pytest.raises(UnsupportedOpError) as info:
        convert(model)
    node_name, op, reason = _only_problem(info)
    assert (node_name, op) == ("clipped", "Relu") and "'max_value'" in reason


def test_tensorflow_refuses_a_node_with_an_attribute_its_converter_does_not_read(tmp_path):
    graph = tfpb.GraphDef()
    _placeholder(graph, "x", [2, 3])
    _node(graph, "clipped", "Relu", ["x"], max_value=tfpb.AttrValue(f=6.0), **T)
    with pytest.raises(UnsupportedOpError) as info:
        load_bytes(tmp_path, graph.SerializeToString())
    node_name, op, reason = _only_problem(info)
    assert (node_name, op) == ("clipped", "Relu") and "'max_value'" in reason


def test_caffe_refuses_a_layer_with_a_field_its_converter_does_not_read(tmp_path):
    """Upsample's pad_out_h takes one row off the output (SegNet's layer): converting without
    it would produce the wrong size silently."""
    path = tmp_path / "net.prototxt"
    path.write_text(INPUT + 'layer { name: "up" type: "Upsample" bottom: "data" top: "up" '
                    "upsample_param { scale: 2 pad_out_h: true } }\n")
    with pytest.raises(UnsupportedOpError) as info:
        caffe.load(path, ConvertOptions(weights="random"))
    node_name, op, reason = _only_problem(info)
    assert (node_name, op) == ("up", "Upsample")
    assert "'upsample_param.pad_out_h'" in reason


# -- attributes without effect are accepted, and the numbers match the source's runtime -----
def test_onnx_accepts_attributes_without_effect():
    node = helper.make_node("Dropout", ["x"], ["y"], name="drop", seed=7)
    assert_matches_ort(make_model([node], [("x", [2, 3, 5])], [("y", [2, 3, 5])]))


@pytest.mark.tf
def test_tensorflow_accepts_attributes_without_effect(tmp_path):
    """What TensorFlow writes on Conv2D (use_cudnn_on_gpu, explicit_paddings empty with SAME),
    ConcatV2 and AddN (N), MatMul (grad_a/grad_b where this TensorFlow writes them), types and
    '_'-bookkeeping: none changes the result."""
    tensorflow = tf()
    kernel = rand(3, 3, 4, 5, seed=2)
    dense = rand(9, 6, seed=3)

    def fn(x):
        y = tensorflow.nn.conv2d(x, kernel, strides=1, padding="SAME")
        y = tensorflow.concat([y, tensorflow.nn.relu(y)], axis=-1)[..., :9]
        return tensorflow.add_n([tensorflow.matmul(y, dense), y[..., :6], y[..., 3:]])

    data, frozen = freeze(fn, [spec([1, 7, 8, 4])])
    carried = {name for node in tfpb.GraphDef.FromString(data).node for name in node.attr}
    assert {"use_cudnn_on_gpu", "explicit_paddings", "N", "T"} <= carried
    model = load_bytes(tmp_path, data)
    x = rand(1, 7, 8, 4, seed=4)
    (got,) = run_core(model, {model.graph.inputs[0].name: x}).values()
    close(got, frozen(tensorflow.constant(x))[0].numpy())


def test_caffe_accepts_fields_without_effect(tmp_path):
    """Fillers and engine on a Convolution, Dropout's ratio, and another type's message on a
    ReLU (Caffe reads a layer's own message only) leave the result as OpenCV computes it; a
    field only the registry's up-front check reads (the convolution's axis) counts as read."""
    prototxt = INPUT + (
        'layer { name: "conv" type: "Convolution" bottom: "data" top: "conv" '
        "convolution_param { num_output: 4 kernel_size: 3 axis: 1 engine: CAFFE "
        'weight_filler { type: "xavier" } bias_filler { type: "constant" } } }\n'
        'layer { name: "drop" type: "Dropout" bottom: "conv" top: "conv" '
        "dropout_param { dropout_ratio: 0.3 } }\n"
        'layer { name: "relu" type: "ReLU" bottom: "conv" top: "relu" '
        "power_param { power: 2 } }\n")
    model, results = compare_with_opencv(tmp_path, prototxt)
    assert [op for op in (n.op for n in model.graph.nodes)] == ["Conv", "Identity", "Relu"]
    assert len(results) == 1


# -- a broken node's error carries the node and names it once -------------------------------
def _named_once(error: Exception, node: str, op: str, framework: str) -> None:
    assert getattr(error, "where", None) == ConversionContext(node, op, framework)
    assert str(error).count(f"'{node}'") == 1, str(error)


def test_onnx_error_inside_a_converter_names_the_node_once():
    node = helper.make_node("Conv", ["x", "w"], ["y"], name="grouped", group=0)
    model = make_model([node], [("x", [1, 2, 5, 5])], [("y", None)],
                       {"w": np.ones((2, 2, 1, 1), np.float32)})
    with pytest.raises(InvalidAttributeError) as info:
        convert(model)
    assert str(info.value).startswith("node 'grouped' (Conv): group 0")
    _named_once(info.value, "grouped", "Conv", "onnx")


@pytest.mark.parametrize("build, node, op, words", [
    ("range", "rng", "Range", "delta is 0"),
    ("pool", "pool", "MaxPool", "attribute 'ksize' is not a list"),
])
def test_tensorflow_error_inside_a_converter_names_the_node_once(tmp_path, build, node, op,
                                                                 words):
    graph = tfpb.GraphDef()
    if build == "range":
        for name, value in (("start", 0), ("limit", 4), ("delta", 0)):
            _const(graph, name, np.array(value, np.int32))
        _node(graph, node, op, ["start", "limit", "delta"],
              Tidx=tfpb.AttrValue(type=tfpb.DT_INT32))
    else:  # an attribute of the wrong kind: said by the node's Attrs, located there
        _placeholder(graph, "x", [1, 4, 4, 2])
        _node(graph, node, op, ["x"], ksize=tfpb.AttrValue(i=2),
              padding=tfpb.AttrValue(s=b"SAME"), **T)
    with pytest.raises((InvalidModelError, InvalidAttributeError)) as info:
        load_bytes(tmp_path, graph.SerializeToString())
    assert str(info.value).startswith(f"node '{node}' ({op}): {words}")
    _named_once(info.value, node, op, "tensorflow")


@pytest.mark.parametrize("params, words", [
    ("convolution_param { num_output: 0 kernel_size: 1 }", "has num_output 0"),
    ("convolution_param { num_output: 2 kernel_size: 1 group: 2 }", "group 2 does not divide"),
])
def test_caffe_error_inside_a_converter_names_the_layer_once(tmp_path, params, words):
    path = tmp_path / "net.prototxt"
    path.write_text(INPUT + f'layer {{ name: "conv" type: "Convolution" bottom: "data" '
                    f'top: "conv" {params} }}\n')
    with pytest.raises(InvalidModelError) as info:
        caffe.load(path, ConvertOptions(weights="random"))
    assert str(info.value).startswith(f"layer 'conv' (Convolution): {words}")
    _named_once(info.value, "conv", "Convolution", "caffe")
