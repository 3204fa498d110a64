"""Convolution, pooling, normalisation, resize converters vs onnxruntime."""
from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.frontends.onnx.onnx_helpers import assert_matches_ort, convert, make_model

RNG = np.random.default_rng(7)
X = [2, 3, 7, 5]


def _w(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.parametrize("attrs,out", [
    ({}, [2, 4, 5, 3]),
    ({"pads": [1, 0, 2, 1], "strides": [2, 1]}, [2, 4, 4, 4]),
    ({"dilations": [2, 1], "pads": [2, 1, 2, 1]}, [2, 4, 7, 5]),
    ({"auto_pad": "SAME_UPPER", "strides": [2, 2]}, [2, 4, 4, 3]),
    ({"auto_pad": "SAME_LOWER", "strides": [2, 2]}, [2, 4, 4, 3]),
    ({"auto_pad": "VALID"}, [2, 4, 5, 3]),
])
def test_conv(attrs, out):
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], kernel_shape=[3, 3], **attrs)
    model = make_model([node], [("x", X)], [("y", out)], {"w": _w(4, 3, 3, 3), "b": _w(4)})
    assert_matches_ort(model)
    core = convert(model)
    conv = core.graph.nodes[0]
    assert conv.op == "Conv" and conv.attrs["weight_layout"] == "OIHW"
    assert conv.attrs["data_format"] == "NCHW"


def test_grouped_conv_without_kernel_shape_attribute():
    node = helper.make_node("Conv", ["x", "w"], ["y"], group=3)
    model = make_model([node], [("x", [2, 6, 7, 5])], [("y", [2, 3, 6, 3])], {"w": _w(3, 2, 2, 3)})
    assert_matches_ort(model)


@pytest.mark.parametrize("attrs", [
    {},
    {"strides": [2, 3], "pads": [1, 0, 0, 1]},
    {"strides": [2, 2], "output_padding": [1, 0]},
    {"strides": [2, 2], "output_shape": [15, 10]},
    {"strides": [3, 2], "output_shape": [20, 9], "auto_pad": "SAME_UPPER"},
    {"strides": [3, 2], "output_shape": [22, 11]},
    {"strides": [3, 2], "output_shape": [22, 11], "auto_pad": "SAME_LOWER"},
    {"strides": [2, 2], "auto_pad": "SAME_LOWER"},
    {"dilations": [2, 1]},
])
def test_conv_transpose(attrs):
    node = helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], kernel_shape=[3, 2],
                            **attrs)
    model = make_model([node], [("x", X)], [("y", None)], {"w": _w(3, 4, 3, 2), "b": _w(4)})
    assert_matches_ort(model)


def test_conv_transpose_output_shape_beyond_full_with_same_upper_is_refused():
    """onnxruntime and the ONNX reference put the extra zeros on different sides."""
    from nhwc_onnx.errors import UnsupportedOpError

    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], kernel_shape=[3, 2],
                            strides=[3, 2], output_shape=[22, 11], auto_pad="SAME_UPPER")
    model = make_model([node], [("x", X)], [("y", None)], {"w": _w(3, 4, 3, 2)})
    with pytest.raises(UnsupportedOpError, match="disagree"):
        convert(model)


@pytest.mark.parametrize("op,attrs", [
    ("MaxPool", {"kernel_shape": [3, 2]}),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1}),
    ("MaxPool", {"kernel_shape": [2, 2], "dilations": [2, 1]}),
    ("MaxPool", {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                     "count_include_pad": 1}),
    ("AveragePool", {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}),
    ("AveragePool", {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_LOWER"}),
])
def test_pools(op, attrs):
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", X)], [("y", None)],
                       opset=12)
    assert_matches_ort(model)


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pools(op):
    model = make_model([helper.make_node(op, ["x"], ["y"])], [("x", X)], [("y", [2, 3, 1, 1])])
    assert_matches_ort(model)


@pytest.mark.parametrize("opset", [7, 9, 15])
def test_batch_norm(opset):
    var = RNG.uniform(0.5, 2, 3).astype(np.float32)
    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                            epsilon=1e-3)
    model = make_model([node], [("x", X)], [("y", X)],
                       {"s": _w(3), "b": _w(3), "m": _w(3), "v": var}, opset=opset)
    assert_matches_ort(model)


def test_batch_norm_training_mode_refused():
    from nhwc_onnx.errors import UnsupportedOpError

    node = helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"],
                            training_mode=1)
    model = make_model([node], [("x", X)], [("y", X)],
                       {"s": _w(3), "b": _w(3), "m": _w(3), "v": _w(3) ** 2}, opset=15)
    with pytest.raises(UnsupportedOpError, match="training_mode"):
        convert(model)


@pytest.mark.parametrize("op,mode", [("SpaceToDepth", None), ("DepthToSpace", "DCR"),
                                     ("DepthToSpace", "CRD")])
def test_space_depth(op, mode):
    attrs = {"blocksize": 2}
    if mode:
        attrs["mode"] = mode
    shape = [2, 3, 6, 4] if op == "SpaceToDepth" else [2, 12, 3, 5]
    model = make_model([helper.make_node(op, ["x"], ["y"], **attrs)], [("x", shape)],
                       [("y", None)])
    assert_matches_ort(model)


def test_lrn_as_core_ops():
    node = helper.make_node("LRN", ["x"], ["y"], size=3, alpha=0.02, beta=0.75, bias=1.5)
    model = make_model([node], [("x", [2, 6, 7, 5])], [("y", [2, 6, 7, 5])])
    assert_matches_ort(model)
    node = helper.make_node("LRN", ["x"], ["y"], size=5)
    assert_matches_ort(make_model([node], [("x", [2, 6, 7, 5])], [("y", [2, 6, 7, 5])]))


def test_lrn_even_size_against_spec_formula():
    """onnxruntime only takes odd sizes; the spec's window is [c - 1, c + 2] for size 4."""
    from tests.core_reference import run_core

    node = helper.make_node("LRN", ["x"], ["y"], size=4, alpha=0.1, beta=0.6, bias=2.0)
    model = make_model([node], [("x", [2, 6, 7, 5])], [("y", [2, 6, 7, 5])])
    x = RNG.standard_normal((2, 6, 7, 5)).astype(np.float32)
    sq = np.zeros_like(x, dtype=np.float64)
    for c in range(6):
        sq[:, c] = (x[:, max(0, c - 1):min(6, c + 3)].astype(np.float64) ** 2).sum(axis=1)
    want = x / (2.0 + 0.1 / 4 * sq) ** 0.6
    got = run_core(convert(model), {"x": x})["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode,ctm,nearest", [
    ("nearest", "asymmetric", "floor"), ("nearest", "half_pixel", "round_prefer_ceil"),
    ("nearest", "tf_half_pixel_for_nn", "round_prefer_floor"),
    ("linear", "half_pixel", None), ("linear", "align_corners", None),
    ("linear", "pytorch_half_pixel", None), ("linear", "asymmetric", None)])
def test_resize_scales(mode, ctm, nearest):
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm}
    if nearest:
        attrs["nearest_mode"] = nearest
    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], **attrs)
    model = make_model([node], [("x", X)], [("y", None)],
                       {"scales": np.array([1, 1, 2, 3], np.float32)})
    assert_matches_ort(model)
    resize = convert(model).graph.nodes[0]
    assert resize.attrs["scales"] == [1, 1, 2, 3]
    assert resize.attrs["coordinate_transformation_mode"] == ctm


def test_resize_sizes_opset11_with_roi():
    node = helper.make_node("Resize", ["x", "roi", "scales", "sizes"], ["y"], mode="linear")
    model = make_model([node], [("x", X)], [("y", None)],
                       {"roi": np.array([], np.float32), "scales": np.array([], np.float32),
                        "sizes": np.array([2, 3, 11, 9])},
                       opset=11)
    assert_matches_ort(model)


@pytest.mark.parametrize("opset", [7, 9])
def test_upsample_nearest(opset):
    if opset == 7:
        node = helper.make_node("Upsample", ["x"], ["y"], scales=[1.0, 1.0, 2.0, 3.0])
        inits = {}
    else:
        node = helper.make_node("Upsample", ["x", "s"], ["y"])
        inits = {"s": np.array([1, 1, 2, 3], np.float32)}
    model = make_model([node], [("x", X)], [("y", None)], inits, opset=opset)
    assert_matches_ort(model)
    resize = convert(model).graph.nodes[0]
    assert resize.attrs["coordinate_transformation_mode"] == "asymmetric"
    assert resize.attrs["nearest_mode"] == "floor"


def test_resize_cubic_refused_with_reason():
    from nhwc_onnx.errors import UnsupportedOpError

    node = helper.make_node("Resize", ["x", "", "scales"], ["y"], mode="cubic")
    model = make_model([node], [("x", X)], [("y", None)],
                       {"scales": np.array([1, 1, 2, 2], np.float32)})
    with pytest.raises(UnsupportedOpError, match="cubic"):
        convert(model)
