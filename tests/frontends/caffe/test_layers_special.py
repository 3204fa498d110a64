"""Layers OpenCV does not run (or spells differently): checked against numpy formulas, or
against OpenCV running an equivalent spelling of the same net."""
from __future__ import annotations

import numpy as np

from tests.frontends.caffe.caffe_testlib import compare_with_opencv, run_with_blobs
from tests.frontends.caffe.test_layers_opencv import layer, net

TOL = {"rtol": 1e-5, "atol": 1e-5}


def test_concat_dim_is_the_axis(tmp_path):
    """Legacy concat_dim wins over axis, as in Caffe (OpenCV ignores it: it runs `axis`)."""
    body = layer("a", "Sigmoid", ["data"], ["a"])
    ours = net(body + layer("c", "Concat", ["a", "data"], ["c"], "concat_param { concat_dim: 3 }"))
    oracle = net(body + layer("c", "Concat", ["a", "data"], ["c"], "concat_param { axis: 3 }"))
    model, _ = compare_with_opencv(tmp_path, ours, oracle_prototxt=oracle)
    assert model.graph.outputs[0].shape == (2, 3, 11, 18)


def test_slice_dim_is_the_axis(tmp_path):
    tail = (layer("pa", "Power", ["a"], ["pa"], "power_param { scale: 2 }")
            + layer("pb", "Power", ["b"], ["pb"], "power_param { scale: 3 }"))
    body = layer("s", "Slice", ["data"], ["a", "b"], "slice_param { slice_dim: 2 slice_point: 4 }")
    oracle = layer("s", "Slice", ["data"], ["a", "b"], "slice_param { axis: 2 slice_point: 4 }")
    body, oracle = body + tail, oracle + tail
    model, _results = compare_with_opencv(tmp_path, net(body), oracle_prototxt=net(oracle))
    assert {v.shape for v in model.graph.outputs} == {(2, 3, 4, 9), (2, 3, 7, 9)}


def test_round_mode_floor_matches_ceil_mode_false(tmp_path):
    """BVLC's round_mode: FLOOR and the fork spelling ceil_mode: false mean the same."""
    ours = net(layer("p", "Pooling", ["data"], ["p"],
                     "pooling_param { pool: AVE kernel_size: 2 stride: 2 round_mode: FLOOR }"))
    oracle = net(layer("p", "Pooling", ["data"], ["p"],
                       "pooling_param { pool: AVE kernel_size: 2 stride: 2 ceil_mode: false }"))
    model, _ = compare_with_opencv(tmp_path, ours, oracle_prototxt=oracle)
    assert model.graph.outputs[0].shape == (2, 3, 5, 4)
    assert model.graph.nodes[0].attrs["ceil_mode"] == 0


def test_depthwise_fork_types_match_grouped_convolution(tmp_path):
    for type_ in ("ConvolutionDepthwise", "DepthwiseConvolution"):
        params = "convolution_param { num_output: 6 kernel_size: 3 stride: 2 pad: 1 }"
        ours = net(layer("c", type_, ["data"], ["c"], params), shape=(2, 6, 11, 9))
        oracle = net(layer("c", "Convolution", ["data"], ["c"], params.replace(
            "pad: 1", "pad: 1 group: 6")), shape=(2, 6, 11, 9))
        d = tmp_path / type_
        d.mkdir()
        model, _ = compare_with_opencv(d, ours, oracle_prototxt=oracle)
        assert model.graph.nodes[0].attrs["group"] == 6


def test_bias_layer(tmp_path):
    _model, blobs, feeds, out = run_with_blobs(tmp_path, net(layer("b", "Bias", ["data"], ["b"])))
    (bias,) = blobs["b"]
    np.testing.assert_allclose(out["b"], feeds["data"] + bias.reshape(1, 3, 1, 1), **TOL)


def test_inner_product_transpose(tmp_path):
    text = net(layer("fc", "InnerProduct", ["data"], ["fc"],
                     "inner_product_param { num_output: 7 transpose: true }"))
    _model, blobs, feeds, out = run_with_blobs(tmp_path, text)
    w, b = blobs["fc"]
    assert w.shape == (3 * 11 * 9, 7)  # Caffe stores (K, N) when transpose is set
    np.testing.assert_allclose(out["fc"], feeds["data"].reshape(2, -1) @ w + b, **TOL)


def test_axpy(tmp_path):
    text = net(layer("g", "Pooling", ["data"], ["g"],
                     "pooling_param { pool: MAX global_pooling: true }")
               + layer("y", "TanH", ["data"], ["y"])
               + layer("ax", "Axpy", ["g", "data", "y"], ["ax"]))
    _model, _blobs, feeds, out = run_with_blobs(tmp_path, text)
    x = feeds["data"]
    a = x.max(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(out["ax"], a * x + np.tanh(x), **TOL)


def test_upsample_nearest(tmp_path):
    text = net(layer("u", "Upsample", ["data"], ["u"], "upsample_param { scale_h: 2 scale_w: 3 }"))
    _model, _, feeds, out = run_with_blobs(tmp_path, text)
    expected = np.repeat(np.repeat(feeds["data"], 2, axis=2), 3, axis=3)
    np.testing.assert_array_equal(out["u"], expected)


def test_clip_and_swish(tmp_path):
    text = net(layer("c", "Clip", ["data"], ["c"], "clip_param { min: -0.5 max: 0.25 }")
               + layer("s", "Swish", ["data"], ["s"], "swish_param { beta: 1.5 }"))
    _model, _, feeds, out = run_with_blobs(tmp_path, text)
    x = feeds["data"]
    np.testing.assert_allclose(out["c"], np.clip(x, -0.5, 0.25), **TOL)
    np.testing.assert_allclose(out["s"], x / (1 + np.exp(-1.5 * x)), **TOL)


def test_batchnorm_batch_statistics_over_a_batch(tmp_path):
    """Caffe divides by the count (biased variance); OpenCV's port uses the unbiased one and
    only batch 1, so numpy is the oracle here."""
    text = net(layer("bn", "BatchNorm", ["data"], ["bn"],
                     "batch_norm_param { use_global_stats: false eps: 0.01 }"))
    _model, _, feeds, out = run_with_blobs(tmp_path, text)
    x = feeds["data"].astype(np.float64)
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    var = ((x - mean) ** 2).mean(axis=(0, 2, 3), keepdims=True)
    np.testing.assert_allclose(out["bn"], (x - mean) / np.sqrt(var + 0.01), **TOL)
