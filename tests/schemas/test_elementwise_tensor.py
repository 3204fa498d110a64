"""Schemas of the elementwise and tensor dialect ops: valid instances and every rule they enforce.

Each case builds a one-node dialect model in code. Valid cases check that ``validate`` returns
nothing and that shape inference gives the expected output shape; invalid cases check the rule,
the message and the expected/found values of the single issue reported.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nhwc_onnx.ir import Graph, Model, Value
from nhwc_onnx.schemas import DIALECT_OPS, AttrKind, LayoutClass, infer_shapes, validate

X = (2, 7, 5, 3)  # every dimension a different size


def w(*shape, dtype=np.float32):
    """A constant (weight) input with the given shape."""
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape) + 1


def i64(*values):
    return np.array(values, dtype=np.int64)


def one_op(op, inputs, attrs=None, dtype="float32"):
    """A model with one ``op`` node. A tuple in ``inputs`` is a graph input of that shape,
    an ndarray is a constant."""
    g = Graph()
    values = []
    for idx, spec in enumerate(inputs):
        if isinstance(spec, np.ndarray):
            values.append(g.constant(spec, f"w{idx}"))
        else:
            values.append(g.add_input(Value(f"x{idx}", dtype=dtype, shape=spec)))
    node = g.make_node(op, values, dict(attrs or {}), name="n", domain="nhwc")
    g.outputs = [node.output]
    return Model(g)


VALID = [
    ("Abs", [X], {}, X),
    ("Relu", [X], {}, X),
    ("Sigmoid", [X], {}, X),
    ("Tanh", [X], {}, X),
    ("Relu6", [X], {}, X),
    ("Elu", [X], {"alpha": 0.5}, X),
    ("Elu", [X], {}, X),
    ("LeakyRelu", [X], {"alpha": 0.2}, X),
    ("LeakyRelu", [(7, 3)], {}, (7, 3)),
    ("Scale", [X], {"scale": 2.5}, X),
    ("Scale", [X], {"scale": 3}, X),  # an int is a valid float attribute value
    ("PRelu", [X, w(3)], {}, X),
    ("PRelu", [X, w(1)], {}, X),
    ("PRelu", [X, np.array(0.25, np.float32)], {}, X),
    ("Add", [X, X], {}, X),
    ("Add", [X, w(*X)], {}, X),
    ("Mul", [X, X], {}, X),
    ("Sum", [X, X, X], {}, X),
    ("Sum", [X], {}, X),
    ("Max", [X, X], {}, X),
    ("Max", [X, (3,)], {}, X),
    ("Max", [(2, 1, 5, 1), (7, 1, 3)], {}, X),
    ("Max", [X, (2, 1, 1, 3), w(1)], {}, X),
    ("AddBias", [X, w(3)], {}, X),
    ("AddBias", [(4, 6), w(6)], {}, (4, 6)),
    ("Reshape", [X, i64(0, -1, 3)], {}, (2, 35, 3)),
    ("Reshape", [X, i64(2, 105)], {}, (2, 105)),
    ("Reshape", [X, i64(-1)], {}, (210,)),
    # OpenVINO Reshape-1's special_zero examples
    ("Reshape", [(2, 5, 5, 24), i64(0, -1, 4)], {}, (2, 150, 4)),
    ("Reshape", [(2, 2, 3), i64(0, 0, 1, -1)], {}, (2, 2, 1, 3)),
    ("Reshape", [(3, 1, 1), i64(-1, 0)], {}, (3, 1)),
    ("Reshape", [(3, 1, 1), i64(0, -1)], {}, (3, 1)),
    ("Flatten", [X], {}, (2, 105)),
    ("Flatten", [X], {"axis": 0}, (1, 210)),
    ("Flatten", [X], {"axis": 3}, (70, 3)),
    ("Flatten", [X], {"axis": 4}, (210, 1)),
    ("Softmax", [X], {}, X),
    ("Softmax", [X], {"axis": 3}, X),
    ("Softmax", [X], {"axis": 0}, X),
    ("Squeeze", [(2, 1, 5, 1)], {"axes": [1, 3]}, (2, 5)),
    ("Squeeze", [(1, 1, 1, 3)], {"axes": [2, 1]}, (1, 3)),
    ("Concat", [X, (2, 7, 5, 4)], {"axis": 3}, (2, 7, 5, 7)),
    ("Concat", [X, (3, 7, 5, 3), (1, 7, 5, 3)], {"axis": 0}, (6, 7, 5, 3)),
    ("Concat", [X], {"axis": 1}, X),
    ("Concat", [X, w(2, 4, 5, 3)], {"axis": 1}, (2, 11, 5, 3)),
    ("Slice", [X], {"starts": [1, 0], "ends": [5, -1], "axes": [1, 2]}, (2, 4, 4, 3)),
    ("Slice", [X], {"starts": [-2], "ends": [1000], "axes": [3]}, (2, 7, 5, 2)),
    ("Slice", [X], {"starts": [0, 3], "ends": [1, 7]}, (1, 4, 5, 3)),
    # the dialect spec's examples: rows [1:2], columns [0:3]; rows [0:-1], columns [1:1000]
    ("Slice", [(2, 4)], {"axes": [0, 1], "starts": [1, 0], "ends": [2, 3]}, (1, 3)),
    ("Slice", [(2, 4)], {"starts": [0, 1], "ends": [-1, 1000]}, (1, 3)),
    ("ReduceMean", [X], {"axes": [1, 2]}, (2, 1, 1, 3)),
    ("ReduceMean", [X], {"axes": [1, 2], "keepdims": 0}, (2, 3)),
    ("ReduceMean", [X], {}, (1, 1, 1, 1)),
    ("ReduceMean", [X], {"keepdims": 0}, ()),
    ("Transpose", [X], {"perm": [0, 3, 1, 2]}, (2, 3, 7, 5)),
    ("Transpose", [X], {}, (3, 5, 7, 2)),
    ("Constant", [], {"value": w(2, 3)}, (2, 3)),
    ("Constant", [], {"value": np.array(1.5, np.float32)}, ()),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "out_shape"), VALID,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(VALID)])
def test_valid_instance(op, inputs, attrs, out_shape):
    model = one_op(op, inputs, attrs)
    assert [str(i) for i in validate(model)] == []
    assert infer_shapes(model)["n"] == out_shape


def test_every_op_of_this_family_has_a_valid_case():
    mine = {"Abs", "Add", "AddBias", "Elu", "LeakyRelu", "Max", "Mul", "PRelu", "Relu", "Relu6",
            "Scale", "Sigmoid", "Sum", "Tanh", "Concat", "Constant", "Flatten", "ReduceMean",
            "Reshape", "Slice", "Softmax", "Squeeze", "Transpose"}
    assert mine <= set(DIALECT_OPS.names())
    assert {c[0] for c in VALID} == mine
    for name in mine:
        schema = DIALECT_OPS[name]
        assert schema.domain == "nhwc" and schema.infer and schema.lower and schema.source


# (op, inputs, attrs, rule, words in the message, expected, found); None skips a check.
INVALID = [
    # arity
    ("Relu", [X, X], {}, "arity", "wrong number of inputs", "1", "2"),
    ("Tanh", [], {}, "arity", "wrong number of inputs", "1", "0"),
    ("Add", [X], {}, "arity", "wrong number of inputs", "2", "1"),
    ("Mul", [X, X, X], {}, "arity", "wrong number of inputs", "2", "3"),
    ("Sum", [], {}, "arity", "wrong number of inputs", "1..inf", "0"),
    ("AddBias", [X], {}, "arity", "wrong number of inputs", "2", "1"),
    ("Constant", [X], {"value": w(2)}, "arity", "wrong number of inputs", "0", "1"),
    # no broadcasting for Add / Mul / Sum
    ("Add", [X, (3,)], {}, "same-shape", "does not broadcast", "(2,7,5,3)", "(3)"),
    ("Add", [X, (2, 7, 5, 1)], {}, "same-shape", "input 1 has shape (2,7,5,1)",
     "(2,7,5,3)", "(2,7,5,1)"),
    ("Mul", [X, (2, 1, 1, 3)], {}, "same-shape", "Mul does not broadcast",
     "(2,7,5,3)", "(2,1,1,3)"),
    ("Mul", [X, w(3)], {}, "same-shape", "does not broadcast", "(2,7,5,3)", "(3)"),
    ("Sum", [X, X, (7, 5, 3)], {}, "same-shape", "input 2", "(2,7,5,3)", "(7,5,3)"),
    # Max broadcasts, but only compatible shapes
    ("Max", [X, (4,)], {}, "broadcast", "do not broadcast", None, "(2,7,5,3), (4)"),
    ("Max", [X, (2, 6, 1, 1)], {}, "broadcast", "do not broadcast", None, None),
    # AddBias: B is 1-D of size C and a constant
    ("AddBias", [X, w(5)], {}, "bias-shape", "5 values but A has 3 channels", "(3)", "(5)"),
    ("AddBias", [X, w(1, 3)], {}, "bias-shape", "1-D", "(3)", "(1,3)"),
    ("AddBias", [X, w(7)], {}, "bias-shape", "last axis", "(3)", "(7)"),
    ("AddBias", [X, (3,)], {}, "constant-input", "must be a constant", None, None),
    # PRelu: slope of size C or a single value
    ("PRelu", [X, w(5)], {}, "slope-shape", "size C", "(3) or (1)", "(5)"),
    ("PRelu", [X, w(5, 3)], {}, "slope-shape", "size C", "(3) or (1)", "(5,3)"),
    # attribute kinds, values, unknown and missing attributes
    ("Elu", [X], {"alpha": "big"}, "attribute", "must be of kind float", None, None),
    ("LeakyRelu", [X], {"alpha": [0.1]}, "attribute", "must be of kind float", None, None),
    ("Scale", [X], {"scale": True}, "attribute", "must be of kind float", None, None),
    ("LeakyRelu", [X], {"beta": 0.5}, "unknown-attribute", "'beta' is not defined for LeakyRelu",
     None, None),
    ("Relu", [X], {"alpha": 0.5}, "unknown-attribute", "'alpha' is not defined for Relu",
     None, None),
    ("Squeeze", [(2, 1, 5, 3)], {}, "missing-attribute", "'axes' is missing", None, None),
    ("Squeeze", [(2, 1, 5, 3)], {"axes": 1}, "attribute", "must be of kind ints", None, None),
    ("Concat", [X, X], {}, "missing-attribute", "'axis' is missing", None, None),
    ("Concat", [X, X], {"axis": 1.0}, "attribute", "must be of kind int", None, None),
    ("Slice", [X], {"ends": [2]}, "missing-attribute", "'starts' is missing", None, None),
    ("Constant", [], {}, "missing-attribute", "'value' is missing", None, None),
    ("Constant", [], {"value": [1.0, 2.0]}, "attribute", "must be of kind tensor", None, None),
    ("ReduceMean", [X], {"keepdims": 2}, "attribute", "allowed: 0, 1", None, None),
    ("Transpose", [X], {"perm": [0.0, 1.0, 2.0, 3.0]}, "attribute", "must be of kind ints",
     None, None),
    # Reshape
    ("Reshape", [X, i64(2, 7, 5, 4)], {}, "reshape-count", "has 210 elements but shape",
     "210 elements", "280 elements"),
    ("Reshape", [X, i64(0, 0, 3)], {}, "reshape-count", "210 elements", "210 elements",
     "42 elements"),
    ("Reshape", [X, i64(4, -1)], {}, "reshape-count", "cannot hold", "a divisor of 210", "4"),
    ("Reshape", [X, i64(-1, -1, 3)], {}, "reshape-shape", "more than one -1", "at most one -1",
     "2"),
    ("Reshape", [X, i64(2, -3, 35)], {}, "reshape-shape", "shape[1] is -3", None, "-3"),
    ("Reshape", [(3, 70), i64(3, 0, 0, -1)], {}, "reshape-zero", "input has rank 2", None, "2"),
    ("Reshape", [X, np.array([2, 105], np.int32)], {}, "dtype", "wrong element type", "int64",
     "int32"),
    ("Reshape", [X, w(2)], {}, "dtype", "'shape'", "int64", "float32"),
    ("Reshape", [X, i64(2, 105).reshape(1, 2)], {}, "reshape-shape", "1-D", "1-D", "2-D"),
    # Flatten / Softmax axis ranges (ONNX-1: non-negative)
    ("Flatten", [X], {"axis": 5}, "axis-range", "outside 0..4", "0..4", "5"),
    ("Flatten", [X], {"axis": -1}, "axis-range", "outside 0..4", "0..4", "-1"),
    ("Softmax", [X], {"axis": 4}, "axis-range", "outside 0..3", "0..3", "4"),
    ("Softmax", [X], {"axis": -1}, "axis-range", "outside 0..3", "0..3", "-1"),
    # Squeeze
    ("Squeeze", [X], {"axes": [2]}, "squeeze-dim", "axis 2 has size 5", "1", "5"),
    ("Squeeze", [(2, 1, 5, 1)], {"axes": [1, 4]}, "axis-range", "contains 4", "0..3", "4"),
    ("Squeeze", [(2, 1, 5, 1)], {"axes": [-1]}, "axis-range", "contains -1", "0..3", "-1"),
    ("Squeeze", [(2, 1, 5, 1)], {"axes": [1, 1]}, "axis-repeated", "more than once", None, None),
    ("Squeeze", [(2, 1, 5, 1)], {"axes": []}, "axes", "is empty", None, "[]"),
    # Concat
    ("Concat", [X, (2, 6, 5, 3)], {"axis": 3}, "concat-dims", "except axis 3",
     "(2,7,5,?)", "(2,6,5,?)"),
    ("Concat", [X, (2, 7, 5, 4), (2, 7, 4, 1)], {"axis": 3}, "concat-dims", "input 2",
     "(2,7,5,?)", "(2,7,4,?)"),
    ("Concat", [X, (2, 7, 5)], {"axis": 1}, "concat-rank", "rank 3", "4", "3"),
    ("Concat", [X, X], {"axis": -1}, "axis-range", "outside 0..3", "0..3", "-1"),
    ("Concat", [X, X], {"axis": 4}, "axis-range", "outside 0..3", "0..3", "4"),
    # Slice
    ("Slice", [X], {"starts": [3], "ends": [3], "axes": [1]}, "slice-empty", "is empty",
     None, "0"),
    ("Slice", [X], {"starts": [-1], "ends": [-3], "axes": [2]}, "slice-empty", "is empty",
     None, "0"),
    ("Slice", [X], {"starts": [0, 1], "ends": [1], "axes": [1]}, "slice-lengths",
     "same length", None, "2, 1, 1"),
    ("Slice", [X], {"starts": [0], "ends": [1], "axes": [4]}, "axis-range", "contains 4",
     "0..3", "4"),
    ("Slice", [X], {"starts": [0, 0], "ends": [1, 1], "axes": [2, 2]}, "axis-repeated",
     "more than once", None, None),
    # ReduceMean
    ("ReduceMean", [X], {"axes": [4]}, "axis-range", "contains 4", "0..3", "4"),
    ("ReduceMean", [X], {"axes": []}, "axes", "is empty", None, "[]"),
    # Transpose
    ("Transpose", [X], {"perm": [0, 1, 2]}, "perm", "not a permutation", "a permutation of 0..3",
     None),
    ("Transpose", [X], {"perm": [0, 0, 1, 2]}, "perm", "not a permutation", None, None),
    # Constant
    ("Constant", [], {"value": w(2, 3, dtype=np.int64)}, "dtype", "float32 tensor", "float32",
     "int64"),
    # float32 only
    ("Relu", [np.ones(X, np.float64)], {}, "dtype", "wrong element type", "float32", "float64"),
    ("AddBias", [X, w(3, dtype=np.float16)], {}, "dtype", "'B'", "float32", "float16"),
]


@pytest.mark.parametrize(("op", "inputs", "attrs", "rule", "words", "expected", "found"), INVALID,
                         ids=[f"{c[0]}-{c[3]}-{i}" for i, c in enumerate(INVALID)])
def test_invalid_instance(op, inputs, attrs, rule, words, expected, found):
    issues = validate(one_op(op, inputs, attrs))
    assert len(issues) == 1, [str(i) for i in issues]
    (issue,) = issues
    assert (issue.rule, issue.node, issue.op) == (rule, "n", op), str(issue)
    assert words in issue.message, str(issue)
    if expected is not None:
        assert issue.expected == expected, str(issue)
    if found is not None:
        assert issue.found == found, str(issue)


def test_int64_graph_input_is_rejected_for_float_ops():
    issues = validate(one_op("Abs", [X], dtype="int64"))
    rules = sorted(i.rule for i in issues)
    assert rules == ["dtype", "dtype"]  # the graph input itself, and the node's input port
    assert all(i.expected == "float32" and i.found == "int64" for i in issues)


def test_attribute_defaults_and_kinds_follow_the_dialect():
    def spec(op, name):
        return DIALECT_OPS[op].attrs[name]

    assert (spec("LeakyRelu", "alpha").kind, spec("LeakyRelu", "alpha").default) == (
        AttrKind.FLOAT, 0.01)
    assert spec("Elu", "alpha").default == 1.0
    assert (spec("Scale", "scale").kind, spec("Scale", "scale").default) == (AttrKind.FLOAT, 1.0)
    assert spec("Flatten", "axis").default == 1
    assert spec("Softmax", "axis").default == 1
    assert spec("ReduceMean", "keepdims").default == 1
    assert spec("ReduceMean", "keepdims").allowed == (0, 1)
    assert spec("Squeeze", "axes").required and spec("Concat", "axis").required
    assert spec("Slice", "starts").required and spec("Slice", "ends").required
    assert not spec("Slice", "axes").required
    assert spec("Constant", "value").kind is AttrKind.TENSOR and spec("Constant", "value").required
    assert spec("Transpose", "perm").default is None  # absent: reverse the axes
    reshape = DIALECT_OPS["Reshape"]
    assert reshape.inputs[1].dtypes == ("int64",) and reshape.inputs[1].constant
    assert DIALECT_OPS["AddBias"].inputs[1].constant
    assert DIALECT_OPS["Constant"].inputs == []
    assert DIALECT_OPS["Reshape"].layout is LayoutClass.TERMINATE
    assert DIALECT_OPS["Concat"].layout is LayoutClass.ATTRIBUTE
    assert DIALECT_OPS["Relu"].layout is LayoutClass.TRANSPARENT


@pytest.mark.parametrize(("op", "inputs", "attrs", "out_shape"), [
    ("Add", [(None, 7, 5, 3), (None, 7, 5, 3)], {}, (None, 7, 5, 3)),
    ("Add", [(None, 7, 5, 3), (2, 7, 5, 3)], {}, (2, 7, 5, 3)),
    ("Reshape", [(None, 7, 5, 3), i64(0, -1)], {}, (None, None)),
    ("Reshape", [(None, 7, 5, 3), i64(-1, 105)], {}, (None, 105)),
    ("Flatten", [(None, 7, 5, 3)], {}, (None, 105)),
    ("Concat", [(None, 7, 5, 3), (None, 7, 5, 2)], {"axis": 3}, (None, 7, 5, 5)),
    ("Max", [(None, 7, 5, 3), (3,)], {}, (None, 7, 5, 3)),
])
def test_unknown_batch_dimension_is_carried_through(op, inputs, attrs, out_shape):
    model = one_op(op, inputs, attrs)
    assert validate(model) == []
    assert infer_shapes(model)["n"] == out_shape


def test_unknown_dimension_still_catches_known_mismatches():
    (issue,) = validate(one_op("Add", [(None, 7, 5, 3), (None, 7, 5, 4)]))
    assert issue.rule == "same-shape" and issue.found == "(?,7,5,4)"


def test_reshape_shape_must_be_a_constant():
    g = Graph()
    x = g.add_input(Value("x", shape=X))
    shape = g.add_input(Value("shape", dtype="int64", shape=(2,)))
    node = g.make_node("Reshape", [x, shape], {}, name="n", domain="nhwc")
    g.outputs = [node.output]
    issues = {i.rule: i for i in validate(Model(g))}
    assert "must be a constant" in issues["constant-input"].message
    assert issues["constant-input"].node == "n"
    assert issues["dtype"].found == "int64"  # graph inputs are float32 in the dialect


# -- properties: shape inference agrees with numpy on random cases ------------------------------

SMALL_SHAPES = st.lists(st.integers(1, 6), min_size=1, max_size=4).map(tuple)


@settings(max_examples=150, deadline=None)
@given(shape=SMALL_SHAPES, data=st.data())
def test_slice_inference_matches_numpy_slicing(shape, data):
    axes = data.draw(st.lists(st.integers(0, len(shape) - 1), unique=True, min_size=1))
    starts = [data.draw(st.integers(-9, 9)) for _ in axes]
    ends = [data.draw(st.integers(-9, 9)) for _ in axes]
    index = [slice(None)] * len(shape)
    for a, s, e in zip(axes, starts, ends):
        index[a] = slice(s, e)
    want = np.zeros(shape)[tuple(index)].shape
    issues = validate(one_op("Slice", [shape], {"starts": starts, "ends": ends, "axes": axes}))
    if 0 in want:
        assert [i.rule for i in issues] == ["slice-empty"]
    else:
        assert issues == []
        assert infer_shapes(one_op("Slice", [shape], {"starts": starts, "ends": ends,
                                                      "axes": axes}))["n"] == want


@settings(max_examples=150, deadline=None)
@given(shape=SMALL_SHAPES, data=st.data())
def test_reshape_inference_matches_numpy(shape, data):
    target = list(data.draw(SMALL_SHAPES))
    # Use special values where they are legal: 0 copies the input dim, -1 is inferred.
    if data.draw(st.booleans()):
        target[data.draw(st.integers(0, len(target) - 1))] = -1
    zero_at = data.draw(st.integers(0, min(len(shape), len(target)) - 1))
    if target[zero_at] != -1 and data.draw(st.booleans()):
        target[zero_at] = 0
    numpy_target = [shape[i] if d == 0 else d for i, d in enumerate(target)]
    try:
        want = np.zeros(shape).reshape(numpy_target).shape
    except ValueError:
        want = None
    model = one_op("Reshape", [shape, np.array(target, np.int64)])
    issues = validate(model)
    if want is None:
        assert [i.rule for i in issues] == ["reshape-count"]
    else:
        assert issues == [] and infer_shapes(model)["n"] == want


@settings(max_examples=150, deadline=None)
@given(a=SMALL_SHAPES, b=SMALL_SHAPES)
def test_max_broadcast_inference_matches_numpy(a, b):
    try:
        want = np.broadcast_shapes(a, b)
    except ValueError:
        want = None
    model = one_op("Max", [a, b])
    issues = validate(model)
    if want is None:
        assert [i.rule for i in issues] == ["broadcast"]
    else:
        assert issues == [] and infer_shapes(model)["n"] == want


def test_broadcast_of_equal_shapes_keeps_each_dim_and_unknowns():
    from nhwc_onnx.schemas.core.define import broadcast

    class _Ctx:
        def fail(self, rule, message):
            raise AssertionError(message)

    assert broadcast(_Ctx(), [(1, 5, 1, 3), (1, 5, 1, 3)]) == (1, 5, 1, 3)
    assert broadcast(_Ctx(), [(2, None), (2, None)]) == (2, None)
    assert broadcast(_Ctx(), [(1, 7), (7,)]) == (1, 7)
    assert broadcast(_Ctx(), [(1, None), (3, 1)]) == (3, None)
