"""Per-op conversions, numbers: TensorFlow's kernels vs the core model run by the reference."""
from __future__ import annotations

import numpy as np
import pytest

from tests.frontends.tensorflow.tf_helpers import check_core, freeze, rand, spec, tf

X4 = (2, 7, 5, 3)


def test_conv2d_same_strided_with_bias_and_relu(tmp_path):
    t = tf()
    w = rand(3, 2, 3, 4, seed=1)

    def fn(x):
        y = t.nn.conv2d(x, w, strides=[1, 2, 2, 1], padding="SAME")
        return t.nn.relu(t.nn.bias_add(y, np.arange(4, dtype=np.float32)))

    model = check_core(tmp_path, fn, {"x": rand(*X4)})
    ops = model.graph.op_counts()
    assert ops["Conv"] == 1
    conv = next(n for n in model.graph if n.op == "Conv")
    assert conv.attrs["auto_pad"] == "SAME_UPPER" and conv.attrs["weight_layout"] == "HWIO"


@pytest.mark.parametrize("padding", ["VALID", "SAME", [[0, 0], [1, 2], [0, 1], [0, 0]]])
def test_conv2d_paddings_and_dilation(tmp_path, padding):
    t = tf()
    w = rand(2, 3, 3, 5, seed=2)
    check_core(tmp_path, lambda x: t.nn.conv2d(x, w, 1, padding, dilations=[1, 2, 1, 1]),
               {"x": rand(*X4)})


def test_depthwise_conv_multiplier(tmp_path):
    t = tf()
    w = rand(3, 3, 3, 2, seed=3)
    model = check_core(tmp_path, lambda x: t.nn.depthwise_conv2d(x, w, [1, 2, 2, 1], "SAME"),
                       {"x": rand(*X4)})
    conv = next(n for n in model.graph if n.op == "Conv")
    assert conv.attrs["group"] == 3 and conv.inputs[1].shape == (3, 3, 1, 6)


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_conv2d_transpose(tmp_path, padding):
    t = tf()
    w = rand(3, 2, 4, 3, seed=4)  # kH, kW, out, in
    out = (2, 14, 10, 4) if padding == "SAME" else (2, 15, 10, 4)
    check_core(tmp_path, lambda x: t.nn.conv2d_transpose(x, w, out, 2, padding),
               {"x": rand(*X4)})


@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_pools_odd_sizes(tmp_path, padding):
    t = tf()

    def fn(x):
        return (t.nn.avg_pool2d(x, [3, 2], [2, 2], padding),
                t.nn.max_pool2d(x, [2, 3], [2, 1], padding))

    check_core(tmp_path, fn, {"x": rand(*X4)})


def test_fused_batch_norm(tmp_path):
    t = tf()
    scale, offset, mean, var = rand(3, seed=5), rand(3, seed=6), rand(3, seed=7), \
        rand(3, seed=8, low=0.5, high=2.0)

    def fn(x):
        return t.compat.v1.nn.fused_batch_norm(x, scale, offset, mean, var, epsilon=1e-3,
                                               is_training=False)[0]

    model = check_core(tmp_path, fn, {"x": rand(*X4)})
    assert model.graph.op_counts().get("BatchNormalization") == 1


def test_activations(tmp_path):
    t = tf()

    def fn(x):
        return (t.nn.relu6(x * 4), t.nn.elu(x), t.nn.leaky_relu(x, 0.3), t.sigmoid(x),
                t.tanh(x), t.abs(x), t.nn.softmax(x), t.math.rsqrt(t.abs(x) + 1),
                t.sqrt(t.abs(x)), t.square(x), -x, t.math.squared_difference(x, 0.5))

    check_core(tmp_path, fn, {"x": rand(*X4)})


def test_binary_and_reductions(tmp_path):
    t = tf()

    def fn(x, y):
        return (x + y, x - y, x * y, x / (t.abs(y) + 1), t.maximum(x, y), t.minimum(x, y),
                t.add_n([x, y, x]), t.reduce_mean(x, [1, 2]), t.reduce_max(x, -1, True),
                t.reduce_sum(y, [0]), t.reduce_min(x, [2, 3], keepdims=True))

    check_core(tmp_path, fn, {"x": rand(*X4), "y": rand(*X4, seed=9)})


def test_matmul_transposes(tmp_path):
    t = tf()
    w = rand(6, 5, seed=10)
    check_core(tmp_path, lambda a: (t.matmul(a, w, transpose_b=True), t.matmul(a, w.T)),
               {"a": rand(4, 5)})


def test_shape_ops(tmp_path):
    t = tf()

    def fn(x):
        flat = t.reshape(x, [t.shape(x)[0], -1])
        parts = t.split(x, 3, axis=3)
        pieces = t.split(x, [2, -1], axis=1)
        return (flat, t.squeeze(t.expand_dims(x, 1), 1), t.concat(parts[::-1], axis=-1),
                t.stack([x, x], axis=2), t.unstack(x, axis=2)[4], pieces[1],
                t.transpose(x, [0, 3, 1, 2]), t.pad(x, [[0, 0], [1, 2], [0, 1], [0, 0]]),
                t.slice(x, [0, 1, 2, 0], [-1, 3, -1, 2]), t.tile(x, [1, 2, 1, 1]),
                t.gather(x, [2, 0], axis=2), t.cast(t.shape(x), t.float32))

    check_core(tmp_path, fn, {"x": rand(*X4)})


@pytest.mark.parametrize("case", range(6))
def test_strided_slice_masks(tmp_path, case):
    t = tf()
    fns = [
        lambda x: x[:, 1:6:2, ::-1, 1],
        lambda x: x[..., 0:2],
        lambda x: x[1, :, t.newaxis, -1],
        lambda x: x[:, -3:, 1:, :],
        lambda x: x[0, ..., t.newaxis, ::2],
        lambda x: x[:, ::-2],
    ]
    check_core(tmp_path, fns[case], {"x": rand(*X4)})


@pytest.mark.parametrize("method,align,half", [
    ("bilinear", False, True), ("bilinear", True, False), ("bilinear", False, False),
    ("nearest", False, True), ("nearest", True, False), ("nearest", False, False),
])
def test_resize_coordinate_rules(tmp_path, method, align, half):
    t = tf()
    op = (t.compat.v1.image.resize_bilinear if method == "bilinear"
          else t.compat.v1.image.resize_nearest_neighbor)

    def fn(x):
        return op(x, [11, 13], align_corners=align, half_pixel_centers=half)

    check_core(tmp_path, fn, {"x": rand(*X4)})


def test_space_depth_rearrangements(tmp_path):
    t = tf()
    x = rand(2, 6, 4, 3)
    check_core(tmp_path, lambda x: (t.nn.space_to_depth(x, 2),
                                    t.nn.depth_to_space(t.concat([x] * 4, -1), 2)), {"x": x})


def test_fill_range_argmax(tmp_path):
    t = tf()

    def fn(x):
        return (t.fill([2, 3], 1.5) + x[0, 0, :2, :], t.cast(t.range(0, 5, 2), t.float32),
                t.argmax(x, axis=3))

    check_core(tmp_path, fn, {"x": rand(*X4)})


def test_clip_select_broadcast_and_shape_arithmetic(tmp_path):
    t = tf()

    def fn(x):
        n = t.shape(x)[1] // 2  # FloorDiv on a value known from the static shape
        rows = t.reshape(x, [2, -1, n + t.shape(x)[1] % 2 + 1])
        return (t.clip_by_value(x, -0.3, 0.4), t.where(x > 0, x, t.zeros_like(x)),
                t.broadcast_to(x[:, :1], [2, 7, 5, 3]), rows, t.ones_like(x) * t.cast(t.rank(x),
                                                                                      t.float32),
                t.math.floordiv(x, 0.3))

    check_core(tmp_path, fn, {"x": rand(*X4)})


def test_erfc_is_one_minus_erf(tmp_path):
    t = tf()
    model = check_core(tmp_path, lambda x: t.math.erfc(x), {"x": rand(2, 7, 5, 3, low=-3, high=3)})
    assert {n.op for n in model.graph.nodes} - {"Identity"} == {"Erf", "Sub"}


@pytest.mark.parametrize("radius,bias,alpha,beta", [(2, 1.0, 1e-2, 0.75), (0, 1.5, 1.0, 1.0),
                                                    (9, 1.0, 0.1, 0.6)])
def test_lrn_core_form_matches_tensorflow(tmp_path, radius, bias, alpha, beta):
    """The banded 1x1 window sum: radius 9 is wider than the 7 channels (clipped at both
    ends); TensorFlow does not divide alpha by the window's size."""
    tensorflow = tf()
    check_core(tmp_path, lambda x: tensorflow.nn.local_response_normalization(
        x, radius, bias, alpha, beta), {"x": rand(2, 5, 4, 7)})


def test_lrn_is_refused_for_its_division_by_a_tensor(tmp_path):
    from nhwc_onnx.api import convert
    from nhwc_onnx.errors import UnsupportedOpError

    tensorflow = tf()
    data, _ = freeze(lambda x: tensorflow.nn.local_response_normalization(x, 2),
                     [spec((1, 5, 4, 7))])
    path = tmp_path / "lrn.pb"
    path.write_bytes(data)
    with pytest.raises(UnsupportedOpError) as refused:
        convert(path)
    # the core ops named after the TF node: x^-beta of a tensor, and the division by it
    assert [(p.node, p.op) for p in refused.value.problems] == [("LRN/pow", "Pow"),
                                                                 ("LRN", "Div")]
