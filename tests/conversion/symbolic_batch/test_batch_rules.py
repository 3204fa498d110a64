"""The dialect's rules for a symbolic batch (schemas.batch), as ``check`` applies them to a
file: every op computes per sample; an op that addresses axis 0 of a batch-carrying value, or
whose output does not carry the batch at axis 0 only, is an issue naming it."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.ir import DIALECT, Graph, Model, Value
from nhwc_onnx.schemas import DIALECT_OPS, infer_shapes, validate
from nhwc_onnx.schemas.symbolic_batch import PER_SAMPLE
from nhwc_onnx.serialize import load, save


def test_every_dialect_op_declares_what_it_does_with_axis_0():
    assert set(PER_SAMPLE) == set(DIALECT_OPS.names())


def _model(op: str, attrs: dict, shape=("N", 5, 6), extra_inputs=()) -> Model:
    g = Graph("g")
    x = g.add_input(Value("x", "float32", shape))
    node = g.make_node(op, [x, *extra_inputs], attrs, name="node", domain=DIALECT)
    node.outputs[0].dtype = "float32"
    g.outputs.append(node.outputs[0])
    return Model(g)


def _rules(model) -> list[tuple[str, str]]:
    return [(i.node, i.rule) for i in validate(model)]


# op, attributes, input shape: each keeps a valid shape at every batch size, but mixes samples
ADDRESSING_AXIS_0 = [
    ("Softmax", {"axis": 0}, ("N", 5)),
    ("Flatten", {"axis": 0}, ("N", 5, 6)),
    ("Concat", {"axis": 0}, ("N", 5, 6)),
    ("Slice", {"starts": [0], "ends": [1], "axes": [0]}, ("N", 5, 6)),
    ("ReduceMean", {"axes": [0], "keepdims": 1}, ("N", 5, 6)),
    ("Transpose", {"perm": [1, 0, 2]}, ("N", 5, 6)),
    ("Pad", {"pads": [1, 0, 0, 0, 0, 0], "mode": "constant", "value": 0.0}, ("N", 5, 6)),
]


@pytest.mark.parametrize("op,attrs,shape", ADDRESSING_AXIS_0, ids=[c[0] for c in ADDRESSING_AXIS_0])
def test_an_op_that_addresses_the_batch_is_an_issue_of_its_node(op, attrs, shape):
    assert _rules(_model(op, attrs, shape)) == [("node", "batch")]
    fixed = _model(op, attrs, (2, *shape[1:]))  # the same node with a fixed batch: valid
    assert validate(fixed) == []


def test_the_same_ops_on_other_axes_are_per_sample():
    for op, attrs, shape in [("Softmax", {"axis": 1}, ("N", 5)),
                             ("Flatten", {"axis": 1}, ("N", 5, 6)),
                             ("Concat", {"axis": 2}, ("N", 5, 6)),
                             ("Slice", {"starts": [1], "ends": [3], "axes": [1]}, ("N", 5, 6)),
                             ("ReduceMean", {"axes": [1], "keepdims": 0}, ("N", 5, 6)),
                             ("Transpose", {"perm": [0, 2, 1]}, ("N", 5, 6))]:
        model = _model(op, attrs, shape)
        assert validate(model) == [], op
        assert infer_shapes(model)[model.graph.outputs[0].name][0] == "N", op


def test_a_reshape_copies_the_batch_by_0_or_infers_it_by_minus_1():
    def reshape(target):
        return _model("Reshape", {}, ("N", 6), [Value("t", const=np.array(target, np.int64))])

    assert infer_shapes(reshape([0, 2, 3]))["node"] == ("N", 2, 3)
    assert infer_shapes(reshape([-1, 3, 2]))["node"] == ("N", 3, 2)
    assert _rules(reshape([0, 2, 3])) == [] and _rules(reshape([-1, 3, 2])) == []
    assert _rules(reshape([2, -1])) == [("node", "batch")]  # a literal batch size
    assert _rules(reshape([-1, 3])) == [("node", "batch")]  # -1 is 2N here, not the batch


def test_a_named_dimension_other_than_the_batch_is_an_issue():
    model = _model("Relu", {}, ("N", "h", 6))
    assert ("", "symbolic-dim") in _rules(model)


def test_a_symbolic_file_is_read_back_checked_and_written_with_its_dim_param(tmp_path):
    model = _model("Softmax", {"axis": 1}, ("batch", 5))
    model.graph.outputs[0].shape = ("batch", 5)
    path = tmp_path / "m.onnx"
    save(model, path)
    back = load(path)
    assert back.graph.inputs[0].shape == ("batch", 5)
    assert back.graph.outputs[0].shape == ("batch", 5)
    assert validate(back) == []
    back.graph.outputs[0].shape = (3, 5)  # a declared output shape the batch contradicts
    assert ("", "output-shape") in _rules(back)
