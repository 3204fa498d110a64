"""Graph-level rules of ``validate``: every problem of a model is reported, none raises."""
from __future__ import annotations

import numpy as np

from nhwc_onnx.errors import SchemaValidationError
from nhwc_onnx.ir import Graph, Model, Value
from nhwc_onnx.schemas import infer_shapes, validate
from nhwc_onnx.schemas.base import OpSchema, Port, Registry

X = (2, 7, 5, 3)


def relu_chain(n=2):
    """x -> Relu -> Relu ... : a small valid model."""
    g = Graph()
    v = g.add_input(Value("x", shape=X))
    for i in range(n):
        v = g.make_node("Relu", [v], {}, name=f"relu{i}", domain="nhwc").output
    g.outputs = [v]
    return g


def by_rule(issues):
    return {i.rule: i for i in issues}


def test_valid_multi_node_model_has_no_issues_and_known_shapes():
    g = Graph()
    x = g.add_input(Value("x", shape=X))
    bias = g.constant(np.ones(3, np.float32), "bias")
    a = g.make_node("AddBias", [x, bias], {}, name="biased", domain="nhwc")
    r = g.make_node("Relu6", [a.output], {}, name="act", domain="nhwc")
    s = g.make_node("Add", [r.output, x], {}, name="skip", domain="nhwc")
    c = g.make_node("Concat", [s.output, r.output], {"axis": 3}, name="cat", domain="nhwc")
    m = g.make_node("ReduceMean", [c.output], {"axes": [1, 2], "keepdims": 0}, name="gap",
                    domain="nhwc")
    g.outputs = [m.output]
    model = Model(g)
    assert validate(model) == []
    shapes = infer_shapes(model)
    assert shapes["cat"] == (2, 7, 5, 6)
    assert shapes["gap"] == (2, 6)
    assert shapes["bias"] == (3,)


def test_unknown_op_is_reported_by_name_and_domain():
    g = Graph()
    x = g.add_input(Value("x", shape=X))
    bad = g.make_node("Conv2D", [x], {}, name="tfconv", domain="nhwc")
    core = g.make_node("Relu", [bad.output], {}, name="core_relu", domain="core")
    g.outputs = [core.output]
    issues = validate(Model(g))
    assert [(i.node, i.rule) for i in issues] == [("tfconv", "unknown-op"),
                                                  ("core_relu", "unknown-op")]
    assert "'nhwc.Conv2D' is not in the nhwc dialect" in issues[0].message
    assert "'core.Relu'" in issues[1].message


def test_default_domain_nodes_are_read_as_dialect_ops():
    g = Graph()
    x = g.add_input(Value("x", shape=X))
    n = g.make_node("Relu6", [x], {}, domain="")
    g.outputs = [n.output]
    assert validate(Model(g)) == []


def test_cycle_is_reported_without_raising():
    g = Graph()
    x = g.add_input(Value("x", shape=X))
    a = g.make_node("Relu", [x], {}, name="a", domain="nhwc")
    b = g.make_node("Relu", [a.output], {}, name="b", domain="nhwc")
    a.set_input(0, b.output)  # a reads b, b reads a
    g.outputs = [b.output]
    issues = validate(Model(g))
    assert [i.rule for i in issues] == ["cycle"]
    assert "'a'" in issues[0].message and "'b'" in issues[0].message


def test_dangling_input_names_the_node_and_tensor():
    g = relu_chain(1)
    ghost = Value("ghost", shape=X)
    n = g.make_node("Add", [g.outputs[0], ghost], {}, name="add", domain="nhwc")
    g.outputs = [n.output]
    issues = validate(Model(g))
    assert [(i.node, i.rule) for i in issues] == [("add", "dangling-input")]
    assert "input 1 'ghost'" in issues[0].message


def test_graph_output_without_producer_is_reported():
    g = relu_chain(1)
    g.outputs.append(Value("nowhere", shape=X))
    (issue,) = validate(Model(g))
    assert issue.rule == "dangling-output" and "'nowhere'" in issue.message


def test_duplicate_tensor_names_are_reported():
    g = Graph()
    x = g.add_input(Value("x", shape=X))
    # A node output that reuses the graph input's name: two tensors called 'x'.
    n = g.make_node("Relu", [x], {}, name="relu", outputs=[Value("x")], domain="nhwc")
    g.outputs = [n.output]
    issues = validate(Model(g))
    assert [i.rule for i in issues] == ["duplicate-name"]
    assert "2 different tensors are named 'x'" in issues[0].message


def test_duplicate_node_names_are_reported():
    g = relu_chain(2)
    g.nodes[1].name = "relu0"
    issues = validate(Model(g))
    assert [(i.node, i.rule) for i in issues] == [("relu0", "duplicate-node-name")]


def test_non_float32_tensors_are_reported_where_float_is_required():
    g = Graph()
    x = g.add_input(Value("x", dtype="float64", shape=X))
    bias = g.constant(np.ones(3, np.int32), "bias")
    a = g.make_node("AddBias", [x, bias], {}, name="biased", domain="nhwc")
    r = g.make_node("Relu", [a.output], {}, name="act", outputs=[Value("act", dtype="int64")],
                    domain="nhwc")
    g.outputs = [r.output]
    issues = validate(Model(g))
    assert all(i.rule == "dtype" for i in issues)
    found = sorted((i.node, i.found) for i in issues)
    assert found == [("", "float64"), ("act", "int64"), ("biased", "float64"),
                     ("biased", "int32")]
    assert all(i.expected == "float32" for i in issues)
    graph_level = next(i for i in issues if i.node == "")
    assert "graph input 'x' must be float32" in graph_level.message


def test_declared_output_shape_disagreeing_with_inference_is_reported():
    g = relu_chain(1)
    g.outputs[0].shape = (2, 7, 5, 4)
    (issue,) = validate(Model(g))
    assert issue.rule == "output-shape" and "'relu0'" in issue.message
    assert (issue.expected, issue.found) == ("(2,7,5,3)", "(2,7,5,4)")


def test_declared_output_shape_with_unknown_or_matching_dims_is_accepted():
    g = relu_chain(1)
    g.outputs[0].shape = (None, 7, 5, 3)
    assert validate(Model(g)) == []
    g.outputs[0].shape = X
    assert validate(Model(g)) == []
    g.outputs[0].shape = (2, 7, 15)
    assert [i.rule for i in validate(Model(g))] == ["output-shape"]


def test_three_different_problems_are_all_reported():
    g = Graph()
    x = g.add_input(Value("x", shape=X))
    unknown = g.make_node("Swish", [x], {}, name="swish", domain="nhwc")
    small = g.add_input(Value("small", shape=(2, 7, 5, 1)))
    add = g.make_node("Add", [x, small], {}, name="add", domain="nhwc")
    squeeze = g.make_node("Squeeze", [add.output], {}, name="squeeze", domain="nhwc")
    g.outputs = [unknown.output, squeeze.output]
    issues = validate(Model(g))
    assert sorted((i.node, i.rule) for i in issues) == [
        ("add", "same-shape"), ("squeeze", "missing-attribute"), ("swish", "unknown-op")]
    err = SchemaValidationError(issues, "model.onnx")
    assert "3 dialect rule violation(s)" in str(err)
    assert all(f"node '{n}'" in str(err) for n in ("swish", "add", "squeeze"))


def test_a_broken_node_does_not_cascade_into_its_consumers():
    g = Graph()
    x = g.add_input(Value("x", shape=X))
    add = g.make_node("Add", [x, g.constant(np.ones(3, np.float32), "b")], {}, name="add",
                      domain="nhwc")
    relu = g.make_node("Relu", [add.output], {}, name="relu", domain="nhwc")
    g.outputs = [relu.output]
    assert [(i.node, i.rule) for i in validate(Model(g))] == [("add", "same-shape")]


def test_wrong_output_count_is_reported():
    g = Graph()
    x = g.add_input(Value("x", shape=X))
    n = g.make_node("Relu", [x], {}, name="relu", outputs=2, domain="nhwc")
    g.outputs = [n.outputs[0]]
    (issue,) = validate(Model(g))
    assert (issue.rule, issue.expected, issue.found) == ("arity", "1", "2")
    assert "outputs" in issue.message


def test_unknown_batch_dimension_does_not_crash_validation():
    g = Graph()
    x = g.add_input(Value("x", shape=(None, 7, 5, 3)))
    r = g.make_node("Relu", [x], {}, name="relu", domain="nhwc")
    f = g.make_node("Flatten", [r.output], {}, name="flat", domain="nhwc")
    g.outputs = [f.output]
    model = Model(g)
    assert validate(model) == []
    assert infer_shapes(model)["flat"] == (None, 105)


def test_shape_inference_that_fails_unexpectedly_becomes_an_issue():
    def brittle_infer(ctx):
        return [(ctx.shape(0)[9],)]  # IndexError on a rank-4 input

    registry = Registry("nhwc")
    registry.register(OpSchema("Brittle", "nhwc", "test op", [Port("X")], [Port("Y")],
                               infer=brittle_infer))
    g = Graph()
    x = g.add_input(Value("x", shape=X))
    n = g.make_node("Brittle", [x], {}, name="b", domain="nhwc")
    g.outputs = [n.output]
    (issue,) = validate(Model(g), registry)
    assert issue.rule == "shape" and "shape inference failed" in issue.message


def test_validate_accepts_a_graph_as_well_as_a_model():
    g = relu_chain(3)
    assert validate(g) == [] and validate(Model(g)) == []
