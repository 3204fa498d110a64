"""Schemas of the conv/pool family: what validate() accepts, refuses, and the shapes it infers."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.ir import DIALECT, Graph, Model, Value
from nhwc_onnx.schemas import DIALECT_OPS, LayoutClass, infer_shapes, validate
from nhwc_onnx.schemas.base import conv_transpose_tf, same_tf, valid_tf

FAMILY = ["Conv", "DepthwiseConv2d", "ConvTranspose", "Dense", "Gemm", "MatMul", "MaxPool",
          "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "Pad", "UpSampling2D",
          "SpaceToDepth", "BatchNormalization"]


def w(*shape: int) -> np.ndarray:
    """A constant weight of this shape (values do not matter to the schema)."""
    return np.zeros(shape, np.float32)


def build(op: str, inputs: list, attrs: dict | None = None, outputs: int = 1) -> Model:
    """One dialect node. inputs: tuple = graph input of that shape, ndarray = constant,
    None = absent optional input."""
    g = Graph()
    values = []
    for i, spec in enumerate(inputs):
        if spec is None:
            values.append(None)
        elif isinstance(spec, np.ndarray):
            values.append(g.constant(spec, f"c{i}"))
        else:
            values.append(g.add_input(Value(f"in{i}", shape=spec)))
    node = g.make_node(op, values, dict(attrs or {}), name="n", outputs=outputs, domain=DIALECT)
    g.outputs = list(node.outputs)
    return Model(g)


def issues(op: str, inputs: list, attrs: dict | None = None, outputs: int = 1) -> list:
    return validate(build(op, inputs, attrs, outputs))


def out_shape(op: str, inputs: list, attrs: dict | None = None) -> tuple:
    model = build(op, inputs, attrs)
    found = validate(model)
    assert found == [], [str(i) for i in found]
    return infer_shapes(model)[model.graph.outputs[0].name]


def only_issue(found: list, rule: str, *fragments: str) -> None:
    """Exactly one issue, of this rule, whose text holds every fragment."""
    assert len(found) == 1, [str(i) for i in found]
    text = str(found[0])
    assert found[0].rule == rule, text
    for fragment in fragments:
        assert fragment in text, text


X = (2, 7, 5, 3)  # N, H, W, C all different

VALID_INSTANCES = {
    "Conv": (["x", w(4, 3, 2, 3), w(4)], {"pads": "SAME", "strides": [2, 2]}, (2, 4, 3, 4)),
    "DepthwiseConv2d": (["x", w(3, 3, 3, 2)], {"pads": "VALID"}, (2, 5, 3, 6)),
    "ConvTranspose": (["x", w(3, 4, 3, 3), w(4)], {"pads": "SAME", "strides": [2, 2]},
                      (2, 14, 10, 4)),
    "Dense": (["x", w(6, 7, 5, 3), w(6)], {}, (2, 6)),
    "Gemm": ([(2, 5), (5, 4), (4,)], {"alpha": 0.5, "transB": 0}, (2, 4)),
    "MatMul": ([(3, 2, 5), (5, 4)], {}, (3, 2, 4)),
    "MaxPool": (["x"], {"kernel_shape": [3, 2], "strides": [2, 1], "pads": "SAME"},
                (2, 4, 5, 3)),
    "AveragePool": (["x"], {"kernel_shape": [2, 2], "strides": [2, 2], "pads": "VALID"},
                    (2, 3, 2, 3)),
    "GlobalAveragePool": (["x"], {}, (2, 1, 1, 3)),
    "GlobalMaxPool": (["x"], {}, (2, 1, 1, 3)),
    "Pad": (["x"], {"pads": [0, 0, 1, 2, 3, 0, 0, 1]}, (2, 10, 8, 4)),
    "UpSampling2D": (["x"], {"size": [1, 2, 3, 1], "mode": "linear"}, (2, 14, 15, 3)),
    "SpaceToDepth": ([(2, 6, 4, 3)], {"blocksize": 2}, (2, 3, 2, 12)),
    "BatchNormalization": (["x", w(3), w(3), w(3), w(3)], {"epsilon": 1e-3}, X),
}


def _resolve(inputs: list) -> list:
    return [X if isinstance(spec, str) else spec for spec in inputs]


def test_every_family_op_is_registered_with_infer_and_lower():
    for name in FAMILY:
        schema = DIALECT_OPS[name]
        assert schema.domain == "nhwc"
        assert schema.infer is not None and schema.lower is not None, name
        assert schema.source.startswith("dialect spec v0.1 (docs/design.md)"), name
    assert DIALECT_OPS["Conv"].layout is LayoutClass.IMPLICIT
    assert DIALECT_OPS["Pad"].layout is LayoutClass.ATTRIBUTE


@pytest.mark.parametrize("op", FAMILY)
def test_valid_instance_validates_and_infers(op):
    inputs, attrs, expected = VALID_INSTANCES[op]
    assert out_shape(op, _resolve(inputs), attrs) == expected


# -- arity ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("op, inputs, expected", [
    ("Conv", [X], "2..3"),
    ("DepthwiseConv2d", [X, w(3, 3, 3, 1), w(3)], "2"),  # no bias input in the dialect
    ("BatchNormalization", [X, w(3), w(3), w(3)], "5"),
    ("Gemm", [(2, 5), (5, 4)], "3"),  # C is required, as in the dialect spec
    ("MaxPool", [X, X], "1"),
])
def test_wrong_arity_is_reported(op, inputs, expected):
    attrs = {"kernel_shape": [2, 2]} if op == "MaxPool" else {}
    only_issue(issues(op, inputs, attrs), "arity", "wrong number of inputs",
               f"expected {expected}")


def test_wrong_output_count_is_reported():
    found = issues("BatchNormalization", [X, w(3), w(3), w(3), w(3)], outputs=3)
    only_issue(found, "arity", "wrong number of outputs", "expected 1, found 3")


# -- attributes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("op, inputs, attrs, fragment", [
    ("Conv", [X, w(4, 3, 3, 3)], {"strides": 2}, "'strides' must be of kind ints"),
    ("Conv", [X, w(4, 3, 3, 3)], {"pads": [1, 1, 1, 1]}, "'pads' must be of kind string"),
    ("MaxPool", [X], {"kernel_shape": [2.0, 2.0]}, "'kernel_shape' must be of kind ints"),
    ("BatchNormalization", [X, w(3), w(3), w(3), w(3)], {"epsilon": "1e-3"},
     "'epsilon' must be of kind float"),
    ("Conv", [X, w(4, 3, 3, 3)], {"group": True}, "'group' must be of kind int"),
])
def test_wrong_attribute_kind_is_reported(op, inputs, attrs, fragment):
    only_issue(issues(op, inputs, attrs), "attribute", fragment)


@pytest.mark.parametrize("pads", ["same", "SAME_UPPER", "valid", "EXPLICIT"])
@pytest.mark.parametrize("op, inputs", [
    ("Conv", [X, w(4, 3, 3, 3)]),
    ("DepthwiseConv2d", [X, w(3, 3, 3, 1)]),
    ("ConvTranspose", [X, w(3, 2, 3, 3)]),
    ("MaxPool", [X]),
    ("AveragePool", [X]),
])
def test_pads_string_must_be_exactly_same_or_valid(op, inputs, pads):
    attrs = {"pads": pads, **({"kernel_shape": [2, 2]} if "Pool" in op else {})}
    only_issue(issues(op, inputs, attrs), "attribute", f"'pads' has value '{pads}'",
               "allowed: 'SAME', 'VALID'")


@pytest.mark.parametrize("op, inputs, attrs, name", [
    ("DepthwiseConv2d", [X, w(3, 3, 3, 1)], {"group": 3}, "group"),
    ("Dense", [X, w(6, 7, 5, 3)], {"pads": "VALID"}, "pads"),
    ("MaxPool", [X], {"kernel_shape": [2, 2], "dilations": [2, 2]}, "dilations"),
    ("BatchNormalization", [X, w(3), w(3), w(3), w(3)], {"momentum": 0.9}, "momentum"),
    ("Conv", [X, w(4, 3, 3, 3)], {"auto_pad": "SAME_UPPER"}, "auto_pad"),
])
def test_unknown_attribute_is_reported(op, inputs, attrs, name):
    only_issue(issues(op, inputs, attrs), "unknown-attribute", f"attribute '{name}' is not "
               f"defined for {op}")


@pytest.mark.parametrize("op, inputs, name", [
    ("MaxPool", [X], "kernel_shape"),
    ("AveragePool", [X], "kernel_shape"),
    ("Pad", [X], "pads"),
    ("UpSampling2D", [X], "size"),
    ("SpaceToDepth", [(2, 6, 4, 3)], "blocksize"),
])
def test_missing_required_attribute_is_reported(op, inputs, name):
    only_issue(issues(op, inputs), "missing-attribute", f"required attribute '{name}' is missing")


@pytest.mark.parametrize("op, inputs, attrs, fragment", [
    ("Conv", [X, w(4, 3, 3, 3)], {"strides": [2, 2, 2]}, "'strides' must list 2 ints"),
    ("Conv", [X, w(4, 3, 3, 3)], {"dilations": [0, 1]}, "'dilations' must list 2 ints"),
    ("Conv", [X, w(4, 3, 3, 3)], {"group": 0}, "'group' must be >= 1"),
    ("MaxPool", [X], {"kernel_shape": [2]}, "'kernel_shape' must list 2 ints"),
    ("ConvTranspose", [X, w(3, 2, 3, 3)], {"strides": [2, 2], "output_padding": [2, 0]},
     "output_padding must be less than its stride"),
    ("Pad", [X], {"pads": [0, 0, 1, 1, 1, 1]}, "'pads' must be the TF paddings matrix"),
    ("Pad", [X], {"pads": [0, 0, -1, 1, 1, 1, 0, 0]}, "'pads' must be the TF paddings matrix"),
    ("UpSampling2D", [X], {"size": [1, 2, 2]}, "one integer scale >= 1 per input axis"),
    ("UpSampling2D", [X], {"size": [1, 0, 2, 1]}, "one integer scale >= 1 per input axis"),
    ("UpSampling2D", [X], {"size": [2, 2, 2, 1], "mode": "linear"}, "size must be [1, sH, sW, 1]"),
    ("SpaceToDepth", [X], {"blocksize": 0}, "'blocksize' must be >= 1"),
    ("Conv", [X, w(4, 3, 3, 1)], {"group": 2}, "input channels C=3 are not divisible by group=2"),
])
def test_attribute_values_outside_the_rules_are_reported(op, inputs, attrs, fragment):
    only_issue(issues(op, inputs, attrs), "attribute", fragment)


@pytest.mark.parametrize("op, attrs, fragment", [
    ("Pad", {"pads": [0] * 8, "mode": "reflect"}, "'mode' has value 'reflect'"),
    ("Pad", {"pads": [0] * 8, "value": 1.0}, "'value' has value 1.0"),
    ("UpSampling2D", {"size": [1, 2, 2, 1], "mode": "bilinear"}, "'mode' has value 'bilinear'"),
    ("Gemm", {"transA": 2}, "'transA' has value 2"),
])
def test_disallowed_attribute_values_are_reported(op, attrs, fragment):
    inputs = [(2, 5), (5, 4), (4,)] if op == "Gemm" else [X]
    only_issue(issues(op, inputs, attrs), "attribute", fragment)


# -- weights, ranks and shapes -------------------------------------------------------------------


@pytest.mark.parametrize("op, inputs, attrs, fragment", [
    ("Conv", [X, w(4, 3, 3, 2)], {}, "Conv W must be (M, kH, kW, C/group)"),
    ("Conv", [X, w(3, 3, 3)], {}, "weight W must be 4-D (M, kH, kW, C/group)"),
    ("Conv", [(2, 7, 5, 4), w(6, 3, 3, 4)], {"group": 2}, "Conv W must be (M, kH, kW, C/group)"),
    ("Conv", [(2, 7, 5, 4), w(3, 3, 3, 2)], {"group": 2}, "M=3 are not divisible by group=2"),
    ("Conv", [X, w(4, 3, 3, 3), w(5)], {}, "input 'B' must be 1-D of size 4"),
    ("Conv", [X, w(4, 3, 2, 3)], {"kernel_shape": [2, 3]}, "'kernel_shape' disagrees with"),
    ("DepthwiseConv2d", [X, w(3, 3, 2, 1)], {}, "DepthwiseConv2d W must be (kH, kW, C, mult"),
    ("DepthwiseConv2d", [X, w(3, 3, 3, 2)], {"kernel_shape": [3, 2]}, "'kernel_shape' disagrees"),
    ("ConvTranspose", [X, w(2, 4, 3, 3)], {}, "ConvTranspose W must be (C, M/group, kH, kW)"),
    ("ConvTranspose", [X, w(3, 4, 3, 3), w(3)], {}, "input 'B' must be 1-D of size 4"),
    ("Dense", [X, w(6, 5, 7, 3)], {}, "Dense W must be (M, K) for X (N, K), or (M, H, W, C)"),
    ("Dense", [(2, 5), w(6, 4)], {}, "Dense W must be (M, K)"),
    ("Dense", [(2, 5), w(6, 5), w(5)], {}, "input 'B' must be 1-D of size 6"),
    ("BatchNormalization", [X, w(3), w(3), w(4), w(3)], {}, "input 'mean' must be 1-D of size 3"),
    ("BatchNormalization", [X, w(1, 3), w(3), w(3), w(3)], {}, "input 'scale' must be 1-D"),
])
def test_wrong_weight_shape_is_reported(op, inputs, attrs, fragment):
    only_issue(issues(op, inputs, attrs), "weight-shape", fragment)


@pytest.mark.parametrize("op, inputs, attrs, fragment", [
    ("Conv", [(2, 7, 3), w(4, 3, 3, 3)], {}, "input 'X' must be a 4-D NHWC tensor"),
    ("DepthwiseConv2d", [(7, 5, 3), w(3, 3, 3, 1)], {}, "input 'X' must be a 4-D NHWC"),
    ("MaxPool", [(2, 7, 5, 3, 1)], {"kernel_shape": [2, 2]}, "input 'X' must be a 4-D NHWC"),
    ("GlobalAveragePool", [(2, 7, 3)], {}, "input 'X' must be a 4-D NHWC tensor"),
    ("SpaceToDepth", [(2, 6, 4)], {"blocksize": 2}, "input 'X' must be a 4-D NHWC tensor"),
    ("Dense", [(2, 7, 3), w(4, 7, 3)], {}, "Dense input X must be (N, K) or (N, H, W, C)"),
    ("Gemm", [(2, 5, 1), (5, 4), (4,)], {}, "Gemm input 'A' must be 2-D"),
    ("BatchNormalization", [(3,), w(3), w(3), w(3), w(3)], {}, "rank >= 2"),
])
def test_wrong_rank_is_reported(op, inputs, attrs, fragment):
    only_issue(issues(op, inputs, attrs), "rank", fragment)


@pytest.mark.parametrize("op, inputs, attrs, fragment", [
    ("Conv", [(2, 2, 5, 3), w(4, 3, 3, 3)], {"pads": "VALID"}, "does not fit input H = 2"),
    ("MaxPool", [(2, 7, 1, 3)], {"kernel_shape": [1, 2]}, "does not fit input W = 1"),
    ("Conv", [(2, 5, 5, 3), w(4, 3, 3, 3)], {"dilations": [3, 1]}, "effective size 7"),
    ("SpaceToDepth", [X], {"blocksize": 2}, "input H = 7 is not divisible by blocksize 2"),
    ("Gemm", [(2, 5), (4, 5), (4,)], {}, "Gemm inner dimensions"),
    ("Gemm", [(2, 5), (5, 4), (3,)], {}, "Gemm C must broadcast"),
    ("MatMul", [(2, 5), (4, 3)], {}, "MatMul inner dimensions differ"),
    ("MatMul", [(3, 2, 5), (2, 5, 4)], {}, "MatMul batch dimensions do not broadcast"),
])
def test_incompatible_shapes_are_reported(op, inputs, attrs, fragment):
    only_issue(issues(op, inputs, attrs), "shape", fragment)


def test_weights_must_be_constants():
    found = issues("Conv", [X, (4, 3, 3, 3)])
    only_issue(found, "constant-input", "input 'W' ('in1') must be a constant initializer")
    found = issues("BatchNormalization", [X, w(3), (3,), w(3), w(3)])
    only_issue(found, "constant-input", "input 'B' ('in2') must be a constant")


def test_several_problems_of_one_node_are_all_reported():
    found = issues("Conv", [X, w(4, 3, 3, 3)], {"pads": "same", "padding": 1})
    assert sorted(i.rule for i in found) == ["attribute", "unknown-attribute"]


# -- shape arithmetic, hand-computed --------------------------------------------------------------


@pytest.mark.parametrize("i, k, s, d, same, valid", [
    (7, 4, 1, 1, (7, 1, 2), 4),    # SAME with odd total padding: the odd pixel at the end
    (8, 3, 2, 1, (4, 0, 1), 3),    # stride 2, even size
    (7, 3, 2, 1, (4, 1, 1), 3),    # stride 2, odd size
    (7, 3, 1, 2, (7, 2, 2), 3),    # dilation 2: effective kernel 5
    (9, 5, 2, 1, (5, 2, 2), 3),    # kernel > stride
    (8, 2, 3, 1, (3, 0, 0), 3),    # kernel < stride: no padding needed
    (1, 3, 1, 1, (1, 1, 1), -1),   # 1x1 spatial: SAME pads both sides, VALID is empty
    (1, 1, 2, 1, (1, 0, 0), 1),
    (10, 3, 2, 3, (5, 2, 3), 2),   # stride and dilation both > 1 (effective kernel 7)
])
def test_tf_padding_arithmetic(i, k, s, d, same, valid):
    assert same_tf(i, k, s, d) == same
    assert valid_tf(i, k, s, d) == valid


@pytest.mark.parametrize("hw, k, s, d, pads, expected", [
    ((7, 5), (4, 3), (1, 1), (1, 1), "SAME", (7, 5)),
    ((8, 7), (3, 3), (2, 2), (1, 1), "SAME", (4, 4)),
    ((8, 7), (3, 3), (2, 2), (1, 1), "VALID", (3, 3)),
    ((7, 9), (3, 3), (1, 1), (2, 2), "VALID", (3, 5)),
    ((9, 6), (5, 2), (2, 3), (1, 1), "VALID", (3, 2)),
    ((1, 1), (3, 3), (1, 1), (1, 1), "SAME", (1, 1)),
    ((1, 1), (1, 1), (1, 1), (1, 1), "VALID", (1, 1)),
    ((10, 11), (3, 2), (2, 3), (3, 2), "SAME", (5, 4)),
])
def test_conv_depthwise_and_pool_output_sizes(hw, k, s, d, pads, expected):
    x = (2, *hw, 3)
    attrs = {"pads": pads, "strides": list(s), "dilations": list(d)}
    assert out_shape("Conv", [x, w(5, *k, 3)], attrs) == (2, *expected, 5)
    assert out_shape("DepthwiseConv2d", [x, w(*k, 3, 2)], attrs) == (2, *expected, 6)
    if d == (1, 1):
        pool = {"pads": pads, "strides": list(s), "kernel_shape": list(k)}
        assert out_shape("MaxPool", [x], pool) == (2, *expected, 3)
        assert out_shape("AveragePool", [x], pool) == (2, *expected, 3)


def test_grouped_conv_output_channels():
    assert out_shape("Conv", [(2, 7, 5, 6), w(4, 3, 3, 3)], {"group": 2}) == (2, 5, 3, 4)


def test_unknown_batch_dimension_flows_through():
    assert out_shape("Conv", [(None, 7, 5, 3), w(4, 3, 3, 3)], {"pads": "SAME"}) == (None, 7, 5, 4)


@pytest.mark.parametrize("i, k, s, d, op, mode, out, expected", [
    (3, 3, 2, 1, 0, "SAME", None, (6, 0, 1)),   # full 7 cropped to i*s
    (3, 3, 2, 1, 1, "SAME", None, (6, 1, 1)),   # output_padding shifts the crop, not the size
    (3, 3, 2, 1, 0, "VALID", None, (7, 0, 0)),
    (3, 3, 2, 1, 1, "VALID", None, (8, 0, 0)),
    (3, 2, 3, 1, 0, "SAME", None, (9, 0, -1)),  # kernel < stride: zero-fill one at the end
    (3, 2, 3, 1, 0, "VALID", None, (8, 0, 0)),
    (4, 3, 1, 2, 0, "VALID", None, (8, 0, 0)),  # dilation 2
    (3, 3, 3, 1, 0, "SAME", 8, (8, 0, 1)),      # output_shape below full
    (3, 3, 2, 1, 1, "SAME", 5, (5, 1, 2)),
    (3, 3, 3, 1, 0, "SAME", 10, (10, 0, -1)),   # output_shape above full: zero-fill
    (3, 3, 2, 1, 1, "VALID", 9, (9, 0, -1)),
    (3, 3, 2, 1, 0, "VALID", 6, (6, 0, 1)),
])
def test_conv_transpose_arithmetic(i, k, s, d, op, mode, out, expected):
    assert conv_transpose_tf(i, k, s, d, op, mode, out) == expected


@pytest.mark.parametrize("hw, k, s, d, op, pads, shape, expected", [
    ((3, 4), (3, 3), (2, 2), (1, 1), (0, 0), "SAME", None, (6, 8)),
    ((3, 4), (3, 3), (2, 2), (1, 1), (1, 1), "SAME", None, (6, 8)),
    ((3, 4), (3, 3), (2, 2), (1, 1), (1, 0), "VALID", None, (8, 9)),
    ((3, 4), (2, 2), (3, 3), (1, 1), (0, 0), "SAME", None, (9, 12)),
    ((3, 4), (2, 2), (3, 3), (1, 1), (0, 0), "VALID", None, (8, 11)),
    ((4, 3), (3, 2), (1, 1), (2, 1), (0, 0), "VALID", None, (8, 4)),
    ((3, 3), (3, 3), (3, 2), (1, 1), (0, 1), "SAME", (10, 5), (10, 5)),
    ((3, 3), (3, 3), (3, 2), (1, 1), (0, 1), "VALID", (9, 8), (9, 8)),
])
def test_conv_transpose_output_sizes(hw, k, s, d, op, pads, shape, expected):
    attrs = {"pads": pads, "strides": list(s), "dilations": list(d), "output_padding": list(op)}
    if shape is not None:
        attrs["output_shape"] = list(shape)
    assert out_shape("ConvTranspose", [(2, *hw, 3), w(3, 5, *k)], attrs) == (2, *expected, 5)
    attrs["group"] = 3
    assert out_shape("ConvTranspose", [(2, *hw, 3), w(3, 2, *k)], attrs) == (2, *expected, 6)


@pytest.mark.parametrize("a, b, expected", [
    ((2, 5), (5, 4), (2, 4)),
    ((5,), (5, 4), (4,)),
    ((3, 2, 5), (5,), (3, 2)),
    ((3, 1, 2, 5), (4, 5, 6), (3, 4, 2, 6)),
])
def test_matmul_follows_numpy(a, b, expected):
    assert out_shape("MatMul", [a, b]) == expected
    assert np.matmul(np.zeros(a), np.zeros(b)).shape == expected


@pytest.mark.parametrize("a, b, c, attrs, expected", [
    ((5, 2), (5, 4), (1, 4), {"transA": 1}, (2, 4)),
    ((2, 5), (4, 5), (2, 1), {"transB": 1}, (2, 4)),
    ((2, 5), (5, 4), (1,), {}, (2, 4)),
])
def test_gemm_shapes(a, b, c, attrs, expected):
    assert out_shape("Gemm", [a, b, c], attrs) == expected


def test_dense_on_2d_and_pad_upsampling_shapes():
    assert out_shape("Dense", [(2, 5), w(6, 5)]) == (2, 6)
    assert out_shape("Pad", [(2, 5)], {"pads": [1, 0, 2, 3]}) == (3, 10)
    assert out_shape("UpSampling2D", [X], {"size": [1, 3, 2, 1]}) == (2, 21, 10, 3)
    assert out_shape("UpSampling2D", [(2, 5, 3)], {"size": [1, 2, 1]}) == (2, 10, 3)
