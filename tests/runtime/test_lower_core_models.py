"""Frontend output (the core IR before the passes) written as standard ONNX by
``lower_core_model`` and run by onnxruntime, against the source's own runtime on the same
random inputs: TensorFlow for frozen graphs and Keras layers, OpenCV for Caffe nets (1e-4 of
the output's magnitude)."""
from __future__ import annotations

import numpy as np
import pytest

from nhwc_onnx.frontends.tensorflow import load as load_tf
from nhwc_onnx.ir import Graph, Model, Value
from nhwc_onnx.options import ConvertOptions
from tests.core_reference import run_core
from tests.frontends.caffe import test_layers_opencv as caffe_layers
from tests.frontends.caffe.caffe_testlib import (
    make_net,
    max_rel_error,
    opencv_forward,
    random_feeds,
    source_pins,
)
from tests.frontends.tensorflow import test_keras_layers as keras_layers
from tests.frontends.tensorflow import test_resize_modes_near_miss as tf_resize
from tests.frontends.tensorflow.tf_helpers import close, freeze, freeze_keras, rand, spec
from tests.runtime.core_lowering_cases import run_lowered

TOL = 1e-4


def _tf_core(tmp_path, data: bytes, frozen, **options) -> Model:
    path = tmp_path / "model.pb"
    path.write_bytes(data)
    return load_tf(path, ConvertOptions(outputs=[t.name for t in frozen.outputs], **options))


def _weights(seed: int):
    rng = np.random.default_rng(seed)
    return lambda *shape: rng.uniform(-0.5, 0.5, shape).astype(np.float32)


def _tf_block():
    """NHWC Conv, DepthwiseConv, pools, FusedBatchNorm, a LayerNorm of mean and rsqrt, GELU
    through Erf, MatMul, Reshape, Transpose, ConcatV2, StridedSlice and Pad."""
    import tensorflow as tf

    w = _weights(5)
    conv, depthwise = tf.constant(w(3, 2, 3, 6)), tf.constant(w(3, 3, 6, 2))
    scale, offset, mean = tf.constant(w(12) + 1), tf.constant(w(12)), tf.constant(w(12))
    variance, gamma = tf.constant(w(12) + 1), tf.constant(w(12) + 1)
    dense = tf.constant(w(12, 7))

    def fn(x):
        y = tf.nn.relu(tf.nn.conv2d(x, conv, [1, 2, 1, 1], "SAME"))
        y = tf.nn.depthwise_conv2d(y, depthwise, [1, 1, 1, 1], "SAME", dilations=[2, 1])
        y, _, _ = tf.compat.v1.nn.fused_batch_norm(y, scale, offset, mean, variance,
                                                   epsilon=1e-3, is_training=False)
        pooled = tf.nn.max_pool2d(y, [3, 2], [2, 2], "SAME")
        pooled = pooled + tf.nn.avg_pool2d(y, [2, 3], [2, 2], "SAME")[:, :, :pooled.shape[2]]
        mu = tf.reduce_mean(pooled, axis=-1, keepdims=True)
        centred = pooled - mu
        normed = centred * tf.math.rsqrt(tf.reduce_mean(tf.square(centred), -1, keepdims=True)
                                         + 1e-5) * gamma
        gelu = 0.5 * normed * (1.0 + tf.math.erf(normed / np.float32(np.sqrt(2.0))))
        flat = tf.reshape(gelu, [-1, 12])
        tokens = tf.reshape(tf.matmul(flat, dense), [2, -1, 7])
        swapped = tf.transpose(tokens, [0, 2, 1])
        joined = tf.concat([swapped, swapped[:, 1:, ::-1]], axis=1)[:, ::2, 3:-1]
        return tf.pad(joined, [[0, 0], [1, 2], [0, 1]], constant_values=0.5)

    return fn


def test_tf_graph_lowered_matches_tensorflow(tmp_path):
    import tensorflow as tf

    x = rand(2, 13, 11, 3, seed=3)
    data, frozen = freeze(_tf_block(), [spec(x.shape)])
    core = _tf_core(tmp_path, data, frozen)
    ops = core.graph.op_counts()
    for op in ("Conv", "BatchNormalization", "MaxPool", "AveragePool", "Rsqrt", "Erf",
               "MatMul", "Reshape", "Transpose", "Concat", "Slice", "Pad"):
        assert op in ops, (op, ops)
    convs = [n for n in core.graph.nodes if n.op == "Conv"]
    assert {(n.attrs.get("data_format"), n.attrs.get("weight_layout")) for n in convs} == {
        ("NHWC", "HWIO")}
    assert sorted(n.attrs.get("group", 1) for n in convs) == [1, 6]  # the depthwise one
    want = np.asarray(frozen(tf.constant(x))[0])
    (got,) = run_lowered(core, {"x": x})
    close(got, want, TOL)


def test_core_model_with_a_symbolic_batch_runs_at_any_batch():
    """Frontends emit a probe-sized batch; a core model whose input names its batch (as the
    split's segments will) is lowered without fixing it."""
    graph = Graph("symbolic")
    x = graph.add_input(Value("x", shape=("N", 9, 7, 3)))
    w = _weights(6)
    conv = graph.make_node("Conv", [x, graph.constant(w(3, 3, 3, 4), "w")], {
        "kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER",
        "data_format": "NHWC", "weight_layout": "HWIO"})
    pool = graph.make_node("AveragePool", [conv.output], {
        "kernel_shape": [2, 2], "strides": [2, 2], "pads": [0, 0, 1, 1], "ceil_mode": 1,
        "count_include_pad": 1, "data_format": "NHWC"})
    flat = graph.make_node("Reshape", [pool.output, graph.constant(np.array([0, -1]), "s")])
    dense = graph.make_node("Gemm", [flat.output, graph.constant(w(3 * 2 * 4, 5), "d")])
    graph.outputs.append(graph.make_node("Softmax", [dense.output]).output)
    model = Model(graph)
    for batch in (1, 3):
        feeds = {"x": rand(batch, 9, 7, 3, seed=batch)}
        (got,) = run_lowered(model, feeds)
        close(got, run_core(model, feeds)[graph.outputs[0].name], TOL)


@pytest.mark.slow
@pytest.mark.parametrize("case", keras_layers.LAYER_CASES + keras_layers.GRAPH_CASES)
def test_keras_layer_lowered_matches_tensorflow(tmp_path, case):
    model = (keras_layers.build_model(case) if case in keras_layers.LAYER_CASES
             else keras_layers.build_graph_model(case))
    x = rand(*keras_layers.SHAPE, seed=11)
    data, frozen = freeze_keras(model, keras_layers.SHAPE)
    core = _tf_core(tmp_path, data, frozen)
    (got,) = run_lowered(core, {"x": x})
    close(got, np.asarray(model(x, training=False)), TOL)


@pytest.mark.slow
@pytest.mark.parametrize(("method", "rule", "size"), tf_resize.CASES + [
    (m, r, (9, 13)) for m in ("nearest", "bilinear") for r in tf_resize.RULES])
def test_tf_resize_lowered_matches_tensorflow(tmp_path, method, rule, size):
    """Every TensorFlow resize rule, at integer, mixed, non-integer factors and at sizes whose
    source coordinates fall on .5 (align_corners 5 -> 9): nearest bit for bit."""
    size = tf_resize.SIZES.get(size, size)
    fn = tf_resize._resize(method, size, *tf_resize.RULES[rule])
    data, frozen = freeze(fn, [spec(tf_resize.SHAPE)])
    core = _tf_core(tmp_path, data, frozen)
    (got,) = run_lowered(core, {"x": tf_resize.X})
    want = np.asarray(fn(tf_resize.X))
    if method == "nearest":
        np.testing.assert_array_equal(got, want)
    else:
        close(got, want, TOL)


def _caffe_matches_opencv(tmp_path, prototxt: str) -> Model:
    proto, weights, core = make_net(tmp_path, prototxt)
    feeds = random_feeds(core, 1)
    got = run_lowered(core, feeds)
    want = opencv_forward(proto, weights, feeds, source_pins(core.graph.outputs))
    for value, ours, theirs in zip(core.graph.outputs, got, want):
        assert ours.shape == tuple(theirs.shape), (value.name, ours.shape, theirs.shape)
        err = max_rel_error(ours, theirs)
        assert err <= TOL, f"{value.name}: max error {err:.3g} vs OpenCV"
    return core


CAFFE_NET = caffe_layers.net(
    caffe_layers.layer("conv", "Convolution", ["data"], ["conv"],
                       "convolution_param { num_output: 6 kernel_size: 3 stride: 2 pad: 1 }")
    + caffe_layers.layer("bn", "BatchNorm", ["conv"], ["bn"],
                         "batch_norm_param { use_global_stats: true eps: 0.001 }")
    + caffe_layers.layer("sc", "Scale", ["bn"], ["sc"], "scale_param { bias_term: true }")
    + caffe_layers.layer("prelu", "PReLU", ["sc"], ["prelu"])
    + caffe_layers.layer("pool", "Pooling", ["prelu"], ["pool"],
                         "pooling_param { pool: MAX kernel_size: 3 stride: 2 }")
    + caffe_layers.layer("lrn", "LRN", ["pool"], ["lrn"],
                         "lrn_param { local_size: 5 alpha: 0.3 beta: 0.75 }")
    + caffe_layers.layer("lrn2", "LRN", ["pool"], ["lrn2"], "lrn_param { local_size: 3 "
                         "alpha: 0.2 beta: 0.5 norm_region: WITHIN_CHANNEL }")
    + caffe_layers.layer("sq", "Power", ["lrn2"], ["sq"], "power_param { power: 2 }")
    + caffe_layers.layer("prod", "Eltwise", ["lrn", "sq"], ["prod"],
                         "eltwise_param { operation: PROD }")
    + caffe_layers.layer("max", "Eltwise", ["prod", "lrn"], ["max"],
                         "eltwise_param { operation: MAX }")
    + caffe_layers.layer("ave", "Pooling", ["max"], ["ave"],
                         "pooling_param { pool: AVE kernel_size: 2 stride: 2 pad: 1 }")
    + caffe_layers.layer("deconv", "Deconvolution", ["ave"], ["deconv"],
                         "convolution_param { num_output: 4 kernel_size: 3 stride: 2 }")
    + caffe_layers.layer("ip", "InnerProduct", ["deconv"], ["ip"],
                         "inner_product_param { num_output: 10 }")
    + caffe_layers.layer("prob", "Softmax", ["ip"], ["prob"]), shape=(2, 3, 23, 19))


def test_caffe_net_lowered_matches_opencv(tmp_path):
    core = _caffe_matches_opencv(tmp_path, CAFFE_NET)
    ops = core.graph.op_counts()
    for op in ("Conv", "MaxPool", "AveragePool", "Pow", "Div", "Gemm", "Softmax", "PRelu",
               "ConvTranspose", "BatchNormalization"):
        assert op in ops, (op, ops)
    assert any(n.attrs.get("ceil_mode") for n in core.graph.nodes if n.op == "MaxPool")


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(caffe_layers.CASES))
def test_caffe_layer_lowered_matches_opencv(tmp_path, case):
    text = caffe_layers.CASES[case]
    _caffe_matches_opencv(tmp_path, text if text.startswith("input:") else
                          caffe_layers.net(text))
