"""What ``lower_core_model`` cannot write as standard ONNX is refused, every such node in one
error naming the node, its op and why: never lowered to something else."""
from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from nhwc_onnx.errors import UnsupportedOpError
from nhwc_onnx.ir import Graph, Model, Value
from nhwc_onnx.ir.core import DIALECT, UNCONVERTED
from nhwc_onnx.runtime.standard_onnx import lower_core_model, lower_model
from tests.runtime.core_lowering_cases import assert_matches, rand


def _graph() -> tuple[Graph, Value]:
    graph = Graph("refused")
    return graph, graph.add_input(Value("x", shape=(2, 3, 5)))


def test_a_node_outside_the_core_domain_is_refused():
    graph, x = _graph()
    node = graph.make_node("FancyOp", [x], name="fancy", domain=UNCONVERTED)
    graph.outputs.append(node.output)
    with pytest.raises(UnsupportedOpError, match="'fancy' \\(FancyOp\\).*domain 'unconverted'"):
        lower_core_model(Model(graph))


def test_an_attribute_the_core_op_does_not_declare_is_refused():
    graph, x = _graph()
    node = graph.make_node("Relu", [x], {"alpha": 0.5}, name="relu")
    graph.outputs.append(node.output)
    with pytest.raises(UnsupportedOpError, match="'relu' \\(Relu\\).*attribute 'alpha'"):
        lower_core_model(Model(graph))


def test_every_node_that_cannot_be_lowered_is_named_in_one_error():
    graph, x = _graph()
    wide = graph.make_node("Pad", [x], {"pads": [0, 0, 6, 0, 0, 0], "mode": "reflect"},
                           name="wide_mirror")
    odd = graph.make_node("Sigmoid", [wide.output], {"beta": 2.0}, name="odd_sigmoid")
    graph.outputs.append(odd.output)
    with pytest.raises(UnsupportedOpError) as refusal:
        lower_core_model(Model(graph))
    assert [(p.node, p.op) for p in refusal.value.problems] == [
        ("wide_mirror", "Pad"), ("odd_sigmoid", "Sigmoid")]


def test_a_lowerable_model_keeps_its_input_and_output_names_and_types():
    graph, x = _graph()
    cast = graph.make_node("Cast", [graph.make_node("Relu", [x]).output], {"to": "int32"},
                           name="as_int")
    cast.output.dtype = "int32"
    graph.outputs.append(cast.output)
    proto = lower_core_model(Model(graph))
    assert (proto.opset_import[0].version, proto.ir_version) == (17, 8)
    assert [(v.name, v.type.tensor_type.elem_type) for v in proto.graph.input] == [("x", 1)]
    assert [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim] == [2, 3, 5]
    assert [(v.name, v.type.tensor_type.elem_type) for v in proto.graph.output] == [
        ("as_int", 6)]


def test_a_core_node_is_lowered_as_its_core_op_beside_a_dialect_op_of_its_name():
    """Core Softmax normalises one axis, the dialect's (ONNX-1) the flattened tail from it:
    the node's domain picks the lowering, never the op name alone."""
    graph, x = _graph()
    relu = graph.make_node("Relu", [x], name="relu", domain=DIALECT)
    soft = graph.make_node("Softmax", [relu.output], {"axis": 1}, name="soft")
    graph.outputs.append(soft.output)
    session = ort.InferenceSession(lower_model(Model(graph)).SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    feed = rand(2, 3, 5)
    (got,) = session.run(None, {"x": feed})
    shifted = np.exp(np.maximum(feed, 0).astype(np.float64))
    assert_matches(got, (shifted / shifted.sum(axis=1, keepdims=True)).astype(np.float32))
