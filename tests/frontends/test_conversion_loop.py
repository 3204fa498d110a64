"""The one conversion loop (frontends/base.py) as every frontend uses it: all refused nodes in
one error, nodes behind a refused one skipped silently, a broken model blamed with the node
named, and a converter bug reported as a bug of nhwc-onnx, never as the user's model."""
from __future__ import annotations

import pytest
from onnx import TensorProto, helper

from nhwc_onnx.errors import (
    ConversionBugError,
    ConversionContext,
    InvalidAttributeError,
    InvalidModelError,
    UnsupportedOpError,
    UsageError,
    located,
)
from nhwc_onnx.frontends import caffe, tensorflow
from nhwc_onnx.frontends.base import OpRegistry, Refusal, convert_nodes
from nhwc_onnx.frontends.context import NodeContext
from nhwc_onnx.frontends.onnx import REGISTRY as ONNX_REGISTRY
from nhwc_onnx.frontends.onnx import load_proto
from nhwc_onnx.frontends.tensorflow.proto import tf_graph_pb2 as tfpb
from nhwc_onnx.ir import Graph
from nhwc_onnx.options import ConvertOptions


# -- the loop itself ------------------------------------------------------------------------
def _registry():
    registry = OpRegistry("toy")

    @registry.register("Ok")
    def ok(ctx, node):
        ctx.append(node[0])

    @registry.register("No")
    def no(ctx, node):
        raise Refusal(f"{node[0]} cannot")

    @registry.register("Bug")
    def bug(ctx, node):
        return {}["missing"]

    @registry.register("Broken")
    def broken(ctx, node):
        raise InvalidModelError("axis 9 is out of range")

    @registry.register("Located")
    def located_elsewhere(ctx, node):  # as helpers shared with code outside the loop do
        raise located(InvalidAttributeError, ConversionContext(node[0], node[1], "toy"),
                      "attribute 'k' is not a list")

    @registry.register("Usage")
    def usage(ctx, node):
        raise UsageError("pass --weights", "--weights")

    return registry


def _run(nodes, **kw):
    done = []
    convert_nodes(nodes, _registry(), "toy", lambda n: (n[0], n[1]),
                  lambda converter, node: converter.fn(done, node), **kw)
    return done


def test_every_refusal_and_unknown_op_is_listed_once_in_model_order():
    nodes = [("a", "No"), ("b", "Ok"), ("c", "Nope"), ("d", "No"), ("e", "Ok")]
    with pytest.raises(UnsupportedOpError) as info:
        _run(nodes)
    assert [(p.node, p.op) for p in info.value.problems] == [("a", "No"), ("c", "Nope"),
                                                              ("d", "No")]
    assert "cannot convert 3 toy node(s)" in str(info.value)


def test_nodes_behind_a_failure_are_skipped_and_reported_to_the_frontend():
    skipped = []
    with pytest.raises(UnsupportedOpError) as info:
        _run([("a", "No"), ("b", "Ok"), ("c", "Ok")], blocked=lambda n: n[0] == "b",
             not_converted=lambda n: skipped.append(n[0]))
    assert [p.node for p in info.value.problems] == ["a"]
    assert skipped == ["a", "b"]


def test_all_convertible_nodes_convert():
    assert _run([("a", "Ok"), ("b", "Ok")]) == ["a", "b"]


def test_a_converter_bug_is_a_bug_of_nhwc_onnx_naming_the_node():
    with pytest.raises(ConversionBugError,
                       match="internal error in nhwc-onnx while converting node 'x' "
                             "\\(Bug, toy\\): KeyError"):
        _run([("a", "No"), ("x", "Bug")])
    with pytest.raises(ConversionBugError) as info:
        _run([("x", "Bug")])
    assert info.value.where == ConversionContext("x", "Bug", "toy")


def test_a_broken_model_is_raised_at_once_carrying_the_node_named_once():
    with pytest.raises(InvalidModelError) as info:
        _run([("a", "No"), ("y", "Broken")])
    assert str(info.value) == "node 'y' (Broken): axis 9 is out of range"
    assert info.value.where == ConversionContext("y", "Broken", "toy")


def test_an_error_carrying_its_node_is_raised_as_it_is():
    with pytest.raises(InvalidAttributeError) as info:
        _run([("z", "Located")])
    assert str(info.value) == "node 'z' (Located): attribute 'k' is not a list"


def test_an_error_of_another_shape_gets_the_node_attached_and_keeps_its_message():
    with pytest.raises(UsageError) as info:
        _run([("u", "Usage")])
    assert info.value.where == ConversionContext("u", "Usage", "toy")
    assert info.value.param_hint == "--weights" and "'u'" not in str(info.value)


class _Context(NodeContext):
    framework = "toy"

    def __init__(self, attributes: dict, reads: tuple = ()):
        super().__init__()
        self.begin_node("n", "Ok")
        self.attributes = attributes
        for name in reads:
            self.attr(name)

    def attribute_names(self):
        return list(self.attributes)

    def attribute_value(self, name):
        return self.attributes.get(name)

    def inputs(self):
        return []

    def without_effect(self, name):
        return name == "seed"


@pytest.mark.parametrize("reads, refused", [((), ["scale"]), (("scale",), [])])
def test_the_loop_refuses_a_node_whose_converter_left_an_attribute_unread(reads, refused):
    registry = OpRegistry("toy")
    registry.register("Ok")(lambda ctx, node: None)
    context = _Context({"scale": 2.0, "seed": 1}, reads)
    problems = convert_nodes([("n", "Ok")], registry, "toy", lambda n: n,
                             lambda converter, node: context, keep_going=Graph("g"))
    assert [p.reason for p in problems] == (
        [f"attribute(s) {refused} are not supported by this converter (the node converts "
         "without them)"] if refused else [])


# -- the three frontends --------------------------------------------------------------------
def _layer(name, kind, bottom, top, params=""):
    return (f'layer {{ name: "{name}" type: "{kind}" bottom: "{bottom}" top: "{top}" '
            f"{params} }}\n")


def _prototxt(tmp_path, body):
    path = tmp_path / "net.prototxt"
    path.write_text('name: "t"\nlayer { name: "data" type: "Input" top: "data" '
                    "input_param { shape { dim: 1 dim: 3 dim: 6 dim: 9 } } }\n" + body)
    return path


OUTSIDE = "pooling_param { pool: MAX kernel_size: 1 stride: 4 }"  # windows past the input


def test_caffe_lists_bad_layers_of_different_kinds_together(tmp_path):
    """A layer only the conversion finds unconvertible (the Pooling's shape-dependent window)
    is listed with one the prototxt shows (an unknown type); the layer after the refused
    Pooling is skipped; the caffemodel is not read for a refused net."""
    path = _prototxt(tmp_path, _layer("pool", "Pooling", "data", "pool", OUTSIDE)
                     + _layer("after", "ReLU", "pool", "pool")
                     + _layer("odd", "FancyLayer", "data", "odd")
                     + _layer("fine", "ReLU", "data", "fine"))
    options = ConvertOptions(weights=str(tmp_path / "absent.caffemodel"))
    with pytest.raises(UnsupportedOpError) as info:
        caffe.load(path, options)
    problems = [(p.node, p.op) for p in info.value.problems]
    assert problems == [("pool", "Pooling"), ("odd", "FancyLayer")]
    assert "outside the input" in info.value.problems[0].reason


def test_caffe_lists_every_layer_refused_during_conversion(tmp_path):
    path = _prototxt(tmp_path, _layer("pool1", "Pooling", "data", "pool1", OUTSIDE)
                     + _layer("relu", "ReLU", "data", "relu")
                     + _layer("pool2", "Pooling", "relu", "pool2", OUTSIDE))
    with pytest.raises(UnsupportedOpError) as info:
        caffe.load(path, ConvertOptions(weights="random"))
    assert [p.node for p in info.value.problems] == ["pool1", "pool2"]


def test_caffe_converter_bug_names_the_layer(tmp_path, monkeypatch):
    monkeypatch.setattr(caffe.REGISTRY.get("ReLU"), "fn", _boom)
    path = _prototxt(tmp_path, _layer("r", "ReLU", "data", "r"))
    with pytest.raises(ConversionBugError, match="node 'r' \\(ReLU, caffe\\): IndexError"):
        caffe.load(path, ConvertOptions(weights="random"))


def _boom(ctx, node):
    outputs: list = []
    return outputs[1]  # the kind of slip a converter can make


def test_onnx_converter_bug_is_not_called_a_malformed_node(monkeypatch):
    monkeypatch.setattr(ONNX_REGISTRY.get("Relu"), "fn", _boom)
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(ConversionBugError, match="node 'r' \\(Relu, onnx\\): IndexError"):
        load_proto(model, ConvertOptions())


def test_onnx_missing_input_is_still_the_models_fault():
    node = helper.make_node("Gemm", ["a"], ["y"], name="g")  # Gemm needs A and B
    graph = helper.make_graph([node], "g",
                              [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises((InvalidModelError, UnsupportedOpError)) as info:
        load_proto(model, ConvertOptions())
    assert not isinstance(info.value, ConversionBugError)
    assert "'g'" in str(info.value)


def _tf_graph() -> tfpb.GraphDef:
    graph = tfpb.GraphDef()
    x = graph.node.add(name="x", op="Placeholder")
    x.attr["dtype"].type = tfpb.DT_FLOAT
    x.attr["shape"].shape.dim.add(size=2)
    x.attr["shape"].shape.dim.add(size=3)
    relu = graph.node.add(name="r", op="Relu", input=["x"])
    relu.attr["T"].type = tfpb.DT_FLOAT
    return graph


def test_tensorflow_converter_bug_is_not_called_a_malformed_node(tmp_path, monkeypatch):
    monkeypatch.setattr(tensorflow.REGISTRY.get("Relu"), "fn", _boom)
    path = tmp_path / "m.pb"
    path.write_bytes(_tf_graph().SerializeToString())
    with pytest.raises(ConversionBugError, match="node 'r' \\(Relu, tensorflow\\): IndexError"):
        tensorflow.load(path, ConvertOptions())


def test_tensorflow_refusals_are_collected(tmp_path):
    graph = _tf_graph()
    for name in ("u1", "u2"):
        node = graph.node.add(name=name, op="MysteryOp", input=["r"])
        node.attr["T"].type = tfpb.DT_FLOAT
    path = tmp_path / "m.pb"
    path.write_bytes(graph.SerializeToString())
    with pytest.raises(UnsupportedOpError) as info:
        tensorflow.load(path, ConvertOptions(outputs=["u1", "u2"]))
    assert [p.node for p in info.value.problems] == ["u1", "u2"]
