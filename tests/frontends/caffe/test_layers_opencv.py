"""Per-layer conversion tests: OpenCV's Caffe runtime is the oracle for every converter.

Each case is a tiny net with random weights written to a .caffemodel; odd, all-different
dimensions make ceil pooling, Caffe's AVE counting and layout mix-ups visible.
"""
from __future__ import annotations

import pytest

from tests.frontends.caffe.caffe_testlib import compare_with_opencv


def net(body: str, shape=(2, 3, 11, 9), name="data") -> str:
    dims = " ".join(f"dim: {d}" for d in shape)
    return f'input: "{name}"\ninput_shape {{ {dims} }}\n{body}'


def layer(name, type_, bottoms, tops, params=""):
    bs = " ".join(f'bottom: "{b}"' for b in bottoms)
    ts = " ".join(f'top: "{t}"' for t in tops)
    return f'layer {{ name: "{name}" type: "{type_}" {bs} {ts} {params} }}\n'


CASES = {
    # -- convolution family
    "conv_pad_stride": layer("c", "Convolution", ["data"], ["c"],
                             "convolution_param { num_output: 5 kernel_size: 3 stride: 2 pad: 1 }"),
    "conv_hw_fields_nobias": layer(
        "c", "Convolution", ["data"], ["c"],
        "convolution_param { num_output: 4 kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 1 "
        "pad_h: 2 pad_w: 1 bias_term: false }"),
    "conv_two_value_lists": layer(
        "c", "Convolution", ["data"], ["c"],
        "convolution_param { num_output: 4 kernel_size: 3 kernel_size: 1 stride: 1 stride: 2 "
        "pad: 0 pad: 1 }"),
    "conv_group_dilation": net(layer(
        "c", "Convolution", ["data"], ["c"],
        "convolution_param { num_output: 9 kernel_size: 3 group: 3 dilation: 2 pad: 1 }"),
        shape=(2, 6, 11, 9)),
    "conv_depthwise_group": net(layer(
        "c", "Convolution", ["data"], ["c"],
        "convolution_param { num_output: 6 kernel_size: 3 group: 6 stride: 2 pad: 1 }"),
        shape=(2, 6, 11, 9)),
    "deconv": layer("d", "Deconvolution", ["data"], ["d"],
                    "convolution_param { num_output: 4 kernel_size: 4 stride: 2 pad: 1 }"),
    "deconv_group_rect": net(layer(
        "d", "Deconvolution", ["data"], ["d"],
        "convolution_param { num_output: 4 kernel_h: 3 kernel_w: 2 stride_h: 2 stride_w: 3 "
        "group: 2 bias_term: false }"), shape=(2, 6, 7, 5)),
    # -- pooling: odd sizes make the ceil rounding and the clipped AVE windows matter
    "pool_max_ceil": layer("p", "Pooling", ["data"], ["p"],
                           "pooling_param { pool: MAX kernel_size: 3 stride: 2 }"),
    "pool_max_ceil_pad": layer("p", "Pooling", ["data"], ["p"],
                               "pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 }"),
    "pool_ave_ceil_pad": layer("p", "Pooling", ["data"], ["p"],
                               "pooling_param { pool: AVE kernel_size: 3 stride: 2 pad: 1 }"),
    "pool_ave_ceil_k2": layer("p", "Pooling", ["data"], ["p"],
                              "pooling_param { pool: AVE kernel_size: 2 stride: 2 }"),
    "pool_ave_rect": layer("p", "Pooling", ["data"], ["p"],
                           "pooling_param { pool: AVE kernel_h: 3 kernel_w: 2 stride_h: 2 "
                           "stride_w: 3 pad_h: 1 pad_w: 1 }"),
    "pool_max_floor": layer("p", "Pooling", ["data"], ["p"],
                            "pooling_param { pool: MAX kernel_size: 3 stride: 2 pad: 1 "
                            "ceil_mode: false }"),
    "pool_ave_floor": layer("p", "Pooling", ["data"], ["p"],
                            "pooling_param { pool: AVE kernel_size: 2 stride: 2 "
                            "ceil_mode: false }"),
    "pool_global_ave": layer("p", "Pooling", ["data"], ["p"],
                             "pooling_param { pool: AVE global_pooling: true }"),
    "pool_global_max": layer("p", "Pooling", ["data"], ["p"],
                             "pooling_param { pool: MAX global_pooling: true }"),
    # -- inner product
    "ip": layer("fc", "InnerProduct", ["data"], ["fc"], "inner_product_param { num_output: 7 }"),
    "ip_nobias": layer("fc", "InnerProduct", ["data"], ["fc"],
                       "inner_product_param { num_output: 7 bias_term: false }"),
    "ip_axis2": layer("fc", "InnerProduct", ["data"], ["fc"],
                      "inner_product_param { num_output: 4 axis: 2 }"),
    # -- activations
    "relu": layer("r", "ReLU", ["data"], ["r"]),
    "relu_leaky_inplace": layer("r", "ReLU", ["data"], ["data"],
                                "relu_param { negative_slope: 0.13 }"),
    "relu6": layer("r", "ReLU6", ["data"], ["r"]),
    "prelu": layer("r", "PReLU", ["data"], ["r"]),
    "prelu_shared": layer("r", "PReLU", ["data"], ["r"], "prelu_param { channel_shared: true }"),
    "elu": layer("r", "ELU", ["data"], ["r"], "elu_param { alpha: 0.7 }"),
    "sigmoid": layer("r", "Sigmoid", ["data"], ["r"]),
    "tanh": layer("r", "TanH", ["data"], ["r"]),
    "absval": layer("r", "AbsVal", ["data"], ["r"]),
    "bnll": layer("r", "BNLL", ["data"], ["r"]),
    "dropout": layer("r", "Dropout", ["data"], ["r"], "dropout_param { dropout_ratio: 0.3 }"),
    "power_square": layer("r", "Power", ["data"], ["r"],
                          "power_param { power: 2 scale: 0.5 shift: 1.5 }"),
    "power_affine": layer("r", "Power", ["data"], ["r"],
                          "power_param { scale: -0.25 shift: 0.75 }"),
    "power_cube": layer("r", "Power", ["data"], ["r"], "power_param { power: 3 scale: 1.5 }"),
    # -- normalisation
    "batchnorm": layer("bn", "BatchNorm", ["data"], ["bn"],
                       "batch_norm_param { use_global_stats: true eps: 0.001 }"),
    # OpenCV supports batch statistics for batch 1 and the default eps only.
    "batchnorm_batch_statistics": net(layer("bn", "BatchNorm", ["data"], ["bn"],
                                            "batch_norm_param { use_global_stats: false }"),
                                      shape=(1, 3, 11, 9)),
    "scale_bias": layer("s", "Scale", ["data"], ["s"], "scale_param { bias_term: true }"),
    "scale_no_bias": layer("s", "Scale", ["data"], ["s"]),
    "scale_axis2_twoaxes": layer("s", "Scale", ["data"], ["s"],
                                 "scale_param { axis: 2 num_axes: 2 }"),
    # -- combining
    "eltwise_sum_coeff": layer("a", "ReLU", ["data"], ["a"]) + layer(
        "e", "Eltwise", ["data", "a"], ["e"],
        "eltwise_param { operation: SUM coeff: 0.5 coeff: -2 }"),
    "eltwise_prod3": layer("a", "Sigmoid", ["data"], ["a"]) + layer("b", "TanH", ["data"], ["b"])
    + layer("e", "Eltwise", ["data", "a", "b"], ["e"], "eltwise_param { operation: PROD }"),
    "eltwise_max": layer("a", "Power", ["data"], ["a"], "power_param { scale: -1 }") + layer(
        "e", "Eltwise", ["data", "a"], ["e"], "eltwise_param { operation: MAX }"),
    "concat_channels": layer("a", "Sigmoid", ["data"], ["a"]) + layer(
        "c", "Concat", ["data", "a"], ["c"]),
    "concat_axis2": layer("a", "Sigmoid", ["data"], ["a"]) + layer(
        "c", "Concat", ["a", "data"], ["c"], "concat_param { axis: 2 }"),
    "softmax": layer("s", "Softmax", ["data"], ["s"]),
    "softmax_axis2": layer("s", "Softmax", ["data"], ["s"], "softmax_param { axis: 2 }"),
    # -- rearranging
    "flatten": layer("f", "Flatten", ["data"], ["f"]),
    "flatten_axis2": layer("f", "Flatten", ["data"], ["f"], "flatten_param { axis: 2 }"),
    "reshape": layer("r", "Reshape", ["data"], ["r"],
                     "reshape_param { shape { dim: 0 dim: -1 dim: 9 } }"),
    "reshape_axis_numaxes": layer("r", "Reshape", ["data"], ["r"],
                                  "reshape_param { shape { dim: 33 } axis: 1 num_axes: 2 }"),
    "permute": layer("p", "Permute", ["data"], ["p"],
                     "permute_param { order: 0 order: 2 order: 3 order: 1 }"),
    "crop": layer("a", "Pooling", ["data"], ["a"],
                  "pooling_param { pool: MAX kernel_size: 2 stride: 2 }")
    + layer("c", "Crop", ["data", "a"], ["c"], "crop_param { axis: 2 offset: 3 offset: 1 }"),
    "shuffle_channel": net(layer("s", "ShuffleChannel", ["data"], ["s"],
                                 "shuffle_channel_param { group: 3 }"), shape=(2, 6, 5, 7)),
    "interp_size": layer("i", "Interp", ["data"], ["i"],
                         "interp_param { height: 15 width: 4 }"),
    "interp_zoom": layer("i", "Interp", ["data"], ["i"], "interp_param { zoom_factor: 2 }"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_layer_matches_opencv(tmp_path, case):
    text = CASES[case]
    if not text.startswith("input:"):
        text = net(text)
    model, results = compare_with_opencv(tmp_path, text)
    assert results, "no outputs compared"
    # Every node is named after its Caffe layer and records the layer type.
    assert all(n.doc for n in model.graph.nodes)


def test_slice_split_each_top(tmp_path):
    """Multi-top layers: each top is read back through its own single-top layer."""
    text = net(
        layer("s", "Slice", ["data"], ["a", "b", "c"],
              "slice_param { axis: 1 slice_point: 1 slice_point: 2 }")
        + layer("sp", "Split", ["c"], ["c1", "c2"])
        + layer("s2", "Slice", ["data"], ["h1", "h2"], "slice_param { axis: 3 slice_point: 4 }")
        + layer("s3", "Slice", ["data"], ["q1", "q2", "q3"], "slice_param { slice_dim: 1 }")
        + layer("pa", "Power", ["a"], ["pa"], "power_param { scale: 2 }")
        + layer("pb", "Power", ["b"], ["pb"], "power_param { scale: 3 }")
        + layer("pc1", "Power", ["c1"], ["pc1"], "power_param { shift: 1 }")
        + layer("pc2", "Power", ["c2"], ["pc2"], "power_param { shift: -1 }")
        + layer("ph1", "Power", ["h1"], ["ph1"], "power_param { scale: 5 }")
        + layer("ph2", "Power", ["h2"], ["ph2"], "power_param { scale: 7 }")
        + layer("cq", "Concat", ["q3", "q1", "q2"], ["cq"]))
    model, results = compare_with_opencv(tmp_path, text)
    assert len(results) == 7
    assert model.graph.op_counts()["Split"] == 3


def test_multi_top_outputs_are_compared_per_top(tmp_path):
    text = net(layer("s", "Slice", ["data"], ["a", "b", "c"],
                     "slice_param { axis: 3 slice_point: 2 slice_point: 7 }")
               + layer("sig", "Sigmoid", ["c"], ["c"]))
    model, results = compare_with_opencv(tmp_path, text)
    assert [v.shape for v in model.graph.outputs] == [(2, 3, 11, 2), (2, 3, 11, 5), (2, 3, 11, 2)]
    assert len(results) == 3


def test_scale_with_second_bottom(tmp_path):
    """Scale by a second blob (SENet's excitation): (N, C) broadcast from axis 0."""
    text = net(
        layer("g", "Pooling", ["data"], ["g"], "pooling_param { pool: AVE global_pooling: true }")
        + layer("f", "Flatten", ["g"], ["f"])
        + layer("s", "Scale", ["data", "f"], ["s"], "scale_param { axis: 0 }"))
    compare_with_opencv(tmp_path, text)


def test_input_layer_and_input_dim(tmp_path):
    text = ('layer { name: "in" type: "Input" top: "x" '
            'input_param { shape { dim: 2 dim: 3 dim: 7 dim: 5 } } }\n'
            + layer("c", "Convolution", ["x"], ["c"],
                    "convolution_param { num_output: 4 kernel_size: 3 }"))
    model, _ = compare_with_opencv(tmp_path, text)
    (x,) = model.graph.inputs
    assert x.shape == (2, 3, 7, 5) and x.layout == "NCHW"
    text = ('input: "x"\ninput_dim: 2 input_dim: 3 input_dim: 7 input_dim: 5\n'
            + layer("c", "Convolution", ["x"], ["c"],
                    "convolution_param { num_output: 4 kernel_size: 3 }"))
    model, _ = compare_with_opencv(tmp_path, text)
    assert model.graph.inputs[0].shape == (2, 3, 7, 5)
