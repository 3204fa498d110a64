"""Spatial core-op evaluators against onnxruntime (NCHW) and TensorFlow kernels (NHWC)."""
from __future__ import annotations

import numpy as np
import pytest

from tests.passes.core_oracles import close, eval_core, rand, run_onnx

NCHW_TO_NHWC = (0, 2, 3, 1)
NHWC_TO_NCHW = (0, 3, 1, 2)


def _tf():
    import tensorflow as tf

    return tf


# -- Conv vs onnxruntime --------------------------------------------------------------------------
CONV_CASES = [
    {"k": (3, 2), "s": (1, 1), "d": (1, 1), "pads": [0, 0, 0, 0], "group": 1, "auto_pad": "NOTSET"},
    {"k": (3, 3), "s": (2, 1), "d": (1, 2), "pads": [1, 0, 2, 1], "group": 1, "auto_pad": "NOTSET"},
    {"k": (2, 3), "s": (2, 2), "d": (1, 1), "pads": [0, 0, 0, 0], "group": 3,
     "auto_pad": "SAME_UPPER"},
    {"k": (2, 2), "s": (2, 3), "d": (1, 1), "pads": [0, 0, 0, 0], "group": 1,
     "auto_pad": "SAME_LOWER"},
    {"k": (3, 1), "s": (3, 2), "d": (1, 1), "pads": [0, 0, 0, 0], "group": 6, "auto_pad": "VALID"},
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_conv_nchw_matches_onnxruntime(case):
    c, m = 6, 12
    x = rand(2, c, 9, 7)
    w = rand(m, c // case["group"], *case["k"])
    b = rand(m)
    attrs = {"kernel_shape": list(case["k"]), "strides": list(case["s"]),
                 "dilations": list(case["d"]), "group": case["group"], "auto_pad": case["auto_pad"]}
    if case["auto_pad"] == "NOTSET":
        attrs["pads"] = case["pads"]
    got = eval_core("Conv", [x, w, b], attrs)
    want = run_onnx("Conv", [x, w, b], attrs)
    close(got, want)


@pytest.mark.parametrize("padding", ["SAME", "VALID", "EXPLICIT"])
def test_conv_nhwc_hwio_matches_tensorflow(padding):
    tf = _tf()
    x = rand(2, 9, 8, 5)
    w = rand(3, 2, 5, 7)
    attrs = {"kernel_shape": [3, 2], "strides": [2, 3], "dilations": [1, 1], "data_format": "NHWC",
                 "weight_layout": "HWIO"}
    tf_pad = padding
    if padding == "SAME":
        attrs["auto_pad"] = "SAME_UPPER"
    elif padding == "VALID":
        attrs["auto_pad"] = "VALID"
    else:
        attrs["pads"] = [1, 0, 2, 1]
        tf_pad = [[0, 0], [1, 2], [0, 1], [0, 0]]
    got = eval_core("Conv", [x, w], attrs)
    want = tf.nn.conv2d(x, w, strides=[1, 2, 3, 1], padding=tf_pad).numpy()
    close(got, want)


def test_conv_nhwc_dilated_same_matches_tensorflow():
    tf = _tf()
    x = rand(1, 10, 7, 3)
    w = rand(3, 3, 3, 4)
    attrs = {"kernel_shape": [3, 3], "dilations": [2, 3], "data_format": "NHWC",
                 "weight_layout": "HWIO", "auto_pad": "SAME_UPPER"}
    got = eval_core("Conv", [x, w], attrs)
    want = tf.nn.conv2d(x, w, strides=1, padding="SAME", dilations=[2, 3]).numpy()
    close(got, want)


@pytest.mark.parametrize("strides,padding", [((2, 2), "SAME"), ((3, 3), "VALID")])
def test_depthwise_as_grouped_hwio_conv_matches_tensorflow(strides, padding):
    tf = _tf()
    c, mult = 3, 2
    x = rand(2, 8, 7, c)
    dw = rand(3, 2, c, mult)
    attrs = {"kernel_shape": [3, 2], "strides": list(strides), "group": c, "data_format": "NHWC",
                 "weight_layout": "HWIO",
                 "auto_pad": "SAME_UPPER" if padding == "SAME" else "VALID"}
    got = eval_core("Conv", [x, dw.reshape(3, 2, 1, c * mult)], attrs)
    want = tf.nn.depthwise_conv2d(x, dw, strides=[1, *strides, 1], padding=padding).numpy()
    close(got, want)


# -- ConvTranspose ---------------------------------------------------------------------------------
CONVT_CASES = [
    {"k": (3, 2), "s": (2, 3), "d": (1, 1), "pads": [1, 0, 0, 1], "op": (1, 0), "group": 1},
    {"k": (2, 3), "s": (1, 2), "d": (2, 1), "pads": [0, 1, 1, 0], "op": (0, 1), "group": 2},
    {"k": (3, 3), "s": (3, 2), "d": (1, 1), "pads": [0, 0, 0, 0], "op": (2, 1), "group": 1},
]


@pytest.mark.parametrize("case", CONVT_CASES)
def test_conv_transpose_nchw_matches_onnxruntime(case):
    c, mg = 4, 3
    x = rand(2, c, 5, 4)
    w = rand(c, mg, *case["k"])
    b = rand(mg * case["group"])
    attrs = {"kernel_shape": list(case["k"]), "strides": list(case["s"]),
                 "dilations": list(case["d"]), "pads": case["pads"],
                 "output_padding": list(case["op"]), "group": case["group"]}
    got = eval_core("ConvTranspose", [x, w, b], attrs)
    want = run_onnx("ConvTranspose", [x, w, b], attrs)
    close(got, want)


@pytest.mark.parametrize("padding,k,s,out_hw", [
    ("SAME", (3, 2), (2, 3), (10, 12)),
    ("SAME", (1, 2), (3, 3), (15, 12)),   # kernel shorter than stride: zero-filled end
    ("SAME", (4, 3), (2, 2), (9, 7)),     # odd output: crop split with the odd one at the end
    ("VALID", (3, 2), (2, 3), (11, 12)),
    ("VALID", (3, 2), (2, 3), (12, 13)),  # larger than full: zero-filled end
])
def test_conv_transpose_nhwc_output_shape_matches_tensorflow(padding, k, s, out_hw):
    tf = _tf()
    c, m = 3, 5
    x = rand(2, 5, 4, c)
    w = rand(*k, m, c)
    attrs = {"kernel_shape": list(k), "strides": list(s), "data_format": "NHWC",
                 "weight_layout": "HWOI", "output_shape": list(out_hw),
                 "auto_pad": "SAME_UPPER" if padding == "SAME" else "VALID"}
    got = eval_core("ConvTranspose", [x, w], attrs)
    want = tf.nn.conv2d_transpose(x, w, [2, *out_hw, m], strides=[1, *s, 1],
                                  padding=padding).numpy()
    close(got, want)


def test_conv_transpose_same_without_output_shape_is_input_times_stride():
    tf = _tf()
    x = rand(1, 4, 5, 2)
    w = rand(3, 3, 6, 2)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "data_format": "NHWC",
                 "weight_layout": "HWOI", "auto_pad": "SAME_UPPER"}
    got = eval_core("ConvTranspose", [x, w], attrs)
    want = tf.nn.conv2d_transpose(x, w, [1, 8, 10, 6], strides=2, padding="SAME").numpy()
    close(got, want)


# -- pooling ---------------------------------------------------------------------------------------
POOL_CASES = [
    {"k": (3, 2), "s": (2, 2), "pads": [1, 0, 1, 1], "ceil": 0, "cip": 0},
    {"k": (3, 3), "s": (2, 2), "pads": [1, 1, 1, 1], "ceil": 1, "cip": 0},
    {"k": (3, 3), "s": (2, 2), "pads": [1, 1, 1, 1], "ceil": 1, "cip": 1},
    {"k": (2, 3), "s": (3, 2), "pads": [0, 1, 1, 0], "ceil": 1, "cip": 1},
    {"k": (1, 1), "s": (2, 3), "pads": [0, 0, 0, 0], "ceil": 0, "cip": 0},
    {"k": (3, 2), "s": (1, 2), "pads": [2, 1, 0, 1], "ceil": 0, "cip": 1},
]


@pytest.mark.parametrize("case", POOL_CASES)
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_nchw_matches_onnxruntime(op, case):
    x = rand(2, 3, 9, 8)
    attrs = {"kernel_shape": list(case["k"]), "strides": list(case["s"]), "pads": case["pads"],
                 "ceil_mode": case["ceil"]}
    if op == "AveragePool":
        attrs["count_include_pad"] = case["cip"]
    close(eval_core(op, [x], attrs), run_onnx(op, [x], attrs))


def test_average_pool_ceil_counts_window_clipped_to_padded_extent():
    # Brute force Caffe AVE: the last window is clipped to input + pad, padded cells count.
    x = rand(1, 1, 6, 5)
    attrs = {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1], "ceil_mode": 1,
                 "count_include_pad": 1}
    got = eval_core("AveragePool", [x], attrs)
    h, w = 6, 5
    oh, ow = got.shape[2:]
    want = np.zeros((oh, ow))
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * 2 - 1, j * 2 - 1
            h1, w1 = min(h0 + 3, h + 1), min(w0 + 3, w + 1)
            area = (h1 - h0) * (w1 - w0)
            cells = x[0, 0, max(h0, 0):min(h1, h), max(w0, 0):min(w1, w)]
            want[i, j] = cells.sum() / area
    close(got[0, 0], want)


def test_maxpool_dilated_and_auto_pad_match_onnxruntime():
    x = rand(2, 3, 10, 9)
    attrs = {"kernel_shape": [2, 3], "strides": [1, 2], "dilations": [2, 2], "pads": [1, 1, 1, 2]}
    close(eval_core("MaxPool", [x], attrs), run_onnx("MaxPool", [x], attrs))
    for auto in ("SAME_UPPER", "SAME_LOWER", "VALID"):
        attrs = {"kernel_shape": [3, 2], "strides": [2, 2], "auto_pad": auto}
        close(eval_core("MaxPool", [x], attrs), run_onnx("MaxPool", [x], attrs))


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_nhwc_matches_tensorflow(op, padding):
    tf = _tf()
    x = rand(2, 9, 7, 3)
    attrs = {"kernel_shape": [3, 2], "strides": [2, 3], "data_format": "NHWC",
                 "auto_pad": "SAME_UPPER" if padding == "SAME" else "VALID"}
    got = eval_core(op, [x], attrs)
    fn = tf.nn.max_pool2d if op == "MaxPool" else tf.nn.avg_pool2d
    close(got, fn(x, ksize=[3, 2], strides=[2, 3], padding=padding).numpy())


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
def test_global_pools(op):
    x = rand(2, 3, 5, 4)
    close(eval_core(op, [x]), run_onnx(op, [x]))
    got = eval_core(op, [x.transpose(NCHW_TO_NHWC)], {"data_format": "NHWC"})
    close(got.transpose(NHWC_TO_NCHW), run_onnx(op, [x]))


# -- Resize, depth/space, BatchNorm ---------------------------------------------------------------
RESIZE_CASES = [
    ("nearest", "asymmetric", "floor", [1, 1, 2, 3]),
    ("nearest", "half_pixel", "round_prefer_floor", [1, 1, 1.5, 2.5]),
    ("nearest", "tf_half_pixel_for_nn", "round_prefer_ceil", [1, 1, 2, 2]),
    ("nearest", "align_corners", "ceil", [1, 1, 0.6, 1.7]),
    ("linear", "half_pixel", "round_prefer_floor", [1, 1, 2, 3]),
    ("linear", "align_corners", "round_prefer_floor", [1, 1, 1.8, 0.7]),
    ("linear", "asymmetric", "round_prefer_floor", [1, 1, 3, 2]),
    ("linear", "pytorch_half_pixel", "round_prefer_floor", [1, 1, 0.2, 2]),
]


@pytest.mark.parametrize("mode,ctm,nearest,scales", RESIZE_CASES)
def test_resize_scales_match_onnxruntime(mode, ctm, nearest, scales):
    x = rand(2, 3, 5, 4)
    attrs = {"mode": mode, "coordinate_transformation_mode": ctm, "nearest_mode": nearest}
    got = eval_core("Resize", [x], dict(attrs, scales=scales))
    want = run_onnx("Resize", [x, None, np.asarray(scales, np.float32)], attrs, opset=13)
    close(got, want)


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_sizes_match_onnxruntime(mode):
    x = rand(2, 3, 5, 4)
    sizes = [2, 3, 9, 7]
    attrs = {"mode": mode, "coordinate_transformation_mode": "half_pixel"}
    got = eval_core("Resize", [x], dict(attrs, sizes=sizes))
    want = run_onnx("Resize", [x, None, None, np.asarray(sizes, np.int64)], attrs, opset=13)
    close(got, want)


def test_resize_nhwc_bilinear_matches_tensorflow():
    tf = _tf()
    x = rand(2, 5, 4, 3)
    got = eval_core("Resize", [x], {"mode": "linear", "sizes": [2, 9, 11, 3]})
    want = tf.image.resize(x, [9, 11], method="bilinear").numpy()
    close(got, want)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space(mode):
    x = rand(2, 12, 3, 5)
    close(eval_core("DepthToSpace", [x], {"blocksize": 2, "mode": mode}),
          run_onnx("DepthToSpace", [x], {"blocksize": 2, "mode": mode}))


def test_depth_and_space_nhwc_match_tensorflow():
    tf = _tf()
    x = rand(2, 3, 5, 12)
    got = eval_core("DepthToSpace", [x], {"blocksize": 2, "data_format": "NHWC"})
    close(got, tf.nn.depth_to_space(x, 2).numpy())
    y = rand(2, 6, 4, 3)
    got = eval_core("SpaceToDepth", [y], {"blocksize": 2, "data_format": "NHWC"})
    close(got, tf.nn.space_to_depth(y, 2).numpy())
    yc = y.transpose(NHWC_TO_NCHW)
    close(eval_core("SpaceToDepth", [yc], {"blocksize": 2}),
          run_onnx("SpaceToDepth", [yc], {"blocksize": 2}))


def test_batchnorm_axis_1_and_last():
    x = rand(2, 3, 5, 4)
    scale, bias, mean = rand(3), rand(3), rand(3)
    var = rand(3, low=0.1, high=2.0)
    got = eval_core("BatchNormalization", [x, scale, bias, mean, var], {"epsilon": 1e-3})
    close(got, run_onnx("BatchNormalization", [x, scale, bias, mean, var], {"epsilon": 1e-3}))
    xt = x.transpose(NCHW_TO_NHWC)
    got = eval_core("BatchNormalization", [xt, scale, bias, mean, var],
                    {"epsilon": 1e-3, "axis": -1})
    close(got.transpose(NHWC_TO_NCHW), run_onnx("BatchNormalization",
                                                 [x, scale, bias, mean, var], {"epsilon": 1e-3}))
